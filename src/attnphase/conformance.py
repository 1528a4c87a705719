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

from attnphase.spec.attention import (
    ACTIVATIONS,
    HEADS_CONFORMANCE,
    MODELS,
    TRAINED_HEADS_CONFORMANCE,
    Conformance,
    attention_model,
    score_mask,
)
from attnphase.spec.defaults import training
from attnphase.spec.problem import VARIANTS, ModelSpec

__all__ = ["Case", "Check", "ConformanceResult", "case", "cases", "check_model", "conformance_spec", "theory_covers"]

#: the training of the simulator check: heavy-ball GD (the same minima as plain GD,
#: docs/simulation.md) in float64 to the gradient tolerance 1e-6 (``spec.defaults.TRAINING``)
TRAINING: Mapping[str, Any] = training("conformance")

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


@dataclass(frozen=True)
class Case:
    """One conformance case: a registered attention model at its conformance point, or the tied
    student with one of the registry's other attention maps or with two heads."""

    name: str
    variant: str
    conformance: Conformance
    changes: Mapping[str, Any]

    @property
    def spec(self) -> ModelSpec:
        """:data:`BASE` with the case's and its conformance point's changes."""
        return ModelSpec(**{**BASE, **self.conformance.changes, **self.changes, "variant": self.variant})


def cases() -> dict[str, Case]:
    """Every conformance case the registry declares, by name: each model of
    :data:`~attnphase.spec.attention.MODELS` (its name), the tied student with each attention map
    other than the softmax (``tied/<map>``) and with two heads, their gains fixed (``tied/2-heads``)
    and trained (``tied/2-heads-trained``)."""
    out = {name: Case(name, name, m.conformance, {}) for name, m in MODELS.items()}
    for a in ACTIVATIONS.values():
        if a.name != "softmax":
            out[f"tied/{a.name}"] = Case(f"tied/{a.name}", "tied", a.conformance, {"activation": a.name})
    out["tied/2-heads"] = Case("tied/2-heads", "tied", HEADS_CONFORMANCE, {})
    out["tied/2-heads-trained"] = Case("tied/2-heads-trained", "tied", TRAINED_HEADS_CONFORMANCE, {})
    return out


def case(name: str) -> Case:
    """The conformance case ``name`` (``ValueError`` naming the known ones otherwise)."""
    known = cases()
    if name not in known:
        raise ValueError(f"unknown conformance case {name!r}; known: {', '.join(known)}")
    return known[name]


def theory_covers(name: str) -> bool:
    """Whether the theory covers the case ``name`` (its maps and heads)."""
    from attnphase.theory.channels import check_attention_covered

    try:
        check_attention_covered(case(name).spec, trained_heads=True)  # (the check's theory is a single solve)
    except ValueError:
        return False
    return True


def conformance_spec(name: str) -> ModelSpec:
    """The case ``name`` (a model's name, or :func:`cases`) at its conformance point."""
    return case(name).spec


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

    this = case(name)
    model, spec = attention_model(this.variant), this.spec
    attention = spec.heads > 1 or spec.activation != "softmax" or spec.teacher_activation != "softmax"
    cases: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = [
        ("sigma = -1", ModelSpec, (), {**spec.to_dict(), "sigma": -1.0}),
        ("alpha = -1 (theory)", ap.solve, (-1.0,), {"spec": spec, "settings": "fast", "progress": False}),
        ("d = 0 (simulator)", ap.simulate, (1.0, 0), {"spec": spec, "progress": False}),
    ]
    if not theory_covers(name):
        cases.append(("the theory, which does not cover it", ap.solve, (1.0,),
                      {"spec": spec, "settings": "fast", "progress": False}))
    if not model.covers("stability") or attention:
        from attnphase.theory.stability import check_stability

        cases.append(("the stability check", check_stability, (spec,), {}))
    if not model.covers("one-start") or spec.heads > 1:  # (one head: every attention map)
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
            "specialised": ("theta", "m", "q", "train_loss", "test_error"),
            "positional": ("m", "q", "train_loss", "test_error"),
            "mixed": ("theta", "m", "q", "train_loss", "test_error")}


def check_model(name: str, *, d: int = 500, seeds: int = 4, train: bool = True, threads: int | None = 1) -> ConformanceResult:
    """Run the conformance checks (module docstring) on the registered model ``name``.

    Parameters
    ----------
    name : str
        A conformance case (:func:`cases`: a name of :data:`attnphase.spec.attention.MODELS`,
        ``tied/<map>``, ``tied/2-heads`` or ``tied/2-heads-trained``; ``ValueError`` listing them otherwise).
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
    this = case(name)
    conf, spec = this.conformance, this.spec
    checks = [_check_registry(this.variant), _check_bad_input(name)]
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
    from attnphase.sim import TrainSettings

    sim = ap.simulate(conf.alpha, d, init=conf.branch, seeds=seeds, spec=spec, progress=False,
                      settings=TrainSettings(**TRAINING))
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

