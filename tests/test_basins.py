"""Basin maps: runs from random starts (attnphase.sim.basins), the ``basins`` sweep kind, the map
gathered from a store, the global minimum, the figures and ``attnphase basins``.

The simulator is real at tiny ``d`` and few steps; the theory is replaced by closed forms (same
API) where the command needs it, so that these tests check the plumbing in a few seconds.
"""

import dataclasses
import json

import numpy as np
import pytest

import attnphase.theory
from attnphase.cli import main
from attnphase.sim import simulate
from attnphase.sim.basins import BASIN_STATES, basin_settings, basin_states, random_starts, train_basins
from attnphase.sim.data import make_dataset
from attnphase.spec import ModelSpec
from attnphase.sweeps import ResultStore, get_kind, point_key
from attnphase.sweeps.basins import STATES, BasinMap, basin_map, global_minimum

SPEC = ModelSpec(omega=0.3)
FAST = basin_settings(max_steps=40, dtype="float64")


def test_states_are_those_of_simulate():
    assert STATES == BASIN_STATES == basin_states(2) and basin_states(1) == STATES[:-1]


def test_init_scale_point_one_is_the_random_start_of_simulate():
    (pt,) = train_basins(SPEC, 24, 1.5, seeds=(0, 1, 2), init_scale=0.1, settings=FAST)
    ref = simulate(SPEC, alpha=1.5, d=24, seeds=(0, 1, 2), inits=("random",), settings=FAST)
    for mine, theirs in zip(pt.runs, ref.runs, strict=True):
        assert mine.seed == theirs.seed
        assert mine.state == theirs.branch
        assert (mine.m, mine.theta, mine.test_error, mine.steps) == pytest.approx(
            (theirs.m, theirs.theta, theirs.test_error, theirs.steps), rel=1e-12, abs=1e-15)


def test_init_scale_scales_the_start():
    ds = [make_dataset(SPEC, 16, 20, 3)]
    p1 = random_starts(SPEC, ds, 0.1)["P"]
    p2 = random_starts(SPEC, ds, 0.003)["P"]
    assert torch_allclose(p2, p1 * 0.03)
    (pt,) = train_basins(SPEC, 16, 1.0, seeds=(3,), init_scale=2.0,
                         settings=basin_settings(max_steps=0, dtype="float64"))
    assert pt.runs[0].steps == 0
    assert pt.runs[0].q == pytest.approx(4.0, rel=0.5)  # |Q0|^2 / d = init_scale^2 chi^2_d / d


def torch_allclose(a, b):
    import torch

    return bool(torch.allclose(a, b, rtol=1e-12, atol=0))


def test_omegas_batched_together_equal_one_at_a_time():
    together = train_basins(SPEC, 20, 0.8, omegas=(0.0, 0.45), seeds=(0, 5), settings=FAST)
    for pt in together:
        (alone,) = train_basins(SPEC.replace(omega=pt.omega), 20, 0.8, seeds=(0, 5), settings=FAST)
        assert [r.state for r in pt.runs] == [r.state for r in alone.runs]
        for a, b in zip(pt.runs, alone.runs, strict=True):
            assert (a.m, a.theta, a.train_loss, a.test_error) == pytest.approx(
                (b.m, b.theta, b.train_loss, b.test_error), rel=1e-9, abs=1e-14)
    # the labels change with omega, so do the errors
    assert together[0].runs[0].train_loss != together[1].runs[0].train_loss


def test_summary_counts_states():
    (pt,) = train_basins(SPEC, 20, 1.0, seeds=range(4), settings=FAST)
    s = pt.summary()
    assert sum(s[f"frac_{k}"] for k in basin_states(1)) == pytest.approx(1.0) and "frac_specialised" not in s
    assert s["n_runs"] == 4
    assert s["test_error"] == pytest.approx(np.mean([r.test_error for r in pt.runs]))
    assert s["test_error_se"] > 0


@pytest.mark.parametrize("params, msg", [
    ({"init_scale": 0}, "init_scale must be > 0"),
    ({"seeds": 0}, "seeds must lie in"),
    ({"optimizer": "sgd"}, "unknown optimizer"),
    ({"seed0": -1}, "seed must be >= 0"),
    ({"d": 1}, "d must be >="),
    ({"alpha": -1}, "alpha must be > 0"),
    ({"max_steps": -3}, "max_steps"),
])
def test_kind_refuses_bad_parameters(params, msg):
    with pytest.raises(ValueError, match=msg):
        get_kind("basins").normalize(params)


def test_kind_key_ignores_the_default_device_only():
    kind = get_kind("basins")
    plain = kind.normalize({"alpha": 1.0})
    assert "device" not in plain
    assert point_key("basins", kind.normalize({"alpha": 1.0, "device": "cpu"})) == \
        point_key("basins", plain)
    assert kind.normalize({"alpha": 1.0, "init_scale": 0.5}) != plain


def test_basin_map_stores_resumes_and_gathers(tmp_path):
    store = tmp_path / "s.sqlite"
    settings = {"d": 16, "seeds": 3, "max_steps": 30, "dtype": "float64"}
    bm = basin_map({}, (0.0, 0.3), (0.5, 1.5), store, settings, workers=1, progress="none")
    assert bm.report is not None and bm.report.computed == 4 and bm.report.errors == 0
    total = sum(bm.fractions[s] for s in STATES[:-1])
    assert "specialised" not in bm.fractions  # (one head)
    assert np.allclose(total, 1.0) and (bm.n_runs == 3).all()
    (ref,) = train_basins(SPEC.replace(omega=0.3), 16, 1.5, seeds=range(3),
                          settings=basin_settings(max_steps=30, dtype="float64"))
    assert bm.test_error[1, 1] == pytest.approx(ref.summary()["test_error"], rel=1e-12)
    again = basin_map({}, (0.0, 0.3), (0.5, 1.5), store, settings, workers=1, progress="none")
    assert again.report is not None and again.report.computed == 0
    assert np.array_equal(again.test_error, bm.test_error)
    with ResultStore(store) as st:
        assert len(st.keys(kind="basins", status="ok")) == 4
    frame = bm.to_frame()
    assert len(frame) == 4 and {"frac_semantic", "test_error_se", "alpha", "omega"} <= set(frame)


@dataclasses.dataclass(frozen=True)
class _FakeTransition:
    omega: float

    def to_dict(self):
        return {"alpha_c": 1.0 + 2 * self.omega, "alpha_l": 1.2 + 2 * self.omega,
                "spinodals": {"semantic": 0.8}, "linear_test_error": 0.002}


@dataclasses.dataclass(frozen=True)
class _FakeBranchPoint:
    alpha: float
    branch: str
    exists: bool = True
    theta = 0.0
    m = 0.0
    q = 0.2

    @property
    def train_loss(self):  # semantic lower above alpha = 1
        return 0.01 + (0.002 * (1.0 - self.alpha) if self.branch == "semantic" else 0.0)

    @property
    def test_error(self):
        return 0.001 if self.branch == "semantic" else 0.003


@pytest.fixture
def fake_theory(monkeypatch):
    monkeypatch.setattr(attnphase.theory, "find_transition", lambda spec, settings=None, widen=False:
                        _FakeTransition(spec.omega), raising=False)
    monkeypatch.setattr(attnphase.theory, "follow_branch", lambda spec, alphas, branch, settings=None:
                        [_FakeBranchPoint(a, branch, exists=not (branch == "semantic" and a < 0.5))
                         for a in alphas], raising=False)


def test_global_minimum_takes_the_lower_training_error(tmp_path, fake_theory):
    g, b = global_minimum({}, (0.1, 0.2), (0.3, 0.8, 1.5), tmp_path / "s.sqlite", workers=1,
                          progress="none")
    assert b.tolist() == [["positional", "positional", "semantic"]] * 2
    assert g.tolist() == [[0.003, 0.003, 0.001]] * 2


def test_command_json_files_and_theory(tmp_path, capsys, fake_theory):
    args = ["basins", "--alpha", "0.5,1.5", "--omega", "0,0.3", "--d", "16", "--seeds", "2",
            "--max-steps", "20", "--out", str(tmp_path), "--workers", "1", "--quiet", "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"]["argv"] == args
    assert data["alpha_c"] == [1.0, 1.6]
    assert np.allclose(np.sum([data["fractions"][s] for s in STATES[:-1]], axis=0), 1.0)
    assert data["global_test_error"] == [[0.003, 0.001], [0.003, 0.001]]
    for name in ("basins_fractions.png", "basins_errors.pdf", "basins.csv", "results.sqlite"):
        assert (tmp_path / name).stat().st_size > 0
    assert main(args[:-1]) == 0  # rerun: everything read from the store, a table printed
    out = capsys.readouterr().out
    assert "omega" in out and "wrote" in out


@pytest.mark.parametrize("extra, msg", [
    (["--optimizer", "sgd"], "unknown --optimizer 'sgd'"),
    (["--init-scale", "0"], "--init-scale must be > 0"),
    (["--init-scale", "abc"], "--init-scale"),
    (["--seeds", "0"], "--seeds must be >= 1"),
    (["--d", "1"], "--d must be >="),
    (["--alpha", "0,1"], "--alpha values must be > 0"),
    (["--device", "tpu"], "unknown device"),
    (["--lr", "-1"], "lr must be > 0"),
    (["--workers", "0"], "--workers must be >= 1"),
])
def test_command_bad_input_one_line_exit_2(tmp_path, capsys, extra, msg):
    assert main(["basins", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and err[0].startswith("attnphase basins: error:")
    assert not (tmp_path / "results.sqlite").exists()


def test_plots_draw_plain_data():
    from attnphase.plots.basins import plot_basin_errors, plot_basin_fractions

    shape = (2, 3)
    fr = {s: np.full(shape, 0.25) for s in STATES}
    fr["semantic"][0, 0] = np.nan  # a missing point is left blank
    bm = BasinMap((0.0, 0.3), (0.5, 1.0, 2.0), 16, {"seeds": 2}, fr, np.ones(shape) * 1e-3,
                  np.ones(shape) * 1e-4, np.ones(shape) * 1e-3, np.full(shape, 2),
                  np.zeros(shape, int), np.ones(shape))
    assert len(plot_basin_fractions(bm).axes) == len(STATES) + 1  # (+ the colour bar)
    assert len(plot_basin_errors(bm).axes) == 2
    full = bm.with_global(np.ones(shape) * 5e-4, np.full(shape, "semantic", dtype=object))
    assert len(plot_basin_errors(full).axes) == 3
    assert full.to_dict()["global_branch"][0] == ["semantic"] * 3
