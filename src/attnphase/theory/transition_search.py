"""The search behind :func:`~attnphase.theory.transition.find_transition`: the state of one search
on a grid of ``alpha`` (the two branches, their spinodals, the crossing of the training errors and
of the test errors) and its tuning constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, cast

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import CLASSIFY_TOL, BranchPoint, semantic_side, solve_point
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.refinement import (
    RESOLVE_SE,
    fine_absence,
    is_confirmed,
    mark_unresolved,
    mid_rule_walker,
    refine_point,
)
from attnphase.theory.roots import (
    bisect,
    bisect_bracket,
    illinois_root,
    midpoint,
)
from attnphase.theory.saddle import linear_test_error


def _spinodal_below(spec: ModelSpec, branch: str, settings: SolverSettings, probe: SolverSettings,
                    anchor: BranchPoint, absent: float, grid: np.ndarray) -> float | None:
    """The end of ``branch`` (semantic side) where the fine rules hold it below the point
    ``absent`` at which the coarse rule lost it, else ``None``.

    The branch is continued down from ``anchor`` by :func:`mid_rule_walker` (probes with the
    probe budget). Seen for the causal student at ``omega = 0.3``: the coarse rule's semantic
    branch ends near 1.7-1.78, the fine rules' near 1.61 (docs/variants.md). Where the coarse
    rule ends the branch too late (its small-``theta`` tail, "Known limitations" in docs/solver.md) the
    first check fails and nothing changes.
    """
    walk = mid_rule_walker(spec, branch, settings, anchor, probe, PROBE_REFINE_EVALS)
    if walk is None:
        return None

    def exists(a: float) -> float | None:
        return None if walk(a) is None else 1.0

    if exists(absent) is None:
        return None
    step = float(np.min(np.diff(grid))) if len(grid) > 1 else 0.2
    present, a = absent, absent - step
    while a > 0 and exists(a) is not None:
        present, a = a, a - step
    if a <= 0:
        return None  # (the branch continues to alpha -> 0 on that rule: leave the coarse answer)
    return bisect(exists, present, a, 1.0, SPINODAL_XTOL)


#: relative gap of the coarse training errors above which the global minimum is taken from the
#: coarse rule without refining both branches (the 2^8 x 4 rule scatters by <= 1.5 %, measured)
GLOBAL_MARGIN = 0.05


#: iteration budget of a spinodal probe (a solve that decides whether a branch exists at one alpha)
SPINODAL_PROBE_ITER = 60


#: bisection tolerance of the spinodals: two probes on the default grid (spacing 0.2), i.e. the
#: spinodal to +- 0.025. A probe is solved on the coarse rule and, with refinement, counts only if
#: its refined point stays on the branch (fine_absence), which costs 2-3 s per probe near a
#: spinodal; the spinodal itself moves by a few hundredths between fine rules
SPINODAL_XTOL = 0.06


#: fine data steps of a spinodal probe's refinement (a refinement near the spinodal took 16)
PROBE_REFINE_EVALS = 8


#: steps of the scan between the start of the semantic side and the lowest grid point where it
#: exists, where it is already lower there (:meth:`TransitionSearch.crossing_below`)
SCAN_STEPS = 4


def _refined_se(p: BranchPoint, key: str) -> float | None:
    """Standard error of ``key`` over the fine rules of a refined point (``None`` otherwise)."""
    return None if p.refinement is None else p.refinement.error(key)


def _root_error(hist: Sequence[tuple[float, float, float | None]]) -> float | None:
    """Error of a root located from evaluations ``(x, f(x), se of f)``: the standard error of
    ``f`` at the evaluation nearest the root over the local slope (through the two nearest)."""
    known = [(x, f, se) for x, f, se in hist if se is not None]
    pts = sorted({h[0]: h for h in known}.values(), key=lambda h: abs(h[1]))[:2]
    if len(pts) < 2 or pts[0][0] == pts[1][0]:
        return None
    slope = (pts[1][1] - pts[0][1]) / (pts[1][0] - pts[0][0])
    return float(abs(pts[0][2] / slope)) if slope != 0 else None


class TransitionSearch:
    """The steps of :func:`find_transition` on one grid, and what they share: the points solved
    so far on each branch (warm starts), the refined points (refined once each), the evaluations
    of the two root searches (their errors) and the notes."""

    def __init__(self, spec: ModelSpec, settings: SolverSettings, grid: np.ndarray, xtol: float) -> None:
        self.spec, self.settings, self.grid, self.xtol = spec, settings, grid, xtol
        self.sem_name = semantic_side(spec)
        self.eps_lin = linear_test_error(spec)
        self.notes: list[str] = [] if self.sem_name == "semantic" else [f"{'several heads' if spec.heads > 1 else 'rank >= 2'}: the semantic side is the {self.sem_name} branch"]
        # a spinodal probe that has not converged within this budget counts as "branch absent" (near
        # a spinodal the map's Jacobian becomes singular and a failing solve would otherwise run
        # the full max_iter)
        self.probe = replace(settings, max_iter=min(settings.max_iter, SPINODAL_PROBE_ITER), max_polish=1)
        #: the points of each branch where it exists, the warm starts of the solves at new alphas
        self.solved: dict[str, list[BranchPoint]] = {}
        #: refined points by (branch, alpha), and by ("exact", branch, alpha) those refined to tol
        self.refined: dict[tuple, BranchPoint] = {}
        #: evaluations (alpha, value, its standard error) of the two root searches
        self.hist: dict[str, list[tuple[float, float, float | None]]] = {"alpha_c": [], "alpha_l": []}
        #: how the global minimum changes at alpha_c (docs/model.md (5.5)), set by :meth:`alpha_c`
        self.kind: str | None = None
        self.exchange: tuple[str, str] | None = None
        self.order_parameter: dict[str, Any] = {}
        #: the error of alpha_c where it is not a root of the training-error difference (the start
        #: of the semantic side, :meth:`crossing_below`)
        self.alpha_c_error: float | None = None
        #: the lowest alpha where the semantic side was confirmed (the present end of its spinodal
        #: search) and the highest where it was not (the absent end)
        self.sem_start: float | None = None
        self.sem_absent: float | None = None
        #: where the global minimum changes, and the semantic side's points near it (:meth:`change_at`)
        self.change: tuple[float, BranchPoint, BranchPoint] | None = None

    # --- solving and refining points ---

    def solve_at(self, a: float, branch: str, near: BranchPoint, s: SolverSettings | None = None) -> BranchPoint:
        """``branch`` at ``a``, warm-started (order parameters and Jacobian) from the nearest
        solved point of the branch (``near`` if there is none)."""
        pool = self.solved[branch] or [near]
        best = min(pool, key=lambda p: abs(p.alpha - a))
        pt = solve_point(self.spec, a, branch, self.settings if s is None else s, start=best.order_params, error_estimate=False,
                         jacobian=best._jacobian, warm=best._data)
        if pt.exists:
            self.solved[branch].append(pt)
        return pt

    def fine(self, p: BranchPoint) -> BranchPoint:
        """``p`` refined (:func:`refine_point`, to ``REFINE_TOL``) where the settings ask for it."""
        if not self.settings.refine_order or not p.exists or p.refinement is not None:
            return p  # (a point given already refined, e.g. by the curves command, is kept)
        key = (p.branch, p.alpha)
        if key not in self.refined:
            self.refined[key] = refine_point(self.spec, p, self.settings)
        return self.refined[key]

    def settled(self, p: BranchPoint) -> BranchPoint:
        """``p`` refined to ``settings.tol`` as a single solve is (:func:`refine_point` with its
        fallback), for the checks of a followed branch's inner end. The quick refinement (to
        ``REFINE_TOL``) is not enough there: at ``omega = 0`` it carried the positional point at
        the grid's end (``alpha = 2.4``, coarse ``m = 0.070``) to ``m = -0.0032``, resolved from
        zero by the teacher-scaled fine rules, and stopped, so the branch was taken to reach the
        grid's end; refined to ``tol`` it is not resolved."""
        if not p.exists or not self.settings.refine_order or p.refinement is not None:
            return self.fine(p)
        key = ("exact", p.branch, p.alpha)
        if key not in self.refined:
            self.refined[key] = refine_point(self.spec, p, self.settings, tol=self.settings.tol)
        return self.refined[key]

    def on_fine(self, p: BranchPoint) -> bool:
        """The branch exists at ``p`` on the fine rules too (see :func:`fine_absence`)."""
        return p.exists and fine_absence(self.settled(p)) is None

    def probe_exists(self, a: float, branch: str, anchor: BranchPoint) -> float | None:
        """1 where ``branch`` exists at ``a`` (a probe of the spinodal search), else ``None``. As
        a coarse probe that has not converged in its budget, a probe whose refinement has not
        converged in ``PROBE_REFINE_EVALS`` counts as "branch absent"."""
        pt = self.solve_at(a, branch, anchor, self.probe)
        if not pt.exists or not self.settings.refine_order:
            return 1.0 if pt.exists else None
        r = refine_point(self.spec, pt, self.settings, max_evals=PROBE_REFINE_EVALS, retry=False)
        if is_confirmed(r):
            return 1.0
        self.solved[branch] = [q for q in self.solved[branch] if q is not pt]  # (no warm start from it)
        return None

    # --- the spinodals ---

    def check_inner_ends(self, sem: list[BranchPoint], pos: list[BranchPoint]) -> None:
        """Check the inner ends of the followed branches on the fine rules (the coarse rule can
        continue a branch past its spinodal, :func:`fine_absence`), marking the points there that
        the fine rules do not confirm (in place); then the warm-start pools."""
        n = len(self.grid)
        lo = next((k for k in range(n) if all(p.exists for p in sem[k:])), n)
        while lo < n and not self.on_fine(sem[lo]):
            sem[lo] = mark_unresolved(self.settled(sem[lo]))
            lo += 1
        hi = max((k for k in range(n) if all(p.exists for p in pos[: k + 1])), default=-1)
        while hi >= 0 and not self.on_fine(pos[hi]):
            pos[hi] = mark_unresolved(self.settled(pos[hi]))
            hi -= 1
        self.solved = {self.sem_name: [p for p in sem if p.exists], "positional": [p for p in pos if p.exists]}

    def semantic_spinodal(self, sem: list[BranchPoint]) -> float | None:
        """The lowest ``alpha`` where the semantic side exists (docs/model.md (5.3)): bisection
        between the grid points where the followed branch ends, then, where the fine rules hold
        it further down, :func:`_spinodal_below`."""
        grid, ok = self.grid, [p.exists for p in sem]
        if not any(ok) or all(ok):
            return None
        i = next((k for k in range(len(grid)) if ok[k] and all(ok[k:])), None)
        if i is None:
            self.notes.append(f"the {self.sem_name} branch is not found at the grid end (alpha = {grid[-1]:g})")
            return None
        if i == 0:
            return None
        anchor = sem[i]
        present, absent = bisect_bracket(lambda a: self.probe_exists(a, self.sem_name, anchor),
                                          grid[i], grid[i - 1], 1.0, SPINODAL_XTOL)
        coarse_end = midpoint(present, absent)
        self.sem_start, self.sem_absent = float(present), float(absent)
        below = _spinodal_below(self.spec, self.sem_name, self.settings, self.probe, anchor, absent, grid)
        if below is None:
            return coarse_end
        self.sem_start, self.sem_absent = float(below), float(below) - SPINODAL_XTOL / 2
        # (the lowest followed point may already be one continued on the finer rule, handed over by
        # curves: what ended near the bisection are the coarse-rule probes below it)
        self.notes.append(f"probes on the coarse rule end the {self.sem_name} branch near alpha "
                          f"{coarse_end:.3g}; on the rule one order below the fine rules it "
                          f"continues to {below:.3g} (confirmed on the fine rules), which is reported")
        return below

    def positional_spinodal(self, pos: list[BranchPoint]) -> float | None:
        """The largest ``alpha`` where the positional branch exists (docs/model.md (5.3)), by
        bisection between the grid points where the followed branch ends."""
        grid, ok = self.grid, [p.exists for p in pos]
        if not any(ok) or all(ok):
            return None
        j = max((k for k in range(len(grid)) if ok[k] and all(ok[: k + 1])), default=None)
        if j is None:  # (seen at lambda = 0: no positional point at the grid start, some further up)
            found = ", ".join(f"{grid[k]:g}" for k in range(len(grid)) if ok[k])
            self.notes.append(f"the positional branch is not found at the grid start (alpha = {grid[0]:g}), only "
                              f"at alpha = {found}: no spinodal reported for it")
            return None
        if j == len(grid) - 1:
            return None
        anchor = pos[j]
        return bisect(lambda a: self.probe_exists(a, "positional", anchor), grid[j], grid[j + 1], 1.0, SPINODAL_XTOL)

    # --- alpha_c and alpha_l: bracketed on the grid, then located by regula falsi on refined points
    # (the training errors re-evaluated variationally on finer rules, so the shallow crossing of the
    # two training errors is located to the fine rules' accuracy, not the coarse one's) ---

    def train_diff(self, s: BranchPoint, p: BranchPoint) -> float | None:
        """Training error of the semantic side minus the positional one's, on refined points
        where the settings ask for refinement (``None`` where a branch is absent)."""
        if not (s.exists and p.exists):
            return None
        fs, fp = self.fine(s), self.fine(p)
        v = fs.train_loss - fp.train_loss
        es, ep = _refined_se(fs, "train_loss"), _refined_se(fp, "train_loss")
        self.hist["alpha_c"].append((s.alpha, v, None if es is None or ep is None else float(np.hypot(es, ep))))
        return v

    def train_diff_at(self, a: float, s_near: BranchPoint, p_near: BranchPoint) -> float | None:
        """:meth:`train_diff` of both branches solved at ``a`` (warm starts near ``s_near``, ``p_near``)."""
        return self.train_diff(self.solve_at(a, self.sem_name, s_near), self.solve_at(a, "positional", p_near))

    def global_point(self, s: BranchPoint, p: BranchPoint) -> BranchPoint | None:
        """The global minimum of the two branches (lowest training error), refined where the
        coarse rule does not decide it."""
        cands = [b for b in (s, p) if b.exists]
        if len(cands) == 2 and abs(s.train_loss - p.train_loss) > GLOBAL_MARGIN * max(s.train_loss, p.train_loss):
            cands = [min(cands, key=lambda b: b.train_loss)]  # unambiguous on the coarse rule
        cands = [self.fine(b) for b in cands]
        return min(cands, key=lambda b: b.train_loss) if cands else None

    def gap(self, s: BranchPoint, p: BranchPoint) -> float | None:
        """Test error of the global minimum minus the linear baseline (``None``: no branch)."""
        g = self.global_point(s, p)
        if g is None:
            return None
        self.hist["alpha_l"].append((s.alpha, g.test_error - self.eps_lin, _refined_se(g, "test_error")))
        return g.test_error - self.eps_lin

    def gap_at(self, a: float, s_near: BranchPoint, p_near: BranchPoint) -> float | None:
        """:meth:`gap` of both branches solved at ``a`` (warm starts near ``s_near``, ``p_near``)."""
        return self.gap(self.solve_at(a, self.sem_name, s_near), self.solve_at(a, "positional", p_near))

    def last_se(self, root: str) -> float | None:
        """The standard error of the last evaluation of the search for ``root``."""
        return self.hist[root][-1][2]

    def settle(self, f: Callable[[int], float | None], k: int, right: Callable[[float | None], bool]) -> int:
        """Move the bracket ``[k, k+1]`` found on the coarse values until the refined values
        ``f`` bracket the sign change (``right(v)``: the crossing lies to the right of ``v``)."""
        seen = set()
        while 0 <= k < len(self.grid) - 1 and k not in seen:
            seen.add(k)
            lo, hi = f(k), f(k + 1)
            if lo is None or hi is None:
                break
            if right(hi) and right(lo) and k + 1 < len(self.grid) - 1:
                k += 1
            elif not right(lo) and not right(hi) and k > 0:
                k -= 1
            else:
                break
        return k

    def alpha_c(self, sem: list[BranchPoint], pos: list[BranchPoint]) -> float | None:
        """Where the global minimum changes from the positional branch to the semantic side
        (docs/model.md (5.2), (5.5)): where their training errors cross, or where the semantic
        side begins if it is lower wherever it exists (:meth:`crossing_below`); then how it
        changes (:meth:`change_at`, :meth:`classify`)."""
        grid, notes = self.grid, self.notes
        alpha_c = None
        n_notes = len(notes)  # (notes on alpha_c added below)
        diff = [(s.train_loss - p.train_loss) if (s.exists and p.exists) else None for s, p in zip(sem, pos, strict=True)]
        bracket = next((k for k in range(len(grid) - 1) if _falls(diff[k], diff[k + 1])), None)
        if bracket is None and self.settings.refine_order:
            bracket = self.refined_bracket(sem, pos, diff)
        if bracket is not None:
            k = bracket
            if self.settings.refine_order:
                k = self.settle(lambda i: self.train_diff(sem[i], pos[i]), k, lambda v: v is not None and v > 0)
            s_anchor, p_anchor = sem[k], pos[k]
            dlo, dhi = self.train_diff(sem[k], pos[k]), self.train_diff(sem[k + 1], pos[k + 1])
            if dlo is None and dhi is not None and dhi <= 0:
                alpha_c = self.crossing_below(sem, pos, k + 1, dhi)
            elif not _falls(dlo, dhi):
                notes.append("the refined training errors do not cross on the coarse bracket")
            else:
                alpha_c = illinois_root(partial(self.train_diff_at, s_near=s_anchor, p_near=p_anchor), grid[k], grid[k + 1],
                                cast(float, dlo), dhi, self.xtol, noise=partial(self.last_se, "alpha_c"))
                self.change_at(alpha_c, s_anchor, sem[k + 1])
        if alpha_c is None and len(notes) == n_notes:
            notes.append("no crossing of the training errors on the alpha grid" + self.grid_end_hint(sem, pos))
        return alpha_c

    def grid_end_hint(self, sem: list[BranchPoint], pos: list[BranchPoint]) -> str:
        """Where the crossing may lie when the grid has none: above the grid where the positional
        branch is the lower at its last point (with both branches there), below it where the
        semantic side is the lower at its first: where the coarse rule decides it (``GLOBAL_MARGIN``),
        else where the refined difference is three of its standard errors from zero."""
        def lower(k: int) -> str | None:
            s, p = sem[k], pos[k]
            if not (s.exists and p.exists):
                return None
            v: float | None = s.train_loss - p.train_loss
            if abs(cast(float, v)) <= GLOBAL_MARGIN * max(s.train_loss, p.train_loss):
                v = self.train_diff(s, p)  # (its standard error is None without refinement)
                se = self.last_se("alpha_c") if v is not None else None
                if v is None or se is None or abs(v) <= 3 * se:
                    return None
            return "positional" if cast(float, v) > 0 else self.sem_name
        last, first = len(self.grid) - 1, 0
        if lower(last) == "positional":
            return (f"; the positional branch is still the lower at the grid's end (alpha = {self.grid[last]:g}): "
                    "extend --alpha upwards")
        if lower(first) == self.sem_name:
            return (f"; the {self.sem_name} branch is already the lower at the grid's start (alpha = {self.grid[first]:g}): "
                    "extend --alpha downwards")
        return ""

    def refined_bracket(self, sem: list[BranchPoint], pos: list[BranchPoint], diff: list[float | None]) -> int | None:
        """A bracket ``[k, k+1]`` of the change of the global minimum where the coarse training
        errors show none but do not decide it (within ``GLOBAL_MARGIN``): from the lowest grid
        point where both branches exist upward, the refined differences until one is ``<= 0``.
        At rank 2 the coarse rule's bias (``+2.6e-5`` at ``alpha = 0.8``, ``omega = 0.3``) is
        larger than the difference itself, so the coarse values do not change sign."""
        prev = None
        for k in (k for k in range(len(self.grid)) if diff[k] is not None):
            s, p = sem[k], pos[k]
            if abs(s.train_loss - p.train_loss) > GLOBAL_MARGIN * max(s.train_loss, p.train_loss):
                if cast(float, diff[k]) <= 0:
                    return None  # (the coarse rule decides: the semantic side is lower)
                prev = k
                continue
            d = self.train_diff(s, p)
            if d is None:
                continue
            if d <= 0:
                if prev is not None and prev == k - 1:
                    return prev
                if prev is None and k > 0 and pos[k - 1].exists and not sem[k - 1].exists:
                    return k - 1  # (the semantic side begins below k, already lower: crossing_below)
                return None
            prev = k
        return None

    def crossing_below(self, sem: list[BranchPoint], pos: list[BranchPoint], k: int, dk: float) -> float | None:
        """``alpha_c`` where the semantic side is already lower at ``grid[k]``, the lowest grid
        point where it exists: the refined difference (``dk <= 0`` there) is followed down to the
        start of the semantic side (the lowest point its spinodal search confirmed) in
        ``SCAN_STEPS`` steps; a sign change on the way is located by regula falsi, otherwise the
        global minimum changes where the semantic side begins (the lowest point scanned; its error:
        the scan step, or the difference's standard error over its slope where that is larger)."""
        top = float(self.grid[k])
        start = self.sem_start if self.sem_start is not None else float(self.grid[k - 1])
        name, notes = self.sem_name, self.notes
        s_near, p_near = sem[k], pos[k]
        if not start < top:  # (its spinodal search confirmed nothing below the grid point)
            below = self.sem_absent if self.sem_absent is not None and self.sem_absent < top else None
            if below is None:
                notes.append(f"the {name} branch is lower at alpha = {top:g}, the lowest grid point where it exists, "
                             "and its start was not located below it: alpha_c not located")
                return None
            notes.append(f"the {name} branch is lower at alpha = {top:g}, the lowest grid point where it exists, and "
                         f"not found at {below:.4g}: the global minimum changes where it begins, between the two")
            self.alpha_c_error = max(top - below, SPINODAL_XTOL / 2)
            self.change_at(top, s_near, s_near)
            return top
        last_a, last_d = top, dk
        for a in np.linspace(top, start, SCAN_STEPS + 1)[1:]:
            a = midpoint(a, a)
            d = self.train_diff_at(a, s_near, p_near)
            if d is None:
                break
            if d > 0:
                alpha_c = illinois_root(partial(self.train_diff_at, s_near=s_near, p_near=p_near), a, last_a, d, last_d,
                                self.xtol, noise=partial(self.last_se, "alpha_c"))
                notes.append(f"the refined training errors cross between alpha = {a:.4g} and {last_a:.4g}, below the "
                             f"lowest grid point where the {name} branch exists ({top:g}): located on a finer scan")
                self.change_at(alpha_c, s_near, s_near)
                return alpha_c
            last_a, last_d = a, d
        se = self.last_se("alpha_c")
        notes.append(f"the refined training error of the {name} branch is lower than the positional one's wherever "
                     f"the {name} branch was found, down to alpha = {last_a:.4g} (difference there {last_d:.2g}"
                     + (f" +- {se:.1g}" if se is not None else "") + f"): the global minimum changes where the {name} "
                     "branch begins")
        # (the scan step, or the difference's standard error over its slope where that is larger)
        self.alpha_c_error = max((top - start) / SCAN_STEPS, SPINODAL_XTOL / 2, _root_error(self.hist["alpha_c"]) or 0.0)
        self.change_at(last_a, s_near, s_near)
        return last_a

    def change_at(self, alpha_c: float, s_near: BranchPoint, s_fallback: BranchPoint) -> None:
        """Record that the global minimum changes at ``alpha_c`` (:meth:`classify` says how, once
        ``alpha_l`` is located: its solves do not warm-start the ``alpha_l`` search)."""
        self.change = (alpha_c, s_near, s_fallback)

    def classify(self) -> None:
        """How the global minimum changes at ``alpha_c`` (docs/model.md (5.5)), from the order
        parameter ``theta`` (``|theta|`` at rank ``r >= 2``: the semantic overlap, zero on the
        positional branch) of the semantic side there, refined, and its standard error over the
        fine rules: resolved from zero (``RESOLVE_SE`` standard errors), it jumps: a
        discontinuous change (a crossing of training errors, first order); not resolved, the
        semantic side grows out of the positional branch: a continuous change (a bifurcation).
        Where the semantic side is not found at ``alpha_c`` itself, or its refinement there gives
        no error estimate, the nearest point above (``s_fallback``) stands in; without any
        estimate (no refinement) an overlap above ``CLASSIFY_TOL`` counts as resolved."""
        if self.change is None:
            return
        alpha_c, s_near, s_fallback = self.change
        s = self.solve_at(alpha_c, self.sem_name, s_near)
        f = self.fine(s) if s.exists else s_fallback
        if self.settings.refine_order and _theta_error(f) is None and s_fallback.exists:
            f = self.fine(s_fallback)  # (the refinement at alpha_c did not converge: the point above)
        val = float(abs(f.theta))
        rel = _theta_error(f)
        se = float(val * rel) if rel is not None else None
        resolved = val > RESOLVE_SE * se if se is not None else val > CLASSIFY_TOL
        self.kind = "discontinuous" if resolved else "continuous"
        self.exchange = ("positional", self.sem_name)
        self.order_parameter = {"name": "theta", "below": 0.0, "above": val, "above_error": se, "at": float(f.alpha)}
        err = f" +- {se:.1g}" if se is not None else ""
        if resolved:
            self.notes.append(f"discontinuous change (a crossing of training errors): |theta| jumps from 0 on the "
                              f"positional branch to {val:.3g}{err} on the {self.sem_name} branch (at alpha = {f.alpha:.4g})")
        else:
            self.notes.append(f"continuous change (a bifurcation): |theta| of the {self.sem_name} branch at alpha = "
                              f"{f.alpha:.4g} is {val:.2g}{err}, not resolved from zero: the {self.sem_name} branch "
                              "grows out of the positional one")

    def alpha_l(self, sem: list[BranchPoint], pos: list[BranchPoint]) -> float | None:
        """The smallest ``alpha`` above which the global minimum's test error stays below the
        linear baseline (docs/model.md (5.4))."""
        grid, notes = self.grid, self.notes
        coarse_gap: list[float | None] = []
        for s, p in zip(sem, pos, strict=True):
            cands = [b for b in (s, p) if b.exists]
            coarse_gap.append(min(cands, key=lambda b: b.train_loss).test_error - self.eps_lin if cands else None)
        bad = [g is None or g >= 0 for g in coarse_gap]
        last_bad = max((k for k in range(len(grid)) if bad[k]), default=None)
        if last_bad is None:
            notes.append("attention beats the linear baseline on the whole grid: alpha_l <= grid start")
            return float(grid[0])
        if last_bad < len(grid) - 1 and coarse_gap[last_bad] is not None:
            k = last_bad
            if self.settings.refine_order:
                k = self.settle(lambda i: self.gap(sem[i], pos[i]), k, lambda v: v is not None and v >= 0)
            s_near = sem[k + 1] if sem[k + 1].exists else sem[k]
            p_near = pos[k + 1] if pos[k + 1].exists else pos[k]
            # a jump of the global minimum at alpha_c can make the gap change sign discontinuously
            glo, ghi = self.gap(sem[k], pos[k]), self.gap(sem[k + 1], pos[k + 1])
            if glo is None or ghi is None:
                # (a branch exists at grid[k] on the coarse rule: at last_bad, or where settle moved to)
                glo, ghi = cast(float, coarse_gap[k]), coarse_gap[k + 1]
            return illinois_root(partial(self.gap_at, s_near=s_near, p_near=p_near), grid[k], grid[k + 1], glo, ghi,
                         self.xtol, noise=partial(self.last_se, "alpha_l"))
        if last_bad < len(grid) - 1:  # (no branch at grid[last_bad]: seen at lambda = 0, below alpha 1.2)
            notes.append(f"the global minimum beats the linear baseline from alpha = {grid[last_bad + 1]:g} on, but "
                         f"at alpha = {grid[last_bad]:g} neither the semantic nor the positional branch is found "
                         "(the trivial branch is not followed): alpha_l not located")
        else:
            notes.append("the global minimum does not beat the linear baseline on the grid")
        return None

    def errors(self, alpha_c: float | None, alpha_l: float | None) -> dict[str, float | None]:
        """The errors of ``alpha_c`` and ``alpha_l`` from the standard errors of the refined
        evaluations nearest them (empty without refinement)."""
        settings = self.settings
        if not (settings.refine_order and self.refined):
            return {}
        errors = {"alpha_c": (self.alpha_c_error if self.alpha_c_error is not None else
                              _root_error(self.hist["alpha_c"])) if alpha_c is not None else None,
                  "alpha_l": _root_error(self.hist["alpha_l"]) if alpha_l is not None else None}
        self.notes.append(f"alpha_c and alpha_l from points refined on {settings.refine_replicas} x "
                          f"{settings.method} rules of order {settings.refine_order} (errors: their standard error)")
        for name, val in (("alpha_c", alpha_c), ("alpha_l", alpha_l)):
            if val is not None and errors[name] is None:
                self.notes.append(f"no error estimate for {name}: fewer than two points near it refined "
                                  "(see the branches' diagnostics)")
        return errors


def _theta_error(p: BranchPoint) -> float | None:
    """The relative error estimate of ``p``'s ``theta`` (user units; ``None`` if it has none)."""
    return None if p.error_estimate is None else p.error_estimate.get("theta_user")


def _falls(lo: float | None, hi: float | None) -> bool:
    """The training-error difference (semantic side minus positional) changes sign from
    ``lo > 0`` to ``hi <= 0`` (both branches exist at both ends)."""
    return lo is not None and hi is not None and lo > 0 >= hi
