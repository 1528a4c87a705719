"""Invalid input and internal failures are told apart (:mod:`attnphase.errors`).

Invalid input: a ``ValueError`` from the library, one line and exit status 2 from the command
line. A failure inside the numerics (injected here with monkeypatch: a real numpy error raised
where the solver would run): :class:`attnphase.InternalError` chained to it from the library,
exit status 3 with one line and a traceback file from the command line, the traceback on stderr
with ``--debug`` or ``ATTNPHASE_DEBUG``.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import attnphase as ap
import attnphase.api
from attnphase.cli import main
from attnphase.errors import DEBUG_ENV, EXIT_INPUT, EXIT_INTERNAL, is_input_error, raised_in

NUMPY_MESSAGE = "mismatch in its core dimension 0"


def _numpy_failure(*args: Any, **kwargs: Any) -> Any:
    """What the solver met at sigma = 0.3: numpy's solve given a Jacobian and a residual of
    different sizes (a ``ValueError`` raised inside numpy)."""
    return np.linalg.solve(np.eye(2), np.ones(1))


@pytest.fixture
def broken_solver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``attnphase.solve`` fails inside its numerics; tracebacks go to a fresh temporary folder,
    which is returned; no debug variable set."""
    monkeypatch.setattr(attnphase.api, "solve_refined", _numpy_failure)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    return tmp_path


SOLVE = ["solve", "--alpha", "1", "--preset", "fast", "--branch", "trivial"]


def test_cli_internal_failure_exits_3_with_one_line_and_a_traceback_file(broken_solver, capsys):
    assert main(SOLVE) == EXIT_INTERNAL
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("attnphase solve: internal error: ValueError: ")
    assert NUMPY_MESSAGE in line and "test_errors" not in line.split(" (in ")[0]
    files = list(broken_solver.glob("attnphase-internal-*.txt"))
    assert len(files) == 1 and str(files[0]) in line
    text = files[0].read_text(encoding="utf-8")
    assert "command: attnphase " + " ".join(SOLVE) in text
    assert "Traceback (most recent call last)" in text and "InternalError" in text and NUMPY_MESSAGE in text
    assert "_numpy_failure" in text  # (the frame that failed)


def test_cli_bad_input_still_exits_2_with_one_line(broken_solver, capsys):
    assert main(["solve", "--alpha", "-1"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert err == "attnphase solve: error: --alpha must be > 0, got -1.0\n"
    assert main([*SOLVE, "--sigma", "-1"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ": error: " in err and "sigma" in err
    assert not list(broken_solver.glob("attnphase-internal-*"))


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_prints_the_traceback_instead_of_a_file(broken_solver, capsys, monkeypatch, how):
    if how == "env":
        monkeypatch.setenv(DEBUG_ENV, "1")
    argv = ["--debug", *SOLVE] if how == "flag" else SOLVE
    assert main(argv) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "np.linalg.solve(np.eye(2), np.ones(1))" in err
    assert "The above exception was the direct cause" in err  # (the InternalError, chained to numpy's)
    assert err.strip().splitlines()[-1].startswith("attnphase solve: internal error: ValueError: ")
    assert not list(broken_solver.glob("attnphase-internal-*"))


def test_debug_variable_set_to_0_is_off(broken_solver, capsys, monkeypatch):
    monkeypatch.setenv(DEBUG_ENV, "0")
    assert main(SOLVE) == EXIT_INTERNAL
    assert "Traceback" not in capsys.readouterr().err
    assert len(list(broken_solver.glob("attnphase-internal-*.txt"))) == 1


def test_an_unexpected_exception_type_is_internal_too(monkeypatch, tmp_path, capsys):
    def index_failure(*args: Any, **kwargs: Any) -> Any:
        return np.zeros(2)[5]

    monkeypatch.setattr(attnphase.api, "solve_refined", index_failure)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert main(SOLVE) == EXIT_INTERNAL
    assert "internal error: IndexError: index 5 is out of bounds" in capsys.readouterr().err
    with pytest.raises(ap.InternalError) as err:
        ap.solve(1.0, branch="trivial", settings="fast")
    assert isinstance(err.value.__cause__, IndexError)


def test_library_raises_internal_error_not_value_error(broken_solver):
    with pytest.raises(ap.InternalError) as err:
        ap.solve(1.0, branch="trivial", settings="fast")
    assert not isinstance(err.value, ValueError) and isinstance(err.value, RuntimeError)
    cause = err.value.__cause__
    assert isinstance(cause, ValueError) and NUMPY_MESSAGE in str(cause)
    assert not is_input_error(cause)
    msg = str(err.value)
    assert msg.startswith("attnphase.solve failed inside: ValueError: ") and len(msg.splitlines()) == 1


def test_library_bad_input_is_still_a_value_error(broken_solver):
    for kwargs in ({"omega": 2.0}, {"sigma": -1.0}):
        with pytest.raises(ValueError) as err:
            ap.solve(1.0, **kwargs)
        assert not isinstance(err.value, ap.InternalError) and is_input_error(err.value)
    with pytest.raises(ValueError, match="alpha"):
        ap.solve(-1.0)
    with pytest.raises(ValueError, match="branch must be one of"):
        ap.solve(1.0, branch="mixed")
    with pytest.raises(TypeError):  # (a wrong call is the caller's, not internal)
        ap.solve(1.0, 2.0)  # type: ignore[misc]


def _module(name: str, source: str) -> dict[str, Any]:
    """The namespace of ``source`` executed as if it were the module ``name``."""
    ns: dict[str, Any] = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)
    return ns


SOURCE = """
def check(x):
    if x < 0:
        raise ValueError("x must be >= 0")

def convert(text):
    return float(text)

def reraise(text):
    try:
        float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None

def bare(a, b):
    try:
        return a @ b
    except ValueError:
        raise
"""


def test_only_a_raise_statement_in_attnphase_is_an_input_check():
    ours, theirs = _module("attnphase.fake", SOURCE), _module("elsewhere", SOURCE)

    def caught(fn: Any, *args: Any) -> BaseException:
        with pytest.raises(ValueError) as err:
            fn(*args)
        return err.value

    assert is_input_error(caught(ours["check"], -1))
    assert is_input_error(caught(ours["reraise"], "x"))
    assert not is_input_error(caught(ours["convert"], "x"))  # (a builtin's error, met in attnphase code)
    assert not is_input_error(caught(ours["bare"], np.ones(2), np.ones(3)))  # (numpy's, raised again)
    assert not is_input_error(caught(theirs["check"], -1))
    assert not is_input_error(ZeroDivisionError()) and not is_input_error(ValueError("no traceback"))
    assert raised_in(caught(ours["convert"], "x")) == "attnphase.fake.convert:7"


@pytest.mark.slow
def test_solve_at_sigma_0_3_returns_numbers():
    """``sigma = 0.3`` stopped inside numpy: the per-rule solves of the refinement took the
    Jacobian of the noise-floor stage in the units of the coarse point, where an unknown that
    the stage's start has as an exact zero was a tiny non-zero (a Jacobian of another size)."""
    res = ap.solve(1.0, omega=0.3, sigma=0.3, branch="trivial", settings="fast")
    r = res.branches["trivial"]
    assert r is not None and r.refined and res.success
    assert all(math.isfinite(v) for v in (r.q, r.V, r.train_loss, r.test_error))
    assert r.error_estimate is not None and math.isfinite(r.error_estimate["train_loss"])
