"""The generic numba kernels of the attention maps (docs/model.md (11.1)-(11.3)): several heads of
rank 1 with their gains and the row softmax or an element-wise map (sigmoid, ReLU, linear) for the
student, an element-wise map for the teacher. :mod:`attnphase.theory.jit` calls them where its
workspace holds such a map (map code ``>= 0``, :func:`attnphase.theory.channels.map_params`); the
one-head softmax student keeps its own code path there.
"""
# ruff: noqa: E501

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def form_rows(M, h, out):  # pragma: no cover - jitted
    """``out_j = M h_j`` for every row ``h_j`` of ``h`` (the bilinear score form applied to the
    fields; ``M.T`` for ``M^T h_j``)."""
    L, F = h.shape
    for j in range(L):
        for a in range(F):
            acc = 0.0
            for b in range(F):
                acc += M[a, b] * h[j, b]
            out[j, a] = acc


@nb.njit(cache=True)
def phi_row(code, logL, invL, s, mask_row, p, d1, d2):  # pragma: no cover - jitted
    """One row of an attention map (docs/model.md (11.2)): ``p = phi(s)`` with its first and
    second derivatives ``d1``, ``d2`` for the element-wise maps (sigmoid ``1/(1 + exp(log L - s))``,
    ReLU ``max(s, 0)/L``, linear ``s/L``; ReLU's second derivative is 0 off its kink and its first
    is taken as 0 at ``s = 0``), the row softmax for ``code = 0`` (its derivatives are written in
    terms of ``p``: ``d1``, ``d2`` unused); masked entries 0."""
    L = s.shape[0]
    if code == 0:
        mx = -1e300
        for j in range(L):
            if mask_row[j] and s[j] > mx:
                mx = s[j]
        tot = 0.0
        for j in range(L):
            if mask_row[j]:
                v = np.exp(s[j] - mx)
                p[j] = v
                tot += v
            else:
                p[j] = 0.0
        for j in range(L):
            p[j] /= tot
        return
    for j in range(L):
        if not mask_row[j]:
            p[j] = 0.0
            d1[j] = 0.0
            d2[j] = 0.0
        elif code == 1:
            z = s[j] - logL
            if z >= 0.0:
                v = 1.0 / (1.0 + np.exp(-z))
            else:
                e = np.exp(z)
                v = e / (1.0 + e)
            p[j] = v
            d1[j] = v * (1.0 - v)
            d2[j] = v * (1.0 - v) * (1.0 - 2.0 * v)
        elif code == 2:
            p[j] = s[j] * invL if s[j] > 0.0 else 0.0
            d1[j] = invL if s[j] > 0.0 else 0.0
            d2[j] = 0.0
        else:
            p[j] = s[j] * invL
            d1[j] = invL
            d2[j] = 0.0


@nb.njit(cache=True)
def student_heads(h, mask, forms, gains, maps, Sk, D1, D2, Mhk, MThk, scores, S):  # pragma: no cover - jitted
    """The student map of several heads (docs/model.md (11.1), (11.2)) at one node:
    ``S = sum_k v_k phi(s^k)``, ``s^k_lj = h_l^T M_k h_j`` (``forms[k] = M_k``, ``gains[k] = v_k``,
    ``maps = (code, log L, 1/L)`` of :data:`attnphase.theory.channels.MAP_CODES`), each head's map in ``Sk[k]``, its
    derivatives in ``D1[k]``, ``D2[k]`` (element-wise maps), ``M_k h_j`` in ``Mhk[k]`` and
    ``M_k^T h_j`` in ``MThk[k]`` (``scores`` (K, L): scratch)."""
    K = forms.shape[0]
    L, F = h.shape
    code = int(maps[0])
    for l in range(L):
        for j in range(L):
            S[l, j] = 0.0
    for k in range(K):
        form_rows(forms[k], h, Mhk[k])
        form_rows(forms[k].T, h, MThk[k])
        for l in range(L):
            for j in range(L):
                acc = 0.0
                for a in range(F):
                    acc += h[l, a] * Mhk[k, j, a]
                scores[k, j] = acc
            phi_row(code, maps[1], maps[2], scores[k], mask[l], Sk[k, l], D1[k, l], D2[k, l])
            for j in range(L):
                S[l, j] += gains[k] * Sk[k, l, j]


@nb.njit(cache=True)
def heads_loss_grad_hess(h, T, C, mask, want_hess, grad, hess, wk):  # pragma: no cover - jitted
    """Loss ``ell`` (docs/model.md (1.4), (11.3)), gradient and optionally Hessian at one node for
    the student map of :func:`student_heads` (the map in ``wk[12:15]``).

    With ``E = (S - T) C`` the derivative in head ``k``'s scores is
    ``gamma^k_lj = v_k p^k_lj (E_lj - E_l . p^k_l)`` (softmax) or ``v_k phi'(s^k_lj) E_lj``
    (element-wise maps); row ``l`` of the loss depends on the scores of row ``l`` only, whose
    Hessian over all heads is ``(J^k)^T C J^m`` (``J^k_aj = d S_la / d s^k_lj``) plus, within a
    head, the second derivative of its map weighted by ``E_l``. The fields enter through
    ``d s^k_lj / d h_a = delta_la M_k h_j + delta_ja M_k^T h_l`` and the second-order terms
    ``gamma^k_ab M_k + gamma^k_ba M_k^T``."""
    Dm, E = wk[3], wk[4]
    forms, gains, maps = wk[12], wk[13], wk[14]
    Sk, D1, D2, gk, Mhk, MThk, Jk, CJk, Hk, Dk, HDk, epk = wk[15:]
    K = forms.shape[0]
    L, F = h.shape
    n = L * F
    soft = int(maps[0]) == 0
    student_heads(h, mask, forms, gains, maps, Sk, D1, D2, Mhk, MThk, epk, Dm)
    for l in range(L):
        for j in range(L):
            Dm[l, j] -= T[l, j]
    val = 0.0
    for l in range(L):
        for j in range(L):
            acc = 0.0
            for k in range(L):
                acc += Dm[l, k] * C[k, j]
            E[l, j] = acc
            val += Dm[l, j] * acc
    val = 0.5 * val
    for k in range(K):
        for l in range(L):
            acc = 0.0
            for j in range(L):
                acc += E[l, j] * Sk[k, l, j]
            epk[k, l] = acc
            for j in range(L):
                if soft:
                    gk[k, l, j] = gains[k] * Sk[k, l, j] * (E[l, j] - acc)
                else:
                    gk[k, l, j] = gains[k] * D1[k, l, j] * E[l, j]
    for a in range(L):
        for mu in range(F):
            acc = 0.0
            for k in range(K):
                for j in range(L):
                    acc += gk[k, a, j] * Mhk[k, j, mu] + gk[k, j, a] * MThk[k, j, mu]
            grad[a * F + mu] = acc
    if not want_hess:
        return val
    for i in range(n):
        for k in range(n):
            hess[i, k] = 0.0
    KL = K * L
    for l in range(L):
        for k in range(K):
            for a in range(L):
                for j in range(L):
                    if soft:
                        Jk[k, a, j] = gains[k] * Sk[k, l, a] * ((1.0 if a == j else 0.0) - Sk[k, l, j])
                    else:
                        Jk[k, a, j] = gains[k] * D1[k, l, j] if a == j else 0.0
            for a in range(L):
                for j in range(L):
                    acc = 0.0
                    for b in range(L):
                        acc += C[a, b] * Jk[k, b, j]
                    CJk[k, a, j] = acc
        for k in range(K):
            for j in range(L):
                for m in range(K):
                    for i in range(L):
                        acc = 0.0
                        for a in range(L):
                            acc += Jk[k, a, j] * CJk[m, a, i]
                        if k == m:
                            if soft:
                                p = Sk[k, l]
                                if i == j:
                                    acc += gk[k, l, j]
                                acc -= gains[k] * p[j] * p[i] * (E[l, j] + E[l, i] - 2.0 * epk[k, l])
                            elif i == j:
                                acc += gains[k] * D2[k, l, j] * E[l, j]
                        Hk[k * L + j, m * L + i] = acc
        for k in range(K):
            for j in range(L):
                r = k * L + j
                for i in range(n):
                    Dk[r, i] = 0.0
                for mu in range(F):
                    Dk[r, l * F + mu] += Mhk[k, j, mu]
                    Dk[r, j * F + mu] += MThk[k, l, mu]
        for r in range(KL):
            for i in range(n):
                acc = 0.0
                for c in range(KL):
                    acc += Hk[r, c] * Dk[c, i]
                HDk[r, i] = acc
        for i in range(n):
            for k in range(i, n):
                acc = 0.0
                for r in range(KL):
                    acc += Dk[r, i] * HDk[r, k]
                hess[i, k] += acc
    for k in range(K):
        M = forms[k]
        for a in range(L):
            for b in range(L):
                for mu in range(F):
                    for nu in range(F):
                        i = a * F + mu
                        c = b * F + nu
                        if i <= c:
                            hess[i, c] += gk[k, a, b] * M[mu, nu] + gk[k, b, a] * M[nu, mu]
    for i in range(n):
        for k in range(i):
            hess[i, k] = hess[k, i]
    return val


@nb.njit(cache=True)
def target_rows_map(hs, omega, A, causal, tmaps, out, scores, d1, d2):  # pragma: no cover - jitted
    """``T = (1 - omega) phi*(h* h*^T) + omega A`` at one node for the teacher's map ``phi*`` of
    ``tmaps = (code, log L, 1/L)`` (docs/model.md (11.2)), an element-wise map (``code > 0``; the
    softmax teacher is :func:`attnphase.theory.jit.target_kernel`'s)."""
    L, R = hs.shape
    code = int(tmaps[0])
    for l in range(L):
        for k in range(L):
            acc = 0.0
            for a in range(R):
                acc += hs[l, a] * hs[k, a]
            scores[k] = acc
            d2[k] = 1.0 if (k <= l or not causal) else 0.0
        phi_row(code, tmaps[1], tmaps[2], scores, d2 > 0.5, out[l], d1, d2)
        for k in range(L):
            out[l, k] = (1.0 - omega) * out[l, k] + omega * A[l, k]
