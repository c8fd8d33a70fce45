"""Optional dependencies in tests: skipped with a reason, or required.

``make test`` (and so CI) installs the extras ``fast`` (nutpie, numpyro, jax)
and ``dask`` and sets ``BAYESCAL_REQUIRE_EXTRAS=1``: a missing extra is then
an import error that fails the test, never a silent skip. Without the
variable (a user's own environment) the test is skipped, saying which extra
to install.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE_EXTRAS = os.environ.get("BAYESCAL_REQUIRE_EXTRAS", "") == "1"


def import_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of the optional extra ``extra`` (see module docstring)."""
    if REQUIRE_EXTRAS:
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason=f"{module} is in the optional extra [{extra}] (make test installs it)"
    )
