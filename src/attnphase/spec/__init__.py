"""What the problem is: frozen parameter dataclasses, validation, no numerics."""

from attnphase.spec.problem import ModelSpec, parse_matrix, parse_range

__all__ = ["ModelSpec", "parse_matrix", "parse_range"]
