"""Flags and settings shared by the commands that train (``simulate``, ``compare``, the
extension commands): value matrix, optimiser, seeds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from attnphase.cli.common import TRAINING, add_parameter_flags, flag_group, to_float, to_int
from attnphase.spec.defaults import DEFAULT_LR, number_text, training

if TYPE_CHECKING:
    from attnphase.sim.train import TrainSettings


#: The most seeds one command trains (they run as one batch, in memory together).
MAX_SEEDS = 10_000


def add_value_flags(p: argparse.ArgumentParser) -> None:
    """Flags of the value matrix and the linear baseline (the ``value`` group of
    :class:`~attnphase.spec.ModelSpec`: ``--value``, ``--value-rank``, ``--lam-lin``)."""
    add_parameter_flags(p, "value")


def add_train_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The training flags of ``command``, in the ``training`` argument group, each defaulting to the
    command's training settings (:func:`attnphase.spec.defaults.training`, the defaults of its
    library function too)."""
    p = flag_group(parser, TRAINING)
    st = training(command)
    lr = ", ".join(f"{number_text(v)} {k}" for k, v in DEFAULT_LR.items())
    p.add_argument("--optimizer", type=str, default=st["optimizer"], help=f"gd or adam (default {st['optimizer']})")
    p.add_argument("--lr", type=str, default=None if st["lr"] is None else str(st["lr"]),
                   help=f"step size (default {lr})" if st["lr"] is None else f"step size (default {number_text(st['lr'])})")
    p.add_argument("--momentum", type=str, default=number_text(st["momentum"]),
                   help=f"heavy-ball momentum for gd (default {number_text(st['momentum'])}; 0 = plain GD)")
    p.add_argument("--max-steps", type=str, default=str(st["max_steps"]),
                   help=f"step cap per run (default {st['max_steps']})")
    p.add_argument("--tol", type=str, default=number_text(st["tol"]),
                   help=f"stop a run when ||grad R||/sqrt(d) < tol (default {number_text(st['tol'])})")
    p.add_argument("--device", type=str, default=st["device"], help=f"cpu or cuda (default {st['device']})")
    p.add_argument("--dtype", type=str, default=st["dtype"], help=f"float32 or float64 (default {st['dtype']})")
    p.add_argument("--threads", type=str, default=None, help="torch CPU threads (default: torch's)")


def train_settings(args: argparse.Namespace) -> TrainSettings:
    """The :class:`~attnphase.sim.train.TrainSettings` named by the training flags."""
    from attnphase.sim.train import TrainSettings  # (torch: only when a command trains)

    if args.threads is not None:
        import torch

        threads = to_int(args.threads, "threads")
        if threads < 1:
            raise ValueError(f"--threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    return TrainSettings(
        optimizer=args.optimizer,
        lr=None if args.lr is None else to_float(args.lr, "lr"),
        momentum=to_float(args.momentum, "momentum"),
        max_steps=to_int(args.max_steps, "max-steps"),
        tol=to_float(args.tol, "tol"),
        device=args.device,
        dtype=args.dtype,
        log_every=0,
    )


def seeds_from_args(args: argparse.Namespace) -> tuple[int, ...]:
    count = to_int(args.seeds, "seeds")
    first = to_int(args.seed0, "seed0")
    if first < 0:
        raise ValueError(f"--seed0 must be >= 0, got {first}")
    if count < 1:
        raise ValueError(f"--seeds must be >= 1, got {count}")
    if count > MAX_SEEDS:
        raise ValueError(f"--seeds must be <= {MAX_SEEDS}, got {count}")
    return tuple(range(first, first + count))
