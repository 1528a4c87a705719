"""Simulation against the asymptotic theory (THEORY.md section 3; issue 3 acceptance). Slow.

Run with ``PYTHONPATH=src python -m pytest tests/test_sim_theory.py -m slow -q -s``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnphase.sim import TrainSettings, simulate
from attnphase.spec.problem import ModelSpec

theory = pytest.importorskip("attnphase.theory")
if not hasattr(theory, "solve_point"):
    pytest.skip("theory solver not merged yet", allow_module_level=True)

pytestmark = pytest.mark.slow

SPEC = ModelSpec(omega=0.3, sigma=0.5, lam=0.01)
# GD, lr 0.15, with heavy-ball momentum 0.9: it reaches the minimum of the start's basin in a few
# thousand steps where plain GD needs 10-20 thousand (docs/simulation.md checks both give the same
# minima); tol 1e-6 on ||grad R|| / sqrt(d).
GD = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000,
                   dtype="float64", log_every=0)


@pytest.fixture(scope="module")
def theory_1p5():
    """Both branches at alpha = 1.5 (solver defaults, no replica error estimate: it is slow)."""
    sem = theory.solve_point(SPEC, 1.5, "semantic", error_estimate=False)
    pos = theory.solve_point(SPEC, 1.5, "positional", error_estimate=False)
    assert sem.exists and pos.exists
    return sem, pos


def _runs(res, init):
    return [r for r in res.runs if r.init == init]


def test_d1000_alpha_1p5_agrees_with_theory(theory_1p5):
    torch.set_num_threads(1)
    alpha = 1.5
    sem, pos = theory_1p5
    res = simulate(SPEC, 1000, alpha, seeds=(0, 1, 2), inits=("semantic", "positional"),
                   settings=GD)
    s, p = _runs(res, "semantic"), _runs(res, "positional")
    assert all(r.converged for r in res.runs)
    theta = np.mean([r.theta for r in s])
    eps_g = np.mean([r.test_error for r in s])
    m = np.mean([abs(r.m) for r in p])
    print(f"\nd=1000 alpha=1.5: theta sim {theta:.4f} theory {sem.theta:.4f}; "
          f"test error sim {eps_g:.5f} theory {sem.test_error:.5f}; "
          f"|m| sim {m:.4f} theory {abs(pos.m):.4f}")
    assert abs(theta - sem.theta) <= 0.05 * abs(sem.theta)
    assert abs(eps_g - sem.test_error) <= 0.07 * sem.test_error
    assert abs(m - abs(pos.m)) <= 0.05 * abs(pos.m)


def test_finite_size_deviation_shrinks_with_d(theory_1p5):
    """Root-mean-square deviation from the theory over 16 seeds decreases from d = 100 to 800."""
    torch.set_num_threads(1)
    alpha = 1.5
    sem, pos = theory_1p5
    rms_theta, rms_m = [], []
    for d, n_seeds in ((100, 16), (200, 16), (400, 16), (800, 16)):
        res = simulate(SPEC, d, alpha, seeds=tuple(range(n_seeds)),
                       inits=("semantic", "positional"), settings=GD)
        th = np.array([r.theta for r in _runs(res, "semantic")])
        mm = np.array([abs(r.m) for r in _runs(res, "positional")])
        rms_theta.append(float(np.sqrt(np.mean((th - sem.theta) ** 2))))
        rms_m.append(float(np.sqrt(np.mean((mm - abs(pos.m)) ** 2))))
        print(f"\nd={d}: rms(theta - theory) {rms_theta[-1]:.4f}, "
              f"rms(|m| - theory) {rms_m[-1]:.4f}")
    assert rms_theta[0] > rms_theta[1] > rms_theta[2] > rms_theta[3]
    assert rms_m[0] > rms_m[1] > rms_m[2] > rms_m[3]
