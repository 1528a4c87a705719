"""The transition points of one model (docs/model.md (5.2)-(5.5)).

:func:`find_transition` follows the semantic and the positional branch on a grid of ``alpha``
and locates ``alpha_c`` (equal training errors, (5.2)), the spinodals (where a branch stops
existing, (5.3)) and ``alpha_l`` (the global minimum's test error crosses the linear baseline,
(5.4)) by bisection and regula falsi with warm starts, on refined points where the settings ask
for refinement, and whether the global minimum changes there continuously or by a jump ((5.5)).
:func:`find_transition_replicated` and :func:`combine_transitions` repeat it over independent QMC
scrambles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from attnphase.spec.defaults import SOLVER_PRESET
from attnphase.spec.problem import ModelSpec, check_alpha
from attnphase.theory.bracket import continue_branch, start_grid, widen_range
from attnphase.theory.branches import CLASSIFY_TOL as CLASSIFY_TOL
from attnphase.theory.branches import BranchPoint, follow_branch, semantic_side
from attnphase.theory.branches import solve_point as solve_point
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.refinement import RESOLVE_SE as RESOLVE_SE
from attnphase.theory.refinement import fine_absence as fine_absence
from attnphase.theory.refinement import is_confirmed as is_confirmed
from attnphase.theory.refinement import mark_unresolved as mark_unresolved
from attnphase.theory.refinement import mid_rule_walker as mid_rule_walker
from attnphase.theory.refinement import refine_point as refine_point
from attnphase.theory.roots import illinois_root as illinois_root
from attnphase.theory.saddle import linear_test_error as linear_test_error
from attnphase.theory.transition_search import GLOBAL_MARGIN as GLOBAL_MARGIN
from attnphase.theory.transition_search import PROBE_REFINE_EVALS as PROBE_REFINE_EVALS
from attnphase.theory.transition_search import SCAN_STEPS as SCAN_STEPS
from attnphase.theory.transition_search import SPINODAL_PROBE_ITER as SPINODAL_PROBE_ITER
from attnphase.theory.transition_search import SPINODAL_XTOL as SPINODAL_XTOL
from attnphase.theory.transition_search import (
    TransitionSearch,
)


@dataclass(frozen=True)
class Transition:
    """Transition points of one model: ``alpha_c`` (docs/model.md (5.2)), the spinodals of the
    semantic side and of the positional branch ((5.3)), ``alpha_l`` ((5.4)) and the linear
    baseline's test error ((4.3)); ``notes`` say what could not be located and why."""

    alpha_c: float | None
    alpha_l: float | None
    spinodals: dict[str, float | None]
    linear_test_error: float
    notes: tuple[str, ...] = ()
    grid: dict[str, list] = field(default_factory=dict)
    #: integration-error estimate (standard error over independent QMC scrambles; empty for one)
    errors: dict[str, float | None] = field(default_factory=dict)
    #: the transition of each scramble when several were combined
    replicas: tuple[dict[str, Any], ...] = ()
    #: how the global minimum changes at ``alpha_c`` (docs/model.md (5.5)): ``"discontinuous"`` (the
    #: training errors of two branches cross and the order parameter jumps), ``"continuous"`` (the new
    #: branch grows out of the old one: its order parameter rises from zero), ``None`` (no change located)
    kind: str | None = None
    #: the branches that exchange the global minimum at ``alpha_c``: (below, above)
    exchange: tuple[str, str] | None = None
    #: the order parameter that tells the two apart (``name``; ``below`` and ``above``: its value on
    #: the global minimum just below and just above ``alpha_c``; ``above_error``: its standard error)
    order_parameter: dict[str, Any] = field(default_factory=dict)
    #: the range of ``alpha`` searched, ``(lowest, highest)`` (the grid's ends; without a given grid,
    #: as far as it was widened: :mod:`attnphase.theory.bracket`)
    alpha_range: tuple[float, float] | None = None
    #: why ``alpha_c`` is ``None``: which branch is the lower wherever both exist (and where), where a
    #: branch ends or begins, or that a branch is found nowhere in ``alpha_range``; ``None`` where
    #: ``alpha_c`` was located
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "alpha_c": self.alpha_c,
            "alpha_l": self.alpha_l,
            "spinodals": dict(self.spinodals),
            "linear_test_error": self.linear_test_error,
            "notes": list(self.notes),
            "kind": self.kind,
            "exchange": list(self.exchange) if self.exchange is not None else None,
            "order_parameter": dict(self.order_parameter),
            "alpha_range": list(self.alpha_range) if self.alpha_range is not None else None,
            "reason": self.reason,
        }
        if self.errors:
            d["errors"] = dict(self.errors)
            d["replicas"] = list(self.replicas)
        return d


def combine_transitions(runs: Sequence[dict[str, Any]], seed0: int = 0) -> dict[str, Any]:
    """Combine :meth:`Transition.to_dict` results of independent QMC scrambles (seeds
    ``seed0, seed0 + 1, ...``): the mean of each point, its standard error under ``errors`` and
    every scramble under ``replicas``. A scramble missing a point is left out of that mean."""
    runs = list(runs)
    if len(runs) == 1:
        return dict(runs[0])

    def combine(vals: list[float | None]) -> tuple[float | None, float | None]:
        got = [float(v) for v in vals if v is not None]
        if not got:
            return None, None
        mean = float(np.mean(got))
        se = float(np.std(got, ddof=1) / np.sqrt(len(got))) if len(got) > 1 else None
        return mean, se

    a_c, e_c = combine([r.get("alpha_c") for r in runs])
    a_l, e_l = combine([r.get("alpha_l") for r in runs])
    spin: dict[str, float | None] = {}
    errs: dict[str, float | None] = {"alpha_c": e_c, "alpha_l": e_l}
    for b in ("semantic", "positional"):
        spin[b], errs[f"spinodal_{b}"] = combine([r.get("spinodals", {}).get(b) for r in runs])
    notes = [f"mean of {len(runs)} QMC scrambles (seeds {seed0}..{seed0 + len(runs) - 1}); "
             "errors are standard errors over them"]
    for k, r in enumerate(runs):
        notes += [f"scramble {k}: {n}" for n in r.get("notes", [])]
        if r.get("alpha_c") is None and a_c is not None:
            notes.append(f"scramble {k} found no alpha_c; the mean uses the others")
    kinds = [r.get("kind") for r in runs if r.get("kind") is not None]
    kind = max(set(kinds), key=kinds.count) if kinds else None
    if len(set(kinds)) > 1:
        notes.append("the scrambles disagree on the kind of the change: " + ", ".join(map(str, kinds)))
    exchange = next((r.get("exchange") for r in runs if r.get("exchange")), None)
    ops = [r.get("order_parameter") or {} for r in runs if r.get("kind") == kind and r.get("order_parameter")]
    order_parameter: dict[str, Any] = {}
    if ops:
        above, above_se = combine([o.get("above") for o in ops])
        order_parameter = {"name": ops[0].get("name"), "below": ops[0].get("below"), "above": above,
                           "above_error": above_se}
    ranges = [r["alpha_range"] for r in runs if r.get("alpha_range")]
    alpha_range = [min(r[0] for r in ranges), max(r[1] for r in ranges)] if ranges else None
    reason = None if a_c is not None else next((r["reason"] for r in runs if r.get("reason")), None)
    return {"alpha_c": a_c, "alpha_l": a_l, "spinodals": spin,
            "linear_test_error": runs[0].get("linear_test_error"), "notes": notes, "errors": errs,
            "replicas": runs, "kind": kind, "exchange": exchange, "order_parameter": order_parameter,
            "alpha_range": alpha_range, "reason": reason}


def find_transition_replicated(
    spec: ModelSpec,
    alphas: Sequence[float] | None = None,
    settings: SolverSettings | None = None,
    replicas: int = 3,
    progress: Callable[[int, int], None] | None = None,
    widen: bool = False,
) -> Transition:
    """:func:`find_transition` on ``replicas`` independently scrambled QMC rules (seeds
    ``settings.seed + k``), combined by :func:`combine_transitions`; ``widen``: each widens its
    range as :func:`find_transition` does without a grid; without ``settings``, the preset of
    ``attnphase transition``, as :func:`find_transition`.

    At the fast preset (2^8 x 4 nodes) ``alpha_c(0.3)`` scatters by ~0.04 between scrambles
    (measured: 1.336, 1.254, 1.283), because the two training errors cross at a shallow angle; the
    standard error is the honest uncertainty of the reported value.
    """
    settings = settings or SolverSettings.preset(SOLVER_PRESET["transition"])
    if replicas < 1:
        raise ValueError("replicas must be >= 1")
    runs = []
    for k in range(replicas):
        def prog(i: int, n: int, k: int = k) -> None:
            if progress is not None:
                progress(k * n + i, replicas * n)

        how: dict[str, Any] = {"widen": True} if widen else {}
        runs.append(find_transition(spec, alphas, replace(settings, seed=settings.seed + k), progress=prog, **how))
    if replicas == 1:
        return runs[0]
    d = combine_transitions([r.to_dict() for r in runs], settings.seed)
    exchange = d["exchange"]
    return Transition(d["alpha_c"], d["alpha_l"], d["spinodals"], runs[0].linear_test_error,
                      tuple(d["notes"]), runs[0].grid, d["errors"], tuple(d["replicas"]), d["kind"],
                      tuple(exchange) if exchange else None, d["order_parameter"],
                      tuple(d["alpha_range"]) if d["alpha_range"] else None, d["reason"])


def find_transition(
    spec: ModelSpec,
    alphas: Sequence[float] | None = None,
    settings: SolverSettings | None = None,
    xtol: float = 5e-3,
    progress: Callable[[int, int], None] | None = None,
    branches: tuple[list[BranchPoint], list[BranchPoint]] | None = None,
    widen: bool = False,
) -> Transition:
    """``alpha_c`` (docs/model.md (5.2)), the spinodals ((5.3)), ``alpha_l`` ((5.4)) and how
    the global minimum changes at ``alpha_c`` ((5.5): the branches exchanged, continuous or
    discontinuous, the order parameter on either side) by continuation on a grid, then bisection.

    The semantic branch is followed downward from the largest ``alpha`` and the positional
    branch upward from the smallest, so each is tracked as far as it exists (its spinodal).
    For tied attention of rank ``r >= 2`` the semantic side is the ``mixed`` branch (one
    direction semantic, the other positional: the state GD reaches, and the lowest training
    error of the three at large ``alpha``); for several heads it is the ``specialised`` branch
    (docs/model.md (11.3)); its spinodal is reported under ``semantic``.
    ``branches``: the two branches already followed on this grid (semantic side, positional),
    e.g. by the curves command. With ``settings.refine_order`` the points that decide
    ``alpha_c``, ``alpha_l`` and the spinodals are refined (:func:`refine_point`); without
    ``settings``, the preset of ``attnphase transition`` (``SOLVER_PRESET["transition"]``,
    :mod:`attnphase.spec.defaults`).

    ``widen`` (without ``alphas`` and ``branches``): the grid is ``bracket.START_GRID``, and where the
    training errors do not cross on it the range is widened (:func:`attnphase.theory.bracket.widen_range`,
    down to ``ALPHA_MIN``, up to ``ALPHA_MAX``) until they do or a reason for no transition is
    established (``Transition.reason``); the search then runs again on the widened grid, which
    gives ``alpha_c``, the spinodals and ``alpha_l`` there.
    """
    settings = settings or SolverSettings.preset(SOLVER_PRESET["transition"])
    if widen and alphas is None and branches is None:
        return _find_widened(spec, settings, xtol, progress)
    grid = np.asarray(alphas if alphas is not None else start_grid(), dtype=float)
    check_alpha(grid.tolist())
    grid = np.sort(grid)
    if branches is not None:
        sem, pos = list(branches[0]), list(branches[1])
    else:
        tick = _Ticker(progress, 2 * len(grid))
        sem = follow_branch(spec, grid[::-1], semantic_side(spec), settings, progress=tick)[::-1]
        pos = follow_branch(spec, grid, "positional", settings, progress=tick)
    tr, _ = _search_grid(spec, settings, grid, xtol, sem, pos)
    return tr


def _search_grid(spec: ModelSpec, settings: SolverSettings, grid: np.ndarray, xtol: float, sem: list[BranchPoint],
                 pos: list[BranchPoint], refined: dict[tuple, BranchPoint] | None = None
                 ) -> tuple[Transition, dict[tuple, BranchPoint]]:
    """The searches of :func:`find_transition` on ``grid`` with the two branches followed on it
    (``sem``, ``pos``; changed in place where the fine rules do not confirm an inner end);
    ``refined``: points refined by an earlier search with the same coarse points, reused. Returns
    the transition and the refined points."""
    search = TransitionSearch(spec, settings, grid, xtol)
    if refined:
        search.refined.update(refined)
    search.check_inner_ends(sem, pos)
    spinodals = {"semantic": search.semantic_spinodal(sem), "positional": search.positional_spinodal(pos)}
    n_notes = len(search.notes)
    alpha_c = search.alpha_c(sem, pos)
    reason = None if alpha_c is not None else next(iter(search.notes[n_notes:]), None)
    alpha_l = search.alpha_l(sem, pos)
    search.classify()
    errors = search.errors(alpha_c, alpha_l)
    grid_data = {
        "alpha": grid.tolist(),
        "semantic_train": [p.train_loss if p.exists else None for p in sem],
        "positional_train": [p.train_loss if p.exists else None for p in pos],
        "semantic_test": [p.test_error if p.exists else None for p in sem],
        "positional_test": [p.test_error if p.exists else None for p in pos],
    }
    tr = Transition(alpha_c, alpha_l, spinodals, search.eps_lin, tuple(search.notes), grid_data, errors, (),
                    search.kind, search.exchange, dict(search.order_parameter),
                    alpha_range=(float(grid[0]), float(grid[-1])), reason=reason)
    return tr, search.refined


def _find_widened(spec: ModelSpec, settings: SolverSettings, xtol: float,
                  progress: Callable[[int, int], None] | None) -> Transition:
    """:func:`find_transition` with ``widen``: the search on ``START_GRID``; where it locates
    no ``alpha_c``, the range widened by :func:`widen_range` (from the branches as that search
    left them: inner ends the fine rules do not confirm marked absent) and the search on the
    widened grid (the points refined by the first reused)."""
    grid = start_grid()
    sem_name = semantic_side(spec)
    tick = _Ticker(progress, 2 * len(grid))
    sem = follow_branch(spec, grid[::-1], sem_name, settings, progress=tick)[::-1]
    pos = follow_branch(spec, grid, "positional", settings, progress=tick)
    first, refined = _search_grid(spec, settings, grid, xtol, sem, pos)
    if first.alpha_c is not None:
        return first
    # (sem and pos now hold the points the fine rules do not confirm marked absent: the range search
    # reads the branches as the grid search saw them)

    def step() -> None:
        tick.total += 2
        tick(0, 0)
        tick(0, 0)

    wide, sem, pos, verdict = widen_range(grid.tolist(), sem, pos, sem_name,
                                          partial(continue_branch, spec, settings), progress=step)
    if len(wide) == len(grid):
        return _with_gap(_with_reason(first, verdict.reason), sem_name)
    second, _ = _search_grid(spec, settings, np.asarray(wide), xtol, sem, pos, refined)
    lo, hi = wide[0], wide[-1]
    how = f"from {grid[0]:g}-{grid[-1]:g} to {lo:g}-{hi:g}"
    if second.alpha_c is not None:
        notes = (f"the training errors do not cross on the start grid: the alpha range was widened {how}",)
        return replace(second, notes=notes + second.notes)
    second = _with_gap(_with_reason(second, verdict.reason), sem_name)
    return replace(second, notes=(f"the alpha range was widened {how}",) + second.notes)


def _with_gap(tr: Transition, sem_name: str) -> Transition:
    """``tr`` (no ``alpha_c``) with its reason led by the gap between the branches where the
    positional branch ends (its spinodal) below the start of the semantic side: there the global
    minimum is on neither (at ``sigma = 0.6``, ``alpha = 0.5-0.6``: the trivial branch)."""
    p, s = tr.spinodals.get("positional"), tr.spinodals.get("semantic")
    if tr.alpha_c is not None or p is None or s is None or not p < s:
        return tr
    gap = (f"no transition located: the positional branch ends at alpha = {p:.3g} (its spinodal), below the start "
           f"of the {sem_name} branch at {s:.3g}; between them neither is found, and the global minimum there is on "
           "a branch that is not followed (the trivial one)")
    detail = tr.reason.removeprefix("no transition located: ") if tr.reason else None
    return replace(tr, reason=gap + (f"; {detail}" if detail else ""),
                   notes=tuple(n for n in tr.notes if n != tr.reason))


def _with_reason(tr: Transition, reason: str | None) -> Transition:
    """``tr`` (no ``alpha_c``) with the range search's ``reason`` in place of the grid search's
    (which points at extending the grid) where there is one."""
    if reason is None:
        return tr
    return replace(tr, reason=reason, notes=tuple(n for n in tr.notes if n != tr.reason))


class _Ticker:
    """The progress of the two continuations of :func:`find_transition`, counted over both."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, i: int, n: int) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)


