"""Pseudo-arclength continuation on the fixed-point residual (docs/model.md (7.6))."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.theory import SolverSettings, branches, solve_point
from attnphase.theory.branches import continue_from, follow_branch, origin_point, semantic_by_arclength
from attnphase.theory.continuation import arclength
from attnphase.theory.fixed_point import FAST, make_saddle
from attnphase.theory.saddle import OrderParams
from attnphase.theory.target import solve_refined

CAUSAL = ModelSpec(omega=0.3, variant="causal")


def _settings(order: int) -> SolverSettings:
    return SolverSettings(**{**FAST, "order": order})


def _map_residual(spec: ModelSpec, alpha: float, s: SolverSettings, x: np.ndarray) -> float:
    """Largest relative change of the unknowns under one full step of the fixed-point map (global
    minima from the full start set), computed without the continuation's code."""
    sd = make_saddle(spec, alpha, s)
    op = OrderParams.from_vector(x, sd.L, sd.F, sd.rs)
    fx = sd.weights_step(sd.data_step(op, switch_width=s.switch_width).hats).to_vector()
    big = np.abs(x) > 1e-12
    return float(np.max(np.abs(fx - x)[big] / np.abs(x[big])))


def test_arclength_lands_on_the_branch_where_it_exists():
    """Followed from alpha = 2 down to 1.75 on the coarse rule, the continuation lands on the
    point that the continuation with warm starts finds there."""
    s = _settings(8)
    ref = follow_branch(CAUSAL, [2.0, 1.85, 1.75], "semantic", s)
    assert all(p.exists for p in ref)
    r = arclength(CAUSAL, ref[0].order_params, 2.0, 1.75, "semantic", s)
    assert r.success and r.reached is not None and r.fold is None
    assert r.reached.alpha == 1.75 and r.reached.stable
    x, xr = ref[-1].order_params.to_vector(), r.reached.x
    big = np.abs(x) > 1e-12
    assert np.max(np.abs(xr - x)[big] / np.abs(x[big])) < 1e-5


def test_arclength_passes_the_fold_the_iteration_cannot():
    """On 4 x 2^10 nodes the causal semantic branch turns at a fold: past it the branch runs back
    up in alpha as fixed points the damped iteration cannot hold (growth > 0) and meets the
    trivial branch. Every point is a root of the full map (checked independently); the
    iteration from below the fold goes to the trivial branch."""
    s = _settings(10)
    start = solve_point(CAUSAL, 2.0, "semantic", s, error_estimate=False)
    assert start.exists
    r = arclength(CAUSAL, start.order_params, 2.0, 1.5, "semantic", s, past_fold=30)
    assert not r.success and r.fold is not None
    assert 1.55 < r.fold < 1.65 and r.fold_theta is not None and abs(r.fold_theta) > 0.1  # a fold, not theta -> 0
    assert r.rejoins is not None and r.rejoins_branch == "trivial" and r.fold < r.rejoins < 1.7
    assert "fold" in r.message and "trivial" in r.message
    above = [p for p in r.points if p.alpha > r.fold + 0.01]
    unstable = [p for p in above if not p.stable and abs(p.theta) > 0.05]
    stable = [p for p in above if p.stable and abs(p.theta) > abs(r.fold_theta)]
    assert unstable and stable
    # two semantic fixed points at (nearly) the same alpha: the stable one and the unstable one
    for p in (unstable[0], stable[-1]):
        assert _map_residual(CAUSAL, p.alpha, s, p.x) < 1e-5
    near = min(stable, key=lambda p: p.alpha)
    below = solve_point(CAUSAL, r.fold - 0.02, "semantic", s, start=OrderParams.from_vector(near.x, 2, 1, 1),
                        error_estimate=False, ramp=False)
    assert not below.exists and below.fixed_point.classified_as == "trivial"
    # from a start below where the far side meets the trivial branch, the far side is followed back
    # to the start's alpha only (the interval the walk was to cover), so it does not reach that meeting
    first = next(p for p in r.points if p.stable and r.fold < p.alpha < r.rejoins)
    r2 = arclength(CAUSAL, OrderParams.from_vector(first.x, 2, 1, 1), first.alpha, 1.5, "semantic", s, past_fold=30)
    assert r2.fold == pytest.approx(r.fold, abs=0.01) and r2.rejoins is None
    assert first.alpha < r2.points[-1].alpha < r.rejoins and r2.points[-2].alpha < first.alpha


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.5])
def test_solve_reports_the_fold(alpha):
    """``solve`` (the single-solve path) at an alpha below the causal semantic branch's fold says
    so: the branch is absent and the reason names the fold found by the continuation."""
    s = replace(SolverSettings.preset("fast"), target_error=0.0)
    p = solve_refined(CAUSAL, alpha, "semantic", s)
    assert not p.exists
    assert "pseudo-arclength" in p.reason and ("fold" in p.reason or "meets the trivial" in p.reason)


@pytest.mark.slow  # (GD at d = 1000, 2 seeds: about 2-4 min on 2 cores; two refined solves)
def test_L3_has_no_positional_branch_at_1_5_in_theory_or_gd():
    """L = 3, omega = 0.3, alpha = 1.5: the solver reports no positional branch, and GD at
    d = 1000 from the positional start ends on the semantic minimum, whose overlaps and errors
    agree with the theory's semantic branch within 5 % (measured: theta -1.4 %, q -1.3 %, test
    error +0.6 %, training error -0.4 %; docs/variants.md, "L = 3")."""
    import attnphase as ap

    spec = ModelSpec(omega=0.3, L=3)
    s = SolverSettings.preset("default")
    assert not solve_refined(spec, 1.5, "positional", s).exists
    sem = solve_refined(spec, 1.5, "semantic", s)
    assert sem.exists
    sim = ap.simulate(1.5, 1000, init="positional", seeds=2, spec=spec, momentum=0.9, tol=1e-6, dtype="float64",
                      threads=1)
    runs = sim.to_dict()["runs"]
    assert all(r["converged"] and r["branch"] == "semantic" for r in runs), runs
    for key in ("theta", "q", "test_error", "train_loss"):
        gd = float(np.mean([abs(r[key]) for r in runs]))
        th = abs(getattr(sem, key))
        assert abs(gd - th) / th < 0.05, (key, gd, th)


def test_the_walk_to_a_fold_starts_from_the_last_point_the_warm_start_continuation_reached(monkeypatch):
    """Where the continuation with warm starts loses the semantic branch on its way down, the
    pseudo-arclength walk starts from the last point it reached, not from the origin again, and
    finds the same fold (causal student, order 10: the branch folds near 1.6)."""
    s = _settings(10)
    p0 = origin_point(CAUSAL, 3.0, "semantic", s)
    trail: list = []
    assert continue_from(CAUSAL, 1.5, "semantic", s, 3.0, first=p0, trail=trail) is None
    assert trail[0] is p0 and 1.6 < trail[-1].alpha < 3.0
    starts = []

    def recorded(spec, start, alpha0, *args, **kwargs):
        starts.append(alpha0)
        return arclength(spec, start, alpha0, *args, **kwargs)

    monkeypatch.setattr(branches, "arclength", recorded)
    mid, why = semantic_by_arclength(CAUSAL, 1.5, s, 3.0, p0, nearer=trail[-1])
    assert mid is None and starts == [trail[-1].alpha]
    assert "fold at alpha 1.59" in why or "fold at alpha 1.60" in why
