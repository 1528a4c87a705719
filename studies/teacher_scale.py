"""Refined points with variants of the fine rules (teacher-noise scale, mirror pairing): scatter of
the refined values over seeds against the reported error estimates (docs/solver.md, "Design
choices": the importance-weighted fine rules).

For each seed, ``solve_refined`` (coarse order 8, refine order ``--order``, the CLI's path) with
each variant of the fine rules in ``--variants`` (``SCALE:MIRROR``, comma-separated:
``fine_teacher_scale`` and ``mirror`` on/off; default ``1:off`` (plain rule) against
``SCALE:off`` with ``--scale``); prints, per branch and quantity, the relative scatter of the refined
values over the seeds (the actual integration error of one refined point) and the median of the
reported estimates, with the median time per solve.

Reproduce: ``python studies/teacher_scale.py [--seeds 12] [--scale 1.4] [--variants 1.4:off,1.4:on]
[--alpha 1] [--L 2] [--rank 1] [--variant tied] [--token-corr 0]``
(~1 min for 12 seeds and two variants at the reference case).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.target import solve_refined

KEYS = {"semantic": ("theta", "q", "test_error"), "positional": ("m", "q", "test_error"),
        "mixed": ("theta", "m", "test_error")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--scale", type=float, default=1.4)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--variant", default="tied")
    ap.add_argument("--token-corr", type=float, default=0.0)
    ap.add_argument("--order", type=int, default=11)
    ap.add_argument("--branches", default="semantic,positional")
    ap.add_argument("--variants", default=None, help="SCALE:MIRROR,... (default: 1:off,<scale>:off)")
    a = ap.parse_args()
    variants = [(float(v.split(":")[0]), v.split(":")[1] == "on")
                for v in (a.variants or f"1:off,{a.scale:g}:off").split(",")]
    spec = ModelSpec(omega=a.omega, L=a.L, rank=a.rank, variant=a.variant, token_corr=a.token_corr)
    for branch in a.branches.split(","):
        for scale, mirror in variants:
            vals, ests, secs = [], [], []
            for seed in range(a.seeds):
                t0 = time.perf_counter()
                p = solve_refined(spec, a.alpha, branch, SolverSettings(order=8, refine_order=a.order, seed=seed,
                                                                        fine_teacher_scale=scale, mirror=mirror))
                secs.append(time.perf_counter() - t0)
                e = {} if p.error_estimate is None else p.error_estimate.relative
                vals.append([getattr(p, k) for k in KEYS[branch]])
                ests.append([e.get(k if k == "test_error" else f"{k}_user", np.nan) for k in KEYS[branch]])
            v, es = np.array(vals), np.array(ests)
            parts = [f"{k} {v[:, i].mean():.6g}: scatter {v[:, i].std(ddof=1) / abs(v[:, i].mean()):.2e}, "
                     f"median estimate {np.nanmedian(es[:, i]):.2e}" for i, k in enumerate(KEYS[branch])]
            print(f"{branch:10s} scale {scale:g} mirror {'on' if mirror else 'off'} ({np.median(secs):.1f} s per solve): "
                  + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
