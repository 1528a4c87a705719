"""The proximal kernels' moves along the orbit of the scores' symmetry (docs/model.md (3.2)), numba.

One head's scores ``h_l^T M h_j`` are unchanged by ``h_l -> A^T h_l`` for every ``A`` with ``A M
A^T = M``: the rotations of the two fields of tied rank 2, the scalings ``(c h_Q, h_K / c)`` of untied
rank 1 (:func:`attnphase.theory.geometries.score_orbit`). Along that orbit only the quadratic term of
the proximal objective changes; where it is weak the damped Newton steps of ``jit._newton`` creep
along a curved valley, and :func:`follow_orbit` moves the iterate towards the orbit's least quadratic
term instead. The written-out C kernels run the same operations in the same order
(:func:`attnphase.theory.native.orbit.c_orbit`).
"""
# ruff: noqa: E501

from __future__ import annotations

import numba as nb
import numpy as np

from attnphase.theory.geometries import ORBIT_NEWTON


@nb.njit(cache=True)
def _prior(h, w, Winv):  # pragma: no cover - jitted
    """The quadratic term ``(h - w)^T Winv (h - w) / 2`` of the proximal objective alone."""
    L, F = h.shape
    n = L * F
    quad = 0.0
    for i in range(n):
        acc = 0.0
        for k in range(n):
            acc += Winv[i, k] * (h[k // F, k % F] - w[k // F, k % F])
        quad += (h[i // F, i % F] - w[i // F, i % F]) * acc
    return 0.5 * quad


@nb.njit(cache=True)
def _orbit_move(h, c, s, orbit, out):  # pragma: no cover - jitted
    """``h`` moved along its orbit into ``out``: rotated by the angle of cosine ``c`` and sine ``s``
    (``orbit`` 1), or ``(c h_Q, h_K / c)`` (``orbit`` 2)."""
    L = h.shape[0]
    for l in range(L):
        if orbit == 1:
            out[l, 0] = h[l, 0] * c + h[l, 1] * s
            out[l, 1] = h[l, 1] * c - h[l, 0] * s
        else:
            out[l, 0] = h[l, 0] * c
            out[l, 1] = h[l, 1] / c


@nb.njit(cache=True)
def _tangent(h, i, orbit):  # pragma: no cover - jitted
    """Entry ``i`` of the flattened ``h X``, the orbit's tangent at ``h`` (``X = [[0, -1], [1, 0]]``
    for the rotation, ``orbit`` 1; ``diag(1, -1)`` for the scaling, 2)."""
    l, a = i // 2, i % 2
    if orbit == 1:
        return h[l, 1] if a == 0 else -h[l, 0]
    return h[l, 0] if a == 0 else -h[l, 1]


@nb.njit(cache=True)
def follow_orbit(h, w, Winv, orbit, trial):  # pragma: no cover - jitted
    """Move ``h`` (in place) along its orbit under the symmetry of the scores towards the least
    quadratic term: the loss is the same along it, so the objective falls by what the quadratic
    term falls. ``orbit`` 1: ``h -> h R`` for a rotation ``R`` of the two field coordinates (tied
    rank 2), first the rotation that maximises ``<h R, Winv w>`` (the least quadratic term where
    ``Winv`` is isotropic), then ``ORBIT_NEWTON`` Newton steps in the angle (the rotation of the
    Cayley transform of the step ``t``, ``tan(angle / 2) = t / 2``); 2: ``(h_Q, h_K) -> (c h_Q,
    h_K / c)`` (untied rank 1), Newton steps in ``t = log c`` (``c = (1 + t/2) / (1 - t/2)``, ``|t|
    <= 1``); 0: nothing. A move is kept only where it lowers the quadratic term; ``trial`` (L x F) is
    scratch. No transcendental function: a move costs a fraction of a Newton step."""
    L, F = h.shape
    n = L * F
    if orbit == 0:
        return
    p = _prior(h, w, Winv)
    if orbit == 1:
        a = 0.0
        b = 0.0
        for l in range(L):
            g0 = 0.0
            g1 = 0.0
            for k in range(n):
                g0 += Winv[l * F, k] * w[k // F, k % F]
                g1 += Winv[l * F + 1, k] * w[k // F, k % F]
            a += h[l, 0] * g0 + h[l, 1] * g1
            b += h[l, 1] * g0 - h[l, 0] * g1
        r = np.sqrt(a * a + b * b)
        if r > 0.0:
            _orbit_move(h, a / r, b / r, orbit, trial)
            pt = _prior(trial, w, Winv)
            if pt < p:
                p = pt
                for l in range(L):
                    for c in range(F):
                        h[l, c] = trial[l, c]
    sgn = -1.0 if orbit == 1 else 1.0  # (X^2 = -I for the rotation, I for the scaling)
    for _ in range(ORBIT_NEWTON):
        d1 = 0.0
        d2 = 0.0
        for i in range(n):
            u_i = _tangent(h, i, orbit)
            q_acc = 0.0
            u_acc = 0.0
            for k in range(n):
                q_acc += Winv[i, k] * (h[k // F, k % F] - w[k // F, k % F])
                u_acc += Winv[i, k] * _tangent(h, k, orbit)
            d1 += u_i * q_acc
            d2 += u_i * u_acc + sgn * h[i // F, i % F] * q_acc
        if not d2 > 0.0:
            break
        t = -d1 / d2
        if orbit == 1:
            e = 1.0 + 0.25 * t * t
            _orbit_move(h, (1.0 - 0.25 * t * t) / e, t / e, orbit, trial)
        else:
            t = min(max(t, -1.0), 1.0)
            _orbit_move(h, (1.0 + 0.5 * t) / (1.0 - 0.5 * t), 0.0, orbit, trial)
        pt = _prior(trial, w, Winv)
        if not pt < p:
            break
        p = pt
        for l in range(L):
            for c in range(F):
                h[l, c] = trial[l, c]
