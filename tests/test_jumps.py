"""The jump share of the weights step's stiffness (docs/model.md (3.5), attnphase.theory.jumps) and
the responses that leave the global minimiser: local (3.6) and the one-start selections, semantic
and positional start (3.7)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.channels import loss_hessian_batch
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.jumps import jump_share, pointwise_v_hat, start_from

MIXTURE = ModelSpec(omega=0.3, mixture=2, mixture_sep=1.0, mixture_align=0.5)


def test_pointwise_form_is_the_local_curvature_form():
    """At rank one the central differences of the minimiser continued locally give
    ``alpha E[tr H (I + V H)^{-1}]`` with ``H`` the loss Hessian at each node's minimiser
    (the implicit function theorem, docs/model.md (3.3)): two independent computations."""
    spec = ModelSpec(omega=0.3)
    st = SolverSettings.preset("fast", order=8, warmup_order=8)
    pt = solve_point(spec, 1.2, "semantic", st, error_estimate=False)
    assert pt.exists and pt.order_params is not None
    op = pt.order_params
    sd = make_saddle(spec, 1.2, st)
    ds = sd.data_step(op)
    V = float(op.V[0, 0])
    H = loss_hessian_batch(ds.prox.h, ds.T, sd.C, sd.amap)
    n = H.shape[1]
    local = sd.alpha * float(sd.rule.w @ np.einsum("nii->n", H @ np.linalg.inv(np.eye(n)[None] + V * H)))
    fd = float(pointwise_v_hat(sd, op.V, ds)[0, 0])
    assert fd == pytest.approx(local, rel=1e-4)
    # (and it differs from the Stein form here: the minimiser jumps on this branch)
    assert abs(fd - float(ds.hats.V_hat[0, 0])) > 1e-2 * fd


def test_smooth_branch_has_no_jump_share_and_the_mixture_positional_branch_has_one():
    """docs/variants.md, "The jump share": the tied semantic branch at ``alpha = 1.5`` (where
    theory and GD agree) has ``J`` of the order of the rule's noise (-0.0012 +- 0.0012 on three
    order-12 rules); the mixture's positional branch at ``rho_mu = 1``, ``kappa = 0.5``,
    ``alpha = 1`` (GD's ``q`` 16 % below the theory) has 0.178 +- 0.003."""
    smooth = jump_share(ModelSpec(omega=0.3), 1.5, "semantic", order=10, seeds=(0,))
    jumpy = jump_share(MIXTURE, 1.0, "positional", order=10, seeds=(0,))
    assert smooth.success and jumpy.success, (smooth.message, jumpy.message)
    assert abs(smooth.share) < 0.01, smooth
    assert 0.15 < jumpy.share < 0.21, jumpy
    assert np.isnan(jumpy.share_error) and "jump share J = 0.1" in jumpy.message


def test_start_from_a_solve_reaches_the_branch_the_direct_start_misses():
    """The causal semantic branch at ``alpha = 1.75`` is not reached from the branch's own start
    on an order-10 rule; from the overlaps of a solve (continued from larger ``alpha``) it is, with a
    jump share well above the smooth points' (0.050 on this rule; 0.083 +- 0.002 on three order-12
    rules, docs/variants.md)."""
    import attnphase as ap

    spec = ModelSpec(omega=0.3, variant="causal")
    assert not jump_share(spec, 1.75, "semantic", order=10, seeds=(0,)).success
    b = ap.solve(1.75, spec=spec, branch="semantic", settings="fast").branches["semantic"]
    assert b is not None
    j = jump_share(spec, 1.75, "semantic", order=10, seeds=(0,),
                   start=start_from(spec, b.q_matrix, b.m_matrix, b.V, b.theta_matrix, b.s_matrix))
    assert j.success and j.share > 0.03, j


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnphase", *args], capture_output=True, text=True, timeout=300)


def test_solve_jumps_on_the_command_line():
    out = _cli("solve", "--alpha", "1.5", "--omega", "0.3", "--branch", "semantic", "--preset", "fast",
               "--jumps", "--json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)["jump_share"]["semantic"]
    assert rec["success"] and len(rec["stein"]) == 3 and abs(rec["share"]) < 0.01
    bad = _cli("solve", "--alpha", "1.5", "--token-corr", "0.2", "--jumps")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "uncorrelated tokens" in bad.stderr


@pytest.mark.slow  # (8 s: under -m slow to keep the default suite within its time)
def test_local_response_is_the_global_one_where_the_minimiser_is_smooth_and_lower_where_it_jumps():
    """docs/model.md (3.6): the state-following equations differ from the replica-symmetric ones
    only through the jumps' surface term of ``V_hat``. On the tied semantic branch at
    ``alpha = 1.5`` (``J = -0.001``) the two give the same point; on the mixture's positional branch
    at ``kappa = 0.5``, ``alpha = 1`` (``J = 0.18``) the local one has the larger stiffness, so a
    smaller ``q`` (0.308 against 0.378 with the default preset), and a larger ``m``; the semantic
    branch there (``J`` below ``1e-3``) is again the same."""
    import attnphase as ap
    from attnphase import SolverSettings

    fast, local = SolverSettings.preset("fast"), SolverSettings.preset("fast", response="local")
    a = ap.solve(1.5, omega=0.3, branch="semantic", settings=fast).branches["semantic"]
    b = ap.solve(1.5, omega=0.3, branch="semantic", settings=local).branches["semantic"]
    assert a is not None and b is not None
    for key in ("q", "theta", "train_loss"):
        assert getattr(b, key) == pytest.approx(getattr(a, key), rel=3e-3), key
    g = ap.solve(1.0, spec=MIXTURE, settings=fast)
    loc = ap.solve(1.0, spec=MIXTURE, settings=local)
    gp, lp = g.branches["positional"], loc.branches["positional"]
    assert gp is not None and lp is not None
    assert lp.q < 0.88 * gp.q and abs(lp.m) > 1.05 * abs(gp.m), (lp, gp)
    gs, ls = g.branches["semantic"], loc.branches["semantic"]
    assert gs is not None and ls is not None and ls.theta == pytest.approx(gs.theta, rel=3e-3)


def test_local_response_is_refused_where_it_is_not_defined():
    from attnphase import SolverSettings

    with pytest.raises(ValueError, match="unknown response"):
        SolverSettings(response="stein")
    bad = _cli("solve", "--alpha", "1", "--response", "local", "--token-corr", "0.2")
    assert bad.returncode == 2 and "uncorrelated tokens" in bad.stderr and bad.stderr.count("\n") == 1


CAUSAL = ModelSpec(omega=0.3, variant="causal")


def _semantic_start(**changes):
    return _one_start("semantic-start", **changes)


def _one_start(response: str, **changes):
    from attnphase import SolverSettings

    return SolverSettings.preset("fast", **{"response": response, "refine_order": 0, "order": 10, "warmup_order": 10,
                                            "replicas": 1, **changes})


def test_semantic_start_holds_the_causal_branch_below_the_fold():
    """docs/model.md (3.7), docs/variants.md "Causal student": the global equations lose the causal
    semantic branch at the fold (1.611); with every node kept in the basin of its teacher-aligned
    start the branch continues to ``alpha = 1.5`` (theta 0.321 +- 0.002 over three order-10 rules,
    GD at d = 1000: 0.336 +- 0.012), and at the tied control it is the global equations' point
    within 1 % (0.5424 against 0.5386 at ``alpha = 1.5``)."""
    import attnphase as ap

    b = ap.solve(1.5, spec=CAUSAL, branch="semantic", settings=_semantic_start()).branches["semantic"]
    assert b is not None and 0.30 < b.theta < 0.345, b
    tied = ap.solve(1.5, omega=0.3, branch="semantic", settings=_semantic_start()).branches["semantic"]
    ref = ap.solve(1.5, omega=0.3, branch="semantic", settings="fast").branches["semantic"]
    assert tied is not None and ref is not None
    assert tied.theta == pytest.approx(ref.theta, rel=0.015)


RELU = ModelSpec(omega=0.3, activation="relu", teacher_activation="relu")


def test_semantic_start_of_relu_holds_the_large_theta_state():
    """docs/heads.md: ReLU attention (student and teacher) at ``alpha = 1.5``, ``omega = 0.3``. The
    global equations' semantic point has ``theta`` ~0.36; gradient descent from ``Q = Q*`` holds
    ``theta`` 0.88-0.94 (``d`` = 1000-2000), which the semantic-start selection gives (0.908 on one
    order-11 rule, 0.901 on the order-8 rule here)."""
    import attnphase as ap

    held = ap.solve(1.5, spec=RELU, branch="semantic", settings=_semantic_start(order=8, warmup_order=8))
    b = held.branches["semantic"]
    assert b is not None and 0.85 < b.theta < 0.95, held.message


def test_semantic_start_is_refused_where_it_is_not_defined():
    import attnphase as ap
    from attnphase import SolverSettings

    with pytest.raises(ValueError, match="runs on one rule"):
        SolverSettings(refine_order=10, response="semantic-start")
    one_rule = SolverSettings.preset("fast", response="semantic-start")  # (the preset runs it on one rule)
    assert one_rule.refine_order == 0 and one_rule.target_error == 0
    with pytest.raises(ValueError, match="describes the semantic branch"):
        ap.solve(1.5, spec=CAUSAL, settings=_semantic_start())
    with pytest.raises(ValueError, match="rank 1"):
        ap.solve(1.5, omega=0.3, rank=2, branch="semantic", settings=_semantic_start())
    bad = _cli("solve", "--alpha", "1.5", "--variant", "causal", "--response", "semantic-start")
    assert bad.returncode == 2 and "--branch semantic" in bad.stderr and bad.stderr.count("\n") == 1


def test_commands_that_need_other_branches_refuse_a_semantic_only_response_at_once(tmp_path, monkeypatch):
    """``transition``, ``curves`` and the sweep kinds that solve the positional branch refuse the
    semantic-start response before any fixed point is solved (one line, exit status 2), and so do
    the local responses on correlated tokens: no solve is reached, which the patched solvers see."""
    import attnphase as ap
    from attnphase.sweeps import get_kind
    from attnphase.theory import branches

    def no_solve(*args, **kwargs):
        raise AssertionError("a fixed point was solved before the response was refused")

    monkeypatch.setattr(branches, "solve_fixed_point", no_solve)
    with pytest.raises(ValueError, match="not the positional one"):
        ap.transition(omega=0.3, settings=_semantic_start())
    with pytest.raises(ValueError, match="uncorrelated tokens"):
        ap.transition(omega=0.3, token_corr=0.2, settings=SolverSettings.preset("fast", response="local"))
    for kind, params in (("theory", {"alpha": 1.0, "branch": "positional"}), ("transition", {}),
                         ("curve", {"branch": "trivial"})):
        with pytest.raises(ValueError, match="semantic branch only"):
            get_kind(kind).normalize({"omega": 0.3, "solver_response": "semantic-start", **params})
    for args in (("transition",), ("curves", "--out", str(tmp_path / "c"))):
        bad = _cli(*args, "--omega", "0.3", "--response", "semantic-start")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert "semantic branch only" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "c").exists()


def _one_start_and_gd(spec: ModelSpec, alpha: float, branch: str, max_steps: int):
    """The ``branch``-start selection's point on one order-11 rule (the command line's) and GD from
    the same start at ``d = 1000``, seeds 0-3, float64, to a gradient tolerance of 1e-6."""
    import torch

    import attnphase as ap
    from attnphase.sim import TrainSettings, simulate

    torch.set_num_threads(1)
    st = SolverSettings.preset("default", response=f"{branch}-start", refine_order=0, target_error=0.0, order=11,
                               warmup_order=10)
    th = ap.solve(alpha, spec=spec, branch=branch, settings=st).branches[branch]
    assert th is not None
    gd = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=max_steps, dtype="float64",
                       log_every=0)
    return th, simulate(spec, alpha=alpha, d=1000, seeds=(0, 1, 2, 3), inits=(branch,), settings=gd)


@pytest.mark.slow  # (GD at d = 1000, 4 seeds, and two solves: about two minutes)
def test_relu_gd_from_the_teacher_agrees_with_the_semantic_start_not_the_global_equations():
    """docs/heads.md: ReLU at ``alpha = 1.5``, ``omega = 0.3``: GD from ``Q = Q*`` at ``d = 1000``
    (seeds 0-3, every run converged) ends at the semantic-start selection's ``theta`` and training
    error within 5 %, a training error above the global equations' global minimum (the trivial
    branch): the state of the dynamics, not the minimum of the risk."""
    import attnphase as ap

    th, sim = _one_start_and_gd(RELU, 1.5, "semantic", 20000)
    assert len(sim.runs) == 4 and all(r.converged for r in sim.runs), [r.steps for r in sim.runs]
    theta = float(np.mean([abs(r.theta) for r in sim.runs]))
    train = float(np.mean([r.train_loss for r in sim.runs]))
    print(f"\nsemantic-start theory: theta {th.theta:.4f}, training error {th.train_loss:.5f}; GD {theta:.4f}, {train:.5f}")
    assert theta == pytest.approx(th.theta, rel=0.05) and train == pytest.approx(th.train_loss, rel=0.05)
    glob = ap.solve(1.5, spec=RELU, settings="fast")
    low = glob.branches[glob.global_minimum]
    assert low is not None and th.train_loss > 1.03 * low.train_loss


@pytest.mark.slow  # (GD at d = 1000, 4 seeds, and a one-rule solve: a few minutes)
def test_causal_gd_below_the_fold_agrees_with_the_semantic_start_equations():
    """docs/variants.md "Causal student": at ``alpha = 1.5``, below the global equations' fold, GD
    from the semantic start at ``d = 1000`` (mean of seeds 0-3) agrees with the semantic-start
    equations (``attnphase solve --response semantic-start``, one order-11 rule) within 5 % on
    ``theta`` and ``q`` and 7 % on the errors."""
    th, res = _one_start_and_gd(CAUSAL, 1.5, "semantic", max_steps=8000)
    sim = {k: float(np.mean([abs(getattr(r, k)) for r in res.runs])) for k in ("theta", "q", "train_loss",
                                                                              "test_error")}
    print(f"\nsemantic-start theory: theta {th.theta:.4f} q {th.q:.4f}; GD {sim}")
    for k in ("theta", "q"):
        assert abs(sim[k] - abs(getattr(th, k))) <= 0.05 * abs(getattr(th, k)), k
    for k in ("train_loss", "test_error"):
        assert abs(sim[k] - getattr(th, k)) <= 0.07 * getattr(th, k), k


L3 = ModelSpec(omega=0.3, L=3)


def _m_rms(m_matrix) -> float:
    return float(np.sqrt(np.mean(np.asarray(m_matrix, dtype=float) ** 2)))


def test_positional_start_is_close_to_the_global_positional_branch_where_that_exists():
    """docs/model.md (3.7): for the tied student at ``L = 2``, ``alpha = 1``, the positional-start
    selection differs from the global equations only where the global minimiser swaps between
    mirror minima: within 4 % on ``q`` and ``m``, 1.5 % on the errors (one order-10 rule each)."""
    import attnphase as ap

    sel = ap.solve(1.0, omega=0.3, branch="positional", settings=_one_start("positional-start")).branches["positional"]
    ref = ap.solve(1.0, omega=0.3, branch="positional",
                   settings=SolverSettings.preset("fast", order=10, warmup_order=10, refine_order=0,
                                                  replicas=1)).branches["positional"]
    assert sel is not None and ref is not None
    assert sel.theta == 0.0
    for k in ("q", "m"):
        assert getattr(sel, k) == pytest.approx(getattr(ref, k), rel=0.04), k
    for k in ("train_loss", "test_error"):
        assert getattr(sel, k) == pytest.approx(getattr(ref, k), rel=0.015), k


@pytest.mark.slow  # (5 s: under -m slow to keep the default suite within its time)
def test_positional_start_has_the_L3_positional_state_and_its_theta_stability():
    """docs/variants.md "L = 3": at ``alpha = 0.6`` the global equations have no positional point on
    fine rules; the positional-start selection has one (``m_rms`` 0.16, ``q`` 0.30 on order 11,
    GD at ``d`` = 1000-4000: 0.167, 0.29-0.30), a minimum along ``theta`` (``F' < 1``), as GD holds
    it. At ``alpha = 1.5`` the selection's point is a saddle towards ``theta`` (``F' > 1``): GD from
    the positional start leaves it for the semantic minimum there."""
    import attnphase as ap
    from attnphase.theory.stability import positional_stability

    st = _one_start("positional-start", order=11)
    for alpha, saddle in ((0.6, False), (1.5, True)):
        r = ap.solve(alpha, spec=L3, branch="positional", settings=st).branches["positional"]
        assert r is not None and r.theta == 0.0, alpha
        if alpha == 0.6:
            assert 0.14 < _m_rms(r.m_matrix) < 0.18 and 0.28 < r.q < 0.33, r
        stab = positional_stability(L3, alpha, order=11, response="positional-start",
                                    start=start_from(L3, r.q_matrix, r.m_matrix, r.V, r.theta_matrix))
        assert stab.success and stab.saddle is saddle, (alpha, stab)


@pytest.mark.slow  # (5 s: under -m slow to keep the default suite within its time)
def test_solve_examines_the_positional_start_point_along_theta_on_its_own():
    """``solve --response positional-start`` reports the theta block of the point it found without
    ``--stability`` (docs/model.md (3.7)): at ``L = 3``, ``alpha = 1.5`` a saddle, which GD leaves."""
    out = _cli("solve", "--L", "3", "--alpha", "1.5", "--omega", "0.3", "--branch", "positional", "--response",
               "positional-start", "--replicas", "1", "--json")
    assert out.returncode == 0, out.stderr
    stab = json.loads(out.stdout)["positional_stability"]
    assert stab["success"] and stab["saddle"] and stab["slope"] > 1.0 and stab["order"] == 11, stab


def test_positional_start_is_refused_where_it_is_not_defined():
    import attnphase as ap
    from attnphase.theory.stability import positional_stability

    with pytest.raises(ValueError, match="describes the positional branch only"):
        ap.solve(0.6, spec=L3, branch="semantic", settings=_one_start("positional-start"))
    with pytest.raises(ValueError, match="rank 1"):
        ap.solve(1.0, omega=0.3, rank=2, branch="positional", settings=_one_start("positional-start"))
    with pytest.raises(ValueError, match="runs on one rule"):
        SolverSettings(refine_order=10, response="positional-start")
    with pytest.raises(ValueError, match="theta stability covers the responses"):
        positional_stability(L3, 0.6, response="local")
    bad = _cli("solve", "--alpha", "0.6", "--L", "3", "--response", "positional-start")
    assert bad.returncode == 2 and "--branch positional" in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.slow  # (GD at d = 1000, 4 seeds, float64, up to 20000 steps: several minutes)
def test_L3_gd_from_the_positional_start_agrees_with_the_positional_start_equations():
    """docs/variants.md "L = 3": at ``alpha = 0.6`` GD from the positional start at ``d = 1000``
    (mean of seeds 0-3) agrees with the positional-start equations (``attnphase solve --L 3
    --response positional-start --branch positional``, one order-11 rule) within 5 % on ``q``,
    ``m_rms`` and the errors."""
    th, res = _one_start_and_gd(L3, 0.6, "positional", max_steps=20000)
    sim = {"q": float(np.mean([r.q for r in res.runs])),
           "m_rms": float(np.mean([_m_rms(r.overlaps["m"]) for r in res.runs])),
           "train_loss": float(np.mean([r.train_loss for r in res.runs])),
           "test_error": float(np.mean([r.test_error for r in res.runs]))}
    theory = {"q": th.q, "m_rms": _m_rms(th.m_matrix), "train_loss": th.train_loss, "test_error": th.test_error}
    print(f"\npositional-start theory {theory}; GD {sim}")
    for k, v in theory.items():
        assert abs(sim[k] - v) <= 0.05 * v, k
