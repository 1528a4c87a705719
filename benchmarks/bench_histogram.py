"""Speed of the counting-task training step: torch threads 1 vs 2 (and the quick budget).

Times ``--repeats`` runs of ``--steps`` Adam steps of the default model (L=10, T=15, d=64,
batch 128) for each thread count, each in a fresh subprocess (torch's thread pool cannot
be shrunk reliably in-process), and prints the median seconds per step and the ratio
against the one-thread baseline. It also extrapolates the ``--quick`` budget of
``attnphase histogram`` (2 x 2000 Adam steps + 5 x 500 SGD steps + evaluations, see
docs/histogram.md) from the measured step time.

    PYTHONPATH=src python benchmarks/bench_histogram.py --steps 300 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from attnphase.histogram import DataConfig, ModelConfig, TrainConfig, build_model, make_dataset
from attnphase.histogram import train_model
steps = int(sys.argv[2])
data = make_dataset(DataConfig(n_train=20000, n_val=500), 0)
model = build_model(ModelConfig(attention="semantic"), 0)
train_model(model, data, TrainConfig(steps=20, eval_every=10**6, n_curve=10), 0)  # warm-up
t0 = time.perf_counter()
train_model(model, data, TrainConfig(steps=steps, eval_every=10**6, n_curve=10), 1)
print(json.dumps({"s_per_step": (time.perf_counter() - t0) / steps}))
"""


def measure(threads: int, steps: int) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(steps)],
                         check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["s_per_step"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=str, default="1,2")
    args = p.parse_args()
    rows = {}
    for t in (int(x) for x in args.threads.split(",")):
        times = [measure(t, args.steps) for _ in range(args.repeats)]
        rows[t] = statistics.median(times)
    base = rows[min(rows)]
    for t, s in rows.items():
        quick = (2 * 2000 + 5 * 500) * s
        print(f"threads={t}: median {1e3 * s:.2f} ms/step, ratio vs threads={min(rows)}: "
              f"{s / base:.2f}, quick-config step budget ~{quick:.0f} s (without evaluations)")


if __name__ == "__main__":
    main()
