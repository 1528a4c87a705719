"""Backends and crash safety: kill -9 and rerun, concurrent writers,
local pool = in-process = Dask LocalCluster, failing points, reruns compute nothing, CLI errors."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnphase.sweeps import ResultStore, SweepSpec, run_sweep, sweep_from_args
from attnphase.sweeps.store import COLUMNS

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "attnphase", *args], capture_output=True,
                          text=True, env=_env(), timeout=timeout)


def _rows(path):
    con = sqlite3.connect(path)
    rows = {r[0]: r for r in con.execute(f"SELECT {', '.join(COLUMNS)} FROM points")}
    con.close()
    return rows


def _stable(rows):
    """Everything but timing and host: what two backends must agree on."""
    i = [COLUMNS.index(c) for c in ("key", "kind", "params", "status", "result", "diagnostics",
                                    "error", "seed")]
    return {k: tuple(r[j] for j in i) for k, r in rows.items()}


SWEEP = SweepSpec("selftest", axes=(("x", (0.0, 1.0, 2.0, 3.0)), ("seed", (0, 1))),
                  fixed={"y": 0.5})


def test_serial_and_pool_store_the_same_results(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    ra = run_sweep(SWEEP, a, workers=1, progress="none")
    rb = run_sweep(SWEEP, b, workers=2, progress="none")
    assert ra.backend == "serial" and rb.backend.startswith("pool")
    assert ra.ok == rb.ok == 8
    assert _stable(_rows(a)) == _stable(_rows(b))


def test_rerun_computes_nothing_and_leaves_rows_alone(tmp_path):
    s = tmp_path / "s.sqlite"
    run_sweep(SWEEP, s, workers=1, progress="none")
    before = _rows(s)
    t0 = time.perf_counter()
    rep = run_sweep(SWEEP, s, workers=2, progress="none")
    assert time.perf_counter() - t0 < 5
    assert (rep.skipped, rep.computed) == (8, 0)
    assert _rows(s) == before
    # a larger grid computes only the new points
    bigger = sweep_from_args("selftest", ["x=0,1,2,3,4", "seed=0,1", "y=0.5"])
    rep = run_sweep(bigger, s, workers=1, progress="none")
    assert (rep.skipped, rep.computed) == (8, 2)


def test_recompute_replaces_every_stored_point(tmp_path):
    """``recompute`` (after a solver change: points are keyed by parameters only) computes every
    point again and replaces its row (new start time), without duplicating rows or touching
    points outside the grid."""
    s = tmp_path / "s.sqlite"
    run_sweep(SWEEP, s, workers=1, progress="none")
    other = sweep_from_args("selftest", ["x=9", "seed=0", "y=0.5"])
    run_sweep(other, s, workers=1, progress="none")
    before = _rows(s)
    time.sleep(1.1)  # (start times have one-second resolution or finer)
    rep = run_sweep(SWEEP, s, workers=1, progress="none", recompute=True)
    assert (rep.skipped, rep.computed, rep.ok) == (0, 8, 8)
    after = _rows(s)
    assert set(after) == set(before) and len(after) == 9
    started = COLUMNS.index("started_at")
    changed = {k for k in after if after[k][started] != before[k][started]}
    assert changed == {p.key for p in SWEEP.points()}
    assert _stable(after) == _stable(before)  # (selftest points are deterministic)


def test_failing_point_is_recorded_and_sweep_continues(tmp_path):
    s = tmp_path / "s.sqlite"
    sweep = sweep_from_args("selftest", ["x=0,1,2", "fail=false,true"])
    rep = run_sweep(sweep, s, workers=2, progress="none")
    assert (rep.ok, rep.errors, rep.computed) == (3, 3, 6)
    rows = _rows(s)
    errs = [r for r in rows.values() if r[COLUMNS.index("status")] == "error"]
    assert len(errs) == 3
    assert all("RuntimeError: selftest failure requested" in r[COLUMNS.index("error")]
               for r in errs)
    assert not rep.success and rep.failed == 3 and "selftest failure requested" in (rep.first_error or "")
    # errors are kept on a rerun with retry_errors=False (and counted), recomputed by default
    kept = run_sweep(sweep, s, workers=1, progress="none", retry_errors=False)
    assert kept.computed == 0 and kept.failed == 3 and not kept.success and "kept as errors" in kept.message
    rep = run_sweep(sweep, s, workers=1, progress="none")
    assert (rep.computed, rep.errors) == (3, 3)


def test_a_dying_worker_is_recorded_not_fatal(tmp_path):
    s = tmp_path / "s.sqlite"
    sweep = sweep_from_args("selftest", ["x=0,1,2", "crash=false,true"])
    rep = run_sweep(sweep, s, workers=2, progress="none")
    assert rep.computed == 6 and rep.errors >= 3
    with ResultStore(s) as st:
        recs = list(st.records())
    assert len(recs) == 6
    crashed = [r for r in recs if '"crash":true' in r.params]
    assert all(r.status == "error" and "backend failure" in r.error for r in crashed)


def test_log_lines_when_not_a_terminal(tmp_path, caplog):
    import io
    import logging

    caplog.set_level(logging.INFO, logger="attnphase")
    run_sweep(SWEEP, tmp_path / "s.sqlite", workers=1, progress="auto", stream=io.StringIO())
    msgs = [r.getMessage() for r in caplog.records]
    assert any("8/8 points done" in m and "eta" in m for m in msgs)


def test_progress_bar_on_a_terminal(tmp_path):
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    run_sweep(SWEEP, tmp_path / "s.sqlite", workers=1, progress="auto", stream=out)
    assert "8/8" in out.getvalue()


def _start_sweep(store, grid, workers):
    cmd = [sys.executable, "-m", "attnphase", "sweep", "run", "--kind", "selftest",
           *sum((["--param", g] for g in grid), []), "--store", str(store),
           "--workers", str(workers), "--quiet"]
    # a job started in the background by a non-interactive shell (e.g. CI) inherits an ignored
    # SIGINT; restore the default so that Python turns Ctrl-C into KeyboardInterrupt
    return subprocess.Popen(cmd, env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _count(store):
    if not store.exists():
        return 0
    try:
        con = sqlite3.connect(store, timeout=10)
        n = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        con.close()
        return n
    except sqlite3.OperationalError:
        return 0


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_kill_9_then_rerun_is_complete_without_duplicates(tmp_path, workers):
    store = tmp_path / "s.sqlite"
    grid = ["x=0:1:30", "sleep=0.04"]
    finished: dict = {}
    for stop_at in (4, 13)[: 3 - workers]:  # kill twice (in-process) or once (pool)
        proc = _start_sweep(store, grid, workers)
        deadline = time.time() + 60
        while _count(store) < stop_at and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its pool workers, mid-flight
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        rows = _rows(store)
        assert 0 < len(rows) < 30
        for k, r in finished.items():  # rows finished before the earlier kill: untouched
            assert rows[k] == r
        finished = rows
    r = _cli("sweep", "run", "--kind", "selftest", *sum((["--param", g] for g in grid), []),
             "--store", str(store), "--workers", str(workers), "--json")
    assert r.returncode == 0, r.stderr
    rows = _rows(store)
    assert len(rows) == 30
    con = sqlite3.connect(store)
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT params) FROM points").fetchone() == (30, 30)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    for k, row in finished.items():
        assert rows[k] == row  # byte-identical


def test_ctrl_c_stops_cleanly_and_rerun_completes(tmp_path):
    store = tmp_path / "s.sqlite"
    # 20 points of 0.2 s: after the third one the sweep still has ~3 s to go when Ctrl-C comes
    grid = ["x=0:1:20", "sleep=0.2"]
    proc = _start_sweep(store, grid, 1)
    deadline = time.time() + 60
    while _count(store) < 3 and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode().strip() == "attnphase: interrupted"
    before = _rows(store)
    assert 0 < len(before) < 20
    r = _cli("sweep", "run", "--kind", "selftest", *sum((["--param", g] for g in grid), []),
             "--store", str(store), "--workers", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    after = _rows(store)
    assert len(after) == 20 and all(after[k] == v for k, v in before.items())


def test_two_concurrent_sweeps_share_one_store(tmp_path):
    store = tmp_path / "s.sqlite"
    p1 = _start_sweep(store, ["x=0:1:25", "sleep=0.01"], 1)
    p2 = _start_sweep(store, ["x=0.5:1.5:25", "sleep=0.01"], 1)
    for p in (p1, p2):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    expected = {p.key for p in sweep_from_args("selftest", ["x=0:1:25", "sleep=0.01"]).points()}
    expected |= {p.key for p in sweep_from_args("selftest",
                                                ["x=0.5:1.5:25", "sleep=0.01"]).points()}
    with ResultStore(store) as st:
        assert st.keys() == expected
        assert st.keys(status="ok") == expected
    con = sqlite3.connect(store)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


@pytest.mark.parametrize("processes", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dask_local_cluster_matches_local_pool(tmp_path, processes):
    distributed = pytest.importorskip("distributed")
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    run_sweep(SWEEP, a, workers=2, progress="none")
    with distributed.LocalCluster(n_workers=2 if processes else 1, processes=processes,
                                  threads_per_worker=1, host="127.0.0.1", protocol="tcp://",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        rep = run_sweep(SWEEP, b, scheduler=cluster.scheduler_address, progress="none")
        assert rep.backend.startswith("dask") and rep.ok == 8
        again = run_sweep(SWEEP, b, scheduler=cluster.scheduler_address, progress="none")
        assert again.computed == 0
    assert _stable(_rows(a)) == _stable(_rows(b))


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    from attnphase.cli import main

    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text('kind = "selftest"\n[grid\n')
    not_store = tmp_path / "text.sqlite"
    not_store.write_text("plain text, not sqlite " * 10)
    store = str(tmp_path / "s.sqlite")
    cases = [
        (["--kind", "selftest", "--param", "bogus=1,2"], "unknown parameter 'bogus'"),
        (["--kind", "selftest", "--param", "x=0:1:0"], "empty"),
        (["--config", str(bad_toml)], "malformed TOML"),
        (["--kind", "selftest", "--param", "x=1", "--scheduler", "tcp://127.0.0.1:9",
          "--connect-timeout", "1"], "cannot reach Dask scheduler"),
        (["--kind", "selftest", "--scheduler", "localhost"], "tcp://HOST:PORT"),
        (["--kind", "nope"], "unknown point kind"),
    ]
    for extra, msg in cases:
        code = main(["sweep", "run", "--store", store, *extra])
        err = capsys.readouterr().err
        assert code == 2, (extra, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], (extra, err)
    # and once through a real process: exit status 2, one line, no traceback
    r = _cli("sweep", "run", "--kind", "selftest", "--store", str(not_store))
    assert r.returncode == 2 and "not an attnphase results store" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_run_status_export(tmp_path, capsys):
    import json

    from attnphase.cli import main

    store = str(tmp_path / "s.sqlite")
    cfg = tmp_path / "s.toml"
    cfg.write_text('kind = "selftest"\n[grid]\nx = [1, 2, 3]\n[fixed]\ny = 1\n')
    assert main(["sweep", "run", "--config", str(cfg), "--store", store, "--workers", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["computed"] == 3
    assert main(["sweep", "status", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "selftest" in out and " 3" in out
    csv = tmp_path / "o.csv"
    assert main(["sweep", "export", "--store", store, "--out", str(csv)]) == 0
    assert csv.exists() and "wrote 3 rows" in capsys.readouterr().out
    assert main(["sweep", "kinds"]) == 0
    out = capsys.readouterr().out
    assert "transition" in out and "simulation" in out


# ---------------------------------------------------------------------------- stale rows
def _age(store, keys, revision="0123456789ab"):
    """Pretend the rows of ``keys`` were computed by another numerical revision (``None``:
    unknown, as in a migrated store)."""
    con = sqlite3.connect(store)
    con.executemany("UPDATE points SET revision = ? WHERE key = ?", [(revision, k) for k in keys])
    con.commit()
    con.close()


def test_rows_record_the_revision_of_the_code_that_computed_them(tmp_path):
    from attnphase.sweeps import get_kind

    present = get_kind("selftest").revision()
    for workers in (1, 2):
        s = tmp_path / f"s{workers}.sqlite"
        run_sweep(SWEEP, s, workers=workers, progress="none")
        revs = {r[COLUMNS.index("revision")] for r in _rows(s).values()}
        assert revs == {present}


def test_stale_rows_are_served_with_one_warning_and_recompute_stale_redoes_exactly_them(
        tmp_path, caplog):
    import logging

    from attnphase.sweeps import get_kind

    s = tmp_path / "s.sqlite"
    run_sweep(SWEEP, s, workers=1, progress="none")
    keys = [p.key for p in SWEEP.points()]
    aged, unknown = keys[:2], keys[5:6]
    _age(s, aged)
    _age(s, unknown, None)
    before = _rows(s)

    caplog.set_level(logging.INFO, logger="attnphase")
    rep = run_sweep(SWEEP, s, workers=1, progress="none")
    assert (rep.computed, rep.skipped, rep.stale) == (0, 8, 3)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["using 3 stored points computed by another numerical revision of the "
                        "code (selftest 3); --recompute-stale recomputes them"]
    assert _rows(s) == before  # served as they are

    ran = []
    rep = run_sweep(SWEEP, s, workers=2, progress="none", recompute_stale=True,
                    on_result=lambda p, rec: ran.append(p.key))
    assert sorted(ran) == sorted(aged + unknown) and (rep.computed, rep.stale) == (3, 3)
    after = _rows(s)
    present = get_kind("selftest").revision()
    rev = COLUMNS.index("revision")
    assert all(after[k][rev] == present for k in keys)
    assert all(after[k] == before[k] for k in keys if k not in ran)  # untouched
    assert _stable(after) == _stable(before)  # (selftest points are deterministic)

    caplog.clear()
    rep = run_sweep(SWEEP, s, workers=1, progress="none", recompute_stale=True)
    assert (rep.computed, rep.stale) == (0, 0)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    # recompute still redoes every point, stale or not
    assert run_sweep(SWEEP, s, workers=1, progress="none", recompute=True).computed == 8


def test_cli_stale_rows_status_warning_recompute_and_export(tmp_path, capsys):
    import json

    import pandas as pd

    from attnphase.cli import main
    from attnphase.sweeps import get_kind

    store = str(tmp_path / "s.sqlite")
    grid = ["--kind", "selftest", "--param", "x=1,2,3,4", "--store", store, "--workers", "1"]
    assert main(["sweep", "run", *grid, "--quiet"]) == 0
    keys = sorted(_rows(store))
    _age(store, keys[:1])
    _age(store, keys[1:3], None)
    capsys.readouterr()

    assert main(["sweep", "status", "--store", store]) == 0
    present = get_kind("selftest").revision()
    assert capsys.readouterr().out.splitlines() == [
        "selftest     ok     4",
        f"selftest     stale  3 (computed by another numerical revision; the present is {present})",
        "hint: sweep run --recompute-stale with the same grid recomputes the stale rows",
    ]
    assert main(["sweep", "status", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"kind": "selftest", "status": "ok", "count": 4, "stale": 3, "revision": present}]

    csv = tmp_path / "o.csv"
    assert main(["sweep", "export", "--store", store, "--out", str(csv)]) == 0
    df = pd.read_csv(csv).set_index("key")
    assert df.loc[keys[0], "revision"] == "0123456789ab"
    assert df.loc[keys[1:3], "revision"].isna().all()
    assert (df.loc[keys[3:], "revision"] == present).all()

    capsys.readouterr()
    assert main(["sweep", "run", *grid, "--quiet"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["attnphase: using 3 stored points computed by another numerical revision of "
                   "the code (selftest 3); --recompute-stale recomputes them"]
    assert main(["sweep", "run", *grid, "--recompute-stale", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["computed"], out["stale"], out["skipped"]) == (3, 3, 1)
    assert main(["sweep", "status", "--store", store]) == 0
    assert capsys.readouterr().out.splitlines() == ["selftest     ok     4"]


def test_phase_diagram_and_demo_take_recompute_stale():
    from attnphase.cli import build_parser
    from attnphase.cli.sweep_cmds import run_kw

    parser = build_parser()
    for argv in (["phase-diagram", "--recompute-stale"], ["demo", "--recompute-stale"],
                 ["phase-diagram"]):
        args = parser.parse_args(argv)
        assert run_kw(args)["recompute_stale"] is ("--recompute-stale" in argv)
