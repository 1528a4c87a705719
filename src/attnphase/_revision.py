"""The numerical revision: a short hash that changes whenever the numbers of a component can.

The package version does not change when the solver's numbers do, so results are tagged with
this instead. The revision of a *component* (:data:`COMPONENTS`: ``spec``, ``theory``, ``sim``,
``histogram``) is the SHA-256, cut to :data:`DIGITS` hex digits, of

- the *normalised* source of every module of the component's packages and of the components it
  uses (``theory`` and ``sim`` use ``spec``): each ``.py`` file parsed and written back by
  :func:`ast.unparse` with its docstrings removed, so comments, formatting and docstrings do not
  count but every change of code does (a renamed variable too: a false "changed" costs a
  recompute, a missed change would mix old and new numbers); other source files the package
  compiles (the theory's ``kernels.c``) count byte for byte;
- the versions of the numerical libraries that can change the bits (:class:`Component`
  ``libraries``: numpy, scipy and numba for the theory, torch for the simulators), read from the
  installed distributions' metadata.

Design choices: the hash is computed from the files, not declared by hand (a hand-bumped
number is forgotten exactly when it matters), and per component, so that a change of the
simulator does not make the theory's stored points stale. :func:`ast.unparse` is used rather than
:func:`ast.dump` because its text does not change when a newer Python adds fields to the AST
nodes. Not covered: the C compiler and the C library that build and run the native kernels (their
flags forbid fused multiply-adds and fast math, so the C and numba kernels agree bit for bit) and
the CPU.

Nothing is read at import; each revision is computed on first use and cached for the process by
:func:`functools.cache`; the normalised sources are kept on disk between processes, under the
hash of each file's text (:func:`_normalized_cached`).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import platform
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from attnphase._cache import cache_root, store_bytes

#: Hex digits kept of the SHA-256.
DIGITS = 12

#: Source files of a package that count, besides ``*.py``: compiled at run time.
_EXTRA_SOURCES = ("*.c",)


@dataclass(frozen=True)
class Component:
    """A part of the package whose numbers are tagged together."""

    name: str
    #: packages (relative to the ``attnphase`` folder) whose every source file counts
    packages: tuple[str, ...]
    #: distributions whose version counts
    libraries: tuple[str, ...] = ()
    #: other components whose revision counts
    uses: tuple[str, ...] = ()


#: The components (their names are what :func:`numerics_revision` takes).
COMPONENTS: MappingProxyType[str, Component] = MappingProxyType({c.name: c for c in (
    Component("spec", ("spec",), ("numpy",)),
    Component("theory", ("theory",), ("numpy", "scipy", "numba"), uses=("spec",)),
    Component("sim", ("sim",), ("numpy", "torch"), uses=("spec",)),
    Component("histogram", ("histogram",), ("numpy", "torch")),
)})


def _root() -> Path:
    return Path(__file__).resolve().parent


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalized_source(text: str) -> str:
    """Python source with comments, formatting and docstrings removed (``ast.unparse`` of its
    tree without docstrings): two sources with the same code give the same text."""
    return ast.unparse(_strip_docstrings(ast.parse(text)))


def _normalized_cached(text: str) -> str:
    """:func:`normalized_source` of ``text``, kept in the cache folder
    (:func:`attnphase._cache.cache_root`) under the SHA-256 of ``text`` and the Python version
    (whose :func:`ast.unparse` writes it): the parse and unparse of every module cost each
    process about half a second; reading them back, a few milliseconds."""
    root = cache_root()
    if root is None:
        return normalized_source(text)
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    path = root / f"normalized-py{platform.python_version()}" / f"{key}.py"
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    body = normalized_source(text)
    store_bytes(path, body.encode("utf-8"))
    return body


def source_digest(files: dict[str, str]) -> str:
    """SHA-256 hex of source files ``{relative name: text}`` (Python normalised by
    :func:`normalized_source`, other files as they are), in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        text = files[name]
        body = _normalized_cached(text) if name.endswith(".py") else text
        h.update(f"{name}\0{len(body)}\0".encode())
        h.update(body.encode("utf-8"))
    return h.hexdigest()


def _package_files(package: str) -> dict[str, str]:
    folder = _root() / package
    if not folder.is_dir():
        raise ValueError(f"no package attnphase.{package} at {folder}")
    paths = [p for pattern in ("*.py", *_EXTRA_SOURCES) for p in folder.rglob(pattern)]
    return {f"{package}/{p.relative_to(folder).as_posix()}": p.read_text(encoding="utf-8")
            for p in paths if "__pycache__" not in p.parts}


def library_version(name: str) -> str:
    """The installed version of distribution ``name`` (``"absent"`` if it is not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def combine(parts: dict[str, str]) -> str:
    """:data:`DIGITS` hex digits of the SHA-256 of ``{name: value}`` in sorted name order."""
    text = "\n".join(f"{k}={parts[k]}" for k in sorted(parts))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGITS]


@cache
def numerics_revision(component: str) -> str:
    """The numerical revision of ``component`` (a key of :data:`COMPONENTS`): :data:`DIGITS`
    hex digits that change whenever the code or library versions that compute its numbers do
    (see the module docstring). ``ValueError`` for an unknown component."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; choose from {', '.join(COMPONENTS)}")
    c = COMPONENTS[component]
    files: dict[str, str] = {}
    for package in c.packages:
        files.update(_package_files(package))
    parts = {"source": source_digest(files)}
    parts.update({f"lib:{lib}": library_version(lib) for lib in c.libraries})
    parts.update({f"uses:{u}": numerics_revision(u) for u in c.uses})
    return combine(parts)


@cache
def function_digest(func: Callable[..., Any]) -> str:
    """SHA-256 hex of the normalised source of ``func`` (:func:`normalized_source`; its
    qualified name where the source cannot be read)."""
    try:
        text = normalized_source(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        text = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
