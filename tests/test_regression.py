"""Regression pins: the command line's numbers at the reference point do not move.

``tests/data/pinned_outputs.json`` holds the outputs of ``attnphase solve --alpha 1 --omega 0.3
--branch all --json`` and ``attnphase transition --omega 0.3 --json`` at the default settings, and
the platform they were computed on (:func:`platform_signature`). The solver is deterministic
(seeded QMC rules, a fixed reduction order in chunks that do not depend on the number of threads),
so on a machine with the same signature every value must be reproduced to ``REL`` (1e-9)
relative. numpy picks its vectorised loops by the CPU's instruction set, and those of another set
round some operations differently, which the fixed-point iteration carries into the ninth digit:
pins made on another x86-64 CPU (its numpy loops not recorded) and this file's (``X86_V3``) differ
by at most 4.3e-9 relative on the values (order parameters, errors, ``alpha_c``, ``alpha_l``) and
2.2e-4 on the error estimates (standard errors over four rules). On another platform the values
must therefore agree to ``REL_OTHER_PLATFORM`` (1e-7, far below the solver's ``tol`` of 1e-6 and
its error estimates of 1e-4 to 1e-3) and the estimates to ``REL_ESTIMATE_OTHER_PLATFORM`` (1e-3).
A change of the solver that moves them on purpose updates the file in the same commit (on any
machine: the signature goes with it) and says why in ``CHANGELOG.md``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PINS = json.loads((Path(__file__).parent / "data" / "pinned_outputs.json").read_text())
PINNED = PINS["outputs"]
REL = 1e-9
REL_OTHER_PLATFORM = 1e-7
REL_ESTIMATE_OTHER_PLATFORM = 1e-3


def platform_signature() -> dict[str, Any]:
    """What selects the code paths behind the numbers: the CPU architecture and the instruction
    sets numpy's vectorised loops use here (its baseline and the dispatched sets the CPU has)."""
    try:
        from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
        simd = [*__cpu_baseline__, *(f for f in __cpu_dispatch__ if __cpu_features__.get(f))]
    except ImportError:  # pragma: no cover - (another numpy layout: no signature, the looser check)
        simd = ["unknown"]
    return {"machine": platform.machine(), "numpy_simd": simd}


def _tolerance(path: str, same_platform: bool) -> float:
    """``REL`` on the pins' platform; elsewhere ``REL_OTHER_PLATFORM``, and
    ``REL_ESTIMATE_OTHER_PLATFORM`` for an error estimate (a path through ``errors`` or
    ``error_estimate``)."""
    if same_platform:
        return REL
    estimate = any(part in ("errors", "error_estimate") for part in path.split("."))
    return REL_ESTIMATE_OTHER_PLATFORM if estimate else REL_OTHER_PLATFORM


def _cli_json(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "attnphase", *args, "--json"], capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout)


def _assert_same(pinned: Any, got: Any, path: str, same_platform: bool = True) -> None:
    """Every pinned leaf is present in ``got``; numbers agree to :func:`_tolerance` relative."""
    if isinstance(pinned, dict):
        assert isinstance(got, dict), f"{path}: expected a mapping, got {got!r}"
        for k, v in pinned.items():
            assert k in got, f"{path}.{k} is missing"
            _assert_same(v, got[k], f"{path}.{k}", same_platform)
    elif isinstance(pinned, float):
        assert isinstance(got, (int, float)), f"{path}: expected a number, got {got!r}"
        rel = _tolerance(path, same_platform)
        assert math.isclose(got, pinned, rel_tol=rel, abs_tol=1e-300), (
            f"{path}: {got!r} != pinned {pinned!r} (to {rel:g} relative"
            f"{'' if same_platform else ': pinned on ' + json.dumps(PINS['platform'])})")
    else:
        assert got == pinned, f"{path}: {got!r} != pinned {pinned!r}"


@pytest.mark.parametrize("command", sorted(PINNED))
def test_cli_reproduces_the_pinned_outputs(command: str) -> None:
    got = _cli_json(*command.split())
    _assert_same(PINNED[command], got, command, platform_signature() == PINS["platform"])


def test_the_comparison_fails_on_a_moved_number() -> None:
    """The check itself can fail: a value moved by 1e-8 relative is caught on the pins' platform,
    one moved by 1e-6 (or an error estimate by 1e-2) on any other."""
    pinned = PINNED["transition --omega 0.3"]

    def moved(rel: float) -> dict[str, Any]:
        return {**pinned, "alpha_c": pinned["alpha_c"] * (1 + rel)}

    with pytest.raises(AssertionError, match="alpha_c"):
        _assert_same(pinned, moved(1e-8), "transition")
    _assert_same(pinned, moved(1e-8), "transition", same_platform=False)
    with pytest.raises(AssertionError, match="alpha_c"):
        _assert_same(pinned, moved(1e-6), "transition", same_platform=False)
    errors = {k: v * (1 + 1e-2) for k, v in pinned["errors"].items()}
    with pytest.raises(AssertionError, match="errors"):
        _assert_same(pinned, {**pinned, "errors": errors}, "transition", same_platform=False)


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
