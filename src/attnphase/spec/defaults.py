"""The defaults of each computation, each written once.

One table per kind of default: the solver preset of each theory computation
(:data:`SOLVER_PRESET`), the start grid of a transition search (:data:`TRANSITION_GRID`), the
training settings (:data:`TRAIN_SETTINGS`, those of ``TrainSettings()``) and what each training
computation changes in them (:data:`TRAINING`). The library functions (:mod:`attnphase.api`,
:mod:`attnphase.api_sweeps`), the command line (its flags' defaults and help texts are printed
from these tables), the sweep kinds (:mod:`attnphase.sweeps.kinds`), the theory's transition
search and the demo read them, so that a computation has the same default wherever it is called.

Plain values only (no numerics, no imports beyond the standard library): the theory, the simulator
and the command line's parser all read this module, and a change here changes the revision of
the stored points of both (the ``spec`` component of :mod:`attnphase._revision`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

#: The solver preset (``SolverSettings.PRESETS``) each theory computation runs when given no
#: settings: ``solve`` (:func:`attnphase.solve`, ``attnphase solve`` and the ``theory`` sweep
#: kind), ``transition`` (:func:`attnphase.transition`, ``attnphase transition``,
#: :func:`attnphase.theory.find_transition` and the ``transition`` sweep kind), ``curves``
#: (:func:`attnphase.curves`, ``attnphase curves`` and the ``curve`` sweep kind),
#: ``phase-diagram`` and ``demo`` (their stored transitions and curves).
SOLVER_PRESET: Mapping[str, str] = MappingProxyType({
    "solve": "default",
    "transition": "fast",
    "curves": "fast",
    "phase-diagram": "fast",
    "demo": "fast",
})

#: What a one-start response (``semantic-start``, ``positional-start``; docs/model.md (3.7)) changes
#: in any preset where the settings given do not: one rule of order 11 (warm-up on order 10), no
#: refinement and no error target (its selection makes the map too rough for the refinement).
#: ``attnphase solve --response ...`` and a theory sweep point with ``solver_response`` alike.
ONE_START_SETTINGS: Mapping[str, Any] = MappingProxyType(
    {"refine_order": 0, "target_error": 0.0, "order": 11, "warmup_order": 10})

#: The ``alpha`` grid ``(start, stop, num)`` a transition search given no grid starts from (the
#: reference point's crossing lies inside), widened where the training errors do not cross on it
#: (:mod:`attnphase.theory.bracket`)
TRANSITION_GRID: tuple[float, float, int] = (0.2, 2.4, 12)

#: The phase diagram's ``omega`` grid when none is given (``--omega 0:0.45:10``)
PHASE_OMEGAS = (0.0, 0.45, 10)

#: The phase diagram's ``alpha`` grid of the simulation heat maps when none is given (``--alpha 0.05:2:30``)
PHASE_ALPHAS = (0.05, 2.0, 30)

#: The training settings of ``TrainSettings()`` (:class:`attnphase.sim.train.TrainSettings`):
#: those of the ``simulation`` sweep kind and of the simulator's functions given no settings.
#: ``lr`` ``None``: the optimiser's own step (:data:`DEFAULT_LR`).
TRAIN_SETTINGS: Mapping[str, Any] = MappingProxyType({
    "optimizer": "gd",
    "lr": None,
    "max_steps": 5000,
    "tol": 1e-6,
    "momentum": 0.0,
    "betas": (0.9, 0.999),
    "eps": 1e-8,
    "grad": "auto",
    "dtype": "float64",
    "device": "cpu",
    "log_every": 500,
})

#: The step of each optimiser where ``lr`` is ``None`` (GD on the summed loss ``R``).
DEFAULT_LR: Mapping[str, float] = MappingProxyType({"gd": 0.15, "adam": 0.01})

_SHARP: Mapping[str, Any] = MappingProxyType({"tol": 1e-5, "dtype": "float32", "log_every": 0})
_HEAVY_BALL: Mapping[str, Any] = MappingProxyType({**_SHARP, "max_steps": 4000, "momentum": 0.9})

#: What each training computation changes in :data:`TRAIN_SETTINGS` when given no settings:
#: ``simulate`` (:func:`attnphase.simulate` and ``attnphase simulate``), ``compare``
#: (:func:`attnphase.compare` and ``attnphase compare``: GD with heavy-ball momentum, the same
#: minima in fewer steps), ``sim-transition`` (``attnphase sim-transition`` and
#: :func:`attnphase.sim.transition.sim_transition`, as ``compare``), ``basins`` (the ``basins``
#: sweep kind and ``attnphase basins``), ``demo`` (the demo's simulations, on top of the
#: ``simulation`` sweep kind's settings) and ``conformance`` (:func:`attnphase.conformance.check_model`:
#: heavy-ball GD in float64 to the gradient tolerance 1e-6).
TRAINING: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "simulate": MappingProxyType({**_SHARP, "max_steps": 10000}),
    "compare": _HEAVY_BALL,
    "sim-transition": _HEAVY_BALL,
    "basins": _SHARP,
    "demo": MappingProxyType({"max_steps": 10000, "momentum": 0.9}),
    "conformance": MappingProxyType({"max_steps": 30000, "momentum": 0.9, "log_every": 0}),
})


def training(computation: str) -> dict[str, Any]:
    """The training settings of ``computation`` (a key of :data:`TRAINING`) as ``TrainSettings``
    keywords: :data:`TRAIN_SETTINGS` with the computation's changes applied."""
    return {**TRAIN_SETTINGS, **TRAINING[computation]}


def range_text(grid: Sequence[float]) -> str:
    """A grid ``(start, stop, num)`` as the command line writes it: ``0.2:2.4:12``."""
    start, stop, num = grid
    return f"{start:g}:{stop:g}:{int(num)}"


def number_text(v: float) -> str:
    """A setting as a help text writes it: ``1e-8``, ``1e-5``, ``0.5``, ``10000``."""
    if v == 0 or abs(v) >= 1e-2:
        return f"{v:g}"
    mantissa, exp = f"{v:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exp)}"
