"""The trainable value gain ``V = v I_d`` in the theory (docs/model.md (6.5)).

The gain is a global order parameter: at fixed ``v`` the saddle-point equations are those of the
identity value with the loss ``ell(h; T, v) = 1/2 tr((T - v S) C (T - v S)^T)``
(:class:`attnphase.theory.saddle.Saddle` with ``value = "gain"`` solves them at
``v = spec.value_gain``), and the training error is minimised over ``v``. By the stationarity of
the free energy in the other unknowns (docs/model.md (4.1)) its derivative in ``v`` is the
explicit one, ``alpha E[d ell / d v]`` at the proximal minimisers, so the minimiser solves

    v = E[tr(T C S^T)] / E[tr(S C S^T)]        (S = S(hhat), the trained fields of (3.2))

:func:`solve_gain` finds it by a secant search on the coarse rule (warm-started solves), then
solves the branch at that gain on the refined rules (docs/model.md (7.3), (7.5)), evaluates the
stationarity there on the fine rules (the standard error over the rules is the gain's error
estimate) and, where the fine rules move the gain by more than that and by enough to move an overlap by a
tenth of the error target, takes one secant step with the coarse slope and solves the refined
point again. :func:`gain_transition` locates ``alpha_c``
(docs/model.md (5.2)) between the two branches, each at its own optimal gain.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec, check_alpha
from attnphase.theory.branches import BranchPoint, solve_point
from attnphase.theory.fine_rules import fine_union
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.roots import illinois_root
from attnphase.theory.saddle import DataStep, Saddle
from attnphase.theory.target import solve_refined

#: the coarse secant search stops when the gain changes by less than this (absolute)
GAIN_TOL = 1e-5
#: coarse solves at most in the secant search
MAX_COARSE = 12


def gain_update(sd: Saddle, ds: DataStep) -> float:
    """The stationary gain ``E[tr(T C S^T)] / E[tr(S C S^T)]`` at the minimisers of a data step
    (docs/model.md (6.5))."""
    a, b = sd.gain_sums(ds)
    return a / b


def update_by_rule(update: Callable[[Saddle, DataStep], Any], sd: Saddle, ds: DataStep, n: int) -> np.ndarray:
    """``update`` (the stationary value gain :func:`gain_update`, or the head gains of
    :func:`attnphase.theory.head_gains.head_gain_update`) on each of the ``n`` equal parts of a
    union rule (the fine rules of a refinement, stored one after the other), stacked."""
    N = sd.rule.size // n
    out = []
    for k in range(n):
        part = slice(k * N, (k + 1) * N)
        sub = Saddle.__new__(Saddle)
        sub.__dict__.update(sd.__dict__)
        sub.rule = dataclasses.replace(sd.rule, x=sd.rule.x[part], w=sd.rule.w[part] * n)
        dsk = DataStep(ds.hats, ds.mean_M, type(ds.prox)(*(a[part] for a in ds.prox.arrays())), ds.w[part],
                       ds.T[part], ds.second[part])
        out.append(update(sub, dsk))
    return np.asarray(out, dtype=float)


@dataclass(frozen=True)
class GainPoint:
    """One branch at one ``alpha`` with the trainable gain at its optimum (docs/model.md (6.5)).

    ``gain``: the optimal ``v``; ``gain_error``: its standard error over the fine rules (``nan``
    without a refinement); ``point``: the branch solved at that gain (its errors, overlaps and
    their estimates, as :func:`attnphase.theory.target.solve_refined` gives them);
    ``slopes``: ``d(q, m, theta, train_loss)/dv`` on the branch at fixed ``alpha`` (coarse rule),
    so ``|slope| * gain_error`` is what the gain's error adds to an overlap's (the training error
    is stationary in ``v``: it moves only at second order); ``history``: the coarse
    ``(v, stationary v)`` pairs of the search."""

    branch: str
    alpha: float
    success: bool
    message: str
    gain: float = math.nan
    gain_error: float = math.nan
    point: BranchPoint | None = None
    slopes: dict[str, float] = field(default_factory=dict)
    history: tuple[tuple[float, float], ...] = ()

    @property
    def train_loss(self) -> float:
        return self.point.train_loss if self.point is not None else math.nan

    @property
    def test_error(self) -> float:
        return self.point.test_error if self.point is not None else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "alpha": self.alpha, "success": self.success, "message": self.message,
                "gain": self.gain, "gain_error": self.gain_error, "slopes": dict(self.slopes),
                "history": [list(h) for h in self.history],
                "point": None if self.point is None else self.point.to_dict()}


def _gain_spec(spec: ModelSpec, v: float) -> ModelSpec:
    return spec.replace(value="gain", value_gain=float(v))


def coarse_point(sp: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
                 warm: BranchPoint | None) -> BranchPoint:
    """``branch`` of ``sp`` on the coarse rule, warm-started from ``warm`` (the point at the
    previous value of a global parameter: the value gain, the head gains), else from its direct
    start: one step of the searches over those parameters."""
    if warm is not None and warm.exists:
        p = solve_point(sp, alpha, branch, settings, start=warm.order_params, jacobian=warm._jacobian,
                        warm=warm._data, error_estimate=False, draft=True, ramp=False)
        if p.exists:
            return p
    return solve_point(sp, alpha, branch, settings, error_estimate=False, draft=True, thorough=True)


def _coarse(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings, v: float,
            warm: BranchPoint | None) -> tuple[BranchPoint, float]:
    """The branch on the coarse rule at gain ``v`` (warm-started from ``warm``) and the stationary
    gain there."""
    sp = _gain_spec(spec, v)
    p = coarse_point(sp, alpha, branch, settings, warm)
    if not p.exists or p._data is None:
        return p, math.nan
    return p, gain_update(make_saddle(sp, alpha, settings), p._data)


def _slopes(p1: BranchPoint, p2: BranchPoint, v1: float, v2: float) -> dict[str, float]:
    if v1 == v2:
        return {}
    return {k: (getattr(p2, k) - getattr(p1, k)) / (v2 - v1) for k in ("q", "m", "theta", "train_loss")}


def solve_gain(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings | None = None,
               refine: bool = True, optimise: bool = True) -> GainPoint:
    """``branch`` at ``alpha`` with the value gain minimising the training error (docs/model.md
    (6.5)); the search starts from ``spec.gain_start`` (``value_gain``, 1 when unset; any
    ``spec.value``: the result is that of ``value = "gain"``). ``refine=False``: the coarse rule
    only. ``optimise=False``: the refined point at the gain ``spec.gain_start`` held fixed (1 for
    the identity value: its own point)."""
    check_alpha(alpha)
    settings = settings or SolverSettings.preset("default")
    v = spec.gain_start if spec.value == "gain" else 1.0
    if not optimise:
        point = solve_refined(_gain_spec(spec, v) if spec.value == "gain" else spec, alpha, branch, settings)
        return GainPoint(branch, float(alpha), point.exists, point.reason, v, 0.0, point)
    hist: list[tuple[float, float]] = []
    pts: list[BranchPoint] = []
    warm = None
    v_prev = r_prev = None
    slope = None
    for _ in range(MAX_COARSE):
        p, vn = _coarse(spec, alpha, branch, settings, v, warm)
        if not p.exists or not math.isfinite(vn):
            return GainPoint(branch, float(alpha), False, f"no {branch} point at gain {v:.6g}: {p.reason}",
                             history=tuple(hist))
        hist.append((v, vn))
        pts.append(p)
        r = vn - v
        if v_prev is not None and r_prev is not None and r != r_prev:
            slope = (r - r_prev) / (v - v_prev)
        warm = p
        if abs(r) < GAIN_TOL:
            break
        v_prev, r_prev = v, r
        # secant on r(v) = v_stationary(v) - v; the first step is the plain update v <- v_stationary
        v = v - r / slope if slope is not None and slope < 0 else vn
    else:
        return GainPoint(branch, float(alpha), False, "the coarse gain search did not converge",
                         history=tuple(hist))
    slopes = _slopes(pts[-2], pts[-1], hist[-2][0], hist[-1][0]) if len(pts) >= 2 else {}
    if not refine or not settings.refine_order:
        return GainPoint(branch, float(alpha), True, "coarse rule only", v, math.nan, pts[-1], slopes, tuple(hist))
    msg = "ok"
    for attempt in range(2):
        sp = _gain_spec(spec, v)
        point = solve_refined(sp, alpha, branch, settings)
        refined = point.refinement
        if not point.exists or refined is None or not refined.applied:
            return GainPoint(branch, float(alpha), False, f"refinement at gain {v:.6g}: {point.reason}", v,
                             math.nan, point, slopes, tuple(hist))
        assert refined.order is not None  # (an applied refinement names its order)
        order = refined.order
        fine, union = fine_union(sp, alpha, replace(settings, refine_order=order), branch)
        assert point.order_params is not None
        ds = union.data_step(point.order_params)
        v_fine = gain_update(union, ds)
        per_rule = update_by_rule(gain_update, union, ds, len(fine))
        err = float(np.std(per_rule, ddof=1) / math.sqrt(len(fine))) if len(fine) > 1 else math.nan
        r = v_fine - v
        # (what the fine rules' offset of the gain moves the overlaps by, relative; the training error
        # is stationary in v)
        moved = max((abs(slopes.get(k, 0.0) * r) / abs(getattr(point, k)) for k in ("q", "m", "theta")
                     if getattr(point, k)), default=0.0)
        small = moved <= 0.1 * (settings.target_error or settings.tol)
        if attempt == 0 and not small and abs(r) > max(err, GAIN_TOL) and slope is not None and slope < 0:
            v = v - r / slope
            msg = f"one fine secant step ({r:+.2e} on the fine rules at the coarse gain)"
            continue
        if abs(r) > max(2.0 * err, GAIN_TOL):
            msg = f"{msg}; the fine rules' stationary gain differs by {r:+.2e} ({err:.1e} standard error)"
        return GainPoint(branch, float(alpha), True, msg, v, max(err, abs(r)), point, slopes, tuple(hist))
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class GainTransition:
    """``alpha_c`` of the trainable gain (docs/model.md (5.2), (6.5)): where the training errors of
    the semantic and positional branches, each at its own optimal gain, cross; ``alpha_c_error``:
    the standard errors of the refined difference over its local slope; ``points``: every
    evaluation ``(alpha, semantic, positional)``."""

    success: bool
    message: str
    alpha_c: float = math.nan
    alpha_c_error: float = math.nan
    points: tuple[tuple[float, GainPoint, GainPoint], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"success": self.success, "message": self.message, "alpha_c": self.alpha_c,
                "alpha_c_error": self.alpha_c_error,
                "points": [{"alpha": a, "semantic": s.to_dict(), "positional": p.to_dict()}
                           for a, s, p in self.points]}


def _diff_of(s: GainPoint, p: GainPoint) -> tuple[float, float]:
    """Training-error difference (semantic minus positional) and its standard error (the fine
    rules' standard errors of the two, combined)."""
    if not (s.success and p.success and s.point is not None and p.point is not None):
        return math.nan, math.nan
    es = [_train_se(pt) for pt in (s.point, p.point)]
    return s.train_loss - p.train_loss, math.hypot(*es)


def _train_se(point: BranchPoint) -> float:
    """The standard error of ``point``'s training error over its fine rules (NaN: none)."""
    se = None if point.refinement is None else point.refinement.error("train_loss")
    return math.nan if se is None else se


def gain_transition(spec: ModelSpec, alphas: Sequence[float], settings: SolverSettings | None = None,
                    max_iter: int = 4, xtol: float = 2e-3, optimise: bool = True,
                    progress: Callable[[int, int], None] | None = None) -> GainTransition:
    """``alpha_c`` with the trainable gain: the training-error difference (semantic minus
    positional, each branch at its optimal gain, :func:`solve_gain`) on the grid ``alphas``, then
    at most ``max_iter`` steps of Illinois regula falsi inside the first bracket where it changes
    sign (:func:`attnphase.theory.roots.illinois_root`, unpadded; a point where a branch fails is
    taken as the bracket's upper side), refined points throughout; the root is the zero of the line through the two evaluations nearest it, its
    error the difference's standard error there over that line's slope. ``optimise=False``: the
    same search at the fixed gain of ``spec`` (the identity value's ``alpha_c`` for comparison).
    ``progress(done, len(alphas))`` is called after each grid point (and with ``done = len(alphas)``
    once the grid scan stops at its bracket)."""
    settings = settings or SolverSettings.preset("default")
    evals: list[tuple[float, GainPoint, GainPoint]] = []

    def diff(a: float) -> float:
        s = solve_gain(spec, a, "semantic", settings, optimise=optimise)
        p = solve_gain(spec, a, "positional", settings, optimise=optimise)
        evals.append((a, s, p))
        return _diff_of(s, p)[0]

    lo = hi = None
    prev = None
    grid = sorted(float(x) for x in alphas)
    for i, a in enumerate(grid):
        fa = diff(a)
        if progress is not None:
            progress(i + 1, len(grid))
        if not math.isfinite(fa):
            continue
        if prev is not None and prev[1] > 0 >= fa:
            lo, hi = prev, (a, fa)
            break
        prev = (a, fa)
    if progress is not None and len(evals) < len(grid):  # (the scan stopped at its bracket)
        progress(len(grid), len(grid))
    if lo is None or hi is None:
        return GainTransition(False, "no sign change of the training-error difference on the grid",
                              points=tuple(evals))
    (a0, f0), (a1, f1) = lo, hi

    def finite_diff(a: float) -> float | None:
        fa = diff(a)
        return fa if math.isfinite(fa) else None

    # (the evaluations it makes are what counts: the root comes from the two nearest it, below)
    illinois_root(finite_diff, a0, a1, f0, f1, xtol, max_iter=max_iter, pad=0.0)
    known = [(a, *_diff_of(s, p)) for a, s, p in evals]
    known = [k for k in known if math.isfinite(k[1])]
    near = sorted({k[0]: k for k in known}.values(), key=lambda k: abs(k[1]))[:2]
    (x0, y0, e0), (x1, y1, _) = near
    slope = (y1 - y0) / (x1 - x0)
    return GainTransition(True, "ok", float(x0 - y0 / slope), float(abs(e0 / slope)), tuple(evals))
