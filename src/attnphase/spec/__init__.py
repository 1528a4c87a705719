"""What the problem is: frozen parameter dataclasses, their schema and validation, no numerics.

- :mod:`attnphase.spec.problem`: :class:`ModelSpec` and the default matrices;
- :mod:`attnphase.spec.schema`: fields described once (kind, help, choices, bounds), read back
  as :class:`Parameter` entries for the command line and the sweeps;
- :mod:`attnphase.spec.parse`: numbers, ranges and matrices from text, one message style;
- :mod:`attnphase.spec.defaults`: the defaults of each computation, each written once (solver
  presets, the transition's start grid, training settings).
"""

from attnphase.spec.parse import parse_matrix, parse_range, to_float, to_int
from attnphase.spec.problem import ModelSpec, model_parameters
from attnphase.spec.schema import FieldInfo, Parameter, described, parameters

__all__ = [
    "FieldInfo", "ModelSpec", "Parameter", "described", "model_parameters", "parameters",
    "parse_matrix", "parse_range", "to_float", "to_int",
]
