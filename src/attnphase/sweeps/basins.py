"""Basin maps in ``(alpha, omega)`` through the sweep machinery (results are stored; docs/basins.md).

- :func:`basin_map`: one ``basins`` point per ``(omega, alpha)`` (runs from random starts, batched
  over seeds; :func:`attnphase.sim.basins.train_basins`), gathered into the fraction of runs
  reaching each state, the mean test and training error reached and their standard errors.
- :func:`global_minimum`: the theory's global minimum at each ``(omega, alpha)``: of the semantic
  and positional branches (``docs/model.md`` (2.1)-(4.2), followed in ``alpha`` by ``curve``
  points), the one with the lower training error, and its test error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.sweeps.canonical import round_sig
from attnphase.sweeps.grid import SweepSpec
from attnphase.sweeps.runner import SweepReport, run_sweep
from attnphase.sweeps.store import ResultStore, open_store

#: the states of :data:`attnphase.sim.basins.BASIN_STATES` (repeated: no torch import here)
STATES = ("semantic", "positional", "mixed", "trivial", "specialised")
#: the branches compared for the global minimum
_BRANCHES = ("semantic", "positional")


def _num(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f if math.isfinite(f) else float("nan")


@dataclass(frozen=True)
class BasinMap:
    """Basin fractions and reached errors on ``omega x alpha`` (rows: omega, columns: alpha).

    ``fractions[state]`` is the fraction of the stored runs reaching ``state``; ``test_error`` and
    ``train_loss`` the means over runs, ``*_se`` their standard errors; ``n_runs`` the runs
    found; ``global_test_error`` / ``global_branch`` the theory's global minimum where computed.
    ``success``: every point was computed and every run met the gradient tolerance.
    """

    omega: tuple[float, ...]
    alpha: tuple[float, ...]
    d: int
    settings: Mapping[str, Any]
    fractions: Mapping[str, np.ndarray]
    test_error: np.ndarray
    test_error_se: np.ndarray
    train_loss: np.ndarray
    n_runs: np.ndarray
    converged: np.ndarray
    mean_steps: np.ndarray
    errors: tuple[str, ...] = ()
    global_test_error: np.ndarray | None = None
    global_branch: np.ndarray | None = None
    report: SweepReport | None = field(default=None, compare=False)

    def with_global(self, test_error: np.ndarray, branch: np.ndarray) -> BasinMap:
        """A copy carrying the global minimum (arrays of the map's shape)."""
        import dataclasses

        return dataclasses.replace(self, global_test_error=np.asarray(test_error, dtype=float),
                                   global_branch=np.asarray(branch, dtype=object))

    @property
    def success(self) -> bool:
        """Every point computed (no stored error, runs found at each) and every run converged."""
        return not self.errors and bool(np.all(self.n_runs > 0)) and bool(np.all(self.converged == self.n_runs))

    @property
    def message(self) -> str:
        """One line: the points computed and the runs that met the gradient tolerance."""
        points = self.n_runs.size
        missing = int(np.sum(self.n_runs == 0))
        runs, met = int(self.n_runs.sum()), int(self.converged.sum())
        msg = f"{points - missing} of {points} points computed; {met} of {runs} runs met the gradient tolerance"
        return msg + (f"; {len(self.errors)} points failed (first: {self.errors[0]})" if self.errors else "")

    def to_frame(self) -> Any:
        import pandas as pd  # (only when a table is asked for)

        rows = []
        for i, w in enumerate(self.omega):
            for j, a in enumerate(self.alpha):
                row: dict[str, Any] = {"omega": w, "alpha": a, "d": self.d, **self.settings}
                row.update({f"frac_{s}": float(v[i, j]) for s, v in self.fractions.items()})
                row.update(test_error=float(self.test_error[i, j]),
                           test_error_se=float(self.test_error_se[i, j]),
                           train_loss=float(self.train_loss[i, j]), n_runs=int(self.n_runs[i, j]),
                           converged=int(self.converged[i, j]),
                           mean_steps=float(self.mean_steps[i, j]))
                if self.global_test_error is not None and self.global_branch is not None:
                    row.update(global_test_error=float(self.global_test_error[i, j]),
                               global_branch=self.global_branch[i, j])
                rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"omega": list(self.omega), "alpha": list(self.alpha), "d": self.d,
                               "settings": dict(self.settings),
                               "fractions": {s: v.tolist() for s, v in self.fractions.items()},
                               "test_error": self.test_error.tolist(),
                               "test_error_se": self.test_error_se.tolist(),
                               "train_loss": self.train_loss.tolist(),
                               "n_runs": self.n_runs.tolist(), "converged": self.converged.tolist(),
                               "mean_steps": self.mean_steps.tolist(), "errors": list(self.errors)}
        if self.global_test_error is not None and self.global_branch is not None:
            out["global_test_error"] = self.global_test_error.tolist()
            out["global_branch"] = self.global_branch.tolist()
        return {**out, "success": self.success, "message": self.message}


def basin_map(
    base: Mapping[str, Any],
    omegas: Sequence[float],
    alphas: Sequence[float],
    store: str | Path | ResultStore,
    settings: Mapping[str, Any] | None = None,
    **run_kw: Any,
) -> BasinMap:
    """Run (or read) the ``basins`` points of ``omegas x alphas`` and gather them.

    ``base``: model parameters other than ``omega`` (ModelSpec field names); ``settings``: the
    ``basins`` kind's other parameters (``d``, ``seeds``, ``seed0``, ``init_scale``,
    ``optimizer``, ``lr``, ``max_steps``, ``tol``, ``dtype``, ``device``); ``run_kw`` goes to
    :func:`run_sweep` (``workers``, ``scheduler``, ...).
    """
    settings = {k: v for k, v in (settings or {}).items() if v is not None}
    fixed = {**{k: v for k, v in base.items() if k not in ("omega", "alpha")
                and not k.startswith("solver_")}, **settings}
    omegas = tuple(float(w) for w in omegas)
    alphas = tuple(float(a) for a in alphas)
    sweep = SweepSpec("basins", axes=(("omega", omegas), ("alpha", alphas)), fixed=fixed)
    points = sweep.points()
    rep = run_sweep(points, store, **run_kw)
    with open_store(store) as st:
        res = st.results([p.key for p in points])
    table = {(p.params["omega"], p.params["alpha"]): res.get(p.key) for p in points}
    shape = (len(omegas), len(alphas))
    fr = {s: np.full(shape, np.nan) for s in STATES}
    te, se, tl, steps = (np.full(shape, np.nan) for _ in range(4))
    n, conv = np.zeros(shape, int), np.zeros(shape, int)
    errors = []
    for i, w in enumerate(omegas):
        for j, a in enumerate(alphas):
            r = table.get((round_sig(w), round_sig(a)))
            if r is None or r.get("status") != "ok":
                if r is not None:
                    errors.append(f"omega={w:g} alpha={a:g}: {r.get('error')}")
                continue
            out = r["result"]
            for s in STATES:
                fr[s][i, j] = _num(out.get(f"frac_{s}"))
            te[i, j], se[i, j] = _num(out.get("test_error")), _num(out.get("test_error_se"))
            tl[i, j], steps[i, j] = _num(out.get("train_loss")), _num(out.get("mean_steps"))
            n[i, j], conv[i, j] = int(out.get("n_runs", 0)), int(out.get("converged", 0))
    if np.isnan(fr["specialised"]).all():  # (one head: no specialised state)
        del fr["specialised"]
    p0 = points[0].params if points else {}
    keys = ("d", "seeds", "seed0", "init_scale", "optimizer", "lr", "max_steps", "tol", "dtype")
    return BasinMap(omegas, alphas, int(p0.get("d", 0)), {k: p0.get(k) for k in keys}, fr, te,
                    se, tl, n, conv, steps, tuple(errors), report=rep)


def global_minimum(
    base: Mapping[str, Any],
    omegas: Sequence[float],
    alphas: Sequence[float],
    store: str | Path | ResultStore,
    **run_kw: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """``(test_error, branch)`` arrays ``(omega, alpha)`` of the theory's global minimum (the
    semantic or positional branch with the lower training error; NaN / ``""`` where neither was
    found), from stored ``curve`` points (one per ``omega`` and branch). ``base`` may hold
    ``solver_<name>`` settings."""
    base = {k: v for k, v in base.items() if k not in ("omega", "alphas", "branch")}
    omegas = tuple(float(w) for w in omegas)
    alphas = tuple(float(a) for a in alphas)
    grid = ",".join(repr(a) for a in alphas)
    sweep = SweepSpec("curve", axes=(("omega", omegas), ("branch", _BRANCHES)),
                      fixed={**base, "alphas": grid})
    points = sweep.points()
    run_sweep(points, store, **run_kw)
    with open_store(store) as st:
        res = st.results([p.key for p in points])
    shape = (len(omegas), len(alphas))
    best = np.full(shape, np.nan)
    branch = np.full(shape, "", dtype=object)
    train = np.full(shape, np.inf)
    for p in points:
        r = res.get(p.key)
        if r is None or r.get("status") != "ok":
            continue
        i = omegas.index(next(w for w in omegas if round_sig(w) == p.params["omega"]))
        out = r["result"]
        for j, (t, g, ok) in enumerate(zip(out["train_loss"], out["test_error"], out["exists"],
                                           strict=True)):
            t, g = _num(t), _num(g)
            if ok and math.isfinite(t) and math.isfinite(g) and t < train[i, j]:
                train[i, j], best[i, j], branch[i, j] = t, g, p.params["branch"]
    return best, branch
