"""Model specification (``docs/model.md`` (1.1)-(1.3)): a frozen dataclass and its validation.

Every public entry point (library and CLI) builds a :class:`ModelSpec`; invalid input raises
``ValueError`` with a one-line message, which the CLI prints and turns into exit status 2.
``parse_matrix`` and ``parse_range`` (from :mod:`attnphase.spec.parse`) are importable from here
too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.spec import attention as _attention
from attnphase.spec.parse import Matrix, parse_matrix, parse_range
from attnphase.spec.schema import Parameter, described, parameters

__all__ = [
    "CROSS_VARIANTS", "VALUES", "VARIANTS", "Matrix", "cross_target", "default_cross_A", "positional_axis", "ModelSpec", "check_alpha", "default_A", "default_positions",
    "model_parameters", "parse_matrix", "parse_range", "token_covariance",
]

#: Student attention variants: the names of the registry of attention models
#: (:data:`attnphase.spec.attention.MODELS`).
VARIANTS = _attention.names()
#: The cross-attention variants (``docs/model.md`` section 10): queries from ``x``, keys and values
#: from a second sequence ``x'`` of ``L_keys`` tokens.
CROSS_VARIANTS = tuple(n for n, m in _attention.MODELS.items() if m.cross)
VALUES = ("identity", "lowrank", "full", "gain")

#: Largest ``L``, ``rank`` and ``teacher_rank``: the ``L x L`` matrices are built and checked when
#: the spec is made, and the solver's cost grows like the 4th power of ``L`` times the rank.
MAX_SIZE = 1000


def default_A(L: int, diag: float = 0.6) -> Matrix:
    """Default positional target: ``diag`` on the diagonal, the rest spread evenly.

    For ``L = 2`` this is the reference ``A = [[0.6, 0.4], [0.4, 0.6]]`` of ``docs/model.md`` (1.2).
    """
    off = (1.0 - diag) / (L - 1)
    return tuple(tuple(diag if i == j else off for j in range(L)) for i in range(L))


def default_cross_A(L: int, L_keys: int, diag: float = 0.6) -> Matrix:
    """Default ``L x L'`` positional target of cross-attention (``docs/model.md`` (10.1)): query
    ``l`` puts ``diag`` on key ``min(l, L' - 1)`` and spreads the rest evenly over the other keys
    (:func:`default_A` for ``L' = L``)."""
    off = (1.0 - diag) / (L_keys - 1)
    return tuple(tuple(diag if j == min(l, L_keys - 1) else off for j in range(L_keys)) for l in range(L))


def cross_target(A: np.ndarray) -> np.ndarray:
    """The ``(L + L') x (L + L')`` positional target of the token-level form of cross-attention
    (``docs/model.md`` (10.2)): ``[[0, A], [0, I_L']]`` (query rows read the keys, key rows
    themselves)."""
    L, Lk = A.shape
    out = np.zeros((L + Lk, L + Lk))
    out[:L, L:] = A
    out[L:, L:] = np.eye(Lk)
    return out


def positional_axis(spec: ModelSpec) -> np.ndarray:
    """Token weights ``u`` of the positional start ``Q ~ sum_k u_k pi_k`` (``docs/model.md`` (5.1),
    (10.4)): the first token, ``e_1``; for cross-attention the first query plus the keys it prefers
    over the other queries, ``v = A^T G e_1`` (scaled so that ``max |G' v| = 1``): the student's key
    overlaps then follow the rows of ``A``."""
    u = np.zeros(spec.tokens)
    u[0] = 1.0
    if spec.is_cross:
        G = spec.G_array
        L = spec.L
        v = spec.A_array.T @ G[:L, 0]
        scale = float(np.max(np.abs(G[L:, L:] @ v)))
        if scale > 0:
            u[L:] = v / scale
    return u


def default_positions(L: int) -> Matrix:
    """Default Gram matrix ``G = Pi Pi^T / d`` of the positional embeddings.

    The centred simplex ``G = L/(L-1) I - 1/(L-1) 11^T``: unit norms, equal angles, and
    ``sum_l pi_l = 0``. For ``L = 2`` it is ``pi_1 = 1_d, pi_2 = -1_d`` (``docs/model.md`` (1.1)).
    """
    a = L / (L - 1)
    b = -1.0 / (L - 1)
    return tuple(tuple((a + b) if i == j else b for j in range(L)) for i in range(L))


def token_covariance(L: int, sigma: float, c: float) -> Matrix:
    """Token covariance ``C = sigma^2 ((1 - c) I + c 11^T)`` (``docs/model.md`` (6.3))."""
    s2 = sigma * sigma
    return tuple(tuple(s2 * (1.0 if i == j else c) for j in range(L)) for i in range(L))


@dataclass(frozen=True)
class ModelSpec:
    """Parameters of the attention model (``docs/model.md`` (1.1)-(1.3), (6.1)-(6.4)).

    Every field is declared once with its kind, help text, choices and bounds
    (``attnphase.spec.schema.described``); ``attnphase.spec.model_parameters()`` reads them back and
    the command-line flags, the sweep parameters and the validation below are made from them.
    The API reference's table of the fields is generated from the same declarations.

    Parameters
    ----------
    omega : float
        Positional share of the target ``T = (1 - omega) softmax(h* h*^T) + omega A``
        (docs/model.md (1.2)).
    sigma : float
        Token noise standard deviation (docs/model.md (1.1)).
    lam : float
        Ridge penalty ``lambda`` on ``Q`` (docs/model.md (1.4)).
    A : matrix, optional
        Row-stochastic ``L x L`` positional target (default ``attnphase.spec.problem.default_A``).
    L : int
        Number of tokens.
    rank : int
        Student rank ``r``.
    teacher_rank : int
        Teacher rank ``r*``.
    positions : matrix, optional
        Gram matrix ``G = Pi Pi^T / d`` (default ``attnphase.spec.problem.default_positions``).
    variant : str
        Student attention map, one of ``attnphase.spec.problem.VARIANTS`` (docs/model.md (1.3),
        (6.1), (6.2)).
    causal_target : bool
        Apply the causal mask to the teacher softmax too (docs/model.md (6.2)).
    token_corr : float
        ``c`` in ``C = sigma^2((1-c) I + c 11^T)`` (docs/model.md (6.3)).
    token_cov : matrix, optional
        ``C`` in full, instead of ``token_corr`` (docs/model.md (6.3)).
    value : str
        Value matrix (docs/model.md (6.4)): ``identity``; ``gain`` (``V = v I``, trainable gain
        ``v``, theory and simulator, docs/model.md (6.5)); ``lowrank``/``full`` are
        simulation-only.
    value_rank : int
        The rank of ``lowrank``.
    value_gain : float, optional
        The gain ``v`` of ``gain``. ``None`` (the default): the trainable gain, the theory's entry
        points (:func:`attnphase.solve`, :func:`attnphase.transition`) minimise the training error
        over ``v`` (docs/model.md (6.5), ``attnphase.theory.value``); a number: the
        saddle-point equations hold ``v`` there. The simulator always trains ``v``, from
        ``value_gain`` (1 when unset).
    lam_lin : float
        Ridge of the dense linear baseline (docs/model.md (4.3)).
    mixture : int
        Gaussian-mixture tokens (docs/model.md (9.1)): the number ``K`` of means (0: none).
    mixture_sep : float, optional
        The means' Gram ``Gmu = sep`` times the centred simplex of ``K`` points.
    mixture_gram : matrix, optional
        The means' Gram ``Gmu_kk' = mu_k^T mu_k' / d`` in full, instead of ``mixture_sep``.
    mixture_align : matrix, optional
        The teacher's alignments ``kappa_k = mu_k^T Q* / d`` (one value at ``K = 2``:
        ``kappa, -kappa``).
    mixture_probs : matrix, optional
        The label probabilities ``p_k`` (default uniform).
    L_keys : int
        Cross-attention (variants ``cross``, ``untied-cross``, docs/model.md (10.1)): ``L'`` key
        tokens (0: ``L' = L``); ``A`` is then ``L x L'``.
    key_positions : matrix, optional
        Cross-attention: the keys' Gram ``Pi' Pi'^T / d`` (default the centred simplex).
    cross_positions : matrix, optional
        Cross-attention: the ``L x L'`` Gram ``Pi Pi'^T / d`` between query and key embeddings
        (default 0).

    Raises
    ------
    ValueError
        One line, for a value of the wrong kind, outside its bounds or choices, or inconsistent
        with the others (a matrix of the wrong size, an ``A`` that is not row-stochastic, a Gram
        matrix that is not positive semi-definite, mixture means and alignments that no vectors
        have, fields that do not combine such as mixture tokens with cross-attention).
    """

    omega: float = described(0.3, "float", "positional share of the target", minimum=0.0, maximum=1.0)
    sigma: float = described(0.5, "float", "token noise std", minimum=0.0, strict_minimum=True)
    lam: float = described(0.01, "float", "ridge penalty lambda", minimum=0.0)
    A: Matrix | None = described(
        None, "matrix", "positional target, row-stochastic L x L (default: 0.6 on the diagonal, "
        "the rest spread evenly)", example="0.6,0.4;0.4,0.6")
    L: int = described(2, "int", "number of tokens", minimum=2)
    rank: int = described(1, "int", "student rank r", minimum=1)
    teacher_rank: int = described(1, "int", "teacher rank r*", minimum=1)
    positions: Matrix | None = described(
        None, "matrix", "Gram matrix Pi Pi^T/d of positional embeddings (default: the centred "
        "simplex)", example="1,-1;-1,1")
    variant: str = described("tied", "str", "student attention variant", choices=VARIANTS)
    causal_target: bool = described(False, "bool", "causal mask on the target too")
    token_corr: float = described(0.0, "float", "token correlation c")
    token_cov: Matrix | None = described(
        None, "matrix", "full token covariance C (replaces the token correlation)",
        example="0.25,0.05;0.05,0.25")
    value: str = described("identity", "str", "value matrix (gain: V = v I, theory and simulation; "
                           "lowrank and full: simulation only, docs/model.md (6.4))", choices=VALUES,
                           group="value")
    value_rank: int = described(1, "int", "rank of the low-rank value", minimum=1, group="value")
    value_gain: float | None = described(None, "float", "gain v of value = gain (V = v I): unset, the theory "
                                         "minimises the training error over v; set, it holds v there. The "
                                         "simulator trains v from it (default 1)",
                                         minimum=0.0, strict_minimum=True, group="value",
                                         extension=True)
    lam_lin: float = described(1e-4, "float", "ridge of the linear baseline", minimum=0.0,
                               group="value")
    # ---- Gaussian-mixture tokens (docs/model.md section 9)
    mixture: int = described(0, "int", "number K of Gaussian-mixture token means (0: none)", minimum=0,
                           group="mixture", extension=True)
    mixture_sep: float | None = described(
        None, "float", "mean Gram Gmu = sep * (centred simplex of K); K = 2: mu_2 = -mu_1, "
        "|mu|^2/d = sep", minimum=0.0, group="mixture", extension=True)
    mixture_gram: Matrix | None = described(
        None, "matrix", "Gram matrix mu_k.mu_k'/d of the mixture means (replaces the separation)",
        example="1,-1;-1,1", group="mixture", extension=True)
    mixture_align: Matrix | None = described(
        None, "matrix", "teacher alignments kappa_k = mu_k.Q*/d (one value for K = 2: kappa, -kappa)",
        example="0.5,-0.5", group="mixture", extension=True)
    mixture_probs: Matrix | None = described(
        None, "matrix", "label probabilities p_k (default uniform)", example="0.5,0.5",
        group="mixture", extension=True)
    # ---- cross-attention (docs/model.md section 10): variants cross, untied-cross
    L_keys: int = described(0, "int", "key tokens L' of cross-attention (0: L' = L)", minimum=0,
                          group="cross", extension=True)
    key_positions: Matrix | None = described(
        None, "matrix", "cross-attention: Gram matrix Pi' Pi'^T/d of the key embeddings (default: "
        "the centred simplex)", example="1,-1;-1,1", group="cross", extension=True)
    cross_positions: Matrix | None = described(
        None, "matrix", "cross-attention: L x L' Gram Pi Pi'^T/d between query and key embeddings "
        "(default: 0, keys orthogonal to queries)", example="1,-1;-1,1", group="cross", extension=True)

    # ---- attention heads and maps (docs/model.md section 11)
    heads: int = described(1, "int", "attention heads H of the student, each of rank 1 with its own tied key and "
                           "query", minimum=1, maximum=_attention.MAX_HEADS, group="attention", extension=True)
    head_gains: str = described("fixed", "str", "head gains v_h: fixed or trained (the theory minimises the training "
                                "error over them, the simulator trains them)", choices=_attention.HEAD_GAINS,
                                group="attention", extension=True)
    head_gain_values: Matrix | None = described(
        None, "matrix", "the head gains v_1..v_H (one row; default 1/H each): held where head_gains = fixed, the "
        "start of the search and of training where trained", example="0.6,0.4", group="attention", extension=True)
    activation: str = described("softmax", "str", "the student's attention map", choices=tuple(_attention.ACTIVATIONS),
                                group="attention", extension=True)
    teacher_activation: str = described("softmax", "str", "the teacher's attention map",
                                        choices=tuple(_attention.ACTIVATIONS), group="attention", extension=True)

    def __post_init__(self) -> None:
        for name in ("mixture_align", "mixture_probs", "head_gain_values"):  # (a number or a 1-d sequence: one row)
            v = getattr(self, name)
            if v is not None and not isinstance(v, str) and np.ndim(v) in (0, 1):
                object.__setattr__(self, name, (tuple(np.atleast_1d(np.asarray(v, dtype=float)).tolist()),))
        for p in model_parameters():
            object.__setattr__(self, p.name, p.coerce(getattr(self, p.name)))
        for name in ("L", "rank", "teacher_rank"):
            if getattr(self, name) > MAX_SIZE:
                raise ValueError(f"{name} must be <= {MAX_SIZE}, got {getattr(self, name)}")
        self._check_heads()
        L = self.L
        cols = self._check_cross()
        if self.is_cross:
            A = default_cross_A(L, cols) if self.A is None else self.A
        else:
            A = default_A(L) if self.A is None else self.A
        Aa = np.asarray(A)
        if Aa.shape != (L, cols):
            keys = f" and L_keys={cols}" if self.is_cross else ""
            raise ValueError(f"A must be {L}x{cols} for L={L}{keys}, got shape {Aa.shape[0]}x{Aa.shape[1]}")
        if np.any(Aa < 0):
            raise ValueError("A must have non-negative entries")
        if not np.allclose(Aa.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError(f"A must be row-stochastic (rows sum to 1), row sums are {Aa.sum(1).tolist()}")
        G = default_positions(L) if self.positions is None else self.positions
        Ga = np.asarray(G)
        if Ga.shape != (L, L):
            raise ValueError(f"positions Gram must be {L}x{L}, got shape {Ga.shape}")
        if not np.allclose(Ga, Ga.T, atol=1e-12) or np.linalg.eigvalsh(Ga).min() < -1e-9:
            raise ValueError("positions Gram matrix must be symmetric positive semi-definite")
        if not np.allclose(np.diag(Ga), 1.0, atol=1e-9):
            raise ValueError("positions Gram matrix must have unit diagonal (||pi_l||^2 = d)")
        tiny = np.finfo(float).tiny  # (a variance below it is subnormal: the solver's matrices turn singular)
        if not tiny <= self.sigma * self.sigma < np.inf:
            raise ValueError(f"sigma must have a finite, normal square (about 1e-154 < sigma < 1e154), got {self.sigma}")
        if self.token_cov is not None:
            Ca = np.asarray(self.token_cov)
            if Ca.shape != (L, L) or not np.allclose(Ca, Ca.T):
                raise ValueError(f"token_cov must be a symmetric {L}x{L} matrix")
            if np.linalg.eigvalsh(Ca).min() < tiny:
                raise ValueError("token_cov must be positive definite")
        else:
            lo = -1.0 / (L - 1)
            if not lo < self.token_corr < 1.0:
                raise ValueError(f"token_corr must lie in ({lo:.4g}, 1) for L={L}, got {self.token_corr}")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "positions", G)
        if self.is_cross:
            self._resolve_cross(cols)
        self._check_mixture()

    def _check_mixture(self) -> None:
        """Validate the Gaussian-mixture fields (docs/model.md (9.1)): ``ValueError`` (one line)
        for a Gram that is not PSD, probabilities not summing to one, or alignments no teacher
        with ``|Q*|^2/d = 1`` can have (the Gram of ``(mu_1..mu_K, Q*)`` not PSD)."""
        K = self.mixture
        given = [n for n in ("mixture_sep", "mixture_gram", "mixture_align", "mixture_probs")
                 if getattr(self, n) is not None]
        if K == 0:
            if given:
                raise ValueError(f"{given[0]} needs mixture K >= 1 (--mixture K)")
            return
        if K > 64:
            raise ValueError(f"mixture must be <= 64 means, got {K}")
        if self.teacher_rank != 1:
            raise ValueError("mixture tokens need teacher_rank 1")
        if self.is_cross:
            raise ValueError("mixture tokens do not combine with cross-attention")
        if self.mixture_sep is None and self.mixture_gram is None:
            raise ValueError("mixture needs mixture_sep (--mixture-sep) or mixture_gram (--mixture-gram)")
        if self.mixture_sep is not None and K == 1:
            raise ValueError("mixture_sep needs K >= 2 (for K = 1 give mixture_gram)")
        if self.mixture_sep is not None and self.mixture_gram is not None:
            sep = float(self.mixture_sep) * np.asarray(default_positions(K), dtype=float)
            if np.shape(self.mixture_gram) != sep.shape or not np.allclose(self.mixture_gram, sep, atol=1e-12):
                raise ValueError("mixture_gram and mixture_sep disagree: give one of them")
        Gm = self.mixture_Gmu
        if Gm.shape != (K, K) or not np.allclose(Gm, Gm.T, atol=1e-12):
            raise ValueError(f"mixture_gram must be a symmetric {K}x{K} matrix")
        if np.linalg.eigvalsh(Gm).min() < -1e-9:
            raise ValueError("mixture_gram must be positive semi-definite")
        if self.mixture_probs is not None:
            p = np.asarray(self.mixture_probs, dtype=float)
            if p.size != K or min(p.shape) != 1:
                raise ValueError(f"mixture_probs must have {K} values, got shape {p.shape[0]}x{p.shape[1]}")
            if np.any(p <= 0) or abs(float(p.sum()) - 1.0) > 1e-9:
                raise ValueError(f"mixture_probs must be > 0 and sum to 1, got {p.ravel().tolist()}")
        if self.mixture_align is not None:
            a = np.asarray(self.mixture_align, dtype=float)
            ok = min(a.shape) == 1 and (a.size == K or (a.size == 1 and K == 2 and self.mixture_sep is not None))
            if not ok:
                raise ValueError(f"mixture_align must have {K} values (one value only with K = 2 and "
                                 f"mixture_sep), got shape {a.shape[0]}x{a.shape[1]}")
        kap = self.mixture_kappa
        full = np.block([[Gm, kap[:, None]], [kap[None, :], np.ones((1, 1))]])
        if np.linalg.eigvalsh(full).min() < -1e-9:
            raise ValueError("mixture_align is impossible for these means: the Gram of (mu_1..mu_K, Q*) "
                             "with |Q*|^2/d = 1 is not positive semi-definite")

    def _check_heads(self) -> None:
        """``ValueError`` for several heads where they are not defined: each head is rank 1 with tied
        key and query (docs/model.md (11.1)), on the models that declare ``multi-head``."""
        if self.heads == 1:
            if self.head_gains != "fixed":
                raise ValueError("head_gains applies to several heads (heads > 1)")
            if self.head_gain_values is not None:
                raise ValueError("head_gain_values applies to several heads (heads > 1)")
            return
        if self.head_gain_values is not None:
            v = np.asarray(self.head_gain_values, dtype=float)
            if v.size != self.heads or min(v.shape) != 1:
                raise ValueError(f"head_gain_values must have {self.heads} values (one per head), got shape "
                                 f"{v.shape[0]}x{v.shape[1]}")
        covering = _attention.names("multi-head")
        if self.variant not in covering:
            raise ValueError(f"several heads cover the variants {', '.join(covering)}, got variant {self.variant!r}")
        if self.rank != 1:
            raise ValueError(f"each head has rank 1: heads > 1 needs rank = 1, got rank {self.rank}")
        if self.mixture or self.value != "identity":
            raise ValueError("several heads cover uniform tokens (mixture 0) and value = identity")

    def _check_cross(self) -> int:
        """The columns of ``A``: ``L'`` for cross-attention, ``L`` otherwise; ``ValueError`` for
        cross-attention settings on another variant or what cross-attention does not cover."""
        if not self.is_cross:
            if self.L_keys or self.key_positions is not None or self.cross_positions is not None:
                raise ValueError(f"L_keys, key_positions and cross_positions need a cross-attention variant "
                                 f"({', '.join(CROSS_VARIANTS)}), got variant {self.variant!r}")
            return self.L
        Lk = self.L_keys or self.L
        if Lk < 2:
            raise ValueError(f"L_keys must be >= 2 (or 0 for L_keys = L), got {Lk}")
        if Lk > MAX_SIZE:
            raise ValueError(f"L_keys must be <= {MAX_SIZE}, got {Lk}")
        if self.causal_target:
            raise ValueError("causal_target does not apply to cross-attention")
        if self.token_cov is not None or self.token_corr != 0.0:
            raise ValueError("cross-attention covers uncorrelated tokens only (token_corr = 0, no token_cov)")
        if self.value != "identity":
            raise ValueError("cross-attention covers value = identity only")
        return Lk

    def _resolve_cross(self, Lk: int) -> None:
        """Fill in ``L_keys`` and the key Grams of cross-attention and check the Gram of all
        ``L + L'`` embeddings (``docs/model.md`` (10.1))."""
        K = default_positions(Lk) if self.key_positions is None else self.key_positions
        Ka = np.asarray(K)
        if Ka.shape != (Lk, Lk):
            raise ValueError(f"key_positions Gram must be {Lk}x{Lk}, got shape {Ka.shape}")
        if not np.allclose(np.diag(Ka), 1.0, atol=1e-9):
            raise ValueError("key_positions Gram matrix must have unit diagonal (||pi'_j||^2 = d)")
        X = tuple(tuple(0.0 for _ in range(Lk)) for _ in range(self.L)) if self.cross_positions is None \
            else self.cross_positions
        Xa = np.asarray(X)
        if Xa.shape != (self.L, Lk):
            raise ValueError(f"cross_positions Gram must be {self.L}x{Lk}, got shape {Xa.shape}")
        object.__setattr__(self, "L_keys", Lk)
        object.__setattr__(self, "key_positions", K)
        object.__setattr__(self, "cross_positions", X)
        G = self.G_array
        if not np.allclose(G, G.T, atol=1e-12) or np.linalg.eigvalsh(G).min() < -1e-9:
            raise ValueError("the Gram matrix of all query and key embeddings [[positions, cross_positions], "
                             "[cross_positions^T, key_positions]] must be symmetric positive semi-definite")

    # ----------------------------------------------------------------- helpers
    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def gain_start(self) -> float:
        """The value gain ``v`` the saddle-point equations and the simulator start from (docs/model.md
        (6.5)): ``value_gain``, 1 when unset."""
        return 1.0 if self.value_gain is None else float(self.value_gain)

    @property
    def optimal_gain(self) -> bool:
        """``value = "gain"`` with ``value_gain`` unset: the theory minimises the training error over
        the gain (docs/model.md (6.5))."""
        return self.value == "gain" and self.value_gain is None

    @property
    def A_array(self) -> np.ndarray:
        """The positional target ``A`` (``L x L``; ``L x L'`` for cross-attention)."""
        return np.asarray(self.A, dtype=float)

    @property
    def is_cross(self) -> bool:
        """Cross-attention (``CROSS_VARIANTS``, ``docs/model.md`` section 10)."""
        return self.variant in CROSS_VARIANTS

    @property
    def tokens(self) -> int:
        """Tokens of a sample: ``L``, or ``L + L'`` (queries, then keys) for cross-attention."""
        return self.L + self.L_keys if self.is_cross else self.L

    @property
    def A_tokens(self) -> np.ndarray:
        """The positional target over all :attr:`tokens`: ``A``, or ``cross_target`` of it."""
        return cross_target(self.A_array) if self.is_cross else self.A_array

    @property
    def G_array(self) -> np.ndarray:
        """Gram matrix of the embeddings of all :attr:`tokens` (cross-attention: queries, then keys,
        ``[[positions, cross_positions], [cross_positions^T, key_positions]]``)."""
        G = np.asarray(self.positions, dtype=float)
        if not self.is_cross or self.key_positions is None:
            return G
        X = np.asarray(self.cross_positions, dtype=float)
        return np.block([[G, X], [X.T, np.asarray(self.key_positions, dtype=float)]])

    @property
    def C_array(self) -> np.ndarray:
        """Token covariance ``C`` over all :attr:`tokens` (``sigma^2 I`` for uncorrelated tokens)."""
        if self.token_cov is not None:
            return np.asarray(self.token_cov, dtype=float)
        return np.asarray(token_covariance(self.tokens, self.sigma, self.token_corr), dtype=float)

    @property
    def mixture_Gmu(self) -> np.ndarray:
        """Gram ``Gmu = mu_k^T mu_k' / d`` of the mixture means (K x K; docs/model.md (9.1))."""
        K = self.mixture
        if self.mixture_gram is not None:
            return np.asarray(self.mixture_gram, dtype=float)
        if K < 2 or self.mixture_sep is None:
            return np.zeros((K, K))
        return float(self.mixture_sep) * np.asarray(default_positions(K), dtype=float)

    @property
    def mixture_kappa(self) -> np.ndarray:
        """Teacher alignments ``kappa_k = mu_k^T Q* / d`` (K values; docs/model.md (9.1))."""
        K = self.mixture
        if self.mixture_align is None:
            return np.zeros(K)
        a = np.asarray(self.mixture_align, dtype=float).ravel()
        return np.array([a[0], -a[0]]) if a.size == 1 and K == 2 else a

    @property
    def head_gain_array(self) -> np.ndarray:
        """The head gains ``v_h`` (``heads`` values; ``1/H`` each unless ``head_gain_values`` is
        given; docs/model.md (11.1)): the held gains, or the start of the trained ones."""
        if self.head_gain_values is None:
            return np.full(self.heads, 1.0 / self.heads)
        return np.asarray(self.head_gain_values, dtype=float).ravel()

    @property
    def mixture_p(self) -> np.ndarray:
        """Label probabilities ``p_k`` (K values, default uniform; docs/model.md (9.1))."""
        K = self.mixture
        if self.mixture_probs is None:
            return np.full(K, 1.0 / K) if K else np.zeros(0)
        return np.asarray(self.mixture_probs, dtype=float).ravel()

    @property
    def uncorrelated(self) -> bool:
        C = self.C_array
        return bool(np.allclose(C, self.sigma**2 * np.eye(self.tokens)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters (every field, matrices as nested lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name.startswith("_"):
                continue
            v = getattr(self, f.name)
            if isinstance(v, tuple):
                v = [list(r) for r in v]
            out[f.name] = v
        return out


def model_parameters() -> tuple[Parameter, ...]:
    """The :class:`~attnphase.spec.schema.Parameter` of every :class:`ModelSpec` field, in
    field order."""
    return parameters(ModelSpec)


#: The sample complexities ``alpha = n/d`` the solver takes: beyond 1e12 its saddle-point matrices
#: overflow or turn singular (1e20: "Singular matrix"; 1e300: overflow), below 1e-12 there is no
#: sample at any dimension one could simulate.
ALPHA_RANGE = (1e-12, 1e12)


def check_alpha(alpha: float | Sequence[float]) -> None:
    """Raise ``ValueError`` unless every ``alpha`` is finite, > 0 and within :data:`ALPHA_RANGE`."""
    values = np.atleast_1d(np.asarray(alpha, dtype=float))
    if values.size == 0:
        raise ValueError("alpha range is empty")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"alpha must be > 0, got {values[(~np.isfinite(values)) | (values <= 0)][0]}")
    lo, hi = ALPHA_RANGE
    out = values[(values < lo) | (values > hi)]
    if out.size:
        raise ValueError(f"alpha must lie in [{lo:g}, {hi:g}], got {out[0]:g}")
