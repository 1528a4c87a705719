"""One data step of the causal student's theory against a brute-force Monte-Carlo estimate
(docs/variants.md, "Causal student").

At given order parameters (paper convention, ``L = 2``, rank one, ``sigma = 0.5``,
``omega = 0.3``) the theory's conjugates (:meth:`attnphase.theory.saddle.Saddle.data_step` on a
fine QMC rule, several scrambles) against the same expectations estimated independently:
``xi``, ``eta`` standard Gaussian, ``w_l = m_l + q^{1/2} xi_l``,
``h*_l = theta q^{-1/2} xi_l + R^{1/2} eta_l`` (``R = sigma^2 - theta^2 / q``, docs/model.md (3.1)),
the proximal problem (3.2)
``min_h sum_l (h_l - w_l)^2 / (2V) + sigma^2 ||S(h) - T(h*)||_F^2 / 2`` with the causal student
``S(h) = rowsoftmax(h h^T)`` masked to ``j <= l`` (its first row is ``(1, 0)``) and the unmasked
target ``T(h*) = (1 - omega) softmax(h* h*^T) + omega A`` solved by brute force (a grid of
``--grid^2`` points around ``w`` of half-width ``sqrt(8 V sigma^2) + 1``, then L-BFGS from the
best few grid points, in torch, float64), and ``g = (hhat - w) / V``, the Stein forms (3.3):

    m_hat_l   = alpha E[g_l]             q_hat = alpha E[sum_l g_l^2]
    theta_hat = alpha E[sum_l g_l eta_l] R^{-1/2}
    V_hat     = -alpha E[sum_l g_l xi_l] q^{-1/2} + theta theta_hat / q          E[M]

with their Monte-Carlo standard errors, and the pointwise form of ``V_hat`` (the derivative of
the minimiser where it is smooth; the Stein form's excess over it is the surface term of the
minimiser's jumps, docs/model.md (3.3)).

Two comparisons: (i) theory on its fine rule against the brute-force Monte-Carlo averages
(z = difference / MC standard error, the rule's scramble scatter added in quadrature); (ii) the
library's own data step on the *same* Monte-Carlo samples (a rule of those nodes with equal
weights), paired with the brute force sample by sample: the fraction of samples whose
brute-force global minimum differs from the solver's chosen minimiser, and the difference of the
conjugates it makes (paired standard error). ``V_hat`` is also given as the derivative
``-sum_l d m_hat_l / d m_l`` of the library's data step (central differences of step ``--eps``,
on the theory's rules and on the samples): the quantity its Stein form is, jumps of the minimiser
between local minima included, which the pointwise form ``alpha E[tr H (I + V H)^{-1}]`` (also
printed, ``H`` the loss Hessian at the minimiser) leaves out. The theory's order parameters are its
refined semantic fixed point at ``--alpha`` (or ``--op``). About 3 minutes of CPU at 40 000 samples.

    python studies/causal_datastep.py --alpha 1.75 --samples 40000
    python studies/causal_datastep.py --alpha 1.75 --op Q,M1,M2,V,THETA   # at given overlaps
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
from _brute_prox import brute_prox, causal_student, loss_hessian

from attnphase.spec.problem import ModelSpec
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.quadrature import Rule, make_rule
from attnphase.theory.saddle import OrderParams, Saddle, second_minimum
from attnphase.theory.target import solve_refined


def terms(alpha: float, op: OrderParams, g: np.ndarray, xi: np.ndarray, eta: np.ndarray, M: np.ndarray,
          s2: float) -> dict[str, np.ndarray]:
    """Per-sample integrands of the Stein forms (docs/model.md (3.3)) from ``g (N, 2)``."""
    q, th = float(op.q[0, 0]), float(op.theta[0, 0])
    R = s2 - th**2 / q
    theta_hat = alpha * (g * eta).sum(1) / math.sqrt(R)
    return {
        "m_hat_1": alpha * g[:, 0], "m_hat_2": alpha * g[:, 1],
        "q_hat": alpha * (g**2).sum(1),
        "theta_hat": theta_hat,
        "V_hat": -alpha * (g * xi).sum(1) / math.sqrt(q) + th * theta_hat / q,
        "E_M": M,
    }


def v_hat_difference(sd: Saddle, op: OrderParams, eps: float) -> float:
    """``V_hat = -alpha sum_l dE[g_l]/dm_l = -sum_l d m_hat_l / d m_l`` (at fixed ``h*`` a shift of
    ``m_l`` shifts ``w_l``: the Stein form of ``V_hat`` is this derivative, jumps of the minimiser
    included) by central differences of the library's data step on the rule of ``sd``."""
    out = 0.0
    for l in range(2):
        e = np.zeros_like(op.m)
        e[l, 0] = eps
        up = sd.data_step(op.replace(m=op.m + e)).hats.m_hat[l, 0]
        dn = sd.data_step(op.replace(m=op.m - e)).hats.m_hat[l, 0]
        out -= (up - dn) / (2 * eps)
    return float(out)


def mean_se(v: np.ndarray) -> tuple[float, float]:
    return float(v.mean()), float(v.std() / math.sqrt(v.size))


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--alpha", type=float, required=True)
    ap_.add_argument("--op", help="q,m1,m2,V,theta (paper convention) instead of the theory's refined semantic "
                     "fixed point (attnphase solve --variant causal --omega 0.3 --branch semantic; about 25 s)")
    ap_.add_argument("--samples", type=int, default=40000)
    ap_.add_argument("--grid", type=int, default=81)
    ap_.add_argument("--order", type=int, default=14, help="log2 of the theory's QMC base sample")
    ap_.add_argument("--scrambles", type=int, default=3, help="theory rules (QMC scrambles 0, 1, ...)")
    ap_.add_argument("--seed", type=int, default=0)
    ap_.add_argument("--eps", type=float, default=0.03, help="step in m of the difference form of V_hat")
    ap_.add_argument("--check-grid", type=int, default=0,
                     help="re-solve the first 2000 samples on this finer grid (grid convergence)")
    args = ap_.parse_args()
    torch.set_num_threads(1)
    spec = ModelSpec(omega=0.3, variant="causal")
    s2 = spec.sigma**2
    if args.op:
        v = [float(x) for x in args.op.split(",")]
        if len(v) != 5:
            raise SystemExit("--op needs q,m1,m2,V,theta")
        op = OrderParams(np.array([[v[0]]]), np.array([[v[1]], [v[2]]]), np.array([[v[3]]]), np.array([[v[4]]]))
    else:
        point = solve_refined(spec, args.alpha, "semantic", SolverSettings())
        if point.order_params is None:
            raise SystemExit(f"no semantic fixed point at alpha {args.alpha}: {point.reason}")
        op = point.order_params
        v = [float(op.q[0, 0]), float(op.m[0, 0]), float(op.m[1, 0]), float(op.V[0, 0]), float(op.theta[0, 0])]
    a = args.alpha
    print(f"alpha {a}  order parameters (paper convention): q {v[0]:.6g} m {v[1]:.4g},{v[2]:.4g} "
          f"V {v[3]:.6g} theta {v[4]:.6g}")
    names = ["m_hat_1", "m_hat_2", "q_hat", "theta_hat", "V_hat", "E_M"]

    # --- theory on its fine rule, per scramble
    t0 = time.time()
    th_runs, fd_runs = [], []
    for sc in range(args.scrambles):
        sd = Saddle(spec, a, make_rule("qmc", 4, args.order, 2, seed=sc))
        ds = sd.data_step(op)
        h = ds.hats
        th_runs.append([h.m_hat[0, 0], h.m_hat[1, 0], h.q_hat[0, 0], h.theta_hat[0, 0], h.V_hat[0, 0], ds.mean_M])
        fd_runs.append(v_hat_difference(sd, op, args.eps))
        multi = np.isfinite(second_minimum(ds.prox)[1])
        print(f"  scramble {sc}: V_hat {h.V_hat[0, 0]:.5g}, difference form {fd_runs[-1]:.5g}; nodes with a second "
              f"local minimum {multi.mean():.3g}")
    th_arr = np.array(th_runs)
    theory = th_arr.mean(0)
    theory_se = th_arr.std(0, ddof=1) / math.sqrt(len(th_runs)) if len(th_runs) > 1 else np.zeros(len(names))
    print(f"theory: {args.scrambles} scrambles of 4 * 2^{args.order} nodes ({time.time() - t0:.0f} s)")

    # --- Monte-Carlo samples, brute-force prox
    rng = np.random.default_rng(args.seed)
    n = args.samples
    xi, eta = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    q, th = v[0], v[4]
    R = s2 - th**2 / q
    m = np.array([v[1], v[2]])
    w = m[None] + math.sqrt(q) * xi
    hstar = th / math.sqrt(q) * xi + math.sqrt(R) * eta
    sd_mc = Saddle(spec, a, Rule(np.concatenate([xi, eta], axis=1), np.full(n, 1.0 / n), "mc", 0, copies="none"))
    w_lib, _, _, _, _ = sd_mc.fields(op)
    T = sd_mc.target(hstar[..., None])
    assert np.allclose(w_lib[..., 0], w)
    t0 = time.time()
    hb, Mb = brute_prox(torch.as_tensor(w), torch.as_tensor(T), v[3], s2, args.grid, causal_student)
    hb_np, Mb_np = hb.numpy(), Mb.numpy()
    print(f"brute force: {n} samples, grid {args.grid}^2 ({time.time() - t0:.0f} s)")
    if args.check_grid:
        k = min(2000, n)
        hf, Mf = brute_prox(torch.as_tensor(w[:k]), torch.as_tensor(T[:k]), v[3], s2, args.check_grid, causal_student)
        dM = Mb_np[:k] - Mf.numpy()
        print(f"grid check: {k} samples on grid {args.check_grid}^2: max (M_grid{args.grid} - M_grid"
              f"{args.check_grid}) {dM.max():.2e}, samples lower by > 1e-9: {(dM > 1e-9).sum()}")
    g_b = (hb_np - w) / v[3]
    tb = terms(a, op, g_b, xi, eta, Mb_np, s2)
    H = loss_hessian(hb, torch.as_tensor(T), s2, causal_student).numpy()
    resp = H @ np.linalg.inv(np.eye(2)[None] + v[3] * H)
    pw_terms = a * np.trace(resp, axis1=1, axis2=2)
    pointwise = mean_se(pw_terms)
    det = np.linalg.det(np.eye(2)[None] + v[3] * H)

    # --- the library's solver on the same samples
    t0 = time.time()
    ds_mc = sd_mc.data_step(op)
    hs, Ms = ds_mc.prox.h[..., 0], ds_mc.prox.value
    print(f"library data step on the same samples ({time.time() - t0:.0f} s)")
    g_s = (hs - w) / v[3]
    ts = terms(a, op, g_s, xi, eta, Ms, s2)
    v2 = second_minimum(ds_mc.prox)[1]
    multi = np.isfinite(v2)
    print(f"samples with a second local minimum (library's starts): {multi.sum()} of {n}; within 1e-3 of the "
          f"global one: {(v2 - Ms < 1e-3).sum()}")
    dist = np.abs(hs - hb_np).max(axis=1)
    differ = dist > 1e-4
    lower = Mb_np < Ms - 1e-9
    print(f"samples whose brute-force minimiser differs from the solver's (|dh| > 1e-4): {differ.sum()} of {n} "
          f"({differ.mean():.2e}); brute force lower by > 1e-9: {lower.sum()}; max (M_solver - M_brute) "
          f"{(Ms - Mb_np).max():.2e}")

    print(f"\n{'':10s} {'theory':>11s} {'+-rule':>8s} {'MC brute':>11s} {'+-':>8s} {'z':>6s}"
          f" {'solver-brute (same samples)':>28s} {'+-':>8s}")
    for i, k in enumerate(names):
        mean, se = mean_se(tb[k])
        z = (mean - theory[i]) / math.hypot(se, theory_se[i])
        dmean, dse = mean_se(ts[k] - tb[k])
        print(f"{k:10s} {theory[i]:11.6g} {theory_se[i]:8.2g} {mean:11.6g} {se:8.2g} {z:6.2f}"
              f" {dmean:28.3g} {dse:8.2g}")
    fd_mc = v_hat_difference(sd_mc, op, args.eps)
    fd = np.array(fd_runs)
    fd_se = fd.std(ddof=1) / math.sqrt(fd.size) if fd.size > 1 else 0.0
    print(f"V_hat, difference form -sum_l d m_hat_l / d m_l (step {args.eps}): theory rule {fd.mean():.6g} +- "
          f"{fd_se:.2g}; the Monte-Carlo samples (library solver) {fd_mc:.6g}")
    print(f"V_hat pointwise alpha E[tr H (I + V H)^-1] (Monte Carlo, brute-force minimisers) {pointwise[0]:.6g} +- "
          f"{pointwise[1]:.2g}; samples with det(I + V H) < 0.05: {(det < 0.05).sum()}, largest term "
          f"{pw_terms.max():.3g}, smallest {pw_terms.min():.3g}")


if __name__ == "__main__":
    main()
