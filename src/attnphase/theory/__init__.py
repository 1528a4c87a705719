"""The asymptotic (replica / state-evolution) solver of the model (docs/model.md).

Modules, in the order a solve goes through them: :mod:`~attnphase.theory.saddle` (the
saddle-point equations on an integration rule; their order parameters in
:mod:`~attnphase.theory.order_params`, the Stein sums in :mod:`~attnphase.theory.stein`, the test
error in :mod:`~attnphase.theory.generalization`), :mod:`~attnphase.theory.fixed_point` (their
fixed point; the settings in :mod:`~attnphase.theory.settings`, the quasi-Newton and Anderson steps
in :mod:`~attnphase.theory.newton`), :mod:`~attnphase.theory.branches` (the branches, solving one
point and following a branch; one point in :mod:`~attnphase.theory.branch_point`),
:mod:`~attnphase.theory.estimates` (the linear-response error estimate),
:mod:`~attnphase.theory.fine_rules` and :mod:`~attnphase.theory.refinement` (multi-fidelity
refinement; each fine rule's own fixed point and the error estimate in
:mod:`~attnphase.theory.rule_errors`, what a refined point says of its branch in
:mod:`~attnphase.theory.confirmation`), :mod:`~attnphase.theory.target` (a single solve to the error target) and
:mod:`~attnphase.theory.transition` (``alpha_c``, the spinodals and ``alpha_l``; the search in
:mod:`~attnphase.theory.transition_search`, its root finders in :mod:`~attnphase.theory.roots`);
:mod:`~attnphase.theory.value` (the trainable value gain ``V = v I`` at its optimum, docs/model.md
(6.5): the optimal gain of a branch and ``alpha_c`` with each branch at its own).

Glossary (paper convention inside the solver, user units outside):
``q`` self overlap, ``m`` positional overlap, ``theta`` semantic overlap, ``V`` variance;
``q_hat, m_hat, theta_hat, V_hat`` their conjugates; ``alpha = n/d``.
"""

from attnphase.theory.branches import (
    BRANCHES,
    MIXED,
    BranchPoint,
    branches_for,
    follow_branch,
    semantic_side,
    solve_point,
)
from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.refinement import refine_followed
from attnphase.theory.saddle import OrderParams, check_response, linear_test_error
from attnphase.theory.target import solve_refined
from attnphase.theory.transition import (
    Transition,
    combine_transitions,
    find_transition,
    find_transition_replicated,
)

__all__ = [
    "BRANCHES",
    "MIXED",
    "BranchPoint",
    "branches_for",
    "check_response",
    "OrderParams",
    "SolverSettings",
    "Transition",
    "combine_transitions",
    "find_transition",
    "find_transition_replicated",
    "follow_branch",
    "linear_test_error",
    "refine_followed",
    "semantic_side",
    "solve_point",
    "solve_refined",
]
