"""Shared fixtures: seeded generators and the location of the shared data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

#: Under pytest-xdist every worker (and every process it starts: the docs build's
#: notebook kernels, the CLI tests' subprocesses) runs BLAS and OpenMP on one thread.
#: With their default of one thread per core, two workers on two cores oversubscribe
#: the CPU: the warm PyMC 5 stage took 384 s against 302 s held to one thread (the
#: docs build 216 s against 116 s; docs/benchmarks.md, "Two workers, one thread each").
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # this process's libraries, already loaded

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")

#: ../shared/data beside the checkout (override with BAYESCAL_SHARED_DATA).
SHARED_DATA = Path(
    os.environ.get(
        "BAYESCAL_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20191028)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        raise FileNotFoundError(
            f"shared data not found at {SHARED_DATA}; set BAYESCAL_SHARED_DATA"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def dnn_cifar10(shared_data: Path) -> dict[str, np.ndarray]:
    with np.load(shared_data / "dnn" / "netcal_cifar10_wideresnet16-4.npz") as f:
        return {key: f[key] for key in f.files}


@pytest.fixture
def pytensor_py_linker():
    """Compile PyTensor graphs with the Python linker (every rewrite, no C or Numba code).

    For tests that only *evaluate* a model's log density or gradient at a few
    points: a cold C (PyMC 5) or Numba (PyMC 6) compilation of one graph takes
    25-40 s, the Python linker under a second, and the values are the same
    graph's after the same rewrites. ``cxx=""`` as well: ops with an inner
    graph (a Scan, e.g. PyMC's ``d2logp``; PyTensor 3's inner functions) link
    their inner function with a VM of their own, which would otherwise compile
    C code (17-20 s cold for one structured log posterior or one ``d2logp``).
    Not for NUTS runs of a real length (each op runs in Python: PyMC's NUTS on
    test_bayes_dirlin's fixture took as much CPU as the cold compilation); short
    optimisations are cheaper this way (test_bayes_samplers' ADVI, 3000 steps: 4-6 s
    against 34-36 s cold, the same map). The cached compiled log posterior of
    :func:`bayescal.bayes.models.structured_log_posterior` is cleared on entry
    and exit so that no other test reuses a function compiled this way.
    """
    from bayescal.bayes import models
    from bayescal.bayes._backend import import_pymc

    import_pymc()  # PyTensor configured as the package does, before its first import
    import pytensor
    from pytensor.compile.mode import Mode

    models._structured_logp_fn.cache_clear()
    # without "fusion": fused elementwise ops would run per element in Python
    mode = Mode(linker="py", optimizer="fast_run").excluding("fusion")
    with pytensor.config.change_flags(mode=mode, cxx=""):
        yield
    models._structured_logp_fn.cache_clear()


def _group(item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    return (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None


def _shares_a_module_fit(item) -> bool:
    """Whether ``item`` uses a module-scoped fixture named ``*_fit`` (a fitted model)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(name.endswith("_fit") and fixturedefs[-1].scope == "module"
               for name, fixturedefs in defs.items())


@pytest.hookimpl(tryfirst=True)  # before xdist's worker hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Schedule the suite for pytest-xdist's ``loadgroup`` (``make test``'s two workers).

    * Tests that use a module-scoped fitted model (a fixture named ``*_fit``,
      e.g. a PyMC NUTS fit: 5-25 s, most of it compiling the model) join one
      group per module, so the model is fitted once, not once on each worker
      that happens to run one of them.
    * The documentation build (group "docs") is handed out first. It is the
      longest unit of the suite (every notebook and example executed, about
      two minutes of one core) and ``loadgroup`` gives units to the workers in
      collection order: collected last, it would start late and leave the
      other worker idle at the end.

    It runs first (``tryfirst``): pytest-xdist's worker appends each item's
    group to its node id in its own ``pytest_collection_modifyitems``, and a
    group added after that is ignored by ``loadgroup``.
    """
    for item in items:
        if _group(item) is None and _shares_a_module_fit(item):
            item.add_marker(pytest.mark.xdist_group(f"fits-{item.path.stem}"))
    items.sort(key=lambda item: _group(item) != "docs")  # stable: the order within each part stays


def pytest_runtest_logreport(report):
    """With ``BAYESCAL_TEST_TIMELINE=path``, append each phase's timing as a JSON line.

    Written by the main process (under pytest-xdist the controller, which
    receives every worker's reports): worker, node id, phase (``setup``,
    ``call``, ``teardown``) and wall-clock start and stop. Read by
    ``benchmarks/suite_timeline.py`` (how busy each worker was, and for how
    long one waited for the other at the end).
    """
    path = os.environ.get("BAYESCAL_TEST_TIMELINE")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"worker": worker, "nodeid": report.nodeid, "when": report.when,
                            "start": report.start, "stop": report.stop}) + "\n")
