"""``attnphase histogram``: the counting task (restricted attention, continuation, figures).

torch and matplotlib are imported when the command runs, not to build the parser.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from attnphase._extras import require
from attnphase._json import jsonable
from attnphase.cli.common import OUTPUT, flag_group, print_json, save_figure

__all__ = ["register", "cmd_histogram"]

_T = TypeVar("_T")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "histogram",
        help="counting task: positional vs semantic attention solutions",
        description=(
            "Train one-layer transformers with positional-only and semantic-only attention on "
            "the histogram (counting) task, draw their attention maps, then continue each in "
            "the unrestricted architecture with plain SGD and measure how far it moves. "
            "See docs/histogram.md."
        ),
    )
    p.add_argument("--quick", action="store_true",
                   help="quick configuration: one seed, 2000 Adam + 500 SGD steps")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3, quick 1)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--variants", type=str, default="positional,semantic",
                   help="comma-separated attention variants to train (positional,semantic,both)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="torch device")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: this small model runs fastest on one)")
    output = flag_group(p, OUTPUT)
    output.add_argument("--out", type=str, default="attnphase-histogram",
                        help="directory for figures and the full results JSON")
    output.add_argument("--no-figures", action="store_true", help="do not write figures")
    output.add_argument("--json", action="store_true", help="print the JSON summary on stdout")
    g = p.add_argument_group("sizes (override the default or --quick configuration)")
    g.add_argument("--L", type=int, default=None, help="sequence length (default 10)")
    g.add_argument("--T", type=int, default=None, help="alphabet size (default 15)")
    g.add_argument("--d", type=int, default=None, help="model width, even (default 64)")
    g.add_argument("--hidden", type=int, default=None, help="MLP hidden units (default 128)")
    g.add_argument("--train-size", type=int, default=None, help="training sequences (20000)")
    g.add_argument("--val-size", type=int, default=None, help="validation sequences (2000)")
    g.add_argument("--steps", type=int, default=None, help="Adam steps (4000, quick 2000)")
    g.add_argument("--batch-size", type=int, default=None, help="minibatch size (128)")
    g.add_argument("--lr", type=float, default=None, help="Adam learning rate (3e-3)")
    g.add_argument("--eval-every", type=int, default=None, help="curve resolution in steps")
    g.add_argument("--sgd-steps", type=int, default=None, help="SGD steps (2000, quick 500)")
    g.add_argument("--sgd-lr", type=float, default=None, help="SGD learning rate (0.05)")
    g.add_argument("--examples", type=int, default=None, help="example sequences drawn (3)")
    g.add_argument("--no-reference", action="store_true",
                   help="skip the random-init SGD reference run")
    g.add_argument("--no-control", action="store_true",
                   help="skip the control SGD run that keeps the restriction")
    p.set_defaults(func=cmd_histogram)


def _pick(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def cmd_histogram(args: argparse.Namespace) -> int:
    """Run the counting experiment; write figures and results to ``--out``."""
    require("torch", "attnphase histogram")
    import torch

    from attnphase.histogram import FULL, QUICK, DataConfig, run_experiment

    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda requested but CUDA is not available")
    base = QUICK if args.quick else FULL
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    data = DataConfig(
        L=_pick(args.L, base.data.L),
        T=_pick(args.T, base.data.T),
        n_train=_pick(args.train_size, base.data.n_train),
        n_val=_pick(args.val_size, base.data.n_val),
    )
    batch = _pick(args.batch_size, base.train.batch_size)
    train = replace(
        base.train,
        steps=_pick(args.steps, base.train.steps),
        batch_size=batch,
        lr=_pick(args.lr, base.train.lr),
        eval_every=_pick(args.eval_every, base.train.eval_every),
    )
    cont = replace(
        base.continuation,
        steps=_pick(args.sgd_steps, base.continuation.steps),
        batch_size=batch,
        lr=_pick(args.sgd_lr, base.continuation.lr),
        eval_every=_pick(args.eval_every, base.continuation.eval_every),
        n_probe=min(base.continuation.n_probe, data.n_val),
    )
    config = replace(
        base,
        data=data,
        d=_pick(args.d, base.d),
        hidden=_pick(args.hidden, base.hidden),
        train=train,
        continuation=cont,
        variants=variants,
        seeds=_pick(args.seeds, base.seeds),
        seed=args.seed,
        n_examples=_pick(args.examples, base.n_examples),
        reference=not args.no_reference,
        control=not args.no_control,
    )
    torch.set_num_threads(args.threads)
    logging.getLogger("attnphase").setLevel(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    result = run_experiment(config, device=args.device, progress=sys.stderr.isatty())
    summary = result.summary()
    summary["quick"] = bool(args.quick)
    summary["threads"] = args.threads
    figures: list[str] = []
    if not args.no_figures:
        from attnphase.plots.histogram import (
            plot_attention_maps,
            plot_continuation,
            plot_training_curves,
        )

        figs = {
            "histogram_curves": plot_training_curves(result.training),
            "histogram_attention": plot_attention_maps(result.examples.tokens,
                                                       result.examples.maps),
            "histogram_continuation": plot_continuation(result.continuation, result.reference,
                                                        result.control),
        }
        for name, fig in figs.items():
            figures += [str(path) for path in save_figure(fig, out, name, dpi=130)]
    summary["figures"] = figures
    full = result.to_dict() | {"quick": summary["quick"], "threads": args.threads,
                               "figures": figures}
    (out / "histogram_results.json").write_text(json.dumps(jsonable(full)) + "\n")
    if args.json:
        print_json(summary)
    else:
        _print_table(summary)
    return 0


def _print_table(summary: dict) -> None:
    w = sys.stdout.write
    w(f"{'variant':<11}{'seed':>5}{'train acc':>11}{'val acc':>9}"
      f"{'d_param':>10}{'d_attn':>10}{'val acc after SGD':>19}{'free-ctrl param/attn':>22}\n")
    for r in summary["runs"]:
        c = r["continuation"]
        w(f"{r['variant']:<11}{r['seed']:>5}{r['train_accuracy']:>11.4f}{r['val_accuracy']:>9.4f}"
          f"{c['relative_parameter_change']:>10.3g}{c['attention_change']:>10.3g}"
          f"{c['val_accuracy_after']:>19.4f}")
        dv = r.get("unrestricted_vs_control")
        w(f"{dv['parameter']:>11.3g}/{dv['attention']:<10.3g}\n" if dv else "\n")
    for r in summary["reference"]:
        w(f"{'reference':<11}{r['seed']:>5}{'':>11}{r['val_accuracy_before']:>9.4f}"
          f"{r['relative_parameter_change']:>10.3g}{r['attention_change']:>10.3g}"
          f"{r['val_accuracy_after']:>19.4f}\n")
    w(f"wall time {summary['wall_s']:.1f} s; figures: {len(summary['figures'])} files\n")
