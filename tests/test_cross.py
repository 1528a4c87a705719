"""Cross-attention (docs/model.md section 10): the token-level form against the model written out,
the kernels on the cross mask, the simulator's data, the bad input, and theory against simulation.

The fast tests check identities (the loss of the ``L + L'`` tokens with the cross mask is
``(sigma^2/2) ||S - T||_F^2`` of the ``L x L'`` matrices; the simulator's risk is that of
``yhat = softmax(h h'^T) x'``; the written-out C kernel and the generic numba kernel give the same
minimisers; the theory's test error (4.2) is the simulator's at a student with given overlaps).
The fast test ``test_positional_fixed_point_is_a_saddle_...`` checks the theta block of the
fixed-point map at the positional point (docs/cross.md, "Is the positional fixed point a minimum
of the risk?"). The slow tests compare the theory with training at ``d = 1000`` (3 seeds) at
``alpha = 1`` and ``2``: the semantic start against the semantic branch; at ``alpha = 2``, where
the positional fixed point is a saddle of the risk, GD started on it leaves it and the positional
start ends on the semantic branch and agrees with it; at ``alpha = 1`` the positional start
against the positional branch is an expected failure (a flat minimum that GD leaves at this
``d``); at ``alpha = 0.5``, below ``alpha_c``, each start against its own branch is an expected
failure too (the semantic start reaches the positional start's minimum on two of the three seeds;
the positional start's ``q`` scatters from seed to seed beyond 5 % of the mean of three):
``PYTHONPATH=src python -m pytest tests/test_cross.py -m slow -q``.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnphase.sim.data import make_dataset, teacher_attention
from attnphase.sim.models import Batch, objective, risk
from attnphase.spec.problem import ModelSpec, positional_axis
from attnphase.theory.channels import (
    AttentionMap,
    cross_target_map,
    loss_numpy,
    objective_batch,
    prox_batch,
    softmax_rows,
)
from attnphase.theory.geometries import written_out

REF = ModelSpec(variant="cross")


def direct_cross(spec: ModelSpec, h: np.ndarray, hstar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``S = softmax(hQ hK'^T)`` and ``T = (1 - omega) softmax(h* h*'^T) + omega A`` (``N x L x L'``)
    written out from the query and key fields (docs/model.md (10.1))."""
    L = spec.L
    F = h.shape[2]
    r = spec.rank
    hq, hk = (h[:, :L, :r], h[:, L:, r:]) if F == 2 * r else (h[:, :L], h[:, L:])
    S = softmax_rows(np.einsum("nla,nja->nlj", hq, hk))
    T = (1 - spec.omega) * softmax_rows(np.einsum("nla,nja->nlj", hstar[:, :L], hstar[:, L:])) + spec.omega * spec.A_array
    return S, T


@pytest.mark.parametrize("variant,Lk", [("cross", 2), ("untied-cross", 2), ("cross", 3)])
def test_loss_is_the_cross_loss(variant, Lk):
    spec = ModelSpec(variant=variant, L_keys=Lk, sigma=0.7, omega=0.4)
    amap = AttentionMap.from_spec(spec)
    rng = np.random.default_rng(1)
    N = 500
    h = 2.0 * rng.standard_normal((N, spec.tokens, amap.field_dim))
    hstar = rng.standard_normal((N, spec.tokens, 1))
    T = cross_target_map(hstar, spec)
    S, Tc = direct_cross(spec, h, hstar)
    expected = 0.5 * spec.sigma**2 * np.sum((S - Tc) ** 2, axis=(1, 2))
    np.testing.assert_allclose(loss_numpy(h, T, spec.C_array, amap), expected, rtol=1e-12, atol=1e-15)
    # the compiled value kernel, with the prior term switched off (V huge)
    val, grad = objective_batch(h, h, T, np.eye(amap.field_dim) * 1e300, spec.C_array, amap)
    np.testing.assert_allclose(val, expected, rtol=1e-12, atol=1e-15)
    # the key rows of the target are exactly e_j, the key block of the query rows exactly A's
    assert np.array_equal(T[:, spec.L:, spec.L:], np.broadcast_to(np.eye(Lk), (N, Lk, Lk)))
    assert np.all(T[:, :, : spec.L] == 0.0)


def test_cross_kernels_agree_and_are_written_out():
    """The written-out C kernel of the reference size and the generic numba kernel: the same
    minimisers on the cross mask (where C runs; otherwise both are numba)."""
    spec = REF
    amap = AttentionMap.from_spec(spec)
    assert written_out(spec.tokens, amap.M, amap.mask) is not None
    rng = np.random.default_rng(2)
    N = 256
    w = 0.3 * rng.standard_normal((N, 4, 1))
    T = cross_target_map(rng.standard_normal((N, 4, 1)), spec)
    V = np.array([[15.0]])
    a = prox_batch(w, T, V, spec.C_array, amap)
    b = prox_batch(w, T, V, spec.C_array, amap, generic=True)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.h, b.h, rtol=1e-9, atol=1e-12)
    # a minimiser is stationary: the gradient of the proximal objective vanishes there
    _, g = objective_batch(a.h, w, T, V, spec.C_array, amap)
    assert np.max(np.abs(g)) < 1e-8


def test_simulator_risk_is_the_cross_attention_risk():
    """The risk of the ``L + L'`` tokens with the cross mask equals ``sum ||y - softmax(h h'^T) x'||^2 / (2d)``
    with ``y = T z'`` written out from the drawn tokens (docs/model.md (10.5))."""
    for variant in ("cross", "untied-cross"):
        spec = ModelSpec(variant=variant, L_keys=3)
        d, n = 64, 40
        ds = make_dataset(spec, d, n, seed=3, keep_labels=True)
        L = spec.L
        assert ds.X.shape == (n, 5, d) and ds.Pi.shape == (5, d)
        x, xk = ds.X[:, :L], ds.X[:, L:]
        zk = xk - ds.Pi[L:] / math.sqrt(d)
        hs = torch.cat([x - ds.Pi[:L] / math.sqrt(d), zk], dim=1) @ ds.Q_star / math.sqrt(d)
        T = teacher_attention(spec, hs)[:, :L, L:]
        y = T @ zk
        assert ds.Y is not None and torch.allclose(ds.Y[:, :L], y, rtol=1e-12, atol=1e-12)
        c = 2 if variant == "untied-cross" else 1
        P = torch.randn(1, 1, d, c, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        batch = Batch(ds.X[None], ds.Sxx[None], ds.Syx[None], ds.yy[None])
        R = risk(spec, batch, {"P": P})
        H = ds.X @ P[0, 0] / math.sqrt(d)
        hq, hk = H[:, :L, :1], H[:, L:, c - 1:]
        yhat = torch.softmax(hq @ hk.transpose(1, 2), dim=-1) @ xk
        expected = ((y - yhat) ** 2).sum() / (2 * d) + 0.5 * spec.lam * (P**2).sum()
        assert torch.allclose(R[0, 0], expected, rtol=1e-12)
        # the analytic gradient against autograd on the same risk
        _, ga = objective(spec, batch, {"P": P}, grad="analytic")
        _, gb = objective(spec, batch, {"P": P}, grad="autograd")
        assert torch.allclose(ga["P"], gb["P"], rtol=1e-10, atol=1e-12)


def test_theory_test_error_is_the_simulators_at_given_overlaps():
    """(4.2) for cross-attention: a student built with given ``m``, ``theta``, ``q`` at ``d = 2048``
    has, on fresh samples, the test error the theory's :meth:`Saddle.test_error` gives for those
    overlaps, to the Monte Carlo error (4 standard errors)."""
    from attnphase.sim.models import attention, gram_loss
    from attnphase.theory import SolverSettings
    from attnphase.theory.fixed_point import FAST, make_saddle
    from attnphase.theory.saddle import OrderParams

    spec = REF
    d, n_test = 2048, 3000
    ds = make_dataset(spec, d, 1, seed=5, n_test=n_test)
    Pi, Qs = ds.Pi, ds.Q_star[:, 0]
    # Q = a u + b pi_1 + c pi'_1 + noise direction, u the teacher direction
    g = torch.Generator().manual_seed(7)
    v = torch.randn(d, generator=g, dtype=torch.float64)
    basis = torch.linalg.qr(torch.stack([Qs, Pi[0], Pi[2], v], dim=1))[0] * math.sqrt(d)
    coef = torch.tensor([0.5, 0.15, 0.1, 0.3], dtype=torch.float64)
    Q = basis @ coef
    m = (Pi @ Q / d).numpy()
    theta = float(Qs @ Q / d)
    q = float(Q @ Q / d)
    per = []  # (the per-sample errors, for the Monte Carlo error)
    for c in ds.test_chunks():
        H = c["X"] @ Q / math.sqrt(d)
        S = attention(spec, H[..., None])
        per.append(gram_loss(S, c["Sxx"], c["Syx"], c["yy"], d))
    errors = torch.cat(per)
    sim = float(errors.mean())
    se = float(errors.std()) / math.sqrt(n_test)
    s2 = spec.sigma**2
    sd = make_saddle(spec, 1.0, SolverSettings(**FAST), order=12)  # (4 x 2^12 QMC nodes for (4.2))
    op = OrderParams(np.array([[s2 * q]]), m[:, None], np.array([[1.0]]), np.array([[s2 * theta]]))
    th = sd.test_error(op)
    assert abs(th - sim) < 4 * se + 2e-3 * th, (th, sim, se)


@pytest.mark.parametrize("fields,message", [
    ({"L_keys": 1}, "L_keys must be >= 2"),
    ({"variant": "tied", "L_keys": 3}, "need a cross-attention variant"),
    ({"A": ((0.6, 0.4), (0.4, 0.6)), "L_keys": 3}, "A must be 2x3"),
    ({"cross_positions": ((1, 0), (0, 1), (0, 0))}, "cross_positions Gram must be 2x2"),
    ({"cross_positions": ((2, 0), (0, 2))}, "positive semi-definite"),
    ({"key_positions": ((2, 0), (0, 1))}, "unit diagonal"),
    ({"causal_target": True}, "causal_target does not apply"),
    ({"token_corr": 0.2}, "uncorrelated tokens only"),
    ({"value": "lowrank"}, "value = identity only"),
])
def test_bad_cross_input(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(**{"variant": "cross", **fields})


@pytest.mark.parametrize("args,message", [
    (["--variant", "cross", "--A", "0.6,0.4;0.4,0.6", "--L-keys", "3"], "A must be 2x3"),
    (["--variant", "cross", "--cross-positions", "2,0;0,2"], "positive semi-definite"),
    (["--variant", "untied-cross", "--stability"], "the theta stability covers the tied, causal and cross students"),
])
def test_bad_cross_input_on_the_command_line_is_one_line_and_exit_2(args, message):
    p = subprocess.run([sys.executable, "-m", "attnphase", "solve", "--alpha", "1", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_spec_defaults():
    s = ModelSpec(variant="cross", L=2, L_keys=3)
    assert s.tokens == 5 and s.L_keys == 3
    np.testing.assert_allclose(s.A_array, [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2]])
    G = s.G_array
    np.testing.assert_allclose(G[:2, :2], [[1, -1], [-1, 1]])
    np.testing.assert_allclose(G[2:, 2:], [[1, -0.5, -0.5], [-0.5, 1, -0.5], [-0.5, -0.5, 1]])
    assert np.all(G[:2, 2:] == 0)
    assert ModelSpec(variant="cross").L_keys == 2
    # the positional start (docs/model.md (10.4)): the keys' overlaps follow the rows of A
    np.testing.assert_allclose(s.G_array @ positional_axis(s), [1, -1, 1, -1, 0])
    np.testing.assert_allclose(REF.G_array @ positional_axis(REF), [1, -1, 1, -1])
    np.testing.assert_allclose(positional_axis(ModelSpec()), [1, 0])
    assert ModelSpec(variant="cross").replace(omega=0.5).omega == 0.5


# ---------------------------------------------------------------- theory against simulation
def _sim_means(alpha: float, init: str, d: int = 1000) -> dict[str, float]:
    from attnphase.sim import TrainSettings, simulate

    gd = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000, dtype="float64",
                       log_every=0)
    res = simulate(REF, alpha=alpha, d=d, seeds=(0, 1, 2), inits=(init,), settings=gd)
    out: dict[str, list[float]] = {"q": [], "m": [], "m_key": [], "theta": [], "train_loss": [], "test_error": []}
    for r in res.runs:
        mm = np.asarray(r.overlaps["m"], dtype=float)[:, 0]
        out["q"].append(float(r.q))
        out["m"].append(abs(float(mm[0])))
        out["m_key"].append(abs(float(mm[2])))
        out["theta"].append(abs(float(r.theta)))
        out["train_loss"].append(r.train_loss)
        out["test_error"].append(r.test_error)
    return {k: float(np.mean(v)) for k, v in out.items()}


def _theory(alpha: float, branch: str) -> dict[str, float]:
    """The branch as ``attnphase solve`` gives it (refined to the error target, 1e-3 on the
    overlaps)."""
    from attnphase.theory import SolverSettings
    from attnphase.theory.target import solve_refined

    pt = solve_refined(REF, alpha, branch, SolverSettings.preset("default"))
    m = np.asarray(pt.m_matrix, dtype=float)[:, 0] if pt.m_matrix else np.zeros(4)
    return {"q": pt.q, "m": abs(m[0]), "m_key": abs(m[2]), "theta": abs(pt.theta), "train_loss": pt.train_loss,
            "test_error": pt.test_error}


def _agree(sim: dict[str, float], th: dict[str, float]) -> list[str]:
    """What disagrees beyond 5 % on the overlaps (an overlap that is zero in theory: the runs' mean
    below the simulator's classification threshold 0.1) and 7 % on the errors."""
    bad = []
    for key in ("q", "m", "m_key", "theta"):
        if th[key] > 1e-3:
            if abs(sim[key] - th[key]) > 0.05 * th[key]:
                bad.append(f"{key}: sim {sim[key]:.5f}, theory {th[key]:.5f}")
        elif sim[key] >= 0.1:
            bad.append(f"{key}: sim {sim[key]:.5f}, theory 0")
    for key in ("train_loss", "test_error"):
        if abs(sim[key] - th[key]) > 0.07 * th[key]:
            bad.append(f"{key}: sim {sim[key]:.6f}, theory {th[key]:.6f}")
    return bad


@pytest.mark.slow  # (a refined theory point and training at d = 1000, 3 seeds: minutes)
@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_theory_against_simulation_semantic(alpha):
    """The semantic start at ``d = 1000`` (mean of seeds 0-2) against the semantic branch."""
    assert _agree(_sim_means(alpha, "semantic"), _theory(alpha, "semantic")) == []


@pytest.mark.slow
@pytest.mark.parametrize("init", [
    pytest.param("semantic", marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
        "measured (docs/cross.md): at alpha = 0.5 and d = 1000 the semantic start ends on the semantic branch on "
        "seed 1 only; on seeds 0 and 2 it reaches the sample's positional minimum, the point the positional "
        "start reaches (q +22 %, theta -28 % from the semantic branch over seeds 0-2)"))),
    pytest.param("positional", marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
        "measured (docs/cross.md): at alpha = 0.5 and d = 1000 the sample's positional minimum is steep but "
        "its q scatters from seed to seed (0.040-0.066 over seeds 0-2, and seed 1 ends at theta 0.10); over "
        "seeds 0-2 q is +13 % and m' -10 % from the positional branch (over seeds 0-8: -2.4 % and -5.0 %)"))),
])
def test_theory_against_simulation_below_alpha_c(init):
    """At ``alpha = 0.5``, below ``alpha_c = 0.78``, where the positional fixed point is the global
    minimum and a steep minimum along theta (``F' = 0.65``, curvature ``a (1 - F') = 3.4e-3``): each
    start at ``d = 1000`` (mean of seeds 0-2) against its own branch."""
    assert _agree(_sim_means(0.5, init), _theory(0.5, init)) == []


# ---------------------------------------------------------------- the positional branch
def test_positional_fixed_point_is_a_saddle_at_alpha_2_and_a_minimum_at_alpha_1():
    """The theta block of the fixed-point map at the positional point (docs/cross.md, "Is the
    positional fixed point a minimum of the risk?"): ``F' > 1`` (a saddle of the risk, curvature
    ``a (1 - F') < 0``) for cross-attention at ``alpha = 2``, ``F' < 1`` at ``alpha = 1``; the
    self-attention positional point at ``alpha = 2`` is a minimum along theta. On one order-10 rule
    (measured over orders 10-14 and two scrambles: 0.84-0.88 at ``alpha = 1``, 1.21-1.27 at
    ``alpha = 2``, 0.43-0.48 for self-attention)."""
    from attnphase.theory.stability import positional_stability

    two = positional_stability(REF, 2.0, order=10)
    one = positional_stability(REF, 1.0, order=10)
    tied = positional_stability(ModelSpec(omega=0.3), 2.0, order=10)
    assert two.success and one.success and tied.success
    assert two.slope > 1.1 and two.saddle and two.curvature < 0, two
    assert one.slope < 0.95 and not one.saddle and one.curvature > 0, one
    assert tied.slope < 0.6 and not tied.saddle, tied
    with pytest.raises(ValueError, match="rank 1"):
        positional_stability(ModelSpec(variant="untied-cross"), 1.0)


def test_causal_positional_point_is_a_minimum_along_theta():
    """The causal student's theta block (one student matrix, the same symmetry): its positional
    point is a minimum along theta at alpha 1.5, where gradient descent holds the positional state
    (docs/variants.md, "Causal student"), and at 4.5 (measured F' 0.19 and 0.50 on order 12),
    from the solve's positional point (from the branch's own start the order-10 rule at 4.5 gives
    another point, with F' 1.66)."""
    from attnphase.theory.stability import positional_stability

    spec = ModelSpec(omega=0.3, variant="causal")
    for alpha, lo, hi in ((1.5, 0.1, 0.3), (4.5, 0.4, 0.6)):
        st = positional_stability(spec, alpha, order=10)
        assert st.success and lo < st.slope < hi and st.curvature > 0, st


def test_solve_stability_examines_the_point_the_solve_reports():
    """``solve --stability`` at ``alpha = 3.6`` (self-attention, omega 0.3): the positional start
    falls to the trivial branch on the examined order-12 rule, but the theta block is taken at the
    solve's own positional point (``m`` 0.27): found, a minimum along theta."""
    import json

    out = subprocess.run([sys.executable, "-m", "attnphase", "solve", "--alpha", "3.6", "--omega", "0.3",
                          "--branch", "positional", "--stability", "--preset", "fast", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert abs(rec["branches"]["positional"]["m"]) > 0.25
    stab = rec["positional_stability"]
    assert stab["success"] and 0.3 < stab["slope"] < 1 and stab["curvature"] > 0, stab


def _positional_state_start(ds, q: float, m: np.ndarray) -> torch.Tensor:
    """``Q`` with the theory's positional overlaps on the sample ``ds``: ``Pi Q / d = m`` (all
    tokens), ``theta = 0`` exactly, ``Q^T Q / d = q`` (a random part orthogonal to the positions and
    the teacher; studies/cross_positional.py ``start_at``)."""
    d = ds.d
    Pi = ds.Pi.to(torch.float64)
    pos = Pi.T @ torch.linalg.pinv(Pi @ Pi.T / d) @ torch.as_tensor(m, dtype=torch.float64)
    Qs = ds.Q_star[:, 0].to(torch.float64)
    v = torch.randn(d, generator=torch.Generator().manual_seed(10_000 + ds.seed), dtype=torch.float64)
    basis, _ = torch.linalg.qr(torch.cat([Pi.T, Qs[:, None]], dim=1))
    v = v - basis @ (basis.T @ v)
    v = v * math.sqrt((q - float(pos @ pos) / d) * d / float(v @ v))
    Q = pos + v
    return Q - (float(Q @ Qs) / float(Qs @ Qs)) * Qs


def _from_positional_state(alpha: float, d: int = 1000, seeds: tuple[int, ...] = (0, 1, 2),
                           max_steps: int = 8000) -> list[dict[str, float]]:
    """GD as in :func:`_sim_means` (at most ``max_steps``) started at the theory's positional state
    (one order-12 rule)."""
    from attnphase.sim import TrainSettings
    from attnphase.sim.models import test_errors
    from attnphase.sim.train import stack_batch, train
    from attnphase.theory import SolverSettings, solve_point

    pt = solve_point(REF, alpha, "positional", SolverSettings.preset("fast", order=12, warmup_order=10),
                     error_estimate=False)
    m = np.asarray(pt.m_matrix, dtype=float)[:, 0]
    datasets = [make_dataset(REF, d, round(alpha * d), s) for s in seeds]
    P0 = torch.stack([_positional_state_start(ds, pt.q, m) for ds in datasets])[:, None, :, None]
    gd = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=max_steps, dtype="float64",
                       log_every=0)
    res = train(REF, stack_batch(datasets), {"P": P0}, gd)
    test = test_errors(REF, [ds.test_chunks() for ds in datasets], res.params, d)
    out = []
    for i, ds in enumerate(datasets):
        Q = res.params["P"][i, 0, :, 0]
        mm = (ds.Pi @ Q / d).numpy()
        out.append({"q": float(Q @ Q) / d, "m": abs(float(mm[0])), "m_key": abs(float(mm[2])),
                    "theta": abs(float(Q @ ds.Q_star[:, 0])) / d, "train_loss": float(res.risk[i, 0]) / d,
                    "test_error": float(test[i, 0]), "converged": float(res.stop[i][0] == "tol")})
    return out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="measured (docs/cross.md): at alpha = 1 the positional fixed point is a "
                   "minimum of the risk in the limit but flat along theta (curvature 1.4e-3 to 1.8e-3, self-attention "
                   "1.1e-2); at d = 1000 GD leaves it on 2 of 3 seeds, from the positional start and from the "
                   "theory's positional state alike")
def test_theory_against_simulation_positional_alpha_1():
    """The positional start at ``d = 1000`` (mean of seeds 0-2) against the positional branch at
    ``alpha = 1``."""
    assert _agree(_sim_means(1.0, "positional"), _theory(1.0, "positional")) == []


@pytest.mark.slow  # (three runs at d = 3000: about 8 minutes on 2 cores)
def test_positional_start_holds_the_flat_positional_minimum_at_d_3000():
    """At ``alpha = 1`` the positional minimum is flat along theta, and the sample's slope moves it
    by ``O(d^-1/2)`` over that curvature: at ``d = 1000`` GD leaves it on 2 of 3 seeds (the
    expected failure above). At ``d = 3000`` the positional start holds it on every seed
    (``|theta|`` below the classification threshold 0.1) and the mean of seeds 0-2 agrees with the
    positional branch within 5 % on the overlaps and 7 % on the errors (docs/cross.md)."""
    sim = _sim_means(1.0, "positional", d=3000)
    assert sim["theta"] < 0.1, sim
    assert _agree(sim, _theory(1.0, "positional")) == []


@pytest.mark.slow
def test_gd_leaves_the_positional_saddle_at_alpha_2_for_the_semantic_branch():
    """At ``alpha = 2`` the positional fixed point is a saddle of the risk (``F' > 1``): GD started
    on it at ``d = 1000`` leaves it on every seed (``|theta|`` above the classification threshold
    0.1), and GD from the reference positional start ends on the semantic branch on every seed,
    agreeing with it within 5 % / 7 % (mean of seeds 0-2)."""
    runs = _from_positional_state(2.0, max_steps=1500)  # (measured: |theta| passes 0.1 after 165-435 steps)
    assert all(r["theta"] > 0.1 for r in runs), runs
    sim = _sim_means(2.0, "positional")
    assert _agree(sim, _theory(2.0, "semantic")) == []


# --------------------------------------------------------------------------- solve speed (docs/model.md (10.6))
def _cross_nodes(spec: ModelSpec, N: int, seed: int, scale: float = 0.4):
    """Random prior means ``w`` and the cross targets ``T`` of random teacher fields, spread enough
    for nodes with several local minima."""
    rng = np.random.default_rng(seed)
    amap = AttentionMap.from_spec(spec)
    w = scale * rng.standard_normal((N, spec.tokens, amap.field_dim))
    T = cross_target_map(1.5 * rng.standard_normal((N, spec.tokens, 1)), spec)
    return amap, w, T


@pytest.mark.parametrize("Lk", [2, 3])
def test_the_data_step_does_not_see_the_keys_common_shift(Lk):
    """docs/model.md (10.6): moving every key's prior mean by the same vector moves the proximal
    minimiser's key fields by it and changes neither its query fields, its value, nor ``g``; the
    keys' ``g`` sum to zero (so the Stein sums' multipliers do not see the shift either); and the
    basis of the fine rules spans exactly the complement of the keys' common shift."""
    from attnphase.theory.quadrature import key_contrasts

    spec = ModelSpec(variant="cross", L_keys=Lk)
    amap, w, T = _cross_nodes(spec, 400, seed=4)
    V = np.array([[25.0]])
    L = spec.L
    shift = np.zeros_like(w)
    shift[:, L:] = np.random.default_rng(5).standard_normal((len(w), 1, 1))
    a = prox_batch(w, T, V, spec.C_array, amap)
    b = prox_batch(w + shift, T, V, spec.C_array, amap)
    np.testing.assert_allclose(b.value, a.value, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(b.h - shift, a.h, atol=1e-7)
    g = (a.h - w) / V[0, 0]
    assert np.max(np.abs(g[:, L:].sum(axis=1))) < 1e-9
    B = key_contrasts(spec.tokens, Lk, 1, 1)
    assert B.shape == (2 * spec.tokens, 2 * spec.tokens - 2)
    np.testing.assert_allclose(B.T @ B, np.eye(B.shape[1]), atol=1e-14)
    for block in (0, spec.tokens):  # (xi, then eta: the keys' common shift of each)
        u = np.zeros(2 * spec.tokens)
        u[block + L: block + spec.tokens] = 1.0
        assert np.max(np.abs(u @ B)) < 1e-14


def test_the_fine_rules_of_cross_attention_are_nested_in_the_reduced_basis():
    """The Sobol nets drawn in the key contrasts' basis keep the extensibility that the raise of the
    refinement order relies on (``fine_rules.nested_first``): the rule of order ``k`` is the first
    points of every block of the rule of order ``k + 1`` with the same seed, and every node lies in
    the basis' span."""
    from attnphase.theory.fine_rules import key_basis_for
    from attnphase.theory.quadrature import sobol_gaussian

    basis = key_basis_for(REF, "eta")
    assert basis is not None and key_basis_for(ModelSpec(), "eta") is None and key_basis_for(REF, "signs") is None
    small = sobol_gaussian(8, 6, 4, seed=11, copies="eta", basis=basis)
    big = sobol_gaussian(8, 7, 4, seed=11, copies="eta", basis=basis)
    half = big.size // 2  # (two blocks: the net and its eta flip)
    n = small.size // 2
    assert np.array_equal(big.x[:n], small.x[:n]) and np.array_equal(big.x[half:half + n], small.x[n:])
    np.testing.assert_allclose(big.x @ basis @ basis.T, big.x, atol=1e-13)


@pytest.mark.parametrize("v", [0.5, 25.0, 150.0])
def test_the_reduced_start_set_finds_the_full_sets_global_minimum(v):
    """docs/model.md (10.6): at ``L' = 2`` the second key's offsets are starts the first key's
    already make in the reduced problem; the 9 starts reach the global minimum (value to 1e-10) and
    the second minimum of the 11 starts at every node, on random fields with several minima."""
    from attnphase.theory.channels import cross_offset_tokens, default_starts
    from attnphase.theory.saddle import second_minimum

    amap, w, T = _cross_nodes(REF, 2000, seed=6)
    V = np.array([[v]])
    full = default_starts(w, V)
    reduced = default_starts(w, V, tokens=cross_offset_tokens(amap, REF.L_keys))
    assert full.shape[1] == 11 and reduced.shape[1] == 9
    a = prox_batch(w, T, V, REF.C_array, amap, starts=full)
    b = prox_batch(w, T, V, REF.C_array, amap, starts=reduced)
    np.testing.assert_allclose(b.value, a.value, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(b.h, a.h, atol=1e-6)
    (_, m2a), (_, m2b) = second_minimum(a), second_minimum(b)
    finite = np.isfinite(m2a)
    assert np.array_equal(finite, np.isfinite(m2b))
    np.testing.assert_allclose(m2b[finite], m2a[finite], rtol=1e-10, atol=1e-14)
    if v > 1:
        assert np.sum(finite) > 20, "the test should exercise nodes with several local minima"
    assert cross_offset_tokens(AttentionMap.from_spec(ModelSpec()), 0) is None
    assert cross_offset_tokens(AttentionMap.from_spec(ModelSpec(variant="cross", L_keys=3)), 3) is None


def test_the_folded_cross_kernel_is_the_generic_kernel_bit_for_bit():
    """The written-out kernel of ``cross_L4_K2_r1`` folds the target's fixed blocks (key rows
    ``e_j``, query rows zero on the query columns): on cross targets it gives the generic kernel's
    numbers bit for bit at every start; a target without those blocks goes to the generic kernel."""
    from attnphase.theory import native

    amap, w, T = _cross_nodes(REF, 1500, seed=8)
    if native.prox_library(written_out(REF.tokens, amap.M, amap.mask)) is None:
        pytest.skip("the C kernels cannot be built here")
    for v in (0.5, 25.0, 150.0):
        V = np.array([[v]])
        fast = prox_batch(w, T, V, REF.C_array, amap)
        slow = prox_batch(w, T, V, REF.C_array, amap, generic=True)
        for a, b in zip(fast.arrays(), slow.arrays(), strict=True):
            assert np.array_equal(a, b)
    other = T.copy()
    other[:, 2, 2] = 0.9
    other[:, 2, 3] = 0.1
    V = np.array([[25.0]])
    a = prox_batch(w, other, V, REF.C_array, amap)
    b = prox_batch(w, other, V, REF.C_array, amap, generic=True)
    assert all(np.array_equal(x, y) for x, y in zip(a.arrays(), b.arrays(), strict=True))


def test_the_refinement_order_of_cross_attention_rises_one_order_at_a_time():
    """docs/model.md (10.6), (11): the error target raises the order of the tied cross-attention
    student and of two heads by one order at a time (``target.SCATTERED_MAX_STEP``), every other
    model by the predicted decay."""
    from attnphase.theory.target import SCATTERED_MAX_STEP, order_step, orders_to_target

    predicted = orders_to_target(6.2e-3, 1e-3)
    assert predicted > 1  # (order 11 + 5: capped at the highest, 15)
    for scattered in (REF, ModelSpec(heads=2)):
        assert order_step(scattered, 6.2e-3, 1e-3) == SCATTERED_MAX_STEP == 1
    for other in (ModelSpec(), ModelSpec(variant="untied-cross"), ModelSpec(L=3)):
        assert order_step(other, 6.2e-3, 1e-3) == predicted


def test_the_teacher_scale_of_cross_attention_is_the_positional_branchs():
    """The fine rules of the tied cross-attention student (``L = L' = 2``, rank 1) scale the teacher
    noises on the positional branch only (``fine_rules.CROSS_SCALED_BRANCHES``); an explicit scale
    wins, and self-attention keeps its scale on every branch."""
    from attnphase.theory.fine_rules import REFERENCE_TEACHER_SCALE, teacher_scale_for
    from attnphase.theory.fixed_point import SolverSettings

    st = SolverSettings.preset("default")
    assert teacher_scale_for(REF, st, "positional") == REFERENCE_TEACHER_SCALE
    assert teacher_scale_for(REF, st, "semantic") == teacher_scale_for(REF, st, "trivial") == 1.0
    assert teacher_scale_for(ModelSpec(variant="cross", L_keys=3), st, "positional") == 1.0
    assert teacher_scale_for(REF, SolverSettings.preset("default", fine_teacher_scale=1.2), "semantic") == 1.2
    for b in ("semantic", "positional", "trivial", None):
        assert teacher_scale_for(ModelSpec(), st, b) == REFERENCE_TEACHER_SCALE


def test_the_two_key_target_is_the_row_softmax_bit_for_bit():
    """``cross_target_map`` at ``L' = 2`` takes the softmax of its pairs of scores entry by entry:
    the numbers of :func:`softmax_rows`, bit for bit, from small to saturated scores."""
    from attnphase.theory.channels import _softmax_pairs

    rng = np.random.default_rng(9)
    for scale in (0.1, 1.0, 30.0, 800.0):
        s = scale * rng.standard_normal((4000, 2, 2))
        assert np.array_equal(_softmax_pairs(s), softmax_rows(s))
    hstar = 2.0 * rng.standard_normal((500, REF.tokens, 1))
    T = cross_target_map(hstar, REF)
    S = np.einsum("nla,nja->nlj", hstar[:, :REF.L], hstar[:, REF.L:])
    assert np.array_equal(T[:, :REF.L, REF.L:], (1.0 - REF.omega) * softmax_rows(S) + REF.omega * REF.A_array)


def test_test_error_is_summed_without_the_keys_common_shift():
    """The test error of tied cross-attention (docs/model.md (4.2), (10.6)) is summed on a Sobol
    rule in the noises without the keys' common shift (``Saddle.test_rule``): at the semantic
    and positional starts it agrees with the full 8-dimensional noise on two scrambles of
    ``4 * 2^16`` nodes to 1e-3 relative, and the solver's coarse rule is further from them."""
    from attnphase.theory.branches import start_point
    from attnphase.theory.channels import loss_numpy
    from attnphase.theory.quadrature import sobol_gaussian
    from attnphase.theory.saddle import Saddle

    sd = Saddle(REF, 1.0, sobol_gaussian(8, 8, n_xi=4, seed=1))
    rule = sd.test_rule()
    assert rule is not None and rule.copies == "none"
    # built once per saddle and size, the same nodes as a fresh build
    assert sd.test_rule() is rule and sd.test_rule(11) is sd.test_rule(11) is not rule
    fresh = sd._build_test_rule(11)
    assert fresh is not None and np.array_equal(sd.test_rule(11).x, fresh.x)
    for branch in ("semantic", "positional"):
        op = start_point(REF, branch, 1)

        def on(r, op=op):
            w, hstar, *_ = sd.fields(op, r.x[:, :4].reshape(r.size, 4, 1), r.x[:, 4:].reshape(r.size, 4, 1))
            return float(r.w @ loss_numpy(w, sd.target(hstar), sd.C, sd.amap))

        full = np.mean([on(sobol_gaussian(8, 16, n_xi=4, seed=s)) for s in (2, 3)])
        own = sd.test_error(op)
        assert abs(own - full) < 1e-3 * full, branch
        assert abs(on(sd.rule) - full) > abs(own - full), branch
