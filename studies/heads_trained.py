"""Two heads with trained gains against one head with its gain trained, over ``alpha`` (docs/heads.md,
"Trained gains").

For each ``alpha`` of ``--alphas`` at ``--omega``: the two-head solve with trained head gains
(:func:`attnphase.solve`, ``heads=2, head_gains="trained"``, every branch at its stationary gains,
docs/model.md (11.4)) and the one-head solve with the value gain trained (``value="gain"``, (6.5)),
both at ``--preset``. Writes one CSV row per ``alpha`` (``--csv``): each two-head branch's
training and test error and gains (empty where it has no stationary gains), the one-head global
minimum, and a figure (``--out``) of the test errors against ``alpha`` with the heads' gains of the
specialised branch beneath; ``--plot-only`` draws the figure from the CSV without computing.

    python studies/heads_trained.py --omega 0.6 --alphas 2:4:9 --csv docs/data/heads_trained.csv \\
        --out docs/figures/heads_trained.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _write_csv import add_table_flags, read_rows, save_figure, tabulate_and_plot

BRANCHES = ("semantic", "positional", "trivial", "specialised")
FIELDS = ("alpha", "omega", *(f"{b}_{k}" for b in BRANCHES for k in ("train", "test", "v1", "v2")),
          "one_head_branch", "one_head_train", "one_head_test", "one_head_gain", "idle_limit")


def compute(alphas: np.ndarray, omega: float, preset: str) -> list[dict]:
    """One row per ``alpha``: the two-head branches at their stationary gains and the one-head
    global minimum at its optimal value gain."""
    import attnphase as ap

    rows = []
    for a in alphas:
        two = ap.solve(float(a), heads=2, head_gains="trained", omega=omega, branch="all", settings=preset,
                       progress=False)
        one = ap.solve(float(a), value="gain", omega=omega, branch="all", settings=preset, progress=False)
        row: dict = {"alpha": float(a), "omega": omega}
        for b in BRANCHES:
            r = two.branches.get(b)
            gains = r.head_gains if r is not None and r.head_gains else (None, None)
            row.update({f"{b}_train": r.train_loss if r else None, f"{b}_test": r.test_error if r else None,
                        f"{b}_v1": gains[0], f"{b}_v2": gains[1]})
        g = one.global_minimum
        r1 = one.branches[g] if g else None
        row.update(one_head_branch=g, one_head_train=r1.train_loss if r1 else None,
                   one_head_test=r1.test_error if r1 else None, one_head_gain=r1.gain if r1 else None,
                   idle_limit=bool(two.idle_limit and two.idle_limit.get("below")))
        rows.append(row)
        print(f"alpha {a:g}: two heads {two.message[:160]}", flush=True)
    return rows


def _num(s: str) -> float:
    return float(s) if s not in ("", "None") else np.nan


def plot(csv_path: Path, out: Path) -> None:
    """Test errors against ``alpha`` (two-head branches at their stationary gains, the one-head
    global minimum at its value gain) and the specialised branch's gains, from the CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnphase.plots.style import branch_color

    rows = read_rows(csv_path)
    a = np.array([_num(r["alpha"]) for r in rows])
    fig, (ax, axg) = plt.subplots(2, 1, figsize=(5.8, 5.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    for b in BRANCHES:
        y = np.array([_num(r[f"{b}_test"]) for r in rows])
        if np.isfinite(y).any():
            ax.plot(a, y, "o-", color=branch_color(b), markersize=3, label=f"two heads, trained gains: {b}")
    y1 = np.array([_num(r["one_head_test"]) for r in rows])
    ax.plot(a, y1, "s--", color="#555555", markersize=3, label="one head, trained value gain: global minimum")
    ax.set_ylabel("test error")
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title(rf"Trained gains at $\omega = {_num(rows[0]['omega']):g}$, $\sigma = 0.5$, $\lambda = 0.01$ (theory)",
                 fontsize=10)
    for k, style in (("v1", "o-"), ("v2", "^-")):
        axg.plot(a, [_num(r[f"specialised_{k}"]) for r in rows], style, color=branch_color("specialised"),
                 markersize=3, label=f"specialised: {'semantic' if k == 'v1' else 'positional'} head's gain")
    axg.set_xlabel(r"sample complexity $\alpha = n/d$")
    axg.set_ylabel("gain")
    axg.legend(fontsize=7, frameon=False)
    axg.grid(alpha=0.3)
    save_figure(fig, out)


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--omega", type=float, default=0.6)
    ap_.add_argument("--alphas", default="2:4:9", help="start:stop:num")
    ap_.add_argument("--preset", default="fast")
    add_table_flags(ap_, "heads_trained")
    args = ap_.parse_args()
    a, b, n = args.alphas.split(":")
    tabulate_and_plot(args, lambda: compute(np.linspace(float(a), float(b), int(n)), args.omega, args.preset),
                      FIELDS, plot)


if __name__ == "__main__":
    main()
