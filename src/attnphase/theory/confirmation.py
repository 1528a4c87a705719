"""What a refined point says about its branch (docs/solver.md): whether it is refined, confirmed,
left its branch or is absent on the fine rules, and the overlap it leaves unresolved.
"""

from __future__ import annotations

from attnphase.theory.branch_point import (
    BranchPoint,
)
from attnphase.theory.classification import MIXED, SPECIALISED


def is_refined(point: BranchPoint) -> bool:
    """The point was carried to the fine rules (:func:`refine_point` converged on the branch)."""
    ref = getattr(point, "refinement", None)
    return ref is not None and ref.applied


def left_branch(point: BranchPoint) -> str | None:
    """The branch that :func:`refine_point` converged to when it left ``point``'s branch
    (``None`` if it did not leave it or was not run)."""
    return None if point.refinement is None else point.refinement.left_to


#: a branch exists on the fine rules only if the overlap that defines it exceeds this many
#: standard errors over the fine rules (about the two-sided 95 % t quantile for 4 rules)
RESOLVE_SE = 3.0


def fine_absence(point: BranchPoint) -> str | None:
    """Why a coarse fixed point is not a fixed point of the branch on the finer rules (``None``
    if it is, or if it was not refined).

    Either its refinement converged to another branch, or the overlap that defines the branch
    (``theta`` semantic, ``m`` positional, both mixed) is within ``RESOLVE_SE`` standard errors
    of zero over the fine rules. Measured at ``omega = 0.3``: followed downward on the 2^8 x 4
    rule of the transition, the semantic branch does not end but continues to small-``theta``
    points (``theta = 0.038`` at ``alpha = 0.6``, ``-0.016`` at 0.4; relative errors ~1) whose
    refinements go to the trivial branch, and the transition reported that tail's end (0.33) as
    the spinodal; on 2^14 x 4 nodes the branch drops from ``theta = 0.23`` (0.8) to 0.10 (0.75)
    and 0.018 (0.72), and the small-``theta`` tail ends at 0.69.
    """
    to = left_branch(point)
    if to is not None:
        assert point.refinement is not None  # (left_branch read it)
        n = point.refinement.nodes
        return f"refined on {n} nodes, the fixed point converges to the {to} branch"
    why = settled_unresolved(point)
    if why is not None:
        return why
    if not is_refined(point):
        return None
    bad = unresolved_overlap(point)
    if bad is None:
        return None
    key, err = bad
    n = None if point.refinement is None else point.refinement.replicas
    return (f"{key} = {getattr(point, key):.3g} is not resolved from zero on the fine rules "
            f"(relative standard error {err:.2g} over {n} rules)")


def settled_unresolved(point: BranchPoint) -> str | None:
    """Why the branch is not resolved, where :func:`refine_point` decided it from the fine rules'
    own fixed points before its fallback (:func:`_rules_unresolve`); ``None`` otherwise."""
    ref = getattr(point, "refinement", None)
    return None if ref is None else ref.unresolved


def unresolved_overlap(point: BranchPoint) -> tuple[str, float] | None:
    """The overlap that defines ``point``'s branch (``theta`` semantic, ``m`` positional, both
    mixed) and its relative error estimate, if that is above ``1 / RESOLVE_SE``."""
    est = point.error_estimate
    if est is None:
        return None
    for key in DEFINING_OVERLAPS.get(point.branch, ()):
        err = est.get(f"{key}_user")
        if err is not None and err * RESOLVE_SE > 1:
            return key, float(err)
    return None


def is_confirmed(point: BranchPoint) -> bool:
    """``point`` was refined (:func:`refine_point` converged on the branch) and the fine rules
    resolve it (:func:`fine_absence`)."""
    return is_refined(point) and fine_absence(point) is None


#: the overlaps (user units) that define a branch: it is absent where they are not resolved
DEFINING_OVERLAPS = {"semantic": ("theta",), "positional": ("m",), MIXED: ("theta", "m"), SPECIALISED: ("theta", "m")}
