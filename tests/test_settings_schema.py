"""The solver's and the simulator's settings are described once (:mod:`attnphase.spec.schema`):
every field has a schema entry, the schema makes the commands' flags and ``--solver`` / ``--train``
items and the sweep kinds' parameters, and a one-start response's preset is what the command line
builds. All cheap: nothing is solved or trained here."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from attnphase.cli import build_parser, main
from attnphase.cli.common import SOLVER, TRAINING
from attnphase.cli.theory_cmds import settings_from_args
from attnphase.cli.train_flags import train_settings
from attnphase.spec.defaults import ONE_START_SETTINGS, SOLVER_PRESET, training
from attnphase.spec.schema import SCHEMA_KEY, FieldInfo
from attnphase.spec.training import TrainSettings, train_changes, train_parameters
from attnphase.sweeps.grid import fixed_from_items
from attnphase.sweeps.kinds import KIND_PRESET, get_kind, point_solver_settings
from attnphase.theory import SolverSettings
from attnphase.theory.responses import ONE_START
from attnphase.theory.settings import solver_changes, solver_parameters

THEORY_COMMANDS = ("solve", "transition", "curves")
TRAINING_COMMANDS = ("simulate", "compare", "sim-transition")


def _flags(parser: argparse.ArgumentParser, title: str) -> dict[str, str]:
    """Option string -> dest of every flag in the argument group ``title`` of ``parser``."""
    return {a.option_strings[0]: a.dest for g in parser._action_groups if g.title == title
            for a in g._group_actions if a.option_strings}


def _sub(name: str) -> argparse.ArgumentParser:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices[name]


@pytest.mark.parametrize(("cls", "group"), [(SolverSettings, "solver"), (TrainSettings, "training")])
def test_every_settings_field_has_a_schema_entry(cls, group):
    fields = dataclasses.fields(cls)
    assert all(isinstance(f.metadata.get(SCHEMA_KEY), FieldInfo) for f in fields)
    params = solver_parameters() if cls is SolverSettings else train_parameters()
    assert [p.name for p in params] == [f.name for f in fields]
    assert {p.group for p in params} == {group}
    assert all(p.default == f.default for p, f in zip(params, fields, strict=True))


@pytest.mark.parametrize("command", THEORY_COMMANDS)
def test_the_solver_flags_are_the_schemas_common_settings(command):
    """Each common setting is a flag of the command (``target_error``: ``solve``'s only); every
    setting, common or rare, is a ``--solver`` name, and the help lists the rare ones."""
    parser = _sub(command)
    flags = _flags(parser, SOLVER)
    common = {p.flag: p.name for p in solver_parameters() if not p.info.rare
              and (command == "solve" or p.name != "target_error")}
    assert {f: d for f, d in flags.items() if f not in ("--preset", "--solver")} == common
    assert {"--preset", "--solver"} <= set(flags)
    (solver,) = [a for a in parser._actions if "--solver" in a.option_strings]
    rare = [p.name for p in solver_parameters() if p.info.rare]
    assert rare and all(f"{name} (" in solver.help for name in rare)
    assert set(solver_changes([f"{p.name}={p.text_default or 'auto'}" for p in solver_parameters()
                               if p.name != "fine_teacher_scale"])) == {p.name for p in solver_parameters()} - {
        "fine_teacher_scale"}


@pytest.mark.parametrize("command", TRAINING_COMMANDS)
def test_the_training_flags_are_the_schemas_common_settings(command):
    parser = _sub(command)
    flags = _flags(parser, TRAINING)
    common = {p.flag: p.name for p in train_parameters() if not p.info.rare}
    assert {f: d for f, d in flags.items() if f not in ("--train", "--threads")} == common
    (train,) = [a for a in parser._actions if "--train" in a.option_strings]
    assert all(f"{p.name} (" in train.help for p in train_parameters() if p.info.rare)
    args = build_parser().parse_args([command, "--train", "grad=autograd", "--train", "betas=0.8,0.99",
                                      "--lr", "0.05"])
    assert train_settings(args) == TrainSettings(**{**training(command), "grad": "autograd",
                                                     "betas": (0.8, 0.99), "lr": 0.05})


@pytest.mark.parametrize("argv", [
    ["solve", "--alpha", "1", "--solver", "bogus=1"],
    ["solve", "--alpha", "1", "--solver", "order=x"],
    ["transition", "--solver", "mirror=maybe"],
    ["solve", "--alpha", "1", "--solver", "max_iter"],
    ["solve", "--alpha", "1", "--order", "9", "--solver", "order=10"],
    ["solve", "--alpha", "1", "--solver", "damping=1"],
])
def test_a_bad_solver_item_exits_2_with_one_line(argv, capsys):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"attnphase {argv[0]}: error:")


def test_an_unknown_setting_lists_the_known_names():
    with pytest.raises(ValueError, match="unknown --solver setting 'bogus'; known: method, order,") as exc:
        solver_changes(["bogus=1"])
    assert all(p.name in str(exc.value) for p in solver_parameters())
    with pytest.raises(ValueError, match="unknown --train setting 'steps'; known: optimizer, lr,"):
        train_changes(["steps=3"])
    with pytest.raises(ValueError, match="--train betas must be a number"):
        train_changes(["betas=0.9,x"])
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        TrainSettings(betas=(0.9, 1.0))


def test_solver_values_are_read_and_checked_by_the_schema():
    got = solver_changes(["mirror=off", "fine_teacher_scale=auto", "warmup-order=none", "max_iter=50",
                          "tol=1e-7", "method=gh"])
    assert got == {"mirror": False, "fine_teacher_scale": None, "warmup_order": None, "max_iter": 50,
                   "tol": 1e-7, "method": "gh"}
    assert type(got["tol"]) is float and type(got["max_iter"]) is int
    for bad, match in (("tol=1", r"tol must lie in \(0, 1\), got 1.0"), ("replicas=0", "replicas must be >= 1"),
                       ("response=x", "unknown response 'x'"), ("fine_teacher_scale=0.5", r"must lie in \[1, 3\]")):
        with pytest.raises(ValueError, match=match):
            solver_changes([bad])
    with pytest.raises(ValueError, match="noise_tol must lie in"):  # (a rule across fields)
        SolverSettings(tol=1e-4, noise_tol=1e-5)


@pytest.mark.parametrize("response", ONE_START)
@pytest.mark.parametrize("command", THEORY_COMMANDS)
def test_a_one_start_preset_is_what_the_command_line_builds(command, response):
    """``SolverSettings.preset(name, response=...)`` runs a one-start response on one rule, as the
    command does; a setting given explicitly still wins."""
    argv = [command, *(["--alpha", "1"] if command == "solve" else []), "--response", response]
    cli = settings_from_args(build_parser().parse_args(argv))
    lib = SolverSettings.preset(SOLVER_PRESET[command], response=response)
    assert cli == lib
    assert {k: getattr(lib, k) for k in ONE_START_SETTINGS} == dict(ONE_START_SETTINGS)
    cli = settings_from_args(build_parser().parse_args([*argv, "--order", "9"]))
    assert cli == SolverSettings.preset(SOLVER_PRESET[command], response=response, order=9) and cli.order == 9


@pytest.mark.parametrize("kind", sorted(KIND_PRESET))
def test_a_sweeps_solver_items_are_the_commands(kind):
    """The theory sweep kinds' ``solver_<name>`` parameters are the schema's fields, and
    ``--solver NAME=VALUE`` reads the same names to the same settings there as on a command."""
    names = {p.name[len("solver_"):] for p in get_kind(kind).params() if p.name.startswith("solver_")}
    assert names == {p.name for p in solver_parameters()}
    items = ["mirror=off", "fine_teacher_scale=1.2", "max_iter=50", "replicas=2"]
    swept = fixed_from_items(kind, items, prefix="solver_")
    command = KIND_PRESET[kind]
    assert point_solver_settings(kind, swept) == SolverSettings.preset(SOLVER_PRESET[command],
                                                                       **solver_changes(items))
    with pytest.raises(ValueError, match="unknown setting 'bogus'.*known: method, order,"):
        fixed_from_items(kind, ["bogus=1"], prefix="solver_")


def test_the_simulation_kinds_training_parameters_are_the_schemas():
    names = {p.name[len("train_"):] for p in get_kind("simulation").params() if p.name.startswith("train_")}
    assert names == {p.name for p in train_parameters()} - {"device", "log_every"}
    point = get_kind("simulation").normalize({"train_betas": "0.8,0.99", "train_lr": "auto"})
    assert point["train_betas"] == (0.8, 0.99) and "train_lr" not in point
