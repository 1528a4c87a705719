"""Write the proximal kernel out for one attention geometry (``L``, ``F``, ``M``, mask) as
straight-line code on scalars.

The generic kernel (:mod:`attnphase.theory.channels`) loops over ``L`` and ``F`` at run time; for
the sizes of the model (``L * F <= 6``) the loop control costs more than the arithmetic. This
module runs the same algorithm (loss, gradient and Hessian of ``ell`` as in
``channels._loss_grad_hess``; damped Newton with the same shift rule, acceptance tests and snapping
as ``channels._newton``; the multi-start driver of ``channels._prox_kernel``) once in Python at
generation time, with the geometry known, and prints every scalar operation it would perform, with
the zeros of ``M``, the mask and the Kronecker deltas folded away. The printed modules are in this
package (``python -m attnphase.theory.unrolled.generate`` rewrites them; a test checks that they
are up to date and that each reaches the generic kernel's minima).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnphase.spec.problem import ModelSpec
from attnphase.theory.channels import AttentionMap

Val = str | float  # an emitted variable name or a constant folded at generation time


@dataclass(frozen=True)
class Geometry:
    """One attention geometry: ``L`` tokens and the student map of ``attnphase.theory.channels``
    (``F`` fields per token, scores ``h_l^T M h_j``, mask)."""

    name: str
    L: int
    amap: AttentionMap

    @property
    def F(self) -> int:
        return self.amap.field_dim

    @property
    def M(self) -> np.ndarray:
        return self.amap.M

    @property
    def mask(self) -> np.ndarray:
        return self.amap.mask

    @staticmethod
    def make(variant: str, L: int, rank: int) -> Geometry:
        amap = AttentionMap.from_spec(ModelSpec(L=L, rank=rank, variant=variant))
        return Geometry(f"{variant.replace('-', '_')}_L{L}_r{rank}", L, amap)


#: the geometries written out (module ``k_<name>``): the sizes of issue 5's variants
GEOMETRIES = tuple(
    [Geometry.make("tied", L, 1) for L in (2, 3, 4, 5)]
    + [Geometry.make("causal", L, 1) for L in (2, 3, 4, 5)]
    + [Geometry.make("tied", L, 2) for L in (2, 3)]
    + [Geometry.make("causal", 2, 2)]
    + [Geometry.make("untied", 2, 1), Geometry.make("untied-causal", 2, 1), Geometry.make("untied", 3, 1)]
)


class Emitter:
    """Straight-line code with constant folding (``0.0`` and ``1.0`` operands vanish)."""

    def __init__(self, indent: str = "    ", c: bool = False):
        self.lines: list[str] = []
        self.n = 0
        self.indent = indent
        #: emit C (``const double t = ...;``, ``exp``, ``fabs``, ``?:``) instead of Python for numba
        self.c = c

    def let(self, expr: str) -> str:
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{self.indent}const double {name} = {expr};" if self.c else f"{self.indent}{name} = {expr}")
        return name

    def exp(self, x: str) -> str:
        return f"exp({x})" if self.c else f"np.exp({x})"

    def fabs(self, x: str) -> str:
        return f"fabs({x})" if self.c else f"abs({x})"

    def select(self, a: Val, test: str, b: Val) -> str:
        """``a`` where ``test`` holds, else ``b``."""
        return f"({test}) ? {a} : {b}" if self.c else f"{a} if {test} else {b}"

    def maxof(self, items: list[Val]) -> str:
        """Python's ``max`` (the first of equal values; ``PYMAX`` in the C source)."""
        if not self.c:
            return "max(" + ", ".join(str(v) for v in items) + ")"
        out = str(items[0])
        for v in items[1:]:
            out = f"PYMAX({out}, {v})"
        return out

    def add(self, terms: list[Val]) -> Val:
        const = sum(t for t in terms if isinstance(t, float))
        names = [t for t in terms if isinstance(t, str)]
        if not names:
            return float(const)
        parts = names + ([repr(const)] if const != 0.0 else [])
        return parts[0] if len(parts) == 1 else self.let(" + ".join(parts))

    def mul(self, *factors: Val) -> Val:
        const = 1.0
        names = []
        for f in factors:
            if isinstance(f, float):
                const *= f
            else:
                names.append(f)
        if const == 0.0:
            return 0.0
        if not names:
            return const
        parts = ([repr(const)] if const != 1.0 else []) + [f"({n})" if n.startswith("-") else n for n in names]
        return parts[0] if len(parts) == 1 else self.let(" * ".join(parts))

    def sub(self, a: Val, b: Val) -> Val:
        if isinstance(b, float):
            return self.add([a, -b])
        if isinstance(a, float) and a == 0.0:
            return self.let(f"-{b}")
        return self.let(f"{a} - {b}")

    def sum_products(self, pairs: list[tuple[Val, ...]]) -> Val:
        return self.add([self.mul(*p) for p in pairs])


def _loss(g: Geometry, em: Emitter, want_hess: bool):
    """Emit ``ell``, its gradient and Hessian (``channels._loss_grad_hess``) on the inputs
    ``h<i>`` (flattened ``(l, a)``), ``T[l, j]`` and ``C[k, j]``; returns emitted values."""
    L, F = g.L, g.F
    M, mask = g.M, g.mask
    n = L * F
    h = [[f"h{l * F + a}" for a in range(F)] for l in range(L)]
    T = [[f"T[{l * L + j}]" for j in range(L)] for l in range(L)]
    C = [[f"C{min(k, j)}{max(k, j)}" for j in range(L)] for k in range(L)]
    Mh = [[em.sum_products([(float(M[a, b]), h[j][b]) for b in range(F)]) for a in range(F)] for j in range(L)]
    MTh = [[em.sum_products([(float(M[b, a]), h[j][b]) for b in range(F)]) for a in range(F)] for j in range(L)]
    P: list[list[Val]] = []
    for l in range(L):
        allowed = [j for j in range(L) if mask[l, j]]
        if len(allowed) == 1:
            P.append([1.0 if j == allowed[0] else 0.0 for j in range(L)])
            continue
        s = {j: em.sum_products([(h[l][a], Mh[j][a]) for a in range(F)]) for j in allowed}
        if len(allowed) == 2:
            # (two scores: the exponentials shifted by the larger are 1 and exp(-|s_0 - s_1|),
            # the same numbers as below with one call of exp instead of two)
            j0, j1 = allowed
            t = em.let(em.exp("-" + em.fabs(f"{s[j0]} - {s[j1]}")))
            ge = f"{s[j0]} >= {s[j1]}"
            e = {j0: em.let(em.select(1.0, ge, t)), j1: em.let(em.select(t, ge, 1.0))}
        else:
            mx = em.let(em.maxof([s[j] for j in allowed]))
            e = {j: em.let(em.exp(f"{s[j]} - {mx}")) for j in allowed}
        inv = em.let("1.0 / (" + " + ".join(e[j] for j in allowed) + ")")
        P.append([em.mul(e[j], inv) if j in e else 0.0 for j in range(L)])
    D = [[em.sub(P[l][j], T[l][j]) for j in range(L)] for l in range(L)]
    E = [[em.sum_products([(D[l][k], C[k][j]) for k in range(L)]) for j in range(L)] for l in range(L)]
    val = em.mul(0.5, em.sum_products([(D[l][j], E[l][j]) for l in range(L) for j in range(L)]))
    ep = [em.sum_products([(E[l][j], P[l][j]) for j in range(L)]) for l in range(L)]
    gam = [[em.mul(P[l][j], em.sub(E[l][j], ep[l])) if P[l][j] != 0.0 else 0.0 for j in range(L)] for l in range(L)]
    grad = [em.sum_products([(gam[a][j], Mh[j][mu]) for j in range(L)] + [(gam[j][a], MTh[j][mu]) for j in range(L)])
            for a in range(L) for mu in range(F)]
    if not want_hess:
        return val, grad, None
    terms: dict[tuple[int, int], list[Val]] = {(i, k): [] for i in range(n) for k in range(i, n)}
    for l in range(L):
        J = [[em.mul(P[l][a], em.sub(1.0 if a == j else 0.0, P[l][j])) if P[l][a] != 0.0 else 0.0
              for j in range(L)] for a in range(L)]
        CJ = [[em.sum_products([(C[a][b], J[b][k]) for b in range(L)]) for k in range(L)] for a in range(L)]
        Hs = [[None] * L for _ in range(L)]
        for j in range(L):
            for k in range(j, L):
                parts = [em.sum_products([(J[a][j], CJ[a][k]) for a in range(L)])]
                if j == k:
                    parts.append(gam[l][j])
                if P[l][j] != 0.0 and P[l][k] != 0.0:
                    ee = em.add([E[l][j], E[l][k], em.mul(-2.0, ep[l])])
                    parts.append(em.mul(-1.0, P[l][j], P[l][k], ee))
                Hs[j][k] = Hs[k][j] = em.add(parts)
        # Dl[j][i] = d s_lj / d h_i: delta_la (M h_j)_mu + delta_ja (M^T h_l)_mu at i = (a, mu)
        Dl = [[em.add(([Mh[j][i % F]] if i // F == l else []) + ([MTh[l][i % F]] if i // F == j else []))
               for i in range(n)] for j in range(L)]
        HD = [[em.sum_products([(Hs[j][k], Dl[k][i]) for k in range(L)]) for i in range(n)] for j in range(L)]
        for i in range(n):
            for k in range(i, n):
                terms[(i, k)].append(em.sum_products([(Dl[j][i], HD[j][k]) for j in range(L)]))
    for a in range(L):
        for b in range(L):
            for mu in range(F):
                for nu in range(F):
                    i, k = a * F + mu, b * F + nu
                    if i <= k:
                        terms[(i, k)] += [em.mul(gam[a][b], float(M[mu, nu])), em.mul(gam[b][a], float(M[nu, mu]))]
    hess = {ik: em.add(t) for ik, t in terms.items()}
    return val, grad, hess


def _objective(g: Geometry, want_hess: bool) -> list[str]:
    """``def _objective(h, w, W, T, C)``: the proximal objective (and gradient, Hessian)."""
    n = g.L * g.F
    em = Emitter()
    hs = ", ".join(f"h{i}" for i in range(n))
    em.lines.append(f"    {hs} = h")
    em.lines.append("    " + "; ".join(f"C{k}{j} = C[{k * g.L + j}]" for k in range(g.L) for j in range(k, g.L)))
    val, grad, hess = _loss(g, em, want_hess)
    q = [em.let(f"h{i} - w[{i}]") for i in range(n)]
    Wq = [em.sum_products([(f"W[{min(i, k) * n + max(i, k)}]", q[k]) for k in range(n)]) for i in range(n)]
    val = em.add([val, em.mul(0.5, em.sum_products([(q[i], Wq[i]) for i in range(n)]))])
    name = "_objective" if want_hess else "_value"
    head = ["@nb.njit(cache=True, inline=\"always\")", f"def {name}(h, w, W, T, C):  # pragma: no cover - jitted"]
    if not want_hess:
        return head + em.lines + [f"    return {val}"]
    grad = [em.add([grad[i], Wq[i]]) for i in range(n)]
    H = [em.add([hess[(i, k)], f"W[{i * n + k}]"]) for i in range(n) for k in range(i, n)]
    return head + em.lines + ["    return " + ", ".join(str(v) for v in [val, *grad, *H])]


def _tri(i: int, k: int, n: int) -> int:
    """Index of ``(i, k)``, ``i <= k``, in the row-major upper triangle of an n x n matrix."""
    return i * n - i * (i - 1) // 2 + (k - i)


def _cholesky(n: int, H: Callable[[int, int], str], c: bool) -> list[str]:
    """Cholesky of ``hess + shift I`` unrolled (the generic kernel's order of operations), nested
    so that it stops at the first pivot <= 1e-14 and sets ``ok`` otherwise; ``H(k, i)`` names the
    Hessian entry ``k <= i``; in C (``c``) or Python."""
    end = ";" if c else ""
    lines: list[str] = []
    depth = 0
    for i in range(n):
        for k in range(i + 1):
            s = H(k, i) + (" + shift" if i == k else "")
            s += "".join(f" - L{i}_{p} * L{k}_{p}" for p in range(k))
            pad = "    " * depth
            if i == k:
                lines += [f"{pad}{'const double ' if c else ''}s{i} = {s}{end}",
                          f"{pad}if (s{i} > 1e-14) {{" if c else f"{pad}if s{i} > 1e-14:"]
                depth += 1
                lines += [f"{'    ' * depth}L{i}_{i} = {'sqrt' if c else 'np.sqrt'}(s{i}){end}"]
            else:
                lines += [f"{pad}L{i}_{k} = ({s}) / L{k}_{k}{end}"]
    lines += ["    " * depth + ("ok = 1;" if c else "ok = True")]
    if c:
        lines += ["    " * d + "}" for d in range(depth - 1, -1, -1)]
    return lines


def _newton_step(n: int, g: Callable[[int], str], c: bool) -> list[str]:
    """The damped Newton step ``s_ = -(L L^T)^{-1} g`` by forward then back substitution with the
    factor of :func:`_cholesky` (``y<i>``, then ``s<i>_``); ``g(i)`` names the gradient entry; in C
    (``c``) or Python."""
    decl, end = ("const double ", ";") if c else ("", "")
    lines = []
    for i in range(n):
        s = f"-{g(i)}" + "".join(f" - L{i}_{p} * y{p}" for p in range(i))
        lines.append(f"{decl}y{i} = ({s}) / L{i}_{i}{end}")
    for i in range(n - 1, -1, -1):
        s = f"y{i}" + "".join(f" - L{p}_{i} * s{p}_" for p in range(i + 1, n))
        lines.append(f"{decl}s{i}_ = ({s}) / L{i}_{i}{end}")
    return lines


def _newton(g: Geometry) -> list[str]:
    """``def _newton(h, w, W, T, C, ...)``: ``channels._newton`` on tuples of scalars."""
    n = g.L * g.F
    G = [f"g{i}" for i in range(n)]
    H = [f"H{i}_{k}" for i in range(n) for k in range(i, n)]
    unpack = ", ".join(["val", *G, *H])
    out = [
        "@nb.njit(cache=True)",
        "def _newton(h, w, W, T, C, max_iter, gtol, known, known_val, known_gn, n_known, snap):  # pragma: no cover",
        f"    {unpack} = _objective(h, w, W, T, C)",
        "    shift = 0.0",
        "    trial = h",
        "    " + "; ".join(f"L{i}_{k} = 1.0" for i in range(n) for k in range(i + 1)),
        "    for _ in range(max_iter):",
        "        gn = max(" + ", ".join(f"abs({x})" for x in G) + ")",
        "        hn = max(1.0, " + ", ".join(f"abs(h[{i}])" for i in range(n)) + ")",
        "        if gn < gtol:",
        "            break",
        "        accepted = False",
        "        for _try in range(40):",
        "            ok = False",
    ]
    out += ["            " + ln for ln in _cholesky(n, lambda k, i: f"H{k}_{i}", c=False)]
    out += [
        "            if not ok:",
        "                shift = max(2.0 * shift, 1e-3)",
        "                continue",
    ]
    out += ["            " + ln for ln in _newton_step(n, lambda i: f"g{i}", c=False)]
    steps = [f"s{i}_" for i in range(n)]
    out += [
        "            sn = max(" + ", ".join(f"abs({s})" for s in steps) + ")",
        "            if shift == 0.0 and sn < 1e-13 * hn:",
        "                break",
        "            trial = (" + ", ".join(f"h[{i}] + {steps[i]}" for i in range(n)) + ")",
        "            tval = _value(trial, w, W, T, C)",
        "            pred = " + " + ".join(f"g{i} * {steps[i]}" for i in range(n)),
        "            if tval <= val + 1e-4 * pred or (shift == 0.0 and sn < 1e-8 * hn):",
        "                accepted = True",
        "                break",
        "            if -pred <= 1e-14 * abs(val) and gn < 1e-9:",
        "                break",
        "            shift = max(4.0 * shift, 1e-3)",
        "        if not accepted:",
        "            break",
        "        h = trial",
        "        if shift == 0.0:",
        "            for k in range(n_known):",
        "                d = max(" + ", ".join(f"abs(h[{i}] - known[k, {i}])" for i in range(n))
        + ")",
        "                if d < snap:",
        "                    return known_val[k], known_gn[k], (" + ", ".join(f"known[k, {i}]" for i in range(n))
        + ")",
        f"        {unpack} = _objective(h, w, W, T, C)",
        "        shift = shift * 0.25 if shift > 1e-6 else 0.0",
        "    return val, max(" + ", ".join(f"abs({x})" for x in G) + "), h",
    ]
    return out


def _kernel(g: Geometry) -> list[str]:
    n = g.L * g.F
    tup = ", ".join(f"starts[i, s, {i}]" for i in range(n))
    return [
        "@nb.njit(cache=True, parallel=True)",
        "def prox_kernel(w, T, starts, W, C, max_iter, gtol, out_h, out_val, out_gn, cand_h, cand_val, n_chunks,",
        "                snap):  # pragma: no cover - jitted",
        "    \"\"\"``channels._prox_kernel`` for this geometry (fields flattened: ``w`` (N, n), ``starts``",
        "    (N, S, n), ``out_h`` (N, n), ``cand_h`` (N, S, n)).\"\"\"",
        "    N = w.shape[0]",
        "    S = starts.shape[1]",
        "    size = (N + n_chunks - 1) // n_chunks",
        # (the metric, token covariance, prior mean and target as tuples of scalars: loaded once)
        "    Wt = (" + ", ".join(f"0.5 * (W[{i}, {k}] + W[{k}, {i}])" for i in range(n) for k in range(n)) + ")",
        "    Ct = (" + ", ".join(f"0.5 * (C[{i}, {k}] + C[{k}, {i}])" for i in range(g.L) for k in range(g.L)) + ")",
        "    for c in nb.prange(n_chunks):",
        "        cand_gn = np.zeros(S)",
        "        for i in range(c * size, min(N, (c + 1) * size)):",
        "            best = 1e300",
        "            wi = (" + ", ".join(f"w[i, {k}]" for k in range(n)) + ")",
        "            Ti = (" + ", ".join(f"T[i, {l}, {j}]" for l in range(g.L) for j in range(g.L)) + ")",
        "            for s in range(S):",
        f"                val, gn, h = _newton(({tup}), wi, Wt, Ti, Ct, max_iter, gtol, cand_h[i], cand_val[i],",
        "                                     cand_gn, s, snap)",
        "                cand_gn[s] = gn",
        *[f"                cand_h[i, s, {k}] = h[{k}]" for k in range(n)],
        "                cand_val[i, s] = val",
        "                if val < best:",
        "                    best = val",
        *[f"                    out_h[i, {k}] = h[{k}]" for k in range(n)],
        "                    out_val[i] = val",
        "                    out_gn[i] = gn",
    ]


def _c_objective(g: Geometry, want_hess: bool) -> list[str]:
    """C twin of :func:`_objective`: ``value`` returns ``M(h)``; ``objective`` also writes the
    gradient ``g[n]`` and the upper triangle of the Hessian ``H`` (row-major, ``_tri``)."""
    n = g.L * g.F
    em = Emitter(c=True)
    em.lines.append("    " + " ".join(f"const double h{i} = h[{i}];" for i in range(n)))
    em.lines.append("    " + " ".join(f"const double C{k}{j} = C[{k * g.L + j}];" for k in range(g.L)
                                      for j in range(k, g.L)))
    val, grad, hess = _loss(g, em, want_hess)
    q = [em.let(f"h{i} - w[{i}]") for i in range(n)]
    Wq = [em.sum_products([(f"W[{min(i, k) * n + max(i, k)}]", q[k]) for k in range(n)]) for i in range(n)]
    val = em.add([val, em.mul(0.5, em.sum_products([(q[i], Wq[i]) for i in range(n)]))])
    args = ("const double *restrict h, const double *restrict w, const double *restrict W, "
            "const double *restrict T, const double *restrict C")
    if not want_hess:
        return [f"static inline __attribute__((always_inline)) double value({args})", "{"] + em.lines + [f"    return {val};", "}"]
    grad = [em.add([grad[i], Wq[i]]) for i in range(n)]
    H = [em.add([hess[(i, k)], f"W[{i * n + k}]"]) for i in range(n) for k in range(i, n)]
    out = [f"    g[{i}] = {v};" for i, v in enumerate(grad)] + [f"    H[{j}] = {v};" for j, v in enumerate(H)]
    return ([f"static inline __attribute__((always_inline)) double objective({args}, double *restrict g, double *restrict H)", "{"] + em.lines + out
            + [f"    return {val};", "}"])


def _c_max(items: list[str]) -> str:
    out = items[0]
    for v in items[1:]:
        out = f"PYMAX({out}, {v})"
    return out


def _c_newton(g: Geometry) -> list[str]:
    """C twin of :func:`_newton` (the same operations in the same order): the start ``h`` is
    overwritten by the minimum reached, its value and gradient max-norm go to ``*val``, ``*gn``."""
    n = g.L * g.F
    tri = {(i, k): _tri(i, k, n) for i in range(n) for k in range(i, n)}
    gn = _c_max([f"fabs(g[{i}])" for i in range(n)])
    out = [
        "static inline void newton(double *restrict h_io, const double *restrict w, const double *restrict W,",
        "                          const double *restrict T, const double *restrict C, int max_iter, double gtol,",
        "                          const double *restrict known, const double *restrict known_val,",
        "                          const double *restrict known_gn, int n_known, double snap,",
        "                          double *restrict val_out, double *restrict gn_out)",
        "{",
        f"    double g[{n}], H[{len(tri)}], trial[{n}], h[{n}];",
        f"    for (int i = 0; i < {n}; i++) h[i] = h_io[i];",
        "    double val = objective(h, w, W, T, C, g, H);",
        "    double shift = 0.0;",
        f"    for (int i = 0; i < {n}; i++) trial[i] = h[i];",
        "    " + " ".join(f"double L{i}_{k} = 1.0;" for i in range(n) for k in range(i + 1)),
        "    for (int it = 0; it < max_iter; it++) {",
        f"        const double gn = {gn};",
        "        const double hn = " + _c_max(["1.0"] + [f"fabs(h[{i}])" for i in range(n)]) + ";",
        "        if (gn < gtol) break;",
        "        int accepted = 0;",
        "        for (int tr = 0; tr < 40; tr++) {",
        "            int ok = 0;",
    ]
    out += ["            " + ln for ln in _cholesky(n, lambda k, i: f"H[{tri[(k, i)]}]", c=True)]
    out += ["            if (!ok) {", "                shift = PYMAX(2.0 * shift, 1e-3);", "                continue;",
            "            }"]
    out += ["            " + ln for ln in _newton_step(n, lambda i: f"g[{i}]", c=True)]
    out += [
        "            const double sn = " + _c_max([f"fabs(s{i}_)" for i in range(n)]) + ";",
        "            if (shift == 0.0 && sn < 1e-13 * hn) break;",
        *[f"            trial[{i}] = h[{i}] + s{i}_;" for i in range(n)],
        "            const double tval = value(trial, w, W, T, C);",
        "            const double pred = " + " + ".join(f"g[{i}] * s{i}_" for i in range(n)) + ";",
        "            if (tval <= val + 1e-4 * pred || (shift == 0.0 && sn < 1e-8 * hn)) {",
        "                accepted = 1;",
        "                break;",
        "            }",
        "            if (-pred <= 1e-14 * fabs(val) && gn < 1e-9) break;",
        "            shift = PYMAX(4.0 * shift, 1e-3);",
        "        }",
        "        if (!accepted) break;",
        f"        for (int i = 0; i < {n}; i++) h[i] = trial[i];",
        "        if (shift == 0.0) {",
        "            for (int k = 0; k < n_known; k++) {",
        "                const double d = " + _c_max([f"fabs(h[{i}] - known[k * {n} + {i}])" for i in range(n)]) + ";",
        "                if (d < snap) {",
        f"                    for (int i = 0; i < {n}; i++) h_io[i] = known[k * {n} + i];",
        "                    *val_out = known_val[k];",
        "                    *gn_out = known_gn[k];",
        "                    return;",
        "                }",
        "            }",
        "        }",
        "        val = objective(h, w, W, T, C, g, H);",
        "        shift = shift > 1e-6 ? shift * 0.25 : 0.0;",
        "    }",
        f"    for (int i = 0; i < {n}; i++) h_io[i] = h[i];",
        "    *val_out = val;",
        f"    *gn_out = {gn};",
        "}",
    ]
    return out


def _c_kernel(g: Geometry) -> list[str]:
    n, L = g.L * g.F, g.L
    return [
        "void prox_kernel(long N, long S, const double *w, const double *T, const double *starts, const double *W,",
        "                 const double *C, int max_iter, double gtol, double *out_h, double *out_val, double *out_gn,",
        "                 double *cand_h, double *cand_val, long n_chunks, double snap, int n_threads)",
        "{",
        f"    double Wt[{n * n}], Ct[{L * L}];",
        f"    for (int i = 0; i < {n}; i++)",
        f"        for (int k = 0; k < {n}; k++) Wt[i * {n} + k] = 0.5 * (W[i * {n} + k] + W[k * {n} + i]);",
        f"    for (int i = 0; i < {L}; i++)",
        f"        for (int k = 0; k < {L}; k++) Ct[i * {L} + k] = 0.5 * (C[i * {L} + k] + C[k * {L} + i]);",
        "    const long size = (N + n_chunks - 1) / n_chunks;",
        "    #pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)",
        "    for (long c = 0; c < n_chunks; c++) {",
        "        double *cand_gn = (double *)calloc((size_t)(S > 0 ? S : 1), sizeof(double));",
        "        const long end = (c + 1) * size < N ? (c + 1) * size : N;",
        "        for (long i = c * size; i < end; i++) {",
        "            double best = 1e300;",
        f"            double wi[{n}], Ti[{L * L}];",
        f"            for (int k = 0; k < {n}; k++) wi[k] = w[i * {n} + k];",
        f"            for (int k = 0; k < {L * L}; k++) Ti[k] = T[i * {L * L} + k];",
        "            for (long s = 0; s < S; s++) {",
        f"                double h[{n}], val, gn;",
        f"                for (int k = 0; k < {n}; k++) h[k] = starts[(i * S + s) * {n} + k];",
        f"                newton(h, wi, Wt, Ti, Ct, max_iter, gtol, cand_h + i * S * {n},",
        "                       cand_val + i * S, cand_gn, (int)s, snap, &val, &gn);",
        "                cand_gn[s] = gn;",
        f"                for (int k = 0; k < {n}; k++) cand_h[(i * S + s) * {n} + k] = h[k];",
        "                cand_val[i * S + s] = val;",
        "                if (val < best) {",
        "                    best = val;",
        f"                    for (int k = 0; k < {n}; k++) out_h[i * {n} + k] = h[k];",
        "                    out_val[i] = val;",
        "                    out_gn[i] = gn;",
        "                }",
        "            }",
        "        }",
        "        free(cand_gn);",
        "    }",
        "}",
    ]


def c_source(g: Geometry) -> str:
    """The proximal kernel of ``g`` in C (:mod:`attnphase.theory.native` compiles it on first use):
    the same iteration as the numba module, operation for operation."""
    head = [
        f"/* Proximal kernel for the {g.name} geometry (L = {g.L}, F = {g.F}); written by",
        "   attnphase.theory.unrolled.generate.c_source, compiled by attnphase.theory.native. */",
        "#include <math.h>",
        "#include <stdlib.h>",
        "#define PYMAX(a, b) ((b) > (a) ? (b) : (a))",
        "",
    ]
    body: list[str] = []
    for p in (_c_objective(g, False), _c_objective(g, True), _c_newton(g), _c_kernel(g)):
        body += p + [""]
    return "\n".join(head + body)


def module_source(g: Geometry) -> str:
    """The generated module for ``g``."""
    head = [
        f'"""Proximal kernel written out for the {g.name} geometry (L = {g.L}, F = {g.F}, M = {g.M.tolist()},',
        f"mask = {[[int(v) for v in row] for row in g.mask]}).",
        "",
        "Generated by ``python -m attnphase.theory.unrolled.generate``: do not edit.",
        '"""',
        "# ruff: noqa",
        "import numba as nb",
        "import numpy as np",
        "",
        "",
    ]
    parts = [_objective(g, False), _objective(g, True), _newton(g), _kernel(g)]
    body = []
    for p in parts:
        body += p + ["", ""]
    return "\n".join(head + body).rstrip() + "\n"


def module_path(g: Geometry) -> Path:
    return Path(__file__).with_name(f"k_{g.name}.py")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated module is out of date")
    a = ap.parse_args(argv)
    stale = []
    for g in GEOMETRIES:
        src = module_source(g)
        path = module_path(g)
        if a.check:
            if not path.exists() or path.read_text() != src:
                stale.append(path.name)
        else:
            path.write_text(src)
    if stale:
        raise SystemExit(f"out of date: {', '.join(stale)}")


if __name__ == "__main__":
    main()
