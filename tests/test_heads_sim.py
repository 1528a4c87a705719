"""Several heads and other attention maps in the simulator (docs/model.md section 11): the maps'
formulas, the identities that tie them to the one-head softmax student, the starts, the
classification of a run, and refused input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnphase.sim.data import attention_map, teacher_attention
from attnphase.sim.models import attention, n_columns, objective, scores
from attnphase.sim.simulate import classify_heads, parse_inits
from attnphase.spec import ModelSpec
from attnphase.spec.attention import ACTIVATIONS, score_mask


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_every_map_follows_its_formula_and_the_mask(name):
    L = 3
    s = torch.randn(4, L, L, dtype=torch.float64)
    mask = torch.as_tensor(score_mask("causal", L))
    S = attention_map(name, s, mask)
    expected = {"softmax": torch.softmax(s.masked_fill(~mask, -math.inf), dim=-1),
                "sigmoid": 1.0 / (1.0 + torch.exp(math.log(L) - s)),
                "relu": torch.clamp(s, min=0.0) / L, "linear": s / L}[name]
    torch.testing.assert_close(S, torch.where(mask, expected, torch.zeros(())))
    assert torch.all(S[:, 0, 1:] == 0)


def test_two_equal_heads_with_fixed_gains_are_one_head():
    """Two heads whose fields are equal, each with gain 1/2, give the one-head softmax map; the
    scores are one block per head."""
    one, two = ModelSpec(), ModelSpec(heads=2)
    h = torch.randn(5, 2, 1, dtype=torch.float64)
    H = torch.cat([h, h], dim=-1)
    assert scores(two, H).shape == (5, 2, 2, 2) and n_columns(two) == 2
    torch.testing.assert_close(attention(two, H), attention(one, h))
    gains = torch.tensor([0.25, 0.75], dtype=torch.float64)
    S = attention(two, H[..., [0, 1]] * torch.tensor([1.0, 0.0], dtype=torch.float64), gains)
    torch.testing.assert_close(S, 0.25 * attention(one, h) + 0.75 * torch.full((5, 2, 2), 0.5, dtype=torch.float64))


def test_the_teacher_map_is_the_teacher_activation():
    spec = ModelSpec(teacher_activation="linear", omega=0.2)
    hs = torch.randn(3, 2, 1, dtype=torch.float64)
    A = torch.as_tensor(spec.A_tokens, dtype=torch.float64)
    torch.testing.assert_close(teacher_attention(spec, hs), 0.8 * (hs @ hs.transpose(-1, -2)) / 2 + 0.2 * A)


@pytest.mark.parametrize("kw", [{"heads": 2}, {"activation": "sigmoid"}, {"heads": 2, "head_gains": "trained"}])
def test_the_gradient_is_the_risks(kw):
    """The autograd gradient of these students against a central difference of the risk."""
    from attnphase.sim import make_dataset
    from attnphase.sim.train import init_params, stack_batch

    spec = ModelSpec(**kw)
    ds = make_dataset(spec, 20, 30, 0, dtype=torch.float64)
    batch = stack_batch([ds])
    params = init_params(spec, [ds], ("specialised",) if spec.heads > 1 else ("random",))
    R, grads = objective(spec, batch, params)
    for key, p in params.items():
        direction = torch.randn_like(p)
        eps = 1e-6
        up = objective(spec, batch, {**params, key: p + eps * direction})[0]
        down = objective(spec, batch, {**params, key: p - eps * direction})[0]
        fd = float((up - down).sum()) / (2 * eps)
        assert fd == pytest.approx(float((grads[key] * direction).sum()), rel=1e-6, abs=1e-9), key


def test_starts_and_classification():
    assert parse_inits("all") == ("semantic", "positional", "random")
    assert parse_inits("all", heads=2)[-1] == "specialised"
    m = np.array([[0.01, 0.3], [-0.01, -0.3]])
    theta = np.array([[0.5], [0.02]])
    assert classify_heads(m, theta) == "specialised"
    assert classify_heads(m[:, [1, 1]], theta[[1, 1]]) == "positional"
    assert classify_heads(m[:, [0, 0]], theta[[0, 0]]) == "semantic"
    assert classify_heads(np.zeros((2, 2)), np.zeros((2, 1))) == "trivial"


def test_two_heads_train_and_report_each_head():
    import attnphase as ap

    res = ap.simulate(2.0, 40, init="specialised", seeds=1, heads=2, head_gains="trained", progress=False,
                      max_steps=50, dtype="float64")
    run = res.runs[0]
    assert np.shape(run.overlaps["theta"]) == (2, 1) and np.shape(run.overlaps["m"]) == (2, 2)
    assert len(run.overlaps["gains"]) == 2


@pytest.mark.parametrize("args, message", [
    (["--heads", "0"], "heads must lie in [1, 8], got 0"),
    (["--activation", "tanh"], "unknown activation 'tanh'"),
    (["--heads", "2", "--rank", "2"], "heads > 1 needs rank = 1"),
    (["--init", "specialised"], "the specialised start"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    from attnphase.cli import main

    assert main(["simulate", "--alpha", "1", "--d", "20", "--seeds", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_basins_count_the_specialised_state():
    from attnphase.sim.basins import basin_settings, train_basins

    (point,) = train_basins(ModelSpec(heads=2), 2.0, 30, seeds=(0, 1), settings=basin_settings(max_steps=20))
    assert set(point.fractions) == {"semantic", "positional", "mixed", "trivial", "specialised"}
    assert sum(point.fractions.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("kw", [
    *({"variant": v, "activation": a, **({"L": 3} if v == "sliding-window" else {})}
      for v in ("tied", "untied", "causal", "cross", "sliding-window") for a in ACTIVATIONS),
    {"heads": 2}, {"heads": 3, "head_gains": "trained", "activation": "relu"}])
def test_the_analytic_gradient_is_autograds(kw):
    from attnphase.sim import make_dataset
    from attnphase.sim.train import init_params, stack_batch

    spec = ModelSpec(**kw)
    datasets = [make_dataset(spec, 20, 30, s, dtype=torch.float64) for s in (0, 1)]
    params = init_params(spec, datasets, ("semantic", "random"))
    Ra, ga = objective(spec, stack_batch(datasets), params, "analytic")
    Rb, gb = objective(spec, stack_batch(datasets), params, "autograd")
    torch.testing.assert_close(Ra, Rb, rtol=1e-12, atol=1e-14)
    assert set(ga) == set(gb)
    for key in gb:
        torch.testing.assert_close(ga[key], gb[key], rtol=1e-10, atol=1e-13)
