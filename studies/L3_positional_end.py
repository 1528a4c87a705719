"""Where the L = 3 positional branch ends on one QMC rule (omega = 0.3), by pseudo-arclength
continuation on the fixed-point residual (docs/model.md (7.6)); the numbers of docs/variants.md
("L = 3").

The positional fixed point at ``alpha0`` on the rule of QMC order ``order`` (seed 0), then
:func:`attnphase.theory.continuation.arclength` up towards alpha = 1.5: prints where the branch
turns back (alpha and m there) and every point (alpha, m, q, the growth of ``DF - I`` and whether
the damped iteration holds the point). Usage:

    python studies/L3_positional_end.py ORDER ALPHA0     # e.g. 8 0.6, 10 0.4, 11 0.3
"""

from __future__ import annotations

import sys
import time

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.continuation import arclength
from attnphase.theory.fixed_point import FAST, SolverSettings

SPEC = ModelSpec(omega=0.3, sigma=0.5, lam=0.01, L=3)


def main(order: int, alpha0: float) -> None:
    s = SolverSettings(**{**FAST, "order": order})
    t0 = time.perf_counter()
    p = solve_point(SPEC, alpha0, "positional", s, error_estimate=False, thorough=True)
    print(f"start at alpha {alpha0}: exists {p.exists}, m {p.m_matrix} ({time.perf_counter() - t0:.0f} s)", flush=True)
    if not p.exists or p.order_params is None:
        return
    r = arclength(SPEC, p.order_params, alpha0, 1.5, "positional", s, past_fold=10)
    print(f"{r.message}; turn at alpha {r.fold} (m {r.fold_m}); {r.evaluations} data steps, "
          f"{time.perf_counter() - t0:.0f} s")
    for q in r.points:
        print(f"    alpha {q.alpha:.4f} m {q.m:.4f} q {q.q:.4f} growth {q.growth:+.3e} "
              f"{'held by the iteration' if q.stable else 'not held by the iteration'}")


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
