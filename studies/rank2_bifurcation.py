"""Where does the rank-2 student's mixed branch leave the positional one (docs/model.md (5.5))?

Two measurements on one QMC rule (symmetrised, ``order`` given, no refinement), at
``omega`` (default 0.3):

* ``J(alpha)``: the linear response of the free axis's semantic overlap at the positional fixed
  point, ``dF_theta[1] / dtheta[1]`` of the fixed-point map ``F`` (weights step after the data
  step, docs/model.md (2.1), (3.3); axis 1 is the student axis without positional overlap). That
  overlap is the only unknown that is odd both under the reflection of axis 1 and under the sign
  of the teacher, so the Jacobian of ``F - id`` is singular in that sector exactly where ``J = 1``:
  the bifurcation point ``alpha_b`` where a branch with ``theta != 0`` on the free axis (the
  mixed branch) leaves the positional one.
* the mixed branch followed down in ``alpha`` (steps 0.01) and the positional branch up, on the
  same rule: ``|theta|^2`` of the mixed branch against ``alpha`` (it falls linearly to 0 at
  ``alpha_b`` for a continuous bifurcation) and the training-error difference mixed minus
  positional (``-(alpha - alpha_b)^2`` for a continuous bifurcation, a sign change at a finite
  angle for a crossing).

Usage (about 1 min at order 8, 4 min at order 10 on 2 cores)::

    python studies/rank2_bifurcation.py [--omega 0.3] [--order 10] [--seed 0] [--lo 0.55] [--hi 0.8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import follow_branch
from attnphase.theory.fixed_point import SolverSettings, make_saddle


def free_axis_response(spec: ModelSpec, point, settings: SolverSettings, eps: float = 1e-3) -> float:
    """``J = dF_theta[1,0] / dtheta[1,0]`` at the positional fixed point ``point`` (one-sided
    difference: ``F_theta[1,0] = 0`` at the point, and the symmetrised rule makes it odd)."""
    op = point.order_params
    sd = make_saddle(spec, point.alpha, settings)
    th = op.theta.copy()
    h = eps * sd.s2
    th[1, 0] += h
    hats = sd.data_step(op.replace(theta=th), switch_width=settings.switch_width).hats
    K = spec.lam * np.eye(sd.F) + sd.s2 * hats.V_hat
    out = sd.s2 * np.linalg.inv(K) @ hats.theta_hat @ sd.rho  # the weights step (2.1), ungauged
    return float(out[1, 0] / h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--order", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lo", type=float, default=0.55)
    ap.add_argument("--hi", type=float, default=0.8)
    ap.add_argument("--step", type=float, default=0.01)
    args = ap.parse_args()
    spec = ModelSpec(omega=args.omega, rank=2)
    st = SolverSettings.preset("fast", order=args.order, seed=args.seed, refine_order=0)
    grid = np.round(np.arange(args.hi, args.lo - 1e-9, -args.step), 6)
    t0 = time.time()
    mixed = {p.alpha: p for p in follow_branch(spec, grid, "mixed", st)}
    pos = {p.alpha: p for p in follow_branch(spec, grid[::-1], "positional", st)}
    print(f"# omega = {args.omega}, QMC order {args.order}, seed {args.seed}")
    print("alpha,J_free,theta_mixed,theta2_mixed,m_mixed,train_mixed,train_positional,diff")
    for a in grid[::-1]:
        p, x = pos[float(a)], mixed[float(a)]
        J = free_axis_response(spec, p, st) if p.exists else float("nan")
        th = x.theta if x.exists else float("nan")
        tm = x.train_loss if x.exists else float("nan")
        tp = p.train_loss if p.exists else float("nan")
        print(f"{a:.4f},{J:.5f},{th:.5f},{th * th:.6f},{x.m if x.exists else float('nan'):.5f},"
              f"{tm:.9f},{tp:.9f},{tm - tp:.3e}", flush=True)
    print(f"# {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
