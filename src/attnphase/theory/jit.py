"""The theory's generic numba kernels: the proximal solver of any geometry (docs/model.md (3.2)),
the target map (1.2), the test-error sum (4.2), the second minimum and the Stein sums (3.3) of a
data step.

They loop over ``L`` and ``F`` at run time. :mod:`attnphase.theory.native` runs their C twins
where a C compiler works (``kernels.c``, and the proximal kernel written out per geometry by
:mod:`attnphase.theory.native.codegen`) and these otherwise or with ``ATTNPHASE_KERNELS=numba``;
the tests compare the C kernels against these. Imported only where they run: ``import numba``
and the first call of its cached kernels cost a process ~0.7 s.
"""
# ruff: noqa: E501

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _target_rows(hs, omega, A, causal, out):  # pragma: no cover - jitted
    """``T = (1 - omega) softmax(h* h*^T) + omega A`` at one node (causal: scores ``k <= l``)."""
    L, R = hs.shape
    for l in range(L):
        kmax = l + 1 if causal else L
        mx = -np.inf
        for k in range(kmax):
            s = 0.0
            for a in range(R):
                s += hs[l, a] * hs[k, a]
            out[l, k] = s
            mx = max(mx, s)
        tot = 0.0
        for k in range(kmax):
            e = np.exp(out[l, k] - mx)
            out[l, k] = e
            tot += e
        for k in range(L):
            sm = out[l, k] / tot if k < kmax else 0.0
            out[l, k] = (1.0 - omega) * sm + omega * A[l, k]


@nb.njit(cache=True)
def _target_rows_map(hs, omega, A, causal, tmaps, out, scores, d1, d2):  # pragma: no cover - jitted
    """``T = (1 - omega) phi*(h* h*^T) + omega A`` at one node for the teacher's map ``phi*`` of
    ``tmaps = (code, log L, 1/L)`` (docs/model.md (11.2)); ``code = 0`` (softmax) is
    :func:`_target_rows`."""
    L, R = hs.shape
    if tmaps[0] <= 0.0:
        _target_rows(hs, omega, A, causal, out)
        return
    code = int(tmaps[0])
    for l in range(L):
        for k in range(L):
            acc = 0.0
            for a in range(R):
                acc += hs[l, a] * hs[k, a]
            scores[k] = acc
            d2[k] = 1.0 if (k <= l or not causal) else 0.0
        _phi_row(code, tmaps[1], tmaps[2], scores, d2 > 0.5, out[l], d1, d2)
        for k in range(L):
            out[l, k] = (1.0 - omega) * out[l, k] + omega * A[l, k]


@nb.njit(cache=True, parallel=True)
def target_kernel(hstar, omega, A, causal, out):  # pragma: no cover - jitted
    """The target map of docs/model.md (1.2) at every node: ``out[i] = T(hstar[i])``."""
    for i in nb.prange(hstar.shape[0]):
        _target_rows(hstar[i], omega, A, causal, out[i])


@nb.njit(cache=True)
def _student_rows(h, Mh, mask, P, reciprocal=False):  # pragma: no cover - jitted
    """``S = rowsoftmax(s)`` of the student map (docs/model.md (1.3)) at one node,
    ``s_lj = h_l . Mh_j`` (``Mh_j = M h_j``), masked entries zero. Each row's exponentials are
    divided by their sum, or with ``reciprocal`` multiplied by its reciprocal: the order of the
    written-out C proximal kernels (:mod:`attnphase.theory.native.codegen`), which the generic
    proximal kernel follows bit for bit."""
    L, F = h.shape
    for l in range(L):
        mx = -1e300
        for j in range(L):
            if mask[l, j]:
                s = 0.0
                for a in range(F):
                    s += h[l, a] * Mh[j, a]
                P[l, j] = s
                if s > mx:
                    mx = s
        tot = 0.0
        for j in range(L):
            if mask[l, j]:
                v = np.exp(P[l, j] - mx)
                P[l, j] = v
                tot += v
            else:
                P[l, j] = 0.0
        if reciprocal:
            inv = 1.0 / tot
            for j in range(L):
                P[l, j] *= inv
        else:
            for j in range(L):
                P[l, j] /= tot


@nb.njit(cache=True)
def _phi_row(code, logL, invL, s, mask_row, p, d1, d2):  # pragma: no cover - jitted
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
def _student_heads(h, mask, forms, gains, maps, Sk, D1, D2, Mhk, MThk, scores, S):  # pragma: no cover - jitted
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
        _form_rows(forms[k], h, Mhk[k])
        _form_rows(forms[k].T, h, MThk[k])
        for l in range(L):
            for j in range(L):
                acc = 0.0
                for a in range(F):
                    acc += h[l, a] * Mhk[k, j, a]
                scores[k, j] = acc
            _phi_row(code, maps[1], maps[2], scores[k], mask[l], Sk[k, l], D1[k, l], D2[k, l])
            for j in range(L):
                S[l, j] += gains[k] * Sk[k, l, j]


@nb.njit(cache=True)
def _heads_loss_grad_hess(h, T, C, mask, want_hess, grad, hess, wk):  # pragma: no cover - jitted
    """Loss ``ell`` (docs/model.md (1.4), (11.3)), gradient and optionally Hessian at one node for
    the student map of :func:`_student_heads` (the map in ``wk[12:15]``).

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
    _student_heads(h, mask, forms, gains, maps, Sk, D1, D2, Mhk, MThk, epk, Dm)
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
def _form_rows(M, h, out):  # pragma: no cover - jitted
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
def _mix_rows(mix, u, out):  # pragma: no cover - jitted
    """``out_l = sum_k mix_lk u_k`` over the first ``out.shape[1]`` columns of ``u``."""
    L, n = out.shape
    for l in range(L):
        for a in range(n):
            acc = 0.0
            for k in range(L):
                acc += mix[l, k] * u[k, a]
            out[l, a] = acc


@nb.njit(cache=True)
def _node_test_loss(x, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, w, hs, u, S, T, wk, tmaps):  # pragma: no cover - jitted
    """``ell(w; T(h*))`` at one Gaussian node ``x = (xi, eta)`` (fields as in ``Saddle.fields``:
    ``w = m + xi qs``, ``h* = xi B + eta Rs``, both mixed across positions by ``mix``); the
    student's map of several heads or another map where ``wk`` holds one (:func:`_work`,
    docs/model.md (11.3)), the teacher's of ``tmaps``."""
    L, F = m.shape
    R = Rs.shape[0]
    nxi = L * F
    for l in range(L):
        for a in range(F):
            acc = m[l, a]
            for b in range(F):
                acc += x[l * F + b] * qs[b, a]
            u[l, a] = acc
    _mix_rows(mix, u, w)
    for l in range(L):
        for a in range(R):
            acc = 0.0
            for b in range(F):
                acc += x[l * F + b] * B[b, a]
            for b in range(R):
                acc += x[nxi + l * R + b] * Rs[b, a]
            u[l, a] = acc
    _mix_rows(mix, u, hs)
    maps = wk[14]
    if maps[0] >= 0.0:
        _student_heads(w, mask, wk[12], wk[13], maps, wk[15], wk[16], wk[17], wk[19], wk[20], wk[26], S)
    else:
        _form_rows(M, w, u)  # (u <- M w_j, then the two maps)
        _student_rows(w, u, mask, S)
    if tmaps[0] > 0.0:
        _target_rows_map(hs, omega, A, causal, tmaps, T, wk[6], wk[26][0], wk[4][0])
    else:
        _target_rows(hs, omega, A, causal, T)
    out = 0.0
    for l in range(L):
        for j in range(L):
            dj = S[l, j] - T[l, j]
            for k in range(L):
                out += dj * C[j, k] * (S[l, k] - T[l, k])
    return 0.5 * out


@nb.njit(cache=True, parallel=True)
def test_loss_sum_kernel(X, W, t, wt, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, n_chunks,
                         forms, gains, maps, tmaps):  # pragma: no cover - jitted
    """The test-error sum of docs/model.md (4.2): ``sum_i w_i ell(x_i)`` over the nodes ``X``
    with weights ``W`` (the student's and the teacher's maps as in :func:`_node_test_loss`), or, where ``X`` has no
    rows, over the product rule ``(t, wt)^dim`` (``dim = L (F + R)``), its nodes decoded from the
    flat index (last coordinate fastest) instead of stored."""
    L, F = m.shape
    R = Rs.shape[0]
    dim = L * (F + R)
    n1 = t.shape[0]
    product = X.shape[0] == 0
    N = n1**dim if product else X.shape[0]
    size = (N + n_chunks - 1) // n_chunks
    part = np.zeros(n_chunks)
    for c in nb.prange(n_chunks):
        x = np.zeros(dim)
        w = np.zeros((L, F))
        hs = np.zeros((L, R))
        u = np.zeros((L, max(F, R)))
        S = np.zeros((L, L))
        T = np.zeros((L, L))
        wk = _work(L, F, forms, gains, maps)
        acc = 0.0
        for i in range(c * size, min(N, (c + 1) * size)):
            if product:
                idx = i
                wi = 1.0
                for d in range(dim - 1, -1, -1):
                    k = idx % n1
                    idx //= n1
                    x[d] = t[k]
                    wi *= wt[k]
            else:
                x[:] = X[i]
                wi = W[i]
            acc += wi * _node_test_loss(x, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, w, hs, u, S, T, wk, tmaps)
        part[c] = acc
    return part.sum()


# Scratch space is allocated once per chunk of nodes (allocation inside the Newton loop dominated
# the run time otherwise). ``_work(L, F, forms, gains, maps)`` returns the buffers in the order the
# kernels expect, followed by the student's map (``forms``, ``gains``, ``maps``: see
# :func:`_student_heads`) and the buffers of its heads.
@nb.njit(cache=True)
def _work(L, F, forms, gains, maps):  # pragma: no cover - jitted
    n = L * F
    K = forms.shape[0]
    return (
        np.zeros((L, F)), np.zeros((L, F)), np.zeros((L, L)), np.zeros((L, L)), np.zeros((L, L)),
        np.zeros((L, L)), np.zeros(L), np.zeros((L, L)), np.zeros((L, L)), np.zeros((L, n)),
        np.zeros((L, n)), np.zeros((L, L)),
        forms, gains, maps,
        np.zeros((K, L, L)), np.zeros((K, L, L)), np.zeros((K, L, L)), np.zeros((K, L, L)),
        np.zeros((K, L, F)), np.zeros((K, L, F)), np.zeros((K, L, L)), np.zeros((K, L, L)),
        np.zeros((K * L, K * L)), np.zeros((K * L, n)), np.zeros((K * L, n)), np.zeros((K, L)),
    )


@nb.njit(cache=True)
def _loss_grad_hess(h, T, C, M, mask, want_hess, grad, hess, wk):  # pragma: no cover - jitted
    """Loss ``ell`` (docs/model.md (1.4)), gradient (L*F) and optionally Hessian (L*F x L*F) at one
    node.

    Every sum runs in the order of the written-out C kernels (:mod:`attnphase.theory.native.codegen`,
    which also drops the terms that are zero for a geometry: adding an exact zero changes no
    result), so both give the same numbers: the loss as ``0.5 * sum D E``, the gradient's
    ``M h`` terms before its ``M^T h`` terms, ``J^T C J`` as ``J^T (C J)`` on the upper triangle,
    and the second-order terms of the scores added one by one.
    """
    maps = wk[14]
    if maps[0] >= 0.0:
        return _heads_loss_grad_hess(h, T, C, mask, want_hess, grad, hess, wk)
    Mh, MTh, P, Dm, E, gam, ep, Hs, J, Dl, HD, CJ = wk[:12]
    L, F = h.shape
    n = L * F
    _form_rows(M, h, Mh)
    _form_rows(M.T, h, MTh)
    _student_rows(h, Mh, mask, P, True)
    for l in range(L):
        for j in range(L):
            Dm[l, j] = P[l, j] - T[l, j]
    val = 0.0
    for l in range(L):
        for j in range(L):
            acc = 0.0
            for k in range(L):
                acc += Dm[l, k] * C[k, j]
            E[l, j] = acc
            val += Dm[l, j] * acc
    val = 0.5 * val
    for l in range(L):
        acc = 0.0
        for j in range(L):
            acc += E[l, j] * P[l, j]
        ep[l] = acc
        for j in range(L):
            gam[l, j] = P[l, j] * (E[l, j] - acc)
    # d ell / d h_a = sum_j gam_aj M h_j + sum_l gam_la M^T h_l
    for a in range(L):
        for mu in range(F):
            acc = 0.0
            for j in range(L):
                acc += gam[a, j] * Mh[j, mu]
            for j in range(L):
                acc += gam[j, a] * MTh[j, mu]
            grad[a * F + mu] = acc
    if not want_hess:
        return val
    for i in range(n):
        for k in range(n):
            hess[i, k] = 0.0
    for l in range(L):
        for a in range(L):
            for j in range(L):
                J[a, j] = P[l, a] * ((1.0 if a == j else 0.0) - P[l, j])
        for a in range(L):
            for k in range(L):
                acc = 0.0
                for b in range(L):
                    acc += C[a, b] * J[b, k]
                CJ[a, k] = acc
        for j in range(L):
            for k in range(j, L):
                acc = 0.0
                for a in range(L):
                    acc += J[a, j] * CJ[a, k]
                if j == k:
                    acc += gam[l, j]
                acc -= P[l, j] * P[l, k] * (E[l, j] + E[l, k] - 2.0 * ep[l])
                Hs[j, k] = acc
                Hs[k, j] = acc
        # Dl[j, (a, mu)] = d s_lj / d h_a,mu = delta_la (M h_j)_mu + delta_ja (M^T h_l)_mu
        for j in range(L):
            for i in range(n):
                Dl[j, i] = 0.0
            for mu in range(F):
                Dl[j, l * F + mu] += Mh[j, mu]
                Dl[j, j * F + mu] += MTh[l, mu]
        for j in range(L):
            for i in range(n):
                acc = 0.0
                for k in range(L):
                    acc += Hs[j, k] * Dl[k, i]
                HD[j, i] = acc
        for i in range(n):
            for k in range(i, n):
                acc = 0.0
                for j in range(L):
                    acc += Dl[j, i] * HD[j, k]
                hess[i, k] += acc
    # second-order part of the scores: gam_ab M_mu,nu + gam_ba M_nu,mu (upper triangle, then mirrored)
    for a in range(L):
        for b in range(L):
            for mu in range(F):
                for nu in range(F):
                    i = a * F + mu
                    k = b * F + nu
                    if i <= k:
                        hess[i, k] += gam[a, b] * M[mu, nu]
                        hess[i, k] += gam[b, a] * M[nu, mu]
    for i in range(n):
        for k in range(i):
            hess[i, k] = hess[k, i]
    return val


@nb.njit(cache=True)
def _objective(h, w, Winv, T, C, M, mask, grad, hess, want_hess, wk):  # pragma: no cover - jitted
    """Proximal objective of docs/model.md (3.2), ``ell(h; T) + (h - w)^T Winv (h - w) / 2``, with
    ``Winv`` the inverse metric over all ``L * F`` field coordinates (``I_L (x) V^{-1}`` for
    uncorrelated tokens); the quadratic form summed before it is added to ``ell`` (the order of
    the written-out C kernels)."""
    L, F = h.shape
    n = L * F
    val = _loss_grad_hess(h, T, C, M, mask, want_hess, grad, hess, wk)
    quad = 0.0
    for i in range(n):
        acc = 0.0
        for k in range(n):
            acc += Winv[i, k] * (h[k // F, k % F] - w[k // F, k % F])
        quad += (h[i // F, i % F] - w[i // F, i % F]) * acc
        grad[i] += acc
        if want_hess:
            for k in range(n):
                hess[i, k] += Winv[i, k]
    return val + 0.5 * quad


@nb.njit(cache=True)
def _newton_work(L, F):  # pragma: no cover - jitted
    n = L * F
    return (np.zeros(n), np.zeros((n, n)), np.zeros(n), np.zeros((L, F)), np.zeros((n, n)),
            np.zeros(n), np.zeros(n), np.zeros((1, 1)))


@nb.njit(cache=True)
def _newton(h, w, Winv, T, C, M, mask, max_iter, gtol, wk, nw, known, known_val, known_gn, n_known, snap):  # pragma: no cover - jitted
    """Levenberg-Marquardt damped Newton from ``h`` (modified in place); returns (value, |grad|).

    ``known[:n_known]`` are minima already converged at this node (values ``known_val``, gradient
    norms ``known_gn``): once a pure Newton step (positive definite Hessian, no shift) lands
    within ``snap`` (max-norm) of one of them, the iterate is in its quadratic basin and the
    solve ends there (``h`` := that minimum; most starts of a multi-start set reach a minimum
    another start found, and this saves their last Newton steps).
    """
    grad, hess, g2, trial, Lc, y, step, dummy = nw
    L, F = h.shape
    n = L * F
    val = _objective(h, w, Winv, T, C, M, mask, grad, hess, True, wk)
    mu = 0.0
    for _ in range(max_iter):
        gn = 0.0
        hn = 1.0
        for i in range(n):
            gn = max(gn, abs(grad[i]))
        for l in range(L):
            for a in range(F):
                hn = max(hn, abs(h[l, a]))
        if gn < gtol:
            break
        accepted = False
        for _try in range(40):
            # Cholesky of hess + mu I; on failure raise the shift
            ok = True
            for i in range(n):
                for k in range(i + 1):
                    s = hess[i, k] + (mu if i == k else 0.0)
                    for p in range(k):
                        s -= Lc[i, p] * Lc[k, p]
                    if i == k:
                        if s <= 1e-14:
                            ok = False
                            break
                        Lc[i, i] = np.sqrt(s)
                    else:
                        Lc[i, k] = s / Lc[k, k]
                if not ok:
                    break
            if not ok:
                mu = max(2.0 * mu, 1e-3)
                continue
            for i in range(n):
                s = -grad[i]
                for p in range(i):
                    s -= Lc[i, p] * y[p]
                y[i] = s / Lc[i, i]
            for i in range(n - 1, -1, -1):
                s = y[i]
                for p in range(i + 1, n):
                    s -= Lc[p, i] * step[p]
                step[i] = s / Lc[i, i]
            sn = 0.0
            for i in range(n):
                sn = max(sn, abs(step[i]))
            if mu == 0.0 and sn < 1e-13 * hn:
                # a pure Newton step below the rounding level of h: converged (the gradient
                # cannot fall further in floating point)
                break
            for l in range(L):
                for a in range(F):
                    trial[l, a] = h[l, a] + step[l * F + a]
            tval = _objective(trial, w, Winv, T, C, M, mask, g2, dummy, False, wk)
            pred = 0.0
            for i in range(n):
                pred += grad[i] * step[i]
            # in the quadratic regime a tiny pure Newton step is taken even when rounding hides
            # the decrease (otherwise the shift would be raised 40 times for nothing)
            if tval <= val + 1e-4 * pred or (mu == 0.0 and sn < 1e-8 * hn):
                accepted = True
                break
            if -pred <= 1e-14 * abs(val) and gn < 1e-9:
                # rejected although the predicted decrease is below the rounding of the
                # objective: a stationary point to floating-point accuracy (without this, ~2 %
                # of the solves spent all of max_iter there, raising and lowering the shift)
                break
            mu = max(4.0 * mu, 1e-3)
        if not accepted:
            break
        for l in range(L):
            for a in range(F):
                h[l, a] = trial[l, a]
        if mu == 0.0:
            for k in range(n_known):
                d = 0.0
                for l in range(L):
                    for a in range(F):
                        d = max(d, abs(h[l, a] - known[k, l, a]))
                if d < snap:
                    for l in range(L):
                        for a in range(F):
                            h[l, a] = known[k, l, a]
                    return known_val[k], known_gn[k]
        val = _objective(h, w, Winv, T, C, M, mask, grad, hess, True, wk)
        mu = mu * 0.25 if mu > 1e-6 else 0.0
    gn = 0.0
    for i in range(n):
        gn = max(gn, abs(grad[i]))
    return val, gn


@nb.njit(cache=True, parallel=True)
def prox_kernel(w, T, starts, Winv, C, M, mask, max_iter, gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks, snap,
                forms, gains, maps):  # pragma: no cover
    """The global minimiser of the proximal problem (docs/model.md (3.2)) at every node: damped
    Newton (:func:`_newton`) from each of ``starts[i]``, the lowest objective kept (``out_h``,
    ``out_val``, ``out_gn``), every start's minimum in ``cand_h``, ``cand_val``; the nodes cut into
    ``n_chunks`` chunks; the student map ``M`` (one softmax head) or, where ``maps[0] >= 0``,
    the heads and map of ``forms``, ``gains``, ``maps`` (:func:`_student_heads`). ``Winv`` and ``C`` are symmetrised first, as the written-out C kernels
    do (which read their upper triangles only)."""
    N, L, F = w.shape
    S = starts.shape[1]
    size = (N + n_chunks - 1) // n_chunks
    Wt = 0.5 * (Winv + Winv.T)
    Ct = 0.5 * (C + C.T)
    for c in nb.prange(n_chunks):
        wk = _work(L, F, forms, gains, maps)
        nw = _newton_work(L, F)
        h = np.zeros((L, F))
        cand_gn = np.zeros(S)
        for i in range(c * size, min(N, (c + 1) * size)):
            best = 1e300
            for s in range(S):
                for l in range(L):
                    for a in range(F):
                        h[l, a] = starts[i, s, l, a]
                val, gn = _newton(h, w[i], Wt, T[i], Ct, M, mask, max_iter, gtol, wk, nw,
                                  cand_h[i], cand_val[i], cand_gn, s, snap)
                cand_gn[s] = gn
                for l in range(L):
                    for a in range(F):
                        cand_h[i, s, l, a] = h[l, a]
                cand_val[i, s] = val
                if val < best:
                    best = val
                    for l in range(L):
                        for a in range(F):
                            out_h[i, l, a] = h[l, a]
                    out_val[i] = val
                    out_gn[i] = gn


@nb.njit(cache=True, parallel=True)
def hessian_kernel(hh, T, C, M, mask, out, forms, gains, maps):  # pragma: no cover - jitted
    """The Hessian of ``ell`` (docs/model.md (1.4)) at every node's fields ``hh[i]``."""
    N, L, F = hh.shape
    n = L * F
    for i in nb.prange(N):
        wk = _work(L, F, forms, gains, maps)
        grad = np.zeros(n)
        _loss_grad_hess(hh[i], T[i], C, M, mask, True, grad, out[i], wk)


@nb.njit(cache=True, parallel=True)
def value_kernel(hh, w, Winv, T, C, M, mask, out_val, out_grad, forms, gains, maps):  # pragma: no cover - jitted
    """The proximal objective (docs/model.md (3.2)) and its gradient at every node's ``hh[i]``."""
    N, L, F = hh.shape
    for i in nb.prange(N):
        wk = _work(L, F, forms, gains, maps)
        dummy = np.zeros((1, 1))
        out_val[i] = _objective(hh[i], w[i], Winv, T[i], C, M, mask, out_grad[i], dummy, False, wk)


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
