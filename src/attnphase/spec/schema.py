"""Parameters described once, on the fields of a frozen dataclass.

A field declared with :func:`described` carries a :class:`FieldInfo` (kind of value, help text,
choices, bounds, CLI flag). :func:`parameters` reads them back as :class:`Parameter` entries,
from which the command-line flags (:func:`attnphase.cli.common.add_model_flags`), the sweep
kinds' parameter tables (:mod:`attnphase.sweeps.kinds`) and the dataclass's own validation
(:meth:`Parameter.coerce`) are made. :class:`attnphase.spec.ModelSpec`, the solver's
:class:`attnphase.theory.SolverSettings` and the simulator's
:class:`attnphase.spec.training.TrainSettings` are described this way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from attnphase.spec.parse import KINDS, convert, parse_matrix, to_float, to_int

#: Key of the :class:`FieldInfo` in a dataclass field's ``metadata``.
SCHEMA_KEY = "attnphase.schema"

#: Flag groups, each a titled section of a command's ``--help`` (group: (title, description)):
#: the core ``model``, and the extensions ``mixture`` (docs/model.md section 9), ``cross``
#: (section 10), ``attention`` (heads and attention maps, section 11) and ``value`` (value matrix
#: and linear baseline, (6.4), (4.3)). All but ``value`` are on every command that builds a model,
#: ``value`` on the commands that train (and ``--value``, ``--value-gain`` on the theory commands).
#: ``solver`` holds the theory solver's settings (:class:`attnphase.theory.SolverSettings`, on the
#: theory commands), ``training`` the simulator's (:class:`attnphase.spec.training.TrainSettings`,
#: on the commands that train).
GROUPS: dict[str, tuple[str, str | None]] = {
    "model": ("model", None),
    "mixture": ("mixture tokens", "Gaussian-mixture tokens (docs/model.md section 9); off at --mixture 0"),
    "cross": ("cross-attention", "variants cross and untied-cross only (docs/model.md section 10)"),
    "attention": ("attention heads and maps", "several heads and other attention maps than the softmax "
                  "(docs/model.md section 11)"),
    "value": ("value", "value matrix and linear baseline (docs/model.md (6.4), (4.3))"),
    "solver": ("solver", None),
    "training": ("training", None),
}


@dataclass(frozen=True)
class FieldInfo:
    """What a field holds and how it is shown; bounds are checked by :meth:`Parameter.coerce`."""

    kind: str
    help: str
    #: the flag group (:data:`GROUPS`): the section of ``--help`` and which commands have the flag
    group: str = "model"
    choices: tuple[str, ...] = ()
    #: an example value in CLI text (matrices)
    example: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    #: the minimum itself is excluded (``> minimum``)
    strict_minimum: bool = False
    #: the maximum itself is excluded (``< maximum``)
    strict_maximum: bool = False
    #: the CLI flag (default ``--`` and the name with ``-`` for ``_``)
    flag: str | None = None
    #: an optional extension of the model: at its default (the extension off) the field is left
    #: out of a sweep point's parameters, so that a point's key names only the extensions it uses
    extension: bool = False
    #: the field may be ``None`` (besides a default of ``None``), written as this text on the
    #: command line (``"auto"``: the solver picks; ``"none"``: the step is left out)
    none: str | None = None
    #: a rare setting: no flag of its own, set as ``NAME=VALUE`` after the group's one flag
    #: (``--solver``, ``--train``) under the field's name
    rare: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown parameter type {self.kind!r}; choose from {', '.join(KINDS)}")
        if self.group not in GROUPS:
            raise ValueError(f"unknown flag group {self.group!r}; choose from {', '.join(GROUPS)}")


def described(default: Any, kind: str, help: str, **info: Any) -> Any:
    """A dataclass field with default ``default`` described by ``FieldInfo(kind, help, **info)``."""
    return dataclasses.field(default=default, metadata={SCHEMA_KEY: FieldInfo(kind, help, **info)})


@dataclass(frozen=True)
class Parameter:
    """One described field: its name, default and :class:`FieldInfo`."""

    name: str
    default: Any
    info: FieldInfo

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def group(self) -> str:
        return self.info.group

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--teacher-rank``."""
        return self.info.flag or "--" + self.name.replace("_", "-")

    @property
    def help(self) -> str:
        """One line: the help text and the choices."""
        if self.info.choices:
            return f"{self.info.help}: one of {', '.join(self.info.choices)}"
        return self.info.help

    @property
    def cli_help(self) -> str:
        """:attr:`help` with the example (matrices) and the default, for the flag."""
        text = self.help
        if self.info.example is not None:
            text += f", e.g. '{self.info.example}'"
        if self.kind != "bool" and self.default is not None:
            text += f" (default {self.default:g})" if self.kind == "float" else f" (default {self.default})"
        return text

    @property
    def optional(self) -> bool:
        """Whether the field may hold ``None``."""
        return self.default is None or self.info.none is not None

    @property
    def text_default(self) -> str | None:
        """The default as CLI text (``None`` where the default is ``None``)."""
        if self.default is None:
            return None
        return repr(self.default) if self.kind == "float" else str(self.default)

    def from_text(self, text: str | bool | None, label: str | None = None) -> Any:
        """The value of the flag's text (``None`` stays ``None``); messages name ``label``
        (default: the flag). Only the kind is checked here; :meth:`coerce` checks the rest."""
        label = label or self.flag
        if self.info.none is not None and isinstance(text, str) and text.strip().lower() == self.info.none:
            return None
        if text is None or (self.kind == "bool" and not isinstance(text, str)):
            return text if text is None else bool(text)
        if self.kind == "bool":
            return convert("bool", text, label)
        if self.kind == "float":
            return to_float(text, label)
        if self.kind == "int":
            return to_int(text, label)
        if self.kind == "matrix":
            return parse_matrix(str(text), label)
        if self.kind == "floats":
            return convert("floats", text, label)
        return text

    def coerce(self, value: Any) -> Any:
        """``value`` converted to the kind and checked against the choices and bounds;
        ``ValueError`` (one line, naming the parameter) otherwise. ``None`` is kept where the
        field may hold it (:attr:`optional`)."""
        if value is None and self.optional:
            return None
        v = convert(self.kind, value, self.name)
        info = self.info
        if info.choices and v not in info.choices:
            raise ValueError(f"unknown {self.name} {v!r}; choose from {', '.join(info.choices)}")
        lo, hi = info.minimum, info.maximum
        if lo is not None and hi is not None:
            below = v <= lo if info.strict_minimum else v < lo
            above = v >= hi if info.strict_maximum else v > hi
            if below or above:
                left, right = "(" if info.strict_minimum else "[", ")" if info.strict_maximum else "]"
                raise ValueError(f"{self.name} must lie in {left}{lo:g}, {hi:g}{right}, got {v}")
        if lo is not None and hi is None:
            if info.strict_minimum and not v > lo:
                raise ValueError(f"{self.name} must be > {lo:g}, got {v}")
            if not info.strict_minimum and not v >= lo:
                raise ValueError(f"{self.name} must be >= {lo:g}, got {v}")
        return v


@functools.cache
def parameters(cls: type) -> tuple[Parameter, ...]:
    """The :class:`Parameter` of every field of the dataclass ``cls``, in field order; every
    field must be declared with :func:`described`."""
    out = []
    for f in dataclasses.fields(cls):
        info = f.metadata.get(SCHEMA_KEY)
        if not isinstance(info, FieldInfo):
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with described()")
        out.append(Parameter(f.name, f.default, info))
    return tuple(out)


def changes_from_items(params: Sequence[Parameter], items: Sequence[str], option: str) -> dict[str, Any]:
    """``NAME=VALUE`` items given to ``option`` (e.g. ``--solver max_iter=500``) as the fields of
    ``params`` they set, each value read by :meth:`Parameter.from_text` and checked by
    :meth:`Parameter.coerce`; ``ValueError`` (one line) for an item without ``=``, an unknown name
    (the known ones listed) or a bad value. A name may use ``-`` for ``_``."""
    known = {p.name: p for p in params}
    out: dict[str, Any] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not eq or not name:
            raise ValueError(f"{option} expects NAME=VALUE, got {item!r}")
        if name not in known:
            raise ValueError(f"unknown {option} setting {name!r}; known: {', '.join(known)}")
        p = known[name]
        out[name] = p.coerce(p.from_text(text.strip(), f"{option} {name}"))
    return out
