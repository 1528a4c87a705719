"""One point of a branch (:class:`BranchPoint`: the order parameters at one ``alpha``, docs/model.md
(5.1)), the branches a model has and where each starts, and a solved fixed point turned into a
point.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec, positional_axis
from attnphase.theory.channels import AttentionMap
from attnphase.theory.classification import MIXED, SPECIALISED, classify, combined_branch
from attnphase.theory.diagnostics import (
    HAT_KEYS,
    ErrorEstimate,
    ErrorTarget,
    FixedPointInfo,
    PointDiagnostics,
    QuadratureInfo,
    Refinement,
)
from attnphase.theory.fixed_point import (
    FixedPointResult,
)
from attnphase.theory.saddle import DataStep, OrderParams, Saddle

BRANCHES = ("semantic", "positional", "trivial")


def branches_for(spec: ModelSpec) -> tuple[str, ...]:
    """The branches the solver looks for: :data:`BRANCHES`, and :data:`MIXED` at student rank
    ``r >= 2`` (tied, causal or untied attention) or :data:`SPECIALISED` for several heads
    (docs/model.md (11.3))."""
    both = combined_branch(spec)
    return BRANCHES if both is None else (*BRANCHES, both)


def semantic_side(spec: ModelSpec) -> str:
    """The branch that plays the semantic role in transitions and curves: ``semantic``,
    ``mixed`` at rank ``r >= 2`` (see :func:`attnphase.theory.transition.find_transition`), or
    ``specialised`` for several heads (the one-head transition becomes one from positional to
    specialised, docs/model.md (11.3))."""
    return combined_branch(spec) or "semantic"


def start_point(spec: ModelSpec, branch: str, F: int) -> OrderParams:
    """The recommended start of ``branch`` (docs/model.md (5.1); paper convention), tuned at
    ``L = 2``, ``r = 1``, ``sigma = 0.5``, ``lambda = 0.01`` and generalised to any ``L, r, r*``;
    ``F`` fields per token.

    ``mixed`` (rank >= 2): the first student direction semantic, the second positional; for
    several heads ``specialised`` the same (head 1 semantic, head 2 positional, docs/model.md
    (11.3)) and ``semantic`` all heads semantic."""
    L, rs = spec.tokens, spec.teacher_rank
    G = spec.G_array
    pos = G @ positional_axis(spec)  # (G[:, 0]; cross-attention: docs/model.md (10.4))
    s2 = spec.sigma**2 / 0.25  # the starts were tuned at sigma = 0.5
    if branch in (MIXED, SPECIALISED) and F >= 2:
        # each block of fields (tied: Q; untied: Q and K): axis 0 semantic, the query's axis 1
        # positional (field index block * r + axis)
        r = AttentionMap.from_spec(spec).rank
        m = np.zeros((L, F))
        m[:, 1] = 0.2 * pos
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
    m[:, :spec.heads] = m0 * pos[:, None]  # (several heads: every head positional)
    theta = np.zeros((F, rs))
    for a in range(F):
        theta[a, a % rs] = t0 * s2
    return OrderParams(q, m, V0 * np.eye(F), theta)


#: the private fields of :class:`BranchPoint` that hold the solver's state
_SOLVER_STATE = ("_op", "_jacobian", "_data", "_fine")
#: the fields of :class:`BranchPoint` that :meth:`BranchPoint.to_dict` puts in its ``diagnostics``
_RECORDS = ("fixed_point", "refinement", "error_estimate", "error_target")


@dataclass(frozen=True)
class BranchPoint:
    """One fixed point of one branch at one ``alpha``, in user units (docs/model.md (1.5):
    ``q = Q.Q/d``, ``theta = Q*.Q/d``, ``m = pi_1.Q/d``; ``V`` in paper convention), with the
    training error ``train_loss`` ((4.1)) and the test error ``test_error`` ((4.2)). Matrices for
    ``r > 1`` are in ``q_matrix`` etc. ``exists``: the solve converged on this branch (``reason``
    says why not otherwise); ``fixed_point``, ``refinement``, ``error_estimate`` and
    ``error_target``: how the fixed point was solved, carried to the fine rules, its
    integration-error estimate and the error target's raise of the refinement order
    (:mod:`~attnphase.theory.diagnostics`; ``None`` where there was none); ``diagnostics``: the
    notes of the branch's solve and continuation (``direct_start``, ``ends``, ...). :meth:`record`
    is all of it as the JSON of ``attnphase solve --json``. Built complete: it is never changed after
    construction."""

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
    fixed_point: FixedPointInfo | None = None
    refinement: Refinement | None = None
    error_estimate: ErrorEstimate | None = None
    error_target: ErrorTarget | None = None
    # The solver's state at the point, kept for warm starts of nearby solves (not part of the
    # result: left out of repr, comparisons and to_dict).
    #: the order parameters in paper convention
    _op: OrderParams | None = field(default=None, repr=False, compare=False)
    #: Jacobian of the fixed-point residual at the solution (relative units)
    _jacobian: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: the data step at the solution (its minimisers warm-start a nearby solve on the same rule)
    _data: DataStep | None = field(default=None, repr=False, compare=False)
    #: a refined point's fine rules: ``(union saddle, number of rules, its full data step at the
    #: point)``, whose minima a refinement from here to finer rules of the same scrambles reuses
    #: (:func:`attnphase.theory.fine_rules.nested_first`)
    _fine: tuple[Saddle, int, DataStep] | None = field(default=None, repr=False, compare=False)

    @property
    def converged_to(self) -> str | None:
        """The branch the fixed-point solve converged to (:func:`classify`; ``None`` where it did not
        converge or was not recorded): another branch than ``branch`` where the start went
        elsewhere."""
        return self.fixed_point.classified_as if self.converged and self.fixed_point is not None else None

    @property
    def order_params(self) -> OrderParams | None:
        """The fixed point's order parameters in paper convention (``None`` where the branch is absent)."""
        return self._op

    def record(self) -> dict[str, Any]:
        """The solver's record of the point: the fixed point's keys, ``diagnostics`` and the other
        typed records as JSON under ``refined``, ``error_estimate`` and ``target`` (where the point
        has them)."""
        return PointDiagnostics(self.fixed_point, self.refinement, self.error_estimate, self.error_target,
                                self.diagnostics).to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The point's fields as :func:`dataclasses.asdict` gives them, without the solver's state,
        the typed records in ``diagnostics`` (:meth:`record`)."""
        d = asdict(replace(self, _op=None, _jacobian=None, _data=None, _fine=None, diagnostics={},
                           fixed_point=None, refinement=None, error_estimate=None, error_target=None))
        for key in (*_SOLVER_STATE, *_RECORDS):
            del d[key]
        d["diagnostics"] = self.record()
        return d

    def summary(self) -> dict[str, Any]:
        """The fields of the CLI JSON schema."""
        keys = ("q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations")
        return {k: getattr(self, k) for k in keys}


#: product Gauss-Hermite order of the test error of a point that is an intermediate result (a
#: coarse point about to be refined, a step of a continuation ramp): at dimension 6 the default
#: order 10 (10^6 nodes, ~0.9 s) cost 10-15 % of a rank-2 solve; order 6 (~0.04 s) is within
#: ~2e-3 (relative) and is replaced by the default-order value wherever such a point is returned
DRAFT_TEST_ORDER = 6


def to_point(spec: ModelSpec, alpha: float, branch: str, sd: Saddle, res: FixedPointResult,
             draft: bool = False) -> BranchPoint:
    """The :class:`BranchPoint` of a fixed-point solve ``res`` on the rule of ``sd``, started on
    ``branch``: it exists if the solve converged and the fixed point is classified as that branch
    (:func:`classify`). ``draft``: the test error on the cheap ``DRAFT_TEST_ORDER`` rule."""
    op = res.op
    s2 = sd.s2
    found = classify(op, float(np.sqrt(s2)), combined_branch(spec))
    exists = res.converged and found == branch
    if not res.converged:
        reason = f"solver did not converge: {res.reason} (last relative change {res.residual:.2e})"
    elif found != branch:
        reason = f"the {branch} start converged to the {found} branch: no {branch} fixed point here"
    else:
        reason = "ok"
    train = -sd.free_energy(op, res.data)
    test = sd.test_error(op, order=DRAFT_TEST_ORDER, log2_n=DRAFT_TEST_LOG2) if draft else sd.test_error(op)
    info = FixedPointInfo(
        residual=res.residual, seconds=res.seconds, solver_reason=res.reason,
        quadrature=QuadratureInfo(sd.rule.method, sd.rule.order, sd.rule.size),
        prox_max_grad=float(np.max(res.data.prox.grad_norm)), classified_as=found,
        hats={k: getattr(res.data.hats, k).tolist() for k in HAT_KEYS},
    )
    return BranchPoint(
        branch=branch,
        alpha=float(alpha),
        exists=bool(exists),
        reason=reason,
        train_loss=float(train),
        test_error=float(test),
        converged=bool(res.converged),
        iterations=int(res.iterations),
        diagnostics={"draft_test_error": True} if draft else {},
        fixed_point=info,
        _jacobian=res.jacobian,
        _data=res.data,
        **overlap_fields(sd, op),
    )


def overlap_fields(sd: Saddle, op: OrderParams) -> dict[str, Any]:
    """The :class:`BranchPoint` fields that come from the order parameters (user units)."""
    qu, mu, tu = sd.user_units(op)
    q, m, theta = sd.user_scalars(op)
    return {"q": float(q), "m": float(m), "theta": float(theta), "V": float(op.V[0, 0]),
            "q_matrix": tuple(map(tuple, qu.tolist())), "m_matrix": tuple(map(tuple, mu.tolist())),
            "theta_matrix": tuple(map(tuple, tu.tolist())), "_op": op}


#: log2 of the Sobol base sample of a draft's test error above 6 dimensions (``Saddle.test_rule``)
DRAFT_TEST_LOG2 = 11
