"""The histogram (counting) task: one architecture, a positional and a semantic solution.

Sequences of ``L`` tokens over an alphabet of ``T``; the label at each position is how often
its token occurs. A one-layer transformer whose attention sees only positions, only token
identities, or both (:mod:`attnphase.histogram.model`) is trained in the restricted forms
and then continued without the restriction (:mod:`attnphase.histogram.train`), the
algorithmic illustration of the positional/semantic dichotomy of docs/model.md section 5.
See ``docs/histogram.md``. Needs torch (the ``sim`` extra): importing the package without it
raises :class:`attnphase._extras.MissingExtraError`, one line that names the extra.
"""

from __future__ import annotations

from attnphase._extras import require

require("torch", "the histogram task (attnphase.histogram)")

from attnphase.histogram.data import DataConfig, HistogramData, count_labels, make_dataset  # noqa: E402
from attnphase.histogram.experiment import (  # noqa: E402
    FULL,
    QUICK,
    AttentionExamples,
    ExperimentConfig,
    ExperimentResult,
    run_experiment,
)
from attnphase.histogram.model import (  # noqa: E402
    ATTENTIONS,
    HistogramTransformer,
    ModelConfig,
    attention_mask,
    build_model,
    to_unrestricted,
)
from attnphase.histogram.train import (  # noqa: E402
    ContinuationConfig,
    ContinuationResult,
    TrainConfig,
    TrainResult,
    continue_sgd,
    evaluate,
    train_model,
)

__all__ = [
    "ATTENTIONS",
    "FULL",
    "QUICK",
    "AttentionExamples",
    "ContinuationConfig",
    "ContinuationResult",
    "DataConfig",
    "ExperimentConfig",
    "ExperimentResult",
    "HistogramData",
    "HistogramTransformer",
    "ModelConfig",
    "TrainConfig",
    "TrainResult",
    "attention_mask",
    "build_model",
    "continue_sgd",
    "count_labels",
    "evaluate",
    "make_dataset",
    "run_experiment",
    "to_unrestricted",
    "train_model",
]
