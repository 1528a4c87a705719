"""The semantic point at alpha = 1.0164 by gradient descent: theta and eps_g of the semantic start
versus d, extrapolated to d -> inf (the table and figure "The semantic point at alpha = 1.0164"
of docs/simulation.md, against the solver and the published value).

Reads JSON outputs of ``attnphase simulate --json`` (any number of files, any d), prints the
mean and standard error over seeds per d and a weighted least-squares fit ``a + b / d`` (``a`` is
the d -> inf extrapolation, its error from the fit covariance), and draws the figure. Reproduce
(the ``simulate`` runs that make the JSON files are listed in docs/simulation.md)::

    python studies/sim_open_question.py run1.json run2.json ... docs/figures/sim_open_question.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

KEYS = ("theta", "test_error", "train_loss", "q")
#: Reference values (user units) at alpha = 1.0164: the published value, an independent solve of
#: the equations with 1e5 Monte-Carlo samples, and this package's solver.
REFERENCES = {
    "theta": {"authors 0.416": 0.416, "independent solve, 1e5 MC: 0.3745": 0.3745,
              "attnphase.theory solve_point (QMC 2^12): 0.3877": 0.38771},
    "test_error": {"authors 0.00268": 0.00268, "independent solve, 1e5 MC: 0.00288": 0.00288,
                   "attnphase.theory solve_point (QMC 2^12): 0.002808": 0.002808},
}


def load(files: list[str]) -> dict[int, dict[int, dict]]:
    runs: dict[int, dict[int, dict]] = {}
    for f in files:
        with open(f) as fh:
            out = json.load(fh)
        for r in out["runs"]:
            runs.setdefault(out["params"]["d"], {})[r["seed"]] = r
    return runs


def fit(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted least squares ``y = a + b x``: coefficients, covariance, chi^2."""
    w = 1.0 / se**2
    A = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    coef = cov @ A.T @ (w * y)
    return coef, cov, float(np.sum(w * (y - A @ coef) ** 2))


def main(files: list[str], out: str) -> None:
    runs = load(files)
    ds = np.array(sorted(runs), dtype=float)
    stats: dict[str, list[tuple[float, float]]] = {k: [] for k in KEYS}
    for d in sorted(runs):
        rs = list(runs[d].values())
        line = f"d={d:5d} seeds={len(rs):2d} converged={sum(r['converged'] for r in rs):2d}"
        for k in KEYS:
            v = np.array([r[k] for r in rs], dtype=float)
            stats[k].append((v.mean(), v.std(ddof=1) / np.sqrt(v.size)))
            line += f"  {k}={v.mean():.5g}+-{stats[k][-1][1]:.2g}"
        print(line)
    x = 1.0 / ds
    fits = {}
    for k in KEYS:
        y, se = (np.array(c) for c in zip(*stats[k], strict=True))
        coef, cov, chi2 = fit(x, y, se)
        fits[k] = (coef, cov, y, se)
        print(f"{k}: d -> inf {coef[0]:.5g} +- {np.sqrt(cov[0, 0]):.2g}, slope {coef[1]:.3g}, "
              f"chi2 {chi2:.2f} (dof {len(y) - 2})")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for ax, k in zip(axes, ("theta", "test_error"), strict=True):
        coef, cov, y, se = fits[k]
        ax.errorbar(x, y, yerr=se, fmt="o", capsize=3, color="k",
                    label="GD, semantic start (mean +- s.e. over seeds)")
        xx = np.linspace(0.0, x.max() * 1.1, 50)
        ax.plot(xx, coef[0] + coef[1] * xx, "-", color="k", alpha=0.5,
                label=f"fit a + b/d: a = {coef[0]:.4g} +- {np.sqrt(cov[0, 0]):.2g}")
        for i, (lab, level) in enumerate(REFERENCES[k].items()):
            ax.axhline(level, ls="--", color=f"C{i}", label=lab)
        ax.set_xlabel("1/d")
        ax.set_ylabel(k)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("alpha = 1.0164, omega = 0.3, sigma = 0.5, lambda = 0.01 (semantic start)")
    fig.savefig(out, dpi=130)


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
