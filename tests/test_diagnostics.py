"""The solver's diagnostics are typed records (``attnphase.theory.diagnostics``): a solve's result
carries them, their ``to_dict()`` is the JSON ``attnphase solve --json`` prints (with the keys it
had when they were string-keyed dicts) and ``from_dict`` reads that JSON back; every result type
says whether it worked (``success``, ``message``)."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from typing import Any

import pytest

import attnphase as ap
from attnphase._json import jsonable
from attnphase.cli import main
from attnphase.theory.diagnostics import (
    ErrorEstimate,
    ErrorTarget,
    FixedPointInfo,
    PointDiagnostics,
    QuadratureInfo,
    Refinement,
    TargetStep,
)

#: the keys of ``attnphase solve --alpha 1 --branch positional --preset fast --target-error 0.5
#: --json`` (L = 2, rank 1) as printed when the diagnostics were string-keyed dicts
SOLVE_KEYS = {"command", "params", "branches", "global_minimum", "linear_test_error", "diagnostics", "success",
              "message"}
BRANCH_KEYS = {"q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations", "error_estimate"}
DIAGNOSTICS_KEYS = {"reason", "residual", "seconds", "solver_reason", "quadrature", "prox_max_grad", "classified_as",
                    "V_hat", "q_hat", "m_hat", "theta_hat", "refined", "error_estimate", "target"}
QUADRATURE_KEYS = {"method", "order", "nodes"}
REFINED_KEYS = {"method", "order", "replicas", "nodes", "teacher_scale", "mirror", "coarse", "step", "evaluations",
                "solver_reason", "residual", "applied", "rule_solves", "errors"}
COARSE_KEYS = {"train_loss", "test_error", "q", "m", "theta", "test_error_order"}
ESTIMATE_KEYS = {"q", "m[0]", "m[1]", "V", "theta", "test_error", "train_loss", "q_user", "m_user", "theta_user",
                 "method"}
TARGET_KEYS = {"target_error", "on", "met", "order", "history"}
HISTORY_KEYS = {"order", "estimate", "test_error_estimate", "nodes"}
#: the keys of ``attnphase transition --json`` as printed then
TRANSITION_KEYS = {"command", "params", "alpha_c", "alpha_l", "spinodals", "linear_test_error", "notes", "kind",
                   "exchange", "order_parameter", "alpha_range", "reason", "errors", "replicas", "success", "message"}


@pytest.fixture(scope="module")
def solved() -> ap.SolveResult:
    """One refined branch at the fast preset (about a second)."""
    return ap.solve(1.0, branch="positional", settings=ap.SolverSettings.preset("fast"))


def _through_json(d: dict[str, Any]) -> Any:
    """``d`` as the command line prints it and a reader loads it back."""
    return json.loads(json.dumps(jsonable(d)))


def test_a_solve_carries_typed_records(solved):
    b = solved.branches["positional"]
    assert b is not None and b.refined
    assert isinstance(b.fixed_point, FixedPointInfo) and isinstance(b.fixed_point.quadrature, QuadratureInfo)
    assert b.fixed_point.classified_as == "positional" and b.fixed_point.residual < 1e-3
    assert isinstance(b.refinement, Refinement) and b.refinement.applied and b.refinement.reason is None
    assert b.refinement.nodes is not None and b.refinement.nodes > b.fixed_point.quadrature.nodes
    assert b.refinement.error("train_loss") is not None and b.refinement.error("train_loss") > 0
    assert isinstance(b.estimate, ErrorEstimate) and b.estimate.method.startswith("standard error over")
    assert b.error_target is None and b.target_met is None  # (no target asked)
    # the JSON views are the records' dicts
    diag = solved.to_dict()["diagnostics"]["positional"]
    assert diag["refined"] == jsonable(b.refinement.to_dict())
    assert diag["error_estimate"] == jsonable(b.estimate.to_dict())
    assert diag["quadrature"] == b.fixed_point.quadrature.to_dict() and diag["residual"] == b.fixed_point.residual
    assert b.error_estimate["theta_user"] == b.estimate.relative["theta_user"]


def test_the_records_round_trip_through_their_json(solved):
    b = solved.branches["positional"]
    assert b is not None and b.fixed_point is not None and b.refinement is not None and b.estimate is not None
    for rec in (b.fixed_point, b.refinement, b.estimate, b.fixed_point.quadrature):
        assert type(rec).from_dict(_through_json(rec.to_dict())) == rec
        assert pickle.loads(pickle.dumps(rec)) == rec  # (a process pool sends them)
    # a branch's whole diagnostics JSON read back: the records, and the rest as notes
    diag = solved.to_dict()["diagnostics"]["positional"]
    assert FixedPointInfo.from_dict(diag) == b.fixed_point
    back = PointDiagnostics.from_dict(diag)
    assert (back.fixed_point, back.refinement, back.error_estimate, back.error_target) == (
        b.fixed_point, b.refinement, b.estimate, None)
    assert dict(back.notes) == {"reason": "ok"} and jsonable(back.to_dict()) == diag
    target = ErrorTarget(1e-3, "overlaps", False, 12,
                         (TargetStep(10, 4e-3, 2e-3, nodes=16384), TargetStep(12, 1.5e-3, 1e-3, nodes=65536, seconds=3.5),
                          TargetStep(13, math.inf, math.inf, nodes=131072, seconds=9.0, reason="did not converge")))
    back = ErrorTarget.from_dict(_through_json(target.to_dict()))
    assert back == target and back.orders == (10, 12, 13) and back.estimate == 1.5e-3
    assert _through_json(target.to_dict())["history"][2]["estimate"] is None  # (inf prints as null)
    failed = Refinement(method="qmc", order=10, applied=False, reason="refinement did not converge: budget",
                        stopped_at={"q": 0.1, "m": 0.2, "theta": 0.0}, retry="continued up")
    assert Refinement.from_dict(_through_json(failed.to_dict())) == failed
    assert set(failed.to_dict()) == {"method", "order", "applied", "reason", "stopped_at", "retry"}


def test_records_are_frozen_and_refuse_unknown_keys():
    r = Refinement(applied=True, errors={"q": 1e-3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.applied = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.errors["q"] = 0.0  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown keys apllied"):
        Refinement.from_dict({"apllied": True})
    with pytest.raises(ValueError, match="method"):
        ErrorEstimate.from_dict({"q": 1e-3})
    with pytest.raises(ValueError, match="'history'"):
        ErrorTarget.from_dict({"target_error": 1e-3, "on": "all", "met": True, "order": 10})


def test_solve_json_keeps_its_keys(capsys):
    assert main(["solve", "--alpha", "1", "--branch", "positional", "--preset", "fast", "--target-error", "0.5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == SOLVE_KEYS and set(out["branches"]["positional"]) == BRANCH_KEYS
    diag = out["diagnostics"]["positional"]
    assert set(diag) == DIAGNOSTICS_KEYS and set(diag["quadrature"]) == QUADRATURE_KEYS
    assert set(diag["refined"]) == REFINED_KEYS and set(diag["refined"]["coarse"]) == COARSE_KEYS
    assert set(diag["error_estimate"]) == ESTIMATE_KEYS == set(out["branches"]["positional"]["error_estimate"])
    assert set(diag["target"]) == TARGET_KEYS and [set(h) for h in diag["target"]["history"]] == [HISTORY_KEYS]
    assert diag["target"]["met"] is True and diag["target"]["on"] == "test_error"
    # (the integers print as integers)
    ints = [diag["refined"][k] for k in ("order", "replicas", "nodes", "evaluations")]
    ints += [diag["refined"]["coarse"]["test_error_order"], diag["quadrature"]["nodes"], diag["target"]["order"]]
    assert all(type(v) is int for v in ints), ints


@pytest.mark.slow  # (a transition at the fast preset: about 5 s)
def test_transition_json_keeps_its_keys(capsys):
    assert main(["transition", "--preset", "fast", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == TRANSITION_KEYS and out["success"] is True
    assert set(out["errors"]) == {"alpha_c", "alpha_l"} and out["errors"]["alpha_c"] is not None


def test_every_result_type_says_whether_it_worked(solved):
    """Every public result class declares ``success`` and ``message`` (``to_dict`` carries them:
    tests/test_cli_json.py for each command's record, tests/test_results_shape.py for the
    objects); a branch's entry (``BranchResult``) is part of a ``SolveResult``, whose flag covers it."""
    nested = {"BranchResult", "ModelSpec"}
    for name in ap.__all__:
        cls = getattr(ap, name)
        if isinstance(cls, type) and hasattr(cls, "to_dict") and name not in nested:
            names = {f.name for f in dataclasses.fields(cls)}
            assert {"success", "message"} <= names, name
    d = solved.to_dict()
    assert d["success"] is True and d["message"] == solved.message
