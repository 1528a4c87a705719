"""Replica overlaps and local checks of GD's end states (attnphase.sim.replicas), and the findings
of docs/variants.md ("Replica overlaps and local checks") where theory and GD disagree.

The default tests check the tools at small ``d``; the slow ones (``-m slow``) assert the findings:
the causal student's semantic state below its fold is one minimum per data set (replicas from
distinct starts coincide, as at the control point), while GD's positional states of ``L = 3`` at
``alpha = 0.6`` are distinct minima per start (a mutual overlap clearly below ``q``), unlike the
``L = 3`` semantic control. Run them with
``PYTHONPATH=src python -m pytest tests/test_variants_disagreement.py -m slow -q``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from attnphase.sim import TrainSettings
from attnphase.sim.replicas import (
    hessian,
    hessian_spectrum,
    minimise_at_theta,
    polish,
    replica_dataset,
    replica_starts,
    risk_and_grad,
    single_batch,
    train_replicas,
)
from attnphase.sim.simulate import overlaps
from attnphase.spec.problem import ModelSpec

BASE = {"omega": 0.3, "sigma": 0.5, "lam": 0.01}
CAUSAL = ModelSpec(**BASE, variant="causal")
L3 = ModelSpec(**BASE, L=3)
GD = TrainSettings(momentum=0.9, tol=1e-6, max_steps=8000, dtype="float64", log_every=0)


@pytest.fixture(scope="module")
def control():
    """Two replicas at a control point (causal, alpha = 3, d = 64, seed 0) and their data set."""
    r = train_replicas(CAUSAL, 64, 3.0, seed=0, n_replicas=2, start_noise=1.0, settings=GD)
    return r, replica_dataset(CAUSAL, 64, 3.0, 0)


def test_replicas_on_one_data_set_and_their_overlaps(control):
    r, ds = control
    assert r.success, r.message
    assert np.allclose(r.mutual, r.mutual.T)
    for k in range(2):  # the diagonal is each replica's own q, and theta is the simulator's
        ov = overlaps(CAUSAL, ds, {"P": r.params[k]})
        assert r.mutual[k, k] == pytest.approx(float(ov["q"][0, 0]), rel=1e-12)
        assert r.theta[k] == pytest.approx(float(ov["theta"][0, 0]), rel=1e-12)
        assert np.allclose(r.m[k], np.asarray(ov["m"])[:, 0])
    # the two starts differ (noise of their own generators) but end at one minimum
    P0 = replica_starts(CAUSAL, ds, "semantic", 2, 1.0)
    assert float(torch.linalg.norm(P0[0, 0] - P0[0, 1])) > 0.5 * 64**0.5
    assert r.relative_gap() < 1e-4
    assert 0 <= r.relative_gap(rest=True) < 1e-3


@pytest.mark.parametrize("kw, match", [
    ({"n_replicas": 1}, "at least two replicas"),
    ({"init": "random"}, "unknown replica init"),
    ({"start_noise": -1.0}, "start_noise"),
])
def test_replica_starts_refuse_bad_input(kw, match):
    ds = replica_dataset(CAUSAL, 16, 1.0, 0)
    args = {"init": "semantic", "n_replicas": 2, "start_noise": 0.5, **kw}
    with pytest.raises(ValueError, match=match):
        replica_starts(CAUSAL, ds, args["init"], args["n_replicas"], args["start_noise"])


def test_polish_and_hessian_of_a_trained_student(control):
    r, ds = control
    pol = polish(CAUSAL, ds, r.params[0])
    assert pol.success, pol.message
    assert pol.grad_after < 1e-10 < pol.grad_before
    assert pol.moved < 1e-2
    # the Hessian is that of R: its product with a direction matches the change of the gradient
    P = pol.params
    batch = single_batch(ds)
    H = hessian(CAUSAL, batch, P)
    v = torch.randn(ds.d, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eps = 1e-5
    gp = risk_and_grad(CAUSAL, batch, P + eps * v)[1]
    gm = risk_and_grad(CAUSAL, batch, P - eps * v)[1]
    assert np.allclose(H @ v.reshape(-1).numpy(), (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-8)
    ev = hessian_spectrum(CAUSAL, ds, P)
    assert np.allclose(ev, np.linalg.eigvalsh(H))
    assert ev[0] > 0  # a minimum


def test_minimise_at_theta_holds_theta_and_m():
    ds = replica_dataset(CAUSAL, 32, 2.0, 0)
    short = TrainSettings(momentum=0.9, tol=1e-6, max_steps=300, dtype="float64", log_every=0)
    res = minimise_at_theta(CAUSAL, ds, 0.3, n_starts=2, settings=short)
    start = minimise_at_theta(CAUSAL, ds, 0.3, n_starts=2, settings=replace(short, max_steps=0))
    assert np.all(res.train_loss < start.train_loss)
    for k in range(2):
        ov = overlaps(CAUSAL, ds, {"P": res.params[k][:, None]})
        assert float(ov["theta"][0, 0]) == pytest.approx(0.3, abs=1e-12)
        assert np.max(np.abs(ov["m"])) < 1e-12
        assert res.q[k] == pytest.approx(float(ov["q"][0, 0]), rel=1e-12)
    untied = ModelSpec(**BASE, variant="untied")
    with pytest.raises(ValueError, match="rank-one"):
        minimise_at_theta(untied, replica_dataset(untied, 16, 1.0, 0), 0.1)


@pytest.mark.slow
def test_causal_semantic_state_below_the_fold_is_one_minimum_per_data_set():
    """alpha = 1.5 (no RS semantic point) and the control alpha = 3: three replicas from distinct
    starts end at one minimum at d = 600 (relative gap at the level the gradient tolerance leaves);
    that minimum is a true one (polished gradient, positive Hessian at d = 300)."""
    for alpha in (1.5, 3.0):
        r = train_replicas(CAUSAL, 600, alpha, seed=0, n_replicas=3, start_noise=1.0, settings=GD)
        assert r.success, r.message
        assert r.relative_gap() < 1e-5, (alpha, r.mutual)
        assert np.min(np.abs(r.theta)) > 0.25
    ds = replica_dataset(CAUSAL, 300, 1.5, 0)
    r = train_replicas(CAUSAL, 300, 1.5, seed=0, n_replicas=2, settings=GD)
    pol = polish(CAUSAL, ds, r.params[0])
    assert pol.success, pol.message
    assert hessian_spectrum(CAUSAL, ds, pol.params)[0] > 5e-4


@pytest.mark.slow
def test_L3_positional_states_at_0_6_are_distinct_minima():
    """L = 3: replicas from the positional start (noise 0.1) end at distinct minima at d = 1000
    (mutual overlap >= 5 % below q), while the semantic control at alpha = 1.5 coincides."""
    pos = train_replicas(L3, 1000, 0.6, seed=1, n_replicas=3, init="positional", start_noise=0.1, settings=GD)
    sem = train_replicas(L3, 1000, 1.5, seed=1, n_replicas=3, start_noise=1.0, settings=GD)
    assert sem.success and sem.relative_gap() < 1e-6
    assert pos.success, pos.message
    assert pos.relative_gap() > 0.05
    assert np.ptp(pos.train_loss) > 1e-6  # distinct training errors, not one minimum up to symmetry


def test_causal_prox_is_the_brute_force_global_minimum_near_the_fold():
    """The data step of the causal student near its fold (docs/variants.md, "Causal student";
    ``studies/causal_datastep.py`` at full size): on Monte-Carlo samples of the fields at the
    semantic overlaps of ``alpha = 1.75`` (paper convention, inputs), the library's proximal
    minimiser at every sample is the global minimum a dense grid plus L-BFGS finds (docs/model.md
    (3.2)), and its Stein averages (3.3) are those of the brute-force minimisers."""
    from attnphase.theory.quadrature import Rule
    from attnphase.theory.saddle import OrderParams, Saddle

    q, V, th, alpha, n = 0.0653812, 24.8791, 0.0866345, 1.75, 400
    s2 = CAUSAL.sigma**2
    op = OrderParams(np.array([[q]]), np.zeros((2, 1)), np.array([[V]]), np.array([[th]]))
    rng = np.random.default_rng(7)
    xi, eta = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    sd = Saddle(CAUSAL, alpha, Rule(np.concatenate([xi, eta], axis=1), np.full(n, 1.0 / n), "mc", 0, copies="none"))
    ds = sd.data_step(op)
    w = np.sqrt(q) * xi
    T = torch.as_tensor(ds.T)
    mask = torch.tensor([[True, False], [True, True]])

    def objective(h, wt, Tt):  # (the causal student: row 1 sees token 1 only)
        S = torch.softmax((h[..., :, None] * h[..., None, :]).masked_fill(~mask, -np.inf), dim=-1)
        return ((h - wt) ** 2).sum(-1) / (2 * V) + 0.5 * s2 * ((S - Tt) ** 2).sum(dim=(-1, -2))

    half = np.sqrt(8 * V * s2) + 1.0
    u = torch.linspace(-half, half, 81, dtype=torch.float64)
    grid = torch.as_tensor(w)[:, None] + torch.stack(torch.meshgrid(u, u, indexing="ij"), -1).reshape(1, -1, 2)
    wt = torch.as_tensor(w)[:, None]
    with torch.no_grad():
        f = objective(grid, wt, T[:, None])
    idx = f.topk(4, dim=1, largest=False).indices
    h = torch.gather(grid, 1, idx[..., None].expand(-1, -1, 2)).clone().requires_grad_(True)
    opt = torch.optim.LBFGS([h], lr=1, max_iter=300, tolerance_grad=1e-13, tolerance_change=1e-16,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        obj = objective(h, wt, T[:, None]).sum()
        obj.backward()
        return obj

    opt.step(closure)
    with torch.no_grad():
        fv = objective(h, wt, T[:, None])
        best = fv.argmin(1)
        hb = h.detach()[torch.arange(n), best].numpy()
        Mb = fv[torch.arange(n), best].numpy()
    assert np.all(ds.prox.value <= Mb + 1e-10)
    assert np.max(np.abs(ds.prox.h[..., 0] - hb)) < 1e-5
    g = (hb - w) / V
    assert ds.mean_M == pytest.approx(Mb.mean(), rel=1e-9)
    assert ds.hats.q_hat[0, 0] == pytest.approx(alpha * (g**2).sum(1).mean(), rel=1e-6)
    assert ds.hats.theta_hat[0, 0] == pytest.approx(alpha * (g * eta).sum(1).mean() / np.sqrt(s2 - th**2 / q),
                                                    rel=1e-6)
