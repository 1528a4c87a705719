"""attnphase: the solvable model of dot-product attention.

Theory solver, finite-d simulator, sweeps and phase diagrams for the model of
Cui, Behrens, Krzakala and Zdeborova, "A phase transition between positional and
semantic learning in a solvable model of dot-product attention" (NeurIPS 2024).
The mathematical contract is ``THEORY.md`` (shipped as ``docs/THEORY_NOTES.md``
for the conventions used here).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnphase")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from attnphase.spec.problem import ModelSpec, parse_matrix

__all__ = ["ModelSpec", "parse_matrix", "__version__"]
