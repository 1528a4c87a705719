"""One default per computation (``attnphase.spec.defaults``): the library functions, the command
line, the sweep kinds and the demo read the same solver preset, start grid and training settings,
and a sweep point of the ``theory`` kind is what ``attnphase solve`` gives at that point."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest

import attnphase as ap
from attnphase import api
from attnphase.cli import build_parser
from attnphase.report.demo_settings import DemoSettings
from attnphase.spec.defaults import SOLVER_PRESET, TRAIN_SETTINGS, TRANSITION_GRID, range_text, training
from attnphase.sweeps import ResultStore, SweepSpec, run_sweep
from attnphase.sweeps.kinds import KIND_PRESET, get_kind, point_solver_settings
from attnphase.theory import SolverSettings

SRC = Path(__file__).resolve().parents[1] / "src" / "attnphase"
#: the stored quantities of a theory point that ``attnphase.solve`` reports for its branch
SAME = ("theta", "m", "q", "train_loss", "test_error")


def _theory_point(tmp_path: Path, params: dict[str, Any]) -> dict[str, Any]:
    """One ``theory`` point run through the sweep machinery: its stored result and diagnostics."""
    sweep = SweepSpec("theory", fixed=params)
    assert run_sweep(sweep, tmp_path / "store.sqlite", workers=1, progress="none").ok == 1
    (point,) = sweep.points()
    with ResultStore(tmp_path / "store.sqlite") as store:
        return store.results([point.key])[point.key]


def _assert_point_is_solve(stored: dict[str, Any], res: ap.SolveResult, branch: str) -> None:
    b = res.branches[branch]
    assert b is not None
    for k in SAME:
        assert math.isclose(stored["result"][k], getattr(b, k), rel_tol=1e-12, abs_tol=1e-15), k
    errors = stored["diagnostics"]["error_estimate"]
    for k in ("theta_user", "m_user", "q_user", "train_loss", "test_error"):
        assert math.isclose(errors[k], b.error_estimate[k], rel_tol=1e-12, abs_tol=1e-15), k


def test_a_theory_point_is_solved_as_solve_solves_its_branch(tmp_path):
    """At the same (cheap) settings the sweep point and ``attnphase.solve`` give the same numbers:
    the same computation, the refinement raised to meet the error target included (order 7 does
    not meet 4e-3 here, order 8 does)."""
    st = SolverSettings.preset(SOLVER_PRESET["solve"], order=5, refine_order=7, target_error=4e-3,
                               max_refine_order=9, replicas=2)
    solver = {f"solver_{k}": v for k, v in dataclasses.asdict(st).items()
              if k in ("order", "refine_order", "target_error", "max_refine_order", "replicas")}
    stored = _theory_point(tmp_path, {"alpha": 1.2, "omega": 0.3, "branch": "semantic", **solver})
    assert stored["diagnostics"]["refined"]["applied"] and stored["diagnostics"]["refined"]["order"] == 8
    _assert_point_is_solve(stored, ap.solve(1.2, branch="semantic", omega=0.3, settings=st, progress=False),
                           "semantic")


@pytest.mark.slow
def test_a_theory_point_at_its_defaults_equals_attnphase_solve(tmp_path):
    """The default theory point at ``alpha = 1``, ``omega = 0.3`` is ``attnphase solve``'s (semantic
    theta 0.37818 there, where the unrefined order-12 rule gives 0.38041)."""
    stored = _theory_point(tmp_path, {"alpha": 1.0, "omega": 0.3, "branch": "semantic"})
    _assert_point_is_solve(stored, ap.solve(1.0, branch="semantic", omega=0.3, progress=False), "semantic")


@pytest.mark.slow
def test_a_transition_point_equals_attnphase_transition(tmp_path):
    """The ``transition`` kind searches as ``attnphase transition`` without ``--alpha`` does (the
    range widened from the start grid), at the same settings (a cheap rule: about 20 s)."""
    st = SolverSettings.preset(SOLVER_PRESET["transition"], order=6, refine_order=8)
    sweep = SweepSpec("transition", fixed={"omega": 0.3, "solver_order": 6, "solver_refine_order": 8})
    assert run_sweep(sweep, tmp_path / "store.sqlite", workers=1, progress="none").ok == 1
    (point,) = sweep.points()
    with ResultStore(tmp_path / "store.sqlite") as store:
        stored = store.results([point.key])[point.key]["result"]
    res = ap.transition(omega=0.3, settings=st, progress=False)
    assert res.alpha_c is not None and stored["alpha_c"] == res.alpha_c and stored["alpha_l"] == res.alpha_l
    assert stored["spinodals"] == dict(res.spinodals)


@pytest.mark.parametrize("kind", sorted(KIND_PRESET))
def test_the_theory_kinds_solve_with_the_preset_of_their_command(kind):
    command = KIND_PRESET[kind]
    assert point_solver_settings(kind, {}) == api.solver_settings(None, command)
    defaults = {p.name: p.default for p in get_kind(kind).params() if p.name.startswith("solver_")}
    preset = dataclasses.asdict(SolverSettings.preset(SOLVER_PRESET[command]))
    assert defaults and all(preset[k[len("solver_"):]] == v for k, v in defaults.items())
    # a setting at the preset's value is not part of the key; another one is, and is used
    base = {"omega": 0.3, **({"branch": "semantic"} if kind != "transition" else {})}
    at_preset = get_kind(kind).normalize({**base, "solver_order": preset["order"]})
    assert "solver_order" not in at_preset
    other = get_kind(kind).normalize({**base, "solver_order": preset["order"] + 1})
    assert other["solver_order"] == preset["order"] + 1
    assert point_solver_settings(kind, other).order == preset["order"] + 1


@pytest.mark.parametrize("response", ["semantic-start", "positional-start"])
def test_a_one_start_theory_point_has_the_settings_of_solve(response):
    """A one-start response runs on one rule in the sweep kind as in ``attnphase solve``."""
    from attnphase.cli.theory_cmds import settings_from_args

    args = build_parser().parse_args(["solve", "--alpha", "1", "--response", response])
    branch = response.split("-")[0]
    params = get_kind("theory").normalize({"alpha": 1.0, "branch": branch, "solver_response": response})
    assert point_solver_settings("theory", params) == settings_from_args(args)
    assert settings_from_args(args).refine_order == 0


def test_the_library_functions_default_to_the_presets_of_their_commands():
    assert api.DEFAULT_PRESET is SOLVER_PRESET
    for command in ("solve", "transition", "curves", "phase-diagram"):
        assert api.solver_settings(None, command) == SolverSettings.preset(SOLVER_PRESET[command])
    parser = build_parser()
    for command in ("solve", "transition", "curves"):
        args = parser.parse_args([command, *(["--alpha", "1"] if command == "solve" else [])])
        assert args.preset == SOLVER_PRESET[command], command


def test_the_start_grid_is_read_from_its_one_definition(capsys):
    from attnphase.theory import bracket

    assert bracket.START_GRID is TRANSITION_GRID is api.TRANSITION_GRID
    assert DemoSettings().theory_alpha == range_text(TRANSITION_GRID) == "0.2:2.4:12"
    from attnphase.api_sweeps import PHASE_OMEGAS

    assert DemoSettings().phase_omega == range_text(PHASE_OMEGAS)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["transition", "--help"])
    assert f"start on {range_text(TRANSITION_GRID)} and widen" in " ".join(capsys.readouterr().out.split())


def test_the_training_commands_default_to_their_library_functions_settings():
    """``simulate``, ``compare`` and ``sim-transition`` parse, with no training flag, into the
    settings their library functions use when given none."""
    from attnphase.api_sweeps import COMPARE_TRAINING
    from attnphase.cli.train_flags import train_settings
    from attnphase.sim.basins import basin_settings
    from attnphase.sim.train import TrainSettings
    from attnphase.sim.transition import DEFAULT_SETTINGS

    assert dataclasses.asdict(TrainSettings()) == dict(TRAIN_SETTINGS)
    library = {"simulate": api.SIMULATE_TRAINING, "compare": COMPARE_TRAINING, "sim-transition": DEFAULT_SETTINGS}
    parser = build_parser()
    for command, changes in library.items():
        args = parser.parse_args([command])
        assert train_settings(args) == TrainSettings(**changes) == TrainSettings(**training(command)), command
    assert basin_settings() == TrainSettings(**training("basins"))
    assert {p.name: p.default for p in get_kind("basins").params() if p.name in TRAIN_SETTINGS} == {
        k: training("basins")[k] for k in ("optimizer", "lr", "max_steps", "tol", "dtype", "device")}
    assert (DemoSettings().max_steps, DemoSettings().momentum) == (training("demo")["max_steps"],
                                                                    training("demo")["momentum"])


@pytest.mark.parametrize("literal", [r"0\.2, 2\.4, 12\b", r"0\.2:2\.4:12\b", r'"solve": "default"',
                                     r'"transition": "fast"', r'"max_steps": 4000', r'"tol": 1e-5'])
def test_each_default_is_written_once_in_the_source(literal):
    """``git grep`` finds each default once, in :mod:`attnphase.spec.defaults`: a value written
    twice would drift apart."""
    hits = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(literal, line)]
    assert len(hits) == 1 and hits[0].startswith("spec/defaults.py:"), hits


def test_simulate_takes_alpha_and_d_as_keywords_only():
    from attnphase.sim.simulate import simulate

    with pytest.raises(TypeError):
        simulate(ap.ModelSpec(), 1.0, 20)  # type: ignore[misc]
