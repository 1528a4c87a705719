"""The branches of fixed points and their continuation in ``alpha`` (docs/model.md (5.1)).

* :data:`BRANCHES`, :data:`MIXED`, :func:`branches_for`: the branches the solver looks for;
  :func:`start_point` their recommended starts, :func:`classify` the branch a fixed point is on;
* :class:`BranchPoint`: one fixed point of one branch at one ``alpha`` (user units);
* :func:`solve_point`: one branch at one ``alpha``, from the recommended start or a warm start,
  with the continuations in ``alpha`` and in the ridge that rescue a direct start;
* :func:`follow_branch`: continuation along a grid of ``alpha`` with warm starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec, check_alpha
from attnphase.spec.problem import positional_axis as positional_axis
from attnphase.theory.branch_point import BRANCHES as BRANCHES
from attnphase.theory.branch_point import DRAFT_TEST_LOG2 as DRAFT_TEST_LOG2
from attnphase.theory.branch_point import DRAFT_TEST_ORDER as DRAFT_TEST_ORDER
from attnphase.theory.branch_point import BranchPoint, branches_for, start_point, to_point
from attnphase.theory.branch_point import overlap_fields as overlap_fields
from attnphase.theory.branch_point import semantic_side as semantic_side
from attnphase.theory.channels import AttentionMap as AttentionMap
from attnphase.theory.classification import CLASSIFY_TOL, MIXED, SPECIALISED
from attnphase.theory.classification import classify as classify
from attnphase.theory.classification import has_mixed as has_mixed
from attnphase.theory.continuation import ArclengthResult, RecoveryBudget, arclength, parabola
from attnphase.theory.estimates import linear_response_estimate
from attnphase.theory.fixed_point import FixedPointResult as FixedPointResult
from attnphase.theory.fixed_point import SolverSettings, is_valid, make_saddle, solve_fixed_point
from attnphase.theory.saddle import DataStep, OrderParams
from attnphase.theory.saddle import Saddle as Saddle
from attnphase.theory.saddle import check_response as check_response


def solve_point(
    spec: ModelSpec,
    alpha: float,
    branch: str = "semantic",
    settings: SolverSettings | None = None,
    start: OrderParams | None = None,
    error_estimate: bool = True,
    jacobian: np.ndarray | None = None,
    warm: DataStep | None = None,
    draft: bool = False,
    thorough: bool = False,
    ramp: bool = True,
    budget: RecoveryBudget | None = None,
) -> BranchPoint:
    """Fixed point of ``branch`` (docs/model.md (5.1)) at ``alpha`` on the solver's rule
    (:func:`solve_fixed_point`, docs/model.md (7.2)), from the recommended start
    (:func:`start_point`, first on the cheaper ``warmup_order`` rule) or from ``start`` (with its
    ``jacobian`` and data step ``warm``: continuation).

    The integration error estimate (``error_estimate``, relative, per unknown) is
    computed by :func:`linear_response_estimate` from ``settings.replicas - 1`` independent rules.
    ``draft``: an intermediate point (its test error on the cheap ``DRAFT_TEST_ORDER`` rule; see
    :func:`final_test_error`). A direct start that does not converge is retried by continuation
    from smaller alphas (:func:`ramp_origins`, :func:`continue_from`); with ``thorough`` (a single solve)
    also one that converged to another branch: at ``L = 3``, ``omega = 0.3`` the positional start
    went trivial at ``alpha = 1.0`` and 1.5 while the branch exists there (continuation from 0.5
    reaches it).
    Below ``lambda = LAM_RAMP[0]`` a continuation in the ridge follows (:func:`_lam_ramp`).
    ``ramp=False``: none of these (the first point of a continuation). ``budget``: the data steps
    this solve spends are charged to it (a continuation's points share one; see
    :class:`RecoveryBudget`).
    """
    check_alpha(alpha)
    settings = settings or SolverSettings()
    if branch not in branches_for(spec):
        raise ValueError(f"unknown branch {branch!r}; choose from {', '.join(branches_for(spec))}")
    check_response(spec, settings.response, (branch,))
    sd = make_saddle(spec, alpha, settings)
    direct = start is None
    if start is None:
        start = sd.from_paper(start_point(spec, branch, sd.F))
        if settings.warmup_order is not None and settings.method == "qmc" and settings.warmup_order < settings.order:
            sd0 = make_saddle(spec, alpha, settings, order=settings.warmup_order)
            res0 = _charged_solve(sd0, start, replace(settings, tol=1e-6), budget)
            if res0.converged:
                start = res0.op
                if jacobian is None:
                    jacobian = res0.jacobian
    res = _charged_solve(sd, start, settings, budget, jacobian=jacobian, warm=warm)
    point = to_point(spec, alpha, branch, sd, res, draft=draft)
    if ramp and direct and not point.exists and (not res.converged or thorough):
        point = _by_continuation(spec, alpha, branch, settings, point, thorough, draft, budget)
    if error_estimate and point.exists and settings.replicas > 1:
        assert point.order_params is not None  # (a point that exists has its order parameters)
        est = linear_response_estimate(spec, alpha, settings, point.order_params, point.test_error)
        point = replace(point, error_estimate=est)
    return point


def _charged_solve(sd: Saddle, start: OrderParams, settings: SolverSettings, budget: RecoveryBudget | None,
                   jacobian: np.ndarray | None = None, warm: DataStep | None = None) -> FixedPointResult:
    """:func:`solve_fixed_point` on ``sd`` within what is left of ``budget`` (where given), which is
    charged the proximal problems the solve's data steps solved (:attr:`Saddle.solved`)."""
    solved = sd.solved
    res = solve_fixed_point(sd, start, settings, jacobian=jacobian, warm=warm,
                            max_solved=None if budget is None else max(budget.left, 0))
    if budget is not None:
        budget.spend(sd.solved - solved)
    return res


def _by_continuation(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings, failed: BranchPoint,
                     thorough: bool, draft: bool, budget: RecoveryBudget | None = None) -> BranchPoint:
    """``branch`` at ``alpha`` by continuation where the direct start gave ``failed``: in
    ``alpha`` from each of :func:`ramp_origins` in turn (:func:`continue_from`), then, where the
    direct start did not converge, in the ridge (:func:`_lam_ramp`; after a start that converged to
    another branch it never arrived: 0 of 45 such ramps over the slow sample of tests/test_box.py),
    all within one :class:`RecoveryBudget` (``budget``, a new one for ``settings`` where none is
    given). The point reached says ``failed``'s reason under ``diagnostics["direct_start"]``; where
    none arrives, ``failed`` with what was tried (and, where the budget ran out, what was not, also
    as ``diagnostics["not_tried"]``) and the alphas where a continuation reached the branch before
    losing it (``diagnostics["reached_at"]``)."""
    budget = budget or RecoveryBudget.for_settings(settings)
    ramped, tried, skipped = None, [], []
    trail: list[BranchPoint] = []  # (every point of the branch the continuations reached)
    for a0 in ramp_origins(alpha, near=thorough):
        if budget.spent:
            skipped.append(f"alpha = {a0:g}")
            continue
        tried.append(f"alpha = {a0:g}")
        ramped = continue_from(spec, alpha, branch, settings, a0, budget, trail=trail)
        if ramped is not None:
            break
    if ramped is None and spec.lam < LAM_RAMP[0] and not failed.converged:
        if budget.spent:
            skipped.append(f"lambda = {LAM_RAMP[0]:g}")
        else:
            tried.append(f"lambda = {LAM_RAMP[0]:g}")
            ramped = _lam_ramp(spec, alpha, branch, settings, budget)
    if ramped is not None:
        if not draft:
            ramped = final_test_error(spec, ramped, settings)
        return replace(ramped, diagnostics={**ramped.diagnostics, "direct_start": failed.reason})
    if tried or skipped:
        notes = [f"nor by continuation from {' or '.join(tried)}"] if tried else []
        if skipped:
            notes.append(f"{budget.message()} before continuations from {' or '.join(skipped)}")
        extra: dict[str, Any] = {"not_tried": skipped} if skipped else {}
        if trail:
            extra["reached_at"] = sorted({p.alpha for p in trail})
        return replace(failed, reason=f"{failed.reason} ({'; '.join(notes)})", diagnostics={**failed.diagnostics, **extra})
    return failed


#: where a direct start does not converge, the branch is continued from these alphas, in turn
#: (see continue_from), then from the halvings of alpha above the first (see ramp_origins)
RAMP_FROM = (0.5, 0.1)
RAMP_STEPS = 4
#: largest ratio of consecutive alphas of that continuation
RAMP_RATIO = 1.5
#: the neighbours ``alpha / RAMP_NEAR`` and ``alpha * RAMP_NEAR`` are the last origins of that
#: continuation: a branch whose direct start works on one side of ``alpha`` only (near an end of the
#: branch, where the start falls to the trivial branch) is followed from there, so a single solve
#: finds the branch wherever a followed range (:func:`follow_branch`) reaches it from a nearby point
RAMP_NEAR = 1.1


def ramp_origins(alpha: float, near: bool = True) -> list[float]:
    """The alphas a failed direct start is continued from, in turn: those of ``RAMP_FROM`` below
    ``alpha``, then ``alpha / 2``, ``alpha / 4``, ... while above ``RAMP_FROM[0]``. A branch whose
    direct start works only below some alpha and that begins above 0.5 is reached from the nearest
    halving: rank 2, ``omega = 0.3``: the mixed start does not converge from ``alpha`` 2.5 on,
    while the mixed branch continues to 12 and is the global minimum there (continued from 1.8 to
    3.6, from 1.5 to 6 and 12; from 0.5 it is lost on the way, since the branch begins near 0.7).
    ``RAMP_FROM`` goes first: where it reaches a point that point is kept (``L = 3``, ``alpha =
    1.5``: from 0.75 the coarse positional point has ``m`` 0.014 instead of 0.058, whose refinement
    fails only after the full-solver fallback, 4 s more for the same verdict). The neighbours
    ``alpha / RAMP_NEAR`` and ``alpha * RAMP_NEAR`` come last (the fixed origins lie on one side
    of ``alpha`` only, and their own direct start fails where the branch's does: the positional
    branch near its ends), with ``near`` only: a single solve (``thorough``) uses them; a followed
    range (:func:`follow_branch`) reaches such points by continuation from its own neighbours."""
    halvings = []
    a = alpha / 2
    while a > RAMP_FROM[0]:
        halvings.append(a)
        a /= 2
    origins = [a0 for a0 in RAMP_FROM if a0 < alpha] + halvings
    if not near:
        return origins
    return origins + [a0 for a0 in (alpha / RAMP_NEAR, alpha * RAMP_NEAR) if not any(math.isclose(a0, b) for b in origins)]


def continue_from(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
                  origin: float, budget: RecoveryBudget | None = None,
                  first: BranchPoint | None = None, trail: list[BranchPoint] | None = None) -> BranchPoint | None:
    """The branch continued from ``origin`` up to ``alpha`` (geometric steps, at least
    ``RAMP_STEPS`` and at most a factor ``RAMP_RATIO`` each), for a direct start that did not
    converge (or, in a single solve, converged to another branch): the starts
    (:func:`start_point`) were tuned for ``L = 2``, ``r = 1``; at ``L = 3`` or ``r = 2``,
    ``alpha = 1.5`` the trivial start left the valid domain while the branch is reached by
    continuation (before the damped step in ``V^-1`` of :func:`solve_fixed_point`, which converges
    there directly; at ``alpha = 50`` the direct start collapses to ``q = 0`` instead). The order
    parameters change on the scale of ``log alpha`` (``V`` falls like ``1/alpha``): with four
    equal steps from 0.5 to 50 the positional and trivial branches (omega
    0.3) were not reached, with factors of at most 1.5 (12 steps) both are. From ``alpha = 0.5``
    the trivial branch of ``L >= 5`` was not reached either (the start left the valid domain at
    0.5 and 1 while the branch continues smoothly from 0.2); from 0.1 it is. ``None`` if the
    continuation does not arrive (or ``budget``, a new :class:`RecoveryBudget` where none is
    given, runs out on the way). ``first``: the point at ``origin``, where already solved
    (:func:`origin_point`); ``trail``: a list that receives the points of the branch reached on the
    way (:func:`continue_through`)."""
    budget = budget or RecoveryBudget.for_settings(settings)
    n = max(RAMP_STEPS, int(np.ceil(abs(np.log(alpha / origin)) / np.log(RAMP_RATIO) - 1e-9)))
    grid = np.geomspace(origin, alpha, n + 1)
    if first is None:
        first = origin_point(spec, origin, branch, settings, budget)
    return continue_through(first, [(spec, float(a)) for a in grid[1:]], branch, settings, budget, trail)


def origin_point(spec: ModelSpec, origin: float, branch: str, settings: SolverSettings,
                 budget: RecoveryBudget | None = None) -> BranchPoint:
    """The first point of a continuation from ``origin`` (:func:`continue_from`,
    :func:`semantic_by_arclength`): the direct start there, without rescue."""
    return solve_point(spec, origin, branch, settings, error_estimate=False, draft=True, ramp=False, budget=budget)


def continue_through(last: BranchPoint, steps: list[tuple[ModelSpec, float]], branch: str,
                     settings: SolverSettings, budget: RecoveryBudget | None = None,
                     trail: list[BranchPoint] | None = None) -> BranchPoint | None:
    """Continuation of ``branch`` from the point ``last`` through ``steps`` (model, alpha), each
    point started from the previous one (its Jacobian and minimisers); ``None`` if it is lost
    (or ``budget`` runs out before the last step). ``trail`` (a list) receives every point of the
    branch reached, ``last`` first."""
    for sp, a in steps:
        if not last.exists or (budget is not None and budget.spent):
            return None
        if trail is not None:
            trail.append(last)
        last = solve_point(sp, a, branch, settings, start=last.order_params, error_estimate=False,
                           jacobian=last._jacobian, warm=last._data, draft=True, budget=budget)
    return last if last.exists else None


#: ridges of the continuation in lambda (see _lam_ramp), then the spec's own
LAM_RAMP = (0.01, 0.003, 0.001, 0.0003)


def _lam_ramp(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
              budget: RecoveryBudget | None = None) -> BranchPoint | None:
    """The branch continued in the ridge from ``lambda = LAM_RAMP[0]`` (where the starts of
    :func:`start_point` were tuned) down to ``spec.lam``, for a direct start (and the continuations in
    ``alpha``) that failed at a smaller ridge: ``V`` grows as ``lambda`` falls (trivial branch at
    ``alpha = 1``, ``omega = 0.3``: ``V`` 28.6, 66, 131, 245, 552 at ``lambda`` 0.01, 0.003,
    0.001, 3e-4, 0) and the start (``V = 14.6``) left the valid domain at ``lambda = 0``. The
    first point is the direct start at ``LAM_RAMP[0]``, not rescued in turn by continuations in
    ``alpha`` (which doubled the ramp's cost; no ramp arrived over the slow box sample with them
    either, and at ``lambda = 0``, ``alpha = 4`` they reached only a positional point with ``m``
    -0.0075 that the fine rules do not resolve). ``None`` if the continuation does not arrive."""
    lams = [lam for lam in LAM_RAMP if lam > spec.lam] + [spec.lam]
    first = solve_point(spec.replace(lam=lams[0]), alpha, branch, settings, error_estimate=False, draft=True,
                        ramp=False, budget=budget)
    return continue_through(first, [(spec.replace(lam=lam), alpha) for lam in lams[1:]], branch, settings, budget)


def final_test_error(spec: ModelSpec, point: BranchPoint, settings: SolverSettings) -> BranchPoint:
    """``point`` with its test error on the default rule, if it was computed as a draft."""
    if not point.diagnostics.get("draft_test_error") or point.order_params is None:
        return point
    sd = make_saddle(spec, point.alpha, settings)
    diag = {k: v for k, v in point.diagnostics.items() if k != "draft_test_error"}
    return replace(point, test_error=float(sd.test_error(point.order_params)), diagnostics=diag)

def _extrapolate(p1: BranchPoint, p2: BranchPoint, alpha: float) -> OrderParams | None:
    """Linear extrapolation of the order parameters through two solved points (``None`` if the
    result leaves the valid domain)."""
    if p1.order_params is None or p2.order_params is None or p1.alpha == p2.alpha:
        return None
    x1, x2 = p1.order_params.to_vector(), p2.order_params.to_vector()
    t = (alpha - p2.alpha) / (p2.alpha - p1.alpha)
    L, F = p2.order_params.m.shape
    op = OrderParams.from_vector(x2 + t * (x2 - x1), L, F, p2.order_params.theta.shape[1])
    return op if is_valid(op) else None


#: the overlaps (user units, :meth:`BranchPoint.summary`) that define a branch (docs/model.md (5.1))
DEFINING = {"semantic": ("theta",), "positional": ("m",), MIXED: ("theta", "m"), SPECIALISED: ("theta", "m")}
#: halvings of a step on which a followed branch was lost (:func:`bridge`): the end of the branch
#: is bracketed to ``2^-END_HALVINGS`` of the grid's step
END_HALVINGS = 4
#: iterations of a probe between the point held and the lost one (:func:`bridge`): near an end of
#: the branch the damped iteration slows down (sigma = 1, alpha 0.528: 324 iterations, 20 s, to
#: fail); a probe that has not converged in these counts as lost, which narrows the bracket by one
#: halving at most
BRIDGE_MAX_ITER = 80
#: at an end the defining overlap's vertex (:func:`locate_end`) below this fraction of its value at
#: the last point held is a collapse onto the trivial branch (``alpha - alpha* ~ overlap^2``, a
#: pitchfork), above it a fold (the branch turns back at a finite overlap)
COLLAPSE_FRACTION = 0.5
#: an end where the continuation converges to the trivial branch from a point whose defining overlap
#: is below this many ``CLASSIFY_TOL`` is a collapse onto it (the branch merges with the trivial one
#: within the resolution of the classification, :func:`classify`)
COLLAPSE_NEAR = 3.0


def _warm_step(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
               held: Sequence[BranchPoint], secant: bool = True) -> BranchPoint:
    """``branch`` at ``alpha`` warm-started from the last point of ``held`` (order parameters,
    Jacobian, minimisers), with the secant predictor through the last two (``secant``)."""
    last = held[-1]
    start = last.order_params
    if secant and len(held) >= 2:
        start = _extrapolate(held[-2], last, alpha) or start
    return solve_point(spec, alpha, branch, settings, start=start, error_estimate=False, jacobian=last._jacobian,
                       warm=last._data)


def bridge(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings, held: Sequence[BranchPoint],
           failed: BranchPoint) -> tuple[BranchPoint | None, dict[str, Any] | None]:
    """Continuation of ``branch`` from the points ``held`` (in the order followed, the last one
    nearest) to ``alpha``, where the full step gave ``failed``: the step is halved towards
    ``alpha`` (each half warm-started from the last point held, at most ``BRIDGE_MAX_ITER``
    iterations, then the full rest tried again) at most ``END_HALVINGS`` times. Returns ``(the point at alpha, None)`` where the continuation
    arrives, else ``(None, the end)``: :func:`locate_end` on the bracket left, whose one side the
    branch was held at and whose other side it was not."""
    pts = list(held[-3:])
    bad, last_failed = float(alpha), failed
    probe = replace(settings, max_iter=min(settings.max_iter, BRIDGE_MAX_ITER))
    for _ in range(END_HALVINGS):
        mid = 0.5 * (pts[-1].alpha + bad)
        pt = _warm_step(spec, mid, branch, probe, pts)
        if not pt.exists:
            bad, last_failed = mid, pt
            continue
        pts.append(pt)
        if bad == alpha:
            pt = _warm_step(spec, alpha, branch, settings, pts)
            if pt.exists:
                return pt, None
            last_failed = pt
    end = locate_end(branch, pts, bad, last_failed)
    if end["kind"] != "lost":
        return None, end
    return _end_by_arclength(spec, alpha, branch, settings, pts[-1], end)


#: points of the pseudo-arclength walk that looks for the end of a branch the halved steps lost
#: (:func:`_end_by_arclength`)
END_ARC_POINTS = 30


def _end_by_arclength(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings, last: BranchPoint,
                      lost: dict[str, Any]) -> tuple[BranchPoint | None, dict[str, Any] | None]:
    """Where the halved steps lost the branch without a fold or collapse in sight (``lost``, from
    :func:`locate_end`): pseudo-arclength continuation (:func:`arclength`, docs/model.md (7.6)) from
    the last point held towards ``alpha`` on the same rule, which passes where the damped iteration
    falls off. A fold it turns at, or the trivial branch it meets (the defining overlap changes
    sign, or the point is classified trivial), is the end; where it reaches ``alpha`` and the
    damped iteration holds the point from there, that point; otherwise ``lost`` with what the walk
    said."""
    if last.order_params is None:
        return None, lost
    r = arclength(spec, last.order_params, last.alpha, alpha, branch, settings, max_points=END_ARC_POINTS)
    up = alpha > last.alpha
    how = "pseudo-arclength continuation"
    if r.fold is not None:
        key = "theta" if branch == "semantic" else "m"
        x_e = r.fold_theta if key == "theta" else r.fold_m
        msg = (f"the {branch} branch ends at a fold at alpha = {r.fold:.4g} ({key} {x_e:.3g} there; {how} from "
               f"alpha {last.alpha:.4g})")
        return None, {**lost, "kind": "fold", "alpha": float(r.fold), "overlap": key, "overlap_at_end": x_e,
                      "message": msg}
    meet = _meets_trivial(r) if branch in DEFINING else None
    if meet is not None:
        msg = (f"the {branch} branch collapses onto the trivial branch {'above' if up else 'below'} alpha = "
               f"{meet:.4g} ({how} from alpha {last.alpha:.4g})")
        return None, {**lost, "kind": "collapse", "alpha": meet, "overlap_at_end": 0.0, "message": msg}
    if r.success and r.reached is not None and last.order_params is not None:
        L, F = last.order_params.m.shape
        start = OrderParams.from_vector(r.reached.x, L, F, last.order_params.theta.shape[1])
        pt = solve_point(spec, alpha, branch, settings, start=start, error_estimate=False)
        if pt.exists:
            return pt, None
    return None, {**lost, "message": f"{lost['message']}; {how}: {r.message}"}


def _meets_trivial(r: ArclengthResult) -> float | None:
    """The ``alpha`` where a pseudo-arclength walk met the trivial branch (its defining overlap
    changed sign, or its last point is classified trivial), ``None`` where it did not."""
    if r.rejoins is not None and r.rejoins_branch == "trivial":
        return float(r.rejoins)
    if len(r.points) >= 2 and r.points[-1].branch == "trivial":
        return float(r.points[-1].alpha)
    return None


def locate_end(branch: str, held: Sequence[BranchPoint], bad: float, failed: BranchPoint) -> dict[str, Any]:
    """Where and how ``branch`` ends between its last point held (``held[-1]``) and ``bad``, where
    the continuation gave ``failed``. Near an end ``alpha`` is a parabola in the overlap that defines
    the branch, ``alpha - alpha_e ~ (x - x_e)^2`` (a fold at ``x_e != 0``; a pitchfork onto the trivial
    branch at ``x_e = 0``): the parabola through the last three points held gives ``alpha_e`` (kept
    inside the bracket) and ``x_e``. ``kind``: ``"collapse"`` where ``|x_e|`` is below
    ``COLLAPSE_FRACTION`` of ``|x|`` at the last point (the branch collapses onto the trivial one),
    ``"fold"`` otherwise; also ``"collapse"`` where ``failed`` went to the trivial branch (or, not
    converged, had the overlap below ``CLASSIFY_TOL``) from a last point whose overlap is below
    ``COLLAPSE_NEAR * CLASSIFY_TOL`` (then at the bracket's middle);
    ``"lost"`` where no end is located (fewer than three points, or the parabola does not turn
    towards ``bad``; always for the trivial branch, which no overlap defines). The record (JSON-ready): ``kind``, ``alpha``, ``held``
    (the last ``alpha`` held), ``bracket``, the overlap and its value at the end, ``found``: the branch
    ``failed`` was classified as, ``message``: the end in words."""
    last = held[-1]
    a_held = float(last.alpha)
    up = bad > a_held
    lo, hi = min(a_held, bad), max(a_held, bad)
    key = min(DEFINING.get(branch, ("m",)), key=lambda k: abs(getattr(last, k)))
    kind, where, x_e = "lost", 0.5 * (lo + hi), math.nan
    pts = held[-3:]
    xs = np.array([getattr(p, key) for p in pts], dtype=float)
    al = np.array([p.alpha for p in pts], dtype=float)
    if branch in DEFINING and len(pts) == 3 and np.all(np.isfinite(xs)) and np.ptp(xs) > 0:
        c2, c1, c0, x0 = parabola(xs.tolist(), al.tolist())
        if c2 != 0:
            xv = x0 - c1 / (2 * c2)
            av = c0 - c1 * c1 / (4 * c2)
            turns = (av - a_held) * (1 if up else -1) >= -1e-12 and (c2 < 0) == up
            if turns and abs(av - a_held) <= 2 * (hi - lo):
                where = float(np.clip(av, lo, hi))
                x_e = xv
                kind = "collapse" if abs(xv) < COLLAPSE_FRACTION * abs(getattr(last, key)) else "fold"
    found = failed.converged_to
    to_zero = found == "trivial" or (not failed.converged and abs(getattr(failed, key)) < CLASSIFY_TOL)
    if branch in DEFINING and kind != "collapse" and to_zero and abs(getattr(last, key)) < COLLAPSE_NEAR * CLASSIFY_TOL:
        kind, where, x_e = "collapse", 0.5 * (lo + hi), 0.0  # (merged within the classification's resolution)
    side = "above" if up else "below"
    if kind == "collapse":
        msg = (f"the {branch} branch collapses onto the trivial branch {side} alpha = {where:.4g} ({key} -> 0; held "
               f"by continuation to alpha {a_held:.4g})")
    elif kind == "fold":
        msg = (f"the {branch} branch ends at a fold at alpha = {where:.4g} ({key} {x_e:.3g} there; held by "
               f"continuation to alpha {a_held:.4g})")
    else:
        msg = (f"the {branch} branch was lost between alpha {lo:.4g} and {hi:.4g} (continuation in halved steps; "
               "no fold or collapse located)")
    return {"kind": kind, "alpha": where, "held": a_held, "bracket": [lo, hi], "overlap": key,
            "overlap_at_end": None if math.isnan(x_e) else x_e, "found": found, "message": msg}


def with_end(point: BranchPoint, end: dict[str, Any]) -> BranchPoint:
    """An absent ``point`` that lies past the end ``end`` of its branch (:func:`locate_end`): the
    end is added to ``diagnostics["ends"]`` and the reason names every end so added (in increasing
    ``alpha``), then the point's own reason (kept as ``diagnostics["here"]``)."""
    ends = [*point.diagnostics.get("ends", []), end]
    here = point.diagnostics.get("here", point.reason)
    reason = "; ".join(e["message"] for e in sorted(ends, key=lambda e: e["alpha"])) + f"; here: {here}"
    return replace(point, reason=reason, diagnostics={**point.diagnostics, "ends": ends, "here": here})


def follow_branch(
    spec: ModelSpec,
    alphas: Sequence[float] | np.ndarray,
    branch: str,
    settings: SolverSettings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[BranchPoint]:
    """Continuation of ``branch`` along ``alphas`` (warm start from the previous point, with a
    secant predictor).

    Where the branch is lost (the warm start converges elsewhere) the step is halved towards
    the lost ``alpha`` (:func:`bridge`); where that does not arrive the end of the branch is
    located and named (:func:`locate_end`: a fold, or a collapse onto the trivial branch), and
    the points past it carry it (``reason``, ``diagnostics["ends"]``). The direct start is tried
    at every point not reached by continuation; where it finds the branch again after an end, the
    branch is followed back from there the same way (filling the points it reaches, locating its
    other end otherwise), and so are the points before the first one found. Points where the
    branch is not found are returned with ``exists = False``. So a followed branch has no hole:
    between two points where it exists it exists at every ``alpha`` of the grid, or an end is
    located in between (:func:`branch_holes`).
    """
    check_alpha([float(a) for a in alphas])
    settings = settings or SolverSettings()
    grid = [float(a) for a in alphas]
    out: list[BranchPoint] = []
    found: list[BranchPoint] = []  # the points where the branch exists reached forward, in order
    ended = False  # an end was located since the last point of found
    for i, a in enumerate(grid):
        start, jac, warm = None, None, None
        if found:
            last = found[-1]
            start, jac, warm = last.order_params, last._jacobian, last._data
            if len(found) >= 2:  # secant predictor along the branch
                start = _extrapolate(found[-2], last, a) or start
        pt = solve_point(spec, a, branch, settings, start=start, error_estimate=False, jacobian=jac,
                         warm=warm)
        end = None
        if not pt.exists and found and not ended:
            bridged, end = bridge(spec, a, branch, settings, found, pt)
            if bridged is not None:
                pt = bridged
        if not pt.exists and found:
            pt2 = solve_point(spec, a, branch, settings, start=None, error_estimate=False)
            if pt2.exists:
                pt, end = pt2, None
        if end is not None:
            pt = with_end(pt, end)
            ended = True
        elif ended and not pt.exists:
            pt = with_end(pt, out[-1].diagnostics["ends"][-1])
        out.append(pt)
        if pt.exists:
            if out[:-1] and not out[-2].exists and any(p.exists for p in out[:-1]):
                _follow_back(spec, grid, branch, settings, out, i)  # (found again past an end)
            found.append(pt)
            ended = False
        if progress is not None:
            progress(i + 1, len(grid))
    # points before the first one found (the direct start converged elsewhere there, e.g. the
    # mixed start at the largest alpha): continued backwards from the first found point
    first = next((i for i, p in enumerate(out) if p.exists), None)
    if first:
        _follow_back(spec, grid, branch, settings, out, first)
    return out


def _follow_back(spec: ModelSpec, grid: list[float], branch: str, settings: SolverSettings, out: list[BranchPoint],
                 k: int) -> None:
    """``out[k]`` (a point of the branch) continued backwards over the absent points before it,
    in place: each reached point replaces the absent one; where the branch is lost, its end is
    located (:func:`bridge`) and added to the absent points of that gap."""
    held = [out[k]]
    j = k - 1
    while j >= 0 and not out[j].exists:
        pt = _warm_step(spec, grid[j], branch, settings, held, secant=False)
        if not pt.exists:
            bridged, end = bridge(spec, grid[j], branch, settings, held, pt)
            if bridged is None:
                assert end is not None
                for g in range(j, -1, -1):
                    if out[g].exists:
                        break
                    out[g] = with_end(out[g], end)
                return
            pt = bridged
        out[j] = pt
        held.append(pt)
        j -= 1


def branch_holes(points: Sequence[BranchPoint]) -> list[float]:
    """The ``alpha`` of every point of a followed branch (:func:`follow_branch`, in grid order)
    where the branch is absent between two points where it exists, with no end of the branch
    (a fold or a collapse, ``diagnostics["ends"]``) located between those two points."""
    have = [k for k, p in enumerate(points) if p.exists]
    holes: list[float] = []
    for k0, k1 in zip(have[:-1], have[1:], strict=True):
        if k1 == k0 + 1:
            continue
        lo, hi = sorted((points[k0].alpha, points[k1].alpha))
        ends = [e for p in points[k0 + 1:k1] for e in p.diagnostics.get("ends", [])]
        if not any(e["kind"] in ("fold", "collapse") and lo <= e["alpha"] <= hi for e in ends):
            holes.extend(p.alpha for p in points[k0 + 1:k1])
    return holes


#: points past a fold that the pseudo-arclength continuation of :func:`semantic_by_arclength` follows on
#: the far side of the branch (to where it meets another branch)
PAST_FOLD = 30


def semantic_by_arclength(spec: ModelSpec, alpha: float, settings: SolverSettings, origin: float,
                          p0: BranchPoint | None = None,
                          nearer: BranchPoint | None = None) -> tuple[BranchPoint | None, str | None]:
    """The semantic branch from its point at ``origin`` to ``alpha`` by pseudo-arclength
    continuation (:func:`~attnphase.theory.continuation.arclength`, docs/model.md (7.6)) on the rule of ``settings``, for
    :func:`attnphase.theory.target.solve_refined` where the continuation with warm starts lost it: ``(the point at alpha,
    None)``, or ``(None, why)`` (``None`` where not even the origin was found), e.g. that the
    branch ends at a fold between ``alpha`` and ``origin`` (causal student, ``omega = 0.3``:
    ``alpha = 1.5`` lies below the semantic branch's fold, docs/variants.md). ``p0``: the point at
    ``origin`` (:func:`origin_point`), where already solved. ``nearer``: a point of the branch
    closer to ``alpha`` (the last one the warm-start continuation reached), the walk's start where
    its correction holds it (not the causal point at 1.78 on the order-9 rule, near the fold), else
    the origin: the two-head semantic branch at ``alpha = 2``, ``omega = 0.3``, reached at 2.38,
    folds at 2.28, 22 points from 4."""
    end = None
    if nearer is not None and nearer.exists and nearer.order_params is not None:
        end = arclength(spec, nearer.order_params, nearer.alpha, alpha, "semantic", settings, past_fold=PAST_FOLD)
        start = nearer
        end = end if end.points else None  # (no points: the correction did not hold the start)
    if end is None:
        if p0 is None:
            p0 = origin_point(spec, origin, "semantic", settings)
        if not p0.exists or p0.order_params is None:
            return None, None
        end = arclength(spec, p0.order_params, origin, alpha, "semantic", settings, past_fold=PAST_FOLD)
        start = p0
    if not end.success or end.reached is None:
        return None, end.message
    assert start.order_params is not None
    L, F, rs = start.order_params.m.shape[0], start.order_params.m.shape[1], start.order_params.theta.shape[1]
    at = OrderParams.from_vector(end.reached.x, L, F, rs)
    pt = solve_point(spec, alpha, "semantic", settings, start=at, error_estimate=False, draft=True, ramp=False)
    return (pt, None) if pt.exists else (None, f"the point reached ({end.message}) is not a fixed point of the solver")
