"""Check that two ``attnphase ... --json`` records hold the same numbers (used by ``.ci/wheel``).

    python .ci/same_numbers.py A.json B.json [--rel 1e-10] [--version X.Y.Z] [--kernels c numba]

Both records must have the same keys and list lengths, the same strings, booleans, integers and
nulls, and floats that agree to ``--rel`` relative (both zero, or both the same infinity or NaN,
also agree). Wall times (any key named ``seconds`` or ``batch_seconds``) and the name of the
kernel library (``params.kernels``, which says which kernels ran) are left out. With
``--version``, ``params.version`` of both must equal it; with ``--kernels``, ``params.kernels``
of each must start with the given word (so that the two records do come from different
kernels). Prints every difference, one per line,
and exits with status 1 if there is one, 2 on unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

#: keys whose values differ from run to run (wall times) wherever they appear
IGNORED_KEYS = frozenset({"seconds", "batch_seconds"})
#: full paths left out: which kernel library ran
IGNORED_PATHS = frozenset({"params.kernels"})


def differences(a: Any, b: Any, rel: float, path: str = "") -> list[str]:
    """Every place where ``b`` differs from ``a`` (see the module docstring), as ``path: why``."""
    where = path or "<root>"
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key in IGNORED_KEYS or sub in IGNORED_PATHS:
                continue
            if key not in a or key not in b:
                out.append(f"{sub}: only in {'the first' if key in a else 'the second'} record")
                continue
            out += differences(a[key], b[key], rel, sub)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, rel, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return []
        if a == b or math.isclose(a, b, rel_tol=rel, abs_tol=0.0):
            return []
        gap = abs(a - b) / max(abs(a), abs(b))
        return [f"{where}: {a!r} against {b!r} (relative difference {gap:.3g})"]
    if type(a) is not type(b) or a != b:
        return [f"{where}: {a!r} against {b!r}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare the numbers of two attnphase JSON records.")
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--rel", type=float, default=1e-10, help="relative tolerance of floats (default 1e-10)")
    parser.add_argument("--version", help="the version both records must carry in params.version")
    parser.add_argument("--kernels", nargs=2, metavar=("FIRST", "SECOND"),
                        help="the first word of params.kernels of each record (c, numba)")
    args = parser.parse_args(argv)
    records = []
    for name in (args.first, args.second):
        try:
            with open(name) as f:
                records.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"same_numbers: cannot read {name}: {e}", file=sys.stderr)
            return 2
    found = differences(records[0], records[1], args.rel)
    if args.version is not None:
        for name, rec in zip((args.first, args.second), records, strict=True):
            got = rec.get("params", {}).get("version") if isinstance(rec, dict) else None
            if got != args.version:
                found.append(f"{name}: params.version is {got!r}, not {args.version!r}")
    for word, name, rec in zip(args.kernels or (), (args.first, args.second), records, strict=False):
        got = rec.get("params", {}).get("kernels") if isinstance(rec, dict) else None
        if not isinstance(got, str) or got.split(" ", 1)[0] != word:
            found.append(f"{name}: params.kernels is {got!r}, not the {word} kernels")
    for line in found:
        print(line)
    if found:
        print(f"same_numbers: {len(found)} difference(s) between {args.first} and {args.second}", file=sys.stderr)
        return 1
    print(f"same_numbers: {args.first} and {args.second} agree (floats to {args.rel:g} relative)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
