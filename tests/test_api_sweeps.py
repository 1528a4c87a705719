"""``attnphase.curves``, ``compare`` and ``phase_diagram``: their ``to_dict()`` is the record the
commands write, their frames and figures are the commands' tables and figures, and the phase
diagram resumes from its store.

The theory is replaced by cheap stand-ins (same API) where a real solve would cost seconds: these
tests are about the plumbing between the library and the commands, which both run through the
same functions; ``test_curves_cli_and_library_agree_on_a_real_solve`` (slow) checks a real solve.
"""

from __future__ import annotations

import dataclasses
import json
import math
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

import attnphase as ap
from attnphase import api_sweeps
from attnphase import comparison as compare_mod
from attnphase.cli import main
from attnphase.comparison import COLUMNS
from attnphase.sweeps.grid import SweepSpec, fixed_from_items
from attnphase.theory import Transition
from attnphase.theory.diagnostics import ErrorEstimate, Refinement
from test_cli_sim import _fake_theory
from test_phase import fake_find_transition, fake_physics  # noqa: F401  (fixture)


@pytest.fixture
def figures(monkeypatch) -> list[tuple[str, Figure]]:
    """The figures the commands save, kept instead of written (the files are the business of
    ``test_cli_sim.py`` and ``test_phase.py``; writing them costs a second or more)."""
    from attnphase.cli import sim_cmds, sweep_cmds, theory_cmds

    kept: list[tuple[str, Figure]] = []

    def keep(fig, folder, stem, dpi=150):
        kept.append((stem, fig))
        return [folder / f"{stem}.png", folder / f"{stem}.pdf"]

    for module in (sim_cmds, sweep_cmds, theory_cmds):
        monkeypatch.setattr(module, "save_figure", keep)
    return kept


# ----------------------------------------------------------------------------- curves
@dataclasses.dataclass
class FakePoint:
    """A followed branch point: a closed form in ``alpha``; the semantic one absent below 0.8."""

    branch: str
    alpha: float

    @property
    def exists(self) -> bool:
        return not (self.branch == "semantic" and self.alpha < 0.8)

    @property
    def reason(self) -> str:
        return "ok" if self.exists else "below the spinodal"

    @property
    def error_estimate(self) -> ErrorEstimate | None:
        return ErrorEstimate({"test_error": 1e-3 * self.alpha}, "test")

    @property
    def refinement(self) -> Refinement | None:
        return Refinement(applied=self.exists)

    def summary(self) -> dict[str, Any]:
        sem = self.branch == "semantic"
        if not self.exists:
            return {"q": math.nan, "m": math.nan, "theta": math.nan, "V": math.nan, "train_loss": math.nan,
                    "test_error": math.nan, "converged": False, "iterations": 0}
        return {"q": 0.2 * self.alpha, "m": 0.0 if sem else 0.25, "theta": 0.4 if sem else 0.0, "V": 20.0,
                "train_loss": 0.002 + (0.001 if sem else 0.0005) * self.alpha,
                "test_error": 0.003 - (0.0005 * self.alpha if sem else 0.0), "converged": True, "iterations": 7}


def _fake_follow(spec, alphas, branch, settings=None, progress=None):
    out = [FakePoint(branch, float(a)) for a in alphas]
    for i in range(len(out)):
        if progress is not None:
            progress(i + 1, len(out))
    return out


def _fake_transition(spec, alphas, settings=None, branches=None):
    return Transition(alpha_c=1.1, alpha_l=1.3, spinodals={"semantic": 0.8, "positional": None},
                      linear_test_error=0.002, notes=("a note",), grid={"alpha": list(alphas)},
                      errors={"alpha_c": 0.01}, kind="discontinuous", exchange=("positional", "semantic"),
                      order_parameter={"name": "theta", "below": 0.0, "above": 0.4})


@pytest.fixture
def fake_branches(monkeypatch):
    monkeypatch.setattr(api_sweeps, "follow_branch", _fake_follow)
    monkeypatch.setattr(api_sweeps, "refine_followed", lambda spec, points, settings: points)
    monkeypatch.setattr(api_sweeps, "find_transition", _fake_transition)


GRID = [0.5, 1.0, 1.5]


def test_curves_to_dict_is_curves_json_and_its_table_is_curves_csv(tmp_path, capsys, fake_branches, figures):
    out = tmp_path / "c"
    argv = ["curves", "--omega", "0.2", "--alpha", "0.5:1.5:3", "--out", str(out)]
    assert main(argv) == 0
    assert "alpha_c = 1.1, alpha_l = 1.3" in capsys.readouterr().out
    res = ap.curves(GRID, omega=0.2)
    record = json.loads((out / "curves.json").read_text())
    assert record.pop("command") == {"program": "attnphase", "argv": argv}
    assert record == res.to_dict()
    assert list(record) == ["params", "linear_test_error", "transition", "points", "success", "message"]
    assert record["success"] is res.success is True and record["message"] == res.message
    assert record["transition"]["alpha_c"] == 1.1 and record["params"]["alpha"] == GRID
    assert record["points"]["semantic"][0]["exists"] is False and record["points"]["semantic"][0]["q"] is None
    assert (out / "curves.csv").read_text() == res.table().to_csv(index=False)
    (stem, fig), = figures
    assert stem == "curves" and isinstance(fig, Figure) and len(fig.axes) == 3
    assert res.success and res.alpha_c == 1.1 and res.alpha_l == 1.3 and res.transition is not None


def test_curves_frame_has_one_row_per_alpha_and_branch(fake_branches):
    calls: list[tuple[int, int]] = []
    res = ap.curves(GRID, omega=0.2, transition=False, progress=lambda i, n: calls.append((i, n)))
    assert calls[-1] == (6, 6) and len(calls) == 6
    df = res.to_frame()
    assert list(df.columns) == ["alpha", "branch", "exists", "q", "m", "theta", "V", "train_loss", "test_error",
                                "converged", "iterations", "refined", "test_error_rel_error", "linear_test_error"]
    assert len(df) == 2 * len(GRID) and set(df.branch) == {"semantic", "positional"}
    sem = df[df.branch == "semantic"].set_index("alpha")
    assert not sem.loc[0.5, "exists"] and math.isnan(sem.loc[0.5, "test_error"])
    assert sem.loc[1.5, "test_error"] == pytest.approx(0.003 - 0.0005 * 1.5, rel=1e-15)
    assert sem.loc[1.5, "test_error_rel_error"] == pytest.approx(1.5e-3, rel=1e-15)
    assert res.transition is None and res.alpha_c is None and "alpha_c" not in res.message
    fig = res.plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 3


class CoarsePoint(FakePoint):
    """A point whose refinement did not converge: the coarse rule's values are kept."""

    @property
    def error_estimate(self) -> ErrorEstimate | None:
        return None

    @property
    def refinement(self) -> Refinement | None:
        return Refinement(applied=False, reason="no convergence")


def test_curves_success_says_which_points_kept_the_coarse_rule(fake_branches, monkeypatch):
    monkeypatch.setattr(api_sweeps, "refine_followed", lambda spec, points, settings: [
        CoarsePoint(p.branch, p.alpha) if p.branch == "positional" and p.alpha == 1.5 else p for p in points])
    res = ap.curves(GRID, omega=0.2, transition=False)
    assert not res.success
    assert "the coarse rule's values (the refinement did not converge): positional at alpha = 1.5" in res.message
    df = res.to_frame().set_index(["branch", "alpha"])
    assert not df.loc[("positional", 1.5), "refined"] and df.loc[("positional", 1.0), "refined"]
    assert math.isnan(df.loc[("positional", 1.5), "test_error_rel_error"])
    assert ap.curves(GRID, omega=0.2, transition=False, settings=ap.SolverSettings.preset("fast", refine_order=0)).success


def test_curves_result_is_frozen_with_a_short_repr(fake_branches):
    res = ap.curves(GRID, omega=0.2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.alpha_c = 2.0  # type: ignore[misc]
    assert isinstance(res.points, MappingProxyType) and isinstance(res.points["semantic"], tuple)
    assert len(repr(res)) < 400 and "omega = 0.2" in repr(res)


def test_the_sweep_functions_refuse_bad_input_with_one_line():
    cases = [
        (lambda: ap.curves(GRID, value="gain"), "fixed value gain"),
        (lambda: ap.curves([0.0, 1.0]), "alpha"),
        (lambda: ap.curves(GRID, settings=3), "settings must be"),
        (lambda: ap.curves(GRID, nonsense=1), "unknown model parameter"),
        (lambda: ap.compare(1.0, 20, rank=2, teacher_rank=2), "rank 1"),
        (lambda: ap.compare(1.0, 1), "d must be"),
        (lambda: ap.compare(1.0, 20, theory_points=1), "theory_points"),
        (lambda: ap.compare(1.0, 20, learning_rate=1), "unknown parameter"),
        (lambda: ap.phase_diagram([0.1], omega=0.3), "omegas"),
        (lambda: ap.phase_diagram([0.1], settings=ap.SolverSettings.preset("fast", mirror=True)), "mirror"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as err:
            call()
        assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow  # (the branches followed twice on two alphas, refined, and a figure: ~15 s of CPU)
def test_curves_cli_and_library_agree_on_a_real_solve(tmp_path, capsys):
    out = tmp_path / "c"
    flags = ["--order", "6", "--refine-order", "7"]
    assert main(["curves", "--omega", "0.3", "--alpha", "1:1.6:2", *flags, "--out", str(out)]) == 0
    res = ap.curves([1.0, 1.6], omega=0.3, settings=ap.SolverSettings.preset("fast", order=6, refine_order=7))
    record = json.loads((out / "curves.json").read_text())
    record.pop("command")
    assert record == res.to_dict()
    assert (out / "curves.csv").read_text() == res.table().to_csv(index=False)
    assert res.to_frame()["exists"].all() and res.alpha_c is not None and 1.0 < res.alpha_c < 1.6


# ----------------------------------------------------------------------------- compare
TRAIN = ["--max-steps", "5", "--dtype", "float64"]


def test_compare_to_dict_is_compare_json_and_its_frame_compare_csv(tmp_path, monkeypatch, capsys, figures):
    monkeypatch.setattr(compare_mod, "theory_table", _fake_theory)
    out = tmp_path / "cmp"
    assert main(["compare", "--omega", "0.3", "--alpha", "0.5:1:2", "--d", "10", "--seeds", "2",
                 "--theory-points", "3", *TRAIN, "--out", str(out)]) == 0
    res = ap.compare([0.5, 1.0], 10, seeds=2, theory_points=3, omega=0.3, max_steps=5, dtype="float64")
    record = json.loads((out / "compare.json").read_text())
    assert set(record.pop("command")) == {"program", "argv", "torch_threads"}
    assert record == res.to_dict() and list(record) == ["params", "rows", "success", "message"]
    assert record["success"] is res.success and record["message"] == res.message
    frame = res.to_frame()
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 2 * 3 + 2 * 2 * 3  # theory: 2 branches x 3 alphas; runs: alphas x seeds x starts
    assert (out / "compare.csv").read_text() == frame.to_csv(index=False)
    assert res.theory_alphas == (0.5, 0.75, 1.0) and res.seeds == (0, 1)
    summary = res.summary()
    assert len(summary) == 2 * 3 and (summary["runs"] == 2).all()
    sim = frame[frame.source == "simulation"]
    first = sim[(sim.alpha == 0.5) & (sim.kind == "random")]["test_error"]
    row = summary[(summary.alpha == 0.5) & (summary.start == "random")].iloc[0]
    assert row["test_error_mean"] == pytest.approx(first.mean(), rel=1e-12)
    assert math.isnan(row["theory_test_error"])  # (no theory branch named random)
    sem = summary[(summary.alpha == 1.0) & (summary.start == "semantic")].iloc[0]
    assert sem["theory_test_error"] == pytest.approx(0.003 - 0.0005, rel=1e-12)
    assert [stem for stem, _ in figures] == ["compare"] and isinstance(res.plot(), Figure)
    assert res.success == bool(sim["exists"].all())
    capsys.readouterr()
    assert main(["rerun", str(out / "compare.json"), "--check"]) == 0  # the record runs again, same numbers
    assert "agree to 1e-09 relative" in capsys.readouterr().out


def test_compare_at_one_alpha_follows_the_theory_there_once():
    assert compare_mod.theory_grid([1.0], 12) == [1.0]
    assert compare_mod.theory_grid([0.5, 1.5], 3) == [0.5, 1.0, 1.5]


# ----------------------------------------------------------------------------- phase diagram
def test_phase_diagram_resumes_from_its_store(tmp_path, monkeypatch, fake_physics):  # noqa: F811
    calls: list[float] = []

    def counting(spec, settings=None, widen=False):
        calls.append(spec.omega)
        return fake_find_transition(spec, settings, widen)

    import attnphase.theory

    monkeypatch.setattr(attnphase.theory, "find_transition", counting, raising=False)
    store = tmp_path / "phase.sqlite"
    first = ap.phase_diagram([0.1, 0.2, 0.3], store=store, workers=1)
    assert sorted(calls) == [0.1, 0.2, 0.3] and first.computed == 3 and first.stored == 0
    again = ap.phase_diagram([0.1, 0.2, 0.3], store=store, workers=1)
    assert sorted(calls) == [0.1, 0.2, 0.3] and again.computed == 0 and again.stored == 3  # nothing computed
    lines = {k: v for k, v in first.to_dict().items() if k != "message"}  # (the message counts the computed)
    assert {k: v for k, v in again.to_dict().items() if k != "message"} == lines and again.store == str(store)
    assert "3 points computed, 0 found" in first.message and "0 points computed, 3 found" in again.message
    np.testing.assert_allclose(again.alpha_c, [1.2, 1.4, 1.6])
    assert again.success and "alpha_c located at 3" in again.message
    frame = again.to_frame()
    assert len(frame) == 3 and list(frame.omega) == [0.1, 0.2, 0.3]
    assert {"alpha_c", "alpha_l", "spinodal_semantic", "spinodal_positional", "eps_g_lin"} <= set(frame.columns)
    assert isinstance(again.plot(), Figure)
    with pytest.raises(ValueError, match="simulate=True"):
        again.to_frame("heatmaps")
    temporary = ap.phase_diagram([0.1], workers=1)  # (no store: a temporary one)
    assert temporary.store is None and temporary.computed == 1


def test_phase_diagram_to_dict_is_what_the_command_prints(tmp_path, capsys, fake_physics, figures):  # noqa: F811
    out = tmp_path / "ph"
    assert main(["phase-diagram", "--omega", "0.1:0.3:2", "--out", str(out), "--workers", "1", "--json",
                 "--quiet", "--simulate", "--alpha", "0.5:1:2", "--d", "10", "--seeds", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    files = printed.pop("files")
    res = ap.phase_diagram([0.1, 0.3], store=out / "results.sqlite", workers=1, simulate=True, alphas=[0.5, 1.0],
                           d=10, seeds=1)
    assert res.computed == 0  # (the command's store: every point is there)
    assert list(printed) == list(res.to_dict()) and printed["success"] is res.success
    # (the same lines; the messages differ in what was computed: everything by the command, nothing here)
    assert {k: v for k, v in printed.items() if k != "message"} == {
        k: v for k, v in res.to_dict().items() if k != "message"}
    assert "10 points computed, 0 found" in printed["message"] and "0 points computed, 10 found" in res.message
    assert str(out / "phase_heatmaps.csv") in files
    maps = res.to_frame("heatmaps")
    assert len(maps) == 2 * 2 and list(maps.columns[:3]) == ["omega", "alpha", "d"]
    assert (out / "phase_heatmaps.csv").read_text() == maps.to_csv(index=False)
    assert (out / "phase_lines.csv").read_text() == res.to_frame().to_csv(index=False)
    assert [stem for stem, _ in figures] == ["phase_diagram", "phase_heatmaps"]
    assert isinstance(res.plot("heatmaps"), Figure)


def test_phase_diagram_settings_give_the_keys_of_the_commands_solver_items():
    """The fast preset as ``SolverSettings`` is stored under the same keys as the ``--solver``
    items of ``phase-diagram`` and ``demo`` (``fast_solver()``), so stores made by either are
    read by the other; a changed setting gives other keys."""
    from attnphase.cli.sweep_cmds import fast_solver

    def keys(solver: dict[str, Any]) -> list[str]:
        return [p.key for p in SweepSpec("transition", (("omega", (0.1, 0.2)),), {"L": 2, **solver}).points()]

    cli = keys(fixed_from_items("transition", fast_solver(), prefix="solver_"))
    assert keys(api_sweeps.solver_params(ap.SolverSettings.preset("fast"))) == cli
    assert keys(api_sweeps.solver_params(ap.SolverSettings.preset("fast", order=9))) != cli
