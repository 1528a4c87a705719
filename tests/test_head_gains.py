"""Trained head gains (docs/model.md (11.4)): the stationary gains minimise the loss at the
proximal minimisers, the search finds gains at which the branch's training error is a minimum, a
branch whose training error falls towards its end is absent with that reason, and the simulator
holds or starts the gains at ``head_gain_values``."""

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnphase import ModelSpec
from attnphase.sim.data import make_dataset
from attnphase.sim.models import attention
from attnphase.sim.train import init_params
from attnphase.theory.channels import loss_numpy
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.head_gains import gains_spec, head_gain_sums, head_gain_update, solve_head_gains
from attnphase.theory.value import coarse_point

FAST = SolverSettings.preset("fast")


def _mean_loss(sd, ds, v: np.ndarray) -> float:
    """``E[ell]`` at the data step's minimisers with the heads' gains set to ``v``."""
    sv = make_saddle(gains_spec(sd.spec, v), sd.alpha, FAST)
    return float(sd.rule.w @ loss_numpy(ds.prox.h, ds.T, sd.C, sv.amap))


@pytest.mark.parametrize("omega, alpha", [(0.6, 3.0), (0.15, 1.2)])
def test_stationary_gains_minimise_the_loss_at_the_minimisers(omega, alpha):
    """At a data step's minimisers the loss is quadratic in the gains: the update of
    :func:`head_gain_update` is its minimum (any move in any direction raises it), and its
    gradient ``A v - b`` vanishes there."""
    spec = ModelSpec(heads=2, omega=omega, sigma=0.6, lam=0.02)
    p = coarse_point(spec, alpha, "positional", FAST, None)
    assert p.exists
    sd = make_saddle(spec, alpha, FAST)
    ds = p._data
    v = head_gain_update(sd, ds)
    A, b = head_gain_sums(sd, ds)
    np.testing.assert_allclose(A @ v, b, rtol=1e-9, atol=1e-15)
    best = _mean_loss(sd, ds, v)
    for d in ((1, 0), (0, 1), (1, -1), (1, 1)):
        for eps in (0.02, -0.02):
            assert _mean_loss(sd, ds, v + eps * np.asarray(d, float)) > best


def test_heads_with_one_map_split_their_gain_equally():
    """Where both heads have the same map only the sum of the gains is determined: the update is
    the minimum-norm solution, equal gains (both heads given the fields of head 1 at a data
    step's minimisers)."""
    spec = ModelSpec(heads=2, omega=0.3)
    sd = make_saddle(spec, 1.0, FAST)
    p = coarse_point(spec, 1.0, "positional", FAST, None)
    assert p.exists
    same = SimpleNamespace(prox=SimpleNamespace(h=p._data.prox.h[..., [0, 0]]), T=p._data.T)
    v = head_gain_update(sd, same)
    assert abs(v[0] - v[1]) < 1e-9 * abs(v[0])
    A, b = head_gain_sums(sd, same)
    assert np.linalg.matrix_rank(A, tol=1e-9 * np.abs(A).max()) == 1 and np.allclose(A @ v, b, rtol=1e-9)


def test_the_search_finds_a_minimum_of_the_training_error_over_the_gains():
    """Away from the reference point (``omega = 0.6``, ``alpha = 3``, where the specialised branch
    with trained gains is the global minimum): the refined gains converge to their error estimate,
    and on the coarse rule the training error at the coarse search's gains is below its value at
    gains moved by 0.05 either way along the direction that trades one head for the other."""
    spec = ModelSpec(heads=2, omega=0.6, head_gains="trained")
    g = solve_head_gains(spec, 3.0, "specialised", FAST)
    assert g.success and g.point is not None and g.point.exists, g.message
    v = np.asarray(g.gains)
    assert np.all(np.asarray(g.gains_error) < 5e-3)
    assert v[0] > v[1] > 0.2  # (the semantic head weighs more; neither is switched off)
    coarse = solve_head_gains(spec, 3.0, "specialised", FAST, refine=False)
    vc = np.asarray(coarse.gains)
    assert np.max(np.abs(vc - v)) < 0.02
    loss = {}
    for eps in (0.0, 0.05, -0.05):
        p = coarse_point(gains_spec(spec, vc + eps * np.array([1.0, -1.0])), 3.0, "specialised", FAST, coarse.point)
        assert p.exists
        loss[eps] = p.train_loss
    assert loss[0.0] < loss[0.05] and loss[0.0] < loss[-0.05]


def test_a_start_the_coarse_rule_misses_is_searched_on_the_mid_rule():
    """Two positional heads at ``omega = 0.6``, ``alpha = 3.5``: at the start gains 1/2 the coarse
    rule's iteration does not find the branch, which a single solve reaches on the rule one order
    below the fine rules; the search runs there, and its stationary gains are refined. The two
    heads hold nearly one map: the gains' sum is what is determined."""
    spec = ModelSpec(heads=2, omega=0.6, head_gains="trained")
    assert not coarse_point(gains_spec(spec, np.array([0.5, 0.5])), 3.5, "positional", FAST, None).exists
    g = solve_head_gains(spec, 3.5, "positional", FAST)
    assert g.success and g.point is not None and g.point.exists, g.message
    assert abs(sum(g.gains) - 1.0) < 0.01 and min(g.gains) > 0.3
    assert g.point.m > 0.3 and g.point.theta == 0.0


@pytest.mark.slow
def test_a_branch_whose_training_error_falls_to_its_end_has_no_stationary_gains():
    """At ``omega = 0.3``, ``alpha = 2`` the specialised branch's training error falls as the
    positional head's gain shrinks, until the branch ends: no stationary gains, and the reason
    names where the search was heading (the positional head falling idle)."""
    spec = ModelSpec(heads=2, omega=0.3, head_gains="trained")
    g = solve_head_gains(spec, 2.0, "specialised", FAST, refine=False)
    assert not g.success and g.point is None
    assert "falls from the gains" in g.message and "where the branch ends" in g.message
    assert "head 2's gain falls towards 0" in g.message  # (at gain 0: one semantic head with the value gain)
    (v0, _), (v1, _) = g.history[0], g.history[-1]
    assert v1[1] < 0.5 * v0[1]  # (the positional head's gain fell)
    at = {v: coarse_point(gains_spec(spec, np.array(v)), 2.0, "specialised", FAST, None) for v in ((0.5, 0.5), (0.8, 0.2))}
    assert at[(0.8, 0.2)].exists and at[(0.8, 0.2)].train_loss < at[(0.5, 0.5)].train_loss


def test_cli_solve_reports_the_optimal_gains_and_other_commands_refuse_them():
    run = [sys.executable, "-m", "attnphase"]
    out = subprocess.run(run + ["solve", "--heads", "2", "--head-gains", "trained", "--alpha", "3", "--omega", "0.6",
                                "--branch", "specialised", "--preset", "fast", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    b = json.loads(out.stdout)["branches"]["specialised"]
    assert len(b["head_gains"]) == 2 and len(b["head_gains_error"]) == 2 and b["head_gains"][0] > b["head_gains"][1]
    bad = subprocess.run(run + ["transition", "--heads", "2", "--head-gains", "trained", "--omega", "0.3"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "attnphase solve --head-gains trained" in bad.stderr
    bad = subprocess.run(run + ["solve", "--heads", "2", "--head-gain-values", "0.6,0.4,0.1", "--alpha", "1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "head_gain_values must have 2 values" in bad.stderr


def test_the_simulator_holds_and_starts_the_gains_given():
    spec = ModelSpec(heads=2, head_gain_values=(0.7, 0.2))
    H = torch.randn(4, 2, 2, dtype=torch.float64)
    one = ModelSpec()
    expect = 0.7 * attention(one, H[..., :1]) + 0.2 * attention(one, H[..., 1:])
    torch.testing.assert_close(attention(spec, H), expect)
    trained = spec.replace(head_gains="trained")
    params = init_params(trained, [make_dataset(trained, 100, 10, seed=0)], ["random"])
    np.testing.assert_allclose(params["vh"].reshape(-1).numpy() / 10.0, [0.7, 0.2])  # (vh = sqrt(d) v)


@pytest.mark.slow
def test_a_head_falling_idle_is_compared_with_the_student_of_one_head_fewer():
    """At ``omega = 0.3``, ``alpha = 2`` the specialised search lets the positional head fall
    idle: the solve reports the limit, one head at its optimal value gain (docs/model.md (6.5)),
    whose semantic state lies below the branch found with both heads active."""
    import attnphase as ap

    res = ap.solve(2.0, heads=2, head_gains="trained", omega=0.3, branch="all", settings="fast", progress=False)
    assert res.idle_limit is not None and res.idle_limit["branch"] == "semantic" and res.idle_limit["below"]
    one = ap.solve(2.0, value="gain", omega=0.3, branch="semantic", settings="fast", progress=False)
    assert res.idle_limit["train_loss"] == one.branches["semantic"].train_loss
    assert all(r.train_loss > res.idle_limit["train_loss"] for r in res.branches.values() if r is not None)
    assert "idle_limit" in res.to_dict() and "a head idle" in res.message


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 11])
def test_trained_gains_end_cleanly_across_the_box(seed):
    """Seeded points of the box (``sigma`` 0.2-1.5, ``lambda`` 1e-3 to 0.3, ``omega`` 0.05-0.8,
    ``alpha`` 0.3-5): every branch ends with gains and their error estimates or absent with a
    reason, the global minimum is the lowest branch found, and an idle limit said to be below lies
    below every branch found."""
    import attnphase as ap

    rng = np.random.default_rng(seed)
    for _ in range(3):
        sigma, lam = np.exp(rng.uniform(np.log(0.2), np.log(1.5))), np.exp(rng.uniform(np.log(1e-3), np.log(0.3)))
        omega, alpha = rng.uniform(0.05, 0.8), np.exp(rng.uniform(np.log(0.3), np.log(5)))
        res = ap.solve(alpha, heads=2, head_gains="trained", omega=omega, sigma=sigma, lam=lam, branch="all",
                       settings="fast", progress=False)
        found = {b: r for b, r in res.branches.items() if r is not None}
        for r in found.values():
            assert r.head_gains is not None and len(r.head_gains) == 2 and np.all(np.isfinite(r.head_gains_error))
        for b, why in res.absent.items():
            assert why.startswith(f"no {b} point at stationary head gains: ")
        if found:
            assert res.global_minimum == min(found, key=lambda b: found[b].train_loss)
        if res.idle_limit is not None and res.idle_limit["below"]:
            assert all(r.train_loss > res.idle_limit["train_loss"] for r in found.values())
