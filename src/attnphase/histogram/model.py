"""One-layer transformer for the counting task, with restricted attention.

The input of position ``l`` is ``x_l = [e(t_l) ; p_l]``: a learned token embedding in the
first (semantic) half of the ``d``-dimensional model space and a learned positional
embedding in the second (positional) half. One dot-product attention layer computes

``scores = (W_q M x)(W_k M x)^T / sqrt(d)``,  ``A = softmax(scores)`` (row-wise),

where ``M`` is a fixed 0/1 diagonal projection: onto the positional half
(``attention="positional"``), the semantic half (``"semantic"``) or everything
(``"both"``). Because ``M`` zeroes the other half *before* the query and key maps, that
half cannot influence the scores at all (its gradient is exactly zero). The value map
sees the full input, then a skip connection, LayerNorm and an MLP with one hidden ReLU
layer produce ``L + 1`` logits per position (the count class).

This is the finite-size analogue of the positional / semantic dichotomy of docs/model.md
section 1 (positional vs semantic attention), on the algorithmic task of the paper's
introduction; it is not covered by the asymptotic theory of section 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "ATTENTIONS",
    "ModelConfig",
    "HistogramTransformer",
    "attention_mask",
    "build_model",
    "to_unrestricted",
]

#: Attention restrictions: which half of the input the queries and keys see.
ATTENTIONS = ("positional", "semantic", "both")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of :class:`HistogramTransformer`.

    ``d`` is the model width (token half ``d // 2``, positional half ``d // 2``),
    ``hidden`` the MLP width, ``attention`` one of :data:`ATTENTIONS`.
    """

    L: int = 10
    T: int = 15
    d: int = 64
    hidden: int = 128
    attention: str = "both"

    def __post_init__(self) -> None:
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"attention must be one of {', '.join(ATTENTIONS)}, got {self.attention!r}"
            )
        if self.d < 2 or self.d % 2:
            raise ValueError(f"d must be an even number >= 2, got {self.d}")
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")
        if self.L < 2 or self.T < 2:
            raise ValueError(f"L and T must be >= 2, got L={self.L}, T={self.T}")

    @property
    def n_classes(self) -> int:
        return self.L + 1


def attention_mask(attention: str, d: int) -> torch.Tensor:
    """0/1 vector of length ``d`` selecting the half the queries/keys may see."""
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")
    mask = torch.zeros(d)
    half = d // 2
    if attention in ("semantic", "both"):
        mask[:half] = 1.0
    if attention in ("positional", "both"):
        mask[half:] = 1.0
    return mask


class HistogramTransformer(nn.Module):
    """Embedding -> restricted attention (+ skip) -> LayerNorm -> MLP -> ``L+1`` logits."""

    qk_mask: torch.Tensor

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        half = config.d // 2
        self.token_embedding = nn.Embedding(config.T, half)
        self.position_embedding = nn.Parameter(torch.randn(config.L, half))
        self.query = nn.Linear(config.d, config.d, bias=False)
        self.key = nn.Linear(config.d, config.d, bias=False)
        self.value = nn.Linear(config.d, config.d, bias=False)
        self.norm = nn.LayerNorm(config.d)
        self.mlp = nn.Sequential(
            nn.Linear(config.d, config.hidden),
            nn.ReLU(),
            nn.Linear(config.hidden, config.n_classes),
        )
        self.register_buffer("qk_mask", attention_mask(config.attention, config.d))

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` integer tokens -> ``(B, L, d)`` inputs ``[token half ; position half]``."""
        tok = self.token_embedding(tokens)
        pos = self.position_embedding.unsqueeze(0).expand(tok.shape[0], -1, -1)
        return torch.cat([tok, pos], dim=-1)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Attention scores ``(B, L, L)`` from inputs ``x``; the blocked half is masked out."""
        xm = x * self.qk_mask
        q = self.query(xm)
        k = self.key(xm)
        return q @ k.transpose(-1, -2) / math.sqrt(self.config.d)

    def attention(self, tokens: torch.Tensor) -> torch.Tensor:
        """Row-stochastic attention maps ``(B, L, L)`` (row = query position)."""
        return torch.softmax(self.scores(self.embed(tokens)), dim=-1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, L, L + 1)`` over the count classes."""
        x = self.embed(tokens)
        attn = torch.softmax(self.scores(x), dim=-1)
        h = self.norm(x + attn @ self.value(x))
        return self.mlp(h)


def build_model(config: ModelConfig, seed: int) -> HistogramTransformer:
    """Initialise a model with torch seed ``seed`` without touching the global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return HistogramTransformer(config)


def to_unrestricted(model: HistogramTransformer) -> HistogramTransformer:
    """The same function in the unrestricted (``"both"``) architecture.

    The restriction mask is folded into the query and key weights (``W <- W M``), so the
    new model computes exactly the same scores and outputs, but gradient descent is now
    free to use the previously blocked half.
    """
    cfg = model.config
    new_cfg = ModelConfig(L=cfg.L, T=cfg.T, d=cfg.d, hidden=cfg.hidden, attention="both")
    new = HistogramTransformer(new_cfg).to(model.qk_mask.device)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    mask = state["qk_mask"]
    state["query.weight"] = state["query.weight"] * mask
    state["key.weight"] = state["key.weight"] * mask
    state["qk_mask"] = torch.ones_like(mask)
    new.load_state_dict(state)
    return new
