"""The rank-2 student's phase diagram (docs/variants.md, "Rank 2 and the mixed branch"): the
theory's ``alpha_c(omega)`` with its kind (docs/model.md (5.5)), the mixed branch's spinodal and
``alpha_l``, with gradient descent at finite ``d`` from the semantic and the positional start on a
few ``(alpha, omega)`` points: the fraction of seeds that end in the mixed state (one student
column semantic, the other positional: ``|theta| >= 0.1`` and ``|m| >= 0.1``, the simulator's
threshold), their ``|theta|`` and ``|m|`` (mean and standard error over seeds), and the
training-error difference of the two starts. GD with the heavy-ball term 0.9 (the runs of
docs/variants.md), at most ``--max-steps`` steps to ``||grad R|| / sqrt(d) < 1e-6``.

Theory and simulations go through the sweep machinery into one results store (resumable; a
second run computes nothing), the same points as ``attnphase phase-diagram --rank 2 --simulate``.
Usage (the figure of docs/variants.md; about 25 min on 2 cores)::

    python studies/rank2_phase.py --omega 0.2,0.3,0.4 --alpha 0.5,1.0 --d 300 --seeds 3 \\
        --store rank2.sqlite --out docs/figures/rank2_phase.png
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from attnphase.sweeps.grid import SweepSpec
from attnphase.sweeps.phase import phase_heatmaps, phase_lines
from attnphase.sweeps.store import open_store
from attnphase.theory import SolverSettings


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def landed_mixed(run: dict) -> bool:
    """One student column semantic, the other positional (rotation invariants ``|theta|``, ``|m|``)."""
    th = float(np.linalg.norm(np.asarray(run["theta"], dtype=float)))
    m = float(np.linalg.norm(np.asarray(run["m"], dtype=float)))
    return th >= 0.1 and m >= 0.1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--omega", type=floats, default=[0.2, 0.3, 0.4])
    ap.add_argument("--alpha", type=floats, default=[0.5, 1.0])
    ap.add_argument("--d", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=8000)
    ap.add_argument("--momentum", type=float, default=0.9, help="heavy-ball term of GD (docs/variants.md's runs: 0.9)")
    ap.add_argument("--store", default="rank2.sqlite")
    ap.add_argument("--out", default="rank2_phase.png")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    base = {"rank": 2, **{f"solver_{k}": v for k, v in SolverSettings.PRESETS["fast"].items()}}
    kw = {"workers": args.workers, "progress": "none"}
    lines = phase_lines(base, args.omega, args.store, **kw)
    train = {"max_steps": args.max_steps, "momentum": args.momentum}
    maps = phase_heatmaps(base, args.omega, args.alpha, args.d, range(args.seeds), args.store, train=train, **kw)
    # the runs themselves (which state each start reached), read back from the store
    fixed = {"rank": 2, "d": args.d, "train_max_steps": args.max_steps, "train_momentum": args.momentum}
    sweep = SweepSpec("simulation", axes=(("omega", tuple(args.omega)), ("alpha", tuple(args.alpha)),
                                          ("seed", tuple(range(args.seeds))), ("init", ("semantic", "positional"))),
                      fixed=fixed)
    points = sweep.points()
    with open_store(args.store) as st:
        res = st.results([p.key for p in points])
    frac: dict[tuple[float, float, str], list[bool]] = {}
    overlaps: dict[tuple[float, float, str], list[tuple[float, float, bool]]] = {}
    for p in points:
        r = res.get(p.key)
        if r is None or r["status"] != "ok":
            continue
        key = (float(p.params["omega"]), float(p.params["alpha"]), str(p.params["init"]))
        frac.setdefault(key, []).append(landed_mixed(r["result"]))
        run = r["result"]
        overlaps.setdefault(key, []).append((float(np.linalg.norm(np.asarray(run["theta"], dtype=float))),
                                             float(np.linalg.norm(np.asarray(run["m"], dtype=float))),
                                             bool(run.get("converged"))))
    table = []
    for i, w in enumerate(maps.omega):
        for j, a in enumerate(maps.alpha):
            row = {"omega": w, "alpha": a, "d": args.d,
                   "mixed_from_semantic": _mean(frac.get((w, a, "semantic"), [])),
                   "mixed_from_positional": _mean(frac.get((w, a, "positional"), [])),
                   "seeds": int(maps.n_runs[i, j]),
                   **{f"{what}_{start}": _mean_se([o[k] for o in overlaps.get((w, a, start), [])])
                      for start in ("semantic", "positional") for k, what in ((0, "theta"), (1, "m"))},
                   "converged": sum(o[2] for start in ("semantic", "positional") for o in overlaps.get((w, a, start), [])),
                   "train_diff": float(maps.train_diff[i, j]), "train_diff_se": float(maps.train_diff_se[i, j])}
            table.append(row)
            print(json.dumps(row))
    print(json.dumps({"theory": lines.to_dict()}, default=str))
    figure(lines, table, args)


def _mean(v: list[bool]) -> float:
    return float(np.mean(v)) if v else math.nan


def _mean_se(v: list[float]) -> str:
    """``mean +- standard error`` over seeds."""
    if not v:
        return "-"
    se = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
    return f"{np.mean(v):.3f} +- {se:.3f}"


def figure(lines, table: list[dict], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import LinearSegmentedColormap

    from attnphase.plots.phase import plot_phase_lines
    from attnphase.plots.style import branch_color

    # the fraction ending mixed, from white (none) to the mixed branch's colour (all seeds)
    cmap = LinearSegmentedColormap.from_list("mixed_fraction", ["#ffffff", branch_color("mixed")])

    fig = plot_phase_lines(lines, title=f"Rank-2 student: theory and GD at d = {args.d}, {args.seeds} seeds")
    ax = fig.axes[0]
    sc = None
    for row in table:
        for dx, key, marker in ((-0.025, "mixed_from_semantic", "o"), (0.025, "mixed_from_positional", "s")):
            f = row[key]
            if math.isfinite(f):
                sc = ax.scatter([row["alpha"] + dx], [row["omega"]], c=[f], cmap=cmap, vmin=0, vmax=1,
                                marker=marker, s=60, edgecolors="k", linewidths=0.6, zorder=5)
    ax.scatter([], [], marker="o", c="w", edgecolors="k", label="GD, semantic start")
    ax.scatter([], [], marker="s", c="w", edgecolors="k", label="GD, positional start")
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    fig.set_layout_engine(None)  # (placed by hand: the legend below, the colour bar right)
    fig.set_size_inches(6.5, 5.0)
    fig.subplots_adjust(left=0.12, bottom=0.24, right=0.84, top=0.93)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
    if sc is not None:
        cax = fig.add_axes((0.87, 0.24, 0.02, 0.69))
        fig.colorbar(sc, cax=cax).set_label("fraction of seeds ending mixed", fontsize=8)
    fig.savefig(args.out, dpi=150)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
