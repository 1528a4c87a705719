"""Root finders on one variable (``alpha``) whose function may be absent (``None``: the branch does
not exist there): bisection and the Illinois variant of regula falsi, used by the transition search
(:mod:`~attnphase.theory.transition`) and the optimal value gain (:mod:`~attnphase.theory.value`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def bisect(f: Callable[[float], float | None], lo: float, hi: float, flo: float, xtol: float) -> float:
    """Bisection for a sign change of ``f`` on ``[lo, hi]`` (``f(lo) = flo``); ``None`` values
    (branch absent) are treated as the side where the branch does not exist; returns the
    :func:`midpoint` of the final bracket."""
    return midpoint(*bisect_bracket(f, lo, hi, flo, xtol))


def midpoint(lo: float, hi: float) -> float:
    """Midpoint of a bisection bracket, to 12 significant digits: ``0.675``, not the
    ``0.6749999999999999`` of a bracket whose end is a grid value minus the grid step
    (``0.7 - 0.05 = 0.6499999999999999``)."""
    return float(f"{0.5 * (lo + hi):.12g}")


def bisect_bracket(f: Callable[[float], float | None], lo: float, hi: float, flo: float,
                    xtol: float) -> tuple[float, float]:
    """The final bracket ``(lo, hi)`` of :func:`bisect` (``lo`` on the side of ``flo``)."""
    for _ in range(60):
        if abs(hi - lo) < xtol:
            break
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if fm is not None and np.sign(fm) == np.sign(flo):
            lo, flo = mid, fm
        else:
            hi = mid
    return lo, hi


def illinois_root(f: Callable[[float], float | None], lo: float, hi: float, flo: float, fhi: float | None,
          xtol: float, noise: Callable[[], float | None] | None = None, max_iter: int = 60,
          pad: float = 0.02) -> float:
    """Sign change of ``f`` on ``[lo, hi]`` by the Illinois variant of regula falsi (bisection
    where ``f`` is ``None``, i.e. a branch is absent, treated as the ``hi`` side). The training-
    error and test-error differences are smooth in ``alpha``, so this needs 2-4 solves where
    bisection needs 6-8. ``noise()`` (optional): the standard error of the last ``f`` value; the
    search stops once the secant step to the root is below that error in ``x`` units (``f`` is
    then indistinguishable from zero within the integration error). At most ``max_iter``
    evaluations of ``f``; each secant point is kept ``pad`` times the bracket's width inside it.
    Also the search of :func:`attnphase.theory.value.gain_transition`."""
    side = 0
    true = {lo: flo, hi: fhi}  # f without the Illinois down-weighting
    for _ in range(max_iter):
        if abs(hi - lo) < xtol:
            break
        if fhi is None or fhi == flo:
            m = 0.5 * (lo + hi)
        else:
            m = hi - fhi * (hi - lo) / (fhi - flo)
            inset = pad * (hi - lo)
            m = min(max(m, lo + inset), hi - inset)
        fm = f(m)
        if fm is None:
            hi, fhi = m, None
            side = 0
            continue
        true[m] = fm
        if fm == 0.0:
            return m
        se = noise() if noise is not None else None
        if se is not None:
            # stop once the secant's distance to the root is below the noise of f in x units
            other = (hi, true.get(hi)) if np.sign(fm) == np.sign(flo) else (lo, true.get(lo))
            if other[1] is not None and other[0] != m and other[1] != fm:
                slope = (other[1] - fm) / (other[0] - m)
                if abs(fm / slope) < max(xtol, se / abs(slope)):
                    return float(m - fm / slope)
        if np.sign(fm) == np.sign(flo):
            lo, flo = m, fm
            if side == -1 and fhi is not None:
                fhi *= 0.5
            side = -1
        else:
            hi, fhi = m, fm
            if side == 1:
                flo *= 0.5
            side = 1
        if fhi is not None and abs(fm) < 1e-12 * max(abs(flo), abs(fhi)):
            break
    if fhi is not None and fhi != flo:
        return float(hi - fhi * (hi - lo) / (fhi - flo))
    return 0.5 * (lo + hi)
