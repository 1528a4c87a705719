"""Speed of the ``L = 3`` solve against the plain ``L = 2`` one (target: 30 s).

Whole-process wall time and CPU time (user + system of the child) of
``attnphase solve --L 3 --alpha 1.5 --omega 0.3`` (every branch, default preset and error target)
and of the same solve at ``L = 2``, alternating, median of ``--repeats`` runs each, and their
ratio: on a shared machine the wall times move with the load, the ratio and the CPU times much
less. Also prints, per branch, whether it exists and how long the solve spent on it (from the
JSON's diagnostics).

Usage: ``python benchmarks/bench_L3.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ARGS = ["solve", "--alpha", "1.5", "--omega", "0.3", "--json"]
CASES = {"L = 3": ["--L", "3"], "L = 2": []}
TARGET_S = 30.0


def run_once(extra: list[str]) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds of the child, and its JSON output."""
    before = os.times()
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "attnphase", *ARGS, *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    if r.returncode != 0:
        raise SystemExit(f"attnphase {' '.join(ARGS + extra)} failed: {r.stderr.strip()}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    walls: dict[str, list[float]] = {k: [] for k in CASES}
    cpus: dict[str, list[float]] = {k: [] for k in CASES}
    outs: dict[str, dict] = {}
    for _ in range(args.repeats):
        for label, extra in CASES.items():
            w, c, outs[label] = run_once(extra)
            walls[label].append(w)
            cpus[label].append(c)
    med = {k: statistics.median(v) for k, v in walls.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}
    for label in CASES:
        print(f"{label}: median {med[label]:.1f} s wall, {cmed[label]:.1f} s CPU over {args.repeats} runs "
              f"(walls {', '.join(f'{w:.1f}' for w in walls[label])})")
        for b, v in outs[label]["branches"].items():
            diag = outs[label]["diagnostics"][b]
            state = "exists" if v is not None else f"absent ({diag['reason'][:90]}...)"
            print(f"  {b:<11} {state}")
    ratio = med["L = 3"] / med["L = 2"]
    print(f"ratio L = 3 / L = 2: {ratio:.2f} wall, {cmed['L = 3'] / cmed['L = 2']:.2f} CPU; "
          f"L = 3 {'within' if med['L = 3'] <= TARGET_S else 'above'} the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
