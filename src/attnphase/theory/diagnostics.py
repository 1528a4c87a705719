"""The solver's diagnostics as frozen typed records: how the fixed point was solved
(:class:`FixedPointInfo`, docs/model.md (7.2)), how it was refined (:class:`Refinement`,
(7.3)), its integration-error estimate (:class:`ErrorEstimate`) and how the error target was
pursued (:class:`ErrorTarget`, (7.5)).

A :class:`~attnphase.theory.branch_point.BranchPoint` carries them as ``fixed_point``,
``refinement``, ``error_estimate`` and ``error_target`` (``None`` where there is none). Each
record's ``to_dict()`` is the JSON that ``attnphase solve --json`` prints in a branch's
``diagnostics`` (the fixed point's keys at the top, then ``refined``, ``error_estimate``,
``target``; a field without a value is left out), and ``from_dict`` reads that JSON back;
:class:`PointDiagnostics` is the whole of a branch's ``diagnostics`` (the records and the other
notes), read back from a record or a stored ``theory`` point with its ``from_dict``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from attnphase.results_records import ReadOnlyDict

__all__ = ["ErrorEstimate", "ErrorTarget", "FixedPointInfo", "PointDiagnostics", "QuadratureInfo", "Refinement",
           "TargetStep"]


def _floats(values: Mapping[str, Any]) -> ReadOnlyDict:
    """A read-only copy of ``values`` as numbers: integers kept (an order), the rest floats
    (``None``, JSON's NaN, read back as NaN)."""
    return ReadOnlyDict({str(k): math.nan if v is None else (v if isinstance(v, int) and not isinstance(v, bool)
                                                               else float(v)) for k, v in values.items()})


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """``d`` as keyword arguments of the dataclass ``cls``; a key that is not a field is a
    ``ValueError``."""
    names = {f.name for f in fields(cls)}
    extra = sorted(set(d) - names)
    if extra:
        raise ValueError(f"{cls.__name__}: unknown keys {', '.join(extra)}; expected some of {', '.join(sorted(names))}")
    return dict(d)


def _set_fields(record: Any) -> dict[str, Any]:
    """The fields of the dataclass ``record`` that have a value (not ``None``), in field order."""
    out: dict[str, Any] = {}
    for f in fields(record):
        v = getattr(record, f.name)
        if v is not None:
            out[f.name] = dict(v) if isinstance(v, Mapping) else (list(v) if isinstance(v, tuple) else v)
    return out


@dataclass(frozen=True)
class QuadratureInfo:
    """The integration rule a fixed point was solved on: its method (``qmc``, ``gh``), order and
    number of nodes."""

    method: str
    order: int
    nodes: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON under ``diagnostics["quadrature"]``."""
        return {"method": self.method, "order": self.order, "nodes": self.nodes}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuadratureInfo:
        """The record of :meth:`to_dict`."""
        return cls(**_known(cls, d))


#: the conjugate (hat) order parameters of :class:`FixedPointInfo`, in the order of the JSON
HAT_KEYS = ("V_hat", "q_hat", "m_hat", "theta_hat")


@dataclass(frozen=True)
class FixedPointInfo:
    """How the fixed point on the solver's rule was solved
    (:func:`attnphase.theory.fixed_point.solve_fixed_point`, docs/model.md (7.2)): the keys at
    the top of a branch's ``diagnostics``. The iterations and whether it converged are the
    point's own fields (``BranchPoint.iterations``, ``converged``).

    ``residual``: the last relative change; ``seconds``: the solve's wall time;
    ``solver_reason``: how it stopped; ``quadrature``: the rule; ``prox_max_grad``: the largest
    gradient norm left by the proximal minimiser over the nodes; ``classified_as``: the branch
    the fixed point was found to be on (:func:`attnphase.theory.classification.classify`);
    ``hats``: the conjugate order parameters (``V_hat``, ``q_hat``, ``m_hat``, ``theta_hat``,
    paper convention) at the fixed point, as nested lists.
    """

    residual: float
    seconds: float
    solver_reason: str
    quadrature: QuadratureInfo
    prox_max_grad: float
    classified_as: str
    hats: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.hats is not None and not isinstance(self.hats, ReadOnlyDict):
            object.__setattr__(self, "hats", ReadOnlyDict(self.hats))

    def to_dict(self) -> dict[str, Any]:
        """The JSON keys at the top of a branch's ``diagnostics``."""
        return {"residual": self.residual, "seconds": self.seconds, "solver_reason": self.solver_reason,
                "quadrature": self.quadrature.to_dict(), "prox_max_grad": self.prox_max_grad,
                "classified_as": self.classified_as, **(self.hats or {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FixedPointInfo:
        """The record of :meth:`to_dict` (read from a branch's whole ``diagnostics``: the keys
        of the other records are left aside)."""
        try:
            hats = {k: d[k] for k in HAT_KEYS if k in d}
            return cls(residual=float(d["residual"]), seconds=float(d["seconds"]),
                       solver_reason=str(d["solver_reason"]), quadrature=QuadratureInfo.from_dict(d["quadrature"]),
                       prox_max_grad=float(d["prox_max_grad"]), classified_as=str(d["classified_as"]),
                       hats=hats or None)
        except KeyError as e:
            raise ValueError(f"a fixed point's diagnostics need {e.args[0]!r}") from None


@dataclass(frozen=True)
class Refinement:
    """How a point was carried from the solver's (coarse) rule to the fine rules
    (:func:`attnphase.theory.refinement.refine_point`, docs/model.md (7.3)): the JSON under
    ``diagnostics["refined"]``.

    ``applied``: the refinement converged on the point's branch, and the point's values are the
    fine rules'; otherwise they are the coarse rule's and ``reason`` says why. A field without a
    value (``None``) did not arise in this refinement.
    """

    #: the fine rules: their method, refinement order, number of scrambles (``replicas``), nodes
    #: of their union, the teacher scale and whether they are mirrored
    method: str | None = None
    order: int | None = None
    replicas: int | None = None
    nodes: int | None = None
    teacher_scale: float | None = None
    mirror: bool | None = None
    #: the coarse point's values (``train_loss``, ``test_error``, ``q``, ``m``, ``theta``; and
    #: ``test_error_order`` where its test error was a draft's)
    coarse: Mapping[str, float] | None = None
    #: what the full-solver fallback did, where the quasi-Newton stages failed
    fallback: str | None = None
    #: the largest relative step from the coarse point, the fine data steps, how the fine solve
    #: stopped and its last relative change
    step: float | None = None
    evaluations: int | None = None
    solver_reason: str | None = None
    residual: float | None = None
    applied: bool = False
    #: why the refinement was not applied
    reason: str | None = None
    #: the branch the fine solve converged to where it left the point's branch
    left_to: str | None = None
    #: why the fine rules' own fixed points do not resolve the branch
    unresolved: str | None = None
    #: where a fine solve that did not converge stopped (``q``, ``m``, ``theta``, user units)
    stopped_at: Mapping[str, float] | None = None
    #: each fine rule's own fixed-point solve, in words
    rule_solves: tuple[str, ...] | None = None
    #: standard errors over the fine rules: absolute for ``train_loss`` and ``test_error``,
    #: relative for the order parameters
    errors: Mapping[str, float] | None = None
    #: what the second try of a single solve did (continued from elsewhere on a finer rule)
    retry: str | None = None

    def __post_init__(self) -> None:
        for name in ("coarse", "stopped_at", "errors"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, ReadOnlyDict):
                object.__setattr__(self, name, _floats(v))
        if self.rule_solves is not None and not isinstance(self.rule_solves, tuple):
            object.__setattr__(self, "rule_solves", tuple(self.rule_solves))

    def error(self, key: str) -> float | None:
        """The standard error of ``key`` over the fine rules (``None``: none was computed)."""
        return None if self.errors is None else self.errors.get(key)

    def with_(self, **changes: Any) -> Refinement:
        """A copy with ``changes``."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON under a branch's ``diagnostics["refined"]``."""
        return _set_fields(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Refinement:
        """The record of :meth:`to_dict` (unknown keys: ``ValueError``)."""
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class ErrorEstimate:
    """The estimated relative integration error of a point's values (docs/model.md (7.3)):
    ``relative`` holds one per order parameter (``q``, ``m[0]``, ``V``, ...), ``test_error``,
    ``train_loss`` and the summary overlaps ``q_user``, ``m_user``, ``theta_user``; ``method``
    says how it was obtained (the standard error over the refinement's fine rules, or linear
    response on the solver's rule). The JSON under ``diagnostics["error_estimate"]`` is
    ``relative`` with ``method`` beside it."""

    relative: Mapping[str, float]
    method: str

    def __post_init__(self) -> None:
        if not isinstance(self.relative, ReadOnlyDict):
            object.__setattr__(self, "relative", _floats(self.relative))

    @property
    def linear_response(self) -> bool:
        """Whether the estimate is a linear response (one Newton step per rule with a shared
        Jacobian) rather than a standard error over the rules' own fixed points: off by up to 9x
        where that Jacobian is poor, so it is reported but never meets an error target
        (:func:`attnphase.theory.target.target_estimate`)."""
        return self.method.startswith("linear response")

    def get(self, key: str) -> float | None:
        """The relative error of ``key`` (``None``: not estimated)."""
        return self.relative.get(key)

    def largest(self, keys: Iterable[str]) -> float:
        """The largest relative error among ``keys``; ``inf`` where one of them was not estimated."""
        vals = [self.relative.get(k) for k in keys]
        if any(v is None for v in vals):
            return math.inf
        return float(max(v for v in vals if v is not None))

    def to_dict(self) -> dict[str, Any]:
        """The JSON under a branch's ``diagnostics["error_estimate"]``."""
        return {**self.relative, "method": self.method}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorEstimate:
        """The record of :meth:`to_dict` (``method`` missing: ``ValueError``)."""
        if "method" not in d:
            raise ValueError("an error estimate needs its 'method'")
        return cls({k: v for k, v in d.items() if k != "method"}, str(d["method"]))


@dataclass(frozen=True)
class TargetStep:
    """One refinement order tried on the way to the error target: the order, the targeted
    estimate (the largest relative error among the quantities the target is on; ``inf`` where
    the refinement failed), the test error's estimate, the nodes of the fine rules, the seconds
    it took (``None`` for the first, the single solve's own refinement) and why it failed."""

    order: int
    estimate: float
    test_error_estimate: float
    nodes: int | None = None
    seconds: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one entry of ``diagnostics["target"]["history"]`` (``inf`` prints as
        ``null``)."""
        out: dict[str, Any] = {"order": self.order, "estimate": self.estimate,
                               "test_error_estimate": self.test_error_estimate, "nodes": self.nodes}
        if self.seconds is not None:
            out["seconds"] = self.seconds
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TargetStep:
        """The record of :meth:`to_dict` (a ``null`` estimate: ``inf``)."""
        kw = _known(cls, d)
        for k in ("estimate", "test_error_estimate"):
            kw[k] = math.inf if kw.get(k) is None else float(kw[k])
        return cls(**kw)


@dataclass(frozen=True)
class ErrorTarget:
    """How a single solve raised its refinement order towards the error target
    (:func:`attnphase.theory.target.solve_refined`, docs/model.md (7.5)): the JSON under
    ``diagnostics["target"]``.

    ``target_error``: the target; ``target_on``: which estimates it applies to
    (``settings.target_on``; JSON key ``on``); ``met``: whether the last kept estimate is within
    it; ``order``: the refinement order of the point returned; ``history``: every order tried.
    """

    target_error: float
    target_on: str
    met: bool
    order: int
    history: tuple[TargetStep, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.history, tuple):
            object.__setattr__(self, "history", tuple(self.history))

    @property
    def orders(self) -> tuple[int, ...]:
        """The refinement orders tried, in turn."""
        return tuple(h.order for h in self.history)

    @property
    def estimate(self) -> float:
        """The targeted estimate of the point returned (its order's last entry in ``history``)."""
        return next(h.estimate for h in reversed(self.history) if h.order == self.order)

    def to_dict(self) -> dict[str, Any]:
        """The JSON under a branch's ``diagnostics["target"]``."""
        return {"target_error": self.target_error, "on": self.target_on, "met": self.met, "order": self.order,
                "history": [h.to_dict() for h in self.history]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorTarget:
        """The record of :meth:`to_dict`."""
        try:
            return cls(target_error=float(d["target_error"]), target_on=str(d["on"]), met=bool(d["met"]),
                       order=int(d["order"]), history=tuple(TargetStep.from_dict(h) for h in d["history"]))
        except KeyError as e:
            raise ValueError(f"an error target needs {e.args[0]!r}") from None


#: the keys of a branch's ``diagnostics`` JSON that :class:`FixedPointInfo` holds
FIXED_POINT_KEYS = ("residual", "seconds", "solver_reason", "quadrature", "prox_max_grad", "classified_as", *HAT_KEYS)


@dataclass(frozen=True)
class PointDiagnostics:
    """All of a point's diagnostics: the typed records and ``notes``, the other entries of its
    ``diagnostics`` JSON (why it has its values: ``reason``, ``direct_start``, ``ends``,
    ``continued_below``, ...). :meth:`to_dict` is that JSON (a branch's entry under
    ``diagnostics`` in ``attnphase solve --json``, a stored ``theory`` point's diagnostics);
    :meth:`from_dict` splits it back into the records."""

    fixed_point: FixedPointInfo | None = None
    refinement: Refinement | None = None
    error_estimate: ErrorEstimate | None = None
    error_target: ErrorTarget | None = None
    notes: Mapping[str, Any] = field(default_factory=ReadOnlyDict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON: the fixed point's keys, the notes, then ``refined``, ``error_estimate`` and
        ``target`` where the point has them."""
        typed = (("refined", self.refinement), ("error_estimate", self.error_estimate), ("target", self.error_target))
        return {**({} if self.fixed_point is None else self.fixed_point.to_dict()), **self.notes,
                **{k: r.to_dict() for k, r in typed if r is not None}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PointDiagnostics:
        """The records of a ``diagnostics`` JSON (a point that did not reach a fixed-point solve
        has no ``residual``: no ``fixed_point`` then)."""
        typed = {"refined", "error_estimate", "target"}
        has_fp = "residual" in d
        return cls(
            fixed_point=FixedPointInfo.from_dict(d) if has_fp else None,
            refinement=None if d.get("refined") is None else Refinement.from_dict(d["refined"]),
            error_estimate=None if d.get("error_estimate") is None else ErrorEstimate.from_dict(d["error_estimate"]),
            error_target=None if d.get("target") is None else ErrorTarget.from_dict(d["target"]),
            notes=ReadOnlyDict({k: v for k, v in d.items()
                                if k not in typed and not (has_fp and k in FIXED_POINT_KEYS)}))
