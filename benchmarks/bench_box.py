"""Time of one solve across the parameter box (docs/solver.md, "The parameter box"): whole
processes of ``attnphase solve ... --preset fast --json`` (every branch) at a seeded sample of the
box (:func:`attnphase.checks.sample_box`: ``--points`` of the reference model and one point per
variant of :data:`attnphase.checks.VARIANT_MODELS`), the mixture's reference case
(``--mixture 2 --mixture-sep 1 --mixture-align 0.5``, ``alpha = 1``, ``omega = 0.3``) and the
baseline ``attnphase solve --alpha 1 --omega 0.3 --preset fast``, each ``--repeats`` times in turn
(so that a drift of the machine's speed hits all alike). Prints each case's median, its ratio to
the baseline's median, and the cases whose median is over ``--limit`` seconds (the target: 10 s on
2 cores). ``--named``: also the slow points of docs/solver.md ("Known limitations", :data:`NAMED`).

    python benchmarks/bench_box.py                      # 8 reference points, every variant, 3 repeats
    python benchmarks/bench_box.py --points 16 --seed 1 --repeats 1
    python benchmarks/bench_box.py --points 0 --named --repeats 1  # (--points 0: no sampled point, no variant)
"""

from __future__ import annotations

import argparse
import shlex
import statistics

from bench_presets import run  # (whole-process wall time and JSON of one command)

from attnphase.checks import VARIANT_MODELS, sample_box

BASELINE = "attnphase solve --alpha 1 --omega 0.3 --preset fast"
MIXTURE = BASELINE + " --mixture 2 --mixture-sep 1 --mixture-align 0.5"
#: points of the box where the solve was slow (docs/solver.md, "Known limitations")
NAMED = {
    "sigma 2 alpha 3": "attnphase solve --alpha 3 --omega 0.3 --sigma 2 --lam 1e-4 --preset fast",
    "untied small lam": ("attnphase solve --alpha 0.5668 --omega 0.7158 --sigma 1.144 --lam 0.0001289 --preset fast "
                         "--variant untied"),
    "rank2 small alpha": ("attnphase solve --alpha 0.06281 --omega 0.1433 --sigma 1.11 --lam 0.0007325 --preset fast "
                          "--rank 2"),
    "rank2 omega 0.76": ("attnphase solve --alpha 0.05917 --omega 0.7618 --sigma 1.254 --lam 0.003206 --preset fast "
                         "--rank 2"),
    "untied sigma 1.5": ("attnphase solve --alpha 0.4962 --omega 0.3717 --sigma 1.496 --lam 0.0002849 --preset fast "
                         "--variant untied"),
    "causal sigma 1.5": ("attnphase solve --alpha 2.582 --omega 0.2911 --sigma 1.505 --lam 0.001753 --preset fast "
                         "--variant causal"),
    "untied alpha 8": ("attnphase solve --alpha 8.164 --omega 0.4539 --sigma 0.7473 --lam 0.0004789 --preset fast "
                       "--variant untied"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--named", action="store_true", help="also the slow points of NAMED")
    args = ap.parse_args()
    variants = [m for m in VARIANT_MODELS if m != "reference"]
    cases = {"baseline": BASELINE, "mixture reference": MIXTURE}
    cases.update({f"reference {i}": p.command() for i, p in enumerate(sample_box(args.points, seed=args.seed))})
    if args.points:
        cases.update({p.model: p.command() for p in sample_box(len(variants), seed=args.seed + 1, models=variants)})
    if args.named:
        cases.update(NAMED)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for rep in range(args.repeats):
        for name, cmd in cases.items():
            t, out = run(shlex.split(cmd)[1:])
            times[name].append(t)
            found = ",".join(b for b, r in out["branches"].items() if r is not None)
            print(f"repeat {rep} {name}: {t:.1f} s ({found}) | {cmd}", flush=True)
    base = statistics.median(times["baseline"])
    print(f"\n{'case':<20} {'median s':>9} {'ratio':>6}")
    over = []
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<20} {med:9.1f} {med / base:6.2f}")
        if med > args.limit:
            over.append(f"{name} ({med:.1f} s): {cases[name]}")
    print(f"\n{len(over)} of {len(cases)} cases over {args.limit:g} s" + "".join(f"\n  {o}" for o in over))


if __name__ == "__main__":
    main()
