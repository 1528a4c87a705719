"""Solve speed of cross-attention at the reference case (docs/model.md section 10, docs/cross.md).

Whole-process wall time of ``attnphase solve --alpha 1 --omega 0.3 --variant cross`` (``L = L' = 2``,
every branch, the default error target 1e-3 on the overlaps) against the plain
``attnphase solve --alpha 1 --omega 0.3`` in the same script: median of ``--repeats`` runs each
(target: 10 s for the cross-attention solve), the ratio, and per branch the refinement order
that met the target.

Usage: ``python benchmarks/bench_cross.py [--repeats 3] [--extra "--L-keys 3"]``
"""

from __future__ import annotations

import argparse
import shlex

from bench_variants import run  # (whole-process wall time of a solve, median of the repeats)


def orders(out: dict) -> str:
    parts = []
    for b, v in out["branches"].items():
        tgt = (out["diagnostics"].get(b) or {}).get("target") or {}
        if v is None:
            parts.append(f"{b}: absent")
        else:
            parts.append(f"{b}: order {tgt.get('order')} ({'met' if tgt.get('met') else 'not met'})")
    return "; ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description="cross-attention solve speed against self-attention")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--extra", default="", help="further flags for the cross-attention solve")
    a = p.parse_args()
    base = ["solve", "--alpha", "1", "--omega", "0.3"]
    cross = [*base, "--variant", "cross", *shlex.split(a.extra)]
    t_self, o_self = run(base, a.repeats)
    t_cross, o_cross = run(cross, a.repeats)
    print(f"self-attention  {' '.join(base)}: median {t_self:.1f} s wall; "
          f"{orders(o_self)}")
    print(f"cross-attention {' '.join(cross)}: median {t_cross:.1f} s wall; "
          f"{orders(o_cross)}")
    print(f"ratio cross / self: {t_cross / t_self:.2f}; target 10 s: {'met' if t_cross <= 10 else 'not met'}")
    print(f"kernels: {o_cross.get('params', {}).get('kernels', o_cross.get('kernels'))}")


if __name__ == "__main__":
    main()
