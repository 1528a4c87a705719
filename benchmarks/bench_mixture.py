"""Cost of a Gaussian-mixture solve (docs/mixture.md): whole processes of

    attnphase solve --alpha 1 --omega 0.3 --mixture 2 --mixture-sep 1 --mixture-align 0.5 --json

against the plain ``attnphase solve --alpha 1 --omega 0.3 --json`` (default preset and error
target), median of ``--repeats`` runs each, alternating the two so that a drift of the machine's
speed hits both alike; prints both medians, their ratio, and the largest overlap error estimate
of each run's branches.

    python benchmarks/bench_mixture.py                       # 3 repeats
    python benchmarks/bench_mixture.py --repeats 3 --sep 1 --align 0.5
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench_presets import run  # (whole-process wall time and JSON of one command)

OVERLAPS = ("q_user", "m_user", "theta_user")


def largest_estimate(solve: dict[str, Any]) -> float:
    return max((float(b["error_estimate"][k]) for b in solve["branches"].values() if b and b.get("error_estimate")
                for k in OVERLAPS if b["error_estimate"].get(k) is not None), default=float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sep", type=float, default=1.0)
    ap.add_argument("--align", type=float, default=0.5)
    args = ap.parse_args()
    plain = ["solve", "--alpha", "1", "--omega", "0.3"]
    mixture = [*plain, "--mixture", "2", "--mixture-sep", repr(args.sep), "--mixture-align", repr(args.align)]
    times: dict[str, list[float]] = {"plain": [], "mixture": []}
    for i in range(args.repeats):
        for name, cmd in (("plain", plain), ("mixture", mixture)):
            t, out = run(cmd)
            times[name].append(t)
            print(f"run {i} {name}: {t:.1f} s, largest overlap estimate {largest_estimate(out):.1e}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"median plain {med['plain']:.1f} s, mixture {med['mixture']:.1f} s, ratio {med['mixture'] / med['plain']:.2f}")


if __name__ == "__main__":
    main()
