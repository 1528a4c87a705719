"""The library's entry points: :func:`solve`, :func:`transition`, :func:`simulate` and :func:`bayes`.

Each takes the model as a :class:`~attnphase.spec.problem.ModelSpec` (``spec``) and/or its field
names as keywords (``omega=0.3, L=3, variant="causal"``, applied on top of ``spec``), and returns a
frozen result (:mod:`attnphase.results`) whose ``to_dict()`` is the record that the matching
``attnphase ... --json`` command prints: the commands are a thin shell over these functions, with
the same defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attnphase._extras import require
from attnphase._progress import Progress, ProgressArg, progress_callback
from attnphase._revision import numerics_revision
from attnphase._version import __version__
from attnphase.errors import internal_errors
from attnphase.results import (
    BayesResult,
    SimulationResult,
    SolveResult,
    TransitionResult,
    frozen,
)
from attnphase.spec import defaults
from attnphase.spec.problem import ModelSpec, check_alpha, model_parameters
from attnphase.theory import (
    SolverSettings,
    Transition,
    branches_for,
    check_response,
    find_transition_replicated,
    linear_test_error,
    native,
    solve_refined,
)

__all__ = ["DEFAULT_PRESET", "bayes", "model_spec", "simulate", "solve", "solver_settings", "transition"]

#: the solver preset (:meth:`SolverSettings.preset`) each function runs when given no settings:
#: the default of the command of the same name (:data:`attnphase.spec.defaults.SOLVER_PRESET`)
DEFAULT_PRESET: Mapping[str, str] = defaults.SOLVER_PRESET

#: ``transition``'s start grid ``(start, stop, num)`` when none is given
#: (:data:`attnphase.spec.defaults.TRANSITION_GRID`), widened down to ``ALPHA_MIN`` and up to
#: ``ALPHA_MAX`` where the crossing is not on it (:mod:`attnphase.theory.bracket`)
TRANSITION_GRID: tuple[float, float, int] = defaults.TRANSITION_GRID

#: ``bayes``'s ``alpha`` grid ``(start, stop, num)`` when none is given (``--alpha 0.05:1:20``)
BAYES_GRID = (0.05, 1.0, 20)

#: ``simulate``'s training settings where they differ from ``TrainSettings``' defaults (those of
#: the ``simulate`` command; :data:`attnphase.spec.defaults.TRAINING`)
SIMULATE_TRAINING: Mapping[str, Any] = defaults.TRAINING["simulate"]


def _model_names() -> tuple[str, ...]:
    """The model's parameter names, from its one schema (:func:`model_parameters`)."""
    return tuple(p.name for p in model_parameters())


def model_spec(spec: ModelSpec | None = None, **model: Any) -> ModelSpec:
    """``spec`` (default: ``ModelSpec()``) with the fields that ``model`` names set, validated.

    Without ``spec`` the defaults that depend on ``L`` (``A``, ``positions``) follow the given
    ``L``; with one, its matrices are kept (give new ones with a new ``L``).

    Parameters
    ----------
    spec : ModelSpec, optional
        The model to start from (default: the reference model, ``ModelSpec()``).
    **model
        :class:`~attnphase.ModelSpec` fields to set.

    Returns
    -------
    ModelSpec
        ``spec`` itself where ``model`` is empty, else a new, validated model.

    Raises
    ------
    ValueError
        One line, for a name that is not a field of :class:`~attnphase.ModelSpec` or a value its
        validation rejects.
    """
    known = _model_names()
    unknown = [k for k in model if k not in known]
    if unknown:
        raise ValueError(f"unknown model parameter {unknown[0]!r}; known: {', '.join(known)}")
    if spec is None:
        return ModelSpec(**model)
    return spec.replace(**model) if model else spec


def check_theory_value(spec: ModelSpec, trained_heads: bool = False) -> None:
    """``ValueError`` (one line) unless the theory covers ``spec``'s value: ``identity`` or ``gain``
    (docs/model.md (6.4)), ``value_gain`` only with ``gain``; and its heads and attention maps
    (:func:`attnphase.theory.channels.check_attention_covered`; trained head gains where the
    computation minimises over them, ``trained_heads``)."""
    if spec.value not in ("identity", "gain"):
        raise ValueError(f"the theory covers value = identity and gain only, got {spec.value} (lowrank and full do "
                         "not enter at leading order, docs/model.md (6.4)); use the simulator")
    if spec.value_gain is not None and spec.value != "gain":
        raise ValueError(f"value_gain is the gain of value = gain; got value = {spec.value}")
    from attnphase.theory.channels import check_attention_covered

    check_attention_covered(spec, trained_heads=trained_heads)


def solver_settings(settings: SolverSettings | str | None, command: str) -> SolverSettings:
    """``settings`` as given, a preset by name, or ``command``'s default preset (:data:`DEFAULT_PRESET`);
    ``ValueError`` (one line) for anything else."""
    if settings is None:
        return SolverSettings.preset(DEFAULT_PRESET[command])
    if isinstance(settings, str):
        return SolverSettings.preset(settings)
    if not isinstance(settings, SolverSettings):
        raise ValueError(f"settings must be a SolverSettings or a preset name, got {type(settings).__name__}")
    return settings


@internal_errors
def solve(
    alpha: float,
    *,
    branch: str = "all",
    spec: ModelSpec | None = None,
    settings: SolverSettings | str | None = None,
    progress: ProgressArg = "auto",
    **model: Any,
) -> SolveResult:
    """The fixed points of the self-consistent equations at sample complexity ``alpha = n/d``.

    Each branch is solved on the coarse rule, refined on finer ones whose scatter is the error
    estimate, and raised in order until the error target is met (docs/model.md (7.3), (7.5)).

    Parameters
    ----------
    alpha : float
        The sample complexity ``n/d``, > 0.
    branch : str
        One of the model's branches (semantic, positional, trivial; mixed at rank >= 2;
        docs/model.md (5.1)) or ``"all"``.
    spec : ModelSpec, optional
        The model (default: the reference model); ``**model`` is applied on top of it.
    settings : SolverSettings or str, optional
        A :class:`SolverSettings`, a preset name, or ``None`` for the preset
        ``DEFAULT_PRESET["solve"]`` (as ``attnphase solve`` and the ``theory`` sweep kind).
    progress : callable, bool or "auto"
        ``progress(done, total)``, called after each branch; default ``"auto"``: a bar in a notebook, a line on a terminal, nothing where stderr is not a
        terminal; ``False``: nothing (``attnphase._progress.progress_callback``).
    **model
        :class:`ModelSpec` fields. ``value="gain"`` (``V = v I``, docs/model.md (6.5)): with
        ``value_gain`` unset (the default) each branch is solved at the gain that minimises its
        training error (``attnphase.theory.value.solve_gain``; ``BranchResult.gain`` and
        ``gain_error``), with ``value_gain=v`` at that gain held fixed. ``heads=2,
        head_gains="trained"``: each branch at the head gains that minimise its training error
        (docs/model.md (11.4); ``BranchResult.head_gains``, ``head_gains_error``; where a head
        falls idle, ``SolveResult.idle_limit``).

    Returns
    -------
    SolveResult
        Per branch the overlaps (docs/model.md (1.5)), the training error (4.1), the test error
        (4.2) and their error estimates, the global minimum, and the linear baseline (4.3).

    Raises
    ------
    ValueError
        One line, before any work: an ``alpha`` out of range, an unknown branch or model
        parameter, a model the theory does not cover (a ``value`` other than ``identity`` and
        ``gain``; a ``settings.response`` that does not cover the model or the branch), or
        ``settings`` that are neither :class:`SolverSettings` nor a preset name.
    """
    spec = model_spec(spec, **model)
    check_theory_value(spec, trained_heads=True)
    check_alpha(alpha)
    alpha = float(alpha)
    known = branches_for(spec)
    if branch not in (*known, "all"):
        raise ValueError(f"branch must be one of {', '.join(known)}, all; got {branch!r}")
    st = solver_settings(settings, "solve")
    names = known if branch == "all" else (branch,)
    check_response(spec, st.response, names)
    # (no report of the start: a rule's size is checked as the first branch begins, and bad input
    # stays one line)
    report = progress_callback(progress, "solve", "branches")
    if spec.value == "gain" or spec.head_gains == "trained":
        from attnphase.api_gains import solve_head_gains, solve_value_gain

        gains = solve_value_gain if spec.value == "gain" else solve_head_gains
        return gains(spec, alpha, names, st, report, _solve_params(spec, alpha, st))
    points = {}
    for i, b in enumerate(names):
        points[b] = solve_refined(spec, alpha, b, st)
        if report is not None:
            report(i + 1, len(names))
    return SolveResult.from_points(spec, alpha, st, points, linear_test_error(spec), _solve_params(spec, alpha, st))


def _solve_params(spec: ModelSpec, alpha: float, st: SolverSettings) -> dict[str, Any]:
    """``SolveResult.params``: the model, ``alpha``, the solver settings, the version and the kernels."""
    return {**spec.to_dict(), "alpha": alpha, "solver": dataclasses.asdict(st), "version": __version__,
            "revision": numerics_revision("theory"), "kernels": native.describe()}


@internal_errors
def transition(
    *,
    alphas: Sequence[float] | np.ndarray | None = None,
    spec: ModelSpec | None = None,
    settings: SolverSettings | str | None = None,
    progress: ProgressArg = "auto",
    **model: Any,
) -> TransitionResult:
    """``alpha_c`` (docs/model.md (5.2)), the spinodals (5.3) and ``alpha_l`` (5.4) at the model's
    ``omega``.

    Both branches are followed over the bracketing grid ``alphas``, then the crossings are located
    by root finding on refined points. Without ``alphas`` the search starts on
    ``linspace(*TRANSITION_GRID)`` (:data:`attnphase.spec.defaults.TRANSITION_GRID`) and widens the
    range (down to ``ALPHA_MIN``, up to ``ALPHA_MAX`` of :mod:`attnphase.theory.bracket`) until the
    training errors cross or a reason for no transition is established (``.reason``; the range
    searched: ``.alpha_range``); a given grid is searched as it is.

    Parameters
    ----------
    alphas : sequence of float, optional
        The bracketing grid, searched as it is; ``None`` (default): from
        ``linspace(*TRANSITION_GRID)``, widened as far as the search needs.
    spec : ModelSpec, optional
        The model (default: the reference model); ``**model`` is applied on top of it.
    settings : SolverSettings or str, optional
        A :class:`SolverSettings`, a preset name, or ``None`` for the preset
        ``DEFAULT_PRESET["transition"]`` (as ``attnphase transition`` and the ``transition`` sweep
        kind); ``settings.replicas > 1`` repeats the search on
        independent scrambles and reports their mean and standard error.
    progress : callable, bool or "auto"
        ``progress(done, total)``, called after each grid point; default ``"auto"``: a bar in a notebook, a line on a terminal, nothing where stderr is not a
        terminal; ``False``: nothing (``attnphase._progress.progress_callback``).
    **model
        :class:`ModelSpec` fields. ``value="gain"`` with ``value_gain`` unset: ``alpha_c`` with
        each branch at the gain that minimises its training error (docs/model.md (6.5),
        ``attnphase.theory.value.gain_transition``; one scramble, the error from the fine
        rules; the gains in ``TransitionResult.gains``); ``alpha_l`` and the spinodals are not
        located there.

    Returns
    -------
    TransitionResult
        ``alpha_c``, ``alpha_l``, the spinodals and their standard errors, how the global minimum
        changes at ``alpha_c`` (docs/model.md (5.5)), and the branches followed on the grid.

    Raises
    ------
    ValueError
        One line, before any work: a grid point out of range, an unknown model parameter, a
        model the theory does not cover, ``settings`` that are neither :class:`SolverSettings`
        nor a preset name, or replicas with the optimal value gain.
    """
    spec = model_spec(spec, **model)
    check_theory_value(spec)
    grid = np.linspace(*TRANSITION_GRID) if alphas is None else np.asarray(alphas, dtype=float)
    check_alpha(grid.tolist())
    st = solver_settings(settings, "transition")
    check_response(spec, st.response, ("semantic", "positional"))
    report = progress_callback(progress, "transition", "points")
    if spec.optimal_gain:
        return _transition_gain(spec, grid.tolist(), st, report)
    tr = find_transition_replicated(spec, None if alphas is None else grid.tolist(), st, replicas=st.replicas,
                                    progress=report, widen=alphas is None)
    return TransitionResult.from_transition(tr, spec, st)


def _transition_gain(spec: ModelSpec, grid: list[float], st: SolverSettings,
                     progress: Progress | None) -> TransitionResult:
    """:func:`transition` with the optimal value gain (docs/model.md (5.2), (6.5)): ``alpha_c`` of
    :func:`attnphase.theory.value.gain_transition` as a :class:`TransitionResult`."""
    from attnphase.theory.value import gain_transition

    if st.replicas > 1:
        raise ValueError("the transition at the optimal value gain runs one scramble (its error comes from the "
                         "refinement's fine rules): use replicas 1")
    gt = gain_transition(spec, grid, st, progress=progress)
    notes = ["each branch at the value gain that minimises its training error (docs/model.md (6.5)); alpha_l and "
             "the spinodals are not located with the optimal gain"]
    gains: dict[str, Any] = {"evaluations": [[a, s.gain, p.gain] for a, s, p in gt.points]}
    if gt.success:
        a, s, p = min(gt.points, key=lambda e: abs(e[0] - gt.alpha_c))
        gains.update(at_alpha=a, semantic={"gain": s.gain, "gain_error": s.gain_error},
                     positional={"gain": p.gain, "gain_error": p.gain_error})
        notes.append(f"optimal gains at alpha = {a:.4g}: semantic {s.gain:.6g} +- {s.gain_error:.1e}, "
                     f"positional {p.gain:.6g} +- {p.gain_error:.1e}")
    else:
        notes.append(gt.message)
    err = gt.alpha_c_error if gt.success and np.isfinite(gt.alpha_c_error) else None
    tr = Transition(alpha_c=gt.alpha_c if gt.success else None, alpha_l=None,
                    spinodals={"semantic": None, "positional": None}, linear_test_error=linear_test_error(spec),
                    notes=tuple(notes), grid={"alpha": list(grid)}, errors={"alpha_c": err} if err is not None else {})
    res = TransitionResult.from_transition(tr, spec, st)
    return dataclasses.replace(res, gains=frozen(gains), record=frozen({**res.record, "gains": gains}))


@internal_errors
def simulate(
    alpha: float,
    d: int,
    *,
    init: str | Sequence[str] = "semantic",
    seeds: int | Sequence[int] = 4,
    seed0: int = 0,
    n_test: int | None = None,
    spec: ModelSpec | None = None,
    settings: Any = None,
    progress: ProgressArg = "auto",
    **model_and_training: Any,
) -> SimulationResult:
    """Train the attention layer at finite ``d`` on ``n = round(alpha d)`` samples (docs/model.md
    (1.1)-(1.4)), every seed and start in one batch.

    Parameters
    ----------
    alpha : float
        The sample complexity ``n/d``, > 0.
    d : int
        The embedding dimension.
    init : str or sequence of str
        The start, ``semantic``, ``positional``, ``random``, a list of them or ``"all"``.
    seeds : int or sequence of int
        How many (``seed0``, ``seed0 + 1``, ...) or the seeds themselves; each has its own
        teacher, training and test set.
    seed0 : int
        The first seed where ``seeds`` is a count.
    n_test : int, optional
        Test samples per seed (default ``max(n, 1000)``).
    spec : ModelSpec, optional
        The model (default: the reference model); the model fields of ``**model_and_training``
        are applied on top of it.
    settings : TrainSettings, optional
        A :class:`~attnphase.sim.TrainSettings` (default: the ``simulate`` command's,
        ``attnphase.api.SIMULATE_TRAINING``).
    progress : callable, bool or "auto"
        ``progress(done, total)``, called with the number of runs that have stopped as the
        batched training advances (from ``(0, runs)`` to ``(runs, runs)``); default ``"auto"``: a bar in a notebook, a line on a terminal, nothing where stderr is not a
        terminal; ``False``: nothing (``attnphase._progress.progress_callback``).
    **model_and_training
        :class:`ModelSpec` fields and ``TrainSettings`` fields (``optimizer``, ``lr``,
        ``momentum``, ``max_steps``, ``tol``, ``device``, ``dtype``, ...) applied on top, and
        ``threads`` (torch's CPU threads, a process-wide setting).

    Returns
    -------
    SimulationResult
        Per run the overlaps (docs/model.md (1.5)), the training loss (1.4), the test error
        (4.2) and the linear baseline's (4.3).

    Raises
    ------
    ValueError
        One line, before training: an unknown parameter, a model or training setting its
        validation rejects, bad ``seeds`` or ``threads``, or a problem too large for memory.
    """
    # torch is imported here and not at module level, so that ``import attnphase`` stays cheap
    # and needs no torch (the sim extra)
    require("torch", "attnphase.simulate")
    import torch

    from attnphase.sim.data import check_memory
    from attnphase.sim.simulate import parse_inits
    from attnphase.sim.simulate import simulate as run_simulation
    from attnphase.sim.train import TrainSettings

    model_names = _model_names()
    train_names = (*(f.name for f in dataclasses.fields(TrainSettings)), "threads")
    unknown = [k for k in model_and_training if k not in model_names and k not in train_names]
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; known: model {', '.join(model_names)}; "
                         f"training {', '.join(train_names)}")
    model = {k: v for k, v in model_and_training.items() if k in model_names}
    train = {k: v for k, v in model_and_training.items() if k in train_names}
    spec = model_spec(spec, **model)
    threads = train.pop("threads", None)
    base = settings if settings is not None else TrainSettings(**SIMULATE_TRAINING)
    st = dataclasses.replace(base, **train) if train else base
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
        torch.set_num_threads(threads)
    seed_list = _seed_list(seeds, seed0, "seeds")
    inits = parse_inits(init, spec.heads)
    check_memory(spec, d, [alpha], n_test, len(seed_list), st.dtype)
    res = run_simulation(spec, alpha=alpha, d=d, seeds=seed_list, inits=inits, settings=st, n_test=n_test,
                         progress=progress_callback(progress, "simulate", "runs"))
    return SimulationResult.from_simulation(res)


@internal_errors
def bayes(
    alpha: float | Sequence[float] | np.ndarray | None = None,
    *,
    noise: float = 0.0,
    spec: ModelSpec | None = None,
    gamp_d: int | None = None,
    gamp_seeds: int | Sequence[int] = 4,
    seed0: int = 0,
    progress: ProgressArg = "auto",
    **model: Any,
) -> BayesResult:
    """The Bayes-optimal baseline (docs/model.md section 8): the state evolution of the
    Bayes-optimal estimator at each ``alpha``, the recovery thresholds, and optionally GAMP at
    finite ``d``.

    Parameters
    ----------
    alpha : float or sequence of float, optional
        The sample complexities (default ``linspace(0.05, 1, 20)``).
    noise : float
        The variance ``Delta`` of Gaussian noise on every entry of the observed ``T``
        (docs/model.md (8.10); ``L = 2`` only; then ``alpha_WR`` is the only threshold, and each
        ``alpha`` costs seconds).
    spec : ModelSpec, optional
        The model (default: the reference model); ``**model`` is applied on top of it.
    gamp_d : int, optional
        Run GAMP (docs/model.md (8.9)) on the simulator's data at this ``d`` (noiseless labels
        only).
    gamp_seeds : int or sequence of int
        GAMP's datasets per ``alpha``: a count from ``seed0`` or the seeds.
    seed0 : int
        The first seed where ``gamp_seeds`` is a count.
    progress : callable, bool or "auto"
        ``progress(done, total)``, called after each ``alpha``; default ``"auto"``: a bar in a notebook, a line on a terminal, nothing where stderr is not a
        terminal; ``False``: nothing (``attnphase._progress.progress_callback``).
    **model
        :class:`ModelSpec` fields; the baseline needs a rank-one teacher, uncorrelated tokens,
        no causal target and ``omega < 1``; the student's fields (``rank``, ``variant``, ``lam``)
        do not enter.

    Returns
    -------
    BayesResult
        Per ``alpha``: the overlap ``x`` of the Bayes estimate with the teacher (docs/model.md
        (8.4); user units), the Bayes-optimal test error (8.8) and their quadrature error
        estimates. Thresholds: ``alpha_WR`` (8.5), ``alpha_IT`` and ``alpha_PR`` (8.6).

    Raises
    ------
    ValueError
        One line, before any work: a model or ``noise`` the baseline does not cover, an
        ``alpha`` out of range, GAMP with label noise, or a bad ``gamp_d`` or ``gamp_seeds``.
    """
    from attnphase.theory import bayes as bt

    spec = model_spec(spec, **model)
    noise = float(noise)
    bt.check_bayes_spec(spec, noise)
    grid = np.linspace(*BAYES_GRID) if alpha is None else np.atleast_1d(np.asarray(alpha, dtype=float))
    check_alpha(grid.tolist())
    seeds: tuple[int, ...] = ()
    if gamp_d is not None:
        if noise > 0:
            raise ValueError("GAMP runs on noiseless labels only (noise 0)")
        if isinstance(gamp_d, bool) or int(gamp_d) != gamp_d or gamp_d < 2:
            raise ValueError(f"gamp_d must be an integer >= 2, got {gamp_d}")
        seeds = _seed_list(gamp_seeds, seed0, "gamp_seeds")
    report = progress_callback(progress, "bayes", "alpha values")
    if report is not None:
        report(0, len(grid))
    quad: Any
    if noise > 0:
        quad = bt.NoisyQuadrature.for_noise(noise)
        noisy_points, thr_dict = bt.solve_noisy(grid.tolist(), spec, noise, quad)
        points = [p.to_dict() for p in noisy_points]
    else:
        quad = bt.BayesQuadrature()
        rules = (bt.make_rules(spec.L, quad), bt.make_rules(spec.L, quad.doubled()))
        thr_dict = bt.thresholds(spec.L, quad).to_dict()
        points = []
    gamp_runs = []
    for i, a in enumerate(grid.tolist()):
        if noise == 0:
            points.append(bt.solve_point(a, spec, quad, rules=rules).to_dict())
        if seeds:
            from attnphase.sim.gamp import run_gamp

            gamp_runs.append({**run_gamp(spec, a, int(gamp_d), seeds),  # type: ignore[arg-type]
                              "state_evolution": points[i]["overlap"]})
        if report is not None:
            report(i + 1, len(grid))
    lin = linear_test_error(spec)
    params = {**spec.to_dict(), "alpha": grid.tolist(), "noise": noise, "quadrature": dataclasses.asdict(quad),
              "gamp_d": gamp_d, "gamp_seeds": list(seeds), "version": __version__,
              "revision": numerics_revision("theory"),
              "gamp_revision": None if gamp_d is None else numerics_revision("sim")}
    return BayesResult.from_points(spec, noise, points, thr_dict, lin, gamp_runs, params)


def _seed_list(seeds: int | Sequence[int], seed0: int, name: str) -> tuple[int, ...]:
    """``seeds`` as a tuple: a count (``seed0``, ``seed0 + 1``, ...) or the seeds themselves."""
    if isinstance(seeds, bool):
        raise ValueError(f"{name} must be a count or a list of seeds, got {seeds!r}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"{name} must be >= 1, got {seeds}")
        return tuple(range(seed0, seed0 + int(seeds)))
    return tuple(int(s) for s in seeds)
