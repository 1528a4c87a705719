"""Command ``sim-transition``: locate ``alpha_c`` by simulation for any model variant.

``alpha_c`` is defined in ``docs/model.md`` (5.2), the variants in (6.1)-(6.4); the measurement
(training from the informed starts) is :func:`attnphase.sim.transition.sim_transition`. The
simulator (torch) and matplotlib are imported when the command runs, not to build the parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from attnphase.cli.common import (
    COMMAND_KEY,
    OUTPUT,
    add_model_flags,
    command_record,
    flag_group,
    json_text,
    print_json,
    progress_printer,
    save_figure,
)
from attnphase.cli.sim_cmds import scalar_grid_args
from attnphase.cli.train_flags import add_train_flags, add_value_flags, seeds_from_args, train_settings


def cmd_sim_transition(args: argparse.Namespace) -> int:
    """``attnphase sim-transition``: Delta = eps_t(semantic start) - eps_t(positional start) on an
    alpha grid and alpha_c where it crosses zero (figure PNG/PDF + CSV with --out)."""
    from attnphase.sim.transition import sim_transition

    spec, alphas, d = scalar_grid_args(args, "sim-transition classifies")
    seeds = seeds_from_args(args)
    settings = train_settings(args)
    if args.out is not None:  # (before the training: a folder that cannot be made fails now)
        Path(args.out).mkdir(parents=True, exist_ok=True)
    res = sim_transition(spec, alphas, d, seeds, settings, require_held=not args.keep_all,
                         progress=None if args.json else progress_printer("sim-transition", "runs"))
    import torch  # (loaded by the simulation already)

    out = {COMMAND_KEY: command_record(args, torch_threads=torch.get_num_threads()), **res.to_dict()}
    written: list[Path] = []
    if args.out is not None:
        import pandas as pd

        from attnphase.plots.extensions import transition_figure

        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(res.rows()).to_csv(folder / "sim_transition.csv", index=False)
        (folder / "sim_transition.json").write_text(json_text(out))
        figures = save_figure(transition_figure(res), folder, "sim_transition")
        written = [folder / "sim_transition.csv", folder / "sim_transition.json", *figures]
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    w(f"d={res.d} seeds={list(res.seeds)} omega={spec.omega:g} variant={spec.variant} "
      f"token_corr={spec.token_corr:g} value={spec.value}\n")
    w(f"{'alpha':>7} {'Delta':>11} {'SE':>9} {'held sem':>8} {'held pos':>8} {'test sem':>10} "
      f"{'test pos':>10}\n")
    for p in res.points:
        w(f"{p.alpha:>7.3f} {p.delta_mean:>11.3e} {p.delta_se:>9.2e} {p.held_semantic:>8.2f} "
          f"{p.held_positional:>8.2f} {p.test_semantic_mean:>10.6f} "
          f"{p.test_positional_mean:>10.6f}\n")
    c = res.crossing
    if c.alpha_c is None:
        w(f"alpha_c: none ({c.reason})\n")
    else:
        se = f" +- {c.se:.4f}" if c.se is not None else ""
        band = f" [+-1 SE band {_f(c.lo)} .. {_f(c.hi)}]"
        w(f"alpha_c = {c.alpha_c:.4f}{se}{band} ({c.reason})\n")
    ps = res.seed_summary()
    if ps["mean"] is not None:
        se = f" +- {ps['se']:.4f}" if ps["se"] is not None else ""
        w(f"per-seed crossings: mean {ps['mean']:.4f}{se} ({ps['n_crossing']} of "
          f"{len(res.seeds)} seeds cross)\n")
    w(f"{res.seconds:.1f} s\n")
    for path in written:
        w(f"wrote {path}\n")
    return 0


def _f(v: float | None) -> str:
    return "open" if v is None else f"{v:.4f}"


def register(subparsers: Any) -> None:
    """Add ``sim-transition`` to the ``attnphase`` command line."""
    p = subparsers.add_parser(
        "sim-transition", help="alpha_c by simulation (semantic vs positional start)",
        description=cmd_sim_transition.__doc__)
    add_model_flags(p)
    add_value_flags(p)
    p.add_argument("--alpha", type=str, default="0.6:2.2:9", help="alpha grid start:stop:num")
    p.add_argument("--d", type=str, default="300", help="embedding dimension (default 300)")
    p.add_argument("--seeds", type=str, default="3", help="seeds per alpha (default 3)")
    p.add_argument("--seed0", type=str, default="0", help="first seed (default 0)")
    p.add_argument("--keep-all", action="store_true",
                   help="use grid points where a start did not hold for the crossing too")
    output = flag_group(p, OUTPUT)
    output.add_argument("--json", action="store_true", help="print one JSON object")
    output.add_argument("--out", type=str, default=None, help="folder for CSV, JSON, PNG and PDF")
    add_train_flags(p, "sim-transition")
    p.set_defaults(func=cmd_sim_transition)
