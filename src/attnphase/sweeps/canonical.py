"""Canonical, rounded JSON of point parameters and the point key (a hash of it).

Two points are the same point when their kind and their parameters, rounded to
:data:`SIGNIFICANT_DIGITS` significant digits, agree; the key is the SHA-256 of
``kind`` and the canonical JSON (sorted keys, no spaces). Results are stored with
full precision (:func:`to_json`), only parameters are rounded.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from attnphase._json import jsonable

#: Parameters are rounded to this many significant digits before hashing.
SIGNIFICANT_DIGITS = 12


def round_sig(x: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``x`` rounded to ``digits`` significant digits (``-0.0`` becomes ``0.0``)."""
    r = float(format(float(x), f".{digits}g"))
    return 0.0 if r == 0 else r


def canonical_value(obj: Any) -> Any:
    """Plain-JSON copy of ``obj`` with floats rounded; NaN or inf raise ``ValueError``."""
    if isinstance(obj, dict):
        return {str(k): canonical_value(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [canonical_value(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        if not math.isfinite(float(obj)):
            raise ValueError(f"parameters must be finite, got {obj!r}")
        return round_sig(float(obj))
    if obj is None or isinstance(obj, str):
        return obj
    raise ValueError(f"cannot use {obj!r} ({type(obj).__name__}) as a sweep parameter")


def canonical_json(params: dict[str, Any]) -> str:
    """Canonical JSON text of rounded parameters (sorted keys, compact separators)."""
    return json.dumps(canonical_value(params), sort_keys=True, separators=(",", ":"),
                      allow_nan=False)


def point_key(kind: str, params: dict[str, Any]) -> str:
    """The store key of a point: SHA-256 hex of ``kind`` and :func:`canonical_json`."""
    text = kind + "\n" + canonical_json(params)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def to_json(obj: Any) -> str:
    """Deterministic JSON text of a result (:func:`attnphase._json.jsonable`; sorted keys, full
    float precision)."""
    return json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
