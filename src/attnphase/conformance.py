"""The conformance check of an attention model: what every entry of the registry
(:data:`attnphase.spec.attention.MODELS`) must satisfy, in the spirit of scikit-learn's
``check_estimator``.

:func:`check_model` runs, for one registered model:

* ``registry``: the mask builds ``(L, L)`` booleans where every token attends to at least one token
  (a key to itself, for cross-attention), at several ``L``; the score form has the model's field
  dimension; the model is a choice of :class:`~attnphase.spec.ModelSpec`'s ``variant``;
* ``bad input``: a model with a bad parameter, a negative ``alpha`` and a non-positive ``d`` are
  refused with a one-line ``ValueError``, and so are the parts of the package that do not cover the
  model (the stability check, the one-start selections);
* ``theory``: :func:`attnphase.solve` finds the model's :class:`~attnphase.spec.attention.Conformance`
  branch at its ``alpha``, converged, with an error estimate;
* ``simulator``: :func:`attnphase.simulate` trains ``seeds`` runs at ``d`` (500 by default) from the
  start of the same name, heavy-ball gradient descent to the gradient tolerance; every run must meet
  it and end on that branch;
* ``agreement``: the mean over the runs of the branch's defining overlap (the norm of ``theta`` for
  the semantic branch, of ``m`` for the positional one, both for the mixed one), of ``tr q`` and of the
  training and test errors agree with the theory within the model's declared ``tolerance``
  (relative). The overlaps are compared as norms over tokens and weight matrices, which do not depend
  on the gauge of the weights (their rotations at rank >= 2, the sign of ``m``).

A new model is added to the registry and to its docs entry; the conformance suite
(``tests/test_conformance.py``) runs :func:`check_model` on it with every other model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.spec.attention import attention_model, score_mask
from attnphase.spec.problem import VARIANTS, ModelSpec

__all__ = ["Check", "ConformanceResult", "check_model", "conformance_spec"]

#: the heavy-ball gradient descent the simulator check trains with (the same minima as plain GD,
#: docs/simulation.md): float64, momentum 0.9, gradient tolerance 1e-6
TRAINING: Mapping[str, Any] = {"optimizer": "gd", "lr": 0.15, "momentum": 0.9, "tol": 1e-6, "max_steps": 30000,
                               "dtype": "float64"}

#: the reference parameters every conformance point starts from (docs/model.md section 1)
BASE: Mapping[str, Any] = {"omega": 0.3, "sigma": 0.5, "lam": 0.01}


@dataclass(frozen=True)
class Check:
    """One check of :func:`check_model`: its name, whether it passed and what was found."""

    name: str
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "message": self.message}


@dataclass(frozen=True)
class ConformanceResult:
    """The checks of one model (:func:`check_model`) and the numbers they compared: ``compared``
    maps each quantity to ``(theory, simulation mean, relative difference)``."""

    model: str
    checks: tuple[Check, ...]
    compared: Mapping[str, tuple[float, float, float]]
    params: Mapping[str, Any]

    @property
    def success(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def message(self) -> str:
        failed = [f"{c.name}: {c.message}" for c in self.checks if not c.passed]
        if not failed:
            return f"{self.model}: every check passed ({', '.join(c.name for c in self.checks)})"
        return f"{self.model}: " + "; ".join(failed)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "success": self.success, "message": self.message,
                "checks": [c.to_dict() for c in self.checks],
                "compared": {k: {"theory": t, "simulation": s, "relative": r} for k, (t, s, r) in self.compared.items()},
                "params": dict(self.params)}

    def __str__(self) -> str:
        lines = [f"conformance of {self.model}: {'passed' if self.success else 'FAILED'}"]
        lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.name}: {c.message}" for c in self.checks]
        return "\n".join(lines)


def conformance_spec(name: str) -> ModelSpec:
    """The model ``name`` at its conformance point: :data:`BASE` with the registry's ``changes``."""
    model = attention_model(name)
    return ModelSpec(**{**BASE, **model.conformance.changes, "variant": name})


def _refused(call: Any, *args: Any, **kwargs: Any) -> str | None:
    """``None`` where ``call`` raises a one-line ``ValueError``; otherwise what it did."""
    try:
        call(*args, **kwargs)
    except ValueError as exc:
        text = str(exc)
        return None if text and "\n" not in text else f"the ValueError is not one line: {text!r}"
    except Exception as exc:  # noqa: BLE001 - (reported as the failed check)
        return f"raised {type(exc).__name__} instead of ValueError: {exc}"
    return "was accepted"


def _check_registry(name: str) -> Check:
    model = attention_model(name)
    problems = []
    if name not in VARIANTS:
        problems.append("not a choice of ModelSpec.variant")
    for L in (2, 3, 4, 5):
        keys = L // 2 if model.cross else 0
        mask = score_mask(name, L, keys)
        if mask.shape != (L, L) or mask.dtype != np.bool_:
            problems.append(f"mask at L = {L} is {mask.dtype} {mask.shape}, not (L, L) booleans")
        elif not mask.any(axis=1).all():
            problems.append(f"a token attends to nothing at L = {L}")
    from attnphase.theory.geometries import score_form  # (the theory's reading of the registry)

    for rank in (1, 2):
        if score_form(name, rank).shape != (model.field_dim(rank),) * 2:
            problems.append(f"the score form at rank {rank} is not {model.field_dim(rank)} x {model.field_dim(rank)}")
    return Check("registry", not problems, "; ".join(problems) or "mask, score form and variant choice consistent")


def _check_bad_input(name: str) -> Check:
    import attnphase as ap

    model = attention_model(name)
    spec = conformance_spec(name)
    cases: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = [
        ("sigma = -1", ModelSpec, (), {**spec.to_dict(), "sigma": -1.0}),
        ("alpha = -1 (theory)", ap.solve, (-1.0,), {"spec": spec, "settings": "fast", "progress": False}),
        ("d = 0 (simulator)", ap.simulate, (1.0, 0), {"spec": spec, "progress": False}),
    ]
    if not model.covers("stability"):
        from attnphase.theory.stability import check_stability

        cases.append(("the stability check", check_stability, (spec,), {}))
    if not model.covers("one-start"):
        from attnphase.theory.settings import SolverSettings

        one_start = SolverSettings(order=8, refine_order=0, response="positional-start")
        cases.append(("the positional-start selection", ap.solve, (1.0,),
                      {"spec": spec, "branch": "positional", "settings": one_start, "progress": False}))
    problems = [f"{what}: {found}" for what, call, args, kw in cases if (found := _refused(call, *args, **kw))]
    return Check("bad input", not problems, "; ".join(problems) or f"{len(cases)} bad inputs refused in one line")


def _norms(theta: Sequence[Any], m: Sequence[Any], q_trace: float) -> dict[str, float]:
    return {"theta": float(np.linalg.norm(np.asarray(theta, dtype=float))),
            "m": float(np.linalg.norm(np.asarray(m, dtype=float))), "q": q_trace}


def _theory_quantities(point: Any) -> dict[str, float]:
    theta = point.theta_matrix if point.theta_matrix else [[point.theta]]
    m = point.m_matrix if point.m_matrix else [[point.m]]
    q = float(np.trace(np.asarray(point.q_matrix, dtype=float))) if point.q_matrix else float(point.q)
    return {**_norms(theta, m, q), "train_loss": float(point.train_loss), "test_error": float(point.test_error)}


def _run_quantities(run: Any) -> dict[str, float]:
    ov = run.overlaps
    theta = [*ov["theta"], *ov.get("theta_K", [])]
    m = [row + k for row, k in zip(ov["m"], ov["m_K"], strict=True)] if "m_K" in ov else ov["m"]
    q = float(np.trace(np.asarray(ov["q"], dtype=float))) + float(np.trace(np.asarray(ov.get("q_K", [[0.0]]), dtype=float)))
    return {**_norms(theta, m, q), "train_loss": float(run.train_loss), "test_error": float(run.test_error)}


#: the quantities compared on each branch: its defining overlaps, ``tr q`` and the errors
COMPARED = {"semantic": ("theta", "q", "train_loss", "test_error"),
            "positional": ("m", "q", "train_loss", "test_error"),
            "mixed": ("theta", "m", "q", "train_loss", "test_error")}


def check_model(name: str, *, d: int = 500, seeds: int = 4, train: bool = True, threads: int | None = 1) -> ConformanceResult:
    """Run the conformance checks (module docstring) on the registered model ``name``.

    Parameters
    ----------
    name : str
        A name of :data:`attnphase.spec.attention.MODELS` (``ValueError`` listing them otherwise).
    d : int
        The simulator's dimension (500).
    seeds : int
        Training runs, seeds ``0 .. seeds - 1``, each with its own teacher and data.
    train : bool
        ``False``: only the checks that need no solve or training (``registry``, ``bad input``).
    threads : int, optional
        torch CPU threads while training (``None``: torch's own setting).

    Returns
    -------
    ConformanceResult
        Every check with its outcome; ``success`` when all passed.
    """
    model = attention_model(name)
    conf = model.conformance
    spec = conformance_spec(name)
    checks = [_check_registry(name), _check_bad_input(name)]
    compared: dict[str, tuple[float, float, float]] = {}
    params = {"model": name, "spec": spec.to_dict(), "alpha": conf.alpha, "branch": conf.branch,
              "tolerance": conf.tolerance, "d": d, "seeds": seeds, "training": dict(TRAINING), "preset": "fast"}
    if not train:
        return ConformanceResult(name, tuple(checks), compared, params)
    import attnphase as ap

    solved = ap.solve(conf.alpha, branch=conf.branch, spec=spec, settings="fast", progress=False)
    point = solved.branches.get(conf.branch)
    if point is None or not point.converged or not point.estimated:
        why = "absent" if point is None else "not converged" if not point.converged else "without an error estimate"
        checks.append(Check("theory", False, f"the {conf.branch} branch at alpha = {conf.alpha:g} is {why}: "
                                             f"{solved.message}"))
        return ConformanceResult(name, tuple(checks), compared, params)
    checks.append(Check("theory", True, f"the {conf.branch} branch at alpha = {conf.alpha:g}, converged, "
                                        f"relative error estimate of the overlaps {point.overlap_error:.1e}"))
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    sim = ap.simulate(conf.alpha, d, init=conf.branch, seeds=seeds, spec=spec, progress=False, **TRAINING)
    unconverged = [r.seed for r in sim.runs if not r.converged]
    elsewhere = [f"seed {r.seed}: {r.branch}" for r in sim.runs if r.branch != conf.branch]
    sim_ok = not unconverged and not elsewhere
    checks.append(Check("simulator", sim_ok, "; ".join(
        ([f"seeds {unconverged} did not meet the tolerance {TRAINING['tol']:g}"] if unconverged else [])
        + ([f"ended off the {conf.branch} branch ({', '.join(elsewhere)})"] if elsewhere else []))
        or f"{len(sim.runs)} runs at d = {d} converged on the {conf.branch} branch"))
    if not sim_ok:  # (a run that did not converge or left the branch is never compared)
        return ConformanceResult(name, tuple(checks), compared, params)
    theory = _theory_quantities(point)
    runs = [_run_quantities(r) for r in sim.runs]
    off = []
    for key in COMPARED[conf.branch]:
        mean = float(np.mean([r[key] for r in runs]))
        rel = mean / theory[key] - 1.0 if theory[key] else math.inf
        compared[key] = (theory[key], mean, rel)
        if not abs(rel) <= conf.tolerance:
            off.append(f"{key} {mean:.5g} against {theory[key]:.5g} ({100 * rel:+.1f} %)")
    worst = max(abs(r) for _, _, r in compared.values())
    checks.append(Check("agreement", not off, "; ".join(off) + f" (tolerance {100 * conf.tolerance:g} %)" if off else
                        f"{', '.join(compared)} within {100 * worst:.1f} % (tolerance {100 * conf.tolerance:g} %)"))
    return ConformanceResult(name, tuple(checks), compared, params)

