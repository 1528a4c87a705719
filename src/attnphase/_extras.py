"""The optional dependencies (extras) and the one check in front of each use.

The theory (``solve``, ``transition``, ``curves``, ``phase-diagram``, ``bayes`` without GAMP)
needs only the required dependencies. Three extras add the rest (``docs/install.md``):
``attnphase[sim]`` installs torch (the simulator and the histogram task), ``attnphase[dask]``
installs ``dask[distributed]`` (sweeps on a Dask cluster), ``attnphase[parquet]`` installs
pyarrow (``.parquet`` exports). Every place that imports one of them calls :func:`require`
first, so that a missing extra reads as one line naming the extra to install: a
:class:`MissingExtraError`, which the command line reports as invalid input (exit status 2) and
:func:`attnphase.errors.internal_errors` passes through unchanged. This module imports only the
standard library.
"""

from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingExtraError", "require"]

#: the extra that installs each optional module
EXTRAS = {"torch": "sim", "dask": "dask", "distributed": "dask", "pyarrow": "parquet"}


class MissingExtraError(ImportError):
    """An optional dependency is not installed: the message names the extra that installs it
    (``pip install "attnphase[sim]"``). The caller's to fix, not a failure inside."""


def require(module: str, what: str) -> None:
    """Import ``module`` (one of :data:`EXTRAS`), or raise :class:`MissingExtraError` saying that
    ``what`` (e.g. ``"the simulator"``) needs it and which extra installs it."""
    extra = EXTRAS[module]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{what} needs {module}, which cannot be imported ({exc}): "
            f'pip install "attnphase[{extra}]"',
            name=module,
        ) from exc
