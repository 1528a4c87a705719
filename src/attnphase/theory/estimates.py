"""The linear-response estimate of the integration error of a fixed point (docs/model.md (7.3)).

The fixed point of the solver's rule is compared, to first order, with those of independent
rules (other QMC scrambles, or higher Gauss-Hermite orders): :func:`linear_response_estimate`. Where a
point is refined (:mod:`attnphase.theory.refinement`) the standard error over its fine rules
replaces this estimate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.diagnostics import ErrorEstimate
from attnphase.theory.fixed_point import SolverSettings, make_saddle, warm_starts
from attnphase.theory.saddle import DataStep, OrderParams, Saddle

#: the residual of :func:`_response` on a rule, in its units: ``resid(saddle, x, starts)``
_Resid = Callable[..., tuple[np.ndarray, DataStep]]


def _response(sd: Saddle, settings: SolverSettings, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Resid]:
    """Linear response of the fixed-point residual ``r(x) = F(x) - x`` at ``x0`` on the rule of
    ``sd``: the free unknowns (exact symmetry zeros stay fixed), their scale, the Jacobian of
    ``r`` in relative units by forward differences (warm-started from the minima at ``x0``:
    ``n_unknowns + 1`` data steps on this rule) and ``resid(saddle, x)`` in the same units."""
    L, F, rs = sd.L, sd.F, sd.rs
    free = np.abs(x0) > 1e-10 * np.max(np.abs(x0))
    scale = np.abs(x0[free])

    def resid(saddle: Saddle, x: np.ndarray, starts: np.ndarray | None = None) -> tuple[np.ndarray, DataStep]:
        op = OrderParams.from_vector(x, L, F, rs)
        ds = saddle.data_step(op, starts=starts, switch_width=settings.switch_width)
        return (saddle.weights_step(ds.hats).to_vector() - x)[free] / scale, ds

    r0, ds0 = resid(sd, x0)
    warm = warm_starts(ds0)  # the Jacobian columns reuse the minima found at x0
    idx = np.flatnonzero(free)
    J = np.empty((idx.size, idx.size))
    for j, i in enumerate(idx):
        xs = x0.copy()
        step = 1e-5 * abs(x0[i])
        xs[i] += step
        J[:, j] = (resid(sd, xs, warm)[0] - r0) / (step / scale[j])
    return free, scale, J, resid


def user_errors(sd: Saddle, op: OrderParams, samples: np.ndarray, se: bool) -> dict[str, float]:
    """Relative errors of the summary scalars (:meth:`Saddle.user_scalars`) under the user-facing
    keys ``q_user``, ``m_user``, ``theta_user``: from the order parameters ``samples`` of the
    independent rules, as a standard error of their mean (``se``) or as the root-mean-square
    deviation from ``op`` (linear response); 0 for an overlap that is zero by symmetry."""
    L, F, rs = sd.L, sd.F, sd.rs
    center = sd.user_scalars(op)
    vals = np.array([sd.user_scalars(OrderParams.from_vector(x, L, F, rs)) for x in samples])
    if se:
        err = np.std(vals, ddof=1, axis=0) / np.sqrt(len(vals))
    else:
        err = np.sqrt(np.mean((vals - center) ** 2, axis=0))
    return {key: float(e / abs(c)) if abs(c) > 1e-9 else 0.0
            for key, c, e in zip(("q_user", "m_user", "theta_user"), center, err, strict=True)}


def linear_response_estimate(spec: ModelSpec, alpha: float, settings: SolverSettings, op: OrderParams,
                             test_error: float) -> ErrorEstimate:
    """Integration-error estimate of the fixed point ``op`` of the solver's rule, whose test error
    is ``test_error``, by linear response (docs/model.md (7.3)): relative errors per unknown
    (:meth:`OrderParams.names`), of the test error and of the summary overlaps in user units.

    With ``r(x) = F(x) - x`` for the solver's rule and ``r_k`` for independently scrambled QMC
    rules (``gh``: orders ``order + 2k``), the fixed point of rule ``k`` is
    ``x_k ~ x* - J^{-1} r_k(x*)`` with ``J`` the Jacobian of ``r`` (forward differences). The
    root-mean-square of ``x_k - x*`` over the replicas estimates the error of ``x*``; it costs
    ``n_unknowns + replicas`` data steps instead of ``replicas`` full solves.
    """
    sd = make_saddle(spec, alpha, settings)
    L, F, rs = sd.L, sd.F, sd.rs
    x0 = op.to_vector()
    free, scale, J, resid = _response(sd, settings, x0)
    deltas = []
    for k in range(1, settings.replicas):
        if settings.method == "qmc":
            sdk = make_saddle(spec, alpha, settings, seed=settings.seed + 7919 * k)
        else:
            sdk = make_saddle(spec, alpha, settings, order=settings.order + 2 * k)
        rk = resid(sdk, x0)[0]
        dy = -np.linalg.solve(J, rk)
        dx = np.zeros_like(x0)
        dx[free] = dy * scale
        deltas.append(dx)
    D = np.asarray(deltas)
    rel = np.sqrt(np.mean(D**2, axis=0)) / np.maximum(np.abs(x0), 1e-300)
    rel[~free] = 0.0
    names = op.names()
    out: dict[str, float] = {n: float(v) for n, v in zip(names, rel, strict=True)}
    tests = [sd.test_error(OrderParams.from_vector(x0 + d, L, F, rs)) for d in D]
    out["test_error"] = float(np.sqrt(np.mean((np.asarray(tests) - test_error) ** 2)) / test_error)
    # the user-facing scalars
    out.update(user_errors(sd, op, x0 + D, se=False))
    return ErrorEstimate(out, f"linear response over {len(deltas)} extra {settings.method} rules")
