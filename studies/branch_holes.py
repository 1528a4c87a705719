"""Holes in followed branches: an ``alpha`` where a branch is absent between two ``alpha`` where it
exists, with no end of the branch (a fold, or a collapse onto the trivial branch) located between
(docs/model.md (5.1), (5.3); docs/solver.md "Where a branch exists").

For each case ``(sigma, lambda, omega)`` every branch is followed over an ``alpha`` grid by
:func:`attnphase.theory.branches.follow_branch` on the coarse rule of the ``fast`` preset (the
semantic and mixed branches downward from the top, the others upward, as ``curves`` and
``transition`` follow them), and :func:`attnphase.theory.branches.branch_holes` lists the holes.
Prints per case and branch the ``alpha`` where the branch exists, the ends located (kind and
``alpha``) and the holes; exits with status 1 if there is any hole. Usage:

    python studies/branch_holes.py [--cases SIGMA:LAMBDA:OMEGA ...] [--alpha 0.05:1.5:30] [--log]
                                   [--branches semantic,positional,trivial]

(the default cases, 30 points: about 10-20 min on one core.)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import BranchPoint, branch_holes, branches_for, follow_branch, semantic_side
from attnphase.theory.fixed_point import FAST, SolverSettings

#: (sigma, lambda, omega) of the default scan: sigma across the box at the reference ridge and
#: omega, two other ridges, two other omegas
CASES = ((0.3, 0.01, 0.3), (0.7, 0.01, 0.3), (1.0, 0.01, 0.3), (2.0, 0.01, 0.3),
         (0.5, 1e-3, 0.3), (0.5, 0.1, 0.3), (0.5, 0.01, 0.0), (0.5, 0.01, 0.6))


def scan(spec: ModelSpec, alphas: Sequence[float], branches: Sequence[str] | None = None,
         settings: SolverSettings | None = None) -> dict[str, tuple[list[BranchPoint], list[float]]]:
    """Every branch of ``spec`` (or ``branches``) followed over ``alphas`` (a semantic side
    downward, the others upward) and its holes: ``{branch: (points in increasing alpha, holes)}``."""
    settings = settings or SolverSettings(**FAST)
    grid = sorted(float(a) for a in alphas)
    out = {}
    for br in branches or branches_for(spec):
        down = br == semantic_side(spec) or br == "semantic"
        pts = follow_branch(spec, grid[::-1] if down else grid, br, settings)
        pts = pts[::-1] if down else pts
        out[br] = (pts, branch_holes(pts))
    return out


def _describe(pts: list[BranchPoint]) -> str:
    have = [p.alpha for p in pts if p.exists]
    ends = {(e["kind"], round(e["alpha"], 4)) for p in pts for e in p.diagnostics.get("ends", [])}
    where = "nowhere" if not have else ", ".join(f"{a:g}" for a in have)
    return f"exists at {where}; ends: " + (", ".join(f"{k} at {a:g}" for k, a in sorted(ends, key=lambda e: e[1]))
                                          or "none located")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=[f"{s}:{lam}:{w}" for s, lam, w in CASES],
                    help="sigma:lambda:omega of each case")
    ap.add_argument("--alpha", default="0.05:1.5:30", help="alpha grid start:stop:num")
    ap.add_argument("--log", action="store_true", help="space the alpha grid geometrically")
    ap.add_argument("--branches", default=None, help="comma-separated branches (default: all of the model's)")
    args = ap.parse_args()
    lo, hi, n = args.alpha.split(":")
    grid = (np.geomspace if args.log else np.linspace)(float(lo), float(hi), int(n)).tolist()
    branches = args.branches.split(",") if args.branches else None
    any_hole = False
    for case in args.cases:
        sigma, lam, omega = (float(v) for v in case.split(":"))
        spec = ModelSpec(sigma=sigma, lam=lam, omega=omega)
        t0 = time.perf_counter()
        try:
            res = scan(spec, grid, branches)
        except Exception as exc:  # (a crash of the solver is a finding of the scan, not its end)
            print(f"sigma {sigma:g} lambda {lam:g} omega {omega:g}: failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        dt = time.perf_counter() - t0
        for br, (pts, holes) in res.items():
            any_hole |= bool(holes)
            print(f"sigma {sigma:g} lambda {lam:g} omega {omega:g} {br}: {_describe(pts)}; holes: "
                  f"{', '.join(f'{a:g}' for a in holes) or 'none'}", flush=True)
        print(f"  ({dt:.0f} s)", flush=True)
    return 1 if any_hole else 0


if __name__ == "__main__":
    sys.exit(main())
