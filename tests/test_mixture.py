"""Gaussian-mixture tokens (docs/model.md section 9): the spec's checks, the simulator's exact
means and teacher, the weights step against the explicit Gaussian problem, the reduction to the
plain model at ``rho_mu = 0``, and the theory's field distribution against sampled tokens.
The agreement of the solved theory with gradient descent at ``d = 1000`` is ``-m slow``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnphase.cli import main
from attnphase.sim.data import make_dataset, mixture_directions, positional_embeddings, teacher_attention
from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import start_point
from attnphase.theory.fixed_point import FAST, SolverSettings, solve_fixed_point
from attnphase.theory.mixture import Mixture
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import Hats, OrderParams, Saddle, linear_test_error

REF = dict(omega=0.3, mixture=2, mixture_sep=1.0, mixture_align=0.5)


# ------------------------------------------------------------------ the spec
@pytest.mark.parametrize("kw, fragment", [
    (dict(mixture=2, mixture_gram="1,2;2,1"), "positive semi-definite"),
    (dict(mixture=2, mixture_sep=1, mixture_probs="0.3,0.3"), "sum to 1"),
    (dict(mixture=2, mixture_sep=1, mixture_align=1.5), "impossible"),
    (dict(mixture=2, mixture_sep=1, mixture_align="0.5,0.5"), "impossible"),
    (dict(mixture=3, mixture_gram="1,0,0;0,1,0;0,0,1", mixture_align="0.8,0.8,0"), "impossible"),
    (dict(mixture_sep=1), "needs mixture"),
    (dict(mixture=2), "mixture_sep"),
    (dict(mixture=2, mixture_sep=1, mixture_gram="2,-2;-2,2"), "disagree"),
])
def test_bad_mixtures_raise_one_line(kw, fragment):
    with pytest.raises(ValueError, match=fragment) as exc:
        ModelSpec(**kw)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("command", [["solve", "--alpha", "1"], ["simulate", "--d", "20", "--max-steps", "1"],
                                     ["transition"]])
def test_cli_refuses_impossible_alignment_with_exit_2(command, capsys):
    rc = main([*command, "--mixture", "2", "--mixture-sep", "0.5", "--mixture-align", "0.8"])
    err = capsys.readouterr().err
    assert rc == 2 and "impossible" in err and err.count("\n") == 1


@pytest.mark.parametrize("gain", [["--value-gain", "1.1"], []])
def test_theory_refuses_a_mixture_with_the_value_gain_in_one_line(gain, capsys):
    """The mixture theory covers the identity value: the gain, fixed or optimised, is refused
    with one line and exit 2."""
    rc = main(["solve", "--alpha", "1", "--preset", "fast", "--branch", "semantic", "--mixture", "2",
               "--mixture-sep", "1", "--mixture-align", "0.5", "--value", "gain", *gain])
    err = capsys.readouterr().err
    assert rc == 2 and "covers value = identity" in err and err.count("\n") == 1


def test_reference_mixture_values():
    spec = ModelSpec(**REF)
    np.testing.assert_allclose(spec.mixture_Gmu, [[1, -1], [-1, 1]])
    np.testing.assert_allclose(spec.mixture_kappa, [0.5, -0.5])
    np.testing.assert_allclose(spec.mixture_p, [0.5, 0.5])
    assert Mixture.from_spec(spec).perm == (1, 0)
    assert Mixture.from_spec(ModelSpec(mixture=3, mixture_sep=1.0)).perm is None
    with pytest.raises(ValueError, match="uncorrelated"):
        Mixture.from_spec(ModelSpec(mixture=2, mixture_sep=1.0, token_corr=0.2))


# ------------------------------------------------------------------ the simulator
@pytest.mark.parametrize("kw", [REF, dict(L=3, mixture=3, mixture_gram="1,0.2,0;0.2,1,0.1;0,0.1,0.5",
                                          mixture_align="0.3,0.1,-0.2", mixture_probs="0.2,0.3,0.5")])
def test_means_and_teacher_have_the_requested_gram_exactly(kw):
    spec = ModelSpec(**kw)
    d = 57
    Pi = torch.as_tensor(positional_embeddings(spec.G_array, d))
    Qs, M = mixture_directions(spec, Pi, d, seed=3)
    D = torch.cat([M, Qs.T]).numpy()
    full = np.block([[spec.mixture_Gmu, spec.mixture_kappa[:, None]], [spec.mixture_kappa[None], np.ones((1, 1))]])
    np.testing.assert_allclose(D @ D.T / d, full, atol=1e-12)
    np.testing.assert_allclose(Pi.numpy() @ D.T / d, 0.0, atol=1e-12)


def test_dataset_labels_follow_the_probabilities():
    """The teacher fields of the training tokens sit at ``kappa_{c}`` plus noise of variance
    ``sigma^2``: their histogram over many tokens has the mixture's mean and variance."""
    spec = ModelSpec(omega=0.3, mixture=2, mixture_gram="1,-1;-1,1", mixture_align="0.8,-0.8",
                     mixture_probs="0.25,0.75")
    ds = make_dataset(spec, 64, 4000, seed=1)
    z = ds.X - ds.Pi / math.sqrt(64)
    h = (z @ ds.Q_star / 8.0).numpy().ravel()
    mean = 0.25 * 0.8 - 0.75 * 0.8
    var = 0.25 + 0.8**2 - mean**2
    se = math.sqrt(var / h.size)
    assert abs(h.mean() - mean) < 5 * se
    assert abs(h.var() - var) < 0.05 * var


# ------------------------------------------------------------------ the theory
def test_weights_step_is_the_explicit_gaussian_problem():
    """docs/model.md (9.2): with ``q_hat = 0`` the minimiser is ``Q = B K^{-1}`` with ``B`` the
    external field along the positions, the means and the teacher; its overlaps, computed on
    explicit vectors with the simulator's Gram, are those of ``Mixture.weights_step``."""
    spec = ModelSpec(omega=0.3, L=3, mixture=3, mixture_gram="1,0.2,0;0.2,1,0.1;0,0.1,0.5",
                     mixture_align="0.3,0.1,-0.2", mixture_probs="0.2,0.3,0.5", variant="untied")
    mix = Mixture.from_spec(spec)
    rng = np.random.default_rng(0)
    F, d, s2 = 2, 64, spec.sigma**2
    m_hat, s_hat, th_hat = rng.normal(size=(3, F)), rng.normal(size=(3, F)), rng.normal(size=(F, 1))
    V_hat = np.array([[0.7, 0.1], [0.1, 0.4]])
    K = spec.lam * np.eye(F) + s2 * V_hat
    Kinv = np.linalg.inv(K)
    ms, theta, q = mix.weights_step(spec.G_array, np.concatenate([m_hat, s_hat]), np.zeros((F, F)), th_hat, Kinv, s2)
    Pi = positional_embeddings(spec.G_array, d)
    Qs, M = (a.numpy() for a in mixture_directions(spec, torch.as_tensor(Pi), d, seed=0))
    B = Pi.T @ m_hat + M.T @ s_hat + Qs @ (s2 * th_hat.T)
    Q = B @ Kinv
    np.testing.assert_allclose(ms, np.concatenate([Pi @ Q / d, M @ Q / d]), atol=1e-12)
    np.testing.assert_allclose(theta, s2 * Q.T @ Qs / d, atol=1e-12)
    np.testing.assert_allclose(q, s2 * Q.T @ Q / d, atol=1e-12)


def test_zero_separation_data_step_is_the_plain_one():
    """At ``Gmu = 0``, ``kappa = 0`` one data step and weights step from the semantic start give
    the plain model's conjugates and order parameters (``s = 0``), docs/model.md (9.3)."""
    rule = make_rule("qmc", 4, 5, 2, seed=0)
    out = []
    for spec in (ModelSpec(omega=0.3), ModelSpec(omega=0.3, mixture=2, mixture_sep=0.0)):
        sd = Saddle(spec, 1.2, rule)
        op = sd.from_paper(start_point(spec, "semantic", 1))
        ds = sd.data_step(op)
        new = sd.weights_step(ds.hats)
        out.append(np.concatenate([new.to_vector()[:1], new.m[:2].ravel(), new.to_vector()[-2:],
                                   [ds.hats.q_hat[0, 0], ds.hats.V_hat[0, 0], ds.hats.theta_hat[0, 0], ds.mean_M]]))
        if spec.mixture:
            assert np.all(new.m[2:] == 0.0)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("branch", ["positional"])
def test_zero_separation_is_the_plain_model(branch):
    """docs/model.md (9.6): at ``Gmu = 0``, ``kappa = 0`` the mixture's fixed point, training
    and test errors are those of the plain model (the label average of identical integrands),
    and ``s = 0``."""
    settings = SolverSettings(**{**FAST, "order": 5})
    rule = make_rule("qmc", 4, 5, 2, seed=0)
    out = []
    for spec in (ModelSpec(omega=0.3), ModelSpec(omega=0.3, mixture=2, mixture_sep=0.0)):
        sd = Saddle(spec, 1.2, rule)
        res = solve_fixed_point(sd, sd.from_paper(start_point(spec, branch, 1)), settings)
        assert res.converged
        q, m, theta = sd.user_units(res.op)
        out.append([q[0, 0], abs(m[0, 0]), theta[0, 0], -sd.free_energy(res.op, res.data), sd.test_error(res.op)])
        if spec.mixture:
            assert np.all(res.op.m[2:] == 0.0)
            assert sd.rule.size == 4 * rule.size
    np.testing.assert_allclose(out[0], out[1], rtol=1e-7, atol=1e-10)
    assert linear_test_error(ModelSpec(mixture=2, mixture_sep=0.0)) == pytest.approx(linear_test_error(ModelSpec()),
                                                                                      rel=1e-12)


def test_reference_branches_keep_their_symmetry_zeros():
    """Semantic: ``m = 0`` with ``s = -s`` across the means and ``s != 0`` (the alignment couples
    ``theta`` and ``s``); positional: ``theta = 0``, ``s = 0`` (docs/model.md (9.4))."""
    spec = ModelSpec(**REF)
    settings = SolverSettings(**{**FAST, "order": 5})
    sd = Saddle(spec, 1.0, make_rule("qmc", 4, 5, 2, seed=0))
    sem = solve_fixed_point(sd, sd.from_paper(start_point(spec, "semantic", 1)), settings)
    pos = solve_fixed_point(sd, sd.from_paper(start_point(spec, "positional", 1)), settings)
    assert sem.converged and pos.converged
    assert np.all(sem.op.m[:2] == 0.0) and sem.op.m[2, 0] == pytest.approx(-sem.op.m[3, 0], rel=1e-12)
    assert sem.op.m[2, 0] > 0.1
    assert sem.op.theta[0, 0] > 0.05
    assert np.all(pos.op.theta == 0.0) and np.all(pos.op.m[2:] == 0.0) and abs(pos.op.m[0, 0]) > 0.1


def test_test_error_is_the_average_over_sampled_tokens():
    """docs/model.md (9.3), (9.5): for a fixed student ``Q`` with overlaps along the positions, a
    mean and the teacher, the mean per-sample loss over sampled mixture tokens at ``d = 400``
    equals the theory's label-averaged Gaussian integral at the measured overlaps, within the
    sampling error (5 standard errors) and the ``O(1/d)`` terms the limit drops."""
    spec = ModelSpec(**REF)
    d, n = 300, 3000
    ds = make_dataset(spec, d, 1, seed=2, n_test=n, keep_labels=True)
    rng = np.random.default_rng(1)
    Pi, M, Qs = ds.Pi.numpy(), ds.means.numpy(), ds.Q_star.numpy()[:, 0]
    Q = 0.1 * Pi[0] + 0.3 * M[0] + 0.4 * Qs + 0.5 * rng.normal(size=d)
    losses = []
    for c in ds.test_chunks(keep_labels=True):
        h = c["X"] @ torch.as_tensor(Q) / math.sqrt(d)
        S = torch.softmax(h[:, :, None] * h[:, None, :], dim=-1)
        losses.append(((c["Y"] - S @ c["X"]) ** 2).sum(dim=(1, 2)).numpy() / (2 * d))
    loss = np.concatenate(losses)
    s2 = spec.sigma**2
    op = OrderParams(np.array([[s2 * Q @ Q / d]]), np.concatenate([Pi @ Q / d, M @ Q / d])[:, None],
                     np.eye(1), np.array([[s2 * Q @ Qs / d]]))
    sd = Saddle(spec, 1.0, make_rule("qmc", 4, 4, 2, seed=0))
    theory = sd.test_error(op)
    se = loss.std() / math.sqrt(loss.size)
    assert abs(loss.mean() - theory) < 5 * se + 2.0 / d * theory
    # (and the teacher's target of the sampled tokens is the one the theory integrates)
    assert teacher_attention(spec, torch.zeros(1, 2, 1)).shape == (1, 2, 2)


def test_data_step_s_hat_is_the_label_resolved_sum():
    """``s_hat_k = alpha E[sum_l 1[c_l = k] g_l]`` (docs/model.md (9.4)) against numpy sums over
    the replicated nodes, and the symmetric part of ``s_hat`` never enters the weights step."""
    spec = ModelSpec(**REF)
    sd = Saddle(spec, 1.0, make_rule("qmc", 4, 5, 2, seed=1))
    op = OrderParams(np.array([[0.08]]), np.array([[0.1], [-0.1], [0.2], [-0.2]]), np.array([[10.0]]),
                     np.array([[0.1]]))
    ds = sd.data_step(op)
    g = (sd.unmix(ds.prox.h) - ds.w) / op.V[0, 0]
    for k in range(2):
        want = sd.alpha * np.einsum("n,nl->", sd.rule.w, g[..., 0] * (sd.labels == k))
        assert ds.hats.m_hat[2 + k, 0] == pytest.approx(want, rel=1e-9, abs=1e-12)
    h = ds.hats
    shifted = Hats(h.q_hat, h.m_hat + np.array([[0.0], [0.0], [1.0], [1.0]]), h.V_hat, h.theta_hat)
    a, b = sd.weights_step(h), sd.weights_step(shifted)
    np.testing.assert_allclose(a.to_vector(), b.to_vector(), rtol=1e-12, atol=1e-14)


def _brute_prox(w, T, V, s2, grid=41, newton=30):
    """Global minimiser of ``sum_l (h_l - w_l)^2 / (2V) + s2 ||softmax(h h^T) - T||^2 / 2`` per
    sample (``w (N, 2)``): damped Newton steps from the best four points of a grid around ``w``
    that covers every minimiser, the lowest end point kept."""
    def obj(h, w, T):
        S = torch.softmax(h[..., :, None] * h[..., None, :], dim=-1)
        return ((h - w) ** 2).sum(-1) / (2 * V) + 0.5 * s2 * ((S - T) ** 2).sum(dim=(-1, -2))

    half = math.sqrt(8 * V * s2) + 1.0  # (the loss is at most 2 s2: |hhat - w| <= sqrt(4 V s2))
    u = torch.linspace(-half, half, grid, dtype=torch.float64)
    h = w[:, None] + torch.stack(torch.meshgrid(u, u, indexing="ij"), -1).reshape(1, -1, 2)
    idx = obj(h, w[:, None], T[:, None]).topk(4, dim=1, largest=False).indices
    h = torch.gather(h, 1, idx[..., None].expand(-1, -1, 2))
    W, TT = w[:, None].expand_as(h), T[:, None].expand(-1, 4, -1, -1)
    for _ in range(newton):  # (separable: the gradient of the sum is each sample's own)
        x = h.detach().requires_grad_(True)
        f = obj(x, W, TT)
        (g,) = torch.autograd.grad(f.sum(), x, create_graph=True)
        H = torch.stack([torch.autograd.grad(g[..., j].sum(), x, retain_graph=True)[0] for j in range(2)], -2)
        step = torch.linalg.solve(H + 1e-9 * torch.eye(2, dtype=H.dtype), g[..., None])[..., 0]
        ok = (torch.linalg.eigvalsh(H)[..., 0] > 0)[..., None]  # (Newton where convex, else a gradient step)
        step = torch.where(ok, step, V * g).detach()
        t = torch.ones_like(f)
        for _ in range(20):  # (backtracking: never go up)
            new = h - t[..., None] * step
            worse = obj(new, W, TT) > f.detach()
            if not worse.any():
                break
            t = torch.where(worse, 0.5 * t, t)
        h = torch.where(worse[..., None], h, new)
    f = obj(h, W, TT)
    best = f.argmin(dim=1)
    return h[torch.arange(w.shape[0]), best], f[torch.arange(w.shape[0]), best]


@pytest.mark.slow
def test_positional_data_step_is_the_monte_carlo_average():
    """docs/model.md (9.3)-(9.4) near the reference positional fixed point (``theta = s = 0``,
    ``kappa = 0.5``, ``alpha = 1``; paper-convention ``q = 0.0926``, ``m = 0.277``, ``V = 16.9``):
    the theory's conjugates and ``E[M]`` (label configurations enumerated on a QMC rule) against
    an independent Monte-Carlo estimate: labels sampled, Gaussian fields, the proximal problem
    solved by brute force, ``g = (hhat - w) / V``; within 4 standard errors."""
    spec = ModelSpec(**REF)
    op = OrderParams(np.array([[0.0926]]), np.array([[0.277], [-0.277], [0.0], [0.0]]), np.array([[16.9]]),
                     np.array([[0.0]]))
    sd = Saddle(spec, 1.0, make_rule("qmc", 4, 9, 2, seed=0))
    ds = sd.data_step(op)
    rng = np.random.default_rng(0)
    n, s2 = 3000, spec.sigma**2
    q, V = float(op.q[0, 0]), float(op.V[0, 0])
    c = rng.integers(0, 2, size=(n, 2))
    xi, eta = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    w = op.m[:2, 0][None] + op.m[2:, 0][c] + math.sqrt(q) * xi
    hstar = spec.mixture_kappa[c] + math.sqrt(s2) * eta
    T = teacher_attention(spec, torch.as_tensor(hstar[..., None]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (small tensors: threads only contend on the shared machine)
    try:
        h, M = _brute_prox(torch.as_tensor(w), T, V, s2)
    finally:
        torch.set_num_threads(threads)
    g = (h.numpy() - w) / V
    mc = {"m_hat_1": g[:, 0], "s_hat_1": (g * (c == 0)).sum(1), "s_hat_2": (g * (c == 1)).sum(1),
          "q_hat": (g**2).sum(1), "V_hat": -(g * xi).sum(1) / math.sqrt(q), "E_M": M.numpy() / sd.alpha}
    hats = ds.hats
    theory = {"m_hat_1": hats.m_hat[0, 0], "s_hat_1": hats.m_hat[2, 0], "s_hat_2": hats.m_hat[3, 0],
              "q_hat": hats.q_hat[0, 0], "V_hat": hats.V_hat[0, 0], "E_M": ds.mean_M}
    for k, v in mc.items():
        mean, se = sd.alpha * v.mean(), sd.alpha * v.std() / math.sqrt(n)
        assert abs(mean - theory[k]) < 4 * se, (k, mean, theory[k], se)


# ------------------------------------------------------------------ against gradient descent (slow)
GD_SETTINGS = dict(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000, dtype="float64", log_every=0)


@pytest.fixture(scope="module")
def d1000():
    """Theory (default solve) and GD at ``d = 1000`` (3 seeds, both informed starts) at
    ``alpha = 1`` and 2, ``rho_mu = 1``, ``kappa = 0.5``, ``omega = 0.3``."""
    import attnphase as ap
    from attnphase.sim import TrainSettings, simulate

    torch.set_num_threads(1)
    spec = ModelSpec(**REF)
    out = {}
    for alpha in (1.0, 2.0):
        theory = ap.solve(alpha, spec=spec)
        res = simulate(spec, alpha=alpha, d=1000, seeds=(0, 1, 2), inits=("semantic", "positional"),
                       settings=TrainSettings(**GD_SETTINGS))
        assert all(r.converged for r in res.runs)
        out[alpha] = (theory, res)
    return out


def _compare(theory, res, init):
    runs = [r for r in res.runs if r.init == init]
    th = theory.branches[init]
    sim = {"q": np.mean([r.q for r in runs]), "m": np.mean([abs(r.m) for r in runs]),
           "theta": np.mean([r.theta for r in runs]), "s": np.mean([r.overlaps["s"][0][0] for r in runs]),
           "train_loss": np.mean([r.train_loss for r in runs]), "test_error": np.mean([r.test_error for r in runs])}
    want = {"q": th.q, "m": abs(th.m), "theta": th.theta, "s": th.s_matrix[0][0],
            "train_loss": th.train_loss, "test_error": th.test_error}
    print(f"\nalpha={res.alpha} {init}: " + ", ".join(f"{k} sim {sim[k]:.5g} theory {want[k]:.5g}" for k in sim))
    return sim, want


def _check_overlaps(sim, want):
    for k in ("q", "m", "theta", "s"):
        if abs(want[k]) > 0.05:
            assert abs(sim[k] - want[k]) <= 0.05 * abs(want[k]), k
        else:  # (a zero of the branch: finite-size noise ~ d^-1/2 per seed)
            assert abs(sim[k]) <= 0.1, k


@pytest.mark.slow
def test_zero_separation_solve_reproduces_the_plain_solve():
    """``rho_mu = 0`` reproduces ``attnphase solve --alpha 1 --omega 0.3`` (default preset) within
    its error estimates, branch by branch (docs/model.md (9.6))."""
    import attnphase as ap

    plain = ap.solve(1.0, omega=0.3)
    mix = ap.solve(1.0, omega=0.3, mixture=2, mixture_sep=0.0)
    for name, b in plain.branches.items():
        c = mix.branches[name]
        assert c.s_matrix == ((0.0,), (0.0,))
        for key in ("q", "m", "theta"):
            est = max(b.error_estimate[key + "_user"], c.error_estimate[key + "_user"]) * abs(getattr(b, key))
            assert abs(getattr(b, key) - getattr(c, key)) <= est + 1e-12, (name, key)
        assert c.train_loss == pytest.approx(b.train_loss, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_d1000_semantic_branch_and_errors_agree_with_theory(d1000, alpha):
    """docs/mixture.md: the semantic branch's overlaps (``q``, ``theta``, ``s``; ``m = 0``) within
    5 % and both branches' training and test errors within 7 % (where the positional branch exists)."""
    theory, res = d1000[alpha]
    sim, want = _compare(theory, res, "semantic")
    _check_overlaps(sim, want)
    for k in ("train_loss", "test_error"):
        assert abs(sim[k] - want[k]) <= 0.07 * want[k], k
    if "positional" in theory.branches and theory.branches["positional"] is not None:
        sim, want = _compare(theory, res, "positional")
        for k in ("train_loss", "test_error"):
            assert abs(sim[k] - want[k]) <= 0.07 * want[k], k


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="docs/mixture.md, 'Where the positional gap comes from': GD is converged and "
                   "the theory's data step matches a Monte-Carlo estimate, but the positional branch has many minima "
                   "(mutual overlaps well below q); the ones GD reaches have q 16 % below and |m| 8 % above the "
                   "replica-symmetric fixed point, whose errors agree within 1 %")
def test_d1000_positional_overlaps_agree_with_theory(d1000):
    theory, res = d1000[1.0]
    sim, want = _compare(theory, res, "positional")
    _check_overlaps(sim, want)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_d1000_positional_branch_agrees_with_the_state_following_equations(d1000, alpha):
    """docs/mixture.md, "The state-following equations": on the positional branch, where one data
    set has many minima, the equations with each sample's minimum followed locally
    (``response="local"``, docs/model.md (3.6)) agree with GD from the positional start at
    ``d = 1000`` within 5 % on the overlaps and 7 % on the errors (measured: ``q`` +2.7 % and
    +4.6 %, ``|m|`` -0.3 % and -2.0 % at ``alpha = 1`` and 2). At ``alpha = 2`` the global
    equations have no positional branch (it ends at 1.625) while GD holds one there."""
    import attnphase as ap
    from attnphase import SolverSettings

    _, res = d1000[alpha]
    local = ap.solve(alpha, spec=ModelSpec(**REF), branch="positional",
                     settings=SolverSettings.preset("default", response="local"))
    sim, want = _compare(local, res, "positional")
    _check_overlaps(sim, want)
    for k in ("train_loss", "test_error"):
        assert abs(sim[k] - want[k]) <= 0.07 * want[k], k
