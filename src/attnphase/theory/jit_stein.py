"""The generic numba kernels of a data step's sums (docs/model.md (3.3)): the second minimum of
every node and the weighted Stein sums. :mod:`attnphase.theory.native` runs their C twins where a
C compiler works; :mod:`attnphase.theory.stein` calls these otherwise.
"""
# ruff: noqa: E501

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, parallel=True)
def second_minimum_kernel(best, cand, vals, distinct, out_h, out_v):  # pragma: no cover - jitted
    """The lowest candidate minimum farther than ``distinct`` (max-norm) from the global one at
    every node (``out_v = inf`` where there is none): the second minimum of docs/model.md (3.3)."""
    N, S, n = cand.shape
    for i in nb.prange(N):
        jbest = -1
        vbest = np.inf
        for s in range(S):
            d = 0.0
            for k in range(n):
                d = max(d, abs(cand[i, s, k] - best[i, k]))
            if d >= distinct and vals[i, s] < vbest:
                vbest = vals[i, s]
                jbest = s
        if jbest < 0:
            for k in range(n):
                out_h[i, k] = best[i, k]
            out_v[i] = np.inf
        else:
            for k in range(n):
                out_h[i, k] = cand[i, jbest, k]
            out_v[i] = vbest


@nb.njit(cache=True, parallel=True)
def stein_sums_kernel(wt, w, h1, h2, M1, M2, tau, Vinv, xi, eta, mirror, cm, B,
                out_m, out_q, out_th, out_v):  # pragma: no cover - jitted
    """The weighted sums of the Stein forms (docs/model.md (3.3)) over the nodes, one partial sum per
    chunk (``out_*[c]``, summed by the caller in chunk order: the result does not depend on the
    threads' timing). ``g_k = (h_k - w) V^{-1}`` at the global (``k = 1``) and second (``k = 2``)
    minimum, the node split ``p = expit((M2 - M1) / tau)`` between them (``p = 1`` for ``tau = 0``
    or no second minimum, ``M2 = inf``): ``out_m = sum wt (p g1 + (1-p) g2)`` (L x F),
    ``out_q = sum_l wt (p g1 g1^T + (1-p) g2 g2^T)``, ``out_th`` the same with ``eta_l^T``, ``out_v``
    with ``xi_l^T``. Fuses what the numpy form (:func:`attnphase.theory.saddle.stein_sums` with ``compiled=False``) does in
    eight passes over the nodes.

    ``mirror``: each node is paired with its mirror (:meth:`Saddle.mirror_nodes`), whose noises
    ``xi' = -xi - 2 cm``, ``eta' = eta + 2 (xi + cm) B`` and share ``s = expit(log r)``,
    ``log r = (|xi|^2 + |eta|^2 - |xi'|^2 - |eta'|^2) / 2``, are computed here; its ``g`` is
    ``-g``, so the node adds ``(1 - 2 s) g`` to ``out_m``, ``g g^T`` to ``out_q`` and
    ``g ((1 - s) xi - s xi')^T``, ``g ((1 - s) eta - s eta')^T`` to ``out_v``, ``out_th``."""
    N, L, F = w.shape
    R = eta.shape[2]
    n_chunks = out_m.shape[0]
    size = (N + n_chunks - 1) // n_chunks
    for c in nb.prange(n_chunks):
        G = np.empty((2, F))  # (g at the global minimum, g at the second)
        X = np.empty((L, F))  # (the noises the node's g multiplies: its own, or with the mirror's)
        E = np.empty((L, R))
        X2 = np.empty((L, F))  # (the mirror's noises)
        E2 = np.empty((L, R))
        for i in range(c * size, min(N, (c + 1) * size)):
            p = 1.0
            if tau > 0.0:
                p = 1.0 / (1.0 + np.exp(-(M2[i] - M1[i]) / tau))
            fm = 1.0
            if mirror:
                lr = 0.0  # (twice log r)
                for l in range(L):
                    for b in range(F):
                        X2[l, b] = -xi[i, l, b] - 2.0 * cm[l, b]
                        lr += xi[i, l, b] * xi[i, l, b] - X2[l, b] * X2[l, b]
                    for b in range(R):
                        e2 = eta[i, l, b]
                        for k in range(F):
                            e2 += 2.0 * (xi[i, l, k] + cm[l, k]) * B[k, b]
                        E2[l, b] = e2
                        lr += eta[i, l, b] * eta[i, l, b] - e2 * e2
                s = 0.5 * (1.0 + np.tanh(0.25 * lr))  # (expit(lr / 2))
                fm = 1.0 - 2.0 * s
                for l in range(L):
                    for b in range(F):
                        X[l, b] = (1.0 - s) * xi[i, l, b] - s * X2[l, b]
                    for b in range(R):
                        E[l, b] = (1.0 - s) * eta[i, l, b] - s * E2[l, b]
            else:
                for l in range(L):
                    for b in range(F):
                        X[l, b] = xi[i, l, b]
                    for b in range(R):
                        E[l, b] = eta[i, l, b]
            a1 = wt[i] * p
            a2 = wt[i] * (1.0 - p)
            nk = 2 if a2 > 0.0 else 1
            for l in range(L):
                for b in range(F):
                    s1 = 0.0
                    s2 = 0.0
                    for k in range(F):
                        s1 += (h1[i, l, k] - w[i, l, k]) * Vinv[k, b]
                        s2 += (h2[i, l, k] - w[i, l, k]) * Vinv[k, b]
                    G[0, b] = s1
                    G[1, b] = s2
                for k in range(nk):
                    cw = a1 if k == 0 else a2
                    for a in range(F):
                        u = cw * G[k, a]
                        out_m[c, l, a] += fm * u
                        for b in range(F):
                            out_q[c, a, b] += u * G[k, b]
                            out_v[c, a, b] += u * X[l, b]
                        for b in range(R):
                            out_th[c, a, b] += u * E[l, b]
