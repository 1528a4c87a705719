"""Training and continuation for the counting task.

* :func:`train_model` trains a (possibly restricted) :class:`HistogramTransformer` with
  Adam on the cross-entropy over the ``L + 1`` count classes, recording loss/accuracy
  curves.
* :func:`continue_sgd` puts a trained model into the unrestricted architecture
  (:func:`to_unrestricted`) and continues with plain SGD, recording how far the parameters
  and the attention maps move. A trained restricted solution that is a genuine minimum of
  the unrestricted model should stay put (the finite-size counterpart of the positional
  and semantic minima of docs/simulation.md).

Everything is seeded through explicit generators; no global RNG state is consumed.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from attnphase.histogram.data import HistogramData
from attnphase.histogram.model import HistogramTransformer, to_unrestricted

__all__ = [
    "TrainConfig",
    "ContinuationConfig",
    "TrainResult",
    "ContinuationResult",
    "evaluate",
    "train_model",
    "continue_sgd",
    "relative_change",
    "attention_distance",
    "parameter_distance",
    "flat_parameters",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Adam training: ``steps`` minibatch steps of size ``batch_size``, curves every ``eval_every``.

    The training curve is evaluated on the first ``n_curve`` training sequences (to keep
    it cheap); the final training loss/accuracy use the whole training set.
    """

    steps: int = 4000
    batch_size: int = 128
    lr: float = 3e-3
    eval_every: int = 100
    n_curve: int = 2000

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.eval_every < 1 or self.n_curve < 1:
            raise ValueError("steps, batch_size, eval_every and n_curve must be >= 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"learning rate must be > 0, got {self.lr}")


@dataclass(frozen=True)
class ContinuationConfig:
    """Plain SGD (no momentum, no weight decay) in the unrestricted architecture.

    ``n_probe`` validation sequences are used to measure the attention-map change.
    """

    steps: int = 2000
    batch_size: int = 128
    lr: float = 0.05
    eval_every: int = 100
    n_probe: int = 500

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.eval_every < 1 or self.n_probe < 1:
            raise ValueError("continuation steps, batch_size, eval_every, n_probe must be >= 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"SGD learning rate must be > 0, got {self.lr}")


@dataclass(frozen=True)
class TrainResult:
    """Curves (lists indexed like ``step``) and final metrics of one training run.

    Training-curve points use ``config.n_curve`` sequences except the last, which (like
    ``final_train_*``) uses the whole training set.
    """

    attention: str
    seed: int
    config: TrainConfig
    step: list[int]
    train_loss: list[float]
    val_loss: list[float]
    train_accuracy: list[float]
    val_accuracy: list[float]
    final_train_loss: float
    final_val_loss: float
    final_train_accuracy: float
    final_val_accuracy: float
    wall_s: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["config"] = asdict(self.config)
        return d


@dataclass(frozen=True)
class ContinuationResult:
    """How far SGD in the unrestricted model moves a solution.

    ``relative_parameter_change`` is ``||theta - theta_0|| / ||theta_0||`` over all
    parameters; ``qk_relative_change`` the same for the query and key weights only;
    ``attention_change`` the mean over probe sequences of ``||A - A_0||_F / ||A_0||_F``
    and ``attention_max_abs_change`` the largest entry-wise change; ``blocked_half_weight``
    the Frobenius norm of the query/key columns acting on the previously blocked half,
    divided by the norm of all query/key weights (0 at the start; ``None`` for a model
    that was not restricted). ``grad_norm_start`` is the full-training-set gradient norm at
    the start. Curves are indexed like ``step`` (step 0 is the start). ``unrestricted`` is
    False for the control run that keeps the restriction mask (same SGD, same batches).
    """

    start: str
    seed: int
    config: ContinuationConfig
    unrestricted: bool
    step: list[int]
    relative_parameter_change_curve: list[float]
    attention_change_curve: list[float]
    val_accuracy_curve: list[float]
    relative_parameter_change: float
    qk_relative_change: float
    attention_change: float
    attention_max_abs_change: float
    blocked_half_weight: float | None
    grad_norm_start: float
    train_loss_before: float
    train_loss_after: float
    val_accuracy_before: float
    val_accuracy_after: float
    wall_s: float
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["config"] = asdict(self.config)
        return d


def _tensors(
    data: HistogramData, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.long, device=device)

    return t(data.x_train), t(data.y_train), t(data.x_val), t(data.y_val)


@torch.no_grad()
def evaluate(
    model: HistogramTransformer, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096
) -> tuple[float, float]:
    """Mean cross-entropy and token accuracy of ``model`` on ``(x, y)``."""
    was_training = model.training
    model.eval()
    total_loss = 0.0
    correct = 0
    for i in range(0, x.shape[0], batch_size):
        logits = model(x[i : i + batch_size])
        yy = y[i : i + batch_size]
        total_loss += float(
            nn.functional.cross_entropy(logits.flatten(0, 1), yy.flatten(), reduction="sum")
        )
        correct += int((logits.argmax(-1) == yy).sum())
    model.train(was_training)
    n = y.numel()
    return total_loss / n, correct / n


def _loss(model: HistogramTransformer, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    logits = model(xb)
    return nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten())


def train_model(
    model: HistogramTransformer,
    data: HistogramData,
    config: TrainConfig,
    seed: int,
    device: torch.device | str = "cpu",
    progress: bool = False,
    desc: str = "",
) -> TrainResult:
    """Train ``model`` in place with Adam; batches drawn with a generator seeded by ``seed``."""
    device = torch.device(device)
    model.to(device)
    x_tr, y_tr, x_val, y_val = _tensors(data, device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    steps, tr_loss, va_loss, tr_acc, va_acc = [], [], [], [], []
    t0 = time.perf_counter()
    n = x_tr.shape[0]
    model.train()
    bar = tqdm(range(1, config.steps + 1), desc=desc or model.config.attention,
               disable=not progress, leave=False)
    for step in bar:
        idx = torch.randint(0, n, (config.batch_size,), generator=gen).to(device)
        loss = _loss(model, x_tr[idx], y_tr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % config.eval_every == 0 or step == config.steps:
            last = step == config.steps
            ltr, atr = evaluate(model, x_tr if last else x_tr[: config.n_curve],
                                y_tr if last else y_tr[: config.n_curve])
            lva, ava = evaluate(model, x_val, y_val)
            steps.append(step)
            tr_loss.append(ltr)
            va_loss.append(lva)
            tr_acc.append(atr)
            va_acc.append(ava)
            bar.set_postfix(val_acc=f"{ava:.3f}")
            log.debug("%s step %d: train %.4f/%.4f val %.4f/%.4f", desc, step, ltr, atr, lva, ava)
    bar.close()
    wall = time.perf_counter() - t0
    log.info("%s: val accuracy %.4f after %d steps (%.1f s)", desc, va_acc[-1], config.steps, wall)
    return TrainResult(
        attention=model.config.attention,
        seed=seed,
        config=config,
        step=steps,
        train_loss=tr_loss,
        val_loss=va_loss,
        train_accuracy=tr_acc,
        val_accuracy=va_acc,
        final_train_loss=tr_loss[-1],
        final_val_loss=va_loss[-1],
        final_train_accuracy=tr_acc[-1],
        final_val_accuracy=va_acc[-1],
        wall_s=wall,
    )


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def relative_change(new: torch.Tensor, old: torch.Tensor) -> float:
    """``||new - old|| / ||old||`` (Frobenius / Euclidean)."""
    return float(torch.linalg.vector_norm(new - old) / torch.linalg.vector_norm(old))


def _qk(model: HistogramTransformer) -> torch.Tensor:
    return torch.cat([model.query.weight.detach().flatten(), model.key.weight.detach().flatten()])


def attention_distance(a: torch.Tensor, a0: torch.Tensor) -> float:
    """Mean over sequences of ``||a - a0||_F / ||a0||_F`` for maps of shape ``(B, L, L)``."""
    return _attention_changes(a, a0)[0]


def parameter_distance(m1: nn.Module, m2: nn.Module, ref: torch.Tensor) -> float:
    """``||theta_1 - theta_2|| / ||ref||`` for two models with the same parameter layout."""
    return float(torch.linalg.vector_norm(_flat(m1) - _flat(m2)) / torch.linalg.vector_norm(ref))


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """All parameters of ``model`` as one detached vector."""
    return _flat(model)


def _attention_changes(a: torch.Tensor, a0: torch.Tensor) -> tuple[float, float]:
    num = torch.linalg.matrix_norm(a - a0)
    den = torch.linalg.matrix_norm(a0)
    return float((num / den).mean()), float((a - a0).abs().max())


def _full_grad_norm(model: HistogramTransformer, x: torch.Tensor, y: torch.Tensor) -> float:
    model.zero_grad(set_to_none=True)
    chunk = 4096
    n = x.shape[0]
    for i in range(0, n, chunk):
        xb, yb = x[i : i + chunk], y[i : i + chunk]
        (_loss(model, xb, yb) * (xb.shape[0] / n)).backward()
    g = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.zero_grad(set_to_none=True)
    return float(torch.linalg.vector_norm(g))


def continue_sgd(
    model: HistogramTransformer,
    data: HistogramData,
    config: ContinuationConfig,
    seed: int,
    device: torch.device | str = "cpu",
    progress: bool = False,
    desc: str = "",
    keep_restriction: bool = False,
) -> tuple[HistogramTransformer, ContinuationResult]:
    """Continue ``model`` with plain SGD in the unrestricted architecture.

    With ``keep_restriction=True`` the restriction mask is kept (the control run: same
    optimiser and batches, no new freedom). ``model`` itself is left untouched; the
    returned model is the continued copy (parameters in the same order either way).
    """
    device = torch.device(device)
    start = model.config.attention
    blocked = (1.0 - model.qk_mask).to(device) if start != "both" else None
    free = to_unrestricted(model).to(device)
    if keep_restriction:  # same folded start, but the mask stays in place
        free.config = model.config
        with torch.no_grad():
            free.qk_mask.copy_(model.qk_mask)
    x_tr, y_tr, x_val, y_val = _tensors(data, device)
    probe = x_val[: config.n_probe]
    with torch.no_grad():
        a0 = free.attention(probe)
    theta0 = _flat(free)
    qk0 = _qk(free)
    grad0 = _full_grad_norm(free, x_tr, y_tr)
    loss_before, _ = evaluate(free, x_tr, y_tr)
    _, acc_before = evaluate(free, x_val, y_val)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    opt = torch.optim.SGD(free.parameters(), lr=config.lr)
    steps, pchange, achange, vacc = [0], [0.0], [0.0], [acc_before]
    t0 = time.perf_counter()
    n = x_tr.shape[0]
    free.train()
    bar = tqdm(range(1, config.steps + 1), desc=desc or f"{start}->both",
               disable=not progress, leave=False)
    for step in bar:
        idx = torch.randint(0, n, (config.batch_size,), generator=gen).to(device)
        loss = _loss(free, x_tr[idx], y_tr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % config.eval_every == 0 or step == config.steps:
            with torch.no_grad():
                a = free.attention(probe)
            steps.append(step)
            pchange.append(relative_change(_flat(free), theta0))
            achange.append(_attention_changes(a, a0)[0])
            vacc.append(evaluate(free, x_val, y_val)[1])
    bar.close()
    with torch.no_grad():
        a = free.attention(probe)
    att_rel, att_max = _attention_changes(a, a0)
    blocked_weight = None
    if blocked is not None:
        wq, wk = free.query.weight.detach(), free.key.weight.detach()
        num = torch.sqrt((wq * blocked).pow(2).sum() + (wk * blocked).pow(2).sum())
        blocked_weight = float(num / torch.linalg.vector_norm(_qk(free)))
    loss_after, _ = evaluate(free, x_tr, y_tr)
    result = ContinuationResult(
        start=start,
        seed=seed,
        config=config,
        unrestricted=not keep_restriction,
        step=steps,
        relative_parameter_change_curve=pchange,
        attention_change_curve=achange,
        val_accuracy_curve=vacc,
        relative_parameter_change=relative_change(_flat(free), theta0),
        qk_relative_change=relative_change(_qk(free), qk0),
        attention_change=att_rel,
        attention_max_abs_change=att_max,
        blocked_half_weight=blocked_weight,
        grad_norm_start=grad0,
        train_loss_before=loss_before,
        train_loss_after=loss_after,
        val_accuracy_before=acc_before,
        val_accuracy_after=vacc[-1],
        wall_s=time.perf_counter() - t0,
    )
    log.info("%s: relative parameter change %.3g, attention change %.3g",
             desc or start, result.relative_parameter_change, result.attention_change)
    return free, result
