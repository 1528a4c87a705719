"""End-to-end behaviour of the fixed-point solver and the theory CLI.

Cheap settings (QMC with 4 x 2^8 nodes) keep these fast; accuracy against the published values of
the reference case is checked in the slow tests at the default order."""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from attnphase.cli import main
from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings, find_transition, linear_test_error, solve_point
from attnphase.theory.diagnostics import Refinement

FAST = SolverSettings(order=8, replicas=1, warmup_order=None)


def test_positional_branch_converges_with_diagnostics():
    p = solve_point(ModelSpec(), 1.0164, "positional", FAST)
    assert p.exists and p.converged
    assert p.fixed_point is not None and p.fixed_point.residual < 1e-8
    assert abs(p.theta) < 1e-10  # exactly zero by symmetry
    assert p.m > 0.2


def test_large_lambda_gives_the_trivial_branch():
    """lambda -> infinity: the ridge wins, Q -> 0, so m = theta = 0 whatever the start."""
    spec = ModelSpec(lam=50.0)
    for b in ("semantic", "positional"):
        p = solve_point(spec, 1.0, b, FAST)
        assert not p.exists
        assert "trivial" in p.reason or "converge" in p.reason
    t = solve_point(spec, 1.0, "trivial", FAST)
    assert t.exists and t.q < 1e-3


def test_omega_one_has_no_semantic_global_minimum():
    """omega = 1: the target is purely positional, the teacher is irrelevant, theta = 0."""
    spec = ModelSpec(omega=1.0)
    p = solve_point(spec, 1.5, "semantic", FAST)
    assert not p.exists  # the semantic start loses theta
    assert linear_test_error(spec) == pytest.approx(0.0, abs=1e-15)


def test_large_alpha_is_reached_by_geometric_continuation():
    """alpha = 50: the recommended starts (docs/model.md (5.1); tuned at alpha ~ 1; V falls like 1/alpha) do
    not converge on the trivial branch, nor did four equal continuation steps from alpha = 0.5;
    steps of at most a factor 1.5 reach it (it is a fixed point: exactly zero overlaps)."""
    t = solve_point(ModelSpec(omega=0.3), 50.0, "trivial", FAST)
    assert t.exists and t.converged, t.reason
    assert "direct_start" in t.diagnostics  # (the direct start failed; continuation found it)
    assert t.m == 0.0 and t.theta == 0.0
    assert t.fixed_point is not None and t.fixed_point.residual < 1e-6


@pytest.mark.slow  # (an L = 5 solve: about 3 s)
def test_trivial_branch_of_five_tokens_is_reached_from_small_alpha():
    """L = 5: the trivial start leaves the valid domain at alpha = 0.5 and 1, so continuation
    from 0.5 cannot help; the branch continues smoothly from alpha = 0.2 (V ~ 34), and the
    continuation from 0.1 reaches alpha = 1."""
    t = solve_point(ModelSpec(omega=0.3, L=5), 1.0, "trivial", FAST)
    assert t.exists and t.converged, t.reason
    assert t.m == 0.0 and t.theta == 0.0 and 0.3 < t.q < 1.0


def test_ridgeless_trivial_branch_is_reached_by_continuation_in_lambda(monkeypatch):
    """lambda = 0: V grows as the ridge falls (552 at alpha = 1); the start, tuned at lambda 0.01,
    left the valid domain (it converges since the step damped in ``V^-1``, test below), and so
    did the continuations in alpha; the continuation in lambda from 0.01 reaches the branch. A
    singular K on the way is an invalid step, not an exception. The positional start finds
    nothing: followed from lambda = 0.01 the branch ends between 0.01 and 0.005 (alpha 2). The
    ridge's first point, at 0.01, is its direct start there, not rescued by continuations in alpha
    in turn: at alpha = 4 they reached only a point with m = -0.0075 that the fine rules do not
    resolve (`attnphase solve --lam 0 --alpha 4` reports no positional branch either way)."""
    import attnphase.theory.branches as B

    rescued = []
    orig = B._by_continuation
    monkeypatch.setattr(B, "_by_continuation", lambda spec, *a, **k: rescued.append(spec.lam) or orig(spec, *a, **k))
    p4 = solve_point(ModelSpec(omega=0.3, lam=0.0), 4.0, "positional", FAST, thorough=True)
    assert not p4.exists and "lambda = 0.01" in p4.reason and rescued == [0.0], (p4.reason, rescued)
    t = solve_point(ModelSpec(omega=0.3, lam=0.0), 1.0, "trivial", FAST)
    assert t.exists and t.converged, t.reason
    assert t.V > 300 and t.m == 0.0 and t.theta == 0.0
    p = solve_point(ModelSpec(omega=0.3, lam=0.0), 1.0, "positional", FAST)
    assert not p.exists and "lambda = 0.01" in p.reason


def test_non_convergence_is_reported_not_hidden():
    p = solve_point(ModelSpec(), 1.0164, "positional", SolverSettings(order=8, replicas=1, max_iter=3,
                                                                       warmup_order=None))
    assert not p.converged and not p.exists
    assert "did not converge" in p.reason


def test_cli_solve_json_schema(capsys):
    rc = main(["solve", "--alpha", "1.0", "--omega", "0.3", "--order", "7", "--refine-order", "8", "--target-error", "0",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"params", "branches", "global_minimum", "linear_test_error"}
    assert set(out["branches"]) == {"semantic", "positional", "trivial"}
    for name, b in out["branches"].items():
        if b is not None:
            assert set(b) >= {"q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations"}
            # the refinement converged to tol on the fine rules and gave the error estimate
            ref = out["diagnostics"][name]["refined"]
            assert ref["applied"] and ref["nodes"] == 4 * 4 * 2**8 and ref["residual"] < 1e-6
            assert 0 < b["error_estimate"]["q_user"] < 0.1
    assert out["global_minimum"] in out["branches"]
    assert out["params"]["omega"] == 0.3


def test_cli_solve_defaults_to_the_overlap_target():
    """``attnphase solve`` refines each branch until every overlap estimate is at most 1e-3 unless
    told otherwise; ``--target-error 0`` is one refinement at --refine-order."""
    from attnphase.cli import build_parser
    from attnphase.cli.theory_cmds import settings_from_args

    st = settings_from_args(build_parser().parse_args(["solve", "--alpha", "1"]))
    assert (st.target_error, st.target_on, st.refine_order) == (1e-3, "overlaps", 11)
    st = settings_from_args(build_parser().parse_args(["solve", "--alpha", "1", "--target-error", "0"]))
    assert st.target_error == 0


def test_cli_seed_gives_independent_rules_that_agree_within_their_estimates(capsys):
    """``--seed``: other QMC scrambles (recorded in the parameters), a different value, and the
    difference of two seeds within a few of their combined standard errors."""
    vals = {}
    for seed in (0, 1):
        rc = main(["solve", "--alpha", "1.5", "--omega", "0.3", "--branch", "positional", "--order", "7",
                   "--refine-order", "8", "--target-error", "0", "--seed", str(seed), "--json"])
        assert rc == 0
        out = json.loads(capsys.readouterr().out)
        assert out["params"]["solver"]["seed"] == seed
        b = out["branches"]["positional"]
        vals[seed] = (b["q"], b["error_estimate"]["q_user"] * b["q"])
    (q0, e0), (q1, e1) = vals[0], vals[1]
    assert q0 != q1 and abs(q0 - q1) < 4 * np.hypot(e0, e1)


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "--alpha", "0"],
        ["solve", "--alpha", "1", "--omega", "1.2"],
        ["solve", "--alpha", "1", "--sigma", "-1"],
        ["solve", "--alpha", "1", "--lam", "-0.1"],
        ["solve", "--alpha", "1", "--A", "0.5,0.5"],
        ["solve", "--alpha", "1", "--A", "1.2,-0.2;0.5,0.5"],
        ["solve", "--alpha", "1", "--A", "0.6,0.6;0.5,0.5"],
        ["solve", "--alpha", "abc"],
        ["solve", "--alpha", "1", "--branch", "nope"],
        ["solve", "--alpha", "1", "--replicas", "0"],
        ["solve", "--alpha", "1", "--refine-order", "30"],
        ["solve", "--alpha", "1", "--solver", "fine_teacher_scale=0.5"],
        ["solve", "--alpha", "1", "--solver", "fine_teacher_scale=nan"],
        ["solve", "--alpha", "1", "--target-error", "1e-3", "--solver", "target_on=theta"],
        ["solve", "--alpha", "1", "--seed", "-1"],
        ["transition", "--omega", "0.3", "--seed", "1.5"],
        ["transition", "--omega", "0.3", "--solver", "fine_teacher_scale=x"],
        ["solve", "--alpha", "1", "--solver", "method=gh", "--order", "60", "--refine-order", "0"],
        ["transition", "--omega", "x"],
        ["curves", "--alpha", "2:1:0"],
        ["curves", "--alpha", "0.5:1:2", "--out", "/dev/null/x"],  # (an output folder that cannot be made)
    ],
)
def test_bad_input_exits_2_with_one_line(args):
    r = subprocess.run([sys.executable, "-m", "attnphase", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error" in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_sanity_anchor_reference_case():
    """The published reference case at the default settings (positional at alpha = 1.0164, alpha_c,
    alpha_l)."""
    spec = ModelSpec()
    p = solve_point(spec, 1.0164, "positional")
    assert p.m == pytest.approx(0.249, rel=0.04)
    assert p.q == pytest.approx(0.173, rel=0.04)
    assert p.test_error == pytest.approx(0.00337, rel=0.025)
    assert p.train_loss == pytest.approx(0.00219, rel=0.025)
    # measured: alpha_c = 1.2766, alpha_l = 1.4859 at order 10 (order 8: 1.336, 1.530)
    tr = find_transition(spec, np.linspace(0.8, 1.8, 6), SolverSettings(order=10, replicas=1, tol=1e-6,
                                                                        noise_tol=1e-4))
    assert tr.alpha_c is not None and 1.17 <= tr.alpha_c <= 1.33
    assert tr.alpha_l is not None and 1.38 <= tr.alpha_l <= 1.55
    # the shipped transition preset (2^8 x 4 nodes, refined on 4 x 2^10 x 4): measured
    # alpha_c = 1.2547 +- 0.0065, alpha_l = 1.4940 +- 0.0045 (full order-12 solve: 1.2525, 1.490)
    from attnphase.theory.fixed_point import FAST as PRESET

    tr = find_transition(spec, settings=SolverSettings(**PRESET))
    assert tr.alpha_c is not None and 1.17 <= tr.alpha_c <= 1.33 and tr.errors["alpha_c"] < 0.02
    assert tr.alpha_l is not None and 1.38 <= tr.alpha_l <= 1.55 and tr.errors["alpha_l"] < 0.02
    # semantic spinodal: on 2^14 x 4 nodes the branch drops from theta 0.23 (alpha 0.8)
    # to 0.10 (0.75) and 0.018 (0.72); the preset gives 0.725-0.775 over three scrambles. Before
    # its probes were checked on the fine rules it reported 0.33, the end of a small-theta tail of
    # the coarse rule
    assert tr.spinodals["semantic"] is not None and 0.68 <= tr.spinodals["semantic"] <= 0.85


def test_cli_solve_says_when_a_branch_is_the_coarse_rule_only(monkeypatch, capsys):
    """A point whose refinement failed but that is kept (its defining overlap resolved on the
    coarse rule) is not printed as "ok": the status says "coarse rule only" and a note gives the
    reason (seen: omega = 0, alpha = 1, positional, error estimate 0.32)."""
    import dataclasses

    import attnphase.api as api

    def fake(spec, alpha, branch, settings):
        p = solve_point(spec, alpha, branch, FAST)
        info = Refinement(applied=False, reason="refinement did not converge: no decrease (test)")
        return dataclasses.replace(p, refinement=info)

    monkeypatch.setattr(api, "solve_refined", fake)  # (what attnphase.solve, and so the CLI, calls)
    assert main(["solve", "--alpha", "1.0", "--omega", "0.3", "--branch", "positional"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("positional"))
    assert "coarse rule only" in row and " ok" not in row
    assert "note: positional: refinement did not converge: no decrease (test); the values are those of the coarse rule" in out
    assert "global minimum: not compared (only positional solved" in out  # one branch: nothing compared


def test_replicated_transition_combines_scrambles(monkeypatch):
    """Mean and standard error over scrambles, each scramble with its own seed; a scramble
    without alpha_c is left out of the mean and said so."""
    import attnphase.theory.transition as transition

    vals = {0: (1.30, 1.50), 1: (1.26, 1.48), 2: (None, 1.52)}
    seen = []

    def fake(spec, alphas=None, settings=None, progress=None):
        seen.append(settings.seed)
        ac, al = vals[settings.seed - 0]
        return transition.Transition(ac, al, {"semantic": 0.4, "positional": None}, 0.002, ())

    monkeypatch.setattr(transition, "find_transition", fake)
    tr = transition.find_transition_replicated(ModelSpec(), settings=SolverSettings(seed=0), replicas=3)
    assert seen == [0, 1, 2]
    assert tr.alpha_c == pytest.approx(1.28) and tr.errors["alpha_c"] == pytest.approx(0.02)
    assert tr.alpha_l == pytest.approx(1.50) and tr.errors["alpha_l"] == pytest.approx(np.std([1.5, 1.48, 1.52], ddof=1) / np.sqrt(3))
    assert tr.spinodals["positional"] is None and tr.errors["spinodal_semantic"] == pytest.approx(0.0, abs=1e-15)
    assert any("scramble 2 found no alpha_c" in n for n in tr.notes)
    d = tr.to_dict()
    assert set(d) >= {"alpha_c", "alpha_l", "spinodals", "linear_test_error", "errors", "replicas"}
    assert len(d["replicas"]) == 3


def test_cli_transition_json_schema(capsys):
    rc = main(["transition", "--omega", "0.3", "--order", "6", "--alpha", "0.8:1.8:3", "--replicas", "2",
               "--refine-order", "0", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"alpha_c", "alpha_l", "spinodals", "linear_test_error"}
    assert set(out["spinodals"]) == {"semantic", "positional"}
    assert len(out["replicas"]) == 2 and set(out["errors"]) >= {"alpha_c", "alpha_l"}


def test_cli_transition_refined_reports_errors(capsys):
    """One scramble with refinement: alpha_c and alpha_l come with the fine rules' errors."""
    rc = main(["transition", "--omega", "0.3", "--order", "6", "--alpha", "0.9:1.7:3", "--refine-order", "7",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha_c"] is not None and out["alpha_l"] is not None
    assert 0 < out["errors"]["alpha_c"] < 0.2 and 0 < out["errors"]["alpha_l"] < 0.2
    assert any("refined" in n for n in out["notes"])


def test_costly_problem_sizes_are_announced(capsys):
    """Many proximal variables per sample (L x fields) make the theory slow: one warning line."""
    from attnphase.cli.common import warn_theory_cost

    warn_theory_cost(ModelSpec(L=3, rank=2))
    assert capsys.readouterr().err == ""
    warn_theory_cost(ModelSpec(L=7))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "7 proximal variables" in err


def test_cli_curves_writes_figure_table_and_record(tmp_path, capsys):
    """``attnphase curves``: PNG, PDF, the CSV table and a JSON record of what the table leaves
    out (every parameter, solver settings, version, transition, per-point diagnostics)."""
    import pandas as pd

    out = tmp_path / "c"
    rc = main(["curves", "--omega", "0.3", "--alpha", "0.8:1.6:3", "--order", "6", "--refine-order", "0",
               "--sigma", "0.5", "--out", str(out)])
    assert rc == 0
    for name in ("curves.png", "curves.pdf", "curves.csv", "curves.json"):
        assert (out / name).stat().st_size > 0
    table = pd.read_csv(out / "curves.csv")
    assert np.allclose(table["alpha"], [0.8, 1.2, 1.6])
    rec = json.loads((out / "curves.json").read_text())
    assert rec["params"]["omega"] == 0.3 and np.allclose(rec["params"]["alpha"], table["alpha"])
    assert rec["params"]["solver"]["order"] == 6 and rec["params"]["version"]
    assert set(rec["transition"]) >= {"alpha_c", "alpha_l", "spinodals"}
    for b in ("semantic", "positional"):
        pts = rec["points"][b]
        assert np.allclose([p["alpha"] for p in pts], table["alpha"])
        for p, exists in zip(pts, table[f"{b}_exists"], strict=True):
            assert p["exists"] == bool(exists) and p["reason"]
            if p["exists"]:
                assert p["converged"] and p["iterations"] > 0


def test_building_the_cli_parser_imports_no_heavy_package():
    """Every command builds the whole parser: it must not pull in matplotlib, torch, dask, numba
    or scipy.stats (report/html.py imported matplotlib for a type hint: ~0.9 s on every command)."""
    code = ("import sys, attnphase.cli as c; c.build_parser(); "
            "print(','.join(m for m in ('matplotlib', 'torch', 'dask', 'numba', 'scipy.stats') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_trivial_branch_converges_at_sigma_one():
    """sigma = 1, alpha = 1: with the default starts alone the proximal solve missed the global
    minimum at a few nodes, the map jumped and the trivial solve ran to max_iter (relative change
    stuck at 1.5e-3 - 4e-3); with the landscape starts of a rugged problem it converges."""
    p = solve_point(ModelSpec(omega=0.3, sigma=1.0), 1.0, "trivial", FAST)
    assert p.exists and p.converged, p.reason
    assert p.m == 0 and p.theta == 0


def test_ridgeless_trivial_start_converges_through_the_pole_of_v():
    """lambda = 0 (and 5e-4), alpha = 1: at the trivial start ``V_hat < -lambda / sigma^2``, so the
    weights step puts ``V`` past its pole (negative); damped in ``V`` the iteration left the valid
    domain, damped in ``V^-1`` it converges to the branch the continuation in lambda reaches
    (``V`` ~ 552 at lambda = 0, see above)."""
    for lam, v_lo in ((0.0, 300.0), (5e-4, 100.0)):
        t = solve_point(ModelSpec(omega=0.3, lam=lam), 1.0, "trivial", FAST, ramp=False)
        assert t.exists and t.converged, t.reason
        assert t.V > v_lo and t.m == 0.0 and t.theta == 0.0


def test_period_two_oscillation_is_broken_by_the_quasi_newton_stage():
    """lambda = 5e-4, alpha = 2, near the trivial branch with a small positional overlap: the
    map's slope in ``m`` is below -1/beta, so the damped iteration cycles (``m = +-0.002``, relative
    change 1.18 for all 300 iterations) and never reaches the Anderson or quasi-Newton stages.
    The alternating sign of the leading change triggers the quasi-Newton stage, which goes to
    ``m = 0``."""
    from attnphase.theory.fixed_point import make_saddle, solve_fixed_point
    from attnphase.theory.saddle import OrderParams

    sd = make_saddle(ModelSpec(omega=0.3, lam=5e-4), 2.0, FAST)
    start = OrderParams(np.array([[0.26]]), np.array([[0.003], [-0.003]]), np.array([[52.0]]), np.zeros((1, 1)))
    res = solve_fixed_point(sd, start, FAST)
    assert res.converged, res.reason
    assert res.iterations < 100
    assert np.max(np.abs(res.op.m)) < 1e-9 and res.op.q[0, 0] > 0.1


def test_collapse_to_zero_weights_is_not_a_branch(monkeypatch: pytest.MonkeyPatch):
    """alpha = 50, lambda = 0.01: the trivial start, damped in ``V^-1``, goes to ``q -> 0`` with
    ``V = 25``, where the proximal minimisers at ``w = 0`` are not zero (``V_hat ~ q^-1/2``): not a
    fixed point. That is reported as not converged, and the continuation of the full solve reaches
    the branch (test above). At lambda = 50 ``q = 0`` is the fixed point (the ridge wins: the
    minimisers at ``w = 0`` are zero) and is kept (test_large_lambda_gives_the_trivial_branch).
    The relative change stays at 1-1.8 all the way down, so the stall test ends the solve first
    (STALL_RUN iterations after its smallest change); without it the collapse is caught."""
    from attnphase.theory import fixed_point

    p = solve_point(ModelSpec(omega=0.3), 50.0, "trivial", FAST, ramp=False, error_estimate=False)
    assert not p.exists and "stalled" in p.reason
    monkeypatch.setattr(fixed_point, "STALL_RUN", FAST.max_iter)
    p = solve_point(ModelSpec(omega=0.3), 50.0, "trivial", FAST, ramp=False, error_estimate=False)
    assert not p.exists and "collapsed to q = 0" in p.reason


def test_damped_step_through_the_pole_of_v_stays_valid():
    from attnphase.theory.newton import valid_step

    x = np.array([0.02, 0.0, 0.0, 14.6, 0.0])  # (q, m_1, m_2, V, theta), L = 2, r = r* = 1
    fx = np.array([0.05, 0.0, 0.0, -13.8, 0.0])  # F(x): V past the pole
    out = valid_step(x, fx, 0.3, 2, 1, 1)
    assert out[0] == pytest.approx(0.7 * 0.02 + 0.3 * 0.05)
    assert out[3] == pytest.approx(1.0 / (0.7 / 14.6 + 0.3 / -13.8))  # larger V, towards the pole
    assert out[3] > x[3]
    fx2 = np.array([0.05, 0.0, 0.0, -1.0, 0.0])  # V^-1 crosses zero: shorter steps in V
    out2 = valid_step(x, fx2, 0.3, 2, 1, 1)
    assert out2[3] > 0 and out2[3] == pytest.approx(x[3] + 0.1 * (fx2[3] - x[3]))


def test_free_energy_of_a_singular_ridge_is_nan_not_an_exception():
    """lambda = 0 with ``V_hat = 0`` (a diverged, non-converged solve): ``K`` is singular; the CLI
    printed 'error: Singular matrix' for ``solve --lam 0 --alpha 2 --branch positional``."""
    import dataclasses

    from attnphase.theory.branches import start_point
    from attnphase.theory.fixed_point import make_saddle

    spec = ModelSpec(omega=0.3, lam=0.0)
    sd = make_saddle(spec, 2.0, FAST)
    op = start_point(spec, "trivial", 1)
    ds = sd.data_step(op)
    ds = dataclasses.replace(ds, hats=dataclasses.replace(ds.hats, V_hat=np.zeros((1, 1))))
    assert np.isnan(sd.free_energy(op, ds))


def test_transition_with_a_positional_branch_absent_at_the_grid_start():
    """`transition --lam 0`: the positional branch is found on the grid only from alpha = 1.8 on
    (since the damped step in ``V^-1``); the spinodal search assumed the branch starts at the grid
    start and stopped with 'max() arg is an empty sequence'. Now a note, and no spinodal."""
    from attnphase.theory.branches import BranchPoint
    from attnphase.theory.transition import find_transition

    g = [1.0, 1.5, 2.0]
    sem = [BranchPoint("semantic", a, False, "absent") for a in g]
    pos = [BranchPoint("positional", 1.0, False, "absent")] + [
        BranchPoint("positional", a, True, "ok", q=0.2, m=0.25, theta=0.0, V=10.0, train_loss=0.003,
                    test_error=0.004, converged=True) for a in g[1:]]
    tr = find_transition(ModelSpec(omega=0.3, lam=0.0), g, SolverSettings(order=6, refine_order=0, replicas=1),
                         branches=(sem, pos))
    assert tr.spinodals["positional"] is None
    assert any("not found at the grid start" in n and "1.5, 2" in n for n in tr.notes)


def test_alpha_l_note_where_no_branch_is_found_below():
    """`curves --lam 0`: no semantic or positional point below alpha 1.2, the semantic one beats
    the linear baseline above; the note said the global minimum does not beat it on the grid."""
    from attnphase.theory.branches import BranchPoint
    from attnphase.theory.transition import find_transition

    g = [1.0, 1.5, 2.0]
    sem = [BranchPoint("semantic", 1.0, False, "absent")] + [
        BranchPoint("semantic", a, True, "ok", q=0.8, m=0.0, theta=0.9, V=20.0, train_loss=0.0005,
                    test_error=0.0006, converged=True) for a in g[1:]]
    pos = [BranchPoint("positional", a, False, "absent") for a in g]
    tr = find_transition(ModelSpec(omega=0.3, lam=0.0), g, SolverSettings(order=6, refine_order=0, replicas=1),
                         branches=(sem, pos))
    assert tr.alpha_l is None
    assert any("beats the linear baseline from alpha = 1.5" in n for n in tr.notes)
    assert not any("does not beat" in n for n in tr.notes)


@pytest.mark.slow
def test_followed_branch_ends_are_checked_as_a_single_solve_checks_them():
    """At omega = 0 the positional branch followed on the coarse rule reaches the grid's end
    (alpha = 2.4, m = 0.07), where a single solve finds no positional point on the fine rules. The
    quick refinement of that end point stopped at m = -0.0032 and called it resolved, so no
    spinodal was reported; the end checks now refine to tol as solve does, walk inward and report
    where the branch ends."""
    from attnphase.theory.fixed_point import FAST
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.0)
    st = SolverSettings(**FAST)
    end = solve_refined(spec, 2.4, "positional", SolverSettings(order=8, refine_order=11))
    assert not end.exists
    tr = find_transition(spec, np.linspace(0.2, 2.4, 12), st)
    assert tr.spinodals["positional"] is not None and 0.8 < tr.spinodals["positional"] < 2.4
    assert tr.alpha_c == pytest.approx(0.60, abs=0.03)


def test_branch_point_keeps_the_solver_state_private():
    """A solved point carries its order parameters, Jacobian and data step for warm starts, but
    not as part of the result: they are private, out of ``repr``, comparisons and ``to_dict``."""
    import dataclasses

    p = solve_point(ModelSpec(omega=0.3), 1.5, "positional", FAST, error_estimate=False)
    assert p.exists and p.order_params is not None and p._data is not None
    d = p.to_dict()
    assert not any(k.startswith("_") for k in d) and d["diagnostics"] == p.record()
    assert d["diagnostics"]["residual"] == p.fixed_point.residual
    assert d["diagnostics"] is not p.diagnostics  # (a copy)
    assert "_op" not in repr(p) and "_data" not in repr(p)
    assert p == dataclasses.replace(p, _op=None, _jacobian=None, _data=None)


def test_symmetry_zeros_are_exact_on_the_sign_closed_rule():
    """At ``theta = 0`` and ``m = 0`` the coarse (sign-closed) rule's ``theta_hat`` and ``m_hat``
    are exact zeros, not rounding (~1e-14) that an unstable direction amplifies."""
    from attnphase.theory.branch_point import start_point
    from attnphase.theory.fixed_point import make_saddle

    spec = ModelSpec(omega=0.3, sigma=2.0, lam=1e-4)
    sd = make_saddle(spec, 3.0, FAST)
    ds = sd.data_step(sd.from_paper(start_point(spec, "trivial", sd.F)))
    assert np.all(ds.hats.theta_hat == 0.0) and np.all(ds.hats.m_hat == 0.0)
    assert ds.hats.q_hat[0, 0] > 0


def test_a_wandering_iteration_ends_stalled_on_its_branch():
    """sigma = 2, lambda = 1e-4, alpha = 3: the trivial point of the coarse rule is unstable under
    the damped map (the relative change wandered between 0.03 and 1.5 for all of max_iter, and
    rounding in ``theta`` took the iterate to ``theta`` 0.09). It now stays at ``m = theta = 0``
    and ends STALL_RUN iterations after its smallest change, not at max_iter."""
    from attnphase.theory.branch_point import start_point
    from attnphase.theory.fixed_point import STALL_RUN, make_saddle, solve_fixed_point

    spec = ModelSpec(omega=0.3, sigma=2.0, lam=1e-4)
    sd = make_saddle(spec, 3.0, FAST)
    res = solve_fixed_point(sd, sd.from_paper(start_point(spec, "trivial", sd.F)), FAST)
    assert not res.converged and res.reason.startswith("stalled")
    assert STALL_RUN < len(res.history) < FAST.max_iter // 2
    assert np.all(res.op.theta == 0.0) and np.all(res.op.m == 0.0)


def _fields_for_starts(sd, op):
    """The arguments of ``Saddle.full_starts`` at ``op``: prior means, teacher fields, target, ``V``."""
    w, hstar, *_ = sd.fields(op)
    return w, hstar, sd.target(hstar), op.V


def test_the_recovery_budget_stops_a_continuation_and_is_reported():
    """A continuation charges the proximal problems of its data steps to the budget and stops once it is spent; a failed
    direct start whose rescue ran out of budget names the origins it did not try."""
    from attnphase.theory.branches import continue_from
    from attnphase.theory.continuation import RecoveryBudget
    from attnphase.theory.fixed_point import make_saddle, warm_starts

    spec = ModelSpec(omega=0.3)
    budget = RecoveryBudget(1)
    assert continue_from(spec, 1.0, "semantic", FAST, 0.5, budget) is None
    assert budget.spent
    b2 = RecoveryBudget(10**12)
    assert continue_from(spec, 1.0, "semantic", FAST, 0.5, b2) is not None
    sd = make_saddle(spec, 1.0, FAST)
    assert 0 < b2.total - b2.left and (b2.total - b2.left) % (sd.rule.size * sd.L * sd.F) == 0
    # the charge is what the data steps solved: starts times nodes times tokens times fields
    p0 = solve_point(spec, 1.0, "semantic", FAST, error_estimate=False, ramp=False)
    assert sd.solved == 0
    full = sd.data_step(p0.order_params)
    per_start = sd.rule.size * sd.L * sd.F
    assert sd.solved == per_start * sd.full_starts(*_fields_for_starts(sd, p0.order_params)).shape[1]
    before = sd.solved
    sd.data_step(p0.order_params, starts=warm_starts(full))
    assert sd.solved - before == 3 * per_start  # (the minimiser, the second minimum and w)
    # one stalling solve stops where what is left of the budget is spent
    from attnphase.theory.branches import start_point
    from attnphase.theory.fixed_point import solve_fixed_point

    res = solve_fixed_point(sd, sd.from_paper(start_point(spec, "semantic", sd.F)), FAST, max_solved=1)
    assert not res.converged and "work budget of 1 proximal problems was spent" in res.reason
    assert len(res.history) == 1
    # a larger rule gets as many data steps: the budget grows with its nodes
    assert RecoveryBudget.for_settings(replace(FAST, order=11)).total == 8 * RecoveryBudget.for_settings(FAST).total
    p = solve_point(ModelSpec(omega=0.3, sigma=2.0, lam=1e-4), 3.0, "trivial", FAST, error_estimate=False,
                    budget=RecoveryBudget(1))
    assert not p.exists and "budget" in p.reason and "before continuations from alpha = 0.5 or" in p.reason


class _LinearMap:
    """A stand-in for the residual of :func:`attnphase.theory.newton.quasi_newton`: the map
    ``F(x) = x* + B (x - x*)`` in units where ``y = x``, whose full (multi-start) evaluation adds a
    deterministic ripple of amplitude ``noise`` (a rule's noise floor) and whose warm-started one
    does not."""

    def __init__(self, noise: float, tol: float = 1e-8, noise_tol: float = 1e-4) -> None:
        from types import SimpleNamespace

        self.settings = SimpleNamespace(tol=tol, noise_tol=noise_tol)
        self.evals = 0
        self.x_star = np.array([1.0, 2.0, -0.5])
        self.B = np.array([[0.5, 0.1, 0.0], [0.0, 0.4, 0.1], [0.1, 0.0, 0.3]])
        self.noise = noise

    def full_x(self, y: np.ndarray) -> np.ndarray:
        return np.array(y, dtype=float)

    def __call__(self, y, ref, given=None):
        self.evals += 1
        fx = self.x_star + self.B @ (y - self.x_star)
        if ref is None:
            fx = fx + self.noise * np.sin(1e4 * np.arange(1, 4) * y)
        return fx - y, ("full" if ref is None else "warm", y.copy()), fx


@pytest.mark.parametrize("noise", [0.0, 3e-5])
def test_broyden_replaces_a_jacobian_that_gives_no_decrease_and_returns_the_best_point_at_the_noise_floor(noise):
    """A Jacobian of the wrong sign gives no decrease along the Newton direction: the iteration
    takes the forward-difference Jacobian once and converges (without the ripple, to ``tol``).
    With a ripple of 3e-5 in the full map (between ``tol`` 1e-8 and ``noise_tol`` 1e-4) it cannot
    reach ``tol`` and ends unconverged at the full check that moved least, below ``noise_tol``,
    with that move as its residual (what :func:`refine_point` accepts as the noise floor)."""
    from attnphase.theory.newton import _broyden, rel_change

    res = _LinearMap(noise)
    y = res.x_star + 0.3
    r, ref, _ = res(y, ("warm", y))
    wrong = -(res.B - np.eye(3))  # (the Newton step from it points away from the fixed point)
    out = _broyden(res, y, r, ref, wrong.copy(), np.inf, None, np.ones(3), 40, True)
    if noise == 0.0:
        assert out.ok and out.message == "converged"
        np.testing.assert_allclose(out.x, res.x_star, rtol=1e-7)
        np.testing.assert_allclose(out.J, res.B - np.eye(3), atol=1e-4)  # (the fresh Jacobian)
    else:
        assert not out.ok and "below noise_tol" in out.message
        assert res.settings.tol < out.rel < res.settings.noise_tol and out.resid == out.rel
        assert out.ds[0] == "full" and np.array_equal(out.full_at, out.x) and np.array_equal(out.ds[1], out.x)
        fx = res.x_star + res.B @ (out.x - res.x_star) + noise * np.sin(1e4 * np.arange(1, 4) * out.x)
        assert rel_change(fx, out.x, np.ones(3)) == pytest.approx(out.rel)
    # the same start without the fresh Jacobian (budget too small for it) stops at once
    res = _LinearMap(noise)
    short = _broyden(res, y, r, ref, wrong.copy(), np.inf, None, np.ones(3), 3, True)
    assert not short.ok and short.message == "no decrease along the Newton direction"
