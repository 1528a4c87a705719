"""Figures of the simulated transition (``alpha_c``, ``docs/model.md`` (5.2)) and of the variants
(6.1)-(6.4) side by side.

* :func:`transition_figure`: ``Delta = eps_t(semantic start) - eps_t(positional start)`` against
  ``alpha`` (seed mean +- standard error, single seeds faint), ``alpha_c_sim`` marked with its band.
* :func:`question_figure`: several :class:`~attnphase.sim.transition.SimTransition` results (one
  per model variant) side by side: their ``Delta`` curves (left) and ``alpha_c_sim`` per variant
  (right), with an optional theory ``alpha_c`` per variant drawn as an open diamond.

Every function returns a :class:`matplotlib.figure.Figure` (Agg canvas, nothing shown). Grid points
where an informed start did not hold (not used for the crossing) are drawn with open markers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from attnphase.plots.style import new_figure, style_axes

if TYPE_CHECKING:  # (the simulator imports torch; a figure needs only the result)
    from attnphase.sim.transition import SimTransition

#: ``gid`` of the vertical line marking ``alpha_c_sim`` (tests and post-processing find it by it).
ALPHA_C_GID = "alpha_c"
_CYCLE = ("#000000", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")


def _label(res: SimTransition) -> str:
    s = res.spec
    return (f"omega={s.omega:g} variant={s.variant} c={s.token_corr:g} value={s.value}"
            + (f"({s.value_rank})" if s.value == "lowrank" else ""))


def _draw_delta(ax: Any, res: SimTransition, color: str, label: str, seeds: bool = True,
                hold_label: bool = True) -> bool:
    """Draw one Delta curve; returns whether it drew open markers (points not used)."""
    a = [p.alpha for p in res.points]
    mean = [p.delta_mean for p in res.points]
    se = [p.delta_se for p in res.points]
    if seeds:
        for k in range(len(res.seeds)):
            ax.plot(a, [p.delta[k] for p in res.points], color=color, alpha=0.2, lw=0.8)
    ax.errorbar(a, mean, yerr=se, color=color, lw=1.5, capsize=3, label=label)
    bad = [i for i, p in enumerate(res.points) if not p.usable]
    if bad:
        ax.plot([a[i] for i in bad], [mean[i] for i in bad], "o", mfc="white", mec=color,
                label="a start did not hold (not used)" if hold_label else None)
    c = res.crossing
    if c.alpha_c is not None:
        ax.axvline(c.alpha_c, color=color, ls="--", lw=1.2, gid=ALPHA_C_GID)
        lo = c.lo if c.lo is not None else c.alpha_c
        hi = c.hi if c.hi is not None else c.alpha_c
        if hi > lo:
            ax.axvspan(lo, hi, color=color, alpha=0.12, lw=0)
    return bool(bad)


def transition_figure(res: SimTransition, title: str | None = None) -> Figure:
    """``Delta(alpha)`` of one :class:`SimTransition` with ``alpha_c_sim`` (dashed, ``gid`` =
    :data:`ALPHA_C_GID`) and its ``+-1 SE`` band (shaded)."""
    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    c = res.crossing
    if c.alpha_c is None:
        lab = f"{_label(res)}\nno crossing: {c.reason}"
    else:
        err = f" +- {c.se:.3f}" if c.se is not None else ""
        lab = f"{_label(res)}\nalpha_c(sim) = {c.alpha_c:.3f}{err}"
    _draw_delta(ax, res, "#000000", lab)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("alpha = n / d")
    ax.set_ylabel("Delta = eps_t(sem. start) - eps_t(pos. start)")
    ax.set_title(title or f"simulated transition, d = {res.d}, {len(res.seeds)} seeds",
                 fontsize=10)
    ax.legend(fontsize=7, loc="best")
    style_axes(ax)
    return fig


def question_figure(
    results: Mapping[str, SimTransition],
    title: str,
    theory: Mapping[str, float | None] | None = None,
    order: Sequence[str] | None = None,
) -> Figure:
    """Compare variants: ``Delta`` curves (left, each ``alpha_c_sim`` dashed) and ``alpha_c_sim``
    with ``+-1 SE`` (right; band ``lo..hi`` as a thin bar). ``theory`` maps a label to a theory
    ``alpha_c`` (open diamond) where the theory covers that variant."""
    if not results:
        raise ValueError("question_figure needs at least one result")
    labels = list(order) if order is not None else list(results)
    fig = new_figure(10.0, 4.0)
    left = fig.add_subplot(1, 2, 1)
    right = fig.add_subplot(1, 2, 2)
    labelled = False
    for i, name in enumerate(labels):
        res = results[name]
        color = _CYCLE[i % len(_CYCLE)]
        labelled |= _draw_delta(left, res, color, name, seeds=False, hold_label=not labelled)
        c = res.crossing
        if c.alpha_c is not None:
            right.errorbar([i], [c.alpha_c], yerr=[[c.se or 0.0], [c.se or 0.0]], fmt="o",
                           color=color, capsize=4, ms=6)
            if c.lo is not None or c.hi is not None:
                lo = c.lo if c.lo is not None else c.alpha_c
                hi = c.hi if c.hi is not None else c.alpha_c
                right.plot([i + 0.12, i + 0.12], [lo, hi], color=color, lw=3, alpha=0.35)
        else:
            right.annotate("no crossing", (i, 0.5), xycoords=("data", "axes fraction"),
                           ha="center", fontsize=7, color=color, rotation=90)
        ac_theory = theory.get(name) if theory else None
        if ac_theory is not None:
            right.plot([i], [ac_theory], "D", mfc="white", mec=color, ms=7,
                       label="theory" if i == 0 else None)
    left.axhline(0.0, color="grey", lw=0.8)
    left.set_xlabel("alpha = n / d")
    left.set_ylabel("Delta = eps_t(sem.) - eps_t(pos.)")
    left.legend(fontsize=7)
    right.set_xlim(-0.5, len(labels) - 0.5)
    right.set_xticks(range(len(labels)))
    right.set_xticklabels(labels, fontsize=8, rotation=15)
    right.set_ylabel("alpha_c (simulation, +- 1 SE)")
    if theory:
        right.legend(fontsize=7)
    for ax in (left, right):
        style_axes(ax)
    ds = sorted({results[n].d for n in labels})
    ns = sorted({len(results[n].seeds) for n in labels})
    fig.suptitle(f"{title}  (d = {'/'.join(map(str, ds))}, "
                 f"{'/'.join(map(str, ns))} seeds)", fontsize=10)
    return fig


__all__ = ["ALPHA_C_GID", "question_figure", "transition_figure"]
