"""What :func:`attnphase.solve`, :func:`attnphase.transition` and :func:`attnphase.simulate` return.

Frozen records in the style of ``scipy.optimize.OptimizeResult``: the quantities as fields, a
``success`` flag, a ``message`` a person can read, a short ``repr`` (the headline numbers and the
status) and ``to_dict()``, the JSON record that the matching ``attnphase ... --json`` command
prints. Nested records are read-only dicts (:class:`ReadOnlyDict`: a ``dict`` that prints as one
and refuses changes) and tuples, and nothing is filled in after construction; the solver's caches
(warm starts, Jacobians, the fine rules) stay on the internal ``BranchPoint``.

Every field a recipe reads exists on every result: where a quantity could not be computed it is
NaN and a flag says so (``BranchResult.error_estimate`` always holds the keys of
:data:`ERROR_ESTIMATE_KEYS`, NaN where no estimate was made, and ``BranchResult.estimated`` says
whether one was).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from attnphase._json import jsonable
from attnphase._revision import numerics_revision
from attnphase.results_bayes import BAYES_NOISY_OVERLAP_TARGET as BAYES_NOISY_OVERLAP_TARGET
from attnphase.results_bayes import BAYES_OVERLAP_TARGET as BAYES_OVERLAP_TARGET
from attnphase.results_bayes import BayesResult
from attnphase.results_records import WALL_TIME_KEYS as WALL_TIME_KEYS
from attnphase.results_records import (
    ReadOnlyDict,
    RecordComparison,
    compare_records,
    fmt_g,
    frozen,
    one_line,
)
from attnphase.results_simulation import SimulationResult
from attnphase.spec.problem import ModelSpec

if TYPE_CHECKING:

    from attnphase.theory import BranchPoint, SolverSettings
    from attnphase.theory.diagnostics import ErrorEstimate, ErrorTarget, FixedPointInfo, Refinement

__all__ = ["ERROR_ESTIMATE_KEYS", "BayesResult", "BranchResult", "ReadOnlyDict", "RecordComparison",
           "SimulationResult", "SolveResult", "TransitionResult", "compare_records"]


#: the per-branch values of ``attnphase solve --json`` (``BranchPoint.summary()``), in its order
SUMMARY_KEYS = ("q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations")

#: the relative error estimates that ``BranchResult.error_estimate`` holds on every point (NaN where
#: none was made), beside those of the order parameters (``q``, ``m[0]``, ``V``, ...) and ``method``
ERROR_ESTIMATE_KEYS = ("test_error", "train_loss", "q_user", "m_user", "theta_user")


def error_estimate_record(est: Mapping[str, Any] | None, names: Sequence[str]) -> ReadOnlyDict:
    """The solver's error estimate ``est`` (``None``: none was made) with every key of
    :data:`ERROR_ESTIMATE_KEYS` and of the order parameters ``names``, NaN where it has no value,
    and ``method``, how it was obtained (``"none"`` where no estimate was made)."""
    out: dict[str, Any] = {k: math.nan for k in (*ERROR_ESTIMATE_KEYS, *names)}
    out["method"] = "none"
    if est is not None:
        out.update({k: math.nan if v is None else v for k, v in est.items()})
    return frozen(out)  # type: ignore[no-any-return]


def _kept_coarse(refinement: Refinement | None) -> bool:
    """A point kept on the coarse rule: its refinement was tried and did not converge."""
    return refinement is not None and not refinement.applied


@dataclass(frozen=True, repr=False)
class BranchResult:
    """One fixed point of the self-consistent equations at one ``alpha`` (docs/model.md (5.1)).

    Attributes
    ----------
    branch : str
        The branch: semantic, positional, trivial or mixed.
    alpha : float
        The sample complexity.
    q : float
        The summary self overlap in user units (docs/model.md (1.5)): at rank ``r >= 2`` the
        invariant ``tr q``, the full matrix in ``q_matrix``.
    m : float
        The summary positional overlap: at rank ``r >= 2`` the norm ``|m_1|`` of the first
        position's overlaps, the full matrix in ``m_matrix``.
    theta : float
        The summary semantic overlap: at rank ``r >= 2`` its Frobenius norm, the full matrix in
        ``theta_matrix``.
    V : float
        The variance (paper convention).
    train_loss : float
        The training error ``eps_t = -Phi`` (docs/model.md (4.1)).
    test_error : float
        ``eps_g`` (docs/model.md (4.2)).
    converged : bool
        The fixed-point iteration converged (docs/model.md (7.2)).
    iterations : int
        Its iterations.
    error_estimate : mapping
        The estimated relative integration error of each quantity (docs/model.md (7.3);
        ``q_user``, ``m_user``, ``theta_user`` for the summary overlaps) and how it was obtained
        (``method``): always the keys of :data:`ERROR_ESTIMATE_KEYS` and of the order parameters,
        NaN where no estimate was made (a refinement that did not converge; ``estimated`` is then
        false, and ``method`` is ``"none"``).
    refined : bool
        The point was carried to the fine rules (else it is the coarse rule's, see ``notes``).
    target_met : bool or None
        Whether the error target (docs/model.md (7.5)) was met (``None``: no target).
    notes : tuple of str
        What the ``solve`` command prints under the table for this branch.
    q_matrix : tuple of tuple of float
        The self overlap in full, user units.
    m_matrix : tuple of tuple of float
        The positional overlaps in full, one row per position, user units.
    theta_matrix : tuple of tuple of float
        The semantic overlap in full, user units.
    diagnostics : mapping
        The solver's record (convergence, rules, the refinement and the target's history) as
        ``attnphase solve --json`` prints it.
    fixed_point : FixedPointInfo or None
        How the fixed point was solved on the solver's rule (residual, rule, classification).
    refinement : Refinement or None
        How the point was carried to the fine rules (``None``: no refinement was tried).
    error_target : ErrorTarget or None
        How the refinement order was raised towards the error target (``None``: no target).
    """

    branch: str
    alpha: float
    q: float
    m: float
    theta: float
    V: float
    train_loss: float
    test_error: float
    converged: bool
    iterations: int
    error_estimate: Mapping[str, Any]
    refined: bool
    target_met: bool | None
    notes: tuple[str, ...]
    q_matrix: tuple[tuple[float, ...], ...]
    m_matrix: tuple[tuple[float, ...], ...]
    theta_matrix: tuple[tuple[float, ...], ...]
    diagnostics: Mapping[str, Any] = field(repr=False)
    #: the value gain ``v`` of ``value = "gain"`` (docs/model.md (6.5)): the one the training error
    #: is minimised at (``value_gain`` unset) or the one held fixed; ``None`` for other values
    gain: float | None = None
    #: the optimal gain's error estimate (the fine rules' scatter and the offset of their stationary
    #: gain, ``attnphase.theory.value.solve_gain``; ``nan`` on the coarse rule only, ``None``
    #: for a fixed gain)
    gain_error: float | None = None
    #: several heads with ``head_gains = "trained"``: the gains ``v_h`` the training error is
    #: minimised at (docs/model.md (11.4)); ``None`` otherwise
    head_gains: tuple[float, ...] | None = None
    #: their error estimates (``attnphase.theory.head_gains.solve_head_gains``)
    head_gains_error: tuple[float, ...] | None = None
    #: Gaussian-mixture tokens: ``s_k = mu_k^T Q / d`` (K x F, docs/model.md (9.1)); empty otherwise
    s_matrix: tuple[tuple[float, ...], ...] = ()
    #: an error estimate was made (``error_estimate`` holds numbers; else NaN, and its ``method``
    #: says why not where one was tried)
    estimated: bool = False
    fixed_point: FixedPointInfo | None = field(default=None, repr=False)
    refinement: Refinement | None = field(default=None, repr=False)
    error_target: ErrorTarget | None = field(default=None, repr=False)
    #: the solver's error estimate as it made it (``None``: none was made)
    estimate: ErrorEstimate | None = field(default=None, repr=False)

    @classmethod
    def from_point(cls, point: BranchPoint) -> BranchResult:
        """The user's view of an existing branch point (without its solver caches)."""
        ref, tgt, est = point.refinement, point.error_target, point.error_estimate
        notes = []
        if tgt is not None and (not tgt.met or len(tgt.history) > 1):
            last = tgt.history[-1]
            what = {"test_error": "test-error", "overlaps": "overlap", "all": "test-error and overlap"}[tgt.target_on]
            notes.append(f"{what} target {tgt.target_error:g} {'met' if tgt.met else 'NOT met'} "
                         f"(refinement order {tgt.order}; last estimate {last.estimate:.1e} at order "
                         f"{last.order})")
        if ref is not None and _kept_coarse(ref):
            nodes = None if point.fixed_point is None else point.fixed_point.quadrature.nodes
            notes.append(f"{ref.reason}; the values are those of the coarse rule ({nodes} nodes)")
        elif ref is not None and ref.retry:
            notes.append(ref.retry)
        summary = point.summary()
        names = point.order_params.names() if point.order_params is not None else ()
        return cls(
            branch=point.branch, alpha=float(point.alpha), **{k: summary[k] for k in SUMMARY_KEYS},
            error_estimate=error_estimate_record(None if est is None else est.to_dict(), names),
            estimated=est is not None and bool(est.relative), refined=ref is not None and ref.applied,
            target_met=None if tgt is None else tgt.met, notes=tuple(notes),
            q_matrix=frozen(point.q_matrix), m_matrix=frozen(point.m_matrix),
            theta_matrix=frozen(point.theta_matrix),
            diagnostics=frozen({"reason": point.reason, **point.record()}),
            fixed_point=point.fixed_point, refinement=ref, error_target=tgt, estimate=est,
            s_matrix=() if point.order_params is None else
            frozen(point.order_params.m[len(point.m_matrix):].tolist()),
        )

    @property
    def overlap_error(self) -> float | None:
        """The largest relative error estimate of ``q``, ``m``, ``theta`` (``None``: no estimate)."""
        if not self.estimated:
            return None
        est = self.error_estimate
        return max(float(est[k]) for k in ("q_user", "m_user", "theta_user"))

    def status(self) -> str:
        """How the point was obtained, in a few words: convergence, refinement, error estimate."""
        parts = [f"converged ({self.iterations} it)" if self.converged else f"NOT converged ({self.iterations} it)",
                 "refined" if self.refined else ("coarse rule only" if self.coarse_only else "coarse rule")]
        err = self.overlap_error
        parts.append("no error estimate" if err is None else f"error est. {err:.1e}")
        if self.target_met is not None:
            parts.append("target met" if self.target_met else "target NOT met")
        return ", ".join(parts)

    def __repr__(self) -> str:
        gain = "" if self.gain is None else f", gain = {fmt_g(self.gain)}"
        if self.head_gains is not None:
            gain += ", head gains = " + ", ".join(fmt_g(v) for v in self.head_gains)
        return (f"BranchResult({self.branch!r}, alpha={self.alpha:g})\n"
                f"  q = {fmt_g(self.q)}, m = {fmt_g(self.m)}, theta = {fmt_g(self.theta)}, V = {fmt_g(self.V)}{gain}\n"
                f"  train_loss = {fmt_g(self.train_loss)}, test_error = {fmt_g(self.test_error)}\n"
                f"  status: {self.status()}")

    @property
    def coarse_only(self) -> bool:
        """The refinement was tried and did not converge: the values are the coarse rule's."""
        return _kept_coarse(self.refinement)

    def to_dict(self) -> dict[str, Any]:
        """The branch's entry under ``branches`` in ``attnphase solve --json`` (with ``gain`` and
        ``gain_error`` for the value gain, ``head_gains`` and ``head_gains_error`` for trained head
        gains, ``s`` for Gaussian-mixture tokens)."""
        gain: dict[str, Any] = {} if self.gain is None else {"gain": self.gain, "gain_error": self.gain_error}
        if self.head_gains is not None:
            gain.update(head_gains=list(self.head_gains), head_gains_error=list(self.head_gains_error or ()))
        # (the solver's estimate as it made it, ``null`` where none was made)
        est = None if self.estimate is None else self.estimate.to_dict()
        return jsonable({**{k: getattr(self, k) for k in SUMMARY_KEYS}, "error_estimate": est,
                         **gain, **({"s": self.s_matrix} if self.s_matrix else {})})


@dataclass(frozen=True, repr=False)
class SolveResult:
    """The fixed points at one ``alpha`` (:func:`attnphase.solve`).

    Attributes
    ----------
    alpha : float
        The sample complexity.
    spec : ModelSpec
        The model.
    settings : SolverSettings
        The solver's settings.
    branches : mapping
        Each requested branch's :class:`BranchResult`, ``None`` where it has no fixed point (the
        reason in ``absent``).
    absent : mapping
        Why each branch without a fixed point has none.
    global_minimum : str or None
        The existing branch of lowest training error among those solved (the global minimum where
        every branch was solved, ``branch="all"``; docs/model.md (4.1), (5.1)), ``None`` if none
        exists.
    linear_test_error : float
        The dense linear positional baseline (docs/model.md (4.3)).
    params : mapping
        The model, ``alpha``, the solver settings, the version and the kernels that ran.
    diagnostics : mapping
        Each branch's solver record.
    success : bool
        Some branch exists, and every existing one converged, was refined and met the error
        target (where one was set).
    message : str
        What was found, in one line a person can read.
    """

    alpha: float
    spec: ModelSpec
    settings: SolverSettings
    branches: Mapping[str, BranchResult | None]
    absent: Mapping[str, str]
    global_minimum: str | None
    linear_test_error: float
    params: Mapping[str, Any] = field(repr=False)
    diagnostics: Mapping[str, Mapping[str, Any]] = field(repr=False)
    success: bool
    message: str
    #: trained head gains whose search lets a head fall idle (docs/model.md (11.4)): the student at
    #: that head's gain 0, one head fewer at its optimal value gain (branch, training and test
    #: error, gain), and whether it lies below every branch with all heads active (the training
    #: error over the gains is then at most its); ``None`` otherwise
    idle_limit: Mapping[str, Any] | None = None

    @classmethod
    def from_points(cls, spec: ModelSpec, alpha: float, settings: SolverSettings,
                    points: Mapping[str, BranchPoint], linear_test_error: float,
                    params: Mapping[str, Any]) -> SolveResult:
        """Gather the solved points of :func:`attnphase.solve`."""
        branches = {b: BranchResult.from_point(p) if p.exists else None for b, p in points.items()}
        absent = {b: p.reason for b, p in points.items() if not p.exists}
        existing = {b: r for b, r in branches.items() if r is not None}
        glob = min(existing, key=lambda b: existing[b].train_loss) if existing else None
        ok = {b: r.converged and r.refined == bool(settings.refine_order) and r.target_met is not False
              for b, r in existing.items()}
        parts = [f"alpha = {alpha:g}: " + (f"{', '.join(existing)} found; global minimum {glob}"
                                           if existing else "no fixed point found")]
        parts += [f"no {b} fixed point: {why}" for b, why in absent.items()]
        if existing and settings.target_error:
            missed = [b for b, r in existing.items() if r.target_met is False]
            parts.append(f"error target {settings.target_error:g} on {settings.target_on} "
                         + (f"NOT met on {', '.join(missed)}" if missed else "met"))
        parts += [f"{b}: {n}" for b, r in existing.items() for n in r.notes]
        return cls(
            alpha=float(alpha), spec=spec, settings=settings, branches=ReadOnlyDict(branches),
            absent=ReadOnlyDict(absent), global_minimum=glob, linear_test_error=float(linear_test_error),
            params=frozen(params),
            diagnostics=ReadOnlyDict({b: frozen({"reason": p.reason, **p.record()}) for b, p in points.items()}),
            success=bool(existing) and all(ok.values()), message="; ".join(parts),
        )

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase solve --json`` prints."""
        return {
            "params": jsonable(self.params),
            "branches": {b: None if r is None else r.to_dict() for b, r in self.branches.items()},
            "global_minimum": self.global_minimum,
            "linear_test_error": jsonable(self.linear_test_error),
            "diagnostics": jsonable(self.diagnostics),
            "success": self.success,
            "message": self.message,
            **({"idle_limit": jsonable(self.idle_limit)} if self.idle_limit is not None else {}),
        }

    def __repr__(self) -> str:
        rows = [f"SolveResult(alpha={self.alpha:g}, omega={self.spec.omega:g}, success={self.success})",
                f"  message: {one_line(self.message)}",
                f"  global_minimum: {self.global_minimum}, linear_test_error = {fmt_g(self.linear_test_error)}"]
        for b, r in self.branches.items():
            if r is None:
                rows.append(f"  {b}: absent ({one_line(self.absent.get(b, ''), 120)})")
            else:
                rows.append(f"  {b}: q = {fmt_g(r.q, '.5g')}, m = {fmt_g(r.m, '.5g')}, theta = {fmt_g(r.theta, '.5g')}, "
                            f"train_loss = {fmt_g(r.train_loss, '.6g')}, test_error = {fmt_g(r.test_error, '.6g')}; "
                            f"{r.status()}")
        return "\n".join(rows)


@dataclass(frozen=True, repr=False)
class TransitionResult:
    """The transition points at one ``omega`` (:func:`attnphase.transition`).

    Attributes
    ----------
    alpha_c : float or None
        Where the semantic and positional branches exchange the lowest training error
        (docs/model.md (5.2)); ``None`` where not found on the grid.
    alpha_l : float or None
        Where the global minimum's test error crosses the linear baseline's (docs/model.md
        (5.4)); ``None`` where not found on the grid.
    spinodals : mapping
        Where each branch ends (docs/model.md (5.3); the semantic side is the mixed branch at
        rank ``r >= 2``); ``None`` where not found on the grid.
    errors : mapping
        The standard error of each (over the refinement's fine rules, or over independent
        scrambles when ``settings.replicas > 1``; then each scramble's result is in
        ``replicas``).
    linear_test_error : float
        The dense linear baseline (docs/model.md (4.3)).
    notes : tuple of str
        What the search reports beside the numbers.
    replicas : tuple of mapping
        Each scramble's result where ``settings.replicas > 1``.
    grid : mapping
        The followed branches on the bracketing grid.
    spec : ModelSpec
        The model.
    settings : SolverSettings
        The solver's settings.
    success : bool
        ``alpha_c`` was located.
    message : str
        The transition points, in one line a person can read.
    kind : str or None
        How the global minimum changes at ``alpha_c`` (docs/model.md (5.5)):
        ``"discontinuous"`` (the training errors cross and the order parameter jumps, first
        order) or ``"continuous"`` (the new branch grows out of the old one, a bifurcation);
        ``None`` where no change was located.
    exchange : tuple of str or None
        The branches that exchange the global minimum (below, above: ``("positional",
        "semantic")``, or ``("positional", "mixed")`` at rank ``r >= 2``); ``None`` where no
        change was located.
    order_parameter : mapping
        The overlap that tells them apart (``name``, its value ``below`` and ``above``
        ``alpha_c`` and the standard error ``above_error``); empty where no change was located.
    alpha_range : tuple of float
        The range of ``alpha`` searched: the given grid's ends, or as far as the search without a
        grid widened it.
    reason : str or None
        Where ``alpha_c`` is ``None``, why: which branch is the lower wherever both exist and over
        which range, where a branch ends, or that a branch is found nowhere in the range.
    """

    alpha_c: float | None
    alpha_l: float | None
    spinodals: Mapping[str, float | None]
    errors: Mapping[str, float | None]
    linear_test_error: float
    notes: tuple[str, ...]
    replicas: tuple[Mapping[str, Any], ...] = field(repr=False)
    grid: Mapping[str, Any] = field(repr=False)
    spec: ModelSpec
    settings: SolverSettings
    success: bool
    message: str
    #: the record of ``attnphase transition --json`` (the solver's ``Transition.to_dict()``, read-only)
    record: Mapping[str, Any] = field(repr=False)
    #: the model, the bracketing grid ``alpha``, the solver settings, the version and the kernels
    #: that ran (as ``SolveResult.params``)
    params: Mapping[str, Any] = field(repr=False)
    kind: str | None = None
    exchange: tuple[str, str] | None = None
    order_parameter: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: ``value = "gain"`` with the optimal gain (docs/model.md (6.5)): each branch's optimal gain and
    #: its error at the evaluation nearest ``alpha_c`` (``at_alpha``), and ``evaluations``, the
    #: ``[alpha, semantic gain, positional gain]`` of every evaluation; ``None`` otherwise
    gains: Mapping[str, Any] | None = field(default=None, repr=False)
    alpha_range: tuple[float, float] | None = None
    reason: str | None = None

    @classmethod
    def from_transition(cls, tr: Any, spec: ModelSpec, settings: SolverSettings) -> TransitionResult:
        """The user's view of a ``Transition`` of the solver."""
        from attnphase._version import __version__
        from attnphase.theory import native

        def fmt(v: float | None, key: str) -> str:
            if v is None:
                return "none"
            e = tr.errors.get(key)
            return f"{v:.4f}" + (f" +- {e:.4f}" if e is not None else "")

        spin = dict(tr.spinodals)
        msg = (f"omega = {spec.omega:g}: alpha_c = {fmt(tr.alpha_c, 'alpha_c')}, "
               f"alpha_l = {fmt(tr.alpha_l, 'alpha_l')}, spinodals: "
               + ", ".join(f"{b} {fmt(v, f'spinodal_{b}')}" for b, v in spin.items()))
        alpha_range, reason = tr.alpha_range, tr.reason
        if tr.alpha_c is None:
            msg += f"; {reason}" if reason else "; alpha_c not located on the grid"
        else:
            msg += "; " + describe_change(tr.kind, tr.exchange, tr.order_parameter)
        msg += "".join(f"; {n}" for n in tr.notes if n != reason)
        return cls(
            alpha_c=tr.alpha_c, alpha_l=tr.alpha_l, spinodals=MappingProxyType(spin),
            errors=MappingProxyType(dict(tr.errors)), linear_test_error=float(tr.linear_test_error),
            notes=tuple(tr.notes), replicas=frozen(tuple(tr.replicas)), grid=frozen(tr.grid), spec=spec,
            settings=settings, success=tr.alpha_c is not None, message=msg, record=frozen(tr.to_dict()),
            params=frozen({**spec.to_dict(), "alpha": list(tr.grid.get("alpha", ())),
                           "solver": asdict(settings), "version": __version__,
                           "revision": numerics_revision("theory"), "kernels": native.describe()}),
            kind=tr.kind, exchange=tuple(tr.exchange) if tr.exchange else None,
            order_parameter=MappingProxyType(dict(tr.order_parameter)),
            alpha_range=(float(alpha_range[0]), float(alpha_range[1])) if alpha_range else None, reason=reason,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase transition --json`` prints: ``params``, the solver's record,
        ``success`` and ``message``."""
        return jsonable({"params": self.params, **self.record, "success": self.success, "message": self.message})

    def __repr__(self) -> str:
        def pm(v: float | None, key: str) -> str:
            e = self.errors.get(key)
            return fmt_g(v, ".4f") + ("" if v is None or e is None else f" +- {e:.4f}")

        spin = ", ".join(f"{b} {pm(v, f'spinodal_{b}')}" for b, v in self.spinodals.items())
        return "\n".join([
            f"TransitionResult(omega={self.spec.omega:g}, success={self.success})",
            f"  alpha_c = {pm(self.alpha_c, 'alpha_c')}, alpha_l = {pm(self.alpha_l, 'alpha_l')}",
            f"  spinodals: {spin}",
            f"  change: {describe_change(self.kind, self.exchange, self.order_parameter)}",
            f"  linear_test_error = {fmt_g(self.linear_test_error)}",
            f"  message: {one_line(self.message)}"])


def describe_change(kind: str | None, exchange: Sequence[str] | None, order_parameter: Mapping[str, Any]) -> str:
    """One line on how the global minimum changes at ``alpha_c`` (docs/model.md (5.5)), e.g.
    ``positional -> mixed, discontinuous (training errors cross; |theta| jumps 0 -> 0.124 +- 0.004)``."""
    if kind is None or not exchange:
        return "how the global minimum changes was not determined"
    head = f"{exchange[0]} -> {exchange[1]}, {kind}"
    name, above, se = order_parameter.get("name", "theta"), order_parameter.get("above"), order_parameter.get("above_error")
    if above is None:
        return head
    val = f"{above:.3g}" + (f" +- {se:.1g}" if se is not None else "")
    if kind == "discontinuous":
        return f"{head} (training errors cross; |{name}| jumps 0 -> {val})"
    return f"{head} (a bifurcation: |{name}| grows from 0; {val} at alpha_c)"


