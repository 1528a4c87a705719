"""Trained head gains in the theory (docs/model.md (11.4)).

The gains ``v = (v_1 .. v_H)`` of the heads are global parameters, as the value gain is
(:mod:`attnphase.theory.value`): at fixed ``v`` the saddle-point equations are those of the
student with the gains held at ``v`` (``ModelSpec.head_gain_values``), and the training error is
minimised over ``v``. The training error is stationary in the order parameters and their
conjugates, so its derivative in ``v_k`` is the mean over the data of the loss's derivative at the
proximal minimisers, and the loss is quadratic in ``v``: the stationary gains solve
``A v = b`` with ``A_kk' = E[tr(P_k C P_k'^T)]``, ``b_k = E[tr(T C P_k^T)]`` and ``P_k`` head
``k``'s map at the minimisers (:func:`head_gain_update`; the minimum-norm solution where two
heads have the same map and only the sum of their gains is determined).

:func:`solve_head_gains` finds the fixed point ``v = G(v)`` of that update on the coarse rule by
Broyden's method (its first step the plain update ``v <- G(v)``), solves the branch at that ``v``
on the refined rules, and evaluates ``G`` on each fine rule there: the standard error over the
rules, or the offset of the fine rules' ``G`` where that is larger, is the gains' error estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from attnphase.spec.problem import ModelSpec, check_alpha
from attnphase.theory.branches import BranchPoint
from attnphase.theory.channels import head_maps
from attnphase.theory.fine_rules import fine_union
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.newton import broyden_update
from attnphase.theory.refinement import mid_rule_settings
from attnphase.theory.saddle import DataStep, Saddle
from attnphase.theory.target import solve_refined
from attnphase.theory.value import GAIN_TOL, coarse_point, update_by_rule

#: relative size below which a singular value of ``A`` counts as zero (two heads with one map)
RCOND = 1e-9
#: the largest change of a gain in one step of the coarse search
STEP_MAX = 0.2
#: coarse solves at most in the search of the head gains
MAX_COARSE = 24
#: Broyden steps at most on the fine rules (each a refined solve) where their stationary gains
#: differ from the coarse ones by more than their standard errors
FINE_STEPS = 2
#: the largest offset of the fine rules' stationary gains that a Broyden step on the fine rules
#: follows: a larger one says the coarse rule does not resolve the gains (two heads of nearly one
#: map, whose gains' difference barely moves the training error), and it is the error estimate
FINE_STEP_MAX = 0.05
#: a gain the search heads below this fraction of the largest falls idle (:func:`_idle_note`)
IDLE_GAIN = 0.1
#: steps halved where the branch is not found at their end, before the search concludes that the
#: stationary gains lie beyond the branch's end
BOUNDARY_HITS = 2


def head_gain_sums(sd: Saddle, ds: DataStep) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)``: ``A_kk' = E[tr(P_k C P_k'^T)]`` and ``b_k = E[tr(T C P_k^T)]`` at the global
    proximal minimisers of a data step (docs/model.md (11.4))."""
    P = np.stack(head_maps(ds.prox.h, sd.amap), axis=1)  # (N, H, L, L)
    PC = P @ sd.C
    A = np.einsum("n,nklj,nmlj->km", sd.rule.w, PC, P)
    b = np.einsum("n,nklj,nlj->k", sd.rule.w, PC, ds.T)
    return 0.5 * (A + A.T), b


def head_gain_update(sd: Saddle, ds: DataStep) -> np.ndarray:
    """The stationary head gains at the minimisers of a data step: the minimum-norm solution of
    ``A v = b`` (:func:`head_gain_sums`; docs/model.md (11.4))."""
    A, b = head_gain_sums(sd, ds)
    return np.linalg.lstsq(A, b, rcond=RCOND)[0]


def gains_spec(spec: ModelSpec, v: np.ndarray) -> ModelSpec:
    """``spec`` with the head gains held at ``v``."""
    return spec.replace(head_gains="fixed", head_gain_values=(tuple(float(x) for x in v),))


@dataclass(frozen=True)
class HeadGainPoint:
    """One branch at one ``alpha`` with the head gains at their optimum (docs/model.md (11.4)).

    ``gains``: the optimal ``v``; ``gains_error``: their standard errors over the fine rules, or
    the offset of the fine rules' stationary gains where that is larger (``nan`` on the coarse
    rule only); ``point``: the branch solved at those gains (its errors, overlaps and their
    estimates, as :func:`attnphase.theory.target.solve_refined` gives them); ``history``: the coarse
    ``(v, stationary v)`` pairs of the search; ``ended``: the search lost its branch on the way
    to unequal gains (its training error falling towards the branch's end)."""

    branch: str
    alpha: float
    success: bool
    message: str
    gains: tuple[float, ...] = ()
    gains_error: tuple[float, ...] = ()
    point: BranchPoint | None = None
    history: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] = field(default=())
    ended: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "alpha": self.alpha, "success": self.success, "message": self.message,
                "gains": list(self.gains), "gains_error": list(self.gains_error),
                "history": [[list(v), list(g)] for v, g in self.history], "ended": self.ended,
                "point": None if self.point is None else self.point.to_dict()}


def _tuple(v: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in v)


def _idle_note(v: np.ndarray, target: np.ndarray) -> str:
    """Where the search heads to a gain near zero: that head falls idle (at gain 0 its weights pay
    the ridge and carry nothing: the student without it, one head with the value gain,
    docs/model.md (6.5)); past 0 its gain goes on with the head at zero weights, a direction the
    search does not follow (docs/model.md (11.4))."""
    k = int(np.argmin(target))
    if target[k] > IDLE_GAIN * float(np.max(np.abs(target))) or target[k] >= v[k]:
        return ""
    return (f"; head {k + 1}'s gain falls towards 0, where the student is one head with the value gain (attnphase "
            "solve --value gain)")


class _Search(NamedTuple):
    """What :func:`_coarse_search` ends with: the gains (``None``: not found, with why in the
    ``message``), the coarse point there, the last Jacobian estimate of ``r``, the history
    ``(v, G(v))``, and whether the branch ended on the way."""

    gains: np.ndarray | None
    point: BranchPoint | None
    jacobian: np.ndarray
    history: list[tuple[np.ndarray, np.ndarray]]
    message: str
    ended: bool


def _coarse_search(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings) -> _Search:
    """The stationary head gains on the coarse rule from ``spec.head_gain_array``: Broyden's
    method on ``r(v) = G(v) - v``, its first step the plain update ``v <- G(v)``, each step at
    most ``STEP_MAX`` in every gain; where Broyden's step is not a descent direction (``r`` is
    one, below; the coarse rule's ``r`` is rough where the minimisers of its nodes switch) the
    plain update, doubled while ``r`` keeps its direction. Where the branch is not found at a step's end the step is
    halved; where that happens ``BOUNDARY_HITS`` times the stationary gains lie beyond the end of
    the branch (``r`` is a descent direction of the training error: its gradient in ``v`` is
    ``-(b - A v)``, ``A`` positive semi-definite), and the branch has no point at its optimal
    gains (:class:`_Search`)."""
    hist: list[tuple[np.ndarray, np.ndarray]] = []
    v = spec.head_gain_array.astype(float)
    J = -np.eye(v.size)  # (r's Jacobian where G does not depend on v: the plain update)
    warm: BranchPoint | None = None
    prev: tuple[np.ndarray, np.ndarray] | None = None
    step = np.zeros_like(v)
    hits, boost = 0, 1.0
    for _ in range(MAX_COARSE):
        sp = gains_spec(spec, v)
        p = coarse_point(sp, alpha, branch, settings, warm)
        found = p.exists and p._data is not None
        if not found and prev is not None and hits < BOUNDARY_HITS:
            hits += 1
            step = 0.5 * step
            v = prev[0] + step
            continue
        if not found:
            where = "" if prev is None else (f": its training error falls from the gains {np.round(prev[0], 4).tolist()} "
                                             f"towards {np.round(prev[0] + prev[1], 4).tolist()}, where the branch ends"
                                             + _idle_note(prev[0], prev[0] + prev[1]))
            return _Search(None, None, J, hist, f"no {branch} point at the gains {np.round(v, 4).tolist()}{where} "
                                                f"({p.reason})", prev is not None)
        assert p._data is not None  # (found)
        g = head_gain_update(make_saddle(sp, alpha, settings), p._data)
        if not np.all(np.isfinite(g)):
            return _Search(None, None, J, hist, f"the stationary gains are not finite at {np.round(v, 6).tolist()}", False)
        hist.append((v.copy(), g))
        r = g - v
        if prev is not None:
            broyden_update(J, v - prev[0], r - prev[1])
        if np.max(np.abs(r)) < GAIN_TOL:
            return _Search(v, p, J, hist, "ok", False)
        try:
            step = -np.linalg.solve(J, r)
        except np.linalg.LinAlgError:
            step = -r
        if step @ r <= 0:  # (not a descent direction: the plain update, doubled while it keeps its direction)
            boost = 2.0 * boost if prev is not None and prev[1] @ r > 0.9 * np.linalg.norm(prev[1]) * np.linalg.norm(r) else 1.0
            step = boost * r
        else:
            boost = 1.0
        prev, warm = (v.copy(), r), p
        step = step * min(1.0, STEP_MAX / max(float(np.max(np.abs(step))), 1e-300))
        v = v + step
    return _Search(None, None, J, hist, (f"the coarse search of the head gains did not converge in {MAX_COARSE} solves "
                                         f"(at the gains {np.round(v, 4).tolist()})"), False)


def solve_head_gains(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings | None = None,
                     refine: bool = True) -> HeadGainPoint:
    """``branch`` at ``alpha`` with the head gains minimising the training error (docs/model.md
    (11.4)), the search started at ``spec.head_gain_array``, on the coarse rule or, where the
    branch is not found there at the start, on the rule one order below the fine rules.
    ``refine=False``: that rule only."""
    check_alpha(alpha)
    settings = settings or SolverSettings.preset("default")
    search = _coarse_search(spec, alpha, branch, settings)
    mid = mid_rule_settings(settings)
    if search.gains is None and not search.history and mid is not None:
        # (the branch not found at the start gains on the coarse rule: the search on the rule one
        # order below the fine rules, where a single solve's second try finds it: two heads,
        # omega = 0.6, the positional branch at alpha 3.5, preset fast)
        on_mid = _coarse_search(spec, alpha, branch, mid)
        search = on_mid if on_mid.history else search._replace(message=f"{search.message} (nor on the "
                                                                          f"order-{mid.order} rule)")
    v, coarse, J, hist, msg, ended = search
    history = tuple((_tuple(a), _tuple(b)) for a, b in hist)
    if v is None:
        return HeadGainPoint(branch, float(alpha), False, msg, history=history, ended=ended)
    if not refine or not settings.refine_order:
        return HeadGainPoint(branch, float(alpha), True, "coarse rule only", _tuple(v), (math.nan,) * v.size,
                             coarse, history)
    first: np.ndarray | None = None  # (the fine rules' offset at the coarse gains)
    prev: tuple[np.ndarray, np.ndarray] | None = None
    for steps in range(FINE_STEPS + 1):
        sp = gains_spec(spec, v)
        point = solve_refined(sp, alpha, branch, settings)
        refined = point.refinement
        if not point.exists or refined is None or not refined.applied:
            why = (refined.reason if point.exists and refined is not None else None) or point.reason
            return HeadGainPoint(branch, float(alpha), False, f"refinement at the gains {np.round(v, 6).tolist()}: "
                                 f"{why}", _tuple(v), (math.nan,) * v.size, point, history)
        assert refined.order is not None and point.order_params is not None
        fine, union = fine_union(sp, alpha, replace(settings, refine_order=refined.order), branch)
        ds = union.data_step(point.order_params)
        r = head_gain_update(union, ds) - v
        per_rule = update_by_rule(head_gain_update, union, ds, len(fine))
        err = (np.std(per_rule, axis=0, ddof=1) / math.sqrt(len(fine)) if len(fine) > 1
               else np.full(v.size, math.nan))
        off = np.abs(r) > np.maximum(2.0 * np.nan_to_num(err), GAIN_TOL)
        first = r if first is None else first
        if prev is not None:  # (Broyden's update with the fine rules' residuals)
            broyden_update(J, v - prev[0], r - prev[1])
        if steps < FINE_STEPS and off.any() and np.max(np.abs(r)) <= FINE_STEP_MAX:
            prev = (v.copy(), r)
            try:
                v = v - np.linalg.solve(J, r)
            except np.linalg.LinAlgError:
                v = v + r
            continue
        msg = "ok" if steps == 0 else (f"{steps} Broyden step(s) on the fine rules (their stationary gains at the "
                                       f"coarse ones differ by {np.round(first, 6).tolist()})")
        if off.any():
            msg = f"{msg}; the fine rules' stationary gains differ by {np.round(r, 6).tolist()}"
        return HeadGainPoint(branch, float(alpha), True, msg, _tuple(v), _tuple(np.maximum(err, np.abs(r))), point,
                             history)
    raise AssertionError("unreachable")  # pragma: no cover
