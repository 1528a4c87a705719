"""alpha_c and alpha_l against the separation rho_mu of Gaussian-mixture tokens (docs/mixture.md).

The reference mixture (``K = 2``, ``mu_2 = -mu_1``, ``|mu|^2/d = rho_mu``) at ``omega = 0.3``,
for teacher alignments ``kappa = c sqrt(rho_mu)``: ``c`` is the cosine between the teacher and
the means (``|kappa| <= sqrt(rho_mu)`` is what a teacher can have, docs/model.md (9.1)). For each
``(c, rho_mu)``: the theory's ``alpha_c`` and ``alpha_l`` (``attnphase.transition``), and with
``--sim-d`` the simulation's ``alpha_c`` (``attnphase.sim.sim_transition``: the zero of the
training-error difference of the two informed starts) and ``alpha_l`` (the crossing of the
global minimum's test error, the start with the lower training error, with the linear
baseline's), on an ``alpha`` grid.

Writes ``data/mixture_rho.csv`` (theory) or ``data/mixture_rho_sim.csv`` (``--sim-d``) and
``figures/mixture_rho.png`` into ``--out``; a run replaces the rows of the ``(c, rho_mu)`` it
computes and keeps the others:

    python studies/mixture_rho.py --out docs                                          # theory only
    python studies/mixture_rho.py --out docs --sim-d 300 --sim-alpha 0.1:1.9:7 --seeds 3 --skip-theory   # simulation points
    python studies/mixture_rho.py --out docs --plot-only                                # the figure with both
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

import attnphase as ap
from attnphase.sim import TrainSettings
from attnphase.sim.transition import DEFAULT_SETTINGS, find_crossing, sim_transition
from attnphase.spec.problem import parse_range


def spec_for(rho: float, c: float, omega: float) -> ap.ModelSpec:
    kw = {"mixture": 2, "mixture_sep": rho, "mixture_align": c * math.sqrt(rho)}
    return ap.ModelSpec(omega=omega, **kw)


def sim_point(spec: ap.ModelSpec, alphas: tuple[float, ...], d: int, seeds: int) -> tuple[float | None, float | None]:
    settings = TrainSettings(**{**DEFAULT_SETTINGS, "dtype": "float64"})  # (the data of docs/mixture.md)
    st = sim_transition(spec, alphas, d, tuple(range(seeds)), settings=settings)
    gmin = [p.test_semantic_mean if p.delta_mean < 0 else p.test_positional_mean for p in st.points]
    lin = [p.linear_test_mean for p in st.points]
    a_l = find_crossing(list(alphas), [g - b for g, b in zip(gmin, lin, strict=True)], None, None).alpha_c
    return st.alpha_c, a_l


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rho", default="0,0.5,1,1.5,2", help="rho_mu values (list or start:stop:num)")
    p.add_argument("--cos", default="0.25,0.5", help="teacher-mean cosines c (kappa = c sqrt(rho_mu))")
    p.add_argument("--omega", type=float, default=0.3)
    p.add_argument("--preset", default="fast", help="solver preset of the theory")
    p.add_argument("--alphas", default="0.05:2.4:14", help="bracketing grid of the theory")
    p.add_argument("--sim-d", type=int, default=0, help="simulation dimension (0: theory only)")
    p.add_argument("--sim-alpha", default="0.3:2.1:7", help="alpha grid of the simulation")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--theory-csv", help="take the theory's numbers from this CSV of an earlier run (same grid)")
    p.add_argument("--skip-theory", action="store_true", help="simulation only (theory columns left empty)")
    p.add_argument("--plot-only", action="store_true",
                   help="draw the figure from OUT/data/mixture_rho.csv and mixture_rho_sim.csv, computing nothing")
    p.add_argument("--out", default=".")
    args = p.parse_args()
    out = Path(args.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        with open(out / "data" / "mixture_rho.csv") as f:
            rows = [{**r, "cos": float(r["cos"]), "rho_mu": float(r["rho_mu"])} for r in csv.DictReader(f)]
        merge_sims(rows, out / "data" / "mixture_rho_sim.csv")
        plot(rows, out / "figures" / "mixture_rho.png")
        return
    rows = []
    known = {}
    if args.theory_csv:
        with open(args.theory_csv) as f:
            known = {(float(r["cos"]), float(r["rho_mu"])): r for r in csv.DictReader(f)}
    for c in parse_range(args.cos, "--cos"):
        for rho in parse_range(args.rho, "--rho"):
            spec = spec_for(rho, c, args.omega)
            t0 = time.perf_counter()
            if args.skip_theory:
                a_c, a_l, secs = float("nan"), float("nan"), 0.0
            elif (c, rho) in known:
                old = known[(c, rho)]
                a_c, a_l, secs = num(old["alpha_c"]), num(old["alpha_l"]), old["seconds_theory"]
            else:
                tr = ap.transition(alphas=parse_range(args.alphas, "--alphas"), spec=spec, settings=args.preset)
                a_c, a_l, secs = tr.alpha_c, tr.alpha_l, round(time.perf_counter() - t0, 1)
            row = {"cos": c, "rho_mu": rho, "kappa": c * math.sqrt(rho), "alpha_c": a_c,
                   "alpha_l": a_l, "sim_d": args.sim_d or "", "sim_alpha_c": "", "sim_alpha_l": "",
                   "seconds_theory": secs}
            if args.sim_d:
                a_c, a_l = sim_point(spec, parse_range(args.sim_alpha, "--sim-alpha"), args.sim_d, args.seeds)
                row["sim_alpha_c"], row["sim_alpha_l"] = a_c if a_c is not None else "", a_l if a_l is not None else ""
            print(row, flush=True)
            rows.append(row)
    name = "mixture_rho_sim.csv" if args.sim_d else "mixture_rho.csv"
    write_merged(rows, out / "data" / name)
    if not args.sim_d:
        merge_sims(rows, out / "data" / "mixture_rho_sim.csv")
    plot(rows, out / "figures" / "mixture_rho.png")


def write_merged(rows: list[dict], path: Path) -> None:
    """Write ``rows`` to ``path``, keeping the rows of an earlier run at the ``(cos, rho_mu)`` this
    run did not compute (sorted by ``cos``, then ``rho_mu``)."""
    keep: dict[tuple[float, float], dict] = {}
    if path.exists():
        with open(path) as f:
            keep = {(float(r["cos"]), float(r["rho_mu"])): r for r in csv.DictReader(f)}
    keep.update({(float(r["cos"]), float(r["rho_mu"])): r for r in rows})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep[k] for k in sorted(keep))


def merge_sims(rows: list[dict], sim_csv: Path) -> None:
    """The simulation points of an earlier ``--sim-d`` run, where their ``(cos, rho_mu)`` is in ``rows``."""
    if not sim_csv.exists():
        return
    with open(sim_csv) as f:
        sims = {(float(r["cos"]), float(r["rho_mu"])): r for r in csv.DictReader(f)}
    for r in rows:
        s = sims.get((r["cos"], r["rho_mu"]))
        if s:
            r.update(sim_d=s["sim_d"], sim_alpha_c=s["sim_alpha_c"], sim_alpha_l=s["sim_alpha_l"])


def num(v: object) -> float:
    return float(v) if v not in ("", "None", None) else float("nan")  # type: ignore[arg-type]


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharex=True)
    for k, (key, label) in enumerate((("alpha_c", "alpha_c"), ("alpha_l", "alpha_l"))):
        ax = axes[k]
        for i, c in enumerate(sorted({r["cos"] for r in rows})):
            sel = [r for r in rows if r["cos"] == c]
            x = np.array([r["rho_mu"] for r in sel])
            color = f"C{i}"
            ax.plot(x, [num(r[key]) for r in sel], "-", color=color, label=f"theory, kappa = {c:g} sqrt(rho_mu)")
            ys = [num(r["sim_" + key]) for r in sel]
            if any(np.isfinite(ys)):
                d = next(r["sim_d"] for r in sel if r["sim_d"] not in ("", None))
                ax.plot(x, ys, "o", color=color, mfc="none", label=f"simulation d = {d}")
            lows = [xi for xi, r in zip(x, sel, strict=True) if key == "alpha_c" and not np.isfinite(num(r[key]))]
            shift = 0.03 * (2 * i - 1)  # (the two alignments' triangles side by side)
            if lows:  # (no crossing on the grid: the semantic branch is the global minimum from its start)
                ax.plot(np.add(lows, shift), [0.05] * len(lows), "v", color=color,
                        label="theory: no crossing" if i == 0 else None)
            sim_lows = [xi for xi, r in zip(x, sel, strict=True)
                        if key == "alpha_c" and r.get("sim_d") not in ("", None) and not np.isfinite(num(r["sim_alpha_c"]))]
            if sim_lows:  # (the simulation's training errors do not cross on its grid either)
                ax.plot(np.add(sim_lows, shift), [0.12] * len(sim_lows), "v", color=color, mfc="none",
                        label="simulation: no crossing" if i == 0 else None)
        ax.set_xlabel("rho_mu = |mu|^2 / d")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


if __name__ == "__main__":
    main()
