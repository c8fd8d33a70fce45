"""Shared fixtures: seeded generators and the location of the shared data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

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
    graph's after the same rewrites. Never for sampling (each op would run in
    Python). The cached compiled log posterior of
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
    with pytensor.config.change_flags(mode=mode):
        yield
    models._structured_logp_fn.cache_clear()
