"""The full counting-task experiment: restricted training, attention maps, continuation.

For every seed ``s`` (``seed, seed + 1, ...``) one dataset is drawn (numpy seed ``s``) and
shared by the variants; each variant (``positional``, ``semantic``) is initialised with
torch seed ``s`` and trained with Adam (:func:`train_model`), then moved into the
unrestricted architecture and continued with plain SGD (:func:`continue_sgd`, batch seed
``s + 10_000``). As a yardstick for "how far can this SGD move parameters in this many
steps", a freshly initialised unrestricted model (torch seed ``s + 20_000``) is run through
the same SGD (``reference``). The sharper yardstick is the ``control``: the same SGD
from the same start with the same batches but with the restriction kept; the distance
between the unrestricted and the control end points is what the new freedom alone caused.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from attnphase._revision import numerics_revision
from attnphase.histogram.data import DataConfig, HistogramData, make_dataset
from attnphase.histogram.model import ATTENTIONS, ModelConfig, build_model, to_unrestricted
from attnphase.histogram.train import (
    ContinuationConfig,
    ContinuationResult,
    TrainConfig,
    TrainResult,
    attention_distance,
    continue_sgd,
    flat_parameters,
    parameter_distance,
    train_model,
)

__all__ = [
    "ExperimentConfig",
    "ExperimentResult",
    "AttentionExamples",
    "QUICK",
    "FULL",
    "run_experiment",
]

log = logging.getLogger(__name__)

CONTINUATION_SEED_OFFSET = 10_000
REFERENCE_SEED_OFFSET = 20_000


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines one run of the counting experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    d: int = 64
    hidden: int = 128
    train: TrainConfig = field(default_factory=TrainConfig)
    continuation: ContinuationConfig = field(default_factory=ContinuationConfig)
    variants: tuple[str, ...] = ("positional", "semantic")
    seeds: int = 3
    seed: int = 0
    n_examples: int = 3
    reference: bool = True
    control: bool = True

    def __post_init__(self) -> None:
        if not self.variants:
            raise ValueError("at least one variant is needed")
        for v in self.variants:
            if v not in ATTENTIONS:
                raise ValueError(f"variant must be one of {', '.join(ATTENTIONS)}, got {v!r}")
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants repeat: {','.join(self.variants)}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if not 1 <= self.n_examples <= self.data.n_val:
            raise ValueError(
                f"examples must be between 1 and the validation size {self.data.n_val}, "
                f"got {self.n_examples}"
            )
        ModelConfig(L=self.data.L, T=self.data.T, d=self.d, hidden=self.hidden)  # validates

    def model_config(self, attention: str) -> ModelConfig:
        return ModelConfig(L=self.data.L, T=self.data.T, d=self.d, hidden=self.hidden,
                           attention=attention)

    def to_dict(self) -> dict:
        return asdict(self)


#: Default (paper-sized) configuration: L=10, T=15, d=64, three seeds.
FULL = ExperimentConfig()

#: The documented quick configuration (docs/histogram.md): both variants, one seed,
#: 2000 Adam steps and 500 SGD steps (timings in docs/histogram.md).
QUICK = replace(
    FULL,
    seeds=1,
    train=replace(FULL.train, steps=2000, eval_every=100),
    continuation=replace(FULL.continuation, steps=500, eval_every=50),
)


@dataclass(frozen=True)
class AttentionExamples:
    """Attention maps on a few validation sequences of the first seed.

    ``maps[label]`` has shape ``(n_examples, L, L)``; labels are the variant names for the
    trained restricted models and ``"<variant> -> both (SGD)"`` after the continuation.
    """

    seed: int
    tokens: np.ndarray
    maps: dict[str, np.ndarray]

    def to_dict(self) -> dict:
        return {"seed": self.seed, "tokens": self.tokens.tolist(),
                "maps": {k: v.tolist() for k, v in self.maps.items()}}


@dataclass(frozen=True)
class ExperimentResult:
    """All runs of one experiment, self-describing (config, version, device, timings).

    ``continuation[i]`` continues ``training[i]`` in the unrestricted model;
    ``control[i]`` is the same SGD (same batches) with the restriction kept, and
    ``divergence[i]`` how far apart the two end points are (``parameter``: distance
    relative to the start's norm, ``attention``: mean relative Frobenius distance of the
    maps on the probe sequences, control as reference). ``reference[k]`` belongs to
    seed ``config.seed + k``. Continuation results carry the SGD batch seed in ``seed``.
    """

    config: ExperimentConfig
    version: str
    device: str
    training: list[TrainResult]
    continuation: list[ContinuationResult]
    control: list[ContinuationResult]
    divergence: list[dict[str, float]]
    reference: list[ContinuationResult]
    examples: AttentionExamples
    wall_s: float

    def summary(self) -> dict:
        """The compact JSON summary: per variant and seed, accuracies and continuation changes."""
        runs = []
        for i, (tr, c) in enumerate(zip(self.training, self.continuation, strict=True)):
            extra: dict = {}
            if self.control:
                ctrl = self.control[i]
                extra["control"] = {
                    "relative_parameter_change": ctrl.relative_parameter_change,
                    "attention_change": ctrl.attention_change,
                    "train_loss_after": ctrl.train_loss_after,
                    "val_accuracy_after": ctrl.val_accuracy_after,
                }
                extra["unrestricted_vs_control"] = self.divergence[i]
            runs.append({
                "variant": tr.attention,
                "seed": tr.seed,
                "train_accuracy": tr.final_train_accuracy,
                "val_accuracy": tr.final_val_accuracy,
                "train_loss": tr.final_train_loss,
                "val_loss": tr.final_val_loss,
                "train_wall_s": tr.wall_s,
                "continuation": _cont_summary(c),
                **extra,
            })
        return {
            "command": "histogram",
            "version": self.version,
            "revision": numerics_revision("histogram"),
            "device": self.device,
            "config": self.config.to_dict(),
            "runs": runs,
            "reference": [
                {"seed": self.config.seed + k} | _cont_summary(r)
                for k, r in enumerate(self.reference)
            ],
            "wall_s": self.wall_s,
        }

    def to_dict(self) -> dict:
        """Everything, curves and attention maps included."""
        return {
            **self.summary(),
            "training": [t.to_dict() for t in self.training],
            "continuation_runs": [c.to_dict() for c in self.continuation],
            "control_runs": [c.to_dict() for c in self.control],
            "reference_runs": [c.to_dict() for c in self.reference],
            "examples": self.examples.to_dict(),
        }


def _cont_summary(c: ContinuationResult) -> dict:
    return {
        "optimizer": "sgd",
        "lr": c.config.lr,
        "steps": c.config.steps,
        "relative_parameter_change": c.relative_parameter_change,
        "qk_relative_change": c.qk_relative_change,
        "attention_change": c.attention_change,
        "attention_max_abs_change": c.attention_max_abs_change,
        "blocked_half_weight": c.blocked_half_weight,
        "grad_norm_start": c.grad_norm_start,
        "train_loss_before": c.train_loss_before,
        "train_loss_after": c.train_loss_after,
        "val_accuracy_before": c.val_accuracy_before,
        "val_accuracy_after": c.val_accuracy_after,
    }


def run_experiment(
    config: ExperimentConfig,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> ExperimentResult:
    """Run the counting experiment described by ``config`` (see the module docstring)."""
    from attnphase import __version__

    device = torch.device(device)
    t0 = time.perf_counter()
    training: list[TrainResult] = []
    continuation: list[ContinuationResult] = []
    control: list[ContinuationResult] = []
    divergence: list[dict[str, float]] = []
    reference: list[ContinuationResult] = []
    example_maps: dict[str, np.ndarray] = {}
    example_tokens: np.ndarray | None = None
    for k in range(config.seeds):
        s = config.seed + k
        data: HistogramData = make_dataset(config.data, s)
        probe = torch.as_tensor(data.x_val[: config.n_examples], device=device)
        if k == 0:
            example_tokens = data.x_val[: config.n_examples].copy()
        for variant in config.variants:
            model = build_model(config.model_config(variant), s).to(device)
            tr = train_model(model, data, config.train, s, device, progress,
                             desc=f"{variant} seed {s}")
            training.append(tr)
            free, cr = continue_sgd(model, data, config.continuation,
                                    s + CONTINUATION_SEED_OFFSET, device, progress,
                                    desc=f"{variant}->both seed {s}")
            continuation.append(cr)
            if config.control:
                ctrl, cc = continue_sgd(model, data, config.continuation,
                                        s + CONTINUATION_SEED_OFFSET, device, progress,
                                        desc=f"{variant} control seed {s}",
                                        keep_restriction=True)
                control.append(cc)
                vprobe = torch.as_tensor(data.x_val[: config.continuation.n_probe],
                                         device=device)
                with torch.no_grad():
                    divergence.append({
                        "parameter": parameter_distance(
                            free, ctrl, flat_parameters(to_unrestricted(model))),
                        "attention": attention_distance(free.attention(vprobe),
                                                        ctrl.attention(vprobe)),
                    })
            if k == 0:
                with torch.no_grad():
                    example_maps[variant] = model.attention(probe).cpu().numpy()
                    example_maps[f"{variant} -> both (SGD)"] = free.attention(probe).cpu().numpy()
        if config.reference:
            ref = build_model(config.model_config("both"), s + REFERENCE_SEED_OFFSET).to(device)
            _, rr = continue_sgd(ref, data, config.continuation, s + CONTINUATION_SEED_OFFSET,
                                 device, progress, desc=f"reference seed {s}")
            reference.append(rr)
    assert example_tokens is not None
    return ExperimentResult(
        config=config,
        version=__version__,
        device=str(device),
        training=training,
        continuation=continuation,
        control=control,
        divergence=divergence,
        reference=reference,
        examples=AttentionExamples(seed=config.seed, tokens=example_tokens, maps=example_maps),
        wall_s=time.perf_counter() - t0,
    )
