"""Figures for the counting task (:mod:`attnphase.histogram`).

Each function returns a :class:`matplotlib.figure.Figure` built without pyplot (no backend
is selected, nothing is shown); save it with ``fig.savefig(path)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from attnphase.plots.curves import COLORS

if TYPE_CHECKING:  # (the training module imports torch; a figure needs only the results)
    from attnphase.histogram.train import ContinuationResult, TrainResult

__all__ = ["VARIANT_COLORS", "plot_training_curves", "plot_attention_maps", "plot_continuation"]

#: Colours of the attention variants, taken from the project palette (plots.curves.COLORS).
VARIANT_COLORS = {
    "positional": COLORS["positional"],
    "semantic": COLORS["semantic"],
    "both": COLORS["linear"],
    "reference": COLORS["trivial"],
}


def _color(name: str) -> str:
    return VARIANT_COLORS.get(name, "#000000")


def plot_training_curves(results: Sequence[TrainResult]) -> Figure:
    """Cross-entropy and token accuracy vs Adam step; train dashed, validation solid."""
    fig = Figure(figsize=(10, 4))
    ax_loss, ax_acc = fig.subplots(1, 2)
    seen: set[str] = set()
    for r in results:
        c = _color(r.attention)
        label = r.attention if r.attention not in seen else None
        seen.add(r.attention)
        ax_loss.plot(r.step, r.train_loss, ls="--", color=c, alpha=0.7, lw=1)
        ax_loss.plot(r.step, r.val_loss, ls="-", color=c, lw=1.5, label=label)
        ax_acc.plot(r.step, r.train_accuracy, ls="--", color=c, alpha=0.7, lw=1)
        ax_acc.plot(r.step, r.val_accuracy, ls="-", color=c, lw=1.5, label=label)
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("Adam step")
    ax_loss.set_ylabel("cross-entropy")
    ax_acc.axhline(0.95, color="k", lw=0.8, ls=":")
    ax_acc.set_xlabel("Adam step")
    ax_acc.set_ylabel("token accuracy")
    ax_acc.legend(title="attention (solid: val, dashed: train)", fontsize=8)
    fig.suptitle("Counting task: restricted attention training")
    fig.tight_layout()
    return fig


def plot_attention_maps(tokens: np.ndarray, maps: Mapping[str, np.ndarray]) -> Figure:
    """Grid of attention maps: one row per label in ``maps``, one column per example sequence.

    ``tokens`` is ``(n_examples, L)``; each ``maps[label]`` is ``(n_examples, L, L)``
    (row = query position). Dots mark pairs of equal tokens, which a semantic map follows
    while a positional map is the same for every sequence.
    """
    tokens = np.asarray(tokens)
    labels = list(maps)
    n_ex, L = tokens.shape
    fig = Figure(figsize=(2.6 * n_ex + 1, 2.6 * len(labels) + 0.6))
    axes = np.atleast_2d(fig.subplots(len(labels), n_ex, squeeze=False))
    im = None
    for i, label in enumerate(labels):
        for j in range(n_ex):
            ax = axes[i, j]
            im = ax.imshow(np.asarray(maps[label])[j], vmin=0.0, vmax=1.0, cmap="viridis")
            eq = tokens[j][:, None] == tokens[j][None, :]
            r, c = np.nonzero(eq)
            ax.scatter(c, r, s=4, color="white", marker=".")
            ticks = [str(t) for t in tokens[j]]
            ax.set_xticks(range(L), ticks, fontsize=6)
            ax.set_yticks(range(L), ticks, fontsize=6)
            if j == 0:
                ax.set_ylabel(label, fontsize=9)
            if i == 0:
                ax.set_title(f"example {j}", fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle("Attention maps (rows: query, ticks: tokens; dots: equal tokens)")
    return fig


def plot_continuation(
    continuation: Sequence[ContinuationResult],
    reference: Sequence[ContinuationResult] = (),
    control: Sequence[ContinuationResult] = (),
) -> Figure:
    """Relative parameter change, attention change and validation accuracy vs SGD step
    in the unrestricted model, for each trained solution (solid), the same SGD with the
    restriction kept (``control``, dotted) and the random-init reference (grey)."""
    fig = Figure(figsize=(13, 4))
    ax_p, ax_a, ax_v = fig.subplots(1, 3)
    seen: set[str] = set()
    runs = ([(c, c.start, "-", f"{c.start} -> both") for c in continuation]
            + [(c, c.start, ":", f"{c.start}, restriction kept") for c in control]
            + [(r, "reference", "-", "random init (reference)") for r in reference])
    for c, name, ls, text in runs:
        col = _color(name)
        label = text if text not in seen else None
        seen.add(text)
        ax_p.plot(c.step, c.relative_parameter_change_curve, color=col, ls=ls, label=label)
        ax_a.plot(c.step, c.attention_change_curve, color=col, ls=ls, label=label)
        ax_v.plot(c.step, c.val_accuracy_curve, color=col, ls=ls, label=label)
    ax_p.set_ylabel(r"$\|\theta-\theta_0\| / \|\theta_0\|$")
    ax_a.set_ylabel(r"mean $\|A-A_0\|_F / \|A_0\|_F$")
    ax_v.set_ylabel("validation accuracy")
    for ax in (ax_p, ax_a, ax_v):
        ax.set_xlabel("SGD step (unrestricted model)")
    ax_p.legend(fontsize=8)
    fig.suptitle("Continuation with plain SGD in the unrestricted architecture")
    fig.tight_layout()
    return fig
