"""Theory versus finite-d simulation for the attention variants (docs/model.md section 6).

The fast test checks that theory and simulation land on the same branch for the causal student.
The slow tests compare the theory (``solve_point`` with the quick preset ``FAST`` at QMC order 8,
or 10 for the causal cases) with the mean of 4 seeds at ``d = 1000`` from the informed starts, at
the 7 % agreement asked of the variants, for the variants and quantities where docs/variants.md reports agreement (the numbers are measured there, by
``studies/variants_validation.py``). Run them with
``PYTHONPATH=src python -m pytest tests/test_variants_sim_theory.py -m slow -q -s``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnphase.sim import TrainSettings, simulate
from attnphase.spec.problem import ModelSpec

theory = pytest.importorskip("attnphase.theory")
if not hasattr(theory, "solve_point"):
    pytest.skip("theory solver not merged yet", allow_module_level=True)

from attnphase.theory import SolverSettings, solve_point  # noqa: E402
from attnphase.theory.fixed_point import FAST  # noqa: E402

BASE = {"omega": 0.3, "sigma": 0.5, "lam": 0.01}
#: GD lr 0.15 with heavy-ball momentum 0.9 (same minima as plain GD, docs/simulation.md)
GD = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000,
                   dtype="float64", log_every=0)
TOL = 0.07  # agreement within 7 %


def invariants(overlaps: dict, L: int) -> dict[str, float]:
    """``theta = ||theta||_F`` (query and key), ``m = sqrt(sum_l ||m_l||^2 / L)`` (``|m_1|`` for
    ``L = 2``), ``q = tr(Q^T Q / d)`` (+ key): invariant under column rotations and token
    permutations, as in docs/variants_validation.py."""
    th = np.asarray(overlaps["theta"], dtype=float)
    m = np.asarray(overlaps["m"], dtype=float)
    q = float(np.trace(np.asarray(overlaps["q"], dtype=float)))
    if "theta_K" in overlaps:
        th = np.vstack([th, np.asarray(overlaps["theta_K"], dtype=float)])
        m = np.hstack([m, np.asarray(overlaps["m_K"], dtype=float)])
        q += float(np.trace(np.asarray(overlaps["q_K"], dtype=float)))
    return {"theta": float(np.linalg.norm(th)), "m": float(np.linalg.norm(m) / math.sqrt(L)),
            "q": q}


def theory_invariants(pt, L: int) -> dict[str, float]:
    th = np.asarray(pt.theta_matrix, dtype=float) if pt.theta_matrix else np.array([[pt.theta]])
    m = np.asarray(pt.m_matrix, dtype=float) if pt.m_matrix else np.array([[pt.m], [-pt.m]])
    q = np.asarray(pt.q_matrix, dtype=float) if pt.q_matrix else np.array([[pt.q]])
    return {"theta": float(np.linalg.norm(th)), "m": float(np.linalg.norm(m) / math.sqrt(L)),
            "q": float(np.trace(q)), "test_error": pt.test_error}


@pytest.mark.slow  # (a causal solve and training at d = 200: about 4 s)
def test_causal_theory_and_simulation_land_on_the_same_branch():
    """Causal student, alpha = 3: the theory has a semantic and a positional branch (quick QMC
    order 6); GD at d = 200 from the semantic start ends semantic (theta >= 0.1 > |m|) and from
    the positional start positional, in both seeds, with the overlap of the theory's branch
    within 30 % of the theory (a loose check at this small d; the 7 % check is the slow test)."""
    torch.set_num_threads(1)
    spec = ModelSpec(**BASE, variant="causal")
    alpha = 3.0
    settings = SolverSettings(**{**FAST, "order": 6})
    sem = theory_invariants(solve_point(spec, alpha, "semantic", settings=settings), spec.L)
    pos = theory_invariants(solve_point(spec, alpha, "positional", settings=settings), spec.L)
    assert sem["theta"] > 0.1 and sem["m"] < 1e-3
    assert pos["m"] > 0.1 and pos["theta"] < 1e-3
    res = simulate(spec, alpha=alpha, d=200, seeds=(0, 1), inits=("semantic", "positional"), settings=GD)
    for run in res.runs:
        inv = invariants(run.overlaps, spec.L)
        print(f"\n{run.init} seed {run.seed}: theta {inv['theta']:.3f} m {inv['m']:.3f} "
              f"({run.branch}); theory semantic theta {sem['theta']:.3f}, "
              f"positional m {pos['m']:.3f}")
        assert run.branch == run.init
        if run.init == "semantic":
            assert abs(inv["theta"] / sem["theta"] - 1) < 0.3
        else:
            assert abs(inv["m"] / pos["m"] - 1) < 0.3


#: (id, ModelSpec keywords, alpha, theory branch, simulation start, compared quantities, QMC
#: order); each is listed in docs/variants.md with its measured agreement at d = 1000. The causal
#: cases use order 10: at alpha = 2 the quick order 8 is 5.6 % off in theta (0.395 vs 0.418).
AGREEING = [
    ("L3-semantic", {"L": 3}, 1.5, "semantic", "semantic", ("theta", "q", "test_error"), 8),
    ("r2-mixed", {"rank": 2}, 1.5, "mixed", "semantic", ("theta", "m", "q", "test_error"), 8),
    ("untied-positional", {"variant": "untied"}, 1.5, "positional", "positional",
     ("m", "q", "test_error"), 8),
    ("untied-semantic", {"variant": "untied"}, 2.5, "semantic", "semantic",
     ("theta", "q", "test_error"), 8),
    ("causal-semantic-3", {"variant": "causal"}, 3.0, "semantic", "semantic",
     ("theta", "q", "test_error"), 10),
    ("causal-semantic-2", {"variant": "causal"}, 2.0, "semantic", "semantic",
     ("theta", "q", "test_error"), 10),
    ("causal-positional", {"variant": "causal"}, 1.5, "positional", "positional",
     ("m", "q", "test_error"), 10),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,kw,alpha,branch,init,keys,order", AGREEING,
                         ids=[a[0] for a in AGREEING])
def test_variant_agrees_with_theory_at_d1000(name, kw, alpha, branch, init, keys, order):
    """Mean over seeds 0-3 at d = 1000 from the informed start within 7 % of the theory (FAST
    preset at the given QMC order; r = 2: the solver's mixed branch), every run
    converged and landed on the theory's branch (overlap >= 0.1 on that branch's overlap)."""
    torch.set_num_threads(1)
    spec = ModelSpec(**BASE, **kw)
    pt = solve_point(spec, alpha, branch, settings=SolverSettings(**{**FAST, "order": order}))
    assert pt.exists, pt.reason
    th = theory_invariants(pt, spec.L)
    res = simulate(spec, alpha=alpha, d=1000, seeds=(0, 1, 2, 3), inits=(init,), settings=GD)
    sims = [{**invariants(r.overlaps, spec.L), "test_error": r.test_error} for r in res.runs]
    assert all(r.converged for r in res.runs)
    for s in sims:
        if branch in ("semantic", "mixed"):
            assert s["theta"] >= 0.1
        if branch in ("positional", "mixed"):
            assert s["m"] >= 0.1
    for key in keys:
        mean = float(np.mean([s[key] for s in sims]))
        print(f"\n{name} d=1000 alpha={alpha}: {key} sim {mean:.5g} theory {th[key]:.5g} "
              f"({100 * (mean / th[key] - 1):+.1f} %)")
        assert abs(mean / th[key] - 1) <= TOL, key
