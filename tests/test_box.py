"""The solver over the parameter box (docs/solver.md, "The parameter box"): seeded samples of
``sigma`` in [0.1, 2], ``lambda`` in [1e-4, 1], ``omega`` in [0, 0.95], ``alpha`` in [0.02, 10]
must each end cleanly (:func:`attnphase.checks.check_solve`) with no branch that continuation finds
and the single solve misses (:func:`attnphase.checks.check_holes`). A small sample runs by default,
the large one (every variant) under ``-m slow``."""

from __future__ import annotations

import dataclasses

import pytest

from attnphase.checks import (
    BOX,
    VARIANT_MODELS,
    BoxPoint,
    check_holes,
    check_solve,
    sample_box,
    solve_box_point,
)


def test_sample_box_is_seeded_and_inside_the_box():
    a, b = sample_box(20, seed=3), sample_box(20, seed=3)
    assert a == b and a != sample_box(20, seed=4)
    for p in a:
        assert BOX.contains(sigma=p.sigma, lam=p.lam, omega=p.omega, alpha=p.alpha)
    # log-uniform in lambda: about a quarter of 200 draws per decade
    lams = [p.lam for p in sample_box(200, seed=0)]
    assert 25 <= sum(1e-3 <= v < 1e-2 for v in lams) <= 75
    assert [p.model for p in sample_box(3, models=("L3", "causal"))] == ["L3", "causal", "L3"]
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        sample_box(1, models=("nope",))


def test_box_point_command_reproduces_the_model():
    p = BoxPoint("mixture", 0.3, 0.001, 0.2, 1.5)
    assert p.spec().mixture == 2 and p.spec().sigma == 0.3
    assert "--sigma 0.3 --lam 0.001" in p.command() and "--mixture 2" in p.command()


#: the default suite's sample: a few points of the reference model, away from the reference values
DEFAULT_SAMPLE = sample_box(3, seed=2026)


@pytest.fixture(scope="module")
def sample_solves():
    """The default sample's solves (one solve per point for the module)."""
    return [solve_box_point(p) for p in DEFAULT_SAMPLE]


@pytest.mark.parametrize("i", range(len(DEFAULT_SAMPLE)), ids=[p.command() for p in DEFAULT_SAMPLE])
def test_box_sample_is_clean(sample_solves, i):
    r = sample_solves[i]
    assert r.clean, f"{r.point.command()}: {r.error or r.problems}"


def test_check_solve_finds_a_wrong_global_minimum_and_a_silent_absence(sample_solves):
    res = next(r.result for r in sample_solves if r.result is not None and r.clean)
    assert check_solve(res) == ()
    low = res.branches[res.global_minimum]
    worse = dataclasses.replace(low, branch="semantic", train_loss=2 * low.train_loss + 1e-3)
    wrong = dataclasses.replace(res, branches={**res.branches, "semantic": worse}, global_minimum="semantic")
    assert any("not the lowest branch" in m for m in check_solve(wrong))
    silent = dataclasses.replace(res, branches={**res.branches, "semantic": None}, absent={})
    assert any("absent without a reason" in m for m in check_solve(silent))
    nan = dataclasses.replace(res, branches={**res.branches, res.global_minimum: dataclasses.replace(low, q=float("nan"))})
    assert any("not finite: q" in m for m in check_solve(nan))


def test_check_holes_finds_a_branch_the_solve_calls_absent():
    """The hole check can fail: at the reference model's ``alpha = 1`` (``omega = 0.3``, the fast
    preset) a solve result with its semantic branch dropped is caught, the branch being continued
    from ``alpha = 0.9`` and confirmed on the fine rules; the full result has no hole."""
    from attnphase import solve

    res = solve(1.0, omega=0.3, branch="semantic", settings="fast")
    assert res.branches["semantic"] is not None
    assert check_holes(res) == ()
    dropped = dataclasses.replace(res, branches={**res.branches, "semantic": None},
                                  absent={**res.absent, "semantic": "dropped"})
    (hole,) = check_holes(dropped)
    assert hole.startswith("semantic: absent at alpha = 1 by solve, but continued from alpha = 0.9"), hole


LARGE_SAMPLE = sample_box(40, seed=7) + sample_box(3 * len(VARIANT_MODELS), seed=8, models=tuple(VARIANT_MODELS))


@pytest.mark.slow
@pytest.mark.parametrize("point", LARGE_SAMPLE, ids=[p.command() for p in LARGE_SAMPLE])
def test_box_large_sample_is_clean_and_has_no_holes(point):
    r = solve_box_point(point, holes=True)
    assert r.clean, f"{point.command()}: {r.error or r.problems}"


@pytest.mark.slow
def test_the_trivial_branch_is_found_near_interpolation_at_the_fast_preset():
    """Untied student, lambda = 1.3e-4, alpha = 0.57 (a point of the box where the fixed point
    nearly interpolates the samples): the trivial branch exists everywhere in the box and is found
    with its error estimate; the informed starts fall to it."""
    from attnphase import solve

    r = solve(alpha=0.5668, omega=0.7158, sigma=1.144, lam=1.289e-4, variant="untied", settings="fast")
    assert r.global_minimum == "trivial"
    t = r.branches["trivial"]
    assert t.converged and t.error_estimate is not None and t.error_estimate["q_user"] < 0.01
    assert 0.1 < t.q < 0.2 and t.train_loss < 1e-4
