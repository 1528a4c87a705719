"""How the global minimum changes at alpha_c (docs/model.md (5.5)): which branches exchange it,
continuous (a bifurcation) or discontinuous (a crossing of training errors), and where."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.cli import main
from attnphase.results import describe_change
from attnphase.theory import SolverSettings
from attnphase.theory.branches import BranchPoint
from attnphase.theory.diagnostics import ErrorEstimate
from attnphase.theory.transition import combine_transitions
from attnphase.theory.transition_search import SCAN_STEPS, TransitionSearch

CHEAP = SolverSettings.preset("fast", order=6, refine_order=8)


def _point(branch: str, alpha: float, theta: float, rel: float | None) -> BranchPoint:
    est = ErrorEstimate({"theta_user": rel}, "test") if rel is not None else None
    return BranchPoint(branch, alpha, True, "ok", theta=theta, train_loss=1e-3, error_estimate=est)


def _search(monkeypatch, theta: float, rel: float | None, diff=None) -> TransitionSearch:
    """A search at rank 2 whose solves return a mixed point with |theta| = ``theta`` (relative
    error ``rel``) and whose refined training-error difference at ``a`` is ``diff(a)``."""
    search = TransitionSearch(ModelSpec(omega=0.3, rank=2), CHEAP, np.array([0.6, 0.8, 1.0]), 5e-3)
    monkeypatch.setattr(search, "solve_at", lambda a, branch, near, s=None: _point(branch, a, theta, rel))
    monkeypatch.setattr(search, "fine", lambda p: p)
    if diff is not None:
        def train_diff_at(a, s_near, p_near):
            search.hist["alpha_c"].append((a, diff(a), 1e-7))
            return diff(a)
        monkeypatch.setattr(search, "train_diff_at", train_diff_at)
    return search


@pytest.mark.parametrize(("theta", "rel", "kind"), [
    (0.12, 0.03, "discontinuous"),   # resolved from zero: |theta| jumps
    (0.004, 0.6, "continuous"),      # within 3 standard errors of zero: grows out of the positional branch
    (0.05, 0.34, "continuous"),      # 2.9 standard errors: still not resolved
    (0.05, 0.3, "discontinuous"),
])
def test_the_order_parameter_at_alpha_c_decides_the_kind(monkeypatch, theta, rel, kind):
    search = _search(monkeypatch, theta, rel)
    p = _point("mixed", 0.7, theta, rel)
    search.change_at(0.7, p, p)
    search.classify()
    assert search.kind == kind
    assert search.exchange == ("positional", "mixed")
    op = search.order_parameter
    assert op["name"] == "theta" and op["below"] == 0.0 and op["above"] == pytest.approx(theta)
    assert op["above_error"] == pytest.approx(theta * rel)
    assert any(kind in n for n in search.notes)


def test_no_change_located_leaves_the_kind_open(monkeypatch):
    search = _search(monkeypatch, 0.1, 0.01)
    search.classify()
    assert search.kind is None and search.exchange is None and search.order_parameter == {}


def test_a_crossing_below_the_grid_is_located_on_the_scan(monkeypatch):
    """The mixed side exists from 0.62 on and is lower at the grid point 0.8; the difference
    changes sign at 0.67: the scan brackets it and regula falsi locates it."""
    search = _search(monkeypatch, 0.12, 0.03, diff=lambda a: -1e-4 * (a - 0.67))
    search.sem_start = 0.62
    sem = [_point("mixed", a, 0.12, 0.03) for a in (0.6, 0.8, 1.0)]
    a_c = search.crossing_below(sem, sem, 1, -1e-4 * (0.8 - 0.67))
    assert a_c == pytest.approx(0.67, abs=5e-3)
    assert search.alpha_c_error is None  # (a root: its error comes from the evaluations)
    search.classify()
    assert search.kind == "discontinuous"


def test_lower_wherever_it_exists_puts_alpha_c_at_its_start(monkeypatch):
    """The mixed side lower everywhere from its start 0.62 on: the global minimum changes
    where it begins, with the scan step as the error; an unresolved |theta| there is continuous."""
    search = _search(monkeypatch, 0.003, 0.5, diff=lambda a: -1e-6 - 1e-4 * (a - 0.62))
    search.sem_start = 0.62
    sem = [_point("mixed", a, 0.1, 0.03) for a in (0.6, 0.8, 1.0)]
    a_c = search.crossing_below(sem, sem, 1, -1e-4 * 0.18)
    assert a_c == pytest.approx(0.62)
    assert search.alpha_c_error == pytest.approx((0.8 - 0.62) / SCAN_STEPS)
    search.classify()
    assert search.kind == "continuous"
    assert any("grows out of the positional" in n for n in search.notes)


def test_describe_change():
    assert describe_change(None, None, {}) == "how the global minimum changes was not determined"
    s = describe_change("discontinuous", ("positional", "mixed"), {"name": "theta", "above": 0.1244, "above_error": 0.0044})
    assert s == "positional -> mixed, discontinuous (training errors cross; |theta| jumps 0 -> 0.124 +- 0.004)"
    s = describe_change("continuous", ("positional", "mixed"), {"name": "theta", "above": 0.002, "above_error": 0.002})
    assert s.startswith("positional -> mixed, continuous (a bifurcation")


def test_combined_scrambles_keep_the_kind():
    runs = [{"alpha_c": a, "alpha_l": 1.4, "spinodals": {}, "kind": k, "exchange": ["positional", "mixed"],
             "order_parameter": {"name": "theta", "below": 0.0, "above": t}}
            for a, k, t in ((0.70, "discontinuous", 0.12), (0.68, "discontinuous", 0.14), (0.66, "continuous", 0.0))]
    d = combine_transitions(runs)
    assert d["kind"] == "discontinuous" and d["exchange"] == ["positional", "mixed"]
    assert d["order_parameter"]["above"] == pytest.approx(0.13)
    assert any("disagree on the kind" in n for n in d["notes"])


def test_rank_one_transition_is_a_discontinuous_exchange_positional_to_semantic(capsys):
    """The cheapest real search (QMC orders 6 / 8, omega = 0.3): the training errors cross near
    1.25 and theta jumps from 0 to the semantic branch's ~0.47, resolved from zero."""
    rc = main(["transition", "--omega", "0.3", "--order", "6", "--refine-order", "8", "--alpha", "0.8:1.8:6", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert 1.15 < out["alpha_c"] < 1.35
    assert out["kind"] == "discontinuous" and out["exchange"] == ["positional", "semantic"]
    op = out["order_parameter"]
    assert op["name"] == "theta" and op["below"] == 0.0 and op["above"] > 3 * op["above_error"] > 0
    assert math.isclose(op["at"], out["alpha_c"], rel_tol=1e-9)


def test_phase_lines_carry_the_kind(tmp_path):
    from attnphase.plots.phase import plot_phase_lines
    from attnphase.sweeps.phase import PhaseLines

    lines = PhaseLines((0.2, 0.4), (0.6, 0.8), (1.2, 1.5), {"semantic": (0.55, 0.75)}, (0.002, 0.0015), (None, None),
                       {"rank": 2}, None, (0.02, 0.03), (None, None), ("continuous", "discontinuous"),
                       ("positional->mixed", "positional->mixed"))
    d = lines.to_dict()
    assert d["kind"] == ["continuous", "discontinuous"] and d["exchange"] == ["positional->mixed"] * 2
    frame = lines.to_frame()
    assert list(frame["kind"]) == ["continuous", "discontinuous"]
    fig = plot_phase_lines(lines)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("continuous" in t for t in labels)


def test_the_library_result_carries_the_kind_and_says_it():
    """``TransitionResult`` (frozen) exposes the solver's kind, exchange and order parameter, in
    ``to_dict()`` and in its one-line message; without a located change they stay empty."""
    import dataclasses

    from attnphase.results import TransitionResult
    from attnphase.theory.transition import Transition

    tr = Transition(0.7, 1.42, {"semantic": 0.675, "positional": None}, 0.00197, ("a note",), {"alpha": [0.6, 0.8]},
                    {"alpha_c": 0.03, "alpha_l": 0.004}, (), "discontinuous", ("positional", "mixed"),
                    {"name": "theta", "below": 0.0, "above": 0.1244, "above_error": 0.0044, "at": 0.7})
    res = TransitionResult.from_transition(tr, ModelSpec(omega=0.3, rank=2), CHEAP)
    assert res.kind == "discontinuous" and res.exchange == ("positional", "mixed")
    assert res.order_parameter["above"] == pytest.approx(0.1244)
    assert "positional -> mixed, discontinuous" in res.message
    d = res.to_dict()
    assert d["kind"] == "discontinuous" and d["exchange"] == ["positional", "mixed"]
    assert d["order_parameter"]["above_error"] == pytest.approx(0.0044)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.kind = "continuous"  # type: ignore[misc]
    none = TransitionResult.from_transition(Transition(None, None, {"semantic": None, "positional": None}, 0.002),
                                            ModelSpec(omega=0.3), CHEAP)
    assert none.kind is None and none.exchange is None and dict(none.order_parameter) == {}
    assert not none.success and none.to_dict()["kind"] is None


def test_lower_at_its_first_grid_point_with_nothing_confirmed_below(monkeypatch):
    """The spinodal search confirms the mixed side only down to the grid point 0.6 itself (absent
    at 0.55; seen for untied keys/queries at rank 2): alpha_c is that point, with the bracket to
    the absent end as its error, not null."""
    search = _search(monkeypatch, 0.2, 0.02, diff=lambda a: -1e-5)
    search.sem_start, search.sem_absent = 0.8, 0.75
    sem = [_point("mixed", a, 0.2, 0.02) for a in (0.6, 0.8, 1.0)]
    assert search.crossing_below(sem, sem, 1, -1e-5) == pytest.approx(0.8)
    assert search.alpha_c_error == pytest.approx(0.05)
    search.classify()
    assert search.kind == "discontinuous"
    search.sem_absent = None
    assert search.crossing_below(sem, sem, 1, -1e-5) is None
    assert any("alpha_c not located" in n for n in search.notes)
