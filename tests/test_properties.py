"""Property-based tests (hypothesis) of every input surface: the parsers, the model's fields, the
command lines of ``solve`` and ``simulate``, sweep TOML files and ``--param`` items.

Whatever the input, it is either accepted (and solved: exit status 0, strict JSON without NaN or
infinities, every number of an existing fixed point or a converging run finite) or refused with
ONE line on stderr and exit status 2 (library: ``ValueError`` with a one-line message); never a
traceback, a hang or a silent NaN. Values mix plausible ones with plausible-but-wrong ones
(negative, zero, huge, nan, inf, '1e400', empty, unicode, wrong shapes, non-stochastic ``A``,
empty or reversed ranges, unknown keys, wrong TOML types). The runs are deterministic
(``derandomize=True``, no example database) and cheap (solver: ``--preset fast --order 6
--refine-order 0``; simulations: ``d <= 12``, a few steps); ``-m slow`` runs more examples.
The regular tests at the end are inputs that, unchecked, crash or hang the solver, the simulator
or the store: each is refused in one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from attnphase.cli import main
from attnphase.spec import ModelSpec
from attnphase.spec.attention import attention_model, names
from attnphase.spec.parse import INT_LIMIT, MAX_RANGE, parse_matrix, parse_range, to_float, to_int
from attnphase.spec.problem import VARIANTS
from attnphase.sweeps.grid import sweep_from_args

#: the registered models without cross-attention (whose ``L + L'`` tokens test_cross.py covers)
UNCROSSED = tuple(n for n in names() if not attention_model(n).cross)

#: examples per property in the default run and in ``-m slow``
FEW, MANY = 25, 300


def _settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


def note(what: str) -> None:
    """Count ``what`` in hypothesis' statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(what)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``attnphase ARGV`` in-process: (exit status, stdout, stderr); argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def strict_json(text: str):
    """JSON that has no NaN / Infinity tokens (``json.loads`` would accept them)."""
    def refuse(token: str):
        raise AssertionError(f"non-finite number {token} in the JSON output")
    return json.loads(text, parse_constant=refuse)


def assert_refused_in_one_line(code: int, err: str, argv) -> None:
    note("refused")
    lines = [ln for ln in err.splitlines() if not ln.startswith("attnphase: warning:")]
    assert code == 2, (argv, code, err)
    assert len(lines) == 1, (argv, err)
    assert "error" in lines[0] and "Traceback" not in err, (argv, err)


def finite_numbers(obj) -> bool:
    if isinstance(obj, list):
        return all(finite_numbers(v) for v in obj)
    return isinstance(obj, (int, float)) and not isinstance(obj, bool) and math.isfinite(obj)


# ----------------------------------------------------------------------------- values
#: number-like text: plausible, wrong, and not numbers at all
WRONG_TEXT = st.sampled_from([
    "", " ", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e-400", "0", "-0", "-1", "1e300",
    "1e-300", "abc", "1,2", "1;2", "0.6,0.4;0.4,0.6", "0x10", "1_000", "١", "ω", "½", "\u00a0", "1e", "--1",
    "None", "true", "[1]", "2.5", "9" * 30, "1:2:3",
])
NUMBER_TEXT = st.one_of(
    WRONG_TEXT, st.text(max_size=8), st.integers(-10**25, 10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def text_float(lo: float, hi: float):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(repr)


# ----------------------------------------------------------------------------- parsers
@_settings(MANY)
@given(st.one_of(NUMBER_TEXT, st.floats(), st.integers(-2**70, 2**70), st.booleans(), st.none(),
                 st.lists(st.integers(), max_size=2)))
def test_to_float_and_to_int_accept_finite_or_refuse_in_one_line(value):
    for convert in (to_float, to_int):
        try:
            v = convert(value, "--x")
        except ValueError as exc:
            assert len(str(exc).splitlines()) == 1 and "--x" in str(exc)
        else:
            assert math.isfinite(v)
            if convert is to_int:
                assert isinstance(v, int) and -INT_LIMIT <= v < INT_LIMIT


MATRIX_TEXT = st.one_of(
    st.text(alphabet="0123456789.,;- eE+naif", max_size=20),
    st.lists(st.lists(st.one_of(st.floats(width=64), WRONG_TEXT), min_size=1, max_size=3), min_size=1, max_size=3)
    .map(lambda rows: ";".join(",".join(str(e) for e in r) for r in rows)),
)


@_settings(MANY)
@given(MATRIX_TEXT)
def test_parse_matrix_gives_finite_rectangular_matrices_or_refuses(text):
    try:
        m = parse_matrix(text, "--A")
    except ValueError as exc:
        assert len(str(exc).splitlines()) == 1 and "--A" in str(exc)
    else:
        assert m and len({len(r) for r in m}) == 1
        assert all(math.isfinite(e) for r in m for e in r)


@_settings(FEW)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=2), min_size=1, max_size=4))
def test_parse_matrix_round_trip(rows):
    text = ";".join(",".join(repr(e) for e in r) for r in rows)
    assert parse_matrix(text) == tuple(tuple(r) for r in rows)


RANGE_TEXT = st.one_of(
    NUMBER_TEXT,
    st.tuples(NUMBER_TEXT, NUMBER_TEXT, st.one_of(NUMBER_TEXT, st.integers(-3, MAX_RANGE + 3).map(str)))
    .map(":".join),
    st.lists(NUMBER_TEXT, max_size=4).map(",".join),
)


@_settings(MANY)
@given(RANGE_TEXT)
def test_parse_range_gives_finite_values_or_refuses(text):
    try:
        values = parse_range(text, "--alpha")
    except ValueError as exc:
        assert len(str(exc).splitlines()) == 1 and "--alpha" in str(exc)
    else:
        assert values and all(math.isfinite(v) for v in values)
        assert len(values) <= max(MAX_RANGE, text.count(",") + 1)


@_settings(FEW)
@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.integers(1, 50))
def test_parse_range_start_stop_num(start, stop, num):
    """``start:stop:num`` is an inclusive linspace, reversed bounds included (a descending grid)."""
    values = parse_range(f"{start!r}:{stop!r}:{num}")
    assert len(values) == num and values[0] == start
    if num > 1:
        assert values[-1] == stop


# ----------------------------------------------------------------------------- ModelSpec
def _matrix_values(L: int):
    stochastic = st.lists(st.lists(st.floats(0.01, 1.0), min_size=L, max_size=L), min_size=L, max_size=L) \
        .map(lambda rows: tuple(tuple(e / sum(r) for e in r) for r in rows))
    wrong = st.one_of(
        st.lists(st.lists(st.floats(allow_nan=True), min_size=1, max_size=L + 1), min_size=1, max_size=L + 1)
        .map(lambda rows: tuple(tuple(r) for r in rows)),
        st.sampled_from(["", "1,0;0,1", "0.5,0.5;0.5,0.6", "nan,0;0,1", "1e400,0;0,1", "abc", "0.6,0.4"]),
    )
    return st.one_of(st.none(), stochastic, wrong)


FIELD_VALUES = {
    "omega": st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, 0.3, 1.0, "0.3", "x"])),
    "sigma": st.one_of(st.floats(allow_nan=True), st.sampled_from([0.5, 1e-160, 1e160, 0.0, "0.5"])),
    "lam": st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, 0.01])),
    "L": st.one_of(st.integers(-2, 6), st.sampled_from([1001, 10**9, 2**70, 2.0, 2.5, "3", True])),
    "rank": st.one_of(st.integers(-1, 3), st.sampled_from([1001, 10**12, "1"])),
    "teacher_rank": st.one_of(st.integers(-1, 3), st.sampled_from([1001, "x"])),
    "variant": st.one_of(st.sampled_from([*UNCROSSED, "TIED", "", "ω"]),
                         st.integers()),
    "causal_target": st.one_of(st.booleans(), st.sampled_from(["yes", "maybe", 2, None])),
    "token_corr": st.one_of(st.floats(-1.5, 1.5), st.floats(allow_nan=True)),
    "token_cov": st.sampled_from([None, ((0.25, 0.05), (0.05, 0.25)), ((1e-320, 0.0), (0.0, 1e-320)),
                                  ((1.0, 2.0), (2.0, 1.0)), ((float("inf"), 0.0), (0.0, 1.0)), "1,0;0,1"]),
    "value": st.sampled_from(["identity", "lowrank", "full", "gain", "", "x"]),
    "value_rank": st.one_of(st.integers(-1, 4), st.just("2")),
    "value_gain": st.one_of(st.floats(allow_nan=True), st.sampled_from([1.0, 0.0, -1.0, "1.1"])),
    "lam_lin": st.one_of(st.floats(allow_nan=True), st.just(1e-4)),
}


@st.composite
def model_kwargs(draw):
    names = draw(st.lists(st.sampled_from(sorted(FIELD_VALUES)), max_size=5, unique=True))
    kw = {n: draw(FIELD_VALUES[n]) for n in names}
    L = kw.get("L") if isinstance(kw.get("L"), int) and 2 <= kw.get("L", 2) <= 6 else 2
    if draw(st.booleans()):
        kw["A"] = draw(_matrix_values(L))
    if draw(st.booleans()):
        kw["positions"] = draw(st.sampled_from([None, "1,-1;-1,1", "1,0;0,1", "1,2;2,1", "1,1e400;1e400,1",
                                                ((1.0, 0.5), (0.5, 1.0)), "1,-0.5,-0.5;-0.5,1,-0.5;-0.5,-0.5,1"]))
    return kw


@_settings(MANY)
@given(model_kwargs())
def test_model_spec_is_valid_or_refused_in_one_line(kw):
    try:
        spec = ModelSpec(**kw)
    except ValueError as exc:
        assert str(exc) and len(str(exc).splitlines()) == 1, kw
        return
    L = spec.L
    A, G, C = spec.A_array, spec.G_array, spec.C_array
    assert 2 <= L <= 1000 and 0.0 <= spec.omega <= 1.0 and spec.sigma > 0 and spec.lam >= 0
    assert A.shape == G.shape == C.shape == (L, L)
    assert np.all(np.isfinite(A)) and np.all(A >= 0) and np.allclose(A.sum(1), 1.0)
    assert np.all(np.isfinite(G)) and np.allclose(np.diag(G), 1.0)
    assert np.all(np.isfinite(C)) and np.linalg.eigvalsh(C).min() > 0
    assert spec.variant in VARIANTS
    assert ModelSpec(**spec.to_dict()) == spec  # the record rebuilds the same spec


# ----------------------------------------------------------------------------- CLI: solve
#: the cheapest solve: one branch, a coarse rule, no refinement
CHEAP_SOLVE = ["--preset", "fast", "--order", "6", "--refine-order", "0"]

SOLVE_FLAGS = {
    "--alpha": st.one_of(text_float(0.2, 3.0), NUMBER_TEXT),
    "--omega": st.one_of(text_float(0.0, 1.0), NUMBER_TEXT),
    "--sigma": st.one_of(text_float(0.2, 2.0), NUMBER_TEXT),
    "--lam": st.one_of(text_float(0.0, 0.5), WRONG_TEXT),
    "--L": st.sampled_from(["2", "3", "1", "0", "-2", "2.0", "1001", "99999999", "", "x"]),
    "--rank": st.sampled_from(["1", "0", "-1", "1.5", "1000000", ""]),
    "--teacher-rank": st.sampled_from(["1", "0", "1000000", "x"]),
    "--A": st.sampled_from(["0.6,0.4;0.4,0.6", "0.9,0.1;0.2,0.8", "1,0;0,1", "0.5,0.5;0.5,0.6", "0.6,0.4",
                            "1.5,-0.5;0.4,0.6", "nan,nan;nan,nan", "1e400,0;0,1", "", ";", "a,b;c,d",
                            "0.6,0.4;0.4,0.6;0,1"]),
    "--positions": st.sampled_from(["1,-1;-1,1", "1,0;0,1", "1,2;2,1", "1,1e400;1e400,1", "2,0;0,2", ""]),
    "--variant": st.sampled_from([*UNCROSSED, "x", "", "Tied"]),
    "--token-corr": st.one_of(text_float(-0.9, 0.9), st.sampled_from(["1", "-1", "nan", "1e400"])),
    "--token-cov": st.sampled_from(["0.25,0.05;0.05,0.25", "inf,0;0,inf", "1e-320,0;0,1e-320", "0,0;0,0",
                                    "1,2;3,4", "1,0;0,1;0,0"]),
    "--seed": st.sampled_from(["0", "3", "-1", "99999999999999999999999", "1.5", "x"]),
    "--tol": st.sampled_from(["1e-6", "0", "-1", "nan", "1e400", "2"]),
    "--branch": st.sampled_from(["semantic", "positional", "trivial", "x", "", "mixed"]),
    "--solver": st.sampled_from(["max_iter=50", "max_iter=0", "max_iter=-1", "max_iter=x", "method=qmc",
                                 "method=x", "method=", "bogus=1", "x"]),
}


@st.composite
def solve_argv(draw):
    names = draw(st.lists(st.sampled_from(sorted(SOLVE_FLAGS)), max_size=4))  # (repeats: duplicate flags)
    argv = ["solve", *CHEAP_SOLVE]
    if "--branch" not in names:
        argv += ["--branch", "semantic"]
    if "--alpha" not in names:
        argv += ["--alpha", "1"]
    for n in names:
        argv += [n, draw(SOLVE_FLAGS[n])]
    return argv + ["--json"]


def _check_solve(argv) -> None:
    code, out, err = run_cli(argv)
    if code != 0:
        assert_refused_in_one_line(code, err, argv)
        return
    note("accepted")
    rec = strict_json(out)
    assert rec["command"] == {"program": "attnphase", "argv": argv}
    assert finite_numbers(rec["params"]["alpha"]) and finite_numbers(rec["linear_test_error"])
    for branch, values in rec["branches"].items():
        if values is not None:  # an existing fixed point: every number finite
            for k in ("q", "m", "theta", "V", "train_loss", "test_error"):
                assert finite_numbers(values[k]), (argv, branch, k, values[k])


@_settings(FEW)
@given(solve_argv())
def test_solve_accepts_and_solves_or_refuses_in_one_line(argv):
    _check_solve(argv)


@pytest.mark.slow
@_settings(MANY)
@given(solve_argv())
def test_solve_accepts_and_solves_or_refuses_in_one_line_many(argv):
    _check_solve(argv)


# ----------------------------------------------------------------------------- CLI: simulate
SIM_FLAGS = {
    "--d": st.sampled_from(["2", "5", "12", "1", "0", "-3", "2.5", "1e9", "99999999999", "", "x"]),
    "--alpha": st.one_of(text_float(0.3, 3.0), NUMBER_TEXT),
    "--omega": st.one_of(text_float(0.0, 1.0), NUMBER_TEXT),
    "--sigma": st.one_of(text_float(0.2, 2.0), WRONG_TEXT),
    "--L": st.sampled_from(["2", "3", "1", "13", "x"]),
    "--seeds": st.sampled_from(["1", "2", "0", "-1", "1000000000", "x"]),
    "--seed0": st.sampled_from(["0", "7", "-1", "99999999999999999999999"]),
    "--n-test": st.sampled_from(["1", "20", "0", "-1", "99999999999", "x"]),
    "--init": st.sampled_from(["semantic", "positional", "random", "all", "", ",", "x", "all,semantic"]),
    "--optimizer": st.sampled_from(["gd", "adam", "x", ""]),
    "--lr": st.sampled_from(["0.05", "1e300", "0", "-1", "nan", "inf"]),
    "--momentum": st.sampled_from(["0", "0.5", "1", "-0.1", "nan"]),
    "--max-steps": st.sampled_from(["0", "5", "-1", "1e9", "99999999999999999999"]),
    "--tol": st.sampled_from(["0", "1e-5", "-1", "nan"]),
    "--dtype": st.sampled_from(["float32", "float64", "float16", ""]),
    "--device": st.sampled_from(["cpu", "x", "meta"]),
    "--value": st.sampled_from(["identity", "lowrank", "full", "x"]),
    "--value-rank": st.sampled_from(["1", "2", "0", "x"]),
    "--variant": st.sampled_from([*(n for n in UNCROSSED if n in names("simulator")), "x"]),
    "--A": st.sampled_from(["0.6,0.4;0.4,0.6", "1,0;0,1", "0.5,0.5;0.5,0.6", "nan,0;0,1", ""]),
}


@st.composite
def simulate_argv(draw):
    names = draw(st.lists(st.sampled_from(sorted(SIM_FLAGS)), max_size=4))
    argv = ["simulate", "--d", "6", "--alpha", "1", "--seeds", "1", "--max-steps", "10", "--n-test", "20"]
    for n in names:
        argv += [n, draw(SIM_FLAGS[n])]
    return argv + ["--json"]


def _check_simulate(argv) -> None:
    code, out, err = run_cli(argv)
    if code != 0:
        assert_refused_in_one_line(code, err, argv)
        return
    note("accepted")
    rec = strict_json(out)
    assert rec["command"]["argv"] == argv
    for run in rec["runs"]:
        if run["stop"] != "diverged":  # (a diverged run says so; its numbers are null, not NaN)
            for k in ("m", "theta", "q", "train_loss", "test_error", "linear_test_error"):
                assert finite_numbers(run[k]), (argv, k, run[k])


@_settings(FEW)
@given(simulate_argv())
def test_simulate_accepts_and_trains_or_refuses_in_one_line(argv):
    _check_simulate(argv)


@pytest.mark.slow
@_settings(MANY)
@given(simulate_argv())
def test_simulate_accepts_and_trains_or_refuses_in_one_line_many(argv):
    _check_simulate(argv)


# ----------------------------------------------------------------------------- sweeps
def toml_value(v) -> str:
    """``v`` as TOML (floats with nan/inf, strings JSON-escaped, lists, inline tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(e)}" for k, e in v.items()) + "}"
    raise TypeError(v)


VALID_SELFTEST_VALUE = st.one_of(
    st.floats(-10, 10), st.integers(0, 5), st.sampled_from(["0:1:3", "1,2", "2:1:2", "0.5"]),
    st.lists(st.floats(-5, 5), min_size=1, max_size=3),
)
WRONG_SELFTEST_VALUE = st.one_of(
    st.floats(allow_nan=True), st.integers(-2**70, 2**70), st.booleans(), RANGE_TEXT, st.text(max_size=5),
    st.lists(st.one_of(st.floats(-5, 5), st.integers(0, 3), st.text(max_size=2)), max_size=3),
    st.just({"a": 1}), st.just([[1.0, 2.0]]),
)
#: the selftest kind's parameters (``sleep``/``crash`` left out: they sleep or kill workers), and
#: unknown ones
SELFTEST_KEYS = st.sampled_from(["x", "y", "seed", "fail", "x", "y", "x", "y", "bogus", "alpha"])


@st.composite
def sweep_toml(draw) -> str:
    """A sweep file of the selftest kind: mostly valid, with one kind of mistake now and then
    (wrong kind, unknown top-level key or table, unknown parameter, wrong type, malformed TOML)."""
    lines = []
    kind = draw(st.sampled_from(['"selftest"'] * 6 + ['"nope"', "5", None]))
    if kind is not None:
        lines.append(f"kind = {kind}")
    if draw(st.integers(0, 5)) == 0:
        lines.append(f"extra = {toml_value(draw(st.integers(0, 3)))}")
    tables = draw(st.lists(st.sampled_from(["grid", "fixed", "grid", "fixed", "grid2"]), max_size=2, unique=True))
    for table in tables:
        lines.append(f"[{table}]")
        for key in draw(st.lists(SELFTEST_KEYS, max_size=3, unique=True)):
            wrong = draw(st.integers(0, 5)) == 0
            value = draw(WRONG_SELFTEST_VALUE if wrong else VALID_SELFTEST_VALUE)
            if key == "fail":
                value = draw(st.sampled_from([True, False, "yes", "maybe", [True, False]]))
            if key == "seed" and not wrong:
                value = draw(st.integers(0, 3))
            lines.append(f"{key} = {toml_value(value)}")
    if draw(st.integers(0, 9)) == 0:
        lines.append("[grid")  # malformed
    return "\n".join(lines) + "\n"


def _check_sweep(tmp: Path, argv_tail: list[str]) -> None:
    argv = ["sweep", "run", "--store", str(tmp / "s.sqlite"), "--workers", "1", "--json", "--quiet", *argv_tail]
    code, out, err = run_cli(argv)
    if code == 1:  # run, and every point failed (the selftest's failure switch): one line that says so
        note("every point failed")
        lines = [ln for ln in err.splitlines() if not ln.startswith("attnphase: warning:")]
        assert len(lines) == 1 and "every computed point failed" in lines[0], (argv, err)
        assert "selftest failure requested" in lines[0], (argv, err)
        return
    if code != 0:
        assert_refused_in_one_line(code, err, argv)
        return
    note("accepted")
    rep = strict_json(out)
    assert rep["total"] == rep["computed"] + rep["skipped"] and rep["ok"] + rep["errors"] == rep["computed"]
    con = sqlite3.connect(tmp / "s.sqlite")
    for (result,) in con.execute("SELECT result FROM points WHERE status = 'ok'"):
        assert finite_numbers(list(strict_json(result).values()))
    con.close()


@_settings(FEW)
@given(text=sweep_toml(), params=st.lists(st.sampled_from(["x=1,2", "x=1", "y=0:1:3", "seed=0,1", "fail=no", "x=",
                                                          "seed=1.5", "=1", "x"]), max_size=1))
def test_sweep_toml_is_run_or_refused_in_one_line(text, params, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "s.toml").write_text(text, encoding="utf-8")
    tail = ["--config", str(tmp / "s.toml")]
    for p in params:
        tail += ["--param", p]
    _check_sweep(tmp, tail)


@pytest.mark.slow
@_settings(MANY)
@given(text=sweep_toml())
def test_sweep_toml_is_run_or_refused_in_one_line_many(text, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "s.toml").write_text(text, encoding="utf-8")
    _check_sweep(tmp, ["--config", str(tmp / "s.toml")])


THEORY_PARAM = st.sampled_from([
    "alpha=0:1:3", "alpha=-1", "alpha=nan", "alpha=1e400", "alpha=1:2:0", "alpha=1:2:1000000000",
    "omega=2", "sigma=0", "L=1", "L=99999999", "rank=0", "A=0.5,0.5;0.5,0.6", "A=1e400,0;0,1",
    "A=0.6,0.4;0.4,0.6|0.6,0.4", "branch=x", "branch=", "bogus=1", "solver_bogus=1", "seed=1",
    "variant=x", "token_cov=inf,0;0,inf", "positions=1,2;2,1",
])


@_settings(FEW)
@given(params=st.lists(THEORY_PARAM, min_size=1, max_size=3))
def test_theory_sweep_with_a_wrong_value_is_refused_before_computing(params, tmp_path_factory):
    """Every item here is wrong, so the sweep is refused while its points are made (nothing is
    solved): one line, exit status 2."""
    tmp = tmp_path_factory.mktemp("sweep")
    tail = ["--kind", "theory"]
    for p in params:
        tail += ["--param", p]
    code, out, err = run_cli(["sweep", "run", "--store", str(tmp / "s.sqlite"), "--workers", "1", "--quiet", *tail])
    assert_refused_in_one_line(code, err, params)


@_settings(FEW)
@given(st.lists(st.tuples(st.sampled_from(["x", "y", "seed"]), RANGE_TEXT), min_size=1, max_size=3))
def test_param_items_give_a_grid_or_refuse(items):
    """``--param NAME=VALUES`` (repeated names included: the last wins) gives a grid of valid
    points, or a one-line ``ValueError``."""
    try:
        sweep = sweep_from_args("selftest", [f"{n}={t}" for n, t in items])
        points = sweep.points() if sweep.size <= 10_000 else []
    except ValueError as exc:
        assert len(str(exc).splitlines()) == 1
        return
    last = {n: t for n, t in items}
    assert {n for n, _ in sweep.axes} | set(sweep.fixed) == set(last)
    for p in points:
        assert all(math.isfinite(p.params[k]) for k in ("x", "y")) and isinstance(p.params["seed"], int)


# ----------------------------------------------------------------------------- regressions
#: inputs that, unchecked, end in a traceback, a MemoryError or a hang (the comment says which)
REFUSED = [
    (["solve", "--alpha", "1", "--sigma", "1e300"], "sigma"),  # OverflowError (sigma ** 2)
    (["solve", "--alpha", "1", "--sigma", "1e-300"], "sigma"),  # LinAlgError deep in the solver
    (["solve", "--alpha", "1", "--L", "99999999"], "L must be <= 1000"),  # hang building A
    (["solve", "--alpha", "1", "--rank", "1000000"], "rank must be <= 1000"),  # MemoryError (7 TiB)
    (["solve", "--alpha", "1", "--positions", "1,1e400;1e400,1"], "finite entries"),  # AssertionError
    (["solve", "--alpha", "1", "--token-cov", "inf,0;0,inf"], "finite entries"),  # AssertionError
    (["solve", "--alpha", "1", "--token-cov", "1e-320,0;0,1e-320"], "positive definite"),  # RuntimeWarnings
    (["solve", "--alpha", "1", "--seed", "99999999999999999999999"], "64-bit"),
    (["transition", "--alpha", "0.2:2:1000000000"], "too many values"),  # MemoryError (linspace)
    (["solve", "--alpha", "1e300", "--branch", "semantic"], "alpha must lie in [1e-12, 1e+12]"),  # overflow warnings
    (["solve", "--alpha", "1e20", "--branch", "semantic"], "alpha must lie in"),  # "Singular matrix"
    (["solve", "--alpha", "1e-300"], "alpha must lie in"),  # overflow warnings, "Singular matrix"
    (["transition", "--alpha", "1,1e300"], "alpha must lie in"),  # overflow warnings
    (["simulate", "--d", "99999999999", "--seeds", "1"], "the data would take"),  # MemoryError
    (["simulate", "--d", "8", "--alpha", "1e300", "--seeds", "1"], "the data would take"),  # torch abort
    (["simulate", "--d", "8", "--n-test", "99999999999", "--seeds", "1"], "the data would take"),
    (["simulate", "--d", "8", "--seeds", "1000000000"], "--seeds must be <= 10000"),  # hang (range)
    (["simulate", "--d", "8", "--seeds", "1", "--seed0", "-1"], "--seed0 must be >= 0"),
]


@pytest.mark.parametrize("argv, message", REFUSED, ids=[" ".join(a[:1] + a[-2:]) for a, _ in REFUSED])
def test_inputs_that_would_crash_are_refused_in_one_line(argv, message):
    code, out, err = run_cli(argv)
    assert_refused_in_one_line(code, err, argv)
    assert message in err and out == ""


@pytest.mark.parametrize("toml, message", [
    ('kind = "selftest"\n[grid]\nseed = 1e30\n', "64-bit"),  # OverflowError in the store (SQLite)
    ('kind = "selftest"\n[grid]\nseed = "1e30"\n', "64-bit"),
    ('kind = "selftest"\n[grid]\nx = "0:1:100000000000"\n', "too many values"),  # MemoryError
    ('kind = "curve"\n[fixed]\nalphas = "1:2:100000000000"\n', "too many values"),
])
def test_sweep_files_that_would_crash_are_refused_in_one_line(toml, message, tmp_path):
    (tmp_path / "s.toml").write_text(toml)
    code, out, err = run_cli(["sweep", "run", "--store", str(tmp_path / "s.sqlite"), "--config",
                              str(tmp_path / "s.toml"), "--workers", "1", "--quiet"])
    assert_refused_in_one_line(code, err, toml)
    assert message in err


def test_out_of_memory_is_one_line(monkeypatch):
    """A MemoryError that no check foresaw: one line, exit status 2."""
    import attnphase.api as api

    def boom(*args, **kwargs):
        raise MemoryError("Unable to allocate 7.28 TiB for an array")

    monkeypatch.setattr(api, "solve", boom)
    code, out, err = run_cli(["solve", "--alpha", "1"])
    assert_refused_in_one_line(code, err, "solve")
    assert "out of memory (Unable to allocate 7.28 TiB" in err


def test_duplicate_flags_the_last_one_counts():
    code, out, err = run_cli(["solve", *CHEAP_SOLVE, "--alpha", "1", "--branch", "semantic", "--omega", "0.1",
                              "--omega", "0.4", "--json"])
    assert code == 0
    rec = strict_json(out)
    assert rec["params"]["omega"] == 0.4 and rec["command"]["argv"].count("--omega") == 2


def test_memory_check_reads_the_machine():
    """The simulate check compares with this machine's memory (where ``sysconf`` exists)."""
    from attnphase.sim.data import check_memory

    if not hasattr(os, "sysconf"):
        pytest.skip("no sysconf")
    check_memory(ModelSpec(), 100, [1.0], None, 2, "float32")  # 2 x 1100 x 2 x 100 x 4 bytes: fine
    with pytest.raises(ValueError, match="the data would take"):
        check_memory(ModelSpec(), 10**6, [1000.0], None, 1, "float64")


# ----------------------------------------------------------------------------- settings of a sweep
@pytest.mark.parametrize("params", [
    ["--kind", "theory", "--param", "alpha=1", "--param", "solver_tol=-1"],
    ["--kind", "theory", "--param", "alpha=1", "--param", "solver_seed=-1"],
    ["--kind", "simulation", "--param", "alpha=1", "--param", "d=20", "--param", "train_lr=-1"],
    ["--kind", "simulation", "--param", "alpha=1", "--param", "d=20", "--param", "seed=-1"],
    ["--kind", "selftest", "--param", "x=1", "--param", "seed=-1"],
    ["--kind", "selftest", "--param", "x=1", "--connect-timeout", "nan"],
])
def test_a_sweep_with_a_bad_setting_is_refused_before_anything_runs(tmp_path, params):
    """Solver and training settings and seeds are checked when the sweep is read, not when each
    point runs (which stored one failed point per grid point and exited 0)."""
    store = tmp_path / "s.sqlite"
    argv = ["sweep", "run", *params, "--store", str(store), "--workers", "1", "--quiet"]
    code, _, err = run_cli(argv)
    assert_refused_in_one_line(code, err, argv)
    assert not store.exists()


def test_the_library_refuses_a_simulation_too_large_for_the_memory():
    import attnphase as ap

    with pytest.raises(ValueError, match="more than half of this machine's"):
        ap.simulate(1.0, 10**11)
