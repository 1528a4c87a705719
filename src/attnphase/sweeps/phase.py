"""Phase diagrams through the sweep machinery (results are stored): ``alpha`` against one model
parameter, ``omega`` (the paper's diagram), ``sigma`` or ``lam``, the others fixed.

- :func:`phase_lines`: ``alpha_c`` (semantic/positional transition, where the global
  minimum changes: the two branches' training losses cross, or the new branch grows out of the
  old one; its kind and the branches exchanged, docs/model.md (5.5)), its spinodals and ``alpha_l``
  (where the semantic solution beats the dense linear baseline) at each value of the axis, from
  :func:`attnphase.theory.find_transition` with the range widened as needed, one ``transition``
  point per value (``docs/model.md`` (5.2)-(5.4)).
- :func:`phase_heatmaps`: simulations at finite ``d`` (gradient descent on ``docs/model.md`` (1.4)) on an
  ``axis x alpha`` grid from the semantic and the positional start, giving
  ``train_diff = eps_t(semantic start) - eps_t(positional start)`` (negative where the
  semantic minimum is lower) and ``gen_gain = eps_g_lin - eps_g`` (positive where attention
  beats the linear baseline; ``eps_g`` of the start that reached the lower training loss),
  both averaged over seeds, with the test-error difference
  ``eps_g(semantic start) - eps_g(positional start)`` and the standard errors over seeds of both
  differences.
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
from attnphase.sweeps.kinds import model_spec
from attnphase.sweeps.runner import SweepReport, run_sweep
from attnphase.sweeps.store import ResultStore, open_store


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


#: the model parameters a phase diagram can run along (:func:`phase_lines`, :func:`phase_heatmaps`)
AXES = ("omega", "sigma", "lam")


def check_axis(axis: str) -> str:
    """``axis`` if a phase diagram can run along it (:data:`AXES`), else ``ValueError``."""
    if axis not in AXES:
        raise ValueError(f"a phase diagram runs along {', '.join(AXES)}, not {axis!r}")
    return axis


def _along(values: tuple[float, ...], axis: str) -> tuple[float, ...]:
    if axis != "omega":
        raise ValueError(f"this diagram runs along {axis}, not omega: read .values")
    return values


@dataclass(frozen=True)
class PhaseLines:
    """Theory lines of the phase diagram, one entry per value of the axis (``None``: no crossing).

    ``values`` are those of the model parameter ``axis`` (``omega``, ``sigma`` or ``lam``; the
    other parameters are in ``params``); ``omega`` reads them on an ``omega`` diagram."""

    values: tuple[float, ...]
    alpha_c: tuple[float | None, ...]
    alpha_l: tuple[float | None, ...]
    spinodals: Mapping[str, tuple[float | None, ...]]
    eps_g_lin: tuple[float | None, ...]
    errors: tuple[str | None, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    report: SweepReport | None = None
    #: integration-error estimates (standard errors) of alpha_c and alpha_l, when the solver gave one
    alpha_c_se: tuple[float | None, ...] = ()
    alpha_l_se: tuple[float | None, ...] = ()
    #: how the global minimum changes at each alpha_c (docs/model.md (5.5)): ``"discontinuous"``,
    #: ``"continuous"`` or ``None``, and the branches that exchange it ("below->above", e.g.
    #: ``"positional->mixed"``)
    kind: tuple[str | None, ...] = ()
    exchange: tuple[str | None, ...] = ()
    axis: str = "omega"
    #: where ``alpha_c`` is ``None`` without an error, why (``Transition.reason``: which branch is
    #: lower wherever both exist, or where the global minimum passes from one to the other)
    reasons: tuple[str | None, ...] = ()

    @property
    def omega(self) -> tuple[float, ...]:
        """The ``omega`` values of an ``omega`` diagram (``ValueError`` on another axis)."""
        return _along(self.values, self.axis)

    @property
    def semantic_side(self) -> str:
        """The branch that ``find_transition`` compared with the positional one, right of
        ``alpha_c``: ``semantic``, ``mixed`` where the model has one (rank ``r >= 2``), or
        ``specialised`` (several heads): :func:`attnphase.theory.semantic_side`."""
        from attnphase.theory import semantic_side  # (numba: only when a label is asked for)

        return semantic_side(model_spec(self.params))

    def to_dict(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            self.axis: list(self.values),
            "alpha_c": list(self.alpha_c),
            "alpha_l": list(self.alpha_l),
            "alpha_c_error": list(self.alpha_c_se) or [None] * len(self.values),
            "alpha_l_error": list(self.alpha_l_se) or [None] * len(self.values),
            "kind": list(self.kind) or [None] * len(self.values),
            "exchange": list(self.exchange) or [None] * len(self.values),
            "spinodals": {k: list(v) for k, v in self.spinodals.items()},
            "eps_g_lin": list(self.eps_g_lin),
            "errors": list(self.errors),
            "reasons": list(self.reasons) or [None] * len(self.values),
            "params": dict(self.params),
        }

    def to_frame(self) -> Any:
        import pandas as pd  # (only when a table is asked for: workers do not need it)

        none = (None,) * len(self.values)
        data: dict[str, Any] = {self.axis: self.values, "alpha_c": self.alpha_c,
                                "alpha_c_error": self.alpha_c_se or none, "alpha_l": self.alpha_l,
                                "alpha_l_error": self.alpha_l_se or none, "kind": self.kind or none,
                                "exchange": self.exchange or none}
        for k, v in self.spinodals.items():
            data[f"spinodal_{k}"] = v
        data["eps_g_lin"] = self.eps_g_lin
        data["error"] = self.errors
        data["reason"] = self.reasons or none
        return pd.DataFrame(data)


@dataclass(frozen=True)
class HeatMaps:
    """Simulation heat maps on ``axis x alpha`` (rows: the values of the model parameter
    ``axis``, ``omega`` on the paper's diagram; columns: ``alpha``)."""

    values: tuple[float, ...]
    alpha: tuple[float, ...]
    d: int
    seeds: tuple[int, ...]
    train_diff: np.ndarray
    gen_gain: np.ndarray
    n_runs: np.ndarray
    report: SweepReport | None = None
    #: standard errors over seeds of ``train_diff`` (NaN with one seed), the test-error difference
    #: ``eps_g(semantic start) - eps_g(positional start)`` and its standard error
    train_diff_se: np.ndarray | None = None
    test_diff: np.ndarray | None = None
    test_diff_se: np.ndarray | None = None
    axis: str = "omega"

    @property
    def omega(self) -> tuple[float, ...]:
        """The ``omega`` values of an ``omega`` diagram (``ValueError`` on another axis)."""
        return _along(self.values, self.axis)

    def to_frame(self) -> Any:
        import pandas as pd  # (only when a table is asked for: workers do not need it)

        def at(a: np.ndarray | None, i: int, j: int) -> float | None:
            return None if a is None else _num(a[i, j])

        rows = []
        for i, w in enumerate(self.values):
            for j, a in enumerate(self.alpha):
                rows.append({self.axis: w, "alpha": a, "d": self.d,
                             "train_diff": _num(self.train_diff[i, j]),
                             "train_diff_se": at(self.train_diff_se, i, j),
                             "test_diff": at(self.test_diff, i, j),
                             "test_diff_se": at(self.test_diff_se, i, j),
                             "gen_gain": _num(self.gen_gain[i, j]),
                             "n_seeds": int(self.n_runs[i, j])})
        return pd.DataFrame(rows)


def _run_and_fetch(points: list, store: str | Path | ResultStore, **run_kw: Any):
    """Run the sweep of ``points`` into ``store`` and read back their results (by key)."""
    rep = run_sweep(points, store, **run_kw)
    with open_store(store) as st:
        res = st.results([p.key for p in points])
    return rep, res


def phase_lines(
    base: Mapping[str, Any],
    values: Sequence[float],
    store: str | Path | ResultStore,
    axis: str = "omega",
    **run_kw: Any,
) -> PhaseLines:
    """``alpha_c``, ``alpha_l`` and spinodals at each value of the model parameter ``axis``
    (``omega``, ``sigma`` or ``lam``; stored ``transition`` points).

    ``base``: the other model parameters (ModelSpec field names) and solver settings
    ``solver_<name>``; ``run_kw`` goes to :func:`run_sweep` (``workers``, ``scheduler``, ...).
    """
    check_axis(axis)
    base = {k: v for k, v in base.items() if k != axis}
    sweep = SweepSpec("transition", axes=((axis, tuple(float(w) for w in values)),),
                      fixed=base)
    points = sweep.points()
    rep, res = _run_and_fetch(points, store, **run_kw)
    vals, ac, al, lin, errs, ac_se, al_se = [], [], [], [], [], [], []
    kinds: list[str | None] = []
    exchanges: list[str | None] = []
    reasons: list[str | None] = []
    spin: dict[str, list[float | None]] = {}
    for i, p in enumerate(points):
        r = res.get(p.key, {})
        vals.append(float(p.params[axis]))
        out = r.get("result") or {}
        errs.append(r.get("error") if r.get("status") != "ok" else None)
        ac.append(_num(out.get("alpha_c")))
        al.append(_num(out.get("alpha_l")))
        se = out.get("errors") or {}
        ac_se.append(_num(se.get("alpha_c")))
        al_se.append(_num(se.get("alpha_l")))
        lin.append(_num(out.get("linear_test_error", out.get("eps_g_lin"))))
        kinds.append(out.get("kind") if out.get("alpha_c") is not None else None)
        ex = out.get("exchange")
        exchanges.append("->".join(ex) if ex and out.get("alpha_c") is not None else None)
        reasons.append(out.get("reason") if out.get("alpha_c") is None else None)
        for k, v in (out.get("spinodals") or {}).items():
            spin.setdefault(str(k), [None] * len(points))[i] = _num(v)
    params = {k: v for k, v in points[0].params.items() if k != axis} if points else {}
    return PhaseLines(tuple(vals), tuple(ac), tuple(al),
                      {k: tuple(v) for k, v in spin.items()}, tuple(lin), tuple(errs),
                      params, rep, tuple(ac_se), tuple(al_se), tuple(kinds), tuple(exchanges), axis,
                      tuple(reasons))


def phase_heatmaps(
    base: Mapping[str, Any],
    values: Sequence[float],
    alphas: Sequence[float],
    d: int,
    seeds: Sequence[int],
    store: str | Path | ResultStore,
    train: Mapping[str, Any] | None = None,
    axis: str = "omega",
    **run_kw: Any,
) -> HeatMaps:
    """Simulated ``train_diff`` and ``gen_gain`` on ``axis x alpha`` (stored ``simulation``
    points, semantic and positional start per seed; see the module docstring)."""
    check_axis(axis)
    base = {k: v for k, v in base.items() if k not in (axis, "alpha", "d", "seed", "init")
            and not k.startswith("solver_")}
    fixed = {**base, **{f"train_{k}": v for k, v in (train or {}).items()}, "d": int(d)}
    grid = tuple(float(w) for w in values)
    alphas = tuple(float(a) for a in alphas)
    seeds = tuple(dict.fromkeys(int(s) for s in seeds))
    sweep = SweepSpec("simulation", axes=((axis, grid), ("alpha", alphas),
                                          ("seed", seeds), ("init", ("semantic", "positional"))),
                      fixed=fixed)
    points = sweep.points()
    rep, res = _run_and_fetch(points, store, **run_kw)
    # index results by rounded (axis value, alpha, seed, init)
    table: dict[tuple[float, float, int, str], dict[str, Any]] = {}
    for p in points:
        r = res.get(p.key)
        if r is not None and r["status"] == "ok":
            table[(p.params[axis], p.params["alpha"], p.params["seed"], p.params["init"])] = \
                r["result"]
    shape = (len(grid), len(alphas))
    diff, gain, count = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, int)
    diff_se, tdiff, tdiff_se = (np.full(shape, np.nan) for _ in range(3))
    for i, w in enumerate(grid):
        for j, a in enumerate(alphas):
            ds, gs, es = [], [], []
            for s in seeds:
                sem = table.get((round_sig(w), round_sig(a), s, "semantic"))
                pos = table.get((round_sig(w), round_sig(a), s, "positional"))
                if sem is None or pos is None:
                    continue
                ts, tp = _num(sem.get("train_loss")), _num(pos.get("train_loss"))
                if ts is None or tp is None:
                    continue
                ds.append(ts - tp)
                es_ = _num(sem.get("test_error")), _num(pos.get("test_error"))
                if es_[0] is not None and es_[1] is not None:
                    es.append(es_[0] - es_[1])
                best = sem if ts <= tp else pos
                eg, lin = _num(best.get("test_error")), _num(best.get("linear_test_error"))
                if eg is not None and lin is not None:
                    gs.append(lin - eg)
            count[i, j] = len(ds)
            if ds:
                diff[i, j] = float(np.mean(ds))
            if gs:
                gain[i, j] = float(np.mean(gs))
            diff_se[i, j] = _se(ds)
            if es:
                tdiff[i, j], tdiff_se[i, j] = float(np.mean(es)), _se(es)
    return HeatMaps(grid, alphas, int(d), seeds, diff, gain, count, rep, diff_se, tdiff, tdiff_se, axis)


def _se(values: Sequence[float]) -> float:
    """Standard error of the mean over seeds (NaN below two values)."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
