"""The reviewers' questions answered by simulation: ``alpha_c`` measured at finite ``d`` for token
correlation, untied key and query, a trainable value matrix and a causal mask (the figures and
tables of docs/questions.md).

Each question is a set of :func:`attnphase.sim.transition.sim_transition` runs (``alpha_c`` as in
docs/model.md (5.2), variants of docs/model.md section 6, the informed starts of the simulator),
one per model variant, at a modest ``d`` with several seeds. Outputs:

* ``docs/figures/q_<name>.png``: Delta curves and ``alpha_c(sim)`` per variant;
* ``docs/data/q_<name>.csv``: tidy per-seed rows (alpha, seed, Delta, both training errors and
  where each start landed) with the variant label;
* ``docs/data/q_summary.csv``: one row per run (alpha_c, its +-1 SE band, per-seed estimate,
  how often the starts held, seconds, the equivalent ``attnphase sim-transition`` command).

Reproduce (from the repository root)::

    python studies/questions.py                 # all questions (~20 min, 1 thread)
    python studies/questions.py --only correlation,dcheck
    python studies/questions.py --quick         # smoke run into /tmp

``--only`` runs a subset and merges its rows into an existing ``q_summary.csv``.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from attnphase.plots.extensions import question_figure
from attnphase.sim.train import TrainSettings
from attnphase.sim.transition import DEFAULT_SETTINGS, SimTransition, sim_transition
from attnphase.spec.problem import ModelSpec

#: the figures and tables go to docs/figures and docs/data of the repository
ROOT = Path(__file__).resolve().parent.parent / "docs"

#: Training settings of every run (GD lr 0.15 + momentum 0.9, tol 1e-5, cap 4000, float32), as the
#: CLI defaults of ``attnphase sim-transition``.
SETTINGS = {**DEFAULT_SETTINGS, "dtype": "float32"}


def grid(start: float, stop: float, num: int) -> tuple[float, ...]:
    return tuple(float(round(a, 6)) for a in np.linspace(start, stop, num))


@dataclass(frozen=True)
class Run:
    """One ``sim_transition`` call: a label, the spec changes from the reference, d, grid."""

    label: str
    spec: dict[str, Any]
    d: int
    alphas: tuple[float, ...]
    seeds: int = 10
    settings: dict[str, Any] = field(default_factory=dict)
    ref: str | None = None  # label of the run it is compared with (same seeds: paired shift)

    def command(self) -> str:
        s = {"omega": 0.3, **self.spec}
        flags = [f"--omega {s.pop('omega'):g}"]
        names = {"variant": "--variant", "token_corr": "--token-corr", "value": "--value",
                 "value_rank": "--value-rank"}
        flags += [f"{names[k]} {v}" for k, v in s.items()]
        a = self.alphas
        step = np.diff(a)
        alpha = (f"{a[0]:g}:{a[-1]:g}:{len(a)}" if np.allclose(step, step[0])
                 else ",".join(f"{x:g}" for x in a))
        return (f"attnphase sim-transition {' '.join(flags)} --alpha {alpha} --d {self.d} "
                f"--seeds {self.seeds} --threads 1")


# The grids bracket the crossing found in a coarse pass (d = 200, 4 seeds, alpha 0.6:2.6:6).
QUESTIONS: dict[str, dict[str, Any]] = {
    "correlation": {
        "title": "Q1: token correlation c (omega = 0.3)",
        "runs": [
            Run("c = 0", {}, 300, grid(0.8, 1.8, 6)),
            Run("c = 0.2", {"token_corr": 0.2}, 300, grid(1.4, 2.4, 6), ref="c = 0"),
            Run("c = 0.4", {"token_corr": 0.4}, 300, grid(3.0, 4.8, 7), ref="c = 0"),
        ],
    },
    "untied": {
        "title": "Q2: tied vs untied key/query",
        "runs": [
            Run("tied, omega 0.2", {"omega": 0.2}, 300, grid(0.4, 1.4, 6)),
            Run("untied, omega 0.2", {"omega": 0.2, "variant": "untied"}, 300,
                grid(1.0, 2.5, 6), ref="tied, omega 0.2"),
            Run("tied, omega 0.3", {}, 300, grid(0.8, 1.8, 6)),
            Run("untied, omega 0.3", {"variant": "untied"}, 300, grid(1.5, 3.0, 6),
                ref="tied, omega 0.3"),
        ],
    },
    "value": {
        "title": "Q3: value matrix (omega = 0.3; d = 100 because 'full' costs O(n L d^2))",
        "runs": [
            Run("identity", {}, 100, grid(0.8, 2.0, 5)),
            Run("lowrank, rank 1", {"value": "lowrank", "value_rank": 1}, 100,
                grid(0.8, 2.0, 5), ref="identity"),
            Run("full", {"value": "full"}, 100, grid(0.8, 2.0, 5), ref="identity"),
        ],
    },
    "causal": {
        "title": "Q4: causal vs bidirectional student (omega = 0.3)",
        "runs": [
            Run("bidirectional", {}, 300, grid(0.8, 1.8, 6)),
            Run("causal", {"variant": "causal"}, 300, grid(1.5, 3.0, 6), ref="bidirectional"),
        ],
    },
    "dcheck": {
        "title": "d-check: Q1 at d = 300 and d = 600 (omega = 0.3)",
        "runs": [
            Run("c = 0, d = 300", {}, 300, grid(0.8, 1.8, 6)),
            Run("c = 0.2, d = 300", {"token_corr": 0.2}, 300, grid(1.4, 2.4, 6),
                ref="c = 0, d = 300"),
            Run("c = 0, d = 600", {}, 600, grid(0.8, 1.8, 6), seeds=8),
            Run("c = 0.2, d = 600", {"token_corr": 0.2}, 600, grid(1.4, 2.4, 6), seeds=8,
                ref="c = 0, d = 600"),
        ],
    },
}

# ---------------------------------------------------------------------------------------------
# The theory's alpha_c: label -> alpha_c from attnphase.theory where the theory covers the variant
# (tied / untied / causal / correlated tokens; not the trainable value), drawn as open diamonds in
# the figures; a label left out has no theory. Mean of 3 refined transitions (coarse 2^8 x 4 nodes,
# the alpha_c/alpha_l points refined on 4 x 2^10 x 4), from studies/questions_theory.py ->
# docs/data/q_theory.csv
THEORY_ALPHA_C: dict[str, dict[str, float | None]] = {name: {} for name in QUESTIONS}
THEORY_ALPHA_C["correlation"] = {"c = 0": 1.255, "c = 0.2": 1.965, "c = 0.4": 3.988}
THEORY_ALPHA_C["untied"] = {"tied, omega 0.2": 0.953, "tied, omega 0.3": 1.255, "untied, omega 0.3": 2.314}
THEORY_ALPHA_C["causal"] = {"bidirectional": 1.255, "causal": 2.535}
THEORY_ALPHA_C["dcheck"] = {"c = 0, d = 300": 1.255, "c = 0.2, d = 300": 1.965, "c = 0, d = 600": 1.255,
                            "c = 0.2, d = 600": 1.965}
# ---------------------------------------------------------------------------------------------


def run_one(run: Run, cache: dict[tuple, SimTransition], store: Path | None = None
            ) -> SimTransition:
    key = (tuple(sorted(run.spec.items())), run.d, run.alphas, run.seeds,
           tuple(sorted(run.settings.items())))
    if key not in cache:
        spec = ModelSpec(**{"omega": 0.3, **run.spec})
        settings = TrainSettings(**{**SETTINGS, **run.settings})
        t0 = time.perf_counter()
        cache[key] = sim_transition(spec, run.alphas, run.d, tuple(range(run.seeds)), settings)
        logging.info("%s: alpha_c = %s (%.0f s)", run.label, cache[key].alpha_c,
                     time.perf_counter() - t0)
        if store is not None:
            store.write_bytes(pickle.dumps(cache))
    return cache[key]


def shift(res: SimTransition, ref: SimTransition | None) -> dict[str, Any]:
    """``alpha_c - alpha_c(ref)``: from the mean curves (SEs in quadrature) and paired per seed
    (same seed = same teacher and token draws in both runs; seeds where both curves cross)."""
    out: dict[str, Any] = {"shift": None, "shift_se": None, "paired_shift": None,
                           "paired_shift_se": None, "n_pairs": 0}
    if ref is None:
        return out
    a, b = res.crossing, ref.crossing
    if a.alpha_c is not None and b.alpha_c is not None:
        out["shift"] = a.alpha_c - b.alpha_c
        if a.se is not None and b.se is not None:
            out["shift_se"] = float(np.hypot(a.se, b.se))
    ref_by_seed = dict(zip(ref.seeds, ref.seed_crossings, strict=True))
    diffs = [x - ref_by_seed[s] for s, x in zip(res.seeds, res.seed_crossings, strict=True)
             if x is not None and ref_by_seed.get(s) is not None]
    if diffs:
        out["paired_shift"] = float(np.mean(diffs))
        out["n_pairs"] = len(diffs)
        if len(diffs) > 1:
            out["paired_shift_se"] = float(np.std(diffs, ddof=1) / np.sqrt(len(diffs)))
    return out


def summary_row(question: str, run: Run, res: SimTransition,
                ref: SimTransition | None = None) -> dict[str, Any]:
    c = res.crossing
    ps = res.seed_summary()
    return {
        "question": question, "label": run.label, "omega": res.spec.omega,
        "variant": res.spec.variant, "token_corr": res.spec.token_corr, "value": res.spec.value,
        "d": res.d, "seeds": len(res.seeds), "alphas": " ".join(f"{a:g}" for a in res.alphas),
        "alpha_c": c.alpha_c, "alpha_c_se": c.se, "band_lo": c.lo, "band_hi": c.hi,
        "reason": c.reason, "seed_alpha_c_mean": ps["mean"], "seed_alpha_c_se": ps["se"],
        "seeds_crossing": ps["n_crossing"], "ref": run.ref, **shift(res, ref),
        "held_semantic_min": min(p.held_semantic for p in res.points),
        "held_positional_min": min(p.held_positional for p in res.points),
        "unusable_alphas": " ".join(f"{p.alpha:g}" for p in res.points if not p.usable),
        "converged": float(np.mean([p.converged for p in res.points])),
        "seconds": round(res.seconds, 1), "version": res.version, "command": run.command(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(QUESTIONS),
                        help=f"comma list of {', '.join(QUESTIONS)}")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run into /tmp")
    parser.add_argument("--cache", default="/tmp/attnphase_questions.pkl",
                        help="pickle of finished runs (reused: rerun only what is missing; "
                             "'' to disable)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    for n in names:
        if n not in QUESTIONS:
            raise SystemExit(f"unknown question {n!r}; choose from {', '.join(QUESTIONS)}")
    figdir, datadir = ROOT / "figures", ROOT / "data"
    if args.quick:
        figdir = datadir = Path("/tmp/q_quick")
    figdir.mkdir(parents=True, exist_ok=True)
    datadir.mkdir(parents=True, exist_ok=True)
    store = Path(args.cache) if args.cache and not args.quick else None
    cache: dict[tuple, SimTransition] = {}
    if store is not None and store.exists():
        cache = pickle.loads(store.read_bytes())
        logging.info("reusing %d finished runs from %s", len(cache), store)
    rows = []
    for name in names:
        q = QUESTIONS[name]
        results: dict[str, SimTransition] = {}
        tidy = []
        for run in q["runs"]:
            if args.quick:
                run = Run(run.label, run.spec, 24, run.alphas[:3], seeds=2,
                          settings={"max_steps": 20}, ref=run.ref)
            res = run_one(run, cache, store)
            results[run.label] = res
            ref = results.get(run.ref) if run.ref else None
            rows.append(summary_row(name, run, res, ref))
            for r in res.rows():
                tidy.append({"question": name, "label": run.label, **r})
        pd.DataFrame(tidy).to_csv(datadir / f"q_{name}.csv", index=False)
        fig = question_figure(results, q["title"], theory=THEORY_ALPHA_C.get(name) or None,
                              order=[r.label for r in q["runs"]])
        fig.savefig(figdir / f"q_{name}.png", dpi=130)
    table = pd.DataFrame(rows)
    path = datadir / "q_summary.csv"
    if path.exists() and not args.quick:
        old = pd.read_csv(path)
        table = pd.concat([old[~old["question"].isin(names)], table], ignore_index=True)
    table.to_csv(path, index=False)
    cols = ["question", "label", "d", "alpha_c", "alpha_c_se", "band_lo", "band_hi",
            "seed_alpha_c_mean", "seed_alpha_c_se", "shift", "shift_se", "paired_shift",
            "paired_shift_se", "n_pairs", "unusable_alphas", "seconds"]
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table[cols].to_string(index=False))


if __name__ == "__main__":
    main()
