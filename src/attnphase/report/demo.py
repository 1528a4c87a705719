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

import json
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
from attnphase.report.html import ReportFigure, ReportTable, figure_png, write_report
from attnphase.spec.parse import parse_range
from attnphase.spec.problem import ModelSpec
from attnphase.sweeps.grid import Point, SweepSpec, fixed_from_items
from attnphase.sweeps.kinds import get_kind
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
    # (the training settings are parameters only where the simulator imports: without it each
    # point is stored as an error that says so)
    known = get_kind("simulation").param_map()
    for name, v in (("train_max_steps", s.max_steps), ("train_momentum", s.momentum or None)):
        if v is not None and name in known:
            fixed[name] = v
    sweep = SweepSpec("simulation", axes=(
        ("alpha", parse_range(s.sim_alpha, "--sim-alpha")),
        ("init", ("semantic", "positional")),
        ("seed", tuple(range(s.seeds))),
    ), fixed=fixed)
    return sweep.points()


#: the simulation quantities averaged over seeds (each with its standard error, ``<name>_se``)
SIM_KEYS = ("train_loss", "test_error", "theta", "m", "linear_test_error")


def _sim_table(points: Sequence[Point], store: ResultStore) -> dict[str, dict]:
    """Stored simulations as ``{start: {"alpha": [...], "runs": [...], "converged": [...],
    "test_error": [...], "test_error_se": [...], ...}}``: per ``alpha``, the runs stored, those
    that met their gradient tolerance, and the mean and standard error (``std / sqrt(n)``, NaN
    below two runs) over the runs that met it; the others are not counted."""
    res = store.results([p.key for p in points])
    acc: dict[str, dict[float, list[dict]]] = {}
    for p in points:
        r = res.get(p.key)
        if r is None or r["status"] != "ok":
            continue
        acc.setdefault(p.params["init"], {}).setdefault(p.params["alpha"], []).append(r["result"])
    out: dict[str, dict] = {}
    for init, by_alpha in acc.items():
        cols: dict[str, list[float]] = {"alpha": [], "runs": [], "converged": []}
        for k in SIM_KEYS:
            cols[k], cols[f"{k}_se"] = [], []
        for a in sorted(by_alpha):
            runs = by_alpha[a]
            met = [r for r in runs if r.get("converged") is True]
            cols["alpha"].append(a)
            cols["runs"].append(len(runs))
            cols["converged"].append(len(met))
            for k in SIM_KEYS:
                x = np.array([_nan(r.get(k)) for r in met], dtype=float)
                x = x[np.isfinite(x)]
                cols[k].append(float(x.mean()) if x.size else math.nan)
                cols[f"{k}_se"].append(float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1
                                       else math.nan)
        out[init] = cols
    return out


def _sim_report_table(sim: Mapping[str, Mapping[str, Sequence[float]]], d: int,
                      name: str) -> ReportTable:
    """The simulation points of a curves figure as a report table (one row per start and
    ``alpha``: runs, runs that met the gradient tolerance, means and standard errors)."""
    cols = ("start", "alpha", "d", "runs", "converged",
            *(c for k in SIM_KEYS for c in (k, f"{k}_se")))
    rows = tuple((init, *(c[k][i] if k != "d" else d for k in cols[1:]))
                 for init, c in sim.items() for i in range(len(c["alpha"])))
    return ReportTable(name, "The simulation points: mean and standard error (se) over the "
                             "runs that met their gradient tolerance", cols, rows)


def _sim_caption(sim: Mapping[str, Mapping[str, Sequence[float]]], s: DemoSettings) -> str:
    """How the simulation points were made and counted, for a caption."""
    pm = get_kind("simulation").param_map()
    tol = pm["train_tol"].default if "train_tol" in pm else None
    steps = s.max_steps if s.max_steps is not None else (
        pm["train_max_steps"].default if "train_max_steps" in pm else None)
    runs = sum(int(x) for c in sim.values() for x in c["runs"])
    met = sum(int(x) for c in sim.values() for x in c["converged"])
    per = "; ".join(f"{init} start {sum(int(x) for x in c['converged'])} of "
                    f"{sum(int(x) for x in c['runs'])}" for init, c in sim.items())
    rule = (f"||grad R|| / sqrt(d) < {tol:g} within {steps} steps" if tol is not None
            else "the gradient tolerance")
    return (f"seeds 0 to {s.seeds - 1} at each alpha: mean +- standard error over the runs that "
            f"met their gradient tolerance ({rule}); {met} of {runs} runs met it"
            + (f" ({per})." if per else ".")
            + " A point without a bar rests on fewer than two runs; a missing point on none.")


#: which notes of a transition (``Transition.notes``) say why each line is missing at an omega
_NOTE_WORDS: Mapping[str, tuple[str, ...]] = {
    "alpha_c": ("no crossing", "do not cross", "alpha_c not located"),
    "alpha_l": ("linear baseline",),
    "semantic": ("not found at the grid end", "probes on the coarse rule"),
    "positional": ("positional branch is not found",),
}


def _transition_notes(base: Mapping[str, Any], omegas: Sequence[float],
                      store: ResultStore) -> dict[float, tuple[str, ...]]:
    """The notes each stored transition of the phase diagram carries, by ``omega``."""
    pts = SweepSpec("transition", axes=(("omega", tuple(float(w) for w in omegas)),),
                    fixed=dict(base)).points()
    res = store.results([p.key for p in pts])
    out: dict[float, tuple[str, ...]] = {}
    for p in pts:
        r = res.get(p.key) or {}
        out[float(p.params["omega"])] = tuple((r.get("result") or {}).get("notes") or ())
    return out


def _transition_grid() -> tuple[float, float, int]:
    """The ``alpha`` grid a stored transition brackets its points on: ``(start, stop, num)``."""
    from attnphase.api import TRANSITION_GRID

    return float(TRANSITION_GRID[0]), float(TRANSITION_GRID[1]), int(TRANSITION_GRID[2])


def _sentence(text: str) -> str:
    """``text`` as a sentence: a leading "the" capitalised (a symbol such as alpha_c is kept)."""
    return "The" + text[3:] if text.startswith("the ") else text


def _omegas(ws: Sequence[float], grid: Sequence[float]) -> str:
    """``ws`` (values of ``grid``) in words: runs of three or more neighbours on the grid as
    ``"a to b"``."""
    idx = sorted(grid.index(w) for w in ws)
    runs: list[list[int]] = []
    for i in idx:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{grid[r[0]]:g} to {grid[r[-1]]:g}" if len(r) >= 3
                     else ", ".join(f"{grid[i]:g}" for i in r) for r in runs)


def line_ends(lines: PhaseLines, notes: Mapping[float, Sequence[str]],
              grid: tuple[float, float] | None = None) -> list[str]:
    """One sentence per line of the phase diagram (``alpha_c``, ``alpha_l``, the spinodals)
    saying at which ``omega`` it is missing and why, from what the transitions recorded: their
    error where one failed, their notes on that line, or, where a spinodal has neither, what the
    search implies (a branch whose end the search does not report existed on the whole ``alpha``
    grid searched, ``grid``: e.g. (0.2, 2.4))."""
    if grid is None:
        grid = _transition_grid()[:2]
    w = [float(x) for x in lines.omega]
    found_c = [v is not None for v in lines.alpha_c]
    series = {"alpha_c": ("alpha_c", lines.alpha_c), "alpha_l": ("alpha_l", lines.alpha_l)}
    for b in ("semantic", "positional"):
        if b in lines.spinodals:
            name = f"the {lines.semantic_side if b == 'semantic' else b} spinodal"
            series[b] = (name, lines.spinodals[b])
    out = []
    for key, (name, vals) in series.items():
        missing = [i for i, v in enumerate(vals) if v is None]
        if not missing:
            out.append(_sentence(f"{name} is found at every omega."))
            continue
        have = [w[i] for i, v in enumerate(vals) if v is not None]
        why: dict[str, list[float]] = {}
        for i in missing:
            if lines.errors[i]:
                reason = f"the transition failed ({lines.errors[i]})"
            else:
                said = [n for n in notes.get(w[i], ()) if any(k in n for k in _NOTE_WORDS[key])]
                if said:
                    reason = "; ".join(said)
                elif key == "positional" and found_c[i]:
                    reason = (f"the positional branch exists on the whole alpha grid searched (up to "
                              f"alpha = {grid[1]:g}): its spinodal lies beyond it")
                elif key == "semantic" and found_c[i]:
                    reason = (f"the {lines.semantic_side} branch exists on the whole alpha grid searched "
                              f"(down to alpha = {grid[0]:g}): its spinodal lies below it")
                else:
                    reason = "the transition records no reason"
            why.setdefault(reason, []).append(w[i])
        where = f"found at omega = {_omegas(have, w)}; " if have else "found at no omega; "
        out.append(_sentence(f"{name}: {where}")
                   + "; ".join(f"missing at omega = {_omegas(ws, w)}: {r}" for r, ws in why.items())
                   + ".")
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
        title=(f"{what}omega = {s.omega:g}: theory (lines) and gradient descent at d = {s.d}, "
               f"{s.seeds} seeds (circles: mean +- standard error)"))
    png, fs = _write_fig(fig, out, stem)
    rows = [{"source": "theory", "branch": b, **dict(zip(c, vals, strict=True))}
            for b, c in th.items() for vals in zip(*c.values(), strict=True)]
    rows += [{"source": f"simulation d={s.d}", "branch": b, **dict(zip(c, vals, strict=True))}
             for b, c in sim.items() for vals in zip(*c.values(), strict=True)]
    pd.DataFrame(rows).to_csv(out / f"{stem}.csv", index=False)
    fs.append(out / f"{stem}.csv")
    cmd = (f"{command} --omega {s.omega:g} --theory-alpha {s.theory_alpha} "
           f"--sim-alpha {s.sim_alpha} --d {s.d} --seeds {s.seeds}"
           + (f" --max-steps {s.max_steps}"
              if s.max_steps not in (None, DemoSettings.max_steps) else "")
           + (f" --momentum {s.momentum:g}" if s.momentum != DemoSettings.momentum else "")
           + (" --bayes" if bayes else ""))
    figure = ReportFigure(
        f"Curves at omega = {s.omega:g}" + ("" if model is None else f": {what.rstrip(', ')}"), png,
        caption=("Lines: theory branches (semantic, positional). Circles: gradient descent "
                 + (f"(heavy-ball momentum {s.momentum:g}) " if s.momentum else "")
                 + f"at d = {s.d} from the semantic and the positional start, "
                 f"{_sim_caption(sim, s)} Vertical lines: alpha_c = {_fmt(alpha_c)} (solid), "
                 f"alpha_l = {_fmt(alpha_l)} (dash-dot); dotted: linear baseline "
                 f"eps_g_lin = {_fmt(lin)}."
                 + (" Black: the Bayes-optimal test error and overlap (attnphase bayes)." if bayes else "")),
        command=cmd, files=tuple(p.name for p in fs),
        params={"omega": s.omega, "d": s.d, "seeds": f"{s.seeds} (0 to {s.seeds - 1})",
                "simulation alphas": s.sim_alpha, "theory alphas": s.theory_alpha,
                **({} if model is None else dict(MODELS[model]))},
        table=_sim_report_table(sim, s.d, "simulation" if model is None else f"simulation-{model}"))
    return figure, fs, curves


#: the value recorded for a solver setting the demo leaves to the sweep kinds' defaults
KIND_DEFAULT = "(the sweep kind's default)"


def default_solver() -> dict[str, Any]:
    """The theory solver settings ``attnphase demo`` uses unless ``--solver`` changes one: the
    preset ``SOLVER_PRESET["demo"]`` (:mod:`attnphase.spec.defaults`; ``SolverSettings.PRESETS``),
    as ``solver_<name>`` sweep values."""
    from attnphase.spec.defaults import SOLVER_PRESET
    from attnphase.theory import SolverSettings

    items = [f"{k}={v}" for k, v in SolverSettings.PRESETS[SOLVER_PRESET["demo"]].items()]
    return fixed_from_items("transition", items, prefix="solver_")


def demo_record(spec: ModelSpec, s: DemoSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """The demo's full parameter record and the defaults to compare it with: the model's fields
    (against ``ModelSpec()``), the theory solver settings ``solver_<name>`` (against the
    ``fast`` preset, :func:`default_solver`) and the demo's settings ``demo.<field>`` (against
    ``DemoSettings()``)."""
    record: dict[str, Any] = dict(spec.to_dict())
    defaults: dict[str, Any] = dict(ModelSpec().to_dict())
    preset, solver = default_solver(), dict(s.solver)
    for k in {**preset, **solver}:
        record[k] = solver.get(k, KIND_DEFAULT)
        defaults[k] = preset.get(k, KIND_DEFAULT)
    demo_defaults = asdict(DemoSettings())
    for k, v in asdict(s).items():
        if k != "solver":
            record[f"demo.{k}"] = list(v) if isinstance(v, tuple) else v
            dv = demo_defaults[k]
            defaults[f"demo.{k}"] = list(dv) if isinstance(dv, tuple) else dv
    return record, defaults


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
    sweep = run_sweep(todo, store, **run_kw)
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
        grid = _transition_grid()
        fig = plot_phase_lines(lines, searched=(grid[0], grid[1]))
        png, fs = _write_fig(fig, out, "phase_diagram")
        lines.to_frame().to_csv(out / "phase_lines.csv", index=False)
        fs.append(out / "phase_lines.csv")
        files += fs
        cmd = (f"attnphase phase-diagram --omega {s.phase_omega} --out {shlex.quote(str(out))}"
               f"{solver_flags}")
        with ResultStore(store) as st:
            tr_notes = _transition_notes(base, omegas, st)
        figures.append(ReportFigure(
            "Phase diagram (theory)", png,
            caption=(f"Theory at {len(omegas)} values of omega. alpha_c(omega): the semantic "
                     "and positional minima exchange (solid black, with the integration error as "
                     "bars); spinodals: where a branch stops existing (dashed, in the colour of "
                     "the branch); alpha_l(omega): the global minimum beats the dense linear "
                     "baseline (dash-dot green). Each transition brackets these points on the "
                     f"alpha grid {grid[0]:g} to {grid[1]:g} ({grid[2]} points; shaded outside), "
                     "then bisects. Where the lines end: "
                     + " ".join(line_ends(lines, tr_notes, (grid[0], grid[1])))),
            command=cmd, files=tuple(p.name for p in fs),
            params={"omega": s.phase_omega}))

    if model_curves:
        curves = {**curves, "models": model_curves}
    params, defaults = demo_record(spec, s)
    (out / "params.json").write_text(json.dumps(params, indent=1, default=str) + "\n",
                                     encoding="utf-8")
    files.append(out / "params.json")
    seconds = time.perf_counter() - t0
    report = write_report(
        out / "report.html", "attnphase demo: positional vs semantic attention", figures, params,
        __version__,
        intro=("The solvable model of dot-product attention (Cui, Behrens, Krzakala, Zdeborova, "
               "NeurIPS 2024): below alpha_c the attention layer learns from positions, above "
               "it from the meaning of the tokens."),
        notes=[f"This run took {seconds:.0f} s and computed {sweep.computed} of its "
               f"{sweep.total} points (the others were read from the store); reproduce "
               f"everything with: {common_cmd}",
               f"Results store: {store} (a rerun computes only what it lacks)."],
        defaults=defaults, record_file="params.json",
    )
    files.append(report)
    return DemoResult(out, report, tuple(files), seconds, lines, curves)
