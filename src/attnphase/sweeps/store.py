"""The results store: one SQLite file, one row per finished point, never written twice.

Layout (schema ``attnphase.sweeps.store`` version 2):

- ``meta(key, value)``: ``schema_id``, ``schema_version``, ``created_by`` (package version);
  a file without it is not a store and is refused with a clear error;
- ``points``: ``key`` (primary key: :func:`attnphase.sweeps.canonical.point_key`), ``kind``,
  ``params`` (canonical JSON), ``status`` (``ok``/``error``), ``result`` and ``diagnostics``
  (JSON), ``error`` text, ``seed``, ``version``, ``host``, ``started_at`` (UTC ISO time),
  ``elapsed_s``, ``revision`` (the numerical revision of the kind's code that computed the
  point, :meth:`attnphase.sweeps.kinds.PointKind.revision`; ``NULL``: unknown).

A version-1 store (no ``revision`` column) is migrated in place when opened: the column is added
and its rows have an unknown revision, so they count as *stale* (computed by code other than the
present). A store of a newer schema version is refused.

Opening never modifies a file that is not a store: a new store is built under a temporary name
next to the path and linked into place when complete (so no process ever sees a half-made store,
and an empty file is refused like any other non-store); an existing file is first checked from
its bytes (SQLite header, size against the page count the header records) and then through a
read-only connection (tables, metadata, ``PRAGMA quick_check``) that writes nothing: an
*immutable* one, which creates no ``-wal``, ``-shm`` or ``-journal`` file, unless another
process has the file open (a ``-wal``/``-shm`` file is next to it). Only then is it opened for
writing. Every refusal is a :class:`StoreError` (a ``ValueError``) with a one-line message, and
the file is left byte-identical.

Every point is committed in its own transaction (``INSERT OR IGNORE``) as soon as it is
done, in WAL mode with a busy timeout, so a sweep killed at any moment loses at most the
points in flight, a rerun adds the missing ones without touching the finished rows, and
concurrent sweeps writing one file do not corrupt it. Only ``retry_errors`` deletes rows
(those with status ``error``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnphase._extras import require
from attnphase._version import __version__

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_ID = "attnphase.sweeps.store"
SCHEMA_VERSION = 2
COLUMNS = ("key", "kind", "params", "status", "result", "diagnostics", "error", "seed",
           "version", "host", "started_at", "elapsed_s", "revision")
#: the columns of a version-1 store (migrated by adding ``revision``)
_COLUMNS_V1 = COLUMNS[:-1]
_SQLITE_MAGIC = b"SQLite format 3\x00"

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
    elapsed_s REAL NOT NULL,
    revision TEXT
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
    revision: str | None = None

    def as_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)


class StoreError(ValueError):
    """A file that is not a usable results store: refused with a one-line message, untouched."""


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


def _unreadable(path: Path, exc: BaseException) -> str:
    return (f"{str(path)!r} is corrupted or not an attnphase results store "
            f"(SQLite: {_one_line(str(exc))})")


def _in_use(path: Path) -> bool:
    """Whether a write-ahead log is next to ``path``: a WAL database that another process has
    open (or whose writer was killed: SQLite replays the log)."""
    return any(Path(f"{path}{s}").exists() for s in ("-wal", "-shm"))


def _check_bytes(path: Path) -> None:
    """Refuse, from its bytes alone, a file that cannot be a store: empty, not SQLite, or
    shorter than the pages its header records (truncated). The length check is skipped while a
    write-ahead log is next to it (a store in use, or one whose writer was killed: SQLite
    replays the log)."""
    name = str(path)
    size = path.stat().st_size
    if size == 0:
        raise StoreError(f"{name!r} is an empty file, not an attnphase results store "
                         "(remove it to start a new store there)")
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{name!r} is not an attnphase results store (not an SQLite database)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise StoreError(f"{name!r} is a corrupted results store (invalid SQLite header)")
    if _in_use(path):
        return
    pages = int.from_bytes(head[28:32], "big")
    expected = pages * page if head[24:28] == head[92:96] and pages > 0 else None
    if size % page or (expected is not None and size < expected):
        raise StoreError(f"{name!r} is a truncated or corrupted results store ({size} bytes, "
                         f"{f'its header records {expected}' if expected else 'not whole pages'})")


def _schema_version(con: sqlite3.Connection, name: str) -> int:
    """The schema version of the store on ``con`` after checking that it is one (tables,
    metadata, columns); :class:`StoreError` otherwise, also for a newer version."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in tables:
        what = "no tables" if not tables else "no metadata table"
        raise StoreError(f"{name!r} is an SQLite database but not an attnphase results store "
                         f"({what})")
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("schema_id") != SCHEMA_ID:
        raise StoreError(f"{name!r} is not an attnphase results store "
                         f"(schema id {meta.get('schema_id')!r})")
    try:
        version = int(meta.get("schema_version", "?"))
    except ValueError:
        version = -1
    if version > SCHEMA_VERSION:
        raise StoreError(f"store {name!r} has schema version {version}, written by a newer "
                         f"attnphase; this one reads versions up to {SCHEMA_VERSION}")
    if version < 1:
        raise StoreError(f"store {name!r} has schema version "
                         f"{meta.get('schema_version')!r}; this attnphase reads versions 1 to "
                         f"{SCHEMA_VERSION}")
    cols = {r[1] for r in con.execute("PRAGMA table_info(points)")}
    need = COLUMNS if version == SCHEMA_VERSION else _COLUMNS_V1
    missing = [c for c in need if c not in cols]
    if missing:
        raise StoreError(f"{name!r} is a corrupted results store (points table without "
                         f"{', '.join(missing)})")
    return version


def _inspect(path: Path) -> None:
    """Check an existing file through a read-only connection, which writes nothing (no
    checkpoint, no recovery written back): :func:`_schema_version` and ``PRAGMA quick_check``.
    Immutable (no locks, no side files either) unless the file is in use (:func:`_in_use`):
    then it reads through the other processes' log, as any reader does."""
    mode = "ro" if _in_use(path) else "ro&immutable=1"
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode={mode}"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read store {str(path)!r}: {exc}") from None
    try:
        _schema_version(con, str(path))
        bad = [str(r[0]) for r in con.execute("PRAGMA quick_check(3)")]
        if bad != ["ok"]:
            raise StoreError(f"{str(path)!r} is a corrupted results store "
                             f"(SQLite: {_one_line('; '.join(bad))})")
    except sqlite3.DatabaseError as exc:
        raise StoreError(_unreadable(path, exc)) from None
    finally:
        con.close()


def _create(path: Path) -> None:
    """Make a new store at ``path``: built under a temporary name in the same folder and linked
    into place complete (if another process made one there first, that one is kept)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    try:
        con = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    con.execute(stmt)
            con.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema_id", SCHEMA_ID), ("schema_version", str(SCHEMA_VERSION)),
                ("created_by", f"attnphase {__version__}")])
            con.execute("COMMIT")
        finally:
            con.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: not atomic against a second creator
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for f in (tmp, *(Path(f"{tmp}{s}") for s in ("-wal", "-shm", "-journal"))):
            f.unlink(missing_ok=True)


class ResultStore:
    """An open results store (see the module docstring). Use as a context manager.

    ``create``: make a new store when ``path`` does not exist (else :class:`StoreError`). A
    file that is not a store (empty, not SQLite, truncated or corrupted, another database, a
    newer schema) raises :class:`StoreError` and is left untouched.
    """

    def __init__(self, path: str | Path, timeout_s: float = 60.0, create: bool = True) -> None:
        self.path = Path(path)
        name = str(self.path)
        if self.path.is_dir():
            raise StoreError(f"store {name!r} is a directory, not a results store")
        if not self.path.exists():
            if not create:
                raise StoreError(f"store {name!r} does not exist")
            try:
                _create(self.path)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot create store {name!r}: {_one_line(str(exc))}") from None
        elif not self.path.is_file():  # (a FIFO or device: reading it could block forever)
            raise StoreError(f"{name!r} is not a regular file, not an attnphase results store")
        else:
            _check_bytes(self.path)
            _inspect(self.path)
        try:
            self._con = sqlite3.connect(name, timeout=timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {name!r}: {exc}") from None
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            self._check_and_migrate()
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise StoreError(_unreadable(self.path, exc)) from None
        except ValueError:
            self._con.close()
            raise

    # ------------------------------------------------------------------ setup
    def _check_and_migrate(self) -> None:
        con = self._con
        if _schema_version(con, str(self.path)) < SCHEMA_VERSION:
            con.execute("BEGIN IMMEDIATE")  # (re-checked inside: another process may migrate)
            try:
                cols = {r[1] for r in con.execute("PRAGMA table_info(points)")}
                if "revision" not in cols:
                    con.execute("ALTER TABLE points ADD COLUMN revision TEXT")
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            (str(SCHEMA_VERSION),))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
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

    def revision_counts(self) -> dict[tuple[str, str, str | None], int]:
        """Number of rows per ``(kind, status, revision)`` (revision ``None``: unknown)."""
        rows = self._con.execute("SELECT kind, status, revision, COUNT(*) FROM points "
                                 "GROUP BY kind, status, revision")
        return {(k, s, r): n for k, s, r, n in rows}

    def stale_keys(self, kind: str, revision: str) -> set[str]:
        """Keys of the rows of ``kind`` computed by another numerical revision than
        ``revision`` (or an unknown one): *stale* rows."""
        rows = self._con.execute("SELECT key FROM points WHERE kind = ? AND "
                                 "(revision IS NULL OR revision != ?)", (kind, revision))
        return {r[0] for r in rows}

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
    elapsed_s, revision`` (the numerical revision that computed the point; empty: unknown) then ``param.<name>``, ``result.<name>`` (nested dicts joined with ``.``) and
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
                "revision": rec.revision,
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
                                   "started_at", "elapsed_s", "revision"])
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
        require("pyarrow", "a .parquet export")
        df.to_parquet(out, index=False)
    return len(df)
