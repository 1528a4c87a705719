"""Simulation driver: datasets x starts trained in one batch, metrics per run (docs/model.md
section 1; the training protocol of docs/simulation.md).

Metrics are in the units of docs/model.md (1.5): ``m = pi_1^T Q / d`` (the full ``m_l = pi_l^T Q / d`` in
``overlaps``), ``theta = Q^T Q* / d``, ``q = Q^T Q / d`` (scalars for ``r = r* = 1``, matrices
otherwise),
``train_loss = R(Q) / d`` (ridge term included, ``eps_t``), ``test_error`` the mean per-sample
``||y - yhat||^2 / (2d)`` on fresh samples (``eps_g``), ``linear_test_error`` the same for the
closed-form ridge baseline ``yhat = B x`` fitted on the same training set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from attnphase._revision import numerics_revision
from attnphase.sim.data import Dataset, make_dataset, n_samples
from attnphase.sim.models import (
    is_untied,
    linear_errors,
    linear_fit,
    query_columns,
    test_errors,
)
from attnphase.sim.train import INITS, TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec

METRICS = ("m", "theta", "q", "train_loss", "test_error", "linear_test_error", "steps", "seconds")


def _scalar_or_list(a: np.ndarray) -> float | list:
    return float(a.reshape(-1)[0]) if a.size == 1 else a.tolist()


def classify(m: float, theta: float, threshold: float = 0.1) -> str:
    """Which mechanism a rank-1 run landed in: ``semantic`` (``|theta| >= threshold > |m|``),
    ``positional`` (``|m| >= threshold > |theta|``), ``trivial`` (both below) or ``mixed`` (both
    above).
    """
    sem, pos = abs(theta) >= threshold, abs(m) >= threshold
    if sem and not pos:
        return "semantic"
    if pos and not sem:
        return "positional"
    return "mixed" if sem else "trivial"


@dataclass(frozen=True)
class RunResult:
    """One training run (one seed, one start). Matrices are nested lists for ``r > 1``."""

    seed: int
    init: str
    m: float | list
    theta: float | list
    q: float | list
    train_loss: float
    test_error: float
    linear_test_error: float
    steps: int
    converged: bool
    stop: str
    grad_norm: float
    seconds: float
    branch: str
    overlaps: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrainingBatch:
    """All runs of one ``(spec, d, alpha)`` plus the parameters that produced them (the simulator's
    record; :class:`attnphase.SimulationResult` is the user's view of it)."""

    spec: ModelSpec
    d: int
    alpha: float
    n: int
    n_test: int
    seeds: tuple[int, ...]
    inits: tuple[str, ...]
    settings: TrainSettings
    runs: tuple[RunResult, ...]
    batch_seconds: float
    version: str

    def summary(self) -> dict[str, Any]:
        """Mean and std over runs of the scalar metrics (all runs, and per start in ``by_init``)."""

        def stats(runs: Sequence[RunResult]) -> dict[str, Any]:
            mean: dict[str, float] = {}
            std: dict[str, float] = {}
            for key in METRICS:
                vals = [getattr(r, key) for r in runs]
                if not all(isinstance(v, (int, float)) for v in vals):
                    continue
                arr = np.asarray(vals, dtype=float)
                mean[key] = float(arr.mean())
                std[key] = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
            mean["converged"] = float(np.mean([r.converged for r in runs]))
            return {"mean": mean, "std": std, "n_runs": len(runs)}

        out = stats(self.runs)
        out["by_init"] = {
            name: stats([r for r in self.runs if r.init == name])
            for name in self.inits
        }
        return out

    def to_dict(self) -> dict[str, Any]:
        settings = asdict(self.settings)
        settings["lr"] = self.settings.learning_rate
        params = {
            "d": self.d,
            "alpha": self.alpha,
            "n": self.n,
            "n_test": self.n_test,
            "seeds": list(self.seeds),
            "inits": list(self.inits),
            "spec": self.spec.to_dict(),
            "train": settings,
            "batched_runs": len(self.runs),
            "batch_seconds": self.batch_seconds,
            "version": self.version,
            "revision": numerics_revision("sim"),
        }
        return {
            "params": params,
            "runs": [r.to_dict() for r in self.runs],
            "summary": self.summary(),
            "success": self.success,
            "message": self.message,
        }

    @property
    def success(self) -> bool:
        """Every run met the gradient tolerance (stopped with ``stop == "tol"``)."""
        return all(r.stop == "tol" for r in self.runs)

    @property
    def message(self) -> str:
        """One line: the runs counted by how they stopped, and the mean test error."""
        stops: dict[str, int] = {}
        for r in self.runs:
            stops[r.stop] = stops.get(r.stop, 0) + 1
        seeds = f"seed {self.seeds[0]}" if len(self.seeds) == 1 else f"seeds {self.seeds[0]}..{self.seeds[-1]}"
        mean = float(np.mean([r.test_error for r in self.runs])) if self.runs else float("nan")
        return (f"{len(self.runs)} runs at d = {self.d}, alpha = {self.alpha:g} ({seeds}; start "
                f"{', '.join(self.inits)}): {stops.get('tol', 0)} of {len(self.runs)} met the gradient tolerance"
                + "".join(f", {k} {v}" for k, v in stops.items() if k != "tol")
                + f"; mean test error {mean:.6g}")


def parse_inits(text: str | Sequence[str], heads: int = 1) -> tuple[str, ...]:
    """``"all"``, ``"semantic"``, ``"semantic,random"`` or a sequence -> validated tuple of
    starts; ``"all"`` is every start of a student with ``heads`` heads (``specialised`` from two
    heads on)."""
    names = text.split(",") if isinstance(text, str) else list(text)
    names = [n.strip() for n in names if n.strip()]
    if names == ["all"]:
        return INITS if heads > 1 else tuple(i for i in INITS if i != "specialised")
    if not names:
        raise ValueError(f"no init given; choose from {', '.join(INITS)} or all")
    for name in names:
        if name not in INITS:
            raise ValueError(f"unknown init {name!r}; choose from {', '.join(INITS)} or all")
    return tuple(dict.fromkeys(names))


def simulate(
    spec: ModelSpec,
    *,
    alpha: float,
    d: int,
    seeds: Sequence[int] = (0,),
    inits: Sequence[str] = ("semantic",),
    settings: TrainSettings | None = None,
    n_test: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TrainingBatch:
    """Train every ``seed x init`` run in one batched computation and measure it (docs/simulation.md).

    ``alpha`` and ``d`` are keywords, so that no call can swap them (:func:`attnphase.simulate`
    takes them in this order, ``alpha`` first). Each seed has its own dataset (teacher, training
    set, fresh test set); starts of the same seed share it. ``n = round(alpha d)`` training
    sequences; ``n_test`` (default ``max(n, 1000)``) test
    ones. ``progress(stopped, runs)`` is called as the training advances (:func:`train`).
    """
    from attnphase import __version__

    settings = settings or TrainSettings()
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d}")
    d = int(d)
    if d < spec.tokens:
        raise ValueError(f"d must be >= the number of tokens {spec.tokens}, got {d}")
    n = n_samples(alpha, d)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("need at least one seed")
    inits = parse_inits(inits, spec.heads)
    dtype, device = settings.torch_dtype, settings.device
    keep = spec.value != "identity"
    datasets = [
        make_dataset(spec, d, n, s, n_test=n_test, dtype=dtype, device=device, keep_labels=keep)
        for s in seeds
    ]
    batch = stack_batch(datasets)
    params0 = init_params(spec, datasets, inits)
    result = train(spec, batch, params0, settings, progress)
    del batch
    test = test_errors(spec, [ds.test_chunks(keep) for ds in datasets], result.params, d)
    lin = _linear_test(spec, datasets)
    runs = []
    for i, ds in enumerate(datasets):
        for k, name in enumerate(inits):
            ov = overlaps(spec, ds, {key: v[i, k] for key, v in result.params.items()})
            m1 = ov["m"][0]
            runs.append(
                RunResult(
                    seed=ds.seed,
                    init=name,
                    m=_scalar_or_list(m1),
                    theta=_scalar_or_list(ov["theta"]),
                    q=_scalar_or_list(ov["q"]),
                    train_loss=float(result.risk[i, k]) / d,
                    test_error=float(test[i, k]),
                    linear_test_error=float(lin[i]),
                    steps=int(result.steps[i, k]),
                    converged=result.stop[i][k] == "tol",
                    stop=result.stop[i][k],
                    grad_norm=float(result.grad_norm[i, k]),
                    seconds=result.seconds,
                    branch=(classify_heads(ov["m"], ov["theta"]) if spec.heads > 1
                            else classify(float(m1.reshape(-1)[0]), float(ov["theta"].reshape(-1)[0]))),
                    overlaps={key: v.tolist() for key, v in ov.items()},
                )
            )
    return TrainingBatch(
        spec=spec,
        d=d,
        alpha=float(alpha),
        n=n,
        n_test=datasets[0].n_test,
        seeds=seeds,
        inits=inits,
        settings=settings,
        runs=tuple(runs),
        batch_seconds=result.seconds,
        version=__version__,
    )


def overlaps(
    spec: ModelSpec, ds: Dataset, params: dict[str, torch.Tensor]
) -> dict[str, np.ndarray]:
    """``m (L x r)``, ``theta (r x r*)``, ``q (r x r)`` of the query (and ``*_K`` of the key,
    untied)."""
    d, r = ds.d, query_columns(spec)
    P = params["P"].to(torch.float64).cpu()
    Pi = ds.Pi.to(torch.float64).cpu()
    Qs = ds.Q_star.to(torch.float64).cpu()
    out: dict[str, np.ndarray] = {}
    mats = [("", P[:, :r])] + ([("_K", P[:, r:])] if is_untied(spec) else [])
    for suffix, Q in mats:
        out["m" + suffix] = (Pi @ Q / d).numpy()
        out["theta" + suffix] = (Q.T @ Qs / d).numpy()
        out["q" + suffix] = (Q.T @ Q / d).numpy()
        if ds.means is not None:  # Gaussian-mixture tokens: s_k = mu_k^T Q / d (docs/model.md (9.1))
            out["s" + suffix] = (ds.means.to(torch.float64).cpu() @ Q / d).numpy()
    if "vh" in params:  # trained head gains v_h (docs/model.md (11.1))
        out["gains"] = (params["vh"].to(torch.float64).cpu().reshape(-1) / math.sqrt(d)).numpy()
    return out


def classify_heads(m: np.ndarray, theta: np.ndarray, threshold: float = 0.1) -> str:
    """Which state a run with several heads landed in, from each head's :func:`classify` on its
    first token's ``m`` (column of the ``L x H`` overlaps) and its first ``theta`` (row of
    ``H x r*``), as for one head: ``semantic`` or
    ``positional`` where every head is, ``specialised`` where some heads are semantic and the others
    positional, ``trivial`` where none learned, ``mixed`` otherwise (docs/model.md (11.1))."""
    kinds = {classify(float(m[0, k]), float(theta[k, 0])) for k in range(m.shape[1])}
    if len(kinds) == 1:
        return kinds.pop()
    return "specialised" if kinds <= {"semantic", "positional"} and len(kinds) == 2 else "mixed"


def _linear_test(spec: ModelSpec, datasets: Sequence[Dataset]) -> list[float]:
    """Test error of the closed-form linear baseline, per dataset."""
    out = []
    for ds in datasets:
        B = linear_fit(ds.Sxx.to(torch.float64), ds.Syx.to(torch.float64), ds.d, spec.lam_lin)
        total, count = 0.0, 0
        for c in ds.test_chunks():
            e = linear_errors(B, c["Sxx"].to(torch.float64), c["Syx"].to(torch.float64),
                              c["yy"].to(torch.float64), ds.d)
            total += float(e.sum())
            count += e.shape[0]
        out.append(total / count)
    return out


__all__ = [
    "RunResult",
    "TrainingBatch",
    "classify",
    "classify_heads",
    "parse_inits",
    "simulate",
    "overlaps",
]
