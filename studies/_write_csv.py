"""The CSV files of the studies: :func:`write_csv` for the value studies (``value_gain_sim.py``,
``value_scaling.py``, ``value_theory.py``), :func:`append_row` for those that add to a file
(``replica_overlap.py``, ``jump_share.py``), one row a run, the columns the keys of the first row;
:func:`read_rows` and :func:`write_rows` (declared columns) for the studies that resume from their
own CSV (``heads.py``, ``heads_phase.py``, ``heads_trained.py``, ``maps.py``); :func:`tabulate_and_plot`,
the command line those last studies share (compute into the CSV unless ``--plot-only``, then draw
the figure from it) with its flags (:func:`add_table_flags`), and :func:`save_figure`."""

from __future__ import annotations

import csv
from pathlib import Path


def write_csv(path: str, rows: list[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` with a header line, replacing the file.
    The studies call it after every step of their grid, so an interrupted run keeps the rows it
    finished."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def append_row(row: dict, path: Path) -> None:
    """Append ``row`` to the CSV file ``path``, with a header line when the file is new."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def read_rows(path: Path) -> list[dict]:
    """The rows of the CSV file ``path`` (none where it does not exist yet)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict], fields: tuple[str, ...]) -> None:
    """Write ``rows`` to ``path`` with the columns ``fields`` (other keys dropped, missing ones and
    ``None`` empty), replacing the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def save_figure(fig, out: Path) -> None:
    """Lay out ``fig`` and write it to ``out`` (150 dpi), making its folder."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    print(f"wrote {out}")


def tabulate_and_plot(args, compute, fields: tuple[str, ...], plot) -> None:
    """Unless ``args.plot_only``: the rows of ``compute()`` into ``args.csv`` (:func:`write_rows`);
    then ``plot(args.csv, args.out)``, the figure drawn from the CSV alone."""
    if not args.plot_only:
        write_rows(args.csv, compute(), fields)
        print(f"wrote {args.csv}")
    plot(args.csv, args.out)


def add_table_flags(parser, name: str) -> None:
    """``--csv`` (default ``<name>.csv``), ``--out`` (``<name>.png``) and ``--plot-only`` of
    :func:`tabulate_and_plot`."""
    parser.add_argument("--csv", type=Path, default=Path(f"{name}.csv"))
    parser.add_argument("--out", type=Path, default=Path(f"{name}.png"))
    parser.add_argument("--plot-only", action="store_true")
