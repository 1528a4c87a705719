"""Scatter of the conjugates of cross-attention on the fine rules (docs/model.md (10.6)).

At the refined fixed points of the three branches of the reference case (``alpha = 1``,
``omega = 0.3``, ``L = L' = 2``; refined on order 11, no error target), one full data step on
``--scrambles`` independent fine rules of order ``--order`` of each kind, and the relative standard
deviation over the scrambles of ``q_hat``, ``m_hat`` (first query, first key), ``V_hat``,
``theta_hat`` and ``E[M]``. Kinds: ``plain`` (the Sobol net in all 8 dimensions), ``contrasts``
(drawn without the keys' common shift: ``fine_rules.key_basis_for``), ``contrasts+scale`` (and the
teacher scale 1.4). The sign copies are the branch's (``fine_rules.FINE_COPIES``).

Usage: ``python benchmarks/cross_rules.py [--order 13] [--scrambles 8] [--kinds plain,contrasts]``
(order 13, 8 scrambles: about a minute per kind on 2 cores)
"""

from __future__ import annotations

import argparse

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.fine_rules import FINE_COPIES, key_basis_for
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.target import solve_refined


def main() -> None:
    p = argparse.ArgumentParser(description="scatter of cross-attention's conjugates on its fine rules")
    p.add_argument("--order", type=int, default=13)
    p.add_argument("--scrambles", type=int, default=8)
    p.add_argument("--kinds", default="plain,contrasts,contrasts+scale")
    a = p.parse_args()
    spec = ModelSpec(variant="cross", omega=0.3)
    settings = SolverSettings.preset("default", target_error=0.0)
    for branch in ("semantic", "positional", "trivial"):
        op = solve_refined(spec, 1.0, branch, settings).order_params
        copies = FINE_COPIES[branch]
        for kind in a.kinds.split(","):
            rows = []
            for k in range(a.scrambles):
                sd = make_saddle(spec, 1.0, settings, order=a.order, seed=104729 * (k + 1), copies=copies,
                                 basis=key_basis_for(spec, copies) if kind.startswith("contrasts") else None,
                                 teacher_scale=1.4 if kind.endswith("scale") else 1.0)
                ds = sd.data_step(op, switch_width=settings.switch_width)
                h = ds.hats
                rows.append([h.q_hat[0, 0], h.m_hat[0, 0], h.m_hat[2, 0], h.V_hat[0, 0], h.theta_hat[0, 0], ds.mean_M])
            x = np.asarray(rows)
            mean = x.mean(axis=0)
            rel = np.where(np.abs(mean) > 1e-14, x.std(axis=0, ddof=1) / np.maximum(np.abs(mean), 1e-300), 0.0)
            print(f"{branch:<10} {kind:<16} relative std over {a.scrambles} scrambles of order {a.order}: "
                  + ", ".join(f"{n} {v:.2e}" for n, v in zip(("q_hat", "m_hat[q]", "m_hat[k]", "V_hat", "theta_hat",
                                                             "E[M]"), rel, strict=True)), flush=True)


if __name__ == "__main__":
    main()
