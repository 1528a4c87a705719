"""Branches, continuation in ``alpha`` and the transition points (THEORY.md 2.1 "Branches").

* :func:`solve_point`: one branch at one ``alpha`` (from the recommended start or a warm start);
* :func:`follow_branch`: continuation in ``alpha`` with warm starts;
* :func:`find_transition`: ``alpha_c`` (equal training errors), the spinodals (where a branch
  stops existing) and ``alpha_l`` (global-minimum test error crosses the linear baseline), by
  bracketing on a grid and bisection with warm starts.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec, check_alpha
from attnphase.theory.channels import AttentionMap, ProxResult, escape_saddles, prox_batch, target_map
from attnphase.theory.fixed_point import (
    TARGET_KEYS,
    FixedPointResult,
    SolverSettings,
    _valid,
    _warm_starts,
    solve_fixed_point,
)
from attnphase.theory.quadrature import COPIES, make_rule
from attnphase.theory.saddle import DataStep, Hats, OrderParams, Saddle, linear_test_error

log = logging.getLogger(__name__)

BRANCHES = ("semantic", "positional", "trivial")
#: for tied attention of rank r >= 2: one student direction semantic, another positional (the
#: state GD reaches at r = 2, docs/variants.md)
MIXED = "mixed"
#: threshold (user units) above which an overlap counts as non-zero when classifying a fixed point
CLASSIFY_TOL = 1e-3


def branches_for(spec: ModelSpec) -> tuple[str, ...]:
    """The branches the solver looks for: :data:`BRANCHES`, and :data:`MIXED` at student rank
    ``r >= 2`` (tied, causal or untied attention)."""
    return (*BRANCHES, MIXED) if _has_mixed(spec) else BRANCHES


def _has_mixed(spec: ModelSpec) -> bool:
    return AttentionMap.from_spec(spec).rotation_invariant


def semantic_side(spec: ModelSpec) -> str:
    """The branch that plays the semantic role in transitions and curves: ``semantic``, or
    ``mixed`` at rank ``r >= 2`` (see :func:`find_transition`)."""
    return MIXED if _has_mixed(spec) else "semantic"


def start_point(spec: ModelSpec, branch: str, F: int) -> OrderParams:
    """Recommended starts of THEORY.md 2.1 (paper convention), generalised to any ``L, r, r*``.

    ``mixed`` (rank >= 2): the first student direction semantic, the second positional."""
    L, rs = spec.L, spec.teacher_rank
    G = spec.G_array
    s2 = spec.sigma**2 / 0.25  # the starts were tuned at sigma = 0.5
    if branch == MIXED and F >= 2:
        # each block of fields (tied: Q; untied: Q and K): axis 0 semantic, the query's axis 1
        # positional (field index block * r + axis)
        r = AttentionMap.from_spec(spec).rank
        m = np.zeros((L, F))
        m[:, 1] = 0.2 * G[:, 0]
        theta = np.zeros((F, rs))
        qd = np.full(F, 0.02 * s2)
        for b in range(0, F, r):
            theta[b, 0] = 0.35 * s2
            qd[b] = 0.9 * s2
        return OrderParams(np.diag(qd), m, 14.6 * np.eye(F), theta)
    if branch == "positional":
        q0, m0, V0, t0 = 0.02, 0.2, 14.6, 0.0
    elif branch == "semantic":
        q0, m0, V0, t0 = 0.9, 0.0, 14.6, 0.35
    elif branch == "trivial":
        q0, m0, V0, t0 = 0.02, 0.0, 14.6, 0.0
    else:
        raise ValueError(f"unknown branch {branch!r}; choose from {', '.join(branches_for(spec))} or all")
    q = q0 * s2 * np.eye(F)
    m = np.zeros((L, F))
    m[:, 0] = m0 * G[:, 0]
    theta = np.zeros((F, rs))
    for a in range(F):
        theta[a, a % rs] = t0 * s2
    return OrderParams(q, m, V0 * np.eye(F), theta)


def classify(op: OrderParams, sigma: float, mixed: bool = False) -> str:
    """Name the branch a fixed point belongs to (semantic: ``theta != 0``; positional: ``m != 0``;
    with ``mixed`` (rank >= 2, in the gauge of ``Saddle.gauge_fix``) both, ``mixed``)."""
    theta = np.max(np.abs(op.theta)) / sigma**2
    m = np.max(np.abs(op.m))
    if mixed and theta > CLASSIFY_TOL and m > CLASSIFY_TOL:
        return MIXED
    if theta > CLASSIFY_TOL:
        return "semantic"
    if m > CLASSIFY_TOL:
        return "positional"
    return "trivial"


@dataclass(frozen=True)
class BranchPoint:
    """One fixed point in user units (THEORY.md section 1: ``q = Q.Q/d``, ``theta = Q*.Q/d``,
    ``m = pi_1.Q/d``; ``V`` in paper convention). Matrices for ``r > 1`` are in ``q_matrix`` etc."""

    branch: str
    alpha: float
    exists: bool
    reason: str
    q: float = math.nan
    m: float = math.nan
    theta: float = math.nan
    V: float = math.nan
    train_loss: float = math.nan
    test_error: float = math.nan
    converged: bool = False
    iterations: int = 0
    diagnostics: dict[str, Any] = field(default_factory=dict)
    q_matrix: tuple = ()
    m_matrix: tuple = ()
    theta_matrix: tuple = ()
    op: OrderParams | None = field(default=None, repr=False, compare=False)
    #: Jacobian of the fixed-point residual at the solution (relative units; warm starts)
    jacobian: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: the data step at the solution (its minimisers warm-start a nearby solve on the same rule)
    data: Any = field(default=None, repr=False, compare=False)
    #: a refined point's fine rules: ``(union saddle, number of rules, its full data step at the
    #: point)``, whose minima a refinement from here to finer rules of the same scrambles reuses
    #: (:func:`_nested_first`)
    fine: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("op", "jacobian", "data", "fine"):
            d.pop(key, None)
        return d

    def summary(self) -> dict[str, Any]:
        """The fields of the CLI JSON schema."""
        keys = ("q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations")
        return {k: getattr(self, k) for k in keys}


def _make_saddle(spec: ModelSpec, alpha: float, settings: SolverSettings, order: int | None = None,
                 seed: int | None = None, copies: str = "signs", teacher_scale: float = 1.0,
                 mirror: bool = False) -> Saddle:
    """``copies``: which sign copies a QMC rule is made of (:func:`sobol_gaussian`; ``"signs"``
    at rank >= 2 adds the reflections of the student axes); ``teacher_scale``: importance
    sampling of the teacher noises (:func:`sobol_gaussian`); ``mirror``: the Stein sums pair
    each node with its mirror (:meth:`Saddle.mirror_nodes`)."""
    amap = AttentionMap.from_spec(spec)
    F = amap.field_dim
    dim = spec.L * (F + spec.teacher_rank)
    axes = amap.rank if amap.rotation_invariant else 1
    rule = make_rule(settings.method, dim, order or settings.order, spec.L * F,
                     seed=settings.seed if seed is None else seed, axes=axes,
                     copies=copies, teacher_scale=teacher_scale)
    return Saddle(spec, alpha, rule, mirror=mirror)


#: product Gauss-Hermite order of the test error of a point that is an intermediate result (a
#: coarse point about to be refined, a step of a continuation ramp): at dimension 6 the default
#: order 10 (10^6 nodes, ~0.9 s) cost 10-15 % of a rank-2 solve; order 6 (~0.04 s) is within
#: ~2e-3 (relative) and is replaced by the default-order value wherever such a point is returned
DRAFT_TEST_ORDER = 6


def _to_point(spec: ModelSpec, alpha: float, branch: str, sd: Saddle, res: FixedPointResult,
              extra: dict[str, Any], draft: bool = False) -> BranchPoint:
    op = res.op
    s2 = sd.s2
    found = classify(op, float(np.sqrt(s2)), _has_mixed(spec))
    exists = res.converged and found == branch
    if not res.converged:
        reason = f"solver did not converge: {res.reason} (last relative change {res.residual:.2e})"
    elif found != branch:
        reason = f"the {branch} start converged to the {found} branch: no {branch} fixed point here"
    else:
        reason = "ok"
    train = -sd.free_energy(op, res.data)
    test = sd.test_error(op, order=DRAFT_TEST_ORDER) if draft else sd.test_error(op)
    diag = {
        "residual": res.residual,
        "seconds": res.seconds,
        "solver_reason": res.reason,
        "quadrature": {"method": sd.rule.method, "order": sd.rule.order, "nodes": sd.rule.size},
        "prox_max_grad": float(np.max(res.data.prox.grad_norm)),
        "classified_as": found,
        "V_hat": res.data.hats.V_hat.tolist(),
        "q_hat": res.data.hats.q_hat.tolist(),
        "m_hat": res.data.hats.m_hat.tolist(),
        "theta_hat": res.data.hats.theta_hat.tolist(),
    }
    diag.update(extra)
    if draft:
        diag["draft_test_error"] = True
    return BranchPoint(
        branch=branch,
        alpha=float(alpha),
        exists=bool(exists),
        reason=reason,
        train_loss=float(train),
        test_error=float(test),
        converged=bool(res.converged),
        iterations=int(res.iterations),
        diagnostics=diag,
        jacobian=res.jacobian,
        data=res.data,
        **_overlap_fields(sd, op),
    )


def _overlap_fields(sd: Saddle, op: OrderParams) -> dict[str, Any]:
    """The :class:`BranchPoint` fields that come from the order parameters (user units)."""
    qu, mu, tu = sd.user_units(op)
    q, m, theta = sd.user_scalars(op)
    return {"q": float(q), "m": float(m), "theta": float(theta), "V": float(op.V[0, 0]),
            "q_matrix": tuple(map(tuple, qu.tolist())), "m_matrix": tuple(map(tuple, mu.tolist())),
            "theta_matrix": tuple(map(tuple, tu.tolist())), "op": op}


def solve_point(
    spec: ModelSpec,
    alpha: float,
    branch: str = "semantic",
    settings: SolverSettings | None = None,
    start: OrderParams | None = None,
    error_estimate: bool = True,
    jacobian: np.ndarray | None = None,
    warm: Any = None,
    draft: bool = False,
    thorough: bool = False,
    ramp: bool = True,
) -> BranchPoint:
    """Fixed point of ``branch`` at ``alpha`` (THEORY.md 2.1-2.2).

    The integration error estimate (``diagnostics["error_estimate"]``, relative, per unknown) is
    computed by :func:`_error_estimate` from ``settings.n_replicas - 1`` independent rules.
    ``draft``: an intermediate point (its test error on the cheap ``DRAFT_TEST_ORDER`` rule; see
    :func:`_final_test_error`). A direct start that does not converge is retried by continuation
    from the alphas of ``RAMP_FROM`` (:func:`_ramp`); with ``thorough`` (a single solve) also one that converged
    to another branch: at ``L = 3``, ``omega = 0.3`` the positional start went trivial at
    ``alpha = 1.0`` and 1.5 while the branch exists there (continuation from 0.5 reaches it).
    Below ``lambda = LAM_RAMP[0]`` a continuation in the ridge follows (:func:`_lam_ramp`).
    ``ramp=False``: none of these (the first point of a continuation).
    """
    check_alpha(alpha)
    settings = settings or SolverSettings()
    if branch not in branches_for(spec):
        raise ValueError(f"unknown branch {branch!r}; choose from {', '.join(branches_for(spec))}")
    sd = _make_saddle(spec, alpha, settings)
    direct = start is None
    if start is None:
        start = sd.from_paper(start_point(spec, branch, sd.F))
        if settings.warmup_order is not None and settings.method == "qmc" and settings.warmup_order < settings.order:
            sd0 = _make_saddle(spec, alpha, settings, order=settings.warmup_order)
            res0 = solve_fixed_point(sd0, start, replace(settings, tol=1e-6))
            if res0.converged:
                start = res0.op
                if jacobian is None:
                    jacobian = res0.jacobian
    res = solve_fixed_point(sd, start, settings, jacobian=jacobian, warm=warm)
    extra: dict[str, Any] = {}
    point = _to_point(spec, alpha, branch, sd, res, extra, draft=draft)
    if ramp and direct and not point.exists and (not res.converged or thorough):
        ramped, tried = None, []
        for a0 in (a0 for a0 in RAMP_FROM if a0 < alpha):
            tried.append(f"alpha = {a0:g}")
            ramped = _ramp(spec, alpha, branch, settings, a0)
            if ramped is not None:
                break
        if ramped is None and spec.lam < LAM_RAMP[0]:
            tried.append(f"lambda = {LAM_RAMP[0]:g}")
            ramped = _lam_ramp(spec, alpha, branch, settings, thorough)
        if ramped is not None:
            if not draft:
                ramped = _final_test_error(spec, ramped, settings)
            point = replace(ramped, diagnostics={**ramped.diagnostics, "direct_start": point.reason})
        elif tried:
            point = replace(point, reason=f"{point.reason} (nor by continuation from {' or '.join(tried)})")
    if error_estimate and point.exists and settings.n_replicas > 1:
        point.diagnostics["error_estimate"] = _error_estimate(spec, alpha, branch, settings, point)
    return point


#: where a direct start does not converge, the branch is continued from these alphas, in turn
#: (see _ramp)
RAMP_FROM = (0.5, 0.1)
RAMP_STEPS = 4
#: largest ratio of consecutive alphas of that continuation
RAMP_RATIO = 1.5


def _ramp(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings, origin: float) -> BranchPoint | None:
    """The branch continued from ``origin`` up to ``alpha`` (geometric steps, at least
    ``RAMP_STEPS`` and at most a factor ``RAMP_RATIO`` each), for a direct start that did not
    converge (or, in a single solve, converged to another branch): the
    starts of THEORY.md 2.1 were tuned for ``L = 2``, ``r = 1``; at ``L = 3`` or ``r = 2``,
    ``alpha = 1.5`` the trivial start left the valid domain while the branch is reached by
    continuation (until the damped step in ``V^-1`` of session 13, which converges there
    directly; at ``alpha = 50`` the direct start collapses to ``q = 0`` instead). The order
    parameters change on the scale of ``log alpha`` (``V`` falls like ``1/alpha``): with four
    equal steps from 0.5 to 50 the positional and trivial branches (omega
    0.3) were not reached, with factors of at most 1.5 (12 steps) both are. From ``alpha = 0.5``
    the trivial branch of ``L >= 5`` was not reached either (the start left the valid domain at
    0.5 and 1 while the branch continues smoothly from 0.2); from 0.1 it is. ``None`` if the
    continuation does not arrive."""
    n = max(RAMP_STEPS, int(np.ceil(abs(np.log(alpha / origin)) / np.log(RAMP_RATIO) - 1e-9)))
    grid = np.geomspace(origin, alpha, n + 1)
    first = solve_point(spec, float(grid[0]), branch, settings, error_estimate=False, draft=True, ramp=False)
    return _continue(first, [(spec, float(a)) for a in grid[1:]], branch, settings)


def _continue(last: BranchPoint, steps: list[tuple[ModelSpec, float]], branch: str,
              settings: SolverSettings) -> BranchPoint | None:
    """Continuation of ``branch`` from the point ``last`` through ``steps`` (model, alpha), each
    point started from the previous one (its Jacobian and minimisers); ``None`` if it is lost."""
    for sp, a in steps:
        if not last.exists:
            return None
        last = solve_point(sp, a, branch, settings, start=last.op, error_estimate=False,
                           jacobian=last.jacobian, warm=last.data, draft=True)
    return last if last.exists else None


#: ridges of the continuation in lambda (see _lam_ramp), then the spec's own
LAM_RAMP = (0.01, 0.003, 0.001, 0.0003)


def _lam_ramp(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
              thorough: bool) -> BranchPoint | None:
    """The branch continued in the ridge from ``lambda = LAM_RAMP[0]`` (where the starts of
    THEORY.md 2.1 were tuned) down to ``spec.lam``, for a direct start (and the continuations in
    ``alpha``) that failed at a smaller ridge: ``V`` grows as ``lambda`` falls (trivial branch at
    ``alpha = 1``, ``omega = 0.3``: ``V`` 28.6, 66, 131, 245, 552 at ``lambda`` 0.01, 0.003,
    0.001, 3e-4, 0) and the start (``V = 14.6``) left the valid domain at ``lambda = 0``.
    ``None`` if the continuation does not arrive."""
    lams = [lam for lam in LAM_RAMP if lam > spec.lam] + [spec.lam]
    first = solve_point(spec.replace(lam=lams[0]), alpha, branch, settings, error_estimate=False, draft=True,
                        thorough=thorough)
    return _continue(first, [(spec.replace(lam=lam), alpha) for lam in lams[1:]], branch, settings)


def _final_test_error(spec: ModelSpec, point: BranchPoint, settings: SolverSettings) -> BranchPoint:
    """``point`` with its test error on the default rule, if it was computed as a draft."""
    if not point.diagnostics.get("draft_test_error") or point.op is None:
        return point
    sd = _make_saddle(spec, point.alpha, settings)
    diag = {k: v for k, v in point.diagnostics.items() if k != "draft_test_error"}
    return replace(point, test_error=float(sd.test_error(point.op)), diagnostics=diag)


def _response(sd: Saddle, settings: SolverSettings, x0: np.ndarray):
    """Linear response of the fixed-point residual ``r(x) = F(x) - x`` at ``x0`` on the rule of
    ``sd``: the free unknowns (exact symmetry zeros stay fixed), their scale, the Jacobian of
    ``r`` in relative units by forward differences (warm-started from the minima at ``x0``:
    ``n_unknowns + 1`` data steps on this rule) and ``resid(saddle, x)`` in the same units."""
    L, F, rs = sd.L, sd.F, sd.rs
    free = np.abs(x0) > 1e-10 * np.max(np.abs(x0))
    scale = np.abs(x0[free])

    def resid(saddle: Saddle, x: np.ndarray, starts: np.ndarray | None = None):
        op = OrderParams.from_vector(x, L, F, rs)
        ds = saddle.data_step(op, starts=starts, switch_width=settings.switch_width)
        return (saddle.weights_step(ds.hats).to_vector() - x)[free] / scale, ds

    r0, ds0 = resid(sd, x0)
    warm = _warm_starts(ds0)  # the Jacobian columns reuse the minima found at x0
    idx = np.flatnonzero(free)
    J = np.empty((idx.size, idx.size))
    for j, i in enumerate(idx):
        xs = x0.copy()
        step = 1e-5 * abs(x0[i])
        xs[i] += step
        J[:, j] = (resid(sd, xs, warm)[0] - r0) / (step / scale[j])
    return free, scale, J, resid


def _add_user_errors(est: dict[str, Any], sd: Saddle, op: OrderParams, samples: np.ndarray, se: bool) -> None:
    """Relative errors of the summary scalars (:meth:`Saddle.user_scalars`) in the user-facing
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
    for key, c, e in zip(("q_user", "m_user", "theta_user"), center, err, strict=True):
        est[key] = float(e / abs(c)) if abs(c) > 1e-9 else 0.0


def _error_estimate(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
                    point: BranchPoint) -> dict[str, float]:
    """Integration-error estimate of the fixed point by linear response.

    With ``r(x) = F(x) - x`` for the solver's rule and ``r_k`` for independently scrambled QMC
    rules (``gh``: orders ``order + 2k``), the fixed point of rule ``k`` is
    ``x_k ~ x* - J^{-1} r_k(x*)`` with ``J`` the Jacobian of ``r`` (forward differences). The
    root-mean-square of ``x_k - x*`` over the replicas estimates the error of ``x*``; it costs
    ``n_unknowns + n_replicas`` data steps instead of ``n_replicas`` full solves.
    """
    assert point.op is not None
    sd = _make_saddle(spec, alpha, settings)
    L, F, rs = sd.L, sd.F, sd.rs
    x0 = point.op.to_vector()
    free, scale, J, resid = _response(sd, settings, x0)
    deltas = []
    for k in range(1, settings.n_replicas):
        if settings.method == "qmc":
            sdk = _make_saddle(spec, alpha, settings, seed=settings.seed + 7919 * k)
        else:
            sdk = _make_saddle(spec, alpha, settings, order=settings.order + 2 * k)
        rk = resid(sdk, x0)[0]
        dy = -np.linalg.solve(J, rk)
        dx = np.zeros_like(x0)
        dx[free] = dy * scale
        deltas.append(dx)
    D = np.asarray(deltas)
    rel = np.sqrt(np.mean(D**2, axis=0)) / np.maximum(np.abs(x0), 1e-300)
    rel[~free] = 0.0
    op = point.op
    names = op.names()
    out = {n: float(v) for n, v in zip(names, rel, strict=True)}
    tests = [sd.test_error(OrderParams.from_vector(x0 + d, L, F, rs)) for d in D]
    out["test_error"] = float(np.sqrt(np.mean((np.asarray(tests) - point.test_error) ** 2)) / point.test_error)
    # the user-facing scalars
    _add_user_errors(out, sd, op, x0 + D, se=False)
    out["method"] = f"linear response over {len(deltas)} extra {settings.method} rules"  # type: ignore[assignment]
    return out


#: relative change of every unknown at which the refinement solve stops (see refine_point): it
#: enters the training error squared; on the test error it stays below the fine rules' own error
REFINE_TOL = 2e-3
#: sign copies of the fine rules by branch: ``theta`` is odd in ``theta`` under
#: ``eta -> -eta`` when ``m = 0``, ``m_hat`` odd in ``m`` under ``xi -> -xi`` when ``theta = 0``; the
#: zeros of the other overlap are imposed (Saddle.data_step). At equal nodes the conjugates
#: scatter 1.2-1.6x less than with all four copies (semantic and positional, alpha 1, omega 0.3;
#: trivial, no copies: ~2x), docs/theory.md. Rank >= 2: no reflections either (the zeros they
#: gave are imposed by Saddle.gauge_fix); the mixed branch has no overlap that must stay odd
#: (one net); 1.5-3.5x less scatter than the 8 copies of signs and reflections (r = 2). Untied
#: keys/queries of rank >= 2 keep all copies (fine_copies)
FINE_COPIES = {"semantic": "eta", "positional": "xi", "trivial": "none", "mixed": "none"}


def fine_copies(amap: AttentionMap, branch: str) -> str:
    """The sign copies of the refinement's fine rules for ``branch`` (``FINE_COPIES``); untied
    keys/queries of rank >= 2 keep all copies and the reflections (without them the semantic,
    positional and mixed refinements of ``r = 2`` stopped at the evaluation budget)."""
    if amap.rotation_invariant and amap.blocks > 1:
        return "signs"
    return FINE_COPIES.get(branch, "signs")
#: fine data steps a refinement may spend
REFINE_MAX_EVALS = 12


RULE_SOLVE_TOL = 1e-6
RULE_SOLVE_MAX_EVALS = 8
#: a fine rule's own fixed point (for the error estimate) is taken once a Broyden step is below this
#: fraction of the rule's offset from the union's fixed point: the standard error over 4 rules
#: scatters by ~40 % (3 degrees of freedom), and 5 % instead of 1 % moved the estimates of the
#: reference case by at most 0.16 % (seeds 0-3, every branch) with 2-3 evaluations per rule
#: instead of 2-4, one of them at the end of the last step, now not made (session 20)
RULE_SOLVE_REL = 0.05


def _rule_fixed_points(sd: Saddle, fine: list[Saddle], steps: list, x: np.ndarray, x0: np.ndarray, J: np.ndarray,
                       starts: np.ndarray, cuts: np.ndarray, settings: SolverSettings,
                       max_evals: int = RULE_SOLVE_MAX_EVALS) -> tuple[np.ndarray, list[str]]:
    """Fixed point of each fine rule near the union's fixed point ``x`` (for the error estimate).

    Broyden iteration on ``r_k(y) = F_k(y) - y`` (relative units, as in ``_quasi_newton``) from
    ``x`` with the union's Jacobian ``J``, each evaluation warm-started from the union's minima;
    ``steps[k]`` is rule ``k``'s data step at ``x``. The unknowns and units are those of the
    union's solve, which started at ``x0`` (``J`` is in them). Stops when the step is below
    ``RULE_SOLVE_TOL`` or ``RULE_SOLVE_REL`` of the rule's offset from ``x`` (relative units) or after
    ``max_evals`` evaluations; returns the fixed points (n, dim) and a status per rule.
    """
    L, F, rs = sd.L, sd.F, sd.rs
    free = np.abs(x0) > 1e-14
    scale = np.maximum(np.abs(x0), 1e-3)[free]
    out, status = [], []
    for k, (f, ds) in enumerate(zip(fine, steps, strict=True)):
        st = starts[cuts[k]:cuts[k + 1]]
        y = x.copy()
        r = (sd.weights_step(ds.hats).to_vector() - y)[free] / scale
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
            op = OrderParams.from_vector(yn, L, F, rs)
            if not _valid(op):
                msg = "left the valid domain"
                break
            # converged, or the step is RULE_SOLVE_REL of this rule's offset from x (enough for
            # the standard error; the fine maps are only smooth down to their noise floor): the
            # step is taken without evaluating the map at its end, which only a further step
            # would use (session 20: one data step less per rule, the same fixed points)
            offset = float(np.max(np.abs(yn - x)[free] / scale))
            if float(np.max(np.abs(dy))) < max(RULE_SOLVE_TOL, RULE_SOLVE_REL * offset):
                y = yn
                msg = f"converged in {it} evaluation{'' if it == 1 else 's'}"
                break
            dsn = f.data_step(op, starts=st, switch_width=settings.switch_width)
            rn = (sd.weights_step(dsn.hats).to_vector() - yn)[free] / scale
            if not np.all(np.isfinite(rn)):
                msg = "non-finite residual"
                break
            Jk += np.outer(rn - r - Jk @ dy, dy) / max(float(dy @ dy), 1e-300)
            y, r = yn, rn
        out.append(y)
        status.append(msg)
    return np.asarray(out), status


def _rule_steps(fine: list[Saddle], op: OrderParams, ds: DataStep, settings: SolverSettings,
                full: bool = False) -> tuple[list[DataStep], np.ndarray, np.ndarray]:
    """Each fine rule's data step at ``op``, warm-started from the union's minima ``ds``; with
    those starts and the offsets ``cuts`` of each rule's nodes in the union. ``full``: ``ds`` is
    the union's full multi-start evaluation at ``op``, whose minima each rule takes as they are
    (:meth:`Saddle.data_from`: no proximal solve; a warm-started one there gives the same minima
    up to ~1e-9, those whose Newton run stopped short of ``gtol``)."""
    starts = _warm_starts(ds)
    cuts = np.cumsum([0] + [f.rule.size for f in fine])
    if full:
        parts = [ProxResult(*(a[cuts[k]:cuts[k + 1]] for a in ds.prox.arrays())) for k in range(len(fine))]
        return [f.data_from(op, part, settings.switch_width) for f, part in zip(fine, parts, strict=True)], starts, cuts
    steps = [f.data_step(op, starts=starts[cuts[k]:cuts[k + 1]], switch_width=settings.switch_width)
             for k, f in enumerate(fine)]
    return steps, starts, cuts


#: the overlaps (user units) that define a branch: it is absent where they are not resolved
DEFINING_OVERLAPS = {"semantic": ("theta",), "positional": ("m",), MIXED: ("theta", "m")}
#: how clearly the fixed points of the fine rules, solved from where the refinement's
#: quasi-Newton stages stopped, must leave the branch's overlap unresolved (relative standard
#: error above ``UNRESOLVED_MARGIN / RESOLVE_SE``) for the full-solver fallback to be skipped
UNRESOLVED_MARGIN = 2.0
#: Broyden evaluations of each fine rule for that decision (they start farther from the rules'
#: fixed points than the per-rule solves of the error estimate)
UNRESOLVED_MAX_EVALS = 24


def _rules_unresolve(sd: Saddle, fine: list[Saddle], tried: list, branch: str,
                     settings: SolverSettings) -> str | None:
    """Why the branch is not resolved on the fine rules, decided from each fine rule's own fixed
    point before the full-solver fallback of :func:`refine_point` (``None``: not decided, run it).

    ``tried``: the failed quasi-Newton stages of the union with the units of their Jacobians.
    From the stage that ended with the smallest residual, each rule's fixed point by Broyden steps
    (:func:`_rule_fixed_points`); if every one converges and the overlap that defines the branch
    has a relative standard error over them above ``UNRESOLVED_MARGIN / RESOLVE_SE``, their
    mean does not resolve it (the union's fixed point is their mean to first order) and the
    answer of the fallback is known. Measured at ``L = 3``, positional, ``omega = 0.3`` (refine
    order 11): at ``alpha = 1.5`` the rules' fixed points (10-15 Broyden steps each, 1.4 s in
    all) give ``m`` 0.00036 with a relative standard error of 11, the fallback (12 s, 70
    iterations of the full solver) 0.0137 and 1.7; at ``alpha = 2`` 0.0076 and 0.83 against
    the fallback's 0.0089 and 0.89; at ``alpha = 3`` 0.0028 and 0.83 where the fallback goes to
    the trivial branch. At ``alpha = 1`` and 1.2, where the coarse rule has the branch (``m``
    0.088), the rules' solves do not all converge and nothing is decided.
    """
    keys = DEFINING_OVERLAPS.get(branch, ())
    done = [(q, u) for q, u in tried if q is not None and q.ds is not None and np.isfinite(q.resid)]
    if not keys or not done:
        return None
    qn, units = min(done, key=lambda t: t[0].resid)
    op = OrderParams.from_vector(qn.x, sd.L, sd.F, sd.rs)
    if not _valid(op):
        return None
    steps, starts, cuts = _rule_steps(fine, op, qn.ds, settings)
    X, status = _rule_fixed_points(sd, fine, steps, qn.x, units, qn.J, starts, cuts, settings,
                                   max_evals=UNRESOLVED_MAX_EVALS)
    if not all(st.startswith("converged") for st in status):
        return None
    center = OrderParams.from_vector(X.mean(axis=0), sd.L, sd.F, sd.rs)
    if not _valid(center):
        return None
    est: dict[str, Any] = {}
    _add_user_errors(est, sd, center, X, se=True)
    _, m_u, th_u = sd.user_scalars(center)
    vals = {"m": m_u, "theta": th_u}
    for key in keys:
        err = est[f"{key}_user"]
        if err * RESOLVE_SE > UNRESOLVED_MARGIN or abs(vals[key]) <= 1e-9:
            return (f"{key} = {vals[key]:.3g} (mean of the {len(fine)} rules' own fixed points) is not resolved from "
                    f"zero on the fine rules (relative standard error {err:.2g})")
    return None


def _test_error_spread(sd: Saddle, op: OrderParams, X: np.ndarray) -> np.ndarray:
    """Test errors at the per-rule fixed points ``X``, as ``eps_g(op)`` plus the difference
    ``eps_g(x_k) - eps_g(op)`` on a common, cheaper product rule where the dimension makes the
    default one costly (the integrand is smooth, so the difference is exact to far below the
    spread; 7^6 instead of 10^6 nodes at L = 3)."""
    L, F, rs = sd.L, sd.F, sd.rs
    order = 10 if sd.dim <= 4 else 7
    base = sd.test_error(op, order=order)
    return np.array([sd.test_error(OrderParams.from_vector(v, L, F, rs), order=order) - base for v in X])


#: scale of the teacher noises in the fine rules of two-token rank-one models (``L = 2``, student
#: and teacher rank 1; tied, causal and untied attention): over 12 seeds at ``alpha = 1, omega =
#: 0.3`` (refine order 11) the refined semantic ``theta`` of the reference case scatters 1.24e-3
#: instead of 3.1e-3 (relative), ``q`` 5.3e-4 instead of 1.07e-3, the positional ``m`` 1.06e-3
#: instead of 1.37e-3, at the same cost; 1.3-1.6 do about as well; the causal and untied models
#: and correlated tokens gain as much (8 seeds each). At ``L = 3`` and at rank 2 (``alpha =
#: 1.5``) the scatter and the estimates were larger with it, so those keep the plain rule
#: (docs/theory.md, session 16)
REFERENCE_TEACHER_SCALE = 1.4
#: the attention variants measured to gain from it at ``L = 2``, rank 1
SCALED_VARIANTS = ("tied", "causal", "untied", "untied-causal")


def teacher_scale_for(spec: ModelSpec, settings: SolverSettings) -> float:
    """The teacher-noise scale of the refinement's fine rules: ``settings.fine_teacher_scale``
    if set, else ``REFERENCE_TEACHER_SCALE`` for ``L = 2`` with student and teacher rank 1 (the
    variants of ``SCALED_VARIANTS``), else 1 (the plain rule)."""
    if settings.fine_teacher_scale is not None:
        return float(settings.fine_teacher_scale)
    scaled = spec.variant in SCALED_VARIANTS and _two_tokens_rank_one(spec)
    return REFERENCE_TEACHER_SCALE if scaled else 1.0


def _two_tokens_rank_one(spec: ModelSpec) -> bool:
    """``L = 2`` with student and teacher rank 1: the geometry where the fine rules' variance
    reductions (:func:`teacher_scale_for`, :func:`mirror_for`) were measured to help."""
    return spec.L == 2 and spec.rank == 1 and spec.teacher_rank == 1


#: the attention variants measured to gain from the mirror pairing at ``L = 2``, rank 1 and
#: uncorrelated tokens (untied: the semantic error grows 1.5x; ``L = 3``, rank 2 and correlated
#: tokens: no gain or a loss; docs/theory.md, session 19)
MIRRORED_VARIANTS = ("tied", "causal")


def mirror_for(spec: ModelSpec, settings: SolverSettings) -> bool:
    """Whether the refinement's fine QMC rules pair every node with its mirror
    (:meth:`Saddle.mirror_nodes`): ``settings.mirror`` if set, else for ``L = 2`` with student and
    teacher rank 1, uncorrelated tokens and the variants of ``MIRRORED_VARIANTS``, where it was
    measured to help (the jumps of the minimiser there are swaps of near-mirror minima)."""
    if settings.mirror is not None:
        return bool(settings.mirror)
    return spec.variant in MIRRORED_VARIANTS and _two_tokens_rank_one(spec) and spec.uncorrelated


def refine_point(spec: ModelSpec, point: BranchPoint, settings: SolverSettings, tol: float | None = None,
                 max_evals: int | None = None, retry: bool = True, fallback: bool = True,
                 keep_fine: bool = False) -> BranchPoint:
    """Carry a fixed point of the solver's (coarse) rule to finer rules (multi-fidelity solve).

    The fine rule is the union of ``settings.refine_replicas`` independent scrambles of
    ``4 * 2^refine_order`` points (with the sign copies of ``FINE_COPIES``). From the coarse
    fixed point ``x0`` a
    quasi-Newton solve on the fine rule (Jacobian inherited from the coarse solve, Broyden
    updates) runs to ``REFINE_TOL``: its first data step uses the full multi-start set, the
    others are warm-started from those minima, so it costs about two full fine data steps.

    ``eps_t = -Phi`` (THEORY.md 2.1) is then evaluated at the refined point ``x`` with the fine
    conjugates and ``E[M]``. ``Phi`` is stationary in the order parameters and their conjugates,
    so an error ``delta`` of ``x`` enters ``eps_t`` only as ``delta^2``: with ``REFINE_TOL = 1e-3``
    the training error is as accurate as the fine rule's ``E[M]``. That is what locates the
    shallow crossing of the two training errors (``alpha_c``): at ``omega = 0.3`` the coarse
    (2^8 x 4) training errors of four scrambles scatter by 0.4-1.5 %, refined ones by ~0.1 %.

    With ``tol`` (e.g. ``settings.tol`` for a single solve) the fine solve runs to that relative
    change instead, confirmed with the full multi-start set (a residual below ``noise_tol`` is
    accepted as the rule's noise floor, as in :func:`solve_fixed_point`).

    ``max_evals``: fine data steps per quasi-Newton stage (default ``REFINE_MAX_EVALS``; the
    spinodal probes of :func:`find_transition` give less, and no ``retry`` with a
    forward-difference Jacobian). ``fallback``: where the quasi-Newton stages of an exact solve
    fail, the full solver from the coarse point (:func:`_fallback_refine`).

    ``keep_fine``: the refined point keeps its fine rules and their full data step at it
    (``BranchPoint.fine``, a few MB at order 11) for a refinement to finer rules from there
    (:func:`_nested_first`; the overlap target of :func:`solve_refined`).

    Standard errors over the fine scrambles are in ``diagnostics["refined"]["errors"]``
    (absolute for ``train_loss`` and ``test_error``, relative for the order parameters) and, as
    relative errors of the reported values, in ``diagnostics["error_estimate"]``. A refinement
    that does not converge returns the coarse point with the reason.
    """
    from attnphase.theory.fixed_point import _quasi_newton  # noqa: PLC0415
    from attnphase.theory.quadrature import Rule

    order = settings.refine_order
    if order == 0 or not point.exists or getattr(point, "op", None) is None or getattr(point, "data", None) is None:
        return point  # (nothing to refine: off, absent, or a point without its solver state)
    alpha = point.alpha
    sd = _make_saddle(spec, alpha, settings)
    L, F, rs = sd.L, sd.F, sd.rs
    if settings.method == "qmc":
        # (the refinement keeps the coarse point's symmetry zeros, which the fine rules impose;
        # they keep only the sign flip under which the branch's own overlap is odd, so a point
        # going to the trivial branch still finds it exactly: see fine_copies)
        copies, scale = fine_copies(sd.amap, point.branch), teacher_scale_for(spec, settings)
        fine = [_make_saddle(spec, alpha, settings, order=order, seed=settings.seed + 104729 * (k + 1), copies=copies,
                             teacher_scale=scale, mirror=mirror_for(spec, settings))
                for k in range(settings.refine_replicas)]
    else:
        fine = [_make_saddle(spec, alpha, settings, order=order)]
    n = len(fine)
    x_all = np.concatenate([f.rule.x for f in fine])
    union = Saddle(spec, alpha, Rule(x_all, np.concatenate([f.rule.w for f in fine]) / n, settings.method, order,
                                     copies=fine[0].rule.copies, teacher_scale=fine[0].rule.teacher_scale),
                  mirror=fine[0].mirror)
    x0 = point.op.to_vector()
    info: dict[str, Any] = {"method": settings.method, "order": order, "replicas": n, "nodes": union.rule.size,
                            "teacher_scale": union.rule.teacher_scale, "mirror": union.mirror,
                            "coarse": {"train_loss": point.train_loss, "test_error": point.test_error,
                                       "q": point.q, "m": point.m, "theta": point.theta,
                                       **({"test_error_order": DRAFT_TEST_ORDER}
                                          if point.diagnostics.get("draft_test_error") else {})}}
    exact = tol is not None
    qs = replace(settings, tol=tol, noise_tol=max(settings.noise_tol, tol)) if exact else \
        replace(settings, tol=REFINE_TOL, noise_tol=max(settings.noise_tol, REFINE_TOL))
    budget = max_evals or REFINE_MAX_EVALS
    qn = _quasi_newton(union, x0, qs, J0=point.jacobian, max_evals=2 * budget if exact else budget,
                       confirm_full=exact, first_full=_nested_first(union, n, point, x0, settings))
    tried = [(qn, x0)]  # (each failed stage with the units of its Jacobian: see _rules_unresolve)
    at_floor = qn is not None and exact and qn.resid < settings.noise_tol
    if retry and qn is not None and not qn.ok and point.jacobian is not None and not at_floor:
        # the coarse Jacobian can point the wrong way on the fine map (seen at small omega):
        # once more with forward differences on the fine rule (warm-started from that attempt's
        # full multi-start evaluation where it was made at x0: one full evaluation less)
        qn = _quasi_newton(union, x0, qs, J0=None, warm=_warm_at(qn, x0),
                           max_evals=qn.evals + budget, confirm_full=exact)
        tried.append((qn, x0))
    if qn is not None and not qn.ok and exact and settings.noise_tol > tol:
        # tol below the fine map's noise floor (as in solve_fixed_point): a second stage from
        # where the first stopped, to noise_tol, with its Broyden Jacobian
        # (the first stage stalling below noise_tol goes straight here: seen on the rank-2 mixed
        # branch, where a retry from x0 with forward differences cost ~9 s for nothing)
        qn2 = _quasi_newton(union, qn.x, replace(qs, tol=settings.noise_tol), J0=qn.J, warm=_warm_at(qn, qn.x),
                            max_evals=2 * budget, confirm_full=True)
        tried.append((qn2, qn.x))
        if qn2 is not None and qn2.ok:
            qn = replace(qn2, evals=qn.evals + qn2.evals,
                         message=f"converged to the rule's noise floor: relative change {qn2.rel:.1e} "
                                 f"(< noise_tol {settings.noise_tol:g}; tol {tol:g} not reached)")
    x_units = x0  # (the per-rule solves work in the units of the solve that gave qn.J)
    if exact and retry and fallback and qn is not None and not qn.ok:
        why = _rules_unresolve(sd, fine, tried, point.branch, settings) if n > 1 else None
        if why is not None:
            info["applied"] = False
            info["unresolved"] = why
            info["reason"] = "refinement did not converge: " + qn.message
            return replace(point, diagnostics={**point.diagnostics, "refined": info})
        fb = _fallback_refine(union, point, settings, qs)
        info["fallback"] = fb[1]
        if fb[0] is not None:
            qn = fb[0]
            x_units = qn.x
    if qn is None or not qn.ok:
        info["applied"] = False
        info["reason"] = "refinement did not converge: " + ("invalid start" if qn is None else qn.message)
        if qn is not None:  # where it stopped (user units): e.g. on the way to another branch
            q_u, m_u, th_u = sd.user_scalars(OrderParams.from_vector(qn.x, L, F, rs))
            info["stopped_at"] = {"q": float(q_u), "m": float(m_u), "theta": float(th_u)}
            info["reason"] += f" (stopped at m {m_u:.3g}, theta {th_u:.3g})"
        return replace(point, diagnostics={**point.diagnostics, "refined": info})
    x = qn.x
    op = OrderParams.from_vector(x, L, F, rs)
    info["step"] = float(np.max(np.abs(x - x0) / np.maximum(np.abs(x0), 1e-3)))
    info["evaluations"] = qn.evals
    info["solver_reason"] = qn.message
    info["residual"] = qn.rel
    landed = classify(op, float(np.sqrt(sd.s2)), _has_mixed(spec))
    if landed != point.branch:
        info["applied"] = False
        info["reason"] = "the refined point left the branch"
        info["left_to"] = landed  # (see left_branch: the coarse point may be an artefact of its rule)
        return replace(point, diagnostics={**point.diagnostics, "refined": info})
    # each fine rule at x (from the union's minima there where its last evaluation was the full one at x)
    full_at_x = _warm_at(qn, x) is not None
    steps, starts, cuts = _rule_steps(fine, op, qn.ds, settings, full=full_at_x)
    hats = Hats(*(sum(getattr(ds.hats, k) for ds in steps) / n for k in ("q_hat", "m_hat", "V_hat", "theta_hat")))
    mean = replace(steps[0], hats=hats, mean_M=float(np.mean([ds.mean_M for ds in steps])))
    train = -sd.free_energy(op, mean)
    test = sd.test_error(op)
    info["applied"] = True
    if n > 1:
        # each fine rule's own fixed point, from x by Broyden steps on its warm-started map (the
        # union's Jacobian to start): a linear-response step with the Broyden Jacobian alone was
        # off by up to 9x in the standard error where that Jacobian was poor (L = 3)
        X, conv = _rule_fixed_points(sd, fine, steps, x, x_units, qn.J, starts, cuts, settings)
        info["rule_solves"] = conv
        trains = np.array([-sd.free_energy(op, ds) for ds in steps])
        tests = _test_error_spread(sd, op, X)
        rel = np.std(X, ddof=1, axis=0) / np.sqrt(n) / np.maximum(np.abs(x), 1e-300)
        info["errors"] = {"train_loss": float(np.std(trains, ddof=1) / np.sqrt(n)),
                          "test_error": float(np.std(tests, ddof=1) / np.sqrt(n)),
                          **{nm: float(v) for nm, v in zip(op.names(), rel, strict=True)}}
        names = op.names()
        est: dict[str, Any] = {nm: info["errors"][nm] for nm in names}
        est["test_error"] = info["errors"]["test_error"] / test
        est["train_loss"] = info["errors"]["train_loss"] / abs(train)
        _add_user_errors(est, sd, op, X, se=True)
        est["method"] = f"standard error over {n} fine {settings.method} rules (refinement)"
    else:
        est = None
    kept = {k: v for k, v in point.diagnostics.items() if k != "draft_test_error"}
    return replace(
        point, train_loss=float(train), test_error=float(test), **_overlap_fields(sd, op),
        fine=(union, n, qn.ds) if keep_fine and full_at_x and settings.method == "qmc" else None,
        diagnostics={**kept, "refined": info, **({"error_estimate": est} if est is not None else {})},
    )


def _nested_first(union: Saddle, n: int, point: BranchPoint, x0: np.ndarray,
                  settings: SolverSettings) -> DataStep | None:
    """The full multi-start data step of ``union`` at ``x0``, with the minima of the nodes it
    shares with the rules of the refinement that gave ``point`` taken from that refinement's full
    evaluation at the same point (``point.fine``), solved at the other nodes only; ``None`` where
    nothing is shared.

    The scrambled Sobol sequence of one seed is extensible: the fine rule of order ``k`` is the
    first ``2^(k+c)`` points of every block of sign copies of the rule of order ``K > k`` with the
    same seed (``sobol_gaussian``), so a refinement raised from order ``k`` to ``K``
    (:func:`_refine_to_target`) knows the minima of ``2^(k-K)`` of its nodes at its start, with the
    same starts: the step equals the full evaluation bit for bit, at that fraction less (session 20:
    ~0.1 s of the semantic branch's order 11 -> 13 at the reference case)."""
    prev = getattr(point, "fine", None)
    if prev is None or point.op is None or not np.array_equal(point.op.to_vector(), x0):
        return None
    old, n_old, ds = prev
    new_rule, old_rule = union.rule, old.rule
    if (n_old != n or old_rule.copies != new_rule.copies or old_rule.copies not in ("eta", "xi", "none")
            or old_rule.teacher_scale != new_rule.teacher_scale or old.mirror != union.mirror
            or old_rule.size >= new_rule.size or old_rule.x.shape[1] != new_rule.x.shape[1]
            or ds.prox.h.shape[0] != old_rule.size):
        return None
    nb = 1 + len(COPIES[new_rule.copies])  # (blocks of sign copies in a rule)
    per_old, per_new = old_rule.size // n, new_rule.size // n
    b_old, b_new = per_old // nb, per_new // nb
    idx = (np.arange(n)[:, None, None] * per_new + np.arange(nb)[None, :, None] * b_new
           + np.arange(b_old)[None, None, :]).ravel()
    if idx.size != old_rule.size or not np.array_equal(new_rule.x[idx], old_rule.x):
        return None
    op = OrderParams.from_vector(x0, union.L, union.F, union.rs)
    w, hstar, qis, qinv, R = union.fields(op)
    T = target_map(hstar, union.spec)

    def split(a: np.ndarray, old_part: bool) -> np.ndarray:  # (rules x blocks x nodes: the shared ones first)
        v = a.reshape(n, nb, b_new, *a.shape[1:])
        return (v[:, :, :b_old] if old_part else v[:, :, b_old:]).reshape(-1, *a.shape[1:])

    wf, hf, Tf = split(w, False), split(hstar, False), split(T, False)
    starts = union.full_starts(wf, hf, Tf, op.V)
    if starts.shape[1] != ds.prox.candidates.shape[1]:
        return None
    part = prox_batch(wf, Tf, op.V, union.C, union.amap, starts=starts, mix=union.mix)
    part = escape_saddles(part, wf, Tf, op.V, union.C, union.amap, starts, mix=union.mix)  # (node by node)
    merged = []
    for a_new, a_old in zip(part.arrays(), ds.prox.arrays(), strict=True):
        out = np.empty((n, nb, b_new, *a_new.shape[1:]))
        out[:, :, :b_old] = a_old.reshape(n, nb, b_old, *a_old.shape[1:])
        out[:, :, b_old:] = a_new.reshape(n, nb, b_new - b_old, *a_new.shape[1:])
        merged.append(out.reshape(new_rule.size, *a_new.shape[1:]))
    prox = ProxResult(*merged)
    return union.data_from(op, prox, settings.switch_width, (w, T, qis, qinv, R))


#: iterations of the full solver when the refinement's quasi-Newton stages fail (the L = 3
#: positional point below converges in 67-70; each costs a fine data step)
FALLBACK_MAX_ITER = 100


def _fallback_refine(union: Saddle, point: BranchPoint, settings: SolverSettings,
                     qs: SolverSettings) -> tuple[Any, str]:
    """The fine rules' fixed point by the full solver (damped, Anderson-accelerated iteration and
    its quasi-Newton polish) from the coarse point, where the refinement's quasi-Newton stages
    failed; then the forward-difference Jacobian there (for the per-rule solves). Returns the
    quasi-Newton-like result at that point (``None`` if the solve failed) and what happened.

    Seen at ``L = 3``, positional, ``alpha = 1.5``, ``omega = 0.3``: from the coarse point
    (``m = 0.058``) Broyden steps with the coarse or a forward-difference Jacobian stop with no
    decrease along the Newton direction (``m = 0.053``), while the damped iteration on the same
    fine map converges in ~50 iterations.
    """
    from attnphase.theory.fixed_point import _quasi_newton  # noqa: PLC0415

    res = solve_fixed_point(union, point.op, replace(settings, tol=qs.tol, max_iter=FALLBACK_MAX_ITER))
    if not res.converged:
        return None, f"full solver from the coarse point: {res.reason} ({res.iterations} iterations)"
    fd = _quasi_newton(union, res.op.to_vector(), replace(qs, tol=max(qs.tol, settings.noise_tol)), warm=res.data,
                       fd_jacobian=True, confirm_full=True)
    if fd is None or not fd.ok:
        why = "invalid point" if fd is None else fd.message
        return None, f"full solver converged ({res.iterations} iterations), Jacobian there failed: {why}"
    msg = f"full solver from the coarse point: {res.reason} in {res.iterations} iterations"
    return replace(fd, evals=res.iterations + fd.evals, message=msg), msg


def _warm_at(qn: Any, x: np.ndarray) -> DataStep | None:
    """The minima of a quasi-Newton stage's last full evaluation, if it was made at ``x``."""
    return qn.ds if qn.full_at is not None and np.array_equal(qn.full_at, x) else None


def left_branch(point: BranchPoint) -> str | None:
    """The branch that :func:`refine_point` converged to when it left ``point``'s branch
    (``None`` if it did not leave it or was not run)."""
    return point.diagnostics.get("refined", {}).get("left_to")


#: a branch exists on the fine rules only if the overlap that defines it exceeds this many
#: standard errors over the fine rules (about the two-sided 95 % t quantile for 4 rules)
RESOLVE_SE = 3.0


def fine_absence(point: BranchPoint) -> str | None:
    """Why a coarse fixed point is not a fixed point of the branch on the finer rules (``None``
    if it is, or if it was not refined).

    Either its refinement converged to another branch, or the overlap that defines the branch
    (``theta`` semantic, ``m`` positional, both mixed) is within ``RESOLVE_SE`` standard errors
    of zero over the fine rules. Measured at ``omega = 0.3``: followed downward on the 2^8 x 4
    rule of the transition, the semantic branch does not end but continues to small-``theta``
    points (``theta = 0.038`` at ``alpha = 0.6``, ``-0.016`` at 0.4; relative errors ~1) whose
    refinements go to the trivial branch, and the transition reported that tail's end (0.33) as
    the spinodal; on 2^14 x 4 nodes the branch drops from ``theta = 0.23`` (0.8) to 0.10 (0.75)
    and 0.018 (0.72), and the small-``theta`` tail ends at 0.69.
    """
    to = left_branch(point)
    if to is not None:
        n = point.diagnostics["refined"].get("nodes")
        return f"refined on {n} nodes, the fixed point converges to the {to} branch"
    why = _settled_unresolved(point)
    if why is not None:
        return why
    if not _applied(point):
        return None
    bad = _unresolved_overlap(point)
    if bad is None:
        return None
    key, err = bad
    n = point.diagnostics["refined"].get("replicas")
    return (f"{key} = {getattr(point, key):.3g} is not resolved from zero on the fine rules "
            f"(relative standard error {err:.2g} over {n} rules)")


def _settled_unresolved(point: BranchPoint) -> str | None:
    """Why the branch is not resolved, where :func:`refine_point` decided it from the fine rules'
    own fixed points before its fallback (:func:`_rules_unresolve`); ``None`` otherwise."""
    return (getattr(point, "diagnostics", None) or {}).get("refined", {}).get("unresolved")


def _unresolved_overlap(point: BranchPoint) -> tuple[str, float] | None:
    """The overlap that defines ``point``'s branch (``theta`` semantic, ``m`` positional, both
    mixed) and its relative error estimate, if that is above ``1 / RESOLVE_SE``."""
    est = point.diagnostics.get("error_estimate") or {}
    for key in DEFINING_OVERLAPS.get(point.branch, ()):
        err = est.get(f"{key}_user")
        if err is not None and err * RESOLVE_SE > 1:
            return key, float(err)
    return None


def mark_unresolved(point: BranchPoint) -> BranchPoint:
    """``point`` marked absent (values kept) where :func:`fine_absence` gives a reason."""
    if not getattr(point, "exists", False) or not hasattr(point, "diagnostics"):
        return point  # (absent already, or a stand-in without diagnostics)
    why = fine_absence(point)
    if why is None:
        return point
    return replace(point, exists=False, reason=f"no {point.branch} fixed point on the fine rules: {why} "
                   f"(the point found on the coarse rule, theta {point.theta:.3g}, m {point.m:.3g}, is an artefact of "
                   "that rule)")


def solve_refined(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings) -> BranchPoint:
    """One branch at one ``alpha`` by the multi-fidelity path: the fixed point on the solver's
    (coarse) rule, then :func:`refine_point` to ``settings.tol`` on the fine rules, whose standard
    error is the error estimate. Where the refinement does not converge the coarse point is
    returned with the reason in ``diagnostics["refined"]`` and the linear-response error estimate
    of the coarse rule (seen for ``rank = 2``: the coarse rule's ``m = 0`` semantic point is not a
    fixed point of the fine rules, which drift to the mixed branch; docs/variants.md), unless the
    overlap that defines the branch is not resolved there (:func:`coarse_absence`). Where the coarse
    solve of a semantic or mixed point finds no point or its refinement fails, the branch is first
    continued down from larger ``alpha`` on a finer rule (:func:`_refine_from_above`)."""
    if not settings.refine_order:
        return solve_point(spec, alpha, branch, settings, thorough=True)
    coarse = solve_point(spec, alpha, branch, settings, error_estimate=False, draft=True, thorough=True)
    # (a semantic or mixed point whose refinement fails is first continued from above, the full-solver
    # fallback comes after that: it never rescued such a point, and costs ~10 s where it fails)
    above_first = branch in ("semantic", MIXED)
    point = refine_point(spec, coarse, settings, tol=settings.tol, fallback=not above_first,
                         keep_fine=bool(settings.target_error))
    marked = mark_unresolved(point)  # (marked is not point: the fine rules do not confirm the branch)
    if not _applied(point) or marked is not point:
        retry, tried = _refine_from_above(spec, alpha, branch, settings, point if marked is point else marked)
        if retry is not None and mark_unresolved(retry[1]) is retry[1]:
            coarse, point = retry
            marked = point
        elif above_first and point.exists and marked is point and not _applied(point):
            point = refine_point(spec, coarse, settings, tol=settings.tol)  # (now with the fallback)
            if tried:
                point.diagnostics.setdefault("refined", {})["retry"] = tried
            marked = mark_unresolved(point)
        elif tried and (not marked.exists):
            marked = replace(marked, reason=f"{marked.reason} (nor {tried})")
            if not point.exists:
                point = coarse = marked
        elif tried:
            point.diagnostics["refined"]["retry"] = tried
    if marked is not point:
        return marked
    if not _applied(point):
        point = coarse = _final_test_error(spec, replace(coarse, diagnostics=point.diagnostics), settings)
        if coarse.exists and settings.n_replicas > 1:
            point.diagnostics["error_estimate"] = _error_estimate(spec, alpha, branch, settings, coarse)
            why = coarse_absence(point)
            if why is not None:
                return replace(point, exists=False, reason=f"{branch} branch not resolved: {why}")
    if settings.target_error and coarse.exists:
        # (a finer rule may no longer resolve the branch: the L = 3 positional point at
        # alpha 1.5, omega 0.3 has m 0.058 / 0.014 / 0.005 on 2^8 x 4 / 2^11 x 4 / 2^12 x 4 nodes)
        point = mark_unresolved(_refine_to_target(spec, point, settings))
    return point


def _applied(point: BranchPoint) -> bool:
    """The point was carried to the fine rules (:func:`refine_point` converged on the branch)."""
    return bool((getattr(point, "diagnostics", None) or {}).get("refined", {}).get("applied"))


#: branches that end towards small ``alpha`` (at a spinodal): where their refinement fails they are
#: continued downward from ``RAMP_DOWN * alpha`` on a rule one order below the fine rules
RAMP_DOWN = 2.0


def _refine_from_above(spec: ModelSpec, alpha: float, branch: str, settings: SolverSettings,
                       failed: BranchPoint) -> tuple[tuple[BranchPoint, BranchPoint] | None, str]:
    """A second try where the coarse solve of a semantic (or mixed) point found no point of the
    branch or its refinement did not converge: the branch continued downward from
    ``RAMP_DOWN * alpha`` on the rule one order below the fine rules (:func:`_ramp`), then
    refined. Returns ((that point, its refinement), what was done) if the refinement converges,
    else (``None``, what was tried).

    Near the end of a branch the coarse rule can sit on a different part of it than the fine
    rules: causal student, ``omega = 0.3``, ``alpha = 1.75``: ``theta`` = 0.202 on 2^8 x 4 nodes
    (where the branch ends near 1.7) against 0.349 on 2^11 x 4 nodes (ending near 1.61), and the
    refinement from 0.202 falls towards the trivial branch; the direct start on the finer rule
    goes trivial too, while the branch continued from larger ``alpha`` is reached
    (docs/variants.md)."""
    mid_settings = _mid_rule_settings(settings)
    if branch not in ("semantic", MIXED) or mid_settings is None:
        return None, ""
    origin = RAMP_DOWN * alpha
    how = f"continued down from alpha {origin:g} on order {mid_settings.order}"
    mid = _ramp(spec, alpha, branch, mid_settings, origin)
    if mid is None:
        return None, f"{how}: the branch was lost on the way"
    point = refine_point(spec, mid, settings, tol=settings.tol)
    if not _applied(point) and _settled_unresolved(point) is None:
        to = left_branch(point)
        return None, f"{how} (theta {mid.theta:.3g}): " + (f"refined, it went to the {to} branch" if to else
                                                          "its refinement did not converge either")
    why = fine_absence(point)
    if why is not None:
        return None, f"{how} (theta {mid.theta:.3g}): not resolved on the fine rules ({why})"
    if failed.exists or failed.diagnostics.get("refined"):
        note = (f"the refinement of the coarse point (coarse theta {failed.theta:.3g}) failed "
                f"({failed.diagnostics.get('refined', {}).get('reason')}); {how} instead")
    else:
        note = f"the coarse solve found no point of the branch ({failed.reason}); {how} instead"
    point.diagnostics.setdefault("refined", {})["retry"] = note
    return (mid, point), note


def coarse_absence(point: BranchPoint) -> str | None:
    """Why an unrefined point (its refinement did not converge) does not resolve its branch: the
    overlap that defines it has a relative error estimate (linear response on the solver's rule)
    above ``1 / RESOLVE_SE``; ``None`` otherwise."""
    bad = _unresolved_overlap(point)
    if bad is None:
        return None
    key, err = bad
    return (f"its refinement did not converge and on the coarse rule {key} = {getattr(point, key):.3g} has a "
            f"relative error estimate of {err:.2g}")


#: decay of the refined test-error estimates with the number of nodes, ``N^-TARGET_DECAY``: the
#: least-squares slope of log2(estimate) against the refinement order 11-15, pooled over 12 chains
#: (L = 2 semantic and positional at alpha 1, L = 3 semantic and rank 2 semantic, positional and
#: mixed at alpha 1.5, two seeds each) is 0.64, single chains 0.16-1.14 (docs/theory.md, session 15)
TARGET_DECAY = 0.64


def orders_to_target(err: float, target: float) -> int:
    """Refinement orders (doublings of the nodes) to bring an error estimate ``err`` down to
    ``target`` if it decays as ``N^-TARGET_DECAY``; at least 1."""
    if not (math.isfinite(err) and err > target > 0):
        return 1
    return max(1, math.ceil(math.log2(err / target) / TARGET_DECAY - 1e-9))


def _refine_to_target(spec: ModelSpec, point: BranchPoint, settings: SolverSettings) -> BranchPoint:
    """Raise the refinement order (each solve starts from the previous refined point) until the
    relative error estimate of the test error (``settings.target_on``: or of the summary overlaps,
    or of both: :func:`target_estimate`) is at most ``settings.target_error`` or
    ``max_refine_order`` is reached; the history (order, the targeted estimate, the test error's,
    nodes, and the seconds each refinement took) is in ``diagnostics["target"]``.

    Each step goes to the order that the estimate's decay predicts, ``N^-TARGET_DECAY`` in the
    number of nodes ``N`` (one order doubles ``N``), at least one order up: the intermediate
    orders, skipped, would together cost about as much again as the last one."""
    order = settings.refine_order
    history: list[dict[str, Any]] = []

    def estimate(p: BranchPoint, on: str = settings.target_on) -> float:
        return target_estimate(p, on) if _applied(p) else math.inf

    err = estimate(point)
    kept = order
    history.append({"order": order, "estimate": err, "test_error_estimate": estimate(point, "test_error"),
                    "nodes": point.diagnostics["refined"].get("nodes")})
    while err > settings.target_error and order < settings.max_refine_order:
        order = min(settings.max_refine_order, order + orders_to_target(err, settings.target_error))
        t0 = time.perf_counter()
        nxt = refine_point(spec, point, replace(settings, refine_order=order), tol=settings.tol, keep_fine=True)
        e = estimate(nxt)
        history.append({"order": order, "estimate": e, "test_error_estimate": estimate(nxt, "test_error"),
                        "nodes": nxt.diagnostics["refined"].get("nodes"), "seconds": time.perf_counter() - t0})
        if _settled_unresolved(nxt) is not None:
            point, kept = nxt, order  # (the branch is not resolved on these rules: mark_unresolved says so)
            break
        if not math.isfinite(e):
            break  # (that refinement failed: keep the last refined point)
        point, err, kept = nxt, e, order
    return replace(point, fine=None, diagnostics={**point.diagnostics, "target": {
        "target_error": settings.target_error, "on": settings.target_on, "met": err <= settings.target_error,
        "order": kept, "history": history}})


def target_estimate(point: BranchPoint, on: str) -> float:
    """The largest relative error estimate of ``point`` among the quantities ``on`` names
    (``TARGET_KEYS``; an overlap that is zero by symmetry has estimate 0); ``inf`` without one."""
    est = point.diagnostics.get("error_estimate") or {}
    vals = [est.get(k) for k in TARGET_KEYS[on]]
    return math.inf if any(v is None for v in vals) else float(max(vals))


def _extrapolate(p1: BranchPoint, p2: BranchPoint, alpha: float) -> OrderParams | None:
    """Linear extrapolation of the order parameters through two solved points (``None`` if the
    result leaves the valid domain)."""
    if p1.op is None or p2.op is None or p1.alpha == p2.alpha:
        return None

    x1, x2 = p1.op.to_vector(), p2.op.to_vector()
    t = (alpha - p2.alpha) / (p2.alpha - p1.alpha)
    L, F = p2.op.m.shape
    op = OrderParams.from_vector(x2 + t * (x2 - x1), L, F, p2.op.theta.shape[1])
    return op if _valid(op) else None


def follow_branch(
    spec: ModelSpec,
    alphas: Sequence[float],
    branch: str,
    settings: SolverSettings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[BranchPoint]:
    """Continuation of ``branch`` along ``alphas`` (warm start from the previous point).

    Where the branch is lost (the warm start converges elsewhere) the direct start is tried
    once; points where neither gives the branch are returned with ``exists = False``.
    """
    check_alpha(alphas)
    settings = settings or SolverSettings()
    out: list[BranchPoint] = []
    found: list[BranchPoint] = []  # the points where the branch exists, in order
    for i, a in enumerate(alphas):
        start, jac, warm = None, None, None
        if found:
            last = found[-1]
            start, jac, warm = last.op, last.jacobian, last.data
            if len(found) >= 2:  # secant predictor along the branch
                start = _extrapolate(found[-2], last, a) or start
        pt = solve_point(spec, a, branch, settings, start=start, error_estimate=False, jacobian=jac,
                         warm=warm)
        if not pt.exists and found:
            pt2 = solve_point(spec, a, branch, settings, start=None, error_estimate=False)
            if pt2.exists:
                pt = pt2
        out.append(pt)
        if pt.exists:
            found.append(pt)
        if progress is not None:
            progress(i + 1, len(alphas))
    # points before the first one found (the direct start converged elsewhere there, e.g. the
    # mixed start at the largest alpha): continued backwards from the first found point
    first = next((i for i, p in enumerate(out) if p.exists), None)
    if first:
        last = out[first]
        for i in range(first - 1, -1, -1):
            pt = solve_point(spec, alphas[i], branch, settings, start=last.op, error_estimate=False,
                             jacobian=last.jacobian, warm=last.data)
            if not pt.exists:
                break
            out[i] = last = pt
    return out


@dataclass(frozen=True)
class Transition:
    """Transition points for one ``omega`` (THEORY.md 2.1 "Branches")."""

    alpha_c: float | None
    alpha_l: float | None
    spinodals: dict[str, float | None]
    linear_test_error: float
    notes: tuple[str, ...] = ()
    grid: dict[str, list] = field(default_factory=dict)
    #: integration-error estimate (standard error over independent QMC scrambles; empty for one)
    errors: dict[str, float | None] = field(default_factory=dict)
    #: the transition of each scramble when several were combined
    replicas: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {
            "alpha_c": self.alpha_c,
            "alpha_l": self.alpha_l,
            "spinodals": dict(self.spinodals),
            "linear_test_error": self.linear_test_error,
            "notes": list(self.notes),
        }
        if self.errors:
            d["errors"] = dict(self.errors)
            d["replicas"] = list(self.replicas)
        return d


def combine_transitions(runs: Sequence[dict[str, Any]], seed0: int = 0) -> dict[str, Any]:
    """Combine :meth:`Transition.to_dict` results of independent QMC scrambles (seeds
    ``seed0, seed0 + 1, ...``): the mean of each point, its standard error under ``errors`` and
    every scramble under ``replicas``. A scramble missing a point is left out of that mean."""
    runs = list(runs)
    if len(runs) == 1:
        return dict(runs[0])

    def combine(vals: list[float | None]) -> tuple[float | None, float | None]:
        got = [float(v) for v in vals if v is not None]
        if not got:
            return None, None
        mean = float(np.mean(got))
        se = float(np.std(got, ddof=1) / np.sqrt(len(got))) if len(got) > 1 else None
        return mean, se

    a_c, e_c = combine([r.get("alpha_c") for r in runs])
    a_l, e_l = combine([r.get("alpha_l") for r in runs])
    spin: dict[str, float | None] = {}
    errs: dict[str, float | None] = {"alpha_c": e_c, "alpha_l": e_l}
    for b in ("semantic", "positional"):
        spin[b], errs[f"spinodal_{b}"] = combine([r.get("spinodals", {}).get(b) for r in runs])
    notes = [f"mean of {len(runs)} QMC scrambles (seeds {seed0}..{seed0 + len(runs) - 1}); "
             "errors are standard errors over them"]
    for k, r in enumerate(runs):
        notes += [f"scramble {k}: {n}" for n in r.get("notes", [])]
        if r.get("alpha_c") is None and a_c is not None:
            notes.append(f"scramble {k} found no alpha_c; the mean uses the others")
    return {"alpha_c": a_c, "alpha_l": a_l, "spinodals": spin,
            "linear_test_error": runs[0].get("linear_test_error"), "notes": notes, "errors": errs,
            "replicas": runs}


def find_transition_replicated(
    spec: ModelSpec,
    alphas: Sequence[float] | None = None,
    settings: SolverSettings | None = None,
    replicas: int = 3,
    progress: Callable[[int, int], None] | None = None,
) -> Transition:
    """:func:`find_transition` on ``replicas`` independently scrambled QMC rules (seeds
    ``settings.seed + k``), combined by :func:`combine_transitions`.

    At the fast preset (2^8 x 4 nodes) ``alpha_c(0.3)`` scatters by ~0.04 between scrambles
    (measured: 1.336, 1.254, 1.283), because the two training errors cross at a shallow angle; the
    standard error is the honest uncertainty of the reported value.
    """
    settings = settings or SolverSettings()
    if replicas < 1:
        raise ValueError("replicas must be >= 1")
    runs = []
    for k in range(replicas):
        def prog(i: int, n: int, k: int = k) -> None:
            if progress is not None:
                progress(k * n + i, replicas * n)

        runs.append(find_transition(spec, alphas, replace(settings, seed=settings.seed + k), progress=prog))
    if replicas == 1:
        return runs[0]
    d = combine_transitions([r.to_dict() for r in runs], settings.seed)
    return Transition(d["alpha_c"], d["alpha_l"], d["spinodals"], runs[0].linear_test_error,
                      tuple(d["notes"]), runs[0].grid, d["errors"], tuple(d["replicas"]))


def _bisect(f: Callable[[float], float | None], lo: float, hi: float, flo: float, xtol: float) -> float:
    """Bisection for a sign change of ``f`` on ``[lo, hi]`` (``f(lo) = flo``); ``None`` values
    (branch absent) are treated as the side where the branch does not exist; returns the
    :func:`_midpoint` of the final bracket."""
    return _midpoint(*_bisect_bracket(f, lo, hi, flo, xtol))


def _midpoint(lo: float, hi: float) -> float:
    """Midpoint of a bisection bracket, to 12 significant digits: ``0.675``, not the
    ``0.6749999999999999`` of a bracket whose end is a grid value minus the grid step
    (``0.7 - 0.05 = 0.6499999999999999``)."""
    return float(f"{0.5 * (lo + hi):.12g}")


def _bisect_bracket(f: Callable[[float], float | None], lo: float, hi: float, flo: float,
                    xtol: float) -> tuple[float, float]:
    """The final bracket ``(lo, hi)`` of :func:`_bisect` (``lo`` on the side of ``flo``)."""
    for _ in range(60):
        if abs(hi - lo) < xtol:
            break
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if fm is not None and np.sign(fm) == np.sign(flo):
            lo, flo = mid, fm
        else:
            hi = mid
    return lo, hi


#: steps of the continuation of a spinodal search on the rule one order below the fine rules
MID_STEP = 0.03


def _mid_rule_settings(settings: SolverSettings, solver: SolverSettings | None = None) -> SolverSettings | None:
    """``solver`` (default ``settings``) on the QMC rule one order below ``settings``' fine rules
    (no warm-up rule); ``None`` where there is none (no refinement, ``gh``, or the coarse rule is
    already that fine)."""
    if not settings.refine_order or settings.method != "qmc" or settings.refine_order - 1 <= settings.order:
        return None
    return replace(solver or settings, order=settings.refine_order - 1, warmup_order=None)


def _confirmed(point: BranchPoint) -> bool:
    """``point`` was refined (:func:`refine_point` converged on the branch) and the fine rules
    resolve it (:func:`fine_absence`)."""
    return _applied(point) and fine_absence(point) is None


def _mid_rule_walker(spec: ModelSpec, branch: str, settings: SolverSettings, anchor: BranchPoint,
                     solver: SolverSettings | None = None,
                     max_evals: int | None = None) -> Callable[[float], BranchPoint | None] | None:
    """``branch`` continued from ``anchor`` (a point of the coarse rule) on the rule one order
    below the fine rules, in steps of at most ``MID_STEP``, each time from the nearest point
    already found above: ``walk(a)`` is the refined point at ``a`` if its refinement converges
    and stays on the branch (:func:`fine_absence`), else ``None``. ``None`` where the settings
    have no such rule (no refinement, ``gh``, or the coarse rule is already that fine)."""
    mid_set = _mid_rule_settings(settings, solver)
    if mid_set is None:
        return None
    found: list[BranchPoint] = []

    def walk(a: float) -> BranchPoint | None:
        if not found:
            first = solve_point(spec, anchor.alpha, branch, mid_set, start=anchor.op, error_estimate=False,
                                draft=True, ramp=False)
            if not first.exists:
                return None
            found.append(first)
        last = min((p for p in found if p.alpha > a), key=lambda p: p.alpha - a, default=found[-1])
        n = max(1, int(np.ceil(abs(last.alpha - a) / MID_STEP - 1e-9)))
        pt = _continue(last, [(spec, float(x)) for x in np.linspace(last.alpha, a, n + 1)[1:]], branch, mid_set)
        if pt is None:
            return None
        r = refine_point(spec, pt, settings, max_evals=max_evals, retry=max_evals is None)
        if not _confirmed(r):
            return None
        found.append(pt)
        return r

    return walk


def _spinodal_below(spec: ModelSpec, branch: str, settings: SolverSettings, probe: SolverSettings,
                    anchor: BranchPoint, absent: float, grid: np.ndarray) -> float | None:
    """The end of ``branch`` (semantic side) where the fine rules hold it below the point
    ``absent`` at which the coarse rule lost it, else ``None``.

    The branch is continued down from ``anchor`` by :func:`_mid_rule_walker` (probes with the
    probe budget). Seen for the causal student at ``omega = 0.3``: the coarse rule's semantic
    branch ends near 1.7-1.78, the fine rules' near 1.61 (docs/variants.md). Where the coarse
    rule ends the branch too late (its small-``theta`` tail, "Spinodals" in docs/theory.md) the
    first check fails and nothing changes.
    """
    walk = _mid_rule_walker(spec, branch, settings, anchor, probe, PROBE_REFINE_EVALS)
    if walk is None:
        return None

    def exists(a: float) -> float | None:
        return None if walk(a) is None else 1.0

    if exists(absent) is None:
        return None
    step = float(np.min(np.diff(grid))) if len(grid) > 1 else 0.2
    present, a = absent, absent - step
    while a > 0 and exists(a) is not None:
        present, a = a, a - step
    if a <= 0:
        return None  # (the branch continues to alpha -> 0 on that rule: leave the coarse answer)
    return _bisect(exists, present, a, 1.0, SPINODAL_XTOL)


def refine_followed(spec: ModelSpec, points: Sequence[BranchPoint], settings: SolverSettings) -> list[BranchPoint]:
    """Points of one branch followed on the coarse rule (:func:`follow_branch`), each carried to
    the fine rules (:func:`refine_point`; drawn as absent where they do not confirm it,
    :func:`mark_unresolved`). A semantic or mixed branch is also continued below its lowest
    point on the rule one order below the fine rules (:func:`_mid_rule_walker`), where the coarse
    rule may have lost it early (causal student, ``omega = 0.3``: the coarse rule ends it near
    1.77, the fine rules near 1.61); those points say so in ``diagnostics["continued_below"]``."""
    out = [mark_unresolved(refine_point(spec, p, settings)) for p in points]
    if not out or out[0].branch not in ("semantic", MIXED):
        return out
    have = [k for k, p in enumerate(out) if p.exists and _applied(p)]
    if not have:
        return out
    low = min(have, key=lambda k: out[k].alpha)
    walk = _mid_rule_walker(spec, out[low].branch, settings, points[low])
    if walk is None:
        return out
    # (below it: points the coarse rule lacks, or whose refinement did not converge)
    for k in sorted((k for k, p in enumerate(out) if p.alpha < out[low].alpha and not (p.exists and _applied(p))),
                    key=lambda k: -out[k].alpha):
        r = walk(out[k].alpha)
        if r is None:
            break
        r.diagnostics["continued_below"] = (f"the coarse rule has no refined point here; continued from alpha "
                                            f"{out[low].alpha:g} on order {settings.refine_order - 1}")
        out[k] = r
    return out


def _root(f: Callable[[float], float | None], lo: float, hi: float, flo: float, fhi: float | None,
          xtol: float, noise: Callable[[], float | None] | None = None) -> float:
    """Sign change of ``f`` on ``[lo, hi]`` by the Illinois variant of regula falsi (bisection
    where ``f`` is ``None``, i.e. a branch is absent, treated as the ``hi`` side). The training-
    error and test-error differences are smooth in ``alpha``, so this needs 2-4 solves where
    bisection needs 6-8. ``noise()`` (optional): the standard error of the last ``f`` value; the
    search stops once the secant step to the root is below that error in ``x`` units (``f`` is
    then indistinguishable from zero within the integration error)."""
    side = 0
    true = {lo: flo, hi: fhi}  # f without the Illinois down-weighting
    for _ in range(60):
        if abs(hi - lo) < xtol:
            break
        if fhi is None or fhi == flo:
            m = 0.5 * (lo + hi)
        else:
            m = hi - fhi * (hi - lo) / (fhi - flo)
            pad = 0.02 * (hi - lo)
            m = min(max(m, lo + pad), hi - pad)
        fm = f(m)
        if fm is None:
            hi, fhi = m, None
            side = 0
            continue
        true[m] = fm
        if fm == 0.0:
            return m
        se = noise() if noise is not None else None
        if se is not None:
            # stop once the secant's distance to the root is below the noise of f in x units
            other = (hi, true.get(hi)) if np.sign(fm) == np.sign(flo) else (lo, true.get(lo))
            if other[1] is not None and other[0] != m and other[1] != fm:
                slope = (other[1] - fm) / (other[0] - m)
                if abs(fm / slope) < max(xtol, se / abs(slope)):
                    return float(m - fm / slope)
        if np.sign(fm) == np.sign(flo):
            lo, flo = m, fm
            if side == -1 and fhi is not None:
                fhi *= 0.5
            side = -1
        else:
            hi, fhi = m, fm
            if side == 1:
                flo *= 0.5
            side = 1
        if fhi is not None and abs(fm) < 1e-12 * max(abs(flo), abs(fhi)):
            break
    if fhi is not None and fhi != flo:
        return float(hi - fhi * (hi - lo) / (fhi - flo))
    return 0.5 * (lo + hi)


#: relative gap of the coarse training errors above which the global minimum is taken from the
#: coarse rule without refining both branches (the 2^8 x 4 rule scatters by <= 1.5 %, measured)
GLOBAL_MARGIN = 0.05
#: iteration budget of a spinodal probe (a solve that decides whether a branch exists at one alpha)
SPINODAL_PROBE_ITER = 60
#: bisection tolerance of the spinodals: two probes on the default grid (spacing 0.2), i.e. the
#: spinodal to +- 0.025. A probe is solved on the coarse rule and, with refinement, counts only if
#: its refined point stays on the branch (fine_absence), which costs 2-3 s per probe near a
#: spinodal; the spinodal itself moves by a few hundredths between fine rules
SPINODAL_XTOL = 0.06
#: fine data steps of a spinodal probe's refinement (a refinement near the spinodal took 16)
PROBE_REFINE_EVALS = 8


def _refined_se(p: BranchPoint, key: str) -> float | None:
    """Standard error of ``key`` over the fine rules of a refined point (``None`` otherwise)."""
    return p.diagnostics.get("refined", {}).get("errors", {}).get(key)


def _root_error(hist: Sequence[tuple[float, float, float | None]]) -> float | None:
    """Error of a root located from evaluations ``(x, f(x), se of f)``: the standard error of
    ``f`` at the evaluation nearest the root over the local slope (through the two nearest)."""
    pts = sorted({h[0]: h for h in hist if h[2] is not None}.values(), key=lambda h: abs(h[1]))[:2]
    if len(pts) < 2 or pts[0][0] == pts[1][0]:
        return None
    slope = (pts[1][1] - pts[0][1]) / (pts[1][0] - pts[0][0])
    return float(abs(pts[0][2] / slope)) if slope != 0 else None


def find_transition(
    spec: ModelSpec,
    alphas: Sequence[float] | None = None,
    settings: SolverSettings | None = None,
    xtol: float = 5e-3,
    progress: Callable[[int, int], None] | None = None,
    branches: tuple[list[BranchPoint], list[BranchPoint]] | None = None,
) -> Transition:
    """``alpha_c``, spinodals and ``alpha_l`` by continuation on a grid, then bisection.

    The semantic branch is followed downward from the largest ``alpha`` and the positional
    branch upward from the smallest, so each is tracked as far as it exists (its spinodal).
    For tied attention of rank ``r >= 2`` the semantic side is the ``mixed`` branch (one
    direction semantic, the other positional: the state GD reaches, and the lowest training
    error of the three at large ``alpha``); its spinodal is reported under ``semantic``.
    """
    settings = settings or SolverSettings()
    sem_name = semantic_side(spec)
    grid = np.asarray(alphas if alphas is not None else np.linspace(0.2, 2.4, 12), dtype=float)
    check_alpha(grid)
    grid = np.sort(grid)
    eps_lin = linear_test_error(spec)
    n_total = 2 * len(grid)
    done = [0]

    def tick(i: int, n: int) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], n_total)

    if branches is not None:  # already followed on this grid (e.g. by the curves command)
        sem, pos = list(branches[0]), list(branches[1])
    else:
        sem = follow_branch(spec, grid[::-1], sem_name, settings, progress=tick)[::-1]
        pos = follow_branch(spec, grid, "positional", settings, progress=tick)
    notes: list[str] = [] if sem_name == "semantic" else ["rank >= 2: the semantic side is the mixed branch"]
    spin: dict[str, float | None] = {"semantic": None, "positional": None}

    # a spinodal probe that has not converged within this budget counts as "branch absent" (near
    # a spinodal the map's Jacobian becomes singular and a failing solve would otherwise run
    # the full max_iter)
    probe = replace(settings, max_iter=min(settings.max_iter, SPINODAL_PROBE_ITER), max_polish=1)

    def solve_at(a: float, branch: str, near: BranchPoint, s: SolverSettings = settings) -> BranchPoint:
        # warm start (order parameters and Jacobian) from the nearest solved point of the branch
        pool = solved[branch] or [near]
        best = min(pool, key=lambda p: abs(p.alpha - a))
        pt = solve_point(spec, a, branch, s, start=best.op, error_estimate=False,
                         jacobian=best.jacobian, warm=best.data)
        if pt.exists:
            solved[branch].append(pt)
        return pt

    # With ``settings.refine_order`` the points that decide alpha_c, alpha_l and the spinodals are
    # refined (refine_point).
    refined: dict[tuple, BranchPoint] = {}

    def fine(p: BranchPoint) -> BranchPoint:
        if not settings.refine_order or not p.exists or "refined" in p.diagnostics:
            return p  # (a point given already refined, e.g. by the curves command, is kept)
        key = (p.branch, p.alpha)
        if key not in refined:
            refined[key] = refine_point(spec, p, settings)
        return refined[key]

    def settled(p: BranchPoint) -> BranchPoint:
        """``p`` refined to ``settings.tol`` as a single solve is (:func:`refine_point` with its
        fallback), for the checks of a followed branch's inner end. The quick refinement (to
        ``REFINE_TOL``) is not enough there: at ``omega = 0`` it carried the positional point at
        the grid's end (``alpha = 2.4``, coarse ``m = 0.070``) to ``m = -0.0032``, resolved from
        zero by the teacher-scaled fine rules, and stopped, so the branch was taken to reach the
        grid's end; refined to ``tol`` it is not resolved (session 16)."""
        if not p.exists or not settings.refine_order or "refined" in p.diagnostics:
            return fine(p)
        key = ("exact", p.branch, p.alpha)
        if key not in refined:
            refined[key] = refine_point(spec, p, settings, tol=settings.tol)
        return refined[key]

    def on_fine(p: BranchPoint) -> bool:
        """The branch exists at ``p`` on the fine rules too (see :func:`fine_absence`)."""
        return p.exists and fine_absence(settled(p)) is None

    def probe_exists(a: float, branch: str, anchor: BranchPoint) -> float | None:
        # (as a coarse probe that has not converged in its budget, a probe whose refinement has
        # not converged in PROBE_REFINE_EVALS counts as "branch absent")
        pt = solve_at(a, branch, anchor, probe)
        if not pt.exists or not settings.refine_order:
            return 1.0 if pt.exists else None
        r = refine_point(spec, pt, settings, max_evals=PROBE_REFINE_EVALS, retry=False)
        if _confirmed(r):
            return 1.0
        solved[branch] = [q for q in solved[branch] if q is not pt]  # (no warm start from it)
        return None

    # the inner ends of the followed branches, checked on the fine rules: the coarse rule can
    # continue a branch past its spinodal (fine_absence)
    lo = next((k for k in range(len(grid)) if all(p.exists for p in sem[k:])), len(grid))
    while lo < len(grid) and not on_fine(sem[lo]):
        sem[lo] = mark_unresolved(settled(sem[lo]))
        lo += 1
    hi = max((k for k in range(len(grid)) if all(p.exists for p in pos[: k + 1])), default=-1)
    while hi >= 0 and not on_fine(pos[hi]):
        pos[hi] = mark_unresolved(settled(pos[hi]))
        hi -= 1
    solved = {sem_name: [p for p in sem if p.exists], "positional": [p for p in pos if p.exists]}

    # spinodal of the semantic branch: lowest alpha where it exists
    sem_ok = [p.exists for p in sem]
    if any(sem_ok) and not all(sem_ok):
        i = next((k for k in range(len(grid)) if sem_ok[k] and all(sem_ok[k:])), None)
        if i is None:
            notes.append(f"the {sem_name} branch is not found at the grid end (alpha = {grid[-1]:g})")
        elif i > 0:
            anchor = sem[i]
            present, absent = _bisect_bracket(lambda a: probe_exists(a, sem_name, anchor),
                                              grid[i], grid[i - 1], 1.0, SPINODAL_XTOL)
            spin["semantic"] = coarse_end = _midpoint(present, absent)
            below = _spinodal_below(spec, sem_name, settings, probe, anchor, absent, grid)
            if below is not None:
                spin["semantic"] = below
                # (the lowest followed point may already be one continued on the finer rule, handed
                # over by curves: what ended near the bisection are the coarse-rule probes below it)
                notes.append(f"probes on the coarse rule end the {sem_name} branch near alpha "
                             f"{coarse_end:.3g}; on the rule one order below the fine rules it "
                             f"continues to {below:.3g} (confirmed on the fine rules), which is reported")
    pos_ok = [p.exists for p in pos]
    if any(pos_ok) and not all(pos_ok):
        j = max((k for k in range(len(grid)) if pos_ok[k] and all(pos_ok[: k + 1])), default=None)
        if j is None:  # (seen at lambda = 0: no positional point at the grid start, some further up)
            found = ", ".join(f"{grid[k]:g}" for k in range(len(grid)) if pos_ok[k])
            notes.append(f"the positional branch is not found at the grid start (alpha = {grid[0]:g}), only at "
                         f"alpha = {found}: no spinodal reported for it")
        elif j < len(grid) - 1:
            anchor = pos[j]
            spin["positional"] = _bisect(
                lambda a: probe_exists(a, "positional", anchor),
                grid[j], grid[j + 1], 1.0, SPINODAL_XTOL,
            )
    # alpha_c and alpha_l: bracketed on the grid, then located by regula falsi on refined points
    # (the training errors re-evaluated variationally on finer rules, so the shallow crossing of
    # the two training errors is located to the fine rules' accuracy, not the coarse one's).
    hist: dict[str, list[tuple[float, float, float | None]]] = {"alpha_c": [], "alpha_l": []}

    def train_diff(s: BranchPoint, p: BranchPoint) -> float | None:
        if not (s.exists and p.exists):
            return None
        fs, fp = fine(s), fine(p)
        v = fs.train_loss - fp.train_loss
        es, ep = _refined_se(fs, "train_loss"), _refined_se(fp, "train_loss")
        hist["alpha_c"].append((s.alpha, v, None if es is None or ep is None else float(np.hypot(es, ep))))
        return v

    def settle(f: Callable[[int], float | None], k: int, right: Callable[[float | None], bool]) -> int:
        """Move the bracket ``[k, k+1]`` found on the coarse values until the refined values
        ``f`` bracket the sign change (``right(v)``: the crossing lies to the right of ``v``)."""
        seen = set()
        while 0 <= k < len(grid) - 1 and k not in seen:
            seen.add(k)
            lo, hi = f(k), f(k + 1)
            if lo is None or hi is None:
                break
            if right(hi) and right(lo) and k + 1 < len(grid) - 1:
                k += 1
            elif not right(lo) and not right(hi) and k > 0:
                k -= 1
            else:
                break
        return k

    alpha_c = None
    n_notes = len(notes)  # (notes on alpha_c added below)
    diff = [(s.train_loss - p.train_loss) if (s.exists and p.exists) else None for s, p in zip(sem, pos, strict=True)]
    for k in range(len(grid) - 1):
        if diff[k] is not None and diff[k + 1] is not None and diff[k] > 0 >= diff[k + 1]:
            if settings.refine_order:
                k = settle(lambda i: train_diff(sem[i], pos[i]), k, lambda v: v is not None and v > 0)
            s_anchor, p_anchor = sem[k], pos[k]
            dlo, dhi = train_diff(sem[k], pos[k]), train_diff(sem[k + 1], pos[k + 1])
            if dlo is None and dhi is not None and dhi <= 0:
                se = hist["alpha_c"][-1][2]
                notes.append(f"the refined training errors do not cross where both branches exist: the {sem_name} "
                             f"branch is already lower at alpha = {grid[k + 1]:g} (difference {dhi:.2g}"
                             + (f" +- {se:.1g}" if se is not None else "") + "), the lowest grid point where it "
                             "exists, so alpha_c (if any) lies between its spinodal and there")
                break
            if dlo is None or dhi is None or not dlo > 0 >= dhi:
                notes.append("the refined training errors do not cross on the coarse bracket")
                break

            def dfun(a: float, s_anchor: BranchPoint = s_anchor, p_anchor: BranchPoint = p_anchor) -> float | None:
                s = solve_at(a, sem_name, s_anchor)
                p = solve_at(a, "positional", p_anchor)
                return train_diff(s, p)

            alpha_c = _root(dfun, grid[k], grid[k + 1], dlo, dhi, xtol, noise=lambda: hist["alpha_c"][-1][2])
            break
    if alpha_c is None and len(notes) == n_notes:
        # (before, any earlier note, e.g. that the mixed branch is the semantic side at rank 2,
        # suppressed this one and a null alpha_c came without a reason)
        notes.append("no crossing of the training errors on the alpha grid")

    # global minimum test error vs the linear baseline
    def global_point(s: BranchPoint, p: BranchPoint) -> BranchPoint | None:
        cands = [b for b in (s, p) if b.exists]
        if len(cands) == 2 and abs(s.train_loss - p.train_loss) > GLOBAL_MARGIN * max(s.train_loss, p.train_loss):
            cands = [min(cands, key=lambda b: b.train_loss)]  # unambiguous on the coarse rule
        cands = [fine(b) for b in cands]
        return min(cands, key=lambda b: b.train_loss) if cands else None

    def gap_at(s: BranchPoint, p: BranchPoint) -> float | None:
        g = global_point(s, p)
        if g is None:
            return None
        hist["alpha_l"].append((s.alpha, g.test_error - eps_lin, _refined_se(g, "test_error")))
        return g.test_error - eps_lin

    gap = []
    for s, p in zip(sem, pos, strict=True):
        cands = [b for b in (s, p) if b.exists]
        gap.append(min(cands, key=lambda b: b.train_loss).test_error - eps_lin if cands else None)
    alpha_l = None
    # the smallest alpha above which the global-minimum test error stays below the baseline
    last_bad = max((k for k in range(len(grid)) if gap[k] is None or gap[k] >= 0), default=None)
    if last_bad is None:
        alpha_l = float(grid[0])
        notes.append("attention beats the linear baseline on the whole grid: alpha_l <= grid start")
    elif last_bad < len(grid) - 1 and gap[last_bad] is not None:
        k = last_bad
        if settings.refine_order:
            k = settle(lambda i: gap_at(sem[i], pos[i]), k, lambda v: v is not None and v >= 0)
        s_anchor, p_anchor = sem[k + 1], pos[k + 1]

        def gfun(a: float) -> float | None:
            s = solve_at(a, sem_name, s_anchor if s_anchor.exists else sem[k])
            p = solve_at(a, "positional", p_anchor if p_anchor.exists else pos[k])
            return gap_at(s, p)

        # a jump of the global minimum at alpha_c can make the gap change sign discontinuously
        glo, ghi = gap_at(sem[k], pos[k]), gap_at(sem[k + 1], pos[k + 1])
        if glo is None or ghi is None:
            glo, ghi = gap[k], gap[k + 1]
        alpha_l = _root(gfun, grid[k], grid[k + 1], glo, ghi, xtol, noise=lambda: hist["alpha_l"][-1][2])
    elif last_bad < len(grid) - 1:  # (no branch at grid[last_bad]: seen at lambda = 0, below alpha 1.2)
        notes.append(f"the global minimum beats the linear baseline from alpha = {grid[last_bad + 1]:g} on, but "
                     f"at alpha = {grid[last_bad]:g} neither the semantic nor the positional branch is found "
                     "(the trivial branch is not followed): alpha_l not located")
    else:
        notes.append("the global minimum does not beat the linear baseline on the grid")
    errors: dict[str, float | None] = {}
    if settings.refine_order and refined:
        errors = {"alpha_c": _root_error(hist["alpha_c"]) if alpha_c is not None else None,
                  "alpha_l": _root_error(hist["alpha_l"]) if alpha_l is not None else None}
        notes.append(f"alpha_c and alpha_l from points refined on {settings.refine_replicas} x "
                     f"{settings.method} rules of order {settings.refine_order} (errors: their standard error)")
        for name, val in (("alpha_c", alpha_c), ("alpha_l", alpha_l)):
            if val is not None and errors[name] is None:
                notes.append(f"no error estimate for {name}: fewer than two points near it refined "
                             "(see the branches' diagnostics)")
    grid_data = {
        "alpha": grid.tolist(),
        "semantic_train": [p.train_loss if p.exists else None for p in sem],
        "positional_train": [p.train_loss if p.exists else None for p in pos],
        "semantic_test": [p.test_error if p.exists else None for p in sem],
        "positional_test": [p.test_error if p.exists else None for p in pos],
    }
    return Transition(alpha_c, alpha_l, spin, eps_lin, tuple(notes), grid_data, errors)
