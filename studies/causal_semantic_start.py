"""The causal student's semantic branch when every sample's field takes the minimum reached from
the teacher's fields instead of the global minimum (docs/variants.md, "Causal student").

Gradient descent from the semantic start begins at ``Q = Q*``, where every training sample's
student fields equal its teacher fields, and moves them continuously. Here the data step's
proximal problem (docs/model.md (3.2)) is solved from one start, the teacher's fields at the
student's norm, ``h_0 = sqrt(q / rho) h*`` (paper convention), and each node keeps the local
minimum that start reaches (``--selection start``) instead of the lowest of the full multi-start
set (``--selection global``, the library's equations); ``V_hat`` is taken in the Stein form
(``--response stein``) or followed locally (``--response local``,
:meth:`attnphase.theory.saddle.Saddle.local_v_hat`). Every other part of the equations is the
library's. Per QMC scramble the semantic branch is followed down ``--alphas`` from the library's
semantic point at the first ``alpha`` (warm starts, ``fast`` tolerances).

    python studies/causal_semantic_start.py --order 10 --seeds 0 1 2               # about 2 min
    python studies/causal_semantic_start.py --order 10 --seeds 0 1 2 --response local
    python studies/causal_semantic_start.py --control --alphas 2 1.5 1.2 1.0164 --order 10 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.channels import escape_saddles, prox_batch
from attnphase.theory.fixed_point import FAST, SolverSettings, make_saddle, solve_fixed_point
from attnphase.theory.saddle import DataStep, OrderParams, Saddle


class StartSaddle(Saddle):
    """:class:`Saddle` whose nodes keep the minimum reached from the teacher's fields at the
    student's norm (module docstring)."""

    def data_step(self, op: OrderParams, starts: np.ndarray | None = None, switch_width: float = 0.0) -> DataStep:
        w, hstar, qis, qinv, R = self.fields(op)
        T = self.target(hstar)
        h0 = np.ascontiguousarray((hstar * np.sqrt(float(op.q[0, 0]) / self.s2))[:, None])
        prox = prox_batch(w, T, op.V, self.C, self.amap, starts=h0)
        prox = escape_saddles(prox, w, T, op.V, self.C, self.amap, h0)
        return self.data_from(op, prox, 0.0, (w, T, qis, qinv, R))


def follow(spec: ModelSpec, alphas: list[float], S: SolverSettings, seed: int, selection: str, response: str,
           start: OrderParams) -> list[tuple[float, OrderParams | None, str]]:
    out: list[tuple[float, OrderParams | None, str]] = []
    op = start
    for a in alphas:
        sd = make_saddle(spec, a, S, seed=seed)
        resp = "local" if response == "local" else "global"
        if selection == "start":
            sd = StartSaddle(sd.spec, sd.alpha, sd.rule, response=resp)
        elif resp == "local":
            sd = Saddle(sd.spec, sd.alpha, sd.rule, response=resp)
        res = solve_fixed_point(sd, op, S)
        q, m, th = sd.user_units(res.op)
        if abs(float(th[0, 0])) < 1e-3:
            out.append((a, None, "converged to the trivial branch"))
            break
        out.append((a, res.op, "converged" if res.converged else f"not converged: {res.reason}"))
        op = res.op
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alphas", type=float, nargs="+", default=[2.0, 1.75, 1.62, 1.5])
    ap.add_argument("--order", type=int, default=10, help="log2 of the QMC base sample")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="QMC scrambles")
    ap.add_argument("--selection", choices=["start", "global"], default="start")
    ap.add_argument("--response", choices=["stein", "local"], default="stein")
    ap.add_argument("--control", action="store_true", help="the tied student (default model) instead")
    args = ap.parse_args()
    spec = ModelSpec(omega=0.3) if args.control else ModelSpec(omega=0.3, variant="causal")
    S = SolverSettings(**{**FAST, "order": args.order, "tol": 1e-7, "noise_tol": 1e-5, "max_iter": 600})
    t0 = time.time()
    first = solve_point(spec, args.alphas[0], "semantic", SolverSettings.preset("fast", order=10, warmup_order=10),
                        error_estimate=False)
    if first.order_params is None:
        raise SystemExit(f"no semantic start at alpha {args.alphas[0]}: {first.reason}")
    rows: dict[float, list[tuple[float, float, float, bool]]] = {}
    for seed in args.seeds:
        for a, op, why in follow(spec, args.alphas, S, seed, args.selection, args.response, first.order_params):
            if op is None:
                print(f"seed {seed} alpha {a}: {why}", flush=True)
                continue
            q, m, th = Saddle.user_units(make_saddle(spec, a, S, seed=seed), op)
            rows.setdefault(a, []).append((float(th[0, 0]), float(q[0, 0]), float(op.V[0, 0]), why == "converged"))
            print(f"seed {seed} alpha {a}: theta {th[0, 0]:.4f} q {q[0, 0]:.4f} V {op.V[0, 0]:.3f} ({why}; "
                  f"{time.time() - t0:.0f} s)", flush=True)
    print(f"\nselection {args.selection}, response {args.response}, QMC order {args.order}, scrambles {args.seeds} "
          f"({'tied' if args.control else 'causal'}, omega 0.3): mean +- standard error")
    for a in sorted(rows, reverse=True):
        v = np.array(rows[a])
        se = v.std(0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.full(v.shape[1], np.nan)
        print(f"alpha {a:6.4f}: theta {v[:, 0].mean():.4f} +- {se[0]:.4f}  q {v[:, 1].mean():.4f} +- {se[1]:.4f}  "
              f"V {v[:, 2].mean():.3f} +- {se[2]:.3f}  ({int(v[:, 3].sum())} of {len(v)} converged)")


if __name__ == "__main__":
    main()
