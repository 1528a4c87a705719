"""The branch a fixed point is on (docs/model.md (5.1)): :func:`classify` by its overlaps, and
:func:`has_mixed`, whether the student has a ``mixed`` branch (:func:`combined_branch`: the
``mixed`` or, for several heads, the ``specialised`` branch, docs/model.md (11.3)). Kept apart from
:mod:`~attnphase.theory.branches` so that the pseudo-arclength continuation
(:mod:`~attnphase.theory.continuation`), which classifies the points it walks through, needs
nothing of the branches' solver, which uses it to locate where a branch ends."""

from __future__ import annotations

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import AttentionMap
from attnphase.theory.saddle import OrderParams

#: for tied attention of rank r >= 2: one student direction semantic, another positional (the
#: state GD reaches at r = 2, docs/variants.md)
MIXED = "mixed"
#: for several heads: one head semantic, another positional (docs/model.md (11.3))
SPECIALISED = "specialised"
#: threshold (user units) above which an overlap counts as non-zero when classifying a fixed point
CLASSIFY_TOL = 1e-3


def has_mixed(spec: ModelSpec) -> bool:
    """The student has a ``mixed`` branch: tied, causal or untied attention of rank ``r >= 2``
    (its fixed points are orbits under rotations of the student axes)."""
    return AttentionMap.from_spec(spec).rotation_invariant


def combined_branch(spec: ModelSpec) -> str | None:
    """The branch with both overlaps the student has: :data:`MIXED` (rank ``r >= 2``),
    :data:`SPECIALISED` (several heads, docs/model.md (11.3)) or ``None``."""
    if spec.heads > 1:
        return SPECIALISED
    return MIXED if has_mixed(spec) else None


def classify(op: OrderParams, sigma: float, mixed: bool | str | None = False) -> str:
    """Name the branch a fixed point belongs to (docs/model.md (5.1); semantic: ``theta != 0``;
    positional: ``m != 0``; with ``mixed`` (rank >= 2, in the gauge of ``Saddle.gauge_fix``) both,
    ``mixed``, or the branch ``mixed`` names (:func:`combined_branch`: ``specialised`` for
    several heads, docs/model.md (11.3)); trivial: neither), each overlap counted as non-zero
    above ``CLASSIFY_TOL``."""
    theta = np.max(np.abs(op.theta)) / sigma**2
    m = np.max(np.abs(op.m))
    if mixed and theta > CLASSIFY_TOL and m > CLASSIFY_TOL:
        return mixed if isinstance(mixed, str) else MIXED
    if theta > CLASSIFY_TOL:
        return "semantic"
    if m > CLASSIFY_TOL:
        return "positional"
    return "trivial"
