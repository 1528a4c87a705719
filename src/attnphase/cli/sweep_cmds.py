"""Commands ``sweep`` (run / export / status / kinds), ``phase-diagram`` and ``demo``.

Each command imports its machinery when it runs: the parser is built on every call and must not
pull in matplotlib, numba, torch or dask.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path

from attnphase.cli.common import (
    BACKEND,
    OUTPUT,
    SOLVER,
    add_model_flags,
    alpha_grid,
    flag_group,
    print_json,
    save_figure,
    spec_from_args,
    warn_theory_cost,
)
from attnphase.report.demo_settings import MODELS, PARTS, DemoSettings
from attnphase.spec import ModelSpec
from attnphase.spec.defaults import PHASE_ALPHAS, PHASE_OMEGAS, range_text
from attnphase.spec.parse import parse_range


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record."""

    _attnphase_cli = True

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def setup_logging(quiet: bool = False) -> None:
    """Log lines of the sweep machinery to stderr (once; nothing when ``quiet``)."""
    log = logging.getLogger("attnphase")
    if not any(getattr(h, "_attnphase_cli", False) for h in log.handlers):
        h = _StderrHandler()
        h.setFormatter(logging.Formatter("attnphase: %(message)s"))
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (an argparse type)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, got {text!r}")
    return v


def add_backend_flags(p: argparse.ArgumentParser) -> None:
    """Where the points run and which stored points are recomputed (the ``backend`` argument
    group), and the progress lines (``output``)."""
    backend = flag_group(p, BACKEND)
    backend.add_argument("--workers", type=int, default=None,
                         help="local processes (default: every core; 1 runs in-process)")
    backend.add_argument("--scheduler", type=str, default=None,
                         help="Dask scheduler address tcp://HOST:PORT (instead of the local pool)")
    backend.add_argument("--connect-timeout", type=_seconds, default=5.0,
                         help="seconds to wait for the Dask scheduler (default 5)")
    backend.add_argument("--recompute-stale", action="store_true",
                         help="recompute the stored points computed by another numerical revision of "
                              "the code (stale points; otherwise used as they are, with a warning)")
    output = flag_group(p, OUTPUT)
    output.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto",
                        help="progress bar on a terminal, log lines otherwise (default auto)")
    output.add_argument("--quiet", action="store_true", help="no progress or log lines")


def fast_solver() -> list[str]:
    """The solver's ``"fast"`` preset (``SolverSettings.PRESETS``) as ``--solver`` items:
    demo uses it unless ``--solver`` overrides a setting (phase-diagram starts from the same preset,
    :func:`attnphase.phase_diagram`, whose points have the same keys). One QMC scramble per
    transition (``alpha_c`` scatters by ~0.04 between scrambles); ``--solver replicas=3`` stores
    the mean of three with its standard error (3x the time: 10 omegas took 8 min instead of
    2.6 min on 2 cores)."""
    from attnphase.spec.defaults import SOLVER_PRESET
    from attnphase.theory import SolverSettings

    return [f"{k}={v}" for k, v in SolverSettings.PRESETS[SOLVER_PRESET["demo"]].items()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run parameter sweeps into a results store")
    ssub = p.add_subparsers(dest="sweep_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda a: (p.print_help(sys.stderr), 2)[1])

    r = ssub.add_parser("run", help="compute every grid point not yet in the store")
    r.add_argument("--kind", type=str, default=None,
                   help="point kind: theory, transition, simulation, selftest")
    r.add_argument("--param", action="append", default=[], metavar="NAME=VALUES",
                   help="grid axis or fixed value: 'start:stop:num', 'a,b,c' or one value")
    r.add_argument("--config", type=str, default=None, help="TOML sweep file")
    r.add_argument("--store", type=str, required=True, help="SQLite results store")
    r.add_argument("--retry-errors", action="store_true",
                   help="recompute the points stored with an error (the default)")
    r.add_argument("--keep-errors", action="store_true",
                   help="keep the points stored with an error instead of recomputing them (the summary counts them)")
    r.add_argument("--recompute", action="store_true",
                   help="recompute every point of the grid, replacing stored results "
                        "(--recompute-stale: only those of another numerical revision)")
    flag_group(r, OUTPUT).add_argument("--json", action="store_true", help="print a JSON summary")
    add_backend_flags(r)
    r.set_defaults(func=cmd_sweep_run)

    e = ssub.add_parser("export", help="export a store to CSV or Parquet")
    e.add_argument("--store", type=str, required=True)
    flag_group(e, OUTPUT).add_argument("--out", type=str, required=True, help="file.csv or file.parquet")
    e.add_argument("--kind", type=str, default=None, help="only points of this kind")
    e.set_defaults(func=cmd_sweep_export)

    s = ssub.add_parser("status", help="count the stored points by kind and status")
    s.add_argument("--store", type=str, required=True)
    flag_group(s, OUTPUT).add_argument("--json", action="store_true", help="print one JSON list")
    s.set_defaults(func=cmd_sweep_status)

    k = ssub.add_parser("kinds", help="list point kinds and their parameters")
    k.set_defaults(func=cmd_sweep_kinds)

    ph = sub.add_parser("phase-diagram",
                        help="alpha_c, spinodals, alpha_l against omega (or sigma, lam); heat maps with --simulate",
                        description="alpha_c, the spinodals and alpha_l against omega (the default), or against "
                                    "sigma or lam where --sigma or --lam is a range (e.g. --sigma 0.1:2:20 "
                                    "--omega 0.3); with --simulate, heat maps of finite-d training. Stored and "
                                    "resumable.")
    ph.add_argument("--omega", type=str, default=None,
                    help=f"omega grid (default {range_text(PHASE_OMEGAS)}); with a --sigma or --lam range, the one fixed omega "
                         f"(default {ModelSpec().omega:g})")
    ph.add_argument("--alpha", type=str, default=range_text(PHASE_ALPHAS),
                    help=f"alpha grid of the simulation heat maps (default {range_text(PHASE_ALPHAS)})")
    ph.add_argument("--simulate", action="store_true", help="add simulation heat maps")
    ph.add_argument("--d", type=int, default=300, help="dimension of the simulations (default 300)")
    ph.add_argument("--seeds", type=int, default=2, help="seeds per point (default 2)")
    ph.add_argument("--max-steps", type=int, default=None, help="GD step limit of simulations")
    output = flag_group(ph, OUTPUT)
    output.add_argument("--store", type=str, default=None,
                        help="results store (default OUT/results.sqlite)")
    output.add_argument("--out", type=str, default="attnphase-out", help="output folder")
    output.add_argument("--json", action="store_true", help="print the lines as JSON")
    flag_group(ph, SOLVER).add_argument("--solver", action="append", default=[], metavar="NAME=VALUE",
                                        help="theory solver setting, e.g. --solver order=10 (see sweep kinds)")
    add_model_flags(ph, omega=False)
    add_backend_flags(ph)
    ph.set_defaults(func=cmd_phase_diagram)

    dm = sub.add_parser("demo", help="omega=0.3 curves with simulations, phase diagram, "
                                     "HTML report (a few minutes)")
    output = flag_group(dm, OUTPUT)
    output.add_argument("--out", type=str, default="attnphase-out", help="output folder")
    output.add_argument("--store", type=str, default=None,
                        help="results store (default OUT/results.sqlite)")
    dm.add_argument("--only", choices=PARTS, default=None, help="only one part of the demo")
    dm.add_argument("--omega", type=float, default=DemoSettings.omega)
    dm.add_argument("--theory-alpha", type=str, default=DemoSettings.theory_alpha)
    dm.add_argument("--sim-alpha", type=str, default=DemoSettings.sim_alpha)
    dm.add_argument("--d", type=int, default=DemoSettings.d)
    dm.add_argument("--seeds", type=int, default=DemoSettings.seeds)
    dm.add_argument("--max-steps", type=int, default=DemoSettings.max_steps,
                    help=f"GD step limit of simulations (default {DemoSettings.max_steps})")
    dm.add_argument("--momentum", type=float, default=DemoSettings.momentum,
                    help=f"heavy-ball term of the simulations' GD (default {DemoSettings.momentum:g}; "
                         "0: plain GD)")
    dm.add_argument("--phase-omega", type=str, default=DemoSettings.phase_omega)
    flag_group(dm, SOLVER).add_argument("--solver", action="append", default=[], metavar="NAME=VALUE",
                                        help="theory solver setting, e.g. --solver order=10 (see sweep kinds)")
    dm.add_argument("--bayes", action="store_true", help="draw the Bayes-optimal baseline on the curves")
    dm.add_argument("--models", type=str, default="",
                    help=f"further models whose curves the report shows, comma-separated: {', '.join(MODELS)} "
                         "(each at its reference case; the solves take minutes)")
    add_backend_flags(dm)
    dm.set_defaults(func=cmd_demo)


def cmd_sweep_run(args: argparse.Namespace) -> int:
    """``attnphase sweep run``: compute the missing points of a grid into ``--store`` (and the
    points stored with an error, unless ``--keep-errors``). Exit status 1, with one line on
    stderr, when every point computed failed."""
    from attnphase.sweeps import run_sweep, sweep_from_args, sweep_from_toml

    if args.config is None and args.kind is None:
        raise ValueError("give --kind (and --param ...) or --config FILE.toml")
    if args.keep_errors and args.retry_errors:
        raise ValueError("--keep-errors and --retry-errors contradict each other")
    base = sweep_from_toml(args.config, args.kind) if args.config else None
    kind = base.kind if base is not None else args.kind
    sweep = sweep_from_args(kind, args.param, base=base)
    setup_logging(args.quiet)
    rep = run_sweep(sweep, args.store, workers=args.workers, scheduler=args.scheduler,
                    retry_errors=not args.keep_errors, recompute=args.recompute,
                    recompute_stale=args.recompute_stale,
                    progress="none" if args.quiet else args.progress,
                    connect_timeout_s=args.connect_timeout)
    if args.json:
        print_json({**rep.to_dict(), "store": str(Path(args.store))})
    elif rep.ok or not rep.computed:  # (every computed point failed: the one error line below)
        logging.getLogger("attnphase.cli").log(logging.INFO if rep.success else logging.WARNING,
                                               "sweep done: %s", rep.message)
    if rep.computed and not rep.ok:
        sys.stderr.write(f"attnphase sweep run: error: every computed point failed ({rep.errors} of {rep.total}; "
                         f"the errors are stored in {args.store}; sweep export shows them, a rerun retries them): "
                         f"{rep.first_error}\n")
        return 1
    return 0


def cmd_sweep_export(args: argparse.Namespace) -> int:
    """``attnphase sweep export``: the store as a CSV or Parquet table."""
    from attnphase.sweeps import export_store

    n = export_store(args.store, args.out, args.kind)
    sys.stdout.write(f"wrote {n} rows to {args.out}\n")
    return 0


def cmd_sweep_status(args: argparse.Namespace) -> int:
    """``attnphase sweep status``: rows per kind and status, then the stale rows per kind (those
    of another numerical revision than the present code's) and how to recompute them."""
    from attnphase.sweeps import ResultStore, builtin_kinds

    with ResultStore(args.store, create=False) as st:
        revisions = st.revision_counts()
    kinds = builtin_kinds()
    present = {k: kinds[k].revision() for k in sorted({k for k, _, _ in revisions}) if k in kinds}
    counts: dict[tuple[str, str], int] = {}
    stale: dict[tuple[str, str], int] = {}
    for (k, s, rev), n in revisions.items():
        counts[k, s] = counts.get((k, s), 0) + n
        stale[k, s] = stale.get((k, s), 0) + (n if rev is None or rev != present.get(k) else 0)
    if args.json:
        print_json([{"kind": k, "status": s, "count": n, "stale": stale[k, s],
                     "revision": present.get(k)} for (k, s), n in sorted(counts.items())])
        return 0
    for (k, s), n in sorted(counts.items()):
        sys.stdout.write(f"{k:12s} {s:6s} {n}\n")
    per_kind: dict[str, int] = {}
    for (k, _), n in stale.items():
        per_kind[k] = per_kind.get(k, 0) + n
    for k, n in sorted(per_kind.items()):
        if n:
            now = f"the present is {present[k]}" if k in present else "a kind this attnphase does not know"
            sys.stdout.write(f"{k:12s} stale  {n} (computed by another numerical revision; {now})\n")
    if any(per_kind.values()):
        sys.stdout.write("hint: sweep run --recompute-stale with the same grid recomputes the stale rows\n")
    return 0


def cmd_sweep_kinds(args: argparse.Namespace) -> int:
    """``attnphase sweep kinds``: the point kinds and their parameters."""
    from attnphase.sweeps import builtin_kinds

    for k in builtin_kinds().values():
        sys.stdout.write(f"{k.name}: {k.description}\n")
        for p in k.params():
            sys.stdout.write(f"    {p.name} ({p.type}, default {p.default!r}) {p.help}\n")
    return 0


def run_kw(args: argparse.Namespace) -> dict:
    return {"workers": args.workers, "scheduler": args.scheduler,
            "progress": "none" if args.quiet else args.progress,
            "connect_timeout_s": args.connect_timeout, "recompute_stale": args.recompute_stale}


def cmd_phase_diagram(args: argparse.Namespace) -> int:
    """``attnphase phase-diagram``: theory lines (and simulation heat maps), stored, plotted
    (:func:`attnphase.phase_diagram`)."""
    from attnphase import api, api_sweeps
    from attnphase.sweeps.grid import fixed_from_items
    from attnphase.sweeps.kinds import SOLVER_PREFIX
    from attnphase.theory import SolverSettings

    axis, values, omegas = phase_axis(args)
    spec = spec_from_args(args, **{"omega": omegas[0], axis: values[0]})  # validates the model flags
    warn_theory_cost(spec)
    given = fixed_from_items("transition", list(args.solver), prefix=SOLVER_PREFIX)
    settings = SolverSettings.preset(api.DEFAULT_PRESET["phase-diagram"],
                                     **{k[len(SOLVER_PREFIX):]: v for k, v in given.items()})
    alphas: list[float] = alpha_grid(args.alpha).tolist() if args.simulate else []
    if args.simulate and (args.d < 2 or args.seeds < 1):
        raise ValueError("--d must be >= 2 and --seeds >= 1")
    out = Path(args.out)
    store = Path(args.store) if args.store else out / "results.sqlite"
    setup_logging(args.quiet)
    res = api_sweeps.phase_diagram(
        omegas if axis == "omega" else omegas[0], **({} if axis == "omega" else {f"{axis}s": values}),
        alphas=alphas or None, simulate=args.simulate, d=args.d, seeds=args.seeds,
        max_steps=args.max_steps, store=store, settings=settings, workers=args.workers,
        scheduler=args.scheduler, connect_timeout=args.connect_timeout, recompute_stale=args.recompute_stale,
        progress="none" if args.quiet else args.progress, spec=spec)
    out.mkdir(parents=True, exist_ok=True)
    files = save_figure(res.plot(), out, "phase_diagram")
    res.to_frame().to_csv(out / "phase_lines.csv", index=False)
    files.append(out / "phase_lines.csv")
    if args.simulate:
        files += save_figure(res.plot("heatmaps"), out, "phase_heatmaps")
        res.to_frame("heatmaps").to_csv(out / "phase_heatmaps.csv", index=False)
        files.append(out / "phase_heatmaps.csv")
    d = res.to_dict()
    for w, e in zip(d[axis], d["errors"], strict=True):
        if e:
            logging.getLogger("attnphase.cli").warning("transition failed at %s", f"{axis}={w:g}: {e}")
    if args.json:
        print_json({**d, "files": [str(f) for f in files]})
    else:
        for f in files:
            sys.stdout.write(f"wrote {f}\n")
        for w, ac, kind, ex, why in zip(d[axis], d["alpha_c"], d["kind"], d["exchange"], d["reasons"], strict=True):
            if ac is not None:  # (how the global minimum changes, docs/model.md (5.5))
                sys.stdout.write(f"{axis} = {w:g}: alpha_c = {ac:.4g}, {ex}, {kind}\n")
            elif why:
                sys.stdout.write(f"{axis} = {w:g}: {why}\n")
    return 0


def phase_axis(args: argparse.Namespace) -> tuple[str, tuple[float, ...], tuple[float, ...]]:
    """The axis of ``phase-diagram`` (``omega``, or ``sigma`` / ``lam`` where that flag holds
    several values), its values, and the ``omega`` values (the axis', or the one fixed ``omega``:
    ``--omega``, else the model's default). ``ValueError`` for two axes, or several ``--omega``
    with another axis."""
    ranges = {name: parse_range(getattr(args, name), f"--{name}") for name in ("sigma", "lam")}
    several = [name for name, v in ranges.items() if len(v) > 1]
    if len(several) > 1:
        raise ValueError("phase-diagram runs along one parameter: give a range to --omega, --sigma or --lam, not several")
    if not several:
        omegas = parse_range(args.omega or range_text(PHASE_OMEGAS), "--omega")
        return "omega", omegas, omegas
    axis = several[0]
    omegas = parse_range(args.omega, "--omega") if args.omega else (ModelSpec().omega,)
    if len(omegas) > 1:
        raise ValueError(f"phase-diagram along --{axis} holds omega fixed: give one --omega, got {len(omegas)}")
    return axis, ranges[axis], omegas


def cmd_demo(args: argparse.Namespace) -> int:
    """``attnphase demo``: curves + phase diagram + one self-contained HTML report."""
    from attnphase.report.demo import run_demo
    from attnphase.sweeps.grid import fixed_from_items

    solver = fixed_from_items("transition", fast_solver() + list(args.solver), prefix="solver_")
    settings = DemoSettings(
        omega=args.omega, theory_alpha=args.theory_alpha, sim_alpha=args.sim_alpha, d=args.d,
        seeds=args.seeds, phase_omega=args.phase_omega, max_steps=args.max_steps, momentum=args.momentum,
        parts=PARTS if args.only is None else (args.only,), solver=tuple(solver.items()), bayes=args.bayes,
        models=tuple(m.strip() for m in args.models.split(",") if m.strip()))
    setup_logging(args.quiet)
    res = run_demo(args.out, settings, store=args.store, **run_kw(args))
    for f in res.files:
        sys.stdout.write(f"wrote {f}\n")
    sys.stdout.write(f"demo finished in {res.seconds:.0f} s; open {res.report}\n")
    return 0
