"""The public API (``attnphase.solve``, ``transition``, ``simulate``): its results are the records
the commands print, its defaults are the commands' defaults, its errors the commands' messages."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import attnphase as ap
from attnphase import api
from attnphase.cli import build_parser, main
from attnphase.cli.theory_cmds import settings_from_args

#: a quick solver (one branch in ~1 s): the fast preset on smaller rules
QUICK = {"order": 7, "refine_order": 8}
QUICK_FLAGS = ["--preset", "fast", "--order", "7", "--refine-order", "8"]


@contextmanager
def spy(name: str) -> Iterator[list[tuple[tuple, dict, Any]]]:
    """Record the calls of ``attnphase.api.<name>`` (arguments and result) while the CLI runs."""
    calls: list[tuple[tuple, dict, Any]] = []
    original = getattr(api, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        calls.append((args, kwargs, out))
        return out

    setattr(api, name, wrapper)
    try:
        yield calls
    finally:
        setattr(api, name, original)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str], name: str) -> tuple[dict, tuple, dict, Any]:
    """``attnphase ARGV --json`` in this process: the printed record and the API call behind it."""
    with spy(name) as calls:
        assert main(argv) == 0
    (args, kwargs, result), = calls
    out = json.loads(capsys.readouterr().out)
    command = out.pop("command")  # (the record's command line)
    assert command["program"] == "attnphase" and command["argv"] == argv
    return out, args, kwargs, result


def timeless(obj: Any) -> Any:
    """``obj`` without the wall times that two runs of the same computation do not share."""
    if isinstance(obj, dict):
        return {k: timeless(v) for k, v in obj.items() if k not in ("seconds", "batch_seconds")}
    if isinstance(obj, list):
        return [timeless(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def quick_solve() -> ap.SolveResult:
    return ap.solve(1.0, branch="positional", omega=0.3, settings=ap.SolverSettings.preset("fast", **QUICK))


def test_solve_to_dict_is_what_the_cli_prints(capsys, quick_solve):
    out, args, kwargs, res = run_cli(["solve", "--alpha", "1", "--omega", "0.3", "--branch", "positional",
                                      *QUICK_FLAGS, "--json"], capsys, "solve")
    assert out == res.to_dict()
    assert kwargs["settings"] == ap.SolverSettings.preset("fast", **QUICK)
    assert timeless(quick_solve.to_dict()) == timeless(out)
    assert list(quick_solve.branches) == ["positional"] and quick_solve.global_minimum == "positional"
    b = quick_solve.branches["positional"]
    assert b is not None and b.error_estimate is not None and b.refined and b.target_met is None
    assert b.m > 0.1 and b.overlap_error == max(b.error_estimate[k] for k in ("q_user", "m_user", "theta_user"))
    assert quick_solve.success and "positional found" in quick_solve.message


def test_default_solve_is_the_cli_default(capsys):
    """``attnphase solve --alpha 1 --omega 0.3 --json`` is ``ap.solve(1.0, omega=0.3)``: the same
    model, the default preset, and ``to_dict()`` what it prints."""
    out, args, kwargs, res = run_cli(["solve", "--alpha", "1", "--omega", "0.3", "--json"], capsys, "solve")
    assert out == res.to_dict()
    assert args == (1.0,) and kwargs["branch"] == "all"
    assert kwargs["spec"] == ap.ModelSpec(omega=0.3) == api.model_spec(omega=0.3)
    assert kwargs["settings"] == ap.SolverSettings.preset("default") == res.settings
    assert api.DEFAULT_PRESET["solve"] == "default"
    assert set(out["branches"]) == {"semantic", "positional", "trivial"}
    assert out["params"]["solver"] == dataclasses.asdict(ap.SolverSettings.preset("default"))
    assert res.success and all(b is not None and b.target_met for b in res.branches.values())


@pytest.mark.slow
def test_transition_to_dict_is_what_the_cli_prints(capsys):
    grid = ["--alpha", "0.8:1.8:4"]
    out, args, kwargs, res = run_cli(["transition", "--omega", "0.3", *grid, "--order", "6", "--refine-order", "7",
                                      "--json"], capsys, "transition")
    assert out == res.to_dict()
    settings = ap.SolverSettings.preset("fast", order=6, refine_order=7)
    assert kwargs["settings"] == settings
    direct = ap.transition(alphas=np.linspace(0.8, 1.8, 4), omega=0.3, settings=settings)
    assert direct.to_dict() == out
    assert direct.alpha_c == out["alpha_c"] and direct.errors["alpha_c"] == out["errors"]["alpha_c"]
    assert direct.success == (direct.alpha_c is not None) and "alpha_c = " in direct.message


def test_transition_defaults_are_the_cli_defaults():
    """The fast preset is what ``transition`` and ``curves`` run when nothing is given (and what
    ``ap.transition`` runs); ``default`` is ``solve``'s; explicit flags override the preset."""
    parser = build_parser()
    assert settings_from_args(parser.parse_args(["solve", "--alpha", "1"])) == ap.SolverSettings.preset("default")
    for cmd in ("transition", "curves"):
        assert settings_from_args(parser.parse_args([cmd])) == ap.SolverSettings.preset("fast")
    assert ap.SolverSettings.preset(api.DEFAULT_PRESET["transition"]) == ap.SolverSettings.preset("fast")
    got = settings_from_args(parser.parse_args(["solve", "--alpha", "1", "--preset", "fast", "--order", "9",
                                                "--solver", "mirror=off"]))
    assert got == ap.SolverSettings.preset("fast", order=9, mirror=False)
    got = settings_from_args(parser.parse_args(["transition", "--preset", "precise", "--replicas", "1"]))
    assert got == ap.SolverSettings.preset("precise", replicas=1) and got.target_error == 2e-4
    with pytest.raises(ValueError, match="unknown solver preset 'slow'"):
        ap.SolverSettings.preset("slow")


def test_simulate_to_dict_is_what_the_cli_prints_and_to_frame_has_a_row_per_run(capsys):
    out, args, kwargs, res = run_cli(["simulate", "--d", "20", "--alpha", "1", "--seeds", "2", "--max-steps", "30",
                                      "--json"], capsys, "simulate")
    assert out == res.to_dict()
    direct = ap.simulate(1.0, 20, seeds=2, max_steps=30)
    assert timeless(direct.to_dict()) == timeless(out)
    assert direct.train == res.train and direct.train["max_steps"] == 30 and direct.train["dtype"] == "float32"
    frame = direct.to_frame()
    assert len(frame) == 2 and list(frame["seed"]) == [0, 1] and set(frame["init"]) == {"semantic"}
    assert list(frame["test_error"]) == [r["test_error"] for r in out["runs"]]
    assert {"d", "alpha", "n", "m", "theta", "q", "train_loss", "linear_test_error", "stop"} <= set(frame.columns)
    assert not direct.success and "0 of 2 met the gradient tolerance" in direct.message  # (30 steps)


def _cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err.strip().split(": error: ", 1)[1]


def test_unknown_or_bad_model_parameters_raise_the_cli_message(capsys):
    with pytest.raises(ValueError, match=r"unknown model parameter 'omgea'; known: omega, sigma, lam, A, L"):
        ap.solve(1.0, omgea=0.3)
    with pytest.raises(ValueError, match="unknown model parameter 'beta'"):
        ap.transition(beta=1)
    for flags, kwargs in ((["--omega", "2"], {"omega": 2.0}), (["--sigma", "-1"], {"sigma": -1.0}),
                          (["--variant", "sideways"], {"variant": "sideways"}), (["--L", "1"], {"L": 1})):
        msg = _cli_error(["solve", "--alpha", "1", *flags], capsys)
        with pytest.raises(ValueError) as err:
            ap.solve(1.0, **kwargs)
        assert str(err.value) == msg
    msg = _cli_error(["simulate", "--optimizer", "sgd"], capsys)
    with pytest.raises(ValueError) as err:
        ap.simulate(1.0, 10, optimizer="sgd")
    assert str(err.value) == msg
    with pytest.raises(ValueError, match=r"unknown parameter 'lrr'; known: model omega.*training optimizer, lr"):
        ap.simulate(1.0, 10, lrr=0.1)
    with pytest.raises(ValueError, match="branch must be one of semantic, positional, trivial, all"):
        ap.solve(1.0, branch="mixed")


def test_bayes_to_dict_is_what_the_cli_prints(capsys):
    """``attnphase bayes --json`` is ``ap.bayes(...).to_dict()``; the refusals are one line, exit 2,
    and the library's ValueError with the same message."""
    out, args, kwargs, res = run_cli(["bayes", "--alpha", "0.1,0.4", "--omega", "0.3", "--json"], capsys, "bayes")
    assert out == res.to_dict()
    direct = ap.bayes([0.1, 0.4], omega=0.3)
    assert direct.to_dict() == out and direct.success and direct.alphas == (0.1, 0.4)
    assert out["points"][0]["overlap"] == 0.0 and 0.0 < out["points"][1]["overlap"] < 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        direct.noise = 1.0  # type: ignore[misc]
    for flags, kwargs in ((["--teacher-rank", "2"], {"teacher_rank": 2}), (["--omega", "1"], {"omega": 1.0}),
                          (["--causal-target"], {"causal_target": True}), (["--token-corr", "0.2"], {"token_corr": 0.2})):
        msg = _cli_error(["bayes", "--alpha", "0.3", *flags], capsys)
        with pytest.raises(ValueError) as err:
            ap.bayes(0.3, **kwargs)
        assert str(err.value) == msg and "\n" not in msg


def test_results_are_frozen_and_carry_no_solver_caches(quick_solve):
    b = quick_solve.branches["positional"]
    assert b is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick_solve.success = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.q = 0.0  # type: ignore[misc]
    for mapping in (quick_solve.branches, quick_solve.params, quick_solve.diagnostics, b.error_estimate,
                    b.diagnostics, b.diagnostics["refined"]):
        with pytest.raises(TypeError):
            mapping["x"] = 1  # type: ignore[index]
    names = {f.name for f in dataclasses.fields(b)}
    assert not names & {"op", "jacobian", "data", "fine"}
    assert b.to_dict() == quick_solve.to_dict()["branches"]["positional"]


def test_the_top_level_names_are_the_api_and_importing_it_is_cheap():
    """``__all__`` is the API; ``dir(attnphase)`` holds it, modules and private names only (in a fresh
    process: the modules it loads itself); no torch, numba, matplotlib, dask or pandas."""
    assert sorted(ap.__all__) == sorted(["BayesResult", "BranchResult", "CompareResult", "CurvesResult", "InternalError", "ModelSpec",
                                         "PhaseDiagramResult", "SimulationResult", "SolveResult", "SolverSettings",
                                         "TransitionResult", "__version__", "bayes", "compare", "curves",
                                         "phase_diagram", "simulate", "solve", "transition"])
    for leaked in ("annotations", "version", "PackageNotFoundError", "parse_matrix"):
        assert not hasattr(ap, leaked)
    code = ("import sys, attnphase; print([n for n in dir(attnphase) if not n.startswith('_')]); "
            "print([m for m in ('torch', 'numba', 'matplotlib', 'dask', 'scipy.stats', 'pandas') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    names, heavy = (ast.literal_eval(line) for line in out.splitlines())
    assert set(names) - set(ap.__all__) <= {"api", "api_sweeps", "errors", "results", "results_bayes", "results_records",
                                            "results_simulation", "results_sweeps", "spec", "theory"}
    assert all(isinstance(getattr(ap, n), types.ModuleType) for n in set(names) - set(ap.__all__))
    assert heavy == []
