"""Where the causal student's semantic branch ends (L = 2, omega = 0.3), by pseudo-arclength
continuation on the fixed-point residual (docs/model.md (7.6)); the numbers of docs/variants.md
("Causal student").

For each QMC order and scramble (seed): the semantic fixed point at alpha = 2 on that rule, then
:func:`attnphase.theory.continuation.arclength` down towards alpha = 1.5, through the fold and
along the branch's far side until it meets the trivial branch. Prints per rule the fold's alpha
and theta, where the far side meets the trivial branch, the points (alpha, theta, whether the
damped iteration holds them), and per order the mean +- standard error of the fold over the
scrambles. Usage:

    python studies/causal_fold.py [--orders 10 11 12] [--seeds 0 1 2] [--points]

(orders 11 and 12, seeds 0-2: about 4 min of CPU on one core.)
"""

from __future__ import annotations

import argparse
import statistics
import time

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.continuation import arclength
from attnphase.theory.fixed_point import FAST, SolverSettings

SPEC = ModelSpec(omega=0.3, sigma=0.5, lam=0.01, variant="causal")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, nargs="+", default=[10, 11, 12])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--points", action="store_true", help="print every point of each continuation")
    args = ap.parse_args()
    for order in args.orders:
        folds = []
        for seed in args.seeds:
            t0 = time.perf_counter()
            s = SolverSettings(**{**FAST, "order": order, "seed": seed})
            start = solve_point(SPEC, 2.0, "semantic", s, error_estimate=False)
            if not start.exists:
                print(f"order {order} seed {seed}: no semantic point at alpha 2 ({start.reason})")
                continue
            r = arclength(SPEC, start.order_params, 2.0, 1.5, "semantic", s, past_fold=40)
            dt = time.perf_counter() - t0
            if r.fold is not None:
                folds.append(r.fold)
            fold = "none" if r.fold is None else f"{r.fold:.4f} (theta {abs(r.fold_theta or 0):.3f})"
            meets = "-" if r.rejoins is None else f"{r.rejoins:.4f} ({r.rejoins_branch})"
            print(f"order {order} seed {seed}: fold at alpha {fold}; far side meets the trivial branch at {meets}; "
                  f"{r.evaluations} data steps, {dt:.0f} s", flush=True)
            if args.points:
                for p in r.points:
                    print(f"    alpha {p.alpha:.4f} theta {abs(p.theta):.4f} q {p.q:.4f} growth {p.growth:+.2e} "
                          f"{'held by the iteration' if p.stable else 'not held by the iteration'}")
        if len(folds) > 1:
            se = statistics.stdev(folds) / len(folds) ** 0.5
            print(f"order {order}: fold at alpha {statistics.mean(folds):.4f} +- {se:.4f} over {len(folds)} scrambles")


if __name__ == "__main__":
    main()
