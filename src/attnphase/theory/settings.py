"""The settings of the theory solver: :class:`SolverSettings` (integration rule, iteration, damping,
refinement and error target), its presets and the error estimates an error target applies to.

Each field is described once (:func:`attnphase.spec.schema.described`, group ``solver``): the
description checks its value, and makes the theory commands' flags (the common settings) and
their ``--solver NAME=VALUE`` items (the rare ones, ``FieldInfo.rare``) and the theory sweep kinds'
``solver_<name>`` parameters (:func:`solver_parameters`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from attnphase.spec.defaults import ONE_START_SETTINGS
from attnphase.spec.schema import Parameter, changes_from_items, described, parameters
from attnphase.theory.responses import ONE_START, RESPONSES

#: which error estimates ``SolverSettings.target_error`` applies to (``target_on``): the test
#: error's, the summary overlaps' (``q``, ``m``, ``theta`` in user units) or both, as the
#: ``diagnostics["error_estimate"]`` keys whose largest value must meet it
TARGET_KEYS = {"test_error": ("test_error",), "overlaps": ("q_user", "m_user", "theta_user"),
               "all": ("test_error", "q_user", "m_user", "theta_user")}


TARGET_ON = tuple(TARGET_KEYS)

#: the schema group of every solver setting
_S = {"group": "solver"}


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
    replicas : int
        Independent QMC scrambles solved to estimate the integration error (1: no estimate).
    seed : int
        Of the QMC scrambles (the coarse rule's, and through it those of the error estimate and
        of the refinement's fine rules).
    full_starts_every : int
        Every this many iterations the proximal problem is solved from the full multi-start set
        (warm starts in between).
    switch_width : float
        The largest width ``tau`` of the split of a node between its two lowest local minima
        (docs/model.md (3.2); ``tau -> 0`` is the hard global minimum; 1e-5 vs 1e-6 changed theta
        by 3e-11 at alpha = 2.2); at most ``SWITCH_FRACTION`` of the rule's mean proximal value
        (:mod:`attnphase.theory.saddle`).
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
        ``target_error`` 0, the error estimate from the ``replicas`` rules). :meth:`preset` gives them that one rule
        (:data:`attnphase.spec.defaults.ONE_START_SETTINGS`).

    Raises
    ------
    ValueError
        One line, for a setting out of range, an unknown ``method``, ``target_on`` or
        ``response``, or settings that do not go together (a one-start ``response`` with a
        refinement or an error target; ``target_error`` with fewer than two ``refine_replicas``).
    """

    method: str = described("qmc", "str", "integration rule of the data step: scrambled Sobol (x4 symmetrised) or "
                            "product Gauss-Hermite", choices=("qmc", "gh"), rare=True, **_S)
    order: int = described(12, "int", "qmc: log2 of the base sample (x4 symmetrised); gh: points per dimension",
                           minimum=2, **_S)
    warmup_order: int | None = described(8, "int", "a cheaper rule iterated first, when below order (none: no "
                                          "warm-up)", minimum=2, none="none", rare=True, **_S)
    tol: float = described(1e-8, "float", "relative change of every unknown at convergence", minimum=0.0,
                           maximum=1.0, strict_minimum=True, strict_maximum=True, **_S)
    max_iter: int = described(300, "int", "fixed-point iterations at most", minimum=1, rare=True, **_S)
    damping: float = described(0.7, "float", "weight of the old point in the damped iteration", minimum=0.0,
                               maximum=1.0, strict_maximum=True, rare=True, **_S)
    anderson: int = described(5, "int", "depth of the Anderson acceleration", minimum=0, rare=True, **_S)
    replicas: int = described(3, "int", "independent QMC scrambles solved for the integration error estimate, "
                              "1: none", minimum=1, **_S)
    seed: int = described(0, "int", "seed of the QMC scrambles, coarse and fine rules: another seed gives "
                          "independent rules, a check of the reported integration error", minimum=0, **_S)
    full_starts_every: int = described(25, "int", "iterations between two proximal solves from the full "
                                       "multi-start set (warm starts between)", minimum=1, rare=True, **_S)
    switch_width: float = described(1e-5, "float", "width tau of a node's split between its two lowest minima",
                                    minimum=0.0, strict_minimum=True, rare=True, **_S)
    polish_below: float = described(1e-2, "float", "relative change below which the quasi-Newton stage "
                                    "takes over", minimum=0.0, strict_minimum=True, rare=True, **_S)
    anderson_below: float = described(3e-2, "float", "relative change below which the iteration is "
                                      "Anderson-mixed (damped above)", minimum=0.0, strict_minimum=True,
                                      rare=True, **_S)
    max_polish: int = described(3, "int", "quasi-Newton stages at most", minimum=0, rare=True, **_S)
    max_rescue: int = described(3, "int", "quasi-Newton stages at most that a period-two cycle starts",
                                minimum=0, rare=True, **_S)
    noise_tol: float = described(1e-6, "float", "residual accepted when tol is below the rule's noise floor "
                                 "(at least tol)", minimum=0.0, maximum=1.0, strict_minimum=True,
                                 strict_maximum=True, rare=True, **_S)
    refine_order: int = described(0, "int", "carry the coarse fixed points to refine_replicas finer rules of "
                                  "this order (qmc: log2 of each base sample; multi-fidelity refinement, which "
                                  "also gives the error estimate; 0: off)", minimum=0, **_S)
    refine_replicas: int = described(4, "int", "independent fine rules of the refinement", minimum=1, rare=True,
                                     **_S)
    target_error: float = described(0.0, "float", "raise a branch's refinement order (from refine_order) until "
                                    "the estimated relative error of what target_on names is at most this (0: "
                                    "one refinement at refine_order, the fastest)", minimum=0.0,
                                    maximum=1.0, strict_maximum=True, **_S)
    target_on: str = described("test_error", "str", "which estimates target_error applies to", choices=TARGET_ON,
                               rare=True, **_S)
    max_refine_order: int = described(15, "int", "highest refinement order for target_error", minimum=2,
                                      rare=True, **_S)
    fine_teacher_scale: float | None = described(None, "float", "the fine rules draw the teacher noises from "
                                                 "N(0, s^2) with importance weights (1: the plain rule; auto: 1.4 "
                                                 "at L = 2, rank 1, 1 elsewhere)", minimum=1.0, maximum=3.0,
                                                 none="auto", rare=True, **_S)
    mirror: bool | None = described(None, "bool", "the fine rules pair every node with its mirror in the "
                                    "conjugates: the same minima, less scatter (auto: on for the tied and causal "
                                    "students at L = 2, rank 1, uncorrelated tokens)", none="auto", rare=True, **_S)
    response: str = described("global", "str", "which minimum each sample's fields take: the global one, followed "
                              "locally without the jumps, or the one reached from the teacher's fields or from the "
                              "student's positional means (docs/model.md (3.3), (3.6), (3.7))",
                              choices=RESPONSES, **_S)

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
        "fast": MappingProxyType({"order": 8, "tol": 1e-6, "noise_tol": 1e-4, "replicas": 1, "refine_order": 10}),
        "default": MappingProxyType({"order": 8, "refine_order": 11, "target_error": 1e-3, "target_on": "overlaps"}),
        "precise": MappingProxyType({"order": 8, "refine_order": 11, "target_error": 2e-4, "target_on": "overlaps"}),
    })

    @classmethod
    def preset(cls, name: str, **changes: Any) -> SolverSettings:
        """The named settings ``"fast"``, ``"default"`` or ``"precise"`` (:attr:`PRESETS`), with
        ``changes`` (field names) applied on top. A one-start ``response`` (``semantic-start``,
        ``positional-start``) runs on one rule: where ``changes`` do not set them, the preset's
        order, warm-up, refinement and error target give way to
        :data:`attnphase.spec.defaults.ONE_START_SETTINGS` (docs/model.md (3.7)), as on the
        command line (``attnphase solve --response positional-start``).

        ``SolverSettings()`` itself holds the single-rule solver's defaults (order 12, no
        refinement), which :func:`attnphase.theory.solve_point` uses; ``preset("default")`` is the
        multi-fidelity path of :func:`attnphase.solve`.
        """
        if name not in cls.PRESETS:
            raise ValueError(f"unknown solver preset {name!r}; choose from {', '.join(cls.PRESETS)}")
        if changes.get("response") in ONE_START:  # (one rule: docs/model.md (3.7))
            changes = {**ONE_START_SETTINGS, **changes}
        return cls(**{**cls.PRESETS[name], **changes})

    def __post_init__(self) -> None:
        for p in solver_parameters():  # (kinds, choices and bounds: the schema)
            object.__setattr__(self, p.name, p.coerce(getattr(self, p.name)))
        if not self.tol <= self.noise_tol:
            raise ValueError(f"noise_tol must lie in [tol, 1), got {self.noise_tol} below tol {self.tol}")
        if self.refine_order == 1:
            raise ValueError("refine_order must be 0 (off) or >= 2")
        if self.method == "qmc":  # (4 * 2^order nodes per rule; see quadrature.MAX_NODES)
            for name in ("order", "refine_order", "max_refine_order"):
                if getattr(self, name) > 20:
                    raise ValueError(f"{name} must be <= 20 for qmc (4 * 2^20 nodes per rule), "
                                     f"got {getattr(self, name)}")
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


def solver_parameters() -> tuple[Parameter, ...]:
    """The :class:`~attnphase.spec.schema.Parameter` of every :class:`SolverSettings` field, in
    field order."""
    return parameters(SolverSettings)


def solver_changes(items: Sequence[str], option: str = "--solver") -> dict[str, Any]:
    """``NAME=VALUE`` items (``option``'s, e.g. ``--solver max_iter=500``) as the
    :class:`SolverSettings` fields they set, each value read and checked by the field's schema;
    ``ValueError`` (one line) for an item without ``=``, an unknown name (the known ones listed)
    or a bad value. A name may use ``-`` for ``_``."""
    return changes_from_items(solver_parameters(), items, option)

