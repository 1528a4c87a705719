"""Paper-style curves against ``alpha`` (the omega = 0.3 figure of the original work)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.plots.style import BRANCH_COLORS
from attnphase.spec.problem import ModelSpec

#: The branch colours of these curves: the project palette itself (:data:`~attnphase.plots.style.BRANCH_COLORS`).
COLORS = BRANCH_COLORS


def curves_table(alphas: Sequence[float], sem: Sequence, pos: Sequence, linear_error: float,
                 bayes: Sequence[Mapping[str, float]] | None = None) -> pd.DataFrame:
    """Tidy table: one row per ``alpha`` with both branches (NaN where a branch does not exist);
    ``bayes``: the Bayes-optimal points at the same ``alpha`` (:func:`attnphase.bayes`), as the
    columns ``bayes_overlap`` and ``bayes_test_error``."""
    rows = []
    for i, (a, s, p) in enumerate(zip(alphas, sem, pos, strict=True)):
        row = {"alpha": float(a), "linear_test_error": linear_error}
        if bayes is not None:
            row["bayes_overlap"] = float(bayes[i]["overlap"])
            row["bayes_test_error"] = float(bayes[i]["test_error"])
        for name, b in (("semantic", s), ("positional", p)):
            for k in ("q", "m", "theta", "V", "train_loss", "test_error"):
                row[f"{name}_{k}"] = getattr(b, k) if b.exists else np.nan
            row[f"{name}_exists"] = bool(b.exists)
        rows.append(row)
    return pd.DataFrame(rows)


def curves_figure(table: pd.DataFrame, spec: ModelSpec, transition=None,
                  bayes: Sequence[Mapping[str, float]] | None = None) -> Figure:
    """Three panels: overlaps, training-error difference (``alpha_c`` marked), test errors
    with the linear baseline (``alpha_l`` marked); the Bayes-optimal overlap and test error where
    the table has them (:func:`curves_table` with ``bayes``), or from ``bayes``, the points of
    :func:`attnphase.bayes` on a finer grid, where given."""
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax = fig.subplots(1, 3)
    a = table["alpha"].to_numpy()
    if bayes is not None:
        a_bo = np.array([p["alpha"] for p in bayes])
        x_bo, e_bo = (np.array([p[k] for p in bayes]) for k in ("overlap", "test_error"))
    elif "bayes_overlap" in table:
        a_bo, x_bo, e_bo = a, table["bayes_overlap"].to_numpy(), table["bayes_test_error"].to_numpy()
    ax[0].plot(a, table["semantic_theta"], "-", color=COLORS["semantic"], label=r"semantic $\theta$")
    ax[0].plot(a, table["positional_m"], "-", color=COLORS["positional"], label=r"positional $m$")
    ax[0].plot(a, table["semantic_q"], "--", color=COLORS["semantic"], alpha=0.6, label="semantic $q$")
    ax[0].plot(a, table["positional_q"], "--", color=COLORS["positional"], alpha=0.6, label="positional $q$")
    if bayes is not None or "bayes_overlap" in table:
        ax[0].plot(a_bo, x_bo, "-", color=COLORS["bayes"], lw=1.2, label=r"Bayes-optimal $\theta$")
    ax[0].set_xlabel(r"$\alpha$")
    ax[0].set_ylabel("overlap")
    ax[0].legend(fontsize=8)
    diff = table["semantic_train_loss"] - table["positional_train_loss"]
    ax[1].plot(a, diff, "k-")
    ax[1].axhline(0, color="0.6", lw=0.8)
    ax[1].set_xlabel(r"$\alpha$")
    ax[1].set_ylabel(r"$\epsilon_t^{sem} - \epsilon_t^{pos}$")
    ax[2].plot(a, table["semantic_test_error"], color=COLORS["semantic"], label="semantic")
    ax[2].plot(a, table["positional_test_error"], color=COLORS["positional"], label="positional")
    ax[2].axhline(table["linear_test_error"].iloc[0], color=COLORS["linear"], ls=":", label="linear baseline")
    if bayes is not None or "bayes_overlap" in table:
        ax[2].plot(a_bo, e_bo, "-", color=COLORS["bayes"], lw=1.2, label="Bayes-optimal")
    ax[2].set_xlabel(r"$\alpha$")
    ax[2].set_ylabel(r"test error $\epsilon_g$")
    if transition is not None:
        if transition.alpha_c is not None:
            ax[1].axvline(transition.alpha_c, color="0.3", ls="--", lw=1)
            ax[1].annotate(rf"$\alpha_c={transition.alpha_c:.3f}$", (transition.alpha_c, 0),
                           xytext=(5, 10), textcoords="offset points", fontsize=9)
        if transition.alpha_l is not None:
            ax[2].axvline(transition.alpha_l, color=COLORS["linear"], ls="--", lw=1)
            ax[2].annotate(rf"$\alpha_l={transition.alpha_l:.3f}$", (transition.alpha_l,
                           table["linear_test_error"].iloc[0]), xytext=(5, 10), textcoords="offset points",
                           fontsize=9)
    ax[2].legend(fontsize=8)
    fig.suptitle(rf"$\omega={spec.omega:g}$, $\sigma={spec.sigma:g}$, $\lambda={spec.lam:g}$")
    return fig
