"""Students and the dense linear baseline at finite ``d`` (docs/model.md sections 1 and 6).

Batched layout. Parameters of many runs are stacked on two leading axes ``(D, K)``:
``D`` datasets (one per seed) and ``K`` runs per dataset (the starts). The query/key columns of a
run
live in ``P[D, K] in R^{d x c}`` with ``c = r`` (tied, causal) or ``c = 2r`` (untied: ``[Q, K]``).

The per-sample loss never needs the ``d``-dimensional prediction. With ``S`` the student attention
(``L x L``) and ``x~ = x V^T`` the value-mapped tokens,
``||y - S x~||^2 = ||y||^2 - 2 <S, y x~^T> + <S (x~ x~^T), S>``,
so for the identity value only the ``L x L`` Grams ``x x^T``, ``y x^T`` and ``||y||^2``
(precomputed once)
and the fields ``h = x P / sqrt(d)`` (one batched matmul per step) enter. The gradient goes back
through
the same matmul, ``dR/dP = X^T dH / sqrt(d) + lambda P``. Peak memory per run is ``O(n L (L + c))``
on
top of the shared ``O(n L d)`` data; nothing of size ``n x d x d`` or ``n x L x L x d`` is formed.

Value matrices (simulation-only, docs/model.md (6.4)):

* ``identity``: ``V = I_d`` (docs/model.md (1.3)).
* ``lowrank``: ``V = I_d + U W^T / d`` with trainable ``U, W in R^{d x p}``, ``p =
spec.value_rank``,
  ridge ``(lambda / 2)(||U||^2 + ||W||^2)``; start ``U = 0`` (so ``V = I``), ``W = 0.1 N(0, I)``.
  The Grams become ``x~ x~^T = x x^T + (a b^T + b a^T)/d + a U^T U a^T / d^2`` and
  ``y x~^T = y x^T + c a^T / d`` with ``a = x W``, ``b = x U``, ``c = y U``: still ``O(n L d p)``.
* ``full``: ``V = I_d + M / sqrt(d)`` with trainable ``M in R^{d x d}``, ridge ``(lambda/2)
||M||^2``,
  start ``M = 0``. It forms ``x~`` (``n x L x d`` per run) and costs ``O(n L d^2)`` per step: small
  ``d`` only.
* ``gain``: ``V = v I_d`` with one trainable scalar ``v`` per run (docs/model.md (6.5)), stored as
  ``g = sqrt(d) v`` (the coordinate in which the curvature of ``R`` is ``O(alpha)``, like that of
  ``Q``'s entries, so one learning rate and the stopping rule on ``||grad||/sqrt(d)`` serve both),
  no ridge (a ridge of order one on one scalar is ``O(1/d)`` of ``R/d``); start
  ``v = spec.gain_start`` (``value_gain``, 1 when unset). The Grams become ``v^2 x x^T`` and ``v y x^T``: the cost of the
  identity value.

Cross-attention (docs/model.md section 10) is the tied or untied student on the ``L + L'`` tokens
of :mod:`attnphase.sim.data` with the cross mask: its risk is that of ``yhat = softmax(h h'^T) x'``
exactly (the key rows add zero).

Gradients: an analytic gradient for the identity value (all the attention variants) and autograd
through the same batched objective for every case; :func:`objective` chooses.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from attnphase.sim.data import attention_map
from attnphase.spec.attention import attention_model, score_mask
from attnphase.spec.problem import ModelSpec


def is_untied(spec: ModelSpec) -> bool:
    return not attention_model(spec.variant).tied


def student_mask(spec: ModelSpec, device: torch.device | str = "cpu") -> torch.Tensor | None:
    """The scores the student attends to, ``(L, L)`` booleans, from the registry's mask
    (:func:`attnphase.spec.attention.score_mask`; for cross-attention over the ``L + L'`` tokens);
    ``None`` where every score is kept."""
    if not attention_model(spec.variant).masked:
        return None
    return torch.as_tensor(_mask(spec.variant, spec.tokens, spec.L_keys if spec.is_cross else 0), device=device)


@functools.lru_cache(maxsize=64)
def _mask(variant: str, tokens: int, keys: int) -> np.ndarray:
    return score_mask(variant, tokens, keys)


def query_columns(spec: ModelSpec) -> int:
    """Columns of the query ``Q``: the rank ``r``, or one per head (``H`` heads of rank 1,
    docs/model.md (11.1))."""
    return spec.rank * spec.heads


def n_columns(spec: ModelSpec) -> int:
    """Columns of ``P`` per run: ``r`` (tied; ``H`` for ``H`` heads) or ``2r`` (untied ``[Q, K]``)."""
    return 2 * spec.rank if is_untied(spec) else query_columns(spec)


@dataclass(frozen=True, eq=False)
class Batch:
    """Training data of ``D`` datasets stacked on a leading axis (see :mod:`attnphase.sim.data`)."""

    X: torch.Tensor  # (D, n, L, d)
    Sxx: torch.Tensor  # (D, n, L, L)
    Syx: torch.Tensor  # (D, n, L, L)
    yy: torch.Tensor  # (D, n)
    Y: torch.Tensor | None = None  # (D, n, L, d), only for trainable values


def project(X: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """``X P`` for ``X (D, n, L, d)`` and ``P (D, K, d, c)`` -> ``(D, K, n, L, c)``.

    Computed as one ``bmm`` of the short matrix ``P^T (K c x d)`` with ``X^T`` (measured faster on
    CPU than ``X P`` with a skinny right factor).
    """
    D, n, L, d = X.shape
    K, c = P.shape[1], P.shape[3]
    Pt = P.permute(0, 1, 3, 2).reshape(D, K * c, d)
    out = torch.bmm(Pt, X.reshape(D, n * L, d).transpose(1, 2))  # (D, K c, n L)
    return out.reshape(D, K, c, n, L).permute(0, 1, 3, 4, 2)


def back_project(X: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Adjoint of :func:`project`: ``X^T G`` for ``G (D, K, n, L, c)`` -> ``(D, K, d, c)``."""
    D, n, L, d = X.shape
    K, c = G.shape[1], G.shape[4]
    Gt = G.permute(0, 1, 4, 2, 3).reshape(D, K * c, n * L)
    out = torch.bmm(Gt, X.reshape(D, n * L, d))  # (D, K c, d)
    return out.reshape(D, K, c, d).permute(0, 1, 3, 2)


def scores(spec: ModelSpec, H: torch.Tensor) -> torch.Tensor:
    """Attention scores from fields ``H (..., L, c)``: ``h h^T`` (tied) or ``h_Q h_K^T``
    (untied); for ``H`` heads, one ``(L, L)`` block per head on a new axis before the last two,
    ``h_k h_k^T`` (docs/model.md (11.1))."""
    r = spec.rank
    if is_untied(spec):
        return H[..., :r] @ H[..., r:].transpose(-1, -2)
    if spec.heads > 1:
        return H.transpose(-1, -2).unsqueeze(-1) * H.transpose(-1, -2).unsqueeze(-2)
    return H @ H.transpose(-1, -2)


def attention(spec: ModelSpec, H: torch.Tensor, gains: torch.Tensor | None = None) -> torch.Tensor:
    """Student attention ``S = phi(scores)``, masked by the model's mask (:func:`student_mask`;
    for cross-attention over the ``L + L'`` tokens, a query attending to the keys, a key to itself:
    docs/model.md (10.5)); ``phi`` the student's activation. With ``H`` heads, ``S = sum_k v_k
    phi(h_k h_k^T)`` with the gains ``v`` (``gains (..., H)``; default ``1/H``, docs/model.md (11.1))."""
    A = attention_map(spec.activation, scores(spec, H), student_mask(spec, H.device))
    return A if spec.heads == 1 else combine_heads(A, head_weights(spec, gains, A))


def head_weights(spec: ModelSpec, gains: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """The gains ``v`` of the heads: the trained ones ``(D, K, 1, H)``, or the fixed ones ``(H,)``
    (``spec.head_gain_array``: ``1/H`` each by default; docs/model.md (11.1))."""
    if gains is not None:
        return gains
    return torch.as_tensor(spec.head_gain_array, dtype=like.dtype, device=like.device)


def combine_heads(A: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``S = sum_k v_k A_k`` from the heads' maps ``A (..., H, L, L)`` and their gains ``w``."""
    return (w.unsqueeze(-1).unsqueeze(-1) * A).sum(dim=-3)


def gram_loss(
    S: torch.Tensor, xx: torch.Tensor, yx: torch.Tensor, yy: torch.Tensor, d: int
) -> torch.Tensor:
    """Per-sample ``||y - S x||^2 / (2d)`` from Grams ``xx = x x^T``, ``yx = y x^T`` and ``yy =
    ||y||^2``."""
    cross = (S * yx).sum(dim=(-1, -2))
    quad = ((S @ xx) * S).sum(dim=(-1, -2))
    return (yy - 2.0 * cross + quad) / (2.0 * d)


def value_grams(
    spec: ModelSpec,
    params: dict[str, torch.Tensor],
    X: torch.Tensor,
    Sxx: torch.Tensor,
    Syx: torch.Tensor,
    Y: torch.Tensor | None,
    H_value: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x~ x~^T, y x~^T)`` per run and sample, broadcastable to ``(D, K, n, L, L)``."""
    d = X.shape[-1]
    if spec.value == "identity":
        return Sxx.unsqueeze(1), Syx.unsqueeze(1)
    if spec.value == "gain":  # V = v I, v = g / sqrt(d) (docs/model.md (6.5))
        v = (params["g"] / math.sqrt(d)).unsqueeze(2)  # (D, K, 1, 1, 1)
        return v * v * Sxx.unsqueeze(1), v * Syx.unsqueeze(1)
    if Y is None:
        raise ValueError(f"value={spec.value!r} needs the labels (make_dataset(keep_labels=True))")
    if spec.value == "lowrank":
        p = spec.value_rank
        assert H_value is not None
        b, a = H_value[..., :p], H_value[..., p:]  # x U, x W: (D, K, n, L, p)
        U = params["U"]
        c = project(Y, U)  # y U
        UtU = U.transpose(-1, -2) @ U  # (D, K, p, p)
        aUtU = a @ UtU.unsqueeze(2)
        xx = Sxx.unsqueeze(1) + (a @ b.transpose(-1, -2) + b @ a.transpose(-1, -2)) / d
        xx = xx + (aUtU @ a.transpose(-1, -2)) / d**2
        yx = Syx.unsqueeze(1) + (c @ a.transpose(-1, -2)) / d
        return xx, yx
    # full: x~ = x + x M^T / sqrt(d), formed explicitly (O(n L d) per run)
    M = params["M"]
    xt = X.unsqueeze(1) + torch.einsum("bnld,bked->bknle", X, M) / math.sqrt(d)
    xx = xt @ xt.transpose(-1, -2)
    yx = torch.einsum("bnld,bknmd->bknlm", Y, xt)
    return xx, yx


def _fields(spec: ModelSpec, params: dict[str, torch.Tensor], X: torch.Tensor):
    """Attention fields ``(D, K, n, L, c)`` and value fields ``[x U, x W]`` (lowrank) in one bmm."""
    d = X.shape[-1]
    P = params["P"]
    if spec.value == "lowrank":
        c = P.shape[-1]
        allp = torch.cat([P * (1.0 / math.sqrt(d)), params["U"], params["W"]], dim=-1)
        F = project(X, allp)
        return F[..., :c], F[..., c:]
    return project(X, P) / math.sqrt(d), None


def ridge(spec: ModelSpec, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(lambda / 2) sum ||param||^2`` per run, shape ``(D, K)`` (the gain ``g`` of a ``gain``
    value and the head gains ``vh`` have none)."""
    total = cast(torch.Tensor, sum((p * p).sum(dim=(-1, -2)) for k, p in params.items() if k not in ("g", "vh")))
    return 0.5 * spec.lam * total


def objective(
    spec: ModelSpec,
    batch: Batch,
    params: dict[str, torch.Tensor],
    grad: str = "auto",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Summed risk ``R`` per run (shape ``(D, K)``) and its gradient (docs/model.md (1.3)).

    ``grad``: ``"analytic"`` (identity value only), ``"autograd"``, or ``"auto"`` (analytic when
    possible).
    """
    if grad == "auto":
        grad = "analytic" if _analytic_covers(spec) else "autograd"
    if grad == "analytic":
        if not _analytic_covers(spec):
            raise ValueError("the analytic gradient covers value='identity' only; use autograd")
        return _analytic(spec, batch, params)
    if grad != "autograd":
        raise ValueError(f"unknown gradient mode {grad!r}; choose analytic, autograd or auto")
    with torch.enable_grad():
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        R = risk(spec, batch, leaves)
        grads = torch.autograd.grad(R.sum(), list(leaves.values()))
    return R.detach(), {k: g for k, g in zip(leaves, grads, strict=True)}


def _analytic_covers(spec: ModelSpec) -> bool:
    return spec.value == "identity"


def head_gains(spec: ModelSpec, params: dict[str, torch.Tensor], d: int) -> torch.Tensor | None:
    """The gains ``v_h`` of trained heads, ``(D, K, 1, H)`` (stored as ``sqrt(d) v``, as the value
    gain is, docs/model.md (6.5)); ``None`` for fixed gains (:func:`head_weights`)."""
    return params["vh"] / math.sqrt(d) if "vh" in params else None


def risk(spec: ModelSpec, batch: Batch, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``R = sum_mu ||y - yhat||^2 / (2d) + ridge`` per run, differentiable (autograd path)."""
    d = batch.X.shape[-1]
    H, Hv = _fields(spec, params, batch.X)
    S = attention(spec, H, head_gains(spec, params, d))
    xx, yx = value_grams(spec, params, batch.X, batch.Sxx, batch.Syx, batch.Y, Hv)
    per = gram_loss(S, xx, yx, batch.yy.unsqueeze(1), d)
    return per.sum(dim=-1) + ridge(spec, params)


def _analytic(
    spec: ModelSpec, batch: Batch, params: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    d = batch.X.shape[-1]
    P = params["P"]
    H = project(batch.X, P) / math.sqrt(d)
    mask = student_mask(spec, H.device)
    s = scores(spec, H)
    A = attention_map(spec.activation, s, mask)  # (D, K, n, L, L), heads: (D, K, n, H, L, L)
    gains = head_gains(spec, params, d)
    if spec.heads == 1:
        S = A
    else:
        w = head_weights(spec, gains, A)
        S = combine_heads(A, w)
    xx, yx = batch.Sxx.unsqueeze(1), batch.Syx.unsqueeze(1)
    Sxx_S = S @ xx
    per = (batch.yy.unsqueeze(1) - 2.0 * (S * yx).sum(dim=(-1, -2)) + (Sxx_S * S).sum(dim=(-1, -2)))
    R = per.sum(dim=-1) / (2.0 * d) + ridge(spec, params)
    dS = (Sxx_S - yx) / d  # dl/dS
    out: dict[str, torch.Tensor] = {}
    if spec.heads == 1:
        Ds = _map_backward(spec.activation, s, A, dS, mask)
    else:
        Ds = _map_backward(spec.activation, s, A, w.unsqueeze(-1).unsqueeze(-1) * dS.unsqueeze(-3), mask)
        if gains is not None:  # dR/dv_h = sum_mu <dS, phi(s^h)>, and vh = sqrt(d) v_h
            dv = (dS.unsqueeze(-3) * A).sum(dim=(-1, -2)).sum(dim=2)  # (D, K, H)
            out["vh"] = (dv / math.sqrt(d)).unsqueeze(2)
    r = spec.rank
    if is_untied(spec):
        hq, hk = H[..., :r], H[..., r:]
        dH = torch.cat([Ds @ hk, Ds.transpose(-1, -2) @ hq], dim=-1)
    elif spec.heads > 1:  # head k: s^k = h_k h_k^T
        hT = H.transpose(-1, -2).unsqueeze(-1)  # (D, K, n, H, L, 1)
        dH = ((Ds + Ds.transpose(-1, -2)) @ hT).squeeze(-1).transpose(-1, -2)
    else:
        dH = (Ds + Ds.transpose(-1, -2)) @ H
    out["P"] = back_project(batch.X, dH) / math.sqrt(d) + spec.lam * P
    return R, out


def _map_backward(name: str, s: torch.Tensor, A: torch.Tensor, dA: torch.Tensor,
                  mask: torch.Tensor | None) -> torch.Tensor:
    """``dl/ds`` from ``dl/dA`` through the attention map ``A = phi(s)`` (:func:`attention_map`;
    masked entries have ``A = 0`` and no gradient)."""
    if name == "softmax":
        return A * (dA - (dA * A).sum(dim=-1, keepdim=True))
    L = s.shape[-1]
    if name == "sigmoid":
        slope = A * (1.0 - A)
    elif name == "relu":
        slope = (s > 0).to(s.dtype) / L
    else:
        slope = torch.full_like(s, 1.0 / L)
    out = dA * slope
    return out if mask is None else torch.where(mask, out, torch.zeros((), dtype=out.dtype, device=out.device))


def test_errors(
    spec: ModelSpec, dataset_chunks, params: dict[str, torch.Tensor], d: int
) -> torch.Tensor:
    """Mean per-sample test error ``||y - yhat||^2 / (2d)`` per run from streamed test chunks.

    ``dataset_chunks`` is a list (one per dataset) of chunk iterators from
    :meth:`attnphase.sim.data.Dataset.test_chunks`, all of equal total size.
    """
    total = None
    count = 0
    with torch.no_grad():
        for chunks in zip(*dataset_chunks, strict=True):
            X = torch.stack([c["X"] for c in chunks])
            Y = torch.stack([c["Y"] for c in chunks]) if "Y" in chunks[0] else None
            Sxx = torch.stack([c["Sxx"] for c in chunks])
            Syx = torch.stack([c["Syx"] for c in chunks])
            yy = torch.stack([c["yy"] for c in chunks])
            H, Hv = _fields(spec, params, X)
            S = attention(spec, H, head_gains(spec, params, d))
            xx, yx = value_grams(spec, params, X, Sxx, Syx, Y, Hv)
            s = gram_loss(S, xx, yx, yy.unsqueeze(1), d).sum(dim=-1)
            total = s if total is None else total + s
            count += X.shape[1]
    assert total is not None
    return total / count


# ------------------------------------------------------------------ linear baseline
def linear_fit(Sxx: torch.Tensor, Syx: torch.Tensor, d: int, lam_lin: float) -> torch.Tensor:
    """Closed-form ridge for ``yhat = B x`` (docs/model.md (1.3)).

    Minimises ``sum_mu ||y - B x||^2 / (2d) + (lam_lin / 2) ||B||^2`` (the same convention as
    ``R``):
    ``B = (sum y x^T)(sum x x^T + d lam_lin I)^{-1}``. Grams ``(..., n, L, L)`` -> ``B (..., L,
    L)``.
    """
    L = Sxx.shape[-1]
    A = Sxx.sum(dim=-3) + d * lam_lin * torch.eye(L, dtype=Sxx.dtype, device=Sxx.device)
    Byx = Syx.sum(dim=-3)
    # B A = Byx  <=>  A^T B^T = Byx^T (A symmetric)
    return torch.linalg.solve(A, Byx.transpose(-1, -2)).transpose(-1, -2)


def linear_errors(B: torch.Tensor, Sxx: torch.Tensor, Syx: torch.Tensor, yy: torch.Tensor, d: int):
    """Per-sample ``||y - B x||^2 / (2d)`` for ``B (..., L, L)`` and Grams ``(..., n, L, L)``."""
    return gram_loss(B.unsqueeze(-3), Sxx, Syx, yy, d)
