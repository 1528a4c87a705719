"""Which value scalings enter the training error at leading order (docs/model.md (6.4)):
the full value ``V = I + M / sqrt(d)`` with the ridge ``(lambda/2) ||M||_F^2`` against ``d``.

The derivation of (6.4) predicts that this value moves ``R/d`` only by ``O(1 / (lambda d))``: the
ridge keeps ``||M||_F = O(1)``, so ``||M / sqrt(d)||_F = O(d^-1/2)`` and its identity part
``tr(M) / d^1.5 = O(1/d)``. For each ``d`` the semantic and positional starts are trained with the
identity and the full value on the same data; the CSV has, per run, the change of ``R/d`` (full
minus identity), ``||M / sqrt(d)||_F``, the operator norm and ``tr(M) / d^1.5`` (the gain that the
full value picks up), and the last training loss of both.

    python studies/value_scaling.py --ds 50,100,200 --alpha 1.25 --seeds 0-1 --out docs/data/value_scaling.csv

Training: GD with momentum 0.9, lr 0.15, tol 1e-5, float32, at most 4000 steps (the settings of
the low-rank check of docs/questions.md Q3).
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from _write_csv import write_csv

from attnphase.sim.data import make_dataset, n_samples
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec

INITS = ("semantic", "positional")


def run(d: int, alpha: float, seeds: list[int]) -> list[dict]:
    st = TrainSettings(momentum=0.9, tol=1e-5, max_steps=4000, dtype="float32", log_every=0)
    base = ModelSpec(omega=0.3)
    n = n_samples(alpha, d)
    datasets = [make_dataset(base, d, n, s, keep_labels=True, dtype=torch.float32) for s in seeds]
    batch = stack_batch(datasets)
    out = {}
    for value in ("identity", "full"):
        spec = base.replace(value=value)
        t0 = time.perf_counter()
        out[value] = (train(spec, batch, init_params(spec, datasets, INITS), st), time.perf_counter() - t0)
    rows = []
    ident, full = out["identity"][0], out["full"][0]
    for i, ds in enumerate(datasets):
        for k, init in enumerate(INITS):
            Ms = full.params["M"][i, k].double() / math.sqrt(d)
            rows.append({
                "d": d, "alpha": alpha, "seed": ds.seed, "init": init,
                "train_identity": float(ident.risk[i, k]) / d, "train_full": float(full.risk[i, k]) / d,
                "delta_train": float(full.risk[i, k] - ident.risk[i, k]) / d,
                "M_fro": float(torch.linalg.matrix_norm(Ms)), "M_op": float(torch.linalg.matrix_norm(Ms, ord=2)),
                "gain_part": float(torch.trace(Ms)) / d,
                "stop_identity": ident.stop[i][k], "stop_full": full.stop[i][k],
                "seconds_full": out["full"][1],
            })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ds", default="50,100,200")
    ap.add_argument("--alpha", type=float, default=1.25)
    ap.add_argument("--seeds", default="0-1")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s0, s1 = (int(x) for x in a.seeds.split("-"))
    torch.set_num_threads(1)
    rows: list[dict] = []
    for d in (int(x) for x in a.ds.split(",")):
        rows += run(d, a.alpha, list(range(s0, s1 + 1)))
        print(f"d {d}: {len(rows)} runs", flush=True)
        write_csv(a.out, rows)


if __name__ == "__main__":
    main()
