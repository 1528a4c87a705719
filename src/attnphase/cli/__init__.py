"""Command-line interface: ``attnphase COMMAND ...``.

Each command lives in one function of one module below; a module exposes
``register(subparsers)`` which adds its sub-parsers and sets ``func``. Exit statuses
(docs/cli.md): invalid input exits with status 2 and a single line on stderr
(``attnphase COMMAND: error: ...``); a failure inside the program (:mod:`attnphase.errors`)
with status 3, a single line naming the exception and the file that holds its traceback
(``attnphase --debug COMMAND ...`` or ``ATTNPHASE_DEBUG=1`` prints the traceback instead);
a missing optional dependency with status 2 and one line naming the extra to install
(:mod:`attnphase._extras`); an interruption with status 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from attnphase._extras import MissingExtraError
from attnphase.errors import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    InternalError,
    debug_requested,
    is_input_error,
    one_line,
    print_traceback,
    raised_in,
    write_traceback,
)

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
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error (exit status 3), print the traceback instead of writing it "
                             "to a file (also: ATTNPHASE_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (recorded in the JSON: attnphase rerun)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        return _input_error(args, str(exc) or exc.__class__.__name__)
    except OSError as exc:  # an output folder or store that cannot be written, a missing input file
        return _input_error(args, str(exc))
    except MissingExtraError as exc:  # an optional dependency that is not installed (names the extra)
        return _input_error(args, str(exc))
    except MemoryError as exc:  # sizes that pass every check but do not fit
        return _input_error(args, f"out of memory ({str(exc).splitlines()[0] if str(exc) else 'MemoryError'})")
    except KeyboardInterrupt:
        sys.stderr.write("attnphase: interrupted\n")
        return 130
    except Exception as exc:
        if is_input_error(exc):
            return _input_error(args, str(exc) or exc.__class__.__name__)
        return _internal_error(args, exc)


def _input_error(args: argparse.Namespace, message: str) -> int:
    """Invalid input: the first line of ``message`` on stderr; exit status 2."""
    sys.stderr.write(f"attnphase {args.command}: error: {message.splitlines()[0] if message else 'error'}\n")
    return EXIT_INPUT


def _internal_error(args: argparse.Namespace, exc: Exception) -> int:
    """A failure inside the program (:mod:`attnphase.errors`): one line on stderr naming the
    exception (the original one under an :class:`InternalError` of the library), where in
    attnphase it arose and the file holding the traceback, or the traceback itself with
    ``--debug``; exit status 3."""
    cause = exc.__cause__ if isinstance(exc, InternalError) and exc.__cause__ is not None else exc
    where = raised_in(cause)
    line = f"attnphase {args.command}: internal error: {one_line(cause)}" + (f" (in {where})" if where else "")
    if debug_requested(getattr(args, "debug", False)):
        print_traceback(exc)
        sys.stderr.write(line + "\n")
        return EXIT_INTERNAL
    try:
        path = write_traceback(exc, args.argv)
        tail = f"; traceback in {path} (attnphase --debug {args.command} ... prints it)"
    except OSError as err:
        tail = f"; the traceback could not be written ({err}): run attnphase --debug {args.command} ... to see it"
    sys.stderr.write(line + tail + "\n")
    return EXIT_INTERNAL
