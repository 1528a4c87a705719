"""The theory's kernels compiled from C on first use, and the choice between them and numba.

Two implementations of the node loops of a data step and of the test error exist:

* C (the fast path): ``kernels.c`` (the target map docs/model.md (1.2), the second minimum, the
  Stein sums (3.3) and the test-error sum (4.2), of one softmax head or of several, (11.1)) and,
  per geometry of :data:`attnphase.theory.geometries.GEOMETRIES` and
  :data:`attnphase.theory.geometries.HEAD_GEOMETRIES`, the proximal kernel (3.2) written out on
  scalars by :func:`attnphase.theory.native.codegen.c_source`. They are compiled with the
  system's C compiler (``$CC``, else ``cc``/``gcc``; :data:`CFLAGS`, OpenMP where it links) into
  the cache folder of the Sobol samples (:func:`attnphase._cache.cache_root`, one
  file per source, flags and CPU) and loaded with ``ctypes``; a later process only loads them
  (~1 ms). ``python -m attnphase.theory.native`` prints the generated sources.
* numba (:mod:`attnphase.theory.jit`): the generic kernels, which loop over ``L`` and ``F`` at
  run time; the fallback, and the reference the tests compare the C kernels against. A process
  that runs them pays ~0.7 s before its first data step (``import numba`` and the loading of
  its cached kernels), so a solve with the C kernels never imports numba.

``$ATTNPHASE_KERNELS``: ``auto`` (default: C where it compiles, numba otherwise, e.g. without a
compiler or with the cache switched off by an empty ``$ATTNPHASE_CACHE_DIR``), ``c`` (an error
if the C kernels cannot be built) or ``numba``. A geometry outside ``GEOMETRIES`` and
``HEAD_GEOMETRIES``, and an attention map other than the softmax, runs numba's generic kernels
in either case. Both run the same loops with the same operations in the
same order, in the same chunks of nodes (:func:`chunks`), so they give the same numbers
(the written-out proximal kernel drops the terms that are zero for its geometry, which changes
no sum; the tests compare them node by node), except the test-error sum, which numba adds up in
a parallel reduction (to rounding). :func:`describe` says which kernels ran, recorded in the
solver's output.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnphase._cache import cache_root
from attnphase.theory.geometries import Geometry
from attnphase.theory.native.codegen import c_source

BACKENDS = ("auto", "c", "numba")
ENV = "ATTNPHASE_KERNELS"
#: the compiler flags: ``-ffp-contract=off``, no fused multiply-adds, so the C and numba kernels
#: round alike; ``-fno-math-errno`` (``sqrt`` and ``exp`` without the ``errno`` branch) and the
#: machine's own instructions make the proximal kernel 1.3x faster; neither changes a result
#: (the tests compare the C and numba kernels node by node). The library is built per CPU
#: (:func:`_cpu`), and without ``-march=native`` where the compiler refuses it
CFLAGS = ("-O2", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared")
#: the variants tried in turn: native instructions and OpenMP, OpenMP, neither
VARIANTS = (("-march=native", "-fopenmp"), ("-fopenmp",), ())

_l, _d, _i, _p = ctypes.c_long, ctypes.c_double, ctypes.c_int, ctypes.c_void_p
#: argument types of the functions of ``kernels.c`` and of a geometry's ``prox_kernel``
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "target_kernel": (None, [_l, _l, _l, _p, _d, _p, _i, _p, _i]),
    "second_minimum_kernel": (None, [_l, _l, _l, _p, _p, _p, _d, _p, _p, _i]),
    "stein_sums": (None, [_l, _l, _l, _l, _p, _p, _p, _p, _p, _p, _d, _p, _p, _p, _i, _p, _p, _p, _p, _p, _p, _l,
                          _i]),
    "test_loss_sum": (_d, [_l, _p, _p, _l, _p, _p, _l, _l, _l, _p, _p, _p, _p, _p, _p, _p, _d, _p, _i, _p, _l, _i,
                           _l, _p, _p]),
    "prox_kernel": (None, [_l, _l, _p, _p, _p, _p, _p, _i, _d, _p, _p, _p, _p, _p, _l, _d, _i, _i]),
    "node_kernel": (None, [_l, _p, _p, _p, _p, _p, _i, _p, _p, _p]),
}


def requested() -> str:
    """``$ATTNPHASE_KERNELS`` (``auto`` when unset); anything else is a ``ValueError``."""
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in BACKENDS:
        raise ValueError(f"{ENV}={choice!r}: choose one of {', '.join(BACKENDS)}")
    return choice


def chunks(items: int) -> int:
    """The chunks a kernel's loop over ``items`` nodes is cut into, each adding up its own partial
    sums: 64 (fewer for a smaller rule) whatever the number of threads, so that a result is the
    same bits with any thread count and in any sweep worker; the threads take the
    chunks in turn."""
    return max(1, min(items, 64))


def kernel_threads() -> int:
    """Threads of the kernels: numba's thread count when numba is loaded
    (``numba.set_num_threads`` counts), else what numba would start with
    (``$NUMBA_NUM_THREADS``, else the CPUs this process may use)."""
    nb = sys.modules.get("numba")
    if nb is not None and hasattr(nb, "get_num_threads"):
        return int(nb.get_num_threads())
    env = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - (not Linux)
        return max(1, os.cpu_count() or 1)


def threads_for(items: int, per_thread: int) -> int:
    """Threads for a C kernel over ``items`` (nodes, or node-starts), at least ``per_thread`` each:
    waking the OpenMP threads costs more than the loop over a small rule (a warm-started data step
    on 1024 nodes took 1.4 ms on both cores, against 1.0 ms with numba). The chunks of the sums stay
    those of :func:`chunks`, so the result does not change."""
    return max(1, min(kernel_threads(), items // max(1, per_thread)))


@dataclass(frozen=True)
class Library:
    """A compiled kernel library: the loaded ``ctypes`` handle, its file and whether it has OpenMP."""

    lib: Any
    path: Path
    openmp: bool

    def __getattr__(self, name: str) -> Any:  # (the C functions, with their argument types set)
        f = getattr(self.lib, name)  # (ctypes keeps the function object: this runs once per name)
        if f.argtypes is None:
            f.restype, f.argtypes = SIGNATURES[name]
        return f


def _compiler() -> str | None:
    cc = os.environ.get("CC", "").strip()
    return cc or shutil.which("cc") or shutil.which("gcc")


@functools.lru_cache(maxsize=1)
def _cpu() -> str:
    """The CPU model and instruction-set flags (Linux ``/proc/cpuinfo``; else the platform's
    processor string): part of a library's name, since ``-march=native`` code may not run on
    another CPU that shares the cache folder."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith(("model name", "flags"))][:2]
        return "\n".join(lines)
    except OSError:
        return platform.processor() or platform.machine()


def _target(folder: Path, name: str, source: str, cc: str, extra: tuple[str, ...]) -> tuple[Path, tuple[str, ...]]:
    """Where the library of ``source`` built with these flags lives, and the flags."""
    flags = CFLAGS + extra
    key = hashlib.sha256("\0".join([source, cc, *flags, sys.platform, _cpu()]).encode()).hexdigest()[:20]
    tag = "omp" if "-fopenmp" in extra else "serial"
    return folder / f"{name}-{tag}-{key}.so", flags


def _build(name: str, source: str) -> tuple[Path | None, bool, str]:
    """Compile ``source`` into ``<cache>/native/<name>-<omp|serial>-<hash>.so`` unless it is
    there, with the first of ``VARIANTS`` that compiles; returns ``(path or None, openmp, why
    not)``. The file is written under a temporary name and renamed, so processes that build it
    at once do not see a partial file."""
    root = cache_root()
    if root is None:
        return None, False, "the cache is switched off (ATTNPHASE_CACHE_DIR is empty)"
    cc = _compiler()
    if cc is None:
        return None, False, "no C compiler (cc, gcc or $CC)"
    folder = root / "native"
    for extra in VARIANTS:
        path, _ = _target(folder, name, source, cc, extra)
        if path.exists():
            return path, "-fopenmp" in extra, ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return None, False, f"cannot write the cache folder {folder}: {e}"
    why = ""
    for extra in VARIANTS:
        path, flags = _target(folder, name, source, cc, extra)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src, out = Path(tmp) / f"{name}.c", Path(tmp) / "lib.so"
            src.write_text(source)
            try:
                run = subprocess.run([cc, *flags, "-o", str(out), str(src), "-lm"], capture_output=True, text=True,
                                     timeout=300)
            except (OSError, subprocess.TimeoutExpired) as e:
                why = f"{cc} failed: {e}"
                continue
            if run.returncode != 0 or not out.exists():
                why = f"{cc} failed: " + (run.stderr.strip().splitlines() or ["no output"])[-1]
                continue
            try:
                os.replace(out, path)
            except OSError as e:
                return None, False, f"cannot write {path}: {e}"
            return path, "-fopenmp" in extra, ""
    return None, False, why


def _load(name: str, source: str) -> Library | str:
    """The library built from ``source``, or why it is not available."""
    path, openmp, why = _build(name, source)
    if path is None:
        return why
    try:
        return Library(ctypes.CDLL(str(path)), path, openmp)
    except OSError as e:
        return f"cannot load {path}: {e}"


@functools.lru_cache(maxsize=1)
def _kernels_library() -> Library | str:
    """``kernels.c`` built and loaded, once per process (or why not)."""
    return _load("kernels", Path(__file__).with_name("kernels.c").read_text())


@functools.cache
def _prox_library(geometry: Geometry) -> Library | str:
    """The proximal kernel of a geometry built and loaded, once per process (or why not)."""
    return _load(f"prox_{geometry.name}", c_source(geometry))


def common() -> Library | None:
    """The library of ``kernels.c``, or ``None`` where the numba kernels are to run
    (``$ATTNPHASE_KERNELS=numba``, or ``auto`` and it cannot be built; ``c``: that is an error)."""
    choice = requested()
    if choice == "numba":
        return None
    lib = _kernels_library()
    if isinstance(lib, Library):
        return lib
    if choice == "c":
        raise RuntimeError(f"{ENV}=c but the C kernels cannot be built: {lib}")
    return None


def prox_library(geometry: Geometry) -> Library | None:
    """The C proximal kernel of a geometry of :data:`attnphase.theory.geometries.GEOMETRIES` or
    :data:`attnphase.theory.geometries.HEAD_GEOMETRIES`, or ``None`` where the numba kernels run (as
    :func:`common`)."""
    if common() is None:
        return None
    lib = _prox_library(geometry)
    if isinstance(lib, Library):
        return lib
    if requested() == "c":
        raise RuntimeError(f"{ENV}=c but the C kernel of {geometry.name} cannot be built: {lib}")
    return None


def describe() -> str:
    """Which kernels this process runs: ``"c (openmp, <file>)"`` or ``"numba <version>"`` (with
    the reason where C was asked for by ``auto`` and could not be built)."""
    lib = common()
    if lib is not None:
        return f"c ({'openmp' if lib.openmp else 'serial'}, {lib.path.name})"
    import numba  # noqa: PLC0415 - (only here: a process on the C kernels never loads numba)

    why = "" if requested() == "numba" else _kernels_library()
    return f"numba {numba.__version__}" + (f" (C kernels not built: {why})" if why else "")


def ptr(a: np.ndarray) -> int:
    """The address of a C-contiguous array's data (the caller keeps the array alive)."""
    if not a.flags.c_contiguous:  # (a strided array would be read as if it were contiguous)
        raise ValueError("the C kernels take C-contiguous arrays")
    return a.ctypes.data
