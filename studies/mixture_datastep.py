"""One data step of the mixture theory against a brute-force Monte-Carlo estimate (docs/mixture.md).

At given order parameters (paper convention, ``L = 2``, tied rank one) the theory's
conjugates (:meth:`attnphase.theory.saddle.Saddle.data_step` on a QMC rule with the label
configurations enumerated, docs/model.md (9.3)-(9.4)) against the same expectations estimated
independently: labels ``c_l`` sampled from ``p``, ``xi``, ``eta`` standard Gaussian,
``w_l = m_l + s_{c_l} + q^{1/2} xi_l``, ``h*_l = kappa_{c_l} + theta q^{-1/2} xi_l + R^{1/2} eta_l`` (``R = sigma^2 - theta^2 / q``),
the proximal problem ``min_h sum_l (h_l - w_l)^2 / (2V) + sigma^2 ||softmax(h h^T) - T(h*)||_F^2 / 2``
solved by brute force (a grid of ``--grid^2`` points around ``w`` of half-width
``sqrt(8 V sigma^2) + 1``, then Newton-free gradient polishing of the best few grid points, in torch), and
``g = (hhat - w) / V``:

    m_hat_l   = alpha E[g_l]             s_hat_k = alpha E[sum_l 1[c_l = k] g_l]
    q_hat     = alpha E[sum_l g_l^2]     theta_hat = alpha E[sum_l g_l eta_l] R^{-1/2}
    V_hat     = -alpha E[sum_l g_l xi_l] q^{-1/2} + theta theta_hat / q          E[M]

with their Monte-Carlo standard errors, and the pointwise form of ``V_hat`` (the derivative of
the minimiser where it is smooth; the Stein form's excess over it is the surface term of the
minimiser's jumps, docs/model.md (3.3)). Default point: the positional fixed point of the reference
mixture at ``alpha = 1`` (``--branch positional``, solved here on a coarse rule), or the overlaps
given by ``--op q,m1,m2,s1,s2,V,theta``.

    python studies/mixture_datastep.py --samples 40000
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
from _brute_prox import brute_prox, loss_hessian, softmax_student

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import start_point
from attnphase.theory.channels import target_map
from attnphase.theory.fixed_point import FAST, SolverSettings, solve_fixed_point
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import OrderParams, Saddle


def monte_carlo(spec: ModelSpec, alpha: float, op: OrderParams, n: int, grid: int, seed: int) -> dict[str, tuple]:
    rng = np.random.default_rng(seed)
    p, kappa = spec.mixture_p, spec.mixture_kappa
    q, V, th = float(op.q[0, 0]), float(op.V[0, 0]), float(op.theta[0, 0])
    m, s = op.m[:2, 0], op.m[2:, 0]
    s2 = spec.sigma**2
    R = s2 - th**2 / q
    c = rng.choice(p.size, size=(n, 2), p=p)
    xi, eta = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    w = m[None] + s[c] + math.sqrt(q) * xi
    hstar = kappa[c] + th / math.sqrt(q) * xi + math.sqrt(R) * eta
    T = target_map(hstar[..., None], spec)
    h, M = brute_prox(torch.as_tensor(w), torch.as_tensor(T), V, s2, grid, softmax_student,
                      chunk=2000, start_at_w=False, lbfgs=(200, 1e-12, 1e-15))
    g = (h.numpy() - w) / V
    # the pointwise form -alpha E[sum_l dg_l/dw_l] = alpha E[sum_l (H (I + V H)^{-1})_ll], H the
    # Hessian of the loss at hhat: it misses the surface term of the jumps of hhat (docs/model.md (3.3))
    H = loss_hessian(h, torch.as_tensor(T), s2, softmax_student).numpy()
    resp = H @ np.linalg.inv(np.eye(2)[None] + V * H)
    terms = {
        "m_hat_1": alpha * g[:, 0], "m_hat_2": alpha * g[:, 1],
        "s_hat_1": alpha * (g * (c == 0)).sum(1), "s_hat_2": alpha * (g * (c == 1)).sum(1),
        "q_hat": alpha * (g**2).sum(1),
        "theta_hat": alpha * (g * eta).sum(1) / math.sqrt(R),
        "V_hat_xi": -alpha * (g * xi).sum(1) / math.sqrt(q),
        "E_M": M.numpy(),
        "V_hat_pointwise": alpha * np.trace(resp, axis1=1, axis2=2),
    }
    out = {k: (float(v.mean()), float(v.std() / math.sqrt(n))) for k, v in terms.items()}
    vh, se = out.pop("V_hat_xi")
    out["V_hat"] = (vh + th * out["theta_hat"][0] / q, se)
    return out


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--alpha", type=float, default=1.0)
    ap_.add_argument("--rho", type=float, default=1.0)
    ap_.add_argument("--kappa", type=float, default=0.5)
    ap_.add_argument("--branch", default="positional")
    ap_.add_argument("--op", help="q,m1,m2,s1,s2,V,theta (paper convention) instead of the branch's fixed point")
    ap_.add_argument("--samples", type=int, default=40000)
    ap_.add_argument("--grid", type=int, default=41)
    ap_.add_argument("--order", type=int, default=12, help="log2 of the theory's QMC base sample")
    ap_.add_argument("--seed", type=int, default=0)
    args = ap_.parse_args()
    torch.set_num_threads(1)
    spec = ModelSpec(omega=0.3, mixture=2, mixture_sep=args.rho, mixture_align=args.kappa)
    if args.op:
        v = [float(x) for x in args.op.split(",")]
        op = OrderParams(np.array([[v[0]]]), np.array([[v[1]], [v[2]], [v[3]], [v[4]]]), np.array([[v[5]]]),
                         np.array([[v[6]]]))
    else:
        sd0 = Saddle(spec, args.alpha, make_rule("qmc", 4, 8, 2, seed=0))
        res = solve_fixed_point(sd0, sd0.from_paper(start_point(spec, args.branch, 1)),
                                SolverSettings(**{**FAST, "order": 8}))
        op = res.op
    print(f"order parameters (paper convention): q {op.q[0, 0]:.6g} m {op.m[:2, 0]} s {op.m[2:, 0]} "
          f"V {op.V[0, 0]:.6g} theta {op.theta[0, 0]:.6g}")
    sd = Saddle(spec, args.alpha, make_rule("qmc", 4, args.order, 2, seed=args.seed))
    ds = sd.data_step(op)
    h = ds.hats
    theory = {"m_hat_1": h.m_hat[0, 0], "m_hat_2": h.m_hat[1, 0], "s_hat_1": h.m_hat[2, 0],
              "s_hat_2": h.m_hat[3, 0], "q_hat": h.q_hat[0, 0], "theta_hat": h.theta_hat[0, 0],
              "V_hat": h.V_hat[0, 0], "E_M": ds.mean_M}
    mc = monte_carlo(spec, args.alpha, op, args.samples, args.grid, args.seed)
    print(f"{'':10s} {'theory':>12s} {'Monte Carlo':>12s} {'+-':>10s} {'z':>6s}")
    for k, t in theory.items():
        mean, se = mc[k]
        print(f"{k:10s} {float(t):12.6g} {mean:12.6g} {se:10.2g} {(mean - float(t)) / se:6.2f}")
    pw, se = mc["V_hat_pointwise"]
    stein = mc["V_hat"][0]
    print(f"V_hat pointwise (Monte Carlo) {pw:.6g} +- {se:.2g}: the jumps' surface term is "
          f"{1 - pw / stein:.3f} of the Stein form")


if __name__ == "__main__":
    main()
