"""The written-out C twin of :mod:`attnphase.theory.jit_orbit`: the proximal kernel's move along the
orbit of the scores' symmetry (docs/model.md (3.2)) for one geometry, emitted into its source by
:func:`attnphase.theory.native.codegen.c_source`."""

from __future__ import annotations

from attnphase.theory.geometries import ORBIT_NEWTON, Geometry


def c_orbit(g: Geometry) -> list[str]:
    """``jit_orbit.follow_orbit`` for this geometry (the same operations in the same order; nothing
    where the geometry's scores have no symmetry that the kernels follow, :attr:`Geometry.orbit`):
    ``orbit(h, w, W, trial)`` moves ``h`` along the symmetry's orbit towards the least quadratic
    term, with ``prior`` and ``orbit_move`` of ``jit_orbit._prior`` and ``jit_orbit._orbit_move``."""
    kind, n, L = g.orbit, g.L * g.field_dim, g.L
    if not kind:
        return []
    move = ([f"    for (int l = 0; l < {L}; l++) {{",
             "        out[2 * l] = h[2 * l] * c + h[2 * l + 1] * s;",
             "        out[2 * l + 1] = h[2 * l + 1] * c + h[2 * l] * -s;", "    }"] if kind == 1 else
            [f"    for (int l = 0; l < {L}; l++) {{", "        out[2 * l] = h[2 * l] * c;",
             "        out[2 * l + 1] = h[2 * l + 1] / c;", "    }"])
    step = (["        const double e = 1.0 + 0.25 * t * t;",
             "        orbit_move(h, (1.0 - 0.25 * t * t) / e, t / e, trial);"] if kind == 1 else
            ["        t = PYMIN(PYMAX(t, -1.0), 1.0);",
             "        orbit_move(h, (1.0 + 0.5 * t) / (1.0 - 0.5 * t), 0.0, trial);"])
    # (x - y z written x + y (-z), the same number: GCC 12's SLP vectoriser fuses an add and a
    # subtract side by side into vfmsubadd despite -ffp-contract=off, which rounds once instead of twice)

    def tangent(i: str) -> str:
        """Entry ``i`` of the orbit's tangent ``h X`` (``jit_orbit._tangent``)."""
        return f"({i} % 2 == 0 ? h[{i} + 1] : -h[{i} - 1])" if kind == 1 else f"({i} % 2 == 0 ? h[{i}] : -h[{i}])"

    align = [] if kind != 1 else [
        "    double a = 0.0, b = 0.0;",
        f"    for (int l = 0; l < {L}; l++) {{",
        "        double g0 = 0.0, g1 = 0.0;",
        f"        for (int k = 0; k < {n}; k++) {{",
        f"            g0 += W[(2 * l) * {n} + k] * w[k];",
        f"            g1 += W[(2 * l + 1) * {n} + k] * w[k];",
        "        }",
        "        a += h[2 * l] * g0 + h[2 * l + 1] * g1;",
        "        b += h[2 * l + 1] * g0 + h[2 * l] * -g1;",
        "    }",
        "    const double r = sqrt(a * a + b * b);",
        "    if (r > 0.0) {",
        "        orbit_move(h, a / r, b / r, trial);",
        "        const double pt = prior(trial, w, W);",
        "        if (pt < p) {",
        "            p = pt;",
        f"            for (int i = 0; i < {n}; i++) h[i] = trial[i];",
        "        }",
        "    }",
    ]
    return [
        "static inline double prior(const double *restrict h, const double *restrict w, const double *restrict W)",
        "{",
        "    double quad = 0.0;",
        f"    for (int i = 0; i < {n}; i++) {{",
        "        double acc = 0.0;",
        f"        for (int k = 0; k < {n}; k++) acc += W[i * {n} + k] * (h[k] - w[k]);",
        "        quad += (h[i] - w[i]) * acc;",
        "    }",
        "    return 0.5 * quad;",
        "}",
        "",
        "static inline void orbit_move(const double *restrict h, double c, double s, double *restrict out)",
        "{",
        *move,
        "}",
        "",
        "static inline void orbit(double *restrict h, const double *restrict w, const double *restrict W,",
        "                        double *restrict trial)",
        "{",
        "    double p = prior(h, w, W);",
        *align,
        f"    for (int r = 0; r < {ORBIT_NEWTON}; r++) {{",
        "        double d1 = 0.0, d2 = 0.0;",
        f"        for (int i = 0; i < {n}; i++) {{",
        f"            const double u_i = {tangent('i')};",
        "            double q_acc = 0.0, u_acc = 0.0;",
        f"            for (int k = 0; k < {n}; k++) {{",
        f"                q_acc += W[i * {n} + k] * (h[k] - w[k]);",
        f"                u_acc += W[i * {n} + k] * {tangent('k')};",
        "            }",
        "            d1 += u_i * q_acc;",
        f"            d2 += u_i * u_acc + {'-1.0' if kind == 1 else '1.0'} * h[i] * q_acc;",
        "        }",
        "        if (!(d2 > 0.0)) break;",
        "        double t = -d1 / d2;",
        *step,
        "        const double pt = prior(trial, w, W);",
        "        if (!(pt < p)) break;",
        "        p = pt;",
        f"        for (int i = 0; i < {n}; i++) h[i] = trial[i];",
        "    }",
        "}",
    ]
