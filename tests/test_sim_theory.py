"""Simulation against the asymptotic theory (docs/simulation.md: agreement within a few percent). Slow.

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
    res = simulate(SPEC, alpha=alpha, d=1000, seeds=(0, 1, 2), inits=("semantic", "positional"),
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


#: finite-size test: sizes and seeds per size (both starts for every seed, one batch per size)
FINITE_SIZE_RUNS = ((100, 32), (200, 24), (400, 16))


def _log_rms(values: np.ndarray, target: float) -> tuple[float, float]:
    """``log`` of the root-mean-square deviation from ``target`` and its standard error (delta
    method on the mean of the squared deviations over independent seeds)."""
    sq = (values - target) ** 2
    ms = float(sq.mean())
    se_ms = float(sq.std(ddof=1) / np.sqrt(sq.size))
    return 0.5 * np.log(ms), se_ms / (2.0 * ms)


def _slope(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> tuple[float, float]:
    """Weighted least-squares slope of ``y`` against ``x`` and its standard error."""
    w = 1.0 / se**2
    A = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    coef = cov @ A.T @ (w * y)
    return float(coef[1]), float(np.sqrt(cov[1, 1]))


def test_finite_size_deviation_shrinks_with_d(theory_1p5):
    """The distance to the theory shrinks as d grows, beyond the seed-to-seed noise.

    At alpha = 1.5, for theta and the test error (semantic start) and |m| (positional start), the
    root-mean-square deviation from the theory over the seeds of each d (``FINITE_SIZE_RUNS``;
    it contains both the bias and the O(d^-1/2) fluctuations) is computed with its standard error.
    Asserted, per quantity: (i) the weighted least-squares slope of log(rms) against log(d) is
    negative by more than two standard errors; (ii) the rms at the largest d is below the one at
    the smallest d by more than two standard errors of the difference of the logs.
    """
    torch.set_num_threads(1)
    alpha = 1.5
    sem, pos = theory_1p5
    targets = {"theta": sem.theta, "test_error": sem.test_error, "m": abs(pos.m)}
    stats: dict[str, list[tuple[float, float]]] = {k: [] for k in targets}
    for d, n_seeds in FINITE_SIZE_RUNS:
        res = simulate(SPEC, alpha=alpha, d=d, seeds=tuple(range(n_seeds)),
                       inits=("semantic", "positional"), settings=GD)
        s, p = _runs(res, "semantic"), _runs(res, "positional")
        values = {
            "theta": np.array([r.theta for r in s]),
            "test_error": np.array([r.test_error for r in s]),
            "m": np.array([abs(r.m) for r in p]),
        }
        line = [f"d={d} seeds={n_seeds} converged={sum(r.converged for r in res.runs)}"
                f"/{len(res.runs)}"]
        for key, v in values.items():
            stats[key].append(_log_rms(v, targets[key]))
            line.append(f"{key}: mean {v.mean():.5g} rms dev {np.exp(stats[key][-1][0]):.3g}"
                        f" (se of log {stats[key][-1][1]:.2f})")
        print("\n" + "; ".join(line))
    log_d = np.log([d for d, _ in FINITE_SIZE_RUNS])
    for key, st in stats.items():
        y, se = np.array([a for a, _ in st]), np.array([b for _, b in st])
        slope, se_slope = _slope(log_d, y, se)
        drop, se_drop = y[0] - y[-1], float(np.hypot(se[0], se[-1]))
        print(f"{key}: slope of log rms vs log d {slope:.3f} +- {se_slope:.3f}; "
              f"log rms(d={FINITE_SIZE_RUNS[0][0]}) - log rms(d={FINITE_SIZE_RUNS[-1][0]}) "
              f"{drop:.3f} +- {se_drop:.3f}")
        assert slope + 2.0 * se_slope < 0.0, key
        assert drop > 2.0 * se_drop, key
