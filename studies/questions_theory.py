"""The theory's alpha_c for the reviewers' questions (the table "Theory next to the simulations" of
docs/questions.md): one ``find_transition`` per variant the solver covers, at the transition
settings (branches on 2^8 x 4 QMC nodes, the points that locate alpha_c and alpha_l refined on
4 x 2^10 x 4 nodes) with three independent scrambles (mean and spread), written to
docs/data/q_theory.csv.

Reproduce: ``python studies/questions_theory.py [LABEL ...]`` (about 15 min on 2 cores; the
untied case ~3 min each; with labels only those rows are recomputed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnphase.spec.problem import ModelSpec
from attnphase.theory import SolverSettings, find_transition
from attnphase.theory.fixed_point import FAST

CASES: list[tuple[str, dict[str, Any], tuple[float, float, int]]] = [
    # (label as in studies/questions.py, spec keywords, alpha grid)
    ("c = 0", {"omega": 0.3}, (0.2, 2.4, 12)),
    ("c = 0.2", {"omega": 0.3, "token_corr": 0.2}, (0.4, 3.6, 12)),
    ("c = 0.4", {"omega": 0.3, "token_corr": 0.4}, (0.6, 6.0, 14)),
    ("causal", {"omega": 0.3, "variant": "causal"}, (0.4, 4.0, 13)),
    ("tied, omega = 0.2", {"omega": 0.2}, (0.2, 2.4, 12)),
    ("untied, omega = 0.3", {"omega": 0.3, "variant": "untied"}, (0.4, 4.0, 13)),
]


def main() -> None:
    only = sys.argv[1:]  # (labels to recompute; the other rows of the CSV are kept)
    out = Path(__file__).resolve().parent.parent / "docs" / "data" / "q_theory.csv"
    kept = pd.read_csv(out) if only and out.exists() else None
    rows = []
    for label, kw, (a0, a1, n) in CASES:
        if only and label not in only:
            continue
        for seed in (0, 1, 2):
            t0 = time.perf_counter()
            tr = find_transition(ModelSpec(**kw), np.linspace(a0, a1, n),
                                 SolverSettings(**{**FAST, "seed": seed}))
            rows.append({"label": label, **kw, "seed": seed, "alpha_c": tr.alpha_c, "alpha_l": tr.alpha_l,
                         "spinodal_semantic": tr.spinodals["semantic"],
                         "spinodal_positional": tr.spinodals["positional"],
                         "notes": "; ".join(tr.notes), "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    if kept is not None:
        df = pd.concat([kept[~kept["label"].isin(only)], df], ignore_index=True)
    df.to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
