"""Every command's JSON record says whether it worked: ``success`` (a boolean) and ``message`` (one
line), beside the numbers (``--json`` on stdout, or the record a command writes to ``--out``).
Tiny settings, and stubs of the solver where a real solve would take seconds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attnphase import api, api_sweeps
from attnphase import comparison as compare_mod
from attnphase.cli import main
from test_api_sweeps import _fake_follow, _fake_transition
from test_cli_sim import _fake_theory
from test_phase import fake_find_transition

TRAIN = ["--max-steps", "3", "--dtype", "float64"]


def _stub_transition(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(api, "find_transition_replicated",
               lambda spec, alphas, settings, **kw: _fake_transition(spec, alphas or [0.2, 2.4]))


def _stub_curves(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(api_sweeps, "follow_branch", _fake_follow)
    mp.setattr(api_sweeps, "refine_followed", lambda spec, points, settings: points)
    mp.setattr(api_sweeps, "find_transition", _fake_transition)


def _stub_phase(mp: pytest.MonkeyPatch) -> None:
    import attnphase.theory

    mp.setattr(attnphase.theory, "find_transition", fake_find_transition, raising=False)


def _stub_bayes(mp: pytest.MonkeyPatch) -> None:
    """The thresholds without the root search of ``alpha_PR`` (a second): the closed forms, and
    ``alpha_IT`` in its place."""
    from attnphase.theory import bayes as bt

    def thresholds(L: int, quad: Any = None) -> bt.BayesThresholds:
        it = bt.perfect_recovery_it(L)
        return bt.BayesThresholds(L, bt.weak_recovery_threshold(L), it, it, it, 1e-7)

    mp.setattr(bt, "thresholds", thresholds)


def _none(mp: pytest.MonkeyPatch) -> None:
    pass


#: command -> (its arguments, given the output folder; the stubs; where the record is, None for stdout;
#: whether it worked: three steps of training reach no run's gradient tolerance)
CASES: dict[str, tuple[Callable[[Path], list[str]], Callable[[pytest.MonkeyPatch], None], str | None, bool]] = {
    "solve": (lambda out: ["solve", "--alpha", "1", "--branch", "trivial", "--preset", "fast", "--order", "4",
                           "--refine-order", "0", "--json"], _none, None, True),
    "transition": (lambda out: ["transition", "--json"], _stub_transition, None, True),
    "curves": (lambda out: ["curves", "--alpha", "0.5:1.5:3", "--out", str(out)], _stub_curves, "curves.json", True),
    "simulate": (lambda out: ["simulate", "--d", "8", "--seeds", "1", *TRAIN, "--json"], _none, None, False),
    "compare": (lambda out: ["compare", "--alpha", "0.5:1:2", "--d", "8", "--seeds", "1", "--theory-points", "2",
                             *TRAIN, "--out", str(out)],
                lambda mp: mp.setattr(compare_mod, "theory_table", _fake_theory), "compare.json", False),
    "bayes": (lambda out: ["bayes", "--alpha", "0.5", "--json"], _stub_bayes, None, True),
    "phase-diagram": (lambda out: ["phase-diagram", "--omega", "0.1,0.3", "--out", str(out), "--workers", "1",
                                   "--quiet", "--json"], _stub_phase, None, True),
    "sim-transition": (lambda out: ["sim-transition", "--alpha", "0.8,1.6", "--d", "8", "--seeds", "1", *TRAIN,
                                    "--json"], _none, None, False),
    "basins": (lambda out: ["basins", "--alpha", "1", "--omega", "0.3", "--d", "8", "--seeds", "1", "--max-steps", "3",
                            "--no-theory", "--workers", "1", "--quiet", "--json", "--out", str(out)], _none, None,
               False),
}


@pytest.fixture
def no_figures(monkeypatch):
    """The figures are made but not written (the files are the business of the commands' own tests)."""
    from attnphase.cli import basins_cmds, extension_cmds, sim_cmds, sweep_cmds, theory_cmds

    for module in (basins_cmds, extension_cmds, sim_cmds, sweep_cmds, theory_cmds):
        monkeypatch.setattr(module, "save_figure", lambda fig, folder, stem, dpi=150: [folder / f"{stem}.png"])


@pytest.mark.parametrize("command", sorted(CASES))
def test_every_record_says_whether_it_worked(command, tmp_path, monkeypatch, capsys, no_figures):
    argv, stub, where, worked = CASES[command]
    stub(monkeypatch)
    out = tmp_path / "out"
    assert main(argv(out)) == 0
    text = capsys.readouterr().out if where is None else (out / where).read_text()
    record: dict[str, Any] = json.loads(text)
    assert isinstance(record["success"], bool) and record["success"] is worked
    assert isinstance(record["message"], str) and record["message"] and "\n" not in record["message"]
    if not worked:  # (the message says why)
        assert "met the gradient tolerance" in record["message"] or "converged" in record["message"]
