"""The fine rules of the multi-fidelity refinement (docs/model.md (7.4)).

Which sign copies they are made of (:func:`fine_copies`), the importance sampling of the teacher
noises (:func:`teacher_scale_for`), the mirror pairing of the Stein sums (:func:`mirror_for`),
the union of the independent scrambles that the refinement solves on (:func:`fine_union`), and
the reuse of the minima that a coarser refinement of the same scrambles already found
(:func:`nested_first`).
"""

from __future__ import annotations

import numpy as np

from attnphase.spec.attention import names
from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import BranchPoint
from attnphase.theory.channels import AttentionMap, ProxResult, escape_saddles, prox_batch
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.quadrature import COPIES, Rule, key_contrasts
from attnphase.theory.saddle import ONE_START, DataStep, OrderParams, Saddle

#: sign copies of the fine rules by branch: ``theta`` is odd in ``theta`` under
#: ``eta -> -eta`` when ``m = 0``, ``m_hat`` odd in ``m`` under ``xi -> -xi`` when ``theta = 0``; the
#: zeros of the other overlap are imposed (Saddle.data_step). At equal nodes the conjugates
#: scatter 1.2-1.6x less than with all four copies (semantic and positional, alpha 1, omega 0.3;
#: trivial, no copies: ~2x), docs/solver.md. Rank >= 2: no reflections either (the zeros they
#: gave are imposed by Saddle.gauge_fix); the mixed branch has no overlap that must stay odd
#: (one net); 1.5-3.5x less scatter than the 8 copies of signs and reflections (r = 2). Untied
#: keys/queries of rank >= 2 keep all copies (fine_copies)
FINE_COPIES = {"semantic": "eta", "positional": "xi", "trivial": "none", "mixed": "none"}


def fine_copies(amap: AttentionMap, branch: str) -> str:
    """The sign copies of the refinement's fine rules for ``branch`` (``FINE_COPIES``); untied
    keys/queries of rank >= 2 keep all copies and the reflections (without them the semantic,
    positional and mixed refinements of ``r = 2`` stopped at the evaluation budget)."""
    if amap.rotation_invariant and amap.blocks > 1:
        return "signs"
    return FINE_COPIES.get(branch, "signs")


#: scale of the teacher noises in the fine rules of two-token rank-one models (``L = 2``, student
#: and teacher rank 1; tied, causal and untied attention): over 12 seeds at ``alpha = 1, omega =
#: 0.3`` (refine order 11) the refined semantic ``theta`` of the reference case scatters 1.24e-3
#: instead of 3.1e-3 (relative), ``q`` 5.3e-4 instead of 1.07e-3, the positional ``m`` 1.06e-3
#: instead of 1.37e-3, at the same cost; 1.3-1.6 do about as well; the causal and untied models
#: and correlated tokens gain as much (8 seeds each). At ``L = 3`` and at rank 2 (``alpha =
#: 1.5``) the scatter and the estimates were larger with it, so those keep the plain rule
#: (docs/solver.md)
REFERENCE_TEACHER_SCALE = 1.4
#: the attention variants measured to gain from it at ``L = 2``, rank 1
SCALED_VARIANTS = names("scaled-fine-rules")


def teacher_scale_for(spec: ModelSpec, settings: SolverSettings, branch: str | None = None) -> float:
    """The teacher-noise scale of the refinement's fine rules (importance sampling,
    docs/model.md (7.4)): ``settings.fine_teacher_scale``
    if set, else ``REFERENCE_TEACHER_SCALE`` for ``L = 2`` with student and teacher rank 1 (the
    variants of ``SCALED_VARIANTS``) and for the positional ``branch`` of the tied cross-attention
    student at ``L = L' = 2``, rank 1 (:data:`CROSS_SCALED_BRANCHES`), else 1 (the plain rule)."""
    if settings.fine_teacher_scale is not None:
        return float(settings.fine_teacher_scale)
    scaled = spec.variant in SCALED_VARIANTS and _two_tokens_rank_one(spec)
    if spec.variant == "cross" and spec.L_keys == 2:
        scaled = branch in CROSS_SCALED_BRANCHES and _two_tokens_rank_one(spec)
    return REFERENCE_TEACHER_SCALE if scaled else 1.0


#: the branches of the tied cross-attention student (``L = L' = 2``, rank 1; fine rules in the key
#: contrasts, :func:`key_basis_for`) whose fine rules take ``REFERENCE_TEACHER_SCALE``. At
#: ``alpha = 1``, ``omega = 0.3`` (order 13, 8 scrambles: ``benchmarks/cross_rules.py``) the
#: positional conjugates scatter 2x (``q_hat``) and 3x (the query's ``m_hat``) less with it, and the error target of 1e-3 was met
#: at orders 12-13 (seeds 0-2) instead of 13-14 (seeds 0-3); the semantic and trivial branches
#: met it at higher orders with it (semantic 12-14 against 12-13, trivial 12-13 against 12-13,
#: mostly 12), so they keep the plain rule
CROSS_SCALED_BRANCHES = ("positional",)


def _two_tokens_rank_one(spec: ModelSpec) -> bool:
    """``L = 2`` with student and teacher rank 1: the geometry where the fine rules' variance
    reductions (:func:`teacher_scale_for`, :func:`mirror_for`) were measured to help."""
    return spec.L == 2 and spec.rank == 1 and spec.teacher_rank == 1


#: the attention variants measured to gain from the mirror pairing at ``L = 2``, rank 1 and
#: uncorrelated tokens (untied: the semantic error grows 1.5x; ``L = 3``, rank 2 and correlated
#: tokens: no gain or a loss; docs/solver.md)
MIRRORED_VARIANTS = names("mirror")


def mirror_for(spec: ModelSpec, settings: SolverSettings) -> bool:
    """Whether the refinement's fine QMC rules pair every node with its mirror
    (:meth:`Saddle.mirror_nodes`, docs/model.md (7.4)): ``settings.mirror`` if set, else for ``L = 2`` with student and
    teacher rank 1, uncorrelated tokens and the variants of ``MIRRORED_VARIANTS``, where it was
    measured to help (the jumps of the minimiser there are swaps of near-mirror minima)."""
    if settings.response in ONE_START:  # (a node and its mirror share the start, not the minima)
        return False
    if settings.mirror is not None:
        return bool(settings.mirror)
    return spec.variant in MIRRORED_VARIANTS and _two_tokens_rank_one(spec) and spec.uncorrelated


def key_basis_for(spec: ModelSpec, copies: str) -> np.ndarray | None:
    """The basis the fine QMC rules of ``spec`` are drawn in (:func:`sobol_gaussian`): for the
    tied cross-attention student, the noises without the keys' common shift
    (:func:`key_contrasts`, docs/model.md (10.6)), on which no integrand of the data step
    depends; ``None`` (every coordinate) elsewhere and for the sign-closed rules.

    Measured at ``alpha = 1``, ``omega = 0.3`` (``L = L' = 2``: 6 of the 8 dimensions; the
    fixed points of the three branches on order 13, 8 scrambles; ``benchmarks/cross_rules.py``):
    the conjugates scatter 2.2-4.9x less (``q_hat``), 1.7-3.3x less (``V_hat``), 2.3x less
    (``theta_hat``) and 1.2-2.5x less (``m_hat``) than on the plain rule of the same nodes."""
    if spec.variant != "cross" or copies == "signs":
        return None
    amap = AttentionMap.from_spec(spec)
    return key_contrasts(spec.tokens, spec.L_keys, amap.field_dim, spec.teacher_rank)


def fine_union(spec: ModelSpec, alpha: float, settings: SolverSettings,
               branch: str) -> tuple[list[Saddle], Saddle]:
    """The fine rules of a refinement of ``branch`` at ``alpha`` and the saddle on their union
    (each rule weighted ``1 / n``), docs/model.md (7.4).

    QMC: ``settings.refine_replicas`` independent scrambles of order ``settings.refine_order``
    (seeds ``settings.seed + 104729 k``), with the sign copies of :func:`fine_copies`, the teacher
    scale of :func:`teacher_scale_for`, the mirror pairing of :func:`mirror_for` and the
    reduced basis of :func:`key_basis_for`. They keep the
    coarse point's symmetry zeros, which the fine rules impose: they keep only the sign flip under
    which the branch's own overlap is odd, so a point going to the trivial branch still finds it
    exactly. Gauss-Hermite: one product rule of that order."""
    order = settings.refine_order
    if settings.method == "qmc":
        copies, scale = fine_copies(AttentionMap.from_spec(spec), branch), teacher_scale_for(spec, settings, branch)
        basis = key_basis_for(spec, copies)
        fine = [make_saddle(spec, alpha, settings, order=order, seed=settings.seed + 104729 * (k + 1), copies=copies,
                            teacher_scale=scale, mirror=mirror_for(spec, settings), basis=basis)
                for k in range(settings.refine_replicas)]
    else:
        fine = [make_saddle(spec, alpha, settings, order=order)]
    n = len(fine)
    x_all = np.concatenate([f.rule.x for f in fine])
    union = Saddle(spec, alpha, Rule(x_all, np.concatenate([f.rule.w for f in fine]) / n, settings.method, order,
                                     copies=fine[0].rule.copies, teacher_scale=fine[0].rule.teacher_scale,
                                     configs=fine[0].rule.configs),
                   mirror=fine[0].mirror, response=settings.response)
    return fine, union


def nested_first(union: Saddle, n: int, point: BranchPoint, x0: np.ndarray,
                 settings: SolverSettings) -> DataStep | None:
    """The full multi-start data step of ``union`` at ``x0``, with the minima of the nodes it
    shares with the rules of the refinement that gave ``point`` taken from that refinement's full
    evaluation at the same point (``point._fine``), solved at the other nodes only; ``None`` where
    nothing is shared.

    The scrambled Sobol sequence of one seed is extensible: the fine rule of order ``k`` is the
    first ``2^(k+c)`` points of every block of sign copies of the rule of order ``K > k`` with the
    same seed (``sobol_gaussian``), so a refinement raised from order ``k`` to ``K``
    (the error target, :mod:`attnphase.theory.target`) knows the minima of ``2^(k-K)`` of its
    nodes at its start, with the same starts: the step equals the full evaluation bit for bit, at
    that fraction less (~0.1 s of the semantic branch's order 11 -> 13 at the reference case)."""
    prev = getattr(point, "_fine", None)
    if (prev is None or point.order_params is None or not np.array_equal(point.order_params.to_vector(), x0)
            or union.response in ONE_START):  # (its one start is not the full set the reuse assumes)
        return None
    old, n_old, ds = prev
    new_rule, old_rule = union.rule, old.rule
    if (n_old != n or old_rule.copies != new_rule.copies or old_rule.copies not in ("eta", "xi", "none")
            or old_rule.teacher_scale != new_rule.teacher_scale or old.mirror != union.mirror
            or old_rule.size >= new_rule.size or old_rule.x.shape[1] != new_rule.x.shape[1]
            or ds.prox.h.shape[0] != old_rule.size):
        return None
    nb = 1 + len(COPIES[new_rule.copies])  # (blocks of sign copies in a rule)
    per_old, per_new = old_rule.size // n, new_rule.size // n
    b_old, b_new = per_old // nb, per_new // nb
    idx = (np.arange(n)[:, None, None] * per_new + np.arange(nb)[None, :, None] * b_new
           + np.arange(b_old)[None, None, :]).ravel()
    if idx.size != old_rule.size or not np.array_equal(new_rule.x[idx], old_rule.x):
        return None
    op = OrderParams.from_vector(x0, union.L, union.F, union.rs)
    w, hstar, qis, qinv, R = union.fields(op)
    T = union.target(hstar)  # (the gain value divides the target: docs/model.md (6.5))

    def split(a: np.ndarray, old_part: bool) -> np.ndarray:  # (rules x blocks x nodes: the shared ones first)
        v = a.reshape(n, nb, b_new, *a.shape[1:])
        return (v[:, :, :b_old] if old_part else v[:, :, b_old:]).reshape(-1, *a.shape[1:])

    wf, hf, Tf = split(w, False), split(hstar, False), split(T, False)
    starts = union.full_starts(wf, hf, Tf, op.V)
    if starts.shape[1] != ds.prox.candidates.shape[1]:
        return None
    part = prox_batch(wf, Tf, op.V, union.C, union.amap, starts=starts, mix=union.mix)
    part = escape_saddles(part, wf, Tf, op.V, union.C, union.amap, starts, mix=union.mix)  # (node by node)
    merged = []
    for a_new, a_old in zip(part.arrays(), ds.prox.arrays(), strict=True):
        out = np.empty((n, nb, b_new, *a_new.shape[1:]))
        out[:, :, :b_old] = a_old.reshape(n, nb, b_old, *a_old.shape[1:])
        out[:, :, b_old:] = a_new.reshape(n, nb, b_new - b_old, *a_new.shape[1:])
        merged.append(out.reshape(new_rule.size, *a_new.shape[1:]))
    prox = ProxResult(*merged)
    return union.data_from(op, prox, settings.switch_width, (w, T, qis, qinv, R))
