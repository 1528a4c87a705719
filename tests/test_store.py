"""Results store: schema check, no duplicates, exports, DataFrame."""

import json
import os
import random
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from attnphase.sweeps import (
    PointRecord,
    ResultStore,
    StoreError,
    SweepSpec,
    export_store,
    load_dataframe,
    run_sweep,
)
from attnphase.sweeps.store import COLUMNS, SCHEMA_ID, SCHEMA_VERSION


def _rec(key="k1", status="ok", result='{"v":1.0}'):
    return PointRecord(key=key, kind="selftest", params='{"x":1.0}', status=status,
                       result=result, diagnostics="{}", error=None, seed=0, version="0.1.0",
                       host="h", started_at="2026-01-01T00:00:00+00:00", elapsed_s=0.1)


def test_new_store_has_metadata_and_wal(tmp_path):
    path = tmp_path / "sub" / "s.sqlite"
    with ResultStore(path):
        pass
    con = sqlite3.connect(path)
    meta = dict(con.execute("SELECT key, value FROM meta"))
    assert meta["schema_id"] == SCHEMA_ID and meta["schema_version"] == str(SCHEMA_VERSION) == "2"
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_insert_or_ignore_keeps_first_row(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as st:
        assert st.add(_rec(result='{"v":1.0}'))
        assert not st.add(_rec(result='{"v":2.0}'))
        assert st.get("k1").result == '{"v":1.0}'
        assert st.keys() == {"k1"}
        assert st.counts() == {("selftest", "ok"): 1}


def test_delete_errors_only_touches_error_rows(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.add(_rec("a"))
        st.add(_rec("b", status="error", result=None))
        assert st.delete_errors(["a", "b", "c"]) == 1
        assert st.keys() == {"a"}


def test_text_file_is_refused(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("this is not a database, it is a longer text file " * 20)
    with pytest.raises(ValueError, match="not an attnphase results store"):
        ResultStore(f)
    assert f.read_text().startswith("this is not")  # untouched


def test_foreign_sqlite_is_refused(tmp_path):
    f = tmp_path / "other.sqlite"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="not an attnphase results store"):
        ResultStore(f)


def test_wrong_schema_version_is_refused(tmp_path):
    f = tmp_path / "s.sqlite"
    ResultStore(f).close()
    con = sqlite3.connect(f)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="schema version"):
        ResultStore(f)


def test_directory_and_missing_store(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        ResultStore(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        load_dataframe(tmp_path / "absent.sqlite")


def test_dataframe_and_exports_round_trip(tmp_path):
    store = tmp_path / "s.sqlite"
    sweep = SweepSpec("selftest", axes=(("x", (0.0, 0.5, 1.0)), ("fail", (False, True))))
    rep = run_sweep(sweep, store, workers=1, progress="none")
    assert (rep.ok, rep.errors) == (3, 3)
    df = load_dataframe(store)
    assert len(df) == 6
    assert {"param.x", "param.fail", "result.value", "result.noise", "diag.evaluations",
            "status", "error", "seed", "version", "elapsed_s"} <= set(df.columns)
    ok = df[df.status == "ok"].sort_values("param.x")
    assert ok["result.value"].tolist() == [0.0, 0.25, 1.0]
    bad = df[df.status == "error"]
    assert bad["error"].str.contains("selftest failure requested").all()
    assert bad["result.value"].isna().all()

    n = export_store(store, tmp_path / "out.csv")
    assert n == 6
    csv = pd.read_csv(tmp_path / "out.csv")
    assert sorted(csv["result.value"].dropna()) == [0.0, 0.25, 1.0]
    export_store(store, tmp_path / "out.parquet")
    pq = pd.read_parquet(tmp_path / "out.parquet")
    assert len(pq) == 6 and sorted(pq["key"]) == sorted(df["key"])
    with pytest.raises(ValueError, match=r"\.csv or \.parquet"):
        export_store(store, tmp_path / "out.xlsx")


def test_matrix_params_flatten_to_json_text(tmp_path):
    store = tmp_path / "s.sqlite"
    with ResultStore(store) as st:
        st.add(PointRecord("k", "theory", json.dumps({"A": [[0.6, 0.4], [0.4, 0.6]]}), "ok",
                           '{"fit":{"q":0.1}}', "{}", None, None, "v", None, "t", 0.0))
    df = load_dataframe(store)
    assert json.loads(df.loc[0, "param.A"]) == [[0.6, 0.4], [0.4, 0.6]]
    assert df.loc[0, "result.fit.q"] == 0.1
    export_store(store, tmp_path / "m.parquet")
    assert pd.read_parquet(tmp_path / "m.parquet").loc[0, "result.fit.q"] == 0.1


# ---------------------------------------------------------------------------- refused files
def _good_store(path, n=60):
    run_sweep(SweepSpec("selftest", axes=(("x", tuple(range(n))),)), path, workers=1,
              progress="none")
    return path.read_bytes()


def _foreign(path, tables=True):
    con = sqlite3.connect(path)
    if tables:
        con.execute("CREATE TABLE t (a)")
        con.execute("INSERT INTO t VALUES (1)")
    else:
        con.execute("PRAGMA user_version = 7")  # a database file without tables
    con.commit()
    con.close()


def _newer_schema(path):
    _good_store(path, 3)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()


def _make_refused(case, path):
    """Write the file of ``case``; the message it is refused with."""
    rng = random.Random(0)
    if case == "random bytes":
        path.write_bytes(rng.randbytes(20000))
        return "not an attnphase results store (not an SQLite database)"
    if case == "empty":
        path.write_bytes(b"")
        return "is an empty file, not an attnphase results store"
    good = _good_store(path)
    page = int.from_bytes(good[16:18], "big")
    if case == "truncated to half":
        path.write_bytes(good[: len(good) // 2])
        return "is a truncated or corrupted results store"
    if case == "a page overwritten":
        path.write_bytes(good[: 2 * page] + rng.randbytes(page) + good[3 * page:])
        return "is a corrupted results store"
    path.unlink()
    if case == "foreign database":
        _foreign(path)
        return "not an attnphase results store (no metadata table)"
    if case == "database without tables":
        _foreign(path, tables=False)
        return "not an attnphase results store (no tables)"
    if case == "newer schema":
        _newer_schema(path)
        return f"schema version {SCHEMA_VERSION + 1}, written by a newer attnphase"
    raise AssertionError(case)


REFUSED = ("random bytes", "empty", "truncated to half", "a page overwritten", "foreign database",
           "database without tables", "newer schema")


@pytest.mark.parametrize("case", REFUSED)
def test_a_file_that_is_not_a_store_is_refused_and_left_untouched(tmp_path, case, capsys):
    from attnphase.cli import main

    path = tmp_path / "s.sqlite"
    msg = _make_refused(case, path)
    data = path.read_bytes()
    listing = sorted(os.listdir(tmp_path))
    assert listing == ["s.sqlite"]
    sweep = SweepSpec("selftest", axes=(("x", (1.0, 2.0)),))
    attempts = [lambda: ResultStore(path), lambda: ResultStore(path, create=False),
                lambda: load_dataframe(path), lambda: run_sweep(sweep, path, workers=1,
                                                                progress="none")]
    for attempt in attempts:
        with pytest.raises(StoreError, match=re.escape(msg)) as info:
            attempt()
        assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    capsys.readouterr()
    for argv in (["sweep", "status", "--store", str(path)],
                 ["sweep", "export", "--store", str(path), "--out", str(tmp_path / "o.csv")],
                 ["sweep", "run", "--kind", "selftest", "--param", "x=1", "--workers", "1",
                  "--store", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], err
    assert path.read_bytes() == data  # byte-identical
    assert sorted(os.listdir(tmp_path)) == listing  # no -wal, -shm, -journal or export left


def test_a_foreign_database_in_use_is_refused_its_file_and_log_untouched(tmp_path):
    """Another program's WAL database whose writer was killed (its ``-wal`` still holds the
    last transaction): read through the log read-only, refused, nothing checkpointed."""
    import subprocess
    import sys

    code = ("import os, sqlite3\n"
            "con = sqlite3.connect('other.db'); con.execute('PRAGMA journal_mode=WAL')\n"
            "con.execute('CREATE TABLE t (a)'); con.execute('INSERT INTO t VALUES (1)')\n"
            "con.commit(); os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=60)
    files = {f: (tmp_path / f).read_bytes() for f in ("other.db", "other.db-wal")}
    assert len(files["other.db-wal"]) > 0
    with pytest.raises(StoreError, match="no metadata table"):
        ResultStore(tmp_path / "other.db")
    assert {f: (tmp_path / f).read_bytes() for f in files} == files
    assert sorted(os.listdir(tmp_path)) == ["other.db", "other.db-shm", "other.db-wal"]


def test_a_fifo_is_refused_without_reading_it(tmp_path):
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="not a regular file"):
        ResultStore(fifo)
    with pytest.raises(StoreError, match="not a regular file"):
        ResultStore("/dev/null")


def test_a_store_in_use_is_opened_not_refused(tmp_path):
    """While another connection holds the store (its ``-wal`` and ``-shm`` files exist, and
    the main file may be shorter than the pages its header will record), it opens as usual."""
    path = tmp_path / "s.sqlite"
    _good_store(path, 5)
    other = ResultStore(path)
    other.add(_rec("held"))
    assert (tmp_path / "s.sqlite-wal").exists()
    with ResultStore(path, create=False) as st:
        assert "held" in st.keys() and len(st.keys()) == 6
    other.close()
    assert sorted(os.listdir(tmp_path)) == ["s.sqlite"]


def test_a_new_store_appears_complete_and_a_creation_race_keeps_the_first(tmp_path, monkeypatch):
    """A new store is built under a temporary name and linked into place complete; when another
    process links its store there first, that one is used and nothing temporary is left."""
    path = tmp_path / "new" / "s.sqlite"
    real_link = os.link
    seen = []

    def link(src, dst):
        monkeypatch.setattr(os, "link", real_link)
        assert not Path(dst).exists() and Path(src).name.startswith(".s.sqlite.")
        seen.append(sorted(os.listdir(Path(src).parent)))
        with ResultStore(dst) as other:  # another process wins the race
            other.add(_rec("first"))
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link)
    with ResultStore(path) as st:
        assert st.keys() == {"first"}
    assert len(seen) == 1 and len(seen[0]) == 1  # the temporary store alone, complete, closed
    assert sorted(os.listdir(path.parent)) == ["s.sqlite"]


_V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE points (key TEXT PRIMARY KEY, kind TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')), result TEXT, diagnostics TEXT,
    error TEXT, seed INTEGER, version TEXT NOT NULL, host TEXT, started_at TEXT NOT NULL,
    elapsed_s REAL NOT NULL);
CREATE INDEX points_kind ON points (kind);
INSERT INTO meta VALUES ('schema_id', 'attnphase.sweeps.store'), ('schema_version', '1'),
    ('created_by', 'attnphase 0.1.0');
"""


def test_version_1_store_is_migrated_in_place_its_rows_stale(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript(_V1_SCHEMA)
    sweep = SweepSpec("selftest", axes=(("x", (0.0, 1.0, 2.0)),))
    old = {}
    for p in sweep.points()[:2]:
        rec = _rec(p.key)
        old[p.key] = rec.as_tuple()[:-1]
        con.execute(f"INSERT INTO points VALUES ({', '.join('?' * 12)})", old[p.key])
    con.commit()
    con.close()
    with ResultStore(path) as st:
        assert {r.key: r.as_tuple()[:-1] for r in st.records()} == old
        assert all(r.revision is None for r in st.records())
    con = sqlite3.connect(path)
    assert dict(con.execute("SELECT key, value FROM meta"))["schema_version"] == "2"
    assert [r[1] for r in con.execute("PRAGMA table_info(points)")] == list(COLUMNS)
    con.close()
    rep = run_sweep(sweep, path, workers=1, progress="none")
    assert (rep.computed, rep.stale) == (1, 2)  # the old rows are served, counted stale
    assert load_dataframe(path)["revision"].isna().sum() == 2
