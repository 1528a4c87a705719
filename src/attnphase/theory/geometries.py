"""The attention geometries of the student map and the ones whose proximal kernel is written out.

A geometry is ``L`` tokens and a student variant of rank ``r`` (docs/model.md (1.3), (6.1),
(6.2)): fields of dimension ``F`` per token (``r``, or ``2 r`` for untied keys and queries),
bilinear scores ``s_lj = h_l^T M h_j`` and a mask (causal: ``j <= l``). :func:`score_form` and
:func:`score_mask` are the single definition of ``M`` and the mask
(:meth:`attnphase.theory.channels.AttentionMap.from_spec` uses them).

:data:`GEOMETRIES` lists the geometries whose proximal kernel (docs/model.md (3.2)) is written out
as straight-line C (:mod:`attnphase.theory.native.codegen`): the reference case ``L = 2``,
``r = 1`` and the sizes of the variants, as the registry of attention models declares them. It is
plain data, read by the generator and by the
kernel picker (:func:`attnphase.theory.channels.prox_batch`); this module imports neither.
:data:`HEAD_GEOMETRIES` lists those of several softmax heads of rank 1 (any gains, given at run
time; docs/model.md (11.1)) whose kernel is written out as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.spec.attention import MODELS, attention_model, score_mask

__all__ = ["Geometry", "score_form", "score_mask", "score_orbit"]


def score_form(variant: str, rank: int) -> np.ndarray:
    """``M`` of the scores ``s_lj = h_l^T M h_j``: ``I_r`` (tied keys and queries), or
    ``[[0, I_r], [0, 0]]`` on fields ``h_l = (hQ_l, hK_l)`` (untied: ``s = hQ hK^T``; docs/model.md (1.3), (6.1))."""
    if not attention_model(variant).tied:
        M = np.zeros((2 * rank, 2 * rank))
        M[:rank, rank:] = np.eye(rank)
        return M
    return np.eye(rank)


#: Newton steps in the orbit's parameter per move along it (``jit_orbit.follow_orbit`` and its C
#: twin; a module constant of the numba kernels: a change here needs their cache cleared)
ORBIT_NEWTON = 1


def score_orbit(M: np.ndarray, heads: int = 1) -> int:
    """The continuous symmetry of one head's scores ``h_l^T M h_j`` that the proximal kernels follow
    along its orbit (docs/model.md (3.2)): 1, the rotations ``h_l -> R^T h_l`` of the two fields of
    tied rank 2 (``M = I_2``); 2, the scalings ``(c h_Q, h_K / c)`` of untied rank 1 (``M = [[0, 1],
    [0, 0]]``); 0, none followed (a discrete symmetry only, several heads, or a larger group)."""
    if heads != 1 or M.shape != (2, 2):
        return 0
    if np.array_equal(M, np.eye(2)):
        return 1
    return 2 if np.array_equal(M, np.array([[0.0, 1.0], [0.0, 0.0]])) else 0


@dataclass(frozen=True)
class Geometry:
    """``L`` tokens, a student ``variant`` and its ``rank`` (a geometry whose proximal kernel is
    written out); cross-attention: ``keys`` of the ``L`` tokens are keys (docs/model.md (10.2));
    ``heads`` softmax heads of rank 1, their gains given at run time (docs/model.md (11.1): ``rank`` 1,
    head ``k`` reads field ``k``, ``M_k = e_k e_k^T``)."""

    variant: str
    L: int
    rank: int
    keys: int = 0
    heads: int = 1

    @property
    def name(self) -> str:
        """``<variant>_L<L>_r<rank>`` (``-`` as ``_``; cross-attention ``<variant>_L<L>_K<keys>_r<rank>``;
        several heads ``<variant>_L<L>_r<rank>_H<heads>``): the name of its compiled library."""
        keys = f"_K{self.keys}" if self.keys else ""
        heads = f"_H{self.heads}" if self.heads > 1 else ""
        return f"{self.variant.replace('-', '_')}_L{self.L}{keys}_r{self.rank}{heads}"

    @property
    def field_dim(self) -> int:
        """Fields per token ``F``: ``r``, or ``2 r`` for untied keys and queries; ``heads`` for
        several heads of rank 1."""
        return attention_model(self.variant).weight_matrices * self.rank * self.heads

    @property
    def M(self) -> np.ndarray:
        return score_form(self.variant, self.rank * self.heads)

    @property
    def mask(self) -> np.ndarray:
        return score_mask(self.variant, self.L, self.keys)

    @property
    def orbit(self) -> int:
        """:func:`score_orbit` of the geometry's scores."""
        return score_orbit(self.M, self.heads)


#: the geometries whose proximal kernel is written out in C: the sizes each registered model
#: declares (:attr:`attnphase.spec.attention.AttentionModel.written_out`)
GEOMETRIES: tuple[Geometry, ...] = tuple(
    Geometry(m.name, L, rank, keys) for m in MODELS.values() for L, rank, keys in m.written_out)


#: the geometries of several softmax heads whose proximal kernel is written out in C: two heads of
#: rank 1 with tied keys and queries over ``L = 2`` and ``L = 3`` tokens (docs/model.md (11.1))
HEAD_GEOMETRIES: tuple[Geometry, ...] = (Geometry("tied", 2, 1, heads=2), Geometry("tied", 3, 1, heads=2))


def written_out(L: int, M: np.ndarray, mask: np.ndarray, heads: int = 1) -> Geometry | None:
    """The geometry of :data:`GEOMETRIES` (one head) or :data:`HEAD_GEOMETRIES` (``heads`` softmax
    heads of rank 1) with ``L`` tokens, score form ``M`` and ``mask``, if there is
    one."""
    for g in GEOMETRIES + HEAD_GEOMETRIES:
        if (g.heads == heads and g.L == L and g.M.shape == M.shape and np.array_equal(g.M, M)
                and np.array_equal(g.mask, mask)):
            return g
    return None
