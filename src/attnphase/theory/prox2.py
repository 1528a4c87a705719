"""The proximal solver of :mod:`attnphase.theory.channels` written out for two tokens and one
field per token (``L = 2``, ``F = 1``: THEORY.md 2.1, the reference case and every ``omega`` of the
paper's curves and phase diagrams).

The same damped Newton iteration, start set, acceptance tests and snapping to known minima as
:func:`attnphase.theory.channels._newton`, with the loss, gradient and 2 x 2 Hessian in closed form
on scalars instead of loops over ``L`` and ``F`` (the generic kernel spends ~0.5 us on one
loss-gradient-Hessian evaluation of this size; this one a fraction of it; ``benchmarks/bench_theory.py``).

With one field per token the two rows of ``S = softmax(mu h h^T)`` are two logistic functions:
``S_l1 = p_l = expit(v_l)``, ``v_l = s_l1 - s_l2 = mu h_l (h_1 - h_2)``, ``S_l2 = 1 - p_l`` (masks
other than the full one are left to the generic kernel). With ``D_l = S_l - T_l`` and ``e_l = D_l C``
the loss is ``ell = sum_l D_l . e_l / 2``, and as a function of ``v_l`` it has the derivatives
``f'_l = k_l s_l`` and ``f''_l = c s_l^2 + k_l s_l (1 - 2 p_l)`` with ``k_l = e_l1 - e_l2``,
``c = C_11 + C_22 - 2 C_12`` and ``s_l = p_l (1 - p_l)``; then
``grad ell = sum_l f'_l grad v_l`` and ``hess ell = sum_l f''_l grad v_l grad v_l^T + f'_l hess v_l``,
``grad v_1 = mu (2 h_1 - h_2, -h_1)``, ``grad v_2 = mu (h_2, h_1 - 2 h_2)``,
``hess v_1 = mu [[2, -1], [-1, 0]]``, ``hess v_2 = mu [[0, 1], [1, -2]]``.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def _expit(v):  # pragma: no cover - jitted
    if v >= 0.0:
        return 1.0 / (1.0 + np.exp(-v))
    e = np.exp(v)
    return e / (1.0 + e)


@nb.njit(cache=True, inline="always")
def _objective2(h1, h2, w1, w2, W11, W12, W22, T11, T12, T21, T22, C11, C12, C22, mu):  # pragma: no cover - jitted
    """Proximal objective, gradient and Hessian at ``(h1, h2)`` (module docstring)."""
    d = h1 - h2
    p1 = _expit(mu * h1 * d)
    p2 = _expit(mu * h2 * d)
    a1, b1 = p1 - T11, 1.0 - p1 - T12
    a2, b2 = p2 - T21, 1.0 - p2 - T22
    e11, e12 = a1 * C11 + b1 * C12, a1 * C12 + b1 * C22
    e21, e22 = a2 * C11 + b2 * C12, a2 * C12 + b2 * C22
    val = 0.5 * (a1 * e11 + b1 * e12 + a2 * e21 + b2 * e22)
    c = C11 + C22 - 2.0 * C12
    s1 = p1 * (1.0 - p1)
    s2 = p2 * (1.0 - p2)
    k1 = e11 - e12
    k2 = e21 - e22
    f1 = k1 * s1
    f2 = k2 * s2
    ff1 = c * s1 * s1 + k1 * s1 * (1.0 - 2.0 * p1)
    ff2 = c * s2 * s2 + k2 * s2 * (1.0 - 2.0 * p2)
    u1, u2 = mu * (h1 + d), -mu * h1  # grad v_1
    z1, z2 = mu * h2, mu * (d - h2)  # grad v_2
    q1, q2 = h1 - w1, h2 - w2
    Wq1 = W11 * q1 + W12 * q2
    Wq2 = W12 * q1 + W22 * q2
    val += 0.5 * (q1 * Wq1 + q2 * Wq2)
    g1 = f1 * u1 + f2 * z1 + Wq1
    g2 = f1 * u2 + f2 * z2 + Wq2
    H11 = ff1 * u1 * u1 + ff2 * z1 * z1 + 2.0 * mu * f1 + W11
    H12 = ff1 * u1 * u2 + ff2 * z1 * z2 + mu * (f2 - f1) + W12
    H22 = ff1 * u2 * u2 + ff2 * z2 * z2 - 2.0 * mu * f2 + W22
    return val, g1, g2, H11, H12, H22


@nb.njit(cache=True)
def _newton2(h1, h2, w1, w2, W11, W12, W22, T11, T12, T21, T22, C11, C12, C22, mu, max_iter, gtol,
             known, known_val, known_gn, n_known, snap):  # pragma: no cover - jitted
    """:func:`attnphase.theory.channels._newton` for ``L = 2, F = 1``; returns
    ``(value, |grad|, h1, h2)``."""
    val, g1, g2, H11, H12, H22 = _objective2(h1, h2, w1, w2, W11, W12, W22, T11, T12, T21, T22, C11, C12, C22, mu)
    shift = 0.0
    t1 = h1
    t2 = h2
    for _ in range(max_iter):
        gn = max(abs(g1), abs(g2))
        hn = max(1.0, abs(h1), abs(h2))
        if gn < gtol:
            break
        accepted = False
        for _try in range(40):
            # Cholesky of hess + shift I (as the generic kernel: a determinant can cancel to 0)
            a = H11 + shift
            if a <= 1e-14:
                shift = max(2.0 * shift, 1e-3)
                continue
            l11 = np.sqrt(a)
            l21 = H12 / l11
            r = H22 + shift - l21 * l21
            if r <= 1e-14:
                shift = max(2.0 * shift, 1e-3)
                continue
            l22 = np.sqrt(r)
            y1 = -g1 / l11
            y2 = (-g2 - l21 * y1) / l22
            s2 = y2 / l22
            s1 = (y1 - l21 * s2) / l11
            sn = max(abs(s1), abs(s2))
            if shift == 0.0 and sn < 1e-13 * hn:
                break
            t1 = h1 + s1
            t2 = h2 + s2
            tval = _objective2(t1, t2, w1, w2, W11, W12, W22, T11, T12, T21, T22, C11, C12, C22, mu)[0]
            pred = g1 * s1 + g2 * s2
            if tval <= val + 1e-4 * pred or (shift == 0.0 and sn < 1e-8 * hn):
                accepted = True
                break
            if -pred <= 1e-14 * abs(val) and gn < 1e-9:
                break
            shift = max(4.0 * shift, 1e-3)
        if not accepted:
            break
        h1 = t1
        h2 = t2
        if shift == 0.0:
            for k in range(n_known):
                if max(abs(h1 - known[k, 0, 0]), abs(h2 - known[k, 1, 0])) < snap:
                    return known_val[k], known_gn[k], known[k, 0, 0], known[k, 1, 0]
        val, g1, g2, H11, H12, H22 = _objective2(h1, h2, w1, w2, W11, W12, W22, T11, T12, T21, T22,
                                                 C11, C12, C22, mu)
        shift = shift * 0.25 if shift > 1e-6 else 0.0
    return val, max(abs(g1), abs(g2)), h1, h2


@nb.njit(cache=True, parallel=True)
def prox_kernel2(w, T, starts, Winv, C, mu, max_iter, gtol, out_h, out_val, out_gn, cand_h, cand_val,
                 n_chunks, snap):  # pragma: no cover - jitted
    """:func:`attnphase.theory.channels._prox_kernel` for ``L = 2, F = 1`` (same arguments, with the
    scalar bilinear form ``mu`` for ``M``)."""
    N = w.shape[0]
    S = starts.shape[1]
    size = (N + n_chunks - 1) // n_chunks
    W11, W12, W22 = Winv[0, 0], 0.5 * (Winv[0, 1] + Winv[1, 0]), Winv[1, 1]
    C11, C12, C22 = C[0, 0], 0.5 * (C[0, 1] + C[1, 0]), C[1, 1]
    for c in nb.prange(n_chunks):
        cand_gn = np.zeros(S)
        for i in range(c * size, min(N, (c + 1) * size)):
            best = 1e300
            w1, w2 = w[i, 0, 0], w[i, 1, 0]
            T11, T12, T21, T22 = T[i, 0, 0], T[i, 0, 1], T[i, 1, 0], T[i, 1, 1]
            for s in range(S):
                val, gn, h1, h2 = _newton2(starts[i, s, 0, 0], starts[i, s, 1, 0], w1, w2, W11, W12, W22,
                                           T11, T12, T21, T22, C11, C12, C22, mu, max_iter, gtol,
                                           cand_h[i], cand_val[i], cand_gn, s, snap)
                cand_gn[s] = gn
                cand_h[i, s, 0, 0] = h1
                cand_h[i, s, 1, 0] = h2
                cand_val[i, s] = val
                if val < best:
                    best = val
                    out_h[i, 0, 0] = h1
                    out_h[i, 1, 0] = h2
                    out_val[i] = val
                    out_gn[i] = gn
