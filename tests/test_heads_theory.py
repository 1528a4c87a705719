"""The theory of several heads and other attention maps (docs/model.md section 11): the generic
kernels' loss, gradient and Hessian against finite differences and the numpy references, the one
head softmax unchanged, the identity of two equal heads, the branches of two heads and what the
theory still refuses."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import (
    AttentionMap,
    check_attention_covered,
    loss_hessian_batch,
    loss_numpy,
    objective_batch,
    prox_batch,
    student_map,
    target_map,
)

MAPS = ("softmax", "sigmoid", "relu", "linear")


def _amap(heads: int, act: str, L: int = 2, variant: str = "tied") -> AttentionMap:
    return AttentionMap.from_spec(ModelSpec(L=L, heads=heads, activation=act, variant=variant))


def _node(rng: np.random.Generator, N: int, L: int, F: int) -> tuple[np.ndarray, np.ndarray]:
    """Fields away from ReLU's kink and a row-stochastic target."""
    h = rng.normal(size=(N, L, F))
    T = rng.dirichlet(np.ones(L), size=(N, L))
    return h, T


@pytest.mark.parametrize("act", MAPS)
@pytest.mark.parametrize("heads", [1, 2])
def test_gradient_and_hessian_match_finite_differences(heads: int, act: str) -> None:
    """The kernels' gradient of the proximal objective and Hessian of the loss (docs/model.md
    (11.3)) are the central differences of the kernels' own objective and gradient, and the
    loss is :func:`loss_numpy`'s."""
    rng = np.random.default_rng(3)
    L = 3
    amap = _amap(heads, act, L=L)
    F = amap.field_dim
    N = 4
    h, T = _node(rng, N, L, F)
    C = 0.25 * np.eye(L)
    V = np.eye(F) * 1e12  # (the loss alone: the prior's curvature is negligible)
    w = h.copy()
    val, grad = objective_batch(h, w, T, V, C, amap)
    np.testing.assert_allclose(val, loss_numpy(h, T, C, amap), rtol=1e-12, atol=1e-14)
    H = loss_hessian_batch(h, T, C, amap)
    eps = 1e-6
    n = L * F
    for i in range(n):
        dh = np.zeros(n)
        dh[i] = eps
        hp, hm = h + dh.reshape(L, F), h - dh.reshape(L, F)
        vp, gp = objective_batch(hp, w, T, V, C, amap)
        vm, gm = objective_batch(hm, w, T, V, C, amap)
        np.testing.assert_allclose(grad[:, i], (vp - vm) / (2 * eps), rtol=1e-6, atol=1e-8)
        if act == "relu":  # (off the kink: the finite difference of the gradient)
            continue
        np.testing.assert_allclose(H[:, :, i], (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)
    if act == "relu":
        # piecewise quadratic in the scores: the Gauss-Newton part plus the score curvature,
        # checked at fields whose scores stay on one side of the kink under the step
        hp = h + 1e-7
        _, gp = objective_batch(hp, w, T, V, C, amap)
        _, g0 = objective_batch(h, w, T, V, C, amap)
        np.testing.assert_allclose(np.einsum("nij,j->ni", H, np.full(n, 1e-7)), gp - g0, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(H, np.swapaxes(H, 1, 2), atol=1e-14)


def test_one_head_softmax_on_the_generic_path_of_heads() -> None:
    """One softmax head of gain 1 is the map of docs/model.md (1.3): the kernels' path of several
    heads (map code 0) gives the loss, gradient and Hessian of the reference path (code -1) to
    rounding, and the reference path is the one a one-head student takes."""
    from attnphase.theory import jit

    rng = np.random.default_rng(0)
    amap = _amap(1, "softmax", L=3)
    assert amap.standard and amap.kernel_maps()[2][0] == -1.0
    h, T = _node(rng, 16, 3, 1)
    C = 0.25 * np.eye(3)
    w = rng.normal(size=h.shape)
    Winv = np.eye(3) / 2.0
    forms, gains, maps = amap.kernel_maps()
    out = {}
    for code in (-1.0, 0.0):
        m = maps.copy()
        m[0] = code
        val, grad, hess = np.empty(16), np.empty((16, 3)), np.empty((16, 3, 3))
        jit.node_kernel(h, w, Winv, T, C, amap.M, amap.mask, False, val, grad, np.empty((16, 1, 1)), forms, gains, m)
        jit.node_kernel(h, h, 0.0 * Winv, T, C, amap.M, amap.mask, True, np.empty(16), np.empty((16, 3)), hess,
                        forms, gains, m)
        out[code] = (val, grad, hess)
    for x, y in zip(out[-1.0], out[0.0], strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("act", MAPS)
def test_two_equal_heads_are_one_head(act: str) -> None:
    """Two heads of gain 1/2 with the same fields give the one-head map at those fields
    (docs/model.md (11.1)): ``S = (phi(s) + phi(s)) / 2``."""
    rng = np.random.default_rng(1)
    h1 = rng.normal(size=(8, 3, 1))
    two = student_map(np.concatenate([h1, h1], axis=2), _amap(2, act, L=3))
    one = student_map(h1, _amap(1, act, L=3))
    np.testing.assert_allclose(two, one, rtol=1e-13, atol=1e-15)


def test_element_wise_maps_follow_the_registry() -> None:
    """The maps of docs/model.md (11.2) at one row of scores."""
    s = np.array([[[0.3, -1.2], [2.0, 0.0]]])
    L = 2
    for act, f in (("sigmoid", lambda x: 1 / (1 + np.exp(np.log(L) - x))), ("relu", lambda x: np.maximum(x, 0) / L),
                   ("linear", lambda x: x / L)):
        amap = _amap(1, act)
        h = np.array([[[0.7], [-0.4]]])
        sc = h[0] @ h[0].T
        np.testing.assert_allclose(student_map(h, amap)[0], f(sc), rtol=1e-14)
    spec = ModelSpec(teacher_activation="linear", omega=0.3)
    hs = s[:, :, :1]
    T = target_map(hs, spec)
    np.testing.assert_allclose(T[0], 0.7 * (hs[0] @ hs[0].T) / L + 0.3 * spec.A_array, rtol=1e-14)


def test_bad_input_names_what_stays_uncovered() -> None:
    """What the theory does not cover is one line naming the simulator."""
    with pytest.raises(ValueError, match="heads <= 2, got heads = 3.*simulate"):
        check_attention_covered(ModelSpec(heads=3))
    with pytest.raises(ValueError, match="head_gains = fixed.*simulate"):
        check_attention_covered(ModelSpec(heads=2, head_gains="trained"))
    with pytest.raises(ValueError, match="softmax on cross-attention"):
        check_attention_covered(ModelSpec(variant="cross", L=4, L_keys=2, activation="relu"))
    check_attention_covered(ModelSpec(heads=2, activation="sigmoid", teacher_activation="relu"))
    from attnphase.theory.responses import check_response
    from attnphase.theory.stability import check_stability

    with pytest.raises(ValueError, match="one head"):
        check_response(ModelSpec(heads=2), "semantic-start")
    with pytest.raises(ValueError, match="one head"):
        check_stability(ModelSpec(heads=2))


@pytest.mark.parametrize(("heads", "act"), [(1, "relu"), (2, "relu"), pytest.param(2, "softmax", marks=pytest.mark.slow),
                                           pytest.param(2, "sigmoid", marks=pytest.mark.slow)])
def test_default_starts_reach_the_grid_minimum(heads: int, act: str) -> None:
    """The multi-start set of docs/model.md (7.2) finds the global proximal minimum of several
    heads and of the ReLU map, whose kink makes the loss piecewise smooth (docs/model.md (11.3)):
    no start of a grid over the ball around ``w`` ends lower."""
    from attnphase.theory.channels import default_starts

    rng = np.random.default_rng(7)
    spec = ModelSpec(heads=heads, activation=act, omega=0.3)
    amap = AttentionMap.from_spec(spec)
    L, F, N = 2, amap.field_dim, 12
    w = rng.normal(scale=0.8, size=(N, L, F))
    T = target_map(rng.normal(scale=0.5, size=(N, L, 1)), spec)
    V = 3.0 * np.eye(F)
    C = 0.25 * np.eye(L)
    best = prox_batch(w, T, V, C, amap, starts=default_starts(w, V))
    axis = np.linspace(-3.0, 3.0, 5 if F == 2 else 25)
    grid = np.stack(np.meshgrid(*([axis] * (L * F)), indexing="ij"), axis=-1).reshape(-1, L, F)
    brute = prox_batch(w, T, V, C, amap, starts=np.ascontiguousarray(w[:, None] + grid[None]))
    assert np.all(best.value <= brute.value + 1e-9)
    assert np.max(best.grad_norm) < 1e-6


def test_two_heads_are_rugged_by_their_gains_and_the_default_starts_suffice() -> None:
    """The ruggedness scale of several heads is ``c V |g|^2`` (docs/model.md (7.2)): at the fixed
    point with both heads semantic (``alpha = 2``, ``omega = 0.3``, preset fast) ``c V`` is above
    ``RUGGED`` and ``c V |g|^2`` below, so the full start set is the default one; no start of a
    9^4 grid over the ball around ``w`` (radius 2.5 ``V^{1/2}``) ends lower at any node of 64."""
    from attnphase.theory import SolverSettings
    from attnphase.theory.branches import solve_point
    from attnphase.theory.channels import RUGGED, loss_to_prior, rugged
    from attnphase.theory.fixed_point import make_saddle

    spec = ModelSpec(heads=2, omega=0.3)
    st = SolverSettings.preset("fast")
    p = solve_point(spec, 2.0, "semantic", st, error_estimate=False)
    assert p.exists, p.reason
    sd = make_saddle(spec, 2.0, st)
    op = p.order_params
    scale = loss_to_prior(op.V, sd.C)
    assert scale > RUGGED > 0.5 * scale
    assert rugged(op.V, sd.C) and not rugged(op.V, sd.C, gains=sd.amap.gains)
    w, hstar, *_ = sd.fields(op)
    w, hstar = w[:64], hstar[:64]
    T = sd.target(hstar)
    starts = sd.full_starts(w, hstar, T, op.V)
    assert starts.shape[1] == 3 + 2 * 4  # (w, -w, 0 and the offsets of four field coordinates)
    best = prox_batch(w, T, op.V, sd.C, sd.amap, starts=starts)
    axis = np.linspace(-2.5, 2.5, 9) * np.sqrt(np.linalg.eigvalsh(op.V).max())
    grid = np.stack(np.meshgrid(*([axis] * 4), indexing="ij"), axis=-1).reshape(-1, 2, 2)
    brute = prox_batch(w, T, op.V, sd.C, sd.amap, starts=np.ascontiguousarray(w[:, None] + grid[None]))
    assert np.all(best.value <= brute.value + 1e-9)


def test_classification_names_the_specialised_branch() -> None:
    """Two heads: a fixed point with ``theta`` and ``m`` is ``specialised`` (docs/model.md (11.3)),
    where rank 2 calls it ``mixed``; the branches of two heads include it."""
    from attnphase.theory.branch_point import branches_for, start_point
    from attnphase.theory.classification import SPECIALISED, classify, combined_branch

    spec = ModelSpec(heads=2, omega=0.3)
    assert branches_for(spec) == ("semantic", "positional", "trivial", SPECIALISED)
    from attnphase.theory.branch_point import semantic_side

    assert semantic_side(spec) == SPECIALISED and semantic_side(ModelSpec(rank=2)) == "mixed"
    assert semantic_side(ModelSpec()) == "semantic"
    assert combined_branch(ModelSpec(rank=2)) == "mixed" and combined_branch(ModelSpec()) is None
    op = start_point(spec, SPECIALISED, 2)
    assert op.theta[0, 0] > 0 and op.theta[1, 0] == 0 and np.all(op.m[:, 0] == 0) and np.any(op.m[:, 1] != 0)
    assert classify(op, spec.sigma, combined_branch(spec)) == SPECIALISED
    assert classify(op, spec.sigma, True) == "mixed"
    assert classify(start_point(spec, "semantic", 2), spec.sigma, SPECIALISED) == "semantic"
    assert not AttentionMap.from_spec(spec).rotation_invariant


@pytest.mark.slow  # (compiling the test-error kernel of the maps: ~12 s on a fresh clone)
@pytest.mark.parametrize(("heads", "act", "teacher"), [(2, "relu", "sigmoid"), (1, "linear", "relu"),
                                                      (2, "softmax", "softmax")])
def test_test_error_sum_matches_numpy(heads: int, act: str, teacher: str) -> None:
    """The compiled test-error sum (docs/model.md (4.2)) of several heads and other maps equals its
    numpy reference on the same product rule (docs/model.md (11.3))."""
    from attnphase.theory import SolverSettings
    from attnphase.theory.branch_point import start_point
    from attnphase.theory.fixed_point import make_saddle

    spec = ModelSpec(heads=heads, activation=act, teacher_activation=teacher, omega=0.3)
    sd = make_saddle(spec, 1.0, SolverSettings(order=6, refine_order=0))
    op = sd.from_paper(start_point(spec, "specialised" if heads == 2 else "semantic", sd.F))
    fast = sd.test_error(op, order=4)
    ref = sd.test_error_numpy(op, order=4)
    assert fast == pytest.approx(ref, rel=1e-11)
    assert fast > 0.0


@pytest.mark.slow
def test_two_heads_solve_finds_the_specialised_branch() -> None:
    """At ``alpha = 2``, ``omega = 0.3`` the specialised start of two heads converges to a fixed
    point with the teacher's overlap on head 1 and the positional one on head 2 (docs/model.md
    (11.3)), classified ``specialised``; its summary overlaps are the norms over the heads."""
    from attnphase.theory import SolverSettings
    from attnphase.theory.branches import solve_point

    spec = ModelSpec(heads=2, omega=0.3)
    settings = SolverSettings(order=6, refine_order=0, warmup_order=None)
    p = solve_point(spec, 2.0, "specialised", settings, error_estimate=False, ramp=False)
    assert p.exists, p.reason
    theta, m = np.abs(np.array(p.theta_matrix)[:, 0]), np.abs(np.array(p.m_matrix))
    assert theta[0] > 5 * theta[1] and m[0, 1] > 5 * m[0, 0]
    assert p.theta == pytest.approx(np.linalg.norm(np.array(p.theta_matrix)))
    assert p.m == pytest.approx(np.linalg.norm(m[0]))
