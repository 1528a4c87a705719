"""Rank-2 student (tied attention): the mixed branch, rotation invariants, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.cli import main
from attnphase.theory import MIXED, SolverSettings, branches_for, solve_point

QUICK = SolverSettings(order=8, replicas=1, tol=1e-6, noise_tol=1e-4)


def test_mixed_branch_is_the_lowest_training_error_at_rank_two():
    """At alpha = 1.5, omega = 0.3 the mixed fixed point (one direction semantic, the other
    positional: the state GD reaches, docs/variants.md) exists, is classified mixed, and has a
    lower training error than the pure semantic and positional branches; in the canonical gauge
    axis 0 carries theta and axis 1 the positional overlaps."""
    spec = ModelSpec(omega=0.3, rank=2)
    assert MIXED in branches_for(spec) and MIXED not in branches_for(ModelSpec(omega=0.3))
    pts = {b: solve_point(spec, 1.5, b, QUICK, error_estimate=False) for b in ("semantic", "positional", MIXED)}
    for b, p in pts.items():
        assert p.exists and p.branch == b, (b, p.reason)
    mixed = pts[MIXED]
    assert mixed.train_loss < min(pts["semantic"].train_loss, pts["positional"].train_loss)
    op = mixed.order_params
    assert op.theta[1, 0] == 0 and np.all(np.abs(op.m[:, 0]) < 1e-8) and abs(op.theta[0, 0]) > 0.01
    assert np.all(np.abs(op.m[:, 1]) > 0.01)
    # the summary scalars are rotation invariants: |theta|, |m_1| and tr q
    th = np.asarray(mixed.theta_matrix)
    assert mixed.theta == pytest.approx(np.linalg.norm(th)) and mixed.q == pytest.approx(np.trace(mixed.q_matrix))


@pytest.mark.slow  # (8 s: under -m slow to keep the default suite within its time)
def test_mixed_branch_above_where_its_start_converges_is_reached_by_continuation():
    """From alpha ~2.5 on the mixed start does not converge (omega = 0.3), yet the branch goes on
    and stays the lowest training error: a single solve continues it from the nearest halving of
    alpha where the start converges (docs/solver.md, step 1), and lands where a continuation along
    alpha does (the same rule). At alpha = 6 the start fails at 3 too, and converges at 1.5."""
    from attnphase.theory import follow_branch

    spec, alpha = ModelSpec(omega=0.3, rank=2), 6.0
    direct = solve_point(spec, alpha, MIXED, QUICK, error_estimate=False, ramp=False)
    assert not direct.exists
    p = solve_point(spec, alpha, MIXED, QUICK, error_estimate=False, thorough=True)
    assert p.exists and p.branch == MIXED, p.reason
    sem = solve_point(spec, alpha, "semantic", QUICK, error_estimate=False)
    assert sem.exists and p.train_loss < sem.train_loss
    ref = follow_branch(spec, [1.5, 2.2, 3.0, 4.0, 5.0, 6.0], MIXED, QUICK)[-1]
    assert ref.exists
    assert p.theta == pytest.approx(ref.theta, rel=1e-3) and p.m == pytest.approx(ref.m, rel=1e-3)


def test_mixed_branch_rejected_at_rank_one():
    with pytest.raises(ValueError, match="unknown branch"):
        solve_point(ModelSpec(omega=0.3), 1.5, MIXED, QUICK)


def test_cli_solve_rank_two_reports_the_mixed_branch(capsys):
    rc = main(["solve", "--alpha", "1.5", "--omega", "0.3", "--rank", "2", "--branch", "mixed", "--order", "8",
               "--refine-order", "9", "--target-error", "0", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["branches"]) == {MIXED}
    b = out["branches"][MIXED]
    assert b is not None and out["global_minimum"] == MIXED
    assert out["diagnostics"][MIXED]["refined"]["applied"]
    for key in ("q_user", "m_user", "theta_user", "test_error"):
        assert 0 < b["error_estimate"][key] < 0.05
    assert main(["solve", "--alpha", "1.5", "--branch", "mixed"]) == 2  # rank 1: no mixed branch


def test_compare_theory_rows_include_the_mixed_branch_at_rank_two():
    from attnphase.comparison import theory_table
    from attnphase.plots.compare import compare_figure

    table = theory_table(ModelSpec(omega=0.3, rank=2), [1.2, 1.5], order=7)
    mixed = table[table["kind"] == MIXED]
    assert len(mixed) == 2 and mixed["exists"].all() and (mixed["theta"] > 0.1).all() and (mixed["m"] > 0.1).all()
    assert set(theory_table(ModelSpec(omega=0.3), [1.5], order=7)["kind"]) == {"semantic", "positional", "linear"}
    fig = compare_figure(table, ModelSpec(omega=0.3, rank=2))
    assert any("mixed" in t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())


@pytest.mark.parametrize("kw", [{"L": 3}, {"rank": 2}])
def test_trivial_start_through_the_pole_of_v_agrees_with_continuation(kw):
    """At L = 3 and r = 2, alpha = 1.5 the trivial start (docs/model.md (5.1)) has ``V_hat`` below
    ``-lambda / sigma^2`` (a locally concave loss): the weights step puts ``V`` past its pole,
    and the damped step in ``V`` used to leave the valid domain (the branch was then found only
    by continuation from alpha = 0.5). Damped in ``V^-1`` the direct start converges, to the
    point the continuation reaches."""
    from attnphase.theory.branches import continue_from

    spec = ModelSpec(omega=0.3, **kw)
    p = solve_point(spec, 1.5, "trivial", QUICK, error_estimate=False, ramp=False)
    assert p.exists and p.branch == "trivial", p.reason
    assert p.m == 0 and p.theta == 0 and p.q > 0.1
    c = continue_from(spec, 1.5, "trivial", QUICK, 0.5)
    assert c is not None and c.exists
    assert p.q == pytest.approx(c.q, rel=1e-5) and p.V == pytest.approx(c.V, rel=1e-5)


def test_sweep_points_accept_the_mixed_branch_only_where_it_exists():
    from attnphase.sweeps.kinds import _curve_normalize, _theory_normalize

    assert _theory_normalize({"alpha": 1.5, "branch": "mixed", "rank": 2})["branch"] == MIXED
    assert _curve_normalize({"alphas": "1:2:3", "branch": "mixed", "rank": 2})["branch"] == MIXED
    with pytest.raises(ValueError, match="unknown branch 'mixed'"):
        _theory_normalize({"alpha": 1.5, "branch": "mixed"})


@pytest.mark.slow
def test_rank_two_transition_is_a_discontinuous_exchange_positional_to_mixed(capsys):
    """docs/model.md (5.5): at omega = 0.3 the rank-2 student's global minimum passes from the
    positional to the mixed branch where the mixed branch begins (fast preset: 0.70 +- 0.03; the
    single-rule crossings of studies/rank2_bifurcation.py lie in 0.6-0.7), and |theta| jumps there
    from 0 to ~0.12, resolved from zero: a discontinuous change, not a bifurcation (about 2 min)."""
    rc = main(["transition", "--rank", "2", "--omega", "0.3", "--preset", "fast", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha_c"] is not None and 0.6 <= out["alpha_c"] <= 0.8
    assert out["errors"]["alpha_c"] is not None and out["errors"]["alpha_c"] < 0.1
    assert out["exchange"] == ["positional", MIXED] and out["kind"] == "discontinuous"
    op = out["order_parameter"]
    assert op["below"] == 0.0 and 0.05 < op["above"] < 0.2 and op["above"] > 3 * op["above_error"]
    # the mixed branch begins near alpha_c: a first-order change close to its spinodal
    assert out["spinodals"]["semantic"] is not None and out["spinodals"]["semantic"] <= out["alpha_c"]
