"""The proximal kernel of several softmax heads written out in C (attnphase.theory.native.codegen,
:data:`attnphase.theory.geometries.HEAD_GEOMETRIES`) against the generic numba kernel of the heads
(attnphase.theory.jit_maps), node by node."""


import numpy as np
import pytest

from attnphase import ModelSpec
from attnphase.theory import native
from attnphase.theory.branches import start_point
from attnphase.theory.channels import AttentionMap, c_prox_library, target_map
from attnphase.theory.geometries import HEAD_GEOMETRIES, written_out
from attnphase.theory.quadrature import sobol_gaussian
from attnphase.theory.saddle import Saddle
from test_native_kernels import kernels_agree, needs_c


@needs_c
@pytest.mark.parametrize("L, gains", [(2, None), (2, (0.7, 0.35)), pytest.param(3, None, marks=pytest.mark.slow),
                                      pytest.param(3, (0.3, 0.9), marks=pytest.mark.slow)])
def test_written_out_heads_kernel_equals_the_generic_kernel(L, gains):
    """Two softmax heads, with the gains 1/2 and with unequal gains (read by the C kernel at run
    time): the written-out kernel reaches the same local minimum from every start as the generic
    heads kernel, bit for bit (the same operations in the same order, the zeros of the forms
    ``e_k e_k^T`` folded, which changes no sum), hence the same global minimiser and value, at
    random nodes with several minima and at prior variances from small to large."""
    spec = ModelSpec(heads=2, L=L, omega=0.3, head_gain_values=gains)
    am = AttentionMap.from_spec(spec)
    g = written_out(L, am.M, am.mask, heads=2)
    assert g is not None and g.heads == 2 and c_prox_library(am, L) is not None
    rng = np.random.default_rng(7)
    N, F = 200, am.field_dim
    w = 0.4 * rng.normal(size=(N, L, F))
    T = target_map(1.5 * rng.normal(size=(N, L, 1)), spec)
    # (unequal heads: no symmetry between the two fields)
    n_multi = kernels_agree(w, T, [v * np.diag([1.0, 0.7]) for v in (0.5, 25.0, 150.0)], spec.C_array, am)
    assert n_multi >= 10, "the test should exercise nodes with several local minima"


def test_heads_geometries_are_told_apart_from_rank_two():
    """Two heads of rank 1 have the fields and ``M = I_2`` of the tied rank-2 student but not its
    loss: the kernel picker finds each its own geometry, and softmax heads, whatever their gains,
    get the written-out kernel of heads (another map runs the generic kernel)."""
    heads = AttentionMap.from_spec(ModelSpec(heads=2))
    rank2 = AttentionMap.from_spec(ModelSpec(rank=2))
    assert np.array_equal(heads.M, rank2.M) and np.array_equal(heads.mask, rank2.mask)
    gh, gr = written_out(2, heads.M, heads.mask, heads=2), written_out(2, rank2.M, rank2.mask)
    assert gh is not None and gr is not None and gh != gr and gh.heads == 2 and gr.heads == 1
    assert gh.name == "tied_L2_r1_H2" and gh.field_dim == 2
    assert c_prox_library(AttentionMap.from_spec(ModelSpec(heads=2, head_gain_values=(0.8, 0.1))), 2) is not None
    assert {g.name for g in HEAD_GEOMETRIES} >= {"tied_L2_r1_H2"}
    sigmoid = AttentionMap.from_spec(ModelSpec(heads=2, activation="sigmoid", teacher_activation="sigmoid"))
    assert c_prox_library(sigmoid, 2) is None


@needs_c
@pytest.mark.parametrize("L", [2, 3])
def test_c_test_error_sum_of_heads_equals_the_numba_sum(monkeypatch, L):
    """The test-error sum (docs/model.md (4.2)) of two softmax heads from ``kernels.c`` equals
    numba's generic sum of the heads to rounding (the same operations per node; numba adds the
    chunks' partial sums in a parallel reduction, C in order), on the product rule (``L = 2``) and
    on the Sobol rule (``L = 3``), at unequal heads (one semantic, one positional)."""
    spec = ModelSpec(heads=2, L=L, omega=0.3)
    am = AttentionMap.from_spec(spec)
    sd = Saddle(spec, 2.0, sobol_gaussian(spec.L * (am.field_dim + 1), 6, spec.L * am.field_dim, seed=3))
    op = sd.from_paper(start_point(spec, "specialised", am.field_dim))
    op = op.replace(q=op.q + 0.1 * np.eye(am.field_dim))
    out = []
    for k in ("numba", "c"):
        monkeypatch.setenv(native.ENV, k)
        out.append(sd.test_error(op, order=6, log2_n=10))
    assert out[1] == pytest.approx(out[0], rel=1e-13)
