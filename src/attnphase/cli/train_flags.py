"""Flags and settings shared by the commands that train (``simulate``, ``compare``, the
extension commands): value matrix, optimiser, seeds."""

from __future__ import annotations

import argparse
from typing import Any

from attnphase.cli.common import TRAINING, add_parameter_flags, flag_group, to_int
from attnphase.spec.defaults import DEFAULT_LR, number_text, training
from attnphase.spec.training import TrainSettings, train_changes, train_parameters

#: The most seeds one command trains (they run as one batch, in memory together).
MAX_SEEDS = 10_000


def add_value_flags(p: argparse.ArgumentParser) -> None:
    """Flags of the value matrix and the linear baseline (the ``value`` group of
    :class:`~attnphase.spec.ModelSpec`: ``--value``, ``--value-rank``, ``--lam-lin``)."""
    add_parameter_flags(p, "value")


def add_train_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The training flags of ``command``, in the ``training`` argument group, made from the schema
    of :class:`~attnphase.spec.training.TrainSettings`: one flag per common setting and ``--train
    NAME=VALUE`` for every setting by its field name (the rare ones only so), each defaulting to
    the command's training settings (:func:`attnphase.spec.defaults.training`, the defaults of its
    library function too); and ``--threads``."""
    p = flag_group(parser, TRAINING)
    st = training(command)
    for prm in train_parameters():
        if not prm.info.rare:
            p.add_argument(prm.flag, dest=prm.name, default=None,
                           help=f"{prm.help} (default {_setting_text(prm.name, st[prm.name])})")
    rare = ", ".join(f"{prm.name} ({_setting_text(prm.name, st[prm.name])})"
                     for prm in train_parameters() if prm.info.rare)
    p.add_argument("--train", action="append", default=[], metavar="NAME=VALUE",
                   help=f"any training setting by its field name, repeatable, e.g. --train grad=autograd; the "
                        f"rare ones (with this command's defaults): {rare}")
    p.add_argument("--threads", type=str, default=None, help="torch CPU threads (default: torch's)")
    parser.set_defaults(train_command=command)


def _setting_text(name: str, v: Any) -> str:
    """A training setting's value as a help text writes it (``lr`` ``None``: each optimiser's own)."""
    if v is None and name == "lr":
        return ", ".join(f"{number_text(lr)} {k}" for k, lr in DEFAULT_LR.items())
    if isinstance(v, float):
        return number_text(v)
    if isinstance(v, tuple):
        return ",".join(number_text(x) for x in v)
    return str(v)


def train_settings(args: argparse.Namespace) -> TrainSettings:
    """The :class:`~attnphase.spec.training.TrainSettings` named by the training flags: the
    command's training settings with every ``--train NAME=VALUE`` item and every training flag
    given applied on top (``ValueError``, one line, for a bad value or a setting given both
    ways). Sets torch's CPU threads where ``--threads`` is given."""
    if args.threads is not None:
        import torch  # (torch: only when a command trains)

        threads = to_int(args.threads, "threads")
        if threads < 1:
            raise ValueError(f"--threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    changes = train_changes(getattr(args, "train", None) or ())
    for prm in train_parameters():
        text = None if prm.info.rare else getattr(args, prm.name, None)
        if text is None:
            continue
        if prm.name in changes:
            raise ValueError(f"{prm.name} given twice: {prm.flag} and --train {prm.name}=...")
        changes[prm.name] = prm.coerce(prm.from_text(text))
    return TrainSettings(**{**training(args.train_command), **changes})


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
