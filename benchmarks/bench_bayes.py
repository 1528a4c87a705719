"""Time of ``attnphase bayes --omega 0.3 --json`` (the Bayes-optimal baseline, docs/bayes.md).

Whole processes (imports included) are timed, the median of ``--repeats`` runs is printed with
the spread, next to the thresholds and the largest quadrature error estimate of the overlaps that
the JSON reports. The acceptance limit is 30 s on 2 cores.

    python benchmarks/bench_bayes.py                  # 5 repeats
    python benchmarks/bench_bayes.py --repeats 3 --L 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--L", default="2")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "attnphase", "bayes", "--omega", "0.3", "--L", args.L, "--json"]
    times = []
    out: dict = {}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t0)
        out = json.loads(res.stdout)
    t = out["thresholds"]
    err = max(p["overlap_error"] for p in out["points"])
    print(f"attnphase bayes --omega 0.3 --L {args.L} --json: median {statistics.median(times):.2f} s "
          f"(min {min(times):.2f}, max {max(times):.2f}; {args.repeats} whole processes)")
    print(f"alpha_WR = {t['alpha_WR']:.6f}, alpha_IT = {t['alpha_IT']:.6f}, alpha_PR = {t['alpha_PR']:.6f}; "
          f"largest overlap error estimate {err:.1e}; success {out['success']}")


if __name__ == "__main__":
    main()
