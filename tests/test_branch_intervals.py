"""Where a branch exists: followed ranges without holes, ends located and named (docs/model.md
(5.1), (5.3); docs/solver.md "Where a branch exists")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.branches import (
    RAMP_NEAR,
    BranchPoint,
    branch_holes,
    branches_for,
    follow_branch,
    locate_end,
    ramp_origins,
    with_end,
)
from attnphase.theory.diagnostics import FixedPointInfo, QuadratureInfo
from attnphase.theory.fixed_point import FAST


def _point(branch: str, alpha: float, exists: bool = True, m: float = 0.0, theta: float = 0.0,
           found: str | None = None) -> BranchPoint:
    """A stand-in for a solved point: only the fields the end location and the hole check read."""
    info = FixedPointInfo(residual=0.0, seconds=0.0, solver_reason="test", quadrature=QuadratureInfo("qmc", 8, 1024),
                          prox_max_grad=0.0, classified_as=found or branch)
    return BranchPoint(branch=branch, alpha=alpha, exists=exists, reason="ok" if exists else "absent", m=m,
                       theta=theta, converged=True, fixed_point=info)


def test_a_pitchfork_is_located_as_a_collapse_onto_the_trivial_branch():
    """Followed upward, ``m^2 = 0.3 (0.9 - alpha)``: the branch collapses onto the trivial one at 0.9,
    located from three points held below it, inside the bracket (0.85, 0.95)."""
    held = [_point("positional", a, m=math.sqrt(0.3 * (0.9 - a))) for a in (0.7, 0.8, 0.85)]
    end = locate_end("positional", held, 0.95, _point("positional", 0.95, exists=False, found="trivial"))
    assert end["kind"] == "collapse"
    assert end["alpha"] == pytest.approx(0.9, abs=1e-9)
    assert end["bracket"] == [0.85, 0.95] and end["held"] == 0.85
    assert "collapses onto the trivial branch above alpha = 0.9 " in end["message"]


def test_a_fold_is_located_at_the_turn_of_the_branch():
    """Followed downward, ``alpha = 1.6 + 4 (theta - 0.2)^2`` on the upper side: the branch turns at a
    fold at ``alpha`` 1.6 with ``theta`` 0.2 (not a collapse: ``theta`` stays finite)."""
    held = [_point("semantic", 1.6 + 4 * (t - 0.2) ** 2, theta=t) for t in (0.4, 0.3, 0.25)]
    end = locate_end("semantic", held, 1.55, _point("semantic", 1.55, exists=False, found="trivial"))
    assert end["kind"] == "fold"
    assert end["alpha"] == pytest.approx(1.6, abs=1e-9)
    assert end["overlap"] == "theta" and end["overlap_at_end"] == pytest.approx(0.2, abs=1e-9)
    assert end["message"].startswith("the semantic branch ends at a fold at alpha = 1.6 ")


def test_an_end_the_parabola_does_not_locate_is_lost():
    """A branch whose overlap does not turn towards the lost ``alpha`` (straight line) and is not
    near zero: neither a fold nor a collapse is located."""
    held = [_point("semantic", a, theta=0.1 * a) for a in (1.2, 1.1, 1.05)]
    end = locate_end("semantic", held, 1.0, _point("semantic", 1.0, exists=False, found="trivial"))
    assert end["kind"] == "lost" and end["bracket"] == [1.0, 1.05]
    assert "no fold or collapse located" in end["message"]


def test_the_trivial_branch_does_not_collapse_onto_itself():
    """An end of the trivial branch is not named a collapse onto the trivial branch."""
    held = [_point("trivial", a) for a in (1.3, 1.35, 1.375)]
    end = locate_end("trivial", held, 1.4, _point("trivial", 1.4, exists=False, found="positional"))
    assert end["kind"] == "lost" and "collapses" not in end["message"]


def test_holes_are_gaps_without_a_located_end():
    """An absent point between two points of the branch is a hole unless an end (fold or collapse)
    located between those two points is attached to the gap; a lost end does not count."""
    pts = [_point("positional", a, exists=a not in (0.3, 0.4)) for a in (0.1, 0.2, 0.3, 0.4, 0.5)]
    assert branch_holes(pts) == [0.3, 0.4]
    collapse = {"kind": "collapse", "alpha": 0.25, "message": "the positional branch collapses ..."}
    filled = [with_end(p, collapse) if not p.exists else p for p in pts]
    assert branch_holes(filled) == []
    assert filled[2].reason.startswith("the positional branch collapses ...; here: absent")
    elsewhere = [with_end(p, {**collapse, "alpha": 0.7}) if not p.exists else p for p in pts]
    assert branch_holes(elsewhere) == [0.3, 0.4]
    lost = [with_end(p, {**collapse, "kind": "lost"}) if not p.exists else p for p in pts]
    assert branch_holes(lost) == [0.3, 0.4]


def test_a_single_solve_is_also_continued_from_both_neighbours():
    """The continuation of a failed direct start ends with the neighbours ``alpha / RAMP_NEAR`` and
    ``alpha * RAMP_NEAR``, after the fixed origins (below ``alpha``)."""
    origins = ramp_origins(0.7)
    assert origins[:2] == [0.5, 0.1]
    assert origins[-2:] == pytest.approx([0.7 / RAMP_NEAR, 0.7 * RAMP_NEAR])
    assert max(origins) > 0.7
    assert ramp_origins(0.5 * RAMP_NEAR) == pytest.approx([0.5, 0.1, 0.5 * RAMP_NEAR**2])  # (0.5 once)
    assert ramp_origins(0.7, near=False) == [0.5, 0.1]


def test_positional_branch_at_sigma_one_has_no_hole_and_its_end_is_named():
    """sigma = 1, omega = 0.3, the coarse rule of the fast preset: the positional branch (``m``
    about 2e-3, an artefact of that rule that the fine rules reject) is found at 0.45 and lost at
    0.55; its end between them is located (the halved steps bracket it, pseudo-arclength
    continuation tells a fold from a collapse onto the trivial branch) and named in the absent
    point's reason (before, the point said only that the start went trivial)."""
    spec = ModelSpec(sigma=1.0, omega=0.3)
    pts = follow_branch(spec, [0.45, 0.55], "positional", SolverSettings(**FAST))
    assert pts[0].exists and not pts[1].exists
    (end,) = pts[1].diagnostics["ends"]
    assert end["kind"] in ("collapse", "fold") and 0.45 < end["alpha"] < 0.55
    named = {"collapse": "collapses onto the trivial branch above alpha = ", "fold": "ends at a fold at alpha = "}
    assert pts[1].reason.startswith(f"the positional branch {named[end['kind']]}{end['alpha']:.4g} ")
    assert branch_holes(pts) == []


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.7, 1.0, pytest.param(2.0, marks=pytest.mark.xfail(
    strict=True, reason="the semantic branch is held from neither side at alpha = 1.0, the trivial one at 1.4, "
    "and no end is located (docs/solver.md, Where a branch exists)"))])
def test_followed_branches_have_no_holes(sigma):
    """Every branch followed over 0.05-1.5 (30 points, omega 0.3, fast preset's coarse rule; the
    semantic branch downward, the others upward, as curves follows them): no ``alpha`` where a
    branch is absent between two where it exists without an end located between (the scan of
    studies/branch_holes.py)."""
    spec = ModelSpec(sigma=sigma, omega=0.3)
    grid = np.linspace(0.05, 1.5, 30).tolist()
    holes = {}
    for br in branches_for(spec):
        down = br == "semantic"
        pts = follow_branch(spec, grid[::-1] if down else grid, br, SolverSettings(**FAST))
        holes[br] = branch_holes(pts[::-1] if down else pts)
    assert {br: h for br, h in holes.items() if h} == {}


def test_the_parabola_through_three_points_is_exact():
    """``parabola`` interpolates: the coefficients about the middle point of ``y = 4 (x - 0.2)^2 + 1.6``."""
    from attnphase.theory.continuation import parabola

    x = [0.3, 0.25, 0.4]
    a, b, c, x0 = parabola(x, [1.6 + 4 * (t - 0.2) ** 2 for t in x])
    assert (a, b, c, x0) == pytest.approx((4.0, 0.4, 1.61, 0.25), abs=1e-12)
    assert parabola([1.0, 1.0, 2.0], [0.0, 1.0, 2.0])[:2] == (0.0, 0.0)


def test_a_fold_on_the_first_step_of_a_walk_has_an_alpha():
    """Where the pseudo-arclength walk turns on its first step there are two points, not three:
    the fold lies between them (it raised an IndexError in a followed range at sigma = 1)."""
    from attnphase.theory.continuation import _fold_alpha

    assert _fold_alpha([0.0, 0.1], [1.0, 1.02]) == pytest.approx(1.01)


@pytest.mark.slow
def test_a_followed_point_drifting_to_the_trivial_branch_is_refined_as_a_single_solve_is():
    """sigma = 0.7, omega = 0.3, semantic at alpha = 0.6: the followed coarse point (theta 0.33)
    refined to the quick tolerance stops at theta 0.0075 while still drifting; refined to the
    solver's tolerance, as ``solve`` refines, it reaches the trivial branch. The curves and the
    single solve agree that the branch is absent there and present at 0.7."""
    import attnphase as ap
    from attnphase.theory.refinement import refine_followed

    spec = ModelSpec(sigma=0.7, omega=0.3)
    st = SolverSettings.preset("fast")
    followed = refine_followed(spec, follow_branch(spec, [0.7, 0.6], "semantic", st), st)
    assert [p.exists for p in followed] == [True, False]
    single = [ap.solve(a, branch="semantic", sigma=0.7, omega=0.3, settings="fast", progress=False) for a in (0.7, 0.6)]
    assert [r.branches.get("semantic") is not None for r in single] == [True, False]
    assert followed[0].theta == pytest.approx(single[0].branches["semantic"].theta, rel=0.02)
