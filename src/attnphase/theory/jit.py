"""The theory's generic numba kernels: the proximal solver of any geometry (docs/model.md (3.2)),
the target map (1.2) and the test-error sum (4.2); the maps of several heads and other maps are
in :mod:`attnphase.theory.jit_maps`, the moves along the orbit of the scores' symmetry in
:mod:`attnphase.theory.jit_orbit`, the second minimum and the Stein sums (3.3) of a data step in
:mod:`attnphase.theory.jit_stein`.

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

from attnphase.theory.jit_maps import form_rows, heads_loss_grad_hess, student_heads, target_rows_map
from attnphase.theory.jit_orbit import follow_orbit


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
        student_heads(w, mask, wk[12], wk[13], maps, wk[15], wk[16], wk[17], wk[19], wk[20], wk[26], S)
    else:
        form_rows(M, w, u)  # (u <- M w_j, then the two maps)
        _student_rows(w, u, mask, S)
    if tmaps[0] > 0.0:
        target_rows_map(hs, omega, A, causal, tmaps, T, wk[6], wk[26][0], wk[4][0])
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
# :func:`student_heads`) and the buffers of its heads.
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
        return heads_loss_grad_hess(h, T, C, mask, want_hess, grad, hess, wk)
    Mh, MTh, P, Dm, E, gam, ep, Hs, J, Dl, HD, CJ = wk[:12]
    L, F = h.shape
    n = L * F
    form_rows(M, h, Mh)
    form_rows(M.T, h, MTh)
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
def _newton(h, w, Winv, T, C, M, mask, max_iter, gtol, wk, nw, known, known_val, known_gn, n_known, snap, orbit):  # pragma: no cover - jitted
    """Levenberg-Marquardt damped Newton from ``h`` (modified in place); returns (value, |grad|).

    ``known[:n_known]`` are minima already converged at this node (values ``known_val``, gradient
    norms ``known_gn``): once a pure Newton step (positive definite Hessian, no shift) lands
    within ``snap`` (max-norm) of one of them, the iterate is in its quadratic basin and the
    solve ends there (``h`` := that minimum; most starts of a multi-start set reach a minimum
    another start found, and this saves their last Newton steps).

    ``orbit`` (:attr:`attnphase.theory.channels.AttentionMap.orbit`, or 0): where the scores have a
    continuous symmetry, the start and every damped step (``mu > 0``) are moved along its orbit by
    :func:`attnphase.theory.jit_orbit.follow_orbit` (the minimum lies where the quadratic term is
    least along it; without the move, at ``V`` ~ 2000 a quarter of the starts of tied rank 2 had not
    met ``gtol`` after 60 steps).
    """
    grad, hess, g2, trial, Lc, y, step, dummy = nw
    L, F = h.shape
    n = L * F
    # (the Hessian flag as a run-time value, not a literal: numba compiles a function once per
    # literal argument, and _objective with the loss it calls is the largest code here; with
    # True and False literal and node_kernel's run-time flag it was compiled three times)
    hess_on = n > 0
    hess_off = not hess_on
    follow_orbit(h, w, Winv, orbit, trial)
    val = _objective(h, w, Winv, T, C, M, mask, grad, hess, hess_on, wk)
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
            tval = _objective(trial, w, Winv, T, C, M, mask, g2, dummy, hess_off, wk)
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
        if mu > 0.0:
            follow_orbit(h, w, Winv, orbit, trial)
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
        val = _objective(h, w, Winv, T, C, M, mask, grad, hess, hess_on, wk)
        mu = mu * 0.25 if mu > 1e-6 else 0.0
    gn = 0.0
    for i in range(n):
        gn = max(gn, abs(grad[i]))
    return val, gn


@nb.njit(cache=True, parallel=True)
def prox_kernel(w, T, starts, Winv, C, M, mask, max_iter, gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks, snap,
                orbit, forms, gains, maps):  # pragma: no cover
    """The global minimiser of the proximal problem (docs/model.md (3.2)) at every node: damped
    Newton (:func:`_newton`) from each of ``starts[i]``, the lowest objective kept (``out_h``,
    ``out_val``, ``out_gn``), every start's minimum in ``cand_h``, ``cand_val``; the nodes cut into
    ``n_chunks`` chunks; the student map ``M`` (one softmax head) or, where ``maps[0] >= 0``,
    the heads and map of ``forms``, ``gains``, ``maps`` (:func:`student_heads`); ``orbit`` the
    symmetry whose orbit :func:`_newton` follows (0: none). ``Winv`` and ``C`` are symmetrised first, as the written-out C kernels
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
                                  cand_h[i], cand_val[i], cand_gn, s, snap, orbit)
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


@nb.njit(cache=True)
def node_kernel(hh, w, Winv, T, C, M, mask, want_hess, out_val, out_grad, out_hess, forms, gains, maps):  # pragma: no cover - jitted
    """The proximal objective (docs/model.md (3.2)), its gradient and, with ``want_hess``, its
    Hessian at every node's fields ``hh[i]`` (with ``Winv = 0`` and ``w = hh`` these are the loss
    ``ell`` of (1.4) and its derivatives: the prior adds exact zeros). One serial kernel for the
    checks and the saddle escape, which see few nodes: a parallel one per quantity cost a fresh
    process ~15 s of compilation each."""
    N, L, F = hh.shape
    wk = _work(L, F, forms, gains, maps)
    for i in range(N):
        out_val[i] = _objective(hh[i], w[i], Winv, T[i], C, M, mask, out_grad[i], out_hess[i], want_hess, wk)
