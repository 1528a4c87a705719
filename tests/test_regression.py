"""Regression pins: the command line's numbers at the reference point do not move.

``tests/data/pinned_outputs.json`` holds the outputs of ``attnphase solve --alpha 1 --omega 0.3
--branch all --json`` and ``attnphase transition --omega 0.3 --json`` at the default settings.
The solver is deterministic (seeded QMC rules, a fixed reduction order in chunks that do not depend
on the number of threads), so every value must be reproduced to 1e-9 relative on any machine. A change of the
solver that moves them on purpose updates the file in the same commit and says why in
``CHANGELOG.md``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PINNED = json.loads((Path(__file__).parent / "data" / "pinned_outputs.json").read_text())
REL = 1e-9


def _cli_json(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "attnphase", *args, "--json"], capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout)


def _assert_same(pinned: Any, got: Any, path: str) -> None:
    """Every pinned leaf is present in ``got``; numbers agree to ``REL`` relative."""
    if isinstance(pinned, dict):
        assert isinstance(got, dict), f"{path}: expected a mapping, got {got!r}"
        for k, v in pinned.items():
            assert k in got, f"{path}.{k} is missing"
            _assert_same(v, got[k], f"{path}.{k}")
    elif isinstance(pinned, float):
        assert isinstance(got, (int, float)), f"{path}: expected a number, got {got!r}"
        assert math.isclose(got, pinned, rel_tol=REL, abs_tol=1e-300), f"{path}: {got!r} != pinned {pinned!r}"
    else:
        assert got == pinned, f"{path}: {got!r} != pinned {pinned!r}"


@pytest.mark.parametrize("command", sorted(PINNED))
def test_cli_reproduces_the_pinned_outputs(command: str) -> None:
    got = _cli_json(*command.split())
    _assert_same(PINNED[command], got, command)


def test_the_comparison_fails_on_a_moved_number() -> None:
    """The check itself can fail: a value moved by 1e-8 relative is caught."""
    pinned = PINNED["transition --omega 0.3"]
    moved = {**pinned, "alpha_c": pinned["alpha_c"] * (1 + 1e-8)}
    with pytest.raises(AssertionError, match="alpha_c"):
        _assert_same(pinned, moved, "transition")


def _numbers(record: Any) -> Any:
    """The record without its wall times and the kernel library's description."""
    if isinstance(record, dict):
        return {k: _numbers(v) for k, v in record.items() if k not in ("seconds", "batch_seconds", "kernels")}
    if isinstance(record, list):
        return [_numbers(v) for v in record]
    return record


def test_the_numbers_do_not_depend_on_the_thread_count() -> None:
    """The kernels' sums are cut into chunks fixed by the rule, not by the threads: one thread and
    three give the same bits."""
    args = [sys.executable, "-m", "attnphase", "solve", "--alpha", "1", "--omega", "0.3", "--preset", "fast", "--json"]
    runs = [subprocess.run(args, capture_output=True, text=True, timeout=600, check=True,
                           env={**os.environ, "NUMBA_NUM_THREADS": n}).stdout for n in ("1", "3")]
    one, three = (_numbers(json.loads(r)) for r in runs)
    assert one == three
