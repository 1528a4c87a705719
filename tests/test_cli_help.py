"""``--help`` in sections: every command that builds a model shows its flags in argument groups
(the model, each extension, solver, training, output, backend), read here from the parsers' groups
rather than from the printed text."""

from __future__ import annotations

import argparse

import pytest

from attnphase.cli import build_parser
from attnphase.cli.common import BACKEND, GROUP_ORDER, OUTPUT, SOLVER, TRAINING
from attnphase.spec import model_parameters
from attnphase.spec.schema import GROUPS

#: The flags that belong to a shared group wherever a command has them.
OUTPUT_FLAGS = {"--json", "--out", "--quiet", "--progress", "--no-figures"}
SOLVER_FLAGS = {"--preset", "--order", "--refine-order", "--response", "--replicas", "--target-error",
                "--solver", "--theory-order", "--theory-points", "--no-theory"}
TRAINING_FLAGS = {"--optimizer", "--lr", "--momentum", "--dtype", "--threads", "--train"}
BACKEND_FLAGS = {"--workers", "--scheduler", "--connect-timeout", "--recompute-stale"}
CORE = ("omega", "sigma", "lam", "L", "rank", "teacher_rank")
#: The commands whose ``--omega`` is their own (a grid), not the model's.
OWN_OMEGA = {"basins", "phase-diagram"}


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of every command and sub-command."""
    out = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out.append((f"{prefix}{name}", sub))
                    walk(f"{prefix}{name} ", sub)

    walk("", build_parser())
    return out


COMMANDS = dict(_commands())


def _group_of(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """Option string (the first) -> title of the argument group that shows it."""
    return {a.option_strings[0]: g.title for g in parser._action_groups for a in g._group_actions
            if a.option_strings}


def test_solve_help_is_grouped():
    parser = COMMANDS["solve"]
    titles = [g.title for g in parser._action_groups if g._group_actions]
    model, mixture, cross, attention, value = (GROUPS[k][0] for k in ("model", "mixture", "cross", "attention", "value"))
    assert titles[-7:] == [model, mixture, cross, attention, value, SOLVER, OUTPUT]
    where = _group_of(parser)
    flags = {p.name: p.flag for p in model_parameters()}
    assert {where[flags[name]] for name in CORE} == {model}
    assert where["--alpha"] == parser._optionals.title  # (the command's own flag comes first)
    assert where["--mixture-sep"] == mixture and where["--L-keys"] == cross and where["--value-gain"] == value
    assert where["--heads"] == where["--activation"] == attention
    assert where["--order"] == where["--target-error"] == SOLVER and where["--json"] == OUTPUT
    # every model group in the text, in this order, before the solver's
    text = parser.format_help()
    positions = [text.index(f"\n{t}:\n") for t in (model, mixture, cross, attention, value, SOLVER, OUTPUT)]
    assert positions == sorted(positions)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_in_its_group(name):
    parser = COMMANDS[name]
    where = _group_of(parser)
    generic = parser._optionals.title
    models = {p.flag: GROUPS[p.group][0] for p in model_parameters()
              if not (name in OWN_OMEGA and p.name == "omega")}
    builds_model = "--sigma" in where
    for flag, title in where.items():
        if flag in models and builds_model:
            assert title == models[flag], (flag, title)
        elif flag in OUTPUT_FLAGS:
            assert title == OUTPUT, (flag, title)
        elif flag in SOLVER_FLAGS:
            assert title == SOLVER, (flag, title)
        elif flag in BACKEND_FLAGS:
            assert title == BACKEND, (flag, title)
        elif flag in TRAINING_FLAGS and builds_model:
            assert title == TRAINING, (flag, title)
        elif flag == "--tol" and builds_model:  # (the solver's tolerance or the training's)
            assert title in (SOLVER, TRAINING), (flag, title)
    if name in OWN_OMEGA:
        assert where["--omega"] == generic
    # the shared groups are shown in one order, whatever the order the command made them in
    shown = [g.title for g in parser._action_groups if g._group_actions and g.title in GROUP_ORDER]
    assert shown == sorted(shown, key=GROUP_ORDER.index)


def test_commands_that_build_a_model():
    """The model's groups are on the commands that build a model (and ``--value-rank`` only on
    those that train)."""
    with_model = {n for n, p in COMMANDS.items() if "--sigma" in _group_of(p)}
    assert with_model == {"solve", "transition", "curves", "simulate", "compare", "sim-transition", "bayes",
                          "basins", "phase-diagram"}
    training = {n for n, p in COMMANDS.items() if _group_of(p).get("--value-rank")}
    assert training == {"simulate", "compare", "sim-transition"}
