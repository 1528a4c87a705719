"""Data steps with numpy's BLAS held at one thread (``attnphase.theory.threads``) against the same
data steps with the BLAS threads numpy starts with, in one process, alternating.

At the semantic fixed point of the reference case (``alpha = 1, omega = 0.3``), one fine rule of
the refinement (teacher scale 1.4, the ``eta`` flip) of ``4 * 2^k`` nodes for each ``--orders``
``k``: ``--repeats`` full multi-start data steps back to back, then as many warm-started ones,
each way, twice (medians).
``Saddle.data_step.__wrapped__`` is the undecorated step (BLAS threads as the process has them).
Each series starts after a pause of 0.5 s, so that workers still spinning from the other
variant's series do not slow it down; within a series they do, as in a solve.

Usage: ``python benchmarks/bench_blas_threads.py [--orders 10,11,12,13] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import time

from threadpoolctl import threadpool_info

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.branches import solve_point
from attnphase.theory.fine_rules import fine_copies
from attnphase.theory.fixed_point import make_saddle, warm_starts
from attnphase.theory.saddle import Saddle


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", default="10,11,12,13")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    spec, st = ModelSpec(omega=0.3), SolverSettings()
    blas = [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]
    print(f"BLAS threads of this process: {blas}")
    point = solve_point(spec, 1.0, "semantic", st, error_estimate=False, draft=True, thorough=True)
    amap = make_saddle(spec, 1.0, st).amap
    one, many = Saddle.data_step, Saddle.data_step.__wrapped__
    for k in (int(v) for v in a.orders.split(",")):
        f = make_saddle(spec, 1.0, st, order=k, seed=104729, copies=fine_copies(amap, "semantic"), teacher_scale=1.4)
        starts = warm_starts(f.data_step(point.order_params, switch_width=st.switch_width))
        t: dict[tuple[str, str], list[float]] = {}
        for _ in range(2):
            for name, step in (("one", one), ("default", many)):
                for kind, s in (("full", None), ("warm", starts)):
                    time.sleep(0.5)  # (OpenBLAS workers spin ~0.1 s after a threaded call: let them sleep)
                    for _ in range(a.repeats):  # back to back, as the iterations of a solve
                        t0 = time.perf_counter()
                        step(f, point.order_params, starts=s, switch_width=st.switch_width)
                        t.setdefault((name, kind), []).append(time.perf_counter() - t0)
        med = {key: statistics.median(v) for key, v in t.items()}
        print(f"order {k} ({f.rule.size} nodes): " + "; ".join(
            f"{kind} {med[('default', kind)] * 1e3:.1f} ms (BLAS threads) / {med[('one', kind)] * 1e3:.1f} ms "
            f"(one BLAS thread) = {med[('default', kind)] / med[('one', kind)]:.2f}x" for kind in ("full", "warm")),
            flush=True)


if __name__ == "__main__":
    main()
