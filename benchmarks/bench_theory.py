"""Theory-solver speed.

1. Whole-process wall time of ``attnphase solve --branch all`` (alpha = 1, omega = 0.3: every
   overlap estimate brought to 1e-3, the default), of the same with
   ``--target-error 0`` (one refinement at order 11) and of that with ``ATTNPHASE_KERNELS=numba``
   (the generic numba kernels, the fallback where no C compiler works), alternating, with the largest overlap estimate of each branch
   and the orders the target took; with ``--seeds S`` the default solve at seeds 1 .. S-1 too; and
   of ``attnphase transition`` (median of ``--repeats`` runs).
2. The proximal kernel written out on scalars in C (``attnphase.theory.native.codegen``) against
   the generic numba one, same nodes and starts.
3. Per-fixed-point-iteration cost of our data step (batched compiled multi-start Newton, prox solved
   once and reused by the four conjugates) against a baseline that does what the original code
   did: a general-purpose minimiser (``scipy.optimize.minimize``, BFGS) called per quadrature node,
   the proximal problem re-solved for each of the four conjugate integrals, at the same rule.
   The baseline is timed on ``--baseline-nodes`` nodes and scaled linearly to the full rule.

Usage: ``python benchmarks/bench_theory.py [--repeats 3] [--seeds 1] [--skip-cli]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from scipy.optimize import minimize

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import default_starts, loss_numpy, prox_batch, target_map
from attnphase.theory.fixed_point import warm_starts
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import OrderParams, Saddle


def time_cli(args: list[str], repeats: int, env: dict[str, str] | None = None) -> tuple[float, dict | None]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "attnphase", *args], capture_output=True, text=True,
                           env={**os.environ, **(env or {})})
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"attnphase {' '.join(args)} failed: {r.stderr.strip()}")
        if "--json" in args:
            out = json.loads(r.stdout)
    return statistics.median(times), out


def baseline_data_step(sd: Saddle, op: OrderParams, n_nodes: int) -> float:
    """Seconds for the original approach on ``n_nodes`` nodes (4 integrals x 1 minimise each)."""
    w, hstar, *_ = sd.fields(op)
    T = target_map(hstar, sd.spec)
    Vinv = 1.0 / op.V[0, 0]
    t0 = time.perf_counter()
    for _integral in range(4):
        for i in range(n_nodes):
            wi, Ti = w[i], T[i]

            def f(h, wi=wi, Ti=Ti):
                hh = h.reshape(1, sd.L, sd.F)
                return float(loss_numpy(hh, Ti[None], sd.C, sd.amap)[0] + 0.5 * Vinv * np.sum((hh[0] - wi) ** 2))

            minimize(f, wi.ravel(), method="BFGS")
    return time.perf_counter() - t0


def _estimates(out: dict) -> str:
    """The largest overlap estimate of each branch and the refinement orders the target took."""
    parts = []
    for b, v in out["branches"].items():
        if v is None:
            parts.append(f"{b} absent")
            continue
        est = v["error_estimate"]
        worst = max(est.get(k, 0.0) for k in ("q_user", "m_user", "theta_user"))
        hist = out["diagnostics"][b].get("target", {}).get("history", [])
        orders = "/".join(str(h["order"]) for h in hist) or str(out["diagnostics"][b]["refined"].get("order"))
        parts.append(f"{b} {worst:.1e} (order {orders})")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--order", type=int, default=12)
    ap.add_argument("--baseline-nodes", type=int, default=200)
    ap.add_argument("--skip-cli", action="store_true")
    ap.add_argument("--seeds", type=int, default=1, help="also run the default solve at seeds 1 .. SEEDS-1")
    a = ap.parse_args()
    spec = ModelSpec()
    op = OrderParams.from_vector(np.array([0.0696, 0.0, 0.0, 20.84, 0.0986]), 2, 1, 1)
    sd = Saddle(spec, 1.0, make_rule("qmc", 4, a.order, 2, seed=0))
    sd.data_step(op)  # compile / load the numba cache
    full, warm = [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        ds = sd.data_step(op)
        full.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sd.data_step(op, starts=warm_starts(ds))
        warm.append(time.perf_counter() - t0)
    # the proximal kernel alone: the one written out on scalars in C (attnphase.theory.native.codegen)
    # against the generic numba one (loops over L and F), same nodes and starts, same process
    w, hstar, *_ = sd.fields(op)
    T = target_map(hstar, spec)
    starts = default_starts(w, op.V)
    kern = {}
    for generic in (False, True):
        prox_batch(w[:64], T[:64], op.V, sd.C, sd.amap, starts=starts[:64], generic=generic)  # (load the cache)
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            prox_batch(w, T, op.V, sd.C, sd.amap, starts=starts, generic=generic)
            ts.append(time.perf_counter() - t0)
        kern[generic] = statistics.median(ts)
    print(f"prox kernel, {sd.rule.size} nodes x {starts.shape[1]} starts: written out (C) {kern[False]:.3f} s, "
          f"generic {kern[True]:.3f} s (median of {a.repeats}; {kern[True] / kern[False]:.1f}x)")
    base = baseline_data_step(sd, op, a.baseline_nodes) * sd.rule.size / a.baseline_nodes
    print(f"rule: qmc order {a.order} ({sd.rule.size} nodes)")
    print(f"ours, data step with full multi-start: median {statistics.median(full):.3f} s")
    print(f"ours, data step with warm starts:      median {statistics.median(warm):.3f} s")
    print(f"baseline (BFGS per node, x4 integrals), scaled from {a.baseline_nodes} nodes: {base:.1f} s")
    print(f"speed-up per iteration: {base / statistics.median(full):.0f}x (full), "
          f"{base / statistics.median(warm):.0f}x (warm)")
    # the iterations a real solve makes: continuation points of a branch on the same rule
    # (warm-started quasi-Newton with full multi-start checks), every data step timed
    calls: list[tuple[bool, float]] = []
    orig = Saddle.data_step

    def timed(self, op, starts=None, switch_width=0.0):
        t0 = time.perf_counter()
        out = orig(self, op, starts=starts, switch_width=switch_width)
        if self.rule.size == sd.rule.size:
            calls.append((starts is None, time.perf_counter() - t0))
        return out

    from attnphase.theory import SolverSettings, follow_branch

    Saddle.data_step = timed
    try:
        for branch in ("semantic", "positional"):
            follow_branch(spec, [0.9, 1.0, 1.1, 1.2], branch,
                          SolverSettings(order=a.order, replicas=1, warmup_order=None))
    finally:
        Saddle.data_step = orig
    n_full = sum(f for f, _ in calls)
    per_it = sum(t for _, t in calls) / len(calls)
    print(f"real solves (2 branches x 4 alphas, continuation): {len(calls)} data steps, {n_full} with the full "
          f"multi-start set; mean {per_it:.3f} s per iteration -> {base / per_it:.0f}x the baseline")
    if a.skip_cli:
        return
    # the default solve (every overlap estimate brought to 1e-3, the C kernels), one refinement at
    # order 11 (--target-error 0) and the same with the generic numba kernels (ATTNPHASE_KERNELS=numba,
    # the fallback), alternating
    solve = ["solve", "--alpha", "1", "--omega", "0.3", "--branch", "all", "--json"]
    variants = {"default": (solve, {}), "single": (solve + ["--target-error", "0"], {}),
                "numba": (solve + ["--target-error", "0"], {"ATTNPHASE_KERNELS": "numba"})}
    runs: dict[str, list] = {k: [] for k in variants}
    for _ in range(a.repeats):
        for k, (args, env) in variants.items():
            runs[k].append(time_cli(args, 1, env=env))
    labels = {"default": "attnphase solve --branch all", "single": "  the same, --target-error 0",
              "numba": "  the same, --target-error 0, ATTNPHASE_KERNELS=numba"}
    for k, label in labels.items():
        t, out = statistics.median(r[0] for r in runs[k]), runs[k][-1][1]
        print(f"{label}: median {t:.2f} s wall (runs {', '.join(f'{r[0]:.2f}' for r in runs[k])}; kernels "
              f"{out['params'].get('kernels')})")
        print(f"    {_estimates(out)}")
    # the default solve at other seeds (other scrambles: how far the target takes each branch)
    for seed in range(1, a.seeds):
        t, out = time_cli(solve + ["--seed", str(seed)], 1)
        print(f"  seed {seed}: {t:.2f} s wall; {_estimates(out)}")
    t, out = time_cli(["transition", "--omega", "0.3", "--json"], a.repeats)
    print(f"attnphase transition --omega 0.3: median {t:.1f} s wall; {json.dumps(out)}")


if __name__ == "__main__":
    main()
