"""Is the positional fixed point of cross-attention a local minimum of the risk or a saddle?
(docs/cross.md, "Is the positional fixed point a minimum of the risk?"; docs/model.md (5.1), (10.4)).

Reference case: ``--variant cross``, ``L = L' = 2``, ``omega = 0.3``, ``sigma = 0.5``,
``lambda = 0.01``; self-attention (``--variant tied``) for comparison. The measurements:

``theory``
    The stability of the positional fixed point against ``theta`` in the state equations. At
    ``theta = 0`` the map ``(order parameters) -> data step -> weights step`` commutes with
    ``theta -> -theta`` (``T(h*)`` is even in ``h*``), so its Jacobian there is block diagonal and
    the ``theta`` block is one number, ``F' = d theta_new / d theta`` (the other order parameters
    held at the fixed point; a central difference at ``theta = delta`` on a sign-closed QMC rule,
    ``delta`` 1e-3 and 1e-2 in paper units). ``F' > 1``: the undamped iteration leaves the point
    along ``theta`` (iteration stability). The same number gives the curvature of the training
    error at fixed ``theta`` (the risk minimised over ``Q`` with ``Q^T Q* / d = theta``; the
    ``theta_hat`` terms of (4.1) extremised at fixed ``theta``), in user units (1.5):
    ``d^2 eps_t / d theta^2 = a (1 - F')``, ``a = lambda + sigma^2 V_hat`` (risk stability): the
    fixed point is a saddle of the risk exactly when ``F' > 1``.

``escape``
    Gradient descent at finite ``d`` started AT the theory's positional state: ``Q`` along the
    positions with the theory's ``m`` (all ``L + L'`` rows), a random part orthogonal to the
    positions and to the teacher filling ``q``, and ``theta`` exactly 0 (``--theta0`` adds
    ``theta0 Q*``). The overlaps are recorded along the trajectory, and the step at which
    ``|theta|`` reaches the threshold. A saddle seeded at ``O(1/sqrt(d))`` is left after a time
    that grows like ``log d``; here the sample's own slope along the teacher seeds displacements
    of the size of the threshold at ``d <= 3000`` (docs/cross.md), so that law is not resolved. GD as in docs/cross.md:
    learning rate 0.15 on the summed risk, heavy ball 0.9, ``float64``.

``saddle``
    The curvature of the empirical risk at the positional stationary point of the sample: GD with
    the teacher component projected out (``theta = 0`` held exactly) to a gradient norm
    ``< 1e-7``, then Hessian-vector products (central differences of the analytic gradient) for
    ``u^T H u`` along the teacher direction ``u = Q*/|Q*|``, its Schur complement
    ``u^T H u - b^T H_perp^{-1} b`` (the curvature with the other directions relaxed, the
    finite-``d`` twin of ``a (1 - F')``; conjugate gradients) and the lowest eigenvalues of ``H``
    (``scipy.sparse.linalg.eigsh`` on a ``LinearOperator``) with the overlap of their eigenvectors
    with ``u``. Units: ``H`` of the summed risk ``R`` in the entries of ``Q``; ``u^T H u`` is then
    ``d^2 (R/d) / d theta^2`` in user units.

``agree``
    GD to convergence (tolerance 1e-6, at most 8000 steps) from the theory's positional state,
    measured as ``attnphase simulate`` measures a run (with the test error on fresh samples).

Usage (the reduced version, a few minutes on 2 cores; the full runs are the commands quoted in
docs/cross.md):

    python studies/cross_positional.py theory --alphas 1,2 --orders 11 --seeds 0
    python studies/cross_positional.py escape --alpha 2 --ds 300 --seeds 0,1,2 --stop-theta 0.3
    python studies/cross_positional.py saddle --alphas 1,2 --ds 300 --seeds 0
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, cg, eigsh

from attnphase.sim.data import Dataset, make_dataset
from attnphase.sim.models import Batch, objective, test_errors
from attnphase.sim.train import TrainSettings, stack_batch, train
from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings, solve_point, stability
from attnphase.theory.fixed_point import make_saddle

MODELS = {"cross": ModelSpec(variant="cross", omega=0.3), "tied": ModelSpec(omega=0.3)}
LR, MOMENTUM = 0.15, 0.9


# ------------------------------------------------------------------------------------ theory
@dataclass(frozen=True)
class PositionalState:
    """The positional fixed point of one rule (user units for ``q``, ``m``) and its ``theta`` block
    (:func:`attnphase.theory.stability.theta_slope`)."""

    q: float
    m: tuple[float, ...]
    V: float
    a: float
    slope: float  # F' = d theta_new / d theta (delta = 1e-3)
    slope_coarse: float  # the same with delta = 1e-2
    train_loss: float

    @property
    def curvature(self) -> float:
        """``d^2 eps_t / d theta^2`` at fixed ``theta`` (user units): ``a (1 - F')``."""
        return self.a * (1.0 - self.slope)


def theta_slope(spec: ModelSpec, alpha: float, order: int, seed: int) -> PositionalState:
    """Solve the positional branch on the QMC rule ``(order, seed)`` and take the ``theta`` block of
    the undamped fixed-point map there (module docstring)."""
    st = SolverSettings.preset("fast", order=order, warmup_order=min(order, 10), seed=seed)
    pt = solve_point(spec, alpha, "positional", st, error_estimate=False)
    if not pt.exists or pt.order_params is None:
        raise RuntimeError(f"no positional point at alpha {alpha}, order {order}: {pt.reason}")
    sd = make_saddle(spec, alpha, st)
    slope, a = stability.theta_slope(sd, pt.order_params, st.switch_width)
    coarse, _ = stability.theta_slope(sd, pt.order_params, st.switch_width, delta=1e-2)
    m = tuple(float(x) for x in np.asarray(pt.m_matrix, dtype=float)[:, 0])
    return PositionalState(pt.q, m, pt.V, a, slope, coarse, pt.train_loss)


def run_theory(args: argparse.Namespace) -> None:
    print("model alpha order seed   q        m_1      m'_1     a        F'(1e-3) F'(1e-2) a(1-F')   seconds")
    for name in args.models.split(","):
        spec = MODELS[name]
        for alpha in _floats(args.alphas):
            for order in _ints(args.orders):
                for seed in _ints(args.seeds):
                    t0 = time.perf_counter()
                    s = theta_slope(spec, alpha, order, seed)
                    mk = s.m[spec.L] if spec.is_cross else math.nan
                    print(f"{name:5s} {alpha:5.2f} {order:5d} {seed:4d}   {s.q:.5f}  {abs(s.m[0]):.5f}  {abs(mk):.5f}  "
                          f"{s.a:.5f}  {s.slope:.4f}   {s.slope_coarse:.4f}   {s.curvature:+.2e}  "
                          f"{time.perf_counter() - t0:.1f}", flush=True)


# ------------------------------------------------------------------------------ finite d
def theory_state(spec: ModelSpec, alpha: float, order: int = 12) -> PositionalState:
    """The positional state the GD runs start from (one rule of ``order``, seed 0)."""
    return theta_slope(spec, alpha, order, 0)


def start_at(spec: ModelSpec, ds: Dataset, q: float, m: np.ndarray, theta0: float, seed: int) -> torch.Tensor:
    """``Q`` (``d``) with ``Pi Q / d = m`` (all tokens), ``Q^T Q* / d = theta0`` and ``Q^T Q / d = q``:
    the positional part ``Pi^T G^+ m``, ``theta0 Q*`` (``Q*`` orthogonalised against the positions,
    ``|Q*|^2 = d`` kept) and a random part orthogonal to both."""
    d = ds.d
    Pi = ds.Pi.to(torch.float64)
    G = Pi @ Pi.T / d
    pos = Pi.T @ torch.linalg.pinv(G) @ torch.as_tensor(m, dtype=torch.float64)
    Qs = ds.Q_star[:, 0].to(torch.float64)
    g = torch.Generator().manual_seed(10_000 + seed)
    v = torch.randn(d, generator=g, dtype=torch.float64)
    basis, _ = torch.linalg.qr(torch.cat([Pi.T, Qs[:, None]], dim=1))  # (positions, teacher)
    v = v - basis @ (basis.T @ v)
    rest = q - float(pos @ pos) / d - theta0**2
    if rest <= 0:
        raise ValueError("the positional part and theta0 exceed q")
    v = v * math.sqrt(rest * d / float(v @ v))
    Q = pos + v
    # (the teacher has an O(1/sqrt(d)) overlap with the positions: removed, so that theta is theta0
    # exactly; this moves m by O(1/d))
    Q = Q - (float(Q @ Qs) / float(Qs @ Qs)) * Qs
    return Q + theta0 * (d / float(Qs @ Qs)) * Qs


def _batch(ds: Dataset) -> Batch:
    return stack_batch([ds])


def _overlaps(ds: Dataset, P: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``theta``, ``m`` (first query, first key) and ``q`` of the runs ``P (K, d)``."""
    d = ds.d
    theta = (P @ ds.Q_star[:, 0] / d).numpy()
    m = (P @ ds.Pi.T / d).numpy()
    q = ((P * P).sum(-1) / d).numpy()
    return theta, m, q


def trajectories(spec: ModelSpec, ds: Dataset, P0: torch.Tensor, steps: int, every: int,
                 project_out: torch.Tensor | None = None, tol: float = 0.0,
                 stop_theta: float = 0.0) -> dict[str, np.ndarray]:
    """Heavy-ball GD (``LR``, ``MOMENTUM``) on the summed risk of ``ds`` for the runs ``P0 (K, d)``,
    overlaps every ``every`` steps; ``project_out``: a unit vector removed from every step (and
    from the start); ``tol``: stop when every run's ``|grad| / sqrt(d)`` is below it; ``stop_theta``:
    stop when every run's ``|theta|`` has reached it."""
    batch = _batch(ds)
    d = ds.d
    P = P0.clone()[None, :, :, None]
    if project_out is not None:
        P = P - (P[..., 0] @ project_out)[..., None, None] * project_out[:, None]
    buf = torch.zeros_like(P)
    rec: dict[str, list] = {"step": [], "theta": [], "m": [], "q": [], "risk": [], "grad": []}
    for t in range(steps + 1):
        R, grads = objective(spec, batch, {"P": P})
        gP = grads["P"]
        if project_out is not None:
            gP = gP - (gP[..., 0] @ project_out)[..., None, None] * project_out[:, None]
        gn = (gP * gP).sum(dim=(-1, -2)).sqrt()[0] / math.sqrt(d)
        done = bool(tol and (gn < tol).all())
        if t % every == 0 or t == steps or done:
            th, m, q = _overlaps(ds, P[0, :, :, 0])
            done = done or bool(stop_theta and (np.abs(th) >= stop_theta).all())
            rec["step"].append(t)
            rec["theta"].append(th)
            rec["m"].append(m)
            rec["q"].append(q)
            rec["risk"].append(R[0].numpy() / d)
            rec["grad"].append(gn.numpy())
            if done:
                break
        buf.mul_(MOMENTUM).add_(gP)
        P = P - LR * buf
    out = {k: np.asarray(v) for k, v in rec.items()}
    out["P"] = P[0, :, :, 0].numpy()
    return out


def escape_step(step: np.ndarray, theta: np.ndarray, threshold: float) -> float:
    """The first recorded step where ``|theta|`` reaches ``threshold`` (``nan`` if never)."""
    hit = np.nonzero(np.abs(theta) >= threshold)[0]
    return float(step[hit[0]]) if hit.size else math.nan


def growth_rate(step: np.ndarray, theta: np.ndarray, lo: float, hi: float) -> float:
    """Slope of ``log |theta|`` per GD step between the first passages of ``lo`` and ``hi``
    (the exponential phase of an escape; ``nan`` where ``|theta|`` does not pass both)."""
    a, b = escape_step(step, theta, lo), escape_step(step, theta, hi)
    if not (math.isfinite(a) and math.isfinite(b)) or b <= a:
        return math.nan
    sel = (step >= a) & (step <= b)
    return float(np.polyfit(step[sel], np.log(np.abs(theta[sel])), 1)[0])


def run_escape(args: argparse.Namespace) -> None:
    spec = MODELS[args.model]
    st = theory_state(spec, args.alpha)
    print(f"# {args.model}, alpha {args.alpha}: theory positional state q {st.q:.5f}, m {np.round(st.m, 5).tolist()}, "
          f"F' {st.slope:.4f}, a(1-F') {st.curvature:+.2e}; GD lr {LR} momentum {MOMENTUM}, threshold |theta| "
          f"{args.threshold}")
    print("d     seed theta0   escape_step  rate/step  final: theta    m_1      q        R/d        |grad|")
    for d in _ints(args.ds):
        for seed in _ints(args.seeds):
            t0 = time.perf_counter()
            ds = make_dataset(spec, d, round(args.alpha * d), seed, n_test=1)
            thetas = _floats(args.theta0)
            P0 = torch.stack([start_at(spec, ds, st.q, np.asarray(st.m), t, seed) for t in thetas])
            tr = trajectories(spec, ds, P0, args.steps, args.every, stop_theta=args.stop_theta)
            for k, t in enumerate(thetas):
                th = tr["theta"][:, k]
                esc = escape_step(tr["step"], th, args.threshold)
                rate = growth_rate(tr["step"], th, 0.01, args.threshold)
                print(f"{d:5d} {seed:4d} {t:+.3f}   {esc:9.0f}    {rate:.2e}   {th[-1]:+.4f}  {abs(tr['m'][-1, k, 0]):.4f}  "
                      f"{tr['q'][-1, k]:.4f}  {tr['risk'][-1, k]:.7f}  {tr['grad'][-1, k]:.1e}", flush=True)
            if args.trace:
                for i in range(0, len(tr["step"]), max(1, len(tr["step"]) // 20)):
                    print("   trace step", int(tr["step"][i]), " ".join(f"{x:+.4f}" for x in tr["theta"][i]))
            print(f"#   ({time.perf_counter() - t0:.0f} s)", flush=True)


def from_theory_state(spec: ModelSpec, alpha: float, d: int, seeds: list[int], st: PositionalState,
                      settings: TrainSettings) -> list[dict[str, float]]:
    """GD (``settings``) from the theory's positional state (``theta = 0``, :func:`start_at`) on the
    datasets of ``seeds``, measured as ``attnphase simulate`` measures a run: ``|m_1|``, ``|m'_1|``,
    ``|theta|``, ``q``, ``R/d`` and the test error on fresh samples."""
    datasets = [make_dataset(spec, d, round(alpha * d), s) for s in seeds]
    P0 = torch.stack([start_at(spec, ds, st.q, np.asarray(st.m), 0.0, s) for ds, s in zip(datasets, seeds, strict=True)])
    res = train(spec, stack_batch(datasets), {"P": P0[:, None, :, None]}, settings)
    test = test_errors(spec, [ds.test_chunks() for ds in datasets], res.params, d)
    out = []
    for i, ds in enumerate(datasets):
        th, m, q = _overlaps(ds, res.params["P"][i, :, :, 0])
        out.append({"q": float(q[0]), "m": abs(float(m[0, 0])), "m_key": abs(float(m[0, spec.L])) if spec.is_cross else 0.0,
                    "theta": abs(float(th[0])), "train_loss": float(res.risk[i, 0]) / d, "test_error": float(test[i, 0]),
                    "stop": res.stop[i][0], "steps": int(res.steps[i, 0])})
    return out


def run_agree(args: argparse.Namespace) -> None:
    spec = MODELS[args.model]
    gd = TrainSettings(optimizer="gd", lr=LR, momentum=MOMENTUM, tol=1e-6, max_steps=8000, dtype="float64", log_every=0)
    for alpha in _floats(args.alphas):
        st = theory_state(spec, alpha)
        t0 = time.perf_counter()
        runs = from_theory_state(spec, alpha, args.d, _ints(args.seeds), st, gd)
        print(f"# {args.model}, alpha {alpha}, d {args.d}: GD from the theory's positional state ({time.perf_counter() - t0:.0f} s)")
        keys = ("q", "m", "m_key", "theta", "train_loss", "test_error")
        for r in runs:
            print("   " + "  ".join(f"{k} {r[k]:.6g}" for k in keys) + f"  stop {r['stop']} after {r['steps']} steps")
        print("   mean " + "  ".join(f"{k} {np.mean([r[k] for r in runs]):.6g} +- {np.std([r[k] for r in runs], ddof=1):.2g}"
                                   for k in keys), flush=True)


def hvp_operator(spec: ModelSpec, ds: Dataset, P: torch.Tensor, eps: float = 1e-4) -> LinearOperator:
    """``v -> H v`` at ``P (d)`` for the summed risk of ``ds``, by central differences of the
    analytic gradient (``float64``; step ``eps`` along the unit vector ``v / |v|``)."""
    batch = _batch(ds)
    d = ds.d

    def grad(x: torch.Tensor) -> torch.Tensor:
        return objective(spec, batch, {"P": x[None, None, :, None]})[1]["P"][0, 0, :, 0]

    def mv(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=float).reshape(-1)
        n = float(np.linalg.norm(v))
        if n == 0:
            return np.zeros(d)
        vt = torch.as_tensor(v / n)
        return (n * (grad(P + eps * vt) - grad(P - eps * vt)) / (2 * eps)).numpy()

    return LinearOperator((d, d), matvec=mv, dtype=np.float64)


def curvatures(spec: ModelSpec, ds: Dataset, P: torch.Tensor, u: torch.Tensor) -> dict[str, float]:
    """``u^T H u``, its Schur complement (conjugate gradients on ``H`` restricted to ``u^perp``) and
    the three lowest eigenvalues of ``H`` at ``P`` with their eigenvectors' overlaps ``|<v, u>|``."""
    d = ds.d
    H = hvp_operator(spec, ds, P)
    un = u.numpy()
    Hu = H.matvec(un)
    uHu = float(un @ Hu)
    b = Hu - uHu * un

    def perp(v: np.ndarray) -> np.ndarray:
        v = v - (un @ v) * un
        w = H.matvec(v)
        return w - (un @ w) * un

    x, info = cg(LinearOperator((d, d), matvec=perp, dtype=np.float64), b, rtol=1e-8, maxiter=3000)
    vals, vecs = eigsh(H, k=3, which="SA", tol=1e-8, ncv=40)
    out = {"uHu": uHu, "schur": uHu - float(b @ x), "cg_info": float(info)}
    for i, (v, o) in enumerate(zip(vals, np.abs(vecs.T @ un), strict=True)):
        out[f"eig{i}"], out[f"overlap{i}"] = float(v), float(o)
    return out


def run_saddle(args: argparse.Namespace) -> None:
    """The positional stationary point of each sample (``theta = 0`` held), its curvatures, then GD
    released from it (module docstring, ``saddle``)."""
    for name in args.models.split(","):
        spec = MODELS[name]
        for alpha in _floats(args.alphas):
            st = theory_state(spec, alpha)
            print(f"# {name}, alpha {alpha}: theory a(1-F') {st.curvature:+.2e} (F' {st.slope:.4f}, a {st.a:.5f}); "
                  f"released GD: lr {LR}, momentum {MOMENTUM}, escape at |theta| >= {args.threshold}", flush=True)
            for d in _ints(args.ds):
                for seed in _ints(args.seeds):
                    t0 = time.perf_counter()
                    ds = make_dataset(spec, d, round(alpha * d), seed, n_test=1)
                    u = ds.Q_star[:, 0].to(torch.float64)
                    u = u / u.norm()
                    P0 = start_at(spec, ds, st.q, np.asarray(st.m), 0.0, seed)[None]
                    con = trajectories(spec, ds, P0, args.steps, 500, project_out=u, tol=1e-7)
                    P = torch.as_tensor(con["P"][0])
                    g = objective(spec, _batch(ds), {"P": P[None, None, :, None]})[1]["P"][0, 0, :, 0]
                    line = (f"d {d:5d} seed {seed}: constrained point |grad_perp|/sqrt(d) {con['grad'][-1, 0]:.0e} "
                            f"({int(con['step'][-1])} steps), m_1 {abs(con['m'][-1, 0, 0]):.4f}, q {con['q'][-1, 0]:.4f}, "
                            f"R/d {con['risk'][-1, 0]:.7f}, u.grad {float(u @ g):+.2e}")
                    if d <= args.hessian_up_to:
                        c = curvatures(spec, ds, P, u)
                        line += (f"; u^T H u {c['uHu']:+.2e}, Schur {c['schur']:+.2e}, lowest eigenvalues "
                                 + ", ".join(f"{c[f'eig{i}']:+.2e} ({c[f'overlap{i}']:.2f})" for i in range(3)))
                    rel = trajectories(spec, ds, P[None], args.release_steps, 5, stop_theta=args.threshold)
                    th = rel["theta"][:, 0]
                    esc = escape_step(rel["step"], th, args.threshold)
                    line += (f"; released: escape step {esc:.0f}, rate/step {growth_rate(rel['step'], th, 3e-3, 3e-2):.2e}, "
                             f"final theta {th[-1]:+.4f} ({time.perf_counter() - t0:.0f} s)")
                    print(line, flush=True)


# ------------------------------------------------------------------------------ utilities
def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("theory")
    a.add_argument("--models", default="cross,tied")
    a.add_argument("--alphas", default="1,2")
    a.add_argument("--orders", default="11,12")
    a.add_argument("--seeds", default="0,1")
    b = sub.add_parser("escape")
    b.add_argument("--model", default="cross", choices=sorted(MODELS))
    b.add_argument("--alpha", type=float, default=2.0)
    b.add_argument("--ds", default="300,1000")
    b.add_argument("--seeds", default="0,1,2")
    b.add_argument("--theta0", default="0")
    b.add_argument("--steps", type=int, default=3000)
    b.add_argument("--every", type=int, default=10)
    b.add_argument("--threshold", type=float, default=0.1)
    b.add_argument("--stop-theta", type=float, default=0.0, help="stop when every run's |theta| reaches this")
    b.add_argument("--trace", action="store_true")
    e = sub.add_parser("agree")
    e.add_argument("--model", default="cross", choices=sorted(MODELS))
    e.add_argument("--alphas", default="1")
    e.add_argument("--d", type=int, default=1000)
    e.add_argument("--seeds", default="0,1,2")
    c = sub.add_parser("saddle")
    c.add_argument("--models", default="cross")
    c.add_argument("--alphas", default="1,2")
    c.add_argument("--ds", default="300")
    c.add_argument("--seeds", default="0")
    c.add_argument("--steps", type=int, default=20000, help="most projected GD steps to the constrained point")
    c.add_argument("--release-steps", type=int, default=3000)
    c.add_argument("--threshold", type=float, default=0.1)
    c.add_argument("--hessian-up-to", type=int, default=1000, help="curvatures only up to this d")
    args = p.parse_args()
    {"theory": run_theory, "escape": run_escape, "agree": run_agree, "saddle": run_saddle}[args.cmd](args)


if __name__ == "__main__":
    main()
