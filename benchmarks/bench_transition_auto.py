"""Wall time and result of ``attnphase transition --omega 0.3`` without ``--alpha`` (the range
widened from 0.2:2.4:12 as needed) away from the reference point: the table of docs/solver.md.

Each case runs as a whole process (``--json``), ``--repeats`` times, alternating cases so that a
drift of the machine's speed hits all alike; the baseline is the reference point (no flags), whose
grid needs no widening. Printed: the median wall time with its range and its ratio to the
baseline's, ``alpha_c`` (or the reason for none), the range searched and the spinodals.

    python benchmarks/bench_transition_auto.py                       # all cases, 1 repeat
    python benchmarks/bench_transition_auto.py --repeats 3 --cases "--sigma 0.4" "--lam 0.1"
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

BASELINE = ""
CASES = ("--sigma 0.3", "--sigma 0.4", "--sigma 0.6", "--sigma 0.7", "--sigma 1.0", "--lam 0.001", "--lam 0.1")


def run(flags: str, timeout: float) -> tuple[float, dict[str, Any] | None, str]:
    """Wall time, the JSON record (``None`` where the process failed) and the error's last line."""
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "attnphase", "transition", "--omega", "0.3", *flags.split(),
                              "--json"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, None, f"timed out after {timeout:g} s"
    t = time.perf_counter() - t0
    if out.returncode != 0:
        return t, None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    return t, json.loads(out.stdout), ""


def fmt(v: float | None) -> str:
    return "none" if v is None else f"{v:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), help="flag sets after --omega 0.3")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    args = ap.parse_args()
    cases = [BASELINE, *args.cases]
    times: dict[str, list[float]] = {c: [] for c in cases}
    last: dict[str, tuple[dict[str, Any] | None, str]] = {}
    for _ in range(args.repeats):
        for c in cases:
            t, rec, err = run(c, args.timeout)
            times[c].append(t)
            last[c] = (rec, err)
            print(f"# {c or '(reference point)'}: {t:.1f} s", file=sys.stderr, flush=True)
    base = statistics.median(times[BASELINE])
    print("| flags | wall s, median (range) | x reference | alpha_c | range searched | spinodals (sem, pos) "
          "| reason for no alpha_c |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        ts = times[c]
        rec, err = last[c]
        cells = [f"`{c}`" if c else "(reference point)",
                 f"{statistics.median(ts):.1f} ({min(ts):.1f}-{max(ts):.1f})", f"{statistics.median(ts) / base:.2f}"]
        if rec is None:
            cells += ["failed", "", "", err]
        else:
            e = (rec.get("errors") or {}).get("alpha_c")
            ac = fmt(rec["alpha_c"]) + (f" +- {e:.4f}" if rec["alpha_c"] is not None and e is not None else "")
            rng = rec.get("alpha_range")
            spin = rec["spinodals"]
            cells += [ac, f"{rng[0]:g}-{rng[1]:g}" if rng else "", f"{fmt(spin['semantic'])}, {fmt(spin['positional'])}",
                      rec.get("reason") or ""]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
