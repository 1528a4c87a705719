"""The causal student's semantic fixed point with ``V_hat`` in its pointwise form (no jump term of
the proximal minimiser), against the theory and GD (docs/variants.md, "Causal student").

The theory's ``V_hat`` is the Stein form of docs/model.md (3.3): the derivative
``-sum_l d m_hat_l / d m_l`` of the data step, which includes the jumps of the global proximal
minimiser between two local minima. Its pointwise form ``alpha E[tr H (I + V H)^{-1}]`` (``H`` the
loss Hessian at the minimiser, rank one, ``F = 1``) is the response of a minimum followed by its
local curvature only. Hypothesis under test: GD's local minimum responds only through the local
curvature, so the state GD holds is the fixed point of the equations with the pointwise ``V_hat``
(every other conjugate as in the library).

:class:`PointwiseSaddle` is :class:`attnphase.theory.saddle.Saddle` with ``V_hat`` replaced by
the pointwise form (with the data step's soft split ``p = expit((M_2 - M_1) / tau)`` between a
node's two lowest minima, as in the Stein sums); the library's fixed-point solver is run on it.
Per QMC scramble the semantic branch is followed down ``--alphas`` (warm start from the previous
point, secant predictor), for the library's Stein form (``stein``) and the pointwise one
(``pointwise``), on the same rule; ``local``: pointwise, with every node taking the local minimum
reached from its prior mean ``w`` (the minimiser continued locally) instead of the global one. Printed: ``theta``, ``q`` (user units) and ``V`` (paper
convention, the ``V = sigma^2 tr(H^-1) / d`` of GD's Hessian), and the two ``V_hat`` forms at the
converged point, and ``theta_hat`` in its Stein form and in its pointwise one (:func:`local_response`;
``q_hat`` and ``m_hat`` are plain averages of ``g``, with no jump term). ``--control``: the tied student (default model) instead, where theory and GD
agree.

    python studies/causal_nojump.py --order 13 --seeds 0 1 2                # causal, about 80 s
    python studies/causal_nojump.py --control --alphas 1.5 --order 13 --seeds 0 1 2   # tied, 5 s
    python studies/causal_nojump.py --order 10 --seeds 0 --forms pointwise local
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.channels import loss_hessian_batch, prox_batch
from attnphase.theory.fixed_point import FAST, SolverSettings, make_saddle, solve_fixed_point
from attnphase.theory.quadrature import Rule
from attnphase.theory.saddle import DataStep, OrderParams, Saddle, second_minimum


def pointwise_v_hat(sd: Saddle, op: OrderParams, ds: DataStep, tau: float) -> float:
    """``alpha E[tr H (I + V H)^{-1}]`` at the data step's minimisers (``F = 1``, uncorrelated
    tokens), the two lowest minima of a node split by ``p = expit((M_2 - M_1) / tau)``."""
    V = float(op.V[0, 0])
    n = sd.L

    def resp(h: np.ndarray, T: np.ndarray) -> np.ndarray:
        H = loss_hessian_batch(h, T, sd.C, sd.amap)
        return np.einsum("nii->n", H @ np.linalg.inv(np.eye(n)[None] + V * H))

    r1 = resp(ds.prox.h, ds.T)
    second, M2 = second_minimum(ds.prox)
    has2 = np.isfinite(M2)
    if tau > 0 and has2.any():
        with np.errstate(over="ignore"):
            p = np.where(has2, 1.0 / (1.0 + np.exp(-(np.where(has2, M2, 0.0) - ds.prox.value) / tau)), 1.0)
        split = np.flatnonzero(p < 1.0)
        if split.size:
            r1 = r1.copy()
            r1[split] = p[split] * r1[split] + (1.0 - p[split]) * resp(second[split], ds.T[split])
    return sd.alpha * float(sd.rule.w @ r1)


def local_response(sd: Saddle, op: OrderParams, ds: DataStep, eps: float = 1e-4) -> tuple[float, float]:
    """``(V_hat, theta_hat)`` in their pointwise forms by central differences of each node's
    minimiser continued locally (the proximal problem re-solved from the node's own global
    minimiser, one start, at ``w_l +- eps`` and at ``h*_l +- eps``): ``V_hat = -alpha E[sum_l
    dg_l / dw_l]`` and, by Stein's lemma in ``eta`` without the jumps,
    ``theta_hat = alpha E[sum_l dg_l / dh*_l]`` (rank one, ``F = 1``, uncorrelated tokens)."""
    w, hstar, *_ = sd.fields(op)
    V = op.V
    h1 = np.ascontiguousarray(ds.prox.h[:, None])
    dw = np.zeros(w.shape[0])
    dt = np.zeros(w.shape[0])
    for l in range(sd.L):
        e = np.zeros_like(w)
        e[:, l] = eps
        gp = (prox_batch(w + e, ds.T, V, sd.C, sd.amap, starts=h1).h - (w + e))[:, l, 0]
        gm = (prox_batch(w - e, ds.T, V, sd.C, sd.amap, starts=h1).h - (w - e))[:, l, 0]
        dw += (gp - gm) / (2 * eps * V[0, 0])
        ep = np.zeros_like(hstar)
        ep[:, l] = eps
        gp = (prox_batch(w, sd.target(hstar + ep), V, sd.C, sd.amap, starts=h1).h - w)[:, l, 0]
        gm = (prox_batch(w, sd.target(hstar - ep), V, sd.C, sd.amap, starts=h1).h - w)[:, l, 0]
        dt += (gp - gm) / (2 * eps * V[0, 0])
    return -sd.alpha * float(sd.rule.w @ dw), sd.alpha * float(sd.rule.w @ dt)


class PointwiseSaddle(Saddle):
    """:class:`Saddle` whose data step returns ``V_hat`` in the pointwise form
    (:func:`pointwise_v_hat`) instead of the Stein form of docs/model.md (3.3)."""

    def data_from(self, op: OrderParams, prox, switch_width: float = 0.0,
                  fields: tuple[np.ndarray, ...] | None = None) -> DataStep:
        ds = super().data_from(op, prox, switch_width, fields)
        vh = pointwise_v_hat(self, op, ds, switch_width)
        return dataclasses.replace(ds, hats=dataclasses.replace(ds.hats, V_hat=np.array([[vh]])))


class LocalPointwiseSaddle(PointwiseSaddle):
    """:class:`PointwiseSaddle` whose nodes take the local minimum reached from the prior mean
    ``w`` (the basin of ``w``, one start) instead of the global one."""

    def data_step(self, op: OrderParams, starts: np.ndarray | None = None, switch_width: float = 0.0) -> DataStep:
        N = self.rule.size
        return super().data_step(op, starts=np.zeros((N, 0, self.L, self.F)), switch_width=switch_width)


def variant_saddle(sd: Saddle, form: str) -> Saddle:
    """The saddle of ``sd``'s rule with ``V_hat`` in ``form`` (``stein``: ``sd`` itself)."""
    rule: Rule = sd.rule
    if form == "pointwise":
        return PointwiseSaddle(sd.spec, sd.alpha, rule, mirror=sd.mirror)
    if form == "local":
        return LocalPointwiseSaddle(sd.spec, sd.alpha, rule, mirror=sd.mirror)
    return sd


def summary(sd: Saddle, op: OrderParams) -> tuple[float, float, float, float]:
    q, m, theta = sd.user_units(op)
    return float(theta[0, 0]), float(q[0, 0]), float(op.V[0, 0]), float(np.sqrt(np.mean(np.ravel(m) ** 2)))


def follow(spec: ModelSpec, alphas: list[float], S: SolverSettings, seed: int, form: str,
           start: OrderParams) -> list[tuple[float, OrderParams | None, str]]:
    """The semantic branch along ``alphas`` on scramble ``seed`` with ``V_hat`` in ``form``."""
    out: list[tuple[float, OrderParams | None, str]] = []
    xs: list[np.ndarray] = []
    als: list[float] = []
    for a in alphas:
        sd = make_saddle(spec, a, S, seed=seed)
        sd = variant_saddle(sd, form)
        if not xs:
            x0 = start.to_vector()
        elif len(xs) < 2:
            x0 = xs[-1]
        else:
            x0 = xs[-1] + (xs[-1] - xs[-2]) * (a - als[-1]) / (als[-1] - als[-2])
        res = solve_fixed_point(sd, OrderParams.from_vector(x0, sd.L, sd.F, sd.rs), S)
        theta = summary(sd, res.op)[0]
        if res.converged and abs(theta) > 1e-3:
            out.append((a, res.op, "converged"))
            xs.append(res.op.to_vector())
            als.append(a)
        else:
            why = res.reason if not res.converged else f"converged to theta {theta:.2e} (trivial)"
            out.append((a, None, why))
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alphas", type=float, nargs="+", default=[3.0, 2.0, 1.75, 1.62, 1.5])
    ap.add_argument("--order", type=int, default=10, help="log2 of the QMC base sample")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="QMC scrambles")
    ap.add_argument("--control", action="store_true", help="the tied student (default model) instead of the causal one")
    ap.add_argument("--forms", nargs="+", default=["stein", "pointwise"], choices=["stein", "pointwise", "local"],
                    help="V_hat: library (Stein form), pointwise, pointwise with each node's minimum in the basin of w")
    args = ap.parse_args()
    spec = ModelSpec(omega=0.3) if args.control else ModelSpec(omega=0.3, variant="causal")
    S = SolverSettings(**{**FAST, "order": args.order, "tol": 1e-7, "noise_tol": 1e-5, "max_iter": 600})
    t0 = time.time()
    first = solve_point(spec, args.alphas[0], "semantic", S, error_estimate=False)
    if first.order_params is None:
        raise SystemExit(f"no semantic start at alpha {args.alphas[0]}: {first.reason}")
    rows: dict[tuple[str, float], list[tuple[float, float, float, float, float, float]]] = {}
    for seed in args.seeds:
        for form in args.forms:
            for a, op, why in follow(spec, args.alphas, S, seed, form, first.order_params):
                if op is None:
                    print(f"seed {seed} {form:9s} alpha {a}: no semantic point ({why})", flush=True)
                    continue
                sd = make_saddle(spec, a, S, seed=seed)
                ds = sd.data_step(op, switch_width=S.switch_width)
                stein = float(ds.hats.V_hat[0, 0])
                pw = pointwise_v_hat(sd, op, ds, S.switch_width)
                th_stein = float(ds.hats.theta_hat[0, 0])
                v_fd, th_pw = local_response(sd, op, ds)
                th, q, V, mr = summary(sd, op)
                rows.setdefault((form, a), []).append((th, q, V, mr, stein, pw, th_stein, th_pw))
                print(f"seed {seed} {form:9s} alpha {a}: theta {th:.4f} q {q:.4f} V {V:.3f} m_rms {mr:.2e}; "
                      f"V_hat Stein {stein:.4g} pointwise {pw:.4g} (differences {v_fd:.4g}); theta_hat Stein {th_stein:.5g} pointwise "
                      f"{th_pw:.5g} ({time.time() - t0:.0f} s)", flush=True)
    print(f"\nmean +- standard error over scramble(s) {args.seeds}, QMC order {args.order} ({'tied' if args.control else 'causal'}, "
          f"omega 0.3):")
    for (form, a), v in sorted(rows.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        arr = np.array(v)
        mean = arr.mean(0)
        spread = arr.std(0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.zeros(arr.shape[1])  # standard error
        print(f"{form:9s} alpha {a:5.2f}: theta {mean[0]:.4f} +- {spread[0]:.4f}  q {mean[1]:.4f} +- {spread[1]:.4f}  "
              f"V {mean[2]:.3f} +- {spread[2]:.3f}  (V_hat Stein {mean[4]:.3g}, pointwise {mean[5]:.3g}; theta_hat "
              f"Stein {mean[6]:.4g}, pointwise {mean[7]:.4g}; "
              f"{len(v)} of {len(args.seeds)} scrambles)")


if __name__ == "__main__":
    main()
