"""A single solve on the multi-fidelity path, raised to the error target (docs/model.md (7.5)).

:func:`solve_refined` solves one branch at one ``alpha`` on the solver's coarse rule, refines it
(:func:`attnphase.theory.refinement.refine_point`) and, with ``settings.target_error``, raises the
refinement order until the error estimate meets the target (:func:`orders_to_target`).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import (
    MIXED,
    BranchPoint,
    continue_from,
    final_test_error,
    origin_point,
    semantic_by_arclength,
    solve_point,
)
from attnphase.theory.continuation import RecoveryBudget
from attnphase.theory.diagnostics import ErrorTarget, Refinement, TargetStep
from attnphase.theory.estimates import linear_response_estimate
from attnphase.theory.fixed_point import TARGET_KEYS, SolverSettings
from attnphase.theory.refinement import (
    fine_absence,
    is_refined,
    left_branch,
    mark_unresolved,
    mid_rule_settings,
    refine_point,
    settled_unresolved,
    unresolved_overlap,
)


def solve_refined(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings) -> BranchPoint:
    """One branch at one ``alpha`` by the multi-fidelity path: the fixed point on the solver's
    (coarse) rule, then :func:`refine_point` to ``settings.tol`` on the fine rules, whose standard
    error is the error estimate. Where the refinement does not converge the coarse point is
    returned with the reason in its ``refinement`` and the linear-response error estimate
    of the coarse rule (seen for ``rank = 2``: the coarse rule's ``m = 0`` semantic point is not a
    fixed point of the fine rules, which drift to the mixed branch; docs/variants.md), unless the
    overlap that defines the branch is not resolved there (:func:`coarse_absence`). Where the coarse
    solve finds no point of the branch, its refinement fails or the fine rules do not resolve it,
    the branch is continued on a finer rule (:func:`_refine_by_continuation`): a semantic or mixed
    point down from larger ``alpha`` (before the full-solver fallback), a positional one up from
    smaller ``alpha``."""
    if not settings.refine_order:
        return solve_point(spec, alpha, branch, settings, thorough=True)
    coarse = solve_point(spec, alpha, branch, settings, error_estimate=False, draft=True, thorough=True)
    # (a semantic or mixed point of one head whose refinement fails is first continued from above, the
    # full-solver fallback comes after that: it never rescued such a point, and costs ~10 s where it
    # fails. Several heads take the fallback first: at L = 2, omega = 0.3, alpha = 2 the two-head
    # semantic branch continued down from alpha = 4 ends at a fold near 2.75 on the order-9 rule, which
    # cost 15 s of a 48 s solve (preset fast), and the fallback then converged in 73 iterations)
    above_first = branch in ("semantic", MIXED) and spec.heads == 1
    point = refine_point(spec, coarse, settings, tol=settings.tol, fallback=not above_first,
                         keep_fine=bool(settings.target_error))
    marked = mark_unresolved(point)  # (marked is not point: the fine rules do not confirm the branch)
    if not is_refined(point) or marked is not point:
        retry, tried = _refine_by_continuation(spec, alpha, branch, settings, point if marked is point else marked)
        if retry is not None and mark_unresolved(retry[1]) is retry[1]:
            coarse, point = retry
            marked = point
        elif above_first and point.exists and marked is point and not is_refined(point):
            point = refine_point(spec, coarse, settings, tol=settings.tol)  # (now with the fallback)
            if tried:
                point = _with_retry(point, tried)
            marked = mark_unresolved(point)
        elif tried and (not marked.exists):
            marked = replace(marked, reason=f"{marked.reason} (nor {tried})")
            if not point.exists:
                point = coarse = marked
        elif tried:  # (marked is point here: a point the fine rules do not confirm was caught above)
            point = marked = _with_retry(point, tried)
    if marked is not point:
        return marked
    if not is_refined(point):
        point = coarse = final_test_error(spec, replace(coarse, diagnostics=point.diagnostics,
                                                        refinement=point.refinement,
                                                        error_estimate=point.error_estimate,
                                                        error_target=point.error_target), settings)
        if coarse.exists and settings.replicas > 1:
            assert coarse.order_params is not None  # (a point that exists has its order parameters)
            est = linear_response_estimate(spec, alpha, settings, coarse.order_params, coarse.test_error)
            point = coarse = replace(coarse, error_estimate=est)
            why = coarse_absence(point)
            if why is not None:
                return replace(point, exists=False, reason=f"{branch} branch not resolved: {why}")
    if settings.target_error and coarse.exists:
        # (a finer rule may no longer resolve the branch: the L = 3 positional point at
        # alpha 1.5, omega 0.3 has m 0.058 / 0.014 / 0.005 on 2^8 x 4 / 2^11 x 4 / 2^12 x 4 nodes)
        point = mark_unresolved(_refine_to_target(spec, point, settings))
    return point


#: where a single solve's refinement fails, a semantic or mixed branch (which ends towards small
#: ``alpha``, at a spinodal) is continued downward from ``RAMP_DOWN * alpha``, a positional one upward
#: from ``alpha / RAMP_DOWN``, on a rule one order below the fine rules
RAMP_DOWN = 2.0


def _refine_by_continuation(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
                            failed: BranchPoint) -> tuple[tuple[BranchPoint, BranchPoint] | None, str]:
    """A second try where the coarse solve found no point of the branch, its refinement did not
    converge or the fine rules did not resolve it: a semantic (or mixed) branch continued downward
    from ``RAMP_DOWN * alpha``, a positional one upward from ``alpha / RAMP_DOWN``, on the rule one
    order below the fine rules (:func:`continue_from`), then refined. Returns ((that point, its
    refinement), what was done) if the refinement converges and resolves the branch, else
    (``None``, what was tried).

    Near the end of a branch the coarse rule can sit on a different part of it than the fine
    rules: causal student, ``omega = 0.3``, ``alpha = 1.75``: ``theta`` = 0.202 on 2^8 x 4 nodes
    (where the branch ends near 1.7) against 0.349 on 2^11 x 4 nodes (ending near 1.61), and the
    refinement from 0.202 falls towards the trivial branch; the direct start on the finer rule
    goes trivial too, while the branch continued from larger ``alpha`` is reached
    (docs/variants.md).

    The positional start's damped iteration can leave its branch at large ``alpha``: tied and
    causal students, ``omega = 0.3``, ``alpha = 3.6``: the coarse rule's point has ``m`` 0.011 and
    0.08, not resolved on the fine rules, while the branch continued from 1.8 has ``m`` 0.27, as
    the direct start finds at 3.5 and 3.7.

    Not tried where the coarse rule has no point of the branch near ``alpha``
    (:func:`converged_elsewhere`, the neighbour ``alpha * RAMP_NEAR`` or ``alpha / RAMP_NEAR``
    included): for the finer rule to find the branch, the two rules' ends of it would have to
    differ by more than a factor ``RAMP_NEAR`` (1.7 and 1.61 above). Over the slow sample of
    tests/test_box.py (64 points, every variant) this try was made 110 times and found the branch
    3 times, after a coarse point that existed or a coarse solve that did not converge; the 85
    tries it now skips found nothing, in 0.2 s each (median), up to 3 s (7 s at the untied point
    of docs/solver.md whose origin's iteration creeps to the trivial branch)."""
    mid_settings = mid_rule_settings(settings)
    if branch not in ("semantic", MIXED, "positional") or mid_settings is None or converged_elsewhere(failed):
        return None, ""
    origin = alpha / RAMP_DOWN if branch == "positional" else RAMP_DOWN * alpha
    how = f"continued {'up' if branch == 'positional' else 'down'} from alpha {origin:g} on order {mid_settings.order}"
    budget = RecoveryBudget.for_settings(mid_settings)  # (the origin's solve and the continuation in alpha)
    p0 = origin_point(spec, origin, branch, mid_settings, budget)  # (the first point of both continuations below)
    trail: list[BranchPoint] = []
    mid = continue_from(spec, alpha, branch, mid_settings, origin, budget, first=p0, trail=trail)
    lost = budget.message() if budget.spent else "the branch was lost on the way"
    if mid is None and branch == "semantic":
        mid, end = semantic_by_arclength(spec, alpha, mid_settings, origin, p0, nearer=trail[-1] if trail else None)
        if mid is None:
            return None, f"{how}: " + (end or lost)
        how += " by pseudo-arclength continuation"
    if mid is None:
        return None, f"{how}: {lost}"
    key = "m" if branch == "positional" else "theta"  # (the overlap that defines the branch)
    # (a positional point whose refinement fails here is left absent without the full-solver fallback:
    # at L = 3, alpha = 0.6, where the branch is absent, the fallback took 7.5 s to fail)
    point = refine_point(spec, mid, settings, tol=settings.tol, fallback=branch != "positional")
    if not is_refined(point) and settled_unresolved(point) is None:
        to = left_branch(point)
        return None, f"{how} ({key} {getattr(mid, key):.3g}): " + (f"refined, it went to the {to} branch" if to else
                                                                  "its refinement did not converge either")
    why = fine_absence(point)
    if why is not None:
        return None, f"{how} ({key} {getattr(mid, key):.3g}): not resolved on the fine rules ({why})"
    if failed.exists or failed.refinement is not None:
        why = None if failed.refinement is None else failed.refinement.reason
        note = (f"the refinement of the coarse point (coarse {key} {getattr(failed, key):.3g}) failed "
                f"({why}); {how} instead")
    else:
        note = f"the coarse solve found no point of the branch ({failed.reason}); {how} instead"
    return (mid, _with_retry(point, note)), note


def converged_elsewhere(point: BranchPoint) -> bool:
    """The solve of ``point``'s branch converged to another branch from the branch's start, and
    every continuation that its :class:`RecoveryBudget` allowed (none was left out:
    ``diagnostics["not_tried"]``) converged to another branch at its origin
    (:func:`solve_point`; none reached the branch: ``diagnostics["reached_at"]``)."""
    return (not point.exists and point.converged_to not in (None, point.branch)
            and not point.diagnostics.get("not_tried") and not point.diagnostics.get("reached_at"))


def _with_retry(point: BranchPoint, note: str) -> BranchPoint:
    """``point`` with ``note`` (what the second try of :func:`solve_refined` did) as
    ``refinement.retry``."""
    return replace(point, refinement=(point.refinement or Refinement()).with_(retry=note))


def coarse_absence(point: BranchPoint) -> str | None:
    """Why an unrefined point (its refinement did not converge) does not resolve its branch: the
    overlap that defines it has a relative error estimate (linear response on the solver's rule)
    above ``1 / RESOLVE_SE``; ``None`` otherwise."""
    bad = unresolved_overlap(point)
    if bad is None:
        return None
    key, err = bad
    return (f"its refinement did not converge and on the coarse rule {key} = {getattr(point, key):.3g} has a "
            f"relative error estimate of {err:.2g}")


#: decay of the refined test-error estimates with the number of nodes, ``N^-TARGET_DECAY``: the
#: least-squares slope of log2(estimate) against the refinement order 11-15, pooled over 12 chains
#: (L = 2 semantic and positional at alpha 1, L = 3 semantic and rank 2 semantic, positional and
#: mixed at alpha 1.5, two seeds each) is 0.64, single chains 0.16-1.14 (docs/solver.md)
TARGET_DECAY = 0.64


def orders_to_target(err: float, target: float) -> int:
    """Refinement orders (doublings of the nodes) to bring an error estimate ``err`` down to
    ``target`` if it decays as ``N^-TARGET_DECAY``; at least 1."""
    if not (math.isfinite(err) and err > target > 0):
        return 1
    return max(1, math.ceil(math.log2(err / target) / TARGET_DECAY - 1e-9))


#: the largest raise of the refinement order in one step for the students whose estimates scatter
#: too widely for the decay ``N^-TARGET_DECAY`` to predict the order from one of them
#: (:func:`scattered_estimates`). The tied cross-attention student (fine rules without the keys'
#: common shift, docs/model.md (10.6)), at ``alpha = 1``, ``omega = 0.3`` (seeds 0-3; the largest
#: overlap estimate): the trivial branch has 1.6e-3 to 6.2e-3 at order 11 and 2.4e-4 to 8.1e-4 at
#: order 12 (from order 11 the decay predicted order 15); the semantic branch of seed 2 has 2.5e-3
#: at order 12 (predicted: 15) and 9.2e-4 at 13. Two heads at ``omega = 0.3`` (a soft direction
#: between the heads, docs/heads.md): the specialised branch at ``alpha = 2`` has 2.8e-3 at order 11
#: (predicted: 14) and 2.5e-4 at 12; at ``alpha = 1.5`` 3.2e-3, 7.0e-3, 2.6e-4 at orders 11-13; the
#: positional branch at ``alpha = 3`` 2.5e-3 (predicted: 14) and 3.4e-4 at 12. (The semantic branch
#: of two heads at ``alpha = 3`` decays as predicted, 1.8e-3, 1.1e-3, 6.6e-4: there the step through
#: order 12 costs one order more.)
#: One order at a time costs about 1.5 times a direct raise that lands on the same order (each
#: order's full evaluation at the nodes it adds is shared with the next order's,
#: :func:`attnphase.theory.fine_rules.nested_first`), a raise two orders too far four times
SCATTERED_MAX_STEP = 1


def scattered_estimates(spec: ModelSpec) -> bool:
    """Whether the refined estimates of ``spec`` scatter too widely to predict the order that meets
    a target (``SCATTERED_MAX_STEP``): the tied cross-attention student and several heads."""
    return spec.variant == "cross" or spec.heads > 1


def order_step(spec: ModelSpec, err: float, target: float) -> int:
    """The raise of the refinement order from an estimate ``err`` towards ``target``:
    :func:`orders_to_target`, at most ``SCATTERED_MAX_STEP`` where :func:`scattered_estimates`."""
    step = orders_to_target(err, target)
    return min(step, SCATTERED_MAX_STEP) if scattered_estimates(spec) else step


def _refine_to_target(spec: ModelSpec, point: BranchPoint, settings: SolverSettings) -> BranchPoint:
    """Raise the refinement order (each solve starts from the previous refined point) until the
    relative error estimate of the test error (``settings.target_on``: or of the summary overlaps,
    or of both: :func:`target_estimate`) is at most ``settings.target_error`` or
    ``max_refine_order`` is reached; the history (order, the targeted estimate, the test error's,
    nodes, the seconds each refinement took, and why one failed) is the point's ``error_target``.

    Each step goes to the order that the estimate's decay predicts, ``N^-TARGET_DECAY`` in the
    number of nodes ``N`` (one order doubles ``N``), at least one order up: the intermediate
    orders, skipped, would together cost about as much again as the last one. A step whose
    quasi-Newton stages fail ends the raise without the full-solver fallback: the trivial branch at
    ``sigma = 1``, ``omega = 0.3``, ``alpha = 2.2`` cycles at order 12-14 between minima of nearly
    equal value (full-map residuals 1.7e-4, 3.1e-4, 4.8e-4 in turn), and the fallback spent 97 s
    of the 127 s of that step at order 14 without converging either."""
    order = settings.refine_order
    history: list[TargetStep] = []

    def estimate(p: BranchPoint, on: str = settings.target_on) -> float:
        return target_estimate(p, on) if is_refined(p) else math.inf

    err = estimate(point)
    kept = order
    history.append(TargetStep(order, err, estimate(point, "test_error"), nodes=_nodes(point)))
    while err > settings.target_error and order < settings.max_refine_order:
        order = min(settings.max_refine_order, order + order_step(spec, err, settings.target_error))
        t0 = time.perf_counter()
        nxt = refine_point(spec, point, replace(settings, refine_order=order), tol=settings.tol, keep_fine=True,
                           fallback=False)
        e = estimate(nxt)
        history.append(TargetStep(order, e, estimate(nxt, "test_error"), nodes=_nodes(nxt),
                                  seconds=time.perf_counter() - t0,
                                  reason=None if is_refined(nxt) or nxt.refinement is None else nxt.refinement.reason))
        if settled_unresolved(nxt) is not None:
            point, kept = nxt, order  # (the branch is not resolved on these rules: mark_unresolved says so)
            break
        if not math.isfinite(e):
            break  # (that refinement failed: keep the last refined point)
        point, err, kept = nxt, e, order
    return replace(point, _fine=None, error_target=ErrorTarget(
        target_error=settings.target_error, target_on=settings.target_on, met=err <= settings.target_error,
        order=kept, history=tuple(history)))


def _nodes(point: BranchPoint) -> int | None:
    """The nodes of the fine rules of ``point``'s refinement (``None``: not refined)."""
    return None if point.refinement is None else point.refinement.nodes


def target_estimate(point: BranchPoint, on: str) -> float:
    """The largest relative error estimate of ``point`` among the quantities ``on`` names
    (``TARGET_KEYS``; an overlap that is zero by symmetry has estimate 0); ``inf`` without one or
    with a linear-response one (:attr:`ErrorEstimate.linear_response`: at the two-head specialised
    point, order 11, 14 % where the rules' own fixed points on order 12 scatter by 2.5e-4)."""
    if point.error_estimate is None or point.error_estimate.linear_response:
        return math.inf
    return point.error_estimate.largest(TARGET_KEYS[on])
