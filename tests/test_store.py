"""Results store: schema check, no duplicates, exports, DataFrame."""

import json
import sqlite3

import pandas as pd
import pytest

from attnphase.sweeps import (
    PointRecord,
    ResultStore,
    SweepSpec,
    export_store,
    load_dataframe,
    run_sweep,
)
from attnphase.sweeps.store import SCHEMA_ID, SCHEMA_VERSION


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
