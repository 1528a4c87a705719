"""The simulator's training settings, :class:`TrainSettings`, described once and free of torch.

Each field is described by the schema (:func:`attnphase.spec.schema.described`, group
``training``), its default read from :data:`attnphase.spec.defaults.TRAIN_SETTINGS`: the schema
checks its value and makes the training flags of the commands that train (the common settings; the
rare ones, ``FieldInfo.rare``, as ``--train NAME=VALUE``) and the ``simulation`` sweep kind's
``train_<name>`` parameters. This module imports no torch, so that the command line can build its
flags on the theory-only install; :mod:`attnphase.sim.train` trains with these settings and
re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnphase.spec.defaults import DEFAULT_LR, TRAIN_SETTINGS
from attnphase.spec.schema import Parameter, changes_from_items, described, parameters

if TYPE_CHECKING:
    import torch

#: the optimisers of :class:`TrainSettings`
OPTIMIZERS = ("gd", "adam")
#: the floating-point types a run trains in
DTYPE_NAMES = ("float32", "float64")
#: how the gradient is taken: ``auto`` (analytic for the identity value), ``analytic`` or ``autograd``
GRAD_MODES = ("auto", "analytic", "autograd")

_T = {"group": "training"}


@dataclass(frozen=True)
class TrainSettings:
    """Optimiser settings (defaults: :data:`attnphase.spec.defaults.TRAIN_SETTINGS`; docs/simulation.md).

    ``lr`` ``None`` means the optimiser's own step (:data:`attnphase.spec.defaults.DEFAULT_LR`:
    0.15 for GD on the summed loss ``R``, 0.01 for Adam). ``momentum`` is an optional heavy-ball
    term for GD (0 = plain GD, the reference). ``grad``: ``auto`` (analytic for the identity
    value), ``analytic`` or ``autograd``.

    Raises
    ------
    ValueError
        One line, for a setting out of range, an unknown optimiser, gradient mode, dtype or
        device, or a CUDA device on a machine without CUDA.
    """

    optimizer: str = described(TRAIN_SETTINGS["optimizer"], "str", "optimiser", choices=OPTIMIZERS, **_T)
    lr: float | None = described(TRAIN_SETTINGS["lr"], "float", "step size (auto: the optimiser's own)",
                                 minimum=0.0, strict_minimum=True, none="auto", **_T)
    max_steps: int = described(TRAIN_SETTINGS["max_steps"], "int", "step cap per run", minimum=0, **_T)
    tol: float = described(TRAIN_SETTINGS["tol"], "float", "stop a run when ||grad R||/sqrt(d) < tol",
                           minimum=0.0, **_T)
    momentum: float = described(TRAIN_SETTINGS["momentum"], "float", "heavy-ball momentum for gd (0: plain GD)",
                                minimum=0.0, maximum=1.0, strict_maximum=True, **_T)
    betas: tuple[float, float] = described(TRAIN_SETTINGS["betas"], "floats", "Adam's decay rates beta1,beta2, "
                                           "each in [0, 1)", rare=True, **_T)
    eps: float = described(TRAIN_SETTINGS["eps"], "float", "Adam's denominator offset", minimum=0.0,
                           strict_minimum=True, rare=True, **_T)
    grad: str = described(TRAIN_SETTINGS["grad"], "str", "gradient: analytic for the identity value (auto), "
                          "analytic or autograd", choices=GRAD_MODES, rare=True, **_T)
    dtype: str = described(TRAIN_SETTINGS["dtype"], "str", "floating-point type", choices=DTYPE_NAMES, **_T)
    device: str = described(TRAIN_SETTINGS["device"], "str", "cpu or cuda (cuda:N)", **_T)
    log_every: int = described(TRAIN_SETTINGS["log_every"], "int", "steps between two log lines (0: none)",
                               minimum=0, rare=True, **_T)

    def __post_init__(self) -> None:
        for p in train_parameters():  # (kinds, choices and bounds: the schema)
            object.__setattr__(self, p.name, p.coerce(getattr(self, p.name)))
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        check_device(self.device)

    @property
    def learning_rate(self) -> float:
        """The step: ``lr``, or the optimiser's own where it is ``None``."""
        return DEFAULT_LR[self.optimizer] if self.lr is None else float(self.lr)

    @property
    def torch_dtype(self) -> torch.dtype:
        """``dtype`` as a torch dtype (imports torch)."""
        import torch

        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]


def check_device(device: str) -> None:
    """``ValueError`` for an unknown device or a CUDA request on a machine without CUDA (torch is
    imported only for a CUDA device)."""
    if device == "cpu":
        return
    if device.startswith("cuda"):
        try:
            import torch
        except ImportError:
            raise ValueError(f"device {device!r} requested but torch is not installed") from None
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
        return
    raise ValueError(f"unknown device {device!r}; choose cpu or cuda")


def train_parameters() -> tuple[Parameter, ...]:
    """The :class:`~attnphase.spec.schema.Parameter` of every :class:`TrainSettings` field, in
    field order."""
    return parameters(TrainSettings)


def train_changes(items: Sequence[str], option: str = "--train") -> dict[str, Any]:
    """``NAME=VALUE`` items (``option``'s, e.g. ``--train eps=1e-10``) as the
    :class:`TrainSettings` fields they set, checked by the schema
    (:func:`attnphase.spec.schema.changes_from_items`)."""
    return changes_from_items(train_parameters(), items, option)
