"""The parameter box the solver is held to, and the checks every solve in it must pass.

The reference point of the paper is ``sigma = 0.5``, ``lambda = 0.01``; a user's first move is to
change a parameter. :data:`BOX` is the region where :func:`attnphase.solve` must end with numbers
(with error estimates) or a reasoned absence for every branch, in bounded time:
``sigma`` in [0.1, 2], ``lambda`` in [1e-4, 1], ``omega`` in [0, 0.95], ``alpha`` in [0.02, 10].
The variants (:data:`VARIANT_MODELS`) are held to a coarser sample of the same box.

:func:`sample_box` draws seeded points (``lambda`` and ``alpha`` log-uniform, the others uniform);
:func:`check_solve` lists what is wrong with one solve's result: a branch without finite numbers,
an error estimate that is not a mapping of finite numbers where the point was refined, an absence
without its reason, a global minimum that is not the branch of lowest training error;
:func:`check_holes` lists the branches that a single solve calls absent but that continuation
from a nearby ``alpha`` finds and the fine rules confirm (the branch-finding, not the physics,
deciding where a branch exists). The robustness tests, ``studies/box_scan.py`` and
``benchmarks/bench_box.py`` read the box and the checks from here, so all three hold the solver to
the same thing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from attnphase.results import SolveResult
from attnphase.spec.problem import ModelSpec

__all__ = ["BOX", "VARIANT_MODELS", "Box", "BoxPoint", "BoxSolve", "check_holes", "check_solve", "sample_box",
           "solve_box_point"]


@dataclass(frozen=True)
class Box:
    """Closed ranges of the model's core parameters; ``lam`` and ``alpha`` are drawn on a log scale."""

    sigma: tuple[float, float] = (0.1, 2.0)
    lam: tuple[float, float] = (1e-4, 1.0)
    omega: tuple[float, float] = (0.0, 0.95)
    alpha: tuple[float, float] = (0.02, 10.0)

    #: the parameters drawn on a log scale
    LOG: tuple[str, ...] = ("lam", "alpha")

    def draw(self, rng: np.random.Generator) -> dict[str, float]:
        """One point of the box, each parameter drawn independently (uniform, or log-uniform for
        :attr:`LOG`), rounded to 4 significant digits so that a failing point can be typed back."""
        out: dict[str, float] = {}
        for name in ("sigma", "lam", "omega", "alpha"):
            lo, hi = getattr(self, name)
            v = math.exp(rng.uniform(math.log(lo), math.log(hi))) if name in self.LOG else rng.uniform(lo, hi)
            out[name] = float(f"{v:.4g}")
        return out

    def contains(self, **values: float) -> bool:
        """Whether every given parameter lies in its range."""
        return all(getattr(self, k)[0] <= v <= getattr(self, k)[1] for k, v in values.items())


#: the box of the reference model (docs/solver.md, "The parameter box")
BOX = Box()

#: the variants checked on a coarser sample of the box: name -> ``ModelSpec`` fields
VARIANT_MODELS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "reference": MappingProxyType({}),
    "L3": MappingProxyType({"L": 3}),
    "rank2": MappingProxyType({"rank": 2}),
    "untied": MappingProxyType({"variant": "untied"}),
    "causal": MappingProxyType({"variant": "causal"}),
    "correlated": MappingProxyType({"token_corr": 0.3}),
    "mixture": MappingProxyType({"mixture": 2, "mixture_sep": 1.0, "mixture_align": 0.5}),
    "cross": MappingProxyType({"variant": "cross"}),
})


@dataclass(frozen=True)
class BoxPoint:
    """One sampled point: the model (a name of :data:`VARIANT_MODELS`), its core parameters and
    ``alpha``."""

    model: str
    sigma: float
    lam: float
    omega: float
    alpha: float

    def spec(self) -> ModelSpec:
        """The :class:`ModelSpec` of the point."""
        return ModelSpec(sigma=self.sigma, lam=self.lam, omega=self.omega, **VARIANT_MODELS[self.model])

    def command(self, preset: str = "fast") -> str:
        """The ``attnphase solve`` command of the point, to reproduce a failure by hand."""
        extra = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in VARIANT_MODELS[self.model].items())
        return (f"attnphase solve --alpha {self.alpha:g} --omega {self.omega:g} --sigma {self.sigma:g} "
                f"--lam {self.lam:g} --preset {preset}" + (f" {extra}" if extra else ""))


def sample_box(n: int, seed: int = 0, models: Sequence[str] = ("reference",), box: Box = BOX) -> list[BoxPoint]:
    """``n`` points drawn from ``box`` with ``numpy.random.default_rng(seed)``, the models taken in
    turn from ``models``. ``ValueError`` for an unknown model name."""
    unknown = [m for m in models if m not in VARIANT_MODELS]
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r}; known: {', '.join(VARIANT_MODELS)}")
    if n < 0 or not models:
        raise ValueError("sample_box needs n >= 0 and at least one model")
    rng = np.random.default_rng(seed)
    return [BoxPoint(models[i % len(models)], **box.draw(rng)) for i in range(n)]


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def check_solve(res: SolveResult) -> tuple[str, ...]:
    """What is wrong with one solve's result (empty: nothing).

    Every branch either exists, with finite overlaps, training and test errors and (where it was
    refined) an error estimate whose overlaps and errors are finite, or is absent with a reason;
    some branch exists (the trivial branch exists everywhere in the box); the global minimum is the
    existing branch of lowest training error.
    """
    problems: list[str] = []
    existing = {b: r for b, r in res.branches.items() if r is not None}
    for b, r in res.branches.items():
        if r is None:
            if not str(res.absent.get(b, "")).strip():
                problems.append(f"{b}: absent without a reason")
            continue
        bad = [k for k in ("q", "m", "theta", "V", "train_loss", "test_error") if not _finite(getattr(r, k))]
        if bad:
            problems.append(f"{b}: not finite: {', '.join(bad)}")
        est = r.error_estimate
        if r.refined:
            if not isinstance(est, Mapping):
                problems.append(f"{b}: refined but no error estimate")
            else:
                missing = [k for k in ("q_user", "m_user", "theta_user", "test_error") if not _finite(est.get(k))]
                if missing:
                    problems.append(f"{b}: error estimate not finite: {', '.join(missing)}")
    if not existing:
        problems.append("no branch exists (the trivial branch exists everywhere in the box)")
    elif res.global_minimum not in existing:
        problems.append(f"global minimum {res.global_minimum} is not an existing branch")
    else:
        lowest = min(existing, key=lambda b: existing[b].train_loss)
        if existing[lowest].train_loss < existing[res.global_minimum].train_loss:
            problems.append(f"global minimum {res.global_minimum} is not the lowest branch ({lowest})")
    return tuple(problems)


def check_holes(res: SolveResult, step: float = 0.1, settings: Any = "fast") -> tuple[str, ...]:
    """The branches ``res`` calls absent that continuation finds: each absent branch is solved at
    ``alpha (1 -+ step)`` and, where it exists there, continued to ``alpha``
    (:func:`attnphase.theory.follow_branch`); a point reached there that the fine rules confirm
    (:func:`attnphase.theory.confirmation.is_confirmed`), refined as the points of a followed branch
    are (:func:`attnphase.theory.refinement.settle_drift`: where the quick refinement moved the
    defining overlap, to the solver's ``tol``), is a hole of the single solve. (At ``sigma = 1.315``,
    ``lambda = 0.0927``, ``omega = 0.087``, ``alpha = 0.5775`` the quick refinement of the semantic
    point continued from 0.52 stopped at ``theta`` 0.0088 on its way from the coarse 0.32 to the
    trivial branch, where the single solve's refinement ends.)"""
    from attnphase.api import solver_settings
    from attnphase.theory import follow_branch
    from attnphase.theory.refinement import is_confirmed, refine_point, settle_drift

    st = solver_settings(settings, "solve")
    problems: list[str] = []
    for b in (b for b, r in res.branches.items() if r is None):
        for a in (res.alpha * (1 - step), res.alpha * (1 + step)):
            pts = follow_branch(res.spec, [a, res.alpha], b, st)
            if not (pts[0].exists and pts[1].exists):
                continue
            p = settle_drift(res.spec, pts[1], refine_point(res.spec, pts[1], st), st) if st.refine_order else pts[1]
            if is_confirmed(p):
                problems.append(f"{b}: absent at alpha = {res.alpha:g} by solve, but continued from alpha = "
                                f"{a:.4g} to q {p.q:.4g}, m {p.m:.4g}, theta {p.theta:.4g}, confirmed on the fine rules")
                break
    return tuple(problems)


@dataclass(frozen=True)
class BoxSolve:
    """One point's solve and its checks: ``seconds`` of wall time, the branches found, the global
    minimum, ``problems`` (:func:`check_solve`, and :func:`check_holes` where asked), ``error``:
    an exception's type and message where the solve raised."""

    point: BoxPoint
    seconds: float
    found: tuple[str, ...] = ()
    global_minimum: str | None = None
    problems: tuple[str, ...] = ()
    error: str | None = None
    success: bool = False
    message: str = ""
    absent: Mapping[str, str] = field(default_factory=dict)
    #: the solve's result (``None`` where it raised)
    result: SolveResult | None = field(default=None, repr=False, compare=False)

    @property
    def clean(self) -> bool:
        """The solve ended without an exception and its checks found nothing."""
        return self.error is None and not self.problems

    def to_dict(self) -> dict[str, Any]:
        """A flat record (a row of the box scan's table)."""
        p = self.point
        return {"model": p.model, "sigma": p.sigma, "lam": p.lam, "omega": p.omega, "alpha": p.alpha,
                "seconds": round(self.seconds, 3), "found": ",".join(self.found), "global_minimum": self.global_minimum,
                "success": self.success, "clean": self.clean, "problems": "; ".join(self.problems),
                "error": self.error or ""}


def solve_box_point(point: BoxPoint, settings: Any = "fast", holes: bool = False) -> BoxSolve:
    """:func:`attnphase.solve` at ``point`` (every branch), timed and checked (:func:`check_solve`,
    and :func:`check_holes` with ``holes``). An exception is recorded, not raised: the record says
    which point failed and how."""
    from attnphase.api import solve

    t0 = time.perf_counter()
    try:
        res = solve(point.alpha, spec=point.spec(), settings=settings, progress=False)
    except Exception as exc:  # (recorded: a box scan reports every failure, it does not stop at one)
        return BoxSolve(point, time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t0
    problems = check_solve(res) + (check_holes(res, settings=settings) if holes else ())
    found = tuple(b for b, r in res.branches.items() if r is not None)
    return BoxSolve(point, seconds, found, res.global_minimum, problems, None, res.success, res.message,
                    MappingProxyType(dict(res.absent)), res)
