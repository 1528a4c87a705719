"""The order parameters of the self-consistent equations (docs/model.md (2.1)-(3.4)):
:class:`OrderParams` (``q, m, V, theta``), their conjugates (:class:`Hats`) and the result of one
data step (:class:`DataStep`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnphase.theory.channels import (
    ProxResult,
)


@dataclass(frozen=True)
class OrderParams:
    """Order parameters ``(q, m, V, theta)`` in paper convention (docs/model.md (1.5))."""

    q: np.ndarray
    m: np.ndarray
    V: np.ndarray
    theta: np.ndarray

    def replace(self, **kw: np.ndarray) -> OrderParams:
        return dataclasses.replace(self, **kw)

    def to_vector(self) -> np.ndarray:
        iu = np.triu_indices(self.q.shape[0])
        return np.concatenate([self.q[iu], self.m.ravel(), self.V[iu], self.theta.ravel()])

    @staticmethod
    def from_vector(x: np.ndarray, L: int, F: int, rs: int) -> OrderParams:
        iu = np.triu_indices(F)
        nt = len(iu[0])
        # (the rows of m from the length: L, or L + K with the mixture's s rows, docs/model.md (9.3))
        rows, extra = divmod(x.size - 2 * nt - F * rs, F)
        if extra or rows < L:
            raise ValueError(f"order-parameter vector of length {x.size} does not fit L={L}, F={F}, r*={rs}")
        L = rows

        def symm(v: np.ndarray) -> np.ndarray:
            a = np.zeros((F, F))
            a[iu] = v
            return a + np.triu(a, 1).T

        q = symm(x[:nt])
        m = x[nt : nt + L * F].reshape(L, F)
        V = symm(x[nt + L * F : 2 * nt + L * F])
        theta = x[2 * nt + L * F :].reshape(F, rs)
        return OrderParams(q, m, V, theta)

    def natural_scale(self) -> np.ndarray:
        """Scale of each entry of :meth:`to_vector` for relative changes: ``sqrt(|a_ii a_jj|)``
        for the entries of ``q`` and ``V`` (an off-diagonal entry is measured against the
        diagonal, not against itself: it is small in the canonical gauge of rank >= 2), zero
        for ``m`` and ``theta`` (their own size is the scale)."""
        iu = np.triu_indices(self.q.shape[0])

        def mat(a: np.ndarray) -> np.ndarray:
            d = np.abs(np.diag(a))
            with np.errstate(over="ignore"):  # (a diverging solve, stopped by its caller)
                return np.sqrt(np.outer(d, d))[iu]

        return np.concatenate([mat(self.q), np.zeros(self.m.size), mat(self.V), np.zeros(self.theta.size)])

    def names(self) -> list[str]:
        F = self.q.shape[0]
        L = self.m.shape[0]
        rs = self.theta.shape[1]
        iu = np.triu_indices(F)
        s = "" if F == 1 else None
        out = [f"q{'' if s == '' else f'[{i},{j}]'}" for i, j in zip(*iu, strict=True)]
        out += [f"m[{l}{'' if s == '' else f',{a}'}]" for l in range(L) for a in range(F)]
        out += [f"V{'' if s == '' else f'[{i},{j}]'}" for i, j in zip(*iu, strict=True)]
        out += [f"theta{'' if F * rs == 1 else f'[{a},{b}]'}" for a in range(F) for b in range(rs)]
        return out


@dataclass(frozen=True)
class Hats:
    """Conjugate order parameters ``(q_hat, m_hat, V_hat, theta_hat)``."""

    q_hat: np.ndarray
    m_hat: np.ndarray
    V_hat: np.ndarray
    theta_hat: np.ndarray


@dataclass(frozen=True)
class DataStep:
    """Result of one data step: conjugates, mean proximal value ``E[M]`` and the prox solution."""

    hats: Hats
    mean_M: float
    prox: ProxResult
    w: np.ndarray
    T: np.ndarray
    #: the lowest local minimum distinct from the global one at each node (:func:`second_minimum`,
    #: in the coordinates of ``prox.h``): the soft split's second minimum and a warm start
    second: np.ndarray
