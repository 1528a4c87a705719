"""The causal student's ``alpha_c`` by simulation against ``d``, next to the theory's
(docs/questions.md, Q4).

Each simulation is an ``attnphase sim-transition --out DIR`` run (paired training-error difference
of the semantic and positional starts on one data set per seed, docs/model.md (5.2)); this script
reads their per-seed tables, pools the runs of one ``d``, writes one CSV row per ``d`` (the
crossing of the mean difference with its standard error, the mean of the per-seed crossings) and draws ``alpha_c``
against ``1/d`` with a weighted straight-line fit and the theory's value as a band:

    for d in 300 600; do attnphase sim-transition --omega 0.3 --variant causal --alpha 2.0:3.2:7 \\
        --d $d --seeds 40 --threads 1 --out causal_d$d; done          # 8 and 30 min
    for s in 0 20; do attnphase sim-transition --omega 0.3 --variant causal --alpha 2.0:3.2:7 \\
        --d 1000 --seeds 20 --seed0 $s --threads 1 --out causal_d1000_$s; done   # 35 min each
    # on one GPU, eight or ten processes of five seeds side by side (3 and 4 min in all):
    for s in 40 45 50 55 60 65 70 75 80 85; do attnphase sim-transition --omega 0.3 --variant causal \\
        --alpha 2.0:3.2:7 --d 1000 --seeds 5 --seed0 $s --threads 1 --max-steps 10000 --device cuda \\
        --out causal_d1000_$s & done; wait
    for s in 0 5 10 15 20 25 30 35; do attnphase sim-transition --omega 0.3 --variant causal \\
        --alpha 2.0:3.2:7 --d 2000 --seeds 5 --seed0 $s --threads 1 --max-steps 10000 --device cuda \\
        --out causal_d2000_$s & done; wait
    attnphase transition --variant causal --omega 0.3 --alpha 0.4:4.0:13 --replicas 3 --refine-order 13 \\
        --json > causal_transition.json                               # 2 min
    python studies/causal_alpha_c_d.py causal_transition.json causal_d300 causal_d600 causal_d1000_* \\
        causal_d2000_* --csv docs/data/causal_alpha_c_d.csv --figure docs/figures/causal_alpha_c_d.png
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
from scipy import stats  # noqa: E402

from attnphase.sim.transition import find_crossing  # noqa: E402


def pooled(folders: list[Path]) -> dict[str, object]:
    """The runs of one ``d`` (distinct seeds, one grid) pooled: the crossing of the mean paired
    difference over every seed, and each seed's own crossing (the estimator of
    ``attnphase.sim.transition.sim_transition``)."""
    df = pd.concat([pd.read_csv(f / "sim_transition.csv") for f in folders], ignore_index=True)
    if df.duplicated(["alpha", "seed"]).any():
        raise SystemExit("the runs of one d share a seed")
    alphas = sorted(df["alpha"].unique())
    by = df.groupby("alpha")
    mean, se = by["delta"].mean(), by["delta"].sem()
    held = by.apply(lambda g: min((g.branch_semantic == "semantic").mean(),
                                  (g.branch_positional == "positional").mean()) >= 0.5)
    cr = find_crossing(alphas, mean[alphas].to_numpy(), se[alphas].to_numpy(), held[alphas].to_numpy())
    per_seed = []
    for _, g in df.groupby("seed"):
        g = g.set_index("alpha").loc[alphas]
        ok = (g.branch_semantic == "semantic") & (g.branch_positional == "positional")
        c = find_crossing(alphas, g["delta"].to_numpy(), None, ok.to_numpy()).alpha_c
        if c is not None:
            per_seed.append(c)
    recs = [json.loads((f / "sim_transition.json").read_text())["params"] for f in folders]
    return {
        "d": int(df["d"].iloc[0]), "seeds": int(df["seed"].nunique()), "alphas": " ".join(f"{a:g}" for a in alphas),
        "alpha_c": cr.alpha_c, "alpha_c_se": cr.se, "reason": cr.reason,
        "per_seed_mean": float(np.mean(per_seed)), "per_seed_se": float(np.std(per_seed, ddof=1) / np.sqrt(len(per_seed))),
        "seeds_crossing": len(per_seed), "version": recs[0]["version"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transition", type=Path, help="JSON of attnphase transition --json")
    ap.add_argument("runs", type=Path, nargs="+", help="folders of attnphase sim-transition --out (runs of one d "
                    "with distinct seeds are pooled)")
    ap.add_argument("--csv", type=Path, required=True)
    ap.add_argument("--figure", type=Path, required=True)
    args = ap.parse_args()
    th = json.loads(args.transition.read_text())
    ac, ac_err = th["alpha_c"], th["errors"]["alpha_c"] or 0.0
    for i, rep in enumerate(th.get("replicas", [])):
        print(f"theory, scramble {i}: alpha_c {rep['alpha_c']:.4f} (estimate {rep['errors']['alpha_c']:.4f})")
    groups: dict[int, list[Path]] = {}
    for f in args.runs:
        groups.setdefault(json.loads((f / "sim_transition.json").read_text())["params"]["d"], []).append(f)
    df = pd.DataFrame([pooled(fs) for _, fs in sorted(groups.items())])
    df.to_csv(args.csv, index=False)
    print(f"theory alpha_c = {ac:.4f} +- {ac_err:.4f}")
    for r in df.itertuples():
        z = (r.alpha_c - ac) / (r.alpha_c_se ** 2 + ac_err ** 2) ** 0.5
        print(f"d = {r.d}: alpha_c {r.alpha_c:.4f} +- {r.alpha_c_se:.4f} ({r.seeds} seeds; {z:+.1f} SE from the "
              f"theory), per seed {r.per_seed_mean:.4f} +- {r.per_seed_se:.4f} ({r.seeds_crossing} crossing)")

    z = (df["alpha_c"] - ac) / np.sqrt(df["alpha_c_se"] ** 2 + ac_err ** 2)
    print(f"against the theory: chi2 {float((z ** 2).sum()):.2f} for {len(z)} dof "
          f"(p = {float(stats.chi2.sf((z ** 2).sum(), len(z))):.2f})")

    # weighted least squares alpha_c = a + b / d over the pooled crossings
    x = 1e3 / df["d"].to_numpy()
    w = 1.0 / df["alpha_c_se"].to_numpy() ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a, b = cov @ X.T @ (w * df["alpha_c"].to_numpy())
    chi2 = float(np.sum(w * (df["alpha_c"].to_numpy() - a - b * x) ** 2))
    print(f"fit a + b / d: a = {a:.4f} +- {cov[0, 0] ** 0.5:.4f} ({(a - ac) / (cov[0, 0] + ac_err ** 2) ** 0.5:+.1f} SE "
          f"from the theory), b = {b * 1e3:.0f} +- {cov[1, 1] ** 0.5 * 1e3:.0f}, chi2 {chi2:.2f} for {len(x) - 2} dof")

    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    xs = np.linspace(0, x.max() * 1.1, 50)
    ax.plot(xs, a + b * xs, "--", color="C3", lw=1, label=f"fit $a + b/d$: $a$ = {a:.2f} $\\pm$ {cov[0, 0] ** 0.5:.2f}")
    ax.axhspan(ac - ac_err, ac + ac_err, color="C0", alpha=0.25, lw=0)
    ax.axhline(ac, color="C0", lw=1.5, label=f"theory ($d\\to\\infty$) {ac:.3f}")
    ax.errorbar(x, df["alpha_c"], yerr=df["alpha_c_se"], fmt="o", color="C3", capsize=3,
                label="GD: crossing of the mean $\\Delta$")
    ax.errorbar(x * 1.04, df["per_seed_mean"], yerr=df["per_seed_se"], fmt="s", mfc="none", color="C3",
                capsize=3, label="GD: mean of the per-seed crossings")
    for r, xi in zip(df.itertuples(), x, strict=True):
        ax.annotate(f"d={r.d}\n{r.seeds} seeds", (xi, r.alpha_c), textcoords="offset points", xytext=(8, -4),
                    fontsize=7)
    ax.set_xlim(0, x.max() * 1.35)
    ax.set_xlabel("$10^3/d$")
    ax.set_ylabel(r"$\alpha_c$")
    ax.set_title(r"causal student, $\omega = 0.3$", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.figure, dpi=150)
    print(f"wrote {args.csv} and {args.figure}")


if __name__ == "__main__":
    main()
