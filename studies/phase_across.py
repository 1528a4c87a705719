"""The phase diagram away from the reference point, theory against converged gradient descent
(docs/solver.md, "The phase diagram across the box").

Along one model parameter (``--axis``: ``sigma``, ``lam`` or ``omega``, the others fixed) the
theory lines of ``attnphase phase-diagram`` (``alpha_c``, the spinodals, ``alpha_l``; each
transition widens its ``alpha`` range, ``fast`` preset) and, at ``--gd-values`` of the axis,
gradient descent at ``--d`` from the semantic and the positional start at two ``alpha`` per value:
``0.6 alpha_c`` and ``1.6 alpha_c`` where there is a transition, ``--no-transition-alpha``
otherwise. Each run trains with the heavy-ball term 0.9 until ``||grad R|| / sqrt(d) < --tol`` or
``--max-steps``; a run that did not meet the tolerance is reported and never counted.

At every GD point the training-error difference ``eps_t(semantic start) - eps_t(positional
start)`` (mean and standard error over the seeds whose two runs both converged) is set against
the theory's ``eps_t(semantic) - eps_t(positional)`` at the same ``alpha`` (:func:`attnphase.solve`
with both branches, ``fast`` preset): ``agree`` says whether the signs agree where the runs
resolve the sign (``|mean| >= 2`` standard errors), and where theory has one branch only, which
state each start reached. Each start is also set against its one-start selection (docs/model.md
(3.7); ``attnphase solve --response semantic-start --branch semantic``, and positional): the
overlaps and errors of the state a start of that kind reaches by descent, and ``agree_onestart``
for the sign of their training-error difference.

Theory and simulations go through the sweep machinery into one store (resumable: a second run
computes nothing). Writes a CSV (one row per GD point) and a figure: the theory lines, and at
each GD point a marker coloured by the start whose training error is lower (red: semantic, blue:
positional; white: the sign not resolved; grey: both starts reached one state; a cross where a run
did not converge), with the global equations' global minimum there (S, P, T) beside it.

    python studies/phase_across.py --axis sigma --values 0.1,0.2,0.3,0.4,0.5,0.7,1,1.5,2 \\
        --gd-values 0.2,0.5,0.7,1,1.5 --omega 0.3 --d 1000 --seeds 2 --store across.sqlite \\
        --csv docs/data/phase_sigma.csv --out docs/figures/phase_sigma.png
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np

import attnphase as ap
from attnphase.spec.defaults import ONE_START_SETTINGS, SOLVER_PRESET
from attnphase.sweeps import run_sweep
from attnphase.sweeps.grid import SweepSpec
from attnphase.sweeps.phase import phase_lines
from attnphase.sweeps.store import open_store
from attnphase.theory import SolverSettings

#: training of every GD run (the simulator's float64 default; heavy ball as the finding of
#: docs/solver.md at sigma = 0.7)
MOMENTUM = 0.9

#: two starts whose training errors differ by less than this fraction reached the same state
SAME_STATE = 1e-4


def learning_rate(sigma: float) -> float | None:
    """The GD step: the simulator's default (0.15) up to ``sigma = 1``, scaled by ``1 / sigma^2``
    above (the curvature of the risk grows like ``sigma^2``; at ``sigma = 2`` the default step
    did not converge: training errors near 1.9 after 40000 steps). ``None``: the default."""
    return None if sigma <= 1 else round(0.15 / sigma**2, 6)


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def gd_alphas(alpha_c: float | None, no_transition: list[float]) -> list[float]:
    """The two GD ``alpha`` of a value: either side of ``alpha_c``, inside the box."""
    if alpha_c is None:
        return list(no_transition)
    return [round(min(max(f * alpha_c, 0.05), 9.0), 4) for f in (0.6, 1.6)]


def simulation_points(args: argparse.Namespace, base: dict, todo: list[tuple[float, float]]) -> list:
    fixed = {k: v for k, v in base.items() if not k.startswith("solver_")}
    fixed.update({"d": args.d, "train_momentum": MOMENTUM, "train_max_steps": args.max_steps,
                  "train_tol": args.tol})
    points = []
    for value, alpha in todo:
        here = {**{k: v for k, v in fixed.items() if k != args.axis}, args.axis: value, "alpha": alpha}
        lr = learning_rate(float(here["sigma"]))
        if lr is not None:
            here["train_lr"] = lr
        sweep = SweepSpec("simulation", axes=(("seed", tuple(range(args.seeds))), ("init", ("semantic", "positional"))),
                          fixed=here)
        points += sweep.points()
    return points


def theory_difference(base: dict, axis: str, value: float, alpha: float) -> dict:
    """Both branches at ``alpha`` (fast preset): their training errors and which exist."""
    model = {k: v for k, v in base.items() if not k.startswith("solver_") and k in ("omega", "sigma", "lam")}
    model[axis] = value
    res = ap.solve(alpha, settings="fast", progress=False, **model)
    out = {}
    for b in ("semantic", "positional"):
        br = res.branches.get(b)
        out[b] = float(br.train_loss) if br is not None else math.nan
    out["global_minimum"] = res.global_minimum
    return out


def one_start(base: dict, axis: str, value: float, alpha: float) -> dict:
    """The one-start selections at ``alpha`` (docs/model.md (3.7)): the state a start of each kind
    reaches by descent, as ``attnphase solve --response semantic-start --branch semantic`` (and
    positional) give it; NaN where the selection has no fixed point."""
    model = {k: v for k, v in base.items() if k in ("omega", "sigma", "lam")}
    model[axis] = value
    out: dict = {}
    for b in ("semantic", "positional"):
        settings = SolverSettings.preset(SOLVER_PRESET["solve"], **ONE_START_SETTINGS, response=f"{b}-start")
        res = ap.solve(alpha, branch=b, settings=settings, progress=False, **model)
        br = res.branches.get(b)
        for key in ("theta", "m", "train_loss", "test_error"):
            out[f"onestart_{b}_{key}"] = float(getattr(br, key)) if br is not None else math.nan
    return out


def gd_means(converged: list[dict]) -> dict:
    """Mean over the counted seeds of each start's overlaps and errors."""
    out = {}
    for start in ("semantic", "positional"):
        for key in ("theta", "m", "train_loss", "test_error"):
            vals = [float(s[start][key]) for s in converged]
            out[f"gd_{start}_{key}"] = float(np.mean(vals)) if vals else math.nan
    return out


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--axis", choices=("sigma", "lam", "omega"), required=True)
    ap_.add_argument("--values", type=floats, required=True, help="the axis' values of the theory lines")
    ap_.add_argument("--gd-values", type=floats, required=True, help="the values with GD points (among --values)")
    ap_.add_argument("--omega", type=float, default=0.3)
    ap_.add_argument("--sigma", type=float, default=0.5)
    ap_.add_argument("--lam", type=float, default=0.01)
    ap_.add_argument("--no-transition-alpha", type=floats, default=[0.5, 2.0])
    ap_.add_argument("--d", type=int, default=1000)
    ap_.add_argument("--seeds", type=int, default=2)
    ap_.add_argument("--max-steps", type=int, default=40000)
    ap_.add_argument("--tol", type=float, default=1e-6)
    ap_.add_argument("--workers", type=int, default=2)
    ap_.add_argument("--store", default="across.sqlite")
    ap_.add_argument("--csv", required=True)
    ap_.add_argument("--out", required=True)
    args = ap_.parse_args()
    fixed = {"omega": args.omega, "sigma": args.sigma, "lam": args.lam}
    base = {k: v for k, v in fixed.items() if k != args.axis}
    base.update({f"solver_{k}": v for k, v in SolverSettings.PRESETS["fast"].items()})
    kw = {"workers": args.workers, "progress": "log"}
    lines = phase_lines(base, args.values, args.store, axis=args.axis, recompute_stale=True, **kw)
    by_value = dict(zip(lines.values, lines.alpha_c, strict=True))
    todo = []
    for v in args.gd_values:
        ac = next((a for w, a in by_value.items() if math.isclose(w, v, rel_tol=1e-9)), None)
        todo += [(v, a) for a in gd_alphas(ac, args.no_transition_alpha)]
    points = simulation_points(args, base, todo)
    run_sweep(points, args.store, **kw)
    with open_store(args.store) as st:
        res = st.results([p.key for p in points])
    runs: dict[tuple[float, float], dict[int, dict[str, dict]]] = {}
    for p in points:
        r = res.get(p.key)
        if r is None or r["status"] != "ok":
            continue
        key = (float(p.params[args.axis]), float(p.params["alpha"]))
        runs.setdefault(key, {}).setdefault(int(p.params["seed"]), {})[str(p.params["init"])] = r["result"]
    # the theory columns of an earlier run's CSV are read back, not solved again (the GD runs are in
    # the store): a rerun redraws the figure in seconds
    cached: dict[tuple[float, float], dict] = {}
    if Path(args.csv).exists():
        with open(args.csv) as f:
            cached = {(float(r[args.axis]), float(r["alpha"])): r for r in csv.DictReader(f)}
    rows = []
    for value, alpha in todo:
        seeds = runs.get((value, alpha), {})
        pairs = [s for s in seeds.values() if len(s) == 2]
        converged = [s for s in pairs if s["semantic"]["converged"] and s["positional"]["converged"]]
        diffs = [s["semantic"]["train_loss"] - s["positional"]["train_loss"] for s in converged]
        mean = float(np.mean(diffs)) if diffs else math.nan
        se = float(np.std(diffs, ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1 else math.nan
        old = cached.get((value, alpha))
        if old is not None and "onestart_positional_train_loss" in old:
            th = {"semantic": float(old["theory_semantic_train"]), "positional": float(old["theory_positional_train"]),
                  "global_minimum": old["theory_global_minimum"] or None}
            sel = {k: float(v) for k, v in old.items() if k.startswith("onestart_") and k != "onestart_train_diff"}
        else:
            th = theory_difference({**base, **fixed}, args.axis, value, alpha)
            sel = one_start({**base, **fixed}, args.axis, value, alpha)
        th_diff = th["semantic"] - th["positional"]
        # (both starts in one state: a difference below 1e-4 of the training error is no difference)
        same = bool(diffs) and abs(mean) < SAME_STATE * float(np.mean(
            [s["positional"]["train_loss"] for s in converged]))
        resolved = bool(diffs) and not same and math.isfinite(se) and abs(mean) >= 2 * se
        agree: bool | str
        if not math.isfinite(th_diff) or not resolved:
            agree = "n/a"
        else:
            agree = bool(np.sign(th_diff) == np.sign(mean))
        sel_diff = sel["onestart_semantic_train_loss"] - sel["onestart_positional_train_loss"]
        agree_sel: bool | str = "n/a" if not (math.isfinite(sel_diff) and resolved) else bool(np.sign(sel_diff) == np.sign(mean))
        states = {start: "; ".join(f"theta {s[start]['theta']:.3f} m {s[start]['m']:.3f}" for s in converged)
                  for start in ("semantic", "positional")}
        ac = next((a for w, a in by_value.items() if math.isclose(w, value, rel_tol=1e-9)), None)
        rows.append({args.axis: value, "alpha": alpha, "alpha_c": ac, "d": args.d,
                     "runs": 2 * len(pairs), "converged_runs": sum(int(s[k]["converged"]) for s in pairs for k in s),
                     "seeds_counted": len(diffs), "gd_train_diff": mean, "gd_train_diff_se": se,
                     "theory_semantic_train": th["semantic"], "theory_positional_train": th["positional"],
                     "theory_train_diff": th_diff, "theory_global_minimum": th["global_minimum"],
                     "same_state": same, "resolved": resolved, "agree": agree, **gd_means(converged), **sel,
                     "onestart_train_diff": sel_diff, "agree_onestart": agree_sel,
                     "semantic_start_states": states["semantic"], "positional_start_states": states["positional"]})
        print(rows[-1])
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    figure(lines, rows, args)


def figure(lines, rows: list[dict], args: argparse.Namespace) -> None:
    from attnphase.plots.phase import plot_phase_lines
    from attnphase.plots.style import branch_color

    fixed = {"sigma": f"$\\sigma$ = {args.sigma:g}", "lam": f"$\\lambda$ = {args.lam:g}", "omega": f"$\\omega$ = {args.omega:g}"}
    title = (f"Theory and GD (d = {args.d}, {args.seeds} seeds, both starts), "
             + ", ".join(t for k, t in fixed.items() if k != args.axis))
    fig = plot_phase_lines(lines, title=title)
    ax = fig.axes[0]
    for row in rows:
        x, y = row["alpha"], row[args.axis]
        if row["converged_runs"] < row["runs"] or row["runs"] == 0:
            ax.plot([x], [y], marker="x", color="k", markersize=8, zorder=6)
        if not row["seeds_counted"]:
            continue
        if row["same_state"]:
            color = "#bbbbbb"
        elif row["resolved"]:
            color = branch_color("semantic") if row["gd_train_diff"] < 0 else branch_color("positional")
        else:
            color = "white"
        ax.plot([x], [y], marker="o", markersize=9, markerfacecolor=color, markeredgecolor="k", linestyle="none",
                zorder=5)
        # the global equations' global minimum there (S, P, T), beside the point
        letter = {"semantic": "S", "positional": "P", "trivial": "T"}.get(str(row["theory_global_minimum"]), "")
        ax.annotate(letter, (x, y), xytext=(7, 5), textcoords="offset points", fontsize=7, color="#333333")
    ax.plot([], [], marker="o", color=branch_color("semantic"), markeredgecolor="k", linestyle="none",
            label="GD: semantic start lower")
    ax.plot([], [], marker="o", color=branch_color("positional"), markeredgecolor="k", linestyle="none",
            label="GD: positional start lower")
    ax.plot([], [], marker="o", color="white", markeredgecolor="k", linestyle="none", label="GD: sign not resolved")
    ax.plot([], [], marker="o", color="#bbbbbb", markeredgecolor="k", linestyle="none", label="GD: both starts, one state")
    ax.plot([], [], marker="x", color="k", linestyle="none", label="a run did not converge")
    ax.plot([], [], linestyle="none", label="S / P / T: global minimum of the theory there")
    ax.legend(loc="best", fontsize=7, frameon=False)
    ends = [a for v in (lines.alpha_c, lines.alpha_l, *lines.spinodals.values()) for a in v if a is not None]
    xmax = max([r["alpha"] for r in rows] + ends + [ax.get_xlim()[1] / 1.08])
    ax.set_xlim(0, xmax * 1.08)
    fig.set_size_inches(6.5, 4.8)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=150)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
