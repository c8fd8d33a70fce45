"""The suite's scheduling (tests/conftest.py) takes effect under pytest-xdist."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def tiny_fit():
    """A stand-in for a module's fitted model (a module-scoped ``*_fit`` fixture)."""
    return object()


def test_a_module_fit_joins_its_modules_group(tiny_fit, request):
    marker = request.node.get_closest_marker("xdist_group")
    assert marker is not None and marker.args == ("fits-test_suite_scheduling",)
    if request.config.getoption("dist", "no") == "loadgroup":
        # loadgroup schedules by the node id, which must carry the group
        assert request.node.nodeid.endswith("@fits-test_suite_scheduling")


def test_workers_hold_blas_to_one_thread():
    from threadpoolctl import threadpool_info

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("only pytest-xdist workers are held to one thread (make test runs two)")
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"  # inherited by the processes it starts
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)
