"""Speed of the rank-2 solve against the plain rank-1 solve, whole process.

Wall time of ``attnphase solve --rank 2 --alpha 1 --omega 0.3`` (the default preset: every branch,
each refined until its overlap estimates meet the default target error 1e-3) and of the same
command at rank 1, each the median of ``--repeats`` runs in fresh processes (imports, kernel
loading and the cached QMC samples included), with the CPU time of the process (user + system,
threads summed: the measure that does not depend on what else runs on the machine), and their ratios. Target: the rank-2 solve within
30 s. Per branch, the refinement order the target stopped at and the seconds of the solve.

Usage: ``python benchmarks/bench_rank2.py [--repeats 3] [--threads N]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

COMMAND = ["solve", "--alpha", "1", "--omega", "0.3"]


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(extra: list[str], repeats: int, env: dict[str, str]) -> tuple[list[float], list[float], dict]:
    times, cpu, out = [], [], {}
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), _child_cpu()
        r = subprocess.run([sys.executable, "-m", "attnphase", *COMMAND, *extra, "--json"], capture_output=True,
                           text=True, env=env)
        times.append(time.perf_counter() - t0)
        cpu.append(_child_cpu() - c0)
        if r.returncode != 0:
            raise SystemExit(f"attnphase {' '.join(COMMAND + extra)} failed: {r.stderr.strip()}")
        out = json.loads(r.stdout)
    return times, cpu, out


def describe(out: dict) -> str:
    parts = []
    for b, v in out["branches"].items():
        diag = out["diagnostics"][b]
        if v is None:
            parts.append(f"{b}: absent")
            continue
        tgt = diag.get("target") or {}
        parts.append(f"{b}: order {tgt.get('order', '-')}, {diag.get('seconds', float('nan')):.1f} s")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="NUMBA_NUM_THREADS of the solves (default: unset)")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.threads is not None:
        env["NUMBA_NUM_THREADS"] = str(args.threads)
    t1, c1, out1 = run([], args.repeats, env)
    t2, c2, out2 = run(["--rank", "2"], args.repeats, env)
    m1, m2 = statistics.median(t1), statistics.median(t2)
    for r, t, c, out in ((1, t1, c1, out1), (2, t2, c2, out2)):
        print(f"rank {r}: median {statistics.median(t):.1f} s wall, {statistics.median(c):.1f} s CPU of {args.repeats} "
              f"(wall {', '.join(f'{x:.1f}' for x in t)}); {describe(out)}")
    print(f"ratio rank 2 / rank 1: {m2 / m1:.2f} wall, {statistics.median(c2) / statistics.median(c1):.2f} CPU; "
          f"rank 2 target 30 s wall: {'met' if m2 <= 30 else 'NOT met'} (on a loaded machine the CPU time is the "
          "better measure of the work)")


if __name__ == "__main__":
    main()
