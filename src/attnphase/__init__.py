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
    cu = ap.curves([0.5, 1.0, 1.5], omega=0.2)    # both branches against alpha
    cmp = ap.compare(1.0, 200, omega=0.3)     # theory against training at d = 200
    ph = ap.phase_diagram([0.1, 0.2, 0.3])    # alpha_c(omega), stored in a sweep store

Each returns a frozen result whose ``to_dict()`` is the JSON record of ``attnphase solve /
transition / simulate / bayes / curves / compare / phase-diagram``; ``curves``, ``compare`` and
``phase_diagram`` also give ``to_frame()`` (a tidy DataFrame) and ``plot()`` (the command's figure); :class:`ModelSpec` holds the model, :class:`SolverSettings` the
solver's numerics (``SolverSettings.preset("fast" | "default" | "precise")``).
"""

from attnphase._version import __version__
from attnphase.api import bayes, simulate, solve, transition
from attnphase.api_sweeps import compare, curves, phase_diagram
from attnphase.errors import InternalError
from attnphase.results import BayesResult, BranchResult, SimulationResult, SolveResult, TransitionResult
from attnphase.results_sweeps import CompareResult, CurvesResult, PhaseDiagramResult
from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings

__all__ = [
    "BayesResult",
    "BranchResult",
    "CompareResult",
    "CurvesResult",
    "InternalError",
    "ModelSpec",
    "PhaseDiagramResult",
    "SimulationResult",
    "SolveResult",
    "SolverSettings",
    "TransitionResult",
    "__version__",
    "bayes",
    "compare",
    "curves",
    "phase_diagram",
    "simulate",
    "solve",
    "transition",
]
