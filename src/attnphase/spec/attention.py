"""The attention models of the student: one definition that the theory, the simulator, the command
line and the tests read.

Each :class:`AttentionModel` says how the scores are formed (tied, ``x Q Q^T x^T / d``, or untied,
``x Q K^T x^T / d``: docs/model.md (1.3), (6.1)), which scores a token attends to (its mask: all,
causal ``j <= l``, docs/model.md (6.2), a causal sliding window, or cross-attention, queries
attending to keys only, docs/model.md (10.2): :data:`MASKS`), which parts of the package cover it
(``supports``), the sizes whose proximal kernel is written out in C, and where the conformance check
compares it with training (:class:`Conformance`). :data:`MODELS` is the registry; :func:`attention_model` looks a name up (``ValueError`` naming the known ones) and
:func:`score_mask` builds the mask both halves use, so that a model's mask is written once.

Support flags (the parts of the package that cover a model):

* ``theory``: the self-consistent equations and their solver;
* ``simulator``: gradient descent at finite ``d`` (:mod:`attnphase.sim`);
* ``stability``: the stability of the positional point along ``theta`` (``solve --stability``);
* ``one-start``: the one-start selections (``--response semantic-start / positional-start``,
  docs/model.md (3.7));
* ``mirror``: the fine rules pair nodes with their mirrors (the scatter of the jumping conjugates);
* ``scaled-fine-rules``: the fine rules are drawn at the teacher's scale (two tokens, rank 1);
* ``multi-head``: the student may have several heads (``heads > 1``, docs/model.md section 11).

:data:`ACTIVATIONS` is the registry of attention maps (softmax, sigmoid, ReLU, linear), for the
student and the teacher; :func:`activation` looks one up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

#: the width of the sliding window: a token attends to itself and the ``WINDOW - 1`` tokens before it
WINDOW = 2


def _full(L: int, keys: int) -> np.ndarray:
    return np.ones((L, L), dtype=np.bool_)


def _causal(L: int, keys: int) -> np.ndarray:
    return np.tril(np.ones((L, L), dtype=np.bool_))


def _sliding_window(L: int, keys: int) -> np.ndarray:
    return np.tril(np.ones((L, L), dtype=np.bool_)) & np.triu(np.ones((L, L), dtype=np.bool_), -(WINDOW - 1))


def _cross(L: int, keys: int) -> np.ndarray:
    if not 0 < keys < L:
        raise ValueError(f"cross-attention needs 0 < keys < L, got keys={keys}, L={L}")
    out = np.zeros((L, L), dtype=np.bool_)
    out[: L - keys, L - keys:] = True
    out[L - keys:, L - keys:] = np.eye(keys, dtype=np.bool_)
    return out


@dataclass(frozen=True)
class Mask:
    """Which scores a token attends to: ``build(L, keys)`` gives ``(L, L)`` booleans (row ``l``:
    the tokens ``l`` attends to; ``keys``: cross-attention's key tokens, 0 otherwise)."""

    name: str
    build: Callable[[int, int], np.ndarray]
    description: str


#: the masks, by name (docs/model.md (1.3), (6.2), (10.2))
MASKS: Mapping[str, Mask] = MappingProxyType({k.name: k for k in (
    Mask("full", _full, "every token attends to every token"),
    Mask("causal", _causal, "token l attends to the tokens j <= l (docs/model.md (6.2))"),
    Mask("sliding-window", _sliding_window,
         f"token l attends to the tokens l - {WINDOW - 1} <= j <= l (a causal window of width {WINDOW})"),
    Mask("cross", _cross, "the queries attend to the keys only, a key to itself (docs/model.md (10.2))"),
)})

#: the parts of the package that may cover a model (module docstring)
SUPPORTS = ("theory", "simulator", "stability", "one-start", "mirror", "scaled-fine-rules", "multi-head")


@dataclass(frozen=True)
class Conformance:
    """Where the conformance check (:func:`attnphase.conformance.check_model`) compares the theory
    with gradient descent for a model: the :class:`~attnphase.spec.ModelSpec` fields beside the
    ``variant`` (``changes``), the sample ratio ``alpha``, the theory's ``branch`` (gradient descent
    starts from the start of the same name) and the relative ``tolerance`` within which the mean of
    the runs at ``d = 500`` must agree with the theory on the branch's overlaps and errors."""

    alpha: float
    branch: str = "semantic"
    tolerance: float = 0.1
    changes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class AttentionModel:
    """One attention model of the student: its name (the ``variant`` of :class:`ModelSpec`),
    whether key and query share their weights, its mask (a name of :data:`MASKS`), what covers it,
    the sizes ``(L, rank, keys)`` whose proximal kernel is written out in C
    (:mod:`attnphase.theory.geometries`) and where the conformance check compares theory and
    training."""

    name: str
    tied: bool
    mask: str
    supports: frozenset[str]
    description: str
    conformance: Conformance
    written_out: tuple[tuple[int, int, int], ...] = ()

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

    def field_dim(self, rank: int) -> int:
        """Components of the field per token at student rank ``rank`` (docs/model.md (6.1))."""
        return self.weight_matrices * rank

    @property
    def causal(self) -> bool:
        return self.mask == "causal"

    @property
    def cross(self) -> bool:
        return self.mask == "cross"

    @property
    def masked(self) -> bool:
        """Whether some scores are masked out (any mask but ``full``)."""
        return self.mask != "full"

    def covers(self, part: str) -> bool:
        """Whether ``part`` (one of :data:`SUPPORTS`) covers this model."""
        if part not in SUPPORTS:
            raise ValueError(f"unknown support {part!r}; choose from {', '.join(SUPPORTS)}")
        return part in self.supports


def _model(name: str, tied: bool, mask: str, supports: str, description: str, conformance: Conformance,
           written_out: tuple[tuple[int, int, int], ...] = ()) -> AttentionModel:
    return AttentionModel(name, tied, mask, frozenset(supports.split()), description, conformance, written_out)


#: The registry: every attention model of the student, by name.
MODELS: Mapping[str, AttentionModel] = MappingProxyType({m.name: m for m in (
    _model("tied", True, "full", "theory simulator stability one-start mirror scaled-fine-rules multi-head",
           "the paper's student: softmax(x Q Q^T x^T / d) x", Conformance(alpha=1.5),
           ((2, 1, 0), (3, 1, 0), (4, 1, 0), (5, 1, 0), (2, 2, 0), (3, 2, 0))),
    _model("untied", False, "full", "theory simulator scaled-fine-rules",
           "separate key and query weights: softmax(x Q K^T x^T / d) x", Conformance(alpha=2.5),
           ((2, 1, 0), (3, 1, 0))),
    _model("causal", True, "causal", "theory simulator stability one-start mirror scaled-fine-rules",
           "tied, each token attends to itself and the tokens before it", Conformance(alpha=3.0),
           ((2, 1, 0), (3, 1, 0), (4, 1, 0), (5, 1, 0), (2, 2, 0))),
    _model("untied-causal", False, "causal", "theory simulator scaled-fine-rules",
           "untied and causal", Conformance(alpha=5.0), ((2, 1, 0),)),
    _model("cross", True, "cross", "theory simulator stability",
           "cross-attention: the queries attend to the keys only, a key to itself", Conformance(alpha=2.0),
           ((4, 1, 2),)),
    _model("untied-cross", False, "cross", "theory simulator",
           "cross-attention with separate key and query weights", Conformance(alpha=4.0), ((4, 1, 2),)),
    _model("sliding-window", True, "sliding-window", "theory simulator",
           f"tied, a causal sliding window of width {WINDOW}: each token attends to itself and the "
           f"{WINDOW - 1} before it (the same as causal at L = 2)", Conformance(alpha=3.0, changes=MappingProxyType({"L": 3}))),
)})


@dataclass(frozen=True)
class Activation:
    """An attention map: how a row of scores ``s_l`` (the masked ones excluded) becomes the
    attention weights ``S_l`` (docs/model.md (11.2)), what covers it as the student's map and as
    the teacher's, and where the conformance check compares theory and training."""

    name: str
    formula: str
    description: str
    supports: frozenset[str]
    conformance: Conformance

    def covers(self, part: str) -> bool:
        """Whether ``part`` (``"theory"``, ``"simulator"``) covers this map."""
        return part in self.supports


#: the attention maps, by name (docs/model.md (11.2)): the paper's row softmax and three
#: element-wise maps used in practice in its place. ``sigmoid`` has the bias ``-log L`` that keeps
#: the row sums near one at small scores (``L / (L + 1)`` at ``s = 0``, 1/2 at ``L = 1``); ``relu``
#: and ``linear`` are divided by ``L``.
ACTIVATIONS: Mapping[str, Activation] = MappingProxyType({a.name: a for a in (
    Activation("softmax", "exp(s_lj) / sum_k exp(s_lk)", "the row softmax (the paper's)",
               frozenset({"theory", "simulator"}), Conformance(alpha=1.5)),
    Activation("sigmoid", "1 / (1 + exp(log L - s_lj))", "element-wise sigmoid with the bias -log L",
               frozenset({"theory", "simulator"}), Conformance(alpha=3.0, changes=MappingProxyType({"teacher_activation": "sigmoid"}))),
    Activation("relu", "max(s_lj, 0) / L", "element-wise ReLU divided by L",
               frozenset({"theory", "simulator"}), Conformance(alpha=3.0, changes=MappingProxyType({"teacher_activation": "relu"}))),
    Activation("linear", "s_lj / L", "the scores themselves divided by L",
               frozenset({"theory", "simulator"}), Conformance(alpha=3.0, changes=MappingProxyType({"teacher_activation": "linear"}))),
)})

#: the head gains ``v_h`` of a multi-head student: fixed (``1 / H`` or ``head_gain_values``) or
#: trained (the simulator; the theory minimises the training error over them in a single solve,
#: docs/model.md (11.4))
HEAD_GAINS = ("fixed", "trained")

#: the most heads a student has
MAX_HEADS = 8

#: where the conformance check compares theory and training for two heads: the specialised state
#: (docs/model.md (11.1))
HEADS_CONFORMANCE = Conformance(alpha=2.0, branch="specialised", changes=MappingProxyType({"heads": 2}))

#: the same for two heads with trained gains: the specialised state at ``omega = 0.6``, where it
#: is the global minimum over the gains (docs/model.md (11.4))
TRAINED_HEADS_CONFORMANCE = Conformance(alpha=3.0, branch="specialised",
                                        changes=MappingProxyType({"heads": 2, "head_gains": "trained", "omega": 0.6}))


def activation(name: str) -> Activation:
    """The registered attention map ``name`` (``ValueError`` naming the known ones otherwise)."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}") from None


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
    """The scores a token attends to, ``(L, L)`` booleans, for the model named ``variant``: its
    mask's (:data:`MASKS`) ``build(L, keys)``; ``keys`` of the ``L`` tokens are keys
    (cross-attention, docs/model.md (10.2)), 0 otherwise."""
    return MASKS[attention_model(variant).mask].build(L, keys)
