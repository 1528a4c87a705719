"""The pieces every result object shares: read-only mappings and arrays (:class:`ReadOnlyDict`,
:func:`frozen`), the formatting of a one-line summary, and the comparison of a stored record with a
rerun (:func:`compare_records`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np


class ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses changes (``TypeError``): what the results hold where a record is a
    mapping. It is a ``dict`` for everything that reads (``isinstance``, ``json``, pandas, its
    ``repr``), unlike :class:`types.MappingProxyType`; ``dict(x)`` is a changeable copy."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a result's record is read-only; dict(record) is a copy that can be changed")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # (pickle and copy rebuild it whole, not item by item)
        return (type(self), (dict(self),))


def frozen(obj: Any) -> Any:
    """A read-only copy of a JSON-like record: mappings become :class:`ReadOnlyDict` (keys as
    strings), lists, tuples and arrays tuples, numpy scalars Python numbers."""
    if isinstance(obj, Mapping):
        return ReadOnlyDict({str(k): frozen(v) for k, v in obj.items()})
    if isinstance(obj, np.ndarray):
        return frozen(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return tuple(frozen(v) for v in obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def fmt_g(v: float | None, fmt: str = ".6g") -> str:
    """A number for a ``repr``: ``none`` for ``None``, ``0`` for an exact zero."""
    if v is None:
        return "none"
    return "0" if v == 0 else format(v, fmt)


def one_line(text: str, width: int = 200) -> str:
    """``text`` cut to ``width`` characters (a ``repr`` shows the start of a long message)."""
    return text if len(text) <= width else text[:width - 3] + "..."


#: keys of the JSON records that hold wall-clock times: they differ from run to run and are left
#: out of :func:`compare_records`
WALL_TIME_KEYS = frozenset({"seconds", "batch_seconds", "elapsed_s"})


@dataclass(frozen=True)
class RecordComparison:
    """The numbers of two JSON records compared leaf by leaf (:func:`compare_records`).

    ``compared``: how many numbers (and booleans) were compared; ``differing``: how many differ by
    more than ``rtol``; ``largest``: the largest relative difference ``|a - b| / max(|a|, |b|)``
    (``inf`` where a number is missing on one side or a boolean differs) and ``where`` its path.
    ``success``: no number differs by more than ``rtol``; ``message``: one line.
    """

    compared: int
    differing: int
    largest: float
    where: str | None
    rtol: float
    success: bool
    message: str


def compare_records(old: Any, new: Any, rtol: float = 1e-9,
                    skip: frozenset[str] = WALL_TIME_KEYS) -> RecordComparison:
    """Compare every number (and boolean) of the JSON record ``old`` with the one at the same path
    of ``new``: relative difference ``|a - b| / max(|a|, |b|)`` (0 for equal values), a number
    on one side only counts as an infinite difference, and so does a boolean that differs or that
    ``new`` lacks. Strings (versions, reasons, kernel names), the keys in ``skip`` (wall-clock
    times) and a boolean that only ``new`` has (a flag added to the records since ``old`` was
    written, such as ``success``: it summarises numbers that are compared) are not compared."""
    diffs: list[tuple[float, str, Any, Any]] = []
    count = 0

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def walk(a: Any, b: Any, path: str) -> None:
        nonlocal count
        if isinstance(a, Mapping) or isinstance(b, Mapping):
            am = a if isinstance(a, Mapping) else {}
            bm = b if isinstance(b, Mapping) else {}
            for k in dict.fromkeys([*am, *bm]):
                if k not in skip:
                    walk(am.get(k), bm.get(k), f"{path}.{k}" if path else str(k))
            return
        if isinstance(a, list) or isinstance(b, list):
            al = a if isinstance(a, list) else []
            bl = b if isinstance(b, list) else []
            for i in range(max(len(al), len(bl))):
                walk(al[i] if i < len(al) else None, bl[i] if i < len(bl) else None, f"{path}[{i}]")
            return
        if a is None and isinstance(b, bool):
            return
        if number(a) and number(b):
            count += 1
            if a != b:
                rel = abs(a - b) / max(abs(a), abs(b))
                if rel > 0:
                    diffs.append((rel, path, a, b))
        elif number(a) or number(b) or isinstance(a, bool) or isinstance(b, bool):
            count += 1
            if a != b or type(a) is not type(b):
                diffs.append((math.inf, path, a, b))

    walk(old, new, "")
    bad = [d for d in diffs if d[0] > rtol]
    largest, where, a, b = max(diffs, key=lambda d: d[0]) if diffs else (0.0, None, None, None)
    if bad:
        msg = (f"{len(bad)} of {count} numbers differ by more than {rtol:g} relative; largest difference "
               f"{largest:.3g} at {where} ({a!r} recorded, {b!r} now)")
    else:
        msg = f"all {count} numbers agree to {rtol:g} relative" + (
            f" (largest difference {largest:.3g} at {where})" if diffs else " (bit for bit)")
    return RecordComparison(compared=count, differing=len(bad), largest=float(largest), where=where,
                            rtol=rtol, success=not bad, message=msg)
