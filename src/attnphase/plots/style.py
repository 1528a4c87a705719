"""One palette and a few figure helpers shared by every plot of the project.

Branch colours are semantic (``semantic``, ``positional``, ``mixed``, ``trivial``, ``linear``) so
that the same mechanism has the same colour in every figure: :data:`BRANCH_COLORS` is the one
palette, and every plot function, the demo report and the figures of the documentation take their
branch colours from it (a simulation start has the colour of the branch it aims at).
Figures are built with :class:`matplotlib.figure.Figure` directly (Agg canvas, no pyplot
state, nothing shown).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: Colour of each branch / baseline.
BRANCH_COLORS: Mapping[str, str] = MappingProxyType({
    "semantic": "#d62728",     # red
    "positional": "#1f77b4",   # blue
    "mixed": "#ff7f0e",        # orange (rank >= 2: one direction semantic, the other positional)
    "trivial": "#7f7f7f",      # grey
    "specialised": "#8c564b",  # brown (several heads: some semantic, the others positional)
    "linear": "#2ca02c",       # green
    "random": "#9467bd",       # purple (random start in simulations)
    "bayes": "#000000",        # black (the Bayes-optimal baseline)
})

#: Colours and styles of the phase-diagram lines.
LINE_STYLES: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "alpha_c": MappingProxyType({"color": "#000000", "linestyle": "-", "linewidth": 2.0}),
    "spinodal": MappingProxyType({"color": "#000000", "linestyle": "--", "linewidth": 1.2}),
    "alpha_l": MappingProxyType({"color": "#2ca02c", "linestyle": "-.", "linewidth": 2.0}),
})

#: Diverging colour map of a difference semantic minus positional (heat maps), centred at zero:
#: negative (the semantic side lower) towards the semantic red, positive towards the positional blue.
BRANCH_DIFF_CMAP = "RdBu"

#: Diverging colour map of other signed differences (heat maps, e.g. ``eps_g_lin - eps_g``),
#: centred at zero, in colours no branch uses.
DIVERGING_CMAP = "BrBG_r"


def branch_color(name: str) -> str:
    """Colour of a branch (a key of :data:`BRANCH_COLORS`: ``semantic``, ``positional``,
    ``mixed``, ``trivial``, ``specialised``, ``linear``, ``random``, ``bayes``)."""
    try:
        return BRANCH_COLORS[name]
    except KeyError:
        raise ValueError(f"no colour for {name!r}; known: {', '.join(BRANCH_COLORS)}") from None


def new_figure(width: float = 6.0, height: float = 4.0, dpi: int = 110) -> Figure:
    """A fresh Figure on an Agg canvas (no pyplot, nothing global)."""
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def style_axes(ax: object) -> None:
    """Light grid and no top/right spines."""
    ax.grid(True, alpha=0.25, linewidth=0.6)  # type: ignore[attr-defined]
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)  # type: ignore[attr-defined]
