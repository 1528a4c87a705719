"""Phase diagrams through the sweep machinery, with stand-in physics.

The theory and the simulator are replaced by cheap closed forms (same API), so these tests
check the plumbing: one stored point per omega / grid point, the aggregation (semantic minus
positional, mean over seeds, best start), the files, the JSON, and reruns that compute nothing.
"""

import dataclasses
import json
import sys
import types

import numpy as np
import pandas as pd
import pytest

import attnphase.cli.theory_cmds  # noqa: F401  (imported before fake_physics patches attnphase.theory, so its names stay real)
import attnphase.theory
from attnphase.cli import main
from attnphase.sweeps import ResultStore


@dataclasses.dataclass(frozen=True)
class FakeTransition:
    omega: float
    sigma: float = 0.5

    def to_dict(self):
        w = self.omega
        # (no crossing above sigma = 1, with its reason)
        if self.sigma > 1:
            return {"alpha_c": None, "alpha_l": None, "spinodals": {}, "linear_test_error": 0.002,
                    "reason": "no transition: the positional branch is lower", "diagnostics": {"calls": 1}}
        return {"alpha_c": 1.0 + 2 * w + (self.sigma - 0.5), "alpha_l": 1.2 + 2 * w,
                "spinodals": {"semantic": 0.8 + w, "positional": 1.5 + 2 * w},
                "linear_test_error": 0.002, "diagnostics": {"calls": 1}}


def fake_find_transition(spec, settings=None, widen=False):
    assert widen  # (a phase diagram's transitions widen their alpha range)
    return FakeTransition(spec.omega, spec.sigma)


@dataclasses.dataclass(frozen=True)
class FakeBranchPoint:
    alpha: float
    branch: str
    exists: bool = True

    @property
    def train_loss(self):
        return 0.002 + (0.001 if self.branch == "semantic" else 0.0005) / self.alpha

    @property
    def test_error(self):
        return self.train_loss + 0.0005

    theta = property(lambda s: 0.3 if s.branch == "semantic" else 0.0)
    m = property(lambda s: 0.0 if s.branch == "semantic" else 0.25)
    q = property(lambda s: 0.2)


def fake_follow_branch(spec, alphas, branch, settings=None):
    return [FakeBranchPoint(a, branch, exists=not (branch == "semantic" and a < 0.5))
            for a in alphas]


def fake_alpha_c(w):
    return 1.0 + 2 * w


def _fake_sim_module():
    mod = types.ModuleType("attnphase.sim")

    @dataclasses.dataclass(frozen=True)
    class TrainSettings:
        optimizer: str = "gd"
        lr: float | None = None
        max_steps: int = 5000
        tol: float = 1e-6

        @property
        def learning_rate(self):
            return 0.15 if self.lr is None else self.lr

    @dataclasses.dataclass(frozen=True)
    class Run:
        data: dict

        def to_dict(self):
            return dict(self.data)

    def simulate(spec, *, alpha, d, seeds, inits, settings):
        (seed,), (init,) = seeds, inits
        # semantic minus positional training loss = (alpha_c - alpha) / 100 + seed / 1000
        sem = init == "semantic"
        loss = 0.01 + ((fake_alpha_c(spec.omega) - alpha) / 100 + seed / 1000 if sem else 0.0)
        run = {"seed": seed, "init": init, "m": 0.0 if sem else 0.25, "theta": 0.4 if sem else 0,
               "q": 0.2, "train_loss": loss, "test_error": 0.001 if sem else 0.003,
               "linear_test_error": 0.002, "steps": 10, "converged": True, "stop": "tol",
               "grad_norm": 1e-7, "seconds": 0.0, "branch": init, "overlaps": {}}
        return types.SimpleNamespace(runs=(Run(run),), n=int(round(alpha * d)), n_test=100)

    mod.TrainSettings = TrainSettings
    mod.simulate = simulate
    return mod


@pytest.fixture
def fake_physics(monkeypatch):
    monkeypatch.setattr(attnphase.theory, "find_transition", fake_find_transition, raising=False)
    monkeypatch.setattr(attnphase.theory, "follow_branch", fake_follow_branch, raising=False)
    monkeypatch.setitem(sys.modules, "attnphase.sim", _fake_sim_module())


def test_phase_diagram_json_files_and_heatmaps(tmp_path, capsys, fake_physics):
    out = tmp_path / "out"
    args = ["phase-diagram", "--omega", "0:0.4:5", "--out", str(out), "--workers", "1",
            "--json", "--simulate", "--alpha", "0.5:2.5:5", "--d", "20", "--seeds", "2",
            "--max-steps", "50"]
    assert main(args) == 0
    cap = capsys.readouterr()
    data = json.loads(cap.out)
    w = np.linspace(0, 0.4, 5)
    np.testing.assert_allclose(data["omega"], w)
    np.testing.assert_allclose(data["alpha_c"], 1 + 2 * w)
    np.testing.assert_allclose(data["alpha_l"], 1.2 + 2 * w)
    np.testing.assert_allclose(data["spinodals"]["semantic"], 0.8 + w)
    assert set(data["spinodals"]) == {"semantic", "positional"}
    for name in ("phase_diagram.png", "phase_diagram.pdf", "phase_lines.csv",
                 "phase_heatmaps.png", "phase_heatmaps.pdf", "phase_heatmaps.csv"):
        assert (out / name).stat().st_size > 0, name
    hm = pd.read_csv(out / "phase_heatmaps.csv")
    assert len(hm) == 25 and (hm.n_seeds == 2).all()
    # semantic minus positional start, mean over seeds 0 and 1
    d0 = (1 + 2 * hm.omega - hm.alpha) / 100
    np.testing.assert_allclose(hm.train_diff, d0 + 0.0005, atol=1e-12)
    # standard error over the two seeds (differences d0 and d0 + 0.001); test-error difference
    np.testing.assert_allclose(hm.train_diff_se, 0.0005, atol=1e-12)
    np.testing.assert_allclose(hm.test_diff, 0.001 - 0.003, atol=1e-12)
    np.testing.assert_allclose(hm.test_diff_se, 0.0, atol=1e-12)
    # eps_g_lin - eps_g of the start with the lower training loss, per seed, then averaged
    gain = [np.where(d0 + s / 1000 <= 0, 0.001, -0.001) for s in (0, 1)]
    np.testing.assert_allclose(hm.gen_gain, np.mean(gain, axis=0), atol=1e-12)
    assert (hm.gen_gain > 0).any() and (hm.gen_gain < 0).any()
    with ResultStore(out / "results.sqlite") as st:
        assert st.counts() == {("transition", "ok"): 5, ("simulation", "ok"): 100}
        row = next(st.records("simulation"))
        assert json.loads(row.params)["train_max_steps"] == 50
    # a second run computes nothing
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "5 points, 5 stored, 0 to compute" in err
    assert "100 points, 100 stored, 0 to compute" in err


def test_phase_diagram_records_failures(tmp_path, capsys, monkeypatch):
    def broken(spec, settings=None, widen=False):
        if spec.omega > 0.2:
            raise RuntimeError("no crossing found")
        return FakeTransition(spec.omega)

    monkeypatch.setattr(attnphase.theory, "find_transition", broken, raising=False)
    assert main(["phase-diagram", "--omega", "0,0.1,0.3", "--out", str(tmp_path), "--workers",
                 "1", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["alpha_c"][:2] == [1.0, 1.2] and data["alpha_c"][2] is None
    assert "no crossing found" in data["errors"][2]


def test_phase_diagram_along_sigma_and_lam(tmp_path, capsys, fake_physics):
    """The same diagram along another model parameter: stored, resumable, with the reason where
    there is no transition; omega fixed."""
    out = tmp_path / "out"
    args = ["phase-diagram", "--sigma", "0.3,0.7,1.2", "--omega", "0.2", "--out", str(out), "--workers", "1",
            "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["axis"] == "sigma" and data["sigma"] == [0.3, 0.7, 1.2] and "omega" not in data
    np.testing.assert_allclose(data["alpha_c"][:2], [1.4 - 0.2, 1.4 + 0.2])
    assert data["alpha_c"][2] is None and data["reasons"] == [None, None, "no transition: the positional branch is lower"]
    lines = pd.read_csv(out / "phase_lines.csv")
    assert list(lines.sigma) == [0.3, 0.7, 1.2] and lines.reason.isna().tolist() == [True, True, False]
    with ResultStore(out / "results.sqlite") as st:
        assert st.counts() == {("transition", "ok"): 3}
        assert {json.loads(r.params)["omega"] for r in st.records("transition")} == {0.2}
    assert main(args[:-1]) == 0  # (again: nothing computed; one line per value)
    cap = capsys.readouterr()
    assert "3 points, 3 stored, 0 to compute" in cap.err
    assert "sigma = 1.2: no transition: the positional branch is lower" in cap.out

    import attnphase as ap

    res = ap.phase_diagram(0.2, lams=[1e-3, 1e-2], store=tmp_path / "lam.sqlite", workers=1)
    assert res.axis == "lam" and res.values == (1e-3, 1e-2) and res.success
    assert list(res.to_frame().lam) == [1e-3, 1e-2] and res.to_dict()["lam"] == [1e-3, 1e-2]
    with pytest.raises(ValueError, match="runs along lam"):
        _ = res.omegas
    assert res.plot().axes[0].get_yscale() == "log"


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--sigma", "0.3,0.5", "--lam", "0.01,0.1"], "one parameter"),
        (["--sigma", "0.3,0.5", "--omega", "0.1,0.2"], "give one --omega"),
        (["--sigma", "0.3:-1:3"], "sigma"),
        (["--omega", "0:0.4:0"], "empty"),
        (["--omega", "0,1.5"], "omega"),
        (["--sigma", "-1"], "sigma"),
        (["--simulate", "--alpha", "0:1:3"], "alpha"),
        (["--solver", "nonsense=1"], "unknown setting 'nonsense' for kind 'transition'; known: method, order"),
        (["--solver", "order=4,5"], "one value"),
    ],
)
def test_phase_diagram_bad_input(tmp_path, capsys, args, msg):
    assert main(["phase-diagram", "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]


def test_plots_survive_missing_data():
    """Every transition failed / no simulation: figures are still drawn, without warnings."""
    from attnphase.plots.phase import (
        plot_curves_with_points,
        plot_phase_heatmaps,
        plot_phase_lines,
    )
    from attnphase.sweeps.phase import HeatMaps, PhaseLines

    lines = PhaseLines((0.0, 0.1), (None, None), (None, None), {}, (None, None), ("e", "e"))
    assert plot_phase_lines(lines).axes
    nan = np.full((2, 1), np.nan)
    maps = HeatMaps((0.0, 0.1), (1.0,), 10, (0,), nan, nan, np.zeros((2, 1), int))
    assert len(plot_phase_heatmaps(maps, lines).axes) == 4  # two panels, two colour bars
    assert len(plot_curves_with_points({}, {}).axes) == 4


def test_one_palette_for_the_project():
    """The branch colours of the phase plots are those of the curves figure."""
    from attnphase.plots import curves
    from attnphase.plots.style import BRANCH_COLORS, branch_color

    for name, colour in curves.COLORS.items():
        assert BRANCH_COLORS[name].lower() == colour.lower()
    with pytest.raises(ValueError, match="no colour"):
        branch_color("purple-ish")


@pytest.mark.parametrize("model,label", [({"rank": 1}, "semantic"), ({"rank": 2}, "mixed"),
                                         ({"heads": 2}, "specialised")])
def test_phase_lines_label_the_semantic_side(model, label):
    """Right of alpha_c the figure names the branch that find_transition compared: the mixed one
    for tied rank >= 2, the specialised one for two heads."""
    from attnphase.plots.phase import plot_phase_lines
    from attnphase.sweeps.phase import PhaseLines

    lines = PhaseLines((0.2, 0.4), (0.9, 1.1), (1.2, 1.5), {}, (0.002, 0.0015), (None, None),
                       params={**model, "variant": "tied"})
    texts = [t.get_text() for t in plot_phase_lines(lines).axes[0].texts]
    assert label in texts and "positional" in texts


def test_null_alpha_c_always_comes_with_a_reason():
    """A grid without a crossing gives alpha_c = None with the note saying so, also when another
    note (here: the mixed branch is the semantic side at rank 2) came first; before, any earlier
    note suppressed it."""
    from attnphase import ModelSpec
    from attnphase.theory import SolverSettings
    from attnphase.theory.transition import find_transition

    s = SolverSettings(order=7, tol=1e-6, noise_tol=1e-4, replicas=1, warmup_order=None)
    tr = find_transition(ModelSpec(omega=0.3, rank=2), alphas=[1.6, 1.8], settings=s)
    assert tr.alpha_c is None
    assert any("mixed" in n for n in tr.notes)
    assert any(n.startswith("no crossing of the training errors on the alpha grid") for n in tr.notes)


@pytest.mark.parametrize("grid, hint", [((0.2, 0.5, 0.8), "the positional branch is still the lower at the grid's "
                                         "end (alpha = 0.8): extend --alpha upwards"),
                                        ((2.0, 2.5, 3.0), "the semantic branch is already the lower at the grid's "
                                         "start (alpha = 2): extend --alpha downwards")])
def test_a_grid_without_a_crossing_says_on_which_side_the_crossing_lies(grid, hint):
    """The reference case's alpha_c (about 1.1 at omega = 0.3) lies above the first grid and below
    the second: each note says which way to extend the grid."""
    from attnphase import ModelSpec
    from attnphase.theory import SolverSettings
    from attnphase.theory.transition import find_transition

    tr = find_transition(ModelSpec(omega=0.3), alphas=grid, settings=SolverSettings.preset("fast", order=7, refine_order=8))
    assert tr.alpha_c is None
    assert f"no crossing of the training errors on the alpha grid; {hint}" in tr.notes
