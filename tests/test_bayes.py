"""The Bayes-optimal baseline (docs/model.md section 8): state evolution, thresholds, test error,
the fields read off the labels, and GAMP on the simulator's data against the state evolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase.sim import gamp as G
from attnphase.sim.data import make_dataset
from attnphase.spec.problem import ModelSpec
from attnphase.theory import bayes as B
from attnphase.theory.saddle import linear_test_error
from test_phase import fake_physics  # noqa: F401  (fixture)

QUAD = B.BayesQuadrature()


@pytest.fixture(scope="module")
def rules2():
    return B.make_rules(2, QUAD)


def test_state_evolution_map_matches_monte_carlo_of_the_channel(rules2):
    """The quadrature form of ``rho q_hat`` (8.3), (8.7) against a Monte-Carlo average of
    ``alpha |g_out|^2`` and of ``-alpha sum_l dg_l/domega_l`` (Nishimori) drawn from the channel (8.2)."""
    rng = np.random.default_rng(1)
    L, rho, N = 2, 0.25, 400_000
    for x in (0.2, 0.6, 0.95):
        q, V = rho * x, rho * (1 - x)
        om = math.sqrt(q) * rng.standard_normal((N, L))
        h = om + math.sqrt(V) * rng.standard_normal((N, L))
        g, _ = G._channel(h, om, V)  # (u = h: the sign does not matter)
        t = np.tanh(np.einsum("nl,nl->n", h, om) / V)[:, None]
        dg = (h**2 * (1 - t**2) / V - 1) / V
        samples = rho * (g**2).sum(1)
        quad = (L * (1 - x) - B._mean_s_sech2(x, rules2)) / (1 - x) ** 2
        se = samples.std() / math.sqrt(N)
        assert abs(samples.mean() - quad) < 4 * se, (x, samples.mean(), quad, se)
        assert abs(-rho * dg.sum(1).mean() - quad) < 4 * rho * dg.sum(1).std() / math.sqrt(N)
        assert abs(B.noiseless_map(x, 1.0, L, rules2) - quad / (1 + quad)) < 1e-15


@pytest.mark.parametrize("L", [2, 3, 4])
def test_weak_recovery_threshold_is_one_over_L_L_plus_1(L):
    """The linearisation at ``x = 0`` (8.5): the growth rate tends to ``alpha L (L + 1) - 1``, and the
    fixed point reached from the uninformed start is ``0`` just below ``alpha_WR`` and positive above."""
    R = B.make_rules(L, QUAD)
    a_wr = B.weak_recovery_threshold(L)
    for a in (0.7 * a_wr, 1.5 * a_wr):
        assert abs(B._growth(1e-7, a, L, R) - (a * L * (L + 1) - 1)) < 1e-4
    assert B.se_fixed_point(0.98 * a_wr, L, _rules=R)[0] == 0.0
    x_above = B.se_fixed_point(1.05 * a_wr, L, _rules=R)[0]
    assert 0.0 < x_above < 0.05
    # continuous transition: the overlap vanishes linearly at alpha_WR
    x_closer = B.se_fixed_point(1.025 * a_wr, L, _rules=R)[0]
    assert 0.3 < x_closer / x_above < 0.7


def test_perfect_recovery_thresholds():
    """``alpha_IT = 1/L`` (8.6) is where the growth rate at ``x -> 1`` changes sign; for ``L = 2, 3`` the
    overlap reaches ``1`` continuously there (``alpha_PR = alpha_IT``), for ``L = 1`` (real phase
    retrieval with a Gaussian prior, a check of the code against the known algorithmic threshold
    ``~1.13``) there is a hard phase ending at ``alpha_PR`` where two fixed points merge."""
    for L in (2, 3):
        R = B.make_rules(L, QUAD)
        assert abs(B._growth(1 - 1e-9, 0.8 / L, L, R) - (1 - 1 / 0.8)) < 1e-3
        t = B.thresholds(L, QUAD)
        assert t.alpha_PR == pytest.approx(1 / L, abs=1e-8) and t.alpha_IT == 1 / L
        assert B.se_fixed_point(0.99 / L, L, _rules=R)[0] > 0.97
        assert B.se_fixed_point(1.01 / L, L, _rules=R)[0] == 1.0
    t1 = B.thresholds(1, QUAD)
    assert 1.12 < t1.alpha_PR < 1.14 and abs(t1.alpha_PR - t1.alpha_PR_check) < 1e-6
    R1 = B.make_rules(1, QUAD)
    x, roots = B.se_fixed_point(1.1, 1, _rules=R1)
    assert len(roots) == 2 and x == roots[0] < 0.9 < roots[1] < 1.0  # stable, unstable, and x = 1 stable


def test_test_error_from_no_information_to_perfect_recovery():
    """(8.8): at ``x = 0`` the Bayes-optimal error is the linear baseline's (4.3) (predicting ``E[T]``),
    it decreases with ``x`` and vanishes at ``x = 1``; it scales with ``(1 - omega)^2``."""
    spec = ModelSpec(omega=0.3)
    e0, err0 = B.test_error(0.0, spec)
    assert abs(e0 - linear_test_error(spec)) < 1e-9 and err0 < 1e-8
    errs = [B.test_error(x, spec)[0] for x in (0.0, 0.3, 0.7, 0.95, 1.0)]
    assert all(b < a for a, b in zip(errs, errs[1:], strict=False)) and errs[-1] < 1e-12
    e_half = B.test_error(0.5, spec)[0]
    assert B.test_error(0.5, spec.replace(omega=0.6))[0] == pytest.approx(e_half * (0.4 / 0.7) ** 2, rel=1e-12)
    spec3 = ModelSpec(omega=0.3, L=3)
    e3, err3 = B.test_error(0.0, spec3)
    assert abs(e3 - linear_test_error(spec3)) < max(3 * err3, 1e-7)


@pytest.mark.parametrize("L", [2, 3, 4])
def test_fields_are_read_off_the_softmax_up_to_a_sign(L):
    rng = np.random.default_rng(L)
    h = 0.5 * rng.standard_normal((200, L))
    u = G.fields_from_softmax(B._softmax_rank1(h))
    err = np.minimum(np.abs(u - h).max(1), np.abs(u + h).max(1))
    assert err.max() < 1e-8


def test_observations_from_the_simulators_data():
    """(8.1): the measurement rows are ``z / (sigma sqrt(d))`` and the fields ``+-h*`` of each sample."""
    spec = ModelSpec(omega=0.3)
    d = 64
    data = make_dataset(spec, d, 50, seed=3, n_test=1, keep_labels=True)
    Phi, U = G.observations(data)
    w_star = spec.sigma * data.Q_star.numpy()[:, 0]
    h = np.einsum("nld,d->nl", Phi, w_star)
    z = data.X.numpy() - data.Pi.numpy()[None] / math.sqrt(d)
    assert np.allclose(h, z @ data.Q_star.numpy()[:, 0] / math.sqrt(d))
    assert np.minimum(np.abs(U - h).max(1), np.abs(U + h).max(1)).max() < 1e-8
    with pytest.raises(ValueError, match="keep_labels"):
        G.observations(make_dataset(spec, d, 5, seed=3, n_test=1))


def test_gamp_below_weak_and_above_perfect_recovery():
    """GAMP on the simulator's data (8.9) at ``d = 500``: no overlap below ``alpha_WR``, the teacher
    recovered above ``alpha_PR`` (state evolution: ``x = 0`` and ``x = 1``)."""
    spec = ModelSpec(omega=0.3)
    low = G.run_gamp(spec, 0.1, 500, (0, 1))
    assert low["mean_overlap"] < 0.03
    high = G.run_gamp(spec, 0.7, 500, (0, 1))
    assert high["mean_overlap"] > 0.99 and all(r["variance"] < 1e-3 for r in high["runs"])


@pytest.mark.slow
@pytest.mark.parametrize("d,seeds", [(1000, 16), (2000, 8)])
def test_gamp_follows_the_state_evolution(d, seeds):
    """Mean GAMP overlap over seeds against the state evolution on either side of ``alpha_WR``
    (``alpha = 0.1``: ``x = 0``; ``alpha = 0.45``: ``x = 0.786``) within 3 % plus twice the standard
    error of the mean (single datasets scatter by several per cent at ``d = 1000``)."""
    spec = ModelSpec(omega=0.3)
    R = B.make_rules(2, QUAD)
    for alpha in (0.1, 0.45):
        x = B.se_fixed_point(alpha, 2, _rules=R)[0]
        res = G.run_gamp(spec, alpha, d, tuple(range(seeds)))
        assert abs(res["mean_overlap"] - x) < 0.03 * (x if x > 0 else 1.0) + 2 * res["sem"], (alpha, res)


@pytest.mark.slow
def test_recovery_fraction_jumps_across_the_thresholds():
    """The fraction of seeds whose GAMP variance collapses (perfect recovery) jumps across
    ``alpha_PR = 1/2``; the fraction with a visible overlap (above 0.1) jumps across ``alpha_WR = 1/6``."""
    spec = ModelSpec(omega=0.3)
    seeds = tuple(range(6))

    def frac(alpha: float, key) -> float:
        runs = G.run_gamp(spec, alpha, 1000, seeds)["runs"]
        return sum(key(r) for r in runs) / len(runs)

    recovered = lambda r: r["variance"] < 1e-3  # noqa: E731
    visible = lambda r: r["overlap"] > 0.1  # noqa: E731
    assert frac(0.42, recovered) == 0.0 and frac(0.6, recovered) == 1.0
    assert frac(0.1, visible) == 0.0 and frac(0.4, visible) == 1.0


# ----------------------------------------------------------------------------- --bayes in curves, compare, demo
def test_curves_table_and_figure_carry_the_bayes_curve():
    import attnphase as ap
    from attnphase.plots.curves import curves_figure, curves_table

    class _Absent:
        exists = False

    grid = [0.1, 0.4, 0.8]
    bo = ap.bayes(grid, omega=0.3)
    table = curves_table(grid, [_Absent()] * 3, [_Absent()] * 3, bo.linear_test_error, bayes=bo.points)
    assert list(table["bayes_overlap"]) == list(bo.overlaps) and list(table["bayes_test_error"]) == list(bo.test_errors)
    fig = curves_figure(table, ModelSpec(omega=0.3))
    labels = [ln.get_label() for ax in fig.axes for ln in ax.get_lines()]
    assert "Bayes-optimal" in labels and r"Bayes-optimal $\theta$" in labels
    fine = ap.bayes(B.curve_grid(0.1, 0.8, 2), omega=0.3)  # (the line from a finer grid)
    fig = curves_figure(table, ModelSpec(omega=0.3), bayes=fine.points)
    line = next(ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == "Bayes-optimal")
    assert list(line.get_xdata()) == list(fine.alphas) and 1 / 6 in fine.alphas and 0.5 in fine.alphas


def test_curves_and_compare_refuse_bayes_for_uncovered_models_before_computing(capsys):
    from attnphase.cli import main

    assert main(["curves", "--out", "/dev/null/x", "--bayes", "--teacher-rank", "2", "--rank", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "teacher rank 1 only" in err
    assert main(["compare", "--out", "/dev/null/x", "--bayes", "--causal-target"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "causal target" in err


@pytest.mark.slow  # (a compare run with its figure; the curves test covers the --bayes option in the default run)
def test_compare_bayes_rows_and_figure(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from attnphase import comparison as compare_mod
    from attnphase.cli import main
    from test_cli_sim import _fake_theory

    monkeypatch.setattr(compare_mod, "theory_table", _fake_theory)
    out = tmp_path / "cmp"
    rc = main(["compare", "--omega", "0.3", "--alpha", "0.5:1.5:2", "--d", "20", "--seeds", "1",
               "--max-steps", "10", "--theory-points", "4", "--out", str(out), "--bayes"])
    assert rc == 0, capsys.readouterr().err
    table = pd.read_csv(out / "compare.csv")
    bo = table[table["kind"] == "bayes"]
    # 41 alphas over 0.5..1.5 (alpha_IT = alpha_PR = 0.5 the first), finer than the 4 theory points
    assert len(bo) == 41 and (bo["source"] == "theory").all() and bo["alpha"].min() == 0.5
    assert (bo["theta"] == 1.0).all() and (bo["test_error"] < 1e-12).all()
    assert (out / "compare.png").stat().st_size > 0


@pytest.mark.slow  # (a demo run; the curves test covers the --bayes option in the default run)
def test_demo_bayes_curve(tmp_path, fake_physics):  # noqa: F811
    import pandas as pd

    from attnphase.cli import main
    from test_demo import ARGS

    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--only", "curves", "--bayes", *ARGS]) == 0
    curves = pd.read_csv(out / "curves.csv")
    bo = curves[curves.branch == "bayes"].sort_values("alpha")
    # the theory grid 0.2..2 on 41 points plus alpha_PR = 0.5, where the overlap reaches 1
    assert len(bo) == 42 and 0.5 in set(bo["alpha"]) and "--bayes" in (out / "report.html").read_text()
    assert bo[bo.alpha < 0.5]["theta"].max() < 1.0 and (bo[bo.alpha >= 0.5]["theta"] == 1.0).all()


# ----------------------------------------------------------------------------- label noise
@pytest.mark.slow
def test_noisy_weak_recovery_approaches_the_noiseless_threshold():
    """(8.10): the label noise only removes information, so ``alpha_WR(Delta) > 1/6``, and it falls
    towards ``1/6`` (8.5) as ``Delta -> 0``, by more than the difference of two independent sets of
    draws (the error estimate)."""
    wr, err = [], []
    for noise in (1e-2, 1e-3, 1e-4):
        quad = B.NoisyQuadrature.for_noise(noise)
        de = B.effective_noise(noise, 0.3)
        a, b = (B.noisy_weak_recovery(0.25, de, B._NoisyRules(q)) for q in (quad, quad.replica()))
        wr.append(a)
        err.append(abs(a - b))
    assert wr[0] - wr[1] > err[0] + err[1] and wr[1] - wr[2] > err[1] + err[2]
    assert wr[2] > 1 / 6 + err[2] and wr[2] - 1 / 6 < 0.03


@pytest.mark.slow
def test_noisy_overlap_rises_towards_the_noiseless_one():
    """At ``alpha = 0.6`` (noiseless: ``x = 1``) the overlap grows as the noise falls; noise below
    the resolved range and ``L != 2`` are refused."""
    import attnphase as ap

    xs = [ap.bayes(0.6, noise=n, omega=0.3).overlaps[0] for n in (1e-2, 1e-3)]
    assert 0.0 < xs[0] < xs[1] < 1.0
    with pytest.raises(ValueError, match="noise below 0.0001"):
        ap.bayes(0.6, noise=1e-6)
    with pytest.raises(ValueError, match="L = 2 only"):
        ap.bayes(0.6, noise=1e-2, L=3)
