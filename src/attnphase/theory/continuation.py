"""Pseudo-arclength continuation of a branch on the fixed-point residual (docs/model.md (7.6)).

The damped iteration of (7.2) holds a fixed point only where it is attracting, and continuation in
``alpha`` with warm starts (:func:`attnphase.theory.branches.follow_branch`) loses a branch where
it turns back at a fold (saddle-node). :func:`arclength` follows the zero set of the residual
``G(x, alpha) = F_alpha(x) - x`` as a curve in ``(x, alpha)``, by Newton's method with the
arclength constraint, so it passes folds and follows the branch's other side, where the iteration
cannot hold it. It returns the points it went through, whether each is attracting for the damped
iteration, the fold's ``alpha`` (the branch's spinodal on that rule) where it turned, and the
point at the target ``alpha`` where it reached it.

``alpha`` enters the equations only as the factor of the conjugates (docs/model.md (3.3)): one
data step at ``x`` gives ``G`` at every ``alpha``, so the derivative in ``alpha`` costs no data step.

:class:`RecoveryBudget` bounds the work of the continuations in ``alpha`` and in the ridge that
rescue a failed direct start (:func:`attnphase.theory.branches.solve_point`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.classification import classify, combined_branch
from attnphase.theory.fixed_point import RelativeUnits, SolverSettings, is_valid, make_saddle, warm_starts
from attnphase.theory.newton import broyden_update
from attnphase.theory.saddle import DataStep, Hats, OrderParams, Saddle

#: largest ``max |G|`` (relative units) at which a corrector has converged; the warm-started map is
#: smooth (the minima of each node followed from the last full evaluation)
CORRECTOR_TOL = 1e-8
#: largest ``max |G|`` of the *full* map (every node's global minimum) at an accepted point: the
#: full map differs from the warm-started one where a node's global minimum switched
FULL_TOL = 1e-6
#: Newton iterations of one corrector
CORRECTOR_ITER = 8
#: relative forward-difference step of the Jacobian (relative units)
FD_STEP = 1e-6


@dataclass(frozen=True)
class ArcPoint:
    """One point of a continued branch: ``alpha``, the order parameters ``x`` (paper convention,
    :meth:`OrderParams.to_vector`), the summary overlaps in user units, the branch it is
    classified as (docs/model.md (5.1)), ``growth`` the largest real part of the eigenvalues of
    ``DF - I`` (``F`` the fixed-point map, ``x`` fixed) and ``stable``: ``growth < 0``, the damped
    iteration of (7.2) converges to the point from nearby."""

    alpha: float
    x: np.ndarray
    q: float
    m: float
    theta: float
    branch: str
    growth: float
    stable: bool

    def to_dict(self) -> dict[str, float | str | bool]:
        """The point without its vector of unknowns."""
        return {"alpha": self.alpha, "q": self.q, "m": self.m, "theta": self.theta, "branch": self.branch,
                "growth": self.growth, "stable": self.stable}


@dataclass(frozen=True)
class ArclengthResult:
    """Outcome of :func:`arclength`. ``success``: the branch was followed to ``target``
    (``reached`` is the point there); otherwise ``message`` says where it ended: at a fold
    (``fold``: the ``alpha`` of the turning point, the end of the branch on this rule, with
    ``fold_theta``, ``fold_m`` its overlaps), by leaving the branch, or by losing it. Past a fold,
    ``rejoins`` is the ``alpha`` where the far side of the branch meets another branch
    (``rejoins_branch``; e.g. the trivial one at a bifurcation), where the walk went that far.
    ``points``: every accepted point in order; ``evaluations``: data steps spent; ``order``,
    ``seed``: the QMC rule."""

    success: bool
    message: str
    points: tuple[ArcPoint, ...]
    fold: float | None
    fold_theta: float | None
    fold_m: float | None
    reached: ArcPoint | None
    evaluations: int
    order: int
    seed: int
    rejoins: float | None = None
    rejoins_branch: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"success": self.success, "message": self.message, "fold": self.fold,
                "fold_theta": self.fold_theta, "fold_m": self.fold_m,
                "reached": None if self.reached is None else self.reached.to_dict(),
                "evaluations": self.evaluations, "order": self.order, "seed": self.seed,
                "rejoins": self.rejoins, "rejoins_branch": self.rejoins_branch,
                "points": [p.to_dict() for p in self.points]}


class _Extended(RelativeUnits):
    """The residual ``G(y, alpha) = (F_alpha(x) - x) / scale`` in the relative units
    (:class:`~attnphase.theory.newton.RelativeUnits`) of the unknowns that are not zero at
    ``x0`` (symmetry zeros stay zero), on one rule; counts the data steps it spends."""

    def __init__(self, sd: Saddle, x0: np.ndarray, switch_width: float) -> None:
        super().__init__(x0)
        self.sd, self.switch_width = sd, switch_width

    def op(self, y: np.ndarray) -> OrderParams:
        sd = self.sd
        return OrderParams.from_vector(self.full_x(y), sd.L, sd.F, sd.rs)

    def data(self, y: np.ndarray, ref: DataStep | None) -> DataStep | None:
        """The data step at ``y``, warm-started from the minima of ``ref`` (the full multi-start
        set without one); ``None`` outside the valid domain."""
        op = self.op(y)
        if not is_valid(op):
            return None
        self.evals += 1
        return self.sd.data_step(op, starts=None if ref is None else warm_starts(ref), switch_width=self.switch_width)

    def G(self, y: np.ndarray, alpha: float, ds: DataStep) -> np.ndarray | None:
        """The residual at ``(y, alpha)`` from the data step ``ds`` at ``y`` (the conjugates are
        proportional to ``alpha``)."""
        k = alpha / self.sd.alpha
        h = ds.hats
        fx = self.sd.weights_step(Hats(h.q_hat * k, h.m_hat * k, h.V_hat * k, h.theta_hat * k)).to_vector()
        if not np.all(np.isfinite(fx)):
            return None
        return (fx - self.full_x(y))[self.free] / self.scale

    def jacobian(self, y: np.ndarray, alpha: float, g: np.ndarray, ds: DataStep,
                 ref: DataStep) -> np.ndarray | None:
        """``[dG/dy, dG/dalpha]`` at ``(y, alpha)`` (where ``G = g`` from ``ds``) by forward
        differences, warm-started from ``ref``; ``None`` where a step leaves the valid domain."""
        n = y.size
        J = np.empty((n, n + 1))
        for j in range(n):
            yj = y.copy()
            yj[j] += FD_STEP
            dj = self.data(yj, ref)
            gj = None if dj is None else self.G(yj, alpha, dj)
            if gj is None:
                return None
            J[:, j] = (gj - g) / FD_STEP
        ha = FD_STEP * max(1.0, abs(alpha))
        ga = self.G(y, alpha + ha, ds)
        if ga is None:
            return None
        J[:, n] = (ga - g) / ha
        return J


def _tangent(J: np.ndarray, prev: np.ndarray | None, direction: float) -> np.ndarray:
    """Unit null vector of the ``n x (n + 1)`` Jacobian, oriented along ``prev`` (or with its
    ``alpha`` component of the sign of ``direction``)."""
    t = np.linalg.svd(J)[2][-1]
    if prev is not None:
        return t if float(t @ prev) >= 0 else -t
    return t if t[-1] * direction >= 0 else -t


@dataclass
class _State:
    """An accepted point of the walk: unknowns, ``alpha``, residual, the full data step there,
    the extended Jacobian and the tangent."""

    y: np.ndarray
    alpha: float
    g: np.ndarray
    ds: DataStep
    J: np.ndarray
    t: np.ndarray


def _correct(ex: _Extended, y: np.ndarray, a: float, ref: DataStep, J: np.ndarray,
             row: np.ndarray, u_pred: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, DataStep] | None:
    """Newton's method on ``G(y, alpha) = 0`` with the constraint ``row . (u - u_pred) = 0``
    (``u = (y, alpha)``; pseudo-arclength: ``row`` the tangent; fixed ``alpha``: ``e_alpha``),
    from ``(y, a)``, Broyden updates of ``J``; trial data steps warm-started from ``ref``.
    Returns ``(y, alpha, G, data step)`` at convergence, ``None`` otherwise."""
    n = y.size
    J = J.copy()
    u = np.append(y, a)
    ds = ex.data(u[:n], ref)
    g = None if ds is None else ex.G(u[:n], float(u[n]), ds)
    if g is None or ds is None:
        return None
    for _ in range(CORRECTOR_ITER):
        if np.max(np.abs(g)) < CORRECTOR_TOL:
            return u[:n], float(u[n]), g, ds
        A = np.vstack([J, row])
        rhs = -np.append(g, row @ (u - u_pred))
        try:
            du = np.linalg.solve(A, rhs)
        except np.linalg.LinAlgError:
            return None
        un = u + du
        dsn = ex.data(un[:n], ref)
        gn = None if dsn is None else ex.G(un[:n], float(un[n]), dsn)
        if gn is None or dsn is None or not np.max(np.abs(gn)) < 2 * max(np.max(np.abs(g)), 1e-6):
            return None
        broyden_update(J, du, gn - g)
        u, g, ds = un, gn, dsn
    return (u[:n], float(u[n]), g, ds) if np.max(np.abs(g)) < CORRECTOR_TOL else None


def _accept(ex: _Extended, y: np.ndarray, a: float, J: np.ndarray, row: np.ndarray,
            u_pred: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, DataStep] | None:
    """A corrected point confirmed with the full multi-start set (every node's global minimum):
    corrected again from the full data step where a node's global minimum switched; ``None`` if
    the full map has no root there."""
    for _ in range(3):
        full = ex.data(y, None)
        g = None if full is None else ex.G(y, a, full)
        if g is None or full is None:
            return None
        if np.max(np.abs(g)) < FULL_TOL:
            return y, a, g, full
        out = _correct(ex, y, a, full, J, row, u_pred)
        if out is None:
            return None
        y, a = out[0], out[1]
    return None


def _point(ex: _Extended, y: np.ndarray, alpha: float, J: np.ndarray, mixed: bool | str | None) -> ArcPoint:
    sd = ex.sd
    op = ex.op(y)
    q, m, theta = (float(v) for v in sd.user_scalars(op))
    growth = float(np.max(np.linalg.eigvals(J[:, :-1]).real)) if J.shape[0] else -math.inf
    return ArcPoint(alpha=float(alpha), x=ex.full_x(y), q=q, m=m, theta=theta,
                    branch=classify(op, float(np.sqrt(sd.s2)), mixed), growth=growth, stable=growth < 0)


#: the signed overlap (user units) that defines a branch of rank one
DEFINING = {"semantic": "theta", "positional": "m"}


def _crossing(p: ArcPoint, pt: ArcPoint, branch: str) -> float | None:
    """The ``alpha`` where the overlap that defines ``branch`` changes sign between two
    consecutive points (linear interpolation), ``None`` where it does not."""
    key = DEFINING.get(branch)
    if key is None:
        return None
    a, b = getattr(p, key), getattr(pt, key)
    if a * b >= 0:
        return None
    return float(p.alpha + (pt.alpha - p.alpha) * a / (a - b))


def parabola(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float, float]:
    """The parabola through three points, ``y = a (x - x0)^2 + b (x - x0) + c`` about the middle
    abscissa ``x0 = x[1]`` (divided differences: exact interpolation, well conditioned where the
    points are close together and far from 0). Returns ``(a, b, c, x0)``; ``a = b = 0`` where two
    abscissae coincide."""
    x0 = float(x[1])
    u1, u3 = float(x[0]) - x0, float(x[2]) - x0
    y1, y2, y3 = float(y[0]), float(y[1]), float(y[2])
    if u1 == 0 or u3 == 0 or u1 == u3:
        return 0.0, 0.0, y2, x0
    d1, d3 = (y1 - y2) / u1, (y3 - y2) / u3  # slopes of the chords from the middle point
    a = (d3 - d1) / (u3 - u1)
    return a, d1 - a * u1, y2, x0


def _fold_alpha(s: list[float], a: list[float]) -> float:
    """The extremum of the parabola through the last three ``(s, alpha)`` (arclength, alpha); with
    two points only (the walk turned on its first step), their mean."""
    if len(s) < 3:
        return float(np.mean(a[-2:]))
    c2, c1, c0, s0 = parabola(s[-3:], a[-3:])
    if c2 == 0:
        return float(a[-2])
    u = float(np.clip(-c1 / (2 * c2), min(s[-3:]) - s0, max(s[-3:]) - s0))
    return c2 * u * u + c1 * u + c0


def _far_side(points: list[ArcPoint]) -> str:
    """How the points past a fold are described: held by the damped iteration or not."""
    if any(not p.stable for p in points):
        return "past the fold the branch runs back up in alpha as fixed points the damped iteration cannot hold"
    return "past the fold the branch runs back up in alpha"


def _fold_message(branch: str, fold: float, order: int, target: float) -> str:
    return (f"the {branch} branch turns at a fold at alpha {fold:.4g} on the order-{order} rule (pseudo-arclength "
            f"continuation): no {branch} fixed point beyond it towards alpha {target:g}")


def arclength(
    spec: ModelSpec,
    start: OrderParams,
    alpha0: float,
    target: float,
    branch: str,
    settings: SolverSettings | None = None,
    order: int | None = None,
    seed: int | None = None,
    step: float = 0.05,
    min_step: float = 1e-3,
    max_step: float = 0.2,
    max_points: int = 200,
    past_fold: int = 0,
) -> ArclengthResult:
    """Follow ``branch`` by pseudo-arclength continuation (docs/model.md (7.6)) from the fixed
    point ``start`` at ``alpha0`` towards ``target``, on the QMC rule of ``order`` (default
    ``settings.order``) and ``seed``.

    Each step predicts along the tangent of the curve ``G(x, alpha) = 0`` (arclength ``step`` in
    relative units of the unknowns and ``alpha``; lengthened after an easy step, halved after a
    failed one down to ``min_step``), corrects by Newton's method with the arclength constraint,
    and confirms the point on the full map (global minima, as in (7.2)). Where the ``alpha``
    component of the tangent changes sign the branch has turned: the fold's ``alpha`` is the
    extremum of the parabola through the last three points in ``(arclength, alpha)``. The walk then
    continues at most ``past_fold`` points on the far side (the branch's part that the iteration
    cannot hold), not beyond ``alpha0`` (there it has left the interval it was to cover: the
    two-head semantic branch followed from 4 to 2 at ``omega = 0.3`` folds at 2.28, and its far
    side ran to 7.1 in the 30 points after the fold, 6 s of that continuation's 12.5 s), or until
    that side meets another branch (``rejoins``). It also stops where the point leaves ``branch`` (:func:`classify`), where a step
    below ``min_step`` fails, and after ``max_points`` points. The last step towards ``target``
    lands on it exactly (Newton at fixed ``alpha``).
    """
    settings = settings or SolverSettings()
    order = order or settings.order
    seed = settings.seed if seed is None else seed
    sd = make_saddle(spec, alpha0, settings, order=order, seed=seed)
    x0 = start.to_vector()
    ex = _Extended(sd, x0, settings.switch_width)
    mixed = combined_branch(spec)
    direction = math.copysign(1.0, target - alpha0)
    y = x0[ex.free] / ex.scale
    n = y.size

    def result(success: bool, message: str, points: list[ArcPoint], fold: float | None = None,
               at_fold: ArcPoint | None = None, reached: ArcPoint | None = None,
               rejoins: ArcPoint | None = None) -> ArclengthResult:
        return ArclengthResult(success, message, tuple(points), fold, None if at_fold is None else at_fold.theta,
                               None if at_fold is None else at_fold.m, reached, ex.evals, order, seed,
                               None if rejoins is None else rejoins.alpha, None if rejoins is None else rejoins.branch)

    # the start, corrected at fixed alpha on this rule
    e_a = np.zeros(n + 1)
    e_a[n] = 1.0
    ds0 = ex.data(y, None)
    g0 = None if ds0 is None else ex.G(y, alpha0, ds0)
    J0 = None if (g0 is None or ds0 is None) else ex.jacobian(y, alpha0, g0, ds0, ds0)
    if J0 is None or ds0 is None:
        return result(False, "the start is not a valid point", [])
    first = _accept(ex, y, alpha0, J0, e_a, np.append(y, alpha0))
    if first is None:
        return result(False, f"no fixed point near the start on the order-{order} rule", [])
    y, a, g, ds = first
    J = ex.jacobian(y, a, g, ds, ds)
    if J is None:
        return result(False, "the Jacobian at the start left the valid domain", [])
    st = _State(y, a, g, ds, J, _tangent(J, None, direction))
    points = [_point(ex, y, a, J, mixed)]
    if points[0].branch != branch:
        return result(False, f"the start is on the {points[0].branch} branch, not the {branch} one", points)
    s_hist, a_hist = [0.0], [a]
    h = step
    fold: float | None = None
    fold_pt: ArcPoint | None = None
    fold_at = 0
    after = 0
    while len(points) < max_points:
        u = np.append(st.y, st.alpha)
        u_pred = u + h * st.t
        landing = fold is None and (u_pred[n] - target) * direction >= 0
        if landing:  # the step crosses the target: land on it at fixed alpha
            frac = (target - st.alpha) / (h * st.t[n])
            u_pred = u + frac * h * st.t
            u_pred[n] = target
            row = e_a
        else:
            row = st.t
        out = _correct(ex, u_pred[:n], float(u_pred[n]), st.ds, st.J, row, u_pred)
        if out is not None:
            out = _accept(ex, out[0], out[1], st.J, row, u_pred)
        if out is None:
            h *= 0.5
            if h < min_step:
                msg = (f"the {branch} branch was lost at alpha {st.alpha:.4g} (no root along the tangent for "
                       f"arclength steps down to {min_step:g})")
                return result(False, msg, points, fold, fold_pt)
            continue
        y, a, g, ds = out
        J = ex.jacobian(y, a, g, ds, ds)
        if J is None:
            return result(False, f"the Jacobian at alpha {a:.4g} left the valid domain", points, fold, fold_pt)
        t = _tangent(J, st.t, direction)
        pt = _point(ex, y, a, J, mixed)
        points.append(pt)
        s_hist.append(s_hist[-1] + float(np.linalg.norm(np.append(y, a) - u)))
        a_hist.append(a)
        crossed = _crossing(points[-2], pt, branch)
        if crossed is not None:  # (the overlap changed sign: the branch went through the trivial one)
            meet = replace(pt, alpha=crossed, branch="trivial")
            msg = (f"the {branch} branch meets the trivial branch at alpha {crossed:.4g} on the order-{order} rule "
                   f"(pseudo-arclength continuation; its {DEFINING[branch]} changes sign there)")
            if fold is not None:
                msg = (f"{_fold_message(branch, fold, order, target)}; {_far_side(points[fold_at:-1])} and meets "
                       f"the trivial branch at alpha {crossed:.4g}")
            return result(False, msg, points, fold, fold_pt, rejoins=meet)
        if pt.branch != branch:
            if fold is not None:
                msg = (f"{_fold_message(branch, fold, order, target)}; {_far_side(points[fold_at:-1])} and meets "
                       f"the {pt.branch} branch at alpha {a:.4g}")
                return result(False, msg, points, fold, fold_pt, rejoins=pt)
            msg = f"the continuation left the {branch} branch for the {pt.branch} one at alpha {a:.4g}"
            return result(False, msg, points, fold, fold_pt)
        if landing:
            return result(True, f"reached alpha {target:g}", points, fold, fold_pt, reached=pt)
        if fold is None and t[n] * st.t[n] < 0 and t[n] * direction < 0:
            fold = _fold_alpha(s_hist, a_hist)
            fold_at = len(points) - 1
            fold_pt = min(points[-3:], key=lambda p: abs(p.alpha - fold))
        if fold is not None:
            after += 1
            if after > past_fold or (a - alpha0) * direction < 0:
                return result(False, _fold_message(branch, fold, order, target), points, fold, fold_pt)
        st = _State(y, a, g, ds, J, t)
        h = min(max_step, h * 1.5)
    return result(False, f"stopped after {max_points} points at alpha {st.alpha:.4g}", points, fold, fold_pt)


#: the work that the continuations rescuing one failed direct start may spend together
#: (:class:`RecoveryBudget`), in proximal problems solved (starts times nodes times tokens times
#: fields per token, :attr:`Saddle.solved`; a continuation's warm-started step, 3 starts per node,
#: is counted 3/7 of a full one at the reference model and takes about a fifth of its time): 600
#: data steps with the full start set (7 starts) on the ``fast`` coarse rule (2^8 x 4 nodes) of the
#: reference model, a few seconds on the 2-core machine. Without it the ladder of origins in
#: ``alpha`` and in the ridge, with a ladder of its own at the larger ridge, cost minutes where
#: every rung fails (sigma = 2, lambda = 1e-4, alpha = 3: 24 continuations)
RECOVERY_PROX = 600 * 7 * 1024 * 2
#: the qmc order of the rule on which ``RECOVERY_PROX`` is set (the presets' coarse rule); a solve
#: on a larger rule gets as many data steps (:meth:`RecoveryBudget.for_settings`)
RECOVERY_ORDER = 8


class RecoveryBudget:
    """The work left to the continuations that rescue one failed direct start
    (:func:`~attnphase.theory.branches.solve_point`, :func:`~attnphase.theory.branches.continue_from`), in proximal problems (``RECOVERY_PROX``):
    each fixed-point solve charges the problems its data steps solved; once spent, no further
    continuation is started, a continuation under way stops, and the absence says so. Counted,
    not timed: the same solve ends the same way on any machine."""

    def __init__(self, prox: int = RECOVERY_PROX) -> None:
        self.total = prox
        self.left = prox

    @classmethod
    def for_settings(cls, settings: SolverSettings) -> RecoveryBudget:
        """The budget of a solve with ``settings``: ``RECOVERY_PROX``, times the ratio of nodes
        where its qmc rule is larger than the presets' coarse one (``RECOVERY_ORDER``). The same
        number of data steps then serves every rule, so the continuations keep their share of
        the solve's time as the rule grows (at order 11, ``L = 3``, ``alpha = 1.5``, the
        positional-start point's ladder, the origin 0.5 failing and 0.1 arriving, needs 1.6 times
        the order-8 budget)."""
        scale = 2 ** max(0, settings.order - RECOVERY_ORDER) if settings.method == "qmc" else 1
        return cls(RECOVERY_PROX * scale)

    def spend(self, solved: int) -> None:
        """Charge ``solved`` proximal problems (:attr:`Saddle.solved`)."""
        self.left -= solved

    @property
    def spent(self) -> bool:
        """Nothing is left."""
        return self.left <= 0

    def message(self) -> str:
        """The budget's end in words."""
        return f"the continuations' budget of {self.total:,} proximal problems was spent"
