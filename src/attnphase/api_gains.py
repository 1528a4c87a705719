"""The two paths of :func:`attnphase.solve` that minimise the training error over global gains:
the value gain ``V = v I`` (docs/model.md (6.5)) and the trained gains of several heads (11.4).
Each returns the :class:`~attnphase.results.SolveResult` of :func:`attnphase.solve`, its branches
carrying their gains and the gains' error estimates."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from attnphase._progress import Progress
from attnphase.results import ReadOnlyDict, SolveResult
from attnphase.spec.problem import ModelSpec
from attnphase.theory import BranchPoint, SolverSettings, branches_for, linear_test_error, solve_refined

__all__ = ["solve_head_gains", "solve_value_gain"]


def solve_value_gain(spec: ModelSpec, alpha: float, names: Sequence[str], st: SolverSettings,
                     progress: Progress | None, params: dict[str, Any]) -> SolveResult:
    """:func:`attnphase.solve` for the value gain ``V = v I`` (docs/model.md (6.5)): each branch at the gain
    that minimises its training error (``value_gain`` unset; :func:`attnphase.theory.value.solve_gain`)
    or at the fixed ``value_gain``. A branch with no fixed point at the start gain is absent; a gain
    search that fails after it started (no convergence, the branch lost on the way, the refinement
    at the optimal gain not converged) makes ``success`` false and says why in ``message``."""
    from attnphase.theory.value import solve_gain

    points: dict[str, BranchPoint] = {}
    gains: dict[str, tuple[float, float | None]] = {}
    failed: dict[str, str] = {}
    for i, b in enumerate(names):
        if spec.optimal_gain:
            g = solve_gain(spec, alpha, b, st)
            point = g.point if g.point is not None else BranchPoint(b, alpha, False, g.message)
            if not g.success and g.history:
                failed[b] = g.message
                if not point.exists:
                    point = dataclasses.replace(point, reason=f"the gain search failed: {g.message}")
            gains[b] = (g.gain, g.gain_error)
        else:
            point = solve_refined(spec, alpha, b, st)
            gains[b] = (spec.gain_start, None)
        points[b] = point
        if progress is not None:
            progress(i + 1, len(names))
    res = SolveResult.from_points(spec, alpha, st, points, linear_test_error(spec), params)
    branches = {b: None if r is None else dataclasses.replace(r, gain=gains[b][0], gain_error=gains[b][1])
                for b, r in res.branches.items()}
    message = res.message + "".join(f"; {b}: optimal gain {r.gain:.6g} +- {r.gain_error:.1e}"
                                    for b, r in branches.items() if r is not None and spec.optimal_gain)
    message += "".join(f"; {b}: the gain search failed: {why}" for b, why in failed.items())
    return dataclasses.replace(res, branches=ReadOnlyDict(branches), success=res.success and not failed,
                               message=message)


def solve_head_gains(spec: ModelSpec, alpha: float, names: Sequence[str], st: SolverSettings,
                     progress: Progress | None, params: dict[str, Any]) -> SolveResult:
    """:func:`attnphase.solve` for trained head gains (docs/model.md (11.4)): each branch at the gains that
    minimise its training error (:func:`attnphase.theory.head_gains.solve_head_gains`, started at
    ``head_gain_values``). A branch with no stationary gains (not found at the start, or its
    training error falling towards the end of the branch) is absent with the reason; a search
    that fails otherwise makes ``success`` false and says why in ``message``."""
    from attnphase.theory.head_gains import solve_head_gains as search_head_gains

    points: dict[str, BranchPoint] = {}
    gains: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    failed: dict[str, str] = {}
    ended = False  # (a search lost its branch on the way to unequal gains)
    for i, b in enumerate(names):
        g = search_head_gains(spec, alpha, b, st)
        ended = ended or g.ended
        if g.success and g.point is not None:
            points[b] = g.point
            gains[b] = (g.gains, g.gains_error)
        else:
            points[b] = BranchPoint(b, alpha, False, f"no {b} point at stationary head gains: {g.message}")
            if g.history and g.point is not None:  # (found at stationary gains, then the refinement failed)
                failed[b] = g.message
        if progress is not None:
            progress(i + 1, len(names))
    res = SolveResult.from_points(spec, alpha, st, points, linear_test_error(spec), params)
    branches = {b: None if r is None or b not in gains else
                dataclasses.replace(r, head_gains=gains[b][0], head_gains_error=gains[b][1])
                for b, r in res.branches.items()}
    message = res.message + "".join(
        f"; {b}: head gains " + ", ".join(f"{v:.4g} +- {e:.1e}" for v, e in zip(*gains[b], strict=True))
        for b in branches if b in gains)
    message += "".join(f"; {b}: the head-gain search failed: {why}" for b, why in failed.items())
    idle = None
    if ended:
        idle = _idle_limit(spec, alpha, st, res)
        message += "; " + idle["message"]
    return dataclasses.replace(res, branches=ReadOnlyDict(branches), success=res.success and not failed,
                               message=message, idle_limit=idle)


def _idle_limit(spec: ModelSpec, alpha: float, st: SolverSettings, res: SolveResult) -> dict[str, Any]:
    """Where a gain search heads towards unequal gains and loses its branch on the way (a head
    falling idle, or heading that way), the student at one head's gain 0: one head
    fewer at its optimal value gain (docs/model.md (6.5), (11.4)), its lowest branch, and whether
    that lies below every branch of ``res``. The training error over the gains is then at most
    that branch's; it is not the infimum (a head at zero weights adds its gain times the uniform
    map, a direction of falling training error the search does not follow: (11.4))."""
    fewer = spec.replace(heads=spec.heads - 1, head_gains="fixed", head_gain_values=None,
                         **({"value": "gain"} if spec.heads == 2 else {}))
    one = solve_value_gain(fewer, alpha, branches_for(fewer), st, None, {})
    g = one.global_minimum
    if g is None:
        return {"branch": None, "below": False, "message": "with a head idle (one head at its value gain) no branch "
                                                            "was found"}
    r = one.branches[g]
    assert r is not None
    ours = res.branches.get(res.global_minimum) if res.global_minimum else None
    below = ours is None or r.train_loss < ours.train_loss
    fewer_heads = "one head" if spec.heads == 2 else f"{spec.heads - 1} heads"
    what = (f"with a head idle (gain 0) the student is {fewer_heads} at its value gain: its {g} state "
            f"(training error {r.train_loss:.4g}, test error {r.test_error:.4g}, gain {r.gain:.4g})")
    verdict = (" lies below every branch with both heads active: the training error over the gains is at most "
               f"{r.train_loss:.4g}, with a head idle or beyond (docs/model.md (11.4))"
               if below else f" lies above the {res.global_minimum} branch")
    return {"branch": g, "train_loss": r.train_loss, "test_error": r.test_error, "gain": r.gain,
            "below": below, "message": what + verdict}
