"""Finite-d simulator (docs/model.md section 1, docs/simulation.md): data, models, gradients, batching, metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnphase.sim import (
    TrainSettings,
    init_params,
    make_dataset,
    n_samples,
    parse_inits,
    positional_embeddings,
    simulate,
    train,
)
from attnphase.sim.data import causal_mask, masked_softmax, teacher_attention
from attnphase.sim.models import (
    attention,
    gram_loss,
    linear_errors,
    linear_fit,
    objective,
    risk,
)
from attnphase.sim.train import stack_batch
from attnphase.spec.attention import MODELS
from attnphase.spec.problem import ModelSpec

torch.set_num_threads(1)

#: the registered models whose keys are the tokens themselves (cross-attention has its own tests)
SELF_ATTENTION = [n for n, m in MODELS.items() if not m.cross]


# ----------------------------------------------------------------------------- data
def test_same_seed_same_numbers_other_seed_other_numbers():
    spec = ModelSpec()
    a = make_dataset(spec, 32, 40, seed=3)
    b = make_dataset(spec, 32, 40, seed=3)
    c = make_dataset(spec, 32, 40, seed=4)
    assert torch.equal(a.X, b.X) and torch.equal(a.Q_star, b.Q_star) and torch.equal(a.yy, b.yy)
    assert not torch.equal(a.X, c.X) and not torch.equal(a.Q_star, c.Q_star)
    ta = next(a.test_chunks())["X"]
    tb = next(b.test_chunks())["X"]
    assert torch.equal(ta, tb)
    # the test set is fresh: not the training samples
    assert not torch.allclose(ta[:5], a.X[:5])


def test_float32_data_is_the_float64_data_cast():
    spec = ModelSpec()
    a = make_dataset(spec, 16, 300, seed=1, dtype=torch.float64)
    b = make_dataset(spec, 16, 300, seed=1, dtype=torch.float32)
    assert torch.equal(a.X.to(torch.float32), b.X)


def test_reference_positions_are_plus_minus_ones():
    Pi = positional_embeddings(ModelSpec().G_array, 37)
    assert np.array_equal(Pi[0], np.ones(37)) and np.array_equal(Pi[1], -np.ones(37))


@pytest.mark.parametrize("d", [64, 50])
@pytest.mark.parametrize(
    "G",
    [
        None,  # default simplex for L = 3
        [[1.0, 0.3, -0.2], [0.3, 1.0, 0.5], [-0.2, 0.5, 1.0]],
    ],
)
def test_positions_realise_the_gram_matrix(d, G):
    spec = ModelSpec(L=3, positions=G)
    Pi = positional_embeddings(spec.G_array, d)
    np.testing.assert_allclose(Pi @ Pi.T / d, spec.G_array, atol=1e-12)
    assert np.array_equal(Pi[0], np.ones(d))


def test_token_noise_covariance_and_positions():
    spec = ModelSpec(L=3, token_corr=0.4, sigma=0.7)
    d, n = 100, 2000
    ds = make_dataset(spec, d, n, seed=0)
    z = ds.X - ds.Pi / math.sqrt(d)  # (n, L, d)
    emp = torch.einsum("nld,nkd->lk", z, z) / (n * d)
    np.testing.assert_allclose(emp.numpy(), spec.C_array, atol=0.01)
    assert abs(float(z.mean())) < 0.01


def test_labels_follow_the_teacher():
    spec = ModelSpec(L=3, teacher_rank=2, omega=0.4, causal_target=True)
    d = 30
    ds = make_dataset(spec, d, 20, seed=2, keep_labels=True)
    z = ds.X - ds.Pi / math.sqrt(d)
    h = z @ ds.Q_star / math.sqrt(d)
    scores = h @ h.transpose(1, 2)
    scores = scores.masked_fill(torch.ones(3, 3, dtype=torch.bool).triu(1), float("-inf"))
    T = 0.6 * torch.softmax(scores, -1) + 0.4 * torch.as_tensor(spec.A_array)
    torch.testing.assert_close(ds.Y, T @ z, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(teacher_attention(spec, h), T)
    assert torch.all(T.sum(-1).sub(1).abs() < 1e-12)
    torch.testing.assert_close(ds.Sxx, ds.X @ ds.X.transpose(1, 2))
    torch.testing.assert_close(ds.Syx, ds.Y @ ds.X.transpose(1, 2))


def test_sample_count_and_bad_sizes():
    assert n_samples(1.0164, 4000) == 4066
    with pytest.raises(ValueError, match="< 1"):
        n_samples(0.01, 10)
    with pytest.raises(ValueError, match="d must be"):
        make_dataset(ModelSpec(), 1, 5, seed=0)


# ----------------------------------------------------------------------------- models
def _explicit_risk(spec, X, Y, params, lam=True):
    """Risk with the prediction formed explicitly (reference for the Gram form)."""
    d = X.shape[-1]
    P = params["P"]
    H = torch.einsum("bnld,bkdc->bknlc", X, P) / math.sqrt(d)
    S = attention(spec, H)
    Xt = X.unsqueeze(1)
    if spec.value == "lowrank":
        U, W = params["U"], params["W"]
        V = torch.eye(d, dtype=X.dtype) + U @ W.transpose(-1, -2) / d  # (D, K, d, d): small d only
        Xt = torch.einsum("bnld,bked->bknle", X, V)
    elif spec.value == "full":
        V = torch.eye(d, dtype=X.dtype) + params["M"] / math.sqrt(d)
        Xt = torch.einsum("bnld,bked->bknle", X, V)
    Yhat = S @ Xt
    R = ((Y.unsqueeze(1) - Yhat) ** 2).sum(dim=(-1, -2, -3)) / (2 * d)
    if lam:
        R = R + 0.5 * spec.lam * sum((p * p).sum(dim=(-1, -2)) for p in params.values())
    return R


def _setup(spec, d=12, n=15, inits=("semantic", "positional", "random"), seeds=(0, 1)):
    dss = [make_dataset(spec, d, n, seed=s, keep_labels=True) for s in seeds]
    batch = stack_batch(dss)
    params = init_params(spec, dss, inits)
    gen = torch.Generator().manual_seed(9)
    # move away from the special starts so every term of the gradient is exercised
    params = {k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=v.dtype)
              for k, v in params.items()}
    return dss, batch, params


@pytest.mark.parametrize("variant", SELF_ATTENTION)
@pytest.mark.parametrize("value", ["identity", "lowrank", "full"])
def test_gram_form_risk_equals_explicit_prediction(variant, value):
    spec = ModelSpec(L=3, rank=2, teacher_rank=2, variant=variant, value=value, value_rank=2)
    _, batch, params = _setup(spec)
    torch.testing.assert_close(risk(spec, batch, params),
                               _explicit_risk(spec, batch.X, batch.Y, params),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("variant", SELF_ATTENTION)
def test_analytic_gradient_equals_autograd(variant):
    spec = ModelSpec(L=3, rank=2, teacher_rank=2, variant=variant, token_corr=0.2)
    _, batch, params = _setup(spec)
    Ra, ga = objective(spec, batch, params, "analytic")
    Rb, gb = objective(spec, batch, params, "autograd")
    torch.testing.assert_close(Ra, Rb, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ga["P"], gb["P"], rtol=1e-10, atol=1e-12)
    # and autograd of the Gram form equals autograd of the explicit prediction
    P = params["P"].detach().requires_grad_(True)
    R = _explicit_risk(spec, batch.X, batch.Y, {"P": P}).sum()
    (gP,) = torch.autograd.grad(R, [P])
    torch.testing.assert_close(ga["P"], gP, rtol=1e-9, atol=1e-11)


def test_analytic_gradient_refuses_trainable_value():
    spec = ModelSpec(value="lowrank")
    _, batch, params = _setup(spec)
    with pytest.raises(ValueError, match="analytic"):
        objective(spec, batch, params, "analytic")


def test_causal_attention_ignores_the_future():
    s = torch.randn(4, 3, 3, dtype=torch.float64)
    S = masked_softmax(s, causal_mask(3))
    assert torch.all(S.triu(1) == 0)
    torch.testing.assert_close(S[:, 0, 0], torch.ones(4, dtype=torch.float64))
    torch.testing.assert_close(S[:, 2], torch.softmax(s[:, 2], -1))
    torch.testing.assert_close(masked_softmax(s), torch.softmax(s, -1))


def test_linear_baseline_is_the_ridge_least_squares_solution():
    spec = ModelSpec(L=3, token_corr=0.3, lam_lin=0.05)
    d, n = 20, 40
    ds = make_dataset(spec, d, n, seed=5, keep_labels=True)
    B = linear_fit(ds.Sxx, ds.Syx, d, spec.lam_lin).numpy()
    # rows of y: y_l = sum_k B_lk x_k; ridge (1/2d) ||Y - B X||^2 + (lam/2) ||B||^2 solved by lstsq
    Xm = ds.X.permute(1, 0, 2).reshape(3, -1).numpy()  # (L, n d)
    Ym = ds.Y.permute(1, 0, 2).reshape(3, -1).numpy()
    A_aug = np.concatenate([Xm.T, math.sqrt(d * spec.lam_lin) * np.eye(3)], axis=0)
    Bt, *_ = np.linalg.lstsq(A_aug, np.concatenate([Ym.T, np.zeros((3, 3))], axis=0), rcond=None)
    np.testing.assert_allclose(B, Bt.T, rtol=1e-9, atol=1e-12)
    err = linear_errors(torch.as_tensor(B), ds.Sxx, ds.Syx, ds.yy, d)
    direct = ((ds.Y - torch.as_tensor(B) @ ds.X) ** 2).sum(dim=(1, 2)) / (2 * d)
    torch.testing.assert_close(err, direct)


def test_gram_loss_matches_direct_residual():
    ds = make_dataset(ModelSpec(), 10, 7, seed=0, keep_labels=True)
    S = torch.softmax(torch.randn(7, 2, 2, dtype=torch.float64), -1)
    direct = ((ds.Y - S @ ds.X) ** 2).sum(dim=(1, 2)) / 20
    torch.testing.assert_close(gram_loss(S, ds.Sxx, ds.Syx, ds.yy, 10), direct)


# ----------------------------------------------------------------------------- training
def test_batched_training_equals_one_run_at_a_time():
    spec = ModelSpec()
    inits = ("semantic", "positional", "random")
    dss = [make_dataset(spec, 24, 30, seed=s) for s in (0, 1)]
    settings = TrainSettings(max_steps=40, tol=0.0, log_every=0)
    together = train(spec, stack_batch(dss), init_params(spec, dss, inits), settings)
    for i, ds in enumerate(dss):
        for k, name in enumerate(inits):
            alone = train(spec, stack_batch([ds]), init_params(spec, [ds], (name,)), settings)
            torch.testing.assert_close(together.params["P"][i, k], alone.params["P"][0, 0],
                                       rtol=1e-12, atol=1e-13)
            torch.testing.assert_close(together.risk[i, k], alone.risk[0, 0])


def test_frozen_runs_do_not_move_while_others_train():
    spec = ModelSpec()
    dss = [make_dataset(spec, 24, 30, seed=0)]
    p0 = init_params(spec, dss, ("semantic", "random"))
    r1 = train(spec, stack_batch(dss), p0, TrainSettings(max_steps=30, tol=0.0, log_every=0))
    gmax = float(r1.grad_norm.max())
    gmin = float(r1.grad_norm.min())
    assert gmin < gmax
    tol = (gmin + gmax) / 2  # one run stops as soon as its gradient drops below, the other not
    r2 = train(spec, stack_batch(dss), r1.params,
               TrainSettings(max_steps=5, tol=tol, log_every=0))
    stopped = int(torch.argmin(r1.grad_norm[0]))
    assert r2.stop[0][stopped] == "tol" and int(r2.steps[0, stopped]) == 0
    assert torch.equal(r2.params["P"][0, stopped], r1.params["P"][0, stopped])
    assert int(r2.steps[0, 1 - stopped]) >= 1


def test_stop_reasons_and_loss_decreases():
    spec = ModelSpec()
    dss = [make_dataset(spec, 24, 40, seed=0)]
    batch = stack_batch(dss)
    p0 = init_params(spec, dss, ("positional",))
    R0, _ = objective(spec, batch, p0)
    res = train(spec, batch, p0, TrainSettings(max_steps=25, tol=0.0, log_every=0))
    assert res.stop == [["max_steps"]] and int(res.steps[0, 0]) == 25
    assert float(res.risk[0, 0]) < float(R0[0, 0])
    res = train(spec, batch, p0, TrainSettings(max_steps=25, tol=1e9, log_every=0))
    assert res.stop == [["tol"]] and int(res.steps[0, 0]) == 0
    adam = train(spec, batch, p0, TrainSettings(optimizer="adam", max_steps=25, tol=0.0,
                                                log_every=0))
    assert float(adam.risk[0, 0]) < float(R0[0, 0])
    mom = train(spec, batch, p0, TrainSettings(momentum=0.5, max_steps=25, tol=0.0, log_every=0))
    assert float(mom.risk[0, 0]) < float(R0[0, 0])


def test_trainable_values_train_with_autograd():
    for value in ("lowrank", "full"):
        spec = ModelSpec(value=value, value_rank=2)
        dss = [make_dataset(spec, 16, 30, seed=0, keep_labels=True)]
        batch = stack_batch(dss)
        p0 = init_params(spec, dss, ("semantic",))
        R0, _ = objective(spec, batch, p0)
        res = train(spec, batch, p0, TrainSettings(max_steps=20, tol=0.0, log_every=0))
        assert float(res.risk[0, 0]) < float(R0[0, 0])
        assert set(res.params) == ({"P", "U", "W"} if value == "lowrank" else {"P", "M"})


def test_starts():
    spec = ModelSpec(variant="untied")
    ds = make_dataset(spec, 20, 10, seed=0)
    p = init_params(spec, [ds], ("semantic", "positional", "random"))["P"][0]
    torch.testing.assert_close(p[0, :, 0], ds.Q_star[:, 0])
    torch.testing.assert_close(p[0, :, 1], ds.Q_star[:, 0])  # key = query for informed starts
    torch.testing.assert_close(p[1, :, 0], torch.full((20,), 1 / math.sqrt(20), dtype=p.dtype))
    assert not torch.allclose(p[2, :, 0], p[2, :, 1])
    assert 0.05 < float(p[2].std()) < 0.2
    with pytest.raises(ValueError, match="unknown init"):
        parse_inits("sideways")
    assert parse_inits("all") == ("semantic", "positional", "random")


# ----------------------------------------------------------------------------- metrics
def test_metrics_in_section_1_units_at_the_starts():
    spec = ModelSpec()
    d, alpha = 50, 1.2
    res = simulate(spec, alpha=alpha, d=d, seeds=(7,), inits=("semantic", "positional"),
                   settings=TrainSettings(max_steps=0, log_every=0), n_test=300)
    sem, pos = res.runs
    ds = make_dataset(spec, d, n_samples(alpha, d), seed=7, n_test=300, keep_labels=True)
    Qs = ds.Q_star[:, 0]
    assert sem.theta == pytest.approx(float(Qs @ Qs) / d, rel=1e-12)
    assert sem.q == pytest.approx(float(Qs @ Qs) / d, rel=1e-12)
    assert sem.m == pytest.approx(float(Qs.sum()) / d, rel=1e-12)
    assert pos.m == pytest.approx(1 / math.sqrt(d), rel=1e-12)
    assert pos.q == pytest.approx(1 / d, rel=1e-12)
    assert pos.theta == pytest.approx(float(Qs.sum()) / d**1.5, rel=1e-12)
    # training error R/d and per-sample test error, computed directly
    P = torch.stack([Qs, torch.ones(d, dtype=Qs.dtype) / math.sqrt(d)])[None, :, :, None]
    R = _explicit_risk(spec, ds.X[None], ds.Y[None], {"P": P})[0]
    assert sem.train_loss == pytest.approx(float(R[0]) / d, rel=1e-10)
    assert pos.train_loss == pytest.approx(float(R[1]) / d, rel=1e-10)
    tot, cnt = torch.zeros(2, dtype=torch.float64), 0
    for c in ds.test_chunks(keep_labels=True):
        tot += _explicit_risk(spec, c["X"][None], c["Y"][None], {"P": P}, lam=False)[0]
        cnt += c["X"].shape[0]
    assert sem.test_error == pytest.approx(float(tot[0]) / cnt, rel=1e-10)
    assert pos.test_error == pytest.approx(float(tot[1]) / cnt, rel=1e-10)
    assert sem.steps == 0 and sem.stop == "max_steps" and not sem.converged
    assert res.n_test == 300 and res.n == 60


def test_simulation_result_is_self_describing():
    res = simulate(ModelSpec(), alpha=1.0, d=20, seeds=(0, 1), inits=("semantic",),
                   settings=TrainSettings(max_steps=5, log_every=0))
    out = res.to_dict()
    assert out["params"]["spec"]["omega"] == 0.3 and out["params"]["train"]["lr"] == 0.15
    assert out["params"]["version"]
    assert out["summary"]["n_runs"] == 2
    thetas = [r["theta"] for r in out["runs"]]
    assert out["summary"]["mean"]["theta"] == pytest.approx(np.mean(thetas))


def test_bad_training_settings():
    with pytest.raises(ValueError, match="optimizer"):
        TrainSettings(optimizer="sgd")
    with pytest.raises(ValueError, match="dtype"):
        TrainSettings(dtype="float16")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            TrainSettings(device="cuda")
    with pytest.raises(ValueError, match="d must be"):
        simulate(ModelSpec(), alpha=1.0, d=1)
    with pytest.raises(ValueError, match="< 1"):
        simulate(ModelSpec(), alpha=0.01, d=10)


@pytest.mark.parametrize("grad", ["analytic", "autograd"])
def test_no_tensor_larger_than_the_data_is_formed(grad):
    """Peak-memory contract: nothing of size n x d x d or n x L x L x d (identity value)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Sizes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
            return out

    spec = ModelSpec(L=3)
    d, n = 96, 8  # d >> n L so that n L L d and d d stand out
    dss = [make_dataset(spec, d, n, seed=s) for s in (0, 1)]
    batch = stack_batch(dss)
    params = init_params(spec, dss, ("semantic", "positional", "random"))
    with Sizes() as mode:
        objective(spec, batch, params, grad)
    assert mode.largest <= batch.X.numel()  # D n L d: the stacked data itself
    assert mode.largest < 2 * n * 3 * 3 * d
