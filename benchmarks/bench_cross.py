"""Solve speed of cross-attention at the reference case (docs/model.md section 10, docs/cross.md).

Whole-process wall time of ``attnphase solve --alpha 1 --omega 0.3 --variant cross`` (``L = L' = 2``,
every branch, the default error target 1e-3 on the overlaps) against the plain
``attnphase solve --alpha 1 --omega 0.3`` in the same script: median of ``--repeats`` runs each
(target: 10 s for the cross-attention solve), the ratio, the CPU seconds of each process (user +
system: the measure that a machine shared with other work distorts least), and per branch the
refinement orders and their estimates on the way to the target.

Usage: ``python benchmarks/bench_cross.py [--repeats 3] [--extra "--L-keys 3"]``
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def run(args: list[str], repeats: int) -> tuple[float, float, dict]:
    """Median wall and CPU seconds of ``attnphase <args> --json`` over ``repeats`` processes, and the
    last one's output."""
    walls, cpus, out = [], [], {}
    for _ in range(repeats):
        before = os.times()
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "attnphase", *args, "--json"], capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = os.times()
        cpus.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
        if r.returncode != 0:
            raise SystemExit(f"attnphase {' '.join(args)} failed: {r.stderr.strip()}")
        out = json.loads(r.stdout)
    return statistics.median(walls), statistics.median(cpus), out


def orders(out: dict) -> str:
    parts = []
    for b, v in out["branches"].items():
        tgt = (out["diagnostics"].get(b) or {}).get("target") or {}
        if v is None:
            parts.append(f"{b}: absent")
            continue
        steps = ", ".join(f"{h['order']}: {h['estimate']:.1e}" for h in tgt.get("history", []))
        parts.append(f"{b}: order {tgt.get('order')} ({'met' if tgt.get('met') else 'not met'}; {steps})")
    return "; ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description="cross-attention solve speed against self-attention")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--extra", default="", help="further flags for the cross-attention solve")
    a = p.parse_args()
    base = ["solve", "--alpha", "1", "--omega", "0.3"]
    cross = [*base, "--variant", "cross", *shlex.split(a.extra)]
    t_self, c_self, o_self = run(base, a.repeats)
    t_cross, c_cross, o_cross = run(cross, a.repeats)
    print(f"self-attention  {' '.join(base)}: median {t_self:.1f} s wall, {c_self:.1f} s CPU; {orders(o_self)}")
    print(f"cross-attention {' '.join(cross)}: median {t_cross:.1f} s wall, {c_cross:.1f} s CPU; {orders(o_cross)}")
    print(f"ratio cross / self: {t_cross / t_self:.2f} (wall), {c_cross / c_self:.2f} (CPU); "
          f"target 10 s: {'met' if t_cross <= 10 else 'not met'}")
    print(f"kernels: {o_cross.get('params', {}).get('kernels', o_cross.get('kernels'))}")


if __name__ == "__main__":
    main()
