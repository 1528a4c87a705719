"""The two steps of the self-consistent equations and the errors at a fixed point (docs/model.md).

The data step (:meth:`Saddle.data_step`, docs/model.md (3.1)-(3.4)), the weights step
(:meth:`Saddle.weights_step`, (2.1), (2.2)), the free energy and training error
(:meth:`Saddle.free_energy`, (4.1)), the test error (:meth:`Saddle.test_error`, (4.2)) and the
linear baseline (:func:`linear_test_error`, (4.3)), on one integration rule ((7.1)).

Paper convention inside: ``q = sigma^2 Q^T Q / d``, ``theta = sigma^2 Q^T Q* / d``,
``rho = sigma^2 I``, ``m_l = pi_l^T Q / d``. Shapes: ``q, V, q_hat, V_hat`` are F x F
(F the field dimension per position: ``r`` tied, ``2r`` untied), ``m, m_hat`` are L x F,
``theta, theta_hat`` are F x r*.
"""

from __future__ import annotations

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory import native as native
from attnphase.theory.channels import (
    AttentionMap,
    ProxResult,
    check_attention_covered,
    cross_offset_tokens,
    default_starts,
    escape_saddles,
    landscape_starts,
    prox_batch,
    rugged,
    student_map,
    target_map,
)
from attnphase.theory.channels import loss_numpy as loss_numpy
from attnphase.theory.generalization import (
    TEST_QMC_LOG2,
    TEST_QMC_LOG2_NUMPY,
    build_test_rule,
    error_sum,
    error_sum_numpy,
)
from attnphase.theory.generalization import linear_test_error as linear_test_error
from attnphase.theory.matrices import (
    rmul,
    sym_sqrt,
)
from attnphase.theory.mixture import Mixture
from attnphase.theory.mixture import mixture_linear_test_error as mixture_linear_test_error
from attnphase.theory.mixture import mixture_test_error as mixture_test_error
from attnphase.theory.order_params import DataStep, Hats, OrderParams
from attnphase.theory.quadrature import Rule
from attnphase.theory.quadrature import check_size as check_size
from attnphase.theory.quadrature import gauss_hermite as gauss_hermite
from attnphase.theory.quadrature import key_contrasts as key_contrasts
from attnphase.theory.quadrature import sobol_gaussian as sobol_gaussian
from attnphase.theory.responses import ONE_START, check_response
from attnphase.theory.responses import RESPONSES as RESPONSES
from attnphase.theory.stein import mirror_pairs, second_minimum, stein_sums
from attnphase.theory.threads import one_blas_thread

#: the step of the local response's central differences in the prior means (fields of order one)
LOCAL_EPS = 1e-4

#: the soft split's width is at most this fraction of the mean proximal value (docs/model.md (3.2))
SWITCH_FRACTION = 1e-2


class Saddle:
    """Self-consistent equations (docs/model.md (2.1)-(3.4)) for one ``(spec, alpha)`` and
    integration rule.

    Correlated tokens (docs/model.md (6.3), covariance ``C`` across positions) are reduced to the
    uncorrelated equations by whitening: with ``P = C^{1/2}`` the whitened tokens
    ``x~ = P^{-1} x`` are i.i.d. ``N(0, 1)`` per position with positional Gram
    ``G~ = P^{-1} G P^{-1}``, and the fields are ``h = P h~``, ``h* = P h~*``. The equations of
    the uncorrelated case then hold for ``h~`` with ``sigma = 1``, ``G~`` and the loss
    ``ell(P h~; T(P h~*))``; the proximal problem is solved in ``h`` with the metric
    ``(P P^T)^{-1} (x) V^{-1}``. Order parameters are then natural units (``q = Q^T Q / d``) and
    ``m~ = P^{-1} m``. For ``C = sigma^2 I`` the ordinary paper-convention path is used.
    """

    def __init__(self, spec: ModelSpec, alpha: float, rule: Rule, whiten: bool | None = None,
                 mirror: bool = False, response: str = "global"):
        """``whiten``: force (True) or forbid (False) the whitened path; by default it is used
        for correlated tokens only (the tests use it to check the two paths agree).
        ``mirror``: pair every node with its mirror in the Stein sums (:meth:`mirror_nodes`; the
        refinement's fine QMC rules, ``SolverSettings.mirror``). ``response``: ``V_hat`` of the
        global minimiser (``"global"``, the Stein form of docs/model.md (3.3)) or of each node's
        minimum followed locally (``"local"``, (3.6); uncorrelated tokens)."""
        check_response(spec, response)
        if response in ONE_START and mirror:
            raise ValueError(f"the {response} response does not pair nodes with their mirrors: a node and its "
                             "mirror share the start, not the minima")
        #: one of :data:`RESPONSES` (docs/model.md (3.3), (3.6), (3.7))
        self.response = response
        self.solved = 0  #: proximal problems the data steps solved (starts x nodes x tokens x fields)
        if spec.value not in ("identity", "gain"):
            raise ValueError("the theory solver covers value = identity and gain only (lowrank and full "
                             "do not enter at leading order, docs/model.md (6.4)); use the simulator")
        check_attention_covered(spec)
        self.spec = spec
        self.alpha = float(alpha)
        self.amap = AttentionMap.from_spec(spec)
        self.L = spec.tokens  # (cross-attention: the L + L' tokens of docs/model.md (10.2))
        self.F = self.amap.field_dim
        self.rs = spec.teacher_rank
        # --- value gain (docs/model.md (6.5)): ell(h; T, v) = ell(h; T / v) with C -> v^2 C ---
        if spec.optimal_gain:
            raise ValueError("value = gain with value_gain unset is minimised over the gain by attnphase.solve and "
                             "attnphase.transition (attnphase.theory.value); give value_gain to hold the gain fixed")
        #: the gain ``v`` of the value ``V = v I`` (1 for the identity value)
        self.gain = spec.gain_start if spec.value == "gain" else 1.0
        #: the covariance in the loss, ``v^2 C`` (what the proximal problem and the errors use;
        #: the fields and the whitening use ``C`` itself)
        self.C = self.gain**2 * spec.C_array
        if whiten is False and not spec.uncorrelated:
            raise RuntimeError("correlated tokens need the whitened path")  # (an internal invariant)
        if not whiten and spec.uncorrelated:
            self.mix: np.ndarray | None = None
            self.s2 = spec.sigma**2
            self.G = spec.G_array
        else:
            self.mix = sym_sqrt(spec.C_array)
            Pinv = np.linalg.inv(self.mix)
            self.s2 = 1.0
            self.G = Pinv @ spec.G_array @ Pinv
        self.rho = self.s2 * np.eye(self.rs)
        # Gaussian-mixture tokens (docs/model.md (9.3)): every node once per label configuration
        self.mixture = Mixture.from_spec(spec)
        if self.mixture is not None:
            rule = self.mixture.replicate(rule)
        self.rule = rule
        self.mirror = bool(mirror)
        n_xi = self.L * self.F
        if rule.x.shape[1] != n_xi + self.L * self.rs:
            raise RuntimeError("integration rule has the wrong dimension for this model")  # (an internal invariant)
        N = rule.size
        self.xi = np.ascontiguousarray(rule.x[:, :n_xi].reshape(N, self.L, self.F))
        self.eta = np.ascontiguousarray(rule.x[:, n_xi:].reshape(N, self.L, self.rs))
        self.labels = None if self.mixture is None else self.mixture.labels(N)
        #: the test error's Sobol rules built so far, by ``log2_n`` (:meth:`test_rule`)
        self._test_rules: dict[int, Rule | None] = {}

    @property
    def dim(self) -> int:
        return self.L * (self.F + self.rs)

    # ------------------------------------------------------------------ fields
    def fields(self, op: OrderParams, xi: np.ndarray | None = None, eta: np.ndarray | None = None):
        """Student prior means ``w`` and teacher fields ``h*`` at the nodes (docs/model.md (3.1))."""
        own = xi is None and eta is None
        xi = self.xi if xi is None else xi
        eta = self.eta if eta is None else eta
        qs, qis, qinv, R, Rs = self.field_maps(op)
        # (as one (N L) x F product each: the stacked form ``xi @ qs`` loops over the nodes)
        x2 = xi.reshape(-1, xi.shape[-1])
        w = op.m[None, :self.L] + rmul(x2, qs).reshape(xi.shape)
        hstar = (rmul(x2, qis @ op.theta) + rmul(eta.reshape(-1, eta.shape[-1]), Rs)).reshape(eta.shape)
        if self.mixture is not None:  # label-dependent means (docs/model.md (9.3))
            if not own or self.labels is None:
                raise RuntimeError("mixture fields are defined on the saddle's own nodes")  # (an internal invariant)
            ws, hs = self.mixture.means(op.m, self.labels)
            w = w + ws
            hstar = hstar + hs
        if self.mix is not None:  # whitened -> actual fields (correlated tokens)
            w = np.einsum("lk,nka->nla", self.mix, w)
            hstar = np.einsum("lk,nka->nla", self.mix, hstar)
        return w, hstar, qis, qinv, R

    def field_maps(self, op: OrderParams) -> tuple[np.ndarray, ...]:
        """The linear maps of :meth:`fields`: ``q^{1/2}``, ``q^{-1/2}``, ``q^{-1}``, the teacher's
        conditional covariance ``R = rho - theta^T q^{-1} theta`` and ``R^{1/2}``."""
        qs = sym_sqrt(op.q)
        qis = sym_sqrt(op.q, inverse=True, floor=0.0)
        qinv = qis @ qis
        R = self.rho - op.theta.T @ qinv @ op.theta
        return qs, qis, qinv, R, sym_sqrt(R)

    def unmix(self, h: np.ndarray) -> np.ndarray:
        """Actual fields -> whitened fields ``P^{-1} h`` (identity for uncorrelated tokens)."""
        return h if self.mix is None else np.einsum("lk,n...ka->n...la", np.linalg.inv(self.mix), h)

    def from_paper(self, op: OrderParams) -> OrderParams:
        """Paper-convention order parameters at ``sigma`` (docs/model.md (1.5)) -> this saddle's units
        (unchanged for uncorrelated tokens; whitened natural units otherwise)."""
        if self.mixture is not None and op.m.shape[0] == self.L:  # (no s rows yet: s = 0)
            op = op.replace(m=np.concatenate([op.m, np.zeros((self.mixture.K, op.m.shape[1]))]))
        if self.mix is None:
            return op
        s2 = self.spec.sigma**2
        return OrderParams(op.q / s2, np.linalg.solve(self.mix, op.m), op.V / s2, op.theta / s2)

    def user_units(self, op: OrderParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, m, theta)`` in user units (docs/model.md (1.5): ``q = Q^T Q / d``,
        ``m_l = pi_l^T Q / d``, ``theta = Q*^T Q / d``)."""
        m = op.m[:self.L] if self.mix is None else self.mix @ op.m[:self.L]
        return op.q / self.s2, m, op.theta / self.s2

    def target(self, hstar: np.ndarray) -> np.ndarray:
        """The target the proximal problem and the losses use: ``T(h*)`` (docs/model.md (1.2)),
        divided by the gain ``v`` of a ``gain`` value (docs/model.md (6.5); with ``self.C = v^2 C``
        the loss is then ``1/2 tr((T - v S) C (T - v S)^T)``)."""
        T = target_map(hstar, self.spec)
        return T if self.gain == 1.0 else T / self.gain

    def gain_sums(self, ds: DataStep) -> tuple[float, float]:
        """``(E[tr(T C S^T)], E[tr(S C S^T)])`` at the global proximal minimisers of a data step
        (``S = S(hhat)``, ``T`` the unscaled target, ``C`` the token covariance): the stationarity
        of the training error in the gain, ``v = E[tr(T C S^T)] / E[tr(S C S^T)]``
        (docs/model.md (6.5))."""
        S = student_map(ds.prox.h, self.amap)
        C = self.C / self.gain**2
        T = ds.T * self.gain
        SC = S @ C
        return (float(self.rule.w @ np.einsum("nlk,nlk->n", SC, T)),
                float(self.rule.w @ np.einsum("nlk,nlk->n", SC, S)))

    # ------------------------------------------------------------------ data step
    @one_blas_thread
    def data_step(
        self, op: OrderParams, starts: np.ndarray | None = None, switch_width: float = 0.0
    ) -> DataStep:
        """Conjugates by the Stein forms (docs/model.md (3.3), (3.4)), from one global prox solve
        per node (the proximal problem of (3.2)).

        With ``switch_width > 0`` a node whose two lowest local minima have values
        ``M_1 <= M_2`` is split between them with fractions ``p = expit((M_2 - M_1)/tau)`` and
        ``1 - p``, ``tau = min(switch_width, SWITCH_FRACTION * E[M])``: the hard global minimiser
        is the limit ``tau -> 0``. This makes the discretised map continuous in the order
        parameters (a node crossing the switching surface otherwise makes it jump by its weight),
        so the fixed point can be converged to tight tolerance; the bias is measured against
        ``tau = 0`` in the tests.
        """
        w, hstar, qis, qinv, R = self.fields(op)
        T = self.target(hstar)
        if self.response in ONE_START:  # (docs/model.md (3.7): one start, no global search)
            starts = self.one_start(op, w, hstar)
            switch_width = 0.0
        elif starts is None:
            starts = self.full_starts(w, hstar, T, op.V)
        else:
            starts = np.concatenate([w[:, None], starts], axis=1)
        prox = prox_batch(w, T, op.V, self.C, self.amap, starts=starts, mix=self.mix)
        self.solved += starts.size  # (nodes x starts x tokens x fields)
        prox = escape_saddles(prox, w, T, op.V, self.C, self.amap, starts, mix=self.mix)
        return self.data_from(op, prox, switch_width, (w, T, qis, qinv, R))

    def one_start(self, op: OrderParams, w: np.ndarray, hstar: np.ndarray) -> np.ndarray:
        """The one start of every node under a one-start selection (docs/model.md (3.7)), shape
        ``(nodes, 1, L, 1)``: the teacher's fields at the student's norm, ``sqrt(q / rho) h*``
        (semantic start), or the student's positional means ``m`` (positional start)."""
        if self.response == "semantic-start":
            return np.ascontiguousarray((hstar * np.sqrt(float(op.q[0, 0]) / self.s2))[:, None])
        return np.ascontiguousarray(np.broadcast_to(op.m[None, None, :self.L], (w.shape[0], 1) + w.shape[1:]))

    def full_starts(self, w: np.ndarray, hstar: np.ndarray, T: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The full multi-start set at nodes with prior means ``w``, teacher fields ``h*`` and
        target ``T`` (actual fields): :func:`default_starts`, with :func:`landscape_starts` where
        the proximal problem is rugged."""
        keys = self.spec.L_keys if self.spec.is_cross else 0
        starts = default_starts(self.unmix(w), V, tokens=cross_offset_tokens(self.amap, keys))
        if self.mix is not None:
            starts = np.einsum("lk,nska->nsla", self.mix, starts)
        if rugged(V, self.C, self.mix, self.amap.gains):
            starts = np.concatenate([starts, landscape_starts(w, hstar, T, V, self.C, self.amap, self.mix)], axis=1)
        return starts

    @one_blas_thread
    def data_from(self, op: OrderParams, prox: ProxResult, switch_width: float = 0.0,
                  fields: tuple[np.ndarray, ...] | None = None) -> DataStep:
        """The rest of :meth:`data_step` from the minima ``prox`` found at every node of this rule
        at ``op`` (the Stein sums and the conjugates); ``fields``: ``(w, T, q^{-1/2}, q^{-1}, R)``
        where already computed. A refinement takes each fine rule's data step at the union's
        fixed point from the union's own minima there, cut by rule (``refine_point``)."""
        if fields is None:
            w, hstar, qis, qinv, R = self.fields(op)
            T = self.target(hstar)
        else:
            w, T, qis, qinv, R = fields
        Vinv = np.linalg.inv(op.V)
        w = self.unmix(w)
        h1 = self.unmix(prox.h)
        second, M2 = second_minimum(prox)
        h2 = self.unmix(second)
        a = self.alpha
        mean_M = float(self.rule.w @ prox.value)
        switch_width = min(switch_width, SWITCH_FRACTION * mean_M)
        # (with the mirror pairing each node and its mirror (-w, h*), minima -h1, -h2, by their densities)
        mirror = self.mirror_map(op) if self.mirror else None
        if self.mixture is None:
            m_sum, q_sum, th_sum, v_sum = stein_sums(self.rule.w, w, h1, h2, prox.value, M2, switch_width, Vinv,
                                                     self.xi, self.eta, mirror=mirror)
        else:  # per label configuration, with the s_hat rows (docs/model.md (9.4))
            m_sum, q_sum, th_sum, v_sum = self.mixture.stein_sums(
                stein_sums, self.rule.w, w, h1, h2, prox.value, M2, switch_width, Vinv, self.xi, self.eta,
                mirror, op.m[self.L:] @ qis)
        m_hat = a * m_sum
        q_hat = a * q_sum
        Ris = sym_sqrt(R, inverse=True)
        th_hat = a * th_sum @ Ris
        # the symmetry zeros: with theta = 0 the integrand of theta_hat is odd under eta -> -eta
        # (T(h*) is even in h*); with m = 0 that of m_hat is odd under (xi, eta) -> -(xi, eta)
        # (the loss is even in h, T in h*). A sign-closed rule gives them up to rounding only
        # (~1e-14), which the iteration amplifies where its branch is unstable in that direction
        # (the trivial start at sigma = 2, alpha = 3: theta 1e-14 -> 0.09 in 300 iterations), so
        # they are imposed on every rule
        if self.mixture is not None:
            m_hat, th_hat = self.mixture.impose_zeros(op.m, op.theta, m_hat, th_hat)
        else:
            if not np.any(op.theta):
                th_hat = np.zeros_like(th_hat)
            if not np.any(op.m):
                m_hat = np.zeros_like(m_hat)
        if self.response == "local":  # (docs/model.md (3.6): without the jumps' surface term)
            V_hat = self.local_v_hat(op.V, w, T, h1, h2 if np.isfinite(M2).any() else None,
                                     np.clip(M2 - prox.value, 0.0, None), switch_width)
        else:
            V_hat = -a * v_sum @ qis + th_hat @ op.theta.T @ qinv
            V_hat = 0.5 * (V_hat + V_hat.T)
        return DataStep(Hats(q_hat, m_hat, V_hat, th_hat), mean_M, prox, w, T, second)

    def local_v_hat(self, V: np.ndarray, w: np.ndarray, T: np.ndarray, h: np.ndarray,
                    h2: np.ndarray | None = None, gap: np.ndarray | None = None, switch_width: float = 0.0,
                    eps: float = LOCAL_EPS) -> np.ndarray:
        """``V_hat = -alpha E[sum_l dg_l / dw_l]`` with each node's minimiser ``h`` followed along its
        own local minimum (docs/model.md (3.5), (3.6)): central differences of step ``eps`` in every
        prior mean ``w_{l,b}``, the proximal problem re-solved from ``h`` with one start;
        ``g_l = V^{-1} (hhat_l - w_l)``. With ``switch_width = tau > 0`` a node with a second
        minimum ``h2`` (``gap = M_2 - M_1``) is split between the two as in :meth:`data_step`.
        ``F x F``, symmetrised; uncorrelated tokens."""

        Vinv = np.linalg.inv(V)

        def response(idx: np.ndarray, start: np.ndarray) -> np.ndarray:
            """``dg_l / dw_l`` summed over ``l`` at the nodes ``idx``, each from its minimum ``start``."""
            wi, Ti = w[idx], T[idx]
            n, L, F = wi.shape
            h0 = np.ascontiguousarray(start[idx][:, None])
            out = np.zeros((n, F, F))
            for l in range(L):
                for b in range(F):
                    e = np.zeros_like(wi)
                    e[:, l, b] = eps
                    gp = (prox_batch(wi + e, Ti, V, self.C, self.amap, starts=h0).h - (wi + e))[:, l] @ Vinv
                    gm = (prox_batch(wi - e, Ti, V, self.C, self.amap, starts=h0).h - (wi - e))[:, l] @ Vinv
                    out[:, :, b] += (gp - gm) / (2.0 * eps)
            return out

        J = response(np.arange(len(w)), h)
        if switch_width > 0 and h2 is not None and gap is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                p = np.where(np.isfinite(gap), 1.0 / (1.0 + np.exp(-np.nan_to_num(gap, posinf=1e300) / switch_width)), 1.0)
            split = np.flatnonzero(p < 1.0)
            if split.size:
                ps = p[split, None, None]
                J[split] = ps * J[split] + (1.0 - ps) * response(split, h2)
        out = -self.alpha * np.einsum("n,nab->ab", self.rule.w, J)
        return 0.5 * (out + out.T)

    def mirror_map(self, op: OrderParams) -> tuple[np.ndarray, np.ndarray] | None:
        """``(cm, B)`` of the mirror of the nodes (:meth:`mirror_nodes`): ``cm = m q^{-1/2}``
        (L x F, the student noise at which ``w = 0``), ``B = q^{-1/2} theta R^{-1/2}`` (F x r*);
        ``None`` where ``q`` or ``R`` is singular or not positive (no mirror node; also a trial
        point of the iteration with ``theta^T q^-1 theta > rho``)."""
        qs, qis, qinv, R, Rs = self.field_maps(op)
        eq, eR = np.linalg.eigvalsh(0.5 * (op.q + op.q.T)), np.linalg.eigvalsh(0.5 * (R + R.T))
        if eq[0] <= 1e-12 * max(eq[-1], 0.0) or eR[0] <= 1e-12 * self.rho.max():
            return None
        return op.m[:self.L] @ qis, qis @ op.theta @ np.linalg.inv(Rs)

    def mirror_nodes(self, op: OrderParams) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The mirror of every node and the share of the pair it carries (mirror pairing,
        docs/model.md (7.4)).

        At fixed teacher fields ``h*`` (hence fixed target ``T``) the loss is even in the student
        fields, so the proximal problem at ``-w`` is the mirror of the one at ``w``: its minima
        are ``-h``, its value the same, ``g -> -g``. The map ``(w, h*) -> (-w, h*)`` is, in the
        Gaussian variables, the affine involution ``xi' = -xi - 2 m q^{-1/2}``,
        ``eta' = eta + 2 (xi + m q^{-1/2}) q^{-1/2} theta R^{-1/2}`` (fields of docs/model.md (3.1); in
        the whitened variables for correlated tokens). For any such involution with unit
        Jacobian ``E[f] = E[(f(z) + r f(z')) / (1 + r)]``, ``r = phi(z') / phi(z)`` the ratio of
        the standard normal densities, whatever rule samples ``z``. A node then contributes
        ``(1 - s) f(z) + s f(z')`` with ``s = r / (1 + r)``, its mirror's ``f`` computed from
        the node's own minima: no proximal problem more (the data step does this in its compiled
        Stein sums, :func:`stein_sums`). Where the global minimiser jumps between near-mirror
        minima (on a curve through ``w = 0``; teacher fields of opposite signs: docs/solver.md)
        the odd part of the Stein integrands jumps; across ``w.mu = 0``
        (``mu`` the mean of ``w`` given ``h*``) the pair weighs both sides equally, which removes
        that jump where the two curves meet and damps it near them. Measured at ``alpha = 1,
        omega = 0.3``: the scatter of the fixed point per fine rule (orders 11-13) falls 1.9-2.3x
        for the positional ``q`` and ``m``, 1.8-1.9x for the semantic ``theta`` (docs/solver.md).

        Returns ``(xi', eta', s)``, or ``None`` where :meth:`mirror_map` has no mirror.
        """
        cmap = self.mirror_map(op)
        if cmap is not None and self.mixture is not None and self.labels is not None:
            cmap = (cmap[0][None] + (op.m[self.L:] @ sym_sqrt(op.q, inverse=True))[self.labels], cmap[1])
        return None if cmap is None else mirror_pairs(self.xi, self.eta, *cmap)

    # ------------------------------------------------------------------ weights step
    def weights_step(self, h: Hats) -> OrderParams:
        """Closed-form ridge step (docs/model.md (2.1), (2.2)), in the gauge of :meth:`gauge_fix`."""
        s2 = self.s2
        K = self.spec.lam * np.eye(self.F) + s2 * h.V_hat
        try:
            Kinv = np.linalg.inv(K)
        except np.linalg.LinAlgError:  # (lambda = 0 and a singular V_hat): no valid update
            nan = np.full((self.F, self.F), np.nan)
            return OrderParams(nan, np.full_like(h.m_hat, np.nan), nan.copy(), np.full_like(h.theta_hat, np.nan))
        V = s2 * Kinv
        if self.mixture is not None:  # the means as external fields (docs/model.md (9.2))
            m, theta, q = self.mixture.weights_step(self.G, h.m_hat, h.q_hat, h.theta_hat, Kinv, s2)
            return self.gauge_fix(OrderParams(0.5 * (q + q.T), m, 0.5 * (V + V.T), theta))
        m = self.G @ h.m_hat @ Kinv
        theta = s2 * Kinv @ h.theta_hat @ self.rho
        inner = s2 * h.q_hat + h.m_hat.T @ self.G @ h.m_hat + s2 * h.theta_hat @ self.rho @ h.theta_hat.T
        q = s2 * Kinv @ inner @ Kinv
        return self.gauge_fix(OrderParams(0.5 * (q + q.T), m, 0.5 * (V + V.T), theta))

    def user_scalars(self, op: OrderParams) -> np.ndarray:
        """``(q, m, theta)`` of the summary tables in user units: the entries of rank one (and
        of the query for untied keys/queries); for rank ``r >= 2`` the rotation invariants
        ``tr q``, ``|m_1|`` (norm of the first position's overlaps) and ``|theta|`` (Frobenius),
        and the same over the heads of several (docs/model.md (11.3): a branch's defining overlap
        may sit on any head)."""
        qu, mu, tu = self.user_units(op)
        if self.amap.rotation_invariant or self.amap.heads > 1:  # (the query's block for untied keys/queries)
            r = self.amap.rank
            return np.array([np.trace(qu[:r, :r]), np.linalg.norm(mu[0, :r]), np.linalg.norm(tu[:r])])
        return np.array([qu[0, 0], mu[0, 0], tu[0, 0]])

    def gauge_fix(self, op: OrderParams) -> OrderParams:
        """Canonical representative of the rotation orbit of ``op`` (student rank ``r >= 2``).

        With tied (or causal) attention the scores ``h h^T`` and the ridge are invariant under
        ``Q -> Q U`` for orthogonal ``U`` (r x r), so the fixed points of the equations are orbits
        ``(U^T q U, m U, U^T V U, U^T theta)``; with untied keys/queries under ``Q -> Q U``,
        ``K -> K U`` together (``I_2 (x) U`` on the fields ``(h_Q, h_K)``, every stage below
        summing over the two blocks): the Jacobian of the fixed-point map is singular
        along them, and a finite integration rule (not rotation invariant) makes the iterates
        drift along the orbit. The representative's axes are chosen in stages, each in the
        orthogonal complement of the previous ones: the directions of ``theta`` (eigenvectors of
        ``theta theta^T``), then those of the positional overlaps ``m`` (of ``m^T m``), then the
        eigenvectors of ``q`` (decreasing eigenvalues in each stage). So on the mixed branch of
        ``r = 2`` axis 0 is semantic and axis 1 positional, whatever their sizes (ordering all
        signal axes by one eigenvalue swapped them when the two crossed). Signal axes are signed
        so that ``sum_b theta_ab`` (then ``sum_l 2^-l m_la``) is positive.

        Where some but not all axes carry signal, the blocks of ``q`` and ``V`` coupling the two
        sets are set to zero: the solver follows the branch that is symmetric under the
        reflections of the axes without signal. Where both kinds of signal axes exist (mixed
        branch) the positional overlaps on the ``theta`` axes and the blocks coupling the
        ``theta`` axes to the positional ones are set to zero as well: the branch symmetric under
        the reflection of the ``theta`` axes combined with ``eta -> -eta``. The map is exactly
        equivariant under these reflections on the fully symmetrised QMC rule
        (:func:`attnphase.theory.quadrature.symmetrise`), so this subspace is invariant and its
        fixed points are fixed points of the full equations (the fine rules of the refinement
        are not symmetrised, ``FINE_COPIES``: the projection imposes those zeros there);
        without the projection rounding noise grew along an unstable or soft direction of that
        sector (``q_01``, ``V_01`` up to 6-9 % of the diagonal scale, different on every rule)
        and the refinements failed. Symmetry-broken solutions of that kind are not searched.
        Without any signal (trivial branch) the whole rotation group fixes the point, so ``q``
        and ``V`` are replaced by their isotropic parts ``tr(.)/r I`` (the rule is not rotation
        invariant: on 2^8 x 4 nodes the trivial ``q`` came out as diag(0.199, 0.177) and no
        refinement converged, the eigenvectors of a nearly isotropic ``q`` being ill-defined).
        Rank one (no rotation symmetry) keeps its axes; there, too,
        overlaps at rounding level (``<= 1e-9``) are set to the exact zeros of the branch's
        symmetry (``m`` on the semantic branch, ``theta`` on the positional one): the symmetrised
        rule keeps them zero only up to the rounding of the proximal minimisers, and a residue
        of ~1e-11 on the semantic ``m`` was enough for the per-rule solves of the error estimate
        to move along that (soft) direction.
        """
        F = op.q.shape[0]

        def zeroed(a: np.ndarray) -> np.ndarray:
            return np.zeros_like(a) if np.all(np.abs(a) <= 1e-9) and np.any(a != 0) else a

        if self.mixture is not None:  # (rank 1) the zeros at rounding level, m and s apart
            m = np.concatenate([zeroed(op.m[:self.L]), zeroed(op.m[self.L:])])
            return OrderParams(op.q, m, op.V, zeroed(op.theta))
        if not self.amap.rotation_invariant or F != self.F:
            m, theta = zeroed(op.m), zeroed(op.theta)
            return op if m is op.m and theta is op.theta else OrderParams(op.q, m, op.V, theta)
        nbk, r = self.amap.blocks, self.amap.rank  # fields: nbk blocks (Q; or Q and K) of r axes
        blk = [slice(b * r, (b + 1) * r) for b in range(nbk)]
        N = np.eye(r)  # orthonormal basis of what is left
        axes, ks = [], []
        for S in (sum(op.theta[i] @ op.theta[i].T for i in blk), sum(op.m[:, i].T @ op.m[:, i] for i in blk)):
            kk = 0
            if N.shape[1]:
                lam, W = np.linalg.eigh(N.T @ (0.5 * (S + S.T)) @ N)
                lam, W = lam[::-1], W[:, ::-1]
                kk = int(np.sum(lam > max(1e-10 * float(lam[0]), 1e-18)))
                axes.append(N @ W[:, :kk])
                N = N @ W[:, kk:]
            ks.append(kk)
        k = sum(ks)
        if N.shape[1]:
            _, W = np.linalg.eigh(N.T @ sum(op.q[i, i] for i in blk) @ N)
            axes.append(N @ W[:, ::-1])
        R = np.kron(np.eye(nbk), np.concatenate(axes, axis=1))  # the same rotation in every block
        weights = 0.5 ** np.arange(op.m.shape[0])
        m, theta = op.m @ R, R.T @ op.theta
        for a in range(k):
            idx = [b * r + a for b in range(nbk)]
            s = float(np.sum(theta[idx]))
            if abs(s) <= 1e-12:
                s = float(weights @ m[:, idx].sum(axis=1))
            if s < 0:
                R[:, idx] = -R[:, idx]
                m[:, idx] = -m[:, idx]
                theta[idx] = -theta[idx]
        q, V = R.T @ op.q @ R, R.T @ op.V @ R
        sig = np.tile(np.arange(r) < k, nbk)  # fields along signal axes
        m[:, ~sig] = 0.0  # exact zeros on the axes without signal
        theta[~sig] = 0.0
        if ks[0] == 0:  # overlaps at rounding level (<= 1e-9) are the symmetry's zeros
            theta[:] = 0.0
        if ks[1] == 0 and np.all(np.abs(m) <= 1e-9):
            m[:] = 0.0
        if 0 < k < r:  # the symmetric branch: no coupling between signal and other axes
            for M_ in (q, V):
                M_[np.ix_(sig, ~sig)] = 0.0
                M_[np.ix_(~sig, sig)] = 0.0
        elif k == 0:  # no signal at all (trivial branch): the rotation-invariant point
            for M_ in (q, V):
                for i in blk:
                    for j in blk:
                        M_[i, j] = np.trace(M_[i, j]) / r * np.eye(r)
        if ks[0] and ks[1]:  # mixed: semantic and positional axes apart (m = 0 on the theta axes)
            th_ax = np.tile(np.arange(r) < ks[0], nbk)
            m_ax = np.tile((np.arange(r) >= ks[0]) & (np.arange(r) < k), nbk)
            m[:, th_ax] = 0.0
            theta[m_ax] = 0.0  # (zero by construction of the axes, up to rounding)
            for M_ in (q, V):
                M_[np.ix_(th_ax, m_ax)] = 0.0
                M_[np.ix_(m_ax, th_ax)] = 0.0
        return OrderParams(0.5 * (q + q.T), m, 0.5 * (V + V.T), theta)

    # ------------------------------------------------------------------ errors
    def free_energy(self, op: OrderParams, ds: DataStep) -> float:
        """The free energy ``Phi`` (docs/model.md (4.1)); the training error is ``eps_t = -Phi``."""
        h = ds.hats
        s2 = self.s2
        K = self.spec.lam * np.eye(self.F) + s2 * h.V_hat
        if not (np.all(np.isfinite(K)) and np.all(np.isfinite(op.to_vector()))):
            return float("nan")  # (a diverged, non-converged solve: no free energy to report)
        try:
            Kinv = np.linalg.inv(K)
        except np.linalg.LinAlgError:
            return float("nan")
        if self.mixture is not None:  # docs/model.md (9.6)
            inner = self.mixture.inner(self.G, h.m_hat, h.q_hat, h.theta_hat, s2)
        else:
            inner = s2 * h.q_hat + h.m_hat.T @ self.G @ h.m_hat + s2 * h.theta_hat @ self.rho @ h.theta_hat.T
        return float(
            0.5 * np.trace(h.V_hat @ op.q - h.q_hat @ op.V)
            - np.sum(h.m_hat * op.m)
            - np.sum(h.theta_hat * op.theta)
            + 0.5 * np.trace(Kinv @ inner)
            - self.alpha * ds.mean_M
        )

    def test_rule(self, log2_n: int = TEST_QMC_LOG2) -> Rule | None:
        """The rule of the test error (docs/model.md (4.2)) where it is not a product
        Gauss-Hermite rule (``None``: that rule, up to 6 dimensions): a scrambled Sobol rule of
        ``4 * 2^log2_n`` nodes, for tied cross-attention drawn in the noises without the keys'
        common shift, on which the loss does not depend (docs/model.md (10.6); one net, no sign
        copies). The solver's own coarse rule (1024 nodes) is far too coarse for this integral
        (cross-attention's semantic test error at ``alpha = 1`` 2.7 % low on it); a product rule
        in 6 or more dimensions oscillates with its order where the fields are large (at the
        semantic start of cross-attention by 10 % from order 5 to 9). Built once per ``log2_n``
        and saddle (0.03 s at ``4 * 2^14`` nodes, 0.2 s at ``4 * 2^16``), then reused."""
        if log2_n not in self._test_rules:
            self._test_rules[log2_n] = self._build_test_rule(log2_n)
        return self._test_rules[log2_n]

    def _build_test_rule(self, log2_n: int) -> Rule | None:
        """The rule :meth:`test_rule` returns, built anew (:func:`~attnphase.theory.generalization.build_test_rule`)."""
        return build_test_rule(self, log2_n)

    @one_blas_thread
    def test_error(self, op: OrderParams, order: int = 10, log2_n: int | None = None) -> float:
        """``eps_g = E[ell(w; T(h*))]`` (docs/model.md (4.2)) with a product Gauss-Hermite rule
        (more than 6 dimensions: :meth:`test_rule`, of ``4 * 2^log2_n`` nodes if given).

        The integrand is smooth, so a modest order is exact to ~1e-8 (see the quadrature test).
        A ``gain`` value (docs/model.md (6.5)) and cross-attention (docs/model.md (10.3)) take the
        numpy form :meth:`test_error_numpy` (the compiled sum knows neither the gain nor the cross
        mask of the teacher).
        """
        return error_sum(self, op, order, log2_n)

    def test_error_numpy(self, op: OrderParams, order: int = 10, log2_n: int = TEST_QMC_LOG2_NUMPY) -> float:
        """The same sum as :meth:`test_error` with the nodes stored and the fields, maps and loss
        in numpy (``fields``, ``target_map``, ``loss_numpy``): the reference the kernel is tested
        and benchmarked against (the Sobol rule above 6 dimensions: ``4 * 2^log2_n`` nodes,
        :meth:`test_rule`)."""
        return error_sum_numpy(self, op, order, log2_n)


