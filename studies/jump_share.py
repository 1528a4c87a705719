"""The jump share ``J`` of the weights step's stiffness (docs/model.md (3.5)) against the gap
between theory and gradient descent (docs/variants.md, "The jump share").

``theory``: ``J`` (:func:`attnphase.theory.jumps.jump_share`, three QMC rules of order
``--order``, each rule's fixed point started from a ``fast`` solve of the branch) at the named
points, appended to ``--csv``.

``local``: the default solve of the branch with ``response="local"`` (the state-following
equations, docs/model.md (3.6)), appended to ``--csv``; with ``--gd-csv`` (the ``gd`` stage's
file) also GD's deviation from it (the last row of each point).

``gd``: gradient descent at ``d = 1000`` from the branch's informed start (lr 0.15, heavy ball
0.9, tol ``1e-6``, at most 8000 steps, float64, seeds ``0..--seeds-1``) against the default solve
of the branch: the mean overlaps and errors and their relative deviations, appended to ``--csv``.

    python studies/jump_share.py theory --csv docs/data/jump_share.csv                 # every point, ~6 min
    python studies/jump_share.py gd --points mix-k0.5-pos-1 --seeds 3 --csv docs/data/jump_share_gd.csv
    python studies/jump_share.py local --points mix-k0.5-pos-1 --csv docs/data/jump_share_local.csv \
        --gd-csv docs/data/jump_share_gd.csv
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
from _write_csv import append_row

import attnphase as ap
from attnphase.spec.problem import ModelSpec
from attnphase.theory.jumps import jump_share, start_from


def _mix(kappa: float) -> ModelSpec:
    return ModelSpec(omega=0.3, mixture=2, mixture_sep=1.0, mixture_align=kappa)


#: name -> (model, alpha, branch)
POINTS: dict[str, tuple[ModelSpec, float, str]] = {
    "tied-sem-1.5": (ModelSpec(omega=0.3), 1.5, "semantic"),
    "tied-sem-1": (ModelSpec(omega=0.3), 1.0, "semantic"),
    "tied-pos-1": (ModelSpec(omega=0.3), 1.0, "positional"),
    "tied-pos-1.5": (ModelSpec(omega=0.3), 1.5, "positional"),
    "causal-sem-3": (ModelSpec(omega=0.3, variant="causal"), 3.0, "semantic"),
    "causal-sem-2": (ModelSpec(omega=0.3, variant="causal"), 2.0, "semantic"),
    "causal-sem-1.75": (ModelSpec(omega=0.3, variant="causal"), 1.75, "semantic"),
    "causal-sem-1.65": (ModelSpec(omega=0.3, variant="causal"), 1.65, "semantic"),
    "causal-sem-1.62": (ModelSpec(omega=0.3, variant="causal"), 1.62, "semantic"),
    "causal-pos-1.5": (ModelSpec(omega=0.3, variant="causal"), 1.5, "positional"),
    "L3-sem-1.5": (ModelSpec(omega=0.3, L=3), 1.5, "semantic"),
    "untied-pos-1.5": (ModelSpec(omega=0.3, variant="untied"), 1.5, "positional"),
    "untied-sem-2.5": (ModelSpec(omega=0.3, variant="untied"), 2.5, "semantic"),
    "r2-mixed-1.5": (ModelSpec(omega=0.3, rank=2), 1.5, "mixed"),
    "cross-sem-1": (ModelSpec(omega=0.3, variant="cross"), 1.0, "semantic"),
    "cross-sem-2": (ModelSpec(omega=0.3, variant="cross"), 2.0, "semantic"),
    "cross-pos-1": (ModelSpec(omega=0.3, variant="cross"), 1.0, "positional"),
    "cross-pos-0.5": (ModelSpec(omega=0.3, variant="cross"), 0.5, "positional"),
    **{f"mix-k{k}-pos-1": (_mix(k), 1.0, "positional") for k in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)},
    "mix-k0.5-pos-2": (_mix(0.5), 2.0, "positional"),
    "mix-k0.5-pos-0.7": (_mix(0.5), 0.7, "positional"),
    "mix-k0.5-pos-0.5": (_mix(0.5), 0.5, "positional"),
    "mix-k0.5-sem-1": (_mix(0.5), 1.0, "semantic"),
    "mix-k0.5-sem-2": (_mix(0.5), 2.0, "semantic"),
}


def theory(args: argparse.Namespace) -> None:
    for name in args.points or list(POINTS):
        spec, alpha, branch = POINTS[name]
        t0 = time.time()
        b = ap.solve(alpha, spec=spec, branch=branch, settings="fast").branches[branch]
        if b is None:
            print(f"{name}: no {branch} branch in the fast solve", flush=True)
            continue
        j = jump_share(spec, alpha, branch, order=args.order,
                       start=start_from(spec, b.q_matrix, b.m_matrix, b.V, b.theta_matrix, b.s_matrix))
        print(f"{name:18s} J {j.share:+.4f} +- {j.share_error:.4f} ({time.time() - t0:.0f} s) {j.message}", flush=True)
        append_row({"point": name, "alpha": alpha, "branch": branch, "order": args.order, "share": j.share,
                           "share_error": j.share_error, "stein": " ".join(f"{v:.6g}" for v in j.stein),
                           "pointwise": " ".join(f"{v:.6g}" for v in j.pointwise), "success": j.success}, args.csv)


def local(args: argparse.Namespace) -> None:
    from attnphase import SolverSettings

    runs: dict[str, dict[str, str]] = {}
    if args.gd_csv is not None:
        with args.gd_csv.open() as f:
            runs = {r["point"]: r for r in csv.DictReader(f)}  # (the last row of each point)
    settings = SolverSettings.preset("default", response="local")
    for name in args.points or list(POINTS):
        spec, alpha, branch = POINTS[name]
        b = ap.solve(alpha, spec=spec, branch=branch, settings=settings).branches[branch]
        if b is None:
            print(f"{name}: no {branch} fixed point of the state-following equations", flush=True)
            continue
        row: dict = {"point": name, "q": b.q, "m": abs(b.m), "theta": abs(b.theta), "train_loss": b.train_loss,
                     "test_error": b.test_error, "overlap_error": b.overlap_error}
        dev = ""
        if name in runs:
            for key in ("q", "m", "theta", "train_loss", "test_error"):
                row[key + "_gd_dev"] = float(runs[name][key]) / row[key] - 1.0 if row[key] > 1e-3 else float("nan")
            dev = "; GD against it: " + ", ".join(f"{k} {100 * row[k + '_gd_dev']:+.1f} %" for k in
                                                  ("q", "m", "theta", "train_loss", "test_error")
                                                  if np.isfinite(row[k + "_gd_dev"]))
        print(f"{name}: q {b.q:.4f} |m| {abs(b.m):.4f} theta {abs(b.theta):.4f} eps_t {b.train_loss:.6f} "
              f"eps_g {b.test_error:.6f}{dev}", flush=True)
        append_row(row, args.csv)


def gd(args: argparse.Namespace) -> None:
    import torch

    from attnphase.sim import TrainSettings, simulate

    torch.set_num_threads(1)
    settings = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000, dtype="float64",
                             log_every=0)
    for name in args.points:
        spec, alpha, branch = POINTS[name]
        th = ap.solve(alpha, spec=spec, branch=branch).branches[branch]
        init = "semantic" if branch == "semantic" else "positional"
        res = simulate(spec, alpha=alpha, d=args.d, seeds=tuple(range(args.seeds)), inits=(init,), settings=settings)
        runs = np.array([[r.q, abs(r.m), abs(r.theta), r.train_loss, r.test_error] for r in res.runs])
        want = (np.full(5, np.nan) if th is None else  # (no such branch in the global equations)
                np.array([th.q, abs(th.m), abs(th.theta), th.train_loss, th.test_error]))
        mean = runs.mean(0)
        se = runs.std(0, ddof=1) / np.sqrt(len(runs))
        row: dict = {"point": name, "d": args.d, "seeds": args.seeds,
                     "converged": sum(r.converged for r in res.runs)}
        for i, key in enumerate(("q", "m", "theta", "train_loss", "test_error")):
            row[key] = mean[i]
            row[key + "_se"] = se[i]
            row[key + "_theory"] = want[i]
            row[key + "_dev"] = mean[i] / want[i] - 1.0 if want[i] > 1e-3 else float("nan")
        print(f"{name}: GD " + ", ".join(f"{k} {row[k]:.5g}" for k in ("q", "m", "theta", "train_loss", "test_error"))
              + "; against the global equations: " + ", ".join(f"{k} {100 * row[k + '_dev']:+.1f} +- {100 * row[k + '_se'] / row[k + '_theory']:.1f} %"
                                      for k in ("q", "m", "theta", "train_loss", "test_error")
                                      if np.isfinite(row[k + "_dev"])), flush=True)
        append_row(row, args.csv)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=["theory", "local", "gd"])
    p.add_argument("--points", nargs="+", choices=list(POINTS), default=None)
    p.add_argument("--order", type=int, default=12, help="log2 of the QMC base sample (theory)")
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--gd-csv", type=Path, default=None, help="local: the gd stage's file, for GD's deviations")
    args = p.parse_args()
    if args.stage == "gd" and not args.points:
        p.error("gd needs --points")
    {"theory": theory, "local": local, "gd": gd}[args.stage](args)


if __name__ == "__main__":
    main()
