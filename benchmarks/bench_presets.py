"""Cost and accuracy of the solver presets (``SolverSettings.preset``): the table of docs/solver.md.

For each preset, whole processes of ``attnphase solve --alpha 1 --omega 0.3 --branch all --preset P
--json`` and ``attnphase transition --omega 0.3 --preset P --json`` are timed (median of
``--repeats`` runs, alternating presets so that a drift of the machine's speed hits all alike), and
the reported error estimates are read from their JSON: the largest relative overlap estimate
(``q_user``, ``m_user``, ``theta_user``) over the existing branches, and ``alpha_c``'s error. The
``default`` preset is the baseline of the time ratios.

    python benchmarks/bench_presets.py                 # fast and default, 3 repeats
    python benchmarks/bench_presets.py --presets fast default precise --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

OVERLAPS = ("q_user", "m_user", "theta_user")


def run(command: list[str]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "attnphase", *command, "--json"], capture_output=True,
                         text=True, check=True)
    return time.perf_counter() - t0, json.loads(out.stdout)


def largest_overlap_estimate(solve: dict[str, Any]) -> tuple[float, str]:
    best = (0.0, "")
    for name, b in solve["branches"].items():
        if b is None:
            continue
        for key in OVERLAPS:
            v = b["error_estimate"].get(key)
            if v is not None and v > best[0]:
                best = (v, f"{name} {key.removesuffix('_user')}")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["fast", "default"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-transition", action="store_true")
    args = ap.parse_args()
    times: dict[tuple[str, str], list[float]] = {}
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for _ in range(args.repeats):
        for p in args.presets:
            jobs = {"solve": ["solve", "--alpha", "1", "--omega", "0.3", "--branch", "all", "--preset", p]}
            if not args.skip_transition:
                jobs["transition"] = ["transition", "--omega", "0.3", "--preset", p]
            for what, cmd in jobs.items():
                t, out = run(cmd)
                times.setdefault((p, what), []).append(t)
                last[(p, what)] = out
    base = {w: statistics.median(times[("default", w)]) for w in ("solve", "transition")
            if ("default", w) in times}
    print("| preset | solve: median s (range) | x default | largest overlap estimate "
          "| transition: median s (range) | x default | alpha_c | alpha_c error |")
    print("|---|---|---|---|---|---|---|---|")
    for p in args.presets:
        cells = [p]
        ts = times[(p, "solve")]
        est, where = largest_overlap_estimate(last[(p, "solve")])
        cells += [f"{statistics.median(ts):.1f} ({min(ts):.1f}-{max(ts):.1f})",
                  f"{statistics.median(ts) / base['solve']:.2f}" if "solve" in base else "-",
                  f"{est:.1e} ({where})"]
        if not args.skip_transition:
            tt = times[(p, "transition")]
            tr = last[(p, "transition")]
            err = (tr.get("errors") or {}).get("alpha_c")
            cells += [f"{statistics.median(tt):.1f} ({min(tt):.1f}-{max(tt):.1f})",
                      f"{statistics.median(tt) / base['transition']:.2f}" if "transition" in base else "-",
                      f"{tr['alpha_c']:.4f}" if tr.get("alpha_c") is not None else "none",
                      f"{err:.1e}" if err is not None else "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
