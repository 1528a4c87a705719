"""Many minima on the positional branch of Gaussian-mixture tokens (docs/mixture.md).

On ONE training set (``omega = 0.3``, reference mixture ``rho_mu``, ``kappa``), gradient descent
(lr 0.15, heavy-ball momentum 0.9, float64, until ``||grad R||_F / sqrt(d) < tol``) from several
positional starts: the simulator's own positional start and ``--starts`` more, each the same
positional part plus ``scale N(0, I_d)`` noise (scales cycling through ``--scales``, one noise
stream per start). For every start it writes ``q``, ``|m|``, ``theta``, ``s_1``, ``eps_t``,
``eps_g`` (fresh test set), the final gradient norm and the steps; for every pair of starts the
mutual overlap ``Q_a^T Q_b / d``. A replica-symmetric fixed point describes a unique minimum
(to ``O(d^-1/2)``): all starts reach the same ``Q`` and the mutual overlap equals ``q``. Distinct
end points with mutual overlaps clearly below ``q`` mean many minima.

The runs of docs/mixture.md (one process each, single-threaded torch, a few minutes of CPU):

    python studies/mixture_positional.py --d 1000 --kappa 0.5 --seed 0 --starts 8 --scales 0.1,0.3,0.6 \
        --out docs/data/mixture_positional_k0.5_seed0.csv
    python studies/mixture_positional.py --d 1000 --kappa 0.5 --seed 1 --starts 8 --scales 0.1,0.2,0.3 \
        --out docs/data/mixture_positional_k0.5_seed1.csv
    python studies/mixture_positional.py --d 1000 --kappa 0 --seed 1 --starts 8 --scales 0.1,0.2,0.3 \
        --out docs/data/mixture_positional_k0_seed1.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import time

import numpy as np
import torch

from attnphase.sim.data import make_dataset
from attnphase.sim.models import test_errors
from attnphase.sim.simulate import overlaps
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec, parse_range


def run(d: int, alpha: float, rho: float, kappa: float, seed: int, starts: int, scales: list[float],
        tol: float, max_steps: int) -> tuple[list[dict], np.ndarray]:
    spec = ModelSpec(omega=0.3, mixture=2, mixture_sep=rho, mixture_align=kappa)
    ds = make_dataset(spec, d, round(alpha * d), seed)
    batch = stack_batch([ds])
    P0 = [init_params(spec, [ds], ("positional",))["P"][0, 0]]  # (the simulator's start)
    labels = [("sim", 0.1)]
    gen = torch.Generator().manual_seed(1000 + seed)
    u = torch.zeros(spec.L, dtype=torch.float64)
    u[0] = 1.0
    positional = (u @ ds.Pi.to(torch.float64) / math.sqrt(d))[:, None]  # (its positional part)
    for j in range(starts):
        sc = scales[j % len(scales)]
        P0.append(positional + sc * torch.randn(d, 1, generator=gen, dtype=torch.float64))
        labels.append((f"noise{j}", sc))
    params = {"P": torch.stack(P0)[None]}
    settings = TrainSettings(optimizer="gd", lr=0.15, momentum=0.9, tol=tol, max_steps=max_steps, log_every=0)
    t0 = time.perf_counter()
    res = train(spec, batch, params, settings)
    test = test_errors(spec, [ds.test_chunks()], res.params, d)[0]
    rows = []
    for k, (name, sc) in enumerate(labels):
        ov = overlaps(spec, ds, {"P": res.params["P"][0, k]})
        rows.append({"d": d, "alpha": alpha, "rho_mu": rho, "kappa": kappa, "seed": seed, "start": name,
                     "scale": sc, "q": float(ov["q"][0, 0]), "m": abs(float(ov["m"][0, 0])),
                     "theta": float(ov["theta"][0, 0]), "s_1": float(ov["s"][0, 0]),
                     "eps_t": float(res.risk[0, k]) / d, "eps_g": float(test[k]),
                     "grad_norm": float(res.grad_norm[0, k]), "steps": int(res.steps[0, k]),
                     "stop": res.stop[0][k], "seconds": round(time.perf_counter() - t0, 1)})
    Q = res.params["P"][0, :, :, 0]
    return rows, (Q @ Q.T / d).numpy()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--rho", type=float, default=1.0)
    p.add_argument("--kappa", type=float, default=0.5)
    p.add_argument("--seed", default="0", help="dataset seeds (list or start:stop:num)")
    p.add_argument("--starts", type=int, default=8, help="noisy positional starts besides the simulator's")
    p.add_argument("--scales", default="0.1,0.3,0.6", help="noise scales of the extra starts (cycled)")
    p.add_argument("--tol", type=float, default=1e-9)
    p.add_argument("--max-steps", type=int, default=20000)
    p.add_argument("--out", help="CSV of the runs (the mutual overlaps go to OUT with .mutual.csv)")
    args = p.parse_args()
    torch.set_num_threads(1)
    scales = [float(s) for s in args.scales.split(",")]
    all_rows, mutual = [], []
    for seed in parse_range(args.seed, "--seed"):
        rows, M = run(args.d, args.alpha, args.rho, args.kappa, int(seed), args.starts, scales, args.tol,
                      args.max_steps)
        for r in rows:
            print({k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
        iu = np.triu_indices(M.shape[0], 1)
        print(f"seed {int(seed)}: mutual overlaps min {M[iu].min():.5f} max {M[iu].max():.5f}; "
              f"q min {np.diag(M).min():.5f} max {np.diag(M).max():.5f}", flush=True)
        all_rows += rows
        for a, b in zip(*iu, strict=True):
            mutual.append({"seed": int(seed), "a": rows[a]["start"], "b": rows[b]["start"], "overlap": float(M[a, b]),
                           "q_a": float(M[a, a]), "q_b": float(M[b, b])})
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(all_rows[0]))
            w.writeheader()
            w.writerows(all_rows)
        with open(args.out.replace(".csv", ".mutual.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(mutual[0]))
            w.writeheader()
            w.writerows(mutual)


if __name__ == "__main__":
    main()
