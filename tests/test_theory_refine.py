"""Multi-fidelity refinement of fixed points (``refine_point``) and the noise-aware root search."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.theory import SolverSettings, solve_point
from attnphase.theory.diagnostics import ErrorEstimate, Refinement
from attnphase.theory.fine_rules import FINE_COPIES, mirror_for, teacher_scale_for
from attnphase.theory.fixed_point import make_saddle, solve_fixed_point
from attnphase.theory.quadrature import Rule
from attnphase.theory.refinement import refine_point
from attnphase.theory.roots import illinois_root
from attnphase.theory.saddle import Saddle

COARSE = SolverSettings(order=7, replicas=1, warmup_order=None, tol=1e-6, noise_tol=1e-4,
                        refine_order=8, refine_replicas=2)


def _union_saddle(spec: ModelSpec, alpha: float, s: SolverSettings, branch: str) -> Saddle:
    """The fine rule of refine_point built independently: the union of its scrambles (with the
    teacher scaling of the reference geometry, whose weights are the density ratio)."""
    rules = [make_saddle(spec, alpha, s, order=s.refine_order, seed=s.seed + 104729 * (k + 1),
                          copies=FINE_COPIES.get(branch, "signs"), teacher_scale=teacher_scale_for(spec, s)).rule
             for k in range(s.refine_replicas)]
    x = np.concatenate([r.x for r in rules])
    w = np.concatenate([r.w for r in rules]) / len(rules)
    return Saddle(spec, alpha, Rule(x, w, "qmc", s.refine_order, copies=rules[0].copies), mirror=mirror_for(spec, s))


@pytest.mark.parametrize("branch", ["semantic", "positional"])
def test_refined_point_is_the_fine_rule_fixed_point(branch):
    """One refinement from a coarse fixed point lands on the fixed point of the fine rule solved
    from scratch: order parameters to the refinement tolerance, the training error (variational:
    second order in that tolerance) much closer, and much closer than the coarse point was."""
    spec = ModelSpec(omega=0.3)
    alpha = 1.5
    coarse = solve_point(spec, alpha, branch, COARSE, error_estimate=False)
    assert coarse.exists
    ref = refine_point(spec, coarse, COARSE)
    info = ref.refinement
    assert info.applied, info
    assert info.nodes == 2 * 4 * 2**8
    sd = _union_saddle(spec, alpha, COARSE, branch)
    exact = solve_fixed_point(sd, coarse.order_params, SolverSettings(tol=1e-8, noise_tol=1e-6))
    assert exact.converged
    x, xr, xc = exact.op.to_vector(), ref.order_params.to_vector(), coarse.order_params.to_vector()
    big = np.abs(x) > 1e-8
    err_ref = np.max(np.abs(xr - x)[big] / np.abs(x[big]))
    err_coarse = np.max(np.abs(xc - x)[big] / np.abs(x[big]))
    assert err_ref < 5e-3 and err_ref < 0.3 * err_coarse
    train = -sd.free_energy(exact.op, exact.data)
    assert abs(ref.train_loss - train) / train < 2e-5
    assert abs(ref.train_loss - train) < 0.1 * abs(coarse.train_loss - train)
    # standard errors over the two fine scrambles are reported and finite
    assert info.errors["train_loss"] > 0 and np.isfinite(info.errors["test_error"])


def test_refine_off_and_absent_points_pass_through():
    spec = ModelSpec(omega=0.3)
    p = solve_point(spec, 1.5, "semantic", SolverSettings(order=6, replicas=1, warmup_order=None, tol=1e-6,
                                                         noise_tol=1e-4), error_estimate=False)
    assert refine_point(spec, p, SolverSettings(order=6)) is p  # refine_order = 0: off


def test_settings_reject_bad_refinement():
    with pytest.raises(ValueError, match="refine_order"):
        SolverSettings(refine_order=1)
    with pytest.raises(ValueError, match="refine_replicas"):
        SolverSettings(refine_replicas=0)


def test_root_stops_at_the_noise_level():
    """With a noise estimate the search stops once the secant step is below the noise in x
    units, returning the secant root; without one it runs to xtol."""
    calls = []

    def f(x: float) -> float:
        calls.append(x)
        return (x - 0.3137) * (1.0 + 0.3 * x)

    r = illinois_root(f, 0.0, 1.0, f(0.0), f(1.0), 1e-9, noise=lambda: 0.02)
    n_noise = len(calls) - 2
    assert abs(r - 0.3137) < 0.02 / 1.0
    calls.clear()
    r2 = illinois_root(f, 0.0, 1.0, f(0.0), f(1.0), 1e-9)
    assert abs(r2 - 0.3137) < 1e-8
    assert n_noise < len(calls) - 2


def test_root_takes_an_evaluation_budget_and_an_unpadded_secant():
    """``max_iter`` caps the evaluations; the secant point is kept 2 % of the bracket inside it
    unless ``pad = 0`` (:func:`attnphase.theory.value.gain_transition`'s search)."""
    calls = []

    def f(x: float) -> float:
        calls.append(x)
        return 0.001 - x

    illinois_root(f, 0.0, 1.0, 0.001, -0.999, 1e-12, max_iter=1)
    assert calls == [0.02]
    calls.clear()
    illinois_root(f, 0.0, 1.0, 0.001, -0.999, 1e-12, max_iter=3, pad=0.0)
    assert len(calls) == 1 and abs(calls[0] - 0.001) < 1e-15  # (the exact root ends the search)
    calls.clear()
    illinois_root(lambda x: f(x) + 0.1 * x * x, 0.0, 1.0, 0.001, -0.899, 1e-12, max_iter=3, pad=0.0)
    assert len(calls) == 3


def test_failed_refinement_returns_the_coarse_point_with_its_error_estimate(monkeypatch):
    """A refinement that cannot converge (here: no evaluation budget) is said so, and the coarse
    point comes back with the linear-response error estimate of the coarse rule (the fallback to
    the full solver, given one iteration, fails too and says why)."""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.target import solve_refined

    monkeypatch.setattr(refinement, "REFINE_MAX_EVALS", 1)
    monkeypatch.setattr(refinement, "FALLBACK_MAX_ITER", 1)
    s = SolverSettings(order=7, replicas=2, warmup_order=None, refine_order=8, refine_replicas=2)
    p = solve_refined(ModelSpec(omega=0.3), 1.5, "positional", s)
    assert p.exists and not p.refinement.applied
    assert "did not converge" in p.refinement.reason
    assert p.refinement.fallback.startswith("full solver from the coarse point: max_iter reached")
    assert p.error_estimate.method.startswith("linear response")
    # where the fine solve stopped, in user units (here one evaluation from the coarse point)
    stop = p.refinement.stopped_at
    assert stop["theta"] == 0.0 and stop["m"] == pytest.approx(p.m, rel=0.05)
    assert f"stopped at m {stop['m']:.3g}" in p.refinement.reason
    assert p.fixed_point.quadrature.nodes == 4 * 2**7


def test_curve_points_are_refined_when_the_solver_asks():
    """The stored ``curve`` kind carries each followed point to the fine rules (so the plotted
    training-error difference crosses zero where the refined alpha_c is marked)."""
    from attnphase.sweeps.kinds import _curve_compute, _curve_normalize

    params = _curve_normalize({"omega": 0.3, "alphas": "1.2,1.4", "branch": "positional", "solver_order": 6,
                               "solver_warmup_order": 6, "solver_replicas": 1, "solver_tol": 1e-6,
                               "solver_noise_tol": 1e-4, "solver_refine_order": 7, "solver_refine_replicas": 2})
    result, diag = _curve_compute(params)
    assert result["exists"] == [True, True]
    assert all(r["applied"] and r["nodes"] == 2 * 4 * 2**7 for r in diag["refined"])


def test_error_estimate_is_the_spread_of_each_rules_own_fixed_point():
    """The reported standard error is that of the fixed points of the individual fine rules,
    each solved from scratch (a linear-response step with the solve's Broyden Jacobian was up to
    9x off at L = 3)."""
    spec = ModelSpec(omega=0.3)
    s = SolverSettings(order=7, replicas=1, warmup_order=None, tol=1e-6, noise_tol=1e-4,
                       refine_order=8, refine_replicas=3)
    coarse = solve_point(spec, 1.5, "semantic", s, error_estimate=False)
    ref = refine_point(spec, coarse, s, tol=1e-6)
    info = ref.refinement
    assert info.applied, info
    assert all(st.startswith("converged") for st in info.rule_solves)
    xs = []
    for k in range(3):
        sd = make_saddle(spec, 1.5, s, order=8, seed=s.seed + 104729 * (k + 1), copies=FINE_COPIES["semantic"],
                          teacher_scale=teacher_scale_for(spec, s), mirror=mirror_for(spec, s))
        res = solve_fixed_point(sd, ref.order_params, SolverSettings(tol=1e-8, noise_tol=1e-6))
        assert res.converged
        xs.append(res.op.to_vector())
    X = np.asarray(xs)
    x = ref.order_params.to_vector()
    se = np.std(X, ddof=1, axis=0) / np.sqrt(3) / np.abs(x).clip(1e-300)
    for i, name in enumerate(ref.order_params.names()):
        if abs(x[i]) > 1e-8:
            assert info.errors[name] == pytest.approx(se[i], rel=0.1), name


@pytest.mark.parametrize("n_failed", [1, 2])
def test_rules_whose_own_solve_failed_are_not_counted(monkeypatch, n_failed):
    """A fine rule whose own fixed-point solve failed stays at the union's point: the standard
    error is over the rules that converged, never a spread pulled towards 0; with fewer than two
    it is each rule's linear response to its own map, and where that fails too there is no
    estimate (the error target then counts as not met)."""
    import attnphase.theory.refinement as refinement

    spec = ModelSpec(omega=0.3)
    s = SolverSettings(order=7, replicas=1, warmup_order=None, tol=1e-6, noise_tol=1e-4,
                       refine_order=8, refine_replicas=3)
    coarse = solve_point(spec, 1.5, "semantic", s, error_estimate=False)
    solve_rules = refinement.rule_fixed_points

    def failing(sd, fine, steps, x, *args, **kw):
        X, status = solve_rules(sd, fine, steps, x, *args, **kw)
        X[:n_failed] = x
        return X, ["left the valid domain"] * n_failed + status[n_failed:]

    monkeypatch.setattr(refinement, "rule_fixed_points", failing)
    ref = refine_point(spec, coarse, s, tol=1e-6)
    est = ref.error_estimate
    assert ref.refinement.applied and ref.refinement.rule_solves[0] == "left the valid domain"
    if n_failed == 1:
        assert "over 2 of 3 fine qmc rules" in est.method
        assert est.get("theta_user") > 0 and est.largest(("q_user", "theta_user")) < 1
    else:
        # (fewer than two rules converged: each rule's linear response to its own map, and
        # without that, no estimate)
        assert est.method.startswith("linear response of the 3 fine qmc rules")
        assert "the own fixed points of 1 of the 3" in est.method
        assert 0 < est.get("theta_user") < 1 and ref.refinement.errors is not None
        from attnphase.theory.target import target_estimate

        assert est.linear_response and target_estimate(ref, "overlaps") == math.inf  # (never meets a target)
        monkeypatch.setattr(refinement, "linear_response_points", lambda *args: None)
        ref = refine_point(spec, coarse, s, tol=1e-6)
        est = ref.error_estimate
        assert est.method.startswith("not estimated: the own fixed points of 1 of the 3")
        assert est.get("theta_user") is None and est.largest(("theta_user",)) == math.inf
        assert ref.refinement.errors is None
        from attnphase.results import BranchResult

        user = BranchResult.from_point(ref)
        assert not user.estimated and "no error estimate" in user.status()
        assert user.error_estimate["method"] == est.method and math.isnan(user.error_estimate["theta_user"])


def test_a_rule_step_past_q_zero_by_rounding_is_taken_to_the_boundary():
    """The trivial branch at small sigma and large alpha has q -> 0 (1e-13 on the union of the
    fine rules at sigma = 0.168, alpha = 5.98): each rule's own solve steps to q ~ -1e-21, which
    is rounding on the boundary q >= 0, not a departure from the valid domain, and is taken to
    q = 0; a step to a q that is negative beyond rounding is left as it is (and then leaves the
    domain). End to end, the three points of the large box sample at sigma 0.12-0.17 (``-m slow``,
    tests/test_box.py) get their error estimates this way."""
    from attnphase.theory.rule_errors import onto_boundary
    from attnphase.theory.saddle import OrderParams

    op = OrderParams(np.array([[-1e-21]]), np.zeros((2, 1)), np.array([[2.5]]), np.zeros((1, 1)))
    on = onto_boundary(op, op.to_vector())
    assert on.q[0, 0] == 0.0 and on.V[0, 0] == 2.5
    far = op.replace(q=np.array([[-1e-6]]))
    assert onto_boundary(far, far.to_vector()) is far
    rank2 = OrderParams(np.array([[0.3, 0.0], [0.0, -1e-20]]), np.zeros((2, 2)), np.eye(2), np.zeros((2, 1)))
    q = onto_boundary(rank2, rank2.to_vector()).q
    assert np.all(np.linalg.eigvalsh(q) >= 0) and q[0, 0] == pytest.approx(0.3, abs=1e-15)


def _rotated(op, t, blocks=1):
    """``op`` with the fields rotated by ``I_blocks (x) U(t)`` (2 x 2 rotation per block)."""
    from attnphase.theory.saddle import OrderParams

    R = np.kron(np.eye(blocks), np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]))
    return OrderParams(R.T @ op.q @ R, op.m @ R, R.T @ op.V @ R, R.T @ op.theta)


@pytest.mark.parametrize("kind", ["positional", "semantic", "mixed"])
def test_gauge_fix_picks_one_point_per_rotation_orbit(kind):
    """Rank 2 (tied): rotations Q -> Q U leave the model invariant; every rotation of a point has
    the same canonical representative, which is a rotation of it (invariants unchanged) and is
    kept by gauge_fix. Rank 1 and untied keys/queries pass through unchanged."""
    from attnphase.theory.saddle import OrderParams

    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    q, V = A @ A.T + 0.1 * np.eye(2), B @ B.T + np.eye(2)
    m = np.outer([1.0, -1.0], [0.3, 0.0]) if kind == "positional" else np.zeros((2, 2))
    if kind == "mixed":  # semantic axis 0, positional axis 1
        m = np.outer([1.0, -1.0], [0.0, 0.3])
    theta = np.array([[0.2], [0.0]]) if kind != "positional" else np.zeros((2, 1))
    # a point of the symmetric branch: no q, V coupling between the semantic, positional and other axes
    q, V = np.diag(np.diag(q)), np.diag(np.diag(V))
    op = _rotated(OrderParams(q, m, V, theta), 0.7)
    sd = make_saddle(ModelSpec(omega=0.3, rank=2), 1.0, SolverSettings(order=4))
    g = sd.gauge_fix(op)
    for t in (0.3, 2.0, -1.1):
        assert np.allclose(sd.gauge_fix(_rotated(op, t)).to_vector(), g.to_vector(), atol=1e-12)
    assert np.allclose(sd.gauge_fix(g).to_vector(), g.to_vector(), atol=1e-12)
    for a, b in ((g.q, q), (g.V, V), (g.theta @ g.theta.T, theta @ theta.T)):
        assert np.allclose(np.linalg.eigvalsh(a), np.linalg.eigvalsh(b), atol=1e-12)
    assert np.allclose(g.m @ g.m.T, m @ m.T, atol=1e-12)
    if kind != "mixed":  # one axis carries all of the signal
        assert np.all(g.m[:, 1] == 0) and np.all(g.theta[1] == 0) and g.q[0, 1] == 0 and g.V[0, 1] == 0
    else:  # a mixed point off the symmetric subspace is projected onto it (the branch the solver follows)
        gen = _rotated(OrderParams(A @ A.T + 0.1 * np.eye(2), np.outer([1.0, -1.0], [0.3, 0.2]), B @ B.T + np.eye(2),
                                   np.array([[0.2], [-0.1]])), 0.4)
        g = sd.gauge_fix(gen)
        assert np.all(g.m[:, 0] == 0) and g.theta[1, 0] == 0 and g.q[0, 1] == 0 and g.V[0, 1] == 0
        assert np.allclose(sd.gauge_fix(g).to_vector(), g.to_vector(), atol=1e-12)
    one = OrderParams(np.eye(1) * 0.2, np.array([[0.1], [-0.1]]), np.eye(1) * 3, np.array([[0.3]]))
    assert sd.gauge_fix(one) is one
    sd_u = make_saddle(ModelSpec(omega=0.3, variant="untied"), 1.0, SolverSettings(order=4))
    assert sd_u.gauge_fix(op) is op


def test_rank_two_rule_makes_the_map_reflection_equivariant():
    """The rank-2 QMC rule contains the reflection of the second student axis, so the data step
    at a point of the symmetric branch gives exactly symmetric conjugates (the subspace the
    gauge projects on is invariant)."""
    from attnphase.theory.saddle import OrderParams

    spec = ModelSpec(omega=0.3, rank=2)
    sd = make_saddle(spec, 1.5, SolverSettings(order=8))
    assert sd.rule.size == 4 * 2**8
    op = OrderParams(np.diag([0.03, 0.045]), np.array([[0.22, 0.0], [-0.22, 0.0]]), np.diag([17.0, 29.0]),
                     np.zeros((2, 1)))
    h = sd.data_step(op).hats
    # (rounding: without the reflections they are 1e-2 to 1e-1 of the diagonal at this order)
    assert abs(h.q_hat[0, 1]) < 1e-9 * h.q_hat[0, 0] and abs(h.V_hat[0, 1]) < 1e-9 * h.V_hat[0, 0]
    assert np.all(np.abs(h.m_hat[:, 1]) < 1e-9 * np.max(np.abs(h.m_hat)))



@pytest.mark.parametrize("kind", ["positional", "semantic", "mixed", "trivial"])
def test_untied_rank_two_gauge_rotates_query_and_key_together(kind):
    """Untied keys/queries of rank 2: Q -> Q U, K -> K U (I_2 (x) U on the fields) is the
    symmetry; every rotation of a point has one representative, with the same invariants, kept
    by gauge_fix; on the pure branches the axis without signal decouples in every block."""
    from attnphase.theory.saddle import OrderParams

    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    q, V = A @ A.T + 0.1 * np.eye(4), B @ B.T + np.eye(4)
    # the symmetric branches: no q, V coupling between the signal axes and the others (mixed:
    # between the semantic axis 0 and the positional axis 1, in and across both blocks)
    sig = {"positional": [0, 2], "semantic": [0, 2], "mixed": [0, 2], "trivial": []}[kind]
    keep = np.zeros((4, 4), dtype=bool)
    keep[np.ix_(sig, sig)] = True
    other = [i for i in range(4) if i not in sig]
    keep[np.ix_(other, other)] = True
    q, V = np.where(keep, q, 0.0), np.where(keep, V, 0.0)
    if kind == "trivial":
        q = np.kron(np.array([[0.3, 0.1], [0.1, 0.4]]), np.eye(2))
        V = np.kron(np.array([[20.0, 2.0], [2.0, 25.0]]), np.eye(2))
    m = np.zeros((2, 4))
    theta = np.zeros((4, 1))
    if kind in ("positional", "mixed"):
        m[:, 1 if kind == "mixed" else 0] = [0.3, -0.3]
        m[:, 3 if kind == "mixed" else 2] = [0.2, -0.2]
    if kind in ("semantic", "mixed"):
        theta[[0, 2], 0] = [0.25, 0.2]
    op = _rotated(OrderParams(q, m, V, theta), 0.7, 2)
    sd = make_saddle(ModelSpec(omega=0.3, rank=2, variant="untied"), 1.0, SolverSettings(order=4))
    g = sd.gauge_fix(op)
    for t in (0.3, 2.0, -1.1):
        assert np.allclose(sd.gauge_fix(_rotated(op, t, 2)).to_vector(), g.to_vector(), atol=1e-12)
    assert np.allclose(sd.gauge_fix(g).to_vector(), g.to_vector(), atol=1e-12)
    for a, b in ((g.q, q), (g.V, V), (g.theta @ g.theta.T, theta @ theta.T)):
        assert np.allclose(np.linalg.eigvalsh(a), np.linalg.eigvalsh(b), atol=1e-12)
    assert np.allclose(g.m @ g.m.T, m @ m.T, atol=1e-12)
    if kind in ("positional", "semantic"):  # axis 0 carries the signal in both blocks
        assert np.all(g.m[:, [1, 3]] == 0) and np.all(g.theta[[1, 3]] == 0)
        assert np.all(g.q[np.ix_([0, 2], [1, 3])] == 0) and np.all(g.V[np.ix_([0, 2], [1, 3])] == 0)
    if kind == "trivial":
        assert np.allclose(g.q, q, atol=1e-12) and np.allclose(g.V, V, atol=1e-12)


def test_untied_rank_two_rule_makes_the_map_reflection_equivariant():
    """The untied rank-2 rule reflects the second axis of query and key together, so the data
    step at a point of the symmetric branch gives exactly decoupled conjugates."""
    from attnphase.theory.saddle import OrderParams

    spec = ModelSpec(omega=0.3, rank=2, variant="untied")
    sd = make_saddle(spec, 1.5, SolverSettings(order=8))
    q = np.kron(np.array([[0.03, 0.02], [0.02, 0.035]]), np.eye(2)) + np.diag([0.01, 0.0, 0.01, 0.0])
    V = np.kron(np.array([[18.0, 2.0], [2.0, 22.0]]), np.eye(2))
    m = np.zeros((2, 4))
    m[:, 0], m[:, 2] = [0.22, -0.22], [0.2, -0.2]
    h = sd.data_step(OrderParams(q, m, V, np.zeros((4, 1)))).hats
    s, o = [0, 2], [1, 3]
    assert np.max(np.abs(h.q_hat[np.ix_(s, o)])) < 1e-9 * np.max(np.abs(h.q_hat))
    assert np.max(np.abs(h.V_hat[np.ix_(s, o)])) < 1e-9 * np.max(np.abs(h.V_hat))
    assert np.all(np.abs(h.m_hat[:, o]) < 1e-9 * np.max(np.abs(h.m_hat)))

def test_rank_two_semantic_point_refines():
    """Rank 2: in the canonical gauge the coarse fixed point refines (it did not when the
    iterates drifted along the rotation orbit) and the error estimate is finite."""
    spec = ModelSpec(omega=0.3, rank=2)
    s = SolverSettings(order=8, replicas=1, tol=1e-6, noise_tol=1e-4, refine_order=9, refine_replicas=2)
    coarse = solve_point(spec, 1.5, "semantic", s, error_estimate=False)
    assert coarse.exists and coarse.converged
    ref = refine_point(spec, coarse, s, tol=1e-6)
    info = ref.refinement
    assert info.applied, info
    assert np.all(np.abs(ref.order_params.m) < 1e-9) and ref.order_params.theta[1, 0] == 0  # (m = 0 up to rounding)
    assert 0 < ref.error_estimate.relative["test_error"] < 0.05


def test_target_error_raises_the_refinement_order_until_met():
    """``target_error``: the order goes up from ``refine_order`` by the orders the estimate's
    decay predicts (capped at ``max_refine_order``); the history records each order's estimate,
    and an unreachable target is reported as not met at ``max_refine_order`` (never silently)."""
    from dataclasses import replace

    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3)
    base = SolverSettings(order=7, replicas=1, warmup_order=None, tol=1e-6, noise_tol=1e-4, refine_order=8)
    easy = solve_refined(spec, 1.5, "semantic", replace(base, target_error=0.5))
    assert easy.error_target.met and list(easy.error_target.orders) == [8]
    hard = solve_refined(spec, 1.5, "semantic", replace(base, target_error=1e-9, max_refine_order=9))
    tgt = hard.error_target
    assert not tgt.met and tgt.orders == (8, 9) and tgt.order == 9
    assert hard.refinement.order == 9
    assert hard.error_estimate.relative["test_error"] == tgt.history[-1].test_error_estimate > 1e-9
    with pytest.raises(ValueError, match="target_error"):
        SolverSettings(target_error=1e-4, refine_replicas=1)


def test_target_on_the_overlaps_takes_their_largest_estimate():
    """``target_on="overlaps"``: the order goes up until the largest relative estimate of ``q``,
    ``m``, ``theta`` (user units) meets the target, recorded next to the test error's;
    ``"all"`` takes the largest of both; an unknown name is refused."""
    from dataclasses import replace

    from attnphase.theory.target import solve_refined, target_estimate

    spec = ModelSpec(omega=0.3)
    base = SolverSettings(order=7, replicas=1, warmup_order=None, tol=1e-6, noise_tol=1e-4, refine_order=8)
    plain = solve_refined(spec, 1.5, "positional", base)
    est = plain.error_estimate.relative
    over = max(est["q_user"], est["m_user"], est["theta_user"])
    assert est["theta_user"] == 0 and over > 0
    assert target_estimate(plain, "overlaps") == over and target_estimate(plain, "test_error") == est["test_error"]
    assert target_estimate(plain, "all") == max(over, est["test_error"])
    # a target between the two estimates: met for the smaller one at once, raised for the larger
    lo, hi = sorted((over, est["test_error"]))
    on = "overlaps" if over == hi else "test_error"
    off = "test_error" if on == "overlaps" else "overlaps"
    mid = (lo * hi) ** 0.5
    at_once = solve_refined(spec, 1.5, "positional", replace(base, target_error=mid, target_on=off))
    assert list(at_once.error_target.orders) == [8]
    raised = solve_refined(spec, 1.5, "positional", replace(base, target_error=mid, target_on=on, max_refine_order=9))
    tgt = raised.error_target
    assert tgt.target_on == on and tgt.orders == (8, 9)
    last = tgt.history[-1]
    assert last.estimate == target_estimate(raised, on)
    assert last.test_error_estimate == raised.error_estimate.relative["test_error"]
    assert tgt.met == (last.estimate <= mid)
    with pytest.raises(ValueError, match="unknown target"):
        SolverSettings(target_on="theta")
    from attnphase.theory.fixed_point import TARGET_KEYS, TARGET_ON

    assert set(TARGET_KEYS) == set(TARGET_ON)  # (every accepted target has its estimates)


def test_orders_to_target_follow_the_measured_decay():
    """At N^-0.64 an estimate 4x the target needs 2^(2/0.64) = 8.7x the nodes (4 orders), 2x the
    target 2^(1/0.64) = 2.95x (2 orders: one gives 2^-0.64 = 0.64, not 1/2); at least one order."""
    from attnphase.theory.target import TARGET_DECAY, orders_to_target

    assert TARGET_DECAY == 0.64
    assert orders_to_target(4e-4, 1e-4) == 4 and orders_to_target(3.5e-4, 1e-4) == 3
    assert orders_to_target(1.3e-4, 1e-4) == 1 and orders_to_target(2.0e-4, 1e-4) == 2
    assert orders_to_target(2.1e-4, 1e-4) == 2 and orders_to_target(2.6e-4, 1e-4) == 3
    assert orders_to_target(float("inf"), 1e-4) == 1 and orders_to_target(5e-5, 1e-4) == 1


def test_gauge_fix_without_signal_is_the_isotropic_point():
    """Trivial branch of rank 2: the whole rotation group fixes it; q and V keep their traces and
    become multiples of the identity."""
    from attnphase.theory.saddle import OrderParams

    sd = make_saddle(ModelSpec(omega=0.3, rank=2), 1.0, SolverSettings(order=4))
    op = OrderParams(np.array([[0.2, 0.01], [0.01, 0.18]]), np.zeros((2, 2)), np.array([[35.8, 0.3], [0.3, 33.4]]),
                     np.zeros((2, 1)))
    g = sd.gauge_fix(op)
    assert np.allclose(g.q, np.trace(op.q) / 2 * np.eye(2)) and np.allclose(g.V, np.trace(op.V) / 2 * np.eye(2))
    assert np.all(g.m == 0) and np.all(g.theta == 0)


def test_returned_points_carry_the_default_order_test_error():
    """Intermediate points get a draft test error (low Gauss-Hermite order); what solve_refined
    returns, refined or not, carries the default-order value, and the draft is labelled."""
    import attnphase.theory.branches as branches
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3)
    s = SolverSettings(order=7, replicas=2, warmup_order=None, refine_order=8, refine_replicas=2)
    p = solve_refined(spec, 1.5, "positional", s)
    sd = make_saddle(spec, 1.5, s)
    assert p.refinement.applied and "draft_test_error" not in p.diagnostics
    assert p.test_error == pytest.approx(sd.test_error(p.order_params), rel=1e-12)
    coarse = p.refinement.coarse
    assert coarse["test_error_order"] == branches.DRAFT_TEST_ORDER
    draft = solve_point(spec, 1.5, "positional", s, error_estimate=False, draft=True)
    assert draft.diagnostics["draft_test_error"]
    assert draft.test_error == pytest.approx(sd.test_error(draft.order_params, order=branches.DRAFT_TEST_ORDER), rel=1e-12)
    final = branches.final_test_error(spec, draft, s)
    assert final.test_error == pytest.approx(sd.test_error(draft.order_params), rel=1e-12)
    assert "draft_test_error" not in final.diagnostics


def test_rank_two_mixed_point_refines_on_one_net_with_its_symmetry_zeros():
    """Rank 2, mixed: the fine rules are single nets (no sign copies, no reflections); the zeros
    the reflections gave (no positional overlap on the semantic axis, no coupling of the two
    axes) are imposed by the gauge, so they stay exact in the refined point."""
    assert FINE_COPIES["mixed"] == "none"
    spec = ModelSpec(omega=0.3, rank=2)
    s = SolverSettings(order=8, replicas=1, tol=1e-6, noise_tol=1e-4, refine_order=9, refine_replicas=2)
    coarse = solve_point(spec, 1.5, "mixed", s, error_estimate=False)
    assert coarse.exists and coarse.converged
    ref = refine_point(spec, coarse, s, tol=1e-6)
    assert ref.refinement.applied, ref.refinement
    op = ref.order_params
    assert np.all(op.m[:, 0] == 0) and op.theta[1, 0] == 0 and op.q[0, 1] == 0 and op.V[0, 1] == 0
    assert abs(op.theta[0, 0]) > 0.01 and np.all(np.abs(op.m[:, 1]) > 0.01)
    assert 0 < ref.error_estimate.relative["test_error"] < 0.05


@pytest.mark.slow  # (a full refinement of an untied rank-2 point: about 20 s)
def test_untied_rank_two_point_refines_on_the_symmetrised_fine_rules():
    """Untied keys/queries of rank 2 keep all sign copies and the reflections in the fine rules:
    with the branch's own flip only, this refinement stops at the evaluation budget (seen, with
    the semantic and mixed ones at the defaults)."""
    spec = ModelSpec(omega=0.3, rank=2, variant="untied")
    s = SolverSettings(order=8, replicas=1, tol=1e-6, noise_tol=1e-4, refine_order=10, refine_replicas=2)
    coarse = solve_point(spec, 1.5, "positional", s, error_estimate=False)
    assert coarse.exists
    ref = refine_point(spec, coarse, s, tol=1e-6)
    assert ref.refinement.applied, ref.refinement


@pytest.mark.parametrize("branch, zero", [("semantic", "m"), ("positional", "theta")])
def test_symmetry_zeros_stay_exact(branch, zero):
    """The semantic m and the positional theta are zero by symmetry: exactly zero in the
    refined point and in every fine rule's own fixed point, so their error estimate is 0 (a
    rounding residue of 1e-11 once let the per-rule solves drift along m: estimate 3e7)."""
    from attnphase.theory.target import solve_refined

    s = SolverSettings(order=8, refine_order=11)  # the CLI's settings (where it was seen)
    p = solve_refined(ModelSpec(omega=0.3), 1.0, branch, s)
    assert p.exists and p.refinement.applied
    assert np.all(getattr(p.order_params, zero) == 0.0)
    est = p.error_estimate.relative
    assert all(v == 0.0 for k, v in est.items() if k.startswith(zero + "["))
    assert all(v < 0.1 for v in est.values())


def test_single_solve_continues_a_branch_its_start_missed():
    """L = 3, omega = 0.3, alpha = 1: the positional start converges to the trivial branch although
    the positional branch exists (it does at 0.8 and 1.2). A single solve (``thorough``) then
    continues the branch from alpha = 0.5 and says so; without it the point is reported absent."""
    spec = ModelSpec(omega=0.3, L=3)
    s = SolverSettings(order=8, warmup_order=None, replicas=1)
    plain = solve_point(spec, 1.0, "positional", s, error_estimate=False)
    assert not plain.exists and "trivial" in plain.reason
    p = solve_point(spec, 1.0, "positional", s, error_estimate=False, thorough=True)
    assert p.exists and p.m > 0.01
    assert "trivial" in p.diagnostics["direct_start"]


def _refined(branch: str, theta: float, m: float, est: dict | None, left_to: str | None = None):
    from attnphase.theory.branches import BranchPoint

    info = Refinement(applied=left_to is None, nodes=16384, replicas=4, left_to=left_to,
                      reason="the refined point left the branch" if left_to else None)
    return BranchPoint(branch, 0.7, True, "ok", q=0.2, m=m, theta=theta, refinement=info,
                       error_estimate=None if est is None else ErrorEstimate(est, "test"))


def test_a_branch_not_resolved_on_the_fine_rules_is_absent():
    """A refined point exists only if its refinement stays on the branch and the overlap that
    defines the branch is resolved from zero (RESOLVE_SE standard errors over the fine rules)."""
    from attnphase.theory.refinement import RESOLVE_SE, fine_absence, mark_unresolved

    ok = _refined("semantic", 0.2, 0.0, {"theta_user": 0.9 / RESOLVE_SE, "m_user": 0.0, "q_user": 1e-3})
    assert fine_absence(ok) is None and mark_unresolved(ok) is ok
    vague = _refined("semantic", 0.05, 0.0, {"theta_user": 1.1 / RESOLVE_SE, "m_user": 0.0, "q_user": 1e-3})
    out = mark_unresolved(vague)
    assert not out.exists and "theta = 0.05 is not resolved from zero" in out.reason
    assert out.theta == 0.05  # (the values are kept)
    left = mark_unresolved(_refined("semantic", 0.04, 0.0, None, left_to="trivial"))
    assert not left.exists and "converges to the trivial branch" in left.reason
    # positional: m decides; theta = 0 by symmetry does not make it absent
    pos = _refined("positional", 0.0, 0.25, {"theta_user": 0.0, "m_user": 2e-3, "q_user": 1e-3})
    assert mark_unresolved(pos).exists
    assert not mark_unresolved(_refined("positional", 0.0, 0.01, {"m_user": 0.5})).exists
    # not refined (or a refinement that failed to converge): nothing to say
    plain = replace(ok, refinement=None, error_estimate=None)
    assert fine_absence(plain) is None


def test_coarse_tail_below_the_semantic_spinodal_is_not_a_branch():
    """Followed below its spinodal on the transition's coarse rule (2^8 x 4), the semantic branch
    continues to small-theta points (theta 0.038 at alpha 0.6, omega 0.3; measured) that are not
    fixed points of finer rules: a single solve with refinement reports the branch absent, and
    keeps it at alpha 1 where it is resolved."""
    from attnphase.theory.fixed_point import FAST
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3)
    s = SolverSettings(**{**FAST, "tol": 1e-6})
    coarse = solve_point(spec, 0.6, "semantic", s, error_estimate=False, thorough=True)
    assert coarse.exists and 0 < abs(coarse.theta) < 0.1  # the artefact of the coarse rule
    p = solve_refined(spec, 0.6, "semantic", s)
    assert not p.exists and "no semantic fixed point on the fine rules" in p.reason
    assert solve_refined(spec, 1.0, "semantic", s).exists


@pytest.mark.slow  # (two refinements, one made to fail: about 10 s)
def test_refinement_falls_back_to_the_full_solver(monkeypatch):
    """L = 3, omega = 0.3, alpha = 1.5, positional (the CLI's settings): from the coarse point
    (|m| ~ 0.06; m's sign is a symmetry) the refinement's quasi-Newton stages stop with no decrease
    along the Newton direction; the full solver on the fine rules converges (|m| ~ 0.014), the point is refined there
    with a forward-difference Jacobian for the per-rule solves, and its fine standard error
    decides whether the branch is resolved. (The rules' own fixed points settle this point before
    the fallback, next test: that decision is switched off here. The plain Stein sums: with the
    mirror pairing the quasi-Newton stage goes to the trivial branch at once, no fallback.)"""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.refinement import fine_absence
    from attnphase.theory.target import solve_refined

    monkeypatch.setattr(refinement, "UNRESOLVED_MARGIN", math.inf)
    spec = ModelSpec(omega=0.3, L=3)
    p = solve_refined(spec, 1.5, "positional", SolverSettings(order=8, refine_order=11, mirror=False))
    info = p.refinement
    assert "full solver from the coarse point: converged" in info.fallback, info
    assert info.applied and info.residual < 1e-6
    coarse_m = abs(info.coarse["m"])
    assert abs(p.m) < 0.5 * coarse_m  # (the fine fixed point is far from the coarse one)
    est = p.error_estimate.relative
    assert np.isfinite(est["m_user"]) and est["test_error"] < 1e-3
    # resolved (m > RESOLVE_SE standard errors) or reported absent: never the coarse point
    assert p.exists == (fine_absence(p) is None)


@pytest.mark.slow  # (three refined L = 3 solves: about 10 s)
def test_rules_own_fixed_points_settle_an_unresolved_branch_before_the_fallback(monkeypatch):
    """L = 3, alpha = 2: where the quasi-Newton stages of the union fail (held here to 6 data steps
    each), each fine rule's own fixed point, from where they stopped, leaves m unresolved, so the
    branch is reported absent without the fallback (the full solver's answer; measured at
    alpha = 1.5: 8.5 s instead of 25 s for the CLI solve). Unheld, the stages converge to the
    noise floor on the trivial branch: absent too, the point having left the branch.
    At alpha 1.5 and 3 whether the rules' solves all converge, and so which of the two paths
    decides, changes with the rounding of the map (e.g. the data step's sums in another order);
    the verdict, absent, does not.
    A branch that is resolved (L = 2, alpha 1.5: m 0.25) is not decided there: its refinement,
    made to fail, still gets the fallback."""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3, L=3)
    free = solve_refined(spec, 2.0, "positional", SolverSettings(order=8, refine_order=11))
    assert not free.exists and free.refinement.fallback is None, free.refinement
    monkeypatch.setattr(refinement, "REFINE_MAX_EVALS", 6)
    p = solve_refined(spec, 2.0, "positional", SolverSettings(order=8, refine_order=11))
    info = p.refinement
    assert not p.exists and info.fallback is None, info
    assert "mean of the 4 rules' own fixed points) is not resolved from zero" in info.unresolved
    assert "no positional fixed point on the fine rules" in p.reason
    seen = []
    monkeypatch.setattr(refinement, "REFINE_MAX_EVALS", 1)
    orig = refinement._rules_unresolve
    monkeypatch.setattr(refinement, "_rules_unresolve", lambda *a, **k: seen.append(orig(*a, **k)) or seen[-1])
    s = SolverSettings(order=7, replicas=2, warmup_order=None, refine_order=8, refine_replicas=2)
    r = solve_refined(ModelSpec(omega=0.3), 1.5, "positional", s)
    assert seen == [None] and r.exists and r.refinement.fallback is not None


def test_a_branch_settled_unresolved_at_a_higher_order_is_reported_absent(monkeypatch):
    """Raising the order for ``target_error``: a refinement that settles the branch as not
    resolved before its fallback (no refined values) ends the search with that verdict, rather
    than as a failed refinement whose lower-order point is kept."""
    import attnphase.theory.target as target
    from attnphase.theory.refinement import mark_unresolved

    why = "m = 0.0004 (mean of the 4 rules' own fixed points) is not resolved from zero on the fine rules"
    calls = []

    def fake_refine(spec, point, settings, tol=None, **kw):
        calls.append(settings.refine_order)
        return replace(point, refinement=Refinement(applied=False, unresolved=why))

    monkeypatch.setattr(target, "refine_point", fake_refine)
    p = _refined("positional", 0.0, 0.05, {"m_user": 0.1, "test_error": 1e-3})
    out = target._refine_to_target(ModelSpec(omega=0.3), p, SolverSettings(refine_order=8, target_error=1e-4))
    assert calls == [14]  # (1e-3 -> 1e-4 at N^-0.64: 6 orders up from 8)
    assert out.error_target.order == 14
    marked = mark_unresolved(out)
    assert not marked.exists and why in marked.reason
    # (a failed refinement without that verdict keeps the lower-order point, as before)
    monkeypatch.setattr(target, "refine_point", lambda spec, point, settings, tol=None, **kw: replace(
        point, refinement=Refinement(applied=False, reason="did not converge")))
    kept = target._refine_to_target(ModelSpec(omega=0.3), p, SolverSettings(refine_order=8, target_error=1e-4))
    assert mark_unresolved(kept).exists and kept.error_target.order == 8
    assert kept.error_target.history[-1].reason == "did not converge"  # (why the raise ended)


def test_raising_the_order_skips_the_full_solver_fallback(monkeypatch):
    """The order raise asks each refinement for its quasi-Newton stages alone (docstring of
    ``_refine_to_target``: the fallback cost 97 s at order 14 without converging)."""
    import attnphase.theory.target as target

    seen = []

    def fake_refine(spec, point, settings, tol=None, fallback=True, **kw):
        seen.append(fallback)
        return replace(point, refinement=Refinement(applied=False, reason="no"))

    monkeypatch.setattr(target, "refine_point", fake_refine)
    p = _refined("positional", 0.0, 0.05, {"m_user": 0.1, "test_error": 1e-3})
    target._refine_to_target(ModelSpec(omega=0.3), p, SolverSettings(refine_order=8, target_error=1e-4))
    assert seen == [False]


@pytest.mark.slow
def test_unconverged_rule_solves_decide_nothing(monkeypatch):
    """The decision before the fallback needs every fine rule's own solve to converge: with the
    quasi-Newton stages held to 3 data steps (so that they fail) and one Broyden step for each
    rule's own solve, none converges, and the same point goes to the fallback."""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.target import solve_refined

    monkeypatch.setattr(refinement, "REFINE_MAX_EVALS", 3)
    monkeypatch.setattr(refinement, "UNRESOLVED_MAX_EVALS", 1)
    monkeypatch.setattr(refinement, "FALLBACK_MAX_ITER", 1)
    q = solve_refined(ModelSpec(omega=0.3, L=3), 3.0, "positional", SolverSettings(order=8, refine_order=11))
    assert q.refinement.unresolved is None and q.refinement.fallback is not None


def test_semantic_refinement_reaches_the_fine_rules_branch_from_a_coarse_point_off_it():
    """Causal student, alpha = 1.75 (near the end of its semantic branch): the coarse rule's
    point (theta 0.20) is not on the fine rules' branch (theta 0.35). The refinement's quasi-Newton
    stage, whose inherited Jacobian gives no decrease there, goes on with a forward-difference one
    and reaches the branch directly, where an independent continuation on the order-10 rule lands
    (without that, the refinement fell towards the trivial branch and the branch was continued
    down from 2 alpha instead: test_semantic_branch_the_coarse_rule_misses_is_continued_from_above)."""
    from attnphase.theory import follow_branch
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3, variant="causal")
    s = SolverSettings(order=8, refine_order=10)
    p = solve_refined(spec, 1.75, "semantic", s)
    ref = p.refinement
    assert p.exists and ref.applied and ref.retry is None and ref.fallback is None
    assert ref.coarse["theta"] == pytest.approx(0.202, abs=0.01)
    path = follow_branch(spec, [2.0, 1.9, 1.8, 1.75], "semantic", SolverSettings(order=10, warmup_order=None))
    assert path[-1].exists
    assert abs(p.theta) == pytest.approx(abs(path[-1].theta), rel=0.03)
    assert abs(p.theta) > 0.3


@pytest.mark.parametrize("variant", ["tied", "causal"])
def test_positional_branch_the_direct_start_loses_is_continued_from_below(variant):
    """omega = 0.3, alpha = 3.6: the positional start's damped iteration goes to a point near the
    trivial branch on the coarse rule (m 0.011 tied, 0.08 causal), which the fine rules do not
    confirm, while the branch exists there; continued up from alpha / 2 on the rule one order
    below the fine rules it is reached, and lands on the branch that a continuation along alpha
    from 2 follows (the two on different rules: within 1 % in m, 3 % in q; the coarse point's q
    is 0.41 causal)."""
    from attnphase.theory import follow_branch
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3, variant=variant)
    p = solve_refined(spec, 3.6, "positional", SolverSettings.preset("fast"))
    assert p.exists and p.refinement.applied
    assert "continued up from alpha 1.8 on order 9" in p.refinement.retry
    path = follow_branch(spec, [2.0, 2.5, 3.0, 3.3, 3.6], "positional", SolverSettings(order=10, warmup_order=None))
    assert all(pt.exists for pt in path)
    assert abs(p.m) == pytest.approx(abs(path[-1].m), rel=0.01) and abs(p.m) > 0.25
    assert p.q == pytest.approx(path[-1].q, rel=0.03)


def test_unrefined_point_whose_overlap_is_not_resolved_is_absent():
    """coarse_absence: a point kept from the coarse rule (refinement failed) whose defining overlap
    has a relative error estimate above 1/RESOLVE_SE does not count as a point of its branch."""
    from attnphase.theory.branches import BranchPoint
    from attnphase.theory.refinement import RESOLVE_SE
    from attnphase.theory.target import coarse_absence

    def pt(branch, err_theta, err_m):
        return BranchPoint(branch, 1.0, True, "ok", m=0.1, theta=0.2,
                           error_estimate=ErrorEstimate({"theta_user": err_theta, "m_user": err_m}, "test"))

    assert coarse_absence(pt("semantic", 0.9 / RESOLVE_SE, 5.0)) is None
    assert "theta = 0.2 has a relative error estimate of 1.3" in coarse_absence(pt("semantic", 1.27, 0.0))
    assert "m = 0.1" in coarse_absence(pt("positional", 0.0, 2.0))
    assert coarse_absence(pt("mixed", 0.01, 0.5)) is not None
    assert coarse_absence(pt("trivial", 9.0, 9.0)) is None


@pytest.mark.parametrize("alpha,before", [(1.65, "the coarse solve found no point of the branch"),
                                          (1.7, "the refinement of the coarse point (coarse theta 0.1")])
def test_semantic_branch_the_coarse_rule_misses_is_continued_from_above(alpha, before):
    """Causal student near the end of its semantic branch, where the coarse rule's branch has
    ended (1.65: the coarse start goes trivial) or nearly (1.7: theta 0.105, whose refinement goes
    trivial): the branch is still found, by continuation from 2 alpha, and refined."""
    from attnphase.theory.target import solve_refined

    p = solve_refined(ModelSpec(omega=0.3, variant="causal"), alpha, "semantic",
                      SolverSettings(order=8, refine_order=10))
    assert p.exists and p.refinement.applied
    assert p.refinement.retry.startswith(before)
    assert abs(p.theta) > 0.25  # (docs/variants.md: 0.287 / 0.323 at order 12 by continuation)


def test_a_branch_the_coarse_rule_has_nowhere_near_is_not_looked_for_again(monkeypatch):
    """Reference model, omega = 0.3, lambda = 1e-3, alpha = 0.2, far below the semantic branch's
    end: the coarse semantic start converges to another branch, and so does every continuation's
    origin (0.1 and the neighbours 0.18 and 0.22). The branch is absent with what was tried; it is
    not continued on a finer rule, nor in the ridge (the start converged)."""
    import attnphase.theory.target as T

    origins = []
    orig = T.origin_point
    monkeypatch.setattr(T, "origin_point", lambda *a, **k: origins.append(a[1]) or orig(*a, **k))
    p = T.solve_refined(ModelSpec(omega=0.3, lam=1e-3), 0.2, "semantic", SolverSettings(order=8, refine_order=10))
    assert not p.exists and p.converged and T.converged_elsewhere(p)
    assert "nor by continuation from alpha = 0.1 or alpha = 0.181818 or alpha = 0.22)" in p.reason, p.reason
    assert "lambda" not in p.reason and "order 9" not in p.reason and origins == []


@pytest.mark.slow  # (refined solves below the branch's end: about 3 s)
def test_semantic_point_below_the_end_of_the_branch_stays_absent():
    """Below the fold of the causal semantic branch (alpha 1.5) the second try is made and fails:
    the branch is absent, and the reason says what was tried."""
    from attnphase.theory.target import solve_refined

    p = solve_refined(ModelSpec(omega=0.3, variant="causal"), 1.5, "semantic", SolverSettings(order=8, refine_order=10))
    assert not p.exists
    assert "continued down from alpha 3 on order 9" in p.reason


@pytest.mark.slow  # (a causal branch followed to its end: about 5 s)
def test_causal_semantic_spinodal_is_where_the_fine_rules_end_the_branch(capsys):
    """The coarse rule of `transition` loses the causal semantic branch near alpha 1.77; the fine
    rules hold it down to the fold near 1.61 (docs/variants.md: the residual's minimum grows
    linearly below 1.62 at order 12). The spinodal search continues it on the rule one order
    below the fine rules and reports that end, with a note."""
    import json

    from attnphase.cli import main

    assert main(["transition", "--variant", "causal", "--omega", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 1.55 <= out["spinodals"]["semantic"] <= 1.7
    assert any("continues to" in n for n in out["notes"])


def test_followed_semantic_branch_is_continued_below_the_coarse_rules_end():
    """refine_followed (curves, curve sweeps): the causal semantic branch followed on the coarse
    rule has no refined point at alpha 1.7 (the coarse point, theta 0.105, is below the fine
    rules' branch); continued from 1.8 on the rule one order below the fine rules it is there,
    refined, and says so. The tied branch at omega = 0.3 keeps its points."""
    from attnphase.theory import follow_branch
    from attnphase.theory.fixed_point import FAST
    from attnphase.theory.refinement import refine_followed

    s = SolverSettings(**FAST)
    spec = ModelSpec(omega=0.3, variant="causal")
    coarse = follow_branch(spec, [2.0, 1.8, 1.7], "semantic", s)
    assert abs(coarse[-1].theta) < 0.15  # (the coarse rule's branch is about to end)
    pts = refine_followed(spec, coarse, s)
    p = pts[-1]
    assert p.exists and p.refinement.applied
    assert "continued from alpha 1.8 on order 9" in p.diagnostics["continued_below"]
    assert 0.28 < abs(p.theta) < 0.36  # (0.3231 at order 12 by continuation, docs/variants.md)
    assert all("continued_below" not in q.diagnostics for q in pts[:2])


def test_failed_semantic_refinement_still_falls_back_to_the_full_solver(monkeypatch):
    """A semantic point whose refinement fails and that has no finer rule to be continued on
    (refine order = order + 1) still gets the full-solver fallback (after the continuation from
    above was considered), and reports it."""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.target import solve_refined

    monkeypatch.setattr(refinement, "REFINE_MAX_EVALS", 1)
    monkeypatch.setattr(refinement, "FALLBACK_MAX_ITER", 1)
    s = SolverSettings(order=7, replicas=2, warmup_order=None, refine_order=8, refine_replicas=2)
    p = solve_refined(ModelSpec(omega=0.3), 1.5, "semantic", s)
    assert not p.refinement.applied
    assert p.refinement.fallback.startswith("full solver from the coarse point: max_iter reached")


def test_teacher_scale_is_used_where_it_was_measured_to_help():
    """The fine rules scale the teacher noises by default at L = 2, rank 1 (tied, causal, untied)
    and keep the plain rule at L = 3 and rank 2, where it made the estimates larger; an explicit
    setting wins, and the refined point records the rule it used."""
    auto = SolverSettings()
    for kw in ({}, {"variant": "causal"}, {"variant": "untied"}, {"token_corr": 0.3}):
        assert teacher_scale_for(ModelSpec(omega=0.3, **kw), auto) == 1.4
    for kw in ({"L": 3}, {"rank": 2}, {"rank": 2, "variant": "untied"}):
        assert teacher_scale_for(ModelSpec(omega=0.3, **kw), auto) == 1.0
    assert teacher_scale_for(ModelSpec(omega=0.3), SolverSettings(fine_teacher_scale=1.0)) == 1.0
    assert teacher_scale_for(ModelSpec(omega=0.3, L=3), SolverSettings(fine_teacher_scale=1.3)) == 1.3
    with pytest.raises(ValueError, match="fine_teacher_scale"):
        SolverSettings(fine_teacher_scale=0.5)
    coarse = solve_point(ModelSpec(omega=0.3), 1.5, "semantic", COARSE, error_estimate=False)
    assert refine_point(ModelSpec(omega=0.3), coarse, COARSE).refinement.teacher_scale == 1.4


def test_mirror_pairing_is_used_where_it_was_measured_to_help():
    """The fine rules pair the mirror nodes by default for the tied and causal students at L = 2,
    rank 1, uncorrelated tokens, and not for the untied student, L = 3, rank 2 or correlated
    tokens (no gain or a loss there, docs/solver.md); an explicit setting wins, the coarse rule
    never pairs, and the refined point records what its fine rules did."""
    from attnphase.cli import build_parser
    from attnphase.cli.theory_cmds import settings_from_args

    auto = SolverSettings()
    for kw in ({}, {"variant": "causal"}):
        assert mirror_for(ModelSpec(omega=0.3, **kw), auto)
    for kw in ({"variant": "untied"}, {"token_corr": 0.3}, {"L": 3}, {"rank": 2}):
        assert not mirror_for(ModelSpec(omega=0.3, **kw), auto)
    assert not mirror_for(ModelSpec(omega=0.3), SolverSettings(mirror=False))
    assert mirror_for(ModelSpec(omega=0.3, L=3), SolverSettings(mirror=True))
    for flag, want in (("auto", None), ("on", True), ("off", False)):
        args = build_parser().parse_args(["solve", "--alpha", "1", "--omega", "0.3", "--solver", f"mirror={flag}"])
        assert settings_from_args(args).mirror is want
    spec = ModelSpec(omega=0.3)
    assert not make_saddle(spec, 1.5, auto).mirror
    coarse = solve_point(spec, 1.5, "semantic", COARSE, error_estimate=False)
    assert refine_point(spec, coarse, COARSE).refinement.mirror is True
    off = replace(COARSE, mirror=False)
    assert refine_point(spec, coarse, off).refinement.mirror is False


def test_spinodal_bisection_reports_the_bracket_midpoint_without_rounding_noise():
    """The midpoint of the final bracket prints as the number it stands for (0.675, not
    0.6749999999999999), within the bracket that bisection leaves."""
    from attnphase.theory.roots import bisect, bisect_bracket, midpoint

    def exists(a: float) -> float | None:
        return 1.0 if a > 0.66 else None

    below = 0.7 - 0.05  # (a grid value minus the grid step, as the spinodal search makes it: 0.6499999999999999)
    lo, hi = bisect_bracket(exists, 0.7, below, 1.0, 0.06)
    x = bisect(exists, 0.7, below, 1.0, 0.06)
    assert 0.5 * (lo + hi) != 0.675 and x == 0.675 == midpoint(lo, hi) and min(lo, hi) < x < max(lo, hi)



@pytest.mark.parametrize("branch", ["semantic", "positional", "trivial"])
def test_raising_the_order_reuses_the_minima_of_the_shared_nodes(branch, monkeypatch):
    """The fine rules of order k are the first nodes of each block of sign copies of those of
    order K > k with the same scrambles: a refinement raised from a refined point takes their
    minima from that point's full evaluation (``_nested_first``), which is the full evaluation at
    the point bit for bit, and so is the refined result; without the record it solves them again."""
    import attnphase.theory.refinement as refinement
    from attnphase.theory.saddle import OrderParams
    from attnphase.theory.target import solve_refined

    spec = ModelSpec(omega=0.3)
    s8 = SolverSettings(order=7, refine_order=8)
    assert solve_refined(spec, 1.0, branch, s8)._fine is None  # (kept only on the way to a target)
    p = refine_point(spec, solve_point(spec, 1.0, branch, s8), s8, tol=s8.tol, keep_fine=True)
    assert p._fine is not None and p._fine[0].rule.size == 4 * 4 * 2**8
    st = SolverSettings(order=7, refine_order=10)
    seen = []
    nested = refinement.nested_first
    monkeypatch.setattr(refinement, "nested_first", lambda *args: seen.append(nested(*args)) or seen[-1])
    a = refine_point(spec, p, st, tol=st.tol, keep_fine=True)
    assert seen and seen[0] is not None
    union = a._fine[0]
    full = union.data_step(OrderParams.from_vector(p.order_params.to_vector(), union.L, union.F, union.rs),
                           switch_width=st.switch_width)
    for key in ("h", "value", "candidates", "candidate_values"):
        assert np.array_equal(getattr(seen[0].prox, key), getattr(full.prox, key)), key
    b = refine_point(spec, replace(p, _fine=None), st, tol=st.tol)
    assert np.array_equal(a.order_params.to_vector(), b.order_params.to_vector())
    assert a.error_estimate == b.error_estimate


@pytest.mark.parametrize("refreshed", [True, False])
def test_the_retry_goes_on_from_a_first_stage_that_took_forward_differences(monkeypatch, refreshed):
    """The refinement's retry stage: where the first quasi-Newton stage already replaced the coarse
    Jacobian by forward differences, it goes on from where that stage stopped, with its Jacobian;
    otherwise it restarts from the coarse point with forward differences (``J0=None``). The Jacobian
    goes on in the relative units of the new start."""
    from types import SimpleNamespace

    from attnphase.theory import refinement
    from attnphase.theory.newton import QuasiNewtonResult

    x0, J1 = np.array([0.1, 0.2, 3.0]), np.array([[2.0, 0.5, 0.1], [0.3, 1.5, 0.2], [0.4, 0.6, 1.2]])
    calls = []

    def fake_quasi_newton(union, x, qs, J0=None, warm=None, max_evals=0, confirm_full=True, first_full=None):
        calls.append((x.copy(), J0, max_evals))
        if len(calls) == 1:  # (the first stage: out of budget short of tol, above the noise floor)
            return QuasiNewtonResult(x + 0.01, None, 3e-3, J1, 24, False, "evaluation budget spent", resid=3e-3,
                                     refreshed=refreshed)
        return QuasiNewtonResult(x, None, 1e-9, np.eye(3), 5, True, "converged")

    monkeypatch.setattr(refinement, "quasi_newton", fake_quasi_newton)
    point = SimpleNamespace(_jacobian=np.eye(3), _fine=None)
    s = SolverSettings(tol=1e-8, noise_tol=1e-4)
    qn, x_units, tried = refinement._fine_stages(None, 2, point, x0, s, s, True, 12, True)
    assert qn.ok and len(calls) == 2 and len(tried) == 2
    x, J0, max_evals = calls[1]
    if refreshed:
        units = np.outer(x0 / (x0 + 0.01), (x0 + 0.01) / x0)  # (J'_ij = J_ij (s_i / s'_i) (s'_j / s_j))
        assert np.array_equal(x, x0 + 0.01) and np.allclose(J0, J1 * units, rtol=1e-14)
        assert np.array_equal(x_units, x0 + 0.01)
    else:
        assert np.array_equal(x, x0) and J0 is None and np.array_equal(x_units, x0)
    assert max_evals == 24 + 12


def test_a_jacobian_in_the_units_of_one_point_converts_to_those_of_another():
    """``in_units``: the Jacobian of a linear residual ``r = A x`` taken in the relative units of one
    point equals, converted, the one taken directly in those of another (unknowns near zero, where
    the scale is ``1e-3``, included); points with different free unknowns leave it as it is."""
    from attnphase.theory.newton import RelativeUnits, in_units

    rng = np.random.default_rng(3)
    A = rng.normal(size=(4, 4))

    def jac(x):  # (d(r / s) / d(x / s) = diag(1/s) A diag(s))
        s = RelativeUnits(x).scale
        return A * np.outer(1.0 / s, s)

    a, b = np.array([0.3, -2.0, 1e-5, 0.05]), np.array([0.31, 0.04, -4e-4, 7.0])
    assert np.allclose(in_units(jac(a), a, b), jac(b), rtol=1e-13, atol=0)
    assert np.allclose(in_units(in_units(jac(a), a, b), b, a), jac(a), rtol=1e-13, atol=0)
    J = jac(a)
    assert in_units(J, a, np.array([0.3, 0.0, 1e-5, 0.05])) is J
