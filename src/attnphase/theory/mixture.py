"""Gaussian-mixture tokens in the theory (docs/model.md section 9).

The semantic part of a token is ``z_l = mu_{c_l} / sqrt(d) + eps_l`` with unobserved labels
``c_l`` drawn i.i.d. from ``p``; the means have Gram ``Gmu`` and teacher alignments ``kappa``
(:attr:`attnphase.ModelSpec.mixture_Gmu`, :attr:`~attnphase.ModelSpec.mixture_kappa`). The
student gains the order parameters ``s_k = mu_k^T Q / d`` (K x F) and their conjugates
``s_hat``; the solver stores them below the positional overlaps, ``op.m = [m; s]``
(``(L + K) x F``), and ``Hats.m_hat = [m_hat; s_hat]``, so the fixed-point machinery carries
them unchanged.

* :class:`Mixture`: the mixture of a spec, its label configurations and their weights (9.3);
* :meth:`Mixture.replicate`: an integration rule with every node repeated once per label
  configuration (node-major), weights times the configuration's probability (9.3);
* :meth:`Mixture.weights_step`: the weights step with the means as external fields (9.2);
* :meth:`Mixture.stein_sums`: the Stein sums per configuration and ``s_hat`` (9.4);
* :func:`mixture_test_error`, :func:`mixture_linear_test_error`: (9.5).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import AttentionMap, loss_numpy, target_map
from attnphase.theory.quadrature import Rule, check_size, gauss_hermite

__all__ = ["MAX_CONFIGS", "Mixture", "mixture_linear_test_error", "mixture_test_error", "s_overlaps"]

#: most label configurations ``K^L`` the theory enumerates (each multiplies the nodes of a rule)
MAX_CONFIGS = 64


@dataclass(frozen=True)
class Mixture:
    """The Gaussian mixture of a :class:`~attnphase.ModelSpec` (docs/model.md (9.1), (9.3)).

    ``Gmu`` (K x K), ``kappa`` (K,), ``p`` (K,); ``configs`` (``K^L`` x L) every label
    configuration, ``cweights`` their probabilities ``p_{c_1} ... p_{c_L}``; ``perm`` the label
    permutation ``pi`` with ``mu_{pi(k)} = -mu_k`` and ``p_{pi(k)} = p_k`` where one exists (a
    symmetric mixture: the branches keep the symmetry zeros of the plain model), else ``None``.
    """

    Gmu: np.ndarray
    kappa: np.ndarray
    p: np.ndarray
    L: int
    configs: np.ndarray
    cweights: np.ndarray
    perm: tuple[int, ...] | None

    @property
    def K(self) -> int:
        return int(self.p.size)

    @property
    def n_configs(self) -> int:
        return int(self.cweights.size)

    @staticmethod
    def from_spec(spec: ModelSpec) -> Mixture | None:
        """The mixture of ``spec`` (``None`` without one); ``ValueError`` where the theory does
        not cover it (student rank >= 2, a value other than the identity, more than
        :data:`MAX_CONFIGS` configurations)."""
        K = spec.mixture
        if K == 0:
            return None
        if spec.value != "identity":
            raise ValueError(f"the mixture theory covers value = identity, got {spec.value}; use the simulator")
        if not spec.uncorrelated:
            raise ValueError("the mixture theory covers uncorrelated noise (token_corr 0, no token_cov); "
                             "use the simulator")
        if spec.rank != 1:
            raise ValueError("the mixture theory covers student rank 1; use the simulator for rank >= 2")
        if K**spec.L > MAX_CONFIGS:
            raise ValueError(f"the mixture theory enumerates K^L <= {MAX_CONFIGS} label configurations, "
                             f"got {K}^{spec.L}")
        Gmu, kappa, p = spec.mixture_Gmu, spec.mixture_kappa, spec.mixture_p
        configs = np.array(list(itertools.product(range(K), repeat=spec.L)), dtype=np.int64)
        cw = np.prod(p[configs], axis=1)
        return Mixture(Gmu, kappa, p, spec.L, configs, cw, _antipodes(Gmu, kappa, p))

    # ------------------------------------------------------------------ rules
    def replicate(self, rule: Rule) -> Rule:
        """``rule`` with every node repeated once per label configuration, node-major (entry
        ``i`` has configuration ``i mod K^L``), weights times ``p_{c_1} ... p_{c_L}``
        (docs/model.md (9.3)). A rule made of whole groups (a union of such rules, a prefix of
        whole blocks) keeps that labelling, so the refinement can cut and extend it."""
        if rule.configs == self.n_configs:
            return rule
        if rule.configs != 1:
            raise RuntimeError("integration rule was replicated for another mixture")  # (an internal invariant)
        n = self.n_configs
        check_size(rule.size * n, f"a rule of {rule.size} nodes times {n} label configurations")
        x = np.repeat(rule.x, n, axis=0)
        w = (rule.w[:, None] * self.cweights[None, :]).ravel()
        return replace(rule, x=x, w=w, configs=n)

    def labels(self, size: int) -> np.ndarray:
        """Labels (size x L) of the entries of a replicated rule of ``size`` entries."""
        return self.configs[np.arange(size) % self.n_configs]

    def means(self, op_m: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The label-dependent means of the student's and the teacher's fields at each entry:
        ``s_{c_l}`` (N x L x F, from the rows ``L:`` of ``op.m``) and ``kappa_{c_l}`` (N x L x 1),
        docs/model.md (9.3)."""
        s = op_m[self.L:]
        return s[labels], self.kappa[labels][..., None]

    # ------------------------------------------------------------------ weights step
    def external(self, G: np.ndarray, m_hat: np.ndarray, theta_hat: np.ndarray,
                 s2: float) -> tuple[np.ndarray, np.ndarray]:
        """The external-field coefficients ``H = [m_hat; s_hat; s2 theta_hat^T]`` and the Gram
        ``Gext`` of their directions ``(pi_1..pi_L, mu_1..mu_K, Q*)`` (docs/model.md (9.2))."""
        L, K = self.L, self.K
        H = np.concatenate([m_hat, s2 * theta_hat.T], axis=0)
        Gext = np.zeros((L + K + 1, L + K + 1))
        Gext[:L, :L] = G
        Gext[L:L + K, L:L + K] = self.Gmu
        Gext[L:L + K, -1] = self.kappa
        Gext[-1, L:L + K] = self.kappa
        Gext[-1, -1] = 1.0
        return H, Gext

    def weights_step(self, G: np.ndarray, m_hat: np.ndarray, q_hat: np.ndarray, theta_hat: np.ndarray,
                     Kinv: np.ndarray, s2: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``([m; s], theta, q)`` of the weights step (docs/model.md (9.2)), paper convention:
        ``[m; s; theta_nat^T] = Gext H K^{-1}``, ``theta = s2 theta_nat``,
        ``q = s2 K^{-1} (H^T Gext H + s2 q_hat) K^{-1}``."""
        H, Gext = self.external(G, m_hat, theta_hat, s2)
        O = Gext @ H @ Kinv
        inner = self.inner(G, m_hat, q_hat, theta_hat, s2)
        return O[:-1], s2 * O[-1:].T, s2 * Kinv @ inner @ Kinv

    def inner(self, G: np.ndarray, m_hat: np.ndarray, q_hat: np.ndarray, theta_hat: np.ndarray,
              s2: float) -> np.ndarray:
        """``H^T Gext H + s2 q_hat`` (docs/model.md (9.2), (9.6))."""
        H, Gext = self.external(G, m_hat, theta_hat, s2)
        return H.T @ Gext @ H + s2 * q_hat

    # ------------------------------------------------------------------ data step
    def stein_sums(self, sums: Callable[..., Any], wt: np.ndarray, w: np.ndarray, h1: np.ndarray, h2: np.ndarray, M1: np.ndarray,
                   M2: np.ndarray, tau: float, Vinv: np.ndarray, xi: np.ndarray, eta: np.ndarray,
                   mirror: tuple[np.ndarray, np.ndarray] | None,
                   s_qis: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The Stein sums of docs/model.md (3.3) and (9.4) per label configuration: ``sums`` is
        :func:`attnphase.theory.stein.stein_sums`, called on the entries of each configuration;
        returns ``([sum E[g]; s-sums], sum g g^T, sum g eta^T, sum g xi^T)``, the ``s`` rows
        ``sum_n wt_n sum_l 1[c_l = k] E[g_l]``. ``mirror = (cm, B)`` with ``cm = m q^{-1/2}``:
        each configuration's mirror has ``cm + s_{c} q^{-1/2}`` (``s_qis``: the rows
        ``s_k q^{-1/2}``)."""
        n = self.n_configs
        L, F = w.shape[1:]
        m_all = np.zeros((L + self.K, F))
        q, th, v = np.zeros((F, F)), np.zeros((F, eta.shape[2])), np.zeros((F, F))
        for j, c in enumerate(self.configs):
            sl = slice(j, None, n)
            mir = None
            if mirror is not None and s_qis is not None:
                mir = (mirror[0] + s_qis[c], mirror[1])
            mj, qj, tj, vj = sums(wt[sl], w[sl], h1[sl], h2[sl], M1[sl], M2[sl], tau, Vinv, xi[sl], eta[sl],
                                  mirror=mir)
            m_all[:L] += mj
            np.add.at(m_all, L + c, mj)
            q, th, v = q + qj, th + tj, v + vj
        return m_all, q, th, v

    def impose_zeros(self, op_m: np.ndarray, op_theta: np.ndarray, m_hat: np.ndarray,
                     th_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The symmetry zeros of a symmetric mixture on a rule without every sign flip
        (docs/model.md (9.4)): ``m_hat = 0`` at ``m = 0``; at ``theta = 0, s = 0`` also
        ``theta_hat = 0`` and ``s_hat`` symmetric under ``pi``. No change without ``perm``."""
        if self.perm is None:
            return m_hat, th_hat
        L = self.L
        m_hat = m_hat.copy()
        if not np.any(op_m[:L]):
            m_hat[:L] = 0.0
        if not np.any(op_theta) and not np.any(op_m[L:]):
            th_hat = np.zeros_like(th_hat)
            s_hat = m_hat[L:]
            m_hat[L:] = 0.5 * (s_hat + s_hat[list(self.perm)])
        return m_hat, th_hat


def _antipodes(Gmu: np.ndarray, kappa: np.ndarray, p: np.ndarray, tol: float = 1e-9) -> tuple[int, ...] | None:
    """The involution ``pi`` with ``mu_{pi(k)} = -mu_k`` (``|mu_k + mu_pi(k)|^2 = 0`` in the Gram),
    ``kappa_{pi(k)} = -kappa_k`` and ``p_{pi(k)} = p_k``, or ``None`` where there is none."""
    K = p.size
    perm = [-1] * K
    for k in range(K):  # (a zero mean is its own antipode; otherwise the first free match)
        if perm[k] >= 0:
            continue
        found = [j for j in range(k, K) if perm[j] < 0 and abs(p[j] - p[k]) <= tol
                 and abs(Gmu[k, k] + Gmu[j, j] + 2 * Gmu[k, j]) <= tol * max(1.0, Gmu[k, k])
                 and abs(kappa[j] + kappa[k]) <= tol]
        if not found:
            return None
        perm[k], perm[found[0]] = found[0], k
    return tuple(perm)


def s_overlaps(op_m: np.ndarray, L: int) -> np.ndarray:
    """``s_k = mu_k^T Q / d`` (K x F, user units) from the stacked ``op.m = [m; s]``."""
    return np.asarray(op_m)[L:]


def mixture_test_error(spec: ModelSpec, amap: AttentionMap, mix: Mixture, m: np.ndarray, qs: np.ndarray,
                       B: np.ndarray, Rs: np.ndarray, order: int = 10) -> float:
    """``eps_g = sum_c p_c E[ell(w; T(h*)) | c]`` (docs/model.md (9.5)) on a product Gauss-Hermite
    rule: ``w_l = m_l + s_{c_l} + q^{1/2} xi_l``, ``h*_l = kappa_{c_l} + B^T xi_l + R^{1/2} eta_l``
    (``m`` stacked ``[m; s]``, ``B = q^{-1/2} theta``)."""
    L, F = spec.L, amap.field_dim
    rule = gauss_hermite(L * (F + 1), order)
    n = rule.size
    xi = rule.x[:, :L * F].reshape(n, L, F)
    eta = rule.x[:, L * F:].reshape(n, L, 1)
    w0 = m[None, :L] + xi @ qs
    h0 = xi @ B + eta @ Rs
    C = spec.C_array
    total = 0.0
    for c, pc in zip(mix.configs, mix.cweights, strict=True):
        w = w0 + m[L:][c][None]
        h = h0 + mix.kappa[c][None, :, None]
        total += pc * float(rule.w @ loss_numpy(w, target_map(h, spec), C, amap))
    return total


def mixture_linear_test_error(spec: ModelSpec, mix: Mixture, order: int = 24) -> float:
    """The dense linear baseline ``1/2 E tr((T - E T) C (T - E T)^T)`` (docs/model.md (9.5))
    with teacher fields ``h*_l = kappa_{c_l} + sigma eta_l`` averaged over the labels."""
    L = spec.L
    rule = gauss_hermite(L, order if L <= 4 else 10)
    base = spec.sigma * rule.x.reshape(rule.size, L, 1)
    Ts = [target_map(base + mix.kappa[c][None, :, None], spec) for c in mix.configs]
    ET = sum(pc * np.einsum("n,nlk->lk", rule.w, T) for pc, T in zip(mix.cweights, Ts, strict=True))
    C = spec.C_array
    return float(sum(pc * (rule.w @ (0.5 * np.einsum("nlj,jk,nlk->n", T - ET, C, T - ET)))
                     for pc, T in zip(mix.cweights, Ts, strict=True)))
