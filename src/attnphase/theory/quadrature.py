"""Gaussian integration rules over ``N(0, I_dim)`` (no licensed dependencies).

* ``gh``: tensor-product Gauss-Hermite (probabilists') with ``order`` points per dimension.
  Exact for polynomials, fast for smooth integrands (the test error); slow for integrands with
  jumps (the Stein-form conjugates, docs/model.md (3.3)).
* ``qmc``: scrambled Sobol points mapped through the normal quantile, symmetrised over the
  sign group of the model (``eta -> -eta`` and ``(xi, eta) -> -(xi, eta)``), which keeps the exact
  zeros of ``theta`` on the positional branch and of ``m`` on the symmetric semantic branch.
  Independent scrambles give an error estimate.

The scrambled Sobol base samples are deterministic (seeded) and kept, mapped to the normal, in a
file cache (:func:`sobol_cache_dir`), so a process whose rules are all cached imports neither
``scipy.stats`` nor ``scipy.special`` (~1 s of every ``attnphase solve`` otherwise).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnphase._cache import cache_root, store_bytes


@dataclass(frozen=True)
class Rule:
    """Nodes ``x`` (N, dim) of a standard Gaussian and weights ``w`` (N,) summing to one."""

    x: np.ndarray
    w: np.ndarray
    method: str
    order: int
    #: the sign flips the nodes are closed under (see :func:`sobol_gaussian`): ``signs`` (all of
    #: ``eta -> -eta``, ``xi -> -xi``, ``(xi, eta) -> -(xi, eta)``), ``eta``, ``xi`` or ``none``;
    #: where a flip is missing ``Saddle.data_step`` imposes the symmetry zeros it would give
    copies: str = "signs"
    #: the teacher noises ``eta`` are drawn from ``N(0, s^2 I)`` and the weights carry the density
    #: ratio (importance sampling, :func:`sobol_gaussian`); 1: plain rule
    teacher_scale: float = 1.0
    #: label configurations per node of a Gaussian-mixture rule (docs/model.md (9.3)): every node
    #: repeated this many times in a row, one entry per configuration; 1: a plain rule
    configs: int = 1

    @property
    def size(self) -> int:
        return int(self.w.size)


#: largest rule (nodes) the solver builds: ``4 * 2^20`` (qmc order 20); a data step holds a few
#: hundred bytes per node at L = 2 (nodes, fields, every start's minimiser; more for larger L), so
#: this is a few GiB (``--refine-order 30`` asked for 64 GiB and failed with a traceback)
MAX_NODES = 4 * 2**20


def check_size(nodes: int, what: str) -> None:
    """A ``ValueError`` naming ``what`` where a rule of ``nodes`` nodes exceeds :data:`MAX_NODES`."""
    if nodes > MAX_NODES:
        raise ValueError(f"{what} would have {nodes:.3g} nodes, more than the {MAX_NODES} this solver builds "
                         "(memory); lower the order")


def gauss_hermite(dim: int, order: int) -> Rule:
    """Product Gauss-Hermite rule for ``E f(x)``, ``x ~ N(0, I_dim)``, ``order**dim`` nodes."""
    if order < 1 or dim < 1:
        raise ValueError("gauss_hermite needs order >= 1 and dim >= 1")
    check_size(order**dim, f"a Gauss-Hermite rule of order {order} in {dim} dimensions")
    t, wt = np.polynomial.hermite_e.hermegauss(order)
    wt = wt / wt.sum()
    grids = np.meshgrid(*([t] * dim), indexing="ij")
    wgrids = np.meshgrid(*([wt] * dim), indexing="ij")
    x = np.stack([g.ravel() for g in grids], axis=1)
    w = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    return Rule(x, w, "gh", order)


#: sign flips that make up the nodes of a rule: the flip applied to the base sample for each copy
COPIES = {"signs": ("eta", "all", "xi"), "eta": ("eta",), "xi": ("xi",), "none": ()}


def _flip(x: np.ndarray, n_xi: int, which: str) -> np.ndarray:
    y = x.copy()
    if which in ("eta", "all"):
        y[:, n_xi:] *= -1
    if which in ("xi", "all"):
        y[:, :n_xi] *= -1
    return y


def symmetrise(x: np.ndarray, n_xi: int, axes: int = 1) -> np.ndarray:
    """Orbit of each point under ``eta -> -eta`` and ``(xi, eta) -> -(xi, eta)`` (4 copies).

    The first ``n_xi`` coordinates are the student noises ``xi``, the rest the teacher ``eta``.
    With ``axes = r >= 2`` (``xi`` of shape ``(L, r)`` per node, tied attention of rank ``r``)
    also under the reflection of each student axis ``a >= 1`` at every position
    (``xi_la -> -xi_la``; ``4 * 2^(r-1)`` copies): it makes the discretised map exactly
    equivariant under the reflections of the canonical gauge (``Saddle.gauge_fix``), so the
    symmetric branches keep ``q_0a = V_0a = 0`` exactly instead of up to the rule's noise.
    """
    out = np.concatenate([x] + [_flip(x, n_xi, f) for f in COPIES["signs"]], axis=0)
    for a in range(1, axes):
        flip = out.copy()
        flip[:, a:n_xi:axes] *= -1
        out = np.concatenate([out, flip], axis=0)
    return out


def key_contrasts(tokens: int, keys: int, F: int, rs: int) -> np.ndarray:
    """Orthonormal basis (``dim x (dim - F - rs)``, ``dim = tokens (F + rs)``) of the noises of a
    cross-attention sample without the keys' common shift (docs/model.md (10.6)).

    The noises are ordered as in :class:`attnphase.theory.saddle.Saddle`: the student noises
    ``xi`` (``tokens x F``, token-major), then the teacher noises ``eta`` (``tokens x rs``); the
    last ``keys`` tokens are the keys. For every field coordinate the key tokens' noises keep
    their ``keys - 1`` Helmert contrasts (``(e_1 - e_2) / sqrt 2``, ``(e_1 + e_2 - 2 e_3) / sqrt 6``,
    ...) and lose their mean; every other coordinate is kept as it is. The columns are in the
    order of the coordinates they stand for (queries, then the key contrasts, per block)."""
    if not 0 < keys < tokens:
        raise ValueError(f"key contrasts need 0 < keys < tokens, got keys={keys}, tokens={tokens}")
    helmert = np.zeros((keys, keys - 1))
    for j in range(1, keys):
        helmert[:j, j - 1] = 1.0
        helmert[j, j - 1] = -float(j)
        helmert[:, j - 1] /= np.sqrt(j * (j + 1))
    cols = []
    offset = 0
    for width in (F, rs):  # (the xi block, then the eta block)
        queries = tokens - keys
        for i in range(queries * width):
            c = np.zeros(tokens * (F + rs))
            c[offset + i] = 1.0
            cols.append(c)
        for a in range(width):
            for k in range(keys - 1):
                c = np.zeros(tokens * (F + rs))
                c[offset + (queries + np.arange(keys)) * width + a] = helmert[:, k]
                cols.append(c)
        offset += tokens * width
    return np.stack(cols, axis=1)


def sobol_gaussian(dim: int, log2_n: int, n_xi: int, seed: int = 0, axes: int = 1, copies: str = "signs",
                   teacher_scale: float = 1.0, basis: np.ndarray | None = None) -> Rule:
    """Scrambled Sobol rule with ``4 * 2**log2_n`` nodes (equal weights unless ``teacher_scale``).

    ``copies = "signs"`` (default): the orbits of ``2^log2_n`` points under the sign group
    (:func:`symmetrise`); with ``axes = r >= 2`` the base sample is ``2^(log2_n - r + 1)``
    points, so the node count is the same. ``"eta"`` / ``"xi"``: a net of twice as many points
    and its image under that one flip; ``"none"``: one net of ``4 * 2^log2_n`` points (these
    three without the reflections of ``axes >= 2``). At equal nodes copies of a smaller net are a
    worse rule: the conjugates scatter 1.3-3.5x more with the 4 sign copies than with one net,
    1.2-1.6x more than with the one flip that keeps a branch's own overlap odd; at rank 2 the
    8 copies (signs and reflections) 1.5-3.5x more than the branch's one flip (docs/solver.md).

    ``teacher_scale = s > 1``: importance sampling of the teacher noises. The coordinates after
    the first ``n_xi`` (``eta``) are multiplied by ``s`` and each node weighs the density ratio
    ``phi(eta) / phi_s(eta) = s^k exp(-|eta|^2 (1 - s^-2) / 2)`` (``k`` coordinates), normalised to
    sum one. The jumps of the proximal minimiser that make the conjugates converge slowly lie at
    large ``|eta|`` (teacher fields of opposite signs, where mirror minima of the student swap):
    almost all of the scatter of ``theta_hat`` comes from ``|eta| > 1.5`` (docs/solver.md), which this rule samples more densely. The sign copies keep their weights.

    ``basis`` (``dim x k``, orthonormal columns, each within the ``xi`` or the ``eta`` block): the
    Sobol net is drawn in ``k`` dimensions and mapped to ``x = y basis^T``, the nodes of the
    Gaussian restricted to the span of ``basis``; exact for integrands that do not depend on the
    orthogonal complement (cross-attention's keys' common shift, :func:`key_contrasts`,
    docs/model.md (10.6)). Not with ``copies = "signs"`` (its reflections act on the coordinates).
    """
    if copies not in COPIES:
        raise ValueError(f"unknown copies {copies!r}; choose from {', '.join(COPIES)}")
    check_size(4 * 2**log2_n, f"a QMC rule of order {log2_n}")
    flips = COPIES[copies]
    # base sample: the same node count with the reflections (signs) or with fewer copies
    log2_base = max(log2_n - (axes - 1), 0) if copies == "signs" else log2_n + 2 - len(flips)
    if basis is None:
        base = sobol_normal(dim, log2_base, seed)
    else:
        if copies == "signs" or basis.shape[0] != dim:
            raise ValueError("a reduced basis needs copies other than 'signs' and dim rows")
        base = np.ascontiguousarray(sobol_normal(basis.shape[1], log2_base, seed) @ basis.T)
    if copies == "signs":
        x = symmetrise(base, n_xi, axes)
    else:  # (no reflections at rank >= 2: Saddle.gauge_fix imposes their zeros)
        x = np.concatenate([base] + [_flip(base, n_xi, f) for f in flips])
    if teacher_scale == 1.0:
        return Rule(x, np.full(x.shape[0], 1.0 / x.shape[0]), "qmc", log2_n, copies=copies)
    if not 0 < teacher_scale < 10:
        raise ValueError(f"teacher_scale must lie in (0, 10), got {teacher_scale}")
    x[:, n_xi:] *= teacher_scale
    e2 = np.einsum("ni,ni->n", x[:, n_xi:], x[:, n_xi:])
    # (log of the density ratio, shifted by its largest value before the exponential)
    lr = -0.5 * e2 * (1.0 - teacher_scale**-2)
    r = np.exp(lr - lr.max())
    return Rule(x, r / r.sum(), "qmc", log2_n, copies=copies, teacher_scale=float(teacher_scale))


#: base samples up to this many points are cached (2^17 x dim floats: 4 MiB at dim 4); larger
#: ones take seconds to solve on anyway, the import of scipy.stats is no longer what counts
CACHE_MAX_LOG2 = 17


def sobol_cache_dir() -> Path | None:
    """Folder of the cached Sobol samples: :func:`cache_root` with one subfolder per scipy and
    numpy version (the samples are those of ``scipy.stats.qmc.Sobol`` seeded through numpy)."""
    import scipy  # noqa: PLC0415 - (the top-level package only: cheap)

    root = cache_root()
    return None if root is None else root / f"sobol-scipy{scipy.__version__}-numpy{np.__version__}"


def sobol_normal(dim: int, log2_n: int, seed: int) -> np.ndarray:
    """``2^log2_n`` points of ``scipy.stats.qmc.Sobol(dim, scramble=True,
    seed=numpy.random.default_rng(seed))`` mapped through the normal quantile (clipped to
    ``[1e-16, 1 - 1e-16]``), from the file cache when there (:func:`sobol_cache_dir`; a missing,
    unreadable or malformed file is regenerated, a cache that cannot be written is skipped)."""
    folder = sobol_cache_dir() if log2_n <= CACHE_MAX_LOG2 else None
    path = None if folder is None else folder / f"normal-d{dim}-m{log2_n}-s{seed}.npy"
    if path is not None:
        try:
            u = np.load(path, allow_pickle=False)
            if u.shape == (2**log2_n, dim) and u.dtype == np.float64:
                return u
        except (OSError, ValueError):
            pass
    from scipy.special import ndtri  # noqa: PLC0415 - (these two take ~1 s: only where a sample is not cached)
    from scipy.stats import qmc  # noqa: PLC0415

    u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(seed)).random_base2(log2_n)
    u = ndtri(np.clip(u, 1e-16, 1 - 1e-16))
    if path is not None:
        _store(path, u)
    return u


def _store(path: Path, u: np.ndarray) -> None:
    """Write ``u`` to ``path`` atomically (:func:`attnphase._cache.store_bytes`)."""
    buf = io.BytesIO()
    np.save(buf, u)
    store_bytes(path, buf.getvalue())


def make_rule(method: str, dim: int, order: int, n_xi: int, seed: int = 0, axes: int = 1, copies: str = "signs",
              teacher_scale: float = 1.0, basis: np.ndarray | None = None) -> Rule:
    """Build the rule named by ``method`` (``gh`` or ``qmc``; ``order`` is points per dimension
    for ``gh`` and ``log2`` of the base sample size for ``qmc``; ``axes``: see
    :func:`symmetrise`; ``copies``: see :func:`sobol_gaussian`, ignored by ``gh``, whose grid is
    closed under the signs; ``teacher_scale`` and ``basis``: see :func:`sobol_gaussian`, ``qmc`` only)."""
    if method == "gh":
        return gauss_hermite(dim, order)
    if method == "qmc":
        return sobol_gaussian(dim, order, n_xi, seed, axes, copies, teacher_scale, basis)
    raise ValueError(f"unknown quadrature method {method!r}; choose 'gh' or 'qmc'")
