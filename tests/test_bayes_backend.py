"""PyTensor gets a BLAS from SciPy's wheel; PyMC is imported lazily."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bayescal.bayes._backend import blas_flags

ROOT = Path(__file__).resolve().parents[1]

_CHECK = """
import numpy as np
{pre}
from bayescal.bayes._backend import import_pymc
import_pymc()
import pytensor, pytensor.tensor as pt
assert pytensor.config.blas__ldflags, "no BLAS flags"
A, B, v = pt.matrix(), pt.matrix(), pt.vector()
f = pytensor.function([A, B, v], [A @ B, A @ v])
ops = {{type(node.op).__name__ for node in f.maker.fgraph.toposort()}}
assert ops & {{"Dot22", "Gemm", "Dot22Scalar"}}, ops  # C BLAS ops, not the Python fallback
a, b, w = np.random.rand(7, 5), np.random.rand(5, 3), np.random.rand(5)
r = f(a, b, w)
assert np.allclose(r[0], a @ b) and np.allclose(r[1], a @ w)
print("OK")
"""


@pytest.mark.skipif(not blas_flags(), reason="this SciPy ships no bundled OpenBLAS")
@pytest.mark.parametrize("pre", ["", "import pytensor"], ids=["before", "after-pytensor"])
def test_pytensor_links_scipy_openblas(pre):
    env = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    if "PYTENSOR_FLAGS" in os.environ:  # keep the compile cache location, drop BLAS settings
        keep = [p for p in os.environ["PYTENSOR_FLAGS"].split(",") if "blas" not in p]
        env["PYTENSOR_FLAGS"] = ",".join(keep)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", _CHECK.format(pre=pre)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OK" in out.stdout
    assert "could not link to a BLAS" not in out.stderr


def test_blas_flags_have_no_commas():
    """The flags must be joinable into PYTENSOR_FLAGS (comma-separated)."""
    for value in blas_flags().values():
        assert "," not in value
