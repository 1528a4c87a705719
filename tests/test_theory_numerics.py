"""Numerical building blocks of the theory solver: derivatives, global prox, quadrature,
Stein vs pointwise-derivative conjugates, the linear baseline."""

import numpy as np
import pytest

from attnphase.conformance import conformance_spec
from attnphase.spec.attention import names
from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import (
    AttentionMap,
    default_starts,
    loss_hessian_batch,
    loss_numpy,
    objective_batch,
    prox_batch,
    target_map,
)
from attnphase.theory.quadrature import gauss_hermite, sobol_gaussian
from attnphase.theory.saddle import TEST_QMC_LOG2, OrderParams, Saddle, linear_test_error

#: every registered model the theory covers, at its conformance size, and the larger geometries
GEOMETRY_SPECS = {**{name: conformance_spec(name) for name in names("theory")},
                  "tied-L3-r2": ModelSpec(L=3, rank=2), "causal-L3": ModelSpec(L=3, variant="causal")}


@pytest.mark.parametrize("spec", list(GEOMETRY_SPECS.values()), ids=list(GEOMETRY_SPECS))
def test_analytic_gradient_and_hessian_match_finite_differences(spec):
    am = AttentionMap.from_spec(spec)
    rng = np.random.default_rng(1)
    N, F, L = 4, am.field_dim, spec.tokens
    h, w = rng.normal(size=(N, L, F)), rng.normal(size=(N, L, F))
    T = target_map(rng.normal(size=(N, L, 1)), spec)
    V = 2.0 * np.eye(F)
    val, grad = objective_batch(h, w, T, V, spec.C_array, am)
    ref = loss_numpy(h, T, spec.C_array, am) + 0.25 * np.sum((h - w) ** 2, axis=(1, 2))
    np.testing.assert_allclose(val, ref, rtol=1e-12)
    eps = 1e-6
    H = loss_hessian_batch(h, T, spec.C_array, am)
    for k in range(L * F):
        dh = np.zeros(L * F)
        dh[k] = eps
        dh = dh.reshape(L, F)
        vp, gp = objective_batch(h + dh, w, T, V, spec.C_array, am)
        vm, gm = objective_batch(h - dh, w, T, V, spec.C_array, am)
        np.testing.assert_allclose(grad[:, k], (vp - vm) / (2 * eps), atol=1e-8)
        np.testing.assert_allclose(H[:, :, k] + (np.arange(L * F) == k) / 2.0, (gp - gm) / (2 * eps), atol=1e-7)


def _random_prox(spec: ModelSpec, N: int, w_scale: float, seed: int):
    """Global prox at ``N`` random nodes of the reference geometry (``V = 20``: non-convex)."""
    rng = np.random.default_rng(seed)
    w = w_scale * rng.normal(size=(N, 2, 1))
    T = target_map(1.5 * rng.normal(size=(N, 2, 1)), spec)
    V = np.array([[20.0]])
    return w, T, V, prox_batch(w, T, V, spec.C_array, AttentionMap.from_spec(spec))


@pytest.mark.slow  # (a dense grid search over hundreds of nodes: about 14 s; the multi-start test of the correlated geometry stays in the default run)
def test_prox_is_global_minimum_against_grid_search():
    """At random nodes (large V, where the problem is non-convex) the multi-start Newton value
    is never above a fine brute-force grid minimum, and the minimiser is stationary."""
    spec = ModelSpec()
    am = AttentionMap.from_spec(spec)
    N = 60
    w, T, V, res = _random_prox(spec, N, 0.1, seed=2)
    g = np.linspace(-4, 4, 801)
    H1, H2 = np.meshgrid(g, g, indexing="ij")
    grid = np.stack([H1.ravel(), H2.ravel()], axis=1)[:, :, None]
    n_multi = 0
    for i in range(N):
        hh = grid
        vals = loss_numpy(hh, np.broadcast_to(T[i], (len(hh), 2, 2)), spec.C_array, am)
        vals = vals + np.sum((hh - w[i]) ** 2, axis=(1, 2)) / (2 * V[0, 0])
        assert res.value[i] <= vals.min() + 1e-12
        assert res.grad_norm[i] < 1e-9
        distinct = np.unique(np.round(res.candidates[i].reshape(-1, 2), 4), axis=0)
        n_multi += len(distinct) > 1
    assert n_multi > 0, "the test should exercise nodes with several local minima"




def test_prox_escapes_the_saddle_at_zero_fields():
    """q -> 0 (alpha = 50, lambda = 0.01, V = 25): every prior mean ``w`` is ~0, where the loss is
    stationary, and ``h = 0`` is a saddle of the proximal objective at ~30 % of the nodes. The
    Newton starts stopped there (``M`` 0.0440 against the grid's 0.0216 at a node); the data
    step now finds the minima: ``E[M]`` at ``q = 1e-22`` equals that at ``q = 1e-14`` (where
    ``w`` is large enough for Newton to leave the saddle), and no node is above a grid minimum."""
    from attnphase.theory.channels import escape_saddles

    spec = ModelSpec(omega=0.3)
    sd = Saddle(spec, 50.0, sobol_gaussian(4, 6, 2))
    V = np.array([[25.0]])

    def step(q):
        return sd.data_step(OrderParams(np.array([[q]]), np.zeros((2, 1)), V, np.zeros((1, 1))))

    tiny, small = step(1e-22), step(1e-14)
    assert tiny.mean_M == pytest.approx(small.mean_M, rel=1e-6)
    w, hs, *_ = sd.fields(OrderParams(np.array([[1e-22]]), np.zeros((2, 1)), V, np.zeros((1, 1))))
    T = target_map(hs, spec)
    starts = default_starts(w, V)
    raw = prox_batch(w, T, V, spec.C_array, sd.amap, starts=starts)
    assert np.max(raw.value - tiny.prox.value) > 1e-2  # (without the escape: stuck at the saddle)
    fixed = escape_saddles(raw, w, T, V, spec.C_array, sd.amap, starts)
    assert np.allclose(fixed.value, tiny.prox.value, rtol=1e-12, atol=0)
    g = np.linspace(-3, 3, 241)
    G1, G2 = np.meshgrid(g, g, indexing="ij")
    grid = np.stack([G1.ravel(), G2.ravel()], axis=1)[:, :, None]
    for i in np.argsort(raw.value - fixed.value)[-3:]:
        vals, _ = objective_batch(grid, np.repeat(w[i:i + 1], len(grid), 0), np.repeat(T[i:i + 1], len(grid), 0), V,
                                  spec.C_array, sd.amap)
        assert fixed.value[i] <= vals.min() + 1e-12


@pytest.mark.parametrize("spec", [
    *(pytest.param(s, id=k, marks=pytest.mark.xfail(strict=True, reason=(
        "measured: at V = 150 I the one-radius set misses the global minimum of 1 node of 600 by 4.1e-4 "
        "(0.75 % of its objective; the minimum moves the fields of two tokens at once); radii 1.5 and 3.0 "
        "together find it (docs/solver.md, known limitations)"))) if k == "causal-L3" else pytest.param(s, id=k)
      for k, s in GEOMETRY_SPECS.items()),
    pytest.param(ModelSpec(rank=2), id="rank2"), pytest.param(ModelSpec(L=3), id="L3")])
def test_one_radius_finds_the_global_minimum(spec):
    """The default multi-start set (one radius of offsets) reaches the same global minimum as a
    denser set (three radii) at random nodes with a large V, where the problem is non-convex."""
    am = AttentionMap.from_spec(spec)
    rng = np.random.default_rng(11)
    N, F = 600, am.field_dim
    w = 0.5 * rng.normal(size=(N, spec.tokens, F))
    T = target_map(1.2 * rng.normal(size=(N, spec.tokens, 1)), spec)
    for V in (20.0 * np.eye(F), 150.0 * np.eye(F)):
        dense = prox_batch(w, T, V, spec.C_array, am, starts=default_starts(w, V, spread=(1.0, 2.5, 4.0)))
        ours = prox_batch(w, T, V, spec.C_array, am)
        assert np.all(ours.value <= dense.value + 1e-12)
        n_multi = sum(len(np.unique(np.round(c.reshape(len(c), -1), 4), axis=0)) > 1 for c in dense.candidates)
        assert n_multi >= 5, "the test should exercise nodes with several local minima"


@pytest.mark.parametrize(("kw", "v"), [({"rank": 2, "sigma": 1.1, "omega": 0.15}, 2000.0),
                                       ({"variant": "untied", "sigma": 1.1, "omega": 0.7}, 5000.0)])
def test_following_the_orbit_of_the_scores_symmetry_converges_the_starts(monkeypatch, kw, v):
    """Where the loss outweighs the quadratic term (``c V`` 2400-6000), the proximal kernels move
    each start and each damped step along the orbit of the scores' symmetry (rotations of the two
    fields of tied rank 2, the scalings ``(c h_Q, h_K / c)`` of untied rank 1;
    ``jit_orbit.follow_orbit``): a move leaves the loss as it is and never raises the quadratic
    term, and with it fewer starts end short of ``gtol`` within 60 steps than without (at ``c V`` 2400:
    410 against 2315 of 16500), at the same or a
    lower global minimum."""
    from attnphase.theory import channels
    from attnphase.theory.jit_orbit import follow_orbit

    spec = ModelSpec(**kw)
    am = AttentionMap.from_spec(spec)
    F = am.field_dim
    rng = np.random.default_rng(7)
    N = 1500
    w = 0.4 * rng.normal(size=(N, 2, F))
    T = target_map(1.5 * rng.normal(size=(N, 2, 1)), spec)
    V = v * np.eye(F)
    assert am.orbit and channels.loss_to_prior(V, spec.C_array) > channels.ORBIT_FROM
    Wt = np.kron(np.eye(2), np.linalg.inv(V))
    h = rng.normal(size=(N, 2, F))
    moved = h.copy()
    for i in range(N):
        follow_orbit(moved[i], w[i], Wt, am.orbit, np.zeros((2, F)))
    loss0, loss1 = loss_numpy(h, T, spec.C_array, am), loss_numpy(moved, T, spec.C_array, am)
    assert np.max(np.abs(loss1 - loss0)) < 1e-12 * np.max(np.abs(loss0))
    prior = [0.5 * np.einsum("na,ab,nb->n", (x - w).reshape(N, -1), Wt, (x - w).reshape(N, -1)) for x in (h, moved)]
    assert np.all(prior[1] <= prior[0]) and np.mean(prior[1] < prior[0] - 1e-9) > 0.5
    starts = default_starts(w, V)

    def solves() -> tuple[int, channels.ProxResult]:
        one = [prox_batch(w, T, V, spec.C_array, am, starts=np.ascontiguousarray(starts[:, k:k + 1]), max_iter=60)
               for k in range(starts.shape[1])]
        return sum(int(np.sum(p.grad_norm > 1e-11)) for p in one), prox_batch(w, T, V, spec.C_array, am, starts=starts)

    short, best = solves()
    monkeypatch.setattr(channels, "ORBIT_FROM", np.inf)
    short_plain, best_plain = solves()
    assert short < 0.5 * short_plain
    assert np.all(best.value <= best_plain.value + 1e-12 * np.abs(best_plain.value))


@pytest.mark.parametrize("rank", [1, 2])
def test_multistart_shortcut_to_known_minima_changes_nothing(rank):
    """Ending a start once its pure Newton step lands within ``snap`` of a minimum another start
    found (``prox_batch(snap=...)``) gives the same global minimiser and value as running every
    start to convergence (``snap=0``), including nodes with several local minima."""
    spec = ModelSpec(rank=rank)
    am = AttentionMap.from_spec(spec)
    rng = np.random.default_rng(5)
    N = 400
    w = 0.3 * rng.normal(size=(N, 2, rank))
    T = target_map(1.5 * rng.normal(size=(N, 2, 1)), spec)
    V = 20.0 * np.eye(rank)
    full = prox_batch(w, T, V, spec.C_array, am, snap=0.0)
    short = prox_batch(w, T, V, spec.C_array, am)
    assert np.max(np.abs(short.value - full.value)) < 1e-14
    assert np.max(np.abs(short.h - full.h)) < 1e-7
    # every start ends at the local minimum it converges to without the shortcut (with a snap
    # radius of 0.5 some starts are sent to another minimum: differences ~1)
    assert np.max(np.abs(short.candidates - full.candidates)) < 1e-6
    assert np.all(short.grad_norm < 1e-9)
    n_multi = sum(len(np.unique(np.round(c.reshape(len(c), -1), 4), axis=0)) > 1 for c in full.candidates)
    assert n_multi > 0

def test_gauss_hermite_moments_and_test_error_converges():
    r = gauss_hermite(2, 6)
    np.testing.assert_allclose(r.w.sum(), 1.0)
    np.testing.assert_allclose(r.w @ r.x[:, 0] ** 4, 3.0)
    np.testing.assert_allclose(r.w @ (r.x[:, 0] ** 2 * r.x[:, 1] ** 2), 1.0)
    spec = ModelSpec()
    op = OrderParams(np.array([[0.0695639]]), np.zeros((2, 1)), np.array([[19.6064]]), np.array([[0.1040494]]))
    errs = []
    ref = Saddle(spec, 1.0, gauss_hermite(4, 4)).test_error(op, order=20)
    for order in (4, 6, 8, 10):
        errs.append(abs(Saddle(spec, 1.0, gauss_hermite(4, 4)).test_error(op, order=order) - ref) / ref)
    assert errs[-1] < 1e-6  # the default order (10) is accurate to 1e-6 relative
    assert errs[0] > errs[1] > errs[2]  # and the error shrinks with the order


@pytest.mark.parametrize("kw", [{}, {"rank": 2}, {"L": 3}, {"variant": "untied"}, {"variant": "causal", "causal_target": True},
                                {"token_corr": 0.3, "teacher_rank": 2}, {"L": 4}])
def test_compiled_test_error_equals_the_vectorised_loss(kw):
    """``Saddle.test_error`` (a numba kernel that decodes the product rule's nodes itself, or
    walks the QMC nodes above 6 dimensions) is ``E[ell(w; T(h*))]`` with the fields of
    ``Saddle.fields`` and the numpy loss (``Saddle.test_error_numpy``), at a random valid point
    of every geometry."""
    spec = ModelSpec(omega=0.3, **kw)
    rng = np.random.default_rng(7)
    F, L, rs = AttentionMap.from_spec(spec).field_dim, spec.L, spec.teacher_rank
    dim = L * (F + rs)
    sd = Saddle(spec, 1.0, gauss_hermite(dim, 4) if dim <= 6 else sobol_gaussian(dim, 8, n_xi=L * F, seed=1))
    a = rng.normal(size=(F, F))
    q = 0.2 * np.eye(F) + 0.05 * a @ a.T
    op = OrderParams(q, 0.3 * rng.normal(size=(L, F)), np.eye(F), 0.1 * rng.normal(size=(F, rs)))
    np.testing.assert_allclose(sd.test_error(op, order=5), sd.test_error_numpy(op, order=5, log2_n=TEST_QMC_LOG2),
                               rtol=1e-12)


@pytest.mark.parametrize("kw", [{"L": 4}, {"L": 3, "rank": 2}])
def test_test_error_above_six_dimensions_is_a_converged_integral(kw):
    """Above 6 dimensions the test error (docs/model.md (4.2)) is summed on its own Sobol rule
    (``Saddle.test_rule``, ``4 * 2^16`` nodes), not on the solver's coarse rule: it agrees with
    the numpy sum on two other scrambles of ``4 * 2^15`` nodes to 1e-3 relative, and the
    solver's 1024-node rule is further from them."""
    spec = ModelSpec(omega=0.3, **kw)
    rng = np.random.default_rng(3)
    F, L, rs = AttentionMap.from_spec(spec).field_dim, spec.L, spec.teacher_rank
    dim = L * (F + rs)
    sd = Saddle(spec, 1.0, sobol_gaussian(dim, 8, n_xi=L * F, seed=1))
    a = rng.normal(size=(F, F))
    op = OrderParams(0.3 * np.eye(F) + 0.05 * a @ a.T, 0.3 * rng.normal(size=(L, F)), np.eye(F),
                     0.3 * rng.normal(size=(F, rs)))

    def on(rule):
        xi = rule.x[:, :L * F].reshape(rule.size, L, F)
        eta = rule.x[:, L * F:].reshape(rule.size, L, rs)
        w, hstar, *_ = sd.fields(op, xi, eta)
        return float(rule.w @ loss_numpy(w, sd.target(hstar), sd.C, sd.amap))

    ref = np.mean([on(sobol_gaussian(dim, 15, n_xi=L * F, seed=s)) for s in (1, 2)])
    own = sd.test_error(op)
    assert abs(own - ref) < 1e-3 * ref
    assert abs(on(sd.rule) - ref) > abs(own - ref)


def test_qmc_rule_is_symmetric_and_normalised():
    r = sobol_gaussian(4, 6, n_xi=2, seed=3)
    assert r.size == 4 * 64
    np.testing.assert_allclose(r.w.sum(), 1.0)
    np.testing.assert_allclose(r.x.mean(axis=0), 0.0, atol=1e-14)  # antithetic orbit


@pytest.mark.parametrize("copies", ["eta", "xi", "none"])
def test_qmc_rule_with_fewer_copies(copies):
    """Same node count; closed under the named flip only (one net of 4x the points for none)."""
    r = sobol_gaussian(4, 6, n_xi=2, seed=3, copies=copies)
    assert r.size == 4 * 64 and r.copies == copies
    np.testing.assert_allclose(r.w.sum(), 1.0)
    flipped = r.x * (np.array([1, 1, -1, -1]) if copies == "eta" else np.array([-1, -1, 1, 1]))
    closed = {tuple(v) for v in np.round(r.x, 12)} == {tuple(v) for v in np.round(flipped, 12)}
    assert closed == (copies != "none")
    # rank 2 (xi of shape (L, r) per node): the same rule, without the reflections of the signs rule
    r2 = sobol_gaussian(6, 6, n_xi=4, seed=3, axes=2, copies=copies)
    assert r2.size == 4 * 64 and r2.copies == copies
    refl = r2.x * np.array([1, -1, 1, -1, 1, 1])  # xi_l1 -> -xi_l1
    assert {tuple(v) for v in np.round(r2.x, 12)} != {tuple(v) for v in np.round(refl, 12)}
    with pytest.raises(ValueError):
        sobol_gaussian(4, 6, n_xi=2, copies="some")


@pytest.mark.parametrize("copies", ["signs", "eta", "xi"])
def test_teacher_scaled_rule_is_an_importance_sampled_gaussian(copies):
    """Teacher noises from N(0, s^2) with the density ratio as weights: normalised, closed under the
    same flips with equal weights, and the Gaussian moments of eta (E eta^2 = 1, E eta^4 = 3) to
    the rule's accuracy, while the unweighted nodes have the wider variance s^2."""
    s = 1.4
    r = sobol_gaussian(4, 12, n_xi=2, seed=5, copies=copies, teacher_scale=s)
    assert r.teacher_scale == s and r.size == 4 * 2**12
    np.testing.assert_allclose(r.w.sum(), 1.0)
    assert np.mean(r.x[:, 2:] ** 2) == pytest.approx(s**2, rel=0.02)
    np.testing.assert_allclose(r.w @ r.x[:, 2:] ** 2, 1.0, rtol=2e-3)
    np.testing.assert_allclose(r.w @ r.x[:, 2:] ** 4, 3.0, rtol=1e-2)
    np.testing.assert_allclose(r.w @ r.x[:, :2] ** 2, 1.0, rtol=2e-3)  # xi is not scaled
    plain = sobol_gaussian(4, 12, n_xi=2, seed=5, copies=copies)
    np.testing.assert_allclose(r.x[:, :2], plain.x[:, :2])
    if copies != "xi":  # the eta flip maps every node onto a node of the same weight
        flip = r.x * np.array([1, 1, -1, -1])
        order = np.lexsort(np.round(r.x, 12).T)
        order_f = np.lexsort(np.round(flip, 12).T)
        np.testing.assert_allclose(r.x[order], flip[order_f], atol=1e-12)
        np.testing.assert_allclose(r.w[order], r.w[order_f], rtol=1e-12)
    with pytest.raises(ValueError):
        sobol_gaussian(4, 6, n_xi=2, teacher_scale=-1.0)


def test_teacher_scaled_rules_halve_the_scatter_of_the_semantic_conjugates():
    """At the semantic fixed point of the reference case (alpha = 1, omega = 0.3) the Stein
    conjugates on independent scrambles (the fine rules of a refinement, eta flip) scatter less
    with the teacher scaling: the jumps of the proximal minimiser that dominate the scatter sit at
    large |eta| (docs/solver.md). Two scalings agree on average (the plain rule's
    errors are skewed by the rarely sampled tails, so it is the ratio that is tested against it)."""
    spec = ModelSpec(omega=0.3)
    op = OrderParams(np.array([[0.06821]]), np.zeros((2, 1)), np.array([[21.4985]]), np.array([[0.095101]]))
    vals: dict[float, np.ndarray] = {}
    for i, s in enumerate((1.0, 1.4, 2.0)):
        rows = []
        for seed in range(10):
            rule = sobol_gaussian(4, 11, n_xi=2, seed=1000 * (i + 1) + seed, copies="eta", teacher_scale=s)
            h = Saddle(spec, 1.0, rule).data_step(op, switch_width=1e-5).hats
            rows.append([h.theta_hat[0, 0], h.V_hat[0, 0], h.q_hat[0, 0]])
        vals[s] = np.array(rows)
    a, b = vals[1.4], vals[2.0]
    se = np.sqrt(a.var(axis=0, ddof=1) / 10 + b.var(axis=0, ddof=1) / 10)
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4 * se)
    ratio = a.std(axis=0, ddof=1) / vals[1.0].std(axis=0, ddof=1)
    assert ratio[0] < 0.7 and ratio[1] < 0.7  # theta_hat, V_hat


@pytest.mark.parametrize("model", ["reference", "correlated", "rank2"])
def test_mirror_nodes_carry_the_mirror_fields_and_their_density(model):
    """The mirror of a node has the student prior mean ``-w`` and the same teacher fields, the
    map is an involution, and the mirror's share is ``r / (1 + r)`` with ``r`` the ratio of the
    standard normal densities (Saddle.mirror_nodes); in the whitened variables for correlated
    tokens, for every axis at rank 2."""
    if model == "rank2":
        spec = ModelSpec(omega=0.3, rank=2)
        op = OrderParams(np.array([[0.09, 0.01], [0.01, 0.05]]), np.array([[0.2, 0.1], [-0.1, 0.05]]),
                         np.array([[12.0, 1.0], [1.0, 8.0]]), np.array([[0.05], [0.02]]))
        n_xi = 4
    else:
        spec = ModelSpec(omega=0.3, token_corr=0.4 if model == "correlated" else 0.0)
        op = OrderParams(np.array([[0.07]]), np.array([[0.2], [-0.2]]), np.array([[15.0]]), np.array([[0.05]]))
        n_xi = 2
    sd = Saddle(spec, 1.0, sobol_gaussian(n_xi + 2, 6, n_xi=n_xi, seed=2, copies="none"), mirror=True)
    op = sd.from_paper(op)
    xi2, eta2, p = sd.mirror_nodes(op)
    w, hs, *_ = sd.fields(op)
    w2, hs2, *_ = sd.fields(op, xi2, eta2)
    np.testing.assert_allclose(w2, -w, atol=1e-12)
    np.testing.assert_allclose(hs2, hs, atol=1e-12)
    z = np.concatenate([sd.xi.reshape(sd.rule.size, -1), sd.eta.reshape(sd.rule.size, -1)], axis=1)
    z2 = np.concatenate([xi2.reshape(sd.rule.size, -1), eta2.reshape(sd.rule.size, -1)], axis=1)
    r = np.exp(0.5 * (np.sum(z**2, axis=1) - np.sum(z2**2, axis=1)))
    np.testing.assert_allclose(p, r / (1 + r), rtol=1e-8, atol=1e-15)
    back = Saddle(spec, 1.0, sobol_gaussian(n_xi + 2, 6, n_xi=n_xi, seed=2, copies="none"), mirror=True)
    back.xi, back.eta = xi2, eta2
    xi3, eta3, p3 = back.mirror_nodes(op)
    np.testing.assert_allclose(xi3, sd.xi, atol=1e-12)
    np.testing.assert_allclose(eta3, sd.eta, atol=1e-12)
    np.testing.assert_allclose(p3, 1 - p, atol=1e-12)


def test_mirror_pairing_keeps_the_gaussian_expectation():
    """``E[f] = E[(1 - p) f(z) + p f(z')]`` for the mirror ``z'`` of every node: checked on a
    smooth function of the fields with product Gauss-Hermite rules. The plain sum is exact at
    order 12; the paired one converges to it (its logistic share ``p`` is smooth but not a
    polynomial: 1.2e-5, 2.4e-7 at orders 12, 24)."""
    spec = ModelSpec(omega=0.3)
    op = OrderParams(np.array([[0.3]]), np.array([[0.1], [-0.1]]), np.array([[15.0]]), np.array([[0.1]]))
    errs = []
    for order in (12, 24):
        sd = Saddle(spec, 1.0, gauss_hermite(4, order), mirror=True)
        xi2, eta2, p = sd.mirror_nodes(op)

        def f(xi: np.ndarray, eta: np.ndarray, sd: Saddle = sd) -> np.ndarray:
            w, hs, *_ = sd.fields(op, xi, eta)
            return (np.exp(0.8 * w[:, 0, 0]) * np.cos(hs[:, 1, 0]) + w[:, 1, 0] ** 3 * hs[:, 0, 0]
                    + xi[:, 0, 0] * eta[:, 1, 0])

        plain = sd.rule.w @ f(sd.xi, sd.eta)
        paired = sd.rule.w @ ((1 - p) * f(sd.xi, sd.eta) + p * f(xi2, eta2))
        assert 0.05 < np.max(p) and abs(plain) > 0.1
        errs.append(abs(paired / plain - 1))
    assert errs[1] < 1e-6 and errs[1] < 0.1 * errs[0], errs


@pytest.mark.parametrize("branch", ["positional", "semantic"])
def test_mirror_pairing_reduces_the_scatter_of_the_jumping_conjugates(branch):
    """At the fixed points of the reference case (alpha = 1, omega = 0.3) the Stein conjugates on
    independent fine rules (the refinement's: the branch's own flip, teacher scale 1.4) scatter
    less with the mirror pairing (the same nodes and minima; docs/solver.md), and the
    two agree on average."""
    spec = ModelSpec(omega=0.3)
    if branch == "positional":
        op = OrderParams(np.array([[0.043413]]), np.array([[0.24848], [-0.24848]]), np.array([[16.3894]]),
                         np.zeros((1, 1)))
        key, copies = "m_hat", "xi"
    else:
        op = OrderParams(np.array([[0.06821]]), np.zeros((2, 1)), np.array([[21.4985]]), np.array([[0.095101]]))
        key, copies = "theta_hat", "eta"
    vals: dict[bool, list] = {False: [], True: []}
    n = 24  # (the plain rule's errors have heavy tails: 10-16 rules give ratios of 0.4-1.1)
    for seed in range(n):
        rule = sobol_gaussian(4, 11, n_xi=2, seed=500 + seed, copies=copies, teacher_scale=1.4)
        for mirror in (False, True):
            h = Saddle(spec, 1.0, rule, mirror=mirror).data_step(op, switch_width=1e-5).hats
            vals[mirror].append([getattr(h, key).ravel()[0], h.V_hat[0, 0], h.q_hat[0, 0]])
    a, b = np.array(vals[False]), np.array(vals[True])
    se = a.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4 * se)
    ratio = b.std(axis=0, ddof=1) / a.std(axis=0, ddof=1)
    # (measured: 0.65 / 0.60 semantic, 0.53 / 0.58 positional; q_hat's integrand is even: 1)
    assert ratio[0] < 0.8 and ratio[1] < 0.8, ratio
    assert ratio[2] == pytest.approx(1.0, abs=1e-6)


def test_rules_with_fewer_copies_keep_the_branch_symmetries():
    """A rule without all sign copies: the symmetry zeros (theta_hat at theta = 0, m_hat at
    m = 0) are imposed exactly; with the eta copies theta_hat stays exactly odd in theta (m = 0),
    with the xi copies m_hat exactly odd in m (theta = 0), so a refinement approaching the
    trivial branch still finds it at exactly zero overlap."""
    spec = ModelSpec(omega=0.3)
    sem = OrderParams(np.array([[0.07]]), np.zeros((2, 1)), np.array([[19.6]]), np.array([[0.05]]))
    pos = OrderParams(np.array([[0.04]]), np.array([[0.2], [-0.2]]), np.array([[14.6]]), np.zeros((1, 1)))
    plain = Saddle(spec, 1.0, sobol_gaussian(4, 8, n_xi=2, seed=1, copies="none"))
    assert np.all(plain.data_step(pos).hats.theta_hat == 0.0)
    assert np.all(plain.data_step(sem).hats.m_hat == 0.0)
    eta = Saddle(spec, 1.0, sobol_gaussian(4, 8, n_xi=2, seed=1, copies="eta"))
    up, down = eta.data_step(sem).hats, eta.data_step(sem.replace(theta=-sem.theta)).hats
    np.testing.assert_allclose(down.theta_hat, -up.theta_hat, rtol=1e-9)
    np.testing.assert_allclose(down.q_hat, up.q_hat, rtol=1e-9)
    xi = Saddle(spec, 1.0, sobol_gaussian(4, 8, n_xi=2, seed=1, copies="xi"))
    up, down = xi.data_step(pos).hats, xi.data_step(pos.replace(m=-pos.m)).hats
    np.testing.assert_allclose(down.m_hat, -up.m_hat, rtol=1e-9)
    np.testing.assert_allclose(down.V_hat, up.V_hat, rtol=1e-9)
    # without the copy the oddness holds only up to the rule's noise
    up, down = plain.data_step(sem).hats, plain.data_step(sem.replace(theta=-sem.theta)).hats
    assert abs(down.theta_hat[0, 0] + up.theta_hat[0, 0]) > 1e-6 * abs(up.theta_hat[0, 0])


def pointwise_V_hat(sd: Saddle, ds, op: OrderParams) -> float:
    """alpha E[-sum_l d g_l / d w_l] with d g/d w = V^{-1}((V^{-1} + H)^{-1} V^{-1} - I) (r = 1, L = 2)."""
    H = loss_hessian_batch(ds.prox.h, ds.T, sd.spec.C_array, sd.amap)
    Vinv = 1.0 / op.V[0, 0]
    A = np.linalg.inv(Vinv * np.eye(2)[None] + H)
    J = Vinv * (A * Vinv - np.eye(2)[None])
    return float(-sd.alpha * np.sum(sd.rule.w * np.trace(J, axis1=1, axis2=2)))


def test_stein_conjugates_match_pointwise_derivatives_when_prox_is_smooth():
    """Small V: the prox is unique and smooth, so the Stein form of V_hat equals the pointwise
    derivative form alpha E[sum_l (d g_l / d w_l)] with d g/d w = V^{-1}((V^{-1}+H)^{-1} V^{-1} - I)."""
    spec = ModelSpec()
    op = OrderParams(np.array([[0.07]]), np.array([[0.1], [-0.1]]), np.array([[0.5]]), np.array([[0.1]]))
    sd = Saddle(spec, 1.0, gauss_hermite(4, 16))
    ds = sd.data_step(op)
    Vhat_pw = pointwise_V_hat(sd, ds, op)
    np.testing.assert_allclose(ds.hats.V_hat[0, 0], Vhat_pw, rtol=1e-7)


def test_stein_form_differs_from_pointwise_at_the_semantic_point():
    """docs/model.md (3.3): at the authors' semantic point the prox jumps; the Stein form of V_hat
    (kept by the solver) agrees with the reference Monte-Carlo value 0.008714 +- 0.000025, the
    pointwise form (0.009823) misses the jump term."""
    spec = ModelSpec()
    op = OrderParams(np.array([[0.0695639]]), np.zeros((2, 1)), np.array([[19.6064]]), np.array([[0.1040494]]))
    sd = Saddle(spec, 1.0164, sobol_gaussian(4, 14, n_xi=2, seed=0))
    ds = sd.data_step(op)
    Vhat_pw = pointwise_V_hat(sd, ds, op)
    # tolerance: the QMC scatter of this 65k-node rule, measured over scrambles (~1 %)
    assert abs(ds.hats.V_hat[0, 0] - 0.008714) < 0.00015
    assert abs(Vhat_pw - 0.009823) < 0.00015
    assert abs(ds.hats.theta_hat[0, 0] - 0.01982) < 0.0003


def test_linear_baseline_matches_monte_carlo():
    spec = ModelSpec()
    lin = linear_test_error(spec)
    rng = np.random.default_rng(0)
    hs = spec.sigma * rng.normal(size=(400_000, 2, 1))
    T = target_map(hs, spec)
    D = T - T.mean(axis=0)
    mc = 0.5 * spec.sigma**2 * np.sum(D**2, axis=(1, 2))
    assert abs(lin - mc.mean()) < 4 * mc.std() / np.sqrt(len(mc))
    assert abs(lin - 0.001971) / 0.001971 < 0.005  # the published anchor (docs/solver.md)


@pytest.mark.parametrize("L,rs,causal", [(2, 1, False), (3, 2, False), (4, 1, True)])
def test_target_map_is_the_mixed_softmax_of_the_teacher_scores(L, rs, causal):
    """The compiled target equals ``(1 - omega) softmax(h* h*^T) + omega A`` written with numpy,
    rows summing to one, the causal target zero above the diagonal (before the ``omega A`` part)."""
    from attnphase.theory.channels import softmax_rows

    spec = ModelSpec(L=L, teacher_rank=rs, omega=0.3, causal_target=causal)
    h = 3.0 * np.random.default_rng(2).normal(size=(500, L, rs))
    mask = np.tril(np.ones((L, L), dtype=bool)) if causal else None
    ref = 0.7 * softmax_rows(np.einsum("nla,nka->nlk", h, h), mask) + 0.3 * spec.A_array[None]
    T = target_map(h, spec)
    np.testing.assert_allclose(T, ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(T.sum(axis=2), 1.0, atol=1e-14)
    if causal:
        assert np.all(np.triu(T - 0.3 * spec.A_array[None], k=1) == 0.0)


def test_second_minimum_is_the_lowest_distinct_local_minimum():
    """Against the definition evaluated directly: the lowest candidate farther than ``distinct``
    (max-norm) from the global minimiser, the global one back (value inf) where there is none."""
    from attnphase.theory.saddle import second_minimum

    N = 2000
    *_, prox = _random_prox(ModelSpec(omega=0.3), N, 2.0, seed=3)
    h2, v2 = second_minimum(prox)
    n_two = 0
    for i in range(N):
        far = np.max(np.abs(prox.candidates[i] - prox.h[i][None]), axis=(1, 2)) >= 1e-5
        if not far.any():
            assert v2[i] == np.inf and np.array_equal(h2[i], prox.h[i])
            continue
        n_two += 1
        j = np.flatnonzero(far)[np.argmin(prox.candidate_values[i][far])]
        assert v2[i] == prox.candidate_values[i, j] >= prox.value[i]
        assert np.array_equal(h2[i], prox.candidates[i, j])
    assert 0 < n_two < N  # (both cases are exercised)


def test_sobol_cache_gives_the_same_samples_and_spares_the_scipy_stats_import(tmp_path, monkeypatch):
    """The cached base sample is scipy's own (bit for bit); a malformed file is regenerated, an
    unwritable cache is skipped; a process whose samples are cached imports neither scipy.stats nor
    scipy.special."""
    import subprocess
    import sys

    from scipy.special import ndtri
    from scipy.stats import qmc

    from attnphase.theory.quadrature import sobol_cache_dir, sobol_normal

    u = qmc.Sobol(d=4, scramble=True, seed=np.random.default_rng(7)).random_base2(9)
    direct = ndtri(np.clip(u, 1e-16, 1 - 1e-16))
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    first = sobol_normal(4, 9, 7)
    files = list(sobol_cache_dir().glob("*.npy"))
    assert len(files) == 1 and not list(sobol_cache_dir().glob("*.tmp"))
    np.testing.assert_array_equal(first, direct)
    np.testing.assert_array_equal(sobol_normal(4, 9, 7), direct)  # (from the file)
    files[0].write_bytes(b"not a numpy file")
    np.testing.assert_array_equal(sobol_normal(4, 9, 7), direct)
    np.testing.assert_array_equal(np.load(files[0]), direct)  # (rewritten)
    rule = sobol_gaussian(4, 7, 2, seed=7)
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", "")  # no cache at all
    assert sobol_cache_dir() is None
    np.testing.assert_array_equal(sobol_gaussian(4, 7, 2, seed=7).x, rule.x)
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", "/dev/null/cache")  # cannot be written
    np.testing.assert_array_equal(sobol_normal(4, 9, 7), direct)

    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    code = ("import sys; from attnphase.theory.quadrature import sobol_gaussian; "
            "sobol_gaussian(4, 7, 2, seed=7); print('scipy.stats' in sys.modules, 'scipy.special' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False False", r.stderr


def test_rugged_prox_gets_the_landscape_starts_and_finds_the_global_minimum():
    """sigma = 1, alpha = 1, omega = 0.3 near the trivial fixed point (c V = 31 > RUGGED): along a
    short line in q the default starts miss the global minimum at some nodes of 1024 (found by a
    grid of 21^2 starts per node; the misses come and go as basin boundaries move, which kept
    the trivial and positional solves from converging); with the landscape starts that the data
    step adds there, never. At sigma = 0.5 (c V <= 7.5 at lambda = 0.01, 9.3 at rank 2) the
    start set is the default one; correlated tokens measure V in the actual fields."""
    from attnphase.theory.channels import RUGGED, landscape_starts, rugged

    spec = ModelSpec(omega=0.3, sigma=1.0)
    sd = Saddle(spec, 1.0, sobol_gaussian(4, 8, 2))
    assert 0.25 * 37.0 < RUGGED and not rugged(np.array([[37.0]]), ModelSpec().C_array)
    # (token_corr 0.3: whitened V 43 at the trivial point of alpha 1.5; actual c V = 4.5)
    C = ModelSpec(token_corr=0.3).C_array
    from attnphase.theory.saddle import sym_sqrt
    assert not rugged(np.array([[43.0]]), C, sym_sqrt(C)) and rugged(np.array([[43.0]]), C)
    grid = np.linspace(-5, 5, 21)
    g = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2, 1)
    missed = 0
    for t in (-5e-4, 0.0, 5e-4, 1e-3):
        op = OrderParams(np.array([[0.66576617 * (1 + t)]]), np.zeros((2, 1)), np.array([[31.0572508]]), np.zeros((1, 1)))
        assert rugged(op.V, sd.C)
        w, hstar, *_ = sd.fields(op)
        T = target_map(hstar, spec)
        d0 = default_starts(w, op.V)
        everywhere = np.concatenate([d0, np.broadcast_to(g[None], (w.shape[0],) + g.shape)], 1)
        best = prox_batch(w, T, op.V, sd.C, sd.amap, starts=np.ascontiguousarray(everywhere))
        missed += int(np.sum(prox_batch(w, T, op.V, sd.C, sd.amap, starts=d0).value - best.value > 1e-9))
        extra = landscape_starts(w, hstar, T, op.V, sd.C, sd.amap)
        assert extra.shape == (w.shape[0], 2 + 4, 2, 1)
        ds = sd.data_step(op)  # (its full start set: the default starts and these)
        assert np.all(ds.prox.value - best.value <= 1e-9)
    assert missed >= 1  # (8 when measured: 4 nodes at t = 0 and at 1e-3)


def test_data_steps_hold_blas_at_one_thread_and_restore_it(monkeypatch):
    """The theory's hot paths run with numpy's BLAS at one thread (its spinning workers halved
    the speed of the numba kernels that followed a threaded dot product: attnphase.theory.threads)
    and leave the caller's setting as it was."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import attnphase.theory.saddle as saddle_mod
    from attnphase.theory.branches import start_point

    def blas_threads() -> list[int]:
        return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]

    seen = []
    real = saddle_mod.prox_batch

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(saddle_mod, "prox_batch", spy)
    linear_test_error(ModelSpec(L=2), order=4)  # (the libraries seen so far)
    import scipy.linalg  # noqa: F401 - (a BLAS loaded after that is limited too)

    spec = ModelSpec(omega=0.3)
    sd = Saddle(spec, 1.0, sobol_gaussian(4, 6, 2, seed=0))
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        sd.data_step(start_point(spec, "semantic", 1))
        assert blas_threads() == before == [2] * len(before)
    assert seen and all(n == 1 for n in seen[0])
    for f in (Saddle.test_error, linear_test_error):
        assert getattr(f, "__wrapped__", None) is not None, f


@pytest.mark.parametrize("kw", [{}, {"rank": 2}, {"L": 3}, {"variant": "untied"}, {"token_corr": 0.3}])
def test_compiled_stein_sums_equal_the_numpy_form(kw):
    """The data step's node sums by one numba pass equal the numpy form, at a point where nodes
    have second minima and the soft split (several widths, and none) is active."""
    from attnphase.theory.branches import start_point
    from attnphase.theory.saddle import mirror_pairs, second_minimum, stein_sums

    spec = ModelSpec(omega=0.3, **kw)
    F = 2 * spec.rank if spec.variant == "untied" else spec.rank
    sd = Saddle(spec, 1.0, sobol_gaussian(spec.L * (F + 1), 9, spec.L * F, seed=1))
    op = sd.from_paper(start_point(spec, "semantic", F))
    ds = sd.data_step(op, switch_width=1e-5)
    second, M2 = second_minimum(ds.prox)
    h1, h2 = sd.unmix(ds.prox.h), sd.unmix(second)
    Vinv = np.linalg.inv(op.V)
    if not kw:  # (nodes with a second minimum near enough to be split at the widths below)
        assert np.sum(M2 - ds.prox.value < 1.0) > 0
    # the mirror pairing (Saddle.mirror_nodes) at the same nodes and minima, with m != 0 so that
    # both parts of the mirror map are active; its reference: the node sums of the nodes and of
    # their mirrors (fields -w, minima -h), weighed 1 - s and s
    cmap = sd.mirror_map(op.replace(m=op.m + 0.05 * np.arange(1, op.m.size + 1).reshape(op.m.shape),
                                    q=op.q + 0.05 * np.eye(F), theta=0.5 * op.theta))
    # (q + 0.05 I, theta / 2: the semantic start has q singular at rank 2, R < 0 at rank 2 and untied)
    assert cmap is not None and np.any(cmap[0]) and np.any(cmap[1])
    xi2, eta2, s = mirror_pairs(sd.xi, sd.eta, *cmap)
    assert 0.01 < np.max(s) < 1
    for tau in (1e-5, 1e-2, 1.0, 0.0):
        args = (ds.w, h1, h2, ds.prox.value, M2, tau, Vinv)
        a = stein_sums(sd.rule.w, *args, sd.xi, sd.eta)
        b = stein_sums(sd.rule.w, *args, sd.xi, sd.eta, compiled=False)
        am = stein_sums(sd.rule.w, *args, sd.xi, sd.eta, mirror=cmap)
        bm = stein_sums(sd.rule.w, *args, sd.xi, sd.eta, compiled=False, mirror=cmap)
        own = stein_sums(sd.rule.w * (1 - s), *args, sd.xi, sd.eta, compiled=False)
        image = stein_sums(sd.rule.w * s, -ds.w, -h1, -h2, *args[3:], xi2, eta2, compiled=False)
        ref = [u + v for u, v in zip(own, image, strict=True)]
        scale = np.sqrt(np.max(np.abs(b[1])))  # (|g|: the m sum cancels to ~1e-14 at m = 0)
        for x, y in (*zip(a, b, strict=True), *zip(am, bm, strict=True), *zip(bm, ref, strict=True)):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12 * scale)


def test_the_map_is_smooth_where_the_samples_are_nearly_interpolated(monkeypatch):
    """Untied student, lambda = 1.3e-4, alpha = 0.57, at its trivial point (``V`` ~ 1e4, ``E[M]``
    ~5e-5): a relative 1e-8 change of ``q`` moves the map by a relative ~2e-9, with the split width
    capped at ``SWITCH_FRACTION E[M]`` or not. With Newton's steps neither following the orbit of
    the scores' symmetry (``channels.ORBIT_FROM``) nor allowed more than 60
    (``channels.NEWTON_MAX_ITER``), the minimisers stop short along the orbit, and the map moved by
    6.8e-5 with the cap and by 1.9e-3 without it (a tenth of the nodes split, their second minima
    changing identity), above the ``fast`` preset's noise floor."""
    import attnphase.theory.saddle as saddle
    from attnphase.theory import channels
    from attnphase.theory.fixed_point import SolverSettings, make_saddle

    spec = ModelSpec(omega=0.7158, sigma=1.144, lam=1.289e-4, variant="untied")
    st = SolverSettings.preset("fast")
    sd = make_saddle(spec, 0.5668, st)
    op = OrderParams(np.array([[0.1996, 0.1473], [0.1473, 0.2024]]), np.zeros((2, 2)),
                     np.array([[5038.0, 1258.0], [1258.0, 10337.0]]), np.zeros((2, 1)))
    near = op.replace(q=op.q + np.diag([0.1996e-8, 0.0]))

    def change() -> float:
        f0, f1 = (sd.weights_step(sd.data_step(o, switch_width=st.switch_width).hats).to_vector() for o in (op, near))
        return float(np.max(np.abs(f1 - f0) / np.maximum(np.abs(f0), 1e-300)))

    assert sd.data_step(op).mean_M < 1e-4
    capped = saddle.SWITCH_FRACTION
    assert change() < 1e-7
    monkeypatch.setattr(saddle, "SWITCH_FRACTION", np.inf)
    assert change() < 1e-7
    monkeypatch.setattr(channels, "ORBIT_FROM", np.inf)
    monkeypatch.setattr(channels, "NEWTON_MAX_ITER", 60)
    assert change() > 1e-3
    monkeypatch.setattr(saddle, "SWITCH_FRACTION", capped)
    assert 1e-6 < change() < 2e-4
