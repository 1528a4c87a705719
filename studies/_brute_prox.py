"""The proximal problem of docs/model.md (3.2) at ``L = 2``, rank one, solved by brute force in
torch (float64), independently of the library's solver: the reference of the Monte-Carlo checks
of one data step (``studies/causal_datastep.py``, ``studies/mixture_datastep.py``).

``min_h sum_l (h_l - w_l)^2 / (2V) + sigma^2 ||S(h) - T||_F^2 / 2`` with the student map ``S``
(:func:`softmax_student` or :func:`causal_student`): a grid of ``grid^2`` points around ``w`` of
half-width ``sqrt(8 V sigma^2) + 1``, then L-BFGS from the best ``keep`` grid points (and from
``w`` itself with ``start_at_w``), the lowest minimum kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

#: a student map ``h (..., 2) -> S (..., 2, 2)``
Student = Callable[[torch.Tensor], torch.Tensor]

#: the causal mask of ``L = 2`` (row 1 sees token 1 only)
CAUSAL_MASK = torch.tensor([[True, False], [True, True]])


def softmax_student(h: torch.Tensor) -> torch.Tensor:
    """The tied student ``rowsoftmax(h h^T)`` for fields ``h (..., 2)``."""
    return torch.softmax(h[..., :, None] * h[..., None, :], dim=-1)


def causal_student(h: torch.Tensor) -> torch.Tensor:
    """The causal student ``rowsoftmax(h h^T)`` masked to ``j <= l`` for fields ``h (..., 2)``."""
    s = h[..., :, None] * h[..., None, :]
    return torch.softmax(s.masked_fill(~CAUSAL_MASK, -math.inf), dim=-1)


def prox_objective(h: torch.Tensor, w: torch.Tensor, T: torch.Tensor, V: float, s2: float,
                   student: Student) -> torch.Tensor:
    """``sum_l (h_l - w_l)^2 / (2V) + sigma^2 ||S(h) - T||^2 / 2`` for ``h (..., 2)``."""
    S = student(h)
    return ((h - w) ** 2).sum(-1) / (2 * V) + 0.5 * s2 * ((S - T) ** 2).sum(dim=(-1, -2))


def loss_hessian(h: torch.Tensor, T: torch.Tensor, s2: float, student: Student) -> torch.Tensor:
    """Hessian (N, 2, 2) of ``sigma^2 ||S(h) - T||^2 / 2`` at ``h (N, 2)``."""
    h = h.clone().requires_grad_(True)
    f = 0.5 * s2 * ((student(h) - T) ** 2).sum()
    (g,) = torch.autograd.grad(f, h, create_graph=True)
    rows = [torch.autograd.grad(g[:, j].sum(), h, retain_graph=True)[0] for j in range(2)]
    return torch.stack(rows, dim=1).detach()


def polish(h0: torch.Tensor, w: torch.Tensor, T: torch.Tensor, V: float, s2: float, student: Student,
           lbfgs: tuple[int, float, float]) -> torch.Tensor:
    """L-BFGS (``lbfgs``: max_iter, tolerance_grad, tolerance_change) on the summed objective
    from the starts ``h0 (N, S, 2)`` (each start's own minimum: the sum is separable)."""
    h0 = h0.clone().requires_grad_(True)
    max_iter, tol_grad, tol_change = lbfgs
    opt = torch.optim.LBFGS([h0], lr=1, max_iter=max_iter, tolerance_grad=tol_grad, tolerance_change=tol_change,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        obj = prox_objective(h0, w[:, None, :], T[:, None], V, s2, student).sum()
        obj.backward()
        return obj

    opt.step(closure)
    return h0.detach()


def brute_prox(w: torch.Tensor, T: torch.Tensor, V: float, s2: float, grid: int, student: Student, *,
               keep: int = 4, chunk: int = 1000, start_at_w: bool = True,
               lbfgs: tuple[int, float, float] = (300, 1e-13, 1e-16)) -> tuple[torch.Tensor, torch.Tensor]:
    """Global minimiser and minimum of :func:`prox_objective` per sample (``w (N, 2)``,
    ``T (N, 2, 2)``): the ``keep`` best points of the grid (and ``w`` with ``start_at_w``), each
    polished (:func:`polish`), the lowest kept."""
    half = math.sqrt(8 * V * s2) + 1.0
    u = torch.linspace(-half, half, grid, dtype=torch.float64)
    offs = torch.stack(torch.meshgrid(u, u, indexing="ij"), -1).reshape(-1, 2)  # (G, 2)
    hs, vals = [], []
    for a in range(0, w.shape[0], chunk):
        wc, Tc = w[a:a + chunk], T[a:a + chunk]
        h = wc[:, None, :] + offs[None]
        with torch.no_grad():
            f = prox_objective(h, wc[:, None, :], Tc[:, None], V, s2, student)
        idx = f.topk(keep, dim=1, largest=False).indices
        starts = torch.gather(h, 1, idx[..., None].expand(-1, -1, 2))
        if start_at_w:
            starts = torch.cat([starts, wc[:, None, :]], dim=1)
        h0 = polish(starts, wc, Tc, V, s2, student, lbfgs)
        with torch.no_grad():
            fv = prox_objective(h0, wc[:, None, :], Tc[:, None], V, s2, student)
            best = fv.argmin(dim=1)
            hs.append(h0[torch.arange(h0.shape[0]), best])
            vals.append(fv[torch.arange(h0.shape[0]), best])
    return torch.cat(hs), torch.cat(vals)
