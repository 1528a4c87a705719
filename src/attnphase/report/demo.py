"""The demo (README main job): the headline of the paper in a few minutes on a laptop.

1. ``omega = 0.3`` curves (the reference parameters of ``docs/model.md``): training error, test
   error and overlaps of the semantic and positional branches from the theory (``curve``
   points: continuation in ``alpha``), with finite-``d`` simulation points from both informed
   starts;
2. the theory phase diagram ``alpha_c(omega)``, spinodals, ``alpha_l(omega)``;
3. one self-contained HTML report with both figures, the parameters, the package version and
   a one-line command reproducing each figure.

Theory branches, simulations and transitions all go through the sweep machinery (one pool
keeps every core busy) into one store, so a rerun computes only what is missing.
"""

from __future__ import annotations

import logging
import math
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnphase._version import __version__
from attnphase.plots.phase import plot_curves_with_points, plot_phase_lines
from attnphase.report.demo_settings import MODELS, DemoSettings
from attnphase.report.html import ReportFigure, figure_png, write_report
from attnphase.spec.parse import parse_range
from attnphase.spec.problem import ModelSpec
from attnphase.sweeps.grid import Point, SweepSpec
from attnphase.sweeps.phase import PhaseLines, phase_lines
from attnphase.sweeps.runner import run_sweep
from attnphase.sweeps.store import ResultStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoResult:
    """Files written by the demo and the numbers behind them."""

    out: Path
    report: Path
    files: tuple[Path, ...]
    seconds: float
    lines: PhaseLines | None = None
    curves: Mapping[str, Any] = field(default_factory=dict)


def _nan(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def _fmt(v: float | None) -> str:
    return "none" if v is None else f"{v:.4g}"


def _curve_points(spec: ModelSpec, s: DemoSettings,
                  branches: Sequence[str] = ("semantic", "positional")) -> list[Point]:
    fixed = {**spec.to_dict(), "alphas": s.theory_alpha, **dict(s.solver)}
    return SweepSpec("curve", axes=(("branch", tuple(branches)),), fixed=fixed).points()


def _curve_table(points: Sequence[Point], store: ResultStore) -> dict[str, dict]:
    """Stored theory branches as ``{branch: {"alpha": [...], "train_loss": [...], ...}}``."""
    res = store.results([p.key for p in points])
    out: dict[str, dict] = {}
    for p in points:
        r = res.get(p.key)
        if r is None or r["status"] != "ok":
            logger.warning("theory branch %s failed: %s", p.params["branch"],
                           None if r is None else r["error"])
            continue
        out[p.params["branch"]] = {k: [_nan(v) for v in vals] for k, vals in r["result"].items()
                                   if k != "exists"}
    return out


def _sim_points(spec: ModelSpec, s: DemoSettings) -> list[Point]:
    fixed: dict[str, Any] = {k: v for k, v in spec.to_dict().items()}
    fixed["d"] = s.d
    if s.max_steps is not None:
        fixed["train_max_steps"] = s.max_steps
    sweep = SweepSpec("simulation", axes=(
        ("alpha", parse_range(s.sim_alpha, "--sim-alpha")),
        ("init", ("semantic", "positional")),
        ("seed", tuple(range(s.seeds))),
    ), fixed=fixed)
    return sweep.points()


def _sim_table(points: Sequence[Point], store: ResultStore) -> dict[str, dict]:
    res = store.results([p.key for p in points])
    acc: dict[str, dict[float, list[dict]]] = {}
    for p in points:
        r = res.get(p.key)
        if r is None or r["status"] != "ok":
            continue
        acc.setdefault(p.params["init"], {}).setdefault(p.params["alpha"], []).append(r["result"])
    out: dict[str, dict] = {}
    for init, by_alpha in acc.items():
        cols: dict[str, list[float]] = {k: [] for k in ("alpha", "train_loss", "test_error",
                                                        "theta", "m", "linear_test_error")}
        for a in sorted(by_alpha):
            cols["alpha"].append(a)
            for k in list(cols)[1:]:
                cols[k].append(float(np.nanmean([_nan(r.get(k)) for r in by_alpha[a]])))
        out[init] = cols
    return out


def _write_fig(fig: Any, out: Path, stem: str) -> tuple[bytes, list[Path]]:
    png = figure_png(fig)
    (out / f"{stem}.png").write_bytes(png)
    fig.savefig(out / f"{stem}.pdf")
    return png, [out / f"{stem}.png", out / f"{stem}.pdf"]


def _theory_base(spec: ModelSpec, s: DemoSettings) -> dict[str, Any]:
    """The model's parameters without ``omega``, with the demo's solver settings."""
    return {**{k: v for k, v in spec.to_dict().items() if k != "omega"}, **dict(s.solver)}


def _curves_figure(spec: ModelSpec, s: DemoSettings, store: Path, curve_pts: Sequence[Point],
                   sim_pts: Sequence[Point], out: Path, stem: str, *, bayes: bool, command: str,
                   model: str | None = None) -> tuple[ReportFigure, list[Path], dict[str, Any]]:
    """The curves of one model at the demo's ``omega`` from the store: theory branches,
    simulation points, ``alpha_c``, ``alpha_l`` and the linear baseline; figure, CSV and the
    report's figure entry."""
    tr = phase_lines(_theory_base(spec, s), [s.omega], store, progress="none", workers=1)
    alpha_c, alpha_l, lin = tr.alpha_c[0], tr.alpha_l[0], tr.eps_g_lin[0]
    with ResultStore(store) as st:
        th = _curve_table(curve_pts, st)
        sim = _sim_table(sim_pts, st)
    if bayes:  # the Bayes-optimal baseline on the theory grid (docs/model.md section 8)
        from attnphase.api import bayes as bayes_optimal
        from attnphase.theory.bayes import curve_grid

        grid = parse_range(s.theory_alpha, "--theory-alpha")
        bo = bayes_optimal(curve_grid(min(grid), max(grid), spec.L), omega=s.omega)
        th["bayes"] = {"alpha": list(bo.alphas), "test_error": list(bo.test_errors),
                       "theta": list(bo.overlaps)}
    curves = {"theory": th, "simulation": sim, "alpha_c": alpha_c, "alpha_l": alpha_l,
              "eps_g_lin": lin}
    what = "" if model is None else f"{model} ({', '.join(f'{k} {v}' for k, v in MODELS[model].items())}), "
    fig = plot_curves_with_points(
        th, sim, eps_g_lin=lin, alpha_c=alpha_c, alpha_l=alpha_l,
        title=f"{what}omega = {s.omega:g}: theory (lines) and simulations at d = {s.d} (circles)")
    png, fs = _write_fig(fig, out, stem)
    rows = [{"source": "theory", "branch": b, **dict(zip(c, vals, strict=True))}
            for b, c in th.items() for vals in zip(*c.values(), strict=True)]
    rows += [{"source": f"simulation d={s.d}", "branch": b, **dict(zip(c, vals, strict=True))}
             for b, c in sim.items() for vals in zip(*c.values(), strict=True)]
    pd.DataFrame(rows).to_csv(out / f"{stem}.csv", index=False)
    fs.append(out / f"{stem}.csv")
    cmd = (f"{command} --omega {s.omega:g} --theory-alpha {s.theory_alpha} "
           f"--sim-alpha {s.sim_alpha} --d {s.d} --seeds {s.seeds}" + (" --bayes" if bayes else ""))
    figure = ReportFigure(
        f"Curves at omega = {s.omega:g}" + ("" if model is None else f": {what.rstrip(', ')}"), png,
        caption=(f"Lines: theory branches (semantic, positional). Circles: gradient descent "
                 f"at d = {s.d} from the semantic and the positional start, mean of "
                 f"{s.seeds} seed(s). Vertical lines: alpha_c = {_fmt(alpha_c)} (solid), "
                 f"alpha_l = {_fmt(alpha_l)} (dash-dot); dotted: linear baseline "
                 f"eps_g_lin = {_fmt(lin)}."
                 + (" Black: the Bayes-optimal test error and overlap (attnphase bayes)." if bayes else "")),
        command=cmd, files=tuple(p.name for p in fs),
        params={"omega": s.omega, "d": s.d, "seeds": s.seeds, "simulation alphas": s.sim_alpha,
                "theory alphas": s.theory_alpha, **({} if model is None else dict(MODELS[model]))})
    return figure, fs, curves


def run_demo(out: str | Path, settings: DemoSettings | None = None,
             store: str | Path | None = None, **run_kw: Any) -> DemoResult:
    """Run the demo into ``out`` (see the module docstring); ``run_kw`` go to ``run_sweep``."""
    s = settings or DemoSettings()
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = Path(store) if store is not None else out / "results.sqlite"
    spec = ModelSpec(omega=s.omega)
    base = _theory_base(spec, s)
    omegas = parse_range(s.phase_omega, "--phase-omega")
    files: list[Path] = []
    figures: list[ReportFigure] = []
    lines = None
    curves: dict[str, Any] = {}

    # one sweep for everything that is stored: the pool stays busy on every core
    # (the longest points first: transitions at small omega, where the refinement works hardest,
    # then the refined curves; the short simulations fill the gaps at the end)
    todo: list[Point] = []
    if "phase" in s.parts:
        todo += SweepSpec("transition", axes=(("omega", tuple(sorted(omegas))),), fixed=base).points()
    if "curves" in s.parts:
        curve_pts = _curve_points(spec, s)
        sim_pts = _sim_points(spec, s)
        todo += curve_pts
        todo += SweepSpec("transition", fixed={**base, "omega": s.omega}).points()
        todo += sim_pts
    # further models: their curves, as those of the reference model (the curves part)
    model_specs = {name: ModelSpec(omega=s.omega, **MODELS[name])
                   for name in (s.models if "curves" in s.parts else ())}
    model_pts: dict[str, tuple[list[Point], list[Point]]] = {}
    model_curves: dict[str, Any] = {}
    for name, mspec in model_specs.items():
        model_pts[name] = (_curve_points(mspec, s), _sim_points(mspec, s))
        todo += model_pts[name][0]
        todo += SweepSpec("transition", fixed={**_theory_base(mspec, s), "omega": s.omega}).points()
        todo += model_pts[name][1]
    todo = list({p.key: p for p in todo}.values())  # the omega of the curves may be on the phase grid
    logger.info("demo: %d points (theory branches, simulations at d=%d, transitions)",
                len(todo), s.d)
    run_sweep(todo, store, **run_kw)
    solver_flags = "".join(f" --solver {k[len('solver_'):]}={v}" for k, v in s.solver)
    common_cmd = f"attnphase demo --out {shlex.quote(str(out))}{solver_flags}"

    if "curves" in s.parts:
        fig_, fs, curves = _curves_figure(spec, s, store, curve_pts, sim_pts, out, "curves",
                                          bayes=s.bayes, command=common_cmd + " --only curves")
        files += fs
        figures.append(fig_)
    for name in model_specs:
        fig_, fs, model_curves[name] = _curves_figure(
            model_specs[name], s, store, *model_pts[name], out, f"curves_{name}", bayes=False,
            command=f"{common_cmd} --only curves --models {name}", model=name)
        files += fs
        figures.append(fig_)

    if "phase" in s.parts:
        lines = phase_lines(base, omegas, store, progress="none", workers=1)
        fig = plot_phase_lines(lines)
        png, fs = _write_fig(fig, out, "phase_diagram")
        lines.to_frame().to_csv(out / "phase_lines.csv", index=False)
        fs.append(out / "phase_lines.csv")
        files += fs
        cmd = (f"attnphase phase-diagram --omega {s.phase_omega} --out {shlex.quote(str(out))}"
               f"{solver_flags}")
        figures.append(ReportFigure(
            "Phase diagram (theory)", png,
            caption=("alpha_c(omega): the semantic and positional minima exchange (solid); "
                     "spinodals: where a branch stops existing (dashed); alpha_l(omega): the "
                     "semantic solution beats the dense linear baseline (dash-dot)."),
            command=cmd, files=tuple(p.name for p in fs),
            params={"omega": s.phase_omega}))

    if model_curves:
        curves = {**curves, "models": model_curves}
    params = {**base, "omega (curves)": s.omega, **{f"demo.{k}": v for k, v in asdict(s).items()},
              "store": str(store)}
    seconds = time.perf_counter() - t0
    report = write_report(
        out / "report.html", "attnphase demo: positional vs semantic attention", figures, params,
        __version__,
        intro=("The solvable model of dot-product attention (Cui, Behrens, Krzakala, Zdeborova, "
               "NeurIPS 2024): below alpha_c the attention layer learns from positions, above "
               "it from the meaning of the tokens."),
        notes=[f"Computed in {seconds:.0f} s; reproduce everything with: {common_cmd}"],
    )
    files.append(report)
    return DemoResult(out, report, tuple(files), seconds, lines, curves)
