"""The test error (docs/model.md (4.2)) at a fixed point and the linear baseline (4.3): the rules
of the test error and its compiled and numpy sums, which :meth:`Saddle.test_error
<attnphase.theory.saddle.Saddle.test_error>` calls.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory import native
from attnphase.theory.channels import AttentionMap, loss_numpy, map_params, target_map
from attnphase.theory.matrices import f64, sym_sqrt
from attnphase.theory.mixture import Mixture, mixture_linear_test_error, mixture_test_error
from attnphase.theory.order_params import OrderParams
from attnphase.theory.quadrature import Rule, check_size, gauss_hermite, key_contrasts, sobol_gaussian
from attnphase.theory.threads import one_blas_thread

#: log2 of the base sample of the test error's Sobol rule above 6 dimensions (``4 * 2^16`` nodes;
#: at the semantic start of ``L = 3, r = 2``, untied ``r = 2`` and ``L = 4`` within 3e-4 relative
#: of ``4 * 2^18`` nodes, 0.05-0.07 s in the compiled sum); in the numpy sum (untied
#: cross-attention, and tied cross-attention in its reduced noises) ``4 * 2^14`` nodes (0.07 s at
#: ``L = L' = 2``; at the semantic and positional starts within 2e-4 relative of ``4 * 2^16``
#: nodes over four scrambles)
TEST_QMC_LOG2 = 16


TEST_QMC_LOG2_NUMPY = 14


@one_blas_thread
def linear_test_error(spec: ModelSpec, order: int = 24) -> float:
    """Linear positional baseline ``eps_g_lin = 1/2 E tr((T - ET) C (T - ET)^T)`` (docs/model.md (4.3)).

    ``B = E[T]`` is the population least-squares mixing; ``T`` depends only on the teacher
    fields ``h* ~ N(0, sigma^2 I)`` (``L * r*`` dimensions).
    """
    mixture = Mixture.from_spec(spec)
    if mixture is not None:  # docs/model.md (9.5)
        return mixture_linear_test_error(spec, mixture, order)
    L = spec.tokens
    dim = L * spec.teacher_rank
    if dim <= 6:
        rule = gauss_hermite(dim, order if dim <= 4 else 10)
    else:
        from attnphase.theory.quadrature import sobol_gaussian

        rule = sobol_gaussian(dim, 16, 0, seed=0)
    # teacher fields h*_l ~ N(0, C_lk I) across positions (C = sigma^2 I: i.i.d.)
    hstar = np.einsum("lk,nka->nla", sym_sqrt(spec.C_array), rule.x.reshape(rule.size, L, spec.teacher_rank))
    T = target_map(hstar, spec)
    ET = np.einsum("n,nlk->lk", rule.w, T)
    D = T - ET[None]
    C = spec.C_array
    return float(rule.w @ (0.5 * np.einsum("nlj,jk,nlk->n", D, C, D)))


class SaddleView(Protocol):
    """What the test error reads of :class:`~attnphase.theory.saddle.Saddle` (this module sits
    below it: the saddle's methods call these functions)."""

    spec: ModelSpec
    amap: AttentionMap
    mixture: Mixture | None
    L: int
    F: int
    rs: int
    gain: float
    C: np.ndarray
    mix: np.ndarray | None

    @property
    def dim(self) -> int: ...

    def field_maps(self, op: OrderParams) -> tuple[np.ndarray, ...]: ...

    def fields(self, op: OrderParams, xi: np.ndarray | None = None, eta: np.ndarray | None = None): ...

    def target(self, hstar: np.ndarray) -> np.ndarray: ...

    def test_rule(self, log2_n: int = ...) -> Rule | None: ...

    def test_error(self, op: OrderParams, order: int = 10, log2_n: int | None = None) -> float: ...

    def test_error_numpy(self, op: OrderParams, order: int = 10, log2_n: int = ...) -> float: ...


def build_test_rule(sd: SaddleView, log2_n: int) -> Rule | None:
    """The rule :meth:`Saddle.test_rule` returns, built anew."""
    if sd.dim <= 6:
        return None
    n_xi = sd.L * sd.F
    if sd.spec.variant == "cross":
        basis = key_contrasts(sd.L, sd.spec.L_keys, sd.F, sd.rs)
        return sobol_gaussian(sd.dim, log2_n, n_xi, copies="none", basis=basis)
    return sobol_gaussian(sd.dim, log2_n, n_xi)


def error_sum(sd: SaddleView, op: OrderParams, order: int = 10, log2_n: int | None = None) -> float:
    """``eps_g = E[ell(w; T(h*))]`` (docs/model.md (4.2)) with a product Gauss-Hermite rule
    (more than 6 dimensions: :meth:`Saddle.test_rule`, of ``4 * 2^log2_n`` nodes if given).

    The integrand is smooth, so a modest order is exact to ~1e-8 (see the quadrature test).
    A ``gain`` value (docs/model.md (6.5)) and cross-attention (docs/model.md (10.3)) take the
    numpy form :func:`error_sum_numpy` (the compiled sum knows neither the gain nor the cross
    mask of the teacher).
    """
    qs, qis, _, _, Rs = sd.field_maps(op)
    if sd.mixture is not None:  # docs/model.md (9.5) (identity value only: Mixture.from_spec)
        return mixture_test_error(sd.spec, sd.amap, sd.mixture, op.m, qs, qis @ op.theta, Rs, order)
    if sd.gain != 1.0 or sd.spec.is_cross:
        return sd.test_error_numpy(op, order, TEST_QMC_LOG2_NUMPY if log2_n is None else log2_n)
    args = (f64(op.m), f64(qs), f64(qis @ op.theta), f64(Rs),
            f64(np.eye(sd.L) if sd.mix is None else sd.mix), f64(sd.amap.M),
            np.ascontiguousarray(sd.amap.mask), float(sd.spec.omega), f64(sd.spec.A_array),
            bool(sd.spec.causal_target), f64(sd.C))
    if sd.dim <= 6:  # (the product rule's nodes are decoded in the kernel, not stored)
        check_size(order**sd.dim, f"a Gauss-Hermite rule of order {order} in {sd.dim} dimensions")
        t, wt = np.polynomial.hermite_e.hermegauss(order)
        X, W, n = np.empty((0, sd.dim)), np.empty(0), order**sd.dim
    else:
        rule = sd.test_rule(TEST_QMC_LOG2 if log2_n is None else log2_n)
        assert rule is not None
        t, wt = np.zeros(1), np.ones(1)
        X, W, n = f64(rule.x), f64(rule.w), rule.size
    wt = wt / wt.sum()
    n_chunks = native.chunks(n)
    amap = sd.amap
    heads = amap.heads > 1 and amap.activation == "softmax"  # (softmax heads: the C sum takes their forms and gains)
    lib = native.common() if (amap.standard or heads) and sd.spec.teacher_activation == "softmax" else None
    if lib is None:  # (other maps: docs/model.md (11.3))
        from attnphase.theory.jit import test_loss_sum_kernel  # noqa: PLC0415  (numba loads only where the C kernels cannot run)

        tmaps = map_params(sd.spec.teacher_activation, sd.L)
        return float(test_loss_sum_kernel(X, W, t, wt, *args, n_chunks, *sd.amap.kernel_maps(), tmaps))
    m, qs_, B, Rs_, mix, M, mask, omega, A, causal, C = args
    mask = np.ascontiguousarray(mask, dtype=np.uint8)
    forms, gains, _ = amap.kernel_maps()
    P = native.ptr
    return float(lib.test_loss_sum(X.shape[0], P(X), P(W), t.size, P(t), P(wt), sd.L, sd.F, sd.rs, P(m),
                                   P(qs_), P(B), P(Rs_), P(mix), P(M), P(mask), omega, P(A), int(causal), P(C),
                                   n_chunks, native.threads_for(n, 1024), amap.heads if heads else 0, P(forms),
                                   P(gains)))


def error_sum_numpy(sd: SaddleView, op: OrderParams, order: int = 10, log2_n: int = TEST_QMC_LOG2_NUMPY) -> float:
    """The same sum as :func:`error_sum` with the nodes stored and the fields, maps and loss
    in numpy (``fields``, ``target_map``, ``loss_numpy``): the reference the kernel is tested
    and benchmarked against (the Sobol rule above 6 dimensions: ``4 * 2^log2_n`` nodes,
    :meth:`Saddle.test_rule`)."""
    if sd.mixture is not None:
        return sd.test_error(op, order)
    rule = sd.test_rule(log2_n) or gauss_hermite(sd.dim, order)
    n_xi = sd.L * sd.F
    xi = rule.x[:, :n_xi].reshape(rule.size, sd.L, sd.F)
    eta = rule.x[:, n_xi:].reshape(rule.size, sd.L, sd.rs)
    w, hstar, *_ = sd.fields(op, xi, eta)
    return float(rule.w @ loss_numpy(w, sd.target(hstar), sd.C, sd.amap))
