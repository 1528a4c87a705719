"""How much a fine QMC rule moves a fixed point, for variants of the rule: the error one rule puts
on the refined point (docs/solver.md, "Design choices": the mirror pairing and the order of the
Sobol coordinates).

At the refined fixed point ``x*`` of one branch (``solve_refined``, refine order 12), the error a
rule's conjugates ``h_k`` put on the fixed point is, to first order,
``dx = (I - dW/dh dD/dx)^{-1} dW/dh (h_k - h)``: ``D`` the data step (Stein forms), ``W`` the
weights step. The Jacobian ``dD/dx`` is taken by forward differences on a union of 4 rules of
order ``--order + 2``, ``dW/dh`` by finite differences of the closed-form weights step. For each
variant of the rule, ``--scrambles`` independent rules of order ``--order`` are evaluated at
``x*`` (one data step each, no solve) and the relative scatter of the resulting ``q``, and of the
branch's overlap (``m`` positional, ``theta`` semantic), is printed: the error one such rule puts
on the fixed point, i.e. twice the error of the refinement's union of 4.

A variant is ``ORDER:SCALE[:MIRROR]``: ``ORDER`` the assignment of the Gaussian coordinates to
the Sobol coordinates, ``base`` (``xi`` first, as shipped), ``etafirst`` (the teacher noises on
the first Sobol coordinates) or ``inter`` (``xi_1, eta_1, xi_2, eta_2``); ``SCALE`` the teacher
scale of the importance sampling (1.4 shipped at ``L = 2``, rank 1); ``MIRROR`` ``on`` or
``off`` (default): the mirror pairing of the Stein sums (``Saddle.mirror_nodes``, shipped on
here). Reference case only (``L = 2``, rank 1); the sign copies are the refinement's
(``FINE_COPIES``).

Reproduce: ``python studies/rule_scatter.py [--branch positional] [--order 11] [--scrambles 32]
[--variants base:1.4,etafirst:1.4,base:1.4:on]`` (~10 s per 100 scrambles at order 11).
Measured: positional ``q`` scatter 3.46-3.64e-3 (``base``) against 2.64-2.91e-3 (``etafirst``) at
order 11 (96 and 128 scrambles, two seed sets), 1.80-2.14e-3 against 1.85-2.02e-3 at order 12: no
gain at the orders used; ``base:1.4`` against ``base:1.4:on`` is the mirror pairing's table in
docs/solver.md.
"""

from __future__ import annotations

import argparse

import numpy as np

import attnphase.theory.quadrature as quadrature
from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.fine_rules import FINE_COPIES
from attnphase.theory.fixed_point import make_saddle
from attnphase.theory.quadrature import Rule
from attnphase.theory.saddle import Hats, OrderParams, Saddle
from attnphase.theory.target import solve_refined

#: Sobol coordinate of each Gaussian coordinate (xi_1, xi_2, eta_1, eta_2)
ORDERS = {"base": [0, 1, 2, 3], "etafirst": [2, 3, 0, 1], "inter": [0, 2, 1, 3]}
HAT_KEYS = ("q_hat", "m_hat", "V_hat", "theta_hat")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--branch", default="positional", choices=["semantic", "positional"])
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--order", type=int, default=11)
    ap.add_argument("--scrambles", type=int, default=32)
    ap.add_argument("--seed0", type=int, default=5000)
    ap.add_argument("--variants", default="base:1.4,etafirst:1.4")
    a = ap.parse_args()
    spec = ModelSpec(omega=0.3)
    st = SolverSettings(order=8, refine_order=12)
    op = solve_refined(spec, a.alpha, a.branch, st).order_params
    x = op.to_vector()
    L, F, rs = spec.L, 1, 1
    copies = FINE_COPIES[a.branch]
    sobol_normal = quadrature.sobol_normal

    def rule(seed: int, order: int, perm: str = "base", scale: float = 1.4, mirror: bool = False) -> Saddle:
        cols = np.argsort(ORDERS[perm])
        quadrature.sobol_normal = lambda d, n, s: sobol_normal(d, n, s)[:, cols] if d == 4 else sobol_normal(d, n, s)
        try:
            return make_saddle(spec, a.alpha, st, order=order, seed=seed, copies=copies, teacher_scale=scale,
                                mirror=mirror)
        finally:
            quadrature.sobol_normal = sobol_normal

    big = [rule(a.seed0 + 7919 * (k + 1), a.order + 2) for k in range(4)]
    union = Saddle(spec, a.alpha, Rule(np.concatenate([f.rule.x for f in big]),
                                       np.concatenate([f.rule.w for f in big]) / 4, "qmc", a.order + 2,
                                       copies=copies, teacher_scale=big[0].rule.teacher_scale))
    tau = st.switch_width
    d0 = union.data_step(op, switch_width=tau)
    shapes = [getattr(d0.hats, k).shape for k in HAT_KEYS]

    def flat(h: Hats) -> np.ndarray:
        return np.concatenate([getattr(h, k).ravel() for k in HAT_KEYS])

    def unflat(v: np.ndarray) -> Hats:
        parts, i = [], 0
        for s in shapes:
            n = int(np.prod(s))
            parts.append(v[i:i + n].reshape(s))
            i += n
        return Hats(*parts)

    h0 = flat(d0.hats)
    free = np.flatnonzero(np.abs(x) > 1e-14)
    dD = np.zeros((h0.size, x.size))
    for j in free:
        e = 1e-4 * abs(x[j])
        xp = x.copy()
        xp[j] += e
        dD[:, j] = (flat(union.data_step(OrderParams.from_vector(xp, L, F, rs), switch_width=tau).hats) - h0) / e
    w0 = union.weights_step(unflat(h0)).to_vector()
    dW = np.zeros((x.size, h0.size))
    for i in range(h0.size):
        e = 1e-6 * max(abs(h0[i]), 1e-8)
        hp = h0.copy()
        hp[i] += e
        dW[:, i] = (union.weights_step(unflat(hp)).to_vector() - w0) / e
    sens = np.linalg.solve(np.eye(free.size) - dW[free] @ dD[:, free], dW[free])
    names = op.names()
    wanted = ["q", "m[0]" if a.branch == "positional" else "theta"]
    rows = {n: sens[list(free).index(names.index(n))] / x[names.index(n)] for n in wanted}
    print(f"{a.branch} at alpha {a.alpha:g}: relative scatter of the fixed point over {a.scrambles} single rules "
          f"of order {a.order} ({4 * 2**a.order} nodes each)")
    for var in a.variants.split(","):
        perm, scale, *mirror = var.split(":")
        vals = []
        for k in range(a.scrambles):
            sd = rule(a.seed0 + 13 * k, a.order, perm, float(scale), mirror == ["on"])
            h = flat(sd.data_step(op, switch_width=tau).hats)
            vals.append([c @ (h - h0) for c in rows.values()])
        sd = np.std(np.asarray(vals), axis=0, ddof=1)
        print(f"  {var:14s} " + "  ".join(f"{n} {s:.2e}" for n, s in zip(rows, sd, strict=True)), flush=True)


if __name__ == "__main__":
    main()
