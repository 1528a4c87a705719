"""Stability of a ``theta = 0`` fixed point (the positional branch) against the semantic overlap
(docs/model.md (2.2), (4.1), (5.1); the derivation and the measurements are in docs/cross.md,
"Is the positional fixed point a minimum of the risk?").

At ``theta = 0`` the map ``order parameters -> data step -> weights step`` commutes with
``theta -> -theta`` (``T(h*)`` is even in ``h*``; with the teacher noises ``eta -> -eta`` the data
step's ``theta_hat`` changes sign and nothing else changes; a causal mask on the student or the target
does not touch this), so its Jacobian there is block
diagonal and, at rank ``r = r* = 1``, the ``theta`` block is one number,

    F' = d theta_new / d theta      (the other order parameters held at the fixed point).

``F' > 1``: the undamped iteration leaves the point along ``theta`` (iteration stability). The
same number gives the curvature of the training error at fixed ``theta`` (the risk minimised over
``Q`` with ``Q^T Q* / d = theta``: in (4.1) the ``theta`` equation of the data step dropped and
``theta_hat`` extremised at fixed ``theta``, the off-diagonal second derivatives zero by the
symmetry), in user units (1.5):

    d^2 eps_t / d theta^2 = a (1 - F') ,        a = lambda + sigma^2 V_hat     ((2.2))

so the fixed point is a saddle of the risk (unstable towards ``theta != 0``) exactly when
``F' > 1``, a minimum along ``theta`` when ``F' < 1``. On a QMC rule that is closed under the sign
of the teacher noises the two sides of a central difference are mirror images, so ``F'`` is
exact up to the rule's own error (``delta`` 1e-3 and 1e-2 agree to 5e-3 at the reference point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnphase.spec.attention import names
from attnphase.spec.problem import ModelSpec
from attnphase.theory.branches import solve_point
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.saddle import OrderParams, Saddle
from attnphase.theory.target import solve_refined

#: the step of the central difference in ``theta`` (paper convention)
DELTA = 1e-3


@dataclass(frozen=True)
class ThetaStability:
    """The ``theta`` block of the fixed-point map at a ``theta = 0`` point on one rule (module
    docstring). ``slope``: ``F'``; ``a``: ``lambda + sigma^2 V_hat``; ``curvature``:
    ``a (1 - F')``, the second derivative of the training error in ``theta`` (user units);
    ``saddle``: ``F' > 1``. ``success`` false (and ``message`` why) where the point could not be
    taken (no positional fixed point on the rule)."""

    alpha: float
    order: int
    seed: int
    slope: float
    a: float
    success: bool
    message: str

    @property
    def curvature(self) -> float:
        return self.a * (1.0 - self.slope)

    @property
    def saddle(self) -> bool:
        return self.success and self.slope > 1.0


#: the students whose theta block is one number at rank 1 (one student matrix; the untied students have two)
STABILITY_VARIANTS = names("stability")


def check_stability(spec: ModelSpec) -> None:
    """``ValueError`` (one line) for a model the theta block does not cover."""
    if spec.rank != 1 or spec.teacher_rank != 1 or spec.variant not in STABILITY_VARIANTS or spec.heads != 1:
        raise ValueError("the theta stability covers the tied, causal and cross students of rank 1 (r = r* = 1) "
                         "and one head")
    if spec.mixture or not np.allclose(spec.C_array, spec.sigma**2 * np.eye(spec.tokens)):
        raise ValueError("the theta stability covers uncorrelated tokens without a mixture")
    if spec.value != "identity":
        raise ValueError("the theta stability covers value = identity only")
    if spec.activation != "softmax" or spec.teacher_activation != "softmax":
        raise ValueError("the theta stability covers the softmax (student and teacher)")


def theta_slope(saddle: Saddle, op: OrderParams, switch_width: float, delta: float = DELTA) -> tuple[float, float]:
    """``(F', a)`` at the ``theta = 0`` point ``op`` (paper convention) on the rule of ``saddle``:
    one data and weights step at ``theta = +delta`` and one at ``-delta`` (module docstring)."""
    if np.any(op.theta):
        raise RuntimeError("theta_slope needs a theta = 0 point")  # (an internal invariant)
    new = []
    a = math.nan
    for sign in (1.0, -1.0):
        ds = saddle.data_step(op.replace(theta=np.array([[sign * delta]])), switch_width=switch_width)
        new.append(float(saddle.weights_step(ds.hats).theta[0, 0]))
        a = saddle.spec.lam + saddle.s2 * float(ds.hats.V_hat[0, 0])
    return (new[0] - new[1]) / (2.0 * delta), a


#: the selections whose positional point :func:`positional_stability` examines (docs/model.md (3.3), (3.7))
STABILITY_RESPONSES = ("global", "positional-start")


def positional_stability(spec: ModelSpec, alpha: float, order: int = 12, seed: int = 0, response: str = "global",
                         start: OrderParams | None = None) -> ThetaStability:
    """The positional branch's fixed point on the QMC rule ``(order, seed)`` (the ``fast`` preset's
    tolerances) and its ``theta`` block (docs/model.md (5.1); module docstring). ``response``: the
    global equations or the positional-start selection (docs/model.md (3.7)), whose map has the
    same ``theta -> -theta`` symmetry (its start, the positional means, does not depend on the
    teacher). ``start``: the point to solve from (e.g. :func:`attnphase.theory.jumps.start_from` a
    solve's overlaps); else, for the global equations, the branch's point of a single solve
    (:func:`attnphase.theory.target.solve_refined`, ``fast`` preset), for the selection its own
    start. (The branch's own start can leave the branch at large ``alpha``: causal student,
    ``omega = 0.3``, ``alpha = 4.5``, order 10: a point with ``F'`` 1.66, a saddle, while the
    branch, at ``m`` 0.27, has ``F'`` 0.48.)"""
    check_stability(spec)
    if response not in STABILITY_RESPONSES:
        raise ValueError(f"the theta stability covers the responses {', '.join(STABILITY_RESPONSES)}, "
                         f"not {response!r}")
    one_rule = {} if response == "global" else {"response": response, "refine_order": 0, "target_error": 0.0}
    st = SolverSettings.preset("fast", order=order, warmup_order=min(order, 10), seed=seed, **one_rule)
    if start is None and response == "global":
        solved = solve_refined(spec, alpha, "positional", SolverSettings.preset("fast", seed=seed))
        if not solved.exists:
            return ThetaStability(float(alpha), order, seed, math.nan, math.nan, False,
                                  f"no positional fixed point: {solved.reason}")
        start = solved.order_params
    pt = solve_point(spec, alpha, "positional", st, start=start, error_estimate=False)
    if not pt.exists or pt.order_params is None:
        return ThetaStability(float(alpha), order, seed, math.nan, math.nan, False,
                              f"no positional fixed point on the rule: {pt.reason}")
    slope, a = theta_slope(make_saddle(spec, alpha, st), pt.order_params, st.switch_width)
    kind = "a saddle of the risk (unstable towards theta != 0)" if slope > 1 else "a minimum along theta"
    return ThetaStability(float(alpha), order, seed, slope, a, True,
                          f"positional fixed point at alpha = {alpha:g}: F' = {slope:.4f}, {kind}")


__all__ = ["DELTA", "STABILITY_RESPONSES", "STABILITY_VARIANTS", "ThetaStability", "check_stability", "positional_stability",
           "theta_slope"]
