"""Speed of the batched simulator against the plain one-run-at-a-time approach.

Baseline (the approach of the original code): one run at a time, ``Q`` an ``nn.Parameter``,
the prediction ``softmax(h h^T) x`` formed explicitly, autograd, ``torch.optim.SGD`` (lr 0.15,
weight decay lambda) on the summed loss, a ``DataLoader`` yielding the full batch.
Ours: :func:`attnphase.sim.train.train`, all runs in one batched computation (Gram form, analytic
gradient by default).

Workload (defaults): d = 1000, alpha = 1, L = 2, 2000 GD steps, 8 runs = 4 seeds x {semantic,
positional} starts, each seed with its own dataset. Both use the same datasets and starts
(same seeds); the final overlaps are compared (float64: they must agree to 1e-6).
Throughput = runs x steps / second; the script prints medians over ``--repeats`` repetitions.

    python benchmarks/bench_sim.py                 # full workload (the baseline takes minutes)
    python benchmarks/bench_sim.py --steps 200     # shorter
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from attnphase.sim.data import make_dataset, masked_softmax
from attnphase.sim.simulate import overlaps
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec


def baseline_run(spec, ds, Q0, steps, lr):
    """One run the plain way; returns the final Q (d, 1)."""
    d = ds.d
    X, Y = ds.X, ds.Y
    loader = DataLoader(TensorDataset(X, Y), batch_size=X.shape[0], shuffle=False)
    Q = torch.nn.Parameter(Q0.clone())
    opt = torch.optim.SGD([Q], lr=lr, weight_decay=spec.lam)
    for _ in range(steps):
        for x, y in loader:
            opt.zero_grad()
            h = x @ Q / math.sqrt(d)
            S = masked_softmax(h @ h.transpose(1, 2))
            loss = ((y - S @ x) ** 2).sum() / (2 * d)
            loss.backward()
            opt.step()
    return Q.detach()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-runs", type=int, default=None,
                    help="time the baseline on this many of the runs only (its cost is per run)")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--grad", choices=("analytic", "autograd"), default="analytic")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = ModelSpec()
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    n = round(args.alpha * args.d)
    inits = ("semantic", "positional")
    datasets = [make_dataset(spec, args.d, n, s, dtype=dtype, keep_labels=True)
                for s in range(args.seeds)]
    runs = len(datasets) * len(inits)
    batch = stack_batch(datasets)
    p0 = init_params(spec, datasets, inits)
    settings = TrainSettings(max_steps=args.steps, tol=0.0, dtype=args.dtype, grad=args.grad,
                             log_every=0)

    # repeats interleave ours and the baseline so that a change in machine load hits both; wall
    # time and process CPU time are both reported (CPU time is robust to other processes)
    ours_t, base_t, ours_c, base_c = [], [], [], []
    n_base = runs if args.baseline_runs is None else min(args.baseline_runs, runs)
    base_Q = {}
    for _ in range(args.repeats):
        t, c = time.perf_counter(), time.process_time()
        res = train(spec, batch, p0, settings)
        ours_t.append(time.perf_counter() - t)
        ours_c.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        for j in range(n_base):
            i, k = divmod(j, len(inits))
            base_Q[(i, k)] = baseline_run(spec, datasets[i], p0["P"][i, k], args.steps, 0.15)
        base_t.append(time.perf_counter() - t)
        base_c.append(time.process_time() - c)
    ours_tp = runs * args.steps / statistics.median(ours_t)
    base_tp = n_base * args.steps / statistics.median(base_t)
    ours_cp = runs * args.steps / statistics.median(ours_c)
    base_cp = n_base * args.steps / statistics.median(base_c)
    diffs = []
    for (i, k), Q in base_Q.items():
        ob = overlaps(spec, datasets[i], {"P": Q})
        oo = overlaps(spec, datasets[i], {"P": res.params["P"][i, k]})
        for key in ("m", "theta", "q"):
            diffs.append(float(abs(ob[key] - oo[key]).max()))
    print(f"workload: d={args.d} alpha={args.alpha} n={n} L=2 steps={args.steps} runs={runs} "
          f"dtype={args.dtype} threads={args.threads} grad={args.grad}")
    print(f"ours     : median wall {statistics.median(ours_t):.3f} s, cpu "
          f"{statistics.median(ours_c):.3f} s for {runs} runs ({len(ours_t)} repeats) -> "
          f"{ours_tp:.1f} run-steps/s wall, {ours_cp:.1f} per cpu-s")
    print(f"baseline : median wall {statistics.median(base_t):.3f} s, cpu "
          f"{statistics.median(base_c):.3f} s for {n_base} runs ({len(base_t)} repeats) -> "
          f"{base_tp:.1f} run-steps/s wall, {base_cp:.1f} per cpu-s")
    print(f"throughput ratio ours/baseline: {ours_tp / base_tp:.2f}x (wall), "
          f"{ours_cp / base_cp:.2f}x (cpu time)")
    print(f"max |overlap difference| (m, theta, q) over {len(base_Q)} runs: {max(diffs):.3e}"
          f" -> {'IDENTICAL to 1e-6' if max(diffs) < 1e-6 else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
