"""Attention maps (docs/model.md (1.3)), the per-sample loss (1.4) and the batched global proximal
solver (3.2).

The student map is ``S(h) = rowsoftmax(s)`` with bilinear scores ``s_lj = h_l^T M h_j`` and an
optional mask (causal: ``j <= l``). A variant is therefore a pair ``(M, mask)``:

* ``tied``: fields ``h_l in R^r``, ``M = I_r``  -> ``S = softmax(h h^T)``;
* ``untied``: fields ``h_l = (hQ_l, hK_l) in R^{2r}``, ``M = [[0, I], [0, 0]]`` -> ``S = softmax(hQ hK^T)``;
* ``causal`` / ``untied-causal``: the same with the lower-triangular mask;
* ``H`` heads of rank 1 (docs/model.md (11.1)): the fields and ``M = I_H`` of the tied student of
  rank ``H``, the map ``S = sum_k v_k phi(h M_k h^T)`` with ``M_k = e_k e_k^T``; ``phi`` the row
  softmax or an element-wise map (docs/model.md (11.2)); softmax heads with the gains ``1/H`` of
  :data:`attnphase.theory.geometries.HEAD_GEOMETRIES` have a written-out C proximal kernel, the
  others run the generic kernel.

The loss of a field configuration is ``ell(h; T) = 1/2 tr((S - T) C (S - T)^T)`` (``C = sigma^2 I``:
``sigma^2/2 ||S - T||_F^2``). Its gradient and Hessian are written analytically:
with ``p = S_l``, ``e = ((S - T) C)_l``, ``gamma_lj = p_j (e_j - e.p)`` is ``d ell / d s_lj`` and
``d^2 ell / d s_lj d s_lk = (J^T C J)_jk + delta_jk gamma_lj - p_j p_k (e_j + e_k - 2 e.p)``,
``J_aj = p_a (delta_aj - p_j)``.

The proximal problem at a node is ``min_h sum_l (h_l - w_l)^T V^{-1} (h_l - w_l) / 2 + ell(h; T)``.
It is non-convex; :func:`prox_batch` runs damped (Levenberg-Marquardt) Newton from several starts per
node, in parallel over nodes, and keeps the lowest objective: the global minimiser up to the
coverage of the starts (tested against brute-force grid search). The geometries of
:data:`attnphase.theory.geometries.GEOMETRIES` (and of ``HEAD_GEOMETRIES`` for several heads) run
that iteration written out in C (:mod:`attnphase.theory.native`); any other geometry, or any
geometry where the C kernels are not built, runs the generic numba kernel
(:func:`attnphase.theory.jit.prox_kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.spec.attention import ACTIVATIONS, activation, attention_model
from attnphase.spec.problem import ModelSpec
from attnphase.theory import native
from attnphase.theory.geometries import score_form, score_mask, score_orbit, written_out

#: the most heads the theory covers (docs/model.md section 11)
THEORY_MAX_HEADS = 2


def check_attention_covered(spec: ModelSpec, trained_heads: bool = False) -> None:
    """``ValueError`` (one line) where the theory does not cover the attention map or the heads of
    ``spec`` (the registry's ``supports`` of each map, :data:`THEORY_MAX_HEADS`; trained head gains
    only where the computation minimises over them, ``trained_heads``: a single solve,
    docs/model.md (11.4); the maps other than softmax on cross-attention), saying what does."""
    for role, name in (("student", spec.activation), ("teacher", spec.teacher_activation)):
        if not activation(name).covers("theory"):
            covered = ", ".join(n for n, a in ACTIVATIONS.items() if a.covers("theory"))
            raise ValueError(f"the theory covers the {role} activation {covered}, got {name!r}; the simulator "
                             "covers every activation (attnphase simulate)")
        if name != "softmax" and spec.is_cross:
            raise ValueError(f"the theory covers the {role} activation softmax on cross-attention, got {name!r}; "
                             "the simulator covers every activation (attnphase simulate)")
    if spec.heads > THEORY_MAX_HEADS:
        raise ValueError(f"the theory covers heads <= {THEORY_MAX_HEADS}, got heads = {spec.heads}; the simulator "
                         "covers several heads (attnphase simulate)")
    if spec.head_gains != "fixed" and not trained_heads:
        raise ValueError("the theory minimises over trained head gains in a single solve (attnphase solve "
                         "--head-gains trained); elsewhere it holds them (head_gains = fixed, head_gain_values), "
                         "and the simulator trains them (attnphase simulate)")


@dataclass(frozen=True)
class AttentionMap:
    """Student attention variant: field dimension per position, bilinear form and mask; the
    student's attention map ``activation`` (docs/model.md (11.2)) and its ``heads`` with their
    ``gains`` (docs/model.md (11.1): head ``k`` reads field ``k``, ``M_k = e_k e_k^T``), the maps'
    ``L`` being ``tokens``."""

    name: str
    field_dim: int
    M: np.ndarray
    mask: np.ndarray
    activation: str = "softmax"
    heads: int = 1
    gains: tuple[float, ...] = (1.0,)
    tokens: int = 0

    @property
    def standard(self) -> bool:
        """One softmax head of gain 1: the map of docs/model.md (1.3), on the reference code paths
        (the written-out C kernels, the reference sums of the generic kernels)."""
        return self.heads == 1 and self.activation == "softmax" and self.gains == (1.0,)

    @property
    def forms(self) -> np.ndarray:
        """The score forms of the heads, (heads, F, F): ``M`` for one head, ``e_k e_k^T`` for
        head ``k`` of several (docs/model.md (11.3))."""
        if self.heads == 1:
            return np.ascontiguousarray(self.M[None], dtype=np.float64)
        out = np.zeros((self.heads, self.field_dim, self.field_dim))
        for k in range(self.heads):
            out[k, k, k] = 1.0
        return out

    def kernel_maps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(forms, gains, maps)`` of the generic kernels (:func:`attnphase.theory.jit_maps.student_heads`):
        ``maps = (code, log L, 1/L)``, the code ``-1`` for the :attr:`standard` map."""
        return (self.forms, np.asarray(self.gains, dtype=np.float64),
                map_params(self.activation, self.tokens or self.mask.shape[0], reference=self.standard))

    @property
    def blocks(self) -> int:
        """Fields per student direction: 1 (tied: ``h_l = Q^T x_l``), 2 (untied: query and key)."""
        return attention_model(self.name).weight_matrices

    @property
    def rank(self) -> int:
        """Student rank ``r`` (``field_dim = blocks * r``; ``H`` for ``H`` heads of rank 1, whose
        fields are those of the tied student of rank ``H``, docs/model.md (11.3))."""
        return self.field_dim // self.blocks

    @property
    def rotation_invariant(self) -> bool:
        """Rank ``r >= 2``: scores and ridge are invariant under ``Q -> Q U`` (and ``K -> K U``
        for untied keys/queries) for orthogonal ``U``, i.e. under ``I_blocks (x) U`` on the
        fields (``Saddle.gauge_fix``, the ``mixed`` branch, the reflection-symmetrised QMC
        rule). Several heads are not: only permutations of the heads leave their scores
        unchanged (docs/model.md (11.3))."""
        return self.rank >= 2 and self.heads == 1

    @property
    def orbit(self) -> int:
        """The continuous symmetry of the scores that the proximal kernels follow
        (:func:`attnphase.theory.geometries.score_orbit`)."""
        return score_orbit(self.M, self.heads)

    @staticmethod
    def from_spec(spec: ModelSpec) -> AttentionMap:
        """The student of ``spec``; ``H`` heads of rank 1 have the fields and ``M = I_H`` of the tied
        rank-``H`` student (docs/model.md (11.3)), each head its own form (:attr:`forms`)."""
        M = score_form(spec.variant, spec.rank * spec.heads)
        keys = spec.L_keys if spec.is_cross else 0
        return AttentionMap(spec.variant, M.shape[0], M, score_mask(spec.variant, spec.tokens, keys),
                            spec.activation, spec.heads, tuple(float(v) for v in spec.head_gain_array), spec.tokens)


#: the codes of the attention maps in the generic kernels (docs/model.md (11.2))
MAP_CODES = {"softmax": 0, "sigmoid": 1, "relu": 2, "linear": 3}


def map_params(name: str, L: int, reference: bool = False) -> np.ndarray:
    """``(code, log L, 1/L)`` of the attention map ``name`` over rows of ``L`` tokens for the generic
    kernels (:data:`MAP_CODES`; the code ``-1`` with ``reference``: the one-head softmax path)."""
    code = -1.0 if reference else float(MAP_CODES[name])
    return np.array([code, np.log(L), 1.0 / L])


def apply_map(name: str, s: np.ndarray, mask: np.ndarray | None, L: int) -> np.ndarray:
    """The attention map ``name`` (docs/model.md (11.2)) of scores ``s`` (..., L, L) row by row,
    masked entries 0: the row softmax, or element-wise sigmoid ``1/(1 + exp(log L - s))``, ReLU
    ``max(s, 0)/L``, linear ``s/L``."""
    if name == "softmax":
        return softmax_rows(s, mask)
    if name == "sigmoid":
        out = 0.5 * (1.0 + np.tanh(0.5 * (s - np.log(L))))
    elif name == "relu":
        out = np.maximum(s, 0.0) / L
    elif name == "linear":
        out = s / L
    else:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
    return out if mask is None else np.where(mask, out, 0.0)


def softmax_rows(s: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Row-wise softmax over the last axis, masked entries set to zero."""
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def target_map(hstar: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """Target ``T(h*) = (1 - omega) softmax(h* h*^T) + omega A`` (docs/model.md (1.2)) for fields
    of shape (N, L, r*) (the causal target masks the scores above the diagonal; cross-attention:
    :func:`cross_target_map`); another teacher map ``phi*`` in place of the softmax
    (docs/model.md (11.2)) in numpy."""
    if spec.is_cross:
        return cross_target_map(hstar, spec)
    hstar = np.ascontiguousarray(hstar, dtype=np.float64)
    N, L, R = hstar.shape
    if spec.teacher_activation != "softmax":  # (docs/model.md (11.2))
        mask = np.tril(np.ones((L, L), dtype=np.bool_)) if spec.causal_target else None
        phi = apply_map(spec.teacher_activation, np.einsum("nla,nka->nlk", hstar, hstar), mask, L)
        return (1.0 - spec.omega) * phi + spec.omega * spec.A_array
    out = np.empty((N, L, L))
    A = np.ascontiguousarray(spec.A_array, dtype=np.float64)
    lib = native.common()
    if lib is not None:
        lib.target_kernel(N, L, R, native.ptr(hstar), float(spec.omega), native.ptr(A), int(bool(spec.causal_target)),
                          native.ptr(out), native.threads_for(N, 8192))
        return out
    from attnphase.theory.jit import target_kernel  # noqa: PLC0415 - (numba: only where it runs)

    target_kernel(hstar, float(spec.omega), A, bool(spec.causal_target), out)
    return out


def cross_target_map(hstar: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """The target of cross-attention over all ``L + L'`` tokens (docs/model.md (10.2)), fields
    (N, L + L', r*): query rows ``[0, (1 - omega) softmax(h* h*'^T) + omega A]``, key rows exactly
    ``e_j`` (where the student's key rows are too, so they add nothing to the loss)."""
    hstar = np.asarray(hstar, dtype=np.float64)
    L, Lk = spec.L, spec.L_keys
    s = np.einsum("nla,nja->nlj", hstar[:, :L], hstar[:, L:])
    out = np.zeros((hstar.shape[0], L + Lk, L + Lk))
    out[:, :L, L:] = (1.0 - spec.omega) * (_softmax_pairs(s) if Lk == 2 else softmax_rows(s)) + spec.omega * spec.A_array
    out[:, L:, L:] = np.eye(Lk)
    return out


def _softmax_pairs(s: np.ndarray) -> np.ndarray:
    """:func:`softmax_rows` of rows of two scores, entry by entry (the same numbers: the maximum,
    the shifted exponentials and their sum of two terms; 3-4x faster than the reductions over an
    axis of length 2)."""
    s0, s1 = s[..., 0], s[..., 1]
    mx = np.maximum(s0, s1)
    e0, e1 = np.exp(s0 - mx), np.exp(s1 - mx)
    tot = e0 + e1
    return np.stack([e0 / tot, e1 / tot], axis=-1)


def student_map(h: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Student attention ``S(h)`` for fields of shape (N, L, field_dim): ``softmax(h M h^T)``
    (docs/model.md (1.3)), or ``sum_k v_k phi(h M_k h^T)`` over the heads (docs/model.md (11.1))."""
    if amap.standard:
        s = np.einsum("nla,ab,nkb->nlk", h, amap.M, h)
        return softmax_rows(s, amap.mask)
    out = np.zeros(h.shape[:1] + amap.mask.shape)
    for v, P in zip(amap.gains, head_maps(h, amap), strict=True):
        out += v * P
    return out


def head_maps(h: np.ndarray, amap: AttentionMap) -> list[np.ndarray]:
    """Each head's map ``phi(h M_k h^T)`` (N, L, L) at the fields ``h`` (N, L, field_dim), without
    its gain (docs/model.md (11.1))."""
    L = amap.tokens or amap.mask.shape[0]
    return [apply_map(amap.activation, np.einsum("nla,ab,nkb->nlk", h, M, h), amap.mask, L) for M in amap.forms]


def loss_numpy(h: np.ndarray, T: np.ndarray, C: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Per-node loss ``ell(h; T) = 1/2 tr((S - T) C (S - T)^T)`` (vectorised reference)."""
    D = student_map(h, amap) - T
    return 0.5 * np.einsum("nlj,jk,nlk->n", D, C, D)


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

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The per-node arrays in field order (``ProxResult(*arrays)`` rebuilds one)."""
        return self.h, self.value, self.grad_norm, self.candidates, self.candidate_values


def default_starts(w: np.ndarray, V: np.ndarray, spread: tuple[float, ...] = (1.5,),
                   tokens: int | None = None) -> np.ndarray:
    """Multi-start set per node: ``w``, ``-w``, ``0`` and ``w +- c V^{1/2} e_i`` for each field
    coordinate (of the first ``tokens`` tokens only, where given: :func:`cross_offset_tokens`).

    The loss is bounded, so every minimiser lies within ``O(V^{1/2})`` of ``w``; the offsets
    cover that ball along each coordinate. One radius suffices: at the fixed points of ~60
    parameter sets (lambda 1e-3..0.1, sigma 0.5/1, omega 0..0.7, alpha 0.5/2, L = 2/3, rank
    1/2, tied/untied/causal, max V 1.3..228; 4096 nodes each) the radii (1.5,) and (1.0,) found
    the global minimum at every node that (1.0, 2.5, 4.0) found, and the previous default
    (1.0, 2.5) cost 1.6-1.7x as much (``test_one_radius_finds_the_global_minimum``).
    The loss is even in ``h`` (bilinear scores), so minima come in near-mirror pairs when ``V`` is large; ``-w`` finds the mirror of
    the minimum reached from ``w`` (without it the full set missed the second minimum of some
    nodes near the switching surface that the warm-start set, which contains ``-h``, found).
    """
    N, L, F = w.shape
    evals, evecs = np.linalg.eigh(V)
    Vh = (evecs * np.sqrt(np.maximum(evals, 0.0))) @ evecs.T
    starts = [w, -w, np.zeros_like(w)]
    for c in spread:
        for l in range(L if tokens is None else tokens):
            for a in range(F):
                for sign in (1.0, -1.0):
                    s = w.copy()
                    s[:, l, :] += sign * c * Vh[a]
                    starts.append(s)
    return np.stack(starts, axis=1)


def cross_offset_tokens(amap: AttentionMap, keys: int) -> int | None:
    """The tokens whose offsets :func:`default_starts` needs for the tied cross-attention student
    with ``keys = 2`` keys (docs/model.md (10.6)): all but the last key; ``None`` (all) elsewhere.

    The loss depends on the keys' fields only through their differences, so the proximal
    objective is ``P_red(h_queries, h'_1 - h'_2) + |h'_1 + h'_2 - w'_1 - w'_2|^2 / (4 V)``
    (per field coordinate, in the metric of ``V``): the keys' sum is at its prior mean at every
    minimum, and a start enters only through its queries' fields and its keys' difference. The
    offsets ``w + c V^{1/2} e`` on the first key and ``w - c V^{1/2} e`` on the second have the
    same queries and the same difference: they are one start of the reduced problem, and so are
    ``w - c V^{1/2} e`` on the first and ``w + c V^{1/2} e`` on the second. The second key's two
    offsets are dropped (9 starts instead of 11 at ``L = L' = 2``, rank 1)."""
    if amap.name != "cross" or keys != 2:
        return None
    return amap.mask.shape[0] - 1


#: :func:`loss_to_prior` (``c V``) above which the full multi-start set gets
#: :func:`landscape_starts`. Measured against brute-force starts: the default
#: starts missed the global minimum at 2-48 of 1024 nodes at ``sigma`` 1-2 (``c V`` 10.9-143;
#: ``sigma = 1``, ``alpha = 1``: 4 nodes, enough to keep the trivial and positional solves from
#: converging) and at none at ``sigma = 0.5`` (``c V`` up to 7.5 at ``lambda = 0.01``, 9.3 for rank
#: 2 or untied keys and queries, 62 at ``lambda = 1e-3``): an empirical bound, with thin margins on
#: both sides
RUGGED = 10.0


def rugged(V: np.ndarray, C: np.ndarray, mix: np.ndarray | None = None,
           gains: tuple[float, ...] = (1.0,)) -> bool:
    """Whether the proximal problem is rugged enough for :func:`landscape_starts` (``RUGGED``).
    With a position mixing ``mix = P`` (correlated tokens) ``V`` is the whitened fields' and the
    actual fields' is ``P P^T (x) V``. Several heads with gains ``g`` (docs/model.md (11.1)): the
    output is ``sum_k g_k S_k x``, so the loss's Gauss-Newton curvature in the heads' fields is
    ``g g^T`` times one head's, whose largest eigenvalue is ``|g|^2`` (``1/2`` for two heads at
    ``1/2``), as a value gain ``v`` enters as ``v^2 C``. Measured against a grid of 9^4 starts per
    node around ``w`` (two heads, 1024 nodes, the fixed points of every branch at ``omega`` 0.3 and
    0.6, ``alpha`` 1-3, ``sigma`` 0.5 and 1, ``lambda`` 1e-3 and 0.01; ``c V |g|^2`` 2.0-33): the
    default starts alone found the global minimum at every node."""
    return loss_to_prior(V, C, mix, gains) > RUGGED


def loss_to_prior(V: np.ndarray, C: np.ndarray, mix: np.ndarray | None = None,
                  gains: tuple[float, ...] = (1.0,)) -> float:
    """``c_max(C) lambda_max(V) |g|^2`` (times ``lambda_max(P P^T)`` with a position mixing ``P``):
    the loss's curvature against the quadratic term's in the proximal problem (docs/model.md (3.2))."""
    scale = float(np.linalg.eigvalsh(C).max() * np.linalg.eigvalsh(V).max()) * float(np.sum(np.square(gains)))
    return scale if mix is None else scale * float(np.linalg.eigvalsh(mix @ mix.T).max())


#: the proximal kernels follow the orbit of the scores' symmetry (:attr:`AttentionMap.orbit`) where
#: :func:`loss_to_prior` is above this (docs/model.md (3.2); ``solve --preset fast`` at rank-2 and
#: untied box points with ``c V`` 904-19538, 60 Newton steps: 86, 70, 15, 59 s without, 14, 26, 12,
#: 21 s with; two had left the trivial branch unrefined); below, it costs more than it saves
ORBIT_FROM = 200.0


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
    loss_min = prox_batch(h, T, V * 1e6, C, amap, starts=pm, mix=mix, max_iter=60).candidates  # (starts only)
    return np.concatenate([zero, pm, loss_min], axis=1)


#: Newton steps per start at most in :func:`prox_batch` (docs/model.md (3.2): 60 left the rank-2 map
#: rough at ``c V`` ~ 2400; the cost per data step is the same)
NEWTON_MAX_ITER = 100


def prox_batch(
    w: np.ndarray,
    T: np.ndarray,
    V: np.ndarray,
    C: np.ndarray,
    amap: AttentionMap,
    starts: np.ndarray | None = None,
    max_iter: int | None = None,
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

    The geometries of :data:`attnphase.theory.geometries.GEOMETRIES` (the reference case and the
    sizes of the variants) and ``HEAD_GEOMETRIES`` (two softmax heads with the gains ``1/2``) go to
    the same iteration written out on scalars in C (6-20x faster than the generic kernel) where
    :mod:`attnphase.theory.native` runs C, unless ``generic``: then, and for every other geometry,
    the generic numba kernel runs. The two give the same numbers bit for bit: the generic kernel
    runs every sum in the written-out order (``tests/test_native_kernels.py``,
    ``tests/test_heads_native.py``).

    Where the scores have a continuous symmetry (:attr:`AttentionMap.orbit`) and :data:`ORBIT_FROM`
    holds, starts and damped steps move along its orbit (``jit_orbit.follow_orbit``).
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
    n_chunks = native.chunks(N)
    C = np.ascontiguousarray(C, dtype=np.float64)
    max_iter = NEWTON_MAX_ITER if max_iter is None else max_iter
    orbit = amap.orbit if amap.orbit and loss_to_prior(V, C, mix) > ORBIT_FROM else 0
    lib = None if generic else _written_out_for(amap, T, L)
    if lib is not None:
        Cg = c_covariance(C, amap)  # (held here: the kernel reads it through a pointer)
        lib.prox_kernel(N, S, native.ptr(w), native.ptr(T), native.ptr(starts), native.ptr(Winv), native.ptr(Cg),
                        int(max_iter), float(gtol), native.ptr(out_h), native.ptr(out_val), native.ptr(out_gn),
                        native.ptr(cand_h), native.ptr(cand_val), int(n_chunks), float(snap), int(orbit > 0),
                        native.threads_for(N * S, 256))
    else:
        from attnphase.theory.jit import prox_kernel  # noqa: PLC0415 - (numba: only where it runs)

        prox_kernel(w, T, starts, Winv, C, np.ascontiguousarray(amap.M, dtype=np.float64), amap.mask, max_iter,
                    gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks, snap, orbit, *amap.kernel_maps())
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
    small = np.abs(prox.h) < SADDLE_RADIUS
    if not small.any():  # (the usual case, in one pass: the reduction per node took ~7 ms at 131072 nodes)
        return prox
    near = np.flatnonzero(small.reshape(len(small), -1).all(axis=1))
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
    out = [a.copy() for a in prox.arrays()]
    j = idx[better]
    for a, b in zip(out, sub.arrays(), strict=True):
        a[j] = b[better]
    return ProxResult(*out)


def _fixed_blocks_hold(T: np.ndarray, amap: AttentionMap, L: int) -> bool:
    """Whether the targets ``T`` (N, L, L) have the fixed blocks that the written-out kernel of a
    cross-attention geometry folds in (:func:`attnphase.theory.native.codegen.fixed_target`: key rows
    ``e_j``, query rows zero on the query columns; :func:`cross_target_map` makes them exactly);
    ``True`` for every other geometry."""
    g = written_out(L, amap.M, amap.mask, amap.heads)
    if g is None or not g.keys:
        return True
    queries = L - g.keys
    return bool(np.array_equal(T[:, queries:], np.broadcast_to(np.eye(L)[queries:], (T.shape[0], g.keys, L)))
                and not np.any(T[:, :queries, :queries]))


def c_prox_library(amap: AttentionMap, L: int) -> native.Library | None:
    """The compiled C proximal kernel of this geometry (:data:`attnphase.theory.geometries.GEOMETRIES`
    for the :attr:`AttentionMap.standard` map, :data:`attnphase.theory.geometries.HEAD_GEOMETRIES` for
    several softmax heads, whatever their gains: :func:`c_covariance`), or ``None`` where there is
    none or the numba kernels run (:func:`attnphase.theory.native.prox_library`)."""
    if amap.standard:
        g = written_out(L, amap.M, amap.mask)
    elif amap.heads > 1 and amap.activation == "softmax":
        g = written_out(L, amap.M, amap.mask, amap.heads)
    else:
        return None
    return None if g is None else native.prox_library(g)


def c_covariance(C: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """The token covariance as the written-out C kernels read it: ``C`` (L, L) row-major, followed
    by the heads' gains where there are several heads (the kernel of several heads takes its gains
    at run time, docs/model.md (11.1))."""
    C = np.ascontiguousarray(C, dtype=np.float64)
    return C if amap.heads == 1 else np.concatenate([C.ravel(), np.asarray(amap.gains, dtype=np.float64)])


def _written_out_for(amap: AttentionMap, T: np.ndarray, L: int) -> native.Library | None:
    """The written-out C library for the targets ``T`` (N, L, L) (:func:`c_prox_library`), or
    ``None`` where the generic kernel runs: no library, or a cross-attention target without the
    fixed blocks that the written-out kernel folds in."""
    lib = c_prox_library(amap, L)
    return lib if lib is not None and _fixed_blocks_hold(T, amap, L) else None


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
    val, grad = np.empty(N), np.empty((N, L * F))
    _node_kernel(h, w, _metric(V, L, mix), T, C, amap, val, grad, np.empty((N, 1, 1)), False)
    return val, grad


def loss_hessian_batch(h: np.ndarray, T: np.ndarray, C: np.ndarray, amap: AttentionMap) -> np.ndarray:
    """Hessian of ``ell`` (not of the proximal objective) at ``h``: shape (N, L*F, L*F) (the
    proximal objective's with a zero prior, which adds exact zeros)."""
    N, L, F = h.shape
    out = np.empty((N, L * F, L * F))
    _node_kernel(h, h, np.zeros((L * F, L * F)), T, C, amap, np.empty(N), np.empty((N, L * F)), out, True)
    return out


def _node_kernel(h: np.ndarray, w: np.ndarray, Winv: np.ndarray, T: np.ndarray, C: np.ndarray, amap: AttentionMap,
                 val: np.ndarray, grad: np.ndarray, hess: np.ndarray, want_hess: bool) -> None:
    """The objective, gradient and Hessian at every node: the geometry's written-out C kernel where
    :func:`prox_batch` runs one (so a solve on the C kernels never compiles numba for the saddle
    escape), numba's generic kernel otherwise."""
    f64 = np.float64
    N, L, F = h.shape
    h, w, T = (np.ascontiguousarray(a, dtype=f64) for a in (h, w, T))
    Winv, C = np.ascontiguousarray(Winv, dtype=f64), np.ascontiguousarray(C, dtype=f64)
    lib = _written_out_for(amap, T, L)
    if lib is not None:
        Cg = c_covariance(C, amap)  # (held here: the kernel reads it through a pointer)
        lib.node_kernel(N, native.ptr(h), native.ptr(w), native.ptr(Winv), native.ptr(T), native.ptr(Cg),
                        int(want_hess), native.ptr(val), native.ptr(grad), native.ptr(hess))
        return
    from attnphase.theory.jit import node_kernel  # noqa: PLC0415 - (numba: only where it runs)

    node_kernel(h, w, Winv, T, C, np.ascontiguousarray(amap.M, dtype=f64), amap.mask, bool(want_hess), val, grad, hess,
                *amap.kernel_maps())
