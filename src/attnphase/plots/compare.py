"""Figure of theory versus finite-d simulation, drawn from the table of
:func:`attnphase.comparison.run_compare` (columns :data:`attnphase.comparison.COLUMNS`).

Nothing is computed here: the theory branches (``docs/model.md`` (5.1), errors (4.1)-(4.3)) and
the simulation runs are rows of the table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from attnphase.plots.style import BRANCH_COLORS, new_figure
from attnphase.spec.problem import ModelSpec

#: Colours per mechanism (theory branch and the simulation start aiming at it): the project palette
#: (:data:`~attnphase.plots.style.BRANCH_COLORS`).
COLORS = BRANCH_COLORS
MARKERS = {"semantic": "o", "positional": "s", "random": "^"}


def _sim_stats(sim: pd.DataFrame, kind: str, col: str) -> tuple[Any, Any]:
    g = sim[sim["kind"] == kind].groupby("alpha")[col]
    return g.mean(), g.std().fillna(0.0)


def compare_figure(
    table: pd.DataFrame, spec: ModelSpec | None = None, d: int | None = None
) -> Figure:
    """Three panels: test error, overlaps (``theta``, ``|m|``), training-error difference.

    Theory branches are lines (solid semantic, dashed positional, grey linear baseline, black
    Bayes-optimal baseline where the table has rows of kind ``bayes``), simulation points are
    means over seeds with standard deviations as error bars.
    """
    th = table[table["source"] == "theory"]
    sim = table[table["source"] == "simulation"].copy()
    sim["abs_m"] = sim["m"].abs()
    sim["abs_theta"] = sim["theta"].abs()
    fig = new_figure(15, 4.4, dpi=100)
    axes = fig.subplots(1, 3)
    ax_e, ax_o, ax_t = axes
    for branch, ls in (("semantic", "-"), ("positional", "--"), ("mixed", "-.")):
        b = th[(th["kind"] == branch) & (th["exists"].astype(bool))].sort_values("alpha")
        if b.empty:
            continue
        c = COLORS[branch]
        ax_e.plot(b["alpha"], b["test_error"], ls, color=c, label=f"theory {branch}")
        key = "m" if branch == "positional" else "theta"
        ax_o.plot(b["alpha"], b[key].abs(), ls, color=c,
                  label=f"theory {'theta' if key == 'theta' else '|m|'} ({branch})")
    bo = th[th["kind"] == "bayes"].sort_values("alpha")
    if not bo.empty:  # the Bayes-optimal baseline (docs/model.md (8.4), (8.8))
        ax_e.plot(bo["alpha"], bo["test_error"], "-", color=COLORS["bayes"], lw=1.2, label="Bayes-optimal")
        ax_o.plot(bo["alpha"], bo["theta"], "-", color=COLORS["bayes"], lw=1.2, label="Bayes-optimal theta")
    lin = th[th["kind"] == "linear"].sort_values("alpha")
    if not lin.empty:
        ax_e.plot(lin["alpha"], lin["test_error"], ":", color=COLORS["linear"],
                  label="theory linear baseline")
    span = float(table["alpha"].max() - table["alpha"].min()) if len(table) else 1.0
    for j, kind in enumerate(("semantic", "positional", "random")):
        if not (sim["kind"] == kind).any():
            continue
        c, mk = COLORS[kind], MARKERS[kind]
        shift = (j - 1) * 0.008 * span  # offset so the starts do not hide each other
        mean, std = _sim_stats(sim, kind, "test_error")
        ax_e.errorbar(mean.index + shift, mean, yerr=std, fmt=mk, color=c, ms=5, capsize=2,
                      label=f"sim, {kind} start")
        mean, std = _sim_stats(sim, kind, "abs_theta")
        ax_o.errorbar(mean.index + shift, mean, yerr=std, fmt=mk, color=c, ms=5, capsize=2,
                      mfc="none", label=f"sim theta, {kind} start")
        mean, std = _sim_stats(sim, kind, "abs_m")
        ax_o.errorbar(mean.index + shift, mean, yerr=std, fmt=mk, color=c, ms=5, capsize=2,
                      label=f"sim |m|, {kind} start")
    if not sim.empty:
        mean, std = _sim_stats(sim, "semantic", "linear_test_error")
        ax_e.errorbar(mean.index, mean, yerr=std, fmt="x", color=COLORS["linear"], ms=5,
                      label="sim linear baseline")
    # training-error difference eps_t(semantic) - eps_t(positional)
    ok = th["exists"].astype(bool)
    sem = th[(th["kind"] == "semantic") & ok].set_index("alpha")["train_loss"]
    pos = th[(th["kind"] == "positional") & ok].set_index("alpha")["train_loss"]
    both = sem.index.intersection(pos.index)
    if len(both):
        ax_t.plot(both, sem[both] - pos[both], "-", color="k", label="theory")
    if not sim.empty:
        s = sim[sim["kind"] == "semantic"].set_index(["alpha", "seed"])["train_loss"]
        p = sim[sim["kind"] == "positional"].set_index(["alpha", "seed"])["train_loss"]
        diff = (s - p).dropna().groupby(level="alpha")
        ax_t.errorbar(diff.mean().index, diff.mean(), yerr=diff.std().fillna(0.0), fmt="o",
                      color="k", mfc="none", capsize=2, label="sim (semantic - positional start)")
    ax_t.axhline(0.0, color="0.6", lw=0.8)
    ax_e.set_ylabel("test error  eps_g")
    ax_o.set_ylabel("overlap")
    ax_t.set_ylabel("eps_t(semantic) - eps_t(positional)")
    title = ""
    if spec is not None:
        title = f"omega={spec.omega:g}, sigma={spec.sigma:g}, lambda={spec.lam:g}"
    if d is not None:
        title += f", simulation d={d}"
    for ax in axes:
        ax.set_xlabel("alpha = n/d")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    return fig
