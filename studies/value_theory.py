"""The theory of the trainable value gain against the identity value (docs/model.md (6.5),
docs/questions.md Q3): per ``alpha`` of a grid and per branch the optimal gain ``v`` and its error,
the training and test errors with the gain and with the identity value; then ``alpha_c`` of both.

    python studies/value_theory.py --alphas 1.0:1.5:6 --out docs/data/value_theory.csv

Default solver settings (``SolverSettings.preset("default")``: refined to an error target of
1e-3 on the overlaps). ``alpha_c`` of the gain by :func:`attnphase.theory.value.gain_transition`
on the same grid,
that of the identity by the same search at ``v = 1`` held fixed (``optimise=False``); both are
printed and written to ``OUT`` with ``.alpha_c.json`` in place of ``.csv``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _write_csv import write_csv

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import BranchPoint
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.target import solve_refined
from attnphase.theory.value import gain_transition, solve_gain


def train_se(point: BranchPoint) -> float:
    """The standard error of ``point``'s training error over its fine rules (NaN: none)."""
    se = None if point.refinement is None else point.refinement.error("train_loss")
    return float("nan") if se is None else se


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alphas", default="1.0:1.5:6")
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lo, hi, k = a.alphas.split(":")
    alphas = [round(float(x), 6) for x in np.linspace(float(lo), float(hi), int(k))]
    st = SolverSettings.preset("default")
    spec = ModelSpec(omega=a.omega)
    rows = []
    for alpha in alphas:
        for branch in ("semantic", "positional"):
            ident = solve_refined(spec, alpha, branch, st)
            g = solve_gain(spec.replace(value="gain"), alpha, branch, st)
            err = train_se(ident)
            gerr = train_se(g.point) if g.point is not None else float("nan")
            rows.append({"alpha": alpha, "branch": branch, "gain": g.gain, "gain_error": g.gain_error,
                         "gain_success": g.success, "train_identity": ident.train_loss, "train_identity_se": err,
                         "train_gain": g.train_loss, "train_gain_se": gerr, "test_identity": ident.test_error,
                         "test_gain": g.test_error, "theta_identity": ident.theta, "theta_gain": g.point.theta
                         if g.point is not None else float("nan"), "m_identity": ident.m,
                         "m_gain": g.point.m if g.point is not None else float("nan")})
            print(rows[-1], flush=True)
        write_csv(a.out, rows)
    tg = gain_transition(spec.replace(value="gain"), alphas, st)
    ti = gain_transition(spec, alphas, st, optimise=False)
    res = {"gain": {"alpha_c": tg.alpha_c, "alpha_c_error": tg.alpha_c_error, "message": tg.message,
                    "evaluations": [(a, s.gain, p.gain) for a, s, p in tg.points]},
           "identity": {"alpha_c": ti.alpha_c, "alpha_c_error": ti.alpha_c_error, "message": ti.message,
                        "evaluations": [a for a, _, _ in ti.points]}}
    print(res)
    with open(a.out.replace(".csv", ".alpha_c.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
