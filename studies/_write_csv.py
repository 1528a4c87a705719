"""The CSV output of the value studies (``value_gain_sim.py``, ``value_scaling.py``,
``value_theory.py``): one row a run, the columns the keys of the first row."""

from __future__ import annotations

import csv


def write_csv(path: str, rows: list[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` with a header line, replacing the file.
    The studies call it after every step of their grid, so an interrupted run keeps the rows it
    finished."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
