"""Finite-``d`` simulator in PyTorch (docs/model.md section 1, protocol in docs/simulation.md).

``data``: tokens, positional embeddings, teacher, labels, seeded and reproducible.
``models``: tied / untied / causal attention students with identity, low-rank or full value,
batched Gram-form risk with analytic or autograd gradient, and the dense linear baseline.
``train``: batched full-batch GD / Adam over many runs at once.
``simulate``: the driver that returns per-run metrics in the units of docs/model.md (1.5).

Needs torch (the ``sim`` extra): importing the package without it raises
:class:`attnphase._extras.MissingExtraError`, one line that names the extra.
"""

from attnphase._extras import require

require("torch", "the simulator (attnphase.sim)")

from attnphase.sim.data import Dataset, make_dataset, n_samples, positional_embeddings  # noqa: E402
from attnphase.sim.simulate import RunResult, TrainingBatch, classify, parse_inits, simulate  # noqa: E402
from attnphase.sim.train import INITS, OPTIMIZERS, TrainSettings, init_params, train  # noqa: E402

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
