"""Write the proximal kernel (docs/model.md (3.2)) out for one attention geometry as straight-line C.

The generic kernel (:func:`attnphase.theory.jit.prox_kernel`) loops over ``L`` and ``F`` at run
time; for the sizes of the model (``L * F <= 6``) the loop control costs more than the
arithmetic. This module runs the same algorithm (loss, gradient and Hessian of ``ell`` as in
``jit._loss_grad_hess``; damped Newton with the same shift rule, acceptance tests and snapping as
``jit._newton``; the multi-start driver of ``jit.prox_kernel``) once in Python, with the geometry
known, and prints every scalar operation it would perform as C, with the zeros of ``M``, the mask
and the Kronecker deltas folded away.

:func:`c_source` is what :mod:`attnphase.theory.native` compiles on first use into the cache
folder (one library per geometry of :data:`attnphase.theory.geometries.GEOMETRIES` and
:data:`attnphase.theory.geometries.HEAD_GEOMETRIES`, whose loss is :func:`_heads_loss`). Nothing it
writes is kept in the repository. To read the source of a geometry::

    python -m attnphase.theory.native                 # the geometries' names
    python -m attnphase.theory.native tied_L2_r1      # its C source on stdout
    python -m attnphase.theory.native --out DIR       # every geometry's source into DIR/<name>.c
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from attnphase.theory.geometries import GEOMETRIES, HEAD_GEOMETRIES, Geometry
from attnphase.theory.native.orbit import c_orbit

Val = str | float  # an emitted variable name or a constant folded at generation time


class Emitter:
    """Straight-line C with constant folding (``0.0`` and ``1.0`` operands vanish)."""

    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.n = 0
        self.indent = indent

    def let(self, expr: str) -> str:
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{self.indent}const double {name} = {expr};")
        return name

    @staticmethod
    def exp(x: str) -> str:
        return f"exp({x})"

    @staticmethod
    def fabs(x: str) -> str:
        return f"fabs({x})"

    @staticmethod
    def select(a: Val, test: str, b: Val) -> str:
        """``a`` where ``test`` holds, else ``b``."""
        return f"({test}) ? {a} : {b}"

    @staticmethod
    def maxof(items: Sequence[Val]) -> str:
        """Python's ``max`` (the first of equal values; ``PYMAX`` in the C source)."""
        out = str(items[0])
        for v in items[1:]:
            out = f"PYMAX({out}, {v})"
        return out

    def add(self, terms: Sequence[Val]) -> Val:
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

    def sum_products(self, pairs: Sequence[tuple[Val, ...]]) -> Val:
        return self.add([self.mul(*p) for p in pairs])


def fixed_target(g: Geometry, l: int, j: int) -> Val:
    """The target entry ``T[l, j]`` of a cross-attention geometry (``g.keys`` key tokens, docs/model.md
    (10.2)): the constant of the target's fixed blocks (a key row is ``e_l``, a query row is zero on
    the query columns), folded into the kernel like the mask; the name of the input entry on the
    query rows' key block. The fixed entries make ``S - T`` vanish on every row but the queries'
    key block, so the kernel computes the loss of that ``L x L'`` block only (the same numbers: the
    generic kernel adds those rows' exact zeros). :func:`attnphase.theory.channels.prox_batch` runs
    it only on targets with these blocks (:func:`attnphase.theory.channels.cross_target_map`)."""
    queries = g.L - g.keys
    if l >= queries:
        return 1.0 if j == l else 0.0
    return 0.0 if j < queries else f"T[{l * g.L + j}]"


def _softmax_row(em: Emitter, L: int, allowed: list[int], score: Callable[[int], Val],
                 reciprocal: bool) -> list[Val]:
    """One row of the row softmax over the ``allowed`` columns (the others 0) of the scores
    ``score(j)``, emitted in the order of the generic kernels: the exponentials shifted by the
    largest score, then each divided by their sum, or with ``reciprocal`` multiplied by its
    reciprocal (``jit._student_rows``: the one-head student; ``jit_maps.phi_row`` divides)."""
    if len(allowed) == 1:
        return [1.0 if j == allowed[0] else 0.0 for j in range(L)]
    s = {j: score(j) for j in allowed}
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
    if reciprocal:
        inv = em.let("1.0 / (" + " + ".join(e[j] for j in allowed) + ")")
        return [em.mul(e[j], inv) if j in e else 0.0 for j in range(L)]
    tot = em.let(" + ".join(e[j] for j in allowed))
    return [em.let(f"{e[j]} / {tot}") if j in e else 0.0 for j in range(L)]


def _quadratic_loss(em: Emitter, S: Sequence[Sequence[Val]], T: Sequence[Sequence[Val]],
                    C: Sequence[Sequence[Val]], L: int) -> tuple[list[list[Val]], Val]:
    """``E = (S - T) C`` and ``ell = sum (S - T) E / 2`` (docs/model.md (1.4)) of the student map
    ``S``, in the order of the generic kernels."""
    D = [[em.sub(S[l][j], T[l][j]) for j in range(L)] for l in range(L)]
    E = [[em.sum_products([(D[l][k], C[k][j]) for k in range(L)]) for j in range(L)] for l in range(L)]
    return E, em.mul(0.5, em.sum_products([(D[l][j], E[l][j]) for l in range(L) for j in range(L)]))


def _loss(g: Geometry, em: Emitter, want_hess: bool) -> tuple[Val, list[Val], dict[tuple[int, int], Val] | None]:
    """Emit ``ell`` (docs/model.md (1.4)), its gradient and Hessian (``jit._loss_grad_hess``) on the
    inputs ``h<i>`` (flattened ``(l, a)``), ``T[l, j]`` and ``C[k, j]``; returns emitted values."""
    L, F = g.L, g.field_dim
    M, mask = g.M, g.mask
    n = L * F
    h = [[f"h{l * F + a}" for a in range(F)] for l in range(L)]
    T = [[fixed_target(g, l, j) if g.keys else f"T[{l * L + j}]" for j in range(L)] for l in range(L)]
    C = [[f"C{min(k, j)}{max(k, j)}" for j in range(L)] for k in range(L)]
    Mh = [[em.sum_products([(float(M[a, b]), h[j][b]) for b in range(F)]) for a in range(F)] for j in range(L)]
    MTh = [[em.sum_products([(float(M[b, a]), h[j][b]) for b in range(F)]) for a in range(F)] for j in range(L)]
    def row(l: int) -> list[Val]:
        return _softmax_row(em, L, [j for j in range(L) if mask[l, j]],
                            lambda j: em.sum_products([(h[l][a], Mh[j][a]) for a in range(F)]), reciprocal=True)

    P = [row(l) for l in range(L)]
    E, val = _quadratic_loss(em, P, T, C, L)
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
        Hs: list[list[Val]] = [[0.0] * L for _ in range(L)]
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


def _heads_loss(g: Geometry, em: Emitter, want_hess: bool) -> tuple[Val, list[Val], dict[tuple[int, int], Val] | None]:
    """Emit ``ell`` (docs/model.md (11.3)) of ``g.heads`` softmax heads of rank 1 with the gains
    ``v0 .. v{heads-1}`` (read at run time, :func:`_objective`; ``M_k = e_k e_k^T``), its gradient
    and Hessian: the operations of
    ``jit_maps.heads_loss_grad_hess`` in its order (each head's row divided by its sum; a gradient
    term and a second-order term of the scores added as the pair ``gamma^k_ab M_k + gamma^k_ba M_k^T``),
    the zeros of the forms and the mask folded away; the inputs as in :func:`_loss`."""
    L, F, K = g.L, g.field_dim, g.heads
    mask, v = g.mask, [f"v{k}" for k in range(g.heads)]
    n = L * F
    h = [[f"h{l * F + a}" for a in range(F)] for l in range(L)]
    T = [[f"T[{l * L + j}]" for j in range(L)] for l in range(L)]
    C = [[f"C{min(k, j)}{max(k, j)}" for j in range(L)] for k in range(L)]
    # M_k h_j = M_k^T h_j = h_jk e_k: the only nonzero entry of head k's form applied to a field
    Mh = [[[h[j][k] if a == k else 0.0 for a in range(F)] for j in range(L)] for k in range(K)]
    # P[k][l][j]: head k's map (each row divided by its sum, as the generic heads kernel does)
    def row(k: int, l: int) -> list[Val]:
        return _softmax_row(em, L, [j for j in range(L) if mask[l, j]], lambda j: em.mul(h[l][k], h[j][k]),
                            reciprocal=False)

    P = [[row(k, l) for l in range(L)] for k in range(K)]
    S = [[em.add([em.mul(v[k], P[k][l][j]) for k in range(K)]) for j in range(L)] for l in range(L)]
    E, val = _quadratic_loss(em, S, T, C, L)
    ep = [[em.sum_products([(E[l][j], P[k][l][j]) for j in range(L)]) for l in range(L)] for k in range(K)]
    gam = [[[em.mul(v[k], P[k][l][j], em.sub(E[l][j], ep[k][l])) if P[k][l][j] != 0.0 else 0.0 for j in range(L)]
            for l in range(L)] for k in range(K)]
    grad = [em.add([em.add([em.mul(gam[k][a][j], Mh[k][j][mu]), em.mul(gam[k][j][a], Mh[k][j][mu])])
                    for k in range(K) for j in range(L)]) for a in range(L) for mu in range(F)]
    if not want_hess:
        return val, grad, None
    KL = K * L
    terms: dict[tuple[int, int], list[Val]] = {(i, c): [] for i in range(n) for c in range(i, n)}
    for l in range(L):
        J = [[[em.mul(v[k], P[k][l][a], em.sub(1.0 if a == j else 0.0, P[k][l][j])) if P[k][l][a] != 0.0 else 0.0
               for j in range(L)] for a in range(L)] for k in range(K)]
        CJ = [[[em.sum_products([(C[a][b], J[k][b][j]) for b in range(L)]) for j in range(L)] for a in range(L)]
              for k in range(K)]
        Hk: list[list[Val]] = [[0.0] * KL for _ in range(KL)]
        for k in range(K):
            for j in range(L):
                for m in range(K):
                    for i in range(L):
                        parts = [em.sum_products([(J[k][a][j], CJ[m][a][i]) for a in range(L)])]
                        if k == m:
                            if i == j:
                                parts.append(gam[k][l][j])
                            if P[k][l][j] != 0.0 and P[k][l][i] != 0.0:
                                ee = em.add([E[l][j], E[l][i], em.mul(-2.0, ep[k][l])])
                                parts.append(em.mul(-1.0, v[k], P[k][l][j], P[k][l][i], ee))
                        Hk[k * L + j][m * L + i] = em.add(parts)
        # Dk[(k, j)][(a, mu)] = d s^k_lj / d h_a,mu = delta_la (M_k h_j)_mu + delta_ja (M_k^T h_l)_mu
        Dk = [[em.add(([Mh[k][j][i % F]] if i // F == l else []) + ([Mh[k][l][i % F]] if i // F == j else []))
               for i in range(n)] for k in range(K) for j in range(L)]
        HD = [[em.sum_products([(Hk[r][c], Dk[c][i]) for c in range(KL)]) for i in range(n)] for r in range(KL)]
        for i in range(n):
            for c in range(i, n):
                terms[(i, c)].append(em.sum_products([(Dk[r][i], HD[r][c]) for r in range(KL)]))
    for k in range(K):
        for a in range(L):
            for b in range(L):
                for mu in range(F):
                    for nu in range(F):
                        i, c = a * F + mu, b * F + nu
                        if i <= c and mu == k and nu == k:
                            terms[(i, c)].append(em.add([gam[k][a][b], gam[k][b][a]]))
    hess = {ic: em.add(t) for ic, t in terms.items()}
    return val, grad, hess


def _tri(i: int, k: int, n: int) -> int:
    """Index of ``(i, k)``, ``i <= k``, in the row-major upper triangle of an n x n matrix."""
    return i * n - i * (i - 1) // 2 + (k - i)


def _objective(g: Geometry, want_hess: bool) -> list[str]:
    """The proximal objective of docs/model.md (3.2): ``value`` returns ``M(h)``; ``objective``
    also writes the gradient ``g[n]`` and the upper triangle of the Hessian ``H`` (row-major,
    :func:`_tri`)."""
    n = g.L * g.field_dim
    em = Emitter()
    em.lines.append("    " + " ".join(f"const double h{i} = h[{i}];" for i in range(n)))
    em.lines.append("    " + " ".join(f"const double C{k}{j} = C[{k * g.L + j}];" for k in range(g.L)
                                      for j in range(k, g.L)))
    if g.heads > 1:  # (the heads' gains follow the token covariance: channels.c_covariance)
        em.lines.append("    " + " ".join(f"const double v{k} = C[{g.L * g.L + k}];" for k in range(g.heads)))
    val, grad, hess = (_heads_loss if g.heads > 1 else _loss)(g, em, want_hess)
    q = [em.let(f"h{i} - w[{i}]") for i in range(n)]
    Wq = [em.sum_products([(f"W[{min(i, k) * n + max(i, k)}]", q[k]) for k in range(n)]) for i in range(n)]
    val = em.add([val, em.mul(0.5, em.sum_products([(q[i], Wq[i]) for i in range(n)]))])
    args = ("const double *restrict h, const double *restrict w, const double *restrict W, "
            "const double *restrict T, const double *restrict C")
    if hess is None:
        return [f"static inline __attribute__((always_inline)) double value({args})", "{"] + em.lines + [f"    return {val};", "}"]
    grad = [em.add([grad[i], Wq[i]]) for i in range(n)]
    H = [em.add([hess[(i, k)], f"W[{i * n + k}]"]) for i in range(n) for k in range(i, n)]
    out = [f"    g[{i}] = {v};" for i, v in enumerate(grad)] + [f"    H[{j}] = {v};" for j, v in enumerate(H)]
    return ([f"static inline __attribute__((always_inline)) double objective({args}, double *restrict g, double *restrict H)", "{"] + em.lines + out
            + [f"    return {val};", "}"])


def _cholesky(n: int, H: Callable[[int, int], str]) -> list[str]:
    """Cholesky of ``hess + shift I`` written out (the generic kernel's order of operations), nested
    so that it stops at the first pivot <= 1e-14 and sets ``ok`` otherwise; ``H(k, i)`` names the
    Hessian entry ``k <= i``."""
    lines: list[str] = []
    depth = 0
    for i in range(n):
        for k in range(i + 1):
            s = H(k, i) + (" + shift" if i == k else "")
            s += "".join(f" - L{i}_{p} * L{k}_{p}" for p in range(k))
            pad = "    " * depth
            if i == k:
                lines += [f"{pad}const double s{i} = {s};", f"{pad}if (s{i} > 1e-14) {{"]
                depth += 1
                lines += [f"{'    ' * depth}L{i}_{i} = sqrt(s{i});"]
            else:
                lines += [f"{pad}L{i}_{k} = ({s}) / L{k}_{k};"]
    lines += ["    " * depth + "ok = 1;"]
    lines += ["    " * d + "}" for d in range(depth - 1, -1, -1)]
    return lines


def _newton_step(n: int, g: Callable[[int], str]) -> list[str]:
    """The damped Newton step ``s_ = -(L L^T)^{-1} g`` by forward then back substitution with the
    factor of :func:`_cholesky` (``y<i>``, then ``s<i>_``); ``g(i)`` names the gradient entry."""
    lines = []
    for i in range(n):
        s = f"-{g(i)}" + "".join(f" - L{i}_{p} * y{p}" for p in range(i))
        lines.append(f"const double y{i} = ({s}) / L{i}_{i};")
    for i in range(n - 1, -1, -1):
        s = f"y{i}" + "".join(f" - L{p}_{i} * s{p}_" for p in range(i + 1, n))
        lines.append(f"const double s{i}_ = ({s}) / L{i}_{i};")
    return lines


def _newton(g: Geometry) -> list[str]:
    """``jit._newton`` for this geometry (the same operations in the same order): the start ``h``
    is overwritten by the minimum reached, its value and gradient max-norm go to ``*val``,
    ``*gn``."""
    n = g.L * g.field_dim
    tri = {(i, k): _tri(i, k, n) for i in range(n) for k in range(i, n)}
    gn = Emitter.maxof([f"fabs(g[{i}])" for i in range(n)])
    out = [
        "static inline void newton(double *restrict h_io, const double *restrict w, const double *restrict W,",
        "                          const double *restrict T, const double *restrict C, int max_iter, double gtol,",
        "                          const double *restrict known, const double *restrict known_val,",
        "                          const double *restrict known_gn, int n_known, double snap, int follow,",
        "                          double *restrict val_out, double *restrict gn_out)",
        "{",
        f"    double g[{n}], H[{len(tri)}], trial[{n}], h[{n}];",
        f"    for (int i = 0; i < {n}; i++) h[i] = h_io[i];",
        *(["    if (follow) orbit(h, w, W, trial);"] if g.orbit else []),
        f"    for (int i = 0; i < {n}; i++) trial[i] = h[i];",
        "    double val = objective(h, w, W, T, C, g, H);",
        "    double shift = 0.0;",
        "    " + " ".join(f"double L{i}_{k} = 1.0;" for i in range(n) for k in range(i + 1)),
        "    for (int it = 0; it < max_iter; it++) {",
        f"        const double gn = {gn};",
        "        const double hn = " + Emitter.maxof(["1.0"] + [f"fabs(h[{i}])" for i in range(n)]) + ";",
        "        if (gn < gtol) break;",
        "        int accepted = 0;",
        "        for (int tr = 0; tr < 40; tr++) {",
        "            int ok = 0;",
    ]
    out += ["            " + ln for ln in _cholesky(n, lambda k, i: f"H[{tri[(k, i)]}]")]
    out += ["            if (!ok) {", "                shift = PYMAX(2.0 * shift, 1e-3);", "                continue;",
            "            }"]
    out += ["            " + ln for ln in _newton_step(n, lambda i: f"g[{i}]")]
    out += [
        "            const double sn = " + Emitter.maxof([f"fabs(s{i}_)" for i in range(n)]) + ";",
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
        *(["        if (follow && shift > 0.0) orbit(h, w, W, trial);"] if g.orbit else []),
        "        if (shift == 0.0) {",
        "            for (int k = 0; k < n_known; k++) {",
        "                const double d = " + Emitter.maxof([f"fabs(h[{i}] - known[k * {n} + {i}])" for i in range(n)]) + ";",
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


def _symmetrised(n: int, L: int, heads: int) -> list[str]:
    """``Wt`` and ``Ct``, the symmetric parts of the ``n x n`` metric ``W`` and the ``L x L``
    covariance ``C`` (the objective reads their upper triangles only), as ``jit.prox_kernel``
    takes them; several heads: their gains after ``C``, copied (``channels.c_covariance``)."""
    gains = [f"    for (int k = 0; k < {heads}; k++) Ct[{L * L} + k] = C[{L * L} + k];"] if heads > 1 else []
    return [
        f"    double Wt[{n * n}], Ct[{L * L + (heads if heads > 1 else 0)}];",
        f"    for (int i = 0; i < {n}; i++)",
        f"        for (int k = 0; k < {n}; k++) Wt[i * {n} + k] = 0.5 * (W[i * {n} + k] + W[k * {n} + i]);",
        f"    for (int i = 0; i < {L}; i++)",
        f"        for (int k = 0; k < {L}; k++) Ct[i * {L} + k] = 0.5 * (C[i * {L} + k] + C[k * {L} + i]);",
        *gains,
    ]


def _kernel(g: Geometry) -> list[str]:
    """``prox_kernel``: ``jit.prox_kernel`` for this geometry (fields flattened: ``w`` (N, n),
    ``starts`` (N, S, n), ``out_h`` (N, n), ``cand_h`` (N, S, n)), the nodes cut into ``n_chunks``
    chunks run by ``n_threads`` OpenMP threads."""
    n, L = g.L * g.field_dim, g.L
    return [
        "void prox_kernel(long N, long S, const double *w, const double *T, const double *starts, const double *W,",
        "                 const double *C, int max_iter, double gtol, double *out_h, double *out_val, double *out_gn,",
        "                 double *cand_h, double *cand_val, long n_chunks, double snap, int follow, int n_threads)",
        "{",
        *_symmetrised(n, L, g.heads),
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
        "                       cand_val + i * S, cand_gn, (int)s, snap, follow, &val, &gn);",
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


def _node_kernel(g: Geometry) -> list[str]:
    """``node_kernel``: ``jit.node_kernel`` for this geometry: the proximal objective, its gradient
    and, with ``want_hess``, its full Hessian at every node's fields ``h`` (N, n) (with ``W = 0``
    and ``w = h``: the loss and its derivatives), ``W`` and ``C`` symmetrised first as in
    :func:`_kernel`. Serial: it serves the checks and the saddle escape, which see few nodes."""
    n, L = g.L * g.field_dim, g.L
    return [
        "void node_kernel(long N, const double *h, const double *w, const double *W, const double *T,",
        "                 const double *C, int want_hess, double *out_val, double *out_grad, double *out_hess)",
        "{",
        f"    double g[{n}], H[{n * (n + 1) // 2}];",
        *_symmetrised(n, L, g.heads),
        "    for (long i = 0; i < N; i++) {",
        f"        out_val[i] = objective(h + i * {n}, w + i * {n}, Wt, T + i * {L * L}, Ct, g, H);",
        f"        for (int k = 0; k < {n}; k++) out_grad[i * {n} + k] = g[k];",
        "        if (!want_hess) continue;",
        f"        for (int a = 0, j = 0; a < {n}; a++)",
        f"            for (int b = a; b < {n}; b++, j++)",
        f"                out_hess[(i * {n} + a) * {n} + b] = out_hess[(i * {n} + b) * {n} + a] = H[j];",
        "    }",
        "}",
    ]


def c_source(g: Geometry) -> str:
    """The proximal kernel of ``g`` in C (docs/model.md (3.2)): the iteration of the generic numba
    kernel written out on scalars (:mod:`attnphase.theory.native` compiles it on first use)."""
    head = [
        f"/* Proximal kernel for the {g.name} geometry (L = {g.L}, F = {g.field_dim}); written by",
        "   attnphase.theory.native.codegen.c_source, compiled by attnphase.theory.native. */",
        "#include <math.h>",
        "#include <stdlib.h>",
        "#define PYMAX(a, b) ((b) > (a) ? (b) : (a))",
        "#define PYMIN(a, b) ((b) < (a) ? (b) : (a))",
        "",
    ]
    body: list[str] = []
    for p in (_objective(g, False), _objective(g, True), c_orbit(g), _newton(g), _kernel(g), _node_kernel(g)):
        body += p + [""]
    return "\n".join(head + body)


def main(argv: list[str] | None = None) -> None:
    """``python -m attnphase.theory.native [NAME ...] [--out DIR]``: the generated C source of the
    named geometries on stdout (no name: the names), or every geometry's into ``DIR/<name>.c``."""
    ap = argparse.ArgumentParser(prog="python -m attnphase.theory.native",
                                 description="Print or write the generated C proximal kernels.")
    ap.add_argument("names", nargs="*", help="geometries to print (none: list the names)")
    ap.add_argument("--out", type=Path, help="write every geometry's source (or the named ones) into this folder")
    a = ap.parse_args(argv)
    by_name = {g.name: g for g in GEOMETRIES + HEAD_GEOMETRIES}
    unknown = [x for x in a.names if x not in by_name]
    if unknown:
        ap.error(f"unknown geometry {', '.join(unknown)}; choose from {', '.join(by_name)}")
    chosen = [by_name[x] for x in a.names] or (list(by_name.values()) if a.out else [])
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        for g in chosen:
            (a.out / f"{g.name}.c").write_text(c_source(g))
        return
    if not chosen:
        print("\n".join(by_name))
    for g in chosen:
        print(c_source(g))
