"""Fixed-point iteration ``x = F(x)`` of the self-consistent equations (docs/model.md (7.2)).

``F`` is the data step (docs/model.md (3.1)-(3.4)) followed by the weights step ((2.1), (2.2)).
The plain damped iteration is unstable on parts of the branches, so the iteration is Anderson-
accelerated (type II, with damping and restarts) and every step is safeguarded: a candidate with a
non-positive ``q`` or ``V`` is replaced by a strongly damped step. Convergence is declared when the
relative change of *every* unknown is below ``tol``; the proximal problem is solved from the full
multi-start set at the candidate fixed point before convergence is accepted, so a warm start that
missed the global minimiser cannot fake convergence.

The module also holds :func:`make_saddle`, the saddle-point equations on the integration rule
that the settings name; the settings are in :mod:`~attnphase.theory.settings` and the quasi-Newton
and Anderson steps in :mod:`~attnphase.theory.newton`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import AttentionMap
from attnphase.theory.newton import (
    Anderson,
    QuasiNewtonResult,
    is_valid,
    quasi_newton,
    rel_change,
    warm_starts,
    zero_floor,
)
from attnphase.theory.newton import RelativeUnits as RelativeUnits
from attnphase.theory.quadrature import make_rule
from attnphase.theory.saddle import ONE_START as ONE_START
from attnphase.theory.saddle import RESPONSES as RESPONSES
from attnphase.theory.saddle import DataStep, OrderParams, Saddle
from attnphase.theory.settings import FAST as FAST
from attnphase.theory.settings import TARGET_KEYS as TARGET_KEYS
from attnphase.theory.settings import TARGET_ON as TARGET_ON
from attnphase.theory.settings import SolverSettings

log = logging.getLogger(__name__)


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


#: the damped iteration oscillates when the unknown that changes most (relative) has flipped the
#: sign of its change this many times in a row: a period-2 cycle of the map, which damping cannot
#: break where the map's slope is below -1/beta (seen: the positional overlap ``m`` near the
#: trivial branch at lambda <= 5e-4); the quasi-Newton stage is then run from the current point
OSCILLATION_RUN = 3
#: the damped iteration has stalled, and ends without convergence, when its relative change has
#: not fallen below ``STALL_GAIN`` of its smallest value for ``STALL_RUN`` iterations: it wanders
#: instead of converging (the trivial branch at sigma = 2, lambda = 1e-4, alpha = 3: its fixed
#: point on the coarse rule is unstable under the damped map, whose slope in ``q`` is ~1.5, and
#: the relative change wandered between 0.03 and 1.5 until max_iter). A slow convergence keeps
#: making new minima (sigma = 2, lambda = 1e-4, alpha = 0.5, trivial: a factor ~0.97 an iteration
#: after a plateau of 40 iterations at 0.3-0.48, converged in 137)
STALL_RUN = 60
STALL_GAIN = 0.9
#: ``q`` (in units of ``sigma^2``) below which the iteration has collapsed to ``Q = 0`` (all prior
#: means ``w`` zero). That is a fixed point where the proximal minimiser at ``w = 0`` is ``h = 0``
#: (large lambda: the ridge wins), but not where it is not (``I/V + ell''(0)`` indefinite at some
#: nodes): there ``g`` stays O(1) as ``q -> 0``, the Stein form of ``V_hat`` grows like
#: ``q^-1/2`` and drives ``V`` and ``q`` down together (seen from the trivial start at alpha = 50,
#: lambda 0.01, and at L = 5: ``q`` 1e-35, ``V`` 25; the branch has ``q`` 0.38 there)
COLLAPSED_Q = 1e-9


def _lead_sign(res: np.ndarray, x: np.ndarray) -> tuple[int, int]:
    """Index and sign of the largest relative change ``res`` at ``x``."""
    rr = res / np.maximum(np.abs(x), zero_floor(x))
    i = int(np.argmax(np.abs(rr)))
    return i, int(np.sign(rr[i]))


def _alternating(signs: list[tuple[int, int]], run: int) -> bool:
    """The last ``run + 1`` leading changes were of one unknown with alternating signs."""
    if len(signs) <= run:
        return False
    last = signs[-run - 1:]
    return (len({i for i, _ in last}) == 1 and all(s != 0 for _, s in last)
            and all(a[1] == -b[1] for a, b in zip(last[:-1], last[1:], strict=True)))




def solve_fixed_point(
    saddle: Saddle,
    start: OrderParams,
    settings: SolverSettings,
    on_iteration: Callable[[int, float], None] | None = None,
    jacobian: np.ndarray | None = None,
    warm: DataStep | None = None,
    max_solved: int | None = None,
) -> FixedPointResult:
    """Solve ``x = F(x)`` from ``start`` (docs/model.md (7.2)).

    With ``jacobian`` (relative units, from a nearby solution: continuation) a quasi-Newton
    solve is tried first, its first evaluation warm-started from ``warm`` (the data step of that
    solution, same rule) when given; convergence is always checked with the full start set.
    Otherwise, or if it fails, an Anderson-accelerated damped iteration runs until the relative
    change is below ``polish_below`` and the quasi-Newton stage (forward-difference Jacobian,
    Broyden updates) finishes. ``on_iteration(iteration, relative change)`` is called after each
    iteration of the damped one. ``max_solved``: the damped iteration stops, not converged, once
    the data steps of this solve have solved more proximal problems (:attr:`Saddle.solved`): what
    is left of a continuations' budget (:class:`~attnphase.theory.continuation.RecoveryBudget`),
    which one stalling solve would otherwise overrun many times.
    """
    t0 = time.perf_counter()
    solved0 = saddle.solved
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
    acc = Anderson(settings, L, F, rs)
    history: list[float] = []
    ds: DataStep | None = None
    beta = 1.0 - settings.damping
    it = n_polished = n_rescued = 0
    converged, reason = False, "max_iter reached"
    full_next = True
    signs: list[tuple[int, int]] = []  # the leading change of each iteration (period-2 cycles)
    last_J: np.ndarray | None = None  # the Jacobian of the last polish
    ds_at_x = False  # the last data step was evaluated exactly at the returned x
    best_rel, best_it = np.inf, 0  # the smallest relative change (by STALL_GAIN) and its iteration
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
        rel = rel_change(fx, x, op.natural_scale())
        history.append(rel)
        if on_iteration is not None:
            on_iteration(it, rel)
        if rel < settings.tol and full:
            converged, reason, x = True, "converged", fx
            break
        if max_solved is not None and saddle.solved - solved0 > max_solved:
            reason = f"the work budget of {max_solved:,} proximal problems was spent (last relative change {rel:.1e})"
            break
        signs.append(_lead_sign(res, x))
        if rel < STALL_GAIN * best_rel:
            best_rel, best_it = rel, it
        elif it - best_it >= STALL_RUN:
            reason = (f"stalled: the relative change has not fallen below {STALL_GAIN:g} of its smallest "
                      f"value ({best_rel:.1e}) in {STALL_RUN} iterations")
            break
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
                best_rel, best_it = np.inf, it  # (a new start for the stall test)
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
