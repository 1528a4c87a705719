"""Tests of the counting task (attnphase.histogram): labels, data, restriction masks,
unrestricted embedding, determinism, and the ``attnphase histogram`` CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from attnphase.cli import main
from attnphase.histogram import (
    QUICK,
    ContinuationConfig,
    DataConfig,
    ModelConfig,
    TrainConfig,
    attention_mask,
    build_model,
    continue_sgd,
    count_labels,
    evaluate,
    make_dataset,
    run_experiment,
    to_unrestricted,
    train_model,
)

TINY_DATA = DataConfig(L=6, T=5, n_train=300, n_val=60)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one thread is much faster on a shared machine (docs/histogram.md)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- labels and data
@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ([1, 2, 1, 3, 1], [3, 1, 3, 1, 3]),
        ([0, 0, 0, 0], [4, 4, 4, 4]),
        ([4, 3, 2, 1, 0], [1, 1, 1, 1, 1]),
        ([7, 7, 2, 2, 2, 9], [2, 2, 3, 3, 3, 1]),
    ],
)
def test_count_labels_hand_made(seq: list[int], expected: list[int]) -> None:
    assert count_labels(np.array(seq)).tolist() == expected


def test_count_labels_batch_matches_rows() -> None:
    batch = np.array([[1, 2, 1, 3, 1], [0, 0, 0, 0, 5]])
    assert count_labels(batch).tolist() == [[3, 1, 3, 1, 3], [4, 4, 4, 4, 1]]


def test_make_dataset_distinct_disjoint_labelled_and_seeded() -> None:
    cfg = DataConfig(L=4, T=4, n_train=100, n_val=20)  # 256 sequences: duplicates are certain
    data = make_dataset(cfg, seed=3)
    allx = np.concatenate([data.x_train, data.x_val])
    assert data.x_train.shape == (100, 4) and data.x_val.shape == (20, 4)
    assert np.unique(allx, axis=0).shape[0] == 120
    assert allx.min() >= 0 and allx.max() < 4
    np.testing.assert_array_equal(data.y_train, count_labels(data.x_train))
    np.testing.assert_array_equal(data.y_val, count_labels(data.x_val))
    again = make_dataset(cfg, seed=3)
    np.testing.assert_array_equal(again.x_train, data.x_train)
    other = make_dataset(cfg, seed=4)
    assert not np.array_equal(other.x_train, data.x_train)


@pytest.mark.parametrize(
    "kwargs",
    [dict(L=1), dict(T=1), dict(n_train=0), dict(L=3, T=3, n_train=20, n_val=5)],
)
def test_data_config_rejects_bad_sizes(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        DataConfig(**kwargs)


# ---------------------------------------------------------------- restriction masks
def _tokens(seed: int = 0, n: int = 8, L: int = 10, T: int = 15) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, T, (n, L), generator=g)


@pytest.mark.parametrize("attention", ["positional", "semantic"])
def test_mask_blocks_other_half_gradient_is_exactly_zero(attention: str) -> None:
    model = build_model(ModelConfig(attention=attention), seed=1)
    half = model.config.d // 2
    x = model.embed(_tokens()).detach().requires_grad_(True)
    scores = model.scores(x)
    weights = torch.randn(scores.shape, generator=torch.Generator().manual_seed(2))
    (scores * weights).sum().backward()
    grad = x.grad
    blocked, allowed = (grad[..., :half], grad[..., half:]) if attention == "positional" else (
        grad[..., half:], grad[..., :half])
    assert torch.count_nonzero(blocked) == 0
    assert torch.count_nonzero(allowed) > 0.9 * allowed.numel()


def test_unrestricted_scores_see_both_halves() -> None:
    model = build_model(ModelConfig(attention="both"), seed=1)
    half = model.config.d // 2
    x = model.embed(_tokens()).detach().requires_grad_(True)
    model.scores(x).sum().backward()
    assert torch.count_nonzero(x.grad[..., :half]) > 0
    assert torch.count_nonzero(x.grad[..., half:]) > 0


@pytest.mark.parametrize("attention", ["positional", "semantic"])
def test_loss_gradient_on_blocked_query_key_columns_is_zero(attention: str) -> None:
    model = build_model(ModelConfig(attention=attention), seed=0)
    tokens = _tokens(1, n=16)
    labels = torch.as_tensor(count_labels(tokens.numpy()))
    logits = model(tokens)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
    blocked = attention_mask(attention, model.config.d) == 0
    for w in (model.query.weight, model.key.weight):
        assert torch.count_nonzero(w.grad[:, blocked]) == 0
        assert torch.count_nonzero(w.grad[:, ~blocked]) > 0


def test_positional_map_ignores_tokens_and_semantic_map_ignores_positions() -> None:
    pos = build_model(ModelConfig(attention="positional"), seed=0)
    a, b = pos.attention(_tokens(0, n=1)), pos.attention(_tokens(1, n=1))
    assert torch.equal(a, b)
    sem = build_model(ModelConfig(attention="semantic"), seed=0)
    tokens = _tokens(2, n=4)
    before = sem.attention(tokens)
    with torch.no_grad():
        sem.position_embedding.normal_()
    assert torch.equal(sem.attention(tokens), before)
    # equal tokens give equal attention rows in the semantic model
    seq = torch.tensor([[3, 5, 3, 1, 5, 3, 0, 2, 9, 9]])
    rows = sem.attention(seq)[0]
    assert torch.equal(rows[0], rows[2]) and torch.equal(rows[0], rows[5])


def test_to_unrestricted_keeps_the_function_and_frees_the_mask() -> None:
    model = build_model(ModelConfig(attention="semantic"), seed=4)
    free = to_unrestricted(model)
    tokens = _tokens(3, n=16)
    assert free.config.attention == "both"
    assert torch.equal(free.qk_mask, torch.ones(model.config.d))
    torch.testing.assert_close(free(tokens), model(tokens), rtol=0, atol=1e-6)
    torch.testing.assert_close(free.attention(tokens), model.attention(tokens), rtol=0, atol=1e-7)
    half = model.config.d // 2
    assert torch.count_nonzero(free.query.weight[:, half:]) == 0
    assert torch.count_nonzero(model.query.weight[:, half:]) > 0  # original left untouched


def test_model_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(attention="diagonal")
    with pytest.raises(ValueError, match="even"):
        ModelConfig(d=63)


# ---------------------------------------------------------------- training
def _tiny_train(seed: int, attention: str = "semantic"):
    data = make_dataset(TINY_DATA, seed)
    model = build_model(ModelConfig(L=6, T=5, d=16, hidden=16, attention=attention), seed)
    res = train_model(model, data, TrainConfig(steps=30, batch_size=16, eval_every=10), seed)
    return data, model, res


def test_training_is_deterministic_under_a_seed() -> None:
    _, m1, r1 = _tiny_train(5)
    _, m2, r2 = _tiny_train(5)
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(p1, p2)
    assert r1.val_loss == r2.val_loss and r1.train_accuracy == r2.train_accuracy
    _, m3, _ = _tiny_train(6)
    assert not torch.equal(m1.query.weight, m3.query.weight)


def test_training_lowers_the_loss_and_keeps_global_rng() -> None:
    state = torch.random.get_rng_state()
    _, _, res = _tiny_train(0)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert res.step == [10, 20, 30]
    assert res.train_loss[-1] < res.train_loss[0]


def test_continuation_starts_from_the_same_function_and_reports_blocked_weight() -> None:
    data, model, res = _tiny_train(1, attention="positional")
    free, cr = continue_sgd(model, data, ContinuationConfig(steps=20, batch_size=16,
                                                            eval_every=10, n_probe=20), 7)
    x_val = torch.as_tensor(data.x_val)
    y_val = torch.as_tensor(data.y_val)
    assert cr.val_accuracy_before == pytest.approx(evaluate(model, x_val, y_val)[1], abs=1e-12)
    assert cr.val_accuracy_before == pytest.approx(res.final_val_accuracy, abs=1e-12)
    assert cr.start == "positional" and free.config.attention == "both"
    assert cr.blocked_half_weight is not None and cr.blocked_half_weight > 0
    assert cr.relative_parameter_change > 0 and cr.step == [0, 10, 20]


def test_control_keeps_restriction_and_starts_where_the_free_run_starts() -> None:
    data, model, _ = _tiny_train(2, attention="semantic")
    cfg = ContinuationConfig(steps=20, batch_size=16, eval_every=10, n_probe=20)
    free, cr = continue_sgd(model, data, cfg, 3)
    ctrl, cc = continue_sgd(model, data, cfg, 3, keep_restriction=True)
    assert cr.unrestricted and not cc.unrestricted
    assert cc.blocked_half_weight == 0.0  # the blocked columns get no gradient at all
    assert cr.blocked_half_weight is not None and cr.blocked_half_weight > 0
    assert cc.val_accuracy_before == cr.val_accuracy_before
    assert cc.train_loss_before == pytest.approx(cr.train_loss_before, rel=1e-6)
    assert not torch.equal(free.query.weight, ctrl.query.weight)


# ---------------------------------------------------------------- CLI
TINY_FLAGS = ["--L", "6", "--T", "5", "--d", "16", "--hidden", "16", "--train-size", "300",
              "--val-size", "60", "--steps", "20", "--sgd-steps", "10", "--eval-every", "10",
              "--batch-size", "16", "--threads", "1", "--examples", "2"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--device", "gpu"],
        ["--variants", "positional,diagonal"],
        ["--seeds", "0"],
        ["--steps", "-3"],
        ["--steps", "many"],
        ["--threads", "0"],
        ["--d", "63"],
        ["--lr", "0"],
        ["--sgd-lr", "-1"],
        ["--train-size", "0"],
        ["--examples", "1000"],
        ["--bogus"],
    ],
)
def test_cli_bad_flags_exit_2_with_one_line(flags: list[str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["histogram", "--out", str(tmp_path), *TINY_FLAGS, *flags]
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "error" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_cli_cuda_unavailable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["histogram", "--out", str(tmp_path), "--device", "cuda", *TINY_FLAGS])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "CUDA" in err


def test_cli_tiny_end_to_end_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["histogram", "--json", "--seeds", "2", "--out", str(tmp_path), *TINY_FLAGS])
    captured = capsys.readouterr()
    assert rc == 0
    summary = json.loads(captured.out)
    assert summary["command"] == "histogram" and "version" in summary
    assert summary["config"]["data"]["L"] == 6 and summary["config"]["seeds"] == 2
    assert [(r["variant"], r["seed"]) for r in summary["runs"]] == [
        ("positional", 0), ("semantic", 0), ("positional", 1), ("semantic", 1)]
    for r in summary["runs"]:
        for key in ("train_accuracy", "val_accuracy"):
            assert 0.0 <= r[key] <= 1.0
        c = r["continuation"]
        assert c["optimizer"] == "sgd" and c["steps"] == 10
        for key in ("relative_parameter_change", "attention_change", "blocked_half_weight"):
            assert isinstance(c[key], float) and c[key] >= 0.0
        assert set(r["control"]) >= {"relative_parameter_change", "attention_change"}
        assert set(r["unrestricted_vs_control"]) == {"parameter", "attention"}
    assert [r["seed"] for r in summary["reference"]] == [0, 1]
    assert len(summary["figures"]) == 6
    for f in summary["figures"]:
        assert Path(f).stat().st_size > 0
    full = json.loads((tmp_path / "histogram_results.json").read_text())
    assert len(full["training"]) == 4 and len(full["examples"]["tokens"]) == 2
    assert set(full["examples"]["maps"]) == {
        "positional", "positional -> both (SGD)", "semantic", "semantic -> both (SGD)"}


def test_plots_return_figures() -> None:
    from matplotlib.figure import Figure

    from attnphase.plots.histogram import (
        plot_attention_maps,
        plot_continuation,
        plot_training_curves,
    )

    data, model, res = _tiny_train(0)
    _, cr = continue_sgd(model, data, ContinuationConfig(steps=10, batch_size=8, eval_every=5,
                                                         n_probe=10), 1)
    maps = {"semantic": model.attention(torch.as_tensor(data.x_val[:2])).detach().numpy()}
    for fig in (plot_training_curves([res]), plot_continuation([cr], [cr]),
                plot_attention_maps(data.x_val[:2], maps)):
        assert isinstance(fig, Figure) and fig.axes


# ---------------------------------------------------------------- full accuracy (slow)
@pytest.mark.slow
def test_quick_configuration_reaches_95_percent() -> None:
    result = run_experiment(replace(QUICK, reference=False, control=False))
    accs = {t.attention: t.final_val_accuracy for t in result.training}
    assert set(accs) == {"positional", "semantic"}
    assert min(accs.values()) >= 0.95, accs
