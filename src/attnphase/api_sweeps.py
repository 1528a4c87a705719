"""The library's twins of the commands that sweep: :func:`curves`, :func:`compare` and :func:`phase_diagram`.

As :mod:`attnphase.api`: each takes the model as a :class:`~attnphase.spec.problem.ModelSpec`
(``spec``) and/or its field names as keywords, has the defaults of the command of the same name,
and returns a frozen result (:mod:`attnphase.results_sweeps`) whose ``to_dict()`` is the command's
JSON record, ``to_frame()`` a tidy pandas DataFrame and ``plot()`` the command's figure. The
commands ``attnphase curves``, ``compare`` and ``phase-diagram`` are thin shells over them.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from attnphase._extras import require
from attnphase._progress import ProgressArg, progress_callback
from attnphase._revision import numerics_revision
from attnphase._version import __version__
from attnphase.api import Progress, check_theory_value, model_spec, solver_settings
from attnphase.errors import internal_errors
from attnphase.results import TransitionResult, frozen
from attnphase.results_sweeps import (
    CompareResult,
    CurvesResult,
    PhaseDiagramResult,
    curves_message,
    phase_message,
)
from attnphase.spec.defaults import PHASE_ALPHAS, PHASE_OMEGAS, TRAINING
from attnphase.spec.problem import ModelSpec, check_alpha, model_parameters
from attnphase.theory import (
    BranchPoint,
    SolverSettings,
    check_response,
    find_transition,
    follow_branch,
    linear_test_error,
    native,
    refine_followed,
    semantic_side,
)

__all__ = ["COMPARE_GRID", "COMPARE_TRAINING", "CURVES_GRID", "PHASE_ALPHAS", "PHASE_OMEGAS",
           "check_fixed_gain",
           "compare", "curves", "phase_diagram", "solver_params"]

#: ``curves``' ``alpha`` grid ``(start, stop, num)`` when none is given (``--alpha 0.2:2:10``)
CURVES_GRID = (0.2, 2.0, 10)

#: ``compare``'s simulated ``alpha`` grid when none is given (``--alpha 0.1:2:12``)
COMPARE_GRID = (0.1, 2.0, 12)

#: ``compare``'s training settings where they differ from ``TrainSettings``' defaults (those of the
#: ``compare`` command; :data:`attnphase.spec.defaults.TRAINING`)
COMPARE_TRAINING: Mapping[str, Any] = TRAINING["compare"]



def _grid(values: float | Sequence[float] | np.ndarray | None, default: tuple[float, float, int],
          name: str = "alpha") -> list[float]:
    """``values`` (one number or several) as a list of floats, ``linspace(*default)`` when ``None``."""
    grid = np.linspace(*default) if values is None else np.atleast_1d(np.asarray(values, dtype=float))
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"{name} must be one value or a non-empty list of values")
    out = [float(v) for v in grid]
    if name == "alpha":
        check_alpha(out)
    return out


def check_fixed_gain(spec: ModelSpec, command: str) -> None:
    """``ValueError`` (one line) for a value the theory does not cover (:func:`attnphase.api.check_theory_value`)
    and for the optimal value gain (``value="gain"`` without ``value_gain``): ``command`` follows the
    branches at a fixed gain."""
    check_theory_value(spec)
    if spec.optimal_gain:
        raise ValueError(f"{command} follows the branches at a fixed value gain: give --value-gain (solve and "
                         "transition minimise the training error over the gain)")


@internal_errors
def curves(
    alphas: Sequence[float] | np.ndarray | None = None,
    *,
    transition: bool = True,
    bayes: bool = False,
    spec: ModelSpec | None = None,
    settings: SolverSettings | str | None = None,
    progress: ProgressArg = "auto",
    **model: Any,
) -> CurvesResult:
    """Both branches against ``alpha``: the numbers of ``attnphase curves``.

    The semantic branch (the mixed one at rank ``r >= 2``) is followed down from the largest
    ``alpha``, the positional one up from the smallest (docs/model.md (5.1)), each point carried to
    the fine rules where the settings refine (docs/model.md (7.3); a point they do not confirm is
    absent).

    Parameters
    ----------
    alphas : sequence of float, optional
        The grid (default ``linspace(0.2, 2, 10)``).
    transition : bool
        Also locate ``alpha_c``, ``alpha_l`` and the spinodals from the followed branches
        (docs/model.md (5.2)-(5.4)).
    bayes : bool
        Also the Bayes-optimal baseline (docs/model.md section 8) on the grid and on a finer one.
    spec : ModelSpec, optional
        The model (default: the reference model); ``**model`` is applied on top of it.
    settings : SolverSettings or str, optional
        A :class:`SolverSettings`, a preset name, or ``None`` for the preset
        ``DEFAULT_PRESET["curves"]`` (:data:`attnphase.api.DEFAULT_PRESET`; as ``attnphase curves``
        and the ``curve`` sweep kind).
    progress : callable, bool or "auto"
        ``progress(done, total)``, called after each followed point; default ``"auto"``: a bar in
        a notebook, a line on a terminal, nothing where stderr is not a terminal; ``False``:
        nothing.
    **model
        :class:`ModelSpec` fields; a value gain must be fixed (``value_gain``).

    Returns
    -------
    CurvesResult
        The followed branches, the transition points and the linear baseline; ``to_frame()`` has
        one row per ``alpha`` and branch, ``plot()`` draws the command's figure.

    Raises
    ------
    ValueError
        One line, before any work: a grid point out of range, an unknown model parameter, a
        model the theory does not cover, or settings that are neither :class:`SolverSettings`
        nor a preset name.
    """
    spec = model_spec(spec, **model)
    check_fixed_gain(spec, "curves")
    if bayes:  # (refused before the branches are followed, not after)
        from attnphase.theory.bayes import check_bayes_spec

        check_bayes_spec(spec)
    grid = _grid(alphas, CURVES_GRID)
    st = solver_settings(settings, "curves")
    side = semantic_side(spec)
    check_response(spec, st.response, (side, "positional"))
    n = len(grid)
    report = progress_callback(progress, "curves", "points")

    def step(offset: int) -> Progress | None:
        return None if report is None else (lambda i, _total: report(offset + i, 2 * n))

    sem = follow_branch(spec, grid[::-1], side, st, progress=step(0))[::-1]
    pos = follow_branch(spec, grid, "positional", st, progress=step(n))
    if st.refine_order:  # every point carried to the fine rules (the plotted values too)
        sem = refine_followed(spec, sem, st)
        pos = refine_followed(spec, pos, st)
    tr = find_transition(spec, grid, st, branches=(sem, pos)) if transition else None
    lin = float(linear_test_error(spec))
    on_grid = fine = None
    if bayes:  # on the grid (the table) and on a fine grid with the thresholds (the figure's line)
        from attnphase.api import bayes as bayes_baseline
        from attnphase.theory.bayes import curve_grid

        on_grid = bayes_baseline(grid, spec=spec).points
        fine = bayes_baseline(curve_grid(min(grid), max(grid), spec.L), spec=spec)

    def record(p: BranchPoint) -> dict[str, Any]:
        return {"alpha": p.alpha, "exists": p.exists, "reason": p.reason, **p.summary(),
                "error_estimate": None if p.error_estimate is None else p.error_estimate.to_dict(),
                "refined": None if p.refinement is None else p.refinement.applied}

    points = {"semantic": frozen([record(p) for p in sem]), "positional": frozen([record(p) for p in pos])}
    trr = None if tr is None else TransitionResult.from_transition(tr, spec, st)
    params = {**spec.to_dict(), "alpha": grid, "solver": dataclasses.asdict(st), "version": __version__,
              "revision": numerics_revision("theory"), "kernels": native.describe()}
    ok, msg = curves_message(spec, grid, points, bool(st.refine_order), trr)
    return CurvesResult(
        alphas=tuple(grid), linear_test_error=lin, alpha_c=None if tr is None else tr.alpha_c,
        alpha_l=None if tr is None else tr.alpha_l, points=MappingProxyType(points), transition=trr, bayes=fine,
        bayes_on_grid=on_grid, spec=spec, settings=st, params=frozen(params), success=ok, message=msg)


def _seeds(seeds: int | Sequence[int], seed0: int) -> tuple[int, ...]:
    """``seeds`` as a tuple: a count (``seed0``, ``seed0 + 1``, ...) or the seeds themselves."""
    if isinstance(seeds, bool):
        raise ValueError(f"seeds must be a count or a list of seeds, got {seeds!r}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        if seed0 < 0:
            raise ValueError(f"seed0 must be >= 0, got {seed0}")
        return tuple(range(seed0, seed0 + int(seeds)))
    out = tuple(int(s) for s in seeds)
    if not out:
        raise ValueError("seeds must name at least one seed")
    return out


def _positive_int(v: Any, name: str, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
    return int(v)


@internal_errors
def compare(
    alphas: float | Sequence[float] | np.ndarray | None = None,
    d: int = 500,
    *,
    seeds: int | Sequence[int] = 3,
    seed0: int = 0,
    theory_points: int = 12,
    theory_order: int | None = None,
    bayes: bool = False,
    spec: ModelSpec | None = None,
    settings: Any = None,
    progress: ProgressArg = "auto",
    **model_and_training: Any,
) -> CompareResult:
    """Theory against finite-``d`` training: the numbers of ``attnphase compare``.

    The theory follows every branch but the trivial one (docs/model.md (5.1)) over
    ``theory_points`` values of ``alpha`` spanning ``alphas`` (one where ``alphas`` is one value),
    with the solver's ``fast`` preset; the simulation trains every seed from the semantic,
    positional and random starts at each ``alpha`` at dimension ``d`` (docs/model.md (1.1)-(1.4)).

    Parameters
    ----------
    alphas : float or sequence of float, optional
        The simulated sample complexities (default ``linspace(0.1, 2, 12)``).
    d : int
        The embedding dimension of the simulation.
    seeds : int or sequence of int
        How many per ``alpha`` (from ``seed0``) or the seeds themselves.
    seed0 : int
        The first seed where ``seeds`` is a count.
    theory_points : int
        The theory's grid over the span of ``alphas``.
    theory_order : int, optional
        The order of the theory's rules where given.
    bayes : bool
        Also the Bayes-optimal baseline as theory rows of kind ``bayes``.
    spec : ModelSpec, optional
        The model (default: the reference model).
    settings : TrainSettings, optional
        An ``attnphase.sim.train.TrainSettings`` (default: the ``compare`` command's,
        ``COMPARE_TRAINING``).
    progress : callable, bool or "auto"
        ``progress(done, total)``, called after the theory and after each simulated ``alpha``;
        default ``"auto"``: a bar in a notebook, a line on a terminal, nothing where stderr is not
        a terminal; ``False``: nothing.
    **model_and_training
        :class:`ModelSpec` fields (rank 1 and teacher rank 1: the figure's overlaps are scalars)
        and ``TrainSettings`` fields (``optimizer``, ``lr``, ``momentum``, ``max_steps``, ``tol``,
        ``device``, ``dtype``, ...) applied on top, and ``threads`` (torch's CPU threads, a
        process-wide setting).

    Returns
    -------
    CompareResult
        The theory rows and the runs; ``to_frame()`` has one row per theory point and per run,
        ``summary()`` one per ``alpha`` and start, ``plot()`` draws the command's figure.

    Raises
    ------
    ValueError
        One line, before any work: an unknown parameter, a rank above 1, a bad ``d``, ``seeds``
        or training setting, or a problem too large for memory.
    """
    require("torch", "attnphase.compare")
    import torch

    from attnphase import comparison as cmp
    from attnphase.sim.data import check_memory
    from attnphase.sim.train import TrainSettings

    model_names = tuple(p.name for p in model_parameters())
    train_names = (*(f.name for f in dataclasses.fields(TrainSettings)), "threads")
    unknown = [k for k in model_and_training if k not in model_names and k not in train_names]
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; known: model {', '.join(model_names)}; "
                         f"training {', '.join(train_names)}")
    spec = model_spec(spec, **{k: v for k, v in model_and_training.items() if k in model_names})
    if spec.rank != 1 or spec.teacher_rank != 1:
        raise ValueError("compare draws scalar overlaps: use rank 1 and teacher_rank 1")
    if bayes:  # (refused before anything runs)
        from attnphase.theory.bayes import check_bayes_spec

        check_bayes_spec(spec)
    grid = _grid(alphas, COMPARE_GRID)
    d = _positive_int(d, "d", 2)
    theory_points = _positive_int(theory_points, "theory_points", 2)
    if theory_order is not None:
        theory_order = _positive_int(theory_order, "theory_order", 2)
    seed_list = _seeds(seeds, seed0)
    train = {k: v for k, v in model_and_training.items() if k in train_names}
    threads = train.pop("threads", None)
    base = settings if settings is not None else TrainSettings(**COMPARE_TRAINING)
    st = dataclasses.replace(base, **train) if train else base
    if threads is not None:
        torch.set_num_threads(_positive_int(threads, "threads", 1))
    check_memory(spec, d, grid, None, len(seed_list), st.dtype)
    theory_alphas = cmp.theory_grid(grid, theory_points)
    total = 1 + len(grid)
    report = progress_callback(progress, "compare", "steps")
    theory = cmp.theory_table(spec, theory_alphas, order=theory_order).to_dict("records")
    if report is not None:
        report(1, total)
    sim = cmp.simulation_rows(spec, grid, d, seed_list, st,
                              progress=None if report is None else (lambda i, _n: report(1 + i, total)))
    bayes_rows: list[dict[str, Any]] = []
    if bayes:
        from attnphase.api import bayes as bayes_baseline
        from attnphase.theory.bayes import curve_grid

        fine = curve_grid(min(grid), max(grid), spec.L, max(theory_points, 41))
        bo = bayes_baseline(fine, spec=spec)
        bayes_rows = cmp.bayes_rows(bo.points, bo.linear_test_error)
    met = sum(bool(r["exists"]) for r in sim)
    found = {b: sum(bool(r["exists"]) for r in theory if r["kind"] == b)
             for b in dict.fromkeys(str(r["kind"]) for r in theory) if b != "linear"}
    msg = (f"{len(sim)} runs at d = {d} on {len(grid)} alpha ({len(seed_list)} seeds x {len(cmp.STARTS)} starts): "
           f"{met} of {len(sim)} met the gradient tolerance; theory: "
           + ", ".join(f"{b} on {k} of {len(theory_alphas)} alpha" for b, k in found.items()))
    params = {**spec.to_dict(), "alpha": grid, "d": d, "seeds": list(seed_list), "theory_alpha": theory_alphas,
              "theory_points": theory_points, "theory_solver": dataclasses.asdict(cmp.theory_settings(theory_order)),
              "train": dataclasses.asdict(st), "bayes": bool(bayes), "version": __version__,
              "revision": {"theory": numerics_revision("theory"), "sim": numerics_revision("sim")}}
    return CompareResult(
        alphas=tuple(grid), d=d, seeds=seed_list, theory_alphas=tuple(theory_alphas), theory=frozen(theory),
        simulation=frozen(sim), bayes=frozen(bayes_rows), spec=spec, params=frozen(params),
        success=met == len(sim), message=msg)


def solver_params(settings: SolverSettings) -> dict[str, Any]:
    """``settings`` as the ``solver_<field>`` parameters of a stored ``transition`` point
    (:mod:`attnphase.sweeps.kinds`; the store drops those at their defaults, so that the key of a
    point does not depend on how its settings were written). ``ValueError`` for a setting a point
    cannot hold (``fine_teacher_scale`` and ``mirror`` other than ``None``)."""
    from attnphase.sweeps.kinds import SOLVER_PREFIX

    out: dict[str, Any] = {}
    for f in dataclasses.fields(SolverSettings):
        default = f.default
        value = getattr(settings, f.name)
        if type(default) in (bool, int, float, str):
            out[SOLVER_PREFIX + f.name] = value
        elif value != default:
            raise ValueError(f"phase_diagram stores each point with its solver settings; {f.name} = {value!r} "
                             f"cannot be stored (leave it at {default!r})")
    return out


def _phase_axis(omegas: Any, sigmas: Any, lams: Any, model: Mapping[str, Any]) -> tuple[str, list[float], dict[str, Any]]:
    """The axis of a phase diagram, its values, and the fixed model fields (``ValueError`` where
    more than one parameter is given as the axis, or the axis is also given as a model field)."""
    given = {name: v for name, v in (("sigma", sigmas), ("lam", lams)) if v is not None}
    if len(given) > 1:
        raise ValueError("a phase diagram runs along one parameter: give sigmas or lams, not both")
    if not given:
        if "omega" in model:
            raise ValueError("omega is the phase diagram's axis: give it as omegas")
        return "omega", _grid(omegas, PHASE_OMEGAS, "omega"), dict(model)
    axis, values = next(iter(given.items()))
    if axis in model:
        raise ValueError(f"{axis} is the phase diagram's axis: give it as {axis}s, not as {axis}")
    fixed = dict(model)
    if omegas is not None:
        omega = _grid(omegas, PHASE_OMEGAS, "omega")
        if len(omega) != 1:
            raise ValueError(f"a phase diagram along {axis} holds omega fixed: give one omega, got {len(omega)}")
        fixed["omega"] = omega[0]
    return axis, _grid(values, PHASE_OMEGAS, axis), fixed


@internal_errors
def phase_diagram(
    omegas: float | Sequence[float] | np.ndarray | None = None,
    *,
    sigmas: Sequence[float] | np.ndarray | None = None,
    lams: Sequence[float] | np.ndarray | None = None,
    alphas: Sequence[float] | np.ndarray | None = None,
    simulate: bool = False,
    d: int = 300,
    seeds: int | Sequence[int] = 2,
    max_steps: int | None = None,
    store: str | Path | None = None,
    spec: ModelSpec | None = None,
    settings: SolverSettings | str | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    connect_timeout: float = 5.0,
    recompute_stale: bool = False,
    progress: str = "auto",
    **model: Any,
) -> PhaseDiagramResult:
    """``alpha_c``, the spinodals and ``alpha_l`` against ``omega``, ``sigma`` or ``lambda``
    (docs/model.md (5.2)-(5.5)), and with ``simulate`` heat maps of finite-``d`` training on
    ``axis x alpha``: the numbers of ``attnphase phase-diagram``.

    One stored ``transition`` point per value of the axis (the sweep machinery,
    :mod:`attnphase.sweeps`), its ``alpha`` range widened where the training errors do not cross on
    the start grid (:func:`attnphase.transition` without ``alphas``); with ``simulate``, stored
    ``simulation`` points from the semantic and the positional start at each value, ``alpha`` and
    seed.

    Parameters
    ----------
    omegas : float or sequence of float, optional
        The positional shares: the axis (default ``linspace(0, 0.45, 10)``), or with ``sigmas`` or
        ``lams`` the one fixed ``omega`` (default ``ModelSpec``'s).
    sigmas : sequence of float, optional
        The token noise levels: a diagram along ``sigma`` at fixed ``omega`` and ``lam``.
    lams : sequence of float, optional
        The ridge penalties: a diagram along ``lam`` at fixed ``omega`` and ``sigma``.
    alphas : sequence of float, optional
        The simulated sample complexities (default ``linspace(0.05, 2, 30)``).
    simulate : bool
        Also the heat maps of finite-``d`` training.
    d : int
        The embedding dimension of the simulation.
    seeds : int or sequence of int
        A count from 0, or the seeds.
    max_steps : int, optional
        The step limit of the training.
    store : str or Path, optional
        The results store (a SQLite file, created where missing): the points already in it are
        read, not computed again, so that a call resumes where an interrupted one stopped;
        ``None``: a temporary store, removed when the call returns.
    spec : ModelSpec, optional
        The model (default: the reference model).
    settings : SolverSettings or str, optional
        A :class:`SolverSettings`, a preset name, or ``None`` for the preset
        ``DEFAULT_PRESET["phase-diagram"]`` (:data:`attnphase.api.DEFAULT_PRESET`; as the command).
    workers, scheduler, connect_timeout, recompute_stale
        As :func:`attnphase.sweeps.run_sweep` (default every core; ``workers=1`` runs in this
        process).
    progress : str
        The sweep's display: ``"auto"`` (default), ``"bar"``, ``"log"`` or ``"none"``.
    **model
        :class:`ModelSpec` fields (not the axis).

    Returns
    -------
    PhaseDiagramResult
        The lines against the axis (and the heat maps); ``to_frame()`` has one row per value of
        the axis, ``plot()`` draws the command's figure.

    Raises
    ------
    ValueError
        One line, before any work: the axis also given as a model field, two axes, several
        ``omega`` with another axis, a grid point out of range, an unknown model parameter, or
        bad simulation settings.
    """
    from attnphase.sweeps.phase import phase_heatmaps, phase_lines

    axis, grid, fixed = _phase_axis(omegas, sigmas, lams, model)
    spec = model_spec(spec, **fixed, **{axis: grid[0]})  # (validates the model with the first value)
    for w in grid:
        spec.replace(**{axis: w})
    st = solver_settings(settings, "phase-diagram")
    base = {k: v for k, v in spec.to_dict().items() if k != axis}
    base.update(solver_params(st))
    sim_alphas: list[float] = []
    seed_list: tuple[int, ...] = ()
    if simulate:
        sim_alphas = _grid(alphas, PHASE_ALPHAS)
        d = _positive_int(d, "d", 2)
        seed_list = _seeds(seeds, 0)
        if max_steps is not None:
            max_steps = _positive_int(max_steps, "max_steps", 0)
    kw = {"workers": workers, "scheduler": scheduler, "progress": progress, "connect_timeout_s": connect_timeout,
          "recompute_stale": recompute_stale}
    with tempfile.TemporaryDirectory(prefix="attnphase-phase-") as tmp:
        where = Path(tmp) / "results.sqlite" if store is None else Path(store)
        lines = phase_lines(base, grid, where, axis=axis, **kw)
        maps = None
        if simulate:
            train = {} if max_steps is None else {"max_steps": max_steps}
            maps = phase_heatmaps(base, grid, sim_alphas, d, seed_list, where, train=train, axis=axis, **kw)
    reports = [r for r in (lines.report, None if maps is None else maps.report) if r is not None]
    computed = sum(r.computed for r in reports)
    stored = sum(r.skipped for r in reports)
    ok, msg = phase_message(grid, lines, computed, stored)
    return PhaseDiagramResult(
        axis=axis, values=tuple(grid), alpha_c=tuple(lines.alpha_c), store=None if store is None else str(store),
        computed=computed, stored=stored, lines=lines, heatmaps=maps, spec=spec, settings=st, success=ok,
        message=msg)
