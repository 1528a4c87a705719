"""Fixed-point iteration ``x = F(x)`` of the self-consistent equations (docs/model.md (7.2)).

``F`` is the data step (docs/model.md (3.1)-(3.4)) followed by the weights step ((2.1), (2.2)).
The plain damped iteration is unstable on parts of the branches, so the iteration is Anderson-
accelerated (type II, with damping and restarts) and every step is safeguarded: a candidate with a
non-positive ``q`` or ``V`` is replaced by a strongly damped step. Convergence is declared when the
relative change of *every* unknown is below ``tol``; the proximal problem is solved from the full
multi-start set at the candidate fixed point before convergence is accepted, so a warm start that
missed the global minimiser cannot fake convergence.

The module also holds the solver's settings (:class:`SolverSettings`) and :func:`make_saddle`,
the saddle-point equations on the integration rule that the settings name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import AttentionMap
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import ONE_START, RESPONSES, DataStep, OrderParams, Saddle

log = logging.getLogger(__name__)


#: which error estimates ``SolverSettings.target_error`` applies to (``target_on``): the test
#: error's, the summary overlaps' (``q``, ``m``, ``theta`` in user units) or both, as the
#: ``diagnostics["error_estimate"]`` keys whose largest value must meet it
TARGET_KEYS = {"test_error": ("test_error",), "overlaps": ("q_user", "m_user", "theta_user"),
               "all": ("test_error", "q_user", "m_user", "theta_user")}
TARGET_ON = tuple(TARGET_KEYS)


@dataclass(frozen=True)
class SolverSettings:
    """Numerical settings of the theory solver (docs/model.md (7.1)-(7.5)); named sets of them
    by :meth:`~attnphase.SolverSettings.preset`.

    Parameters
    ----------
    method : str
        The integration rule of the data step (docs/model.md (7.1)): ``"qmc"`` (scrambled Sobol,
        4x symmetrised) or ``"gh"`` (product Gauss-Hermite).
    order : int
        ``qmc``: log2 of the base sample; ``gh``: points per dimension.
    warmup_order : int, optional
        A cheaper rule iterated first (only when below ``order``).
    tol : float
        Relative change of every unknown at convergence (docs/model.md (7.2)).
    max_iter : int
        Iterations of the fixed-point map at most.
    damping : float
        Weight of the old point in the damped iteration ``x <- damping x + (1 - damping) F(x)``.
    anderson : int
        Depth of the Anderson acceleration.
    n_replicas : int
        Independent QMC scrambles solved to estimate the integration error (1: no estimate).
    seed : int
        Of the QMC scrambles (the coarse rule's, and through it those of the error estimate and
        of the refinement's fine rules).
    full_starts_every : int
        Every this many iterations the proximal problem is solved from the full multi-start set
        (warm starts in between).
    switch_width : float
        Width ``tau`` of the split of a node between its two lowest local minima (docs/model.md
        (3.2); ``tau -> 0`` is the hard global minimum; 1e-5 vs 1e-6 changed theta by 3e-11 at
        alpha = 2.2).
    polish_below : float
        Relative change below which the damped/Anderson iteration hands over to the quasi-Newton
        stage (Broyden updates).
    anderson_below : float
        Relative change below which the iteration is Anderson-mixed (damped above).
    max_polish : int
        Quasi-Newton stages at most.
    max_rescue : int
        Quasi-Newton stages at most that a period-two cycle of the damped iteration starts.
    noise_tol : float
        When ``tol`` is not reachable after ``max_polish`` quasi-Newton stages (the discretised map
        is smooth only to ~1e-7 on the semantic branch), a residual below ``noise_tol`` is
        accepted and said so in ``reason``.
    refine_order : int
        0: off. ``refine_point`` takes one Newton step from a fixed point of this rule on
        ``refine_replicas`` independent finer rules (``qmc``: log2 of each base sample; ``gh``:
        points per dimension of one rule) and re-evaluates the training error variationally
        (docs/model.md (7.3)); ``find_transition`` uses it for the points that locate ``alpha_c``
        and ``alpha_l``.
    refine_replicas : int
        The number ``K`` of independent fine rules of the refinement.
    target_error : float
        0: off. A single solve (``solve_refined``) raises the refinement order, from
        ``refine_order`` up to ``max_refine_order`` by the orders the estimate's decay predicts
        (``orders_to_target``), until the estimated relative error is at most this
        (docs/model.md (7.5); the result says whether it was reached).
    target_on : str
        Which estimates must meet ``target_error``: ``"test_error"``, ``"overlaps"`` (the largest
        of the summary overlaps ``q``, ``m``, ``theta``, user units) or ``"all"`` (both).
    max_refine_order : int
        The highest refinement order. 15: at rank 2 (``alpha = 1.5``) it meets 1e-4 on every
        branch in 53-55 s (14 leaves the mixed branch at 1.15e-4).
    fine_teacher_scale : float, optional
        The refinement's fine QMC rules draw the teacher noises from ``N(0, s^2 I)``
        (importance sampling, docs/model.md (7.4)); ``None``: ``teacher_scale_for`` (1.4 at
        ``L = 2``, rank 1, where it halves the error of the refined points; 1, the plain rule,
        elsewhere).
    mirror : bool, optional
        The refinement's fine QMC rules pair every node with its mirror in the Stein sums
        (docs/model.md (7.4); the same nodes and minima); ``None``: ``mirror_for`` (on for the
        tied and causal students at ``L = 2``, rank 1, uncorrelated tokens, where it cuts the
        error of the refined positional ``q`` ~2.4x; off elsewhere, where it was measured not to
        help). The coarse rule keeps the plain sums: on its few nodes (order 8) the paired
        semantic map at ``alpha = 1`` has its fixed point at ``theta`` 0.22 instead of 0.38.
    response : str
        ``"global"`` (the replica-symmetric equations of the global minimiser, ``V_hat`` in the
        Stein form, docs/model.md (3.3)), ``"local"`` (``V_hat`` of each node's minimum followed
        locally, without the jumps' surface term: the state-following equations of
        docs/model.md (3.6)) or ``"semantic-start"`` or ``"positional-start"`` (each node keeps
        the minimum reached from the teacher's fields at the student's norm, or from the
        student's positional means, docs/model.md (3.7); on one rule: ``refine_order`` and
        ``target_error`` 0, the error estimate from the ``n_replicas`` rules).

    Raises
    ------
    ValueError
        One line, for a setting out of range, an unknown ``method``, ``target_on`` or
        ``response``, or settings that do not go together (a one-start ``response`` with a
        refinement or an error target; ``target_error`` with fewer than two ``refine_replicas``).
    """

    method: str = "qmc"
    order: int = 12
    warmup_order: int | None = 8
    tol: float = 1e-8
    max_iter: int = 300
    damping: float = 0.7
    anderson: int = 5
    n_replicas: int = 3
    seed: int = 0
    full_starts_every: int = 25
    switch_width: float = 1e-5
    polish_below: float = 1e-2
    anderson_below: float = 3e-2
    max_polish: int = 3
    max_rescue: int = 3
    noise_tol: float = 1e-6
    refine_order: int = 0
    refine_replicas: int = 4
    target_error: float = 0.0
    target_on: str = "test_error"
    max_refine_order: int = 15
    fine_teacher_scale: float | None = None
    mirror: bool | None = None
    response: str = "global"

    #: the named presets of :meth:`preset`: the fields each one sets (the others keep their
    #: defaults above). ``fast``: branches followed on 2^8 x 4 nodes to ``tol`` 1e-6, no error
    #: estimate on that rule, one refinement on 4 x 2^10 x 4 nodes (what ``transition``, ``curves``,
    #: ``phase-diagram`` and the demo run). ``default``: what ``attnphase solve`` and
    #: :func:`attnphase.solve` run: the coarse rule to ``tol`` 1e-8 with a 3-scramble estimate, refined
    #: on 4 x 2^11 x 4 nodes and raised until every overlap estimate is at most 1e-3
    #: (docs/model.md (7.3), (7.5)). ``precise``: the same to 2e-4 (at ``alpha = 1``, ``omega = 0.3``
    #: the refinements go to order 15, the highest, where the estimates are 1.3e-4 to 1.9e-4: a
    #: target of 1e-4 is not reached there).
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = MappingProxyType({
        "fast": MappingProxyType({"order": 8, "tol": 1e-6, "noise_tol": 1e-4, "n_replicas": 1, "refine_order": 10}),
        "default": MappingProxyType({"order": 8, "refine_order": 11, "target_error": 1e-3, "target_on": "overlaps"}),
        "precise": MappingProxyType({"order": 8, "refine_order": 11, "target_error": 2e-4, "target_on": "overlaps"}),
    })

    @classmethod
    def preset(cls, name: str, **changes: Any) -> SolverSettings:
        """The named settings ``"fast"``, ``"default"`` or ``"precise"`` (:attr:`PRESETS`), with
        ``changes`` (field names) applied on top.

        ``SolverSettings()`` itself holds the single-rule solver's defaults (order 12, no
        refinement), which :func:`attnphase.theory.solve_point` uses; ``preset("default")`` is the
        multi-fidelity path of :func:`attnphase.solve`.
        """
        if name not in cls.PRESETS:
            raise ValueError(f"unknown solver preset {name!r}; choose from {', '.join(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **changes})

    def __post_init__(self) -> None:
        if self.method not in ("qmc", "gh"):
            raise ValueError(f"unknown integration method {self.method!r}; choose qmc or gh")
        if self.order < 2:
            raise ValueError("integration order must be >= 2")
        if not 0 < self.tol < 1:
            raise ValueError("tol must lie in (0, 1)")
        if self.max_iter < 1:
            raise ValueError("max_iter must be >= 1")
        if not self.tol <= self.noise_tol < 1:
            raise ValueError("noise_tol must lie in [tol, 1)")
        if not 0 <= self.damping < 1:
            raise ValueError("damping must lie in [0, 1)")
        if self.refine_order != 0 and self.refine_order < 2:
            raise ValueError("refine_order must be 0 (off) or >= 2")
        if self.method == "qmc":  # (4 * 2^order nodes per rule; see quadrature.MAX_NODES)
            for name in ("order", "refine_order", "max_refine_order"):
                if getattr(self, name) > 20:
                    raise ValueError(f"{name.replace('_', '-')} must be <= 20 for qmc (4 * 2^20 nodes per rule), "
                                     f"got {getattr(self, name)}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.n_replicas < 1:
            raise ValueError(f"replicas must be >= 1 (1: no error estimate), got {self.n_replicas}")
        if self.refine_replicas < 1:
            raise ValueError("refine_replicas must be >= 1")
        if self.fine_teacher_scale is not None and not 1 <= self.fine_teacher_scale <= 3:
            raise ValueError(f"teacher-scale must lie in [1, 3], got {self.fine_teacher_scale}")
        if not 0 <= self.target_error < 1:
            raise ValueError("target_error must lie in [0, 1) (0: off)")
        if self.target_on not in TARGET_ON:
            raise ValueError(f"unknown target {self.target_on!r}; choose from {', '.join(TARGET_ON)}")
        if self.response not in RESPONSES:
            raise ValueError(f"unknown response {self.response!r}; choose from {', '.join(RESPONSES)}")
        if self.response in ONE_START and (self.refine_order or self.target_error):
            raise ValueError(f"the {self.response} response runs on one rule (refine_order 0, target_error 0): its "
                             "one-start selection makes the map too rough for the multi-fidelity refinement")
        if self.target_error and self.refine_replicas < 2:
            raise ValueError("target_error needs refine_replicas >= 2 (the error estimate)")


#: the ``"fast"`` preset as keywords, with no separate warm-up rule (``warmup_order=None``: the
#: solve starts on its own rule, which changes results only at orders above 8): branches followed
#: on 2^8 x 4 nodes (tol 1e-6; about 1-2 % integration error on the overlaps), the points that
#: locate alpha_c and alpha_l refined on 4 x 2^10 x 4 nodes (see ``refine_point``)
FAST: Mapping[str, Any] = MappingProxyType({**SolverSettings.PRESETS["fast"], "warmup_order": None})


@dataclass(frozen=True)
class FixedPointResult:
    """Outcome of one fixed-point solve (diagnostics included)."""

    op: OrderParams
    data: DataStep
    converged: bool
    iterations: int
    residual: float
    reason: str
    seconds: float
    history: list[float] = field(default_factory=list)
    #: Jacobian of the residual in relative units at the solution (for the next continuation point)
    jacobian: np.ndarray | None = None


def _zero_floor(x: np.ndarray) -> float:
    """Scale of an unknown that is zero by symmetry: ``1e-4`` of the largest unknown."""
    return 1e-4 * max(float(np.max(np.abs(x))), 1e-12)


def _rel_change(new: np.ndarray, old: np.ndarray, natural: np.ndarray | None = None) -> float:
    """Largest relative change over the unknowns. An unknown that is zero by symmetry is
    measured against ``1e-4`` of the largest unknown (the proximal solutions are exact to
    ~1e-12, which leaves that much noise on the exact zeros); with ``natural``
    (:meth:`OrderParams.natural_scale`) the off-diagonal entries of ``q`` and ``V`` are measured
    against their diagonal."""
    scale = np.maximum(np.maximum(np.abs(old), np.abs(new)), _zero_floor(old))
    if natural is not None:
        scale = np.maximum(scale, natural)
    return float(np.max(np.abs(new - old) / scale)) if new.size else 0.0


#: the damped iteration oscillates when the unknown that changes most (relative) has flipped the
#: sign of its change this many times in a row: a period-2 cycle of the map, which damping cannot
#: break where the map's slope is below -1/beta (seen: the positional overlap ``m`` near the
#: trivial branch at lambda <= 5e-4); the quasi-Newton stage is then run from the current point
OSCILLATION_RUN = 3
#: ``q`` (in units of ``sigma^2``) below which the iteration has collapsed to ``Q = 0`` (all prior
#: means ``w`` zero). That is a fixed point where the proximal minimiser at ``w = 0`` is ``h = 0``
#: (large lambda: the ridge wins), but not where it is not (``I/V + ell''(0)`` indefinite at some
#: nodes): there ``g`` stays O(1) as ``q -> 0``, the Stein form of ``V_hat`` grows like
#: ``q^-1/2`` and drives ``V`` and ``q`` down together (seen from the trivial start at alpha = 50,
#: lambda 0.01, and at L = 5: ``q`` 1e-35, ``V`` 25; the branch has ``q`` 0.38 there)
COLLAPSED_Q = 1e-9


def _lead_sign(res: np.ndarray, x: np.ndarray) -> tuple[int, int]:
    """Index and sign of the largest relative change ``res`` at ``x``."""
    rr = res / np.maximum(np.abs(x), _zero_floor(x))
    i = int(np.argmax(np.abs(rr)))
    return i, int(np.sign(rr[i]))


def _alternating(signs: list[tuple[int, int]], run: int) -> bool:
    """The last ``run + 1`` leading changes were of one unknown with alternating signs."""
    if len(signs) <= run:
        return False
    last = signs[-run - 1:]
    return (len({i for i, _ in last}) == 1 and all(s != 0 for _, s in last)
            and all(a[1] == -b[1] for a, b in zip(last[:-1], last[1:], strict=True)))


def _valid_step(x: np.ndarray, fx: np.ndarray, beta: float, L: int, F: int, rs: int) -> np.ndarray:
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
    """Outcome of :func:`quasi_newton`: the last point ``x`` (full vector), the data step ``ds``
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


#: one evaluation of :class:`_Residual`: the residual (relative units), the data step, ``F(x)``
_Evaluation = tuple[np.ndarray, DataStep, np.ndarray]


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
    if first is not None and warm is not None and _rel_change(first[2], res.full_x(y), nat) < settings.tol:
        first = res(y, None)  # a warm-started fixed point is confirmed with the full set
        full_at = res.full_x(y)
    if first is None:
        return None
    r, ref, fx = first
    rel = _rel_change(fx, res.full_x(y), nat)
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


def _broyden(res: _Residual, y: np.ndarray, r: np.ndarray, ref: DataStep, J: np.ndarray, rel: float,
             full_at: np.ndarray | None, nat: np.ndarray, max_evals: int, confirm_full: bool) -> QuasiNewtonResult:
    """The Broyden iteration of :func:`quasi_newton` from ``y`` (residual ``r``, Jacobian ``J``,
    updated in place), until the full multi-start map confirms convergence or ``max_evals``
    data steps are spent."""
    settings = res.settings
    msg = "evaluation budget spent"
    s_ = np.full(y.size, np.inf)
    while res.evals < max_evals:
        try:
            dy = -np.linalg.solve(J, r)
        except np.linalg.LinAlgError:
            msg = "singular Jacobian"
            break
        step, accepted = _line_search(res, y, dy, r, ref)
        stalled = accepted is None
        if stalled and float(np.max(np.abs(r))) > 10 * settings.tol:
            msg = "no decrease along the Newton direction"
            break
        if accepted is not None:
            s_ = step * dy
            r_new = accepted[0]
            J += np.outer(r_new - r - J @ s_, s_) / max(float(s_ @ s_), 1e-300)
            y = y + s_
            r = r_new
        if not confirm_full and float(np.max(np.abs(r))) < settings.tol:
            return QuasiNewtonResult(res.full_x(y), ref, float(np.max(np.abs(r))), J, res.evals, True,
                                     "converged (warm-started map)")
        # at the noise floor of the map (no decrease possible) or below tol: full check
        if stalled or float(np.max(np.abs(s_))) < settings.tol or float(np.max(np.abs(r))) < settings.tol:
            # verify with the full multi-start set
            out = res(y, None)
            if out is None:
                msg = "invalid point"
                break
            r_full, ref, fx = out
            full_at = res.full_x(y)
            rel = _rel_change(fx, res.full_x(y), nat)
            if rel < settings.tol:
                return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, True, "converged", full_at=full_at)
            if stalled:
                msg = f"stalled at relative change {rel:.1e}"
                break
            r = r_full  # (the full map's residual: the warm-started one at y differs by <~1e-9, above)
    return QuasiNewtonResult(res.full_x(y), ref, rel, J, res.evals, False, msg, float(np.max(np.abs(r))), full_at)


def solve_fixed_point(
    saddle: Saddle,
    start: OrderParams,
    settings: SolverSettings,
    on_iteration: Callable[[int, float], None] | None = None,
    jacobian: np.ndarray | None = None,
    warm: DataStep | None = None,
) -> FixedPointResult:
    """Solve ``x = F(x)`` from ``start`` (docs/model.md (7.2)).

    With ``jacobian`` (relative units, from a nearby solution: continuation) a quasi-Newton
    solve is tried first, its first evaluation warm-started from ``warm`` (the data step of that
    solution, same rule) when given; convergence is always checked with the full start set.
    Otherwise, or if it fails, an Anderson-accelerated damped iteration runs until the relative
    change is below ``polish_below`` and the quasi-Newton stage (forward-difference Jacobian,
    Broyden updates) finishes. ``on_iteration(iteration, relative change)`` is called after each
    iteration of the damped one.
    """
    t0 = time.perf_counter()
    L, F, rs = saddle.L, saddle.F, saddle.rs
    x = start.to_vector()
    n_polish = 0
    if jacobian is not None:
        qn = quasi_newton(saddle, x, settings, J0=jacobian, warm=warm)
        if qn is not None:
            n_polish += qn.evals
            log.debug("quasi-Newton from the continuation Jacobian: %d evaluations, %s", qn.evals, qn.message)
            if qn.ok:
                return FixedPointResult(
                    op=OrderParams.from_vector(qn.x, L, F, rs), data=qn.ds, converged=True,
                    iterations=qn.evals, residual=qn.rel, reason="converged", seconds=time.perf_counter() - t0,
                    history=[qn.rel], jacobian=qn.J,
                )
    acc = _Anderson(settings, L, F, rs)
    history: list[float] = []
    ds: DataStep | None = None
    beta = 1.0 - settings.damping
    it = n_polished = n_rescued = 0
    converged, reason = False, "max_iter reached"
    full_next = True
    signs: list[tuple[int, int]] = []  # the leading change of each iteration (period-2 cycles)
    last_J: np.ndarray | None = None  # the Jacobian of the last polish
    ds_at_x = False  # the last data step was evaluated exactly at the returned x
    for it in range(1, settings.max_iter + 1):
        op = OrderParams.from_vector(x, L, F, rs)
        if not is_valid(op):
            reason = "order parameters left the valid domain (q or V not positive definite)"
            break
        starts = None if (full_next or ds is None) else warm_starts(ds)
        full = starts is None
        ds = saddle.data_step(op, starts=starts, switch_width=settings.switch_width)
        if _collapsed(saddle, op, ds):
            reason = ("collapsed to q = 0, where the proximal minimisers are not zero (not a fixed point: "
                      "the Stein form of V_hat grows like q^-1/2 there)")
            break
        fx = saddle.weights_step(ds.hats).to_vector()
        if not np.all(np.isfinite(fx)):
            reason = "non-finite update (the map diverged)"
            break
        res = fx - x
        rel = _rel_change(fx, x, op.natural_scale())
        history.append(rel)
        if on_iteration is not None:
            on_iteration(it, rel)
        if rel < settings.tol and full:
            converged, reason, x = True, "converged", fx
            break
        signs.append(_lead_sign(res, x))
        polish = rel < settings.polish_below and full and n_polished < settings.max_polish
        # a period-2 cycle of the damped iteration (see OSCILLATION_RUN): the quasi-Newton stage
        # from the current point (forward-difference Jacobian), and a halved step afterwards
        rescue = (not polish and rel >= settings.polish_below and n_rescued < settings.max_rescue
                  and _alternating(signs, OSCILLATION_RUN))
        if polish or rescue:
            if polish:
                n_polished += 1
            else:
                n_rescued += 1
                beta *= 0.5
                signs.clear()
            qn = _newton_stage(saddle, x, fx, settings, last_J if polish else None, polish)
            if qn is not None:
                n_polish += qn.evals
                if polish:
                    last_J = qn.J
                if qn.ok:
                    x, ds, ds_at_x = qn.x, qn.ds, True
                    converged, reason = True, "converged"
                    history.append(qn.rel)
                    break
                x, full_next = qn.x, True
                acc.restart()
                continue
        if full and n_polished >= settings.max_polish and rel < settings.noise_tol:
            # the discretised map is only smooth down to ~1e-7 on branches where many nodes
            # have competing local minima; accept that floor explicitly (reported in `reason`)
            converged = True
            reason = (f"converged to the rule's noise floor: relative change {rel:.1e} "
                      f"(< noise_tol {settings.noise_tol:g}; tol {settings.tol:g} not reached)")
            x = fx
            break
        if rel < settings.tol:  # (a full evaluation has converged above)
            full_next = True  # verify with the full multi-start set
            continue
        full_next = it % settings.full_starts_every == 0 or rel < settings.polish_below
        x = acc.step(x, res, fx, rel, beta)
    op = OrderParams.from_vector(x, L, F, rs)
    if converged and not ds_at_x and ds is not None:
        ds = saddle.data_step(op, starts=warm_starts(ds), switch_width=settings.switch_width)
    assert ds is not None
    return FixedPointResult(op=op, data=ds, converged=converged, iterations=it + n_polish,
                            residual=history[-1] if history else float("nan"), reason=reason,
                            seconds=time.perf_counter() - t0, history=history, jacobian=last_J)


def _collapsed(saddle: Saddle, op: OrderParams, ds: DataStep) -> bool:
    """The iteration has collapsed to ``Q = 0`` where that is not a fixed point (see ``COLLAPSED_Q``)."""
    return (float(np.max(np.abs(op.q))) < COLLAPSED_Q * saddle.s2
            and float(np.max(np.abs(ds.prox.h))) > 1e-3 * np.sqrt(saddle.s2))


def _newton_stage(saddle: Saddle, x: np.ndarray, fx: np.ndarray, settings: SolverSettings,
                  J0: np.ndarray | None, polish: bool) -> QuasiNewtonResult | None:
    """The quasi-Newton stage inside the damped iteration: to polish (from ``F(x) = fx``, its
    symmetry zeros made exact in place, with the Jacobian ``J0`` of the last polish) or to break a
    period-2 cycle (from ``x``, forward-difference Jacobian)."""
    if polish:
        fx[(np.abs(fx) < 1e-10) & (np.abs(x) < 1e-10)] = 0.0
        qn = quasi_newton(saddle, fx, settings, J0=J0)
    else:
        qn = quasi_newton(saddle, x, settings)
    if qn is not None:
        log.debug("quasi-Newton (%s): %d evaluations, %s", "polish" if polish else "oscillation", qn.evals, qn.message)
    return qn


class _Anderson:
    """Type-II Anderson acceleration of the damped iteration ``x <- x + beta (F(x) - x)``, with
    restarts, and the safeguard that keeps every step in the valid domain (:func:`_valid_step`)."""

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
            x_new = _valid_step(x, fx, beta, L, F, rs)
        return x_new


def make_saddle(spec: ModelSpec, alpha: float, settings: SolverSettings, order: int | None = None,
                seed: int | None = None, copies: str = "signs", teacher_scale: float = 1.0,
                mirror: bool = False, basis: np.ndarray | None = None) -> Saddle:
    """The saddle-point equations of ``spec`` at ``alpha`` on the integration rule of ``settings``
    (``order`` and ``seed`` override the settings' own).

    ``copies``: which sign copies a QMC rule is made of (:func:`sobol_gaussian`; ``"signs"``
    at rank >= 2 adds the reflections of the student axes); ``teacher_scale``: importance
    sampling of the teacher noises (:func:`sobol_gaussian`); ``mirror``: the Stein sums pair
    each node with its mirror (:meth:`Saddle.mirror_nodes`); ``basis``: the QMC nodes lie in its
    span (:func:`sobol_gaussian`; cross-attention's key contrasts, docs/model.md (10.6))."""
    amap = AttentionMap.from_spec(spec)
    F = amap.field_dim
    dim = spec.tokens * (F + spec.teacher_rank)
    axes = amap.rank if amap.rotation_invariant else 1
    rule = make_rule(settings.method, dim, order or settings.order, spec.tokens * F,
                     seed=settings.seed if seed is None else seed, axes=axes,
                     copies=copies, teacher_scale=teacher_scale, basis=basis)
    return Saddle(spec, alpha, rule, mirror=mirror, response=settings.response)
