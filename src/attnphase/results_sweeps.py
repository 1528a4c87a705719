"""What :func:`attnphase.curves`, :func:`attnphase.compare` and :func:`attnphase.phase_diagram` return.

Frozen records in the style of :mod:`attnphase.results`: the quantities as fields, ``success``, a
``message`` a person can read, ``to_dict()`` (the JSON record of the matching command),
``to_frame()`` (a tidy pandas DataFrame) and ``plot()`` (a matplotlib Figure drawn by
:mod:`attnphase.plots`; nothing is computed there). pandas and matplotlib are imported only when a
frame or a figure is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from attnphase._json import jsonable
from attnphase.results import BayesResult, TransitionResult
from attnphase.spec.problem import ModelSpec

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from attnphase.sweeps.phase import HeatMaps, PhaseLines
    from attnphase.theory import SolverSettings

__all__ = ["CURVE_QUANTITIES", "CompareResult", "CurvesResult", "PhaseDiagramResult"]

#: the per-point quantities of a followed branch (``BranchPoint.summary()``), the columns of
#: :meth:`CurvesResult.to_frame`
CURVE_QUANTITIES = ("q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations")

#: the branches of ``attnphase curves`` (the semantic side is the mixed branch at rank >= 2, kept
#: under the name ``semantic`` as in ``curves.json``)
CURVE_BRANCHES = ("semantic", "positional")


def _fmt(v: float | None) -> str:
    return "none" if v is None else f"{v:.4f}"


@dataclass(frozen=True)
class CurvesResult:
    """Both branches followed over a grid of ``alpha`` at one model (:func:`attnphase.curves`).

    ``points``: per branch (``semantic``, ``positional``) one record per ``alpha``, as in
    ``curves.json``: ``alpha``, ``exists`` and the ``reason``, the overlaps ``q``, ``m``,
    ``theta`` (docs/model.md (1.5)), ``V``, the training error (4.1), the test error (4.2),
    ``converged``, ``iterations``, the relative ``error_estimate`` of each quantity and whether
    the point was ``refined`` on the fine rules (docs/model.md (7.3)). ``linear_test_error``: the
    dense linear baseline (4.3). ``transition``: ``alpha_c``, ``alpha_l`` and the spinodals
    located from these branches (docs/model.md (5.2)-(5.4); ``None`` when not asked for; its
    ``alpha_c`` and ``alpha_l`` are repeated as fields). ``bayes``: the Bayes-optimal baseline
    (docs/model.md section 8) on a finer grid with its thresholds, the figure's line, and
    ``bayes_on_grid`` its points on ``alphas`` (``None`` when not asked for). ``success``: every
    existing point converged and was refined where the settings refine (``message`` names the
    points kept on the coarse rule, where the refinement did not converge, often next to a
    spinodal) and, when asked for, ``alpha_c`` was located.
    """

    alphas: tuple[float, ...]
    linear_test_error: float
    alpha_c: float | None
    alpha_l: float | None
    points: Mapping[str, tuple[Mapping[str, Any], ...]] = field(repr=False)
    transition: TransitionResult | None = field(repr=False)
    bayes: BayesResult | None = field(repr=False)
    bayes_on_grid: tuple[Mapping[str, Any], ...] | None = field(repr=False)
    spec: ModelSpec = field(repr=False)
    settings: SolverSettings = field(repr=False)
    #: the model, the grid ``alpha``, the solver settings, the version and the kernels that ran
    params: Mapping[str, Any] = field(repr=False)
    success: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase curves`` writes to ``curves.json`` (less its ``command``)."""
        out: dict[str, Any] = {
            "params": self.params, "linear_test_error": self.linear_test_error,
            "transition": None if self.transition is None else self.transition.record,
            "points": {b: list(v) for b, v in self.points.items()},
        }
        if self.bayes is not None:
            out["bayes"] = self.bayes.to_dict()
        return jsonable({**out, "success": self.success, "message": self.message})

    def table(self) -> pd.DataFrame:
        """The wide table of ``curves.csv``: one row per ``alpha``, the columns of both branches
        side by side (:func:`attnphase.plots.curves.curves_table`; NaN where a branch does not
        exist), the Bayes-optimal overlap and test error where computed."""
        from attnphase.plots.curves import curves_table

        sem, pos = ([SimpleNamespace(**{k: _nan(v) for k, v in p.items()}) for p in self.points[b]]
                    for b in CURVE_BRANCHES)
        return curves_table(self.alphas, sem, pos, self.linear_test_error, bayes=self.bayes_on_grid)

    def to_frame(self) -> pd.DataFrame:
        """Tidy: one row per ``alpha`` and branch (``semantic``, ``positional``, and ``bayes``
        where computed), with ``exists``, :data:`CURVE_QUANTITIES` (NaN where the branch does not
        exist), ``refined``, ``test_error_rel_error`` (the relative error estimate of the test
        error) and ``linear_test_error``. The Bayes-optimal rows hold the overlap as ``theta``
        and the test error."""
        import pandas as pd  # (pandas costs ~0.3 s to import: only where a frame is asked for)

        rows = []
        for b in CURVE_BRANCHES:
            for p in self.points[b]:
                ok = bool(p["exists"])
                est = p.get("error_estimate") or {}
                rows.append({"alpha": float(p["alpha"]), "branch": b, "exists": ok,
                             **{k: _nan(p[k]) if ok else math.nan for k in CURVE_QUANTITIES},
                             "refined": bool(p.get("refined")),
                             "test_error_rel_error": _nan(est.get("test_error")) if ok else math.nan,
                             "linear_test_error": self.linear_test_error})
        for p in self.bayes_on_grid or ():
            rows.append({"alpha": float(p["alpha"]), "branch": "bayes", "exists": True,
                         "theta": float(p["overlap"]), "test_error": float(p["test_error"]),
                         "linear_test_error": self.linear_test_error})
        cols = ["alpha", "branch", "exists", *CURVE_QUANTITIES, "refined", "test_error_rel_error",
                "linear_test_error"]
        return pd.DataFrame(rows, columns=cols)

    def plot(self) -> Figure:
        """The figure of ``attnphase curves`` (:func:`attnphase.plots.curves.curves_figure`):
        overlaps, the training-error difference with ``alpha_c``, the test errors with the linear
        baseline and ``alpha_l``."""
        from attnphase.plots.curves import curves_figure

        return curves_figure(self.table(), self.spec, self.transition,
                             bayes=None if self.bayes is None else self.bayes.points)


def _nan(v: Any) -> Any:
    """``None`` (a missing number) as NaN; anything else as it is."""
    return math.nan if v is None else v


@dataclass(frozen=True)
class CompareResult:
    """Theory branches against finite-``d`` training (:func:`attnphase.compare`).

    ``theory``: the rows of the theory curves (each branch but the trivial one followed over
    ``theory_alphas``, docs/model.md (5.1), and the linear baseline (4.3)); ``simulation``: one row
    per seed and start at each ``alpha`` (docs/model.md (1.1)-(1.4)); ``bayes``: the Bayes-optimal
    baseline as theory rows of kind ``bayes`` (empty unless asked for). Every row has the columns
    :data:`attnphase.comparison.COLUMNS`. ``success``: every run met the gradient tolerance.
    """

    alphas: tuple[float, ...]
    d: int
    seeds: tuple[int, ...]
    theory_alphas: tuple[float, ...]
    theory: tuple[Mapping[str, Any], ...] = field(repr=False)
    simulation: tuple[Mapping[str, Any], ...] = field(repr=False)
    bayes: tuple[Mapping[str, Any], ...] = field(repr=False)
    spec: ModelSpec = field(repr=False)
    #: the model, the grids, the seeds, the training and theory settings, the version
    params: Mapping[str, Any] = field(repr=False)
    success: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase compare`` writes to ``compare.json`` (less its
        ``command``): ``params`` and ``rows``, the rows of ``compare.csv`` in its order, then
        ``success`` and ``message``."""
        return jsonable({"params": self.params, "rows": [*self.theory, *self.simulation, *self.bayes],
                         "success": self.success, "message": self.message})

    def to_frame(self) -> pd.DataFrame:
        """The table of ``compare.csv``: one row per theory point (``source == "theory"``) and per
        training run (``source == "simulation"``), columns :data:`attnphase.comparison.COLUMNS`."""
        import pandas as pd

        from attnphase.comparison import COLUMNS

        parts = [pd.DataFrame([dict(r) for r in rows], columns=COLUMNS) for rows in (self.theory, self.simulation)]
        if self.bayes:
            parts.append(pd.DataFrame([dict(r) for r in self.bayes], columns=COLUMNS))
        return pd.concat(parts, ignore_index=True)

    def summary(self) -> pd.DataFrame:
        """One row per ``alpha`` and simulation start: the mean and the standard deviation over
        the seeds of ``test_error``, ``train_loss``, ``theta`` and ``m``, the number of runs and of
        those that met the tolerance, and the theory branch of the same name at that ``alpha``
        where it was followed there (``theory_test_error``, NaN otherwise)."""
        import pandas as pd

        table = self.to_frame()
        sim = table[table["source"] == "simulation"]
        th = table[(table["source"] == "theory") & table["exists"].astype(bool)]
        theory_at = {(float(a), k): float(e) for a, k, e in zip(th["alpha"], th["kind"], th["test_error"], strict=True)}
        rows = []
        for (a, kind), g in sim.groupby(["alpha", "kind"], sort=True):
            row: dict[str, Any] = {"alpha": float(a), "start": kind, "runs": len(g), "converged": int(g["exists"].sum())}
            for col in ("test_error", "train_loss", "theta", "m"):
                row[f"{col}_mean"] = float(g[col].mean())
                row[f"{col}_std"] = float(g[col].std(ddof=1)) if len(g) > 1 else math.nan
            row["theory_test_error"] = theory_at.get((float(a), str(kind)), math.nan)
            rows.append(row)
        return pd.DataFrame(rows)

    def plot(self) -> Figure:
        """The figure of ``attnphase compare`` (:func:`attnphase.plots.compare.compare_figure`):
        test errors, overlaps and the training-error difference, theory lines and simulation
        means with their standard deviations."""
        from attnphase.plots.compare import compare_figure

        return compare_figure(self.to_frame(), spec=self.spec, d=self.d)


#: the keys of the lines in ``attnphase phase-diagram --json`` that :meth:`PhaseDiagramResult.to_dict`
#: gives (followed by ``success`` and ``message``; the command adds ``files``), in its order; ``AXIS``
#: stands for the axis' name (``omega``, ``sigma`` or ``lam``), which holds its values
PHASE_KEYS = ("axis", "AXIS", "alpha_c", "kind", "exchange", "alpha_l", "spinodals", "eps_g_lin", "errors",
              "reasons")


@dataclass(frozen=True)
class PhaseDiagramResult:
    """The phase diagram in ``alpha`` and one model parameter, ``axis``: ``omega`` (the paper's
    diagram), ``sigma`` or ``lam`` (:func:`attnphase.phase_diagram`).

    ``values``: the axis' values (``omegas`` reads them on an ``omega`` diagram). ``lines``: at each
    value ``alpha_c`` (docs/model.md (5.2)), how the global minimum changes
    there (``kind``, ``exchange``; (5.5)), the spinodals (5.3), ``alpha_l`` (5.4) and the linear
    baseline (4.3), with the integration errors where the solver gave them
    (:class:`attnphase.sweeps.phase.PhaseLines`). ``heatmaps``: with ``simulate``, the
    training-error difference of the semantic and positional starts and the gain over the linear
    baseline at finite ``d`` on ``axis x alpha`` (:class:`attnphase.sweeps.phase.HeatMaps`),
    else ``None``. ``store``: the results store the points are kept in (``None``: a temporary one,
    gone with the call). ``computed``, ``stored``: the points this call computed, and those it
    found in the store. ``success``: every transition was computed without error and located
    ``alpha_c``.
    """

    axis: str
    values: tuple[float, ...]
    alpha_c: tuple[float | None, ...]
    store: str | None
    computed: int
    stored: int
    lines: PhaseLines = field(repr=False)
    heatmaps: HeatMaps | None = field(repr=False)
    spec: ModelSpec = field(repr=False)
    settings: SolverSettings = field(repr=False)
    success: bool
    message: str

    @property
    def omegas(self) -> tuple[float, ...]:
        """The ``omega`` values of an ``omega`` diagram (``ValueError`` on another axis)."""
        return self.lines.omega

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase phase-diagram --json`` prints (less its ``files``): the
        lines (:data:`PHASE_KEYS`), then ``success`` and ``message``."""
        d = self.lines.to_dict()
        lines = {self.axis if k == "AXIS" else k: d[self.axis if k == "AXIS" else k] for k in PHASE_KEYS}
        return jsonable({**lines, "success": self.success, "message": self.message})

    def to_frame(self, which: str = "lines") -> pd.DataFrame:
        """``"lines"``: one row per value of the axis (``phase_lines.csv``: ``alpha_c`` and its error,
        ``alpha_l`` and its error, ``kind``, ``exchange``, one ``spinodal_<branch>`` column per
        branch, ``eps_g_lin``, ``error``); ``"heatmaps"``: one row per value of the axis and ``alpha``
        (``phase_heatmaps.csv``; needs ``simulate``)."""
        if which == "lines":
            return self.lines.to_frame()
        if which == "heatmaps":
            return self._maps().to_frame()
        raise ValueError(f"which must be lines or heatmaps, got {which!r}")

    def plot(self, which: str = "lines") -> Figure:
        """``"lines"``: ``alpha_c``, the spinodals and ``alpha_l`` against the axis
        (:func:`attnphase.plots.phase.plot_phase_lines`); ``"heatmaps"``: the simulation heat maps
        with the lines drawn over them (:func:`attnphase.plots.phase.plot_phase_heatmaps`)."""
        from attnphase.plots.phase import plot_phase_heatmaps, plot_phase_lines

        if which == "lines":
            return plot_phase_lines(self.lines)
        if which == "heatmaps":
            return plot_phase_heatmaps(self._maps(), self.lines)
        raise ValueError(f"which must be lines or heatmaps, got {which!r}")

    def _maps(self) -> HeatMaps:
        if self.heatmaps is None:
            raise ValueError("no heat maps: run phase_diagram with simulate=True")
        return self.heatmaps


def phase_message(values: Sequence[float], lines: PhaseLines, computed: int, stored: int) -> tuple[bool, str]:
    """``success`` and ``message`` of a :class:`PhaseDiagramResult`."""
    axis = lines.axis
    located = [w for w, a in zip(lines.values, lines.alpha_c, strict=True) if a is not None]
    failed = [f"{axis} = {w:g}: {e}" for w, e in zip(lines.values, lines.errors, strict=True) if e]
    missing = [f"{w:g}" for w, a, e in zip(lines.values, lines.alpha_c, lines.errors, strict=True)
               if a is None and not e]
    msg = (f"{len(values)} {axis} values: alpha_c located at {len(located)}; {computed} points computed, "
           f"{stored} found in the store")
    if missing:
        msg += f"; no alpha_c at {axis} = {', '.join(missing)} (the reason of each is in its transition record)"
    msg += "".join(f"; failed at {f}" for f in failed)
    return len(located) == len(values) and not failed, msg


def curves_message(spec: ModelSpec, alphas: Sequence[float], points: Mapping[str, Sequence[Mapping[str, Any]]],
                   refine: bool, transition: TransitionResult | None) -> tuple[bool, str]:
    """``success`` and ``message`` of a :class:`CurvesResult`."""
    n = len(alphas)
    parts = [f"omega = {spec.omega:g}: " + ", ".join(
        f"{b} on {sum(bool(p['exists']) for p in points[b])} of {n} alpha" for b in CURVE_BRANCHES)]
    unconverged = [f"{b} at alpha = {p['alpha']:g}" for b in CURVE_BRANCHES for p in points[b]
                   if p["exists"] and not p["converged"]]
    coarse = [f"{b} at alpha = {p['alpha']:g}" for b in CURVE_BRANCHES for p in points[b]
              if p["exists"] and p["converged"] and refine and not p.get("refined")]
    if unconverged:
        parts.append("not converged: " + ", ".join(unconverged))
    if coarse:
        parts.append("the coarse rule's values (the refinement did not converge): " + ", ".join(coarse))
    ok = not unconverged and not coarse
    if transition is not None:
        parts.append(f"alpha_c = {_fmt(transition.alpha_c)}, alpha_l = {_fmt(transition.alpha_l)}")
        if transition.alpha_c is None:
            parts.append("alpha_c not located on the grid")
        ok = ok and transition.success
    return ok, "; ".join(parts)
