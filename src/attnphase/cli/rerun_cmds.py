"""Command ``rerun``: run the command line recorded in a JSON record again, and with ``--check``
compare the new numbers with the recorded ones.

The JSON records of ``solve``, ``transition``, ``simulate``, ``bayes`` and ``sim-transition``
(``--json``), ``curves`` (``curves.json``) and ``compare`` (``compare.json``) start with ``"command": {"program": "attnphase", "argv": [...]}``
(:func:`attnphase.cli.common.command_record`; a simulation's also ``torch_threads``, which its
sums depend on: the rerun uses as many) next to the resolved parameters (model, solver or
training settings, seeds). Exit status: 0 when the numbers agree (or without ``--check``, the
status of the command), 1 when some number differs by more than ``--rtol`` (one line naming the
largest difference), 2 for a file that is not such a record.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from attnphase.cli.common import COMMAND_KEY, to_float

#: the commands whose records can be rerun, and where each writes its record
RERUNNABLE: Mapping[str, str] = MappingProxyType(
    {"solve": "stdout", "transition": "stdout", "simulate": "stdout", "bayes": "stdout", "sim-transition": "stdout",
     "curves": "curves.json", "compare": "compare.json"})


def recorded_argv(record: Any, name: str) -> list[str]:
    """The command line of an attnphase record (``ValueError`` naming ``name`` otherwise)."""
    cmd = record.get(COMMAND_KEY) if isinstance(record, dict) else None
    argv = cmd.get("argv") if isinstance(cmd, dict) and cmd.get("program") == "attnphase" else None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ValueError(f"{name} is not an attnphase record (no recorded command line)")
    if argv[0] not in RERUNNABLE:
        raise ValueError(f"{name}: the recorded command {argv[0]!r} cannot be rerun; "
                         f"records of {', '.join(RERUNNABLE)} can")
    return argv


def _read(path: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path!r}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{path} is not an attnphase record (not JSON)") from None


def cmd_rerun(args: argparse.Namespace) -> int:
    """``attnphase rerun FILE [--check]``."""
    from attnphase.cli import main
    from attnphase.results import compare_records

    rtol = to_float(args.rtol, "rtol")
    if not 0 <= rtol < 1:
        raise ValueError(f"--rtol must lie in [0, 1), got {rtol}")
    record = _read(args.file)
    argv = recorded_argv(record, args.file)
    threads = record[COMMAND_KEY].get("torch_threads")
    if isinstance(threads, int) and threads >= 1 and "--threads" not in argv:
        argv = [*argv, "--threads", str(threads)]  # (torch's sums are split over its threads)
    if not args.check:
        return main(argv)
    with tempfile.TemporaryDirectory(prefix="attnphase-rerun-") as tmp:
        out = io.StringIO()
        run_argv = argv + ["--out", tmp] if RERUNNABLE[argv[0]] != "stdout" else argv
        with contextlib.redirect_stdout(out):
            code = main(run_argv)
        if code != 0:
            return code  # (the command said why, in one line)
        if RERUNNABLE[argv[0]] == "stdout":
            text = out.getvalue()
        else:
            text = (Path(tmp) / RERUNNABLE[argv[0]]).read_text(encoding="utf-8")
    try:
        new = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"the recorded command {' '.join(argv)!r} did not print a JSON record") from None
    old = {k: v for k, v in record.items() if k != COMMAND_KEY}
    new = {k: v for k, v in new.items() if k != COMMAND_KEY} if isinstance(new, dict) else new
    cmp = compare_records(old, new, rtol=rtol)
    sys.stdout.write(f"rerun {args.file}: {cmp.message}\n")
    return 0 if cmp.success else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``rerun`` to the ``attnphase`` command line."""
    p = sub.add_parser("rerun", help="run the command recorded in a JSON record again (--check: compare)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("file", help="a JSON record of solve, transition, simulate, bayes, sim-transition (--json), curves (curves.json) or compare (compare.json)")
    p.add_argument("--check", action="store_true",
                   help="compare every number of the new record with the file's; exit 1 if one differs")
    p.add_argument("--rtol", default="1e-9", help="relative tolerance of --check (default 1e-9)")
    p.set_defaults(func=cmd_rerun)
