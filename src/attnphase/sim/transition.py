"""Where the positional-to-semantic transition sits at finite ``d``, measured by simulation.

docs/model.md (5.2) defines ``alpha_c`` as the sample complexity where the semantic and the positional
minima have the same training error. At finite ``d`` we train (docs/simulation.md) from the two
*informed* starts, semantic ``Q = Q*`` and positional ``Q = 1_d / sqrt(d)``, on the same dataset
(one dataset per seed) and measure

    ``Delta = eps_t(semantic start) - eps_t(positional start)``

per seed. ``Delta > 0`` means the positional minimum is the lower one (below ``alpha_c``),
``Delta < 0`` the semantic one (above). ``alpha_c_sim`` is where the seed mean of ``Delta``
crosses zero, by linear interpolation between the two bracketing grid points; its uncertainty comes
from the standard error of the mean (the crossings of the ``mean +- SE`` curves, and a first-order
standard error ``SE(Delta at the root) / |slope|``).

This works for every student of docs/model.md section 6 the simulator trains (tied/untied/causal,
correlated tokens, trainable value), including those the theory solver does not cover, which is
why it is the tool that answers the open questions of docs/model.md section 6 (``docs/questions.md``).

Caveat recorded in every result: ``Delta`` compares two minima only while each start stays in its
own basin. Where a start falls into the other mechanism (e.g. the semantic start below the semantic
spinodal), ``Delta`` is about zero for a trivial reason; such grid points are reported
(``held_semantic`` / ``held_positional``) and, by default, left out of the crossing search.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from attnphase._revision import numerics_revision
from attnphase.sim.train import TrainSettings
from attnphase.spec.defaults import TRAINING
from attnphase.spec.problem import ModelSpec, check_alpha

log = logging.getLogger(__name__)

#: Training settings used when none are given, those of ``attnphase sim-transition``
#: (:data:`attnphase.spec.defaults.TRAINING`): GD with heavy-ball momentum (same minima as plain
#: GD, docs/simulation.md) to a tolerance on ``||grad R|| / sqrt(d)``.
DEFAULT_SETTINGS: Mapping[str, Any] = TRAINING["sim-transition"]


@dataclass(frozen=True)
class Crossing:
    """Zero crossing of a decreasing-ish curve ``Delta(alpha)`` sampled on a grid.

    ``alpha_c`` is ``None`` (with ``reason``) when the mean has no sign change on the usable
    points. ``lo`` / ``hi``: crossings of ``mean - se`` / ``mean + se`` nearest to ``alpha_c``
    (``None`` if that curve has no sign change: the band is open on that side). ``se``: first-order
    standard error ``sqrt((1-t)^2 se_i^2 + t^2 se_j^2) / |slope|`` of the interpolated root.
    ``all_crossings``: every sign change of the mean (more than one means the curve is noisy at
    this grid and number of seeds; ``alpha_c`` is then the lowest one).
    """

    alpha_c: float | None
    lo: float | None
    hi: float | None
    se: float | None
    bracket: tuple[float, float] | None
    all_crossings: tuple[float, ...]
    used_alphas: tuple[float, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["bracket"] = None if self.bracket is None else list(self.bracket)
        out["all_crossings"] = list(self.all_crossings)
        out["used_alphas"] = list(self.used_alphas)
        return out


def _roots(x: np.ndarray, y: np.ndarray) -> list[tuple[int, float]]:
    """Linear-interpolation roots of ``y(x)``: ``(i, root)`` for each sign change in
    ``[x_i, x_{i+1}]``. An exact zero at a grid point counts once (at that point)."""
    out: list[tuple[int, float]] = []
    for i in range(len(x) - 1):
        y0, y1 = y[i], y[i + 1]
        if y0 == 0.0:
            if not out or out[-1][1] != x[i]:
                out.append((i, float(x[i])))
            continue
        if y1 == 0.0:
            if i + 1 == len(x) - 1:
                out.append((i, float(x[i + 1])))
            continue
        if (y0 > 0) != (y1 > 0):
            t = y0 / (y0 - y1)
            out.append((i, float(x[i] + t * (x[i + 1] - x[i]))))
    return out


def _nearest(roots: list[tuple[int, float]], target: float) -> float | None:
    if not roots:
        return None
    return min((r for _, r in roots), key=lambda r: abs(r - target))


def find_crossing(
    alphas: Sequence[float],
    mean: Sequence[float],
    se: Sequence[float] | None = None,
    usable: Sequence[bool] | None = None,
) -> Crossing:
    """Zero of ``mean(alpha)`` by linear interpolation between the bracketing grid points.

    ``alphas`` must be strictly increasing; ``se`` (standard errors, default zeros) gives the
    uncertainty; ``usable`` masks grid points (e.g. where an informed start did not hold).
    """
    x = np.asarray(alphas, dtype=float)
    y = np.asarray(mean, dtype=float)
    s = np.zeros_like(y) if se is None else np.asarray(se, dtype=float)
    ok = np.ones(x.shape, dtype=bool) if usable is None else np.array(usable, dtype=bool)  # (a copy)
    if not (x.shape == y.shape == s.shape == ok.shape) or x.ndim != 1:
        raise ValueError("alphas, mean, se and usable must be 1-d and of equal length")
    if np.any(np.diff(x) <= 0):
        raise ValueError("alphas must be strictly increasing")
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("standard errors must be finite and >= 0")
    ok &= np.isfinite(y)
    x, y, s = x[ok], y[ok], s[ok]
    used = tuple(float(a) for a in x)
    if x.size < 2:
        return Crossing(None, None, None, None, None, (), used,
                        f"fewer than two usable grid points ({x.size})")
    roots = _roots(x, y)
    if not roots:
        side = "positive" if np.all(y > 0) else "negative"
        where = "above" if side == "positive" else "below"
        return Crossing(
            None, None, None, None, None, (), used,
            f"no sign change: Delta is {side} on all {x.size} usable points "
            f"({x[0]:g}..{x[-1]:g}); alpha_c is probably {where} this range",
        )
    i, root = roots[0]
    j = i + 1
    if x[i] == root:
        # exact zero at a grid point: slope from the neighbours available
        lo_i, hi_i = max(i - 1, 0), min(i + 1, x.size - 1)
        slope = (y[hi_i] - y[lo_i]) / (x[hi_i] - x[lo_i]) if hi_i > lo_i else 0.0
        se_root = s[i] / abs(slope) if slope != 0 else math.inf
    elif x[j] == root:
        lo_i, hi_i = max(j - 1, 0), min(j + 1, x.size - 1)
        slope = (y[hi_i] - y[lo_i]) / (x[hi_i] - x[lo_i])
        se_root = s[j] / abs(slope) if slope != 0 else math.inf
    else:
        t = (root - x[i]) / (x[j] - x[i])
        slope = (y[j] - y[i]) / (x[j] - x[i])
        se_root = math.sqrt(((1 - t) * s[i]) ** 2 + (t * s[j]) ** 2) / abs(slope)
    a = _nearest(_roots(x, y - s), root)
    b = _nearest(_roots(x, y + s), root)
    lo, hi = (None, None)
    if a is not None and b is not None:
        lo, hi = min(a, b, root), max(a, b, root)
    elif a is not None or b is not None:
        only = a if a is not None else b
        lo, hi = (only, None) if only <= root else (None, only)  # type: ignore[operator]
    reason = "ok" if len(roots) == 1 else (
        f"{len(roots)} sign changes of the mean (noisy); alpha_c is the lowest")
    return Crossing(
        alpha_c=float(root), lo=lo, hi=hi,
        se=float(se_root) if math.isfinite(se_root) else None,
        bracket=(float(x[i]), float(x[min(j, x.size - 1)])),
        all_crossings=tuple(r for _, r in roots),
        used_alphas=used,
        reason=reason,
    )


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else 0.0
    return mean, se


@dataclass(frozen=True)
class TransitionPoint:
    """Measurements at one ``alpha``: per-seed values (tuples in seed order) and their
    mean / standard error. ``branch_*``: where each start's final point was classified
    (:func:`attnphase.sim.simulate.classify`); ``held_*``: fraction of seeds whose start stayed in
    its own mechanism."""

    alpha: float
    n: int
    delta: tuple[float, ...]
    delta_mean: float
    delta_se: float
    train_semantic: tuple[float, ...]
    train_positional: tuple[float, ...]
    test_semantic_mean: float
    test_semantic_se: float
    test_positional_mean: float
    test_positional_se: float
    linear_test_mean: float
    theta_semantic_mean: float
    m_positional_mean: float
    branch_semantic: tuple[str, ...]
    branch_positional: tuple[str, ...]
    held_semantic: float
    held_positional: float
    converged: float
    seconds: float

    @property
    def usable(self) -> bool:
        """Both starts held on at least half of the seeds."""
        return self.held_semantic >= 0.5 and self.held_positional >= 0.5

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usable"] = self.usable
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True)
class SimTransition:
    """Result of :func:`sim_transition`: all grid points, the crossing and what produced them.

    ``success``: ``alpha_c`` was located (the mean ``Delta`` crosses zero on the usable points)
    and every run met the gradient tolerance; ``message`` says which of the two failed.
    """

    spec: ModelSpec
    d: int
    seeds: tuple[int, ...]
    alphas: tuple[float, ...]
    settings: TrainSettings
    points: tuple[TransitionPoint, ...]
    crossing: Crossing
    seed_crossings: tuple[float | None, ...]
    require_held: bool
    seconds: float
    version: str

    @property
    def alpha_c(self) -> float | None:
        return self.crossing.alpha_c

    @property
    def success(self) -> bool:
        """``alpha_c`` located and every run converged."""
        return self.alpha_c is not None and all(p.converged == 1.0 for p in self.points)

    @property
    def message(self) -> str:
        """One line: ``alpha_c`` or why there is none, and the runs that did not converge."""
        runs = 2 * len(self.seeds) * len(self.points)
        stuck = round(sum((1.0 - p.converged) * 2 * len(self.seeds) for p in self.points))
        found = (f"alpha_c = {self.alpha_c:.4g} ({self.crossing.reason})" if self.alpha_c is not None
                 else f"no alpha_c ({self.crossing.reason})")
        return f"{found}; {runs - stuck} of {runs} runs met the gradient tolerance"

    def seed_summary(self) -> dict[str, Any]:
        """Second estimate: the crossing of each seed's own ``Delta`` curve (seeds share the teacher
        across the grid, so their offsets persist in ``alpha``), mean and standard error over the
        seeds that cross."""
        found = [a for a in self.seed_crossings if a is not None]
        mean, se = _mean_se(found) if found else (None, None)
        return {"alpha_c": list(self.seed_crossings), "mean": mean,
                "se": se if len(found) > 1 else None, "n_crossing": len(found)}

    def to_dict(self) -> dict[str, Any]:
        settings = asdict(self.settings)
        settings["lr"] = self.settings.learning_rate
        return {
            "params": {
                "spec": self.spec.to_dict(),
                "d": self.d,
                "seeds": list(self.seeds),
                "alphas": list(self.alphas),
                "inits": ["semantic", "positional"],
                "train": settings,
                "require_held": self.require_held,
                "version": self.version,
                "revision": numerics_revision("sim"),
            },
            "alpha_c": self.crossing.alpha_c,
            "crossing": self.crossing.to_dict(),
            "per_seed": self.seed_summary(),
            "points": [p.to_dict() for p in self.points],
            "seconds": self.seconds,
            "success": self.success,
            "message": self.message,
        }

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows (one per alpha x seed) for a CSV: delta, both training errors and branches."""
        out = []
        for p in self.points:
            for k, seed in enumerate(self.seeds):
                out.append({
                    "alpha": p.alpha, "seed": seed, "d": self.d, "delta": p.delta[k],
                    "train_semantic": p.train_semantic[k],
                    "train_positional": p.train_positional[k],
                    "branch_semantic": p.branch_semantic[k],
                    "branch_positional": p.branch_positional[k],
                    "delta_mean": p.delta_mean, "delta_se": p.delta_se, "usable": p.usable,
                    "alpha_c": self.crossing.alpha_c,
                })
        return out


def sim_transition(
    spec: ModelSpec,
    alphas: Sequence[float],
    d: int,
    seeds: Sequence[int],
    settings: TrainSettings | None = None,
    require_held: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SimTransition:
    """Measure ``Delta = eps_t(semantic start) - eps_t(positional start)`` on an ``alpha`` grid and
    locate its zero ``alpha_c_sim`` (docs/model.md (5.2); the starts of docs/simulation.md).

    One batched :func:`attnphase.sim.simulate.simulate` call per ``alpha`` trains every seed from
    both informed starts (same dataset per seed, so ``Delta`` is a paired difference). With
    ``require_held`` (default) grid points where either start left its mechanism on more than half
    of the seeds are not used for the crossing. ``settings`` default: :data:`DEFAULT_SETTINGS`.
    ``progress(stopped, runs)`` counts the runs of the whole grid that have stopped.
    """
    from attnphase import __version__
    from attnphase.sim.simulate import simulate

    grid = tuple(float(a) for a in alphas)
    if not grid:
        raise ValueError("need at least one alpha")
    check_alpha(grid)
    if any(b <= a for a, b in zip(grid, grid[1:], strict=False)):
        raise ValueError("alphas must be strictly increasing")
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("need at least one seed")
    if spec.rank != 1 or spec.teacher_rank != 1:
        raise ValueError("sim_transition classifies scalar overlaps: use rank 1, teacher rank 1")
    settings = settings or TrainSettings(**DEFAULT_SETTINGS)
    t0 = time.perf_counter()
    points = []
    runs = 2 * len(seeds)
    for i, a in enumerate(grid):
        ta = time.perf_counter()
        inner = None if progress is None else (
            lambda done, _total, i=i: progress(i * runs + done, len(grid) * runs))
        res = simulate(spec, alpha=a, d=d, seeds=seeds, inits=("semantic", "positional"),
                       settings=settings, progress=inner)
        by = {(r.seed, r.init): r for r in res.runs}
        sem = [by[(s, "semantic")] for s in seeds]
        pos = [by[(s, "positional")] for s in seeds]
        delta = [x.train_loss - y.train_loss for x, y in zip(sem, pos, strict=True)]
        dm, dse = _mean_se(delta)
        tsm, tss = _mean_se([x.test_error for x in sem])
        tpm, tps = _mean_se([y.test_error for y in pos])
        point = TransitionPoint(
            alpha=a, n=res.n, delta=tuple(delta), delta_mean=dm, delta_se=dse,
            train_semantic=tuple(x.train_loss for x in sem),
            train_positional=tuple(y.train_loss for y in pos),
            test_semantic_mean=tsm, test_semantic_se=tss,
            test_positional_mean=tpm, test_positional_se=tps,
            linear_test_mean=float(np.mean([x.linear_test_error for x in sem])),
            theta_semantic_mean=float(np.mean([abs(float(cast(float, x.theta))) for x in sem])),
            m_positional_mean=float(np.mean([abs(float(cast(float, y.m))) for y in pos])),
            branch_semantic=tuple(x.branch for x in sem),
            branch_positional=tuple(y.branch for y in pos),
            held_semantic=float(np.mean([x.branch == "semantic" for x in sem])),
            held_positional=float(np.mean([y.branch == "positional" for y in pos])),
            converged=float(np.mean([r.converged for r in res.runs])),
            seconds=time.perf_counter() - ta,
        )
        log.info("alpha=%g Delta=%.3g +- %.2g held sem %.2f pos %.2f (%.1f s)", a, dm, dse,
                 point.held_semantic, point.held_positional, point.seconds)
        points.append(point)
    usable = [p.usable for p in points] if require_held else None
    crossing = find_crossing(grid, [p.delta_mean for p in points],
                             [p.delta_se for p in points], usable)
    seed_crossings = []
    for k in range(len(seeds)):
        held = [p.branch_semantic[k] == "semantic" and p.branch_positional[k] == "positional"
                for p in points]
        c = find_crossing(grid, [p.delta[k] for p in points], None,
                          held if require_held else None)
        seed_crossings.append(c.alpha_c)
    return SimTransition(
        spec=spec, d=int(d), seeds=seeds, alphas=grid, settings=settings, points=tuple(points),
        crossing=crossing, seed_crossings=tuple(seed_crossings), require_held=require_held, seconds=time.perf_counter() - t0,
        version=__version__,
    )


__all__ = [
    "DEFAULT_SETTINGS",
    "Crossing",
    "SimTransition",
    "TransitionPoint",
    "find_crossing",
    "sim_transition",
]
