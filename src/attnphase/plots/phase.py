"""Phase-diagram figures: lines (``docs/model.md`` (5.2)-(5.4)), heat maps, and curves with points.

Every function returns a :class:`matplotlib.figure.Figure` (Agg canvas, nothing shown) and
takes plain data (:class:`~attnphase.sweeps.phase.PhaseLines`,
:class:`~attnphase.sweeps.phase.HeatMaps`, dicts of arrays), so it can be fed from a store.
Axes: ``alpha`` horizontal, the diagram's parameter vertical (``omega`` as in the paper; ``sigma``;
``lam`` on a log scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from attnphase.plots.style import (
    BRANCH_COLORS,
    BRANCH_DIFF_CMAP,
    DIVERGING_CMAP,
    LINE_STYLES,
    branch_color,
    new_figure,
    style_axes,
)

if TYPE_CHECKING:
    from attnphase.sweeps.phase import HeatMaps, PhaseLines


#: the vertical axis' label of a diagram along each parameter
AXIS_LABELS: Mapping[str, str] = {"omega": r"positional share $\omega$", "sigma": r"token noise $\sigma$",
                                  "lam": r"ridge penalty $\lambda$"}


def _label_axis(ax: Any, axis: str, values: np.ndarray) -> None:
    """The vertical axis of a diagram along ``axis``: its label, and a log scale for ``lam``
    (where every value is positive)."""
    ax.set_ylabel(AXIS_LABELS.get(axis, axis))
    if axis == "lam" and values.size and np.all(values > 0):
        ax.set_yscale("log")


def _arr(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def draw_phase_lines(ax: Any, lines: PhaseLines, legend: bool = True) -> None:
    """Draw ``alpha_c(omega)``, its spinodals and ``alpha_l(omega)`` on ``ax``; an ``alpha_c``
    where the global minimum changes continuously (docs/model.md (5.5)) gets an open circle."""
    w = np.asarray(lines.values, dtype=float)
    for name, vals in sorted(lines.spinodals.items()):
        # each spinodal in the colour of its branch (the semantic side: mixed at rank >= 2)
        branch = lines.semantic_side if name == "semantic" else name
        style = {**LINE_STYLES["spinodal"], "color": BRANCH_COLORS.get(branch, "#000000")}
        ax.plot(_arr(vals), w, label=f"spinodal ({branch})", **style)
    for key, marker in (("alpha_c", "o"), ("alpha_l", "s")):
        xs = _arr(getattr(lines, key))
        ax.plot(xs, w, marker=marker, markersize=3, label=rf"$\alpha_{key[-1]}$", **LINE_STYLES[key])
        if key == "alpha_c" and any(k == "continuous" for k in lines.kind):
            # (docs/model.md (5.5)): open circles where the change is continuous (a bifurcation)
            cont = np.array([k == "continuous" for k in lines.kind])
            ax.plot(xs[cont], w[cont], linestyle="none", marker="o", markersize=6, markerfacecolor="white",
                    color=LINE_STYLES[key].get("color"), label=r"$\alpha_c$ continuous (bifurcation)")
        se = _arr(getattr(lines, f"{key}_se", ()) or [None] * len(w))
        if np.isfinite(se).any():  # integration-error bars (standard errors)
            ax.errorbar(xs, w, xerr=np.nan_to_num(se), fmt="none", elinewidth=0.8, capsize=2,
                        color=LINE_STYLES[key].get("color"))
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8, frameon=False)


def plot_phase_lines(lines: PhaseLines, title: str | None = None,
                     searched: tuple[float, float] | None = None) -> Figure:
    """The theory phase diagram: ``alpha_c``, spinodals and ``alpha_l`` against the diagram's
    parameter (``lines.axis``);
    ``searched``: the ``alpha`` range the transitions searched, whose outside is shaded (a line
    that stops at its edge left the range)."""
    fig = new_figure(5.5, 4.0)
    ax = fig.add_subplot()
    draw_phase_lines(ax, lines)
    ac = _arr(lines.alpha_c)
    w = np.asarray(lines.values, dtype=float)
    if np.isfinite(ac).any():
        lo = np.nanmin(np.concatenate([ac, _arr(lines.alpha_l)]))
        hi = np.nanmax(np.concatenate([ac, _arr(lines.alpha_l)]))
        right = max(hi * 1.25, lo + 0.5)
        if searched is not None:
            right = max(right, searched[1] * 1.08)
        ax.set_xlim(0, right)
        # label the regions left and right of the transition line (the positional one low, the
        # other high, clear of the spinodals that run through the middle)
        lo_i, hi_i = (int(np.nanargmin(np.abs(w - np.nanquantile(w, q)))) for q in (0.25, 0.75))
        if np.isfinite(ac[lo_i]):
            ax.text(ac[lo_i] * 0.5, w[lo_i], "positional", color=BRANCH_COLORS["positional"],
                    ha="center", va="center", fontsize=9)
        if np.isfinite(ac[hi_i]):
            # the branch find_transition compared (mixed at rank >= 2), in its own colour
            side = lines.semantic_side
            ax.text(ac[hi_i] + 0.5 * (ax.get_xlim()[1] - ac[hi_i]), w[hi_i], side,
                    color=branch_color(side), ha="center", va="center", fontsize=9)
    if searched is not None:
        left, right = ax.get_xlim()
        for a, b in ((left, searched[0]), (searched[1], right)):
            if b > a:
                ax.axvspan(a, b, color="#7f7f7f", alpha=0.12, linewidth=0)
        ax.text(searched[1], ax.get_ylim()[1], " not searched", color="#555555", fontsize=7,
                ha="left", va="top", rotation=90)
        ax.set_xlim(left, right)
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    _label_axis(ax, lines.axis, w)
    fixed = ", ".join(f"{k} = {lines.params[k]:g}" for k in ("omega", "sigma", "lam")
                      if k != lines.axis and isinstance(lines.params.get(k), (int, float)))
    ax.set_title(title or "Phase diagram (theory)" + (f", {fixed}" if lines.axis != "omega" and fixed else ""),
                 fontsize=10)
    style_axes(ax)
    return fig


def plot_phase_heatmaps(maps: HeatMaps, lines: PhaseLines | None = None) -> Figure:
    """Heat maps with the theory lines on top: measured training-error difference
    (semantic start minus positional start), the test-error difference where the maps carry it,
    and ``eps_g_lin - eps_g``. On a difference, a dot marks a cell whose sign the seeds do not
    resolve (``|mean| < 2`` standard errors)."""
    # (a difference of the two starts in the branch colours: red where the semantic start is lower)
    panels = [(maps.train_diff, maps.train_diff_se,
               r"$\epsilon_t$(semantic start) $-$ $\epsilon_t$(positional start)", BRANCH_DIFF_CMAP)]
    if maps.test_diff is not None:
        panels.append((maps.test_diff, maps.test_diff_se,
                       r"$\epsilon_g$(semantic start) $-$ $\epsilon_g$(positional start)",
                       BRANCH_DIFF_CMAP))
    panels.append((maps.gen_gain, None, r"$\epsilon_g^{\rm lin} - \epsilon_g$", DIVERGING_CMAP))
    fig = new_figure(5.25 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels))
    a = np.asarray(maps.alpha, dtype=float)
    w = np.asarray(maps.values, dtype=float)
    for ax, (z, se, label, cmap) in zip(axes, panels, strict=True):
        z = np.asarray(z, dtype=float)
        finite = z[np.isfinite(z)]
        vmax = float(np.max(np.abs(finite))) if finite.size else 1.0
        vmax = vmax if vmax > 0 else 1.0
        norm = TwoSlopeNorm(vcenter=0.0, vmin=-vmax, vmax=vmax)
        if a.size > 1 and w.size > 1:
            mesh = ax.pcolormesh(a, w, np.ma.masked_invalid(z), cmap=cmap, norm=norm,
                                 shading="nearest")
        else:
            mesh = ax.scatter(np.repeat(a[None, :], w.size, 0).ravel(),
                              np.repeat(w[:, None], a.size, 1).ravel(), c=z.ravel(),
                              cmap=cmap, norm=norm, s=60)
        fig.colorbar(mesh, ax=ax, shrink=0.9)
        if se is not None:
            with np.errstate(invalid="ignore"):
                unresolved = np.abs(z) < 2 * np.asarray(se, dtype=float)
            ii, jj = np.nonzero(unresolved)
            if ii.size:
                ax.plot(a[jj], w[ii], "k.", markersize=3, label="|mean| < 2 s.e.")
        if lines is not None:
            draw_phase_lines(ax, lines, legend=ax is axes[0])
        ax.set_xlim(a.min() - 1e-9, a.max() + 1e-9) if a.size > 1 else None
        ax.set_xlabel(r"$\alpha$")
        _label_axis(ax, maps.axis, w)
        ax.set_title(label, fontsize=10)
    fig.suptitle(f"Simulations at d = {maps.d}, {len(maps.seeds)} seed(s)", fontsize=10)
    return fig


def plot_curves_with_points(
    theory: Mapping[str, Mapping[str, Sequence[float]]],
    points: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    eps_g_lin: float | None = None,
    alpha_c: float | None = None,
    alpha_l: float | None = None,
    title: str | None = None,
) -> Figure:
    """Training error, test error and overlaps against ``alpha`` for each branch.

    ``theory[branch]`` and ``points[start]`` map ``"alpha"``, ``"train_loss"``,
    ``"test_error"``, ``"theta"``, ``"m"`` to equal-length sequences (``None``/NaN allowed);
    ``points[start]["<key>_se"]``, where given, are drawn as error bars (standard errors).
    Lines are theory, markers simulations (coloured by their start).
    """
    fig = new_figure(9.0, 6.5)
    axes = fig.subplots(2, 2).ravel()
    panels = (("train_loss", r"training error $\epsilon_t$"),
              ("test_error", r"test error $\epsilon_g$"),
              ("theta", r"semantic overlap $\theta$"), ("m", r"positional overlap $m$"))
    for ax, (key, label) in zip(axes, panels, strict=True):
        for branch, data in theory.items():
            if key in data:
                ax.plot(_arr(data["alpha"]), _arr(data[key]), color=BRANCH_COLORS.get(branch, "k"),
                        label=f"theory, {branch}")
        for start, data in (points or {}).items():
            if key in data:
                se = data.get(f"{key}_se")
                ax.errorbar(_arr(data["alpha"]), _arr(data[key]),
                            yerr=None if se is None else np.nan_to_num(_arr(se)),
                            linestyle="none", marker="o", markersize=5, markerfacecolor="none",
                            capsize=2, elinewidth=0.9, color=BRANCH_COLORS.get(start, "k"),
                            label=f"simulation, {start} start")
        if key == "test_error" and eps_g_lin is not None:
            ax.axhline(eps_g_lin, color=BRANCH_COLORS["linear"], linestyle=":",
                       label="linear baseline")
        for val, name in ((alpha_c, "alpha_c"), (alpha_l, "alpha_l")):
            if val is not None and np.isfinite(val):
                ax.axvline(val, linewidth=0.8, **{k: v for k, v in LINE_STYLES[name].items()
                                                  if k != "linewidth"})
        ax.set_xlabel(r"$\alpha$")
        ax.set_ylabel(label)
        style_axes(ax)
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].legend(fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
