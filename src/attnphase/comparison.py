"""Theory versus finite-``d`` simulation as one tidy table (the numbers of ``attnphase compare``).

Columns (one row per theory point or simulation run, :data:`COLUMNS`): ``source`` (``theory``
or ``simulation``), ``kind`` (theory branch ``semantic``/``positional``/``mixed``/``linear``, or
the simulation start ``semantic``/``positional``/``random``), ``alpha``, ``seed``, ``m``,
``theta``, ``q``, ``train_loss``, ``test_error``, ``linear_test_error``, ``exists``, ``branch``
(where a simulation run landed), ``d``. The theory rows follow each branch in ``alpha``
(``docs/model.md`` (5.1)) with its errors (4.1)-(4.2) and the linear baseline (4.3); the
simulation rows train at finite ``d`` from each start. :func:`attnphase.plots.compare.compare_figure`
draws the table; :func:`attnphase.compare` returns it with its parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attnphase.sim.simulate import simulate
from attnphase.sim.train import TrainSettings
from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings, branches_for, follow_branch, linear_test_error
from attnphase.theory.fixed_point import FAST

log = logging.getLogger(__name__)

COLUMNS = ["source", "kind", "alpha", "seed", "m", "theta", "q", "train_loss", "test_error",
           "linear_test_error", "exists", "branch", "d"]

#: The simulation starts compared with the theory branches.
STARTS = ("semantic", "positional", "random")


def theory_rows(spec: ModelSpec, alphas: Sequence[float], order: int | None = None) -> list[dict[str, Any]]:
    """Theory rows (:data:`COLUMNS`): every branch but the trivial one (``mixed`` too at rank >= 2)
    followed in ``alpha``, then the linear baseline at each ``alpha``.

    The solver runs with its quick preset ``attnphase.theory.settings.FAST`` (as ``curves``);
    ``order`` overrides the integration order of that preset.
    """
    settings = theory_settings(order)
    rows: list[dict[str, Any]] = []
    lin = float(linear_test_error(spec))
    # (rank >= 2: also the mixed branch, where GD from the semantic start lands)
    for branch in [b for b in branches_for(spec) if b != "trivial"]:
        log.info("theory: following the %s branch over %d points", branch, len(alphas))
        for pt in follow_branch(spec, list(alphas), branch, settings):
            rows.append({
                "source": "theory", "kind": branch, "alpha": float(pt.alpha), "seed": -1,
                "m": float(pt.m), "theta": float(pt.theta), "q": float(pt.q),
                "train_loss": float(pt.train_loss), "test_error": float(pt.test_error),
                "linear_test_error": lin, "exists": bool(pt.exists), "branch": branch, "d": np.inf,
            })
    for a in alphas:
        rows.append({"source": "theory", "kind": "linear", "alpha": float(a), "seed": -1,
                     "test_error": lin, "linear_test_error": lin, "exists": True,
                     "branch": "linear", "d": np.inf})
    return rows


def theory_settings(order: int | None = None) -> SolverSettings:
    """The theory side's solver settings: ``FAST``, with ``order`` as its integration order where given."""
    preset: dict[str, Any] = dict(FAST)
    if order is not None:
        preset["order"] = order
    return SolverSettings(**preset)


def theory_table(spec: ModelSpec, alphas: Sequence[float], order: int | None = None) -> pd.DataFrame:
    """:func:`theory_rows` as a table."""
    return pd.DataFrame(theory_rows(spec, alphas, order), columns=COLUMNS)


def simulation_rows(spec: ModelSpec, alphas: Sequence[float], d: int, seeds: Sequence[int],
                    settings: TrainSettings,
                    progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Simulation rows (:data:`COLUMNS`): every seed from each of :data:`STARTS` at each
    ``alpha``, one batched training per ``alpha``; ``progress(done, total)`` after each ``alpha``."""
    rows = []
    for i, a in enumerate(alphas):
        res = simulate(spec, alpha=float(a), d=d, seeds=seeds, inits=STARTS, settings=settings)
        log.info("alpha=%g: %d runs in %.1f s", a, len(res.runs), res.batch_seconds)
        for r in res.runs:
            rows.append({
                "source": "simulation", "kind": r.init, "alpha": float(a), "seed": r.seed,
                "m": r.m, "theta": r.theta, "q": r.q, "train_loss": r.train_loss,
                "test_error": r.test_error, "linear_test_error": r.linear_test_error,
                "exists": r.converged, "branch": r.branch, "d": d,
            })
        if progress is not None:
            progress(i + 1, len(alphas))
    return rows


def simulation_table(spec: ModelSpec, alphas: Sequence[float], d: int, seeds: Sequence[int],
                     settings: TrainSettings) -> pd.DataFrame:
    """:func:`simulation_rows` as a table."""
    return pd.DataFrame(simulation_rows(spec, alphas, d, seeds, settings), columns=COLUMNS)


def theory_grid(alphas: Sequence[float], theory_points: int) -> list[float]:
    """The theory curves' ``alpha``: ``theory_points`` values spanning ``alphas`` (one where
    ``alphas`` holds a single value)."""
    fine = np.linspace(float(np.min(alphas)), float(np.max(alphas)), int(theory_points))
    return list(dict.fromkeys(float(a) for a in fine))


def bayes_rows(points: Sequence[Mapping[str, Any]], linear_error: float) -> list[dict[str, Any]]:
    """The Bayes-optimal baseline (the ``points`` of :func:`attnphase.bayes`) as theory rows of kind
    ``bayes``: ``theta`` and ``q`` its overlap, its test error."""
    return [{"source": "theory", "kind": "bayes", "alpha": p["alpha"], "theta": p["overlap"], "q": p["overlap"],
             "test_error": p["test_error"], "linear_test_error": linear_error, "exists": True} for p in points]


def run_compare(
    spec: ModelSpec,
    alphas: Sequence[float],
    d: int,
    seeds: Sequence[int],
    settings: TrainSettings,
    theory_points: int = 12,
    theory_order: int | None = None,
) -> pd.DataFrame:
    """Theory curves on ``theory_points`` alphas spanning ``alphas`` (:func:`theory_grid`) and
    simulations at ``alphas``, one table (:data:`COLUMNS`); :func:`attnphase.compare` is the same
    with its result."""
    theory = theory_table(spec, theory_grid(alphas, theory_points), order=theory_order)
    sim = simulation_table(spec, alphas, d, seeds, settings)
    return pd.concat([theory, sim], ignore_index=True)
