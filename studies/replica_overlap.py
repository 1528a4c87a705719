"""Where theory and GD disagree (causal student below its fold, L = 3 positional at alpha 0.6): is
GD's state one the replica-symmetric equations describe? The numbers of docs/variants.md
("Replica overlaps and local checks").

Stages (POINT is one of the names in ``POINTS``):

    python studies/replica_overlap.py replicas POINT --d 300 1000 --seeds 0 1 --replicas 3 --noise 1
    python studies/replica_overlap.py local POINT --d 300 --seed 0 [--order 10]
    python studies/replica_overlap.py stability POINT --alphas 3.0 2.0 1.75 --order 10 [--check-order 12]
    python studies/replica_overlap.py theta-scan POINT --d 300 --thetas 0.0 0.2 0.31 0.4

``replicas``: ``K`` students trained on the same data set from random informed starts of the
same branch (:func:`attnphase.sim.replicas.train_replicas`); prints each replica's overlaps and
training error, and the gap ``q - Q_a^T Q_b / d`` between self and mutual overlaps (zero when the
replicas end at one minimum, as the RS equations assume).

``local``: one student trained from the plain informed start (``simulate``'s), then (b) its
gradient polished to ``1e-10`` in float64 and the spectrum of the Hessian of ``R`` there (lowest
eigenvalues, the fraction below the ridge ``lambda``, ``V = sigma^2 tr(H^{-1}) / d``) and (c) one
application of the theory's map ``F`` (data step then weights step, QMC ``order``) at GD's
overlaps ``(q, m, theta)`` with that ``V``: the relative change ``(F(x) - x) / x`` of each order
parameter, next to the same at the theory's own fixed point where there is one.

``stability``: the replicon of the theory's fixed points along POINT's branch (its model and
branch; the ``--alphas`` followed down), :func:`replicon`; with ``--check-order`` also on 3
scrambles of a finer rule at the same fixed points.

``theta-scan``: ``R`` minimised at fixed ``theta`` with ``m = 0`` from ``--replicas`` random
starts at each ``--thetas`` (:func:`attnphase.sim.replicas.minimise_at_theta`): the finite-``d``
energy of the ``m = 0`` states against ``theta``.

A reduced run (about 15 s on the idle 2-core machine): ``replicas causal-1.5 --d 300`` and ``replicas L3-pos-0.6 --d 300
--seeds 1 --noise 0.1``.

With ``--csv`` the results are appended to ``docs/data/replica_overlap.csv`` (one row per replica
set), ``docs/data/replica_local.csv`` (one row per local check), ``replica_stability.csv`` and
``replica_theta_scan.csv``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from _write_csv import append_row

from attnphase.sim import TrainSettings
from attnphase.sim.replicas import hessian_spectrum, polish, replica_dataset, train_replicas
from attnphase.sim.simulate import overlaps
from attnphase.sim.train import init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec

BASE = {"omega": 0.3, "sigma": 0.5, "lam": 0.01}
#: name -> (spec, alpha, start, theory branch)
POINTS = {
    "causal-1.5": (ModelSpec(**BASE, variant="causal"), 1.5, "semantic", "semantic"),
    "causal-1.62": (ModelSpec(**BASE, variant="causal"), 1.62, "semantic", "semantic"),
    "causal-1.75": (ModelSpec(**BASE, variant="causal"), 1.75, "semantic", "semantic"),
    "causal-2": (ModelSpec(**BASE, variant="causal"), 2.0, "semantic", "semantic"),
    "causal-3": (ModelSpec(**BASE, variant="causal"), 3.0, "semantic", "semantic"),
    "tied-1.5": (ModelSpec(**BASE), 1.5, "semantic", "semantic"),
    "tied-pos-1.5": (ModelSpec(**BASE), 1.5, "positional", "positional"),
    "L3-pos-0.6": (ModelSpec(**BASE, L=3), 0.6, "positional", "positional"),
    "L3-sem-1.5": (ModelSpec(**BASE, L=3), 1.5, "semantic", "semantic"),
}
GD = TrainSettings(momentum=0.9, tol=1e-6, max_steps=8000, dtype="float64", log_every=0)
CSV = Path(__file__).resolve().parents[1] / "docs" / "data" / "replica_overlap.csv"
LOCAL_CSV = CSV.with_name("replica_local.csv")


def m_rms(m: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.asarray(m) ** 2)))


def replicas(args: argparse.Namespace) -> None:
    spec, alpha, init, _ = POINTS[args.point]
    for d in args.d:
        for seed in args.seeds:
            r = train_replicas(spec, d, alpha, seed=seed, n_replicas=args.replicas, init=init,
                               start_noise=args.noise, settings=GD)
            q = np.diag(r.mutual)
            iu = np.triu_indices(len(q), 1)
            print(f"{args.point} d {d} seed {seed}: {r.message} ({r.seconds:.0f} s); theta "
                  f"{np.round(r.theta, 4)}, m_rms {[round(m_rms(m), 4) for m in r.m]}, q {np.round(q, 4)}, "
                  f"mutual {np.round(r.mutual[iu], 4)}, gap {r.gap():.2e} (relative {r.relative_gap():.2e}; orthogonal "
                  f"parts {r.relative_gap(rest=True):.2e}), "
                  f"R/d {np.array2string(r.train_loss, precision=7)}", flush=True)
            if args.csv:
                append_row({"stage": "replicas", "point": args.point, "d": d, "seed": seed, "replicas": args.replicas,
                        "noise": args.noise, "converged": sum(s == "tol" for s in r.stop),
                        "q_mean": float(q.mean()), "mutual_min": float(r.mutual[iu].min()),
                        "gap": r.gap(), "relative_gap": r.relative_gap(),
                        "relative_gap_rest": r.relative_gap(rest=True),
                        "theta": " ".join(f"{t:.5f}" for t in r.theta),
                        "m_rms": " ".join(f"{m_rms(m):.5f}" for m in r.m),
                        "train_loss": " ".join(f"{t:.8f}" for t in r.train_loss),
                        "seconds": round(r.seconds, 1)}, args.csv_path)


def theory_map(spec: ModelSpec, alpha: float, q: float, m: np.ndarray, theta: float, V: float, order: int):
    """Relative change ``(F(x) - x) / x`` of (q, m, V, theta) at the given user-unit overlaps
    (paper convention inside: ``q sigma^2``, ``theta sigma^2``)."""
    from attnphase.theory.fixed_point import FAST, SolverSettings, make_saddle
    from attnphase.theory.saddle import OrderParams

    s2 = spec.sigma**2
    sd = make_saddle(spec, alpha, SolverSettings(**{**FAST, "order": order}))
    op = OrderParams(np.array([[s2 * q]]), np.asarray(m, float).reshape(-1, 1), np.array([[V]]),
                     np.array([[s2 * theta]]))
    fx = sd.weights_step(sd.data_step(op, switch_width=1e-5).hats)
    return op, fx, sd


def describe(op, fx, s2: float) -> str:
    def rel(a, b):
        a, b = np.ravel(a), np.ravel(b)
        return (b - a) / np.maximum(np.abs(a), 1e-12)

    mq = np.sqrt(np.mean(np.ravel(op.m) ** 2))
    mf = np.sqrt(np.mean(np.ravel(fx.m) ** 2))
    return (f"q {op.q[0, 0] / s2:.4f} -> {fx.q[0, 0] / s2:.4f} ({rel(op.q, fx.q)[0]:+.3f}), "
            f"theta {op.theta[0, 0] / s2:.4f} -> {fx.theta[0, 0] / s2:.4f} ({rel(op.theta, fx.theta)[0]:+.3f}), "
            f"V {op.V[0, 0]:.3f} -> {fx.V[0, 0]:.3f} ({rel(op.V, fx.V)[0]:+.3f}), "
            f"m_rms {mq:.4f} -> {mf:.4f}")


def local(args: argparse.Namespace) -> None:
    spec, alpha, init, branch = POINTS[args.point]
    s2 = spec.sigma**2
    for d in args.d:
        t0 = time.perf_counter()
        ds = replica_dataset(spec, d, alpha, args.seed)
        res = train(spec, stack_batch([ds]), init_params(spec, [ds], (init,)), GD)
        P = res.params["P"][0, 0]
        pol = polish(spec, ds, P)
        ev = hessian_spectrum(spec, ds, pol.params)
        V = s2 * float(np.mean(1.0 / ev)) if ev[0] > 0 else float("nan")
        ov = overlaps(spec, ds, {"P": pol.params})
        q, theta = float(ov["q"][0, 0]), float(ov["theta"][0, 0])
        m = np.asarray(ov["m"])[:spec.tokens, 0]
        below = float(np.mean(ev < spec.lam))
        print(f"{args.point} d {d} seed {args.seed}: GD {res.stop[0][0]} after {int(res.steps[0, 0])} steps, "
              f"polish {pol.message}, moved {pol.moved:.1e}, R/d {pol.train_loss:.8f}; theta {theta:.4f} q {q:.4f} "
              f"m {np.round(m, 4)}; Hessian lowest {np.array2string(ev[:4], precision=5)} (lambda {spec.lam}), "
              f"fraction below lambda {below:.3f}, V = sigma^2 tr(H^-1)/d {V:.3f} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        row = {"stage": "local", "point": args.point, "d": d, "seed": args.seed, "grad_after": pol.grad_after,
               "train_loss": pol.train_loss, "theta": theta, "q": q, "m_rms": m_rms(m),
               "hess_min": float(ev[0]), "hess_2": float(ev[1]), "below_lambda": below, "V_est": V}
        if args.order:
            op, fx, _ = theory_map(spec, alpha, q, m, theta, V, args.order)
            print(f"    F at GD's overlaps (order {args.order}): {describe(op, fx, s2)}", flush=True)
            row.update(map_q=fx.q[0, 0] / s2, map_theta=fx.theta[0, 0] / s2, map_V=fx.V[0, 0],
                       map_m_rms=m_rms(np.ravel(fx.m)))
        if args.csv:
            append_row(row, LOCAL_CSV)


def fixed(args: argparse.Namespace) -> None:
    """The theory's own fixed point of the branch (order ``--order``) and F there."""
    from attnphase.theory.branches import solve_point
    from attnphase.theory.fixed_point import FAST, SolverSettings

    spec, alpha, _, branch = POINTS[args.point]
    s2 = spec.sigma**2
    p = solve_point(spec, alpha, branch, SolverSettings(**{**FAST, "order": args.order}), error_estimate=False)
    if not p.exists or p.order_params is None:
        print(f"{args.point}: no {branch} fixed point at order {args.order} ({p.reason})")
        return
    op = p.order_params
    _, fx, _ = theory_map(spec, alpha, op.q[0, 0] / s2, op.m[:, 0], op.theta[0, 0] / s2, op.V[0, 0], args.order)
    print(f"{args.point}: theory {branch} point (order {args.order}): train {p.train_loss:.6f}; F there: "
          f"{describe(op, fx, s2)}")


def replicon(sd, op) -> tuple[float, float]:
    """The replicon of the RS fixed point ``op`` (pointwise part): ``alpha E[tr((V H (I + V H)^{-1})^2)]``
    with ``H`` the Hessian of the loss at each node's global proximal minimiser and ``V`` the
    fields' variance (rank one, ``F = 1``). RS is stable (no de Almeida-Thouless instability)
    only while it is below 1; the jumps of the minimiser between nodes' minima add a surface
    term that this pointwise form leaves out. Also returns ``alpha E[tr(V H (I + V H)^{-1})]``
    (``sigma^2 V_hat / K`` by the pointwise form, a check of the fields)."""
    from attnphase.theory.channels import loss_hessian_batch

    ds = sd.data_step(op)
    H = loss_hessian_batch(ds.prox.h, ds.T, sd.C, sd.amap)
    V = float(op.V[0, 0])
    n = H.shape[-1]
    M = np.eye(n) - np.linalg.inv(np.eye(n)[None] + V * H)  # V H (I + V H)^{-1}
    tr2 = np.einsum("nij,nji->n", M, M)
    return sd.alpha * float(sd.rule.w @ tr2), sd.alpha * float(sd.rule.w @ np.einsum("nii->n", M))


def replicon_scrambles(spec: ModelSpec, alpha: float, op, order: int, seeds=(0, 1, 2)) -> tuple[float, float]:
    """Mean and standard error of :func:`replicon` at ``op`` over independent QMC scrambles of
    ``order``."""
    from attnphase.theory.fixed_point import FAST, SolverSettings, make_saddle

    S = SolverSettings(**{**FAST, "order": order})
    vals = np.array([replicon(make_saddle(spec, alpha, S, seed=s), op)[0] for s in seeds])
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(len(vals)))


def stability(args: argparse.Namespace) -> None:
    """The replicon along the theory's branch of POINT, followed from ``--alphas[0]`` downwards."""
    from attnphase.theory.branches import follow_branch
    from attnphase.theory.fixed_point import FAST, SolverSettings, make_saddle

    spec, _, _, branch = POINTS[args.point]
    S = SolverSettings(**{**FAST, "order": args.order or 10})
    s2 = spec.sigma**2
    for p in follow_branch(spec, args.alphas, branch, S):
        if not p.exists or p.order_params is None:
            print(f"{args.point} alpha {p.alpha}: no {branch} point", flush=True)
            continue
        op = p.order_params
        rep, chi = replicon(make_saddle(spec, p.alpha, S), op)
        mr = m_rms(op.m[:spec.tokens, 0])
        line = (f"{args.point} alpha {p.alpha}: theta {op.theta[0, 0] / s2:.4f} m_rms {mr:.4f} q {op.q[0, 0] / s2:.4f} "
                f"V {op.V[0, 0]:.3f}: replicon {rep:.3f} (alpha E tr(VH(1+VH)^-1) {chi:.3f})")
        check = (float("nan"), float("nan"))
        if args.check_order:
            check = replicon_scrambles(spec, p.alpha, op, args.check_order)
            line += f"; on 3 scrambles of order {args.check_order}: {check[0]:.3f} +- {check[1]:.3f}"
        print(line, flush=True)
        if args.csv:
            append_row({"stage": "stability", "point": args.point, "order": S.order, "alpha": p.alpha,
                    "theta": op.theta[0, 0] / s2, "m_rms": mr, "q": op.q[0, 0] / s2, "V": op.V[0, 0],
                    "replicon": rep, "check_order": args.check_order, "replicon_check": check[0],
                    "replicon_check_se": check[1], "train_loss": p.train_loss}, CSV.with_name("replica_stability.csv"))


def theta_scan(args: argparse.Namespace) -> None:
    """The lowest ``R/d`` of the ``m = 0`` states at fixed ``theta`` (finite ``d``), next to GD's."""
    from attnphase.sim.replicas import minimise_at_theta

    spec, alpha, _, _ = POINTS[args.point]
    for d in args.d:
        ds = replica_dataset(spec, d, alpha, args.seed)
        for th in args.thetas:
            t0 = time.perf_counter()
            r = minimise_at_theta(spec, ds, th, n_starts=args.replicas, start_noise=0.5, settings=GD)
            print(f"{args.point} d {d} seed {args.seed} theta {th}: {r.message}; R/d "
                  f"{np.array2string(r.train_loss, precision=8)}, q {np.round(r.q, 4)} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            if args.csv:
                append_row({"stage": "theta-scan", "point": args.point, "d": d, "seed": args.seed, "theta": th,
                        "converged": sum(x == "tol" for x in r.stop),
                        "train_loss": " ".join(f"{t:.8f}" for t in r.train_loss),
                        "q": " ".join(f"{t:.5f}" for t in r.q)}, CSV.with_name("replica_theta_scan.csv"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=("replicas", "local", "fixed", "stability", "theta-scan"))
    ap.add_argument("point", choices=tuple(POINTS))
    ap.add_argument("--d", type=int, nargs="+", default=[300])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--order", type=int, default=0, help="QMC order of the theory map (0: skip)")
    ap.add_argument("--alphas", type=float, nargs="+", default=[3.0, 2.0, 1.75, 1.65, 1.62])
    ap.add_argument("--thetas", type=float, nargs="+", default=[0.0, 0.2, 0.3, 0.4])
    ap.add_argument("--check-order", type=int, default=0,
                    help="stability: also the replicon on 3 scrambles of this QMC order at each point")
    ap.add_argument("--csv", action="store_true", help=f"append the results to {CSV}")
    args = ap.parse_args()
    args.csv_path = CSV
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    {"replicas": replicas, "local": local, "fixed": fixed, "stability": stability, "theta-scan": theta_scan}[args.stage](args)


if __name__ == "__main__":
    main()
