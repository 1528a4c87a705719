"""Sweep specification: a Cartesian grid over the parameters of one point kind.

Values come from CLI flags (``--param alpha=0.1:2:20 --param omega=0,0.3``) or a TOML file::

    kind = "theory"
    [grid]
    alpha = "0.1:2:20"          # 'start:stop:num' (inclusive), 'a,b,c', or a TOML list
    branch = ["semantic", "positional"]
    [fixed]
    sigma = 0.5

Numbers use :func:`attnphase.spec.parse.parse_range`; strings and booleans are comma lists;
matrices (``A``, ``positions``) and number lists (``train_betas``) are separated by ``|``, e.g.
``A=0.6,0.4;0.4,0.6|0.3,0.7;0.8,0.2``.
Unknown names, empty ranges and malformed files raise ``ValueError``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from attnphase.spec.parse import parse_matrix, parse_range, to_bool, to_floats
from attnphase.sweeps.canonical import canonical_value, point_key
from attnphase.sweeps.kinds import Param, get_kind


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its kind, canonical parameters and store key."""

    kind: str
    params: Mapping[str, Any]
    key: str

    @property
    def seed(self) -> int | None:
        s = self.params.get("seed")
        return None if s is None else int(s)


@dataclass(frozen=True)
class SweepSpec:
    """A grid: ``axes`` (name, values) multiplied out, plus ``fixed`` values for every point."""

    kind: str
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        k = get_kind(self.kind)
        names = [n for n, _ in self.axes]
        if len(set(names)) != len(names):
            raise ValueError(f"parameter given twice in the grid: {names}")
        k.check_names(names)
        k.check_names(self.fixed)
        both = set(names) & set(self.fixed)
        if both:
            raise ValueError(f"parameter {sorted(both)[0]!r} is both swept and fixed")
        for n, vals in self.axes:
            if len(vals) == 0:
                raise ValueError(f"range of {n!r} is empty")

    @property
    def size(self) -> int:
        n = 1
        for _, vals in self.axes:
            n *= len(vals)
        return n

    def points(self) -> list[Point]:
        """Every grid point, normalised and validated, duplicates (same key) dropped."""
        kind = get_kind(self.kind)
        names = [n for n, _ in self.axes]
        seen: set[str] = set()
        out: list[Point] = []
        for combo in itertools.product(*(vals for _, vals in self.axes)):
            raw = dict(self.fixed)
            raw.update(zip(names, combo, strict=True))
            params = canonical_value(kind.normalize(raw))  # compute from what is stored
            key = point_key(self.kind, params)
            if key not in seen:
                seen.add(key)
                out.append(Point(self.kind, params, key))
        return out


def parse_values(p: Param, text: str) -> tuple[Any, ...]:
    """Parse the value list of one parameter from its CLI text (see the module docstring)."""
    label = f"--param {p.name}"
    text = text.strip()
    if not text:
        raise ValueError(f"{label}: range is empty")
    if p.none is not None and text.lower() == p.none:
        return (None,)
    if p.type == "float":
        return parse_range(text, label)
    if p.type == "int":
        vals = parse_range(text, label)
        if not all(float(v).is_integer() for v in vals):
            raise ValueError(f"{label} must be integers, got {text!r}")
        return tuple(dict.fromkeys(int(v) for v in vals))
    if p.type == "bool":
        return tuple(to_bool(t, label) for t in text.split(","))
    if p.type == "str" and not p.split:
        return (text,)
    if p.type == "str":
        names = tuple(t.strip() for t in text.split(",") if t.strip())
        if not names:
            raise ValueError(f"{label}: range is empty")
        return names
    if p.type == "matrix":
        return tuple(parse_matrix(t, label) for t in text.split("|"))
    if p.type == "floats":
        return tuple(to_floats(t, label) for t in text.split("|"))
    raise ValueError(f"unknown parameter type {p.type!r}")  # pragma: no cover


def _split_assignment(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ValueError(f"--param expects NAME=VALUES, got {item!r}")
    name, _, text = item.partition("=")
    name = name.strip().replace("-", "_")
    if not name:
        raise ValueError(f"--param expects NAME=VALUES, got {item!r}")
    return name, text


def sweep_from_args(kind: str, params: Sequence[str], fixed: Mapping[str, Any] | None = None,
                    base: SweepSpec | None = None) -> SweepSpec:
    """A :class:`SweepSpec` from ``--param NAME=VALUES`` items (one value: a fixed parameter).

    ``base`` (e.g. read from a TOML file) is extended; a CLI parameter replaces the file's.
    """
    k = get_kind(kind)
    pm = k.param_map()
    axes: dict[str, tuple[Any, ...]] = dict(base.axes) if base else {}
    fx: dict[str, Any] = dict(base.fixed) if base else {}
    fx.update(fixed or {})
    for item in params:
        name, text = _split_assignment(item)
        k.check_names([name])
        vals = parse_values(pm[name], text)
        axes.pop(name, None)
        fx.pop(name, None)
        if len(vals) == 1:
            fx[name] = vals[0]
        else:
            axes[name] = vals
    return SweepSpec(kind, tuple(axes.items()), fx)


def fixed_from_items(kind: str, items: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """``NAME=VALUE`` items as one fixed value each, named ``prefix + NAME`` (e.g. ``--solver
    order=8`` -> ``{"solver_order": 8}``); unknown names and lists raise ``ValueError``."""
    k = get_kind(kind)
    pm = k.param_map()
    out: dict[str, Any] = {}
    for item in items:
        name, text = _split_assignment(item)
        if prefix and prefix + name not in pm:
            known = ", ".join(n[len(prefix):] for n in pm if n.startswith(prefix))
            raise ValueError(f"unknown setting {name!r} for kind {kind!r}; known: {known}")
        name = prefix + name
        k.check_names([name])
        vals = parse_values(pm[name], text)
        if len(vals) != 1:
            raise ValueError(f"{name} takes one value here, got {text!r}")
        out[name] = vals[0]
    return out


def _toml_values(p: Param, v: Any, where: str) -> tuple[Any, ...]:
    if isinstance(v, str):
        return parse_values(p, v)
    if isinstance(v, list):
        if not v:
            raise ValueError(f"{where}: range of {p.name!r} is empty")
        if p.type == "matrix" and not (isinstance(v[0], list) and v[0]
                                       and isinstance(v[0][0], list)):
            return (v,)  # one matrix given as a nested list
        return tuple(v)
    return (v,)


def sweep_from_toml(path: str | Path, kind: str | None = None) -> SweepSpec:
    """Read a :class:`SweepSpec` from a TOML file (see the module docstring)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ValueError(f"sweep file {str(path)!r} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"malformed TOML in {str(path)!r}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read sweep file {str(path)!r}: {exc}") from None
    unknown = set(data) - {"kind", "grid", "fixed"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level key {sorted(unknown)[0]!r} "
                         "(expected kind, [grid], [fixed])")
    kname = data.get("kind", kind)
    if kind is not None and kname != kind:
        raise ValueError(f"{path}: kind {kname!r} in the file but --kind {kind!r} given")
    if not isinstance(kname, str):
        raise ValueError(f"{path}: 'kind' must be given (in the file or with --kind)")
    k = get_kind(kname)
    pm = k.param_map()
    grid = data.get("grid", {})
    fixed = data.get("fixed", {})
    if not isinstance(grid, dict) or not isinstance(fixed, dict):
        raise ValueError(f"{path}: [grid] and [fixed] must be tables")
    k.check_names(list(grid) + list(fixed))
    axes = []
    fx = dict(fixed)
    for name, v in grid.items():
        vals = _toml_values(pm[name], v, str(path))
        if len(vals) == 1:
            fx[name] = vals[0]
        else:
            axes.append((name, vals))
    return SweepSpec(kname, tuple(axes), fx)


def points_of(sweeps: Iterable[SweepSpec]) -> list[Point]:
    """The points of several sweeps, duplicates dropped (first occurrence kept)."""
    seen: set[str] = set()
    out = []
    for s in sweeps:
        for p in s.points():
            if p.key not in seen:
                seen.add(p.key)
                out.append(p)
    return out
