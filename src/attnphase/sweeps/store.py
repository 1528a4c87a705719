"""The results store: one SQLite file, one row per finished point, never written twice.

Layout (schema ``attnphase.sweeps.store`` version 1):

- ``meta(key, value)``: ``schema_id``, ``schema_version``, ``created_by`` (package version);
  a file without it is not a store and is refused with a clear error;
- ``points``: ``key`` (primary key: :func:`attnphase.sweeps.canonical.point_key`), ``kind``,
  ``params`` (canonical JSON), ``status`` (``ok``/``error``), ``result`` and ``diagnostics``
  (JSON), ``error`` text, ``seed``, ``version``, ``host``, ``started_at`` (UTC ISO time),
  ``elapsed_s``.

Every point is committed in its own transaction (``INSERT OR IGNORE``) as soon as it is
done, in WAL mode with a busy timeout, so a sweep killed at any moment loses at most the
points in flight, a rerun adds the missing ones without touching the finished rows, and
concurrent sweeps writing one file do not corrupt it. Only ``retry_errors`` deletes rows
(those with status ``error``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnphase._version import __version__

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_ID = "attnphase.sweeps.store"
SCHEMA_VERSION = 1
COLUMNS = ("key", "kind", "params", "status", "result", "diagnostics", "error", "seed",
           "version", "host", "started_at", "elapsed_s")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    result TEXT,
    diagnostics TEXT,
    error TEXT,
    seed INTEGER,
    version TEXT NOT NULL,
    host TEXT,
    started_at TEXT NOT NULL,
    elapsed_s REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS points_kind ON points (kind);
"""


@dataclass(frozen=True)
class PointRecord:
    """One stored point (JSON columns kept as text, exactly as stored)."""

    key: str
    kind: str
    params: str
    status: str
    result: str | None
    diagnostics: str | None
    error: str | None
    seed: int | None
    version: str
    host: str | None
    started_at: str
    elapsed_s: float

    def as_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)


class ResultStore:
    """An open results store (see the module docstring). Use as a context manager."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"store {str(self.path)!r} is a directory, not a results store")
        exists = self.path.exists() and self.path.stat().st_size > 0
        if not exists and not create:
            raise ValueError(f"store {str(self.path)!r} does not exist")
        if not exists:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = sqlite3.connect(str(self.path), timeout=timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise ValueError(f"cannot open store {str(self.path)!r}: {exc}") from None
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            self._check_or_create()
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise ValueError(
                f"{str(self.path)!r} is not an attnphase results store ({exc})"
            ) from None
        except ValueError:
            self._con.close()
            raise

    # ------------------------------------------------------------------ setup
    def _check_or_create(self) -> None:
        con = self._con
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise ValueError(f"{str(self.path)!r} is an SQLite file but not an attnphase results "
                             "store (no metadata table)")
        if not tables:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    con.execute(stmt)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_id', ?)", (SCHEMA_ID,))
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),))
            con.execute("INSERT OR IGNORE INTO meta VALUES ('created_by', ?)",
                        (f"attnphase {__version__}",))
            con.execute("COMMIT")
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema_id") != SCHEMA_ID:
            raise ValueError(f"{str(self.path)!r} is not an attnphase results store "
                             f"(schema id {meta.get('schema_id')!r})")
        try:
            version = int(meta.get("schema_version", "?"))
        except ValueError:
            version = -1
        if version != SCHEMA_VERSION:
            raise ValueError(f"store {str(self.path)!r} has schema version "
                             f"{meta.get('schema_version')!r}; this attnphase reads "
                             f"version {SCHEMA_VERSION}")
        con.execute("PRAGMA synchronous = FULL")

    # ------------------------------------------------------------------ API
    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keys(self, kind: str | None = None, status: str | None = None) -> set[str]:
        """Keys of stored points (optionally of one kind and/or one status)."""
        q, args = "SELECT key FROM points WHERE 1=1", []
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        if status is not None:
            q += " AND status = ?"
            args.append(status)
        return {r[0] for r in self._con.execute(q, args)}

    def add(self, rec: PointRecord, replace: bool = False) -> bool:
        """Commit one point in its own transaction; ``False`` if its key was already stored
        (with ``replace`` the stored row is overwritten instead, in the same transaction, so the
        old result stays until the new one is committed)."""
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        try:
            cur = con.execute(
                f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO points ({', '.join(COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(COLUMNS))})",
                rec.as_tuple(),
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return cur.rowcount == 1

    def delete_errors(self, keys: Iterable[str]) -> int:
        """Delete the rows with status ``error`` among ``keys`` (for a retry); their count."""
        keys = list(keys)
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        n = 0
        try:
            for k in keys:
                n += con.execute("DELETE FROM points WHERE key = ? AND status = 'error'",
                                 (k,)).rowcount
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return n

    def get(self, key: str) -> PointRecord | None:
        row = self._con.execute(f"SELECT {', '.join(COLUMNS)} FROM points WHERE key = ?",
                                (key,)).fetchone()
        return None if row is None else PointRecord(*row)

    def records(self, kind: str | None = None) -> Iterator[PointRecord]:
        """Stored points in insertion order (optionally of one kind)."""
        q = f"SELECT {', '.join(COLUMNS)} FROM points"
        args: list[Any] = []
        if kind is not None:
            q += " WHERE kind = ?"
            args.append(kind)
        q += " ORDER BY rowid"
        for row in self._con.execute(q, args).fetchall():
            yield PointRecord(*row)

    def counts(self) -> dict[tuple[str, str], int]:
        """Number of rows per ``(kind, status)``."""
        rows = self._con.execute("SELECT kind, status, COUNT(*) FROM points GROUP BY kind, status")
        return {(k, s): n for k, s, n in rows}

    def results(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Decoded ``{"status", "params", "result", "diagnostics", "error"}`` for stored keys."""
        out = {}
        for k in keys:
            rec = self.get(k)
            if rec is not None:
                out[k] = {
                    "status": rec.status,
                    "params": json.loads(rec.params),
                    "result": None if rec.result is None else json.loads(rec.result),
                    "diagnostics": None if rec.diagnostics is None else json.loads(rec.diagnostics),
                    "error": rec.error,
                    "seed": rec.seed,
                }
        return out


# ---------------------------------------------------------------------------- DataFrames
def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(obj, list):
        out[prefix] = json.dumps(obj, separators=(",", ":"))
    else:
        out[prefix] = obj


@contextmanager
def open_store(store: str | Path | ResultStore, create: bool = True) -> Iterator[ResultStore]:
    """``store`` itself when it is a :class:`ResultStore`, else the store at that path, opened
    for the ``with`` block and closed after it."""
    if isinstance(store, ResultStore):
        yield store
        return
    st = ResultStore(store, create=create)
    try:
        yield st
    finally:
        st.close()


def load_dataframe(store: str | Path | ResultStore, kind: str | None = None) -> pd.DataFrame:
    """Stored points as a tidy DataFrame with flattened columns.

    One row per point; columns ``key, kind, status, error, seed, version, host, started_at,
    elapsed_s`` then ``param.<name>``, ``result.<name>`` (nested dicts joined with ``.``) and
    ``diag.<name>``. Lists (matrices) are kept as compact JSON text.
    """
    import pandas as pd  # (only when a table is asked for: workers do not need it)

    rows = []
    with open_store(store, create=False) as st:
        for rec in st.records(kind):
            row: dict[str, Any] = {
                "key": rec.key, "kind": rec.kind, "status": rec.status, "error": rec.error,
                "seed": rec.seed, "version": rec.version, "host": rec.host,
                "started_at": rec.started_at, "elapsed_s": rec.elapsed_s,
            }
            _flatten("param", json.loads(rec.params), row)
            if rec.result is not None:
                _flatten("result", json.loads(rec.result), row)
            if rec.diagnostics is not None:
                _flatten("diag", json.loads(rec.diagnostics), row)
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["key", "kind", "status", "error", "seed", "version", "host",
                                   "started_at", "elapsed_s"])
    return df


def export_store(store: str | Path, out: str | Path, kind: str | None = None) -> int:
    """Write the store as CSV or Parquet (by the suffix of ``out``); the number of rows."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ValueError(f"export file must end in .csv or .parquet, got {str(out)!r}")
    df = load_dataframe(store, kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        df.to_csv(out, index=False)
    else:
        # mixed-type object columns (e.g. None and float) must be one Arrow type
        for c in df.columns:
            if df[c].dtype == object:
                types = {type(v) for v in df[c] if v is not None and v == v}
                if len(types) > 1:
                    df[c] = df[c].map(lambda v: None if v is None else str(v))
        df.to_parquet(out, index=False)
    return len(df)
