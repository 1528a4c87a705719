"""Test-session set-up: the Sobol sample cache (attnphase.theory.quadrature) goes to a folder of
this session, not to the user's cache (subprocesses inherit it through the environment)."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_sobol_cache(tmp_path_factory):
    old = os.environ.get("ATTNPHASE_CACHE_DIR")
    os.environ["ATTNPHASE_CACHE_DIR"] = str(tmp_path_factory.mktemp("attnphase-cache"))
    yield
    if old is None:
        os.environ.pop("ATTNPHASE_CACHE_DIR", None)
    else:
        os.environ["ATTNPHASE_CACHE_DIR"] = old


#: the tests that run numba's generic kernels in the test process (geometries and maps without a
#: written-out C kernel, and the checks of C against numba). In a fresh checkout the first of them
#: in a process compiles the kernels (~90 s on 2 cores for all of them, then cached on disk), so
#: under ``-n`` they go to one worker together and the compilation happens once
#: (tests/test_native_kernels.py checks that each name is a test)
NUMBA_TESTS = frozenset({
    "test_analytic_gradient_and_hessian_match_finite_differences",
    "test_c_kernels_equal_the_numba_kernels_node_by_node",
    "test_c_test_error_sum_of_heads_equals_the_numba_sum",
    "test_cross_kernels_agree_and_are_written_out",
    "test_default_starts_reach_the_grid_minimum",
    "test_gradient_and_hessian_match_finite_differences",
    "test_loss_is_the_cross_loss",
    "test_one_head_softmax_on_the_generic_path_of_heads",
    "test_one_radius_finds_the_global_minimum",
    "test_semantic_start_of_relu_holds_the_large_theta_state",
    "test_the_data_step_does_not_see_the_keys_common_shift",
    "test_the_folded_cross_kernel_is_the_generic_kernel_bit_for_bit",
    "test_untied_rank_two_rule_makes_the_map_reflection_equivariant",
    "test_written_out_heads_kernel_equals_the_generic_kernel",
    "test_written_out_kernel_equals_the_generic_kernel",
})


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (a module's tests on one worker), with the tests of :data:`NUMBA_TESTS`
    as one scope of their own."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
            return "numba kernels" if name in NUMBA_TESTS else super()._split_scope(nodeid)

    return Scheduling(config, log)
