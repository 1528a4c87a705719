"""GAMP for the Bayes-optimal baseline at finite ``d`` (docs/model.md (8.1), (8.9)).

The data are the simulator's (:func:`attnphase.sim.data.make_dataset`, labels kept): from each
sample the learner forms the measurement rows ``z_l / (sigma sqrt(d))`` and reads the teacher's
fields up to a common sign off the label (:func:`observations`); GAMP then estimates
``w = sigma Q*`` under its Gaussian prior ``N(0, sigma^2)``. The numerics here draw nothing: the
start is drawn by :func:`gamp_start` from the simulator's seeded streams and passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.sim.data import STREAM_INIT, Dataset, generator

__all__ = ["GampResult", "fields_from_softmax", "gamp", "gamp_start", "observations", "run_gamp"]

#: substream of :data:`attnphase.sim.data.STREAM_INIT` for GAMP's start (the trainer uses chunk 0)
_GAMP_CHUNK = 7


def observations(data: Dataset, omega: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(Phi, U)`` of a dataset (docs/model.md (8.1)): ``Phi`` of shape ``(n, L, d)``, the rows
    ``z_l / (sigma sqrt(d))`` with ``z = x - Pi / sqrt(d)``; ``U`` of shape ``(n, L)``, the teacher's
    fields ``s h*`` with an unknown sign ``s = +-1`` per sample, read off the labels: ``T = y z^T
    (z z^T)^{-1}``, ``S = (T - omega A) / (1 - omega)``, and ``h h^T`` is the rank-one matrix whose
    row-wise softmax is ``S``. Needs the labels (``make_dataset(..., keep_labels=True)``)."""
    spec = data.spec
    if data.Y is None:
        raise ValueError("GAMP needs the labels: draw the dataset with keep_labels=True")
    om = spec.omega if omega is None else omega
    X = data.X.detach().cpu().numpy().astype(np.float64)
    Y = data.Y.detach().cpu().numpy().astype(np.float64)
    Pi = data.Pi.detach().cpu().numpy().astype(np.float64)
    d = data.d
    z = X - Pi[None] / math.sqrt(d)
    zz = np.einsum("nld,nkd->nlk", z, z)
    yz = np.einsum("nld,nkd->nlk", Y, z)
    T = np.linalg.solve(zz, yz.transpose(0, 2, 1)).transpose(0, 2, 1)  # T = (y z^T)(z z^T)^{-1}
    S = (T - om * spec.A_array[None]) / (1.0 - om)
    U = fields_from_softmax(S)
    return z / (spec.sigma * math.sqrt(d)), U


def fields_from_softmax(S: np.ndarray) -> np.ndarray:
    """Fields ``u`` (``(n, L)``, up to a sign per row) with ``softmax(u u^T) = S`` (docs/model.md (8.1)).

    ``log S_lk = H_lk - kappa_l`` with ``H = h h^T``; symmetry of ``H`` gives ``kappa`` up to a
    common constant ``c``, so ``H = K + c 1 1^T`` with ``K_lk = log S_lk + log S_1l - log S_l1``;
    every 2 x 2 minor of the rank-one ``H`` vanishes, which is linear in ``c``
    (``c (K_ll + K_kk - 2 K_lk) = K_lk^2 - K_ll K_kk``, least squares over the pairs); ``h`` is
    then the leading eigenvector of ``H`` times the square root of its eigenvalue."""
    S = np.asarray(S, dtype=float)
    if np.any(S <= 0):
        raise ValueError("the label's softmax part has non-positive entries: omega or A do not match the data")
    logS = np.log(S)
    n, L, _ = S.shape
    e = logS[:, 0, :] - logS[:, :, 0]  # e_l = log S_1l - log S_l1
    K = logS + e[:, :, None]
    num = np.zeros(n)
    den = np.zeros(n)
    for l in range(L):
        for k in range(l + 1, L):
            a = K[:, l, l] + K[:, k, k] - 2.0 * K[:, l, k]
            b = K[:, l, k] ** 2 - K[:, l, l] * K[:, k, k]
            num += a * b
            den += a * a
    c = num / den
    H = K + c[:, None, None]
    H = 0.5 * (H + H.transpose(0, 2, 1))
    lam, vec = np.linalg.eigh(H)
    return vec[:, :, -1] * np.sqrt(np.maximum(lam[:, -1], 0.0))[:, None]


def gamp_start(d: int, seed: int, overlap: float = 1e-3, sigma: float = 0.5) -> np.ndarray:
    """An uninformed start for :func:`gamp`: ``w0 ~ N(0, sigma^2 overlap)`` i.i.d., drawn from the
    simulator's seeded init stream (:func:`attnphase.sim.data.generator`)."""
    import torch

    g = torch.randn(d, generator=generator(seed, STREAM_INIT, _GAMP_CHUNK), dtype=torch.float64)
    return sigma * math.sqrt(overlap) * g.numpy()


@dataclass(frozen=True)
class GampResult:
    """GAMP's estimate and its overlaps (docs/model.md (8.9)): ``w`` the posterior mean of
    ``sigma Q*``; ``overlap`` ``|w^T w*| / |w*|^2``, the fraction of the teacher recovered (the
    state evolution's ``x``); ``self_overlap`` ``|w|^2 / (sigma^2 d)``; ``variance`` the
    posterior variance over ``sigma^2`` (``1 - x`` by the Nishimori identity); ``stop``:
    ``converged``, ``cycle`` (a two-cycle, which finite ``d`` can have: its midpoint is
    returned), ``uninformed`` (the estimate shrank to ``0``), ``recovered`` (variance below ``1e-12``), ``unstable`` (the estimate's norm
    and variance stopped adding up to the prior's, the previous iterate is returned) or
    ``max_iter``; ``history``: the overlap per iteration."""

    w: np.ndarray
    overlap: float
    self_overlap: float
    variance: float
    iterations: int
    stop: str
    history: tuple[float, ...]

    @property
    def converged(self) -> bool:
        """The iteration reached a fixed point, a two-cycle or perfect recovery."""
        return self.stop in ("converged", "cycle", "recovered", "uninformed")

    def to_dict(self) -> dict[str, Any]:
        return {"overlap": self.overlap, "self_overlap": self.self_overlap, "variance": self.variance,
                "iterations": self.iterations, "stop": self.stop}


#: GAMP stops as unstable where ``(|w|^2 / d + v) / rho`` leaves ``1`` by more than this (at
#: finite ``d`` this happens past perfect recovery, where the error's norm can grow while ``v -> 0``)
_CONSISTENCY = 0.5

#: ``v / rho`` below which GAMP stops: the teacher is recovered to working precision
_V_FLOOR = 1e-12


def _channel(U: np.ndarray, omega: np.ndarray, V: float) -> tuple[np.ndarray, float]:
    """``g_out`` and the mean of ``dg_l / domega_l`` of the sign channel ``u = s h`` for a cavity
    ``N(omega, V I_L)`` (docs/model.md (8.2)): ``E[h] = u tanh(u . omega / V)``."""
    t = np.tanh(np.einsum("nl,nl->n", U, omega) / V)[:, None]
    g = (U * t - omega) / V
    dg = (U**2 * (1.0 - t**2) / V - 1.0) / V
    return g, float(dg.mean())


def gamp(Phi: np.ndarray, U: np.ndarray, rho: float, w0: np.ndarray, *, w_star: np.ndarray | None = None,
         max_iter: int = 1000, tol: float = 1e-5) -> GampResult:
    """GAMP (docs/model.md (8.9)) for ``u_mu = s_mu Phi_mu w`` (``Phi_mu`` the ``L x d`` rows of sample
    ``mu``, ``s_mu = +-1`` unknown), prior ``w_i ~ N(0, rho)``, scalar variances. ``w0``: the start
    (:func:`gamp_start`); ``w_star``: the truth, only to report the overlap (``rho d``-normalised).
    Stops when the relative change of ``w`` is below ``tol``, the posterior variance below
    ``1e-12 rho`` (perfect recovery), or the iteration loses its consistency (see
    :class:`GampResult`)."""
    n, L, d = Phi.shape
    F = Phi.reshape(n * L, d)
    u = U.reshape(n, L)
    row_sq = float(np.mean(np.einsum("ij,ij->i", F, F)))
    col_sq = float(np.einsum("ij,ij->", F, F)) / d
    w = np.array(w0, dtype=float)
    v = rho - float(w @ w) / d
    g = np.zeros((n, L))
    hist = []

    def ov(x: np.ndarray) -> float:
        return float(abs(x @ w_star) / (w_star @ w_star)) if w_star is not None else float(x @ x / (rho * d))

    stop = "max_iter"
    iterations = 0
    w_prev = w
    for it in range(1, max_iter + 1):
        iterations = it
        V = row_sq * v
        omega = (F @ w).reshape(n, L) - V * g
        g, dg = _channel(u, omega, V)
        A = max(-dg * col_sq, 1e-12)
        R = w + (F.T @ g.ravel()) / A
        w_new = R * (rho * A / (1.0 + rho * A))
        v_new = rho / (1.0 + rho * A)
        if not np.all(np.isfinite(w_new)) or abs((w_new @ w_new / d + v_new) / rho - 1.0) > _CONSISTENCY:
            stop = "unstable"  # (the previous iterate is kept)
            break
        norm = max(float(np.linalg.norm(w_new)), 1e-300)
        change = float(np.linalg.norm(w_new - w)) / norm
        change2 = float(np.linalg.norm(w_new - w_prev)) / norm
        w_prev, w, v = w, w_new, v_new
        hist.append(ov(w))
        if v < _V_FLOOR * rho:
            stop = "recovered"
            break
        if float(w @ w) < _V_FLOOR * rho * d:
            stop = "uninformed"  # (the estimate has shrunk to the prior mean 0)
            break
        if change < tol:
            stop = "converged"
            break
        if change2 < tol:  # a two-cycle (finite d): its midpoint
            w = 0.5 * (w + w_prev)
            stop = "cycle"
            break
    return GampResult(w=w, overlap=ov(w), self_overlap=float(w @ w / (rho * d)), variance=float(v / rho),
                      iterations=iterations, stop=stop, history=tuple(hist))


def run_gamp(spec: Any, alpha: float, d: int, seeds: tuple[int, ...], max_iter: int = 1000) -> dict[str, Any]:
    """GAMP on one dataset per seed (:func:`attnphase.sim.data.make_dataset`, ``n = round(alpha
    d)``, labels kept), each from :func:`gamp_start`: the overlaps per seed, their mean and
    standard error, and the stop reasons (docs/model.md (8.9))."""
    from attnphase.sim.data import make_dataset, n_samples

    n = n_samples(alpha, d)
    rho = spec.sigma**2
    runs = []
    for seed in seeds:
        data = make_dataset(spec, d, n, seed, n_test=1, keep_labels=True)
        Phi, U = observations(data)
        w_star = spec.sigma * data.Q_star.detach().cpu().numpy().astype(np.float64)[:, 0]
        res = gamp(Phi, U, rho, gamp_start(d, seed, sigma=spec.sigma), w_star=w_star, max_iter=max_iter)
        runs.append({"seed": int(seed), **res.to_dict()})
    ov = np.array([r["overlap"] for r in runs])
    sem = float(ov.std(ddof=1) / math.sqrt(len(ov))) if len(ov) > 1 else float("nan")
    return {"alpha": float(alpha), "d": int(d), "n": n, "mean_overlap": float(ov.mean()), "sem": sem,
            "converged": sum(r["stop"] in ("converged", "cycle", "recovered", "uninformed") for r in runs),
            "runs": runs}
