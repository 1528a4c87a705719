"""The root finders of the fixed point (docs/model.md (7.2)): quasi-Newton steps with Broyden
updates and a backtracking line search in relative units, and Anderson mixing of the damped
iteration, with the checks of an admissible iterate they share with
:func:`~attnphase.theory.fixed_point.solve_fixed_point`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.theory.saddle import DataStep, OrderParams, Saddle
from attnphase.theory.settings import SolverSettings


def zero_floor(x: np.ndarray) -> float:
    """Scale of an unknown that is zero by symmetry: ``1e-4`` of the largest unknown."""
    return 1e-4 * max(float(np.max(np.abs(x))), 1e-12)


def rel_change(new: np.ndarray, old: np.ndarray, natural: np.ndarray | None = None) -> float:
    """Largest relative change over the unknowns. An unknown that is zero by symmetry is
    measured against ``1e-4`` of the largest unknown (the proximal solutions are exact to
    ~1e-12, which leaves that much noise on the exact zeros); with ``natural``
    (:meth:`OrderParams.natural_scale`) the off-diagonal entries of ``q`` and ``V`` are measured
    against their diagonal."""
    scale = np.maximum(np.maximum(np.abs(old), np.abs(new)), zero_floor(old))
    if natural is not None:
        scale = np.maximum(scale, natural)
    return float(np.max(np.abs(new - old) / scale)) if new.size else 0.0


def valid_step(x: np.ndarray, fx: np.ndarray, beta: float, L: int, F: int, rs: int) -> np.ndarray:
    """A damped step from ``x`` towards ``F(x) = fx`` that stays in the valid domain.

    ``V = s2 (lambda + s2 V_hat)^-1`` (weights step) passes through infinity, not zero, when
    ``V_hat`` falls below ``-lambda / s2`` (a locally concave loss, seen at ``lambda`` <= 5e-4):
    ``F(x)`` then has a negative ``V`` and a damped step in ``V`` heads for small ``V``, the wrong
    side. So ``V`` is first damped in its inverse, ``V^-1 <- (1 - beta) V^-1 + beta F(x)_V^-1``
    (continuous through that pole), the other unknowns as usual; failing that, shorter steps.
    """
    op, fop = OrderParams.from_vector(x, L, F, rs), OrderParams.from_vector(fx, L, F, rs)
    if np.all(np.isfinite(fop.V)):
        try:
            P = (1.0 - beta) * np.linalg.inv(op.V) + beta * np.linalg.inv(fop.V)
            damped = OrderParams.from_vector(x + beta * (fx - x), L, F, rs)
            cand = damped.replace(V=np.linalg.inv(0.5 * (P + P.T)))
            if is_valid(cand):
                return cand.to_vector()
        except np.linalg.LinAlgError:
            pass
    for shrink in (0.1, 0.01, 0.001):
        x_new = x + shrink * (fx - x)
        if is_valid(OrderParams.from_vector(x_new, L, F, rs)):
            break
    return x_new


def is_valid(op: OrderParams) -> bool:
    if not (np.all(np.isfinite(op.q)) and np.all(np.isfinite(op.V)) and np.all(np.isfinite(op.m))):
        return False
    if not np.all(np.isfinite(op.theta)):
        return False
    ev_q = np.linalg.eigvalsh(op.q)
    ev_v = np.linalg.eigvalsh(op.V)
    return bool(ev_q.min() >= 0 and ev_v.min() > 0)


def warm_starts(ds: DataStep) -> np.ndarray:
    """Previous global minimiser and the best *other* local minimum at each node (the global one
    again where there is none). Every start is then a point the full multi-start set reached,
    so at the same order parameters the warm-started map equals the full one (the soft split
    sees the same two lowest minima); a start outside that set (e.g. ``-h``) found second minima
    the full set lacks and made the two maps differ by ~1e-6."""
    return np.stack([ds.prox.h, ds.second], axis=1)


@dataclass(frozen=True)
class QuasiNewtonResult:
    """Outcome of :func:`quasi_newton`: the last point ``x`` (full vector; of a failed solve, the
    best of its full checks below ``noise_tol`` where there is one), the data step ``ds``
    there (see ``full_at``), its largest relative change ``rel`` under the map, the Broyden
    Jacobian ``J`` (relative units of the start), the data steps spent, whether it converged and
    a message saying how it ended."""

    x: np.ndarray
    ds: DataStep
    rel: float
    J: np.ndarray
    evals: int
    ok: bool
    message: str
    #: largest relative residual of the warm-started map where a failed solve stopped
    resid: float = float("inf")
    #: where ``ds`` was evaluated with the full multi-start set (None: ``ds`` is warm-started);
    #: a solve restarted *at that point* may be warm-started from ``ds`` (the warm-started map
    #: then equals the full one, see ``warm_starts``), anywhere else it may not
    full_at: np.ndarray | None = None
    #: whether the search replaced its Jacobian by forward differences on the way (:func:`_broyden`)
    refreshed: bool = False


class RelativeUnits:
    """Relative units ``y = x / scale`` of the unknowns that are not zero at ``x0`` (exact
    symmetry zeros stay zero; the scale is ``max(|x0|, 1e-3)``), and a count of the data steps
    spent by the residual defined on them."""

    def __init__(self, x0: np.ndarray) -> None:
        self.x0 = x0
        self.free = np.abs(x0) > 1e-14
        self.scale = np.maximum(np.abs(x0), 1e-3)[self.free]
        self.evals = 0

    def full_x(self, y: np.ndarray) -> np.ndarray:
        """The full vector of unknowns at ``y``."""
        x = np.zeros_like(self.x0)
        x[self.free] = y * self.scale
        return x


def in_units(J: np.ndarray, x_from: np.ndarray, x_to: np.ndarray) -> np.ndarray:
    """The Jacobian ``J`` of a residual in the relative units of ``x_from`` (:class:`RelativeUnits`)
    expressed in those of ``x_to``: with ``y = x / s`` and ``r_y = r_x / s``,
    ``J'_ij = J_ij (s_i / s'_i) (s'_j / s_j)``. ``J`` as it is where the two points do not have the
    same free unknowns (a Jacobian of another size is refused by :func:`quasi_newton` anyway).

    An off-diagonal overlap near zero moves by a large factor between the coarse and the fine
    rule (the two-head positional point at ``alpha = 2``, ``omega = 0.3``: ``V`` between the heads
    from 2.24 to -0.033, a ratio of scales of 67), so the Jacobian of one stage, taken in the units
    of its start, points the wrong way in the units of the next stage's start."""
    a, b = RelativeUnits(x_from), RelativeUnits(x_to)
    if not np.array_equal(a.free, b.free) or J.shape != (a.scale.size,) * 2:  # (array_equal: False for other shapes)
        return J
    return J * np.outer(a.scale / b.scale, b.scale / a.scale)


#: one evaluation of :class:`_Residual`: the residual (relative units), the data step, ``F(x)``
_Evaluation = tuple[np.ndarray, DataStep, np.ndarray]


class _Residual(RelativeUnits):
    """The residual ``r(y) = (F(x) - x) / scale`` of the fixed-point map on ``saddle`` in the
    relative units of :class:`RelativeUnits`, counting the data steps it spends."""

    def __init__(self, saddle: Saddle, x0: np.ndarray, settings: SolverSettings) -> None:
        super().__init__(x0)
        self.saddle, self.settings = saddle, settings

    def __call__(self, y: np.ndarray, ref: DataStep | None, given: DataStep | None = None) -> _Evaluation | None:
        """The residual at ``y``, the data step warm-started from the minima of ``ref`` (the full
        multi-start set without one; ``given``: that data step, already at hand) and ``F(x)``;
        ``None`` where ``x`` leaves the valid domain or ``F(x)`` is not finite."""
        sd = self.saddle
        x = self.full_x(y)
        op = OrderParams.from_vector(x, sd.L, sd.F, sd.rs)
        if not is_valid(op):
            return None
        self.evals += 1
        starts = None if ref is None else warm_starts(ref)
        ds = given if given is not None else sd.data_step(op, starts=starts, switch_width=self.settings.switch_width)
        fx = sd.weights_step(ds.hats).to_vector()
        if not np.all(np.isfinite(fx)):
            return None
        return (fx - x)[self.free] / self.scale, ds, fx


def quasi_newton(saddle: Saddle, x0: np.ndarray, settings: SolverSettings, J0: np.ndarray | None = None,
                 warm: DataStep | None = None, max_evals: int = 20, confirm_full: bool = True,
                 fd_jacobian: bool = False, first_full: DataStep | None = None) -> QuasiNewtonResult | None:
    """Newton's method on ``r(x) = F(x) - x`` in relative units, with Broyden updates: the
    quasi-Newton stage of docs/model.md (7.2).

    The Jacobian is ``J0`` when given (the previous point of a continuation: it changes slowly
    along a branch, so a warm-started point converges in a few evaluations) and forward
    differences otherwise. Trial evaluations use the warm-start set of the last full multi-start
    evaluation (a deterministic, smooth map); a point is accepted only when the *full* map moves
    every unknown by less than ``tol`` (relative), or with ``confirm_full=False`` (a loose ``tol``)
    when the warm-started map does (``ds`` is then the first, full evaluation, not one at ``x``).
    With ``fd_jacobian`` a start that is already converged gets the forward-difference Jacobian
    too (``nf`` warm-started evaluations), in the units of ``x0``. ``first_full``: the full
    multi-start data step at ``x0``, already at hand (it counts as the first evaluation).
    Returns ``None`` when the start is invalid.
    """
    res = _Residual(saddle, x0, settings)
    nf = int(res.free.sum())
    y = x0[res.free] / res.scale
    nat = OrderParams.from_vector(x0, saddle.L, saddle.F, saddle.rs).natural_scale()
    # the first evaluation is warm-started from a nearby solution on the same rule when given
    # (continuation), else from the full multi-start set
    if warm is not None and warm.prox.h.shape[0] != saddle.rule.size:
        warm = None
    if first_full is not None and first_full.prox.h.shape[0] == saddle.rule.size:
        warm = None  # (the full evaluation at x0, assembled by the caller: evaluate takes it as it is)
    else:
        first_full = None
    first = res(y, warm, first_full)
    full_at = res.full_x(y) if warm is None else None
    if first is not None and warm is not None and rel_change(first[2], res.full_x(y), nat) < settings.tol:
        first = res(y, None)  # a warm-started fixed point is confirmed with the full set
        full_at = res.full_x(y)
    if first is None:
        return None
    r, ref, fx = first
    rel = rel_change(fx, res.full_x(y), nat)
    if rel < settings.tol and not fd_jacobian:
        J_out = J0 if J0 is not None and J0.shape == (nf, nf) else np.eye(nf)  # (J0 of a start with other zeros: unusable)
        return QuasiNewtonResult(res.full_x(y), ref, rel, J_out, res.evals, True, "converged", full_at=full_at)
    if J0 is not None and J0.shape == (nf, nf) and np.all(np.isfinite(J0)):
        J = J0.copy()
    else:
        fd = _fd_jacobian(res, y, r, ref)
        if fd is None:
            return QuasiNewtonResult(res.full_x(y), ref, rel, np.eye(nf), res.evals, False, "invalid finite difference")
        J = fd
    if rel < settings.tol:  # (fd_jacobian: converged at x0, Jacobian wanted)
        return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, True, "converged", full_at=res.full_x(y))
    if warm is not None or J0 is None:
        # residual of the warm-start map at the current point (the full one may differ slightly).
        # Not where the first evaluation was the full one and the Jacobian is inherited: the two
        # maps differ by <~1e-9 (relative units; minima whose Newton run stopped short of gtol,
        # continued from there), which moves the first Broyden secant by ~1e-7 of a step of
        # ~1e-2, while the evaluation costs a fine data step
        out = res(y, ref)
        if out is None:
            return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, False, "invalid point")
        r = out[0]
    return _broyden(res, y, r, ref, J, rel, full_at, nat, max_evals, confirm_full)


def _fd_jacobian(res: _Residual, y: np.ndarray, r: np.ndarray, ref: DataStep) -> np.ndarray | None:
    """The Jacobian of ``res`` at ``y`` (where it is ``r``) by forward differences, warm-started
    from the minima of ``ref``; ``None`` where a step leaves the valid domain."""
    nf = y.size
    J = np.empty((nf, nf))
    h = 1e-6
    for j in range(nf):
        yj = y.copy()
        yj[j] += h
        out = res(yj, ref)
        if out is None:
            return None
        J[:, j] = (out[0] - r) / h
    return J


def _line_search(res: _Residual, y: np.ndarray, dy: np.ndarray, r: np.ndarray,
                 ref: DataStep) -> tuple[float, _Evaluation | None]:
    """The first of the steps ``dy, dy/2, dy/4, dy/8`` from ``y`` that does not increase the
    residual's norm (beyond 1e-3 of it), and its evaluation (``None``: none did)."""
    step = 1.0
    for _ in range(4):
        out = res(y + step * dy, ref)
        if out is not None and np.linalg.norm(out[0]) < np.linalg.norm(r) * (1.0 + 1e-3) + 1e-15:
            return step, out
        step *= 0.5
    return step, None


def broyden_update(J: np.ndarray, dx: np.ndarray, dr: np.ndarray) -> None:
    """Broyden's ("good") rank-one update of the Jacobian estimate ``J``, in place, for the step
    ``dx`` that changed the residual by ``dr`` (a zero step leaves ``J`` as it is)."""
    J += np.outer(dr - J @ dx, dx) / max(float(dx @ dx), 1e-300)


def _broyden(res: _Residual, y: np.ndarray, r: np.ndarray, ref: DataStep, J: np.ndarray, rel: float,
             full_at: np.ndarray | None, nat: np.ndarray, max_evals: int, confirm_full: bool) -> QuasiNewtonResult:
    """The Broyden iteration of :func:`quasi_newton` from ``y`` (residual ``r``, Jacobian ``J``,
    updated in place), until the full multi-start map confirms convergence or ``max_evals``
    data steps are spent.

    Where no step along the Newton direction decreases the residual, the Jacobian is replaced once
    by forward differences at ``y`` (``nf`` warm-started data steps) if the budget allows, and the
    iteration goes on; a second failure with that fresh Jacobian ends it. The inherited or
    Broyden-updated Jacobian can be far from the map's: refining the two-head specialised point
    (``alpha = 2``, ``omega = 0.3``) from the coarse rule's, 52 % off in norm, every stage stopped
    there and the full solver took 7-8 s, while the fresh Jacobian's first step cut the residual
    from 0.30 to 0.078 and the refinement converged in 2 s.

    A solve that ends unconverged returns the point of its full checks that the full map moved
    least, where that move was below ``settings.noise_tol`` (the map's noise floor; its ``resid`` is
    then that move): a caller that accepts the noise floor (:func:`attnphase.theory.refinement.refine_point`)
    confirms it there in one or two data steps instead of another stage towards a ``tol`` below the
    floor (untied student near interpolation, ``lambda = 1.3e-4``: a check at 6e-5 against a floor
    of 1e-4)."""
    settings = res.settings
    msg = "evaluation budget spent"
    s_ = np.full(y.size, np.inf)
    fresh = False  # (J is the forward-difference Jacobian at y)
    refreshed = False  # (J was replaced by forward differences on the way)
    floor: tuple[float, np.ndarray, DataStep] | None = None  # (the full check below noise_tol, least move)
    while res.evals < max_evals:
        try:
            dy = -np.linalg.solve(J, r)
        except np.linalg.LinAlgError:
            msg = "singular Jacobian"
            break
        step, accepted = _line_search(res, y, dy, r, ref)
        stalled = accepted is None
        if stalled and float(np.max(np.abs(r))) > 10 * settings.tol:
            fd = None if fresh or res.evals + y.size >= max_evals else _fd_jacobian(res, y, r, ref)
            if fd is None:
                msg = "no decrease along the Newton direction"
                break
            J, fresh, refreshed = fd, True, True
            continue
        if accepted is not None:
            fresh = False
            s_ = step * dy
            r_new = accepted[0]
            broyden_update(J, s_, r_new - r)
            y = y + s_
            r = r_new
        if not confirm_full and float(np.max(np.abs(r))) < settings.tol:
            return QuasiNewtonResult(res.full_x(y), ref, float(np.max(np.abs(r))), J, res.evals, True,
                                     "converged (warm-started map)", refreshed=refreshed)
        # at the noise floor of the map (no decrease possible) or below tol: full check
        if stalled or float(np.max(np.abs(s_))) < settings.tol or float(np.max(np.abs(r))) < settings.tol:
            # verify with the full multi-start set
            out = res(y, None)
            if out is None:
                msg = "invalid point"
                break
            r_full, ref, fx = out
            full_at = res.full_x(y)
            rel = rel_change(fx, res.full_x(y), nat)
            if rel < settings.tol:
                return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, True, "converged", full_at=full_at,
                                         refreshed=refreshed)
            if rel < settings.noise_tol and (floor is None or rel < floor[0]):
                floor = (rel, full_at, ref)
            if stalled:
                msg = f"stalled at relative change {rel:.1e}"
                break
            r = r_full  # (the full map's residual: the warm-started one at y differs by <~1e-9, above)
    if floor is not None:
        rel, x, ds = floor
        return QuasiNewtonResult(x, ds, rel, J, res.evals, False, f"{msg}; the full map moved its best point by "
                                 f"{rel:.1e}, below noise_tol", rel, x, refreshed)
    return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, False, msg, float(np.max(np.abs(r))), full_at,
                             refreshed)


class Anderson:
    """Type-II Anderson acceleration of the damped iteration ``x <- x + beta (F(x) - x)``, with
    restarts, and the safeguard that keeps every step in the valid domain (:func:`valid_step`)."""

    def __init__(self, settings: SolverSettings, L: int, F: int, rs: int) -> None:
        self.settings, self.L, self.F, self.rs = settings, L, F, rs
        self.X: list[np.ndarray] = []  # iterates
        self.R: list[np.ndarray] = []  # residuals F(x) - x
        self.best = np.inf

    def restart(self) -> None:
        """Forget the history (the best residual norm is kept)."""
        self.X.clear()
        self.R.clear()

    def step(self, x: np.ndarray, res: np.ndarray, fx: np.ndarray, rel: float, beta: float) -> np.ndarray:
        """The next iterate from ``x`` with residual ``res = fx - x`` (largest relative change
        ``rel``): Anderson-mixed below ``settings.anderson_below``, damped by ``beta`` otherwise."""
        L, F, rs = self.L, self.F, self.rs
        X, R = self.X, self.R
        rn = float(np.linalg.norm(res / np.maximum(np.abs(x), 1e-3)))
        if rn > 1e3 * self.best:  # diverging: restart acceleration
            self.restart()
        self.best = min(self.best, rn)
        X.append(x.copy())
        R.append(res.copy())
        if len(X) > self.settings.anderson + 1:
            X.pop(0)
            R.pop(0)
        x_new = x + beta * res
        if len(X) >= 2 and rel < self.settings.anderson_below:
            dX = np.stack([X[i + 1] - X[i] for i in range(len(X) - 1)], axis=1)
            dR = np.stack([R[i + 1] - R[i] for i in range(len(R) - 1)], axis=1)
            try:
                # least squares in relative units: V (~10) must not drown q (~0.01)
                wts = 1.0 / np.maximum(np.abs(x), 1e-3)
                gamma, *_ = np.linalg.lstsq(dR * wts[:, None], res * wts, rcond=1e-12)
                cand = x + beta * res - (dX + beta * dR) @ gamma
                if np.all(np.isfinite(cand)) and is_valid(OrderParams.from_vector(cand, L, F, rs)):
                    x_new = cand
                else:
                    self.restart()
            except np.linalg.LinAlgError:
                self.restart()
        if not is_valid(OrderParams.from_vector(x_new, L, F, rs)):
            x_new = valid_step(x, fx, beta, L, F, rs)
        return x_new
