"""PyTensor is set up for the installed version; PyMC is imported lazily.

PyTensor 2 (PyMC 5): C code linked to the OpenBLAS inside SciPy's wheel.
PyTensor 3 (PyMC 6): the default Numba backend, BLAS settings untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bayescal.bayes._backend import blas_flags, import_pymc, pytensor_major

ROOT = Path(__file__).resolve().parents[1]

_CHECK = """
import os
import numpy as np
{pre}
from bayescal.bayes._backend import import_pymc
import_pymc()
import pytensor, pytensor.tensor as pt
A, B, v = pt.matrix(), pt.matrix(), pt.vector()
f = pytensor.function([A, B, v], [A @ B, A @ v])
a, b, w = np.random.rand(7, 5), np.random.rand(5, 3), np.random.rand(5)
r = f(a, b, w)
assert np.allclose(r[0], a @ b) and np.allclose(r[1], a @ w)
major = int(pytensor.__version__.split(".")[0])
if major == 2:
    assert pytensor.config.blas__ldflags, "no BLAS flags"
    ops = {{type(node.op).__name__ for node in f.maker.fgraph.toposort()}}
    assert ops & {{"Dot22", "Gemm", "Dot22Scalar"}}, ops  # C BLAS ops, not the Python fallback
else:
    assert type(f.maker.linker).__name__ == "NumbaLinker", f.maker.linker
    assert "blas" not in os.environ.get("PYTENSOR_FLAGS", ""), os.environ["PYTENSOR_FLAGS"]
print("OK", major)
"""


def _env_without_blas_settings() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    if "PYTENSOR_FLAGS" in os.environ:  # keep the compile cache location, drop BLAS settings
        keep = [p for p in os.environ["PYTENSOR_FLAGS"].split(",") if "blas" not in p]
        env["PYTENSOR_FLAGS"] = ",".join(keep)
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.parametrize("pre", ["", "import pytensor"], ids=["before", "after-pytensor"])
def test_pytensor_backend_for_installed_version(pre):
    """C + SciPy's OpenBLAS on PyTensor 2, Numba on PyTensor 3; no BLAS warning on either."""
    if pytensor_major() == 2 and not blas_flags():
        pytest.skip("this SciPy ships no bundled OpenBLAS (PyTensor finds a system BLAS)")
    out = subprocess.run(
        [sys.executable, "-c", _CHECK.format(pre=pre)],
        env=_env_without_blas_settings(), capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"OK {pytensor_major()}" in out.stdout
    assert "could not link to a BLAS" not in out.stderr


def test_pytensor_major_is_the_imported_version():
    import_pymc()
    import pytensor

    assert pytensor_major() == int(pytensor.__version__.split(".")[0])
    assert pytensor_major() in (2, 3)


def test_blas_flags_have_no_commas():
    """The flags must be joinable into PYTENSOR_FLAGS (comma-separated)."""
    for value in blas_flags().values():
        assert "," not in value
