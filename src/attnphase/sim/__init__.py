"""Finite-``d`` simulator in PyTorch (docs/model.md section 1, protocol in docs/simulation.md).

``data``: tokens, positional embeddings, teacher, labels, seeded and reproducible.
``models``: tied / untied / causal attention students with identity, low-rank or full value,
batched Gram-form risk with analytic or autograd gradient, and the dense linear baseline.
``train``: batched full-batch GD / Adam over many runs at once.
``simulate``: the driver that returns per-run metrics in the units of docs/model.md (1.5).
"""

from attnphase.sim.data import Dataset, make_dataset, n_samples, positional_embeddings
from attnphase.sim.simulate import RunResult, TrainingBatch, classify, parse_inits, simulate
from attnphase.sim.train import INITS, OPTIMIZERS, TrainSettings, init_params, train

__all__ = [
    "INITS",
    "OPTIMIZERS",
    "Dataset",
    "RunResult",
    "TrainingBatch",
    "TrainSettings",
    "classify",
    "init_params",
    "make_dataset",
    "n_samples",
    "parse_inits",
    "positional_embeddings",
    "simulate",
    "train",
]
