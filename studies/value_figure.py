"""The figure and numbers of docs/questions.md Q3 (trainable value): theory and simulation of the
gain side by side, and the full value's finite-size scaling.

    python studies/value_figure.py docs/data/value_theory.csv docs/data/value_sim.csv \\
        docs/data/value_scaling.csv docs/figures/value_gain.png

Reads the CSVs of ``studies/value_theory.py``, ``studies/value_gain_sim.py`` and
``studies/value_scaling.py`` (and ``value_theory.alpha_c.json``), prints the simulation's
``alpha_c`` per value (crossing of the mean training-error difference, linear interpolation), the
paired shift of the gain against the identity (per seed, on the same data) and the gains, and
draws three panels: the training-error difference semantic minus positional against ``alpha``
(theory lines, simulation means +- standard error), the optimal gain of each branch, and the change
of ``R/d`` by the full value against ``d`` with a ``1/d`` line.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attnphase.plots.style import BRANCH_COLORS  # noqa: E402

#: the two value models of the left panel (not branches: neither takes a branch colour)
VALUE_COLORS = {"identity": "#000000", "gain": "#8c564b"}


def crossing(x: np.ndarray, y: np.ndarray) -> float:
    for i in range(len(x) - 1):
        if y[i] > 0 >= y[i + 1]:
            return float(x[i] - y[i] * (x[i + 1] - x[i]) / (y[i + 1] - y[i]))
    return float("nan")


def sim_tables(sim: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (value, alpha, seed): the difference semantic minus positional where both starts held
    their branch; per (value, alpha): mean and standard error."""
    piv = sim.pivot_table(index=["value", "alpha", "seed"], columns="init", values="train_loss")
    br = sim.pivot_table(index=["value", "alpha", "seed"], columns="init", values="branch", aggfunc="first")
    ok = (br["semantic"] == "semantic") & (br["positional"] == "positional")
    diff = (piv["semantic"] - piv["positional"])[ok].rename("diff").reset_index()
    agg = diff.groupby(["value", "alpha"])["diff"].agg(["mean", "sem", "count"]).reset_index()
    return diff, agg


def main() -> None:
    theory_csv, sim_csv, scaling_csv, out = sys.argv[1:5]
    th = pd.read_csv(theory_csv)
    sim = pd.read_csv(sim_csv)
    sc = pd.read_csv(scaling_csv)
    with open(theory_csv.replace(".csv", ".alpha_c.json")) as f:
        ac = json.load(f)
    diff, agg = sim_tables(sim)
    print("theory alpha_c:", {k: (round(v["alpha_c"], 4), round(v["alpha_c_error"], 4)) for k, v in ac.items()})
    for value in ("identity", "gain"):
        a = agg[agg.value == value]
        print(f"simulation alpha_c ({value}, mean curve): {crossing(a.alpha.to_numpy(), a['mean'].to_numpy()):.4f}")
    paired = diff.pivot_table(index=["alpha", "seed"], columns="value", values="diff").dropna()
    dd = (paired["gain"] - paired["identity"]).groupby("alpha").agg(["mean", "sem", "count"])
    print("paired change of the difference (gain - identity) per alpha:\n", dd.to_string())
    ai = agg[agg.value == "identity"]
    slope = np.polyfit(ai.alpha, ai["mean"], 1)[0]
    shift = -(paired["gain"] - paired["identity"]).mean() / slope
    shift_se = (paired["gain"] - paired["identity"]).sem() / abs(slope)
    print(f"simulation slope of the difference {slope:.3e} per unit alpha; paired alpha_c shift {shift:+.4f} +- {shift_se:.4f}")
    gains = sim[sim.value == "gain"].groupby(["alpha", "init"])["gain"].agg(["mean", "sem"]).reset_index()
    print("simulated gains:\n", gains.to_string())

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.3))
    for value, color in VALUE_COLORS.items():
        t = th.pivot_table(index="alpha", columns="branch", values=f"train_{value}")
        ax[0].plot(t.index, (t["semantic"] - t["positional"]) * 1e3, "-", color=color,
                   label=f"theory, {value}" + (" (v optimal)" if value == "gain" else " (V = I)"))
        a = agg[agg.value == value]
        off = 0.004 if value == "gain" else -0.004
        ax[0].errorbar(a.alpha + off, a["mean"] * 1e3, a["sem"] * 1e3, fmt="o" if value == "gain" else "s",
                       color=color, mfc="none", capsize=2, label=f"GD d = 300, {value}")
        x = ac[value]["alpha_c"]
        ax[0].axvline(x, color=color, lw=0.8, ls=":")
    ax[0].axhline(0, color="k", lw=0.6)
    ax[0].set_xlabel("alpha")
    ax[0].set_ylabel("eps_t(semantic) - eps_t(positional)  [1e-3]")
    ax[0].set_title(f"alpha_c: theory V = I {ac['identity']['alpha_c']:.3f}, gain {ac['gain']['alpha_c']:.3f}")
    ax[0].legend(fontsize=8)
    for branch, color in ((b, BRANCH_COLORS[b]) for b in ("semantic", "positional")):
        t = th[th.branch == branch]
        ax[1].errorbar(t.alpha, t.gain, t.gain_error, fmt="-", color=color, label=f"theory, {branch}")
        g = gains[gains.init == branch]
        ax[1].errorbar(g.alpha, g["mean"], g["sem"], fmt="o", mfc="none", color=color, capsize=2,
                       label=f"GD d = 300, {branch} start")
    ax[1].axhline(1, color="k", lw=0.6)
    ax[1].set_xlabel("alpha")
    ax[1].set_ylabel("optimal gain v")
    ax[1].set_title("trainable gain V = v I")
    ax[1].legend(fontsize=8)
    m = sc.groupby(["d", "init"])["delta_train"].mean().reset_index()
    for branch, color in ((b, BRANCH_COLORS[b]) for b in ("semantic", "positional")):
        s = m[m.init == branch]
        ax[2].loglog(s.d, -s.delta_train, "o-", color=color, label=f"full value, {branch} start")
    dref = np.array([50, 200])
    ax[2].loglog(dref, 1e-4 * 100 / dref, "k--", lw=0.8, label="1/d")
    ax[2].set_xlabel("d")
    ax[2].set_ylabel("decrease of R/d by V = I + M/sqrt(d)")
    ax[2].set_title("full value, ridge lambda ||M||^2 / 2 (alpha = 1.25)")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
