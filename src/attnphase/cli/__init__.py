"""Command-line interface: ``attnphase COMMAND ...``.

Each command lives in one function of one module below; a module exposes
``register(subparsers)`` which adds its sub-parsers and sets ``func``. Invalid input
exits with status 2 and a single line on stderr (``attnphase: error: ...``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Modules that contribute commands (each has ``register(subparsers)``).
COMMAND_MODULES = (
    "attnphase.cli.theory_cmds",
    "attnphase.cli.sim_cmds",
    "attnphase.cli.sweep_cmds",
    "attnphase.cli.histogram_cmds",
    "attnphase.cli.extension_cmds",
    "attnphase.cli.bayes_cmds",
    "attnphase.cli.basins_cmds",
    "attnphase.cli.rerun_cmds",
)


class UsageError(Exception):
    """Bad input detected after parsing; reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from attnphase import __version__

    parser = _Parser(
        prog="attnphase",
        description="Solvable model of dot-product attention: theory, simulation, phase diagrams.",
    )
    parser.add_argument("--version", action="version", version=f"attnphase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (recorded in the JSON: attnphase rerun)
    try:
        return int(args.func(args) or 0)
    except (ValueError, UsageError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        sys.stderr.write(f"attnphase {args.command}: error: {msg}\n")
        return 2
    except OSError as exc:  # an output folder or store that cannot be written, a missing input file
        sys.stderr.write(f"attnphase {args.command}: error: {exc}\n")
        return 2
    except MemoryError as exc:  # sizes that pass every check but do not fit
        sys.stderr.write(f"attnphase {args.command}: error: out of memory ({str(exc).splitlines()[0] if str(exc) else 'MemoryError'})\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("attnphase: interrupted\n")
        return 130
