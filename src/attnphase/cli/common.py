"""Flags shared by several commands, and turning them into a :class:`ModelSpec`."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

from attnphase.spec.problem import VARIANTS, ModelSpec, parse_matrix, parse_range


def add_model_flags(p: argparse.ArgumentParser, omega: bool = True) -> None:
    """Model flags used by ``solve``, ``transition``, ``curves``, ``simulate``, ``compare``..."""
    if omega:
        p.add_argument("--omega", type=str, default="0.3", help="positional share of the target")
    p.add_argument("--sigma", type=str, default="0.5", help="token noise std (default 0.5)")
    p.add_argument("--lam", type=str, default="0.01", help="ridge penalty lambda (default 0.01)")
    p.add_argument("--A", type=str, default=None, help="positional target, e.g. '0.6,0.4;0.4,0.6'")
    p.add_argument("--L", type=str, default="2", help="number of tokens (default 2)")
    p.add_argument("--rank", type=str, default="1", help="student rank r (default 1)")
    p.add_argument("--teacher-rank", type=str, default="1", help="teacher rank r* (default 1)")
    p.add_argument("--positions", type=str, default=None,
                   help="Gram matrix Pi Pi^T/d of positional embeddings, e.g. '1,-1;-1,1'")
    p.add_argument("--variant", type=str, default="tied", help=f"one of {', '.join(VARIANTS)}")
    p.add_argument("--causal-target", action="store_true", help="causal mask on the target too")
    p.add_argument("--token-corr", type=str, default="0", help="token correlation c")


def to_float(text: str, name: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"--{name} must be a number, got {text!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"--{name} must be finite, got {text!r}")
    return v


def to_int(text: str, name: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ValueError(f"--{name} must be an integer, got {text!r}") from None


def spec_from_args(args: argparse.Namespace, omega: float | None = None) -> ModelSpec:
    """Build and validate the :class:`ModelSpec` named by the model flags."""
    if omega is None:
        omega = to_float(args.omega, "omega")
    return ModelSpec(
        omega=omega,
        sigma=to_float(args.sigma, "sigma"),
        lam=to_float(args.lam, "lam"),
        A=None if args.A is None else parse_matrix(args.A, "--A"),
        L=to_int(args.L, "L"),
        rank=to_int(args.rank, "rank"),
        teacher_rank=to_int(args.teacher_rank, "teacher-rank"),
        positions=None if args.positions is None else parse_matrix(args.positions, "--positions"),
        variant=args.variant,
        causal_target=bool(args.causal_target),
        token_corr=to_float(args.token_corr, "token-corr"),
    )


def alpha_grid(text: str) -> np.ndarray:
    values = np.asarray(parse_range(text, "--alpha"))
    if np.any(values <= 0):
        raise ValueError(f"--alpha values must be > 0, got {values.min()}")
    return values


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def json_text(obj: Any) -> str:
    """One JSON object as text (NaN/inf become ``null``), for stdout and files."""
    return json.dumps(_jsonable(obj), indent=2) + "\n"


def print_json(obj: Any) -> None:
    """Print one JSON object (:func:`json_text`)."""
    sys.stdout.write(json_text(obj))


#: proximal variables per sample (``L`` x fields per position) above which the theory commands
#: warn: the multi-start Newton solve per node costs ~ their 4th power (measured: L = 5, rank 1,
#: ``solve --branch all`` at the defaults, 5 min on 2 cores; L = 2: 13 s)
COSTLY_FIELDS = 6


def warn_theory_cost(spec: ModelSpec) -> None:
    """One warning line on stderr when a theory solve at ``spec`` will be slow."""
    from attnphase.theory.channels import AttentionMap

    n = spec.L * AttentionMap.from_spec(spec).field_dim
    if n > COSTLY_FIELDS:
        sys.stderr.write(
            f"attnphase: warning: {n} proximal variables per sample (L = {spec.L} x {n // spec.L} fields); the "
            f"theory's cost grows like their 4th power (5 variables, L = 5: solve --branch all takes ~5 min on 2 "
            f"cores), so this can take hours; lower --order / --refine-order, or simulate\n"
        )
