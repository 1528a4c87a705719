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
