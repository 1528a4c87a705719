"""The jump share: how much of the weights step's stiffness comes from the proximal minimiser
jumping between local minima (docs/model.md (3.5)).

The Stein form of ``V_hat`` ((3.3)) is the derivative ``-alpha E[sum_l dg_l / dw_l]`` in the
sense of distributions: it contains the pointwise derivative (each node's minimiser followed by
its local curvature) and a surface term from the nodes whose global minimiser jumps to another
local minimum as ``w`` moves. ``V_hat`` enters the weights step ((2.1)) through the stiffness
``K = lambda I + sigma^2 V_hat``; the jump share

    J = sigma^2 tr(V_hat_pointwise - V_hat_Stein) / tr(lambda I + sigma^2 V_hat_pointwise)

is the fraction of the stiffness the jumps take away (negative where they add to it). Where the
minimiser is smooth, ``J = 0`` and the replica-symmetric point is the one a single minimum of the
risk follows; where it jumps, that is no longer guaranteed (the replicon contains
``E[(dhhat/dw)^2]``, which a jump makes infinite). docs/variants.md ("The jump share") has the
measured points: every one where theory and gradient descent part at ``d = 1000`` by more than
the seeds' scatter has ``J >= 0.05``, except one that is a finite-size effect; every smooth one
agrees; and a ``J`` of 0.05 does not always mean a gap.

The pointwise form is taken by central differences of each node's minimiser continued locally
(the proximal problem of (3.2) re-solved from the node's own global minimiser, one start, at
``w_{l,b} +- eps``); at rank one it equals ``alpha E[tr H (I + V H)^{-1}]`` with ``H`` the loss
Hessian at the minimiser (tested). Each QMC rule gets its own fixed point of the branch, so the
spread over rules is the error of ``J`` and of the point together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.saddle import DataStep, OrderParams, Saddle


@dataclass(frozen=True)
class JumpShare:
    """The jump share at one branch's fixed point (module docstring).

    ``share``: the mean of ``J`` over the rules, ``share_error`` its standard error (``nan``
    with one rule); ``stein`` and ``pointwise``: ``tr V_hat`` per rule in the two forms (paper
    convention). ``success`` false (and ``message`` why) where the branch has no fixed point on
    some rule."""

    branch: str
    alpha: float
    order: int
    seeds: tuple[int, ...]
    share: float
    share_error: float
    stein: tuple[float, ...]
    pointwise: tuple[float, ...]
    success: bool
    message: str


def check_jumps(spec: ModelSpec) -> None:
    """``ValueError`` (one line) for a model whose pointwise form is not covered."""
    if not spec.uncorrelated:
        raise ValueError("the jump share covers uncorrelated tokens (no --token-corr)")


def pointwise_v_hat(sd: Saddle, V: np.ndarray, ds: DataStep) -> np.ndarray:
    """``V_hat`` in its pointwise form at the hard global minimisers of ``ds`` (module docstring;
    :meth:`attnphase.theory.saddle.Saddle.local_v_hat`); ``V`` the order parameter of ``ds``'s point
    (paper convention)."""
    return sd.local_v_hat(V, ds.w, ds.T, ds.prox.h)


def start_from(spec: ModelSpec, q: Sequence[Sequence[float]], m: Sequence[Sequence[float]], V: float,
               theta: Sequence[Sequence[float]], s: Sequence[Sequence[float]] = ()) -> OrderParams:
    """Paper-convention order parameters (uncorrelated tokens) from a solve's overlaps in user
    units (docs/model.md (1.5); ``BranchResult``'s ``q_matrix``, ``m_matrix``, ``theta_matrix``,
    ``s_matrix`` and its ``V``, taken as ``V I``): a start for :func:`jump_share`."""
    s2 = spec.sigma**2
    qm = np.asarray(q, dtype=float) * s2
    rows = [np.asarray(m, dtype=float)] + ([np.asarray(s, dtype=float)] if len(s) else [])
    return OrderParams(qm, np.vstack(rows), float(V) * np.eye(qm.shape[0]), np.asarray(theta, dtype=float) * s2)


def jump_share(spec: ModelSpec, alpha: float, branch: str, order: int = 12,
               seeds: Sequence[int] = (0, 1, 2), start: OrderParams | None = None) -> JumpShare:
    """The jump share of ``branch`` at ``alpha`` (module docstring): on each QMC rule
    ``(order, seed)`` the branch's fixed point (the ``fast`` preset's tolerances; from ``start``,
    e.g. :func:`start_from` a refined solve, where given, else from the branch's own start), one
    data step there without the soft split (the hard global minimiser), ``tr V_hat`` in the Stein
    form and in the pointwise form."""
    check_jumps(spec)
    stein: list[float] = []
    pointwise: list[float] = []
    shares: list[float] = []
    seeds = tuple(int(s) for s in seeds)
    for seed in seeds:
        st = SolverSettings.preset("fast", order=order, warmup_order=min(order, 10), seed=seed)
        pt = solve_point(spec, alpha, branch, st, start=start, error_estimate=False)
        if not pt.exists or pt.order_params is None:
            return JumpShare(branch, float(alpha), order, seeds, math.nan, math.nan, tuple(stein), tuple(pointwise),
                             False, f"no {branch} fixed point on the rule of seed {seed}: {pt.reason}")
        op = pt.order_params
        sd = make_saddle(spec, alpha, st)
        ds = sd.data_step(op)
        stein.append(float(np.trace(ds.hats.V_hat)))
        pointwise.append(float(np.trace(pointwise_v_hat(sd, op.V, ds))))
        shares.append(sd.s2 * (pointwise[-1] - stein[-1]) / (spec.lam * sd.F + sd.s2 * pointwise[-1]))
    share = float(np.mean(shares))
    err = float(np.std(shares, ddof=1) / math.sqrt(len(shares))) if len(shares) > 1 else math.nan
    return JumpShare(branch, float(alpha), order, seeds, share, err, tuple(stein), tuple(pointwise), True,
                     f"{branch} at alpha = {alpha:g}: jump share J = {share:.3f} +- {err:.3f} (the fraction of the "
                     f"stiffness lambda + sigma^2 V_hat that the proximal minimiser's jumps take away; 0 where it "
                     f"is smooth)")


__all__ = ["JumpShare", "check_jumps", "jump_share", "pointwise_v_hat", "start_from"]
