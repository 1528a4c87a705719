"""The trainable value gain ``V = v I`` by gradient descent, paired with the identity value on the
same data (docs/model.md (6.5), docs/questions.md Q3).

For every ``alpha`` of the grid and every seed, the semantic and positional starts are trained
with the identity value and with the trainable gain (start ``v = 1``) on the same dataset; each
run's training loss ``R/d``, test error, overlaps, branch and trained gain ``v`` go to a CSV.

    python studies/value_gain_sim.py --d 300 --alphas 1.0:1.5:6 --seeds 0-9 --out docs/data/value_sim.csv

(``--alphas lo:hi:n``; ``--seeds a-b``). Training: the ``simulate`` command's settings (GD, lr
0.15, tol 1e-5 on the gradient of ``R/d``, float32, at most 10000 steps) with ``--tol``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
from _write_csv import write_csv

from attnphase.sim.data import make_dataset, n_samples
from attnphase.sim.models import test_errors
from attnphase.sim.simulate import classify, overlaps
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec

INITS = ("semantic", "positional")


def run(d: int, alpha: float, seeds: list[int], tol: float, max_steps: int) -> list[dict]:
    st = TrainSettings(max_steps=max_steps, tol=tol, dtype="float32", log_every=0)
    base = ModelSpec(omega=0.3)
    n = n_samples(alpha, d)
    datasets = [make_dataset(base, d, n, s, n_test=2000, dtype=torch.float32) for s in seeds]
    batch = stack_batch(datasets)
    rows = []
    for value in ("identity", "gain"):
        spec = base.replace(value=value)
        t0 = time.perf_counter()
        res = train(spec, batch, init_params(spec, datasets, INITS), st)
        test = test_errors(spec, [ds.test_chunks(False) for ds in datasets], res.params, d)
        secs = time.perf_counter() - t0
        for i, ds in enumerate(datasets):
            for k, init in enumerate(INITS):
                p = {key: v[i, k] for key, v in res.params.items()}
                ov = overlaps(spec, ds, p)
                m, th = float(ov["m"][0].reshape(-1)[0]), float(ov["theta"].reshape(-1)[0])
                rows.append({
                    "d": d, "alpha": alpha, "seed": ds.seed, "init": init, "value": value,
                    "gain": float(p["g"].reshape(-1)[0]) / math.sqrt(d) if "g" in p else 1.0,
                    "train_loss": float(res.risk[i, k]) / d, "test_error": float(test[i, k]),
                    "q": float(ov["q"].reshape(-1)[0]), "m": m, "theta": th, "branch": classify(m, th),
                    "stop": res.stop[i][k], "steps": int(res.steps[i, k]), "seconds": secs,
                })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, default=300)
    ap.add_argument("--alphas", default="1.0:1.5:6")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--max-steps", type=int, default=10000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lo, hi, k = a.alphas.split(":")
    alphas = [float(x) for x in np.linspace(float(lo), float(hi), int(k))]
    s0, s1 = (int(x) for x in a.seeds.split("-"))
    torch.set_num_threads(1)
    rows = []
    for alpha in alphas:
        rows += run(a.d, round(alpha, 6), list(range(s0, s1 + 1)), a.tol, a.max_steps)
        print(f"alpha {alpha:.4g}: {len(rows)} runs", flush=True)
        write_csv(a.out, rows)


if __name__ == "__main__":
    main()
