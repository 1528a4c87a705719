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

    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.n = 0
        self.indent = indent

    def let(self, expr: str) -> str:
        name = f"t{self.n}"
        self.n += 1
        self.lines.append(f"{self.indent}{name} = {expr}")
        return name

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
            t = em.let(f"np.exp(-abs({s[j0]} - {s[j1]}))")
            e = {j0: em.let(f"1.0 if {s[j0]} >= {s[j1]} else {t}"), j1: em.let(f"{t} if {s[j0]} >= {s[j1]} else 1.0")}
        else:
            mx = em.let("max(" + ", ".join(str(s[j]) for j in allowed) + ")")
            e = {j: em.let(f"np.exp({s[j]} - {mx})") for j in allowed}
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
    # Cholesky of hess + shift I, unrolled (the generic kernel's order of operations), nested so
    # that it stops at the first pivot <= 1e-14
    lines = []
    depth = 0
    for i in range(n):
        for k in range(i + 1):
            s = f"H{k}_{i}" + (" + shift" if i == k else "")
            s += "".join(f" - L{i}_{p} * L{k}_{p}" for p in range(k))
            pad = "    " * depth
            if i == k:
                lines += [f"{pad}s{i} = {s}", f"{pad}if s{i} > 1e-14:"]
                depth += 1
                lines += [f"{'    ' * depth}L{i}_{i} = np.sqrt(s{i})"]
            else:
                lines += [f"{pad}L{i}_{k} = ({s}) / L{k}_{k}"]
    pad = "    " * depth
    lines += [f"{pad}ok = True"]
    out += ["            " + ln for ln in lines]
    out += [
        "            if not ok:",
        "                shift = max(2.0 * shift, 1e-3)",
        "                continue",
    ]
    solve = []
    for i in range(n):
        s = f"-g{i}" + "".join(f" - L{i}_{p} * y{p}" for p in range(i))
        solve.append(f"y{i} = ({s}) / L{i}_{i}")
    for i in range(n - 1, -1, -1):
        s = f"y{i}" + "".join(f" - L{p}_{i} * s{p}_" for p in range(i + 1, n))
        solve.append(f"s{i}_ = ({s}) / L{i}_{i}")
    out += ["            " + ln for ln in solve]
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
