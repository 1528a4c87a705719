"""Speed of basin-map training: one run at a time against runs batched over seeds (what one
``basins`` point does) and batched over ``omegas x seeds`` (:func:`attnphase.sim.basins.train_basins`
with several ``omegas``: the runs of one ``alpha`` share their shapes).

Workload (defaults): d = 300, alpha = 1.5, 4 omegas x 8 seeds = 32 runs from random starts,
300 plain-GD steps each (``tol = 0``: no run stops early, so every variant does the same steps),
float32, one torch thread (as the sweep kind runs a point). Each timing is a whole call (data,
training, test error). Throughput = runs x steps / second, median over ``--repeats``; the script
also checks that the three variants reach the same states, and extrapolates the time of a
15 x 8 grid x 8 seeds at the workload's ``d`` from the seed-batched throughput.

    python benchmarks/bench_basins.py
    python benchmarks/bench_basins.py --d 300 --steps 300 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnphase.sim.basins import basin_settings, train_basins
from attnphase.spec.problem import ModelSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=300)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--omegas", type=str, default="0,0.15,0.3,0.45")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = ModelSpec()
    omegas = tuple(float(w) for w in args.omegas.split(","))
    seeds = tuple(range(args.seeds))
    settings = basin_settings(max_steps=args.steps, tol=0.0)
    runs = len(omegas) * len(seeds)

    def one_at_a_time():
        return [train_basins(spec.replace(omega=w), args.d, args.alpha, seeds=(s,), settings=settings)[0]
                for w in omegas for s in seeds]

    def per_point():
        return [train_basins(spec.replace(omega=w), args.d, args.alpha, seeds=seeds, settings=settings)[0]
                for w in omegas]

    def grouped():
        return list(train_basins(spec, args.d, args.alpha, omegas=omegas, seeds=seeds, settings=settings))

    variants = (("one run at a time", one_at_a_time), ("seeds batched (a basins point)", per_point),
                ("omegas x seeds batched", grouped))
    states = {}
    rate = {}
    print(f"d={args.d} alpha={args.alpha} omegas={omegas} seeds={len(seeds)} runs={runs} "
          f"steps={args.steps} threads={torch.get_num_threads()}")
    for name, fn in variants:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            pts = fn()
            times.append(time.perf_counter() - t0)
        states[name] = sorted((r.seed, r.state, round(r.theta, 3)) for p in pts for r in p.runs)
        med = statistics.median(times)
        rate[name] = runs * args.steps / med
        print(f"{name:32s} median {med:7.2f} s  ({', '.join(f'{t:.2f}' for t in times)})  "
              f"{rate[name]:9.0f} runs x steps / s")
    base = rate["one run at a time"]
    for name, _ in variants[1:]:
        print(f"speed-up of {name}: {rate[name] / base:.1f}x")
    same = len({tuple(v) for v in states.values()}) == 1
    print(f"same states and overlaps in every variant: {same}")
    # a 15 x 8 grid x 8 seeds, every run to a 5000-step cap, at the mean alpha of 0.2:3 (1.6)
    work = 15 * 8 * 8 * 5000 * 1.6 / args.alpha
    print(f"15 x 8 x 8 seeds to 5000 steps (alpha 0.2-3) at this d: ~{work / rate['seeds batched (a basins point)'] / 60:.1f} "
          f"min on one core, ~{work / rate['seeds batched (a basins point)'] / 120:.1f} min on 2 workers (upper bound: runs that converge stop)")


if __name__ == "__main__":
    main()
