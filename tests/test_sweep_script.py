"""A sweep run from a script: the docs/library.md example saved as a ``.py`` file without an
``if __name__ == "__main__":`` guard and run with ``python file.py`` computes and stores its
points (in-process, since the pool's spawned processes would run the script again), a rerun
computes nothing and reports no error, and a sweep whose points all fail says so (library and
command line)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from attnphase.cli import main
from attnphase.sweeps import ResultStore, SweepSpec, run_sweep

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: the example's grid, and the one the test runs in its place (the same shape, cheap points)
THEORY_SWEEP = 'SweepSpec("theory", axes=(("alpha", (0.5, 1.0, 2.0)),), fixed={"omega": 0.3})'
SELFTEST_SWEEP = 'SweepSpec("selftest", axes=(("x", (0.5, 1.0, 2.0)),), fixed={"y": 0.3})'


def _library_example() -> str:
    """The Python block of docs/library.md that runs a sweep."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "library.md").read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "run_sweep(" in b]
    return block


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], cwd=script.parent, capture_output=True, text=True,
                          timeout=120)


def test_the_library_sweep_example_runs_as_a_script_without_a_main_guard(tmp_path):
    example = _library_example()
    assert THEORY_SWEEP in example and "__main__" not in example and "workers=2" in example
    script = tmp_path / "sweep_example.py"
    script.write_text(example.replace(THEORY_SWEEP, SELFTEST_SWEEP)
                      + "print('RESULT', report.success, report.computed, report.errors, len(df))\n", encoding="utf-8")

    first = _run(script)
    assert first.returncode == 0, first.stderr
    assert "RESULT True 3 0 3" in first.stdout
    assert "Traceback" not in first.stderr and "if __name__" in first.stderr  # (one warning: why in-process)
    assert len(first.stderr.strip().splitlines()) == 1
    with ResultStore(tmp_path / "results.sqlite") as st:
        assert st.counts() == {("selftest", "ok"): 3}

    again = _run(script)
    assert again.returncode == 0, again.stderr
    assert "RESULT True 0 0 3" in again.stdout and "3 already stored, 0 computed (0 ok, 0 errors)" in again.stdout


def test_the_guard_is_told_from_the_script_text(tmp_path):
    """:func:`unguarded_main_script` names the script at its top level and not under the guard."""
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent("""\
        from attnphase.sweeps.runner import unguarded_main_script

        def probe():
            return unguarded_main_script()

        print("TOP", probe() is not None)
        if __name__ == "__main__":
            print("GUARDED", probe() is not None)
        """), encoding="utf-8")
    out = _run(script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["TOP", "True", "GUARDED", "False"]


def test_a_sweep_whose_points_all_fail_is_reported_as_failed(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    rep = run_sweep(SweepSpec("selftest", axes=(("x", (0.0, 1.0)),), fixed={"fail": True}), store, workers=1,
                    progress="none")
    assert not rep.success and (rep.computed, rep.ok, rep.errors, rep.failed) == (2, 0, 2, 2)
    assert rep.message.startswith("every computed point failed") and "selftest failure requested" in rep.message
    assert rep.to_dict()["success"] is False

    capsys.readouterr()  # (log lines of the call above, where an earlier command set up logging)
    code = main(["sweep", "run", "--kind", "selftest", "--param", "x=0,1", "--param", "fail=true",
                 "--store", str(tmp_path / "cli.sqlite"), "--workers", "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("attnphase sweep run: error: every computed point failed (2 of 2")
    assert "cli.sqlite" in err[0] and "selftest failure requested" in err[0]

    # the failed points kept (--keep-errors): nothing computed, exit 0, the summary counts them
    code = main(["sweep", "run", "--kind", "selftest", "--param", "x=0,1", "--param", "fail=true",
                 "--store", str(tmp_path / "cli.sqlite"), "--workers", "1", "--keep-errors"])
    err_text = capsys.readouterr().err
    assert code == 0 and "0 computed" in err_text and "2 stored points of the sweep kept as errors" in err_text
    assert main(["sweep", "run", "--kind", "selftest", "--param", "x=0", "--store", str(tmp_path / "cli.sqlite"),
                 "--keep-errors", "--retry-errors"]) == 2
