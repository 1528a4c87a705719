"""Theory versus finite-d simulation for the attention variants (``L = 3``, rank 2, untied key and
query, causal mask; docs/model.md sections 2 and 6): the tables of docs/variants.md.

For each variant the theory solver (``solve_point`` with the quick preset ``FAST``, QMC order 8,
or ``--order`` for another order) gives the semantic and positional branch (and, for ``r = 2``,
the mixed one) at the ``alpha`` of each comparison; the simulator trains from the matching
informed start at several ``d`` (seeds batched); the table compares invariant summaries:

* ``theta`` = ``||theta||_F`` over all student columns (query and key for ``untied``), i.e. ``|theta|``
  for ``r = 1``; ``theta_Q``/``theta_K`` separately for ``untied``;
* ``m`` = ``sqrt(sum_l ||m_l||^2 / L)`` (``|m_1|`` in the reference case ``L = 2``, where
  ``m_2 = -m_1``); invariant under token permutations and column rotations;
* ``q`` = trace of ``Q^T Q / d`` (plus ``K^T K / d`` for ``untied``);
* ``test_error`` (``eps_g``) and ``train_loss`` (``eps_t = R/d``).

Stages (each appends to / rewrites CSV files under ``docs/data``; the commands that made the
tables are listed in docs/variants.md)::

    python studies/variants_validation.py theory [--only NAME ...]          # variants_theory.csv
    python studies/variants_validation.py sim --only NAME --d 300 --seeds 8  # appends variants_sim.csv
    python studies/variants_validation.py table                             # prints the markdown tables

The simulation uses GD lr 0.15 with heavy-ball momentum 0.9, tol 1e-6 on ``||grad R|| / sqrt(d)``,
at most 8000 steps, float64, one thread (the settings of ``tests/test_sim_theory.py``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

#: the CSV files live in docs/data of the repository
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "data")
THEORY_CSV = os.path.join(DATA, "variants_theory.csv")
SIM_CSV = os.path.join(DATA, "variants_sim.csv")
BASE = {"omega": 0.3, "sigma": 0.5, "lam": 0.01}
QUANTITIES = ("theta", "theta_Q", "theta_K", "m", "q", "q_Q", "q_K", "test_error", "train_loss")
#: which summaries are compared on each theory branch (the other overlap should be ~0 there)
COMPARED = {"semantic": ("theta", "q", "test_error", "train_loss"),
            "positional": ("m", "q", "test_error", "train_loss"),
            "mixed": ("theta", "m", "q", "test_error", "train_loss")}


@dataclass(frozen=True)
class Comparison:
    """One theory branch at one alpha against the simulation runs from ``inits`` there.

    ``branch`` ``mixed`` is solved with the solver's ``semantic`` branch from a start in which
    the first student column is semantic and the second positional (rank 2 only).
    """

    branch: str
    alpha: float
    inits: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    """One variant: ModelSpec keywords and its comparisons."""

    name: str
    spec: dict
    comparisons: tuple[Comparison, ...]
    note: str = ""


def _pair(a_sem: float, a_pos: float) -> tuple[Comparison, ...]:
    return (Comparison("semantic", a_sem, ("semantic",)),
            Comparison("positional", a_pos, ("positional",)))


CASES = {
    c.name: c
    for c in (
        Case("reference", {}, _pair(1.5, 1.5), "L = 2, r = 1, tied"),
        Case("L3", {"L": 3}, _pair(1.5, 0.6),
             "L = 3, r = 1, default simplex positions and A (diag 0.6, off-diagonal 0.2)"),
        Case("r2", {"rank": 2},
             _pair(1.5, 1.5) + (Comparison("mixed", 1.5, ("semantic",)),),
             "L = 2, r = 2, r* = 1"),
        Case("untied", {"variant": "untied"},
             _pair(1.5, 1.5) + (Comparison("semantic", 2.5, ("semantic",)),
                                Comparison("positional", 2.5, ())),
             "L = 2, r = 1, separate Q and K"),
        Case("causal", {"variant": "causal"},
             _pair(3.0, 1.5) + (Comparison("semantic", 2.0, ("semantic",)),
                                Comparison("semantic", 1.5, ("semantic",))),
             "L = 2, r = 1, causal student, bidirectional target"),
        Case("causal_target", {"variant": "causal", "causal_target": True}, _pair(3.0, 1.5),
             "L = 2, r = 1, causal student and target"),
    )
}


def model_spec(case: Case):
    from attnphase.spec.problem import ModelSpec

    return ModelSpec(**BASE, **case.spec)


def _theory_row(case: Case, comp: Comparison, order: int) -> dict:
    from attnphase import __version__
    from attnphase.theory import SolverSettings, solve_point
    from attnphase.theory.fixed_point import FAST

    spec = model_spec(case)
    t0 = time.perf_counter()
    pt = solve_point(spec, comp.alpha, comp.branch, settings=SolverSettings(**{**FAST, "order": order}))
    secs = time.perf_counter() - t0
    th = np.asarray(pt.theta_matrix, dtype=float) if pt.theta_matrix else np.array([[pt.theta]])
    mm = np.asarray(pt.m_matrix, dtype=float) if pt.m_matrix else np.array([[pt.m], [-pt.m]])
    qq = np.asarray(pt.q_matrix, dtype=float) if pt.q_matrix else np.array([[pt.q]])
    untied = spec.variant.startswith("untied")
    r = spec.rank
    return {
        "variant": case.name, "alpha": comp.alpha, "branch": comp.branch,
        "solver_branch": comp.branch, "start": "default",
        "exists": pt.exists, "reason": pt.reason,
        "theta": float(np.linalg.norm(th)),
        "theta_Q": float(np.linalg.norm(th[:r])) if untied else math.nan,
        "theta_K": float(np.linalg.norm(th[r:])) if untied else math.nan,
        "m": float(np.linalg.norm(mm) / math.sqrt(spec.L)),
        "q": float(np.trace(qq)),
        "q_Q": float(np.trace(qq[:r, :r])) if untied else math.nan,
        "q_K": float(np.trace(qq[r:, r:])) if untied else math.nan,
        "test_error": pt.test_error, "train_loss": pt.train_loss,
        "order": order, "seconds": round(secs, 1), "version": __version__,
    }


def _sim_rows(case: Case, alpha: float, d: int, seeds: tuple[int, ...], init: str) -> list[dict]:
    import torch

    from attnphase import __version__
    from attnphase.sim import TrainSettings, simulate

    torch.set_num_threads(1)
    spec = model_spec(case)
    gd = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=1e-6, max_steps=8000,
                       dtype="float64", log_every=0)
    res = simulate(spec, alpha=alpha, d=d, seeds=seeds, inits=(init,), settings=gd)
    rows = []
    for run in res.runs:
        s = summaries(run.overlaps, spec.L)
        rows.append({
            "variant": case.name, "alpha": alpha, "d": d, "seed": run.seed,
            "init": run.init, **s, "test_error": run.test_error, "train_loss": run.train_loss,
            "steps": run.steps, "stop": run.stop, "grad_norm": run.grad_norm,
            "landed": classify(s["m"], s["theta"]), "batch_seconds": round(res.batch_seconds, 1),
            "version": __version__,
        })
    return rows


def summaries(ov: dict, L: int) -> dict:
    """Rotation/permutation-invariant summaries of the simulator's overlaps (see module doc)."""
    th = np.asarray(ov["theta"], dtype=float)
    m = np.asarray(ov["m"], dtype=float)
    q = float(np.trace(np.asarray(ov["q"], dtype=float)))
    out = {"theta_Q": math.nan, "theta_K": math.nan, "q_Q": math.nan, "q_K": math.nan}
    if "theta_K" in ov:
        thK = np.asarray(ov["theta_K"], dtype=float)
        qK = float(np.trace(np.asarray(ov["q_K"], dtype=float)))
        out = {"theta_Q": float(np.linalg.norm(th)), "theta_K": float(np.linalg.norm(thK)),
               "q_Q": q, "q_K": qK}
        th = np.vstack([th, thK])
        m = np.hstack([m, np.asarray(ov["m_K"], dtype=float)])
        q += qK
    return {"theta": float(np.linalg.norm(th)), **out,
            "m": float(np.linalg.norm(m) / math.sqrt(L)), "q": q}


def classify(m: float, theta: float, threshold: float = 0.1) -> str:
    """Branch of a run from the invariant overlaps (threshold 0.1 on both, as
    ``attnphase.sim.classify``)."""
    sem, pos = theta >= threshold, m >= threshold
    if sem and not pos:
        return "semantic"
    if pos and not sem:
        return "positional"
    return "mixed" if sem else "trivial"


def _write(path: str, rows: list[dict], append: bool) -> None:
    if not rows:
        return
    exists = append and os.path.exists(path)
    with open(path, "a" if exists else "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if not exists:
            w.writeheader()
        w.writerows(rows)


def _read(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _cell(v: np.ndarray, ref: float | None) -> str:
    mean = v.mean()
    se = v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else 0.0
    cell = f"{mean:.4g} +- {se:.2g}"
    if ref is not None and abs(ref) > 1e-6:
        cell += f" ({100 * (mean / ref - 1):+.1f} %)"
    return cell


def table() -> str:
    """Markdown tables: per variant and comparison, theory vs mean +- s.e. over seeds per d
    (relative deviation of the mean from the theory in brackets)."""
    theory = _read(THEORY_CSV)
    sim = _read(SIM_CSV)
    lines = []
    for name, case in CASES.items():
        trows = [t for t in theory if t["variant"] == name]
        srows = [s for s in sim if s["variant"] == name]
        if not trows and not srows:
            continue
        lines += [f"#### {name}: {case.note}", ""]
        for comp in case.comparisons:
            tb = [t for t in trows if t["branch"] == comp.branch
                  and float(t["alpha"]) == comp.alpha]
            sb = [s for s in srows if s["init"] in comp.inits
                  and float(s["alpha"]) == comp.alpha]
            if not tb and not sb:
                continue
            tb = sorted(tb, key=lambda r: int(r["order"]))
            t = tb[-1] if tb else None  # deviations are taken against the highest order
            ok = t is not None and t["exists"] == "True"
            keys = COMPARED[comp.branch]
            if name.startswith("untied"):
                keys = keys + ("theta_Q", "theta_K", "q_Q", "q_K")
            other = {"semantic": ("m",), "positional": ("theta",), "mixed": ()}[comp.branch]
            desc = (f"{t['reason']}; QMC order(s) "
                    + ", ".join(f"{r['order']} ({r['seconds']} s)" for r in tb)
                    if t else "not solved")
            lines += [f"*{comp.branch} branch at alpha = {comp.alpha}* (theory: {desc}; "
                      f"simulation from the {' and '.join(comp.inits)} start)", ""]
            head = "| d | runs | converged | landed | " + " | ".join(keys + other) + " |"
            lines += [head, "|" + "---|" * (head.count("|") - 1)]
            for r in tb:
                vals = " | ".join(f"{float(r[k]):.4g}" for k in keys + other)
                there = comp.branch if r["exists"] == "True" else "absent"
                lines.append(f"| theory, order {r['order']} | | | {there} | {vals} |")
            for d in sorted({int(s["d"]) for s in sb}):
                rs = [s for s in sb if int(s["d"]) == d]
                landed: dict[str, int] = {}
                for s in rs:
                    lab = classify(float(s["m"]), float(s["theta"]))
                    landed[lab] = landed.get(lab, 0) + 1
                cells = [_cell(np.array([float(s[k]) for s in rs]),
                               float(t[k]) if ok and t is not None else None) for k in keys]
                cells += [_cell(np.array([float(s[k]) for s in rs]), None) for k in other]
                conv = sum(s["stop"] == "tol" for s in rs)
                land = ", ".join(f"{v} {k}" for k, v in sorted(landed.items()))
                lines.append(f"| {d} | {len(rs)} | {conv} | {land} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("stage", choices=("theory", "sim", "table"))
    p.add_argument("--only", nargs="*", default=None, help="variant names (default: all)")
    p.add_argument("--branch", nargs="*", default=None, help="comparisons (default: all)")
    p.add_argument("--alpha", type=float, nargs="*", default=None,
                   help="only the comparisons at these alphas (default: all)")
    p.add_argument("--order", type=int, default=None, help="QMC order (default FAST's)")
    p.add_argument("--d", type=int, nargs="*", default=(300,))
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--seed0", type=int, default=0)
    args = p.parse_args(argv)
    names = args.only or list(CASES)
    for n in names:
        if n not in CASES:
            raise SystemExit(f"unknown variant {n!r}; choose from {', '.join(CASES)}")
    if args.stage == "table":
        print(table())
        return
    os.makedirs(DATA, exist_ok=True)
    for n in names:
        case = CASES[n]
        comps = [c for c in case.comparisons
                 if (args.branch is None or c.branch in args.branch)
                 and (args.alpha is None or c.alpha in args.alpha)]
        if args.stage == "theory":
            from attnphase.theory.fixed_point import FAST

            for comp in comps:
                row = _theory_row(case, comp, args.order or FAST["order"])
                _write(THEORY_CSV, [row], append=True)
                print(row, flush=True)
            continue
        runs = list(dict.fromkeys((c.alpha, i) for c in comps for i in c.inits))
        for alpha, init in runs:
            for d in args.d:
                seeds = tuple(range(args.seed0, args.seed0 + args.seeds))
                rows = _sim_rows(case, alpha, d, seeds, init)
                _write(SIM_CSV, rows, append=True)
                print(n, init, alpha, d, f"{rows[0]['batch_seconds']} s",
                      [(r["landed"], round(r["theta"], 4), round(r["m"], 4)) for r in rows],
                      flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
