"""Theory versus finite-d simulation (THEORY.md sections 2.1 and 3), as a tidy table and a Figure.

Table columns (one row per theory point or simulation run): ``source`` (``theory`` or
``simulation``), ``kind`` (theory branch ``semantic``/``positional``/``linear``, or the simulation
start
``semantic``/``positional``/``random``), ``alpha``, ``seed``, ``m``, ``theta``, ``q``,
``train_loss``,
``test_error``, ``linear_test_error``, ``exists``, ``branch`` (where a simulation run landed),
``d``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attnphase.spec.problem import ModelSpec  # noqa: E402

log = logging.getLogger(__name__)

#: Colours per mechanism (theory branch and the simulation start aiming at it).
COLORS = {"semantic": "#1f77b4", "positional": "#d62728", "random": "#2ca02c", "linear": "#7f7f7f",
          "mixed": "#9467bd"}
MARKERS = {"semantic": "o", "positional": "s", "random": "^"}
COLUMNS = ["source", "kind", "alpha", "seed", "m", "theta", "q", "train_loss", "test_error",
           "linear_test_error", "exists", "branch", "d"]


def theory_table(
    spec: ModelSpec, alphas: Sequence[float], order: int | None = None
) -> pd.DataFrame:
    """Theory rows: both branches (and ``mixed`` at rank >= 2) followed in ``alpha`` plus the
    linear baseline (THEORY.md 2.1).

    The solver runs with its quick preset ``attnphase.theory.fixed_point.FAST`` (as ``curves``);
    ``order`` overrides the integration order of that preset.
    """
    try:
        from attnphase.theory import SolverSettings, branches_for, follow_branch, linear_test_error
        from attnphase.theory.fixed_point import FAST
    except ImportError as exc:  # until the solver is merged
        raise ValueError(f"the theory solver is not available in this build ({exc})") from None
    preset = dict(FAST)
    if order is not None:
        preset["order"] = order
    settings = SolverSettings(**preset)
    rows = []
    lin = float(linear_test_error(spec))
    # (rank >= 2: also the mixed branch, where GD from the semantic start lands)
    for branch in [b for b in branches_for(spec) if b != "trivial"]:
        log.info("theory: following the %s branch over %d points", branch, len(alphas))
        for pt in follow_branch(spec, list(alphas), branch, settings):
            rows.append({
                "source": "theory", "kind": branch, "alpha": float(pt.alpha), "seed": -1,
                "m": float(pt.m), "theta": float(pt.theta), "q": float(pt.q),
                "train_loss": float(pt.train_loss), "test_error": float(pt.test_error),
                "linear_test_error": lin, "exists": bool(pt.exists), "branch": branch, "d": np.inf,
            })
    for a in alphas:
        rows.append({"source": "theory", "kind": "linear", "alpha": float(a), "seed": -1,
                     "test_error": lin, "linear_test_error": lin, "exists": True,
                     "branch": "linear", "d": np.inf})
    return pd.DataFrame(rows, columns=COLUMNS)


def simulation_table(
    spec: ModelSpec, alphas: Sequence[float], d: int, seeds: Sequence[int], settings
) -> pd.DataFrame:
    """Simulation rows: every seed from the semantic, positional and random starts at each
    ``alpha``."""
    from attnphase.sim.simulate import simulate

    rows = []
    for a in alphas:
        res = simulate(spec, d, float(a), seeds=seeds, inits=("semantic", "positional", "random"),
                       settings=settings)
        log.info("alpha=%g: %d runs in %.1f s", a, len(res.runs), res.batch_seconds)
        for r in res.runs:
            rows.append({
                "source": "simulation", "kind": r.init, "alpha": float(a), "seed": r.seed,
                "m": r.m, "theta": r.theta, "q": r.q, "train_loss": r.train_loss,
                "test_error": r.test_error, "linear_test_error": r.linear_test_error,
                "exists": r.converged, "branch": r.branch, "d": d,
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def run_compare(
    spec: ModelSpec,
    alphas: Sequence[float],
    d: int,
    seeds: Sequence[int],
    settings,
    theory_points: int = 12,
    theory_order: int | None = None,
) -> pd.DataFrame:
    """Theory curves on a grid spanning ``alphas`` and simulations at ``alphas``, one table."""
    fine = np.linspace(float(np.min(alphas)), float(np.max(alphas)), int(theory_points))
    theory = theory_table(spec, fine, order=theory_order)
    sim = simulation_table(spec, alphas, d, seeds, settings)
    return pd.concat([theory, sim], ignore_index=True)


def _sim_stats(sim: pd.DataFrame, kind: str, col: str):
    g = sim[sim["kind"] == kind].groupby("alpha")[col]
    return g.mean(), g.std().fillna(0.0)


def compare_figure(
    table: pd.DataFrame, spec: ModelSpec | None = None, d: int | None = None
) -> Figure:
    """Three panels: test error, overlaps (``theta``, ``|m|``), training-error difference.

    Theory branches are lines (solid semantic, dashed positional, grey linear baseline), simulation
    points are means over seeds with standard deviations as error bars.
    """
    th = table[table["source"] == "theory"]
    sim = table[table["source"] == "simulation"].copy()
    sim["abs_m"] = sim["m"].abs()
    sim["abs_theta"] = sim["theta"].abs()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
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
