"""Model specification (THEORY.md section 1 and 2.2): a frozen dataclass and its validation.

Every public entry point (library and CLI) builds a :class:`ModelSpec`; invalid input raises
``ValueError`` with a one-line message, which the CLI prints and turns into exit status 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Matrix = tuple[tuple[float, ...], ...]

#: Student attention variants known to the theory and the simulator (see ``theory.channels``).
VARIANTS = ("tied", "untied", "causal", "untied-causal")
VALUES = ("identity", "lowrank", "full")


def default_A(L: int, diag: float = 0.6) -> Matrix:
    """Default positional target: ``diag`` on the diagonal, the rest spread evenly.

    For ``L = 2`` this is THEORY.md's reference ``A = [[0.6, 0.4], [0.4, 0.6]]``.
    """
    off = (1.0 - diag) / (L - 1)
    return tuple(tuple(diag if i == j else off for j in range(L)) for i in range(L))


def default_positions(L: int) -> Matrix:
    """Default Gram matrix ``G = Pi Pi^T / d`` of the positional embeddings.

    The centred simplex ``G = L/(L-1) I - 1/(L-1) 11^T``: unit norms, equal angles, and
    ``sum_l pi_l = 0``. For ``L = 2`` it is ``pi_1 = 1_d, pi_2 = -1_d`` (THEORY.md section 1).
    """
    a = L / (L - 1)
    b = -1.0 / (L - 1)
    return tuple(tuple((a + b) if i == j else b for j in range(L)) for i in range(L))


def token_covariance(L: int, sigma: float, c: float) -> Matrix:
    """Token covariance ``C = sigma^2 ((1 - c) I + c 11^T)`` (THEORY.md 2.3)."""
    s2 = sigma * sigma
    return tuple(tuple(s2 * (1.0 if i == j else c) for j in range(L)) for i in range(L))


def _as_matrix(value: Any, name: str) -> Matrix:
    if isinstance(value, str):
        value = parse_matrix(value, name)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric matrix, got {value!r}") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d matrix, got shape {arr.shape}")
    return tuple(tuple(float(x) for x in row) for row in arr)


def parse_matrix(text: str, name: str = "matrix") -> Matrix:
    """Parse ``"0.6,0.4;0.4,0.6"`` (rows separated by ``;``, entries by ``,``)."""
    rows = [r for r in text.strip().split(";")]
    out = []
    for r in rows:
        entries = [e for e in r.replace(" ", "").split(",")]
        try:
            out.append(tuple(float(e) for e in entries))
        except ValueError:
            raise ValueError(
                f"cannot parse {name} {text!r}: expected numbers like '0.6,0.4;0.4,0.6'"
            ) from None
    widths = {len(r) for r in out}
    if len(widths) != 1:
        raise ValueError(f"cannot parse {name} {text!r}: rows have different lengths")
    return tuple(out)


def parse_range(text: str, name: str = "range") -> tuple[float, ...]:
    """Parse a range ``start:stop:num`` (inclusive linspace), a list ``a,b,c`` or one number."""
    text = text.strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError
            start, stop = float(parts[0]), float(parts[1])
            num = int(parts[2])
            if num < 1:
                raise ValueError(f"{name} {text!r} is empty (num must be >= 1)")
            values = tuple(float(x) for x in np.linspace(start, stop, num))
        else:
            values = tuple(float(x) for x in text.split(",") if x.strip() != "")
    except ValueError as exc:
        if str(exc):
            raise
        raise ValueError(
            f"cannot parse {name} {text!r}: expected 'start:stop:num', 'a,b,c' or a number"
        ) from None
    if not values:
        raise ValueError(f"{name} {text!r} is empty")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name} {text!r} contains non-finite values")
    return values


@dataclass(frozen=True)
class ModelSpec:
    """Parameters of the attention model (THEORY.md sections 1 and 2.2).

    Attributes
    ----------
    omega: positional share of the target ``T = (1 - omega) softmax(h* h*^T) + omega A``.
    sigma: token noise standard deviation.
    lam: ridge penalty ``lambda`` on ``Q``.
    A: row-stochastic ``L x L`` positional target (default :func:`default_A`).
    L: number of tokens.
    rank: student rank ``r``; teacher_rank: ``r*``.
    positions: Gram matrix ``G = Pi Pi^T / d`` (default :func:`default_positions`).
    variant: student attention map, one of :data:`VARIANTS`.
    causal_target: apply the causal mask to the teacher softmax too.
    token_corr: ``c`` in ``C = sigma^2((1-c) I + c 11^T)``; or give ``C`` in full via ``token_cov``.
    value: value matrix (``identity``; ``lowrank``/``full`` are simulation-only).
    lam_lin: ridge of the dense linear baseline.
    """

    omega: float = 0.3
    sigma: float = 0.5
    lam: float = 0.01
    A: Matrix | None = None
    L: int = 2
    rank: int = 1
    teacher_rank: int = 1
    positions: Matrix | None = None
    variant: str = "tied"
    causal_target: bool = False
    token_corr: float = 0.0
    token_cov: Matrix | None = None
    value: str = "identity"
    value_rank: int = 1
    lam_lin: float = 1e-4

    def __post_init__(self) -> None:
        def check_real(name: str, v: Any) -> float:
            try:
                fv = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a number, got {v!r}") from None
            if not math.isfinite(fv):
                raise ValueError(f"{name} must be finite, got {v!r}")
            return fv

        omega = check_real("omega", self.omega)
        sigma = check_real("sigma", self.sigma)
        lam = check_real("lam", self.lam)
        lam_lin = check_real("lam_lin", self.lam_lin)
        corr = check_real("token_corr", self.token_corr)
        if not 0.0 <= omega <= 1.0:
            raise ValueError(f"omega must lie in [0, 1], got {omega}")
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        if lam_lin < 0:
            raise ValueError(f"lam_lin must be >= 0, got {lam_lin}")
        for name in ("L", "rank", "teacher_rank", "value_rank"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.L < 2:
            raise ValueError(f"L must be >= 2, got {self.L}")
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose from {', '.join(VARIANTS)}")
        if self.value not in VALUES:
            raise ValueError(f"unknown value {self.value!r}; choose from {', '.join(VALUES)}")
        L = int(self.L)
        A = default_A(L) if self.A is None else _as_matrix(self.A, "A")
        Aa = np.asarray(A)
        if Aa.shape != (L, L):
            raise ValueError(f"A must be {L}x{L} for L={L}, got shape {Aa.shape[0]}x{Aa.shape[1]}")
        if np.any(Aa < 0):
            raise ValueError("A must have non-negative entries")
        if not np.allclose(Aa.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError(f"A must be row-stochastic (rows sum to 1), row sums are {Aa.sum(1).tolist()}")
        G = default_positions(L) if self.positions is None else _as_matrix(self.positions, "positions")
        Ga = np.asarray(G)
        if Ga.shape != (L, L):
            raise ValueError(f"positions Gram must be {L}x{L}, got shape {Ga.shape}")
        if not np.allclose(Ga, Ga.T, atol=1e-12) or np.linalg.eigvalsh(Ga).min() < -1e-9:
            raise ValueError("positions Gram matrix must be symmetric positive semi-definite")
        if not np.allclose(np.diag(Ga), 1.0, atol=1e-9):
            raise ValueError("positions Gram matrix must have unit diagonal (||pi_l||^2 = d)")
        if self.token_cov is not None:
            C = _as_matrix(self.token_cov, "token_cov")
            Ca = np.asarray(C)
            if Ca.shape != (L, L) or not np.allclose(Ca, Ca.T):
                raise ValueError(f"token_cov must be a symmetric {L}x{L} matrix")
            if np.linalg.eigvalsh(Ca).min() <= 0:
                raise ValueError("token_cov must be positive definite")
            object.__setattr__(self, "token_cov", C)
        else:
            lo = -1.0 / (L - 1)
            if not lo < corr < 1.0:
                raise ValueError(f"token_corr must lie in ({lo:.4g}, 1) for L={L}, got {corr}")
        object.__setattr__(self, "omega", omega)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "lam_lin", lam_lin)
        object.__setattr__(self, "token_corr", corr)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "positions", G)

    # ----------------------------------------------------------------- helpers
    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def A_array(self) -> np.ndarray:
        return np.asarray(self.A, dtype=float)

    @property
    def G_array(self) -> np.ndarray:
        return np.asarray(self.positions, dtype=float)

    @property
    def C_array(self) -> np.ndarray:
        """Token covariance ``C`` (``sigma^2 I`` for uncorrelated tokens)."""
        if self.token_cov is not None:
            return np.asarray(self.token_cov, dtype=float)
        return np.asarray(token_covariance(self.L, self.sigma, self.token_corr), dtype=float)

    @property
    def uncorrelated(self) -> bool:
        C = self.C_array
        return bool(np.allclose(C, self.sigma**2 * np.eye(self.L)))

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


def check_alpha(alpha: float | Sequence[float]) -> None:
    """Raise ``ValueError`` unless every ``alpha`` is finite and > 0."""
    values = np.atleast_1d(np.asarray(alpha, dtype=float))
    if values.size == 0:
        raise ValueError("alpha range is empty")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"alpha must be > 0, got {values[(~np.isfinite(values)) | (values <= 0)][0]}")
