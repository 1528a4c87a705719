"""Correlated tokens in the theory (docs/model.md (6.3)) through whitening (``Saddle`` docstring).

Checks: the whitened path reproduces the ordinary one at ``C = sigma^2 I``; the mixed-metric
proximal problem is the whitened one in other coordinates and its minimum is global; the linear
baseline integrates over correlated teacher fields. Agreement with simulation is in
``tests/test_sim_theory.py``-style slow tests below.
"""

import numpy as np
import pytest

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import start_point
from attnphase.theory.channels import AttentionMap, loss_numpy, objective_batch, prox_batch, target_map
from attnphase.theory.fixed_point import FAST, SolverSettings, solve_fixed_point
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import Saddle, linear_test_error, sym_sqrt


@pytest.mark.parametrize("branch", ["positional", "semantic"])
def test_whitened_path_equals_ordinary_path_for_uncorrelated_tokens(branch):
    spec = ModelSpec()
    settings = SolverSettings(**{**FAST, "order": 6})
    rule = make_rule("qmc", 4, 6, 2, seed=0)
    out = []
    for whiten in (False, True):
        sd = Saddle(spec, 1.2, rule, whiten=whiten)
        res = solve_fixed_point(sd, sd.from_paper(start_point(spec, branch, 1)), settings)
        assert res.converged
        q, m, theta = sd.user_units(res.op)
        out.append([q[0, 0], abs(m[0, 0]), theta[0, 0], -sd.free_energy(res.op, res.data), sd.test_error(res.op)])
    a, b = np.array(out)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    assert (a[1] > 0.05) == (branch == "positional") and (a[2] > 0.05) == (branch == "semantic")


def test_mixed_metric_objective_is_the_whitened_objective():
    """``|h~ - w~|^2 / 2V + ell(P h~)`` equals the mixed-metric objective at ``h = P h~``."""
    spec = ModelSpec(token_corr=0.4)
    am = AttentionMap.from_spec(spec)
    P = sym_sqrt(spec.C_array)
    rng = np.random.default_rng(0)
    N = 50
    ht = rng.normal(size=(N, 2, 1))
    wt = rng.normal(size=(N, 2, 1))
    T = target_map(rng.normal(size=(N, 2, 1)), spec)
    V = np.array([[3.0]])
    h = np.einsum("lk,nka->nla", P, ht)
    w = np.einsum("lk,nka->nla", P, wt)
    direct = np.sum((ht - wt) ** 2, axis=(1, 2)) / (2 * V[0, 0]) + loss_numpy(h, T, spec.C_array, am)
    val, _ = objective_batch(h, w, T, V, spec.C_array, am, mix=P)
    np.testing.assert_allclose(val, direct, rtol=1e-12)


def test_mixed_prox_is_global_minimum_against_grid_search():
    spec = ModelSpec(token_corr=0.5)
    am = AttentionMap.from_spec(spec)
    P = sym_sqrt(spec.C_array)
    rng = np.random.default_rng(3)
    N = 30
    w = np.einsum("lk,nka->nla", P, 0.2 * rng.normal(size=(N, 2, 1)))
    T = target_map(2.0 * rng.normal(size=(N, 2, 1)), spec)
    V = np.array([[25.0]])
    # starts as the Saddle builds them: the whitened multi-start set mapped by P
    from attnphase.theory.channels import default_starts

    starts = np.einsum("lk,nska->nsla", P, default_starts(np.einsum("lk,nka->nla", np.linalg.inv(P), w), V))
    res = prox_batch(w, T, V, spec.C_array, am, starts=starts, mix=P)
    g = np.linspace(-4, 4, 641)
    H1, H2 = np.meshgrid(g, g, indexing="ij")
    grid = np.stack([H1.ravel(), H2.ravel()], axis=1)[:, :, None]
    Winv = np.kron(np.linalg.inv(P @ P.T), np.linalg.inv(V))
    for i in range(N):
        d = (grid - w[i]).reshape(len(grid), 2)
        vals = 0.5 * np.einsum("ni,ij,nj->n", d, Winv, d)
        vals += loss_numpy(grid, np.broadcast_to(T[i], (len(grid), 2, 2)), spec.C_array, am)
        assert res.value[i] <= vals.min() + 1e-12
        assert res.grad_norm[i] < 1e-8


def test_correlated_linear_baseline_matches_monte_carlo():
    spec = ModelSpec(token_corr=0.5)
    lin = linear_test_error(spec)
    C = spec.C_array
    rng = np.random.default_rng(1)
    hs = np.einsum("lk,nka->nla", sym_sqrt(C), rng.normal(size=(400_000, 2, 1)))
    T = target_map(hs, spec)
    D = T - T.mean(axis=0)
    mc = 0.5 * np.einsum("nlj,jk,nlk->n", D, C, D)
    assert abs(lin - mc.mean()) < 4 * mc.std() / np.sqrt(len(mc))
    assert abs(lin - linear_test_error(ModelSpec())) > 1e-5  # correlation does change it


@pytest.mark.slow
def test_correlated_theory_matches_simulation():
    """c = 0.3, alpha = 1.5, d = 1000: informed starts land within 7 % of the theory branch
    (measured numbers in docs/solver.md)."""
    import torch

    from attnphase.sim.simulate import simulate
    from attnphase.theory import solve_point

    torch.set_num_threads(1)
    spec = ModelSpec(token_corr=0.3)
    settings = SolverSettings(**{**FAST, "order": 10})
    res = simulate(spec, alpha=1.5, d=1000, seeds=(0, 1, 2), inits=("semantic", "positional"))
    for branch, key in (("semantic", "theta"), ("positional", "m")):
        p = solve_point(spec, 1.5, branch, settings, error_estimate=False)
        assert p.exists
        runs = [r for r in res.runs if r.init == branch]
        sim_x = np.mean([abs(getattr(r, key)) for r in runs])
        sim_eg = np.mean([r.test_error for r in runs])
        assert abs(sim_x - abs(getattr(p, key))) / abs(getattr(p, key)) < 0.07
        assert abs(sim_eg - p.test_error) / p.test_error < 0.07
