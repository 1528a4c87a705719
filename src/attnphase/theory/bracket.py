"""The ``alpha`` range of a transition search that is given no grid (docs/model.md (5.2), (5.3)).

:func:`attnphase.theory.transition.find_transition` with ``widen=True`` starts from
:data:`START_GRID` and, where the training errors of the two branches do not cross there, widens
the range one point at a time with :func:`widen_range`: upwards (ratio :data:`UP_RATIO`, up to
:data:`ALPHA_MAX`) while the positional branch is the lower at the range's top, downwards (ratio
:data:`DOWN_RATIO`, down to :data:`ALPHA_MIN`) while the semantic side is the lower at its bottom,
each branch continued from the points already solved (:func:`continue_branch`). :func:`assess`
reads the coarse training errors of the followed branches and says which way to go, or that the
crossing is bracketed, or why there is no transition in the range searched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from attnphase.spec.defaults import TRANSITION_GRID
from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import BranchPoint, solve_point
from attnphase.theory.fixed_point import SolverSettings, is_valid
from attnphase.theory.saddle import OrderParams

#: the grid ``(start, stop, num)`` a search without a given grid starts from
#: (:data:`attnphase.spec.defaults.TRANSITION_GRID`: the reference point's crossing lies inside)
START_GRID = TRANSITION_GRID
#: the widest range searched: down to ``ALPHA_MIN``, up to ``ALPHA_MAX``
ALPHA_MIN = 0.02
ALPHA_MAX = 10.0
#: ratio of consecutive new points when the range is widened upwards (2.4 to 10 in 6 points)
UP_RATIO = 1.25
#: ratio of consecutive new points when the range is widened downwards (0.2 to 0.02 in 4 points)
DOWN_RATIO = 0.6

UP, DOWN = "up", "down"


@dataclass(frozen=True)
class Verdict:
    """What the followed branches say about the range (:func:`assess`): ``direction``, the way to
    widen it (``"up"``, ``"down"``, or ``None``: stop); ``bracketed``, the change of the global
    minimum lies inside (the training errors cross between two neighbouring points, or the semantic
    side begins lower than the positional branch); ``reason``, why it stops otherwise."""

    direction: str | None
    bracketed: bool = False
    reason: str | None = None


def next_alpha(a: float, direction: str) -> float | None:
    """The next point beyond ``a`` when the range is widened in ``direction`` (3 significant
    digits); the range's limit where one more step would pass it; ``None`` at the limit."""
    ratio, limit = (UP_RATIO, ALPHA_MAX) if direction == UP else (DOWN_RATIO, ALPHA_MIN)
    beyond = (lambda x: x >= limit) if direction == UP else (lambda x: x <= limit)
    if beyond(a):
        return None
    nxt = float(f"{a * ratio:.3g}")
    return limit if beyond(nxt * ratio) or beyond(nxt) else nxt


def _span(alphas: Sequence[float], idx: Sequence[int]) -> str:
    """The points ``idx`` (increasing) as runs of neighbours: ``alpha = 0.2 to 0.6, 1.4``."""
    runs: list[list[int]] = []
    for k in idx:
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return "alpha = " + ", ".join(f"{alphas[r[0]]:g}" + (f" to {alphas[r[-1]]:g}" if len(r) > 1 else "") for r in runs)


def assess(alphas: Sequence[float], sem: Sequence[float | None], pos: Sequence[float | None],
           sem_name: str = "semantic") -> Verdict:
    """The verdict on the range ``alphas`` (increasing) from the coarse training errors of the
    semantic side ``sem`` and the positional branch ``pos`` at each point (``None``: the branch is
    not found there), docs/model.md (5.2), (5.3):

    * bracketed: the difference (semantic side minus positional) falls from ``> 0`` to ``<= 0``
      between neighbouring points, or it is ``<= 0`` at the lowest point where both exist and
      only the positional branch exists just below (the semantic side begins as the global
      minimum: located by the search's scan down to its start);
    * up: the positional branch is the lower at the highest point where both exist and it exists
      at the range's top (or the semantic side is not found at all: it exists at large ``alpha``);
    * down: the semantic side is the lower at the lowest point where both exist and exists at the
      range's bottom (or the positional branch is not found at all);
    * otherwise, or where the limit of the direction (``ALPHA_MIN``, ``ALPHA_MAX``) is reached, no
      transition, with the reason: which branch is the lower wherever both exist (and over which
      range), where a branch ends while it is the lower, or that a branch is found nowhere.
    """
    n = len(alphas)
    lo, hi = alphas[0], alphas[-1]
    s_at = [k for k in range(n) if sem[k] is not None]
    p_at = [k for k in range(n) if pos[k] is not None]
    both = [k for k in s_at if pos[k] is not None]
    at_top, at_bottom = hi >= ALPHA_MAX, lo <= ALPHA_MIN
    searched = f"alpha = {lo:g} to {hi:g}"
    if not s_at or not p_at:
        missing, other = (sem_name, "positional") if not s_at else ("positional", sem_name)
        first, then = (UP, DOWN) if not s_at else (DOWN, UP)
        for way, done in ((first, at_top if first == UP else at_bottom), (then, at_top if then == UP else at_bottom)):
            if not done:
                return Verdict(way)
        found = s_at or p_at
        tail = (f"; the {other} branch, found at {_span(alphas, found)}, is the only one there" if found
                else f"; nor is the {other} branch")
        return Verdict(None, reason=f"no transition: the {missing} branch is not found anywhere in {searched}{tail}")
    diff = {k: cast(float, sem[k]) - cast(float, pos[k]) for k in both}
    for k in range(n - 1):
        if k in diff and k + 1 in diff and diff[k] > 0 >= diff[k + 1]:
            return Verdict(None, bracketed=True)
    if not both:
        return Verdict(None, reason=f"no transition located: the positional branch is found at {_span(alphas, p_at)} "
                                    f"and the {sem_name} branch at {_span(alphas, s_at)}, never at the same alpha "
                                    "(the trivial branch between them is not followed)")
    f, last = both[0], both[-1]
    if diff[last] > 0:
        if pos[n - 1] is not None or sem[n - 1] is None:
            if at_top:
                return Verdict(None, reason=f"no transition: the positional branch has the lower training error "
                                            f"wherever both branches exist ({_span(alphas, both)}), up to the end of "
                                            f"the range searched ({searched})")
            return Verdict(UP)
        return Verdict(None, reason=f"no crossing of the training errors: the positional branch has the lower "
                                    f"training error wherever both branches exist ({_span(alphas, both)}) and is "
                                    f"not found above alpha = {alphas[p_at[-1]]:g}: the global minimum passes to the "
                                    f"{sem_name} branch where the positional branch ends")
    if diff[f] <= 0:
        if f > 0 and pos[f - 1] is not None and sem[f - 1] is None:
            return Verdict(None, bracketed=True)
        if sem[0] is not None or pos[0] is None:
            if at_bottom:
                return Verdict(None, reason=f"no transition: the {sem_name} branch has the lower training error "
                                            f"wherever both branches exist ({_span(alphas, both)}), and the range was "
                                            f"searched down to alpha = {lo:g} (the {sem_name} branch found at "
                                            f"{_span(alphas, s_at)}, the positional one at {_span(alphas, p_at)})")
            return Verdict(DOWN)
        below = alphas[f - 1]
        if sem[f - 1] is None and pos[f - 1] is None:
            there = (f"neither branch is found (the positional branch is found up to alpha = "
                     f"{max(alphas[k] for k in p_at if k < f):g}): the global minimum there is on a branch that is "
                     "not followed (the trivial one)")
        else:
            there = f"the {sem_name} branch is found and the positional one is not"
        return Verdict(None, reason=f"no transition located: the {sem_name} branch has the lower training error "
                                    f"wherever both branches exist ({_span(alphas, both)}); just below, at alpha = "
                                    f"{below:g}, {there}")
    return Verdict(None, reason=f"no crossing of the training errors located in {searched} (their difference, "
                                f"{sem_name} minus positional, is {diff[f]:.2g} at alpha = {alphas[f]:g} and "
                                f"{diff[last]:.2g} at alpha = {alphas[last]:g})")


#: ``solve(alpha, branch, found)``: ``branch`` at ``alpha``, continued from the points ``found``
#: where it exists (nearest last); :func:`continue_branch` with the model and settings bound
Solve = Callable[[float, str, Sequence[BranchPoint]], BranchPoint]


def _secant(p1: BranchPoint, p2: BranchPoint, alpha: float) -> OrderParams | None:
    """The order parameters at ``alpha`` extrapolated linearly through two solved points of a
    branch (``None`` where they leave the valid domain)."""
    a, b = p1.order_params, p2.order_params
    if a is None or b is None or p1.alpha == p2.alpha:
        return None
    x1, x2 = a.to_vector(), b.to_vector()
    t = (alpha - p2.alpha) / (p2.alpha - p1.alpha)
    L, F = b.m.shape
    op = OrderParams.from_vector(x2 + t * (x2 - x1), L, F, b.theta.shape[1])
    return op if is_valid(op) else None


def continue_branch(spec: ModelSpec, settings: SolverSettings, alpha: float, branch: str,
                    found: Sequence[BranchPoint]) -> BranchPoint:
    """``branch`` at ``alpha`` by continuation from the points ``found`` (nearest last), as
    :func:`attnphase.theory.branches.follow_branch` continues along its grid: a warm start
    (order parameters, Jacobian and data step of the nearest point, a secant predictor through the
    two nearest), then a direct start where the branch is lost or none was found yet."""
    if found:
        last = found[-1]
        start = (_secant(found[-2], last, alpha) if len(found) >= 2 else None) or last.order_params
        pt = solve_point(spec, alpha, branch, settings, start=start, error_estimate=False,
                         jacobian=last._jacobian, warm=last._data)
        if pt.exists:
            return pt
    return solve_point(spec, alpha, branch, settings, start=None, error_estimate=False)


def widen_range(alphas: Sequence[float], sem: Sequence[BranchPoint], pos: Sequence[BranchPoint], sem_name: str,
                solve: Solve, progress: Callable[[], None] | None = None
                ) -> tuple[list[float], list[BranchPoint], list[BranchPoint], Verdict]:
    """Widen the range ``alphas`` (increasing; ``sem``, ``pos``: the two branches followed on it)
    one point at a time in the direction :func:`assess` gives, each branch continued by ``solve``
    from its points nearest the new one, until the verdict is bracketed or a reason; returns the
    range, the two branches on it and the verdict. ``progress()``: after each new point."""
    grid, s_pts, p_pts = [float(a) for a in alphas], list(sem), list(pos)
    while True:
        verdict = assess(grid, [p.train_loss if p.exists else None for p in s_pts],
                         [p.train_loss if p.exists else None for p in p_pts], sem_name)
        if verdict.direction is None:
            return grid, s_pts, p_pts, verdict
        up = verdict.direction == UP
        a = next_alpha(grid[-1] if up else grid[0], verdict.direction)
        if a is None:  # (assess stops at the limits: not reached)
            return grid, s_pts, p_pts, verdict
        for name, pts in ((sem_name, s_pts), ("positional", p_pts)):
            found = [p for p in pts if p.exists]
            pt = solve(a, name, found if up else found[::-1])
            if up:
                pts.append(pt)
            else:
                pts.insert(0, pt)
        if up:
            grid.append(a)
        else:
            grid.insert(0, a)
        for name, pts in ((sem_name, s_pts), ("positional", p_pts)):
            _fill_inwards(grid, pts, name, len(grid) - 1 if up else 0, -1 if up else 1, solve)
        if progress is not None:
            progress()


def _fill_inwards(grid: Sequence[float], pts: list[BranchPoint], name: str, k: int, step: int, solve: Solve) -> None:
    """Where the branch is found at the new point ``grid[k]`` but not at its neighbour, continue it
    from there into the range (``step``: -1 downwards, +1 upwards) while it is found, in place: a
    branch that the continuation along the grid lost, or that its direct start missed, is picked up
    from the other side. A point the fine rules rejected (:func:`fine_rejected`) stays rejected."""
    run = [pts[k]]
    k += step
    while run[-1].exists and 0 <= k < len(grid) and not pts[k].exists and not fine_rejected(pts[k]):
        pt = solve(grid[k], name, run)
        if not pt.exists:
            return
        pts[k] = pt
        run.append(pt)
        k += step


def fine_rejected(p: BranchPoint) -> bool:
    """``p`` was found on the coarse rule and marked absent because the fine rules do not confirm it
    (:func:`attnphase.theory.refinement.mark_unresolved`)."""
    return not p.exists and p.reason.startswith(f"no {p.branch} fixed point on the fine rules")


def start_grid() -> np.ndarray:
    """The grid of :data:`START_GRID`."""
    return np.linspace(*START_GRID)
