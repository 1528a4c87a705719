"""Point kinds: what one sweep point computes, behind a small registry.

A :class:`PointKind` names its parameters (:class:`Param`, with types and defaults; the
model's come from the schema of :class:`~attnphase.spec.ModelSpec`),
turns user parameters into canonical ones (defaults filled in, validated: this is what
is hashed into the store key) and computes one point, returning ``(result, diagnostics)``
as JSON-ready dicts. Kinds:

- ``theory``: one branch at one ``alpha`` as :func:`attnphase.solve` solves it
  (:func:`attnphase.theory.solve_refined`: the fixed point of ``docs/model.md`` (2.1)-(3.4) refined
  to the error target, (7.3), (7.5); errors (4.1)-(4.2));
- ``curve``: :func:`attnphase.theory.follow_branch` over an ``alpha`` grid on one branch, each
  point refined where the settings refine, as :func:`attnphase.curves` (continuation; the result
  holds lists);
- ``transition``: :func:`attnphase.theory.find_transition` with its range widened, as
  :func:`attnphase.transition` without a grid (``alpha_c``, ``alpha_l``, spinodals,
  ``eps_g_lin``; ``docs/model.md`` (5.2)-(5.4)) for one model;
- ``simulation``: gradient descent at finite ``d`` from an informed or random start
  (the empirical risk ``docs/model.md`` (1.4)), through :mod:`attnphase.sim`;
- ``basins``: runs from random starts at one ``(alpha, omega)``, batched over seeds, each
  classified by the state it reaches (:func:`attnphase.sim.basins.train_basins`; docs/basins.md);
- ``selftest``: a cheap deterministic function (optional sleep and failure switch) used to
  test the store and the backends without the heavy solvers.

The theory kinds solve with the solver preset of the command of the same name
(:data:`KIND_PRESET`, read from :data:`attnphase.spec.defaults.SOLVER_PRESET`), with the
``solver_<field>`` parameters given applied on top; a point's key holds only the settings that
differ from that preset.

Each kind names the components (:data:`attnphase._revision.COMPONENTS`) that compute its
numbers (``numerics``): its :meth:`PointKind.revision`, stored with every point, changes when
their code, the versions of their numerical libraries or the kind's compute function change.

Adding a kind is one function pair and one entry in :func:`builtin_kinds` (with its ``numerics``). The theory (numba)
and the simulator (torch) are imported inside the functions that use them, so that grids, the
store and the ``selftest`` kind stay light.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from attnphase._revision import combine, function_digest, numerics_revision
from attnphase.spec.defaults import DEFAULT_LR, SOLVER_PRESET, training
from attnphase.spec.parse import KINDS, convert, parse_range
from attnphase.spec.problem import ModelSpec, model_parameters

#: The types a parameter can have (those of :mod:`attnphase.spec.parse`).
PARAM_TYPES = KINDS


@dataclass(frozen=True)
class Param:
    """One sweepable parameter of a point kind."""

    name: str
    type: str
    default: Any
    help: str = ""
    #: a CLI value is a comma list of values (False: the whole text is one value)
    split: bool = True
    #: the text that stands for ``None`` (``FieldInfo.none`` of the schema), if the value may be ``None``
    none: str | None = None


@dataclass(frozen=True)
class PointKind:
    """A kind of sweep point (see the module docstring)."""

    name: str
    description: str
    params: Callable[[], tuple[Param, ...]]
    normalize: Callable[[dict[str, Any]], dict[str, Any]]
    compute: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]
    seeded: bool = False
    #: the components (:data:`attnphase._revision.COMPONENTS`) that compute its numbers
    numerics: tuple[str, ...] = ()

    def revision(self) -> str:
        """The numerical revision of this kind, stored with each of its points: the revision
        (:func:`attnphase._revision.numerics_revision`) of each component in ``numerics``
        combined with the normalised source of ``compute`` itself (the glue that calls them and
        shapes the result). It changes whenever the numbers of a point can; a stored point of
        another revision is *stale*. Cached per process; the first call of a theory kind reads
        its ~20 source files (a few tenths of a second). A theory kind's solver preset
        (:data:`KIND_PRESET`) counts too: a key holds only the settings that differ from it."""
        parts = {f"component:{c}": numerics_revision(c) for c in self.numerics}
        parts["compute"] = function_digest(self.compute)
        if self.name in KIND_PRESET:
            parts["preset"] = SOLVER_PRESET[KIND_PRESET[self.name]]
        return combine(parts)

    def param_map(self) -> dict[str, Param]:
        return {p.name: p for p in self.params()}

    def check_names(self, names: Any) -> None:
        """Raise ``ValueError`` naming the first parameter this kind does not know."""
        known = self.param_map()
        for n in names:
            if n not in known:
                raise ValueError(
                    f"unknown parameter {n!r} for kind {self.name!r}; "
                    f"known: {', '.join(sorted(known))}"
                )


# ----------------------------------------------------------------------------- model params
#: The model's parameters: one per :class:`ModelSpec` field, from its schema.
MODEL_PARAMS: tuple[Param, ...] = tuple(Param(p.name, p.kind, p.default, p.help)
                                        for p in model_parameters())
_MODEL_NAMES = frozenset(p.name for p in MODEL_PARAMS)
SOLVER_PREFIX = "solver_"


def model_spec(params: Mapping[str, Any]) -> ModelSpec:
    """The validated :class:`ModelSpec` named by the model entries of ``params`` (converted and
    checked by the spec's schema)."""
    return ModelSpec(**{k: v for k, v in params.items() if k in _MODEL_NAMES})


#: the computation (a key of :data:`attnphase.spec.defaults.SOLVER_PRESET`) whose solver preset
#: each theory kind runs: a point equals the command of the same name at that point
KIND_PRESET: Mapping[str, str] = MappingProxyType({"theory": "solve", "curve": "curves", "transition": "transition"})


def _solver_params(kind: str) -> tuple[Param, ...]:
    """``solver_<field>`` for each field of :class:`attnphase.theory.SolverSettings`, from its
    schema (:func:`attnphase.theory.settings.solver_parameters`: the names and values a theory
    command's ``--solver NAME=VALUE`` takes), its default the value of ``kind``'s preset
    (:data:`KIND_PRESET`)."""
    from attnphase.theory.settings import SolverSettings, solver_parameters

    preset = SolverSettings.preset(SOLVER_PRESET[KIND_PRESET[kind]])
    return tuple(Param(SOLVER_PREFIX + p.name, p.kind, getattr(preset, p.name), p.help,
                       none=p.info.none) for p in solver_parameters())


def _normalize_solver(kind: str, params: Mapping[str, Any], out: dict[str, Any], branches: tuple[str, ...] = ()) -> None:
    """Copy explicitly given solver settings that differ from ``kind``'s preset, checked by
    :class:`SolverSettings` now, and its response against the model and the ``branches`` the kind
    solves, so that a bad value refuses the sweep rather than fail each point."""
    for p in _solver_params(kind):
        if p.name in params:
            v = _coerce(p, params[p.name])
            if v != p.default:
                out[p.name] = v
    from attnphase.theory import check_response

    check_response(model_spec(out), point_solver_settings(kind, out).response, branches)


def point_solver_settings(kind: str, params: Mapping[str, Any]) -> Any:
    """The :class:`~attnphase.theory.SolverSettings` of a point of the theory kind ``kind``: the
    preset of the command of the same name (:data:`KIND_PRESET`) with the point's ``solver_<field>``
    parameters applied on top; a one-start ``solver_response`` runs on one rule, as the command's
    (:meth:`~attnphase.theory.SolverSettings.preset`)."""
    from attnphase.theory import SolverSettings

    given = {k[len(SOLVER_PREFIX):]: v for k, v in params.items() if k.startswith(SOLVER_PREFIX)}
    return SolverSettings.preset(SOLVER_PRESET[KIND_PRESET[kind]], **given)


def _coerce(p: Param, v: Any) -> Any:
    """``v`` converted to the type of ``p`` (``ValueError`` if impossible); ``p``'s text for
    ``None`` (``Param.none``, e.g. ``"auto"``) is ``None``."""
    if p.none is not None and isinstance(v, str) and v.strip().lower() == p.none:
        v = None
    if v is None:
        if p.default is None or p.none is not None:
            return None
        raise ValueError(f"{p.name} must not be empty")
    return convert(p.type, v, p.name)


def _model_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    """The model's validated parameters; an extension field (``FieldInfo.extension``) at its default
    is left out, so the key of a point without that extension does not depend on it."""
    out = model_spec(params).to_dict()
    for p in model_parameters():
        if p.info.extension and out.get(p.name) == p.default:
            del out[p.name]
    return out


def _fixed_gain_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`_model_normalize` for the theory kinds, which solve at a fixed value gain: ``value =
    gain`` needs ``value_gain`` (docs/model.md (6.5); :func:`attnphase.solve` and
    :func:`attnphase.transition` minimise over an unset one)."""
    out = _model_normalize(params)
    if out["value"] == "gain" and out.get("value_gain") is None:
        raise ValueError("the theory sweep kinds solve at a fixed value gain: give value_gain with value = gain "
                         "(attnphase solve and transition minimise the training error over the gain)")
    return out


def _fill(kind_params: tuple[Param, ...], params: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for p in kind_params:
        out[p.name] = _coerce(p, params[p.name]) if p.name in params else p.default
    return out


def _check_branch(branch: str, model: Mapping[str, Any]) -> None:
    from attnphase.theory import branches_for

    known = branches_for(model_spec(model))  # (``mixed`` at rank >= 2)
    if branch not in known:
        raise ValueError(f"unknown branch {branch!r}; choose from {', '.join(known)}")


def _check_positive(name: str, v: float) -> None:
    if not v > 0:
        raise ValueError(f"{name} must be > 0, got {v}")


def _split_diagnostics(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    d = dict(d)
    diag = d.pop("diagnostics", None) or {}
    return d, dict(diag)


def _check_seed(seed: int) -> None:
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


# ----------------------------------------------------------------------------- selftest
_SELFTEST_PARAMS = (
    Param("x", "float", 0.0, "input"),
    Param("y", "float", 0.0, "input"),
    Param("seed", "int", 0, "random seed"),
    Param("sleep", "float", 0.0, "seconds to sleep before returning"),
    Param("fail", "bool", False, "raise an error instead of returning"),
    Param("crash", "bool", False, "kill the worker process (pool/Dask only; tests)"),
)


def _selftest_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _fill(_SELFTEST_PARAMS, params)
    _check_seed(out["seed"])
    if out["sleep"] < 0:
        raise ValueError(f"sleep must be >= 0, got {out['sleep']}")
    return out


def _selftest_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if params["sleep"] > 0:
        time.sleep(params["sleep"])
    if params.get("crash"):
        if multiprocessing.parent_process() is None:
            raise RuntimeError("selftest crash requested in the main process")
        os._exit(3)
    if params["fail"]:
        raise RuntimeError(f"selftest failure requested at x={params['x']}, y={params['y']}")
    rng = np.random.default_rng(params["seed"])
    x, y = params["x"], params["y"]
    return {"value": x * x + y, "noise": float(rng.standard_normal())}, {"evaluations": 1}


# ----------------------------------------------------------------------------- theory
_THEORY_EXTRA = (
    Param("alpha", "float", 1.0, "sample complexity n/d"),
    Param("branch", "str", "semantic", "semantic, positional or trivial"),
)


def _theory_params() -> tuple[Param, ...]:
    return MODEL_PARAMS + _THEORY_EXTRA + _solver_params("theory")


def _theory_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _fixed_gain_normalize(params)
    extra = _fill(_THEORY_EXTRA, params)
    _check_positive("alpha", extra["alpha"])
    _check_branch(extra["branch"], out)
    out.update(extra)
    _normalize_solver("theory", params, out, (extra["branch"],))
    return out


def _theory_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One branch at one ``alpha`` by the function :func:`attnphase.solve` solves each branch with
    (:func:`attnphase.theory.solve_refined`), at the settings ``attnphase solve`` has."""
    from attnphase.theory import solve_refined

    spec = model_spec(params)
    pt = solve_refined(spec, params["alpha"], params["branch"], point_solver_settings("theory", params))
    return _split_diagnostics(pt.to_dict())


def _transition_params() -> tuple[Param, ...]:
    return MODEL_PARAMS + _solver_params("transition")


def _transition_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _fixed_gain_normalize(params)
    _normalize_solver("transition", params, out, ("semantic", "positional"))
    return out


def _transition_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from attnphase.theory import combine_transitions, find_transition

    spec = model_spec(params)
    settings = point_solver_settings("transition", params)
    # solver_replicas > 1: mean and standard error over independent QMC scrambles
    runs = [find_transition(spec, settings=dataclasses.replace(settings, seed=settings.seed + k), widen=True).to_dict()
            for k in range(max(1, settings.replicas))]
    return _split_diagnostics(combine_transitions(runs, settings.seed))


_CURVE_EXTRA = (
    Param("alphas", "str", "0.1:2.5:49", "alpha grid 'start:stop:num' or 'a,b,c'",
          split=False),
    Param("branch", "str", "semantic", "semantic, positional or trivial"),
)
_CURVE_KEYS = ("train_loss", "test_error", "theta", "m", "q")


def _curve_params() -> tuple[Param, ...]:
    return MODEL_PARAMS + _CURVE_EXTRA + _solver_params("curve")


def _alpha_list(text: str) -> tuple[float, ...]:
    return parse_range(text, "alphas")


def _curve_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _fixed_gain_normalize(params)
    extra = _fill(_CURVE_EXTRA, params)
    alphas = _alpha_list(extra["alphas"])
    if min(alphas) <= 0:
        raise ValueError(f"alphas must be > 0, got {min(alphas)}")
    _check_branch(extra["branch"], out)
    out.update(extra)
    _normalize_solver("curve", params, out, (extra["branch"],))
    return out


def _curve_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from attnphase.theory import follow_branch

    spec = model_spec(params)
    alphas = list(_alpha_list(params["alphas"]))
    settings = point_solver_settings("curve", params)
    pts = follow_branch(spec, alphas, params["branch"], settings=settings)
    if settings.refine_order:  # each point carried to the fine rules
        from attnphase.theory import refine_followed

        pts = refine_followed(spec, pts, settings)
    result: dict[str, Any] = {"alpha": [], "exists": []}
    result.update({k: [] for k in _CURVE_KEYS})
    diag: dict[str, Any] = {"converged": [], "iterations": [], "reason": [], "refined": []}
    for p in pts:
        ok = bool(getattr(p, "exists", True))
        result["alpha"].append(float(p.alpha))
        result["exists"].append(ok)
        for k in _CURVE_KEYS:
            v = getattr(p, k, None)
            result[k].append(float(v) if ok and isinstance(v, (int, float, np.floating))
                             else None)
        diag["converged"].append(bool(getattr(p, "converged", True)))
        diag["iterations"].append(getattr(p, "iterations", None))
        diag["reason"].append(str(getattr(p, "reason", "")))
        ref = getattr(p, "refinement", None)
        kept = {} if ref is None else ref.to_dict()
        diag["refined"].append({k: kept[k] for k in ("applied", "nodes", "errors", "reason") if k in kept} or None)
    return result, diag


# ----------------------------------------------------------------------------- simulation
_SIM_EXTRA = (
    Param("alpha", "float", 1.0, "sample complexity n/d"),
    Param("d", "int", 300, "embedding dimension"),
    Param("init", "str", "semantic", "start: semantic, positional or random"),
    Param("seed", "int", 0, "random seed (teacher, data, start)"),
)
SIM_INITS = ("semantic", "positional", "random")


def _sim_train_params() -> tuple[Param, ...]:
    """``train_<field>`` for each field of :class:`attnphase.spec.training.TrainSettings`, from its
    schema (the names and values the training commands' ``--train NAME=VALUE`` takes), but
    ``device`` and ``log_every``, which do not change results and are not part of a point's key."""
    from attnphase.spec.training import train_parameters

    return tuple(Param("train_" + p.name, p.kind, p.default, p.help, none=p.info.none)
                 for p in train_parameters() if p.name not in ("device", "log_every"))


def _sim_params() -> tuple[Param, ...]:
    return MODEL_PARAMS + _SIM_EXTRA + _sim_train_params()


def _sim_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _model_normalize(params)
    extra = _fill(_SIM_EXTRA, params)
    _check_positive("alpha", extra["alpha"])
    if extra["d"] < 2:
        raise ValueError(f"d must be >= 2, got {extra['d']}")
    if extra["init"] not in SIM_INITS:
        raise ValueError(f"unknown init {extra['init']!r}; choose from {', '.join(SIM_INITS)}")
    _check_seed(extra["seed"])
    out.update(extra)
    for p in _sim_train_params():
        if p.name in params:
            v = _coerce(p, params[p.name])
            if v != p.default:
                out[p.name] = v
    _check_settings_now(_train_settings, out)
    return out


def _check_settings_now(build: Callable[[Mapping[str, Any]], Any], params: Mapping[str, Any]) -> None:
    """Build a simulation point's training settings when the sweep is read, so that a bad value
    refuses the sweep rather than fail each point; without the simulator each point says so."""
    try:
        build(params)
    except ImportError:
        pass


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Train on one torch thread wherever the point runs: torch's products split their sums over
    its threads, so the in-process runner, a pool worker and a Dask worker store the same bits."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _train_settings(params: Mapping[str, Any]) -> Any:
    from attnphase.spec.training import TrainSettings

    return TrainSettings(**{k[len("train_"):]: v for k, v in params.items() if k.startswith("train_")})


def _sim_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        from attnphase.sim import TrainSettings, simulate
    except ImportError as exc:
        raise RuntimeError(f"the simulator (attnphase.sim) cannot be imported: {exc}") from None

    spec = model_spec(params)
    settings: TrainSettings = _train_settings(params)
    with _one_torch_thread():
        res = simulate(spec, alpha=params["alpha"], d=params["d"], seeds=(params["seed"],),
                       inits=(params["init"],), settings=settings)
    run = res.runs[0].to_dict()
    diag_keys = ("steps", "converged", "stop", "grad_norm", "seconds", "overlaps")
    result = {k: v for k, v in run.items() if k not in diag_keys}
    result.update(n=res.n, n_test=res.n_test, converged=run.get("converged"))
    diagnostics = {k: run[k] for k in diag_keys if k in run}
    diagnostics["train_settings"] = {"optimizer": settings.optimizer,
                                     "lr": settings.learning_rate,
                                     "max_steps": settings.max_steps, "tol": settings.tol}
    return result, diagnostics


# ----------------------------------------------------------------------------- basins
_BASIN_TRAINING = training("basins")
_BASIN_EXTRA = (
    Param("alpha", "float", 1.0, "sample complexity n/d"),
    Param("d", "int", 300, "embedding dimension"),
    Param("seeds", "int", 8, "random starts (seeds seed0 ... seed0 + seeds - 1), trained as one batch"),
    Param("seed0", "int", 0, "first seed"),
    Param("init_scale", "float", 0.1, "start Q0 = init_scale N(0, I)"),
    Param("optimizer", "str", _BASIN_TRAINING["optimizer"], "gd, momentum (gd, heavy ball 0.9) or adam"),
    Param("lr", "float", _BASIN_TRAINING["lr"],
          "step size (default " + ", ".join(f"{v:g} {k}" for k, v in DEFAULT_LR.items()) + "; momentum as gd)"),
    Param("max_steps", "int", _BASIN_TRAINING["max_steps"], "step cap per run"),
    Param("tol", "float", _BASIN_TRAINING["tol"], "stop a run when ||grad R||/sqrt(d) < tol"),
    Param("dtype", "str", _BASIN_TRAINING["dtype"], "float32 or float64"),
    Param("device", "str", _BASIN_TRAINING["device"], "cpu or cuda (stored in the key when not cpu)"),
)
#: the most seeds one basins point trains (one batch, in memory together)
MAX_BASIN_SEEDS = 10_000


def _basin_params() -> tuple[Param, ...]:
    return MODEL_PARAMS + _BASIN_EXTRA


def _basin_normalize(params: Mapping[str, Any]) -> dict[str, Any]:
    out = _model_normalize(params)
    extra = _fill(_BASIN_EXTRA, params)
    _check_positive("alpha", extra["alpha"])
    _check_positive("init_scale", extra["init_scale"])
    if extra["d"] < max(2, out["L"]):
        raise ValueError(f"d must be >= max(2, L={out['L']}), got {extra['d']}")
    if not 1 <= extra["seeds"] <= MAX_BASIN_SEEDS:
        raise ValueError(f"seeds must lie in [1, {MAX_BASIN_SEEDS}], got {extra['seeds']}")
    _check_seed(extra["seed0"])
    if extra["device"] == "cpu":  # the default device is not part of the key
        del extra["device"]
    out.update(extra)
    _check_settings_now(_basin_settings, out)
    return out


def _basin_settings(params: Mapping[str, Any]) -> Any:
    from attnphase.sim.basins import basin_settings

    return basin_settings(params["optimizer"], params["lr"], params["max_steps"], params["tol"],
                          params["dtype"], params.get("device", "cpu"))


def _basin_compute(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        from attnphase.sim.basins import train_basins
    except ImportError as exc:
        raise RuntimeError(f"the simulator (attnphase.sim) cannot be imported: {exc}") from None

    spec = model_spec(params)
    settings = _basin_settings(params)
    seeds = range(params["seed0"], params["seed0"] + params["seeds"])
    with _one_torch_thread():
        (pt,) = train_basins(spec, params["d"], params["alpha"], seeds=seeds,
                             init_scale=params["init_scale"], settings=settings)
    result = pt.summary()
    result["n"] = pt.n
    for key in ("seed", "state", "m", "theta", "q", "train_loss", "test_error", "steps", "stop"):
        result["runs_" + key] = [getattr(r, key) for r in pt.runs]
    diagnostics = {"seconds": pt.seconds, "lr": settings.learning_rate,
                   "momentum": settings.momentum, "run_steps": int(sum(r.steps for r in pt.runs))}
    return result, diagnostics


# ----------------------------------------------------------------------------- registry
def builtin_kinds() -> Mapping[str, PointKind]:
    """The registry of point kinds (read-only mapping name -> :class:`PointKind`)."""
    kinds = (
        PointKind("theory", "theory solver at one alpha on one branch",
                  _theory_params, _theory_normalize, _theory_compute, numerics=("theory",)),
        PointKind("transition", "alpha_c, alpha_l and spinodals for one model",
                  _transition_params, _transition_normalize, _transition_compute,
                  numerics=("theory",)),
        PointKind("curve", "one theory branch followed in alpha",
                  _curve_params, _curve_normalize, _curve_compute, numerics=("theory",)),
        PointKind("simulation", "gradient descent at finite d",
                  _sim_params, _sim_normalize, _sim_compute, seeded=True, numerics=("sim",)),
        PointKind("basins", "runs from random starts at one (alpha, omega): state reached per seed",
                  _basin_params, _basin_normalize, _basin_compute, seeded=True, numerics=("sim",)),
        PointKind("selftest", "cheap deterministic test function (store/backends tests)",
                  lambda: _SELFTEST_PARAMS, _selftest_normalize, _selftest_compute,
                  seeded=True),
    )
    return MappingProxyType({k.name: k for k in kinds})


def get_kind(name: str) -> PointKind:
    """The point kind called ``name`` (``ValueError`` listing the known ones otherwise)."""
    kinds = builtin_kinds()
    if name not in kinds:
        raise ValueError(f"unknown point kind {name!r}; choose from {', '.join(kinds)}")
    return kinds[name]
