"""Two heads against one over ``omega``: the phase diagrams of both students (docs/heads.md).

For each number of heads in ``--heads`` the theory's phase diagram over ``--omegas``
(:func:`attnphase.phase_diagram`, the solver preset of ``attnphase transition``, stored and
resumable in ``--store``): ``alpha_c`` (one head: positional to semantic; two heads: positional to
specialised, the two-head global minimum above it), its standard error, the spinodals and
``alpha_l``. Writes one CSV row per number of heads and ``omega`` (``--csv``) and a figure of
``alpha_c(omega)`` with the spinodals of both students (``--out``); ``--plot-only`` draws the
figure from the CSV without computing.

    python studies/heads_phase.py --omegas 0.05:0.65:7 --heads 1,2 --store heads_phase.sqlite \\
        --csv docs/data/heads_phase.csv --out docs/figures/heads_phase.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _write_csv import add_table_flags, read_rows, save_figure, tabulate_and_plot

FIELDS = ("heads", "omega", "alpha_c", "alpha_c_error", "kind", "exchange", "spinodal_positional",
          "spinodal_other", "other_branch", "alpha_l", "alpha_l_error", "reason")


def compute(omegas: np.ndarray, heads: list[int], store: str) -> list[dict]:
    """The phase lines of each student, one row per (heads, omega)."""
    import attnphase as ap

    rows = []
    for h in heads:
        res = ap.phase_diagram(list(omegas), heads=h, store=store, progress="log")
        lines = res.lines
        other = lines.semantic_side
        for i, w in enumerate(lines.values):
            rows.append({
                "heads": h, "omega": w, "alpha_c": lines.alpha_c[i], "alpha_c_error": lines.alpha_c_se[i],
                "kind": lines.kind[i], "exchange": lines.exchange[i],
                "spinodal_positional": lines.spinodals.get("positional", [None] * len(lines.values))[i],
                "spinodal_other": lines.spinodals.get("semantic", [None] * len(lines.values))[i],
                "other_branch": other, "alpha_l": lines.alpha_l[i], "alpha_l_error": lines.alpha_l_se[i],
                "reason": lines.reasons[i] if lines.reasons else None,
            })
    return rows


def _num(s: str) -> float:
    return float(s) if s not in ("", "None") else np.nan


def plot(csv_path: Path, out: Path) -> None:
    """``alpha_c(omega)`` of each student with its error bars and spinodals, from the CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnphase.plots.style import branch_color

    rows = read_rows(csv_path)
    fig, ax = plt.subplots(figsize=(5.8, 4.2))
    for h, style in (("1", "--"), ("2", "-")):
        sel = [r for r in rows if r["heads"] == h]
        if not sel:
            continue
        w = np.array([_num(r["omega"]) for r in sel])
        ac = np.array([_num(r["alpha_c"]) for r in sel])
        se = np.nan_to_num(np.array([_num(r["alpha_c_error"]) for r in sel]))
        other = sel[0]["other_branch"]
        label = "one head" if h == "1" else "two heads (gains 1/2)"
        ax.errorbar(ac, w, xerr=se, fmt="o" + style, color="black" if h == "2" else "#555555", markersize=3,
                    capsize=2, linewidth=1.4, label=rf"{label}: $\alpha_c$ (positional $\to$ {other})")
        sp = np.array([_num(r["spinodal_other"]) for r in sel])
        ax.plot(sp, w, style, color=branch_color(other), linewidth=1.0,
                label=f"{label}: spinodal of the {other} branch")
        spp = np.array([_num(r["spinodal_positional"]) for r in sel])
        if np.isfinite(spp).any():
            ax.plot(spp, w, style, color=branch_color("positional"), linewidth=1.0,
                    label=f"{label}: spinodal of the positional branch")
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"positional share $\omega$")
    ax.set_xlim(left=0)
    ax.set_title(r"Two heads against one: $\sigma = 0.5$, $\lambda = 0.01$ (theory)", fontsize=10)
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    ax.grid(alpha=0.3)
    save_figure(fig, out)


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--omegas", default="0.05:0.65:7", help="start:stop:num")
    ap_.add_argument("--heads", default="1,2")
    ap_.add_argument("--store", default="heads_phase.sqlite")
    add_table_flags(ap_, "heads_phase")
    args = ap_.parse_args()
    a, b, n = args.omegas.split(":")
    tabulate_and_plot(args, lambda: compute(np.linspace(float(a), float(b), int(n)),
                                            [int(h) for h in args.heads.split(",")], args.store), FIELDS, plot)


if __name__ == "__main__":
    main()
