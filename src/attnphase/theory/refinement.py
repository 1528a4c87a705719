"""Multi-fidelity refinement of a fixed point (docs/model.md (7.3)).

:func:`refine_point` carries a fixed point of the solver's coarse rule to the union of several
independent fine rules (:mod:`attnphase.theory.fine_rules`) by quasi-Newton steps, evaluates the
training and test errors there, and takes the standard error over each fine rule's own fixed
point as the error estimate. Where the fine rules do not resolve the overlap that defines the
branch, the point is not a point of the branch (:func:`fine_absence`, :func:`mark_unresolved`).
:func:`refine_followed` refines the points of a followed branch, continuing a semantic branch
below the coarse rule's end on the rule one order below the fine rules (:func:`mid_rule_walker`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import (
    DRAFT_TEST_ORDER,
    MIXED,
    BranchPoint,
    classify,
    continue_through,
    overlap_fields,
    solve_point,
)
from attnphase.theory.channels import ProxResult
from attnphase.theory.classification import combined_branch
from attnphase.theory.confirmation import (
    DEFINING_OVERLAPS,
    RESOLVE_SE,
    fine_absence,
    is_confirmed,
    is_refined,
)
from attnphase.theory.confirmation import left_branch as left_branch
from attnphase.theory.confirmation import settled_unresolved as settled_unresolved
from attnphase.theory.confirmation import unresolved_overlap as unresolved_overlap
from attnphase.theory.diagnostics import ErrorEstimate, Refinement
from attnphase.theory.estimates import user_errors
from attnphase.theory.fine_rules import fine_union, nested_first
from attnphase.theory.fixed_point import (
    QuasiNewtonResult,
    SolverSettings,
    is_valid,
    make_saddle,
    quasi_newton,
    solve_fixed_point,
    warm_starts,
)
from attnphase.theory.newton import in_units
from attnphase.theory.rule_errors import fine_errors, linear_response_points, rule_fixed_points
from attnphase.theory.saddle import DataStep, Hats, OrderParams, Saddle

#: relative change of every unknown at which the refinement solve stops (see refine_point): it
#: enters the training error squared; on the test error it stays below the fine rules' own error
REFINE_TOL = 2e-3
#: fine data steps a refinement may spend
REFINE_MAX_EVALS = 12


def _rule_steps(fine: list[Saddle], op: OrderParams, ds: DataStep, settings: SolverSettings,
                full: bool = False) -> tuple[list[DataStep], np.ndarray, np.ndarray]:
    """Each fine rule's data step at ``op``, warm-started from the union's minima ``ds``; with
    those starts and the offsets ``cuts`` of each rule's nodes in the union. ``full``: ``ds`` is
    the union's full multi-start evaluation at ``op``, whose minima each rule takes as they are
    (:meth:`Saddle.data_from`: no proximal solve; a warm-started one there gives the same minima
    up to ~1e-9, those whose Newton run stopped short of ``gtol``)."""
    starts = warm_starts(ds)
    cuts = np.cumsum([0] + [f.rule.size for f in fine])
    if full:
        parts = [ProxResult(*(a[cuts[k]:cuts[k + 1]] for a in ds.prox.arrays())) for k in range(len(fine))]
        return [f.data_from(op, part, settings.switch_width) for f, part in zip(fine, parts, strict=True)], starts, cuts
    steps = [f.data_step(op, starts=starts[cuts[k]:cuts[k + 1]], switch_width=settings.switch_width)
             for k, f in enumerate(fine)]
    return steps, starts, cuts


#: how clearly the fixed points of the fine rules, solved from where the refinement's
#: quasi-Newton stages stopped, must leave the branch's overlap unresolved (relative standard
#: error above ``UNRESOLVED_MARGIN / RESOLVE_SE``) for the full-solver fallback to be skipped:
#: the criterion of the final verdict (:func:`fine_absence`). At ``L = 3``, positional,
#: ``omega = 0.3`` the rules' mean and the fallback's fixed point gave the same verdict wherever
#: both were computed: ``alpha = 1.5`` (rules: ``m`` 0.0227, relative standard error 0.53;
#: fallback: 0.0137, 0.79), ``alpha = 2`` (0.83 and 0.89), ``alpha = 3`` (0.83; the fallback goes
#: trivial). A margin of 2 runs the fallback at ``alpha = 1.5`` (14 of the 22 s of the positional
#: solve) for that same answer
UNRESOLVED_MARGIN = 1.0
#: Broyden evaluations of each fine rule for that decision (they start farther from the rules'
#: fixed points than the per-rule solves of the error estimate)
UNRESOLVED_MAX_EVALS = 24


def _rules_unresolve(sd: Saddle, fine: list[Saddle], tried: list, branch: str,
                     settings: SolverSettings) -> str | None:
    """Why the branch is not resolved on the fine rules, decided from each fine rule's own fixed
    point before the full-solver fallback of :func:`refine_point` (``None``: not decided, run it).

    ``tried``: the failed quasi-Newton stages of the union with the units of their Jacobians.
    From the stage that ended with the smallest residual, each rule's fixed point by Broyden steps
    (:func:`rule_fixed_points`); if every one converges and the overlap that defines the branch
    has a relative standard error over them above ``UNRESOLVED_MARGIN / RESOLVE_SE``, their
    mean does not resolve it (the union's fixed point is their mean to first order) and the
    answer of the fallback is known. Measured at ``L = 3``, positional, ``omega = 0.3`` (refine
    order 11): at ``alpha = 1.5`` the rules' fixed points (10-15 Broyden steps each, 1.4 s in
    all) give ``m`` 0.00036 with a relative standard error of 11, the fallback (12 s, 70
    iterations of the full solver) 0.0137 and 1.7; at ``alpha = 2`` 0.0076 and 0.83 against
    the fallback's 0.0089 and 0.89; at ``alpha = 3`` 0.0028 and 0.83 where the fallback goes to
    the trivial branch. At ``alpha = 1`` and 1.2, where the coarse rule has the branch (``m``
    0.088), the rules' solves do not all converge and nothing is decided.
    """
    keys = DEFINING_OVERLAPS.get(branch, ())
    done = [(q, u) for q, u in tried if q is not None and q.ds is not None and np.isfinite(q.resid)]
    if not keys or not done:
        return None
    qn, units = min(done, key=lambda t: t[0].resid)
    op = OrderParams.from_vector(qn.x, sd.L, sd.F, sd.rs)
    if not is_valid(op):
        return None
    steps, starts, cuts = _rule_steps(fine, op, qn.ds, settings)
    X, status = rule_fixed_points(sd, fine, steps, qn.x, units, qn.J, starts, cuts, settings,
                                  max_evals=UNRESOLVED_MAX_EVALS)
    if not all(st.startswith("converged") for st in status):
        return None
    center = OrderParams.from_vector(X.mean(axis=0), sd.L, sd.F, sd.rs)
    if not is_valid(center):
        return None
    est = user_errors(sd, center, X, se=True)
    _, m_u, th_u = sd.user_scalars(center)
    vals = {"m": m_u, "theta": th_u}
    for key in keys:
        err = est[f"{key}_user"]
        if err * RESOLVE_SE > UNRESOLVED_MARGIN or abs(vals[key]) <= 1e-9:
            return (f"{key} = {vals[key]:.3g} (mean of the {len(fine)} rules' own fixed points) is not resolved from "
                    f"zero on the fine rules (relative standard error {err:.2g})")
    return None


def refine_point(spec: ModelSpec, point: BranchPoint, settings: SolverSettings, tol: float | None = None,
                 max_evals: int | None = None, retry: bool = True, fallback: bool = True,
                 keep_fine: bool = False) -> BranchPoint:
    """Carry a fixed point of the solver's (coarse) rule to finer rules (multi-fidelity solve,
    docs/model.md (7.3)).

    The fine rule is the union of ``settings.refine_replicas`` independent scrambles of
    ``4 * 2^refine_order`` points (:func:`fine_union`). From the coarse fixed point ``x0`` a
    quasi-Newton solve on the fine rule (Jacobian inherited from the coarse solve, Broyden
    updates) runs to ``REFINE_TOL``: its first data step uses the full multi-start set, the
    others are warm-started from those minima, so it costs about two full fine data steps.

    ``eps_t = -Phi`` (docs/model.md (4.1)) is then evaluated at the refined point ``x`` with the
    fine conjugates and ``E[M]``. ``Phi`` is stationary in the order parameters and their
    conjugates, so an error ``delta`` of ``x`` enters ``eps_t`` only as ``delta^2``: with
    ``REFINE_TOL = 2e-3`` the training error is as accurate as the fine rule's ``E[M]``. That is
    what locates the shallow crossing of the two training errors (``alpha_c``): at ``omega = 0.3``
    the coarse (2^8 x 4) training errors of four scrambles scatter by 0.4-1.5 %, refined ones by
    ~0.1 %.

    With ``tol`` (e.g. ``settings.tol`` for a single solve) the fine solve runs to that relative
    change instead, confirmed with the full multi-start set (a residual below ``noise_tol`` is
    accepted as the rule's noise floor, as in :func:`solve_fixed_point`).

    ``max_evals``: fine data steps per quasi-Newton stage (default ``REFINE_MAX_EVALS``; the
    spinodal probes of :func:`find_transition` give less, and no ``retry`` with a
    forward-difference Jacobian). ``fallback``: where the quasi-Newton stages of an exact solve
    fail, the full solver from the coarse point (:func:`_fallback_refine`).

    ``keep_fine``: the refined point keeps its fine rules and their full data step at it
    (``BranchPoint._fine``, a few MB at order 11), and its Jacobian in its own relative units
    (:func:`attnphase.theory.newton.in_units`), for a refinement to finer rules from there
    (:func:`nested_first`; the overlap target of :func:`solve_refined`).

    Standard errors over the fine scrambles are in ``refinement.errors`` (:class:`Refinement`;
    absolute for ``train_loss`` and ``test_error``, relative for the order parameters) and, as
    relative errors of the reported values, in ``error_estimate``. A refinement
    that does not converge returns the coarse point with the reason.
    """
    order = settings.refine_order
    if order == 0 or not point.exists or getattr(point, "_op", None) is None or getattr(point, "_data", None) is None:
        return point  # (nothing to refine: off, absent, or a point without its solver state)
    assert point.order_params is not None
    sd = make_saddle(spec, point.alpha, settings)
    fine, union = fine_union(spec, point.alpha, settings, point.branch)
    n = len(fine)
    x0 = point.order_params.to_vector()
    info = _refinement_record(settings, union, n, point)
    exact = tol is not None
    qs = _stage_settings(settings, tol)
    # (x_units: the start of the stage that gave qn.J, whose relative units the per-rule solves take)
    qn, x_units, tried = _fine_stages(union, n, point, x0, settings, qs, exact, max_evals or REFINE_MAX_EVALS,
                                      retry)
    if exact and retry and fallback and qn is not None and not qn.ok:
        why = _rules_unresolve(sd, fine, tried, point.branch, settings) if n > 1 else None
        if why is not None:
            return _not_refined(point, info.with_(applied=False, unresolved=why,
                                                  reason="refinement did not converge: " + qn.message))
        fb, fb_note = _fallback_refine(union, point.order_params, settings, qs)
        info = info.with_(fallback=fb_note)
        if fb is not None:
            qn, x_units = fb
    if qn is None or not qn.ok:
        return _not_refined(point, _failure(info, sd, qn))
    x = qn.x
    op = OrderParams.from_vector(x, sd.L, sd.F, sd.rs)
    info = info.with_(step=float(np.max(np.abs(x - x0) / np.maximum(np.abs(x0), 1e-3))), evaluations=qn.evals,
                      solver_reason=qn.message, residual=qn.rel)
    landed = classify(op, float(np.sqrt(sd.s2)), combined_branch(spec))
    if landed != point.branch:
        # (see left_branch: the coarse point may be an artefact of its rule)
        return _not_refined(point, info.with_(applied=False, reason="the refined point left the branch",
                                              left_to=landed))
    # each fine rule at x (from the union's minima there where its last evaluation was the full one at x)
    full_at_x = _warm_at(qn, x) is not None
    steps, starts, cuts = _rule_steps(fine, op, qn.ds, settings, full=full_at_x)
    hats = Hats(*(sum(getattr(ds.hats, k) for ds in steps) / n for k in ("q_hat", "m_hat", "V_hat", "theta_hat")))
    mean = replace(steps[0], hats=hats, mean_M=float(np.mean([ds.mean_M for ds in steps])))
    train = -sd.free_energy(op, mean)
    test = sd.test_error(op)
    info = info.with_(applied=True)
    est = point.error_estimate
    if n > 1:
        X, rule_solves = rule_fixed_points(sd, fine, steps, x, x_units, qn.J, starts, cuts, settings)
        info = info.with_(rule_solves=tuple(rule_solves))
        ok = np.array([s.startswith("converged") for s in rule_solves])
        if ok.sum() >= 2:
            errors, est = fine_errors(sd, x, op, X[ok], steps, train, test, settings.method, n_rules=n)
            info = info.with_(errors=errors)
        else:
            # (a rule whose own solve failed stays at the union's point: counting it would pull
            # the standard error towards 0, and with every rule failed report 0; each rule's
            # linear response to its own map is the estimate then, as on the coarse rule)
            why = f"the own fixed points of {int(ok.sum())} of the {n} fine {settings.method} rules converged (2 needed)"
            X_lr = linear_response_points(sd, steps, x, x_units, qn.J)
            if X_lr is None:
                est = ErrorEstimate({}, f"not estimated: {why}; the linear response failed too")
            else:
                errors, est = fine_errors(sd, x, op, X_lr, steps, train, test, settings.method, n_rules=n)
                info = info.with_(errors=errors)
                est = ErrorEstimate(est.relative, f"linear response of the {n} fine {settings.method} rules "
                                                  f"(refinement; {why})")
    kept = {k: v for k, v in point.diagnostics.items() if k != "draft_test_error"}
    return replace(
        point, train_loss=float(train), test_error=float(test), **overlap_fields(sd, op),
        _fine=(union, n, qn.ds) if keep_fine and full_at_x and settings.method == "qmc" else None,
        _jacobian=in_units(qn.J, x_units, x) if keep_fine else point._jacobian,
        diagnostics=kept, refinement=info, error_estimate=est,
    )


def _refinement_record(settings: SolverSettings, union: Saddle, n: int, point: BranchPoint) -> Refinement:
    """The start of a point's :class:`Refinement`: the fine rules and the coarse point's values."""
    coarse = {"train_loss": point.train_loss, "test_error": point.test_error, "q": point.q, "m": point.m,
              "theta": point.theta,
              **({"test_error_order": DRAFT_TEST_ORDER} if point.diagnostics.get("draft_test_error") else {})}
    return Refinement(method=settings.method, order=settings.refine_order, replicas=n, nodes=union.rule.size,
                      teacher_scale=union.rule.teacher_scale, mirror=union.mirror, coarse=coarse)


def _stage_settings(settings: SolverSettings, tol: float | None) -> SolverSettings:
    """The settings of the refinement's quasi-Newton stages: to ``tol``, or ``REFINE_TOL``
    without one, and a noise floor no tighter than that."""
    goal = REFINE_TOL if tol is None else tol
    return replace(settings, tol=goal, noise_tol=max(settings.noise_tol, goal))


def _fine_stages(union: Saddle, n: int, point: BranchPoint, x0: np.ndarray, settings: SolverSettings,
                 qs: SolverSettings, exact: bool, budget: int,
                 retry: bool) -> tuple[QuasiNewtonResult | None, np.ndarray,
                                       list[tuple[QuasiNewtonResult | None, np.ndarray]]]:
    """The quasi-Newton stages of :func:`refine_point` on the union ``union`` of ``n`` fine rules
    from the coarse fixed point ``x0``: with the coarse Jacobian, then (``retry``) from ``x0`` with
    forward differences or, where the first stage already took forward differences, from where it
    stopped with its Jacobian, then (an ``exact`` solve, ``qs.tol`` below the noise floor) to the
    noise floor.
    Returns the last stage's result, the point whose relative units its Jacobian is in (the
    stage's start: the noise-floor stage starts where the first stopped, and an unknown that
    was a tiny non-zero at ``x0`` may be an exact zero there, so the Jacobians differ in size),
    and every stage with that point (for :func:`_rules_unresolve`); ``budget``: fine data steps
    per stage (twice that when exact)."""
    qn = quasi_newton(union, x0, qs, J0=point._jacobian, max_evals=2 * budget if exact else budget,
                      confirm_full=exact, first_full=nested_first(union, n, point, x0, settings))
    tried = [(qn, x0)]
    x_units = x0
    at_floor = qn is not None and exact and qn.resid < settings.noise_tol
    again = retry and qn is not None and not qn.ok and not at_floor  # (a second stage is due)
    if again and qn is not None and qn.refreshed:
        # the first stage already replaced the coarse Jacobian by forward differences where it
        # stalled: once more from where it stopped, with its Jacobian (the two-head positional
        # point at alpha = 2, omega = 0.3 had converged on the warm-started map when the budget
        # ran out; a restart from x0 took forward differences and that path again, 34 data steps
        # at order 12)
        x_units = qn.x
        qn = quasi_newton(union, x_units, qs, J0=in_units(qn.J, x0, x_units), warm=_warm_at(qn, x_units),
                          max_evals=qn.evals + budget, confirm_full=exact)
        tried.append((qn, x_units))
    elif again and qn is not None and point._jacobian is not None:
        # the coarse Jacobian can point the wrong way on the fine map (seen at small omega):
        # once more with forward differences on the fine rule (warm-started from that attempt's
        # full multi-start evaluation where it was made at x0: one full evaluation less)
        qn = quasi_newton(union, x0, qs, J0=None, warm=_warm_at(qn, x0),
                          max_evals=qn.evals + budget, confirm_full=exact)
        tried.append((qn, x0))
    if qn is not None and not qn.ok and exact and settings.noise_tol > qs.tol:
        # tol below the fine map's noise floor (as in solve_fixed_point): a second stage from
        # where the first stopped, to noise_tol, with its Broyden Jacobian
        # (the first stage stalling below noise_tol goes straight here: seen on the rank-2 mixed
        # branch, where a retry from x0 with forward differences cost ~9 s for nothing)
        qn_start = qn.x
        qn2 = quasi_newton(union, qn_start, replace(qs, tol=settings.noise_tol), J0=in_units(qn.J, x_units, qn_start),
                           warm=_warm_at(qn, qn_start), max_evals=2 * budget, confirm_full=True)
        tried.append((qn2, qn_start))
        if qn2 is not None and qn2.ok:
            qn = replace(qn2, evals=qn.evals + qn2.evals,
                         message=f"converged to the rule's noise floor: relative change {qn2.rel:.1e} "
                                 f"(< noise_tol {settings.noise_tol:g}; tol {qs.tol:g} not reached)")
            return qn, qn_start, tried
    return qn, x_units, tried


def _not_refined(point: BranchPoint, info: Refinement) -> BranchPoint:
    """``point`` as it was, with why its refinement was not applied in its ``refinement``."""
    return replace(point, refinement=info)


def _failure(info: Refinement, sd: Saddle, qn: QuasiNewtonResult | None) -> Refinement:
    """``info`` completed for a refinement that did not converge, with where it stopped (user
    units): e.g. on the way to another branch."""
    reason = "refinement did not converge: " + ("invalid start" if qn is None else qn.message)
    if qn is None:
        return info.with_(applied=False, reason=reason)
    q_u, m_u, th_u = sd.user_scalars(OrderParams.from_vector(qn.x, sd.L, sd.F, sd.rs))
    return info.with_(applied=False, reason=reason + f" (stopped at m {m_u:.3g}, theta {th_u:.3g})",
                      stopped_at={"q": float(q_u), "m": float(m_u), "theta": float(th_u)})


#: iterations of the full solver when the refinement's quasi-Newton stages fail (the L = 3
#: positional point below converges in 67-70; each costs a fine data step)
FALLBACK_MAX_ITER = 100


def _fallback_refine(union: Saddle, start: OrderParams, settings: SolverSettings,
                     qs: SolverSettings) -> tuple[tuple[QuasiNewtonResult, np.ndarray] | None, str]:
    """The fine rules' fixed point by the full solver (damped, Anderson-accelerated iteration and
    its quasi-Newton polish) from the coarse point, where the refinement's quasi-Newton stages
    failed; then the forward-difference Jacobian there (for the per-rule solves). Returns the
    quasi-Newton-like result at that point with the point whose relative units its Jacobian is
    in (``None`` if the solve failed) and what happened.

    Seen at ``L = 3``, positional, ``alpha = 1.5``, ``omega = 0.3``: from the coarse point
    (``m = 0.058``) Broyden steps with the coarse or a forward-difference Jacobian stop with no
    decrease along the Newton direction (``m = 0.053``), while the damped iteration on the same
    fine map converges in ~50 iterations.
    """
    res = solve_fixed_point(union, start, replace(settings, tol=qs.tol, max_iter=FALLBACK_MAX_ITER))
    if not res.converged:
        return None, f"full solver from the coarse point: {res.reason} ({res.iterations} iterations)"
    x_fd = res.op.to_vector()
    fd = quasi_newton(union, x_fd, replace(qs, tol=max(qs.tol, settings.noise_tol)), warm=res.data,
                      fd_jacobian=True, confirm_full=True)
    if fd is None or not fd.ok:
        why = "invalid point" if fd is None else fd.message
        return None, f"full solver converged ({res.iterations} iterations), Jacobian there failed: {why}"
    msg = f"full solver from the coarse point: {res.reason} in {res.iterations} iterations"
    return (replace(fd, evals=res.iterations + fd.evals, message=msg), x_fd), msg


def _warm_at(qn: Any, x: np.ndarray) -> DataStep | None:
    """The minima of a quasi-Newton stage's last full evaluation, if it was made at ``x``."""
    return qn.ds if qn.full_at is not None and np.array_equal(qn.full_at, x) else None


#: a quick refinement that moved the overlap defining the branch by more than this fraction of its
#: coarse value is refined again to the solver's tolerance (:func:`settle_drift`)
DRIFT_FRACTION = 0.5


def settle_drift(spec: ModelSpec, coarse: BranchPoint, refined: BranchPoint, settings: SolverSettings) -> BranchPoint:
    """``refined`` (the quick refinement of ``coarse``, to ``REFINE_TOL``), or where it moved the
    overlap that defines the branch by more than ``DRIFT_FRACTION`` of its coarse value, the
    refinement of ``coarse`` to ``settings.tol``, as a single solve refines it.

    Near a continuous end of a branch the fine-rule iteration contracts slowly towards the trivial
    branch, and a relative step below ``REFINE_TOL`` is reached while the overlap is still
    drifting: ``sigma = 0.7``, ``omega = 0.3``, semantic at ``alpha = 0.6``: the coarse point's
    ``theta = 0.33`` stopped at 0.0075 (the four fine rules agreeing to 1 %), while refined to
    ``1e-6`` it reaches the trivial branch, as ``attnphase solve`` finds. The quick refinement of
    a point the fine rules hold moves its overlap by a few per cent."""
    if not coarse.exists or not refined.exists or not is_refined(refined):
        return refined
    for key in DEFINING_OVERLAPS.get(coarse.branch, ()):
        before, after = abs(float(getattr(coarse, key))), abs(float(getattr(refined, key)))
        if abs(after - before) > DRIFT_FRACTION * before:
            return refine_point(spec, coarse, settings, tol=settings.tol)
    return refined


def mark_unresolved(point: BranchPoint) -> BranchPoint:
    """``point`` marked absent (values kept) where :func:`fine_absence` gives a reason."""
    if not getattr(point, "exists", False) or not hasattr(point, "diagnostics"):
        return point  # (absent already, or a stand-in without diagnostics)
    why = fine_absence(point)
    if why is None:
        return point
    return replace(point, exists=False, reason=f"no {point.branch} fixed point on the fine rules: {why} "
                   f"(the point found on the coarse rule, theta {point.theta:.3g}, m {point.m:.3g}, is an artefact of "
                   "that rule)")


#: steps of the continuation of a spinodal search on the rule one order below the fine rules
MID_STEP = 0.03


def mid_rule_settings(settings: SolverSettings, solver: SolverSettings | None = None) -> SolverSettings | None:
    """``solver`` (default ``settings``) on the QMC rule one order below ``settings``' fine rules
    (no warm-up rule); ``None`` where there is none (no refinement, ``gh``, or the coarse rule is
    already that fine)."""
    if not settings.refine_order or settings.method != "qmc" or settings.refine_order - 1 <= settings.order:
        return None
    return replace(solver or settings, order=settings.refine_order - 1, warmup_order=None)


def mid_rule_walker(spec: ModelSpec, branch: str, settings: SolverSettings, anchor: BranchPoint,
                     solver: SolverSettings | None = None,
                     max_evals: int | None = None) -> Callable[[float], BranchPoint | None] | None:
    """``branch`` continued from ``anchor`` (a point of the coarse rule) on the rule one order
    below the fine rules, in steps of at most ``MID_STEP``, each time from the nearest point
    already found above: ``walk(a)`` is the refined point at ``a`` if its refinement converges
    and stays on the branch (:func:`fine_absence`), else ``None``. ``None`` where the settings
    have no such rule (no refinement, ``gh``, or the coarse rule is already that fine)."""
    mid_set = mid_rule_settings(settings, solver)
    if mid_set is None:
        return None
    found: list[BranchPoint] = []

    def walk(a: float) -> BranchPoint | None:
        if not found:
            first = solve_point(spec, anchor.alpha, branch, mid_set, start=anchor.order_params, error_estimate=False,
                                draft=True, ramp=False)
            if not first.exists:
                return None
            found.append(first)
        last = min((p for p in found if p.alpha > a), key=lambda p: p.alpha - a, default=found[-1])
        n = max(1, int(np.ceil(abs(last.alpha - a) / MID_STEP - 1e-9)))
        pt = continue_through(last, [(spec, float(x)) for x in np.linspace(last.alpha, a, n + 1)[1:]], branch, mid_set)
        if pt is None:
            return None
        r = refine_point(spec, pt, settings, max_evals=max_evals, retry=max_evals is None)
        if not is_confirmed(r):
            return None
        found.append(pt)
        return r

    return walk


def refine_followed(spec: ModelSpec, points: Sequence[BranchPoint], settings: SolverSettings) -> list[BranchPoint]:
    """Points of one branch followed on the coarse rule (:func:`follow_branch`), each carried to
    the fine rules (:func:`refine_point`; drawn as absent where they do not confirm it,
    :func:`mark_unresolved`). A semantic or mixed branch is also continued below its lowest
    point on the rule one order below the fine rules (:func:`mid_rule_walker`), where the coarse
    rule may have lost it early (causal student, ``omega = 0.3``: the coarse rule ends it near
    1.77, the fine rules near 1.61); those points say so in ``diagnostics["continued_below"]``."""
    out = [mark_unresolved(settle_drift(spec, p, refine_point(spec, p, settings), settings)) for p in points]
    if not out or out[0].branch not in ("semantic", MIXED):
        return out
    have = [k for k, p in enumerate(out) if p.exists and is_refined(p)]
    if not have:
        return out
    low = min(have, key=lambda k: out[k].alpha)
    walk = mid_rule_walker(spec, out[low].branch, settings, points[low])
    if walk is None:
        return out
    # (below it: points the coarse rule lacks, or whose refinement did not converge)
    for k in sorted((k for k, p in enumerate(out) if p.alpha < out[low].alpha and not (p.exists and is_refined(p))),
                    key=lambda k: -out[k].alpha):
        r = walk(out[k].alpha)
        if r is None:
            break
        note = (f"the coarse rule has no refined point here; continued from alpha {out[low].alpha:g} on order "
                f"{settings.refine_order - 1}")
        out[k] = replace(r, diagnostics={**r.diagnostics, "continued_below": note})
    return out
