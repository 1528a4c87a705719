"""Solve speed of the trainable value gain (docs/model.md (6.5)) against the plain solve.

Whole-process wall time (median of ``--repeats`` runs, each a fresh Python process) of

* the plain solve: ``attnphase.solve(alpha, omega=0.3, branch=B)`` (the default preset: refined to
  the default error target), and
* the gain solve: ``attnphase.theory.value.solve_gain(ModelSpec(value="gain"), alpha, B)`` with the
  same settings (coarse secant search over ``v``, the refined point at the optimum, the gain's
  error estimate on the fine rules),

for the semantic and the positional branch, with their ratio. Target: the gain solve within 30 s.

Usage: ``python benchmarks/bench_value.py [--alpha 1.25] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

PLAIN = """
import json, attnphase as ap
r = ap.solve({alpha}, omega=0.3, branch="{branch}")
p = r.branches["{branch}"]
print(json.dumps({{"train_loss": p.train_loss, "gain": 1.0}}))
"""

GAIN = """
import json
from attnphase.spec.problem import ModelSpec
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.value import solve_gain
g = solve_gain(ModelSpec(omega=0.3, value="gain"), {alpha}, "{branch}", SolverSettings.preset("default"))
assert g.success, g.message
print(json.dumps({{"train_loss": g.train_loss, "gain": g.gain, "gain_error": g.gain_error}}))
"""


def run(code: str, repeats: int) -> tuple[float, dict]:
    times, out = [], {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"failed: {r.stderr.strip()}")
        out = json.loads(r.stdout.strip().splitlines()[-1])
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alpha", type=float, default=1.25)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    for branch in ("semantic", "positional"):
        tp, op = run(PLAIN.format(alpha=a.alpha, branch=branch), a.repeats)
        tg, og = run(GAIN.format(alpha=a.alpha, branch=branch), a.repeats)
        print(f"{branch}, alpha {a.alpha:g}: plain solve {tp:.1f} s, gain solve {tg:.1f} s "
              f"(median of {a.repeats}; ratio {tg / tp:.1f}x; target 30 s); "
              f"v = {og['gain']:.6f} +- {og['gain_error']:.1e}, training error {og['train_loss']:.7f} "
              f"against {op['train_loss']:.7f} at v = 1")


if __name__ == "__main__":
    main()
