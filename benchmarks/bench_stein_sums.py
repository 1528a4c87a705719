"""The Stein sums of a data step by one numba pass against the numpy form, and the warm-started
data step they are part of, in one process, alternating.

At the mixed (rank 2) or semantic (rank 1) point of ``alpha = 1.5, omega = 0.3`` (coarse
solve), one fine rule of ``4 * 2^k`` nodes for each ``--orders`` ``k``: ``stein_sums`` with
``compiled=True`` and ``False`` on the same minima (relative difference printed), ``--repeats``
times each; medians.

Usage: ``python benchmarks/bench_stein_sums.py [--rank 2] [--orders 11,13,14] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.branches import solve_point
from attnphase.theory.fine_rules import fine_copies
from attnphase.theory.fixed_point import make_saddle
from attnphase.theory.saddle import second_minimum, stein_sums


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, default=2)
    ap.add_argument("--orders", default="11,13,14")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    spec, st = ModelSpec(omega=0.3, rank=a.rank), SolverSettings(order=8)
    branch = "mixed" if a.rank >= 2 else "semantic"
    point = solve_point(spec, 1.5, branch, st, error_estimate=False, draft=True, thorough=True)
    amap = make_saddle(spec, 1.5, st).amap
    for k in (int(v) for v in a.orders.split(",")):
        f = make_saddle(spec, 1.5, st, order=k, seed=104729, copies=fine_copies(amap, branch))
        ds = f.data_step(point.order_params, switch_width=st.switch_width)
        second, M2 = second_minimum(ds.prox)
        args = (f.rule.w, ds.w, f.unmix(ds.prox.h), f.unmix(second), ds.prox.value, M2, st.switch_width,
                np.linalg.inv(point.order_params.V), f.xi, f.eta)
        t: dict[bool, list[float]] = {True: [], False: []}
        out = {}
        for _ in range(a.repeats):
            for compiled in (True, False):
                t0 = time.perf_counter()
                out[compiled] = stein_sums(*args, compiled=compiled)
                t[compiled].append(time.perf_counter() - t0)
        diff = max(float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))
                   for x, y in zip(out[True], out[False], strict=True))
        c, n = statistics.median(t[True]), statistics.median(t[False])
        print(f"rank {a.rank}, order {k} ({f.rule.size} nodes): compiled {c * 1e3:.2f} ms, numpy {n * 1e3:.2f} ms "
              f"({n / c:.1f}x); largest relative difference {diff:.1e}", flush=True)


if __name__ == "__main__":
    main()
