"""Command ``bayes``: the Bayes-optimal baseline (a thin shell over :func:`attnphase.bayes`).

docs/model.md section 8 defines what is computed; docs/bayes.md shows the numbers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from attnphase import api
from attnphase.cli.common import (
    OUTPUT,
    add_model_flags,
    alpha_grid,
    flag_group,
    print_record,
    spec_from_args,
    to_float,
    to_int,
)


def cmd_bayes(args: argparse.Namespace) -> int:
    """``attnphase bayes``: overlap and test error of the Bayes-optimal estimator against
    ``alpha``, the recovery thresholds, and optionally GAMP at finite ``d`` (docs/model.md section 8)."""
    spec = spec_from_args(args)
    noise = to_float(args.noise, "noise")
    grid = alpha_grid(args.alpha)
    gamp_d = None if args.gamp_d is None else to_int(args.gamp_d, "gamp-d")
    seeds = to_int(args.gamp_seeds, "gamp-seeds")
    seed0 = to_int(args.seed0, "seed0")
    res = api.bayes(grid, noise=noise, spec=spec, gamp_d=gamp_d, gamp_seeds=seeds, seed0=seed0)
    if args.json:
        print_record(args, res.to_dict())
        return 0
    w = sys.stdout.write
    t = res.thresholds
    w(f"Bayes-optimal baseline, L = {spec.L}, omega = {spec.omega:g}, sigma = {spec.sigma:g}, noise = {res.noise:g}\n")
    if t.get("alpha_PR") is None:
        w(f"alpha_WR = {t['alpha_WR']:.4f} +- {t['alpha_WR_error']:.1e} (weak recovery); with label noise the "
          f"teacher is not recovered perfectly at any alpha\n")
    else:
        w(f"alpha_WR = {t['alpha_WR']:.6f} (weak recovery), alpha_IT = {t['alpha_IT']:.6f} (perfect recovery, "
          f"information-theoretic), alpha_PR = {t['alpha_PR']:.6f} +- {_pr_error(t):.1e} (perfect recovery, GAMP)\n")
    gamp = {g["alpha"]: g for g in res.gamp}
    head = f"{'alpha':>8} {'overlap':>10} {'+-':>8} {'test error':>12} {'fixed points':>20}"
    if gamp:
        head += f" {'GAMP overlap':>16} {'conv.':>6}"
    w(head + "\n")
    for p in res.points:
        fp = ", ".join(f"{x:.4f}" for x in p["fixed_points"]) or "-"
        line = f"{p['alpha']:>8.4f} {p['overlap']:>10.6f} {p['overlap_error']:>8.1e} {p['test_error']:>12.7f} {fp:>20}"
        g = gamp.get(p["alpha"])
        if g is not None:
            line += f" {g['mean_overlap']:>9.4f} +- {g['sem']:.4f} {g['converged']:>3}/{len(g['runs'])}"
        w(line + "\n")
    w(f"linear baseline test error {res.linear_test_error:.7f} (the Bayes-optimal error below alpha_WR)\n")
    if not res.success:
        w(f"note: {res.message}\n")
    return 0


def _pr_error(t: Any) -> float:
    return max(float(t["alpha_PR_quadrature_error"]), float(t["alpha_PR_root_precision"]))


def register(sub: Any) -> None:
    """Add ``bayes`` to the ``attnphase`` command line."""
    p = sub.add_parser("bayes", help="the Bayes-optimal baseline: overlap, test error, recovery thresholds",
                       description=cmd_bayes.__doc__)
    add_model_flags(p)
    p.add_argument("--alpha", default="0.05:1:20", help="alpha values: one, a comma list or start:stop:num "
                   "(default 0.05:1:20)")
    p.add_argument("--noise", default="0", help="variance Delta of Gaussian noise on every entry of the observed T "
                   "(default 0; L = 2 only; seconds per alpha)")
    p.add_argument("--gamp-d", default=None, help="also run GAMP on the simulator's data at this d")
    p.add_argument("--gamp-seeds", default="4", help="GAMP datasets per alpha (default 4)")
    p.add_argument("--seed0", default="0", help="first GAMP seed (default 0)")
    flag_group(p, OUTPUT).add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bayes)
