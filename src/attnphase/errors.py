"""Two kinds of failure: invalid input, and an internal error.

Invalid input is the caller's to fix: the library raises a ``ValueError`` whose one-line message
says what is wrong, and the command line prints that line and exits with status 2. Every other
failure is the program's: a numpy, scipy or torch error raised inside the numerics (a
``LinAlgError``, a shape mismatch, which numpy also reports as a ``ValueError``), an
``IndexError``, a ``RuntimeError``, ... The library raises it as :class:`InternalError`, chained to
the original (``raise InternalError(...) from exc``); the command line exits with status 3, one
line naming the exception and the command, and the full traceback written to a file
(:func:`write_traceback`) or, with ``attnphase --debug`` or ``ATTNPHASE_DEBUG=1``, printed. The
command line also answers an ``OSError`` (a file or folder that cannot be read or written) and a
``MemoryError`` (a size that passes every check but does not fit) and a missing optional
dependency (:class:`~attnphase._extras.MissingExtraError`, which names the extra to install) with
one line and status 2: the user changes the input or the machine, not the program.

How the two are told apart (:func:`is_input_error`): a ``ValueError`` is invalid input when a
``raise`` statement in attnphase's own code raised it, that is when the innermost frame of its
traceback is an attnphase module executing a ``raise``. The project's input checks are such
statements, each with a message written for the user; a ``ValueError`` raised inside a
dependency (its innermost frame is numpy's) or by an operation that attnphase code performs
(``a @ b`` with mismatched shapes, a builtin call: the innermost frame is attnphase's, but it
executes a call, not a ``raise``) was not meant for the user. This keeps the hundreds of existing
checks as they are (no exception class to thread through every module) and needs no list of
the dependencies' messages. Its limits, stated: an attnphase ``raise ValueError`` that guards an
internal invariant rather than the input is reported as invalid input, with its own message; a
value that attnphase hands to a dependency unchecked and the dependency refuses counts as
internal (the remedy is a check in attnphase in front of it, with a message for the user); and
a ``ValueError`` crossing a process boundary loses its traceback and counts as internal.

In the library, :func:`internal_errors` wraps the public entry points (``attnphase.solve``,
``transition``, ``simulate``, ``bayes``): a deliberate ``ValueError`` passes unchanged, and so do
a ``TypeError`` (a call with wrong argument types is the caller's), an ``OSError`` (files and
the environment), a ``MemoryError`` (a size that does not fit), a warning raised as an error (the
caller's warning filter), a :class:`~attnphase._extras.MissingExtraError` (an optional
dependency that is not installed: the message names the extra) and :class:`InternalError`
itself; any other exception becomes an :class:`InternalError`. This module imports only the
standard library and :mod:`attnphase._extras`, which imports only the standard library too (the
package's import stays cheap).
"""

from __future__ import annotations

import dis
import functools
import os
import platform
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import CodeType, TracebackType
from typing import Any, TypeVar

from attnphase._extras import MissingExtraError

__all__ = [
    "DEBUG_ENV",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "InternalError",
    "debug_requested",
    "internal_errors",
    "is_input_error",
    "one_line",
    "print_traceback",
    "raised_in",
    "write_traceback",
]

#: exit status of a command given invalid input (one line on stderr)
EXIT_INPUT = 2
#: exit status of a command that failed inside (one line on stderr, the traceback in a file)
EXIT_INTERNAL = 3
#: environment variable that, set to anything but ``""`` or ``"0"``, prints internal errors'
#: tracebacks on stderr (as ``attnphase --debug``)
DEBUG_ENV = "ATTNPHASE_DEBUG"

#: the package whose ``raise`` statements are its deliberate input checks
_PACKAGE = __name__.split(".")[0]
#: bytecode instructions of a ``raise`` statement (``raise X``, ``raise X from Y``, bare ``raise``)
_RAISE_OPS = frozenset({"RAISE_VARARGS", "RERAISE"})
#: exceptions that :func:`internal_errors` passes through unchanged (besides deliberate input checks)
_CALLERS = (TypeError, OSError, MemoryError, Warning, MissingExtraError)


class InternalError(RuntimeError):
    """A failure inside attnphase's numerics, not a problem with the input: its ``__cause__`` is
    the original exception (with the traceback). Please report it with the inputs that raised it."""


def _innermost(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _is_raise(code: CodeType, offset: int) -> bool:
    """The instruction at byte ``offset`` of ``code`` belongs to a ``raise`` statement."""
    return any(ins.offset == offset and ins.opname in _RAISE_OPS for ins in dis.get_instructions(code))


def _is_ours(module: object) -> bool:
    return isinstance(module, str) and (module == _PACKAGE or module.startswith(_PACKAGE + "."))


def is_input_error(exc: BaseException) -> bool:
    """``exc`` is a ``ValueError`` raised by a ``raise`` statement in attnphase's code: one of its
    deliberate input checks (module docstring), not a failure inside the numerics."""
    if not isinstance(exc, ValueError):
        return False
    tb = _innermost(exc.__traceback__)
    if tb is None:
        return False
    frame = tb.tb_frame
    return _is_ours(frame.f_globals.get("__name__")) and _is_raise(frame.f_code, tb.tb_lasti)


def raised_in(exc: BaseException) -> str | None:
    """Where in attnphase ``exc`` arose: ``module.function:line`` of the innermost frame of its
    traceback in the package (``None`` if none is)."""
    where = None
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__")
        if _is_ours(module) and module != __name__:
            where = f"{module}.{tb.tb_frame.f_code.co_name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an empty message)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


F = TypeVar("F", bound=Callable[..., Any])


def internal_errors(func: F) -> F:
    """Decorate a public entry point: an exception out of it that is neither invalid input
    (:func:`is_input_error`) nor the caller's (a ``TypeError``, ``OSError``, ``MemoryError``, a
    missing extra or a warning raised as an error) is raised as :class:`InternalError` from the original."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (InternalError, *_CALLERS):
            raise
        except Exception as exc:
            if is_input_error(exc):
                raise
            where = raised_in(exc)
            at = f" (in {where})" if where else ""
            raise InternalError(f"attnphase.{func.__name__} failed inside: {one_line(exc)}{at}") from exc

    return wrapper  # type: ignore[return-value]


def debug_requested(flag: bool = False) -> bool:
    """Print tracebacks instead of writing them to a file: ``flag`` (``attnphase --debug``) or the
    environment variable :data:`DEBUG_ENV`."""
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def write_traceback(exc: BaseException, argv: Sequence[str]) -> Path:
    """Write the full traceback of ``exc`` (its causes included) with the command line, the
    attnphase, Python and platform versions to a new file in the system's temporary folder;
    its path. ``OSError`` where it cannot be written."""
    from attnphase._version import __version__

    fd, name = tempfile.mkstemp(prefix="attnphase-internal-", suffix=".txt")
    head = [
        f"attnphase {__version__}: internal error",
        "command: " + " ".join(["attnphase", *(str(a) for a in argv)]),
        f"python {platform.python_version()} on {platform.platform()}",
        "",
    ]
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(head) + "\n")
        fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return Path(name)


def print_traceback(exc: BaseException) -> None:
    """The full traceback of ``exc`` (its causes included) on stderr."""
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
