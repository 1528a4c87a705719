"""Cross-attention against self-attention: the theory's ``alpha_c(omega)`` and ``alpha_l(omega)``
(docs/model.md (5.2), (5.4), section 10) for four models at ``sigma = 0.5``, ``lambda = 0.01``:

* ``self``: the tied self-attention student of the paper (``L = 2``);
* ``cross``: cross-attention, ``L = L' = 2``, key embeddings orthogonal to the query ones (the
  default ``X = 0``);
* ``cross-shared``: the same with one shared table of embeddings (``X = G``, ``pi'_j = pi_j``);
* ``cross-L3``: ``L = 2`` queries on ``L' = 3`` keys (default ``A``: 0.6 on key ``l``, 0.2 on
  each other key).

Each ``(model, omega)`` is one ``attnphase.transition`` with the ``fast`` preset (as
``attnphase transition --omega W [--variant cross ...]``), appended to the CSV as it finishes
(a second run skips the rows already there), the followed branches on the bracketing grid into
``<csv stem>_grid.csv``. Then the figure of docs/cross.md. Usage:

    python studies/cross_phase.py --omegas 0.1:0.4:4 --csv docs/data/cross_phase.csv \\
        --out docs/figures/cross_phase.png [--models self,cross,cross-shared,cross-L3]
    python studies/cross_phase.py --plot-only --csv docs/data/cross_phase.csv --out docs/figures/cross_phase.png

About 1-4 minutes of CPU per row on 2 cores (the cross-attention solves have 4 or 5 tokens).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

import attnphase as ap
from attnphase.spec.problem import parse_range

MODELS: dict[str, dict[str, Any]] = {
    "self": {},
    "cross": {"variant": "cross"},
    "cross-shared": {"variant": "cross", "cross_positions": ((1.0, -1.0), (-1.0, 1.0))},
    "cross-L3": {"variant": "cross", "L_keys": 3},
}
FIELDS = ("model", "omega", "alpha_c", "alpha_c_err", "alpha_l", "spinodal_semantic", "spinodal_positional",
          "linear_test_error", "seconds", "message")


GRID_FIELDS = ("model", "omega", "alpha", "semantic_train", "positional_train", "semantic_test", "positional_test")


def write_grid(path: Path, name: str, om: float, grid: Any) -> None:
    """The followed branches on the bracketing grid (training and test errors) into ``path``."""
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=GRID_FIELDS)
        if new:
            w.writeheader()
        for i, a in enumerate(grid["alpha"]):
            w.writerow({"model": name, "omega": om, "alpha": a,
                        **{k: grid[k][i] for k in GRID_FIELDS[3:]}})


def run(models: list[str], omegas: list[float], path: Path) -> None:
    done = set()
    if path.exists():
        with path.open() as f:
            done = {(r["model"], float(r["omega"])) for r in csv.DictReader(f)}
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for name in models:
            for om in omegas:
                if (name, round(om, 10)) in {(m, round(o, 10)) for m, o in done}:
                    continue
                t0 = time.process_time()
                tr = ap.transition(omega=om, settings="fast", **MODELS[name])
                row = {"model": name, "omega": om, "alpha_c": tr.alpha_c, "alpha_c_err": tr.errors.get("alpha_c"),
                       "alpha_l": tr.alpha_l, "spinodal_semantic": tr.spinodals.get("semantic"),
                       "spinodal_positional": tr.spinodals.get("positional"),
                       "linear_test_error": tr.linear_test_error, "seconds": round(time.process_time() - t0, 1),
                       "message": tr.message}
                w.writerow(row)
                f.flush()
                write_grid(path.with_name(path.stem + "_grid.csv"), name, om, tr.grid)
                print(row, flush=True)


def bound(grid_rows: list[dict[str, str]]) -> tuple[float, str] | None:
    """Where ``alpha_c`` was not located: ``(alpha, "below")`` when the semantic branch has the lower
    training error at every grid point where both branches exist (``alpha`` the lowest of them),
    ``(alpha, "above")`` when the positional branch has (``alpha`` the highest); else ``None``."""
    both = [(float(r["alpha"]), float(r["semantic_train"]) - float(r["positional_train"]))
            for r in grid_rows if r["semantic_train"] and r["positional_train"]]
    if not both:
        return None
    if all(d < 0 for _, d in both):
        return min(a for a, _ in both), "below"
    if all(d > 0 for _, d in both):
        return max(a for a, _ in both), "above"
    return None


def plot(path: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with path.open() as f:
        rows = list(csv.DictReader(f))
    grid_path = path.with_name(path.stem + "_grid.csv")
    grid = list(csv.DictReader(grid_path.open())) if grid_path.exists() else []
    fig, ax = plt.subplots(figsize=(6, 4.2))
    styles = {"self": ("k", "o"), "cross": ("C0", "s"), "cross-shared": ("C1", "^"), "cross-L3": ("C2", "D")}
    for name, (color, marker) in styles.items():
        rs = sorted((r for r in rows if r["model"] == name), key=lambda r: float(r["omega"]))
        if not rs:
            continue
        om = np.array([float(r["omega"]) for r in rs])
        ac = np.array([float(r["alpha_c"]) if r["alpha_c"] else np.nan for r in rs])
        ax.plot(om, ac, color=color, marker=marker, label=f"{name}: alpha_c")
        for r in rs:  # (not located: an arrow from the grid point that bounds it)
            if r["alpha_c"]:
                continue
            b = bound([g for g in grid if g["model"] == name and math.isclose(float(g["omega"]), float(r["omega"]))])
            if b is not None:
                a, side = b
                ax.plot(float(r["omega"]), a, color=color, marker="v" if side == "below" else "^", ls="none",
                        mfc="none", ms=9)
        sp = np.array([float(r["spinodal_semantic"]) if r["spinodal_semantic"] else np.nan for r in rs])
        ax.plot(om, sp, color=color, ls=":", lw=1)
    ax.plot([], [], "kv", mfc="none", ls="none", label="alpha_c below (semantic lower wherever both exist)")
    ax.plot([], [], "k^", mfc="none", ls="none", label="alpha_c above (positional lower on the grid)")
    ax.plot([], [], "k:", lw=1, label="semantic spinodal")
    ax.set_xlabel("omega")
    ax.set_ylabel("alpha")
    ax.set_title("positional/semantic transition: self- and cross-attention")
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--omegas", default="0.1:0.4:4")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--csv", default="docs/data/cross_phase.csv")
    p.add_argument("--out", default="docs/figures/cross_phase.png")
    p.add_argument("--plot-only", action="store_true")
    a = p.parse_args()
    if not a.plot_only:
        models = [m.strip() for m in a.models.split(",") if m.strip()]
        for m in models:
            if m not in MODELS:
                raise SystemExit(f"cross_phase: unknown model {m!r}; choose from {', '.join(MODELS)}")
        run(models, [float(x) for x in parse_range(a.omegas)], Path(a.csv))
    plot(Path(a.csv), Path(a.out))


if __name__ == "__main__":
    main()
