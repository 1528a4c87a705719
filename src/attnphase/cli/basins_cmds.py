"""Command ``basins``: which minimum training finds from random starts, over an ``(alpha, omega)``
grid (docs/basins.md), stored point by point in a results store and drawn with the theory lines.

The parser is built on every call: torch, numba and matplotlib are imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnphase.cli.common import (
    OUTPUT,
    SOLVER,
    TRAINING,
    add_model_flags,
    alpha_grid,
    flag_group,
    print_record,
    save_figure,
    spec_from_args,
    to_float,
    to_int,
)
from attnphase.cli.sweep_cmds import add_backend_flags, fast_solver, run_kw, setup_logging
from attnphase.spec.defaults import DEFAULT_LR, number_text, training
from attnphase.spec.parse import parse_range


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("basins", help="state reached from random starts over (alpha, omega), "
                                      "with the theory lines (basin maps)")
    p.add_argument("--alpha", type=str, default="0.2:3:8", help="alpha grid (default 0.2:3:8)")
    p.add_argument("--omega", type=str, default="0:0.45:6", help="omega grid (default 0:0.45:6)")
    p.add_argument("--d", type=str, default="300", help="dimension (default 300)")
    p.add_argument("--seeds", type=str, default="8", help="random starts per point (default 8)")
    p.add_argument("--seed0", type=str, default="0", help="first seed (default 0)")
    p.add_argument("--init-scale", type=str, default="0.1",
                   help="random start Q0 = INIT_SCALE N(0, I) (default 0.1)")
    st = training("basins")
    train = flag_group(p, TRAINING)
    train.add_argument("--optimizer", type=str, default=st["optimizer"],
                       help=f"gd, momentum (gd with heavy ball 0.9) or adam (default {st['optimizer']})")
    train.add_argument("--lr", type=str, default=None, help="step size (default "
                       + ", ".join(f"{number_text(v)} {k}" for k, v in DEFAULT_LR.items()) + "; momentum as gd)")
    train.add_argument("--max-steps", type=str, default=str(st["max_steps"]),
                       help=f"step cap per run (default {st['max_steps']})")
    train.add_argument("--tol", type=str, default=number_text(st["tol"]),
                       help=f"stop a run when ||grad R||/sqrt(d) < tol (default {number_text(st['tol'])})")
    train.add_argument("--dtype", type=str, default=st["dtype"], help=f"float32 or float64 (default {st['dtype']})")
    train.add_argument("--device", type=str, default=st["device"],
                       help=f"cpu or cuda (default {st['device']}; cuda: one worker unless --workers says otherwise)")
    solver = flag_group(p, SOLVER)
    solver.add_argument("--no-theory", action="store_true",
                        help="skip the theory (alpha_c, spinodals, global minimum)")
    solver.add_argument("--solver", action="append", default=[], metavar="NAME=VALUE",
                        help="theory solver setting, e.g. --solver order=10 (see sweep kinds)")
    output = flag_group(p, OUTPUT)
    output.add_argument("--store", type=str, default=None, help="results store (default OUT/results.sqlite)")
    output.add_argument("--out", type=str, default="attnphase-out", help="output folder for figures and CSV")
    output.add_argument("--json", action="store_true", help="print the map as JSON")
    add_model_flags(p, omega=False)
    add_backend_flags(p)
    p.set_defaults(func=cmd_basins)


def cmd_basins(args: argparse.Namespace) -> int:
    """``attnphase basins``: basin fractions and reached errors over ``(alpha, omega)``."""
    from attnphase.sim.basins import BASIN_OPTIMIZERS, basin_settings
    from attnphase.sweeps.basins import basin_map, global_minimum
    from attnphase.sweeps.grid import fixed_from_items

    omegas = parse_range(args.omega, "--omega")
    alphas = alpha_grid(args.alpha).tolist()
    spec = spec_from_args(args, omega=omegas[0])  # validates the model flags
    for om in omegas[1:]:
        spec.replace(omega=om)  # (every omega of the grid is a valid model)
    if args.optimizer not in BASIN_OPTIMIZERS:
        raise ValueError(f"unknown --optimizer {args.optimizer!r}; choose from {', '.join(BASIN_OPTIMIZERS)}")
    settings = {"d": to_int(args.d, "d"), "seeds": to_int(args.seeds, "seeds"),
                "seed0": to_int(args.seed0, "seed0"), "optimizer": args.optimizer,
                "lr": None if args.lr is None else to_float(args.lr, "lr"),
                "max_steps": to_int(args.max_steps, "max-steps"), "tol": to_float(args.tol, "tol"),
                "init_scale": to_float(args.init_scale, "init-scale"), "dtype": args.dtype,
                "device": args.device}
    if settings["d"] < max(2, spec.L):
        raise ValueError(f"--d must be >= max(2, L={spec.L}), got {settings['d']}")
    if settings["seeds"] < 1 or settings["seed0"] < 0:
        raise ValueError("--seeds must be >= 1 and --seed0 >= 0")
    if not settings["init_scale"] > 0:
        raise ValueError(f"--init-scale must be > 0, got {args.init_scale}")
    basin_settings(args.optimizer, settings["lr"], settings["max_steps"], settings["tol"],
                   args.dtype, args.device)  # (a bad value refuses the command before any work)
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.device != "cpu" and args.workers is None and args.scheduler is None:
        args.workers = 1
    base = {k: v for k, v in spec.to_dict().items() if k != "omega"}
    out = Path(args.out)
    store = Path(args.store) if args.store else out / "results.sqlite"
    out.mkdir(parents=True, exist_ok=True)
    setup_logging(args.quiet)
    kw = run_kw(args)
    bm = basin_map(base, omegas, alphas, store, settings, **kw)
    lines = None
    if not args.no_theory:
        from attnphase.sweeps.phase import phase_lines

        solver = fixed_from_items("transition", fast_solver() + list(args.solver), prefix="solver_")
        lines = phase_lines({**base, **solver}, omegas, store, **kw)
        bm = bm.with_global(*global_minimum({**base, **solver}, omegas, alphas, store, **kw))
    from attnphase.plots.basins import plot_basin_errors, plot_basin_fractions

    files = [*save_figure(plot_basin_fractions(bm, lines), out, "basins_fractions"),
             *save_figure(plot_basin_errors(bm), out, "basins_errors")]
    bm.to_frame().to_csv(out / "basins.csv", index=False)
    files.append(out / "basins.csv")
    if args.json:
        record = bm.to_dict()
        if lines is not None:
            record["alpha_c"] = list(lines.alpha_c)
            record["spinodals"] = {k: list(v) for k, v in lines.spinodals.items()}
        record["files"] = [str(f) for f in files]
        print_record(args, record)
        return 0
    w = sys.stdout.write
    w(f"{'omega':>6} {'alpha':>6} {'sem':>5} {'pos':>5} {'mix':>5} {'triv':>5} {'test':>9} "
      f"{'global':>9} {'conv':>5}\n")
    for i, om in enumerate(bm.omega):
        for j, a in enumerate(bm.alpha):
            g = bm.global_test_error[i, j] if bm.global_test_error is not None else float("nan")
            fr = [bm.fractions[s][i, j] for s in ("semantic", "positional", "mixed", "trivial")]
            w(f"{om:>6.3g} {a:>6.3g} " + " ".join(f"{f:>5.2f}" for f in fr)
              + f" {bm.test_error[i, j]:>9.5f} {g:>9.5f} {bm.converged[i, j]:>2d}/{bm.n_runs[i, j]:<2d}\n")
    for e in bm.errors:
        sys.stderr.write(f"attnphase: warning: point failed: {e.splitlines()[0] if e else e}\n")
    for f in files:
        w(f"wrote {f}\n")
    return 0
