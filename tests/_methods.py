"""Registry methods as pytest parameters (fast and Bayesian), never skipped."""

from __future__ import annotations

import pytest

from bayescal.calibrators.registry import METHODS


def method_param(method: str):
    return pytest.param(method, id=method)


FAST_METHODS = [method_param(m) for m, s in METHODS.items() if not s.bayesian]
BAYES_METHODS = [method_param(m) for m, s in METHODS.items() if s.bayesian]
