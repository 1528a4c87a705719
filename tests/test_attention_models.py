"""The registry of attention models (``attnphase.spec.attention``): one definition that the theory,
the simulator and the command line read."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from attnphase.spec.attention import MODELS, SUPPORTS, WINDOW, attention_model, names, score_mask
from attnphase.spec.problem import CROSS_VARIANTS, VARIANTS, ModelSpec

SRC = Path(__file__).resolve().parents[1] / "src" / "attnphase"


def test_the_variants_of_the_model_are_the_registry():
    assert VARIANTS == tuple(MODELS) and CROSS_VARIANTS == tuple(n for n, m in MODELS.items() if m.cross)
    for name in MODELS:
        assert ModelSpec(variant=name, **({"L": 4, "L_keys": 2} if MODELS[name].cross else {})).variant == name


def test_an_unknown_model_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown attention model 'sliding'; known: tied, untied"):
        attention_model("sliding")
    with pytest.raises(ValueError, match="variant"):
        ModelSpec(variant="sliding")
    with pytest.raises(ValueError, match="unknown support"):
        attention_model("tied").covers("everything")


@pytest.mark.parametrize("name", list(MODELS))
def test_masks_and_score_forms(name):
    m = MODELS[name]
    L, keys = 4, 2
    mask = score_mask(name, L, keys if m.cross else 0)
    assert mask.shape == (L, L) and mask.dtype == np.bool_
    assert mask.diagonal()[L - keys:].all() if m.cross else mask.diagonal().all()  # (a key attends to itself)
    assert mask.any(axis=1).all()
    if m.mask == "full":
        assert mask.all()
    elif m.mask == "causal":
        assert (mask == np.tril(np.ones((L, L), bool))).all()
    elif m.mask == "sliding-window":  # (token l: l - WINDOW + 1 <= j <= l)
        j, l_ = np.meshgrid(np.arange(L), np.arange(L))
        assert (mask == ((j <= l_) & (j > l_ - WINDOW))).all() and not mask[L - 1, 0]
    else:
        assert m.mask == "cross"  # a query attends to the keys only, a key to itself only
        assert mask[: L - keys, L - keys:].all() and not mask[: L - keys, : L - keys].any()
        assert (mask[L - keys:, L - keys:] == np.eye(keys, dtype=bool)).all()
    assert m.score_form == ("QQ^T" if m.tied else "QK^T") and m.weight_matrices == (1 if m.tied else 2)


def test_the_theory_and_the_simulator_read_the_registry():
    """The field dimension and the score form of the theory, the simulator's untied switch, both
    halves' masks and the support lists of the theory all follow the registry."""
    from attnphase.sim.models import is_untied, student_mask
    from attnphase.theory.channels import AttentionMap
    from attnphase.theory.fine_rules import MIRRORED_VARIANTS, SCALED_VARIANTS
    from attnphase.theory.geometries import Geometry, score_form
    from attnphase.theory.stability import STABILITY_VARIANTS

    for name, m in MODELS.items():
        assert Geometry(name, 4, 2, keys=2 if m.cross else 0).field_dim == 2 * m.weight_matrices
        assert score_form(name, 1).shape == (m.weight_matrices, m.weight_matrices)
        spec = ModelSpec(variant=name, **({"L": 4, "L_keys": 2} if m.cross else {"L": 4}))
        assert is_untied(spec) == (not m.tied)
        expected = score_mask(name, spec.tokens, spec.L_keys if m.cross else 0)
        sim = student_mask(spec)
        assert (sim is None) == (not m.masked) and (expected.all() if sim is None else (sim.numpy() == expected).all())
        assert (AttentionMap.from_spec(spec).mask == expected).all()
    assert STABILITY_VARIANTS == names("stability") and MIRRORED_VARIANTS == names("mirror")
    assert SCALED_VARIANTS == names("scaled-fine-rules") and set(SUPPORTS) >= {"theory", "simulator"}


def _imports(folder: Path) -> set[str]:
    out = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
    return out


def test_neither_half_imports_the_other():
    """The simulator judges the theory: it reads the model's definition from ``spec``, not from
    the theory, and the theory does not import the simulator."""
    assert not {m for m in _imports(SRC / "sim") if m.startswith("attnphase.theory")}
    assert not {m for m in _imports(SRC / "theory") if m.startswith("attnphase.sim")}
