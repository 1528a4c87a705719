"""One conversion of results to plain JSON, used by the command line, the sweeps and the store.

:func:`jsonable` returns a copy made of ``dict`` (string keys), ``list``, ``str``, ``int``,
``float``, ``bool`` and ``None`` only: mappings (read-only ones too) become dicts, numpy scalars and arrays become Python numbers and lists,
tuples become lists, NaN and infinities become ``None``, an object with ``to_dict()`` its dict,
anything else its ``str``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """Plain-JSON copy of ``obj`` (see the module docstring)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if obj is None or isinstance(obj, str):
        return obj
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    return str(obj)
