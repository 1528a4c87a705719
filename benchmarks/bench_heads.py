"""Time of the two-head solve (docs/heads.md, "Known limitations") against the one-head solve of
the same point: whole processes of

    attnphase solve --heads 2 --alpha 2 --omega 0.3 --branch all --json     # two heads
    attnphase solve --alpha 2 --omega 0.3 --branch all --json               # the one-head baseline

each ``--repeats`` times in turn (so that a drift of the machine's speed hits both alike), with
``--preset`` (none: the default preset of ``attnphase solve``). Prints each case's median wall
time, the ratio of the two medians, and what the two-head solve reported for its specialised
branch: training and test error, the largest relative error estimate of the overlaps and of the
test error, and whether the error target was met (the speed target: the specialised branch
with its error estimates in under 30 s on 2 cores at the default preset). ``--kernels numba``
runs both on the generic numba kernels (``$ATTNPHASE_KERNELS``) for comparison. Then, in this
process, the proximal kernel of two heads written out in C against the generic numba kernel on
the same ``--nodes`` random nodes and the default 11 starts (median of ``--repeats`` calls, after
one call each that loads them; ``--nodes 0`` skips it).

    python benchmarks/bench_heads.py                        # default preset, 3 repeats
    python benchmarks/bench_heads.py --preset fast --repeats 5
    python benchmarks/bench_heads.py --trained --nodes 0     # also trained head gains (omega 0.6, alpha 3)
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
from typing import Any

import numpy as np

HEADS = "attnphase solve --heads 2 --alpha 2 --omega 0.3 --branch all"
BASELINE = "attnphase solve --alpha 2 --omega 0.3 --branch all"
#: trained head gains (docs/model.md (11.4)) where their specialised state is the global minimum
TRAINED = "attnphase solve --heads 2 --head-gains trained --alpha 3 --omega 0.6 --branch all"
OVERLAPS = ("q_user", "m_user", "theta_user")


def run(command: str, kernels: str) -> tuple[float, dict[str, Any]]:
    """Wall time of one whole process of ``command --json`` and its JSON (a solve whose error
    target is not met exits non-zero and still prints its result)."""
    env = {**os.environ, "ATTNPHASE_KERNELS": kernels}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "attnphase", *shlex.split(command)[1:], "--json"],
                         capture_output=True, text=True, env=env)
    t = time.perf_counter() - t0
    try:
        return t, json.loads(out.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{command} failed (exit {out.returncode}): {out.stderr.strip()[-500:]}") from None


def specialised(out: dict[str, Any]) -> str:
    """What the two-head solve says of its specialised branch, in one line."""
    b = out["branches"].get("specialised")
    if b is None:
        return "no specialised branch"
    est = b.get("error_estimate") or {}
    overlap = max((est[k] for k in OVERLAPS if est.get(k) is not None), default=float("nan"))
    target = (out["diagnostics"].get("specialised") or {}).get("target") or {}
    met = target.get("met")
    gains = f"gains {', '.join(f'{v:.4f}' for v in b['head_gains'])}, " if b.get("head_gains") else ""
    return (f"specialised: {gains}training error {b['train_loss']:.4g}, test error {b['test_error']:.4g}, "
            f"overlap estimate {overlap:.2g}, test-error estimate {est.get('test_error', float('nan')):.2g}, "
            f"target {'met' if met else 'not met' if met is not None else '-'}; global minimum {out['global_minimum']}")


def kernel_times(nodes: int, repeats: int) -> tuple[float, float]:
    """Median seconds of one call of the written-out and of the generic proximal kernel of two
    heads (``L = 2``, gains 1/2) on the same ``nodes`` random nodes, prior variance 20 (the
    specialised branch's ``V`` at ``alpha = 2``), the default starts."""
    from attnphase import ModelSpec
    from attnphase.theory.channels import AttentionMap, default_starts, prox_batch, target_map

    spec = ModelSpec(heads=2, omega=0.3)
    am = AttentionMap.from_spec(spec)
    rng = np.random.default_rng(0)
    w = 0.5 * rng.normal(size=(nodes, 2, 2))
    T = target_map(1.5 * rng.normal(size=(nodes, 2, 1)), spec)
    V = np.diag([20.0, 17.0])
    starts = default_starts(w, V)
    out = []
    for generic in (False, True):
        prox_batch(w, T, V, spec.C_array, am, starts=starts, generic=generic)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            prox_batch(w, T, V, spec.C_array, am, starts=starts, generic=generic)
            ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--preset", default=None, help="solver preset of both commands (default: attnphase solve's)")
    ap.add_argument("--kernels", default="auto", choices=("auto", "c", "numba"))
    ap.add_argument("--nodes", type=int, default=16384, help="nodes of the kernel comparison (0: none)")
    ap.add_argument("--skip-solves", action="store_true", help="only the kernel comparison")
    ap.add_argument("--trained", action="store_true", help=f"also the trained head gains: {TRAINED}")
    args = ap.parse_args()
    extra = f" --preset {args.preset}" if args.preset else ""
    cases = {"one head": BASELINE + extra, "two heads": HEADS + extra}
    if args.trained:
        cases["trained"] = TRAINED + extra
    times: dict[str, list[float]] = {k: [] for k in cases}
    for rep in range(0 if args.skip_solves else args.repeats):
        for name, cmd in cases.items():
            t, out = run(cmd, args.kernels)
            times[name].append(t)
            note = specialised(out) if name != "one head" else f"global minimum {out['global_minimum']}"
            print(f"repeat {rep} {name}: {t:.1f} s | {cmd} | {note}", flush=True)
    if not args.skip_solves:
        base = statistics.median(times["one head"])
        print(f"\n{'case':<10} {'median s':>9} {'ratio':>6}   (kernels {args.kernels}, {os.cpu_count()} CPUs)")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:<10} {med:9.1f} {med / base:6.2f}")
    if args.nodes:
        c, generic = kernel_times(args.nodes, args.repeats)
        print(f"\nproximal kernel of two heads, {args.nodes} nodes x 11 starts: written-out C {c:.3f} s, "
              f"generic numba {generic:.3f} s ({generic / c:.1f}x)")


if __name__ == "__main__":
    main()
