"""The result of the Bayes-optimal state evolution (:class:`BayesResult`, docs/bayes.md) and the
overlap targets it is solved to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnphase._json import jsonable
from attnphase.results_records import (
    fmt_g,
    frozen,
    one_line,
)
from attnphase.spec.problem import ModelSpec

#: the largest quadrature error estimate of a Bayes-optimal overlap that :class:`BayesResult` counts as a success
BAYES_OVERLAP_TARGET = 1e-6
#: the same with label noise (Monte-Carlo outer average)
BAYES_NOISY_OVERLAP_TARGET = 2e-2


@dataclass(frozen=True, repr=False)
class BayesResult:
    """The Bayes-optimal baseline (:func:`attnphase.bayes`, docs/model.md section 8).

    Attributes
    ----------
    spec : ModelSpec
        The model.
    noise : float
        The label noise ``Delta`` (docs/model.md (8.10); 0: noiseless).
    points : tuple of mapping
        Per ``alpha`` the state-evolution fixed point reached from the uninformed start, as
        records with ``alpha``, ``overlap`` (``x = q / rho``, equal to ``theta = Qhat^T Q* / d``
        of the Bayes estimate in user units, docs/model.md (1.5)), ``q`` and ``V`` (paper
        convention), ``test_error`` (docs/model.md (8.8), the units of every test error of the
        package) and their quadrature error estimates, and every fixed point found
        (``fixed_points``).
    thresholds : mapping
        ``alpha_WR``, ``alpha_IT``, ``alpha_PR`` with their precision (docs/model.md (8.5),
        (8.6)); with label noise ``alpha_WR`` and its error, ``alpha_IT = alpha_PR = None``
        (8.10).
    linear_test_error : float
        The dense linear baseline (docs/model.md (4.3)), equal to the Bayes-optimal error below
        ``alpha_WR``.
    gamp : tuple of mapping
        GAMP at finite ``d`` on the simulator's data (docs/model.md (8.9)), one record per
        ``alpha`` (empty unless asked for).
    params : mapping
        The model, the grid, the quadrature, GAMP's settings and the versions.
    success : bool
        Every overlap's quadrature error estimate is at most
        ``attnphase.results_bayes.BAYES_OVERLAP_TARGET`` (``BAYES_NOISY_OVERLAP_TARGET`` with label
        noise) and every GAMP run converged.
    message : str
        The thresholds, GAMP's convergence and any overlap short of its precision, in one line
        a person can read.
    """

    spec: ModelSpec
    noise: float
    points: tuple[Mapping[str, Any], ...]
    thresholds: Mapping[str, Any]
    linear_test_error: float
    gamp: tuple[Mapping[str, Any], ...]
    params: Mapping[str, Any] = field(repr=False)
    success: bool
    message: str

    @property
    def alphas(self) -> tuple[float, ...]:
        return tuple(float(p["alpha"]) for p in self.points)

    @property
    def overlaps(self) -> tuple[float, ...]:
        return tuple(float(p["overlap"]) for p in self.points)

    @property
    def test_errors(self) -> tuple[float, ...]:
        return tuple(float(p["test_error"]) for p in self.points)

    def __repr__(self) -> str:
        thr = ", ".join(f"{k} = {fmt_g(self.thresholds.get(k))}" for k in ("alpha_WR", "alpha_IT", "alpha_PR"))
        a = self.alphas
        grid = f"{len(a)} alpha values" + (f" in [{min(a):g}, {max(a):g}]" if a else "")
        return "\n".join([
            f"BayesResult(L={self.spec.L}, omega={self.spec.omega:g}, noise={self.noise:g}, success={self.success})",
            f"  thresholds: {thr}",
            f"  points: {grid}; linear_test_error = {fmt_g(self.linear_test_error)}; GAMP: {len(self.gamp)} alpha values",
            f"  message: {one_line(self.message)}"])

    def to_dict(self) -> dict[str, Any]:
        """The record that ``attnphase bayes --json`` prints."""
        return jsonable({"params": self.params, "thresholds": self.thresholds, "points": self.points,
                         "linear_test_error": self.linear_test_error, "gamp": self.gamp,
                         "success": self.success, "message": self.message})

    @classmethod
    def from_points(cls, spec: ModelSpec, noise: float, points: list[dict[str, Any]], thresholds: Mapping[str, Any],
                    linear_test_error: float, gamp: list[dict[str, Any]], params: Mapping[str, Any]) -> BayesResult:
        """Gather what :func:`attnphase.bayes` computed."""
        bad_gamp = [g for g in gamp if g["converged"] < len(g["runs"])]
        target = BAYES_OVERLAP_TARGET if noise == 0 else BAYES_NOISY_OVERLAP_TARGET
        bad_points = [p for p in points if not p["overlap_error"] <= target]
        t = thresholds
        if t.get("alpha_PR") is None:  # label noise: no perfect recovery
            msg = (f"L = {spec.L}, noise {noise:g}: alpha_WR = {t['alpha_WR']:.6g}, no perfect recovery; "
                   f"{len(points)} alpha values")
        else:
            msg = (f"L = {spec.L}: alpha_WR = {t['alpha_WR']:.6g}, alpha_IT = {t['alpha_IT']:.6g}, "
                   f"alpha_PR = {t['alpha_PR']:.6g}; {len(points)} alpha values")
        if gamp:
            msg += (f"; GAMP at d = {gamp[0]['d']}: {sum(g['converged'] for g in gamp)} of "
                    f"{sum(len(g['runs']) for g in gamp)} runs converged")
        if bad_points:
            msg += (f"; overlap quadrature error above {target:g} at alpha = "
                    + ", ".join(f"{p['alpha']:g}" for p in bad_points))
        return cls(spec=spec, noise=float(noise), points=frozen(points), thresholds=frozen(dict(thresholds)),
                   linear_test_error=float(linear_test_error), gamp=frozen(gamp), params=frozen(params),
                   success=not bad_gamp and not bad_points, message=msg)
