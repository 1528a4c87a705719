"""Reproducibility: the same command with the same seed gives bit-identical JSON (wall times
apart) in another process, and a sweep stores bit-identical values whatever runs it (in-process,
a local pool of 2 processes, a Dask cluster on loopback). The records carry their command line:
``attnphase rerun FILE --check`` runs it again and compares every number."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from attnphase.cli import main
from attnphase.results import WALL_TIME_KEYS, compare_records
from attnphase.sweeps import SweepSpec, run_sweep

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: a cheap theory solve and a tiny simulation (seconds on one core)
SOLVE = ["solve", "--alpha", "0.8", "--omega", "0.3", "--preset", "fast", "--order", "6", "--refine-order", "0",
         "--branch", "semantic", "--json"]
SIMULATE = ["simulate", "--d", "12", "--alpha", "1.5", "--seeds", "2", "--init", "semantic,random",
            "--max-steps", "60", "--n-test", "40", "--json"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _process_json(argv: list[str], threads: str | None = None) -> dict:
    env = _env() if threads is None else {**_env(), "NUMBA_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
    out = subprocess.run([sys.executable, "-m", "attnphase", *argv], capture_output=True, text=True,
                         env=env, timeout=300, check=True)
    return json.loads(out.stdout)


def _in_process_json(argv: list[str], capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _without_wall_times(obj):
    if isinstance(obj, dict):
        return {k: _without_wall_times(v) for k, v in obj.items() if k not in WALL_TIME_KEYS}
    if isinstance(obj, list):
        return [_without_wall_times(v) for v in obj]
    return obj


@pytest.mark.parametrize("argv, threads", [(SOLVE, "3"), ([*SIMULATE[:-1], "--threads", "1", "--json"], None)],
                         ids=["solve", "simulate"])
def test_same_command_same_json_across_processes(argv, threads, capsys):
    """Bit-identical: the parsed JSON is equal (floats compared exactly), wall times left out. The
    solve runs on 3 threads in the other process: its node sums are cut into fixed chunks, not
    into a multiple of the thread count, so the thread count changes no bit."""
    here = _in_process_json(argv, capsys)
    there = _process_json(argv, threads)
    assert _without_wall_times(here) == _without_wall_times(there)
    assert here["command"]["program"] == "attnphase" and here["command"]["argv"] == argv


def _stored(path: Path) -> dict[str, tuple]:
    con = sqlite3.connect(path)
    rows = {r[0]: r[1:] for r in con.execute("SELECT key, params, status, result, error FROM points")}
    con.close()
    return rows


THEORY_SWEEP = SweepSpec("theory", axes=(("alpha", (0.6, 1.4)),),
                         fixed={"branch": "semantic", "solver_order": 7, "solver_refine_order": 0})
SIM_SWEEP = SweepSpec("simulation", axes=(("seed", (0, 1)), ("init", ("semantic", "random"))),
                      fixed={"d": 10, "alpha": 1.5, "train_max_steps": 40})


@pytest.mark.parametrize("sweep", [pytest.param(THEORY_SWEEP, marks=pytest.mark.slow), SIM_SWEEP],
                         ids=["theory", "simulation"])
def test_sweep_values_identical_across_backends(sweep, tmp_path):
    distributed = pytest.importorskip("distributed")
    serial, pool, dask = tmp_path / "serial.sqlite", tmp_path / "pool.sqlite", tmp_path / "dask.sqlite"
    assert run_sweep(sweep, serial, workers=1, progress="none").ok == sweep.size
    assert run_sweep(sweep, pool, workers=2, progress="none").ok == sweep.size
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1, host="127.0.0.1",
                                  protocol="tcp://", dashboard_address=None) as cluster:
        rep = run_sweep(sweep, dask, scheduler=cluster.scheduler_address, progress="none")
        assert rep.backend.startswith("dask") and rep.ok == sweep.size
    a, b, c = _stored(serial), _stored(pool), _stored(dask)
    assert len(a) == sweep.size
    assert a == b == c  # the stored JSON text of every result, byte for byte


# ----------------------------------------------------------------------------- rerun
def _record(tmp_path: Path, argv: list[str], capsys) -> Path:
    rec = _in_process_json(argv, capsys)
    path = tmp_path / f"{argv[0]}.json"
    path.write_text(json.dumps(rec))
    return path


@pytest.mark.parametrize("argv", [SOLVE, SIMULATE], ids=["solve", "simulate"])
def test_rerun_check_agrees_with_the_record(argv, tmp_path, capsys):
    path = _record(tmp_path, argv, capsys)
    assert main(["rerun", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "agree to 1e-09 relative" in out


def test_rerun_check_reports_the_largest_difference(tmp_path, capsys):
    path = _record(tmp_path, SOLVE, capsys)
    rec = json.loads(path.read_text())
    rec["branches"]["semantic"]["q"] *= 1 + 1e-6
    rec["linear_test_error"] *= 1 + 1e-8
    path.write_text(json.dumps(rec))
    assert main(["rerun", str(path), "--check"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert "2 of" in out[0] and "largest difference 1e-06 at branches.semantic.q" in out[0]


def test_rerun_of_a_simulation_uses_its_torch_threads(tmp_path, capsys):
    """A simulation's sums depend on torch's thread count: the record says how many ran, the
    rerun uses as many."""
    import torch

    path = _record(tmp_path, SIMULATE, capsys)
    rec = json.loads(path.read_text())
    assert rec["command"]["torch_threads"] == torch.get_num_threads()
    rec["command"]["torch_threads"] = 1
    path.write_text(json.dumps(rec))
    threads = torch.get_num_threads()
    try:
        assert main(["rerun", str(path)]) == 0
        assert json.loads(capsys.readouterr().out)["command"]["argv"] == [*SIMULATE, "--threads", "1"]
    finally:
        torch.set_num_threads(threads)


def test_rerun_without_check_prints_the_command_output(tmp_path, capsys):
    path = _record(tmp_path, SOLVE, capsys)
    assert main(["rerun", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["command"]["argv"] == SOLVE


@pytest.mark.parametrize("content, message", [
    ("not json at all", "not an attnphase record"),
    ('{"params": {}}', "not an attnphase record"),
    ('[1, 2]', "not an attnphase record"),
    ('{"command": {"program": "other", "argv": ["solve"]}}', "not an attnphase record"),
    ('{"command": {"program": "attnphase", "argv": []}}', "not an attnphase record"),
    ('{"command": {"program": "attnphase", "argv": ["sweep", "run"]}}', "cannot be rerun"),
    ('{"command": {"program": "attnphase", "argv": ["rerun", "x.json"]}}', "cannot be rerun"),
])
def test_rerun_refuses_what_is_not_a_record(content, message, tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text(content)
    assert main(["rerun", str(path), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert main(["rerun", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_compare_records():
    old = {"a": 1.0, "b": [1, 2.0, None], "c": {"seconds": 3.0, "x": True}, "s": "v1"}
    assert compare_records(old, old).success and compare_records(old, old).compared == 4
    moved = {"a": 1.0 + 1e-12, "b": [1, 2.0, None], "c": {"seconds": 9.0, "x": True}, "s": "v2"}
    cmp = compare_records(old, moved)
    assert cmp.success and cmp.where == "a" and 0 < cmp.largest < 1e-11
    bad = compare_records(old, {**old, "b": [1, 2.0, 5.0], "c": {"x": False}})
    assert not bad.success and bad.differing == 2 and bad.largest == float("inf")
    assert not compare_records(old, {k: v for k, v in old.items() if k != "a"}).success


def test_transition_record_holds_its_parameters():
    """The resolved parameters of a transition: the model, the grid, the solver settings."""
    from attnphase.results import TransitionResult
    from attnphase.spec import ModelSpec
    from attnphase.theory import SolverSettings
    from attnphase.theory.transition import Transition

    tr = Transition(1.2, 1.5, {"semantic": 0.7, "positional": None}, 0.002, (), {"alpha": [0.5, 1.0, 1.5]}, {})
    spec, st = ModelSpec(omega=0.2), SolverSettings.preset("fast")
    rec = TransitionResult.from_transition(tr, spec, st).to_dict()
    assert rec["params"]["omega"] == 0.2 and rec["params"]["alpha"] == [0.5, 1.0, 1.5]
    assert rec["params"]["solver"]["seed"] == st.seed and rec["alpha_c"] == 1.2


@pytest.mark.slow
def test_simulation_sweep_identical_across_thread_counts(tmp_path):
    """At d = 300 torch's matrix products split their sums over its threads; a simulation point
    runs on one thread wherever it runs, so the in-process sweep (its process on 2 threads) and
    the pool (1 thread per worker) store the same bits."""
    import torch

    sweep = SweepSpec("simulation", axes=(("seed", (0, 1)),),
                      fixed={"d": 300, "alpha": 2.0, "train_max_steps": 200})
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_sweep(sweep, tmp_path / "serial.sqlite", workers=1, progress="none")
    finally:
        torch.set_num_threads(threads)
    run_sweep(sweep, tmp_path / "pool.sqlite", workers=2, progress="none")
    assert _stored(tmp_path / "serial.sqlite") == _stored(tmp_path / "pool.sqlite")


@pytest.mark.slow
def test_transition_and_curves_records_rerun(tmp_path, capsys):
    argv = ["transition", "--alpha", "0.5:1.5:4", "--json"]
    path = _record(tmp_path, argv, capsys)
    assert main(["rerun", str(path), "--check"]) == 0
    capsys.readouterr()
    out = tmp_path / "curves"
    assert main(["curves", "--alpha", "0.5:1.5:3", "--no-transition", "--out", str(out)]) == 0
    capsys.readouterr()
    rec = json.loads((out / "curves.json").read_text())
    assert rec["command"]["argv"][0] == "curves"
    assert main(["rerun", str(out / "curves.json"), "--check"]) == 0
