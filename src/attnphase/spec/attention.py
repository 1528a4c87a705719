"""The attention models of the student: one definition that the theory, the simulator, the command
line and the tests read.

Each :class:`AttentionModel` says how the scores are formed (tied, ``x Q Q^T x^T / d``, or untied,
``x Q K^T x^T / d``: docs/model.md (1.3), (6.1)), which scores a token attends to (its mask: all,
causal ``j <= l``, docs/model.md (6.2), or cross-attention, queries attending to keys only,
docs/model.md (10.2)), and which parts of the package cover it (``supports``). :data:`MODELS` is
the registry; :func:`attention_model` looks a name up (``ValueError`` naming the known ones) and
:func:`score_mask` builds the mask both halves use, so that a model's mask is written once.

Support flags (the parts of the package that cover a model):

* ``theory``: the self-consistent equations and their solver;
* ``simulator``: gradient descent at finite ``d`` (:mod:`attnphase.sim`);
* ``stability``: the stability of the positional point along ``theta`` (``solve --stability``);
* ``one-start``: the one-start selections (``--response semantic-start / positional-start``,
  docs/model.md (3.7));
* ``mirror``: the fine rules pair nodes with their mirrors (the scatter of the jumping conjugates);
* ``scaled-fine-rules``: the fine rules are drawn at the teacher's scale (two tokens, rank 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

#: the masks a model can have
MASKS = ("full", "causal", "cross")

#: the parts of the package that may cover a model (module docstring)
SUPPORTS = ("theory", "simulator", "stability", "one-start", "mirror", "scaled-fine-rules")


@dataclass(frozen=True)
class AttentionModel:
    """One attention model of the student: its name (the ``variant`` of :class:`ModelSpec`),
    whether key and query share their weights, its mask, and what covers it."""

    name: str
    tied: bool
    mask: str
    supports: frozenset[str]
    description: str

    def __post_init__(self) -> None:
        if self.mask not in MASKS:
            raise ValueError(f"unknown mask {self.mask!r}; choose from {', '.join(MASKS)}")
        unknown = set(self.supports) - set(SUPPORTS)
        if unknown:
            raise ValueError(f"unknown support {sorted(unknown)}; choose from {', '.join(SUPPORTS)}")

    @property
    def score_form(self) -> str:
        """``"QQ^T"`` (tied) or ``"QK^T"`` (untied)."""
        return "QQ^T" if self.tied else "QK^T"

    @property
    def weight_matrices(self) -> int:
        """The student's weight matrices: 1 (``Q``) or 2 (``Q``, ``K``); the field per token has
        this many times the rank's components (docs/model.md (6.1))."""
        return 1 if self.tied else 2

    @property
    def causal(self) -> bool:
        return self.mask == "causal"

    @property
    def cross(self) -> bool:
        return self.mask == "cross"

    def covers(self, part: str) -> bool:
        """Whether ``part`` (one of :data:`SUPPORTS`) covers this model."""
        if part not in SUPPORTS:
            raise ValueError(f"unknown support {part!r}; choose from {', '.join(SUPPORTS)}")
        return part in self.supports


def _model(name: str, tied: bool, mask: str, supports: str, description: str) -> AttentionModel:
    return AttentionModel(name, tied, mask, frozenset(supports.split()), description)


#: The registry: every attention model of the student, by name.
MODELS: Mapping[str, AttentionModel] = MappingProxyType({m.name: m for m in (
    _model("tied", True, "full", "theory simulator stability one-start mirror scaled-fine-rules",
           "the paper's student: softmax(x Q Q^T x^T / d) x"),
    _model("untied", False, "full", "theory simulator scaled-fine-rules",
           "separate key and query weights: softmax(x Q K^T x^T / d) x"),
    _model("causal", True, "causal", "theory simulator stability one-start mirror scaled-fine-rules",
           "tied, each token attends to itself and the tokens before it"),
    _model("untied-causal", False, "causal", "theory simulator scaled-fine-rules",
           "untied and causal"),
    _model("cross", True, "cross", "theory simulator stability",
           "cross-attention: the queries attend to the keys only, a key to itself"),
    _model("untied-cross", False, "cross", "theory simulator",
           "cross-attention with separate key and query weights"),
)})


def attention_model(name: str) -> AttentionModel:
    """The registered model ``name`` (``ValueError`` naming the known ones otherwise)."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown attention model {name!r}; known: {', '.join(MODELS)}") from None


def names(part: str | None = None) -> tuple[str, ...]:
    """The registered names, in order; with ``part``, those that ``part`` covers."""
    return tuple(n for n, m in MODELS.items() if part is None or m.covers(part))


def score_mask(variant: str, L: int, keys: int = 0) -> np.ndarray:
    """The scores a token attends to, ``(L, L)`` booleans, for the model named ``variant``: all,
    or ``j <= l`` (causal; docs/model.md (6.2)); cross-attention (``keys`` of the ``L`` tokens are
    keys, the rest queries; docs/model.md (10.2)): a query attends to the keys only, a key to
    itself only."""
    mask = attention_model(variant).mask
    if mask == "causal":
        return np.tril(np.ones((L, L), dtype=np.bool_))
    if mask == "cross":
        if not 0 < keys < L:
            raise ValueError(f"cross-attention needs 0 < keys < L, got keys={keys}, L={L}")
        out = np.zeros((L, L), dtype=np.bool_)
        out[: L - keys, L - keys:] = True
        out[L - keys:, L - keys:] = np.eye(keys, dtype=np.bool_)
        return out
    return np.ones((L, L), dtype=np.bool_)
