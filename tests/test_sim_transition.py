"""``sim.transition``: the crossing estimator, ``sim-transition`` CLI (JSON, files, bad input) and
its figure (docs/model.md (5.2); the starts of docs/simulation.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.figure import Figure

from attnphase.cli import main
from attnphase.plots.extensions import ALPHA_C_GID, question_figure, transition_figure
from attnphase.sim.transition import find_crossing, sim_transition
from attnphase.spec.problem import ModelSpec

TINY = ["sim-transition", "--d", "24", "--alpha", "0.8,1.6", "--seeds", "1", "--max-steps", "30",
        "--omega", "0.3", "--threads", "1"]


# --- the estimator on synthetic Delta curves -------------------------------------------------


def test_linear_delta_root_is_exact():
    root = 1.3137
    a = np.linspace(0.6, 2.2, 9)
    delta = -2.5e-4 * (a - root)
    c = find_crossing(a, delta, np.full(a.size, 1e-5))
    assert c.alpha_c == pytest.approx(root, abs=1e-12)
    assert c.bracket == (pytest.approx(1.2), pytest.approx(1.4))
    assert c.reason == "ok" and c.all_crossings == (pytest.approx(root),)
    # +-1 SE curves of a line with slope -2.5e-4 and SE 1e-5 cross 1e-5 / 2.5e-4 = 0.04 away
    assert c.lo == pytest.approx(root - 0.04, abs=1e-12)
    assert c.hi == pytest.approx(root + 0.04, abs=1e-12)
    # first-order SE: sqrt((1-t)^2 + t^2) * 1e-5 / 2.5e-4
    t = (root - 1.2) / 0.2
    assert c.se == pytest.approx(np.sqrt((1 - t) ** 2 + t ** 2) * 0.04, rel=1e-10)


def test_nonlinear_curve_interpolates_between_bracketing_points():
    a = np.array([0.5, 1.0, 1.5, 2.0])
    delta = np.array([3.0, 1.0, -1.0, -4.0])
    c = find_crossing(a, delta)
    assert c.alpha_c == pytest.approx(1.25)
    assert c.se == pytest.approx(0.0) and c.lo == c.hi == pytest.approx(1.25)


def test_exact_zero_on_grid_point():
    c = find_crossing([1.0, 2.0, 3.0], [1.0, 0.0, -1.0])
    assert c.alpha_c == pytest.approx(2.0) and c.all_crossings == (2.0,)


def test_no_sign_change_gives_none_with_reason():
    a = np.linspace(0.6, 2.2, 9)
    c = find_crossing(a, 1e-4 + 0 * a, np.full(a.size, 1e-5))
    assert c.alpha_c is None and c.lo is None and c.se is None
    assert "no sign change" in c.reason and "above" in c.reason
    c = find_crossing(a, -1e-4 - a, None)
    assert c.alpha_c is None and "below" in c.reason


def test_unusable_points_are_skipped_and_noise_is_flagged():
    a = [1.0, 2.0, 3.0, 4.0, 5.0]
    delta = [1.0, -0.5, 1.0, 0.5, -1.5]
    c = find_crossing(a, delta)
    assert len(c.all_crossings) == 3 and "sign changes" in c.reason
    assert c.alpha_c == pytest.approx(1.0 + 1.0 / 1.5)
    # the point at alpha = 2 (a start that did not hold) removed: one crossing between 4 and 5
    c = find_crossing(a, delta, usable=[True, False, True, True, True])
    assert c.used_alphas == (1.0, 3.0, 4.0, 5.0)
    assert c.alpha_c == pytest.approx(4.25) and c.reason == "ok"
    c = find_crossing(a, delta, usable=[True, False, False, False, False])
    assert c.alpha_c is None and "fewer than two" in c.reason
    # the caller's mask is left as it was, and a read-only one is accepted
    mask = np.array([True, True, True, True, True])
    mask.flags.writeable = False
    c = find_crossing(a, [1.0, np.nan, 1.0, 0.5, -1.5], usable=mask)
    assert c.used_alphas == (1.0, 3.0, 4.0, 5.0) and mask.all()


def test_estimator_rejects_bad_input():
    with pytest.raises(ValueError, match="increasing"):
        find_crossing([1.0, 1.0, 2.0], [1.0, 0.0, -1.0])
    with pytest.raises(ValueError, match="equal length"):
        find_crossing([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="standard errors"):
        find_crossing([1.0, 2.0], [1.0, -1.0], [-1.0, 0.0])


# --- library and CLI on a tiny case ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    import torch

    from attnphase.sim.train import TrainSettings

    torch.set_num_threads(1)
    settings = TrainSettings(momentum=0.9, max_steps=40, tol=1e-5, log_every=0)
    return sim_transition(ModelSpec(omega=0.3), [0.8, 1.6], 24, (0, 1), settings)


def test_sim_transition_records_paired_delta(tiny):
    assert len(tiny.points) == 2 and tiny.seeds == (0, 1) and tiny.d == 24
    for p in tiny.points:
        assert p.delta == pytest.approx(
            tuple(s - q for s, q in zip(p.train_semantic, p.train_positional, strict=True)))
        assert p.delta_mean == pytest.approx(np.mean(p.delta))
        assert p.delta_se == pytest.approx(np.std(p.delta, ddof=1) / np.sqrt(2))
        assert set(p.branch_semantic + p.branch_positional) <= {
            "semantic", "positional", "trivial", "mixed"}
        assert p.held_semantic == np.mean([b == "semantic" for b in p.branch_semantic])
    out = tiny.to_dict()
    assert out["params"]["spec"]["omega"] == 0.3 and out["params"]["version"]
    assert len(out["per_seed"]["alpha_c"]) == 2


def test_sim_transition_rejects_bad_grid():
    with pytest.raises(ValueError, match="increasing"):
        sim_transition(ModelSpec(omega=0.3), [1.0, 0.5], 20, (0,))
    with pytest.raises(ValueError, match="alpha"):
        sim_transition(ModelSpec(omega=0.3), [-1.0, 0.5], 20, (0,))
    with pytest.raises(ValueError, match="seed"):
        sim_transition(ModelSpec(omega=0.3), [0.5, 1.0], 20, ())


def test_cli_json_schema(capsys):
    assert main(TINY + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"params", "alpha_c", "crossing", "per_seed", "points", "seconds", "success", "message"} <= set(out)
    runs = 2 * len(out["params"]["alphas"]) * len(out["params"]["seeds"])
    converged = all(p["converged"] == 1.0 for p in out["points"])
    assert out["success"] is (out["alpha_c"] is not None and converged)
    assert f"of {runs} runs met the gradient tolerance" in out["message"]
    params = out["params"]
    assert params["d"] == 24 and params["seeds"] == [0] and params["alphas"] == [0.8, 1.6]
    assert params["inits"] == ["semantic", "positional"] and params["train"]["max_steps"] == 30
    assert params["spec"]["variant"] == "tied" and isinstance(params["version"], str)
    assert {"alpha_c", "lo", "hi", "se", "bracket", "reason", "used_alphas"} <= set(
        out["crossing"])
    assert len(out["points"]) == 2
    for p in out["points"]:
        assert {"alpha", "n", "delta", "delta_mean", "delta_se", "test_semantic_mean",
                "test_positional_mean", "branch_semantic", "branch_positional",
                "held_semantic", "held_positional", "usable"} <= set(p)
        assert len(p["delta"]) == 1 and p["delta_se"] == 0.0
    assert out["points"][0]["n"] == round(0.8 * 24)


def test_cli_writes_files(tmp_path, capsys):
    assert main(TINY + ["--variant", "causal", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "variant=causal" in text
    assert "sim-transition: 0/4 runs" in captured.err and "sim-transition: 4/4 runs" in captured.err
    for ext in ("csv", "json", "png", "pdf"):
        assert (tmp_path / f"sim_transition.{ext}").stat().st_size > 0


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--d", "1"], "--d must be >= 2"),
        (["--alpha", "1.2,0.8"], "increasing"),
        (["--alpha", "0:1:3"], "--alpha values must be > 0"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--variant", "sideways"], "unknown variant"),
        (["--value", "huge"], "value"),
        (["--token-corr", "x"], "--token-corr must be a number"),
        (["--rank", "2"], "rank 1"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, fragment, capsys):
    base = ["sim-transition", "--d", "20", "--alpha", "0.8,1.6", "--seeds", "1",
            "--max-steps", "5"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err


# --- figures ---------------------------------------------------------------------------------


def _fake(alpha_c_shift: float = 0.0):
    """A real SimTransition object with its Delta replaced by a line crossing at 1.3 + shift."""
    import dataclasses

    import torch

    from attnphase.sim.train import TrainSettings

    torch.set_num_threads(1)
    settings = TrainSettings(max_steps=2, log_every=0)
    res = sim_transition(ModelSpec(omega=0.3), [0.8, 1.2, 1.6], 20, (0, 1), settings)
    points = []
    for p in res.points:
        d = -1e-4 * (p.alpha - 1.3 - alpha_c_shift)
        points.append(dataclasses.replace(
            p, delta=(d - 1e-5, d + 1e-5), delta_mean=d, delta_se=1e-5,
            branch_semantic=("semantic",) * 2, branch_positional=("positional",) * 2,
            held_semantic=1.0, held_positional=1.0))
    cross = find_crossing(res.alphas, [p.delta_mean for p in points],
                          [p.delta_se for p in points])
    return dataclasses.replace(res, points=tuple(points), crossing=cross)


def test_transition_figure_marks_alpha_c():
    res = _fake()
    assert res.alpha_c == pytest.approx(1.3)
    fig = transition_figure(res)
    assert isinstance(fig, Figure)
    marks = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == ALPHA_C_GID]
    assert len(marks) == 1 and np.allclose(marks[0].get_xdata(), 1.3)
    assert "alpha_c(sim) = 1.300" in " ".join(t.get_text() for t in fig.axes[0].get_legend().texts)


def test_question_figure_one_mark_per_variant():
    fig = question_figure({"a": _fake(), "b": _fake(0.2)}, "test", theory={"a": 1.25})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    xs = sorted(float(ln.get_xdata()[0]) for ln in fig.axes[0].get_lines()
                if ln.get_gid() == ALPHA_C_GID)
    assert xs == pytest.approx([1.3, 1.5])
    with pytest.raises(ValueError):
        question_figure({}, "empty")
