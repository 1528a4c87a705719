"""Cost of one proximal problem where the prior is weak, and why (docs/solver.md, "Known
limitations", speed across the box).

At the trivial branch's coarse point (preset ``fast``) of the reference solve (``alpha = 1``,
``omega = 0.3``) and of the slow points of the box (``bench_box.NAMED``: rank 2 at small
``alpha``, the untied student at small ``lambda``): the median time of a full data step over
``--repeats`` (the multi-start Newton solve of docs/model.md (3.2) at every node), per proximal
problem solved (starts x nodes x tokens x fields, :attr:`Saddle.solved`); the nodes whose best
minimum is not converged (gradient above 1e-9) when each start may take 20 Newton steps instead of
100; and the objective's curvature at the minimisers along the symmetry of the scores that only
the prior breaks, against a random direction and against ``1/V``: the rotations ``h -> h R`` of
rank-2 fields (scores ``h h^T``), the rescaling ``(hQ, hK) -> (c hQ, hK / c)`` of untied keys and
queries (scores ``hQ hK^T``).

    python benchmarks/bench_prox_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.branches import solve_point
from attnphase.theory.channels import objective_batch, prox_batch
from attnphase.theory.fixed_point import make_saddle

CASES = {
    "reference, alpha 1": (ModelSpec(omega=0.3), 1.0, None),
    "rank 2, alpha 0.0628": (ModelSpec(omega=0.1433, sigma=1.11, lam=0.0007325, rank=2), 0.06281, "rotation"),
    "untied, lambda 1.3e-4": (ModelSpec(omega=0.7158, sigma=1.144, lam=0.0001289, variant="untied"), 0.5668,
                              "rescaling"),
    "rank 2, alpha 1": (ModelSpec(omega=0.3, rank=2), 1.0, "rotation"),
}


def generator(h: np.ndarray, symmetry: str) -> np.ndarray:
    """The direction of ``symmetry`` at the fields ``h`` (N, L, F), unit norm per node."""
    if symmetry == "rotation":
        g = np.einsum("nla,ab->nlb", h, np.array([[0.0, -1.0], [1.0, 0.0]]))
    else:
        g = h * np.array([1.0, -1.0])
    return g / np.linalg.norm(g.reshape(len(g), -1), axis=1)[:, None, None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    st = SolverSettings.preset("fast")
    print(f"{'case':<24} {'V':>8} {'step ms':>8} {'ns/problem':>10} {'unconv@20':>9} {'curv sym':>9} "
          f"{'curv rand':>9} {'1/V':>8}")
    for name, (spec, alpha, symmetry) in CASES.items():
        p = solve_point(spec, alpha, "trivial", st, error_estimate=False)
        sd = make_saddle(spec, alpha, st)
        op = p.order_params
        assert op is not None, p.reason
        w, hstar, *_ = sd.fields(op)
        T = sd.target(hstar)
        starts = sd.full_starts(w, hstar, T, op.V)
        times = []
        for _ in range(a.repeats):
            solved = sd.solved
            t0 = time.perf_counter()
            sd.data_step(op)
            times.append(time.perf_counter() - t0)
        per = statistics.median(times) / (sd.solved - solved)
        short = prox_batch(w, T, op.V, sd.C, sd.amap, starts=starts, max_iter=20)
        unconverged = int(np.sum(short.grad_norm > 1e-9))
        row = (f"{name:<24} {float(np.max(np.diag(op.V))):8.3g} {1e3 * statistics.median(times):8.1f} "
               f"{1e9 * per:10.0f} {unconverged:9d}")
        if symmetry is None:
            print(row)
            continue
        full = prox_batch(w, T, op.V, sd.C, sd.amap, starts=starts)
        h = full.h
        rng = np.random.default_rng(0)
        rand = rng.normal(size=h.shape)
        rand /= np.linalg.norm(rand.reshape(len(rand), -1), axis=1)[:, None, None]
        args = (w, T, op.V, sd.C, sd.amap)
        print(f"{row} {curvature(h, generator(h, symmetry), args):9.2e} {curvature(h, rand, args):9.2e} "
              f"{1 / float(np.max(np.diag(op.V))):8.2e}")
        pairs = duplicate_pairs(full.candidates, full.candidate_values, symmetry)
        if pairs:
            cos, dist, gap = (np.array(x) for x in zip(*pairs, strict=True))
            print(f"{'':<24} {len(cos)} nodes with a second minimum within 1e-2 and a relative 1e-9 of the lowest: "
                  f"distance median {np.median(dist):.1e}, value gap median {np.median(gap):.1e}, |cos| with the "
                  f"{symmetry}'s generator median {np.median(cos):.3f}, smallest {np.min(cos):.2f}")


def curvature(h: np.ndarray, d: np.ndarray, args: tuple, eps: float = 1e-4) -> float:
    """Median over the nodes of the proximal objective's second difference at ``h`` along the
    unit directions ``d`` (``args``: the rest of :func:`objective_batch`'s arguments)."""
    f0 = objective_batch(h, *args)[0]
    fp, fm = objective_batch(h + eps * d, *args)[0], objective_batch(h - eps * d, *args)[0]
    return float(np.median((fp + fm - 2 * f0) / eps**2))


def duplicate_pairs(cand: np.ndarray, values: np.ndarray, symmetry: str) -> list[tuple[float, float, float]]:
    """Per node whose second-lowest distinct candidate lies within 1e-2 (max-norm) of the lowest
    and within a relative 1e-9 in value: ``|cos|`` of their difference with the generator of
    ``symmetry`` at the lowest, the distance and the value gap."""
    out = []
    for i in range(len(cand)):
        order = np.argsort(values[i])
        h1 = cand[i, order[0]]
        g = generator(h1[None], symmetry)[0]
        for k in order[1:]:
            d = cand[i, k] - h1
            n = float(np.abs(d).max())
            gap = float(values[i, k] - values[i, order[0]])
            if 1e-7 < n < 1e-2 and gap <= 1e-9 * abs(float(values[i, order[0]])) + 1e-14:
                out.append((abs(float(np.sum(d * g))) / float(np.linalg.norm(d)), n, gap))
                break
    return out


if __name__ == "__main__":
    main()
