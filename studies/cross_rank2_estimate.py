"""The refinement's error estimate of rank-2 cross-attention against the scatter over seeds
(docs/solver.md, "Known limitations").

For each seed, the semantic branch of the tied cross-attention student at rank 2 (``L = L' = 2``,
``omega = 0.3``) with the ``fast`` preset at refinement order ``--order`` (as ``attnphase solve
--variant cross --rank 2 --alpha A --omega 0.3 --preset fast --branch semantic --seed S
[--refine-order K]``): the refined ``theta`` and its estimate ``error_estimate["theta_user"]``;
then over the seeds the relative standard deviation of ``theta`` against the rms of the
estimates. Two variants of the fine rules, for the measurement only:

* ``--full-noise``: the fine rules drawn in the full noise, the keys' common shift kept
  (``fine_rules.key_basis_for`` returns ``None``; docs/model.md (10.6));
* ``--converge-rules``: each fine rule's own fixed point solved to ``RULE_SOLVE_TOL`` (up to 30
  evaluations) instead of stopping at ``RULE_SOLVE_REL`` of its offset
  (``rule_errors.rule_fixed_points``).

One JSON line per seed, then the summary line. About 20 s of CPU per seed at order 10 and 55 s at
order 12 (2 cores). Usage:

    python studies/cross_rank2_estimate.py --alpha 1 --seeds 0-7
    python studies/cross_rank2_estimate.py --alpha 1 --seeds 0-3 --order 12 [--converge-rules]
    python studies/cross_rank2_estimate.py --alpha 1 --seeds 0-3 --full-noise [--order 12]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import attnphase as ap
from attnphase.theory import fine_rules, rule_errors
from attnphase.theory.fixed_point import SolverSettings


def seeds_of(text: str) -> list[int]:
    """``"0-3"`` or ``"0,2,5"``."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--seeds", default="0-3")
    p.add_argument("--order", type=int, default=10, help="refinement order (fast preset: 10)")
    p.add_argument("--full-noise", action="store_true", help="fine rules with the keys' common shift")
    p.add_argument("--converge-rules", action="store_true", help="each rule's own fixed point to convergence")
    a = p.parse_args()
    if a.full_noise:
        fine_rules.key_basis_for = lambda spec, copies: None  # type: ignore[assignment]
    if a.converge_rules:
        rule_errors.RULE_SOLVE_REL = 0.0
        rule_errors.RULE_SOLVE_MAX_EVALS = 30
    thetas, ests = [], []
    for seed in seeds_of(a.seeds):
        t0 = time.process_time()
        st = SolverSettings.preset("fast", seed=seed, refine_order=a.order)
        b = ap.solve(a.alpha, branch="semantic", settings=st, omega=0.3, variant="cross", rank=2).branches["semantic"]
        est = None if b.estimate is None else b.estimate.get("theta_user")
        thetas.append(b.theta)
        ests.append(np.nan if est is None else est)
        print(json.dumps({"seed": seed, "theta": b.theta, "q": b.q, "test_error": b.test_error,
                          "estimate_theta": est, "cpu_seconds": round(time.process_time() - t0, 1)}), flush=True)
    th, es = np.array(thetas), np.array(ests)
    summary = {"alpha": a.alpha, "order": a.order, "full_noise": a.full_noise, "converge_rules": a.converge_rules,
               "seeds": len(th), "theta_mean": float(th.mean()),
               "theta_rel_sd": float(th.std(ddof=1) / th.mean()) if len(th) > 1 else None,
               "estimate_rms": float(np.sqrt(np.nanmean(es**2))),
               "estimate_range": [float(np.nanmin(es)), float(np.nanmax(es))]}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
