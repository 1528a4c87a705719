"""The alpha range of a transition search given no grid (attnphase.theory.bracket): where the
training errors do not cross on the start grid it is widened upwards or downwards, each branch
continued from the points already solved, until they cross or a reason for no transition is
established. The widening logic runs here on stub branches (no solve); one real case is slow."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import attnphase.api as api
import attnphase.theory.transition as transition
from attnphase import ModelSpec
from attnphase.cli import main
from attnphase.results import TransitionResult
from attnphase.theory import SolverSettings
from attnphase.theory.bracket import (
    ALPHA_MAX,
    ALPHA_MIN,
    DOWN,
    START_GRID,
    UP,
    assess,
    next_alpha,
    start_grid,
    widen_range,
)
from attnphase.theory.branches import BranchPoint

GRID = start_grid().tolist()


def _walk(a: float, direction: str) -> list[float]:
    out = []
    while (a := next_alpha(a, direction)) is not None:  # type: ignore[assignment]
        out.append(a)
    return out


def test_the_range_widens_in_geometric_steps_to_its_limits() -> None:
    up, down = _walk(START_GRID[1], UP), _walk(START_GRID[0], DOWN)
    assert up == [3.0, 3.75, 4.69, 5.86, 7.33, ALPHA_MAX]
    assert down == [0.12, 0.072, 0.0432, ALPHA_MIN]
    assert next_alpha(ALPHA_MAX, UP) is None and next_alpha(ALPHA_MIN, DOWN) is None


def _losses(grid: Sequence[float], f: Callable[[float], float | None]) -> list[float | None]:
    return [f(a) for a in grid]


def test_assess_sees_a_crossing_between_neighbours() -> None:
    grid = [1.0, 2.0, 3.0]
    v = assess(grid, [3.0, 2.0, 1.0], [2.0, 2.0, 2.0])
    assert v.bracketed and v.direction is None and v.reason is None


def test_assess_widens_upwards_while_the_positional_branch_is_lower_at_the_top() -> None:
    v = assess(GRID, _losses(GRID, lambda a: 2.0), _losses(GRID, lambda a: 1.0))
    assert v.direction == UP and not v.bracketed
    top = [*GRID, ALPHA_MAX]
    v = assess(top, _losses(top, lambda a: 2.0), _losses(top, lambda a: 1.0))
    assert v.direction is None and not v.bracketed
    assert "positional branch has the lower training error wherever both branches exist" in v.reason
    assert "alpha = 0.2 to 10" in v.reason


def test_assess_widens_downwards_while_the_semantic_side_is_lower_at_the_bottom() -> None:
    v = assess(GRID, _losses(GRID, lambda a: 1.0), _losses(GRID, lambda a: 2.0), "mixed")
    assert v.direction == DOWN
    low = [ALPHA_MIN, *GRID]
    v = assess(low, _losses(low, lambda a: 1.0), _losses(low, lambda a: 2.0), "mixed")
    assert v.direction is None and not v.bracketed
    assert "the mixed branch has the lower training error" in v.reason and "alpha = 0.02 to 2.4" in v.reason
    # where each branch was found, as runs of neighbouring points
    v = assess(low, _losses(low, lambda a: 1.0), _losses(low, lambda a: None if abs(a - 1.0) < 1e-9 else 2.0), "mixed")
    assert "the positional one at alpha = 0.02 to 0.8, 1.2 to 2.4" in v.reason


def test_assess_takes_a_semantic_side_that_begins_lower_as_bracketed() -> None:
    """Only the positional branch just below the lowest point where both exist: the search's scan
    down to the start of the semantic side locates the change."""
    v = assess(GRID, _losses(GRID, lambda a: 1.0 if a > 0.7 else None), _losses(GRID, lambda a: 2.0))
    assert v.bracketed


def test_assess_says_where_the_lower_positional_branch_ends() -> None:
    v = assess(GRID, _losses(GRID, lambda a: 2.0), _losses(GRID, lambda a: 1.0 if a < 1.5 else None))
    assert v.direction is None and not v.bracketed
    assert "not found above alpha = 1.4" in v.reason and "where the positional branch ends" in v.reason


def test_assess_names_a_gap_between_the_branches() -> None:
    """The positional branch ends at 0.4, the semantic side (lower) begins at 0.8: at 0.6 neither is
    found, so the change of the global minimum is not between these two branches."""
    v = assess(GRID, _losses(GRID, lambda a: 1.0 if a > 0.7 else None),
               _losses(GRID, lambda a: 2.0 if not 0.5 < a < 0.7 else None))
    assert v.direction is None and not v.bracketed
    assert "at alpha = 0.6, neither branch is found (the positional branch is found up to alpha = 0.4)" in v.reason


def test_assess_looks_for_a_missing_branch_both_ways_before_giving_up() -> None:
    nowhere = lambda a: None  # noqa: E731
    assert assess(GRID, _losses(GRID, nowhere), _losses(GRID, lambda a: 1.0)).direction == UP
    top = [*GRID, ALPHA_MAX]
    assert assess(top, _losses(top, nowhere), _losses(top, lambda a: 1.0)).direction == DOWN
    full = [ALPHA_MIN, *GRID, ALPHA_MAX]
    v = assess(full, _losses(full, nowhere), _losses(full, lambda a: 1.0))
    assert v.direction is None and "the semantic branch is not found anywhere in alpha = 0.02 to 10" in v.reason
    # the positional branch missing: downwards first
    assert assess(GRID, _losses(GRID, lambda a: 1.0), _losses(GRID, nowhere)).direction == DOWN


class StubBranches:
    """Branches whose training errors are ``sem(alpha)``, ``pos(alpha)`` (``None``: absent); each
    solve is recorded with the alpha of the point it was continued from."""

    def __init__(self, sem: Callable[[float], float | None], pos: Callable[[float], float | None]) -> None:
        self.f = {"semantic": sem, "positional": pos}
        self.calls: list[tuple[float, str, float | None]] = []

    def point(self, a: float, branch: str) -> BranchPoint:
        v = self.f[branch](a)
        return BranchPoint(branch, a, v is not None, "ok" if v is not None else "absent",
                           train_loss=v if v is not None else math.nan)

    def follow(self, grid: Sequence[float], branch: str) -> list[BranchPoint]:
        return [self.point(a, branch) for a in grid]

    def solve(self, a: float, branch: str, found: Sequence[BranchPoint]) -> BranchPoint:
        self.calls.append((a, branch, found[-1].alpha if found else None))
        return self.point(a, branch)


def _widen(stub: StubBranches):
    return widen_range(GRID, stub.follow(GRID, "semantic"), stub.follow(GRID, "positional"), "semantic", stub.solve)


def test_widening_upwards_stops_at_the_first_point_past_the_crossing() -> None:
    """The difference falls through zero at 5.5: the range grows to 5.86, each new point continued
    from the branch's highest point."""
    stub = StubBranches(lambda a: 1.0 + 0.1 * (5.5 - a), lambda a: 1.0)
    grid, sem, pos, v = _widen(stub)
    assert v.bracketed and grid[0] == GRID[0] and grid[-1] == 5.86
    assert [a for a, b, _ in stub.calls if b == "semantic"] == [3.0, 3.75, 4.69, 5.86]
    assert all(near == prev for (a, _, near), prev in zip(stub.calls[::2], [2.4, 3.0, 3.75, 4.69], strict=True))
    assert len(sem) == len(pos) == len(grid)


def test_widening_downwards_stops_below_the_crossing() -> None:
    """The semantic side is lower down to 0.05: the range grows down to 0.0432, each new point
    continued from the branch's lowest point."""
    stub = StubBranches(lambda a: 1.0 - (a - 0.05), lambda a: 1.0)
    grid, _, _, v = _widen(stub)
    assert v.bracketed and grid[0] == 0.0432 and grid[-1] == GRID[-1]
    assert [near for _, b, near in stub.calls if b == "positional"] == [0.2, 0.12, 0.072]


def test_widening_to_a_limit_gives_the_reason() -> None:
    stub = StubBranches(lambda a: 2.0, lambda a: 1.0)
    grid, _, _, v = _widen(stub)
    assert grid[-1] == ALPHA_MAX and not v.bracketed
    assert "positional branch has the lower training error wherever both branches exist" in v.reason


def test_a_branch_found_nowhere_is_searched_over_the_whole_range() -> None:
    stub = StubBranches(lambda a: None, lambda a: 1.0)
    grid, _, _, v = _widen(stub)
    assert (grid[0], grid[-1]) == (ALPHA_MIN, ALPHA_MAX)
    assert "the semantic branch is not found anywhere in alpha = 0.02 to 10" in v.reason
    # continued from nothing: a direct start at each new point
    assert all(near is None for _, b, near in stub.calls if b == "semantic")


def _missed_positional(rejected: float | None = None) -> tuple[StubBranches, list[BranchPoint]]:
    """The positional branch exists everywhere but the start grid's continuation missed it (at
    ``rejected`` the fine rules marked the coarse point absent); the semantic side begins at 0.5 and
    crosses it at 1."""
    stub = StubBranches(lambda a: 1.0 + 0.1 * (1.0 - a) if a > 0.5 else None, lambda a: 1.0)
    why = "no positional fixed point on the fine rules: m is not resolved from zero"
    pos = [BranchPoint("positional", a, False, why if rejected is not None and abs(a - rejected) < 1e-9 else "lost")
           for a in GRID]
    return stub, pos


def test_a_branch_found_at_a_new_point_is_continued_into_the_range() -> None:
    stub, pos = _missed_positional()
    grid, _, pos, v = widen_range(GRID, stub.follow(GRID, "semantic"), pos, "semantic", stub.solve)
    assert grid[0] == 0.12 and v.bracketed  # (downwards first: the positional branch exists at small alpha)
    assert all(p.exists for p in pos)
    fills = [(a, near) for a, b, near in stub.calls if b == "positional"][1:]
    alphas, nears = [a for a, _ in fills], [near for _, near in fills]
    assert alphas == pytest.approx(GRID) and nears == [0.12, *alphas[:-1]]  # each continued from the one below


def test_a_point_the_fine_rules_rejected_is_not_refilled() -> None:
    stub, pos = _missed_positional(rejected=GRID[2])
    grid, _, pos, v = widen_range(GRID, stub.follow(GRID, "semantic"), pos, "semantic", stub.solve)
    assert [p.exists for p in pos[:4]] == [True, True, True, False] and not pos[-1].exists
    assert not v.bracketed and "never at the same alpha" in v.reason


def _fake_search(crossing: float | None):
    """A stand-in for the grid search: ``alpha_c`` where the grid spans ``crossing``."""
    seen = []

    def search(spec, settings, grid, xtol, sem, pos, refined=None):
        seen.append((list(grid), refined))
        inside = crossing is not None and grid[0] < crossing < grid[-1]
        note = "no crossing of the training errors on the alpha grid; extend --alpha upwards"
        tr = transition.Transition(crossing if inside else None, None, {"semantic": None, "positional": None}, 0.002,
                                   () if inside else (note,), {"alpha": list(grid)},
                                   alpha_range=(float(grid[0]), float(grid[-1])), reason=None if inside else note)
        return tr, {("semantic", 1.0): "refined"}
    return search, seen


def _patch_branches(monkeypatch, stub: StubBranches) -> None:
    monkeypatch.setattr(transition, "follow_branch", lambda spec, grid, branch, settings, progress=None:
                        stub.follow(list(grid), branch))
    monkeypatch.setattr(transition, "continue_branch", lambda spec, settings, a, branch, found:
                        stub.solve(a, branch, found))


def test_find_transition_widens_and_searches_the_widened_grid(monkeypatch) -> None:
    stub = StubBranches(lambda a: 1.0 + 0.1 * (5.5 - a), lambda a: 1.0)
    _patch_branches(monkeypatch, stub)
    search, seen = _fake_search(5.5)
    monkeypatch.setattr(transition, "_search_grid", search)
    tr = transition.find_transition(ModelSpec(omega=0.3), settings=SolverSettings(), widen=True)
    assert tr.alpha_c == 5.5 and tr.reason is None and tr.alpha_range == (0.2, 5.86)
    assert seen[0][0] == pytest.approx(GRID) and seen[1][0][-1] == 5.86
    assert seen[1][1] == {("semantic", 1.0): "refined"}  # (the first search's refined points reused)
    assert "widened from 0.2-2.4 to 0.2-5.86" in tr.notes[0]


def test_find_transition_reports_the_reason_for_no_transition(monkeypatch) -> None:
    stub = StubBranches(lambda a: 2.0, lambda a: 1.0)
    _patch_branches(monkeypatch, stub)
    search, _ = _fake_search(None)
    monkeypatch.setattr(transition, "_search_grid", search)
    tr = transition.find_transition(ModelSpec(omega=0.3), settings=SolverSettings(), widen=True)
    assert tr.alpha_c is None and tr.alpha_range == (0.2, ALPHA_MAX)
    assert "positional branch has the lower training error" in tr.reason
    assert not any("extend --alpha" in n for n in tr.notes)  # (the grid search's hint replaced)
    d = tr.to_dict()
    assert d["alpha_range"] == [0.2, ALPHA_MAX] and d["reason"] == tr.reason


def test_a_gap_between_the_spinodals_leads_the_reason(monkeypatch) -> None:
    """The positional branch ends (0.475) below the start of the semantic side (0.675): the reason
    says so first."""
    stub = StubBranches(lambda a: 2.0, lambda a: 1.0)
    _patch_branches(monkeypatch, stub)
    search, _ = _fake_search(None)

    def with_spinodals(*args, **kw):
        tr, refined = search(*args, **kw)
        return dataclasses.replace(tr, spinodals={"semantic": 0.675, "positional": 0.475}), refined

    monkeypatch.setattr(transition, "_search_grid", with_spinodals)
    tr = transition.find_transition(ModelSpec(omega=0.3), settings=SolverSettings(), widen=True)
    assert tr.reason.startswith("no transition located: the positional branch ends at alpha = 0.475 (its "
                                "spinodal), below the start of the semantic branch at 0.675")
    assert "positional branch has the lower training error" in tr.reason  # (the range search's reason after it)


def test_a_given_grid_is_not_widened(monkeypatch) -> None:
    stub = StubBranches(lambda a: 2.0, lambda a: 1.0)
    _patch_branches(monkeypatch, stub)
    search, seen = _fake_search(None)
    monkeypatch.setattr(transition, "_search_grid", search)
    tr = transition.find_transition(ModelSpec(omega=0.3), [0.5, 1.0], SolverSettings(), widen=True)
    assert len(seen) == 1 and tr.alpha_range == (0.5, 1.0) and stub.calls == []
    assert "extend --alpha upwards" in tr.reason


def _transition_with_reason() -> transition.Transition:
    return transition.Transition(None, None, {"semantic": None, "positional": None}, 0.002, ("a note",),
                                 {"alpha": [0.2, 10.0]}, alpha_range=(0.2, 10.0), reason="no transition: because")


def test_the_cli_widens_without_alpha_and_prints_the_reason(monkeypatch, capsys) -> None:
    calls = []

    def fake(spec, alphas, settings, replicas=1, progress=None, widen=False):
        calls.append((alphas, widen))
        return _transition_with_reason()

    monkeypatch.setattr(api, "find_transition_replicated", fake)
    assert main(["transition", "--omega", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "alpha range searched: 0.2 to 10" in out and "reason: no transition: because" in out
    assert "note: a note" in out
    assert main(["transition", "--omega", "0.3", "--alpha", "0.5:1:2", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert calls[0] == (None, True) and calls[1] == ([0.5, 1.0], False)
    assert rec["reason"] == "no transition: because" and rec["alpha_range"] == [0.2, 10.0]


def test_the_result_carries_the_range_and_the_reason() -> None:
    res = TransitionResult.from_transition(_transition_with_reason(), ModelSpec(omega=0.3), SolverSettings())
    assert res.alpha_range == (0.2, 10.0) and res.reason == "no transition: because"
    assert not res.success and "no transition: because" in res.message
    assert res.to_dict()["reason"] == res.reason


def test_replicas_combine_the_ranges() -> None:
    runs = [{"alpha_c": None, "alpha_range": [0.2, 5.86], "reason": "r0"},
            {"alpha_c": None, "alpha_range": [0.12, 2.4], "reason": "r1"}]
    d = transition.combine_transitions(runs)
    assert d["alpha_range"] == [0.12, 5.86] and d["reason"] == "r0"


@pytest.mark.slow
def test_sigma_04_is_bracketed_above_the_start_grid() -> None:
    """At sigma = 0.4 the positional branch is the lower up to alpha ~ 5 (coarse difference
    -1.7e-4 at 5.9, +3.3e-4 at 4.7): the range is widened upwards and alpha_c located there."""
    res = api.transition(omega=0.3, sigma=0.4)
    assert res.alpha_c is not None and START_GRID[1] < res.alpha_c < ALPHA_MAX
    assert res.alpha_range is not None and res.alpha_range[1] > res.alpha_c
    assert res.reason is None
    d = np.asarray(res.grid["semantic_train"], dtype=float) - np.asarray(res.grid["positional_train"], dtype=float)
    both = d[np.isfinite(d)]  # (where both branches exist: the semantic one begins near 0.7)
    assert both[0] > 0 > both[-1] and np.all(both[:-1] > 0)  # (the widening stops at the first point past it)
    assert res.grid["alpha"][-2] < res.alpha_c < res.grid["alpha"][-1]
