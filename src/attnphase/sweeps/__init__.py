"""Sweeps: parameter grids, a results store that loses nothing, local and Dask backends.

>>> from attnphase.sweeps import SweepSpec, run_sweep, load_dataframe
>>> sweep = SweepSpec("theory", axes=(("alpha", (0.5, 1.0, 2.0)),), fixed={"omega": 0.3})
>>> report = run_sweep(sweep, "results.sqlite")          # doctest: +SKIP
>>> df = load_dataframe("results.sqlite")               # doctest: +SKIP

See ``docs/sweeps.md``.
"""

from attnphase._revision import numerics_revision
from attnphase.sweeps.canonical import canonical_json, point_key
from attnphase.sweeps.grid import Point, SweepSpec, sweep_from_args, sweep_from_toml
from attnphase.sweeps.kinds import Param, PointKind, builtin_kinds, get_kind
from attnphase.sweeps.phase import HeatMaps, PhaseLines
from attnphase.sweeps.runner import SweepReport, connect_dask, execute_point, run_sweep
from attnphase.sweeps.store import PointRecord, ResultStore, StoreError, export_store, load_dataframe

__all__ = [
    "HeatMaps", "Param", "PhaseLines", "Point", "PointKind", "PointRecord", "ResultStore", "StoreError", "SweepReport",
    "SweepSpec", "builtin_kinds", "canonical_json", "connect_dask", "execute_point",
    "export_store", "get_kind", "load_dataframe", "numerics_revision", "point_key", "run_sweep",
    "sweep_from_args", "sweep_from_toml",
]
