"""Batched full-batch training of many runs at once (docs/simulation.md).

All runs (datasets x starts) live on the leading ``(D, K)`` axes of the parameter tensors and are
updated by the same tensor operations; a run that meets the gradient-norm tolerance is frozen
(its parameters stop changing) while the others continue. Stopping rule per run:
``||grad R||_F / sqrt(d) < tol`` (the gradient of ``R/d`` in the unit-scale coordinates
``Q / sqrt(d)``) -> ``stop = "tol"``; otherwise ``stop = "max_steps"`` (or ``"diverged"`` when the
risk stops being finite).

Starts (docs/simulation.md), per run, for query columns ``Q in R^{d x r}``:

* ``semantic``: ``Q = Q*`` (first ``min(r, r*)`` columns; extra columns ``0.1 N(0, 1)``);
* ``positional``: first column ``pi_1 / sqrt(d)`` (``= 1_d / sqrt(d)`` by construction), extra
columns
  ``0.1 N(0, 1)``;
* ``random``: ``0.1 N(0, 1)`` entries.

Untied variants start the key ``K`` equal to ``Q`` for the informed starts and independent for the
random one. A trainable value starts as in docs/model.md (6.4): the gain ``V = v I`` at
``v = spec.gain_start`` (``value_gain``, 1 when unset; stored as ``g = sqrt(d) v``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch

from attnphase.sim.data import STREAM_INIT, Dataset, generator
from attnphase.sim.models import Batch, is_untied, n_columns, objective, query_columns
from attnphase.spec.problem import ModelSpec, positional_axis
from attnphase.spec.training import OPTIMIZERS as OPTIMIZERS  # (re-exported: attnphase.sim)
from attnphase.spec.training import TrainSettings

log = logging.getLogger(__name__)

INITS = ("semantic", "positional", "random", "specialised")
#: steps between two calls of :func:`train`'s ``progress``
PROGRESS_EVERY = 50


def stack_batch(datasets: Sequence[Dataset]) -> Batch:
    """Stack datasets of one size on a leading axis."""
    Y = None
    if all(ds.Y is not None for ds in datasets):
        Y = torch.stack([ds.Y for ds in datasets])  # type: ignore[misc]
    return Batch(
        X=torch.stack([ds.X for ds in datasets]),
        Sxx=torch.stack([ds.Sxx for ds in datasets]),
        Syx=torch.stack([ds.Syx for ds in datasets]),
        yy=torch.stack([ds.yy for ds in datasets]),
        Y=Y,
    )


def init_params(
    spec: ModelSpec, datasets: Sequence[Dataset], inits: Sequence[str]
) -> dict[str, torch.Tensor]:
    """Starting parameters ``(D, K, d, .)`` for every dataset x start (see the module docstring)."""
    for name in inits:
        if name not in INITS:
            raise ValueError(f"unknown init {name!r}; choose from {', '.join(INITS)} or all")
    if "specialised" in inits and spec.heads < 2:
        raise ValueError("the specialised start (one head semantic, the others positional) needs heads >= 2")
    ds0 = datasets[0]
    d, r, dtype, device = ds0.d, query_columns(spec), ds0.X.dtype, ds0.X.device
    c = n_columns(spec)
    P = torch.empty(len(datasets), len(inits), d, c, dtype=torch.float64)
    U = W = M = None
    if spec.value == "lowrank":
        U = torch.zeros(len(datasets), len(inits), d, spec.value_rank, dtype=torch.float64)
        W = torch.empty_like(U)
    elif spec.value == "full":
        M = torch.zeros(len(datasets), len(inits), d, d, dtype=torch.float64)
    for i, ds in enumerate(datasets):
        for k, name in enumerate(inits):
            gen = generator(ds.seed, STREAM_INIT, INITS.index(name))
            noise = 0.1 * torch.randn(d, c, generator=gen, dtype=torch.float64)
            Q = noise[:, :r].clone()
            semantic = ds.Q_star.to(torch.float64).cpu()
            u = torch.as_tensor(positional_axis(spec), dtype=torch.float64)  # (pi_1; cross: (10.4))
            positional = u @ ds.Pi.to(torch.float64).cpu() / math.sqrt(d)
            if spec.heads > 1:  # (every head, or head 0 semantic and the others positional: (11.1))
                if name == "semantic":
                    Q += semantic[:, :1]
                elif name == "positional":
                    Q += positional[:, None]
                elif name == "specialised":
                    Q[:, :1] += semantic[:, :1]
                    Q[:, 1:] += positional[:, None]
            elif name == "semantic":
                j = min(r, spec.teacher_rank)
                Q[:, :j] = semantic[:, :j]
            elif name == "positional":
                Q[:, 0] = positional
            if is_untied(spec):
                Kmat = noise[:, r:] if name == "random" else Q
                P[i, k] = torch.cat([Q, Kmat], dim=1)
            else:
                P[i, k] = Q
            if W is not None:
                W[i, k] = 0.1 * torch.randn(d, spec.value_rank, generator=gen, dtype=torch.float64)
    out = {"P": P}
    if spec.head_gains == "trained":  # vh = sqrt(d) v_h, from v_h = head_gain_array (docs/model.md (11.1))
        start = torch.as_tensor(math.sqrt(d) * spec.head_gain_array, dtype=torch.float64)
        out["vh"] = start.expand(len(datasets), len(inits), 1, spec.heads).clone()
    if spec.value == "gain":  # g = sqrt(d) v, start v = value_gain (docs/model.md (6.5))
        out["g"] = torch.full((len(datasets), len(inits), 1, 1), math.sqrt(d) * spec.gain_start,
                              dtype=torch.float64)
    if U is not None and W is not None:
        out.update(U=U, W=W)
    if M is not None:
        out["M"] = M
    return {k: v.to(device=device, dtype=dtype) for k, v in out.items()}


@dataclass(frozen=True, eq=False)
class TrainResult:
    """Final parameters and per-run diagnostics (tensors of shape ``(D, K)``)."""

    params: dict[str, torch.Tensor]
    risk: torch.Tensor
    grad_norm: torch.Tensor
    steps: torch.Tensor
    stop: list[list[str]]
    seconds: float


def train(
    spec: ModelSpec,
    batch: Batch,
    params: dict[str, torch.Tensor],
    settings: TrainSettings,
    progress: Callable[[int, int], None] | None = None,
) -> TrainResult:
    """Full-batch GD or Adam on ``R`` for all runs at once (docs/simulation.md).

    ``progress(stopped, runs)`` is called every ``PROGRESS_EVERY`` steps with the number of runs
    that have stopped, and once with ``(runs, runs)`` at the end."""
    d = batch.X.shape[-1]
    lr = settings.learning_rate
    params = {k: v.clone() for k, v in params.items()}
    D, K = params["P"].shape[:2]
    active = torch.ones(D, K, dtype=torch.bool, device=params["P"].device)
    diverged = torch.zeros_like(active)
    converged = torch.zeros_like(active)
    steps = torch.zeros(D, K, dtype=torch.long, device=active.device)
    state: dict[str, dict[str, torch.Tensor]] = {
        k: {"m": torch.zeros_like(v), "v": torch.zeros_like(v)} for k, v in params.items()
    }
    b1, b2 = settings.betas
    t0 = time.perf_counter()
    R = gnorm = None
    for t in range(settings.max_steps + 1):
        R, grads = objective(spec, batch, params, settings.grad)
        gnorm = torch.sqrt(cast(torch.Tensor, sum((g * g).sum(dim=(-1, -2)) for g in grads.values()))) / math.sqrt(d)
        bad = active & ~torch.isfinite(R)
        diverged |= bad
        done = active & (gnorm < settings.tol)
        converged |= done
        active = active & ~done & ~bad
        if settings.log_every and t % settings.log_every == 0:
            log.info("step %d: active %d, max |grad| %.3g, mean R/d %.6g", t, int(active.sum()),
                     float(gnorm.max()), float(R.mean()) / d)
        if t == settings.max_steps or not bool(active.any()):
            break
        if progress is not None and t % PROGRESS_EVERY == 0:
            progress(D * K - int(active.sum()), D * K)
        mask = active[:, :, None, None]
        for k, p in params.items():
            g = grads[k]
            if settings.optimizer == "gd":
                if settings.momentum > 0:
                    buf = state[k]["m"]
                    buf.mul_(settings.momentum).add_(g)
                    g = buf
                p.sub_(torch.where(mask, lr * g, 0.0))
            else:
                s = state[k]
                s["m"].mul_(b1).add_((1 - b1) * g)
                s["v"].mul_(b2).add_((1 - b2) * g * g)
                mhat = s["m"] / (1 - b1 ** (t + 1))
                vhat = s["v"] / (1 - b2 ** (t + 1))
                p.sub_(torch.where(mask, lr * mhat / (vhat.sqrt() + settings.eps), 0.0))
        steps += active.long()
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress(D * K, D * K)
    assert R is not None and gnorm is not None
    stop = [
        [
            "tol"
            if bool(converged[i, k])
            else ("diverged" if bool(diverged[i, k]) else "max_steps")
            for k in range(K)
        ]
        for i in range(D)
    ]
    return TrainResult(
        params=params, risk=R, grad_norm=gnorm, steps=steps, stop=stop, seconds=seconds
    )
