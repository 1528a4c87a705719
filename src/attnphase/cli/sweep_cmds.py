"""Commands ``sweep`` (run / export / status / kinds), ``phase-diagram`` and ``demo``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from attnphase.cli.common import print_json


def _setup_logging(quiet: bool = False) -> None:
    """Log lines of the sweep machinery to stderr (once; nothing when ``quiet``)."""
    log = logging.getLogger("attnphase")
    if not any(getattr(h, "_attnphase_cli", False) for h in log.handlers):
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("attnphase: %(message)s"))
        h._attnphase_cli = True  # type: ignore[attr-defined]
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def _add_backend_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=None,
                   help="local processes (default: every core; 1 runs in-process)")
    p.add_argument("--scheduler", type=str, default=None,
                   help="Dask scheduler address tcp://HOST:PORT (instead of the local pool)")
    p.add_argument("--connect-timeout", type=float, default=5.0,
                   help="seconds to wait for the Dask scheduler (default 5)")
    p.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto",
                   help="progress bar on a terminal, log lines otherwise (default auto)")
    p.add_argument("--quiet", action="store_true", help="no progress or log lines")


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
                   help="recompute points stored with an error")
    r.add_argument("--json", action="store_true", help="print a JSON summary")
    _add_backend_flags(r)
    r.set_defaults(func=cmd_sweep_run)

    e = ssub.add_parser("export", help="export a store to CSV or Parquet")
    e.add_argument("--store", type=str, required=True)
    e.add_argument("--out", type=str, required=True, help="file.csv or file.parquet")
    e.add_argument("--kind", type=str, default=None, help="only points of this kind")
    e.set_defaults(func=cmd_sweep_export)

    s = ssub.add_parser("status", help="count the stored points by kind and status")
    s.add_argument("--store", type=str, required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_sweep_status)

    k = ssub.add_parser("kinds", help="list point kinds and their parameters")
    k.set_defaults(func=cmd_sweep_kinds)


def cmd_sweep_run(args: argparse.Namespace) -> int:
    """``attnphase sweep run``: compute the missing points of a grid into ``--store``."""
    from attnphase.sweeps import run_sweep, sweep_from_args, sweep_from_toml

    if args.config is None and args.kind is None:
        raise ValueError("give --kind (and --param ...) or --config FILE.toml")
    base = sweep_from_toml(args.config, args.kind) if args.config else None
    kind = base.kind if base is not None else args.kind
    sweep = sweep_from_args(kind, args.param, base=base)
    _setup_logging(args.quiet)
    rep = run_sweep(sweep, args.store, workers=args.workers, scheduler=args.scheduler,
                    retry_errors=args.retry_errors,
                    progress="none" if args.quiet else args.progress,
                    connect_timeout_s=args.connect_timeout)
    if args.json:
        print_json({**rep.to_dict(), "store": str(Path(args.store))})
    else:
        logging.getLogger("attnphase.cli").info(
            "sweep done: %d points, %d already stored, %d computed (%d ok, %d errors) in %.1fs",
            rep.total, rep.skipped, rep.computed, rep.ok, rep.errors, rep.elapsed_s)
    return 0


def cmd_sweep_export(args: argparse.Namespace) -> int:
    """``attnphase sweep export``: the store as a CSV or Parquet table."""
    from attnphase.sweeps import export_store

    n = export_store(args.store, args.out, args.kind)
    sys.stdout.write(f"wrote {n} rows to {args.out}\n")
    return 0


def cmd_sweep_status(args: argparse.Namespace) -> int:
    """``attnphase sweep status``: rows per kind and status."""
    from attnphase.sweeps import ResultStore

    with ResultStore(args.store, create=False) as st:
        counts = st.counts()
    if args.json:
        print_json([{"kind": k, "status": s, "count": n} for (k, s), n in sorted(counts.items())])
    else:
        for (k, s), n in sorted(counts.items()):
            sys.stdout.write(f"{k:12s} {s:6s} {n}\n")
    return 0


def cmd_sweep_kinds(args: argparse.Namespace) -> int:
    """``attnphase sweep kinds``: the point kinds and their parameters."""
    from attnphase.sweeps import builtin_kinds

    for k in builtin_kinds().values():
        sys.stdout.write(f"{k.name}: {k.description}\n")
        for p in k.params():
            sys.stdout.write(f"    {p.name} ({p.type}, default {p.default!r}) {p.help}\n")
    return 0
