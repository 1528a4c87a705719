"""The positional conjugates' integral over the student noises at fixed teacher noises, by polar
coordinates around ``w = 0``: how fast such a rule converges against the plain QMC rule (a
measured alternative integration rule, not used by the solver; docs/solver.md, "Design choices").

At the positional fixed point (``theta = 0``) the target ``T`` depends on the teacher noises
``eta`` only, so for fixed ``eta`` the integrands (``g``, ``|g|^2``, ``g . xi``) are functions of
the student's prior mean ``w = m + sqrt(q) xi`` alone. The loss is even in ``h``, so the
proximal problem at ``-w`` is the mirror of the one at ``w``: every curve on which the global
minimiser jumps between two mirror minima passes through ``w = 0`` (docs/model.md (7.4)).
On a circle ``|w| = s r`` the integrand is then smooth between the (antipodal) jumps, which are
located by bisection between the two minima tracked from the neighbouring angles; the arcs are
integrated by Gauss-Legendre, a circle without a jump by the trapezoid rule. The radial integral
has the weight ``r exp(-r^2/2)`` (the Gaussian in polar coordinates) and, because a jump runs
through the centre, an integrand with a ``|r|`` kink there: a Gauss rule in ``r`` for that
weight (built here by the Stieltjes procedure) converges at once, Gauss-Laguerre in ``r^2/2``
only like ``n^-1.2``.

Prints, for each ``eta`` of ``--etas``, the polar rule's relative deviation from its own finest
setting at the settings of ``--settings`` (``n_r/K/n_a``: radial nodes, detection angles,
Gauss-Legendre nodes per arc) with the number of proximal solves, and the plain 2-d QMC rule's
error at 2^10 and 2^12 points. ``--outer 6,8,10``: also the whole 4-d integral with a product
Gauss-Hermite rule in ``eta`` of those orders (slow: minutes).

Reproduce: ``python studies/polar_inner.py [--etas "2.5,-2;3,0;1.5,-0.5;1,1"] [--settings 6/16/8,8/24/12]
[--outer 8,12]`` (the outer rule uses the last of ``--settings``; ``--etas ""`` skips the fixed-``eta`` part).
The whole 4-d integral, ``--etas "" --settings 8/24/12 --outer 6,8,10,12,16``, takes ~9 min on 2 cores.
"""

from __future__ import annotations

import argparse

import numpy as np

from attnphase import ModelSpec
from attnphase.theory import SolverSettings
from attnphase.theory.channels import prox_batch, target_map
from attnphase.theory.fixed_point import make_saddle
from attnphase.theory.quadrature import sobol_normal
from attnphase.theory.target import solve_refined


def rayleigh_gauss(n: int, n_disc: int = 3000, rmax: float = 14.0) -> tuple[np.ndarray, np.ndarray]:
    """Gauss rule for the weight ``r exp(-r^2/2)`` on ``[0, inf)`` (Stieltjes procedure on a fine
    Gauss-Legendre discretisation of ``[0, rmax]``); the weights sum to one."""
    x, w = np.polynomial.legendre.leggauss(n_disc)
    x = 0.5 * rmax * (x + 1)
    w = 0.5 * rmax * w * x * np.exp(-x * x / 2)
    a, b = np.zeros(n), np.zeros(n)
    p_prev, p = np.zeros_like(x), np.ones_like(x) / np.sqrt(w.sum())
    for k in range(n):
        a[k] = np.sum(w * x * p * p)
        nxt = (x - a[k]) * p - (b[k - 1] if k > 0 else 0.0) * p_prev
        if k < n - 1:
            b[k] = np.sqrt(np.sum(w * nxt * nxt))
            p_prev, p = p, nxt / b[k]
    ev, evec = np.linalg.eigh(np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1))
    return ev, w.sum() * evec[0] ** 2


class Positional:
    """The positional fixed point at ``alpha`` (reference case) and its fixed-``eta`` integrals."""

    def __init__(self, alpha: float) -> None:
        self.spec = ModelSpec(omega=0.3)
        self.op = solve_refined(self.spec, alpha, "positional", SolverSettings(order=8, refine_order=11)).order_params
        sd = make_saddle(self.spec, alpha, SolverSettings(order=4), order=4)
        self.sd = sd
        self.s = float(np.sqrt(self.op.q[0, 0]))
        self.m = self.op.m[:, 0].copy()
        self.c = self.m / self.s
        self.Rs = float(np.sqrt(sd.field_maps(self.op)[3][0, 0]))
        self.solves = 0

    def prox(self, w: np.ndarray, T: np.ndarray, h0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Global minimiser (full multi-start) or, from ``h0``, the minimum that start reaches."""
        self.solves += w.shape[0]
        starts = None if h0 is None else np.ascontiguousarray(h0[:, None, :, None])
        r = prox_batch(w[:, :, None], T, self.op.V, self.sd.C, self.sd.amap, starts=starts)
        return r.h[:, :, 0], r.value

    def T(self, eta: tuple[float, float], n: int) -> np.ndarray:
        return np.repeat(target_map((self.Rs * np.asarray(eta))[None, :, None], self.spec), n, axis=0)

    def integrand(self, w: np.ndarray, h: np.ndarray) -> np.ndarray:
        """``g_1, g_2, |g|^2, g . xi`` at ``w`` with minimiser ``h``."""
        g = (h - w) / self.op.V[0, 0]
        xi = (w - self.m) / self.s
        return np.stack([g[:, 0], g[:, 1], (g**2).sum(1), (g * xi).sum(1)], 1)

    def qmc(self, eta: tuple[float, float], log2n: int, seed: int) -> np.ndarray:
        w = self.m + self.s * sobol_normal(2, log2n, seed)
        h, _ = self.prox(w, self.T(eta, w.shape[0]))
        return self.integrand(w, h).mean(0)

    def polar(self, eta: tuple[float, float], n_r: int, K: int, n_a: int, tol: float = 1e-10) -> np.ndarray:
        """``E_xi[integrand]`` at fixed ``eta`` by the polar rule (see the module docstring)."""
        r_nodes, r_w = rayleigh_gauss(n_r)
        xg, wg = np.polynomial.legendre.leggauss(n_a)
        c, s = self.c, self.s
        total = np.zeros(4)
        for r, wr in zip(r_nodes, r_w, strict=True):
            def dens(ph: np.ndarray, r: float = r) -> np.ndarray:
                return np.exp(r * (np.cos(ph) * c[0] + np.sin(ph) * c[1]) - 0.5 * c @ c) / (2 * np.pi)

            def at(ph: np.ndarray, r: float = r) -> np.ndarray:
                return s * r * np.stack([np.cos(ph), np.sin(ph)], 1)

            phi = 2 * np.pi * np.arange(K) / K
            T = self.T(eta, K)
            h, M = self.prox(at(phi), T)
            nxt = np.roll(np.arange(K), -1)
            # a switch between neighbouring angles: the minimum continued from one is not the global one at the other
            _, Mf = self.prox(at(phi[nxt]), T, h)
            _, Mb = self.prox(at(phi), T, h[nxt])
            jump = (Mf > M[nxt] + 1e-13 * np.abs(M[nxt]) + 1e-15) | (Mb > M + 1e-13 * np.abs(M) + 1e-15)
            if not jump.any():
                total += wr * (self.integrand(at(phi), h) * dens(phi)[:, None]).sum(0) * (2 * np.pi / K)
                continue
            ks = np.flatnonzero(jump)
            lo, hi = phi[ks].copy(), phi[ks] + 2 * np.pi / K
            hA, hB, TT = h[ks].copy(), h[nxt[ks]].copy(), self.T(eta, len(ks))
            while np.max(hi - lo) > tol:
                mid = 0.5 * (lo + hi)
                hA2, MA = self.prox(at(mid), TT, hA)
                hB2, MB = self.prox(at(mid), TT, hB)
                left = MA <= MB  # (the left minimum still global at mid: the switch lies to the right)
                lo, hi = np.where(left, mid, lo), np.where(left, hi, mid)
                hA, hB = np.where(left[:, None], hA2, hA), np.where(left[:, None], hB, hB2)
            cuts = np.sort(0.5 * (lo + hi) % (2 * np.pi))
            edges = np.concatenate([cuts, [cuts[0] + 2 * np.pi]])
            for a, b in zip(edges[:-1], edges[1:], strict=True):
                ph = 0.5 * (a + b) + 0.5 * (b - a) * xg
                ha, _ = self.prox(at(ph), self.T(eta, n_a))
                total += wr * (self.integrand(at(ph), ha) * (dens(ph) * 0.5 * (b - a) * wg)[:, None]).sum(0)
        return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--etas", default="2.5,-2;3,0;1.5,-0.5;1,1")
    ap.add_argument("--settings", default="6/16/8,8/24/12,12/32/16")
    ap.add_argument("--finest", default="24/64/32")
    ap.add_argument("--outer", default="")
    a = ap.parse_args()
    P = Positional(a.alpha)
    fine = tuple(int(v) for v in a.finest.split("/"))
    for text in filter(None, a.etas.split(";")):
        e1, e2 = (float(v) for v in text.split(","))
        eta = (e1, e2)
        ref = P.polar(eta, *fine)
        scale = np.abs(ref).max()
        parts = []
        for st in a.settings.split(","):
            P.solves = 0
            val = P.polar(eta, *(int(v) for v in st.split("/")))
            parts.append(f"{st}: {P.solves} solves {np.abs(val - ref).max() / scale:.1e}")
        for log2n in (10, 12):
            err = [np.abs(P.qmc(eta, log2n, 10 + k) - ref).max() / scale for k in range(8)]
            parts.append(f"QMC 2^{log2n}: {np.sqrt(np.mean(np.square(err))):.1e}")
        print(f"eta {eta}: " + " | ".join(parts), flush=True)
    if a.outer:
        inner = tuple(int(v) for v in a.settings.split(",")[-1].split("/"))
        res = {}
        for ne in (int(v) for v in a.outer.split(",")):
            x, w = np.polynomial.hermite_e.hermegauss(ne)
            w = w / w.sum()
            P.solves = 0
            tot = np.zeros(4)
            for i in range(ne):
                for j in range(ne):  # (the integrand is even in eta: the half with eta_1 > 0)
                    if x[i] < 0 or (x[i] == 0 and x[j] < 0):
                        continue
                    f = 1.0 if x[i] == 0 and x[j] == 0 else 2.0
                    tot += f * w[i] * w[j] * P.polar((x[i], x[j]), *inner)
            res[ne] = tot
            print(f"outer Gauss-Hermite {ne} x {ne}: {P.solves} solves; E[g_1], E[g_2], E|g|^2, E[g.xi] = {tot}",
                  flush=True)
        last = max(res)
        for ne, v in res.items():
            if ne != last:
                print(f"  order {ne} against {last}: largest relative difference "
                      f"{np.abs(v - res[last]).max() / np.abs(res[last]).max():.1e}")


if __name__ == "__main__":
    main()
