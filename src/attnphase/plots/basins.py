"""Basin-map figures (docs/basins.md): fraction of random starts reaching each state over
``(alpha, omega)`` with the theory's ``alpha_c(omega)`` and spinodals (``docs/model.md``
(5.2)-(5.3)) on top, and the mean test error reached against the global minimum's.

Every function takes plain data (:class:`~attnphase.sweeps.basins.BasinMap`,
:class:`~attnphase.sweeps.phase.PhaseLines`) and returns a :class:`matplotlib.figure.Figure`
(Agg canvas, nothing shown); nothing is computed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from attnphase.plots.phase import draw_phase_lines
from attnphase.plots.style import branch_color, new_figure, style_axes

if TYPE_CHECKING:
    from attnphase.sweeps.basins import BasinMap
    from attnphase.sweeps.phase import PhaseLines


def _title(bm: BasinMap) -> str:
    s = bm.settings
    return (f"d = {bm.d}, {s.get('seeds')} random starts per point, {s.get('optimizer')}, "
            f"init scale {s.get('init_scale')}, step cap {s.get('max_steps')}")


def plot_basin_fractions(bm: BasinMap, lines: PhaseLines | None = None) -> Figure:
    """One panel per state: the fraction of runs reaching it (0 white to 1 the state's colour),
    with ``alpha_c(omega)`` and the spinodals of ``lines`` drawn on top."""
    from matplotlib.colors import LinearSegmentedColormap

    states = tuple(bm.fractions)
    fig = new_figure(3.3 * len(states), 3.4)
    axes = fig.subplots(1, len(states), sharey=True)
    a = np.asarray(bm.alpha, dtype=float)
    w = np.asarray(bm.omega, dtype=float)
    for ax, state in zip(np.atleast_1d(axes), states, strict=True):
        color = branch_color(state)
        cmap = LinearSegmentedColormap.from_list(state, ["#ffffff", color])
        z = np.ma.masked_invalid(np.asarray(bm.fractions[state], dtype=float))
        if a.size > 1 and w.size > 1:
            mesh = ax.pcolormesh(a, w, z, cmap=cmap, vmin=0, vmax=1, shading="nearest")
        else:
            mesh = ax.scatter(np.repeat(a[None, :], w.size, 0).ravel(),
                              np.repeat(w[:, None], a.size, 1).ravel(), c=z.ravel(), cmap=cmap,
                              vmin=0, vmax=1, s=80, edgecolors="k", linewidths=0.3)
        if lines is not None:
            draw_phase_lines(ax, lines, legend=ax is np.atleast_1d(axes)[0])
        if a.size > 1:
            step = float(np.min(np.diff(np.sort(a)))) / 2
            ax.set_xlim(a.min() - step, a.max() + step)
        if w.size > 1:
            step = float(np.min(np.diff(np.sort(w)))) / 2
            ax.set_ylim(w.min() - step, w.max() + step)
        ax.set_xlabel(r"$\alpha$")
        ax.set_title(f"{state}", fontsize=10)
    np.atleast_1d(axes)[0].set_ylabel(r"$\omega$")
    fig.colorbar(mesh, ax=axes, shrink=0.85, label="fraction of runs")
    fig.suptitle("State reached from random starts: " + _title(bm), fontsize=9)
    return fig


def plot_basin_errors(bm: BasinMap) -> Figure:
    """Mean test error reached (markers, standard-error bars) against ``alpha``, one colour per
    ``omega``, with the global minimum's test error (lines) where the map carries it; right:
    the gap ``reached - global`` as a heat map."""
    fig = new_figure(10.0, 4.0)
    ax, ax2 = fig.subplots(1, 2)
    a = np.asarray(bm.alpha, dtype=float)
    w = np.asarray(bm.omega, dtype=float)
    cmap = colormaps["viridis"]
    for i, om in enumerate(w):
        c = cmap(i / max(len(w) - 1, 1))
        ax.errorbar(a, bm.test_error[i], yerr=np.nan_to_num(bm.test_error_se[i]), fmt="o",
                    markersize=3, color=c, capsize=2, label=rf"$\omega$ = {om:.3g}")
        if bm.global_test_error is not None:
            ax.plot(a, bm.global_test_error[i], "-", color=c, linewidth=1.2)
    ax.set_xlabel(r"$\alpha$")
    ax.set_ylabel(r"test error $\epsilon_g$")
    ax.set_title("reached (markers) vs global minimum (lines)", fontsize=9)
    ax.legend(fontsize=7, frameon=False, ncol=2)
    style_axes(ax)
    if bm.global_test_error is not None:
        gap = np.asarray(bm.test_error, dtype=float) - np.asarray(bm.global_test_error, dtype=float)
        finite = gap[np.isfinite(gap)]
        vmax = float(np.max(np.abs(finite))) if finite.size else 1.0
        vmax = vmax if vmax > 0 else 1.0
        if a.size > 1 and w.size > 1:
            mesh = ax2.pcolormesh(a, w, np.ma.masked_invalid(gap), cmap="RdBu_r", vmin=-vmax,
                                  vmax=vmax, shading="nearest")
        else:
            mesh = ax2.scatter(np.repeat(a[None, :], w.size, 0).ravel(),
                               np.repeat(w[:, None], a.size, 1).ravel(), c=gap.ravel(),
                               cmap="RdBu_r", vmin=-vmax, vmax=vmax, s=80)
        fig.colorbar(mesh, ax=ax2, shrink=0.9, label=r"$\epsilon_g$(reached) $-$ $\epsilon_g$(global)")
        ax2.set_xlabel(r"$\alpha$")
        ax2.set_ylabel(r"$\omega$")
        ax2.set_title("excess test error of what training finds", fontsize=9)
    else:
        ax2.set_axis_off()
        ax2.text(0.5, 0.5, "global minimum not computed", ha="center", va="center")
    fig.suptitle(_title(bm), fontsize=9)
    return fig


__all__ = ["plot_basin_errors", "plot_basin_fractions"]
