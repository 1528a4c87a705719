"""What the demo computes (:class:`DemoSettings`): kept apart from :mod:`attnphase.report.demo`,
which imports the sweep machinery, so that the command line can build its parser without it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from attnphase.spec.defaults import PHASE_OMEGAS, TRAINING, TRANSITION_GRID, range_text
from attnphase.spec.problem import parse_range

PARTS = ("curves", "phase")

#: Models the demo can add to its report (``--models``), each at its reference case: its own
#: theory curves, simulation points and ``alpha_c`` at the demo's ``omega``, as for the reference
#: model (Gaussian-mixture tokens: docs/model.md section 9; cross-attention: section 10).
MODELS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "mixture": MappingProxyType({"mixture": 2, "mixture_sep": 1.0, "mixture_align": 0.5}),
    "cross": MappingProxyType({"variant": "cross"}),
})


@dataclass(frozen=True)
class DemoSettings:
    """What the demo computes (defaults sized for about 3 minutes on 2 cores: docs/sweeps.md)."""

    omega: float = 0.3
    #: the theory curves' grid: the start grid of a transition search (``TRANSITION_GRID``)
    theory_alpha: str = range_text(TRANSITION_GRID)
    sim_alpha: str = "0.25:2.25:5"
    d: int = 800
    seeds: int = 3
    #: the phase diagram's ``omega`` grid: that of ``attnphase phase-diagram`` (``PHASE_OMEGAS``)
    phase_omega: str = range_text(PHASE_OMEGAS)
    #: gradient-descent step cap of the simulations (``None``: the simulation kind's,
    #: ``TRAIN_SETTINGS["max_steps"]``); the runs that have not met their gradient tolerance by
    #: then are not counted in the points (default: ``TRAINING["demo"]``)
    max_steps: int | None = TRAINING["demo"]["max_steps"]
    #: heavy-ball term of the simulations' gradient descent: the same minima as plain GD, reached
    #: in a fraction of the steps (docs/simulation.md, "Training"), so the runs meet their
    #: gradient tolerance within the step cap (default: ``TRAINING["demo"]``)
    momentum: float = TRAINING["demo"]["momentum"]
    parts: tuple[str, ...] = PARTS
    #: theory solver settings as ``(("solver_order", 10), ...)`` (empty: the sweep kinds' defaults,
    #: the presets of ``curves`` and ``transition``); ``attnphase demo`` passes those of the preset
    #: ``SOLVER_PRESET["demo"]`` with its ``--solver`` items
    solver: tuple[tuple[str, Any], ...] = ()
    #: draw the Bayes-optimal baseline (:func:`attnphase.bayes`) on the curves
    bayes: bool = False
    #: further models (names of :data:`MODELS`) whose curves the report shows too
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for p in self.parts:
            if p not in PARTS:
                raise ValueError(f"unknown demo part {p!r}; choose from {', '.join(PARTS)}")
        if not self.parts:
            raise ValueError("the demo needs at least one part")
        for m in self.models:
            if m not in MODELS:
                raise ValueError(f"unknown demo model {m!r}; choose from {', '.join(MODELS)}")
        if self.d < 2:
            raise ValueError(f"--d must be >= 2, got {self.d}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"--momentum must lie in [0, 1), got {self.momentum}")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        for name in ("theory_alpha", "sim_alpha"):
            if any(a <= 0 for a in parse_range(getattr(self, name), f"--{name.replace('_', '-')}")):
                raise ValueError(f"--{name.replace('_', '-')} values must be > 0")
        parse_range(self.phase_omega, "--phase-omega")
