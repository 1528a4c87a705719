"""Solve speed and error estimates for the variants (``L = 3`` and rank ``r = 2``).

Whole-process wall time of ``attnphase solve --alpha 1.5 --omega 0.3 --branch all`` for
``--L 3`` and ``--rank 2`` (median of ``--repeats`` runs; targets: 30 s each, reported relative
error estimate of the test error <= 1e-4), with each branch's test error and its estimate. With
``--target 1e-4`` the same solves are also run with ``--target-error`` (the refinement order is
raised until the estimate meets it or ``--max-refine-order`` is reached). First, the test error's
compiled kernel against its numpy form in the 6 dimensions of these cases.

Usage: ``python benchmarks/bench_variants.py [--repeats 3] [--target 1e-4]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CASES = {"L = 3": ["--L", "3"], "r = 2": ["--rank", "2"]}


def run(args: list[str], repeats: int) -> tuple[float, dict]:
    times, out = [], {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "attnphase", *args, "--json"], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"attnphase {' '.join(args)} failed: {r.stderr.strip()}")
        out = json.loads(r.stdout)
    return statistics.median(times), out


def report(label: str, t: float, out: dict) -> None:
    print(f"{label}: median {t:.1f} s wall (target 30 s)")
    for b, v in out["branches"].items():
        if v is None:
            print(f"  {b:<11} absent: {out['diagnostics'][b]['reason']}")
            continue
        est = (v.get("error_estimate") or {}).get("test_error")
        tgt = out["diagnostics"][b].get("target")
        steps = ", ".join(f"order {h['order']}: {h['test_error_estimate']:.1e}"
                          + (f" in {h['seconds']:.1f} s" if "seconds" in h else "") for h in (tgt or {}).get("history", []))
        extra = "" if not tgt else f"; target {'met' if tgt['met'] else 'not met'} at order {tgt['order']} ({steps})"
        print(f"  {b:<11} test error {v['test_error']:.6f}, relative error estimate "
              f"{'n/a' if est is None else f'{est:.1e}'} ({'<=' if est is not None and est <= 1e-4 else '>'} 1e-4)"
              f"{extra}")


def test_error_speed(repeats: int) -> None:
    """``Saddle.test_error`` (numba kernel, nodes decoded from the flat index) against the numpy
    evaluation of the same sum (``Saddle.test_error_numpy``), in the 6 dimensions of ``L = 3`` and
    rank 2 (order 10: 10^6 nodes)."""
    import numpy as np

    from attnphase import ModelSpec
    from attnphase.theory.quadrature import gauss_hermite
    from attnphase.theory.saddle import OrderParams, Saddle

    for label, spec in (("r = 2", ModelSpec(omega=0.3, rank=2)), ("L = 3", ModelSpec(omega=0.3, L=3))):
        L, F, rs = spec.L, spec.rank, spec.teacher_rank
        sd = Saddle(spec, 1.5, gauss_hermite(L * (F + rs), 2))
        op = OrderParams(0.3 * np.eye(F), np.full((L, F), 0.1), np.eye(F), np.full((F, rs), 0.1))
        times: dict[str, list[float]] = {"kernel": [], "numpy": []}
        values = {}
        for _ in range(repeats + 1):  # (the first round compiles / loads the kernel)
            for name in times:
                t0 = time.perf_counter()
                values[name] = sd.test_error(op) if name == "kernel" else sd.test_error_numpy(op)
                times[name].append(time.perf_counter() - t0)
        k, n = (statistics.median(times[x][1:]) for x in ("kernel", "numpy"))
        rel = abs(values["kernel"] - values["numpy"]) / values["numpy"]
        print(f"test error, {label}, 10^{sd.dim} Gauss-Hermite nodes: kernel {k:.3f} s, numpy {n:.3f} s "
              f"(median of {repeats}; {n / k:.1f}x), relative difference {rel:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.0, help="also run with --target-error (0: skip)")
    ap.add_argument("--max-refine-order", type=int, default=15)
    a = ap.parse_args()
    test_error_speed(a.repeats)
    base = ["solve", "--alpha", "1.5", "--omega", "0.3", "--branch", "all"]
    for label, flags in CASES.items():
        report(label, *run(base + flags, a.repeats))
    if a.target:
        for label, flags in CASES.items():
            extra = ["--target-error", str(a.target), "--solver", f"max_refine_order={a.max_refine_order}"]
            report(f"{label} with --target-error {a.target:g}", *run(base + flags + extra, 1))


if __name__ == "__main__":
    main()
