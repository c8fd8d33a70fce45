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
