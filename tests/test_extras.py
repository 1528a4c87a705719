"""The optional dependencies (attnphase._extras): the theory runs without torch, Dask and
pyarrow and imports none of them; a command or function that needs a missing one says, in one
line, which extra installs it (exit status 2 on the command line, MissingExtraError in the
library). Each check runs in a fresh interpreter, where ``sys.modules[name] = None`` makes the
module unimportable as if it were not installed."""

import json
import subprocess
import sys
import textwrap

import pytest

from attnphase._extras import EXTRAS, MissingExtraError, require

OPTIONAL = ("torch", "dask", "distributed", "pyarrow")


def _python(code: str) -> dict:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def test_missing_module_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingExtraError, match=r'a \.parquet export needs pyarrow.*pip install "attnphase\[parquet\]"'):
        require("pyarrow", "a .parquet export")
    assert issubclass(MissingExtraError, ImportError)
    assert set(EXTRAS) == set(OPTIONAL)


def test_theory_imports_no_optional_dependency():
    out = _python(f"""
        import io, json, sys
        from contextlib import redirect_stdout
        import attnphase, attnphase.theory
        after_import = sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r})
        stdout = io.StringIO()
        with redirect_stdout(stdout):
            from attnphase.cli import main
            rc = main(["solve", "--alpha", "1", "--omega", "0.3", "--preset", "fast", "--branch", "positional",
                       "--json"])
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r})
        print(json.dumps({{"after_import": after_import, "loaded": loaded, "rc": rc,
                          "solve": json.loads(stdout.getvalue())}}))
    """)
    assert out["after_import"] == []
    assert out["rc"] == 0 and out["solve"]
    assert out["loaded"] == []


def test_missing_extras_are_one_line_and_exit_2():
    out = _python(f"""
        import io, json, sys
        from contextlib import redirect_stderr
        for name in {OPTIONAL!r}:
            sys.modules[name] = None
        import attnphase
        from attnphase.cli import main
        from attnphase.sweeps.runner import connect_dask
        err = io.StringIO()
        with redirect_stderr(err):
            rc = main(["simulate", "--alpha", "1", "--d", "20", "--seeds", "1"])
        out = {{"rc": rc, "stderr": err.getvalue()}}
        for key, call in (("api", lambda: attnphase.simulate(1.0, 20, seeds=1)),
                          ("dask", lambda: connect_dask("tcp://127.0.0.1:8786"))):
            try:
                call()
                out[key] = None
            except Exception as exc:
                out[key] = [type(exc).__name__, [c.__name__ for c in type(exc).__mro__], str(exc)]
        print(json.dumps(out))
    """)
    assert out["rc"] == 2
    lines = out["stderr"].splitlines()
    assert len(lines) == 1, out["stderr"]
    assert lines[0].startswith("attnphase simulate: error: the simulator (attnphase.sim) needs torch")
    assert lines[0].endswith('pip install "attnphase[sim]"')
    name, mro, message = out["api"]
    assert name == "MissingExtraError" and "ImportError" in mro
    assert 'pip install "attnphase[sim]"' in message
    name, _, message = out["dask"]
    assert name == "MissingExtraError"
    assert 'pip install "attnphase[dask]"' in message
