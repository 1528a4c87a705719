"""Data generation at finite ``d`` (docs/model.md (1.1)-(1.2)).

A sample is ``x in R^{L x d}`` with rows ``x_l = pi_l / sqrt(d) + z_l``. The token noise has
covariance ``E[z_l z_k^T] = C_{lk} I_d`` (docs/model.md (6.3); ``C = sigma^2 I`` is the reference case)
and is realised as ``z = chol(C) g`` with ``g`` standard normal. The teacher
``Q* in R^{d x r*}`` has i.i.d. ``N(0, 1)`` entries; its fields use the tokens *without*
positions, ``h*_l = Q*^T z_l / sqrt(d)``, and the label is ``y = T(h*) z`` with
``T(h*) = (1 - omega) softmax(h* h*^T) + omega A`` (masked causal softmax when
``spec.causal_target``).

Cross-attention (docs/model.md section 10): a sample holds the ``L`` query tokens ``x`` and the
``L'`` key tokens ``x'`` (independent noise, their own embeddings; ``spec.tokens = L + L'`` rows,
queries first). The label's query rows are ``y = T z'``; its key rows are the key tokens
themselves, which the student's key rows (each attending to itself only) reproduce exactly, so
they add nothing to the loss (docs/model.md (10.5)).

Positional embeddings. ``Pi in R^{L x d}`` must satisfy ``Pi Pi^T / d = G`` (``spec.positions``).
We build it as ``Pi = F W``: ``F`` is the lower-triangular (semi-definite) Cholesky factor of ``G``
(``F F^T = G``, first row ``(1, 0, ..., 0)``) and ``W`` has ``L`` rows taken from the Walsh
(Sylvester-Hadamard) functions ``w_j[i] = (-1)^{popcount(i & j)}``, ``j = 0..L-1``, so that ``w_0 =
1_d``.
These rows are exactly orthogonal with entries ``+-1`` whenever ``d`` is a multiple of the
next power of two ``>= L``; otherwise they are Gram-Schmidt orthogonalised in order
(``w_0 = 1_d`` is kept) and rescaled to norm ``sqrt(d)``. Consequences: ``pi_1 = 1_d`` always, and
for
``L = 2`` with the default ``G = [[1, -1], [-1, 1]]`` exactly ``pi_1 = 1_d, pi_2 = -1_d``.

Reproducibility. Every random array comes from its own ``torch.Generator`` whose seed is derived
from ``(seed, stream, chunk)`` with :class:`numpy.random.SeedSequence`; samples are drawn in chunks
of
:data:`CHUNK` sequences in float64 and cast afterwards, so the same seed gives the same numbers for
any ``dtype``/device, and the test set (stream 2) is independent of the training set (stream 1).
The test set is never stored: it is regenerated chunk by chunk when it is evaluated.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnphase.spec.attention import score_mask
from attnphase.spec.problem import ModelSpec

#: Sequences drawn per random chunk (part of the reproducibility contract: do not change lightly).
CHUNK = 256

_STREAM_TEACHER = 0
_STREAM_TRAIN = 1
_STREAM_TEST = 2
STREAM_INIT = 3


def derived_seed(*keys: int) -> int:
    """A 63-bit seed derived from integer keys (stable across platforms and versions)."""
    state = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def generator(*keys: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from ``keys`` via :func:`derived_seed`."""
    g = torch.Generator(device="cpu")
    g.manual_seed(derived_seed(*keys))
    return g


def psd_cholesky(G: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Lower-triangular ``F`` with ``F F^T = G`` for a positive *semi*-definite ``G``.

    Columns with a vanishing pivot are set to zero (no pivoting, so the first row stays
    ``(sqrt(G_11), 0, ...)``). Raises ``ValueError`` if the result does not reproduce ``G``.
    """
    G = np.asarray(G, dtype=float)
    L = G.shape[0]
    F = np.zeros_like(G)
    for i in range(L):
        for j in range(i):
            if F[j, j] > tol:
                F[i, j] = (G[i, j] - F[i, :j] @ F[j, :j]) / F[j, j]
        F[i, i] = math.sqrt(max(G[i, i] - F[i, :i] @ F[i, :i], 0.0))
    if not np.allclose(F @ F.T, G, atol=1e-8):
        raise ValueError("positions Gram matrix cannot be factorised (not positive semi-definite?)")
    return F


def walsh_rows(L: int, d: int) -> np.ndarray:
    """``L`` mutually orthogonal rows of norm ``sqrt(d)``, ``+-1`` Walsh functions when possible.

    Row 0 is ``1_d``. See the module docstring for the construction.
    """
    i = np.arange(d)
    W = np.empty((L, d))
    for j in range(L):
        bits = np.bitwise_and(i, j)
        parity = np.array([bin(int(b)).count("1") & 1 for b in bits]) if j else np.zeros(d, int)
        W[j] = 1.0 - 2.0 * parity
    if not np.allclose(W @ W.T, d * np.eye(L), atol=1e-9):
        for j in range(1, L):  # in-order Gram-Schmidt keeps w_0 = 1_d
            for k in range(j):
                W[j] -= (W[j] @ W[k]) / (W[k] @ W[k]) * W[k]
            norm = np.linalg.norm(W[j])
            if norm < 1e-8:
                raise ValueError(f"cannot build {L} orthogonal embeddings in d={d}")
            W[j] *= math.sqrt(d) / norm
    return W


def positional_embeddings(G: np.ndarray, d: int) -> np.ndarray:
    """``Pi in R^{L x d}`` with ``Pi Pi^T / d = G`` (construction in the module docstring)."""
    G = np.asarray(G, dtype=float)
    L = G.shape[0]
    if d < L:
        raise ValueError(f"d must be >= L to embed {L} positions, got d={d}")
    return psd_cholesky(G) @ walsh_rows(L, d)


def cross_mask(spec: ModelSpec, device: torch.device | str = "cpu") -> torch.Tensor:
    """The scores a token attends to in cross-attention, ``(L + L', L + L')`` booleans: a query the
    keys, a key itself (docs/model.md (10.2); :func:`attnphase.spec.attention.score_mask`)."""
    return torch.as_tensor(score_mask(spec.variant, spec.tokens, spec.L_keys), device=device)


def causal_mask(L: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The causal mask, ``(L, L)`` booleans: token ``l`` attends to ``k <= l`` (docs/model.md (6.2);
    :func:`attnphase.spec.attention.score_mask`)."""
    return torch.as_tensor(score_mask("causal", L), device=device)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise softmax over the last axis of ``(..., L, L)`` scores, over the entries where
    ``mask`` (booleans, ``True`` kept: :func:`causal_mask`, :func:`cross_mask`) is set; all of
    them without one."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # explicit form: measured ~3x faster than torch.softmax for the tiny L x L rows used here
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def attention_map(name: str, s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The attention map ``name`` of :data:`attnphase.spec.attention.ACTIVATIONS` applied to the
    scores ``s (..., L, L)``, zero where ``mask`` is unset (docs/model.md (11.2)): the row softmax,
    or element-wise ``sigmoid(s - log L)``, ``max(s, 0) / L`` or ``s / L``."""
    if name == "softmax":
        return masked_softmax(s, mask)
    L = s.shape[-1]
    if name == "sigmoid":
        out = torch.sigmoid(s - math.log(L))
    elif name == "relu":
        out = torch.relu(s) / L
    elif name == "linear":
        out = s / L
    else:
        raise ValueError(f"unknown activation {name!r}")
    return out if mask is None else torch.where(mask, out, torch.zeros((), dtype=out.dtype, device=out.device))


def teacher_attention(spec: ModelSpec, h_star: torch.Tensor) -> torch.Tensor:
    """``T(h*) = (1 - omega) phi*(h* h*^T) + omega A`` for fields ``h*`` of shape ``(..., L,
    r*)``, ``phi*`` the teacher's activation (the softmax by default; docs/model.md (1.2), (11.2));
    cross-attention: over the ``L + L'`` tokens, masked, docs/model.md (10.2)."""
    A = torch.as_tensor(spec.A_tokens, dtype=h_star.dtype, device=h_star.device)
    mask = (cross_mask(spec, h_star.device) if spec.is_cross
            else causal_mask(spec.tokens, h_star.device) if spec.causal_target else None)
    S = attention_map(spec.teacher_activation, h_star @ h_star.transpose(-1, -2), mask)
    return (1.0 - spec.omega) * S + spec.omega * A


@dataclass(frozen=True, eq=False)
class Dataset:
    """One training set (tensors in the working dtype/device) plus what is needed to draw its test
    set.

    The tensors:

    - ``X``: ``(n, L, d)`` training tokens; ``Y``: ``(n, L, d)`` labels or ``None`` when not kept.
    - ``Sxx``: ``(n, L, L)`` Grams ``x x^T``; ``Syx``: ``(n, L, L)`` Grams ``y x^T``; ``yy``:
      ``(n,)`` ``||y||^2`` (computed in float64 before the cast).
    - ``Q_star``: ``(d, r*)`` teacher; ``Pi``: ``(L, d)`` embeddings.
    - ``means``: ``(K, d)`` Gaussian-mixture means ``mu_k`` (docs/model.md (9.1)), ``None``
      without a mixture.
    """

    spec: ModelSpec
    d: int
    n: int
    n_test: int
    seed: int
    X: torch.Tensor
    Y: torch.Tensor | None
    Sxx: torch.Tensor
    Syx: torch.Tensor
    yy: torch.Tensor
    Q_star: torch.Tensor
    Pi: torch.Tensor
    means: torch.Tensor | None = None

    def test_chunks(self, keep_labels: bool = False) -> Iterator[dict[str, torch.Tensor]]:
        """The fresh test set, chunk by chunk (same numbers on every call)."""
        dtype, device = self.X.dtype, self.X.device
        Qs = self.Q_star.to(torch.float64).cpu()
        Pi = self.Pi.to(torch.float64).cpu()
        means = None if self.means is None else self.means.to(torch.float64).cpu()
        for c, size in enumerate(_chunk_sizes(self.n_test)):
            x, y = _draw(self.spec, Qs, Pi, size, generator(self.seed, _STREAM_TEST, c), means)
            out = {
                "X": x.to(device=device, dtype=dtype),
                "Sxx": (x @ x.transpose(1, 2)).to(device=device, dtype=dtype),
                "Syx": (y @ x.transpose(1, 2)).to(device=device, dtype=dtype),
                "yy": (y * y).sum(dim=(1, 2)).to(device=device, dtype=dtype),
            }
            if keep_labels:
                out["Y"] = y.to(device=device, dtype=dtype)
            yield out


def _chunk_sizes(n: int) -> list[int]:
    full, rest = divmod(n, CHUNK)
    return [CHUNK] * full + ([rest] if rest else [])


def _draw(
    spec: ModelSpec, Q_star: torch.Tensor, Pi: torch.Tensor, size: int, gen: torch.Generator,
    means: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` samples ``(x, y)`` in float64 on the CPU (docs/model.md (1.1)-(1.2); with
    ``means``, the Gaussian-mixture tokens of (9.1): ``z_l = mu_{c_l} / sqrt(d) + eps_l``, labels
    ``c_l`` i.i.d. from ``spec.mixture_p``, drawn after the noise from the same generator)."""
    L, d = Pi.shape
    chol = torch.as_tensor(np.linalg.cholesky(spec.C_array), dtype=torch.float64)
    g = torch.randn(size, L, d, generator=gen, dtype=torch.float64)
    z = torch.einsum("lk,nkd->nld", chol, g)
    if means is not None:
        p = torch.as_tensor(spec.mixture_p, dtype=torch.float64)
        labels = torch.multinomial(p, size * L, replacement=True, generator=gen).reshape(size, L)
        z = z + means[labels] / math.sqrt(d)
    h_star = z @ Q_star / math.sqrt(d)
    T = teacher_attention(spec, h_star)
    y = T @ z
    x = z + Pi / math.sqrt(d)
    if spec.is_cross:  # (the key rows' labels: the key tokens, docs/model.md (10.5))
        y[:, spec.L:] = x[:, spec.L:]
    return x, y


def make_dataset(
    spec: ModelSpec,
    d: int,
    n: int,
    seed: int,
    n_test: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
    keep_labels: bool = False,
) -> Dataset:
    """Realise one dataset of ``n`` training sequences in dimension ``d`` (docs/model.md (1.1)-(1.2)).

    ``n_test`` fresh test sequences (default ``max(n, 1000)``) are drawn lazily by
    :meth:`Dataset.test_chunks`. ``keep_labels`` keeps ``Y`` (needed by trainable value matrices).
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d}")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"need at least one training sample, got n={n}")
    d, n = int(d), int(n)
    n_test = max(n, 1000) if n_test is None else int(n_test)
    if n_test < 1:
        raise ValueError(f"n_test must be >= 1, got {n_test}")
    Pi = torch.as_tensor(positional_embeddings(spec.G_array, d), dtype=torch.float64)
    means = None
    if spec.mixture:
        Q_star, means = mixture_directions(spec, Pi, d, seed)
    else:
        Q_star = torch.randn(
            d, spec.teacher_rank, generator=generator(seed, _STREAM_TEACHER, 0), dtype=torch.float64
        )
    L = spec.tokens
    X = torch.empty(n, L, d, dtype=dtype, device=device)
    Y = torch.empty(n, L, d, dtype=dtype, device=device) if keep_labels else None
    Sxx = torch.empty(n, L, L, dtype=torch.float64)
    Syx = torch.empty(n, L, L, dtype=torch.float64)
    yy = torch.empty(n, dtype=torch.float64)
    start = 0
    for c, size in enumerate(_chunk_sizes(n)):
        x, y = _draw(spec, Q_star, Pi, size, generator(seed, _STREAM_TRAIN, c), means)
        sl = slice(start, start + size)
        X[sl] = x.to(device=device, dtype=dtype)
        if Y is not None:
            Y[sl] = y.to(device=device, dtype=dtype)
        Sxx[sl] = x @ x.transpose(1, 2)
        Syx[sl] = y @ x.transpose(1, 2)
        yy[sl] = (y * y).sum(dim=(1, 2))
        start += size
    return Dataset(
        spec=spec,
        d=d,
        n=n,
        n_test=n_test,
        seed=int(seed),
        X=X,
        Y=Y,
        Sxx=Sxx.to(device=device, dtype=dtype),
        Syx=Syx.to(device=device, dtype=dtype),
        yy=yy.to(device=device, dtype=dtype),
        Q_star=Q_star.to(device=device, dtype=dtype),
        Pi=Pi.to(device=device, dtype=dtype),
        means=None if means is None else means.to(device=device, dtype=dtype),
    )


# ---------------------------------------------------------------- Gaussian-mixture tokens
def mixture_directions(spec: ModelSpec, Pi: torch.Tensor, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher ``Q*`` (d x 1) and the mixture means ``mu_k`` (K x d) of docs/model.md (9.1),
    with their Gram exactly as asked: ``mu_k^T mu_k' / d = Gmu``, ``mu_k^T Q* / d = kappa_k``,
    ``|Q*|^2 / d = 1``, all orthogonal to the positions.

    ``K + 1`` Gaussian vectors (stream of the teacher, chunk 1) are projected on the orthogonal
    complement of the rows of ``Pi`` and orthonormalised (Gram-Schmidt by QR); the rows
    ``sqrt(d) F U`` with ``F F^T`` the Gram of ``(mu_1..mu_K, Q*)`` (:func:`psd_cholesky`) have that
    Gram to rounding. Needs ``d >= rank(Pi) + K + 1``."""
    K = spec.mixture
    Gm, kap = spec.mixture_Gmu, spec.mixture_kappa
    full = np.block([[Gm, kap[:, None]], [kap[None, :], np.ones((1, 1))]])
    P = Pi.to(torch.float64).cpu().numpy()
    u, sv, _ = np.linalg.svd(P.T, full_matrices=False)
    basis = u[:, sv > 1e-9 * max(float(sv.max()), 1.0)]  # (an orthonormal basis of the positions)
    if d < basis.shape[1] + K + 1:
        raise ValueError(f"d must be >= {basis.shape[1] + K + 1} for {K} mixture means, got d={d}")
    R = torch.randn(K + 1, d, generator=generator(seed, _STREAM_TEACHER, 1), dtype=torch.float64).numpy().T
    for _ in range(2):  # (twice: orthogonal to rounding)
        R = R - basis @ (basis.T @ R)
        R, _ = np.linalg.qr(R)
    rows = math.sqrt(d) * psd_cholesky(full) @ R.T  # (K + 1) x d: mu_1..mu_K, Q*
    return torch.as_tensor(rows[K:].T.copy()), torch.as_tensor(rows[:K].copy())


def n_samples(alpha: float, d: int) -> int:
    """Number of training sequences ``n = round(alpha d)``; ``ValueError`` if it is below one."""
    if not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    n = int(round(alpha * d))
    if n < 1:
        raise ValueError(f"alpha={alpha} at d={d} gives n={n} < 1 training samples")
    return n


def check_memory(spec: ModelSpec, d: int, alphas: Sequence[float], n_test: int | None, runs: int, dtype: str) -> None:
    """``ValueError`` when the training and test sequences of ``runs`` seeds (``n = alpha d`` and
    ``n_test``, default ``max(n, 1000)``, sequences of ``L x d`` values each) would take more than
    half of this machine's memory: a typo such as ``--d 1e10`` is refused, not swapped to death."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # (no sysconf: no check)
        return
    n = max(max(1, round(a * d)) for a in alphas)
    tests = max(n, 1000) if n_test is None else max(n_test, 0)
    size = runs * (n + tests) * spec.tokens * d * (8 if dtype == "float64" else 4)
    if size > total / 2:
        raise ValueError(f"the data would take {size / 2**30:.3g} GiB (seeds x (n + n_test) x L x d values), more "
                         f"than half of this machine's {total / 2**30:.3g} GiB: lower d, alpha, n_test or the number of seeds")
