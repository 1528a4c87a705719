"""The Bayes-optimal baseline: state evolution of the Bayes-optimal estimator (docs/model.md section 8).

Noiseless labels for any ``L`` ((8.1)-(8.8)); Gaussian noise on the observed ``T`` for ``L = 2``
((8.10), slower: Monte Carlo over the outer variables).

Given a sample ``(x, y)`` the learner knows the semantic tokens ``z`` (the positions are known) and
reads the target matrix ``T`` off ``y = T z``; for ``omega < 1`` and a rank-one teacher ``T``
determines the teacher's fields ``h* = (h*_1 .. h*_L)`` up to one common sign (8.1). Learning the
teacher is then a generalised linear estimation with ``L`` measurements per sample and the output
channel ``u = s h*``, ``s = +-1`` unknown. With the Gaussian prior of the teacher its state
evolution has one order parameter, the normalised overlap ``x = q / rho`` of the Bayes estimate with
the teacher (``rho = sigma^2``), and does not depend on ``sigma``, ``omega`` or ``A`` (8.2)-(8.4).

Numerics only: the data and GAMP on them are in :mod:`attnphase.sim.gamp`.

Units. ``overlap`` is ``x = q / rho`` in ``[0, 1]``, which is also the overlap of the estimate
``Qhat = E[Q* | data]`` with the teacher in the package's user units, ``theta = Qhat^T Q* / d``
(docs/model.md (1.5)); ``q = rho x`` is the paper-convention value. Test errors are in the units
of every test error of the package (docs/model.md (4.2)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special

from attnphase.spec.problem import ModelSpec

__all__ = [
    "MIN_NOISE",
    "BayesPoint",
    "BayesQuadrature",
    "BayesThresholds",
    "NoisyQuadrature",
    "check_bayes_spec",
    "curve_grid",
    "effective_noise",
    "make_rules",
    "noiseless_map",
    "noisy_fixed_point",
    "noisy_map",
    "noisy_weak_recovery",
    "perfect_recovery_it",
    "se_fixed_point",
    "solve_noisy",
    "solve_point",
    "test_error",
    "thresholds",
    "weak_recovery_threshold",
]


#: the smallest label noise whose state evolution the quadrature resolves (docs/model.md (8.10))
MIN_NOISE = 1e-4


def check_bayes_spec(spec: ModelSpec, noise: float = 0.0) -> None:
    """``ValueError`` (one line) for a model the Bayes-optimal baseline does not cover (docs/model.md (8.1))."""
    if spec.teacher_rank != 1:
        raise ValueError(f"the Bayes-optimal baseline covers teacher rank 1 only, got --teacher-rank {spec.teacher_rank}")
    if spec.is_cross:
        raise ValueError("the Bayes-optimal baseline does not cover cross-attention (docs/model.md section 10)")
    if spec.causal_target:
        raise ValueError("the Bayes-optimal baseline does not cover the causal target (the masked softmax "
                         "does not determine the teacher's fields up to a sign)")
    if not spec.uncorrelated:
        raise ValueError("the Bayes-optimal baseline covers uncorrelated tokens only (token_corr 0, no token_cov)")
    if spec.mixture:
        raise ValueError("the Bayes-optimal baseline does not cover Gaussian-mixture tokens (--mixture)")
    if not spec.omega < 1.0:
        raise ValueError("the Bayes-optimal baseline needs omega < 1 (at omega = 1 the labels carry no "
                         "information about the teacher)")
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    if noise > 0 and spec.L != 2:
        raise ValueError(f"the Bayes-optimal baseline with label noise covers L = 2 only, got L = {spec.L}")
    if 0 < noise < MIN_NOISE:
        raise ValueError(f"label noise below {MIN_NOISE:g} is not covered (its quadrature does not converge); "
                         f"noise 0 gives the noiseless labels")


# --------------------------------------------------------------------------------- quadrature
@dataclass(frozen=True)
class BayesQuadrature:
    """The rules of the noiseless state evolution (docs/model.md (8.3), (8.7)).

    ``n_s``: generalised Gauss-Laguerre nodes for ``s = |h|^2 / rho ~ chi^2_L``; ``n_gh``:
    Gauss-Hermite nodes for the Gaussian variable along ``h`` where ``b <= 1``; ``n_panels``:
    16-point Gauss-Legendre panels on ``[-u_max, u_max]`` for ``b > 1``. ``test_samples``:
    Monte-Carlo samples of the test error where ``L >= 4`` (``L = 2, 3``: product Gauss-Hermite
    rules, :data:`_GH_ORDERS`).
    """

    n_s: int = 48
    n_gh: int = 80
    n_panels: int = 80
    u_max: float = 40.0
    test_samples: int = 1 << 14

    def doubled(self) -> BayesQuadrature:
        """The check rule: every order doubled (the difference is the error estimate)."""
        return BayesQuadrature(2 * self.n_s, 2 * self.n_gh, 2 * self.n_panels, self.u_max, 2 * self.test_samples)


def _sech2(x: np.ndarray) -> np.ndarray:
    e = np.exp(-2.0 * np.abs(x))
    return 4.0 * e / (1.0 + e) ** 2


class _Rules:
    """Nodes and weights of a :class:`BayesQuadrature` for one ``L`` (built once per solve)."""

    def __init__(self, L: int, quad: BayesQuadrature) -> None:
        a = L / 2.0
        # s ~ chi^2_L: E_s[s f(s)] = 2 (2/(1+c))^{a+1} / (2^a Gamma(a)) ... see _mean_s_sech2
        self.t, self.wt = special.roots_genlaguerre(quad.n_s, a)
        self.log_norm = -a * math.log(2.0) - special.gammaln(a)
        self.a = a
        z, w = special.roots_hermitenorm(quad.n_gh)
        self.zeta, self.wz = z, w / math.sqrt(2.0 * math.pi)
        g, gw = special.roots_legendre(16)
        edges = np.linspace(-quad.u_max, quad.u_max, quad.n_panels + 1)
        half = 0.5 * np.diff(edges)
        mid = 0.5 * (edges[1:] + edges[:-1])
        self.u = (mid[:, None] + half[:, None] * g[None, :]).ravel()
        self.wu = (half[:, None] * gw[None, :]).ravel()
        # e^u sech^2(u), the smooth part of the u-integrand (8.7)
        self.eu_sech2 = 4.0 * np.exp(self.u - 2.0 * np.abs(self.u)) / (1.0 + np.exp(-2.0 * np.abs(self.u))) ** 2


def _K(b: np.ndarray, R: _Rules) -> np.ndarray:
    """``K(b) = e^{b^2/2} E_zeta sech^2(b^2 + b zeta)`` (docs/model.md (8.7)): Gauss-Hermite in
    ``zeta`` for ``b <= 1``, ``K = int e^u sech^2(u) e^{-u^2/(2 b^2)} du / (sqrt(2 pi) b)`` on
    Gauss-Legendre panels for ``b > 1``."""
    b = np.asarray(b, dtype=float)
    out = np.empty_like(b)
    lo = b <= 1.0
    if np.any(lo):
        bl = b[lo]
        out[lo] = np.exp(0.5 * bl**2) * (_sech2(bl[:, None] ** 2 + bl[:, None] * R.zeta[None, :]) @ R.wz)
    if np.any(~lo):
        bh = b[~lo]
        gauss = np.exp(-0.5 * (R.u[None, :] / bh[:, None]) ** 2)
        out[~lo] = (gauss * R.eu_sech2[None, :]) @ R.wu / (math.sqrt(2.0 * math.pi) * bh)
    return out


def _mean_s_sech2(x: float, R: _Rules) -> float:
    """``E[s sech^2(c s + sqrt(c s) zeta)]`` with ``s ~ chi^2_L``, ``zeta ~ N(0, 1)``,
    ``c = x / (1 - x)`` (docs/model.md (8.3), (8.7)), as
    ``2^{-a} / Gamma(a) (2/(1+c))^{a+1} sum_j w_j K(sqrt(2 c t_j / (1 + c)))``, ``a = L/2``."""
    c = x / (1.0 - x)
    b = np.sqrt(2.0 * c * R.t / (1.0 + c))
    log_pref = R.log_norm + (R.a + 1.0) * math.log(2.0 / (1.0 + c))
    return float(math.exp(log_pref) * (R.wt @ _K(b, R)))


def make_rules(L: int, quad: BayesQuadrature) -> _Rules:
    """The nodes and weights of ``quad`` for ``L`` tokens (to share between calls)."""
    return _Rules(L, quad)


def noiseless_map(x: float, alpha: float, L: int, R: _Rules) -> float:
    """One step of the noiseless state evolution, ``x -> x'`` (docs/model.md (8.3), (8.4)):
    ``rho q_hat = alpha (L (1 - x) - E[s sech^2]) / (1 - x)^2``, ``x' = rho q_hat / (1 + rho q_hat)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    Q = alpha * (L * (1.0 - x) - _mean_s_sech2(x, R)) / (1.0 - x) ** 2
    Q = max(Q, 0.0)
    return Q / (1.0 + Q)


def _growth(x: float, alpha: float, L: int, R: _Rules) -> float:
    """``(x' - x) / (x (1 - x))``: positive where the iteration increases the overlap. Its limits
    are ``alpha L (L + 1) - 1`` at ``x -> 0`` and ``1 - 1 / (alpha L)`` at ``x -> 1`` (8.5), (8.6)."""
    return (noiseless_map(x, alpha, L, R) - x) / (x * (1.0 - x))


#: the overlap grid on which the fixed points are bracketed (clustered at both ends)
def _x_grid(n: int = 161) -> np.ndarray:
    k = np.arange(1, n + 1)
    return 0.5 - 0.5 * np.cos(np.pi * k / (n + 1))


def curve_grid(lo: float, hi: float, L: int, num: int = 41) -> list[float]:
    """``num`` values of ``alpha`` spanning ``[lo, hi]`` plus ``alpha_WR`` and ``alpha_IT`` where they
    fall inside (the kinks of the noiseless curves, (8.5), (8.6)), for drawing the Bayes-optimal
    curves next to coarser grids."""
    pts = set(np.linspace(lo, hi, num).tolist())
    pts |= {a for a in (weak_recovery_threshold(L), perfect_recovery_it(L)) if lo < a < hi}
    return sorted(pts)


def weak_recovery_threshold(L: int) -> float:
    """``alpha_WR = 1 / (L (L + 1))``, where the uninformative fixed point ``x = 0`` becomes
    unstable (docs/model.md (8.5))."""
    return 1.0 / (L * (L + 1))


def perfect_recovery_it(L: int) -> float:
    """``alpha_IT = 1 / L``: above it the free entropy of the perfect-recovery state diverges to
    ``+inf`` and that state is locally stable (docs/model.md (8.6))."""
    return 1.0 / L


def se_fixed_point(alpha: float, L: int, quad: BayesQuadrature = BayesQuadrature(), *,
                   _rules: _Rules | None = None, near: float | None = None) -> tuple[float, list[float]]:
    """The fixed point that the state evolution reaches from the uninformative start (docs/model.md
    (8.4)): ``0`` below ``alpha_WR``, the first root of ``x' = x`` above it, ``1`` (perfect
    recovery) where there is none. Returns it and every root found in ``(0, 1)`` (the stable
    and unstable fixed points, found by Brent's method to ``1e-13`` after a scan of the growth
    rate on a grid). ``near``: a root of a close rule (the check rule's fixed point is then looked
    for in ``near +- 1e-3`` only, falling back to the scan)."""
    R = _rules or _Rules(L, quad)
    if alpha * L * (L + 1) <= 1.0 and near is None:
        near = 0.0
    if near is not None:
        if near in (0.0, 1.0):
            return near, []
        lo, hi = max(near - 1e-3, 1e-12), min(near + 1e-3, 1 - 1e-12)
        if _growth(lo, alpha, L, R) > 0 > _growth(hi, alpha, L, R):
            x = float(optimize.brentq(_growth, lo, hi, args=(alpha, L, R), xtol=1e-13))
            return x, [x]
    grid = _x_grid()
    vals = np.array([_growth(float(x), alpha, L, R) for x in grid])
    roots = []
    for i in range(len(grid) - 1):
        if vals[i] == 0.0:
            roots.append(float(grid[i]))
        elif vals[i] * vals[i + 1] < 0:
            roots.append(float(optimize.brentq(_growth, grid[i], grid[i + 1], args=(alpha, L, R), xtol=1e-13)))
    if alpha * L * (L + 1) <= 1.0:
        return 0.0, roots
    return (roots[0] if roots else 1.0), roots


def _min_growth(alpha: float, L: int, R: _Rules) -> float:
    """The interior minimum of :func:`_growth` over ``x`` (grid, then a bounded refinement)."""
    grid = _x_grid()
    vals = np.array([_growth(float(x), alpha, L, R) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(_growth, bounds=(lo, hi), args=(alpha, L, R), method="bounded",
                                   options={"xatol": 1e-12})
    return float(min(res.fun, vals[i]))


@dataclass(frozen=True)
class BayesThresholds:
    """The recovery thresholds of the noiseless channel (docs/model.md (8.5), (8.6)).

    ``alpha_WR``: weak recovery (closed form); ``alpha_IT``: information-theoretic perfect
    recovery (closed form); ``alpha_PR``: algorithmic perfect recovery, the smallest ``alpha``
    from which the state evolution started uninformed reaches ``x = 1``, located by Brent's
    method on the minimum of the growth rate to ``precision`` (absolute, in ``alpha``);
    ``alpha_PR_check``: the same on the doubled rule (their difference is the quadrature error).
    """

    L: int
    alpha_WR: float
    alpha_IT: float
    alpha_PR: float
    alpha_PR_check: float
    precision: float

    def to_dict(self) -> dict[str, Any]:
        return {"alpha_WR": self.alpha_WR, "alpha_IT": self.alpha_IT, "alpha_PR": self.alpha_PR,
                "alpha_PR_quadrature_error": abs(self.alpha_PR - self.alpha_PR_check),
                "alpha_PR_root_precision": self.precision}


def _alpha_pr(L: int, R: _Rules, xtol: float) -> float:
    lo = max(perfect_recovery_it(L), weak_recovery_threshold(L)) * (1 + 1e-9)
    f = lambda a: _min_growth(a, L, R)  # noqa: E731
    if f(lo) >= 0:  # the overlap rises continuously to 1: no hard phase
        return lo
    hi = 2.0 * lo
    while f(hi) < 0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e3:
            raise RuntimeError("no perfect-recovery threshold below alpha = 1000")
    return float(optimize.brentq(f, lo, hi, xtol=xtol))


def thresholds(L: int, quad: BayesQuadrature = BayesQuadrature(), xtol: float = 1e-7) -> BayesThresholds:
    """``alpha_WR``, ``alpha_IT`` and ``alpha_PR`` of the noiseless channel (docs/model.md (8.5), (8.6))."""
    a_pr = _alpha_pr(L, _Rules(L, quad), xtol)
    a_chk = _alpha_pr(L, _Rules(L, quad.doubled()), xtol)
    return BayesThresholds(L, weak_recovery_threshold(L), perfect_recovery_it(L), a_pr, a_chk, xtol)


# --------------------------------------------------------------------------------- test error
def _softmax_rank1(h: np.ndarray) -> np.ndarray:
    """``softmax(h h^T)`` row-wise for fields ``h`` of shape ``(..., L)``."""
    s = h[..., :, None] * h[..., None, :]
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def test_error(x: float, spec: ModelSpec, quad: BayesQuadrature = BayesQuadrature(), seed: int = 0) -> tuple[float, float]:
    """The Bayes-optimal test error at overlap ``x`` and its error estimate (docs/model.md (8.8)):
    ``eps_BO = (sigma^2/2) (1 - omega)^2 (E ||S(h)||_F^2 - E_xi ||E_eta S(h)||_F^2)`` with
    ``h = sqrt(rho) (sqrt(x) xi + sqrt(1 - x) eta)``. ``L = 2``: product Gauss-Hermite rules of two
    orders (the estimate is their difference); ``L >= 3``: Monte Carlo with independent inner
    halves (unbiased for the square), the estimate is the standard error."""
    x = min(max(float(x), 0.0), 1.0)
    L, rho = spec.L, spec.sigma**2
    pref = 0.5 * spec.sigma**2 * (1.0 - spec.omega) ** 2
    if x == 1.0:  # the fields are known: nothing to average
        return 0.0, 0.0
    orders = _GH_ORDERS.get(L)
    if orders is not None:
        lo, hi = (_test_error_gh(x, rho, L, n) for n in orders)
        return pref * hi, pref * abs(hi - lo)
    rng = np.random.default_rng(seed)
    M, K = quad.test_samples, 16
    h = math.sqrt(rho) * rng.standard_normal((M, L))
    S0 = _softmax_rank1(h)
    ES2 = np.einsum("mlj,mlj->m", S0, S0)
    xi = rng.standard_normal((M, 1, L))
    eta = rng.standard_normal((M, 2 * K, L))
    S = _softmax_rank1(math.sqrt(rho) * (math.sqrt(x) * xi + math.sqrt(1.0 - x) * eta))
    m1, m2 = S[:, :K].mean(axis=1), S[:, K:].mean(axis=1)
    per = ES2 - np.einsum("mlj,mlj->m", m1, m2)
    return pref * float(per.mean()), pref * float(per.std(ddof=1) / math.sqrt(M))


#: the two product Gauss-Hermite orders (points per dimension) of the test error, by ``L``
#: (``n^{2L}`` nodes for the nested integral); Monte Carlo for other ``L``
_GH_ORDERS = {2: (16, 24), 3: (8, 11)}


def _test_error_gh(x: float, rho: float, L: int, n: int) -> float:
    """``E ||S(h)||^2 - E_xi ||E_eta S(h)||^2`` on product Gauss-Hermite rules of ``n`` points per
    dimension (``L`` dimensions each)."""
    z, w = special.roots_hermitenorm(n)
    w = w / math.sqrt(2.0 * math.pi)
    nodes = np.stack(np.meshgrid(*([z] * L), indexing="ij"), axis=-1).reshape(-1, L)
    W = np.ones(1)
    for _ in range(L):
        W = np.multiply.outer(W, w).ravel()
    S = _softmax_rank1(math.sqrt(rho) * nodes)
    ES2 = float(np.einsum("a,alk,alk->", W, S, S))
    if x == 0.0:  # nothing known: E ||E S||^2 is one L-dimensional integral
        ES = np.einsum("a,alk->lk", W, S)
        return ES2 - float(np.sum(ES * ES))
    S = _softmax_rank1(math.sqrt(rho) * (math.sqrt(x) * nodes[:, None, :] + math.sqrt(1.0 - x) * nodes[None, :, :]))
    inner = np.einsum("j,ijlk->ilk", W, S)
    return ES2 - float(np.einsum("i,ilk,ilk->", W, inner, inner))


# --------------------------------------------------------------------------------- one point
@dataclass(frozen=True)
class BayesPoint:
    """The Bayes-optimal state at one ``alpha`` (docs/model.md (8.4), (8.8)): the overlap ``x``
    (``= theta`` in user units), the paper-convention ``q = rho x`` and ``V = rho (1 - x)``, the
    test error and error estimates; ``fixed_points``: every root of ``x' = x`` in ``(0, 1)``."""

    alpha: float
    overlap: float
    q: float
    V: float
    test_error: float
    test_error_error: float
    overlap_error: float
    fixed_points: tuple[float, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "overlap": self.overlap, "q": self.q, "V": self.V,
                "test_error": self.test_error, "overlap_error": self.overlap_error,
                "test_error_error": self.test_error_error, "fixed_points": list(self.fixed_points)}


def solve_point(alpha: float, spec: ModelSpec, quad: BayesQuadrature = BayesQuadrature(),
                rules: tuple[Any, Any] | None = None,
                overlap_fn: Callable[[float], tuple[float, list[float]]] | None = None) -> BayesPoint:
    """The noiseless Bayes-optimal point at ``alpha`` (docs/model.md (8.4), (8.8)): the fixed
    point on ``quad`` and on its doubled rule (the difference is ``overlap_error``)."""
    L, rho = spec.L, spec.sigma**2
    R1, R2 = rules or (_Rules(L, quad), _Rules(L, quad.doubled()))
    x, roots = se_fixed_point(alpha, L, quad, _rules=R1)
    x2, _ = se_fixed_point(alpha, L, quad, _rules=R2, near=x)
    eps, eps_err = test_error(x, spec, quad)
    return BayesPoint(float(alpha), x, rho * x, rho * (1.0 - x), eps, eps_err, abs(x - x2), tuple(roots))


# --------------------------------------------------------------------------------- label noise (L = 2)
@dataclass(frozen=True)
class NoisyQuadrature:
    """The rules of the noisy state evolution (docs/model.md (8.10)): ``samples`` Monte-Carlo draws
    of the outer variables (``xi``, ``eta``, the noise; common to every ``x`` and ``alpha``, so the
    map is smooth), ``order`` Gauss-Hermite points per dimension of the inner posterior average,
    ``seed`` of the draws. The error estimate repeats the solve on ``seed + 1``."""

    samples: int = 4096
    order: int = 32
    seed: int = 0

    def replica(self) -> NoisyQuadrature:
        return NoisyQuadrature(self.samples, self.order, self.seed + 1)

    @classmethod
    def for_noise(cls, noise: float) -> NoisyQuadrature:
        """The default rule for label noise ``noise``: 32 inner points per dimension from
        ``1e-2`` on, 64 below (measured: ``alpha_WR`` at ``1e-4`` moves by 9 % from 32 to 64
        points and by under 1 % from 64 to 96)."""
        return cls(order=32 if noise >= 1e-2 else 64)


def _s_diag(h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(S_11, S_22)`` of ``softmax(h h^T)`` at ``L = 2``: ``sigmoid(h_l (h_l - h_k))``."""
    return special.expit(h1 * (h1 - h2)), special.expit(h2 * (h2 - h1))


class _NoisyRules:
    """Outer draws and inner nodes of a :class:`NoisyQuadrature` (docs/model.md (8.10))."""

    def __init__(self, quad: NoisyQuadrature) -> None:
        rng = np.random.default_rng(quad.seed)
        self.xi = rng.standard_normal((quad.samples, 2))
        self.eta = rng.standard_normal((quad.samples, 2))
        self.zeta = rng.standard_normal((quad.samples, 2))
        z, w = special.roots_hermitenorm(quad.order)
        w = w / math.sqrt(2.0 * math.pi)
        t1, t2 = np.meshgrid(z, z, indexing="ij")
        self.t = np.stack([t1.ravel(), t2.ravel()], axis=1)
        self.logw = np.log(np.multiply.outer(w, w).ravel())


def effective_noise(noise: float, omega: float) -> float:
    """The variance ``Delta_e = Delta / (2 (1 - omega)^2)`` with which the label noise of variance
    ``Delta`` on every entry of ``T`` reaches the statistics ``y_l`` of ``S_ll`` (docs/model.md (8.10))."""
    return noise / (2.0 * (1.0 - omega) ** 2)


def _posterior(y: np.ndarray, center: np.ndarray, scale: float, delta_e: float, R: _NoisyRules,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Posterior weights ``p`` (``(m, n^2)``) and nodes ``h`` (``(m, n^2, 2)``) of the fields given
    ``y`` under the Gaussian ``N(center, scale^2 I_2)`` (docs/model.md (8.10))."""
    h = center[:, None, :] + scale * R.t[None, :, :]
    s1, s2 = _s_diag(h[..., 0], h[..., 1])
    logp = R.logw[None, :] - ((y[:, 0:1] - s1) ** 2 + (y[:, 1:2] - s2) ** 2) / (2.0 * delta_e)
    logp -= logp.max(axis=1, keepdims=True)
    p = np.exp(logp)
    p /= p.sum(axis=1, keepdims=True)
    return p, h


def noisy_map(x: float, alpha: float, rho: float, delta_e: float, R: _NoisyRules, chunk: int = 512) -> float:
    """One step of the state evolution with label noise, ``x -> x'`` (docs/model.md (8.10), (8.4)):
    ``rho q_hat = alpha rho E |E[h | y, omega] - omega|^2 / V^2`` (``alpha E |g_out|^2``; the form
    without ``omega``'s sample average, which would cancel against ``2 q`` near ``x = 1``), the
    outer average over the draws of ``R``, the posterior mean on the inner Gauss-Hermite rule."""
    if x <= 0.0:
        return 0.0
    q, V = rho * x, rho * (1.0 - x)
    acc = 0.0
    M = len(R.xi)
    for a in range(0, M, chunk):
        om = math.sqrt(q) * R.xi[a:a + chunk]
        h0 = om + math.sqrt(V) * R.eta[a:a + chunk]
        s1, s2 = _s_diag(h0[:, 0], h0[:, 1])
        y = np.stack([s1, s2], axis=1) + math.sqrt(delta_e) * R.zeta[a:a + chunk]
        p, h = _posterior(y, om, math.sqrt(V), delta_e, R)
        dm = np.einsum("mj,mjl->ml", p, h) - om
        acc += float(np.sum(dm * dm))
    Q = alpha * rho * (acc / M) / V**2
    return Q / (1.0 + Q)


def noisy_weak_recovery(rho: float, delta_e: float, R: _NoisyRules, chunk: int = 512) -> float:
    """``alpha_WR = 1 / E_y || E[h h^T | y] / rho - I ||_F^2`` with the prior ``h ~ N(0, rho I_2)``
    (docs/model.md (8.10); ``6`` in the denominator without noise, (8.5))."""
    acc = 0.0
    M = len(R.xi)
    zero = np.zeros((min(chunk, M), 2))
    for a in range(0, M, chunk):
        h0 = math.sqrt(rho) * R.eta[a:a + chunk]
        s1, s2 = _s_diag(h0[:, 0], h0[:, 1])
        y = np.stack([s1, s2], axis=1) + math.sqrt(delta_e) * R.zeta[a:a + chunk]
        p, h = _posterior(y, zero[: len(y)], math.sqrt(rho), delta_e, R)
        C = np.einsum("mj,mjl,mjk->mlk", p, h, h) / rho - np.eye(2)[None]
        acc += float(np.sum(C * C))
    return len(R.xi) / acc


def _noisy_growth(x: float, alpha: float, rho: float, delta_e: float, R: _NoisyRules) -> float:
    return (noisy_map(x, alpha, rho, delta_e, R) - x) / (x * (1.0 - x))


def noisy_fixed_point(alpha: float, rho: float, delta_e: float, R: _NoisyRules, alpha_wr: float,
                      near: float | None = None) -> tuple[float, list[float]]:
    """The fixed point reached from the uninformed start with label noise (docs/model.md (8.10)):
    ``0`` below ``alpha_wr``, else the first root of the growth rate on a 24-point grid of
    ``(0, 0.999]``, located by Brent's method to ``1e-9``; ``near``: look in ``near +- 0.02`` first."""
    if alpha <= alpha_wr:
        return 0.0, []
    f = lambda x: _noisy_growth(x, alpha, rho, delta_e, R)  # noqa: E731
    if near is not None and 0.0 < near < 1.0:
        lo, hi = max(near - 0.02, 1e-9), min(near + 0.02, 0.999)
        if f(lo) > 0 > f(hi):
            x = float(optimize.brentq(f, lo, hi, xtol=1e-9))
            return x, [x]
    grid = np.concatenate([[1e-4, 1e-3], np.linspace(0.01, 0.999, 22)])
    vals = [f(float(x)) for x in grid]
    roots = []
    for i in range(len(grid) - 1):
        if vals[i] > 0 > vals[i + 1] or vals[i] < 0 < vals[i + 1]:
            roots.append(float(optimize.brentq(f, grid[i], grid[i + 1], xtol=1e-9)))
    if not roots:
        return (0.999 if vals[-1] > 0 else 0.0), roots
    return roots[0], roots


def solve_noisy(alphas: Any, spec: ModelSpec, noise: float, quad: NoisyQuadrature = NoisyQuadrature(),
                ) -> tuple[list[BayesPoint], dict[str, Any]]:
    """The Bayes-optimal points and the weak-recovery threshold with label noise of variance
    ``noise`` on every entry of ``T`` (docs/model.md (8.10)); error estimates from a second,
    independent set of draws (``quad.replica()``)."""
    rho = spec.sigma**2
    de = effective_noise(noise, spec.omega)
    R1, R2 = _NoisyRules(quad), _NoisyRules(quad.replica())
    wr1, wr2 = noisy_weak_recovery(rho, de, R1), noisy_weak_recovery(rho, de, R2)
    points = []
    for a in alphas:
        x, roots = noisy_fixed_point(float(a), rho, de, R1, wr1)
        x2, _ = noisy_fixed_point(float(a), rho, de, R2, wr2, near=x)
        eps, eps_err = test_error(x, spec)
        points.append(BayesPoint(float(a), x, rho * x, rho * (1.0 - x), eps, eps_err, abs(x - x2), tuple(roots)))
    thr = {"alpha_WR": wr1, "alpha_WR_error": abs(wr1 - wr2), "alpha_IT": None, "alpha_PR": None,
           "effective_noise": de}
    return points, thr
