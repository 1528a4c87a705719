"""attnphase: the solvable model of dot-product attention.

Theory solver, finite-d simulator, sweeps and phase diagrams for the model of Cui, Behrens,
Krzakala and Zdeborova, "A phase transition between positional and semantic learning in a
solvable model of dot-product attention" (NeurIPS 2024). The model and its equations are in
``docs/model.md``.

The public API::

    import attnphase as ap
    res = ap.solve(1.0, omega=0.3)            # the fixed points at alpha = 1
    tr = ap.transition(omega=0.3)             # alpha_c, alpha_l, spinodals
    sim = ap.simulate(1.0, 200, omega=0.3)    # finite-d training runs
    bo = ap.bayes(omega=0.3)                  # the Bayes-optimal baseline

Each returns a frozen result whose ``to_dict()`` is what ``attnphase solve / transition /
simulate / bayes --json`` prints; :class:`ModelSpec` holds the model, :class:`SolverSettings` the
solver's numerics (``SolverSettings.preset("fast" | "default" | "precise")``).
"""

from attnphase._version import __version__
from attnphase.api import bayes, simulate, solve, transition
from attnphase.errors import InternalError
from attnphase.results import BayesResult, BranchResult, SimulationResult, SolveResult, TransitionResult
from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings

__all__ = [
    "BayesResult",
    "BranchResult",
    "InternalError",
    "ModelSpec",
    "SimulationResult",
    "SolveResult",
    "SolverSettings",
    "TransitionResult",
    "__version__",
    "bayes",
    "simulate",
    "solve",
    "transition",
]
