"""The asymptotic (replica / state-evolution) solver of THEORY.md section 2.

Glossary (paper convention inside the solver, user units outside):
``q`` self overlap, ``m`` positional overlap, ``theta`` semantic overlap, ``V`` variance;
``q_hat, m_hat, theta_hat, V_hat`` their conjugates; ``alpha = n/d``.
"""

from attnphase.theory.fixed_point import SolverSettings
from attnphase.theory.phases import (
    BRANCHES,
    MIXED,
    BranchPoint,
    Transition,
    branches_for,
    find_transition,
    find_transition_replicated,
    follow_branch,
    refine_followed,
    semantic_side,
    solve_point,
    solve_refined,
)
from attnphase.theory.saddle import OrderParams, linear_test_error

__all__ = [
    "BRANCHES",
    "MIXED",
    "BranchPoint",
    "branches_for",
    "OrderParams",
    "SolverSettings",
    "Transition",
    "find_transition",
    "find_transition_replicated",
    "follow_branch",
    "linear_test_error",
    "refine_followed",
    "semantic_side",
    "solve_point",
    "solve_refined",
]
