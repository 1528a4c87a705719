"""Commands ``simulate`` (finite-d training, a thin shell over :func:`attnphase.simulate`) and
``compare`` (theory versus simulation, a thin shell over :func:`attnphase.compare`).

docs/model.md (1.1)-(1.4) defines what is trained and measured; see :mod:`attnphase.sim`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from attnphase import api, api_sweeps
from attnphase.cli.common import (
    COMMAND_KEY,
    OUTPUT,
    SOLVER,
    add_model_flags,
    alpha_grid,
    check_out_folder,
    command_record,
    flag_group,
    json_text,
    print_record,
    progress_printer,
    save_figure,
    spec_from_args,
    to_float,
    to_int,
)
from attnphase.cli.train_flags import add_train_flags, add_value_flags, seeds_from_args, train_settings

log = logging.getLogger(__name__)


def _spec(args: argparse.Namespace, omega: float | None = None):
    spec = spec_from_args(args, omega=omega)
    return spec.replace(
        value=args.value,
        value_rank=to_int(args.value_rank, "value-rank"),
        lam_lin=to_float(args.lam_lin, "lam-lin"),
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    """``attnphase simulate``: train the attention layer at finite d (:func:`attnphase.simulate`;
    docs/model.md (1.1)-(1.4))."""
    from attnphase.sim.simulate import parse_inits  # (imports torch: only when simulating)

    spec = _spec(args)
    d = to_int(args.d, "d")
    if d < 2:
        raise ValueError(f"--d must be >= 2, got {d}")
    alpha = to_float(args.alpha, "alpha")
    inits = parse_inits(args.init, spec.heads)
    settings = train_settings(args)
    n_test = None if args.n_test is None else to_int(args.n_test, "n-test")
    seeds = seeds_from_args(args)
    res = api.simulate(alpha, d, init=inits, seeds=seeds, n_test=n_test, spec=spec, settings=settings,
                       progress=None if args.json else progress_printer("simulate", "runs"))
    if args.json:
        import torch  # (loaded by the simulation already)

        print_record(args, res.to_dict(), torch_threads=torch.get_num_threads())
        return 0
    w = sys.stdout.write
    w(f"d={res.d} alpha={res.alpha:g} n={res.n} n_test={res.n_test} omega={spec.omega:g} "
      f"sigma={spec.sigma:g} lam={spec.lam:g} variant={spec.variant} value={spec.value} "
      f"optimizer={settings.optimizer} lr={settings.learning_rate:g}\n")
    w(f"{'seed':>4} {'init':>10} {'m':>9} {'theta':>9} {'q':>9} {'train':>10} {'test':>10} "
      f"{'linear':>10} {'steps':>6} {'stop':>9} {'branch':>10}\n")
    for r in res.runs:
        w(f"{r.seed:>4} {r.init:>10} {_fmt(r.m):>9} {_fmt(r.theta):>9} {_fmt(r.q):>9} "
          f"{r.train_loss:>10.6f} {r.test_error:>10.6f} {r.linear_test_error:>10.6f} "
          f"{r.steps:>6} {r.stop:>9} {r.branch:>10}\n")
    w(f"batched training: {len(res.runs)} runs in {res.batch_seconds:.2f} s\n")
    bad = [r for r in res.runs if r.stop == "diverged"]
    if bad:
        hint = (f"; the ridge alone makes gd steps above 2/lam = {2 / spec.lam:.2g} unstable"
                if settings.optimizer == "gd" and spec.lam > 0 else "")
        w(f"note: {len(bad)} of {len(res.runs)} runs diverged (non-finite loss) with {settings.optimizer} at "
          f"lr {settings.learning_rate:g}{hint}: lower --lr\n")
    return 0


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else "matrix"


def scalar_grid_args(args: argparse.Namespace, what: str):
    """``(spec, alphas, d)`` of a command that sweeps ``alpha`` at one ``d`` with scalar overlaps."""
    spec = _spec(args)
    if spec.rank != 1 or spec.teacher_rank != 1:
        raise ValueError(f"{what} scalar overlaps: use --rank 1 --teacher-rank 1")
    alphas = alpha_grid(args.alpha)
    d = to_int(args.d, "d")
    if d < 2:
        raise ValueError(f"--d must be >= 2, got {d}")
    return spec, alphas, d


def cmd_compare(args: argparse.Namespace) -> int:
    """``attnphase compare``: theory branches vs finite-d simulation (figures PNG/PDF, CSV and JSON;
    :func:`attnphase.compare`)."""
    spec, alphas, d = scalar_grid_args(args, "compare plots")
    if args.bayes:  # (refused before anything runs)
        from attnphase.theory.bayes import check_bayes_spec

        check_bayes_spec(spec)
    theory_points = to_int(args.theory_points, "theory-points")
    if theory_points < 2:
        raise ValueError(f"--theory-points must be >= 2, got {theory_points}")
    order = None if args.theory_order is None else to_int(args.theory_order, "theory-order")
    out = check_out_folder(args.out)  # (refused before the training, not after)
    res = api_sweeps.compare(alphas, d, seeds=seeds_from_args(args), theory_points=theory_points,
                             theory_order=order, bayes=args.bayes, spec=spec, settings=train_settings(args))
    out.mkdir(parents=True, exist_ok=True)
    res.to_frame().to_csv(out / "compare.csv", index=False)
    import torch  # (loaded by the simulation already)

    record = {COMMAND_KEY: command_record(args, torch_threads=torch.get_num_threads()), **res.to_dict()}
    (out / "compare.json").write_text(json_text(record))
    save_figure(res.plot(), out, "compare")
    sys.stdout.write(f"wrote {out / 'compare.csv'}, {out / 'compare.json'}, {out / 'compare.png'}, "
                     f"{out / 'compare.pdf'}\n")
    return 0


def register(subparsers: Any) -> None:
    """Add ``simulate`` and ``compare`` to the ``attnphase`` command line."""
    p = subparsers.add_parser("simulate", help="train the attention layer at finite d",
                              description=cmd_simulate.__doc__)
    p.add_argument("--d", type=str, default="1000", help="embedding dimension (default 1000)")
    p.add_argument("--alpha", type=str, default="1.0", help="sample complexity n/d (default 1)")
    add_model_flags(p)
    add_value_flags(p)
    p.add_argument("--init", type=str, default="semantic",
                   help="semantic, positional, random, specialised (several heads: head 0 semantic, the others "
                        "positional), a comma list, or all (default semantic)")
    p.add_argument("--seeds", type=str, default="4", help="number of seeds (default 4)")
    p.add_argument("--seed0", type=str, default="0", help="first seed (default 0)")
    p.add_argument("--n-test", type=str, default=None, help="test sequences (default max(n, 1000))")
    add_train_flags(p, "simulate")
    flag_group(p, OUTPUT).add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_simulate)

    c = subparsers.add_parser("compare", help="theory curves against simulation points",
                              description=cmd_compare.__doc__)
    add_model_flags(c)
    add_value_flags(c)
    grid = ":".join(f"{v:g}" for v in api_sweeps.COMPARE_GRID)
    c.add_argument("--alpha", type=str, default=grid, help=f"alpha grid start:stop:num (default {grid})")
    c.add_argument("--d", type=str, default="500", help="embedding dimension (default 500)")
    c.add_argument("--seeds", type=str, default="3", help="seeds per alpha (default 3)")
    c.add_argument("--seed0", type=str, default="0", help="first seed (default 0)")
    solver = flag_group(c, SOLVER)
    solver.add_argument("--theory-points", type=str, default="12",
                        help="alpha points on the theory curves (default 12)")
    solver.add_argument("--theory-order", type=str, default=None,
                        help="integration order of the theory solver (default: its quick preset)")
    flag_group(c, OUTPUT).add_argument("--out", type=str, default="compare_out", help="output folder")
    c.add_argument("--bayes", action="store_true",
                   help="add the Bayes-optimal overlap and test error (attnphase bayes) as theory rows of kind bayes")
    add_train_flags(c, "compare")
    c.set_defaults(func=cmd_compare)
