"""The result of a finite-size simulation (:class:`SimulationResult`, docs/simulation.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from attnphase._json import jsonable
from attnphase.results_records import (
    fmt_g,
    frozen,
    one_line,
)
from attnphase.spec.problem import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

    from attnphase.sim.simulate import RunResult


@dataclass(frozen=True, repr=False)
class SimulationResult:
    """Finite-``d`` training runs at one ``alpha`` (:func:`attnphase.simulate`).

    Attributes
    ----------
    spec : ModelSpec
        The model.
    d : int
        The embedding dimension.
    alpha : float
        The sample complexity.
    n : int
        Training samples per seed, ``round(alpha d)``.
    n_test : int
        Test samples per seed.
    seeds : tuple of int
        The seeds, one teacher, training and test set each.
    inits : tuple of str
        The starts.
    train : mapping
        The training settings (``lr`` resolved).
    runs : tuple of RunResult
        One record per seed and start (``m``, ``theta``, ``q`` in user units, docs/model.md
        (1.5); ``train_loss`` the empirical risk per dimension, docs/model.md (1.4);
        ``test_error`` and ``linear_test_error`` on fresh samples, docs/model.md (4.2), (4.3)).
    summary : mapping
        Mean and standard deviation over the runs, all and per start.
    batch_seconds : float
        The wall-clock time of the batched training.
    params : mapping
        The model, the training settings, the seeds and the versions.
    success : bool
        Every run met the gradient tolerance.
    message : str
        How the runs stopped and their mean test error, in one line a person can read.
    """

    spec: ModelSpec
    d: int
    alpha: float
    n: int
    n_test: int
    seeds: tuple[int, ...]
    inits: tuple[str, ...]
    train: Mapping[str, Any]
    runs: tuple[RunResult, ...] = field(repr=False)
    summary: Mapping[str, Any] = field(repr=False)
    batch_seconds: float
    params: Mapping[str, Any] = field(repr=False)
    success: bool
    message: str

    @classmethod
    def from_simulation(cls, res: Any) -> SimulationResult:
        """The user's view of the simulator's record (:class:`attnphase.sim.TrainingBatch`), its
        ``success`` and ``message`` included."""
        rec = res.to_dict()
        runs = tuple(res.runs)
        return cls(
            spec=res.spec, d=res.d, alpha=res.alpha, n=res.n, n_test=res.n_test, seeds=tuple(res.seeds),
            inits=tuple(res.inits), train=frozen(rec["params"]["train"]), runs=runs,
            summary=frozen(rec["summary"]), batch_seconds=res.batch_seconds, params=frozen(rec["params"]),
            success=bool(res.success), message=str(res.message),
        )

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase simulate --json`` prints."""
        return {"params": jsonable(self.params), "runs": [jsonable(frozen(r.to_dict())) for r in self.runs],
                "summary": jsonable(self.summary), "success": self.success, "message": self.message}

    def __repr__(self) -> str:
        mean = self.summary.get("mean", {})
        keys = [k for k in ("test_error", "train_loss", "m", "theta") if k in mean]
        return "\n".join([
            f"SimulationResult(d={self.d}, alpha={self.alpha:g}, omega={self.spec.omega:g}, runs={len(self.runs)}, "
            f"success={self.success})",
            "  mean over runs: " + ", ".join(f"{k} = {fmt_g(mean[k])}" for k in keys),
            f"  batch_seconds = {self.batch_seconds:.3g}",
            f"  message: {one_line(self.message)}"])

    def to_frame(self) -> pd.DataFrame:
        """One row per run: ``d``, ``alpha``, ``n`` and the run's record (the overlap matrices
        left out; they are in :meth:`to_dict`)."""
        import pandas as pd  # (pandas costs ~0.3 s to import: only where a frame is asked for)

        cols = [f.name for f in fields(self.runs[0])] if self.runs else []
        rows = [{"d": self.d, "alpha": self.alpha, "n": self.n,
                 **{c: getattr(r, c) for c in cols if c != "overlaps"}} for r in self.runs]
        return pd.DataFrame(rows)
