"""Each fine rule's own fixed point and the error estimate of a refined point (docs/model.md
(7.3)): Broyden steps from the union's fixed point on each rule alone
(:func:`rule_fixed_points`), each rule's linear response where those do not converge
(:func:`linear_response_points`), and the standard errors over the rules (:func:`fine_errors`).
:func:`attnphase.theory.refinement.refine_point` calls them.
"""

from __future__ import annotations

import numpy as np

from attnphase.theory.diagnostics import ErrorEstimate
from attnphase.theory.estimates import user_errors
from attnphase.theory.fixed_point import SolverSettings, is_valid
from attnphase.theory.newton import RelativeUnits, broyden_update
from attnphase.theory.saddle import DataStep, OrderParams, Saddle

#: tolerance (relative step) and Broyden evaluations of each fine rule's own fixed point
RULE_SOLVE_TOL = 1e-6
RULE_SOLVE_MAX_EVALS = 8
#: a fine rule's own fixed point (for the error estimate) is taken once a Broyden step is below this
#: fraction of the rule's offset from the union's fixed point: the standard error over 4 rules
#: scatters by ~40 % (3 degrees of freedom), and 5 % instead of 1 % moved the estimates of the
#: reference case by at most 0.16 % (seeds 0-3, every branch) with 2-3 evaluations per rule
#: instead of 2-4
RULE_SOLVE_REL = 0.05

#: a step of a fine rule's own solve that leaves ``q`` with an eigenvalue below zero by at most
#: this fraction of the largest unknown is taken to the boundary ``q >= 0`` (that eigenvalue set
#: to zero): the fixed point lies on it. Seen on the trivial branch at small ``sigma`` and large
#: ``alpha`` (``sigma = 0.168``, ``alpha = 5.98``: ``q`` 1.4e-13 on the union, every rule's step
#: to ``q`` -3e-22 to -8e-22), where every rule's solve otherwise ended "left the valid domain"
BOUNDARY_ROUNDING = 1e-12


def rule_fixed_points(sd: Saddle, fine: list[Saddle], steps: list, x: np.ndarray, x0: np.ndarray, J: np.ndarray,
                      starts: np.ndarray, cuts: np.ndarray, settings: SolverSettings,
                      max_evals: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Fixed point of each fine rule near the union's fixed point ``x`` (for the error estimate).

    Broyden iteration on ``r_k(y) = F_k(y) - y`` (relative units, as in ``quasi_newton``) from
    ``x`` with the union's Jacobian ``J``, each evaluation warm-started from the union's minima;
    ``steps[k]`` is rule ``k``'s data step at ``x``. The unknowns and units are those of the
    union's solve, which started at ``x0`` (``J`` is in them). Stops when the step is below
    ``RULE_SOLVE_TOL`` or ``RULE_SOLVE_REL`` of the rule's offset from ``x`` (relative units) or after
    ``max_evals`` evaluations; returns the fixed points (n, dim) and a status per rule.
    """
    max_evals = RULE_SOLVE_MAX_EVALS if max_evals is None else max_evals
    L, F, rs = sd.L, sd.F, sd.rs
    units = RelativeUnits(x0)
    free, scale = units.free, units.scale
    out, status = [], []
    for k, (f, ds) in enumerate(zip(fine, steps, strict=True)):
        st = starts[cuts[k]:cuts[k + 1]]
        y = x.copy()
        r = _residual(sd, ds, y, units)
        Jk = J.copy()
        msg = f"not converged in {max_evals} evaluations"
        for it in range(max_evals):
            try:
                dy = -np.linalg.solve(Jk, r)
            except np.linalg.LinAlgError:
                msg = "singular Jacobian"
                break
            yn = y.copy()
            yn[free] += dy * scale
            op = onto_boundary(OrderParams.from_vector(yn, L, F, rs), yn)
            if not is_valid(op):
                msg = "left the valid domain"
                break
            yn = op.to_vector()
            # converged, or the step is RULE_SOLVE_REL of this rule's offset from x (enough for
            # the standard error; the fine maps are only smooth down to their noise floor): the
            # step is taken without evaluating the map at its end, which only a further step
            # would use (one data step less per rule, the same fixed points)
            offset = float(np.max(np.abs(yn - x)[free] / scale))
            if float(np.max(np.abs(dy))) < max(RULE_SOLVE_TOL, RULE_SOLVE_REL * offset):
                y = yn
                msg = f"converged in {it} evaluation{'' if it == 1 else 's'}"
                break
            dsn = f.data_step(op, starts=st, switch_width=settings.switch_width)
            rn = _residual(sd, dsn, yn, units)
            if not np.all(np.isfinite(rn)):
                msg = "non-finite residual"
                break
            broyden_update(Jk, dy, rn - r)
            y, r = yn, rn
        out.append(y)
        status.append(msg)
    return np.asarray(out), status


def _residual(sd: Saddle, ds: DataStep, y: np.ndarray, units: RelativeUnits) -> np.ndarray:
    """A rule's fixed-point residual ``(F(y) - y) / scale`` at ``y`` from its data step ``ds`` there,
    in ``units`` (the free unknowns only)."""
    return (sd.weights_step(ds.hats).to_vector() - y)[units.free] / units.scale


def onto_boundary(op: OrderParams, x: np.ndarray) -> OrderParams:
    """``op`` with the eigenvalues of ``q`` that are negative by rounding only
    (``BOUNDARY_ROUNDING`` of the largest entry of ``x``) set to zero; as it is otherwise."""
    ev, vec = np.linalg.eigh(op.q)
    if not np.all(np.isfinite(ev)) or ev.min() >= 0 or ev.min() < -BOUNDARY_ROUNDING * float(np.max(np.abs(x))):
        return op
    return op.replace(q=(vec * np.maximum(ev, 0.0)) @ vec.T)


def linear_response_points(sd: Saddle, steps: list[DataStep], x: np.ndarray, x_units: np.ndarray,
                           J: np.ndarray) -> np.ndarray | None:
    """Each fine rule's fixed point by one Newton step from the union's fixed point ``x`` with the
    union's Jacobian ``J`` (relative units of ``x_units``, as in :func:`rule_fixed_points`):
    ``x_k = x - J^-1 r_k(x)``, ``r_k`` the residual of rule ``k``'s map (its data step ``steps[k]``
    at ``x``). The error estimate where the rules' own solves do not converge (their maps rough at
    the level of their offsets: the trivial branch at ``sigma = 2``, ``lambda = 0.1``, ``alpha = 3``,
    residuals 1e-3 to 1e-2 after 8 Broyden steps against offsets of 1-3 %). ``None`` where ``J``
    is singular or a step is not finite."""
    units = RelativeUnits(x_units)
    out = []
    for ds in steps:
        try:
            dy = -np.linalg.solve(J, _residual(sd, ds, x, units))
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(dy)):
            return None
        xk = x.copy()
        xk[units.free] += dy * units.scale
        out.append(xk)
    return np.asarray(out)


def test_error_spread(sd: Saddle, op: OrderParams, X: np.ndarray) -> np.ndarray:
    """Test errors at the per-rule fixed points ``X``, as ``eps_g(op)`` plus the difference
    ``eps_g(x_k) - eps_g(op)`` on a common, cheaper product rule where the dimension makes the
    default one costly (the integrand is smooth, so the difference is exact to far below the
    spread; 7^6 instead of 10^6 nodes at L = 3, and ``4 * 2^11`` Sobol nodes above 6 dimensions)."""
    L, F, rs = sd.L, sd.F, sd.rs
    kw = {"order": 10 if sd.dim <= 4 else 7, "log2_n": 11}
    base = sd.test_error(op, **kw)
    return np.array([sd.test_error(OrderParams.from_vector(v, L, F, rs), **kw) - base for v in X])


def fine_errors(sd: Saddle, x: np.ndarray, op: OrderParams, X: np.ndarray, steps: list[DataStep], train: float,
                test: float, method: str, n_rules: int | None = None) -> tuple[dict[str, float], ErrorEstimate]:
    """Standard errors over the fine rules of the refined point ``x`` (``op``) from the rules' own
    fixed points that converged (rows of ``X``, of ``n_rules`` rules) and every rule's data step at
    ``op``: absolute ones (``Refinement.errors``: training and test error absolute, order
    parameters relative) and the relative error estimate (:class:`ErrorEstimate`). Each rule's own
    fixed point, rather than a linear-response step with the union's Broyden Jacobian: that was off
    by up to 9x in the standard error where the Jacobian was poor (L = 3)."""
    n, k = len(steps), len(X)
    trains = np.array([-sd.free_energy(op, ds) for ds in steps])
    tests = test_error_spread(sd, op, X)
    rel = np.std(X, ddof=1, axis=0) / np.sqrt(k) / np.maximum(np.abs(x), 1e-300)
    errors = {"train_loss": float(np.std(trains, ddof=1) / np.sqrt(n)),
              "test_error": float(np.std(tests, ddof=1) / np.sqrt(k)),
              **{nm: float(v) for nm, v in zip(op.names(), rel, strict=True)}}
    rel_est = {**{nm: errors[nm] for nm in op.names()}, "test_error": errors["test_error"] / test,
               "train_loss": errors["train_loss"] / abs(train), **user_errors(sd, op, X, se=True)}
    if k == (n_rules or n):
        return errors, ErrorEstimate(rel_est, f"standard error over {n} fine {method} rules (refinement)")
    return errors, ErrorEstimate(rel_est, f"standard error over {k} of {n_rules} fine {method} rules (refinement; "
                                          "the other rules' own fixed points did not converge)")
