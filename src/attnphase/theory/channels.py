"""Attention maps, the per-sample loss and the batched global proximal solver (THEORY.md 2.1-2.2).

The student map is ``S(h) = rowsoftmax(s)`` with bilinear scores ``s_lj = h_l^T M h_j`` and an
optional mask (causal: ``j <= l``). A variant is therefore a pair ``(M, mask)``:

* ``tied``: fields ``h_l in R^r``, ``M = I_r``  -> ``S = softmax(h h^T)``;
* ``untied``: fields ``h_l = (hQ_l, hK_l) in R^{2r}``, ``M = [[0, I], [0, 0]]`` -> ``S = softmax(hQ hK^T)``;
* ``causal`` / ``untied-causal``: the same with the lower-triangular mask.

The loss of a field configuration is ``ell(h; T) = 1/2 tr((S - T) C (S - T)^T)`` (``C = sigma^2 I``:
``sigma^2/2 ||S - T||_F^2``). Its gradient and Hessian are written analytically:
with ``p = S_l``, ``e = ((S - T) C)_l``, ``gamma_lj = p_j (e_j - e.p)`` is ``d ell / d s_lj`` and
``d^2 ell / d s_lj d s_lk = (J^T C J)_jk + delta_jk gamma_lj - p_j p_k (e_j + e_k - 2 e.p)``,
``J_aj = p_a (delta_aj - p_j)``.

The proximal problem at a node is ``min_h sum_l (h_l - w_l)^T V^{-1} (h_l - w_l) / 2 + ell(h; T)``.
It is non-convex; :func:`prox_batch` runs damped (Levenberg-Marquardt) Newton from several starts per
node, in parallel over nodes (numba), and keeps the lowest objective: the global minimiser
up to the coverage of the starts (tested against brute-force grid search).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numba as nb
import numpy as np

from attnphase.spec.problem import ModelSpec


@dataclass(frozen=True)
class AttentionMap:
    """Student attention variant: field dimension per position, bilinear form and mask."""

    name: str
    field_dim: int
    M: np.ndarray
    mask: np.ndarray

    @property
    def blocks(self) -> int:
        """Fields per student direction: 1 (tied: ``h_l = Q^T x_l``), 2 (untied: query and key)."""
        return 2 if self.name.startswith("untied") else 1

    @property
    def rank(self) -> int:
        """Student rank ``r`` (``field_dim = blocks * r``)."""
        return self.field_dim // self.blocks

    @property
    def rotation_invariant(self) -> bool:
        """Rank ``r >= 2``: scores and ridge are invariant under ``Q -> Q U`` (and ``K -> K U``
        for untied keys/queries) for orthogonal ``U``, i.e. under ``I_blocks (x) U`` on the
        fields (``Saddle.gauge_fix``, the ``mixed`` branch, the reflection-symmetrised QMC
        rule)."""
        return self.rank >= 2

    @staticmethod
    def from_spec(spec: ModelSpec) -> AttentionMap:
        r, L = spec.rank, spec.L
        causal = spec.variant in ("causal", "untied-causal")
        mask = np.tril(np.ones((L, L), dtype=np.bool_)) if causal else np.ones((L, L), dtype=np.bool_)
        if spec.variant.startswith("untied"):
            M = np.zeros((2 * r, 2 * r))
            M[:r, r:] = np.eye(r)
            return AttentionMap(spec.variant, 2 * r, M, mask)
        return AttentionMap(spec.variant, r, np.eye(r), mask)


def softmax_rows(s: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Row-wise softmax over the last axis, masked entries set to zero."""
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def target_map(hstar: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """Target ``T(h*) = (1 - omega) softmax(h* h*^T) + omega A`` for fields of shape (N, L, r*)
    (the causal target masks the scores above the diagonal)."""
    hstar = np.ascontiguousarray(hstar, dtype=np.float64)
    out = np.empty((hstar.shape[0], hstar.shape[1], hstar.shape[1]))
    _target_kernel(hstar, float(spec.omega), np.ascontiguousarray(spec.A_array, dtype=np.float64),
                   bool(spec.causal_target), out)
    return out


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
def _target_kernel(hstar, omega, A, causal, out):  # pragma: no cover - jitted
    for i in nb.prange(hstar.shape[0]):
        _target_rows(hstar[i], omega, A, causal, out[i])


def student_map(h: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Student attention ``S(h)`` for fields of shape (N, L, field_dim)."""
    s = np.einsum("nla,ab,nkb->nlk", h, amap.M, h)
    return softmax_rows(s, amap.mask)


def loss_numpy(h: np.ndarray, T: np.ndarray, C: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Per-node loss ``ell(h; T) = 1/2 tr((S - T) C (S - T)^T)`` (vectorised reference)."""
    D = student_map(h, amap) - T
    return 0.5 * np.einsum("nlj,jk,nlk->n", D, C, D)


# --------------------------------------------------------------------------- numba kernels
@nb.njit(cache=True)
def _student_rows(h, Mh, mask, P):  # pragma: no cover - jitted
    """``S = rowsoftmax(s)`` at one node, ``s_lj = h_l . Mh_j`` (``Mh_j = M h_j``), masked
    entries zero."""
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
        for j in range(L):
            P[l, j] /= tot


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
def _node_test_loss(x, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, w, hs, u, S, T):  # pragma: no cover - jitted
    """``ell(w; T(h*))`` at one Gaussian node ``x = (xi, eta)`` (fields as in ``Saddle.fields``:
    ``w = m + xi qs``, ``h* = xi B + eta Rs``, both mixed across positions by ``mix``)."""
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
    _form_rows(M, w, u)  # (u <- M w_j, then the two maps)
    _student_rows(w, u, mask, S)
    _target_rows(hs, omega, A, causal, T)
    out = 0.0
    for l in range(L):
        for j in range(L):
            dj = S[l, j] - T[l, j]
            for k in range(L):
                out += dj * C[j, k] * (S[l, k] - T[l, k])
    return 0.5 * out


@nb.njit(cache=True, parallel=True)
def _test_loss_sum(X, W, t, wt, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, n_chunks):  # pragma: no cover - jitted
    """``sum_i w_i ell(x_i)`` over the nodes ``X`` with weights ``W``, or, where ``X`` has no
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
            acc += wi * _node_test_loss(x, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, w, hs, u, S, T)
        part[c] = acc
    return part.sum()


# Scratch space is allocated once per chunk of nodes (allocation inside the Newton loop dominated
# the run time otherwise). ``_work(L, F)`` returns the buffers in the order the kernels expect.
@nb.njit(cache=True)
def _work(L, F):  # pragma: no cover - jitted
    n = L * F
    return (
        np.zeros((L, F)), np.zeros((L, F)), np.zeros((L, L)), np.zeros((L, L)), np.zeros((L, L)),
        np.zeros((L, L)), np.zeros(L), np.zeros((L, L)), np.zeros((L, L)), np.zeros((L, n)),
        np.zeros((L, n)),
    )


@nb.njit(cache=True)
def _loss_grad_hess(h, T, C, M, mask, want_hess, grad, hess, wk):  # pragma: no cover - jitted
    """Loss, gradient (L*F) and optionally Hessian (L*F x L*F) of ell at one node."""
    Mh, MTh, P, Dm, E, gam, ep, Hs, J, Dl, HD = wk
    L, F = h.shape
    n = L * F
    _form_rows(M, h, Mh)
    _form_rows(M.T, h, MTh)
    _student_rows(h, Mh, mask, P)
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
            val += 0.5 * Dm[l, j] * acc
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
                acc += gam[a, j] * Mh[j, mu] + gam[j, a] * MTh[j, mu]
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
        for j in range(L):
            for k in range(L):
                acc = 0.0
                for a in range(L):
                    if P[l, a] == 0.0:
                        continue
                    for b in range(L):
                        acc += J[a, j] * C[a, b] * J[b, k]
                if j == k:
                    acc += gam[l, j]
                acc -= P[l, j] * P[l, k] * (E[l, j] + E[l, k] - 2.0 * ep[l])
                Hs[j, k] = acc
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
    for i in range(n):
        for k in range(i):
            hess[i, k] = hess[k, i]
    # second-order part of the scores: gam_ab M_mu,nu + gam_ba M_nu,mu
    for a in range(L):
        for b in range(L):
            for mu in range(F):
                for nu in range(F):
                    hess[a * F + mu, b * F + nu] += gam[a, b] * M[mu, nu] + gam[b, a] * M[nu, mu]
    return val


@nb.njit(cache=True)
def _objective(h, w, Winv, T, C, M, mask, grad, hess, want_hess, wk):  # pragma: no cover - jitted
    """Proximal objective ``(h - w)^T Winv (h - w) / 2 + ell(h; T)`` with ``Winv`` the inverse
    metric over all ``L * F`` field coordinates (``I_L (x) V^{-1}`` for uncorrelated tokens)."""
    L, F = h.shape
    n = L * F
    val = _loss_grad_hess(h, T, C, M, mask, want_hess, grad, hess, wk)
    for i in range(n):
        acc = 0.0
        for k in range(n):
            acc += Winv[i, k] * (h[k // F, k % F] - w[k // F, k % F])
        val += 0.5 * (h[i // F, i % F] - w[i // F, i % F]) * acc
        grad[i] += acc
        if want_hess:
            for k in range(n):
                hess[i, k] += Winv[i, k]
    return val


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
def _prox_kernel(w, T, starts, Winv, C, M, mask, max_iter, gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks, snap):  # pragma: no cover
    N, L, F = w.shape
    S = starts.shape[1]
    size = (N + n_chunks - 1) // n_chunks
    for c in nb.prange(n_chunks):
        wk = _work(L, F)
        nw = _newton_work(L, F)
        h = np.zeros((L, F))
        cand_gn = np.zeros(S)
        for i in range(c * size, min(N, (c + 1) * size)):
            best = 1e300
            for s in range(S):
                for l in range(L):
                    for a in range(F):
                        h[l, a] = starts[i, s, l, a]
                val, gn = _newton(h, w[i], Winv, T[i], C, M, mask, max_iter, gtol, wk, nw,
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
def _hessians(hh, T, C, M, mask, out):  # pragma: no cover - jitted
    N, L, F = hh.shape
    n = L * F
    for i in nb.prange(N):
        wk = _work(L, F)
        grad = np.zeros(n)
        _loss_grad_hess(hh[i], T[i], C, M, mask, True, grad, out[i], wk)


@nb.njit(cache=True, parallel=True)
def _values(hh, w, Winv, T, C, M, mask, out_val, out_grad):  # pragma: no cover - jitted
    N, L, F = hh.shape
    for i in nb.prange(N):
        wk = _work(L, F)
        dummy = np.zeros((1, 1))
        out_val[i] = _objective(hh[i], w[i], Winv, T[i], C, M, mask, out_grad[i], dummy, False, wk)


@nb.njit(cache=True, parallel=True)
def _second_minimum_kernel(best, cand, vals, distinct, out_h, out_v):  # pragma: no cover - jitted
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


# --------------------------------------------------------------------------- public wrappers
@dataclass(frozen=True)
class ProxResult:
    """Global proximal minimisers at all nodes.

    ``h`` (N, L, F) minimisers, ``value`` (N,) the minimal objective ``M``, ``grad_norm`` the
    final gradient max-norm, ``candidates`` (N, S, L, F) every local minimum reached (reused as
    warm starts), ``n_switch`` nodes whose best start was not the first one.
    """

    h: np.ndarray
    value: np.ndarray
    grad_norm: np.ndarray
    candidates: np.ndarray
    candidate_values: np.ndarray


def default_starts(w: np.ndarray, V: np.ndarray, spread: tuple[float, ...] = (1.5,)) -> np.ndarray:
    """Multi-start set per node: ``w``, ``-w``, ``0`` and ``w +- c V^{1/2} e_i`` for each field
    coordinate.

    The loss is bounded, so every minimiser lies within ``O(V^{1/2})`` of ``w``; the offsets
    cover that ball along each coordinate. One radius suffices: at the fixed points of ~60
    parameter sets (lambda 1e-3..0.1, sigma 0.5/1, omega 0..0.7, alpha 0.5/2, L = 2/3, rank
    1/2, tied/untied/causal, max V 1.3..228; 4096 nodes each) the radii (1.5,) and (1.0,) found
    the global minimum at every node that (1.0, 2.5, 4.0) found, and the previous default
    (1.0, 2.5) cost 1.6-1.7x as much (session 5; ``test_one_radius_finds_the_global_minimum``).
    The loss is even in ``h`` (bilinear scores), so minima come in near-mirror pairs when ``V`` is large; ``-w`` finds the mirror of
    the minimum reached from ``w`` (without it the full set missed the second minimum of some
    nodes near the switching surface that the warm-start set, which contains ``-h``, found).
    """
    N, L, F = w.shape
    evals, evecs = np.linalg.eigh(V)
    Vh = (evecs * np.sqrt(np.maximum(evals, 0.0))) @ evecs.T
    starts = [w, -w, np.zeros_like(w)]
    for c in spread:
        for l in range(L):
            for a in range(F):
                for sign in (1.0, -1.0):
                    s = w.copy()
                    s[:, l, :] += sign * c * Vh[a]
                    starts.append(s)
    return np.stack(starts, axis=1)


#: ``c_max(C) * lambda_max(V)`` (the loss's scale over the proximal curvature, both in the actual
#: field coordinates) above which the full multi-start set gets :func:`landscape_starts`. Measured
#: against brute-force starts (docs/theory.md, session 12): the default starts missed the global
#: minimum at 2-48 of 1024 nodes at ``sigma`` 1-2 (``c V`` 10.9-143; ``sigma = 1``, ``alpha = 1``:
#: 4 nodes, enough to keep the trivial and positional solves from converging) and at none at
#: ``sigma = 0.5`` (``c V`` up to 7.5 at ``lambda = 0.01``, 9.3 for rank 2 or untied keys and
#: queries, 62 at ``lambda = 1e-3``): an empirical bound, with thin margins on both sides
RUGGED = 10.0


def rugged(V: np.ndarray, C: np.ndarray, mix: np.ndarray | None = None) -> bool:
    """Whether the proximal problem is rugged enough for :func:`landscape_starts` (``RUGGED``).
    With a position mixing ``mix = P`` (correlated tokens) ``V`` is the whitened fields' and the
    actual fields' is ``P P^T (x) V``."""
    scale = float(np.linalg.eigvalsh(C).max() * np.linalg.eigvalsh(V).max())
    if mix is not None:
        scale *= float(np.linalg.eigvalsh(mix @ mix.T).max())
    return scale > RUGGED


def teacher_like(hstar: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Student fields shaped like ``w`` (N, L, F) that copy the teacher's: ``h*`` padded with zeros
    or cut to the student rank, in both blocks for untied keys/queries (``h_Q = h_K = h*``)."""
    N, L, rs = hstar.shape
    r = amap.rank
    h = np.zeros((N, L, r))
    k = min(r, rs)
    h[:, :, :k] = hstar[:, :, :k]
    return np.concatenate([h] * amap.blocks, axis=2)


def landscape_starts(w: np.ndarray, hstar: np.ndarray, T: np.ndarray, V: np.ndarray, C: np.ndarray,
                     amap: AttentionMap, mix: np.ndarray | None = None) -> np.ndarray:
    """Extra starts (N, L F + 4, L, F) for a rugged proximal problem (:func:`rugged`): ``w``
    with one field coordinate set to zero (that token's scores neutral: the minima that move one
    coordinate far from ``w``), the teacher's fields ``+-h*`` (:func:`teacher_like`; where the
    student copies the teacher the loss is that of the ``A`` part of the target only), and the
    minima of the loss alone reached from ``+-h*`` (a proximal problem with ``V * 1e6``).
    Measured against a grid of 21^2 starts per node (``L = 2``, 1024 nodes, 8 rugged points at
    ``sigma`` 1-2): misses 2-48 nodes with the default starts, 0 with these added at 7 of the 8
    points and 4 at the eighth (``sigma = 2``, ``alpha = 2``, positional)."""
    N, L, F = w.shape
    zero = np.repeat(w[:, None], L * F, axis=1)
    for i in range(L * F):
        zero[:, i, i // F, i % F] = 0.0
    h = teacher_like(hstar, amap)
    pm = np.ascontiguousarray(np.stack([h, -h], axis=1))
    loss_min = prox_batch(h, T, V * 1e6, C, amap, starts=pm, mix=mix).candidates
    return np.concatenate([zero, pm, loss_min], axis=1)


def prox_batch(
    w: np.ndarray,
    T: np.ndarray,
    V: np.ndarray,
    C: np.ndarray,
    amap: AttentionMap,
    starts: np.ndarray | None = None,
    max_iter: int = 60,
    gtol: float = 1e-11,
    mix: np.ndarray | None = None,
    snap: float = 1e-6,
    generic: bool = False,
) -> ProxResult:
    """Global minimiser of ``sum_l (h_l - w_l)^T V^{-1} (h_l - w_l)/2 + ell(h; T)`` at every node.

    ``w`` (N, L, F), ``T`` (N, L, L), ``V`` (F, F) positive definite. ``starts`` (N, S, L, F)
    defaults to :func:`default_starts`. With a position mixing ``mix = P`` (L x L; correlated
    tokens, :class:`attnphase.theory.saddle.Saddle`) the fields are ``h = P h~`` of whitened fields
    with metric ``V^{-1}`` per position, i.e. the metric is ``(P P^T)^{-1} (x) V^{-1}``.

    The geometries of :data:`attnphase.theory.unrolled.generate.GEOMETRIES` (the reference case
    and issue 5's sizes) go to the same iteration written out on scalars (6-12x faster) unless
    ``generic``.
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    T = np.ascontiguousarray(T, dtype=np.float64)
    if starts is None:
        starts = default_starts(w, V)
    starts = np.ascontiguousarray(starts, dtype=np.float64)
    N, L, F = w.shape
    S = starts.shape[1]
    Winv = _metric(V, L, mix)
    out_h = np.empty_like(w)
    out_val = np.empty(N)
    out_gn = np.empty(N)
    cand_h = np.empty((N, S, L, F))
    cand_val = np.empty((N, S))
    n_chunks = max(1, min(N, 4 * nb.get_num_threads()))
    C = np.ascontiguousarray(C, dtype=np.float64)
    unrolled = None if generic else unrolled_kernel(amap, L)
    if unrolled is not None:
        n = L * F
        unrolled(w.reshape(N, n), T, starts.reshape(N, S, n), Winv, C, max_iter, gtol, out_h.reshape(N, n), out_val,
                 out_gn, cand_h.reshape(N, S, n), cand_val, n_chunks, snap)
    else:
        _prox_kernel(w, T, starts, Winv, C, np.ascontiguousarray(amap.M, dtype=np.float64), amap.mask, max_iter,
                     gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks, snap)
    return ProxResult(out_h, out_val, out_gn, cand_h, cand_val)


#: a returned minimiser this close to ``h = 0`` (max-norm) is checked for a saddle (see
#: :func:`escape_saddles`)
SADDLE_RADIUS = 1e-6


def escape_saddles(prox: ProxResult, w: np.ndarray, T: np.ndarray, V: np.ndarray, C: np.ndarray,
                   amap: AttentionMap, starts: np.ndarray, mix: np.ndarray | None = None) -> ProxResult:
    """Re-solve the nodes whose returned minimiser is the saddle ``h = 0`` of the proximal objective.

    The loss is stationary at ``h = 0`` (bilinear scores), and a Newton start within ``gtol`` of
    a stationary point stops there: where every prior mean ``w`` is ~0 (``q -> 0``) the starts
    ``w``, ``-w``, ``0`` all sit at ``h = 0``, which is a saddle wherever ``V^-1 + ell''(0)`` is
    indefinite, and the axis starts did not find the minima either (seen at ``alpha = 50``,
    ``q = 1e-22``, ``V = 25``: ``M`` 0.0440 at ``h = 0`` against 0.0216 at ``h = (-0.65, 0.65)``).
    Those nodes (minimiser within ``SADDLE_RADIUS`` of 0 and an objective Hessian with a negative
    eigenvalue) are solved again, the starts that ended at the saddle replaced by the saddle
    displaced by ``+-V^{1/2}`` along the most negative direction. Elsewhere nothing changes (at
    the fixed points of the reference case no returned minimiser is a saddle).
    """
    L, F = w.shape[1:]
    near = np.flatnonzero(np.max(np.abs(prox.h), axis=(1, 2)) < SADDLE_RADIUS)
    if near.size == 0:
        return prox
    Winv = _metric(V, L, mix)
    H = loss_hessian_batch(prox.h[near], T[near], C, amap) + Winv[None]
    ev, vec = np.linalg.eigh(H)
    bad = ev[:, 0] < 0
    if not np.any(bad):
        return prox
    idx = near[bad]
    v = vec[bad, :, 0].reshape(-1, L, F) * np.sqrt(float(np.max(np.linalg.eigvalsh(V))))
    st = starts[idx].copy()
    at_saddle = np.max(np.abs(prox.candidates[idx] - prox.h[idx][:, None]), axis=(2, 3)) < SADDLE_RADIUS
    sign = np.where(np.arange(st.shape[1]) % 2 == 0, 1.0, -1.0)
    st = np.where(at_saddle[:, :, None, None], prox.h[idx][:, None] + sign[None, :, None, None] * v[:, None], st)
    sub = prox_batch(w[idx], T[idx], V, C, amap, starts=st, mix=mix)
    better = sub.value < prox.value[idx]
    if not np.any(better):
        return prox
    out = [a.copy() for a in (prox.h, prox.value, prox.grad_norm, prox.candidates, prox.candidate_values)]
    j = idx[better]
    for a, b in zip(out, (sub.h, sub.value, sub.grad_norm, sub.candidates, sub.candidate_values), strict=True):
        a[j] = b[better]
    return ProxResult(*out)


def unrolled_kernel(amap: AttentionMap, L: int) -> Callable | None:
    """The kernel written out for this geometry (:mod:`attnphase.theory.unrolled`), if there is one."""
    from attnphase.theory.unrolled.generate import GEOMETRIES  # noqa: PLC0415

    for g in GEOMETRIES:
        if (g.L, g.F) == (L, amap.field_dim) and np.array_equal(g.M, amap.M) and np.array_equal(g.mask, amap.mask):
            return importlib.import_module(f"attnphase.theory.unrolled.k_{g.name}").prox_kernel
    return None


def _metric(V: np.ndarray, L: int, mix: np.ndarray | None) -> np.ndarray:
    """Inverse metric ``(P P^T)^{-1} (x) V^{-1}`` over the flattened fields (``P = I`` by default)."""
    Vinv = np.linalg.inv(V)
    Vinv = 0.5 * (Vinv + Vinv.T)
    pos = np.eye(L) if mix is None else np.linalg.inv(mix @ mix.T)
    Winv = np.kron(0.5 * (pos + pos.T), Vinv)
    return np.ascontiguousarray(Winv)


def objective_batch(
    h: np.ndarray, w: np.ndarray, T: np.ndarray, V: np.ndarray, C: np.ndarray, amap: AttentionMap,
    mix: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Proximal objective and its gradient at given ``h`` (N, L, F) (for tests and checks)."""
    N, L, F = h.shape
    val = np.empty(N)
    grad = np.empty((N, L * F))
    _values(
        np.ascontiguousarray(h, dtype=np.float64), np.ascontiguousarray(w, dtype=np.float64),
        _metric(V, L, mix), np.ascontiguousarray(T, dtype=np.float64), C.astype(np.float64),
        amap.M.astype(np.float64), amap.mask, val, grad,
    )
    return val, grad


def loss_hessian_batch(h: np.ndarray, T: np.ndarray, C: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Hessian of ``ell`` (not of the proximal objective) at ``h``: shape (N, L*F, L*F)."""
    N, L, F = h.shape
    out = np.empty((N, L * F, L * F))
    _hessians(
        np.ascontiguousarray(h, dtype=np.float64), np.ascontiguousarray(T, dtype=np.float64), C.astype(np.float64),
        amap.M.astype(np.float64), amap.mask, out,
    )
    return out
