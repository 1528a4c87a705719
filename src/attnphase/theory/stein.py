"""The sums over the nodes of the integration rule in the data step (docs/model.md (3.4)): the Stein
sums of the conjugates with their mirror pairs, and the second minimum of the proximal problem at
each node.
"""

from __future__ import annotations

import numpy as np

from attnphase.theory import native
from attnphase.theory.channels import (
    ProxResult,
)
from attnphase.theory.matrices import (
    f64,
)


def mirror_pairs(xi: np.ndarray, eta: np.ndarray, cm: np.ndarray,
                 B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mirror noises ``xi' = -xi - 2 cm``, ``eta' = eta + 2 (xi + cm) B`` of the nodes
    ``(xi, eta)`` (N x L x F, N x L x r*) and the mirror's share ``s = r / (1 + r)``,
    ``r = phi(xi', eta') / phi(xi, eta)`` (:meth:`Saddle.mirror_map` gives ``cm``, ``B``)."""
    xi2 = -xi - 2.0 * cm[None]
    eta2 = eta + 2.0 * ((xi + cm[None]) @ B)
    # log r = (|z|^2 - |z'|^2) / 2, the share expit(log r)
    lr = 0.5 * (np.einsum("nla,nla->n", xi, xi) + np.einsum("nla,nla->n", eta, eta)
                - np.einsum("nla,nla->n", xi2, xi2) - np.einsum("nla,nla->n", eta2, eta2))
    return xi2, eta2, 0.5 * (1.0 + np.tanh(0.5 * lr))


def stein_sums(wt: np.ndarray, w: np.ndarray, h1: np.ndarray, h2: np.ndarray, M1: np.ndarray, M2: np.ndarray,
               tau: float, Vinv: np.ndarray, xi: np.ndarray, eta: np.ndarray, compiled: bool = True,
               mirror: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The node sums of the Stein forms of docs/model.md (3.3) (before the factor ``alpha`` and the
    maps ``R^{-1/2}``, ``q^{-1/2}``): with ``g_k = (h_k - w) V^{-1}`` at the global and second
    minimum and the split ``p = expit((M2 - M1) / tau)`` (``p = 1`` for ``tau = 0``), returns
    ``sum_n wt_n E_p[g]`` (L x F), ``sum_n wt_n sum_l E_p[g_l g_l^T]`` (F x F),
    ``sum_n wt_n sum_l E_p[g_l eta_l^T]`` (F x r*) and ``sum_n wt_n sum_l E_p[g_l xi_l^T]`` (F x F),
    ``E_p[f] = p f(g1) + (1 - p) f(g2)``. ``compiled``: one numba pass over the nodes
    (``jit_stein.stein_sums_kernel`` or its C twin, :mod:`attnphase.theory.native`; parallel, fixed chunks); otherwise numpy (the reference it is tested
    against; 2x the time of the whole warm-started data step at 65536 nodes, rank 2).
    ``mirror = (cm, B)`` (:meth:`Saddle.mirror_map`): every node is paired with its mirror
    (:func:`mirror_pairs`), whose minima are ``-h_k`` and whose ``g`` is ``-g``: each sum is
    ``sum_n wt_n ((1 - s_n) f(node) + s_n f(mirror))``."""
    N = w.shape[0]
    if compiled:
        L, F = w.shape[1:]
        R = eta.shape[2]
        C = native.chunks(N)
        out_m, out_q = np.zeros((C, L, F)), np.zeros((C, F, F))
        out_th, out_v = np.zeros((C, F, R)), np.zeros((C, F, F))
        cm, B = (np.zeros((L, F)), np.zeros((F, R))) if mirror is None else mirror
        args = [f64(a) for a in (wt, w, h1, h2, M1, M2)] + [float(tau), f64(Vinv), f64(xi), f64(eta),
                                                            mirror is not None, f64(cm), f64(B)]
        lib = native.common()
        if lib is None:
            from attnphase.theory.jit_stein import stein_sums_kernel  # noqa: PLC0415  (numba loads only where the C kernels cannot run)

            stein_sums_kernel(*args, out_m, out_q, out_th, out_v)  # type: ignore[call-arg]  # (a list unpacked into typed parameters)
        else:
            lib.stein_sums(N, L, F, R, *(native.ptr(a) if isinstance(a, np.ndarray) else a for a in args),
                           *(native.ptr(a) for a in (out_m, out_q, out_th, out_v)), C, native.threads_for(N, 4096))
        return out_m.sum(axis=0), out_q.sum(axis=0), out_th.sum(axis=0), out_v.sum(axis=0)
    if tau > 0:
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-(M2 - M1) / tau))
    else:
        p = np.ones(N)
    fm = np.ones(N)
    if mirror is not None:  # (the noises each g multiplies: the node's and its mirror's, g -> -g there)
        xi2, eta2, s = mirror_pairs(xi, eta, *mirror)
        fm = 1.0 - 2.0 * s
        xi = (1.0 - s)[:, None, None] * xi - s[:, None, None] * xi2
        eta = (1.0 - s)[:, None, None] * eta - s[:, None, None] * eta2
    g1 = (h1 - w) @ Vinv
    g2 = (h2 - w) @ Vinv
    wt1 = wt * p
    wt2 = wt * (1.0 - p)
    split = np.flatnonzero(wt2 > 0)  # the few nodes within ~tau of a switch

    def E(spec: str, *arrs: np.ndarray, f: np.ndarray | None = None) -> np.ndarray:
        u1, u2 = (wt1, wt2) if f is None else (wt1 * f, wt2 * f)
        first = np.einsum(spec, u1, g1, *arrs)
        if split.size == 0:
            return first
        return first + np.einsum(spec, u2[split], g2[split], *(x[split] for x in arrs))

    q = np.einsum("n,nla,nlb->ab", wt1, g1, g1)
    if split.size:
        q = q + np.einsum("n,nla,nlb->ab", wt2[split], g2[split], g2[split])
    return E("n,nla->la", f=fm), q, E("n,nla,nlb->ab", eta), E("n,nla,nlb->ab", xi)


def second_minimum(prox: ProxResult, distinct: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """The lowest local minimum distinct from the global one at each node (``h``, value).

    Nodes with a single minimum get the global one back (value ``+inf``).
    """
    N, S = prox.candidate_values.shape
    n = prox.h[0].size
    h2 = np.empty((N, n))
    v2 = np.empty(N)
    best = np.ascontiguousarray(prox.h, dtype=np.float64).reshape(N, n)
    cand = np.ascontiguousarray(prox.candidates, dtype=np.float64).reshape(N, S, n)
    vals = np.ascontiguousarray(prox.candidate_values, dtype=np.float64)
    lib = native.common()
    if lib is None:
        from attnphase.theory.jit_stein import second_minimum_kernel  # noqa: PLC0415  (numba loads only where the C kernels cannot run)

        second_minimum_kernel(best, cand, vals, float(distinct), h2, v2)
    else:
        lib.second_minimum_kernel(N, S, n, *(native.ptr(a) for a in (best, cand, vals)), float(distinct),
                                  native.ptr(h2), native.ptr(v2), native.threads_for(N, 16384))
    h2 = h2.reshape(prox.h.shape)
    return h2, v2
