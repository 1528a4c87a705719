"""The solver over the parameter box (docs/solver.md, "The parameter box"): at every point of a
``(sigma, lambda)`` grid, for a few ``alpha`` at one ``omega``, :func:`attnphase.solve` with every
branch (``fast`` preset by default), timed and checked by :mod:`attnphase.checks` (finite numbers
with error estimates or a reasoned absence for every branch, the global minimum the lowest branch,
with ``--holes`` no branch that continuation from a nearby ``alpha`` finds but the single solve
misses). Writes one CSV row per solve (appended as it goes, so an interrupted scan keeps its rows;
a rerun skips the rows already there) and a figure: one panel per ``alpha``, a cell per
``(sigma, lambda)`` coloured by the outcome, labelled with the branches found and the time.

    python studies/box_scan.py --csv docs/data/box_scan.csv --figure docs/figures/box_scan.png
    python studies/box_scan.py --sigma 0.1,0.3,0.5,0.7,1,1.5,2 --lam 1e-4,1e-3,1e-2,0.1,1 --alpha 0.1,1,5 --holes
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from _write_csv import append_row

from attnphase.checks import BOX, BoxPoint, solve_box_point

LETTERS = {"semantic": "S", "positional": "P", "trivial": "T", "mixed": "M"}


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def scan(args: argparse.Namespace) -> list[dict]:
    path = Path(args.csv)
    done = {}
    if path.exists():
        with path.open() as f:
            done = {(r["model"], float(r["sigma"]), float(r["lam"]), float(r["omega"]), float(r["alpha"])): r
                    for r in csv.DictReader(f)}
    rows = []
    for alpha in args.alpha:
        for sigma in args.sigma:
            for lam in args.lam:
                p = BoxPoint(args.model, sigma, lam, args.omega, alpha)
                if not BOX.contains(sigma=sigma, lam=lam, omega=args.omega, alpha=alpha):
                    raise SystemExit(f"box_scan: {p} lies outside the box {BOX}")
                key = (p.model, p.sigma, p.lam, p.omega, p.alpha)
                if key in done:
                    rows.append(done[key])
                    continue
                r = solve_box_point(p, settings=args.preset, holes=args.holes).to_dict()
                print(f"{p.command(args.preset)}: {r['seconds']:.1f} s, found {r['found']}, "
                      f"{'clean' if r['clean'] else 'NOT clean: ' + (r['error'] or r['problems'])}", flush=True)
                append_row(r, path)
                rows.append(r)
    return rows


def figure(rows: list[dict], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alphas = args.alpha
    fig, axes = plt.subplots(1, len(alphas), figsize=(3.6 * len(alphas), 3.4), squeeze=False, sharey=True)
    for ax, alpha in zip(axes[0], alphas, strict=True):
        for r in (r for r in rows if float(r["alpha"]) == alpha):
            i, j = args.sigma.index(float(r["sigma"])), args.lam.index(float(r["lam"]))
            clean = str(r["clean"]) == "True"
            ax.add_patch(plt.Rectangle((i - 0.5, j - 0.5), 1, 1, color="#d9f0d3" if clean else "#f4a582"))
            found = "".join(LETTERS.get(b, "?") for b in str(r["found"]).split(",") if b)
            ax.text(i, j, f"{found or '-'}\n{float(r['seconds']):.1f}s", ha="center", va="center", fontsize=6.5)
        ax.set_xlim(-0.5, len(args.sigma) - 0.5)
        ax.set_ylim(-0.5, len(args.lam) - 0.5)
        ax.set_xticks(range(len(args.sigma)), [f"{s:g}" for s in args.sigma], fontsize=7)
        ax.set_yticks(range(len(args.lam)), [f"{v:g}" for v in args.lam], fontsize=7)
        ax.set_xlabel("sigma")
        ax.set_title(f"alpha = {alpha:g}, omega = {args.omega:g}", fontsize=9)
    axes[0][0].set_ylabel("lambda")
    n_clean = sum(str(r["clean"]) == "True" for r in rows)
    fig.suptitle(f"attnphase solve over (sigma, lambda), preset {args.preset}: {n_clean}/{len(rows)} clean "
                 "(green); S/P/T: branches found, time per solve", fontsize=9)
    fig.tight_layout()
    Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=130)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigma", type=floats, default=floats("0.1,0.2,0.3,0.5,0.7,1,1.5,2"))
    ap.add_argument("--lam", type=floats, default=floats("1e-4,1e-3,1e-2,0.1,1"))
    ap.add_argument("--alpha", type=floats, default=floats("0.1,1,5"))
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--model", default="reference")
    ap.add_argument("--preset", default="fast")
    ap.add_argument("--holes", action="store_true", help="also check for branches continuation finds (slower)")
    ap.add_argument("--csv", default="box_scan.csv")
    ap.add_argument("--figure", default="box_scan.png")
    args = ap.parse_args()
    rows = scan(args)
    figure(rows, args)
    bad = [r for r in rows if str(r["clean"]) != "True"]
    print(f"{len(rows) - len(bad)}/{len(rows)} clean; slowest {max(float(r['seconds']) for r in rows):.1f} s")
    for r in bad:
        print(f"NOT clean: sigma {r['sigma']} lam {r['lam']} alpha {r['alpha']}: {r['error'] or r['problems']}")


if __name__ == "__main__":
    main()
