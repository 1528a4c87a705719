"""The other attention maps and two heads: ``alpha_c(omega)`` per map, theory against gradient
descent, and the basins of two heads (docs/heads.md).

Stages (each writes a CSV; a second call skips the points already in it; ``plot`` computes
nothing and draws the figures from the CSVs):

``transition``
    ``attnphase.transition(omega=W, activation=M, teacher_activation=M, settings="fast")`` for every
    map ``M`` of ``--maps`` and ``W`` of ``--omegas`` (on the bracketing grid ``--grid``, searched as
    given; default: the solver's grid, widened as far as the search needs): ``alpha_c``,
    ``alpha_l``, the spinodals, how the global minimum changes, and the solver's message (with its
    reason where there is no ``alpha_c``).
``population``
    A positional state's test error against ``m``: at ``theta = 0`` and each ``m`` of ``--ms``, the
    test error (docs/model.md (4.2)) at the ``q`` that minimises it, by Monte Carlo over the fields of
    (3.1) (``--mc-samples``, the same draws for every ``m`` and ``q``), for every map and ``omega``.
``gd``
    Theory against gradient descent at ``--d`` for the maps of ``--maps`` (teacher of the same map)
    at ``--alphas`` and two softmax heads at ``--head-alphas``: the theory's branches
    (``attnphase.solve(branch="all")``, ``fast``; two heads read from ``--heads-theory``, the
    CSV of ``studies/heads.py``) and GD (heavy ball 0.9, float64, until ``||grad R|| / sqrt(d) <
    --tol`` or ``--max-steps``) from the semantic and positional starts (two heads: also the
    specialised start), ``--seeds`` each.
``one-start``
    The one-start selections of docs/model.md (3.7) for the maps of ``--maps`` at ``--alphas``: the
    semantic-start point of the semantic branch and the positional-start point of the positional
    one (the default preset: one order-11 rule), into ``--theory-csv``; ``table`` with that CSV
    compares gradient descent from each start with them.
``basins``
    Two softmax heads from random starts (``attnphase.sim.basins.train_basins``: ``Q0 = 0.1 N(0,
    I)``, heavy ball 0.9, float64) at every ``(alpha, omega)`` of ``--alphas x --omegas``; the
    state each run reaches, counted only where it met the tolerance.
``dscan``
    GD against ``d`` at the points ``MODEL:ALPHA:START`` of ``--points`` (the settings of ``gd``):
    whether a difference to the theory shrinks as ``d`` grows.
``table``
    Prints the markdown table of docs/heads.md: per model, ``alpha``, start and state reached, GD
    (converged runs only) against the theory's branch of that state, and the test error at each
    run's own overlaps (the Monte Carlo of ``population``, one head).
``basins-table``
    Prints the markdown table of the basins (states of the converged runs per ``alpha`` and
    ``omega``).
``plot``
    ``--alpha-c-figure``: left, ``alpha_c`` against ``omega`` per map (the rows of
    ``--alpha-c-csv``, the softmax's included); right, the curves of ``population``.
    ``--basins-figure``: the fraction of the converged runs in each state against ``alpha``, one
    panel per ``omega``.

    python studies/maps.py transition --maps sigmoid --omegas 0.3,0.1,0.5,0.2,0.4 --grid 0.3,0.6,0.9,1.2,1.5 \\
        --csv docs/data/maps_alpha_c.csv
    python studies/maps.py transition --maps sigmoid --omegas 0.7 --csv docs/data/maps_alpha_c.csv
    python studies/maps.py transition --maps softmax --omegas 0.1,0.2,0.3,0.4,0.5,0.7 \\
        --csv docs/data/maps_alpha_c.csv
    python studies/maps.py population --maps softmax,sigmoid,relu,linear --omegas 0.3,0.9 \\
        --mc-samples 50000 --csv docs/data/maps_population.csv
    python studies/maps.py gd --maps linear,relu,sigmoid --alphas 1.5,3 --head-alphas 1,2 --d 1000 \\
        --seeds 2 --threads 1 --csv docs/data/maps_gd.csv --theory-csv docs/data/maps_theory.csv
    python studies/maps.py table --csv docs/data/maps_gd.csv --theory-csv docs/data/maps_theory.csv \\
        --mc-samples 200000
    python studies/maps.py one-start --maps linear,relu,sigmoid --alphas 1.5,3 \\
        --theory-csv docs/data/maps_one_start.csv
    python studies/maps.py table --csv docs/data/maps_gd.csv --theory-csv docs/data/maps_one_start.csv \\
        --mc-samples 200000
    python studies/maps.py basins --alphas 0.25,0.5,1,1.5,2,3 --omegas 0.1,0.3,0.5 --d 200 --seeds 8 \\
        --tol 1e-6 --max-steps 60000 --csv docs/data/heads_basins.csv
    python studies/maps.py basins-table --basins-csv docs/data/heads_basins.csv
    python studies/maps.py plot --alpha-c-csv docs/data/maps_alpha_c.csv \\
        --population-csv docs/data/maps_population.csv --alpha-c-figure docs/figures/maps_alpha_c.png \\
        --basins-csv docs/data/heads_basins.csv --basins-figure docs/figures/heads_basins.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from _write_csv import read_rows, write_rows

import attnphase as ap

MAPS = ("softmax", "sigmoid", "relu", "linear")
MAP_COLORS = {"softmax": "C0", "sigmoid": "C1", "relu": "C2", "linear": "C3"}
STATE_COLORS = {"semantic": "C0", "positional": "C3", "specialised": "C2", "mixed": "C4", "trivial": "0.5"}

ALPHA_C_FIELDS = ("map", "omega", "alpha_c", "alpha_c_err", "alpha_l", "spinodal_semantic", "spinodal_positional",
                  "kind", "alpha_lo", "alpha_hi", "seconds", "message")
POPULATION_FIELDS = ("map", "omega", "m", "q", "risk", "samples", "seed")
THEORY_FIELDS = ("model", "alpha", "omega", "branch", "exists", "global_minimum", "train_loss", "test_error",
                 "theta_1", "theta_2", "m_1", "m_2", "error_estimate", "reason")
GD_FIELDS = ("model", "alpha", "omega", "d", "seed", "start", "converged", "steps", "state", "train_loss",
             "test_error", "theta_1", "theta_2", "m_1", "m_2", "q_11", "q_22")
BASIN_FIELDS = ("alpha", "omega", "d", "seed", "converged", "steps", "state", "m", "theta", "q",
                "train_loss", "test_error", "seconds")


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def map_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The model of one map with a teacher of the same map (``heads2``: two softmax heads)."""
    base = {"sigma": args.sigma, "lam": args.lam}
    if name == "heads2":
        return {**base, "heads": 2}
    return {**base, "activation": name, "teacher_activation": name}


# --- transition ---------------------------------------------------------------------------------

def stage_transition(args: argparse.Namespace) -> None:
    rows = read_rows(args.csv)
    done = {(r["map"], float(r["omega"])) for r in rows}
    for name in args.maps.split(","):
        for w in floats(args.omegas):
            if (name, w) in done:
                continue
            t0 = time.perf_counter()
            grid = floats(args.grid) if args.grid else None
            tr = ap.transition(alphas=grid, omega=w, settings="fast", progress=False, **map_model(name, args))
            lo, hi = tr.alpha_range or ("", "")
            rows.append({"map": name, "omega": w, "alpha_c": tr.alpha_c, "alpha_c_err": tr.errors.get("alpha_c"),
                         "alpha_l": tr.alpha_l, "spinodal_semantic": tr.spinodals.get("semantic"),
                         "spinodal_positional": tr.spinodals.get("positional"), "kind": tr.kind,
                         "alpha_lo": lo, "alpha_hi": hi,
                         "seconds": round(time.perf_counter() - t0, 1), "message": tr.message})
            write_rows(args.csv, rows, ALPHA_C_FIELDS)
            print(f"{name} omega = {w:g}: {tr.message} ({time.perf_counter() - t0:.0f} s)", flush=True)


# --- population risk of a positional state -------------------------------------------------------

def population_risk(name: str, omega: float, m: float, q: float, xi: np.ndarray, eta: np.ndarray,
                    sigma: float, theta: float = 0.0) -> float:
    """``E ell`` of a one-head state with overlaps ``theta``, ``m`` and ``q`` (user units, ``rho = 1``)
    over fresh samples: the fields of docs/model.md (3.1) at ``L = 2`` (``h_l = +-m + sigma sqrt(q)
    xi_l``, the teacher's ``h*_l = sigma (theta / sqrt(q) xi_l + sqrt(1 - theta^2 / q) eta_l)``), the
    loss of (11.3) with the map ``name`` for student and teacher: the test error (4.2) of such a
    state (Monte Carlo on the given draws)."""
    from attnphase.theory.channels import apply_map

    A = np.array([[0.6, 0.4], [0.4, 0.6]])
    h = np.array([m, -m]) + sigma * np.sqrt(q) * xi
    S = apply_map(name, h[:, :, None] * h[:, None, :], None, 2)
    c = theta / np.sqrt(q) if q > 0 else 0.0
    hs = sigma * (c * xi + np.sqrt(max(1.0 - c * c, 0.0)) * eta)
    T = (1.0 - omega) * apply_map(name, hs[:, :, None] * hs[:, None, :], None, 2) + omega * A
    return float(0.5 * sigma**2 * ((S - T) ** 2).sum(axis=(1, 2)).mean())


def best_q(f: Any, lo: float, hi: float, steps: int = 14) -> tuple[float, float]:
    """``(min f, argmin)`` over ``[lo, hi]``: a grid of 9, then golden sections around its best."""
    grid = np.linspace(lo, hi, 9)
    vals = [f(x) for x in grid]
    k = int(np.argmin(vals))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    g = (np.sqrt(5.0) - 1.0) / 2.0
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return min((fc, c), (fd, d), (vals[k], grid[k]))


def stage_population(args: argparse.Namespace) -> None:
    rows = read_rows(args.csv)
    done = {(r["map"], float(r["omega"])) for r in rows}
    rng = np.random.default_rng(args.mc_seed)
    xi, eta = rng.standard_normal((args.mc_samples, 2)), rng.standard_normal((args.mc_samples, 2))
    ms = floats(args.ms)
    for name in args.maps.split(","):
        for w in floats(args.omegas):
            if (name, w) in done:
                continue
            t0 = time.perf_counter()
            for m in ms:
                def f(q: float, m: float = m, name: str = name, w: float = w) -> float:
                    return population_risk(name, w, m, q, xi, eta, args.sigma)

                risk, q = best_q(f, m * m, max(4.0, 2.0 * m * m))
                rows.append({"map": name, "omega": w, "m": m, "q": q, "risk": risk,
                             "samples": args.mc_samples, "seed": args.mc_seed})
            write_rows(args.csv, rows, POPULATION_FIELDS)
            cur = [float(r["risk"]) for r in rows if r["map"] == name and float(r["omega"]) == w]
            print(f"{name} omega = {w:g}: risk at m = 0 {cur[0]:.5g}, lowest {min(cur):.5g} at m = "
                  f"{ms[int(np.argmin(cur))]:g} ({time.perf_counter() - t0:.0f} s)", flush=True)


# --- theory against GD ----------------------------------------------------------------------------

def theory_rows(model: str, alpha: float, args: argparse.Namespace) -> list[dict]:
    """Every branch at ``alpha`` (``fast``); two heads from ``--heads-theory``."""
    if model == "heads2":
        return [{"model": model, "omega": args.omega, **r} for r in read_rows(args.heads_theory)
                if r["heads"] == "2" and float(r["alpha"]) == alpha]
    res = ap.solve(alpha, branch="all", settings="fast", progress=False, omega=args.omega, **map_model(model, args))
    return [branch_row(model, alpha, args, res, name, name == res.global_minimum) for name in res.branches]


def branch_row(model: str, alpha: float, args: argparse.Namespace, res: Any, name: str, lowest: bool) -> dict:
    """The theory CSV's row of branch ``name`` of the solve ``res``: its errors and overlaps, or
    its absence with the reason; ``lowest``: it is the global minimum."""
    row = {"model": model, "alpha": alpha, "omega": args.omega, "branch": name}
    b = res.branches.get(name)
    if b is None:
        return {**row, "exists": 0, "reason": res.absent.get(name, "")}
    return {**row, "exists": 1, "global_minimum": int(lowest), "train_loss": b.train_loss,
            "test_error": b.test_error, "theta_1": b.theta, "m_1": b.m, "error_estimate": b.overlap_error}


def one_start_rows(model: str, alpha: float, args: argparse.Namespace) -> list[dict]:
    """The one-start selections at ``alpha`` (docs/model.md (3.7)): the semantic-start point of the
    semantic branch and the positional-start point of the positional one (``attnphase solve
    --response semantic-start --branch semantic``, the default preset: one order-11 rule), with
    ``global_minimum`` 0 (a selection is a state of the dynamics, not a minimum of the equations)."""
    rows = []
    for branch in ("semantic", "positional"):
        settings = ap.SolverSettings.preset("default", response=f"{branch}-start")
        res = ap.solve(alpha, branch=branch, settings=settings, progress=False, omega=args.omega,
                       **map_model(model, args))
        rows.append(branch_row(model, alpha, args, res, branch, False))
    return rows


def stage_one_start(args: argparse.Namespace) -> None:
    """The one-start selections (:func:`one_start_rows`) for every map of ``--maps`` at every
    ``alpha`` of ``--alphas``, into ``--theory-csv`` (the columns of the theory of ``gd``): ``table``
    with this CSV compares gradient descent with them."""
    rows = read_rows(args.theory_csv)
    for model in (m for m in args.maps.split(",") if m):
        for a in floats(args.alphas):
            if any(r["model"] == model and float(r["alpha"]) == a for r in rows):
                continue
            t0 = time.perf_counter()
            rows += one_start_rows(model, a, args)
            write_rows(args.theory_csv, rows, THEORY_FIELDS)
            print(f"one-start {model} alpha = {a:g}: {time.perf_counter() - t0:.0f} s", flush=True)


def gd_rows(model: str, alpha: float, args: argparse.Namespace, starts: list[str] | None = None) -> list[dict]:
    starts = starts or ["semantic", "positional"] + (["specialised"] if model == "heads2" else [])
    res = ap.simulate(alpha, args.d, init=starts, seeds=args.seeds, progress=False, omega=args.omega,
                      optimizer="gd", momentum=0.9, tol=args.tol, max_steps=args.max_steps, dtype="float64",
                      threads=args.threads, **map_model(model, args))
    rows = []
    for r in res.runs:
        th = np.asarray(r.overlaps["theta"], dtype=float).reshape(-1, 1)[:, 0]
        m = np.atleast_2d(np.asarray(r.overlaps["m"], dtype=float))[0]
        q = np.atleast_2d(np.asarray(r.overlaps["q"], dtype=float))
        rows.append({"model": model, "alpha": alpha, "omega": args.omega, "d": args.d, "seed": r.seed,
                     "start": r.init, "converged": int(r.converged), "steps": r.steps, "state": r.branch,
                     "train_loss": r.train_loss, "test_error": r.test_error, "theta_1": th[0],
                     "theta_2": th[1] if th.size > 1 else "", "m_1": m[0], "m_2": m[1] if m.size > 1 else "",
                     "q_11": q[0, 0], "q_22": q[1, 1] if q.shape[0] > 1 else ""})
    return rows


def stage_gd(args: argparse.Namespace) -> None:
    theory, runs = read_rows(args.theory_csv), read_rows(args.csv)
    points = [(m, a) for m in args.maps.split(",") if m for a in floats(args.alphas)]
    points += [("heads2", a) for a in floats(args.head_alphas)]
    for model, a in points:
        if not any(r["model"] == model and float(r["alpha"]) == a for r in theory):
            t0 = time.perf_counter()
            theory += theory_rows(model, a, args)
            write_rows(args.theory_csv, theory, THEORY_FIELDS)
            print(f"theory {model} alpha = {a:g}: {time.perf_counter() - t0:.0f} s", flush=True)
        if not any(r["model"] == model and float(r["alpha"]) == a for r in runs):
            t0 = time.perf_counter()
            new = gd_rows(model, a, args)
            runs += new
            write_rows(args.csv, runs, GD_FIELDS)
            print(f"GD {model} alpha = {a:g}: {sum(r['converged'] for r in new)}/{len(new)} converged, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)


def stage_dscan(args: argparse.Namespace) -> None:
    """GD against ``d`` (``--ds``) at the points ``MODEL:ALPHA:START`` of ``--points``, ``--seeds``
    each, into ``--csv`` (the columns of ``gd``): whether a difference to the theory shrinks with ``d``."""
    rows = read_rows(args.csv)
    for point in args.points.split(","):
        model, alpha, start = point.split(":")
        for d in (int(x) for x in args.ds.split(",")):
            if any(r["model"] == model and float(r["alpha"]) == float(alpha) and r["start"] == start
                   and int(r["d"]) == d for r in rows):
                continue
            t0 = time.perf_counter()
            rows += gd_rows(model, float(alpha), argparse.Namespace(**{**vars(args), "d": d}), [start])
            write_rows(args.csv, rows, GD_FIELDS)
            print(f"{point} d = {d}: {time.perf_counter() - t0:.0f} s", flush=True)


# --- basins of two heads ------------------------------------------------------------------------

def stage_basins(args: argparse.Namespace) -> None:
    from attnphase.api import model_spec
    from attnphase.sim.basins import basin_settings, train_basins

    rows = read_rows(args.csv)
    st = basin_settings("momentum", max_steps=args.max_steps, tol=args.tol, dtype="float64")
    omegas = floats(args.omegas)
    spec = model_spec(omega=omegas[0], heads=2, sigma=args.sigma, lam=args.lam)
    for a in floats(args.alphas):
        if any(float(r["alpha"]) == a and float(r["d"]) == args.d for r in rows):
            continue
        t0 = time.perf_counter()
        points = train_basins(spec, args.d, a, omegas=omegas, seeds=range(args.seeds), settings=st)
        for p in points:
            for r in p.runs:
                rows.append({"alpha": a, "omega": p.omega, "d": args.d, "seed": r.seed,
                             "converged": int(r.stop == "tol"), "steps": r.steps, "state": r.state, "m": r.m,
                             "theta": r.theta, "q": r.q, "train_loss": r.train_loss, "test_error": r.test_error,
                             "seconds": round(p.seconds, 1)})
        write_rows(args.csv, rows, BASIN_FIELDS)
        new = [r for r in rows if float(r["alpha"]) == a and float(r["d"]) == args.d]
        print(f"basins alpha = {a:g}: {sum(int(r['converged']) for r in new)}/{len(new)} converged, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)


# --- the comparison table ------------------------------------------------------------------------

def theory_state(theory: list[dict], model: str, alpha: float, state: str) -> dict | None:
    for r in theory:
        if r["model"] == model and float(r["alpha"]) == alpha and r["branch"] == state and r["exists"] == "1":
            return r
    return None


def head_overlap(r: dict, key: str) -> float | None:
    """``|key_1|`` of one head; with two heads the larger of the heads' (the semantic head's
    ``theta`` and the positional head's ``m``, whichever head holds it)."""
    v = [abs(float(r[f"{key}_{k}"])) for k in (1, 2) if r.get(f"{key}_{k}", "") not in ("", None)]
    if not v:
        return None
    return max(v) if r.get("model") == "heads2" else v[0]


def span(values: list[float]) -> str:
    """``a-b`` over the values (one value: itself; none: ``-``)."""
    if not values:
        return "-"
    return f"{values[0]:.3g}" if len(values) == 1 else f"{min(values):.3g}-{max(values):.3g}"


def stage_table(args: argparse.Namespace) -> None:
    """Print the markdown table of GD (converged runs only) against the theory's branch of the
    state each run reached: per model, ``alpha``, start and state, the GD range and the theory's
    value of ``theta``, ``m``, the training and the test error, the largest relative deviation of
    the errors, and (one head) the test error at the runs' own overlaps (:func:`population_risk`).
    Models without a row in ``--theory-csv`` are left out."""
    theory, runs = read_rows(args.theory_csv), read_rows(args.csv)
    print("| model | `alpha` | start: state reached | converged | `theta` GD / theory | `m` GD / theory "
          "| training error GD / theory | test error GD / theory | largest error deviation "
          "| test error at GD's overlaps (docs/model.md (4.2)) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(args.mc_seed)
    xi, eta = rng.standard_normal((args.mc_samples, 2)), rng.standard_normal((args.mc_samples, 2))
    several_d = len({r["d"] for r in runs}) > 1  # (dscan: one row per d)
    models = {r["model"] for r in theory}  # (runs of a model the theory CSV lacks are left out)
    keys = sorted({(r["model"], float(r["alpha"]), r["start"], r["state"], int(r["d"])) for r in runs
                   if r["model"] in models})
    for model, a, start, state, d in keys:
        sel = [r for r in runs if r["model"] == model and float(r["alpha"]) == a and r["start"] == start
               and r["state"] == state and int(r["d"]) == d]
        conv = [r for r in sel if r["converged"] == "1"]
        t = theory_state(theory, model, a, state)
        if t is not None:
            t = {**t, "model": model}
        cells = []
        for key in ("theta", "m"):
            x = head_overlap(t, key) if t else None
            cells.append(f"{span([v for v in (head_overlap(r, key) for r in conv) if v is not None])} / "
                         + ("-" if x is None else f"{x:.3g}"))
        for key in ("train_loss", "test_error"):
            cells.append(f"{span([float(r[key]) for r in conv])} / " + (f"{float(t[key]):.3g}" if t else "-"))
        dev = "-"
        if t and conv:
            devs = [abs(float(r[k]) / float(t[k]) - 1.0) for r in conv for k in ("train_loss", "test_error")]
            dev = f"{100 * max(devs):.1f} %"
        at = "-"
        if model != "heads2" and conv:
            at = span([population_risk(model, float(r["omega"]), float(r["m_1"]), float(r["q_11"]), xi, eta,
                                       args.sigma, float(r["theta_1"])) for r in conv])
        label = f"{model}, d = {d}" if several_d else model
        print(f"| {label} | {a:g} | {start}: {state} | {len(conv)}/{len(sel)} | " + " | ".join(cells)
              + f" | {dev} | {at} |")


def stage_basins_table(args: argparse.Namespace) -> None:
    """Print the markdown table of the basins: per ``alpha`` and ``omega`` the states of the converged
    runs, converged / all, and the most steps a run took."""
    rows = read_rows(args.basins_csv)
    omegas = sorted({value(r["omega"]) for r in rows})
    print("| `alpha` | " + " | ".join(f"`omega = {w:g}`" for w in omegas) + " |")
    print("|---" * (len(omegas) + 1) + "|")
    for a in sorted({value(r["alpha"]) for r in rows}):
        cells = []
        for w in omegas:
            sub = [r for r in rows if value(r["alpha"]) == a and value(r["omega"]) == w]
            conv = [r for r in sub if r["converged"] == "1"]
            counts = ", ".join(f"{st} {sum(r['state'] == st for r in conv)}" for st in STATE_COLORS
                               if any(r["state"] == st for r in conv))
            cells.append(f"{counts} ({len(conv)}/{len(sub)} converged)")
        print(f"| {a:g} | " + " | ".join(cells) + " |")
    steps = [int(r["steps"]) for r in rows if r["converged"] == "1"]
    print(f"\n{len(steps)}/{len(rows)} converged, at most {max(steps, default=0)} steps")


# --- figures ------------------------------------------------------------------------------------

def value(text: str) -> float:
    return float(text) if text not in ("", "None", "nan") else float("nan")


def plot_alpha_c(maps_csv: Path, population_csv: Path, out: Path) -> None:
    """Left: ``alpha_c(omega)`` per map (a cross on the axis: no ``alpha_c`` at that ``omega``).
    Right: the test error of a state with ``theta = 0`` against ``m`` (each at its best ``q``),
    relative to ``m = 0``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    maps = read_rows(maps_csv)
    curves = {name: sorted((value(r["omega"]), value(r["alpha_c"])) for r in maps if r["map"] == name)
              for name in MAPS}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    for name, pts in curves.items():
        if not pts:
            continue
        w = np.array([p[0] for p in pts])
        a = np.array([p[1] for p in pts])
        ok = np.isfinite(a)
        ax.plot(w[ok], a[ok], "o-", color=MAP_COLORS[name], label=f"{name}")
        if (~ok).any():
            ax.plot(w[~ok], np.zeros((~ok).sum()), "x", color=MAP_COLORS[name], ms=8, clip_on=False,
                    label=f"{name}: no alpha_c")
    ax.set_xlabel(r"$\omega$")
    ax.set_ylabel(r"$\alpha_c$")
    ax.set_ylim(bottom=0)
    ax.set_title(r"$\alpha_c(\omega)$, teacher of the same map, $\sigma = 0.5$, $\lambda = 0.01$"
                 "\n" "ReLU, linear: no positional branch in the theory ($\\omega = 0.3$), no $\\alpha_c$", fontsize=9)
    ax.legend(fontsize=7)
    pop = read_rows(population_csv)
    inset = bx.inset_axes((0.06, 0.58, 0.3, 0.36))
    for name in MAPS:
        for w, style in ((0.3, "-"), (0.9, "--")):
            pts = sorted((value(r["m"]), value(r["risk"])) for r in pop
                         if r["map"] == name and value(r["omega"]) == w)
            if not pts:
                continue
            m = np.array([p[0] for p in pts])
            risk = np.array([p[1] for p in pts])
            bx.plot(m, risk / risk[0] - 1.0, style, color=MAP_COLORS[name], label=f"{name}, omega = {w:g}")
            small = m <= 0.2 + 1e-9
            inset.plot(m[small], 100 * (risk[small] / risk[0] - 1.0), style, color=MAP_COLORS[name])
    bx.axhline(0.0, color="k", lw=0.5)
    inset.axhline(0.0, color="k", lw=0.5)
    inset.set_ylim(-3, 3)
    inset.set_title("small m (per cent)", fontsize=7)
    inset.tick_params(labelsize=6)
    bx.set_xlabel("positional overlap $m$ (self overlap $q$ at its best)")
    bx.set_ylabel(r"test error at $\theta = 0$, relative to $m = 0$")
    bx.set_ylim(-0.6, 0.6)
    bx.set_title("a positional state's test error (docs/model.md (4.2)) against m", fontsize=9)
    bx.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)


def plot_basins(basins_csv: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(basins_csv)
    omegas = sorted({value(r["omega"]) for r in rows})
    fig, axes = plt.subplots(1, len(omegas), figsize=(4.2 * len(omegas), 3.8), squeeze=False)
    for ax, w in zip(axes[0], omegas, strict=True):
        sub = [r for r in rows if value(r["omega"]) == w]
        alphas = sorted({value(r["alpha"]) for r in sub})
        conv = {a: [r for r in sub if value(r["alpha"]) == a and r["converged"] == "1"] for a in alphas}
        for state, color in STATE_COLORS.items():
            frac = [sum(r["state"] == state for r in conv[a]) / max(len(conv[a]), 1) for a in alphas]
            if any(frac):
                ax.plot(alphas, frac, "o-", color=color, label=state)
        for a in alphas:
            total = sum(value(r["alpha"]) == a for r in sub)
            ax.annotate(f"{len(conv[a])}/{total}", (a, 1.05), ha="center", fontsize=7)
        ax.set_xlabel(r"$\alpha$")
        ax.set_ylabel("fraction of converged runs")
        ax.set_ylim(-0.02, 1.4)
        d = sub[0]["d"] if sub else "?"
        ax.set_title(f"two softmax heads from random starts, omega = {w:g}, d = {d}\n"
                     "(converged / all runs above each point)", fontsize=8)
        ax.legend(fontsize=7, loc="upper center", ncol=4, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)


def stage_plot(args: argparse.Namespace) -> None:
    if args.alpha_c_figure:
        plot_alpha_c(args.alpha_c_csv, args.population_csv, args.alpha_c_figure)
        print(f"wrote {args.alpha_c_figure}")
    if args.basins_figure:
        plot_basins(args.basins_csv, args.basins_figure)
        print(f"wrote {args.basins_figure}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=("transition", "population", "gd", "one-start", "dscan", "table", "basins",
                                      "basins-table", "plot"))
    p.add_argument("--maps", default="sigmoid,relu,linear")
    p.add_argument("--omegas", default="0.1,0.3,0.5,0.7,0.9")
    p.add_argument("--omega", type=float, default=0.3, help="gd: the omega of the comparison")
    p.add_argument("--alphas", default="1.5,3")
    p.add_argument("--head-alphas", default="1,2")
    p.add_argument("--grid", default="", help="transition: the bracketing grid of alpha (default: the solver's, widened)")
    p.add_argument("--ms", default="0,0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.6,0.7,0.8")
    p.add_argument("--mc-samples", type=int, default=100000)
    p.add_argument("--mc-seed", type=int, default=0)
    p.add_argument("--sigma", type=float, default=0.5)
    p.add_argument("--lam", type=float, default=0.01)
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--ds", default="500,1000,2000,4000", help="dscan: the dimensions")
    p.add_argument("--points", default="relu:3:semantic", help="dscan: MODEL:ALPHA:START,...")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--max-steps", type=int, default=40000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--csv", type=Path, default=Path("maps.csv"))
    p.add_argument("--theory-csv", type=Path, default=Path("maps_theory.csv"))
    p.add_argument("--heads-theory", type=Path, default=Path("docs/data/heads_theory.csv"))
    p.add_argument("--alpha-c-csv", type=Path, default=Path("docs/data/maps_alpha_c.csv"))
    p.add_argument("--population-csv", type=Path, default=Path("docs/data/maps_population.csv"))
    p.add_argument("--basins-csv", type=Path, default=Path("docs/data/heads_basins.csv"))
    p.add_argument("--alpha-c-figure", type=Path, default=None)
    p.add_argument("--basins-figure", type=Path, default=None)
    args = p.parse_args()
    stages = {"transition": stage_transition, "population": stage_population,
              "gd": stage_gd, "one-start": stage_one_start, "dscan": stage_dscan, "table": stage_table, "basins": stage_basins,
              "basins-table": stage_basins_table, "plot": stage_plot}
    stages[args.stage](args)


if __name__ == "__main__":
    main()
