"""Two heads against one: the test error of every state against ``alpha`` (docs/heads.md).

At each ``alpha`` of ``--alphas`` (``omega``, ``sigma``, ``lambda`` fixed):

* the theory of the two-head student (``attnphase.solve(alpha, heads=2, branch="all")``, the
  ``fast`` preset): every branch (semantic, positional, specialised, trivial), its training and
  test error, and which is the global minimum; and the one-head student's branches beside it;
* gradient descent at ``--d`` with two heads (gains fixed at 1/2 or trained: ``--head-gains``),
  from the semantic, positional, specialised and
  random starts (``--seeds`` each; heavy ball 0.9, float64, until ``||grad R|| / sqrt(d) < --tol``
  or ``--max-steps``): the state each run reaches (classified per head), its errors and per-head
  overlaps. A run that did not meet the tolerance is written with ``converged = 0`` and never drawn.

Writes a CSV of the theory (``--theory-csv``, one row per alpha and branch), a CSV of the runs
(``--csv``, one row per run; a second call skips the ``alpha`` already in it) and a figure: test
error against ``alpha``, the theory's branches as lines (two heads solid, one head dashed), the
converged runs as markers coloured by the state they reached.

    python studies/heads.py --alphas 0.25,0.5,1,1.5,2,3 --omega 0.3 --d 1000 --seeds 2 \\
        --csv docs/data/heads_gd.csv --theory-csv docs/data/heads_theory.csv \\
        --out docs/figures/heads_alpha.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _write_csv import read_rows, write_rows

import attnphase as ap
from attnphase.sim.simulate import classify_heads

STARTS = ("semantic", "positional", "specialised", "random")
RUN_FIELDS = ("alpha", "omega", "sigma", "lam", "d", "seed", "start", "converged", "steps", "state",
              "train_loss", "test_error", "theta_1", "theta_2", "m_1", "m_2", "q_11", "q_22", "q_12", "v_1", "v_2")
THEORY_FIELDS = ("alpha", "heads", "branch", "exists", "global_minimum", "train_loss", "test_error",
                 "theta_1", "theta_2", "m_1", "m_2", "error_estimate", "reason")


def theory_rows(alpha: float, heads: int, model: dict, head_gains: str = "fixed") -> list[dict]:
    """Every branch of the ``heads``-head student at ``alpha`` (``fast`` preset)."""
    try:
        gains = {"head_gains": head_gains} if heads > 1 else {}
        res = ap.solve(alpha, branch="all", settings="fast", progress=False, heads=heads, **gains, **model)
    except ValueError as exc:  # (a combination the theory does not cover)
        return [{"alpha": alpha, "heads": heads, "branch": "", "exists": 0, "reason": str(exc)}]
    rows = []
    for name, b in res.branches.items():
        if b is None:
            rows.append({"alpha": alpha, "heads": heads, "branch": name, "exists": 0,
                         "reason": res.absent.get(name, "")})
            continue
        th = np.atleast_1d(np.asarray(b.theta_matrix if b.theta_matrix else [[b.theta]], dtype=float)[:, 0])
        m = np.atleast_2d(np.asarray(b.m_matrix if b.m_matrix else [[b.m]], dtype=float))[0]
        rows.append({"alpha": alpha, "heads": heads, "branch": name, "exists": 1,
                     "global_minimum": int(name == res.global_minimum), "train_loss": b.train_loss,
                     "test_error": b.test_error, "theta_1": th[0], "theta_2": th[1] if th.size > 1 else "",
                     "m_1": m[0], "m_2": m[1] if m.size > 1 else "", "error_estimate": b.overlap_error})
    return rows


def gd_rows(alpha: float, args: argparse.Namespace, model: dict) -> list[dict]:
    res = ap.simulate(alpha, args.d, init=list(STARTS), seeds=args.seeds, heads=2, head_gains=args.head_gains,
                      progress=False,
                      optimizer="gd", momentum=0.9, tol=args.tol, max_steps=args.max_steps, dtype="float64",
                      threads=args.threads, **model)
    rows = []
    for r in res.runs:
        th = np.asarray(r.overlaps["theta"], dtype=float)[:, 0]
        m = np.asarray(r.overlaps["m"], dtype=float)[0]
        q = np.asarray(r.overlaps["q"], dtype=float)
        rows.append({"alpha": alpha, "omega": model["omega"], "sigma": model["sigma"], "lam": model["lam"],
                     "d": args.d, "seed": r.seed, "start": r.init, "converged": int(r.converged), "steps": r.steps,
                     "state": r.branch, "train_loss": r.train_loss, "test_error": r.test_error,
                     "theta_1": th[0], "theta_2": th[1], "m_1": m[0], "m_2": m[1],
                     "q_11": q[0, 0], "q_22": q[1, 1], "q_12": q[0, 1],
                     "v_1": r.overlaps["gains"][0] if "gains" in r.overlaps else 0.5,
                     "v_2": r.overlaps["gains"][1] if "gains" in r.overlaps else 0.5})
    return rows


def plot(theory: list[dict], runs: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnphase.plots.style import BRANCH_COLORS

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for heads, style in (("2", "-"), ("1", "--")):
        for branch in ("semantic", "positional", "specialised", "mixed", "trivial"):
            pts = sorted((float(r["alpha"]), float(r["test_error"])) for r in theory
                         if str(r["heads"]) == heads and r["branch"] == branch and str(r["exists"]) == "1")
            if pts:
                a, e = zip(*pts, strict=True)
                ax.plot(a, e, style, color=BRANCH_COLORS.get(branch, "k"), lw=1.5 if heads == "2" else 1.0,
                        label=f"{branch}, {'two heads' if heads == '2' else 'one head'}")
    for state in ("semantic", "positional", "specialised", "mixed", "trivial"):
        pts = [(float(r["alpha"]), float(r["test_error"])) for r in runs
               if r["state"] == state and str(r["converged"]) == "1"]
        if pts:
            a, e = zip(*pts, strict=True)
            ax.plot(a, e, "o", ms=4, mfc="none", color=BRANCH_COLORS.get(state, "k"), label=f"GD ends {state}")
    ax.set_xlabel(r"$\alpha$")
    ax.set_ylabel("test error")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--alphas", default="0.25,0.5,1,1.5,2,3")
    ap_.add_argument("--omega", type=float, default=0.3)
    ap_.add_argument("--sigma", type=float, default=0.5)
    ap_.add_argument("--lam", type=float, default=0.01)
    ap_.add_argument("--d", type=int, default=1000)
    ap_.add_argument("--seeds", type=int, default=2)
    ap_.add_argument("--tol", type=float, default=1e-6)
    ap_.add_argument("--max-steps", type=int, default=40000)
    ap_.add_argument("--threads", type=int, default=None)
    ap_.add_argument("--head-gains", default="fixed", choices=("fixed", "trained"))
    ap_.add_argument("--no-gd", action="store_true", help="the theory only")
    ap_.add_argument("--plot-only", action="store_true", help="draw the figure from the CSVs, computing nothing")
    ap_.add_argument("--csv", type=Path, default=Path("heads_gd.csv"))
    ap_.add_argument("--theory-csv", type=Path, default=Path("heads_theory.csv"))
    ap_.add_argument("--out", type=Path, default=Path("heads_alpha.png"))
    args = ap_.parse_args()
    model = {"omega": args.omega, "sigma": args.sigma, "lam": args.lam}
    alphas = [float(a) for a in args.alphas.split(",")]
    theory = [r for r in read_rows(args.theory_csv) if args.plot_only or float(r["alpha"]) not in alphas]
    for a in ([] if args.plot_only else alphas):
        t0 = time.perf_counter()
        for heads in (2, 1):
            theory += theory_rows(a, heads, model, args.head_gains)
        print(f"theory alpha = {a:g}: {time.perf_counter() - t0:.0f} s", flush=True)
        write_rows(args.theory_csv, theory, THEORY_FIELDS)
    runs = read_rows(args.csv)
    for r in runs:  # (the state from the stored overlaps, by the current classification)
        r["state"] = classify_heads(np.array([[float(r["m_1"]), float(r["m_2"])]]),
                                    np.array([[float(r["theta_1"])], [float(r["theta_2"])]]))
    done = {float(r["alpha"]) for r in runs}
    for a in ([] if args.no_gd or args.plot_only else alphas):
        if a in done:
            continue
        t0 = time.perf_counter()
        runs += gd_rows(a, args, model)
        write_rows(args.csv, runs, RUN_FIELDS)
        conv = [r for r in runs if float(r["alpha"]) == a]
        print(f"GD alpha = {a:g}: {sum(int(r['converged']) for r in conv)}/{len(conv)} converged, "
              f"states {sorted({r['state'] for r in conv})}, {time.perf_counter() - t0:.0f} s", flush=True)
    title = (f"omega = {args.omega:g}, sigma = {args.sigma:g}, lambda = {args.lam:g}, head gains {args.head_gains}\n"
             f"GD d = {args.d}, {args.seeds} seeds per start")
    plot(theory, runs, args.out, title)
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
