"""Speed of the sweep machinery, each against a baseline measured in this script.

1. store overhead: N cheap points through ``run_sweep`` (one transaction per point, WAL,
   synchronous=FULL) vs. the same computations in a bare loop, per point;
2. rerun of a finished sweep (everything stored: nothing computed) vs. the first run;
3. local pool speed-up: sleeping points on 1 vs. ``--workers`` processes;
4. theory phase diagram: ``--omegas`` transition points on ``--workers`` processes
   (the issue's target: 10 omegas in <= 5 minutes on 2 cores), when the theory is installed.

Medians of ``--repeats`` runs. Usage::

    PYTHONPATH=src python benchmarks/bench_sweeps.py [--repeats 5] [--workers 2] [--no-theory]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from attnphase.sweeps import SweepSpec, execute_point, run_sweep


def _median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_store(n: int, repeats: int) -> dict:
    sweep = SweepSpec("selftest", axes=(("x", tuple(float(i) for i in range(n))),))
    points = sweep.points()

    def bare() -> None:
        for p in points:
            execute_point(p.kind, dict(p.params))

    def stored() -> None:
        with tempfile.TemporaryDirectory() as d:
            run_sweep(points, Path(d) / "s.sqlite", workers=1, progress="none")

    t_bare, t_store = _median_time(bare, repeats), _median_time(stored, repeats)
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "s.sqlite"
        run_sweep(points, store, workers=1, progress="none")
        t_rerun = _median_time(lambda: run_sweep(points, store, workers=1, progress="none"),
                               repeats)
    return {"points": n, "bare_loop_s": t_bare, "stored_sweep_s": t_store,
            "overhead_ms_per_point": 1e3 * (t_store - t_bare) / n,
            "rerun_finished_s": t_rerun, "rerun_vs_first_run": t_rerun / t_store}


def bench_pool(n: int, sleep: float, workers: int, repeats: int) -> dict:
    sweep = SweepSpec("selftest", axes=(("x", tuple(float(i) for i in range(n))),),
                      fixed={"sleep": sleep})

    def go(w: int) -> None:
        with tempfile.TemporaryDirectory() as d:
            run_sweep(sweep, Path(d) / "s.sqlite", workers=w, progress="none")

    t1 = _median_time(lambda: go(1), repeats)
    tw = _median_time(lambda: go(workers), repeats)
    return {"points": n, "sleep_s": sleep, "serial_s": t1, f"pool_{workers}_s": tw,
            "speedup": t1 / tw}


def bench_theory(omegas: int, workers: int, repeats: int) -> dict:
    try:
        from attnphase.theory import find_transition  # noqa: F401
    except ImportError:
        return {"skipped": "attnphase.theory.find_transition not available"}
    from attnphase.spec.problem import ModelSpec, parse_range
    from attnphase.sweeps.phase import phase_lines

    base = {k: v for k, v in ModelSpec().to_dict().items() if k != "omega"}
    ws = parse_range(f"0:0.45:{omegas}")
    out = {}

    def go() -> None:
        with tempfile.TemporaryDirectory() as d:
            lines = phase_lines(base, ws, Path(d) / "s.sqlite", workers=workers,
                                progress="none")
            out["alpha_c"] = lines.alpha_c
            out["alpha_l"] = lines.alpha_l
            out["errors"] = [e for e in lines.errors if e]

    t = _median_time(go, repeats)
    return {"omegas": omegas, "workers": workers, "seconds": t, "target_s": 300.0, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--theory-repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--points", type=int, default=500)
    ap.add_argument("--omegas", type=int, default=10)
    ap.add_argument("--no-theory", action="store_true")
    a = ap.parse_args()
    res = {"store": bench_store(a.points, a.repeats),
           "pool": bench_pool(16, 0.25, a.workers, max(1, a.repeats // 2))}
    if not a.no_theory:
        res["theory_phase_diagram"] = bench_theory(a.omegas, a.workers, a.theory_repeats)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
