"""Where does the causal student's semantic branch end (L = 2, omega = 0.3)? Measures the fold of
the branch near alpha 1.61 reported in docs/variants.md ("Causal student").

Starts from the semantic fixed point at alpha = 2 with a small positional overlap added
(``m = 0.02 x`` the positional branch's ``m``: is the ``m = 0`` point stable in that direction?),
then follows the branch down in alpha (steps 0.05, then 0.01) with a secant predictor, the
damped/Anderson solver and, where it fails, the quasi-Newton root finder. Prints theta, m, q and
the errors at each alpha and where the branch is lost. Usage:

    python studies/causal_branch_end.py [order]      # QMC order, default 12 (about 70 s)
    python studies/causal_branch_end.py residual [order]
    python studies/causal_branch_end.py local [order]  # default 10 (about 15 s)

``local``: is GD's semantic state at alpha 1.5 the branch of a *local* proximal minimiser? The
branch followed down from alpha 2 with each node taking the global minimiser (the theory) and
with each node taking the local minimum reached by Newton from the prior mean ``w`` (the basin
of ``w``), side by side, and the fraction of nodes where the two differ.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy.optimize import least_squares

from attnphase.spec.problem import ModelSpec
from attnphase.theory import saddle as saddle_module
from attnphase.theory.branches import follow_branch, solve_point, to_point
from attnphase.theory.fixed_point import (
    FAST,
    SolverSettings,
    make_saddle,
    quasi_newton,
    solve_fixed_point,
    warm_starts,
)
from attnphase.theory.saddle import OrderParams

SPEC = ModelSpec(omega=0.3, sigma=0.5, lam=0.01, variant="causal")


def settings(order: int) -> SolverSettings:
    return SolverSettings(**{**FAST, "order": order, "tol": 1e-7, "noise_tol": 1e-5, "max_iter": 600})


def user(sd, op: OrderParams) -> tuple[float, float, float]:
    """q, m, theta in user units (first entries)."""
    q, m, theta = (float(np.ravel(v)[0]) for v in sd.user_units(op))
    return q, m, theta


def main(order: int) -> None:
    spec, S = SPEC, settings(order)
    t0 = time.time()
    sem = solve_point(spec, 2.0, "semantic", S, error_estimate=False)
    pos = solve_point(spec, 2.0, "positional", S, error_estimate=False)
    sd = make_saddle(spec, 2.0, S)
    res = solve_fixed_point(sd, sem.order_params.replace(m=0.02 * pos.order_params.m), S)
    xs, als = [res.op.to_vector()], [2.0]
    alphas = [1.9, 1.85, 1.8, 1.75, 1.7] + [round(1.69 - 0.01 * i, 2) for i in range(30)]
    for a in alphas:
        sd = make_saddle(spec, a, S)
        x0 = xs[-1] if len(xs) < 2 else xs[-1] + (xs[-1] - xs[-2]) * (a - als[-1]) / (als[-1] - als[-2])
        res = solve_fixed_point(sd, OrderParams.from_vector(x0, sd.L, sd.F, sd.rs), S)
        q, m, th = user(sd, res.op)
        if res.converged and abs(th) > 1e-3:
            p = to_point(spec, a, "semantic", sd, res)
            print(f"alpha {a}: theta {th:.4f} m {m:.4f} q {q:.4f} train {p.train_loss:.6f} "
                  f"test {p.test_error:.6f} ({res.iterations} it, {time.time() - t0:.0f} s)", flush=True)
            xs.append(res.op.to_vector())
            als.append(a)
            continue
        qn = quasi_newton(sd, x0, S, max_evals=40)
        if qn is not None and qn.ok:
            op = OrderParams.from_vector(qn.x, sd.L, sd.F, sd.rs)
            q, m, th = user(sd, op)
            print(f"alpha {a}: (quasi-Newton) theta {th:.4f} m {m:.4f} q {q:.4f}", flush=True)
            xs.append(qn.x)
            als.append(a)
            continue
        print(f"alpha {a}: branch lost (damped solver -> theta {th:.4f}, m {m:.4f}; quasi-Newton: "
              f"{'invalid start' if qn is None else qn.message})")
        break


def residual(order: int) -> None:
    spec, S = SPEC, settings(order)
    t0 = time.time()
    x = None
    for a in (2.0, 1.9, 1.8, 1.7, 1.65, 1.62):  # the m = 0 branch by continuation
        sd = make_saddle(spec, a, S)
        start = (solve_point(spec, a, "semantic", S, error_estimate=False).order_params if x is None
                 else OrderParams.from_vector(x, sd.L, sd.F, sd.rs))
        x = solve_fixed_point(sd, start, S).op.to_vector()
    assert x is not None
    free = np.abs(x) > 1e-14
    for a in (1.62, 1.6, 1.58, 1.55, 1.5):
        sd = make_saddle(spec, a, S)
        op162 = OrderParams.from_vector(x, sd.L, sd.F, sd.rs)
        q, _, th = user(sd, op162)
        gd = op162.replace(theta=op162.theta * 0.32 / th, q=op162.q * 0.23 / q).to_vector()
        for tag, x0 in (("from alpha 1.62", x), ("from GD's overlaps", gd)):
            ref = sd.data_step(OrderParams.from_vector(x0, sd.L, sd.F, sd.rs))

            def r(y: np.ndarray, sd=sd, ref=ref) -> np.ndarray:
                xx = np.zeros_like(x)
                xx[free] = y
                op = OrderParams.from_vector(xx, sd.L, sd.F, sd.rs)
                try:
                    fx = sd.weights_step(sd.data_step(op, starts=warm_starts(ref), switch_width=1e-5).hats).to_vector()
                except (ValueError, np.linalg.LinAlgError):
                    fx = np.full_like(xx, np.nan)
                out = (fx - xx)[free] / np.maximum(np.abs(xx[free]), 1e-3)
                return np.where(np.isfinite(out), out, 10.0)

            sol = least_squares(r, x0[free], method="lm", x_scale=np.maximum(np.abs(x0[free]), 1e-3), max_nfev=200)
            xx = np.zeros_like(x)
            xx[free] = sol.x
            q, m, th = user(sd, OrderParams.from_vector(xx, sd.L, sd.F, sd.rs))
            print(f"alpha {a} {tag}: min max|F(x) - x| {np.max(np.abs(sol.fun)):.2e} at theta {th:.4f} q {q:.4f} "
                  f"m {m:.4f} ({sol.nfev} evaluations, {time.time() - t0:.0f} s)", flush=True)


def local(order: int) -> None:
    S = settings(order)
    alphas = [2.0, 1.9, 1.8, 1.75, 1.7, 1.65, 1.62, 1.6, 1.55, 1.5]
    glob = saddle_module.prox_batch

    def from_w(w, T, V, C, amap, starts=None, **kw):  # the basin of w: one Newton start
        return glob(w, T, V, C, amap, starts=np.ascontiguousarray(w[:, None]), **kw)

    runs = {}
    for tag, prox in (("global", glob), ("basin of w", from_w)):
        saddle_module.prox_batch = prox
        try:
            runs[tag] = follow_branch(SPEC, alphas, "semantic", S)
        finally:
            saddle_module.prox_batch = glob
    for g, b in zip(runs["global"], runs["basin of w"], strict=True):
        line = f"alpha {g.alpha}: theta global {abs(g.theta):.4f} / basin of w {abs(b.theta):.4f}"
        if g.exists:  # nodes whose basin-of-w minimum is not the global one, at the global fixed point
            sd = make_saddle(SPEC, g.alpha, S)
            w, hstar, *_ = sd.fields(g.order_params)
            T = saddle_module.target_map(hstar, SPEC)
            full = glob(w, T, g.order_params.V, sd.C, sd.amap)
            one = glob(w, T, g.order_params.V, sd.C, sd.amap, starts=np.ascontiguousarray(w[:, None]))
            differ = np.max(np.abs(full.h - one.h), axis=(1, 2)) > 1e-6
            line += f"; nodes where they differ: {int(differ.sum())} of {differ.size}"
        print(line if g.exists or b.exists else f"alpha {g.alpha}: no semantic point either way", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "local":
        local(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    elif len(sys.argv) > 1 and sys.argv[1] == "residual":
        residual(int(sys.argv[2]) if len(sys.argv) > 2 else 12)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
