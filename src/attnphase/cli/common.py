"""Flags shared by several commands, and turning them into a :class:`ModelSpec`.

The model flags are made from the fields of :class:`ModelSpec` (:mod:`attnphase.spec.schema`):
a field added there is a flag here, parsed and checked the same way. Numbers given to other flags
go through :func:`to_float` and :func:`to_int` (:mod:`attnphase.spec.parse`, messages naming the
flag); JSON output through :func:`json_text` (:func:`attnphase._json.jsonable`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from attnphase._json import jsonable
from attnphase._progress import ProgressLine
from attnphase.spec import parse
from attnphase.spec.parse import parse_range
from attnphase.spec.problem import ModelSpec, model_parameters
from attnphase.spec.schema import GROUPS

#: Titles of the argument groups (sections of ``--help``) that the commands share besides the
#: model's (:data:`attnphase.spec.schema.GROUPS`): settings of the theory's solver, of training,
#: what is printed or written, and where sweep points run. A command's own flags (``--alpha``,
#: ``--branch``, ...) stay in argparse's first section, ``options``.
SOLVER = "solver"
TRAINING = "training"
OUTPUT = "output"
BACKEND = "backend"
#: the order of the shared groups in ``--help``, whatever the order in which a command adds them
#: (the schema's groups, :data:`~attnphase.spec.schema.GROUPS`, hold ``solver`` and ``training`` too)
GROUP_ORDER = tuple(dict.fromkeys((*(title for title, _ in GROUPS.values()), SOLVER, TRAINING, OUTPUT, BACKEND)))


def flag_group(p: argparse.ArgumentParser, title: str, description: str | None = None) -> argparse._ArgumentGroup:
    """The argument group of ``p`` titled ``title``, made where ``p`` has none yet. A group of
    :data:`GROUP_ORDER` is placed before the groups that come after it there (``--help`` shows
    the groups in the order of ``p``'s list of them); any other group after the existing ones."""
    groups = p._action_groups
    for g in groups:
        if g.title == title:
            return g
    new = p.add_argument_group(title, description)
    if title in GROUP_ORDER:
        rank = GROUP_ORDER.index(title)
        later = [i for i, g in enumerate(groups)
                 if g.title in GROUP_ORDER and GROUP_ORDER.index(g.title) > rank]
        if later:
            groups.insert(later[0], groups.pop())
    return new


def add_parameter_flags(p: argparse.ArgumentParser, group: str, omit: tuple[str, ...] = ()) -> None:
    """One flag per :class:`ModelSpec` field of ``group`` (:data:`~attnphase.spec.schema.GROUPS`),
    except the fields named in ``omit``, in the argument group of that name: text for numbers,
    matrices and names (parsed by :func:`spec_from_args`), ``store_true`` for booleans."""
    title, description = GROUPS[group]
    for prm in model_parameters():
        if prm.group != group or prm.name in omit:
            continue
        g = flag_group(p, title, description)
        if prm.kind == "bool":
            g.add_argument(prm.flag, dest=prm.name, action="store_true", help=prm.cli_help)
        else:
            g.add_argument(prm.flag, dest=prm.name, type=str, default=prm.text_default,
                           help=prm.cli_help)


def add_model_flags(p: argparse.ArgumentParser, omega: bool = True) -> None:
    """Model flags used by ``solve``, ``transition``, ``curves``, ``simulate``, ``compare``...:
    the core model, then the mixture, cross-attention and attention-map extensions, each its own argument group
    (``omega=False``: the command has its own ``--omega``)."""
    for group in ("model", "mixture", "cross", "attention"):
        add_parameter_flags(p, group, omit=() if omega else ("omega",))


def add_theory_value_flags(p: argparse.ArgumentParser) -> None:
    """``--value`` and ``--value-gain`` on the theory commands (docs/model.md (6.4), (6.5)): the
    value gain ``V = v I``, minimised over ``v`` where ``--value-gain`` is not given."""
    add_parameter_flags(p, "value", omit=("value_rank", "lam_lin"))


def to_float(text: str, name: str) -> float:
    """The number given to the flag ``--name`` (:func:`attnphase.spec.parse.to_float`)."""
    return parse.to_float(text, f"--{name}")


def to_int(text: str, name: str) -> int:
    """The integer given to the flag ``--name`` (:func:`attnphase.spec.parse.to_int`)."""
    return parse.to_int(text, f"--{name}")


def spec_from_args(args: argparse.Namespace, **override: Any) -> ModelSpec:
    """Build and validate the :class:`ModelSpec` named by the model flags (and the value flags
    where the command has them); ``override`` replaces flags by value (``omega=0.3``: a command
    whose own ``--omega`` is a grid; ``None`` leaves the flag's value)."""
    values: dict[str, Any] = {}
    for prm in model_parameters():
        if override.get(prm.name) is not None:
            values[prm.name] = override[prm.name]
        elif hasattr(args, prm.name):
            values[prm.name] = prm.from_text(getattr(args, prm.name))
    return ModelSpec(**values)


def alpha_grid(text: str) -> np.ndarray:
    """The ``--alpha`` grid (:func:`attnphase.spec.parse.parse_range`), every value > 0."""
    values = np.asarray(parse_range(text, "--alpha"))
    if np.any(values <= 0):
        raise ValueError(f"--alpha values must be > 0, got {values.min()}")
    return values


#: the key of the command line in the JSON records of the commands (what ``attnphase rerun`` runs)
COMMAND_KEY = "command"


def command_record(args: argparse.Namespace, **context: Any) -> dict[str, Any]:
    """The command line that made a record: ``{"program": "attnphase", "argv": [...]}``, the
    arguments after the program name exactly as given (``attnphase rerun FILE`` runs them again),
    and what else the numbers depend on (``context``: e.g. ``torch_threads``, the CPU threads of
    a simulation, whose sums they split)."""
    return {"program": "attnphase", "argv": [str(a) for a in getattr(args, "argv", None) or ()], **context}


def print_record(args: argparse.Namespace, record: dict[str, Any], **context: Any) -> None:
    """Print a command's JSON record with its command line first (:func:`command_record`)."""
    print_json({COMMAND_KEY: command_record(args, **context), **record})


def json_text(obj: Any) -> str:
    """One JSON object as text (NaN/inf become ``null``), for stdout and files."""
    return json.dumps(jsonable(obj), indent=2) + "\n"


def print_json(obj: Any) -> None:
    """Print one JSON object (:func:`json_text`)."""
    sys.stdout.write(json_text(obj))


def save_figure(fig: Any, folder: Path, stem: str, dpi: int = 150) -> list[Path]:
    """Write ``fig`` as ``folder/stem.png`` and ``folder/stem.pdf``; the two paths."""
    paths = [folder / f"{stem}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=dpi)
    return paths


#: proximal variables per sample (``L`` x fields per position) above which the theory commands
#: warn: the multi-start Newton solve per node costs ~ their 4th power (measured: L = 5, rank 1,
#: ``solve --branch all`` at the defaults, 5 min on 2 cores; L = 2: 13 s)
COSTLY_FIELDS = 6


def warn_theory_cost(spec: ModelSpec) -> None:
    """One warning line on stderr when a theory solve at ``spec`` will be slow."""
    from attnphase.theory.channels import AttentionMap  # (numba: only for the theory commands)

    n = spec.L * AttentionMap.from_spec(spec).field_dim
    if n > COSTLY_FIELDS:
        sys.stderr.write(
            f"attnphase: warning: {n} proximal variables per sample (L = {spec.L} x {n // spec.L} fields); the "
            f"theory's cost grows like their 4th power (5 variables, L = 5: solve --branch all takes ~5 min on 2 "
            f"cores), so this can take hours; lower --order / --refine-order, or simulate\n"
        )


def progress_printer(label: str, unit: str = "points", heartbeat: float | None = None) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback that writes progress lines on stderr (one line rewritten
    on a terminal, plain lines otherwise; :class:`attnphase._progress.ProgressLine`, the line the
    library's calls show on a terminal): a line when ``done`` changes, and otherwise at most one
    every ``heartbeat`` seconds (default 10 on a terminal, 30 otherwise). The ETA is given once
    something is done."""
    return ProgressLine(label, unit, heartbeat)


def check_out_folder(path: str | Path) -> Path:
    """``path`` as a :class:`~pathlib.Path` once it is known that the folder exists or can be made,
    without making it: its nearest existing ancestor is a writable folder. ``OSError`` (reported
    as one line, exit status 2) otherwise, so that a command refuses an output folder before its
    work rather than after it."""
    out = Path(path)
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(f"cannot make the output folder {out}: {probe} is not a folder")
    if not os.access(probe, os.W_OK):
        raise PermissionError(f"cannot make the output folder {out}: {probe} is not writable")
    return out
