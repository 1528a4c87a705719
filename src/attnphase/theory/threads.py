"""One BLAS thread while the theory's compiled kernels run.

The proximal, target and test-error kernels are numba ``prange`` loops on all cores. numpy's
OpenBLAS threads a dot product or matrix product of a few ten thousand entries (the weighted
sums of a data step over 16384 or more nodes), and after such a call its worker threads keep
spinning for a while; the numba threads that run next then share the cores with them.
Measured on a 2-core machine (warm-started data step at the semantic point of the
reference case, per node): 0.57 us at 8192 nodes and 1.27-1.92 us at 16384 (BLAS threads on),
0.52-0.56 us at 16384 with one BLAS thread (``benchmarks/bench_blas_threads.py``).
:func:`one_blas_thread` holds the process's BLAS libraries (numpy's OpenBLAS, and scipy's once
loaded) at one thread around a call and restores them after; the matrices the theory multiplies
are small, so nothing loses from it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@functools.lru_cache(maxsize=1)
def _controller(n_modules: int) -> Any:
    """The BLAS libraries of this process (inspecting them takes ~1 ms, a limit then ~20 us),
    inspected again whenever the number of imported modules has changed: a library loaded
    later (scipy's own OpenBLAS, with ``scipy.linalg``) is then limited too."""
    from threadpoolctl import ThreadpoolController  # noqa: PLC0415

    return ThreadpoolController()


def one_blas_thread(func: F) -> F:
    """Decorator: run ``func`` with the BLAS libraries limited to one thread (restored afterwards)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _controller(len(sys.modules)).limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
