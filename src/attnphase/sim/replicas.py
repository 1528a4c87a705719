"""Several students trained on one data set: the replica test of the replica-symmetric (RS)
ansatz, and the local checks of one trained student (docs/variants.md, "Replica overlaps").

The RS equations (docs/model.md sections 2-3) describe the minimiser of the risk as unique up to
its symmetries: two students trained on the *same* data set from distinct starts in the same
basin (the same branch) end at the same point macroscopically, so their mutual overlap
``Q_a^T Q_b / d`` tends to the self overlap ``q = Q^T Q / d`` as ``d`` grows. A mutual overlap that
stays below ``q`` as ``d`` grows means many distinct minima, a state the RS equations do not
describe.

Random informed starts (one per replica ``k``, noise from its own generator):

* ``semantic``: ``Q = Q* + s g_k`` (first column; the rest ``s g_k``);
* ``positional``: ``Q = m0 u^T Pi + s g_k`` with ``u`` the positional start's token weights
  (:func:`attnphase.spec.problem.positional_axis`), so that ``m_1 = m0 (G u)_1`` at ``s = 0``;

``g_k`` has i.i.d. ``N(0, 1)`` entries. Untied students start the key equal to the query.

The local checks of one end state (:func:`polish`, :func:`hessian_spectrum`) work on the risk
``R`` of one run in float64: a quasi-Newton polish of the gradient (L-BFGS, then Newton steps
with the exact Hessian) and the lowest eigenvalues of the Hessian of ``R`` in the unit-scale
coordinates ``Q / sqrt(d)`` (the curvature that the gradient tolerance of the trainer refers to).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnphase.sim.data import Dataset, generator, make_dataset, n_samples
from attnphase.sim.models import Batch, is_untied, n_columns, risk
from attnphase.sim.simulate import overlaps
from attnphase.sim.train import TrainSettings, stack_batch, train
from attnphase.spec.problem import ModelSpec, positional_axis

#: generator stream of the replicas' start noise (after the streams of :mod:`attnphase.sim.data`)
STREAM_REPLICA = 4
REPLICA_INITS = ("semantic", "positional")


@dataclass(frozen=True)
class ReplicaResult:
    """``K`` students trained on one data set (``seed``) at ``(d, alpha)``.

    ``mutual``: ``K x K`` matrix ``Q_a^T Q_b / d`` of the first query columns (its diagonal is each
    replica's ``q``); ``mutual_rest``: the same for the parts of the columns orthogonal to the
    teacher and the positions (what is left of ``Q`` once ``theta`` and ``m`` are accounted for:
    the part the RS equations describe by its variance only); ``theta`` (``K``), ``m`` (``K x L``: ``m_l`` of
    the first query column), ``train_loss`` (``R/d``), ``grad_norm`` (``||grad R|| / sqrt(d)``), ``stop`` per replica. ``params``: the end states ``(K, d, c)``.
    """

    spec: ModelSpec
    d: int
    alpha: float
    seed: int
    init: str
    start_noise: float
    mutual: np.ndarray
    mutual_rest: np.ndarray
    theta: np.ndarray
    m: np.ndarray
    train_loss: np.ndarray
    grad_norm: np.ndarray
    stop: tuple[str, ...]
    params: torch.Tensor
    seconds: float

    @property
    def success(self) -> bool:
        """Every replica met the gradient tolerance."""
        return all(s == "tol" for s in self.stop)

    @property
    def message(self) -> str:
        n = sum(s == "tol" for s in self.stop)
        return f"{n} of {len(self.stop)} replicas converged"

    def gap(self, rest: bool = False) -> float:
        """Mean over pairs ``a < b`` of ``(q_a + q_b) / 2 - Q_a^T Q_b / d``: zero when the replicas
        coincide, positive when they are distinct minima (``rest``: of the orthogonal parts)."""
        return _gap(self.mutual_rest if rest else self.mutual)


    def relative_gap(self, rest: bool = False) -> float:
        """:meth:`gap` over the mean self overlap ``q`` (``rest``: of the orthogonal parts)."""
        M = self.mutual_rest if rest else self.mutual
        return _gap(M) / float(np.mean(np.diag(M)))


def _gap(M: np.ndarray) -> float:
    K = M.shape[0]
    q = np.diag(M)
    return float(np.mean([0.5 * (q[a] + q[b]) - M[a, b] for a in range(K) for b in range(a + 1, K)]))


def replica_starts(spec: ModelSpec, ds: Dataset, init: str, n_replicas: int, start_noise: float,
                   m0: float = 0.2) -> torch.Tensor:
    """Random informed starts ``(1, K, d, c)`` in float64 (module docstring)."""
    if init not in REPLICA_INITS:
        raise ValueError(f"unknown replica init {init!r}; choose from {', '.join(REPLICA_INITS)}")
    if not (math.isfinite(start_noise) and start_noise >= 0):
        raise ValueError(f"start_noise must be >= 0, got {start_noise}")
    if isinstance(n_replicas, bool) or int(n_replicas) != n_replicas or n_replicas < 2:
        raise ValueError(f"need at least two replicas, got {n_replicas}")
    d, r, c = ds.d, spec.rank, n_columns(spec)
    P = torch.empty(1, int(n_replicas), d, c, dtype=torch.float64)
    for k in range(int(n_replicas)):
        g = torch.randn(d, r, generator=generator(ds.seed, STREAM_REPLICA, k), dtype=torch.float64)
        Q = start_noise * g
        if init == "semantic":
            j = min(r, spec.teacher_rank)
            Q[:, :j] += ds.Q_star[:, :j].to(torch.float64).cpu()
        else:
            u = torch.as_tensor(positional_axis(spec), dtype=torch.float64)
            Q[:, 0] += m0 * (u @ ds.Pi.to(torch.float64).cpu())
        P[0, k] = torch.cat([Q, Q], dim=1) if is_untied(spec) else Q
    return P


def train_replicas(spec: ModelSpec, d: int, alpha: float, seed: int = 0, n_replicas: int = 3,
                   init: str = "semantic", start_noise: float = 0.5,
                   settings: TrainSettings | None = None) -> ReplicaResult:
    """Train ``n_replicas`` students on the data set of ``seed`` from random informed starts
    (module docstring) in one batch; measure their overlaps and mutual overlaps."""
    if spec.value != "identity":
        raise ValueError("train_replicas covers value = identity only")
    settings = settings or TrainSettings(momentum=0.9, tol=1e-6, max_steps=8000, log_every=0)
    n = n_samples(alpha, d)
    ds = make_dataset(spec, d, n, seed, n_test=1, dtype=settings.torch_dtype, device=settings.device)
    batch = stack_batch([ds])
    P0 = replica_starts(spec, ds, init, n_replicas, start_noise)
    res = train(spec, batch, {"P": P0.to(dtype=settings.torch_dtype, device=settings.device)}, settings)
    P = res.params["P"][0].to(torch.float64).cpu()
    Q1 = P[:, :, 0]  # (K, d): first query column of each replica
    mutual = (Q1 @ Q1.T / d).numpy()
    basis, _ = torch.linalg.qr(torch.cat([ds.Q_star.to(torch.float64).cpu(), ds.Pi.to(torch.float64).cpu().T], dim=1))
    rest = Q1 - (Q1 @ basis) @ basis.T
    mutual_rest = (rest @ rest.T / d).numpy()
    ovs = [overlaps(spec, ds, {"P": P[k]}) for k in range(P.shape[0])]
    return ReplicaResult(
        spec=spec, d=d, alpha=float(alpha), seed=int(seed), init=init, start_noise=float(start_noise),
        mutual=mutual, mutual_rest=mutual_rest,
        theta=np.array([float(o["theta"].reshape(-1)[0]) for o in ovs]),
        m=np.array([np.asarray(o["m"])[:spec.tokens, 0] for o in ovs]),
        train_loss=(res.risk[0].to(torch.float64).cpu() / d).numpy(),
        grad_norm=res.grad_norm[0].to(torch.float64).cpu().numpy(),
        stop=tuple(res.stop[0]), params=P, seconds=res.seconds,
    )


# ------------------------------------------------------------------ local checks of one run
def single_batch(ds: Dataset) -> Batch:
    """The training set of ``ds`` as a one-data-set :class:`Batch` in float64."""
    b = stack_batch([ds])
    return Batch(X=b.X.to(torch.float64), Sxx=b.Sxx.to(torch.float64), Syx=b.Syx.to(torch.float64),
                 yy=b.yy.to(torch.float64))


def risk_and_grad(spec: ModelSpec, batch: Batch, P: torch.Tensor) -> tuple[float, np.ndarray]:
    """``R`` and ``dR/dP`` (flattened) of one run ``P (d, c)`` in float64."""
    x = P.detach().to(torch.float64).clone().requires_grad_(True)
    R = risk(spec, batch, {"P": x[None, None]})[0, 0]
    (g,) = torch.autograd.grad(R, x)
    return float(R.detach()), g.reshape(-1).numpy()


def hessian(spec: ModelSpec, batch: Batch, P: torch.Tensor) -> np.ndarray:
    """The exact Hessian of ``R`` in ``P`` (``dc x dc``, float64; small ``d`` only)."""
    shape = P.shape

    def f(v: torch.Tensor) -> torch.Tensor:
        return risk(spec, batch, {"P": v.reshape(shape)[None, None]})[0, 0]

    H = torch.autograd.functional.hessian(f, P.detach().to(torch.float64).reshape(-1))
    return H.numpy()


@dataclass(frozen=True)
class PolishResult:
    """The end state after the polish: its parameters, ``R/d``, gradient norm
    ``||grad R|| / sqrt(d)`` before and after, and the distance moved ``||P - P0|| / ||P0||``."""

    params: torch.Tensor
    train_loss: float
    grad_before: float
    grad_after: float
    moved: float
    success: bool
    message: str


def polish(spec: ModelSpec, ds: Dataset, P0: torch.Tensor, gtol: float = 1e-10,
           newton_steps: int = 8) -> PolishResult:
    """Drive ``||grad R|| / sqrt(d)`` of one run below ``gtol`` from ``P0`` (L-BFGS in float64,
    then Newton steps with the exact Hessian while it is positive definite)."""
    from scipy.optimize import minimize

    batch = single_batch(ds)
    d = ds.d
    shape = P0.shape
    x0 = P0.detach().to(torch.float64).reshape(-1).numpy().copy()

    def fg(x: np.ndarray) -> tuple[float, np.ndarray]:
        return risk_and_grad(spec, batch, torch.as_tensor(x).reshape(shape))

    g0 = float(np.linalg.norm(fg(x0)[1])) / math.sqrt(d)
    sol = minimize(fg, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-14, "ftol": 1e-16, "maxcor": 30})
    x = sol.x
    R, g = fg(x)
    for _ in range(newton_steps):
        if np.linalg.norm(g) / math.sqrt(d) < gtol:
            break
        H = hessian(spec, batch, torch.as_tensor(x).reshape(shape))
        if np.linalg.eigvalsh(H)[0] <= 0:
            break
        x_new = x - np.linalg.solve(H, g)
        R_new, g_new = fg(x_new)
        if not np.isfinite(R_new) or np.linalg.norm(g_new) >= np.linalg.norm(g):
            break
        x, R, g = x_new, R_new, g_new
    ga = float(np.linalg.norm(g)) / math.sqrt(d)
    ok = ga < gtol
    return PolishResult(
        params=torch.as_tensor(x).reshape(shape), train_loss=R / d, grad_before=g0, grad_after=ga,
        moved=float(np.linalg.norm(x - x0) / np.linalg.norm(x0)), success=ok,
        message=f"gradient {g0:.2e} -> {ga:.2e}" + ("" if ok else f" (above {gtol:.0e})"),
    )


def hessian_spectrum(spec: ModelSpec, ds: Dataset, P: torch.Tensor) -> np.ndarray:
    """All eigenvalues (ascending) of the Hessian of ``R`` in ``Q`` at ``P``: the ridge alone gives
    ``lambda``; in the RS picture the bulk sits near ``K = lambda + sigma^2 V_hat``
    (docs/model.md (2.1)), and ``V = sigma^2 tr(H^{-1}) / d`` (paper convention) at a minimum."""
    return np.linalg.eigvalsh(hessian(spec, single_batch(ds), P))


def replica_dataset(spec: ModelSpec, d: int, alpha: float, seed: int) -> Dataset:
    """The training set :func:`train_replicas` uses for ``(d, alpha, seed)`` (float64)."""
    return make_dataset(spec, d, n_samples(alpha, d), seed, n_test=1)


__all__: Sequence[str] = [
    "ConstrainedResult",
    "PolishResult",
    "ReplicaResult",
    "hessian",
    "hessian_spectrum",
    "minimise_at_theta",
    "polish",
    "replica_dataset",
    "replica_starts",
    "risk_and_grad",
    "single_batch",
    "train_replicas",
]


# ------------------------------------------------------------------ minima at a fixed theta
@dataclass(frozen=True)
class ConstrainedResult:
    """Minima of ``R`` on the set ``theta = Q^T Q* / d`` fixed, ``m = 0`` (one query column):
    ``train_loss`` (``R/d``), ``q`` and the projected gradient norm per start, ``stop``, and the
    end states ``params`` (``(K, d)``)."""

    theta: float
    params: torch.Tensor
    train_loss: np.ndarray
    q: np.ndarray
    grad_norm: np.ndarray
    stop: tuple[str, ...]

    @property
    def success(self) -> bool:
        return all(s == "tol" for s in self.stop)

    @property
    def message(self) -> str:
        return f"{sum(s == 'tol' for s in self.stop)} of {len(self.stop)} constrained runs converged"


def minimise_at_theta(spec: ModelSpec, ds: Dataset, theta: float, n_starts: int = 3, start_noise: float = 0.5,
                      settings: TrainSettings | None = None) -> ConstrainedResult:
    """Heavy-ball GD on ``R`` restricted to ``Q = Q_0 + Q_perp``, ``Q_0`` along the part of ``Q*``
    orthogonal to the positions (scaled to the overlap ``theta``), ``Q_perp`` orthogonal to ``Q*``
    and to the positions (so ``theta`` is held and ``m = 0``), from
    ``n_starts`` random ``Q_perp = start_noise (I - B B^T) g_k`` (rank one, tied or causal
    students). The lowest ``R`` found at each ``theta`` traces the finite-``d`` energy of the
    ``m = 0`` states as a function of ``theta``, which the RS equations' ``m = 0`` fixed points
    are the stationary points of."""
    if spec.rank != 1 or is_untied(spec):
        raise ValueError("minimise_at_theta covers rank-one tied or causal students")
    settings = settings or TrainSettings(momentum=0.9, tol=1e-6, max_steps=8000, log_every=0)
    d = ds.d
    batch = single_batch(ds)
    Qs = ds.Q_star[:, 0].to(torch.float64).cpu()
    Pi_basis, _ = torch.linalg.qr(ds.Pi.to(torch.float64).cpu().T)
    Qs_perp = Qs - Pi_basis @ (Pi_basis.T @ Qs)  # (the teacher's part orthogonal to the positions)
    B, _ = torch.linalg.qr(torch.cat([Qs[:, None], ds.Pi.to(torch.float64).cpu().T], dim=1))
    base = theta * d * Qs_perp / float(Qs @ Qs_perp)
    P = torch.empty(1, int(n_starts), d, 1, dtype=torch.float64)
    for k in range(int(n_starts)):
        g = torch.randn(d, generator=generator(ds.seed, STREAM_REPLICA + 1, k), dtype=torch.float64)
        P[0, k, :, 0] = base + start_noise * (g - B @ (B.T @ g))
    from attnphase.sim.models import objective

    lr, mom = settings.learning_rate, settings.momentum
    buf = torch.zeros_like(P)
    active = torch.ones(int(n_starts), dtype=torch.bool)
    gn = torch.zeros(int(n_starts), dtype=torch.float64)
    R = torch.zeros(int(n_starts), dtype=torch.float64)
    for _ in range(settings.max_steps + 1):
        Rb, grads = objective(spec, batch, {"P": P}, "analytic")
        g = grads["P"]
        g = g - (B @ (B.T @ g[0, :, :, 0].T)).T[None, :, :, None]
        R = Rb[0]
        gn = torch.sqrt((g * g).sum(dim=(-1, -2)))[0] / math.sqrt(d)
        active &= gn >= settings.tol
        if not bool(active.any()):
            break
        buf.mul_(mom).add_(g)
        P.sub_(torch.where(active[None, :, None, None], lr * buf, 0.0))
    Q = P[0, :, :, 0]
    return ConstrainedResult(
        theta=float(theta), params=Q.clone(), train_loss=(R / d).numpy(), q=((Q * Q).sum(dim=1) / d).numpy(),
        grad_norm=gn.numpy(), stop=tuple("max_steps" if bool(a) else "tol" for a in active),
    )
