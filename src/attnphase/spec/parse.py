"""Numbers, ranges, matrices and choices from text or Python values: one parser, one message style.

Every function takes the value and a ``name`` that starts its message (the CLI passes the flag,
``"--sigma"``; the library and the sweeps pass the parameter, ``"sigma"``) and raises
``ValueError`` with one line, ``"<name> must be ..., got <value>"`` or
``"cannot parse <name> <text>: expected ..."``. The command line prints that line and exits
with status 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Matrix = tuple[tuple[float, ...], ...]

#: Text accepted as a boolean (lower case).
BOOL_TEXT = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}

#: The kinds of value a parameter can hold (see :func:`convert`).
KINDS = ("float", "int", "str", "bool", "matrix", "floats")

#: Integers are stored as 64-bit (numpy arrays, seeds, the results store): larger ones are refused.
INT_LIMIT = 2**63

#: The most values a ``start:stop:num`` range may hold (a larger ``num`` is a typo, not a grid).
MAX_RANGE = 100_000


def to_float(value: Any, name: str) -> float:
    """``value`` (text or number, not a boolean) as a finite float."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def to_int(value: Any, name: str) -> int:
    """``value`` as an int: integer text (``"3"``), an integer, or a float with an integer value."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    v: int | None = None
    if isinstance(value, (int, np.integer)):
        v = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        v = int(value)
    elif isinstance(value, str):
        try:
            v = int(value)
        except ValueError:
            pass
    if v is None:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not -INT_LIMIT <= v < INT_LIMIT:
        raise ValueError(f"{name} must be a 64-bit integer (|{name}| < 2^63), got {value!r}")
    return v


def to_floats(value: Any, name: str) -> tuple[float, ...]:
    """``value`` (text ``"0.9,0.999"`` or a sequence of numbers) as a non-empty tuple of finite floats."""
    if isinstance(value, str):
        items: list[Any] = [t for t in value.replace(" ", "").split(",") if t]
    elif isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
    else:
        raise ValueError(f"{name} must be numbers separated by commas, got {value!r}")
    if not items:
        raise ValueError(f"{name} must hold at least one number, got {value!r}")
    return tuple(to_float(v, name) for v in items)


def to_bool(value: Any, name: str) -> bool:
    """``value`` as a bool: a boolean, ``0``/``1``, or one of :data:`BOOL_TEXT`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_TEXT:
        return BOOL_TEXT[value.strip().lower()]
    raise ValueError(f"{name} must be true/false, got {value!r}")


def to_str(value: Any, name: str, choices: tuple[str, ...] = ()) -> str:
    """``value`` as a string, one of ``choices`` when they are given."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    if choices and value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose from {', '.join(choices)}")
    return value


def parse_matrix(text: str, name: str = "matrix") -> Matrix:
    """Parse ``"0.6,0.4;0.4,0.6"`` (rows separated by ``;``, entries by ``,``); every entry finite."""
    out = []
    for row in text.strip().split(";"):
        try:
            out.append(tuple(float(e) for e in row.replace(" ", "").split(",")))
        except ValueError:
            raise ValueError(
                f"cannot parse {name} {text!r}: expected numbers like '0.6,0.4;0.4,0.6'"
            ) from None
    if len({len(r) for r in out}) != 1:
        raise ValueError(f"cannot parse {name} {text!r}: rows have different lengths")
    if not all(math.isfinite(e) for r in out for e in r):
        raise ValueError(f"{name} must have finite entries, got {text!r}")
    return tuple(out)


def as_matrix(value: Any, name: str) -> Matrix:
    """``value`` (text for :func:`parse_matrix`, or nested sequences) as a tuple of finite float rows."""
    if isinstance(value, str):
        value = parse_matrix(value, name)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric matrix, got {value!r}") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must have finite entries, got {value!r}")
    return tuple(tuple(float(x) for x in row) for row in arr)


def parse_range(text: str, name: str = "range") -> tuple[float, ...]:
    """Parse a range ``start:stop:num`` (inclusive linspace, ``1 <= num <=`` :data:`MAX_RANGE`), a list
    ``a,b,c`` or one number; every value finite."""
    text = text.strip()
    bad = ValueError(f"cannot parse {name} {text!r}: expected 'start:stop:num', 'a,b,c' or a number")
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise bad
        try:
            start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
        except ValueError:
            raise bad from None
        if num < 1:
            raise ValueError(f"{name} {text!r} is empty (num must be >= 1)")
        if num > MAX_RANGE:
            raise ValueError(f"{name} {text!r} has too many values (num must be <= {MAX_RANGE})")
        values = tuple(float(x) for x in np.linspace(start, stop, num))
    else:
        try:
            values = tuple(float(x) for x in text.split(",") if x.strip() != "")
        except ValueError:
            raise bad from None
    if not values:
        raise ValueError(f"{name} {text!r} is empty")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name} {text!r} contains non-finite values")
    return values


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "float": to_float,
    "int": to_int,
    "bool": to_bool,
    "str": to_str,
    "matrix": as_matrix,
    "floats": to_floats,
}


def convert(kind: str, value: Any, name: str) -> Any:
    """``value`` converted to ``kind`` (one of :data:`KINDS`) by the function above for it."""
    try:
        fn = _CONVERTERS[kind]
    except KeyError:
        raise ValueError(f"unknown parameter type {kind!r}") from None
    return fn(value, name)
