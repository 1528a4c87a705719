"""The results never change shape: every field a recipe reads exists on every result (NaN and a
flag where a quantity could not be computed), a ``repr`` is a few lines, the records a user reads
are read-only ``dict`` s (never ``mappingproxy``), and ``to_dict()`` carries ``success`` and
``message``. Built from stubs of the solver and the simulator: no solve or training runs here."""

from __future__ import annotations

import copy
import math
import pickle
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import attnphase as ap
from attnphase import api
from attnphase.results import (
    ERROR_ESTIMATE_KEYS,
    BayesResult,
    ReadOnlyDict,
    SimulationResult,
    TransitionResult,
    compare_records,
)
from attnphase.sweeps.runner import SweepReport
from attnphase.theory import BranchPoint, SolverSettings
from attnphase.theory.diagnostics import ErrorEstimate, FixedPointInfo, QuadratureInfo, Refinement
from attnphase.theory.saddle import OrderParams
from attnphase.theory.transition import Transition

#: the longest ``repr`` of a result, in lines and in characters
MAX_LINES, MAX_CHARS = 12, 1500


def _stub_point(branch: str, alpha: float, estimate: dict[str, Any] | None) -> BranchPoint:
    """A positional-like point as the solver returns it: refined with ``estimate``, or, with
    ``None``, kept on the coarse rule because its refinement did not converge."""
    op = OrderParams(q=np.array([[0.2]]), m=np.array([[0.3], [0.25]]), V=np.array([[16.0]]), theta=np.array([[0.0]]))
    refined = (Refinement(applied=True) if estimate is not None
               else Refinement(applied=False, reason="refinement did not converge: no decrease along the Newton step"))
    return BranchPoint(branch, alpha, True, "", q=0.2, m=0.3, theta=0.0, V=16.0, train_loss=2.1e-3, test_error=3.3e-3,
                       converged=True, iterations=17, fixed_point=FixedPointInfo(
                           residual=1e-9, seconds=0.1, solver_reason="converged", quadrature=QuadratureInfo("qmc", 8, 1024),
                           prox_max_grad=1e-12, classified_as=branch),
                       q_matrix=((0.2,),), m_matrix=((0.3,), (0.25,)), theta_matrix=((0.0,),), _op=op,
                       refinement=refined,
                       error_estimate=None if estimate is None else ErrorEstimate.from_dict(estimate))


#: an estimate as the refinement makes it (the order parameters' names, the user scalars, the method)
ESTIMATE = {"q": 4e-3, "m[0]": 5e-3, "m[1]": 5e-3, "V": 8e-4, "theta": 0.0, "test_error": 1e-3, "train_loss": 5e-3,
            "q_user": 4e-3, "m_user": 5e-3, "theta_user": 0.0, "method": "standard error over 4 fine qmc rules"}


def _stub_solver(monkeypatch: pytest.MonkeyPatch, estimate: dict[str, Any] | None) -> None:
    """``ap.solve`` with the solver, the linear baseline and the record of the code stubbed: no
    kernel is built, no source hashed."""
    monkeypatch.setattr(api, "solve_refined", lambda spec, alpha, b, st: _stub_point(b, alpha, estimate))
    monkeypatch.setattr(api, "linear_test_error", lambda spec: 1.97e-3)
    monkeypatch.setattr(api, "numerics_revision", lambda component: "stub")
    monkeypatch.setattr(api, "native", types.SimpleNamespace(describe=lambda: "stub kernels"))


def _solve_with(monkeypatch: pytest.MonkeyPatch, estimate: dict[str, Any] | None) -> ap.SolveResult:
    """``ap.solve(2, omega=0.2, settings="fast")`` on the positional branch with the solver stubbed."""
    _stub_solver(monkeypatch, estimate)
    return ap.solve(2.0, branch="positional", omega=0.2, settings="fast", progress=False)


def _walk(obj: Any) -> list[Any]:
    """``obj`` and every mapping, tuple and list inside it."""
    out = [obj]
    if isinstance(obj, Mapping):
        for v in obj.values():
            out += _walk(v)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            out += _walk(v)
    return out


def _assert_short(res: Any) -> None:
    text = repr(res)
    assert len(text.splitlines()) <= MAX_LINES and len(text) <= MAX_CHARS, text
    assert "mappingproxy" not in text


def test_a_point_whose_refinement_failed_has_the_error_estimate_keys_with_nan(monkeypatch):
    """The recipe of examples/paper_figure.md, ``point.error_estimate["test_error"]``, reads NaN
    (not ``None[...]``) where the refinement failed, with ``estimated`` false; the keys are those
    of a refined point of the same model, and the JSON record keeps ``null`` there."""
    res = _solve_with(monkeypatch, None)
    point = res.branches["positional"]
    assert point is not None and not point.refined and not point.estimated and point.coarse_only
    assert math.isnan(point.test_error * point.error_estimate["test_error"])
    assert all(math.isnan(point.error_estimate[k]) for k in ERROR_ESTIMATE_KEYS)
    assert point.error_estimate["method"] == "none" and point.overlap_error is None
    assert not res.success and "the values are those of the coarse rule (1024 nodes)" in res.message
    assert res.to_dict()["branches"]["positional"]["error_estimate"] is None

    refined = _solve_with(monkeypatch, ESTIMATE).branches["positional"]
    assert refined is not None and refined.estimated and refined.refined
    assert set(refined.error_estimate) == set(point.error_estimate)
    assert refined.error_estimate["test_error"] == 1e-3 and refined.overlap_error == 5e-3
    assert refined.to_dict()["error_estimate"] == ESTIMATE


def test_solve_result_repr_is_short_and_records_are_read_only_dicts(monkeypatch):
    res = _solve_with(monkeypatch, ESTIMATE)
    point = res.branches["positional"]
    for r in (res, point):
        _assert_short(r)
    assert "success=True" in repr(res) and "error est. 5.0e-03" in repr(res)
    for record in (res.branches, res.params, res.diagnostics, point.error_estimate, point.diagnostics):
        assert isinstance(record, dict) and not any(isinstance(x, types.MappingProxyType) for x in _walk(record))
        with pytest.raises(TypeError):
            record["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        point.error_estimate.update(q=0.0)  # type: ignore[attr-defined]
    copied = dict(point.error_estimate)
    copied["q"] = 0.0  # (a copy can be changed)
    assert pickle.loads(pickle.dumps(res.params)) == res.params and copy.deepcopy(res.params) == res.params
    assert type(copy.deepcopy(point.error_estimate)) is ReadOnlyDict
    out = res.to_dict()
    assert out["success"] is True and out["message"] == res.message


def _simulation() -> SimulationResult:
    """A ``SimulationResult`` from a stub of the simulator's result (two runs, one stopped at the step limit)."""
    mean = {"m": 0.1, "theta": 0.4, "train_loss": 1e-3, "test_error": 3e-3, "converged": 0.5}
    summary = {"mean": mean, "std": dict(mean), "n_runs": 2,
               "by_init": {"semantic": {"mean": mean, "std": mean, "n_runs": 2}}}
    from attnphase.sim.simulate import TrainingBatch  # (torch; nothing is trained)

    runs = [types.SimpleNamespace(stop=stop, test_error=3e-3, to_dict=lambda stop=stop: {"stop": stop})
            for stop in ("tol", "max_steps")]
    raw = types.SimpleNamespace(
        spec=ap.ModelSpec(omega=0.3), d=200, alpha=1.0, n=200, n_test=1000, seeds=(0, 1), inits=("semantic",),
        runs=runs, batch_seconds=1.5,
        to_dict=lambda: {"params": {"train": {"lr": 0.1}, "d": 200}, "summary": summary})
    # (the simulator's own success and message, read from the stub's runs)
    raw.success, raw.message = TrainingBatch.success.fget(raw), TrainingBatch.message.fget(raw)
    return SimulationResult.from_simulation(raw)


def test_simulation_summary_is_a_plain_dict_and_the_repr_is_short():
    sim = _simulation()
    assert isinstance(sim.summary, dict) and isinstance(sim.summary["by_init"]["semantic"]["mean"], dict)
    assert not any(isinstance(x, types.MappingProxyType) for x in _walk(sim.summary) + _walk(sim.params))
    assert repr(sim.summary).startswith("{'mean': {")
    with pytest.raises(TypeError):
        sim.summary["mean"]["m"] = 0.0
    _assert_short(sim)
    assert "success=False" in repr(sim) and "1 of 2 met the gradient tolerance" in sim.message
    out = sim.to_dict()
    assert out["success"] is False and out["message"] == sim.message and out["summary"]["mean"] == sim.summary["mean"]


def test_transition_bayes_and_sweep_reports_have_short_reprs_and_say_success(monkeypatch):
    from attnphase import results
    from attnphase.theory import native

    monkeypatch.setattr(results, "numerics_revision", lambda component: "stub")
    monkeypatch.setattr(native, "describe", lambda: "stub kernels")
    tr = Transition(1.25, 1.49, {"semantic": 0.72, "positional": None}, 0.00197, ("a note " * 80,),
                    {"alpha": list(np.linspace(0.2, 2.4, 12))}, {"alpha_c": 0.003, "alpha_l": 0.001})
    res = TransitionResult.from_transition(tr, ap.ModelSpec(omega=0.3), SolverSettings.preset("fast"))
    _assert_short(res)
    assert "alpha_c = 1.2500 +- 0.0030" in repr(res)
    out = res.to_dict()
    assert out["success"] is True and out["message"] == res.message and out["alpha_c"] == 1.25

    points = [{"alpha": a, "overlap": 0.5, "overlap_error": 1e-8, "test_error": 1e-3} for a in np.linspace(0.05, 1, 20)]
    bo = BayesResult.from_points(ap.ModelSpec(omega=0.3), 0.0, points,
                                 {"alpha_WR": 0.2, "alpha_IT": 0.5, "alpha_PR": 0.6}, 2e-3, [], {"L": 2})
    _assert_short(bo)
    assert bo.success and bo.to_dict()["success"] is True

    rep = SweepReport(total=2000, skipped=0, computed=2000, ok=2000, errors=0, elapsed_s=1.0, backend="serial",
                      keys=tuple(f"{i:064x}" for i in range(2000)), message="2000 points")
    _assert_short(rep)


def test_a_flag_that_only_the_new_record_has_is_not_a_difference():
    """``rerun --check`` of a record written before it carried ``success``: the flag is not
    compared; a flag the new record lost, or one that changed, still is."""
    old = {"alpha_c": 1.25, "converged": True}
    assert compare_records(old, {**old, "success": True, "message": "m"}).success
    assert not compare_records({**old, "success": True}, old).success
    assert not compare_records({**old, "success": True}, {**old, "success": False}).success


def test_progress_is_shown_where_someone_watches_and_never_in_captured_output(monkeypatch, capsys):
    """``progress="auto"``: nothing where stderr is not a terminal (here: pytest's capture), a
    line rewritten in place on a terminal; ``True`` lines anyway; ``False`` nothing; a callable
    is called from ``(0, n)`` to ``(n, n)``; anything else is refused in one line."""
    from attnphase._progress import ProgressLine, progress_callback

    assert progress_callback("auto", "solve") is None and progress_callback(False, "solve") is None
    assert isinstance(progress_callback(True, "solve"), ProgressLine)
    with pytest.raises(ValueError, match="progress must be"):
        progress_callback("yes", "solve")
    calls: list[tuple[int, int]] = []
    _stub_solver(monkeypatch, ESTIMATE)
    ap.solve(2.0, omega=0.2, settings="fast")
    assert capsys.readouterr().err == ""
    ap.solve(2.0, omega=0.2, settings="fast", progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]

    class Terminal(list):
        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> None:
            self.append(text)

        def flush(self) -> None:
            pass

    term = Terminal()
    line = ProgressLine("solve", "branches", stream=term)  # type: ignore[arg-type]
    line(0, 2)
    line(2, 2)
    assert term[0].startswith("\rsolve: 0/2 branches") and term[-1].endswith("\n")
