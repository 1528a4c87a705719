"""The conformance suite: every registered attention model (``attnphase.spec.attention.MODELS``)
passes :func:`attnphase.conformance.check_model`. The default run checks the registry entry and
the refusal of bad input; the slow run adds the theory at the model's conformance point, gradient
descent at ``d = 500`` and their agreement within the tolerance the model declares (docs/variants.md,
"Conformance"): ``python -m pytest -m slow tests/test_conformance.py -s``."""

from __future__ import annotations

import pytest
import torch

from attnphase.conformance import cases, check_model, conformance_spec, theory_covers
from attnphase.spec.attention import ACTIVATIONS, MODELS, names
from attnphase.spec.problem import ModelSpec


@pytest.mark.parametrize("name", list(cases()))
def test_registry_entry_and_bad_input(name):
    result = check_model(name, train=False)
    assert result.success, result.message
    assert [c.name for c in result.checks] == ["registry", "bad input"]
    assert result.to_dict()["success"] is True and result.params["model"] == name


def test_the_suite_runs_on_every_registered_model_map_and_heads():
    known = cases()
    assert set(names()) < set(known) and len(MODELS) >= 7
    assert ({f"tied/{a}" for a in ACTIVATIONS if a != "softmax"} | {"tied/2-heads", "tied/2-heads-trained"}
            == set(known) - set(MODELS))
    assert known["tied/2-heads"].spec.heads == 2 and known["tied/relu"].spec.activation == "relu"
    assert known["tied/2-heads-trained"].spec.head_gains == "trained" and theory_covers("tied/2-heads-trained")


def test_a_broken_entry_fails_the_registry_check(monkeypatch):
    """A mask that leaves a token attending to nothing fails the registry check, with its reason."""
    import numpy as np

    import attnphase.conformance as conformance

    def empty_first_row(variant: str, L: int, keys: int = 0) -> np.ndarray:
        mask = np.ones((L, L), dtype=np.bool_)
        mask[0] = False
        return mask

    monkeypatch.setattr(conformance, "score_mask", empty_first_row)
    result = check_model("tied", train=False)
    assert not result.success and "registry: a token attends to nothing at L = 2" in result.message
    with pytest.raises(ValueError, match="unknown conformance case 'nothing'; known: tied, untied"):
        check_model("nothing")


def test_the_sliding_window_mask_reaches_both_halves():
    """At L = 3 the last token does not see the first: the simulator's student gives it zero
    weight, and the theory's loss does not change when the first token's field moves in that
    token's score (the score is masked)."""
    import numpy as np

    from attnphase.sim.models import attention
    from attnphase.theory.channels import AttentionMap, student_map

    spec = conformance_spec("sliding-window")
    assert spec.L == 3
    H = torch.randn(5, 3, 1, dtype=torch.float64)
    S = attention(spec, H)
    assert torch.all(S[:, 2, 0] == 0) and torch.all(S[:, 0, 1:] == 0)
    torch.testing.assert_close(S.sum(-1), torch.ones(5, 3, dtype=torch.float64))
    amap = AttentionMap.from_spec(spec)
    h = np.random.default_rng(0).normal(size=(5, 3, 1))
    S_theory = student_map(h, amap)
    np.testing.assert_array_equal(S_theory[:, 2, 0], 0.0)
    np.testing.assert_allclose(S_theory, attention(spec, torch.as_tensor(h)).numpy(), atol=1e-12)
    assert ModelSpec(variant="sliding-window").L == 2  # (at L = 2 the window is the causal mask)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(cases()))
def test_theory_agrees_with_training_at_d500(name):
    """Every check of :func:`check_model`: the theory's branch at the case's conformance point,
    4 runs of heavy-ball GD at d = 500 that all meet the gradient tolerance on that branch, and
    their mean within the declared tolerance of the theory. A case the theory does not cover
    (the registry says so) is skipped with that reason."""
    if not theory_covers(name):
        pytest.skip(f"the theory does not cover {name} (attnphase.theory.channels.check_attention_covered)")
    result = check_model(name)
    print(f"\n{result}\n{ {k: tuple(round(x, 5) for x in v) for k, v in result.compared.items()} }")
    assert result.success, result.message
    tolerance = cases()[name].conformance.tolerance
    assert set(result.compared) and all(abs(r) <= tolerance for *_, r in result.compared.values())
