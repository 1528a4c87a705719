"""How the refined error estimate of the test error falls with the refinement order: the decay
``N^-0.64`` that the error target (docs/model.md (7.5)) assumes when it chooses the next order.

For each case and branch: the refined point at order 11 (``solve_refined``, coarse order 8), then
``refine_point`` from it at orders 12 .. ``--top`` (as ``--target-error`` does); prints one JSON
line per order (estimate, seconds) and the least-squares decay ``-d log2(estimate) / d order``
per chain and pooled (one intercept per chain). ``refinement.TARGET_DECAY`` is that pooled slope
(the table "How fast the estimates fall" of docs/solver.md).

Reproduce: ``python studies/decay_of_estimates.py [--seeds 0,1] [--top 15]`` (~10 min for two seeds)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.refinement import refine_point
from attnphase.theory.target import solve_refined

CASES = [("L = 2", {}, 1.0, ("semantic", "positional")), ("L = 3", {"L": 3}, 1.5, ("semantic",)),
         ("r = 2", {"rank": 2}, 1.5, ("semantic", "positional", "mixed"))]


def estimate(p) -> float | None:
    applied = p.refinement is not None and p.refinement.applied
    return p.error_estimate.get("test_error") if applied and p.error_estimate is not None else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    chains: dict[tuple, list[tuple[int, float]]] = {}
    for seed in (int(s) for s in a.seeds.split(",")):
        for name, kw, alpha, branches in CASES:
            spec = ModelSpec(omega=0.3, **kw)
            st = SolverSettings(order=8, refine_order=11, seed=seed)
            for br in branches:
                t0 = time.perf_counter()
                p = solve_refined(spec, alpha, br, st)
                rows = [(11, estimate(p), time.perf_counter() - t0)]
                for order in range(12, a.top + 1):
                    t0 = time.perf_counter()
                    q = refine_point(spec, p, replace(st, refine_order=order), tol=st.tol)
                    rows.append((order, estimate(q), time.perf_counter() - t0))
                for order, e, sec in rows:
                    print(json.dumps({"case": name, "branch": br, "seed": seed, "order": order, "estimate": e,
                                      "seconds": round(sec, 2)}), flush=True)
                chains[(name, br, seed)] = [(o, e) for o, e, _ in rows if e]
    slopes, X, Y = [], [], []
    keys = [k for k, v in chains.items() if len(v) >= 2]
    for i, k in enumerate(keys):
        o, e = np.array(chains[k]).T
        slopes.append(-np.polyfit(o, np.log2(e), 1)[0])
        print(f"{k}: decay {slopes[-1]:.2f}")
        for oi, ei in chains[k]:
            X.append([*(np.arange(len(keys)) == i), oi])
            Y.append(np.log2(ei))
    coef = np.linalg.lstsq(np.array(X, dtype=float), np.array(Y), rcond=None)[0]
    print(f"pooled decay {-coef[-1]:.2f} over {len(keys)} chains (single chains {min(slopes):.2f}-{max(slopes):.2f})")


if __name__ == "__main__":
    main()
