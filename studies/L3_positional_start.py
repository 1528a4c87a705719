"""``L = 3``: the positional-start selection next to gradient descent from the positional start
(docs/variants.md, "L = 3"; docs/model.md (3.7)).

Theory: at every ``--alphas`` and on each QMC scramble (``--seeds``, one order-``--order`` rule),
``attnphase.solve(alpha, spec, branch="positional")`` under the positional-start selection, and the
``theta`` block ``F'`` of the fixed point it found (:func:`attnphase.theory.stability.positional_stability`;
``F' > 1``: a saddle of the risk towards ``theta != 0``). GD: ``attnphase simulate --json`` files of
runs from the positional start, pooled per ``(d, alpha)``; a run has left for the semantic minimum
when ``|theta| > LEFT``. Writes one CSV row per solve and per run and draws the overlaps and ``F'``
against ``alpha`` with GD beside them:

    for A in 0.6 0.7 0.8 0.9 1.0 1.5; do attnphase simulate --L 3 --d 1000 --alpha $A --omega 0.3 \\
        --init positional --seeds 4 --momentum 0.9 --tol 1e-6 --max-steps 20000 --dtype float64 \\
        --threads 1 --json > gd_L3_$A.json; done                  # 2-5 min each
    for D in 2000 4000; do attnphase simulate --L 3 --d $D --alpha 0.6 --omega 0.3 --init positional \\
        --seeds 4 --momentum 0.9 --tol 1e-6 --max-steps 30000 --dtype float64 --device cuda \\
        --json > gd_L3_0.6_d$D.json; done                        # 48 s and 94 s on one H200 GPU
    python studies/L3_positional_start.py --gd gd_L3_*.json --csv docs/data/L3_positional_start.csv \\
        --gd-csv docs/data/L3_positional_gd.csv --figure docs/figures/L3_positional_start.png   # 1 min
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import attnphase as ap  # noqa: E402
from attnphase import SolverSettings  # noqa: E402
from attnphase.spec.problem import ModelSpec  # noqa: E402
from attnphase.theory.jumps import start_from  # noqa: E402
from attnphase.theory.stability import positional_stability  # noqa: E402

SPEC = ModelSpec(omega=0.3, L=3)
#: ``|theta|`` above which a GD run from the positional start has left for the semantic minimum
LEFT = 0.3


def m_rms(m: object) -> float:
    return float(np.sqrt(np.mean(np.asarray(m, dtype=float) ** 2)))


def theory_rows(alphas: list[float], seeds: list[int], order: int) -> list[dict[str, object]]:
    rows = []
    for a in alphas:
        for seed in seeds:
            st = SolverSettings.preset("default", response="positional-start", refine_order=0, target_error=0.0,
                                       order=order, warmup_order=min(order, 10), replicas=1, seed=seed)
            res = ap.solve(a, spec=SPEC, branch="positional", settings=st)
            r = res.branches["positional"]
            if r is None:
                print(f"alpha {a:g}, scramble {seed}: no positional point ({res.absent['positional']})")
                continue
            stab = positional_stability(SPEC, a, order=order, seed=seed, response="positional-start",
                                        start=start_from(SPEC, r.q_matrix, r.m_matrix, r.V, r.theta_matrix))
            row = {"alpha": a, "seed": seed, "order": order, "q": r.q, "m_rms": m_rms(r.m_matrix),
                   "m": " ".join(f"{v:.4f}" for v in np.ravel(r.m_matrix)), "theta": r.theta,
                   "train_loss": r.train_loss, "test_error": r.test_error, "F_prime": stab.slope,
                   "curvature": stab.curvature, "iterations": r.iterations, "converged": r.converged,
                   "version": ap.__version__}
            print(f"alpha {a:g}, scramble {seed}: q {r.q:.4f}, m_rms {row['m_rms']:.4f}, eps_t {r.train_loss:.6f}, "
                  f"eps_g {r.test_error:.6f}, F' {stab.slope:.3f}", flush=True)
            rows.append(row)
    return rows


def gd_rows(files: list[Path]) -> list[dict[str, object]]:
    rows = []
    for f in files:
        rec = json.loads(f.read_text())
        p = rec["params"]
        for r in rec["runs"]:
            rows.append({"d": p["d"], "alpha": p["alpha"], "seed": r["seed"], "q": r["q"],
                         "m_rms": m_rms(r["overlaps"]["m"]), "theta": r["theta"], "train_loss": r["train_loss"],
                         "test_error": r["test_error"], "left": abs(r["theta"]) > LEFT, "stop": r["stop"],
                         "steps": r["steps"], "device": p["train"]["device"], "version": p["version"]})
    return rows


def draw(th: pd.DataFrame, gd: pd.DataFrame, path: Path) -> None:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.5, 3.7))
    num = ["q", "m_rms", "F_prime"]
    t = th.groupby("alpha")[num].agg(["mean", "sem"])
    stay = gd[~gd["left"]].groupby(["d", "alpha"])[["q", "m_rms"]].agg(["mean", "sem"])
    for key, color, label in (("q", "C0", "q"), ("m_rms", "C1", r"$m_{\rm rms}$")):
        ax.errorbar(t.index, t[key]["mean"], yerr=t[key]["sem"], fmt="-", color=color, capsize=2,
                    label=f"{label}: positional-start theory")
        for (d, marker) in ((1000, "o"), (2000, "s"), (4000, "D")):
            if d not in stay.index.get_level_values("d"):
                continue
            s = stay.loc[d]
            ax.errorbar(s.index, s[key]["mean"], yerr=s[key]["sem"].fillna(0.0), fmt=marker, mfc="none",
                        color=color, capsize=2, label=f"{label}: GD, d = {d}" if key == "q" or d == 1000 else None)
    ax.set_xlabel(r"$\alpha$")
    ax.set_title("positional state (GD runs that kept it)", fontsize=9)
    ax.legend(fontsize=6.5, loc="center right")
    bx.plot(th["alpha"], th["F_prime"], "o", color="C2", ms=3, alpha=0.6, label="F' per scramble")
    bx.plot(t.index, t["F_prime"]["mean"], "-", color="C2", label="F' mean")
    bx.axhline(1.0, color="k", lw=0.8, ls=":")
    bx.set_xlabel(r"$\alpha$")
    bx.set_ylabel(r"$F' = d\theta_{new}/d\theta$ (> 1: saddle)")
    cx = bx.twinx()
    d1 = gd[gd["d"] == 1000].groupby("alpha")["left"].mean()
    cx.plot(d1.index, d1.values, "s--", color="C3", mfc="none", label="GD d = 1000: share that left")
    cx.set_ylim(-0.05, 1.05)
    cx.set_ylabel("share of GD runs that left for the semantic minimum", fontsize=8)
    h1, l1 = bx.get_legend_handles_labels()
    h2, l2 = cx.get_legend_handles_labels()
    bx.legend(h1 + h2, l1 + l2, fontsize=6.5, loc="upper left")
    bx.set_title(r"stability along $\theta$", fontsize=9)
    fig.suptitle(r"$L = 3$, $\omega = 0.3$: the positional-start selection and GD from the positional start",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=140)


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--alphas", type=float, nargs="+", default=[0.6, 0.7, 0.8, 0.9, 1.0, 1.5])
    ap_.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap_.add_argument("--order", type=int, default=11)
    ap_.add_argument("--gd", type=Path, nargs="+", required=True, help="attnphase simulate --json files")
    ap_.add_argument("--csv", type=Path, required=True)
    ap_.add_argument("--gd-csv", type=Path, required=True)
    ap_.add_argument("--figure", type=Path, required=True)
    args = ap_.parse_args()
    th = pd.DataFrame(theory_rows(args.alphas, args.seeds, args.order))
    gd = pd.DataFrame(gd_rows(args.gd)).sort_values(["d", "alpha", "seed"])
    th.to_csv(args.csv, index=False)
    gd.to_csv(args.gd_csv, index=False)
    cols = ["q", "m_rms", "train_loss", "test_error"]
    t = th.groupby("alpha")[cols + ["F_prime"]].mean()
    for (d, a), g in gd.groupby(["d", "alpha"]):
        kept = g[~g["left"]]
        line = f"GD d = {d}, alpha {a:g}: {int(g['left'].sum())} of {len(g)} left"
        if len(kept) and a in t.index:
            dev = ", ".join(f"{c} {kept[c].mean():.5g} ({(t.loc[a, c] - kept[c].mean()) / kept[c].mean():+.1%})"
                            for c in cols)
            line += f"; the rest: {dev} (theory against GD)"
        print(line)
    draw(th, gd, args.figure)
    print(f"wrote {args.csv}, {args.gd_csv} and {args.figure}")


if __name__ == "__main__":
    main()
