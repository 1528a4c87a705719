"""The C kernels (attnphase.theory.native: ``kernels.c`` and the proximal kernels written out per
geometry) against the generic numba kernels (attnphase.theory.jit), node by node, and the choice
between them."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.theory import SolverSettings, native
from attnphase.theory.branches import solve_point, start_point
from attnphase.theory.channels import (
    AttentionMap,
    c_prox_library,
    default_starts,
    loss_hessian_batch,
    prox_batch,
    target_map,
)
from attnphase.theory.geometries import written_out
from attnphase.theory.quadrature import sobol_gaussian
from attnphase.theory.refinement import refine_point
from attnphase.theory.saddle import Saddle, second_minimum, stein_sums

needs_c = pytest.mark.skipif(native.common() is None, reason="the C kernels cannot be built here")


@pytest.fixture
def fresh_native():
    """The process's libraries forgotten before and after (so that a test can build them anew)."""
    native._kernels_library.cache_clear()
    native._prox_library.cache_clear()
    yield
    native._kernels_library.cache_clear()
    native._prox_library.cache_clear()


def _both(monkeypatch, f):
    """``f()`` with the numba kernels, then with the C kernels."""
    out = []
    for k in ("numba", "c"):
        monkeypatch.setenv(native.ENV, k)
        out.append(f())
    return out


MODELS = [{}, {"L": 3}, {"rank": 2}, {"variant": "untied"}, {"variant": "causal"}, {"token_corr": 0.3},
          {"A": "0.3,0.7;0.8,0.2", "omega": 0.6, "sigma": 1.0}]


@needs_c
@pytest.mark.parametrize("kw", MODELS)
def test_c_kernels_equal_the_numba_kernels_node_by_node(monkeypatch, kw):
    """Target map, proximal minimisers (every start's), the loss Hessian, second minima and the Stein sums (plain,
    split between minima, mirror-paired) come out bit for bit the same from the C kernels as from
    numba's generic ones (the written-out proximal kernel folds the geometry's zeros, which changes
    no sum, and the generic kernel sums in its order), at a data step with nodes that have several
    minima; the test-error sum to rounding (numba sums its chunks in a parallel reduction, C in
    order)."""
    spec = ModelSpec(**({"omega": 0.3} | kw))
    am = AttentionMap.from_spec(spec)
    F = am.field_dim
    sd = Saddle(spec, 1.0, sobol_gaussian(spec.L * (F + 1), 9, spec.L * F, seed=3))
    op = sd.from_paper(start_point(spec, "semantic", F))
    rng = np.random.default_rng(7)  # (fields spread enough for several minima; the sums take any arrays)
    w = 0.4 * rng.normal(size=(sd.rule.size, spec.L, F))
    hstar = 1.5 * rng.normal(size=(sd.rule.size, spec.L, 1))
    T0, T1 = _both(monkeypatch, lambda: target_map(hstar, spec))
    assert np.array_equal(T0, T1)
    mix = sd.mix
    n_multi = 0
    # (at 2000, rank 2 and untied keys and queries follow the orbit of their scores' symmetry,
    # channels.ORBIT_FROM; the last one's minima go on to the sums below)
    for v in ((2000.0,) if am.orbit else ()) + (150.0, 25.0):
        V = v * np.eye(F)
        starts = default_starts(sd.unmix(w), V) if mix is None else None
        p0, p1 = _both(monkeypatch, lambda: prox_batch(w, T0, V, sd.C, am, starts=starts, mix=mix))  # noqa: B023
        for a in ("h", "value", "grad_norm", "candidates", "candidate_values"):
            assert np.array_equal(getattr(p0, a), getattr(p1, a)), a
        n_multi += sum(len(np.unique(np.round(c.reshape(len(c), -1), 4), axis=0)) > 1 for c in p0.candidates)
    assert n_multi >= 5, "the test should exercise nodes with several local minima"
    H0, H1 = _both(monkeypatch, lambda: loss_hessian_batch(p0.h, T0, sd.C, am))  # (the saddle escape's)
    assert np.array_equal(H0, H1)
    (h20, v20), (h21, v21) = _both(monkeypatch, lambda: second_minimum(p0))
    assert np.array_equal(h20, h21) and np.array_equal(v20, v21)
    cmap = sd.mirror_map(op.replace(q=op.q + 0.05 * np.eye(F), theta=0.5 * op.theta))
    for tau in (0.0, 1e-5, 1e-2):
        for mirror in (None, cmap):
            args = (sd.rule.w, sd.unmix(w), sd.unmix(p0.h), sd.unmix(h20), p0.value, v20, tau, np.linalg.inv(V),
                    sd.xi, sd.eta)
            s0, s1 = _both(monkeypatch, lambda: stein_sums(*args, mirror=mirror))  # noqa: B023
            for x, y in zip(s0, s1, strict=True):
                assert np.array_equal(x, y)
    e0, e1 = _both(monkeypatch, lambda: sd.test_error(op))
    assert e1 == pytest.approx(e0, rel=1e-13)


#: (the geometries of ``MODELS`` run here under ``-m slow`` only: they have their
#: written-out and generic proximal kernels compared bit for bit in
#: test_c_kernels_equal_the_numba_kernels_node_by_node)
GEOMETRY_CASES = [*(pytest.param(kw, marks=pytest.mark.slow) for kw in
                    ({}, {"token_corr": 0.4}, {"A": "0.3,0.7;0.8,0.2", "omega": 0.6, "sigma": 1.0}, {"L": 3},
                     {"rank": 2}, {"variant": "causal"}, {"variant": "untied"})),
                  {"variant": "causal", "L": 3}, {"variant": "untied-causal"},
                  pytest.param({"L": 5}, marks=pytest.mark.slow), pytest.param({"L": 3, "rank": 2}, marks=pytest.mark.slow),
                  pytest.param({"L": 3, "variant": "untied"}, marks=pytest.mark.slow)]


def kernels_agree(w, T, Vs, C, am, mix=None) -> int:
    """Assert that the written-out and the generic proximal kernel give the same minima, values,
    gradients and candidates bit for bit at every prior variance of ``Vs``, each minimum to
    ``grad_norm < 1e-8``; the number of (node, ``V``) pairs whose starts reach several local minima."""
    n_multi = 0
    for V in Vs:
        fast = prox_batch(w, T, V, C, am, mix=mix)
        slow = prox_batch(w, T, V, C, am, mix=mix, generic=True)
        for a, b, name in zip(fast.arrays(), slow.arrays(), ("h", "value", "grad_norm", "candidates",
                                                            "candidate_values"), strict=True):
            assert np.array_equal(a, b), name
        assert np.all(fast.grad_norm < 1e-8)
        n_multi += sum(len(np.unique(np.round(c.reshape(len(c), -1), 4), axis=0)) > 1 for c in slow.candidates)
    return n_multi


@needs_c
@pytest.mark.parametrize("kw", GEOMETRY_CASES)
def test_written_out_kernel_equals_the_generic_kernel(kw):
    """The proximal kernels written out in C (attnphase.theory.native.codegen) reach the same local
    minimum from every start as the generic numba kernel, bit for bit (the same iteration, the
    same sums in the same order), hence the same global minimiser and value, at random nodes with
    several minima; correlated tokens (a full metric and token covariance), masks and untied
    keys/queries included."""
    spec = ModelSpec(**kw)
    am = AttentionMap.from_spec(spec)
    assert written_out(spec.L, am.M, am.mask) is not None and c_prox_library(am, spec.L) is not None
    rng = np.random.default_rng(7)
    N, F = 1500, am.field_dim
    w = 0.4 * rng.normal(size=(N, spec.L, F))
    T = target_map(1.5 * rng.normal(size=(N, spec.L, 1)), spec)
    mix = None if spec.uncorrelated else np.linalg.cholesky(spec.C_array)
    vs = (0.5, 25.0, 150.0) + ((2000.0,) if am.orbit else ())  # (2000: the orbit followed, channels.ORBIT_FROM)
    n_multi = kernels_agree(w, T, [v * np.eye(F) for v in vs], spec.C_array, am, mix=mix)
    assert n_multi >= 20, "the test should exercise nodes with several local minima"


@pytest.mark.slow  # (a refined solve with each kernel; .ci/wheel compares the two kernels on a full solve on every CI run)
@needs_c
@pytest.mark.parametrize("kw", [{}, {"variant": "causal"}])
def test_a_refined_solve_is_the_same_with_either_kernels(monkeypatch, kw):
    """A coarse solve and its refinement (mirror pairing, importance weights) give the same
    overlaps and iteration counts with the C and the numba kernels; the test error agrees to
    rounding."""
    spec = ModelSpec(omega=0.3, **kw)
    st = SolverSettings(refine_order=9)

    def run():
        p = solve_point(spec, 1.0, "positional", st)
        return p, refine_point(spec, p, st, tol=st.tol)

    (c0, r0), (c1, r1) = _both(monkeypatch, run)
    for a, b in ((c0, c1), (r0, r1)):
        assert (a.q, a.m, a.theta, a.iterations) == (b.q, b.m, b.theta, b.iterations)
        assert b.test_error == pytest.approx(a.test_error, rel=1e-12)
    assert r0.refinement is not None and r0.refinement.applied and r0.refinement.mirror


@needs_c
@pytest.mark.parametrize(("args", "branch"), [
    # (lambda = 50: every minimiser sits at h = 0, so the saddle escape takes the loss Hessian there)
    (["--alpha", "1", "--omega", "0.3", "--lam", "50"], "trivial"),
    # (two heads: the written-out heads kernel and the C test-error sum of heads; ~10 s)
    pytest.param(["--heads", "2", "--alpha", "2", "--omega", "0.3", "--preset", "fast"], "specialised",
                 marks=pytest.mark.slow),
])
def test_a_solve_process_runs_without_numba(args, branch):
    """``attnphase solve`` with the C kernels never imports numba (the ~0.7 s a process saves), and
    its JSON says which kernels ran."""
    argv = ["solve", *args, "--branch", branch, "--json"]
    code = ("import sys; from attnphase.cli import main\n"
            f"try:\n    main({argv!r})\n"
            "except SystemExit as e:\n    assert not e.code\n"
            "assert 'numba' not in sys.modules, 'numba was imported'\n")
    env = {**os.environ, native.ENV: "auto"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["params"]["kernels"].startswith("c (")
    assert out["branches"][branch]["converged"]


def test_kernel_choice_and_fallback(monkeypatch, tmp_path, fresh_native):
    """``$ATTNPHASE_KERNELS``: ``numba`` runs numba; ``auto`` falls back to numba, saying why,
    where no compiler works, and ``c`` is then an error; a value outside the three is a
    ``ValueError``; with a compiler, the library is built once into the cache folder and loaded
    from there afterwards."""
    monkeypatch.setenv(native.ENV, "sometimes")
    with pytest.raises(ValueError, match="ATTNPHASE_KERNELS"):
        native.common()
    monkeypatch.setenv(native.ENV, "numba")
    assert native.common() is None and native.describe().startswith("numba ")
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path / "nocc"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv(native.ENV, "auto")
    assert native.common() is None
    assert "C kernels not built" in native.describe() and "no-such-compiler" in native.describe()
    am = AttentionMap.from_spec(ModelSpec())
    assert c_prox_library(am, 2) is None  # (the generic numba proximal kernel runs)
    rng = np.random.default_rng(1)
    w, T = rng.normal(size=(64, 2, 1)), np.full((64, 2, 2), 0.5)
    a, b = prox_batch(w, T, 3.0 * np.eye(1), np.eye(2), am), prox_batch(w, T, 3.0 * np.eye(1), np.eye(2), am, generic=True)
    assert all(np.array_equal(x, y) for x, y in zip(a.arrays(), b.arrays(), strict=True))
    monkeypatch.setenv(native.ENV, "c")
    with pytest.raises(RuntimeError, match="cannot be built"):
        native.common()
    monkeypatch.setenv(native.ENV, "auto")
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", "")
    native._kernels_library.cache_clear()
    assert native.common() is None and "switched off" in native.describe()
    monkeypatch.delenv("CC")
    if native._compiler() is None:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path / "cache"))
    native._kernels_library.cache_clear()
    lib = native.common()
    assert lib is not None and lib.path.parent == tmp_path / "cache" / "native"
    stamp = lib.path.stat().st_mtime_ns
    native._kernels_library.cache_clear()
    again = native.common()
    assert again.path == lib.path and again.path.stat().st_mtime_ns == stamp
    assert native.describe().startswith("c (")


def test_the_tests_grouped_as_numba_tests_exist(request):
    """Every name in ``NUMBA_TESTS`` (tests/conftest.py, the tests that share one worker under
    ``-n`` so that numba compiles once) is a test of this suite: a renamed test would leave the
    group silently."""
    from conftest import NUMBA_TESTS  # noqa: PLC0415

    names = {item.originalname for item in request.session.items}
    if len(names) < 100:
        pytest.skip("a partial run: not every test module was collected")
    assert sorted(NUMBA_TESTS - names) == []
