"""Which minimum does training find? Runs from random starts, classified by the state they reach
(docs/basins.md; the empirical risk of docs/model.md (1.4), overlaps of (1.5)).

Every run starts from ``Q0 = init_scale N(0, I)`` (the ``random`` start of :mod:`attnphase.sim.train`
rescaled: ``init_scale = 0.1`` is exactly the ``random`` start of :func:`attnphase.sim.simulate`),
is trained by :func:`attnphase.sim.train.train` and classified by
:func:`attnphase.sim.simulate.classify` (the thresholds of ``simulate``) into one of
:data:`BASIN_STATES`.

Batching: all ``omegas x seeds`` runs of one ``alpha`` share the same number of training
sequences and the student's risk does not depend on ``omega`` (only the labels do), so they are
trained as one batch (:func:`train_basins`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from attnphase.sim.data import make_dataset, n_samples
from attnphase.sim.models import test_errors
from attnphase.sim.simulate import classify, classify_heads, overlaps
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.defaults import training
from attnphase.spec.problem import ModelSpec

#: The states a run can reach (thresholds of :func:`attnphase.sim.simulate.classify`); with
#: several heads also ``specialised`` (:func:`attnphase.sim.simulate.classify_heads`).
BASIN_STATES = ("semantic", "positional", "mixed", "trivial", "specialised")


def basin_states(heads: int) -> tuple[str, ...]:
    """The states a student with ``heads`` heads can reach."""
    return BASIN_STATES if heads > 1 else BASIN_STATES[:-1]
#: Optimisers of the basin maps: plain GD, GD with heavy-ball momentum 0.9, Adam.
BASIN_OPTIMIZERS = ("gd", "momentum", "adam")
#: The heavy-ball coefficient of ``optimizer="momentum"``.
MOMENTUM = 0.9
#: The scale of the ``random`` start of :func:`attnphase.sim.train.init_params`.
_RANDOM_SCALE = 0.1


#: The training settings of the basin maps (``attnphase basins`` and the ``basins`` sweep kind;
#: :data:`attnphase.spec.defaults.TRAINING`).
BASIN_TRAINING: Mapping[str, Any] = MappingProxyType(training("basins"))


def basin_settings(optimizer: str = BASIN_TRAINING["optimizer"], lr: float | None = BASIN_TRAINING["lr"],
                   max_steps: int = BASIN_TRAINING["max_steps"], tol: float = BASIN_TRAINING["tol"],
                   dtype: str = BASIN_TRAINING["dtype"], device: str = BASIN_TRAINING["device"]) -> TrainSettings:
    """The :class:`TrainSettings` of one of :data:`BASIN_OPTIMIZERS` (``momentum``: GD with
    heavy-ball coefficient :data:`MOMENTUM`); defaults: :data:`BASIN_TRAINING`."""
    if optimizer not in BASIN_OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {', '.join(BASIN_OPTIMIZERS)}")
    return TrainSettings(optimizer="adam" if optimizer == "adam" else "gd", lr=lr,
                         momentum=MOMENTUM if optimizer == "momentum" else 0.0,
                         max_steps=max_steps, tol=tol, dtype=dtype, device=device, log_every=0)


def check_init_scale(init_scale: float) -> float:
    """``init_scale`` as a float; ``ValueError`` unless it is finite and > 0."""
    v = float(init_scale)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"init_scale must be > 0, got {init_scale}")
    return v


@dataclass(frozen=True)
class BasinRun:
    """One run from a random start: the state it reached and what it measured there."""

    seed: int
    state: str
    m: float
    theta: float
    q: float
    train_loss: float
    test_error: float
    steps: int
    stop: str


@dataclass(frozen=True)
class BasinPoint:
    """The runs of one ``(alpha, omega)`` (one per seed) and their statistics."""

    omega: float
    alpha: float
    d: int
    n: int
    init_scale: float
    runs: tuple[BasinRun, ...]
    seconds: float
    heads: int = 1

    @property
    def fractions(self) -> dict[str, float]:
        """Fraction of the runs in each state (:func:`basin_states`)."""
        k = max(len(self.runs), 1)
        return {s: sum(r.state == s for r in self.runs) / k for s in basin_states(self.heads)}

    def summary(self) -> dict[str, Any]:
        """Fractions, counts, mean and standard error over seeds of the errors, converged count."""
        out: dict[str, Any] = {f"frac_{s}": v for s, v in self.fractions.items()}
        out["n_runs"] = len(self.runs)
        for key in ("train_loss", "test_error"):
            a = np.array([getattr(r, key) for r in self.runs], dtype=float)
            out[key] = float(a.mean()) if a.size else float("nan")
            out[key + "_se"] = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0
        out["converged"] = sum(r.stop == "tol" for r in self.runs)
        out["mean_steps"] = float(np.mean([r.steps for r in self.runs])) if self.runs else 0.0
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"omega": self.omega, "alpha": self.alpha, "d": self.d, "n": self.n,
                "init_scale": self.init_scale, "seconds": self.seconds, **self.summary(),
                "runs": [asdict(r) for r in self.runs]}


def random_starts(spec: ModelSpec, datasets: Sequence[Any], init_scale: float) -> dict[str, torch.Tensor]:
    """``(D, 1, d, c)`` starting parameters ``init_scale N(0, 1)`` per dataset (the ``random``
    start of :func:`attnphase.sim.train.init_params`, rescaled)."""
    params = init_params(spec, datasets, ("random",))
    factor = check_init_scale(init_scale) / _RANDOM_SCALE
    return {k: v * factor if k in ("P", "W") else v for k, v in params.items()}


def train_basins(
    spec: ModelSpec,
    d: int,
    alpha: float,
    omegas: Sequence[float] | None = None,
    seeds: Sequence[int] = (0,),
    init_scale: float = 0.1,
    settings: TrainSettings | None = None,
    n_test: int | None = None,
) -> tuple[BasinPoint, ...]:
    """Train ``len(omegas) x len(seeds)`` runs from random starts in one batch; one
    :class:`BasinPoint` per ``omega`` (default: ``spec.omega`` alone), in the order given.

    Seed ``s`` draws the same teacher, tokens and start at every ``omega`` (only the labels
    change), so the fractions of neighbouring ``omega`` differ by the model, not by the draw.
    """
    settings = settings or basin_settings()
    init_scale = check_init_scale(init_scale)
    if isinstance(d, bool) or int(d) != d or d < max(2, spec.L):
        raise ValueError(f"d must be an integer >= max(2, L={spec.L}), got {d}")
    d = int(d)
    n = n_samples(alpha, d)
    omegas = (spec.omega,) if omegas is None else tuple(float(w) for w in omegas)
    seeds = tuple(int(s) for s in seeds)
    if not seeds or not omegas:
        raise ValueError("need at least one seed and one omega")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be >= 0, got {min(seeds)}")
    specs = [spec.replace(omega=w) for w in omegas]
    keep = spec.value != "identity"
    t0 = time.perf_counter()
    datasets = [make_dataset(sp, d, n, s, n_test=n_test, dtype=settings.torch_dtype,
                             device=settings.device, keep_labels=keep)
                for sp in specs for s in seeds]
    batch = stack_batch(datasets)
    result = train(spec, batch, random_starts(spec, datasets, init_scale), settings)
    del batch
    test = test_errors(spec, [ds.test_chunks(keep) for ds in datasets], result.params, d)
    seconds = time.perf_counter() - t0
    points = []
    for j, w in enumerate(omegas):
        runs = []
        for k, s in enumerate(seeds):
            i = j * len(seeds) + k
            ov = overlaps(spec, datasets[i], {key: v[i, 0] for key, v in result.params.items()})
            m, th, q = (float(ov[key].reshape(-1)[0]) for key in ("m", "theta", "q"))  # (the first head's)
            state = classify_heads(ov["m"], ov["theta"]) if spec.heads > 1 else classify(m, th)
            runs.append(BasinRun(seed=s, state=state, m=m, theta=th, q=q,
                                 train_loss=float(result.risk[i, 0]) / d,
                                 test_error=float(test[i, 0]), steps=int(result.steps[i, 0]),
                                 stop=result.stop[i][0]))
        points.append(BasinPoint(omega=w, alpha=float(alpha), d=d, n=n, init_scale=init_scale,
                                 runs=tuple(runs), seconds=seconds, heads=spec.heads))
    return tuple(points)


__all__ = ["BASIN_OPTIMIZERS", "BASIN_STATES", "basin_states", "MOMENTUM", "BasinPoint", "BasinRun",
           "basin_settings", "check_init_scale", "random_starts", "train_basins"]
