"""Lazy imports of PyMC / ArviZ and the PyTensor configuration they need.

Nothing here imports PyMC at module import time: :func:`import_pymc` does it
on first use, after :func:`configure_pytensor` has set PyTensor up.

Backends
--------
The two supported stacks compile PyMC models differently:

* PyTensor 2 (PyMC 5) compiles to C by default, and its C code calls BLAS
  for the matrix products: :func:`configure_pytensor` links it to SciPy's
  OpenBLAS (below).
* PyTensor 3 (PyMC 6) compiles with Numba by default; Numba calls BLAS
  through SciPy itself, so nothing needs linking and
  :func:`configure_pytensor` leaves PyTensor's settings alone.

BLAS for the C backend
----------------------
A pip-installed PyTensor 2 finds no BLAS to link its C code to (it warns
"could not link to a BLAS installation" and falls back to slower kernels).
SciPy's wheels ship OpenBLAS as ``scipy.libs/libscipy_openblas*.so`` with
every symbol prefixed ``scipy_`` (``scipy_dgemm_``). :func:`blas_flags` links
to that library and renames the ten BLAS routines PyTensor's C code calls
(``dgemm_`` -> ``scipy_dgemm_`` and so on) with preprocessor definitions, so
no system BLAS is needed. A user setting (``blas__ldflags`` in
``PYTENSOR_FLAGS`` or ``~/.pytensorrc``) always wins.

Compiled models are cached by PyTensor in its ``base_compiledir`` (default
``~/.pytensor``); the Makefile sets it to a stable cache folder so tests, CI
and the benchmarks reuse it between runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "blas_flags",
    "configure_pytensor",
    "import_arviz",
    "import_pymc",
    "pytensor_major",
    "require",
]

_INSTALL_HINT = (
    "bayescal's Bayesian calibrators need PyMC and ArviZ: "
    "pip install 'pymc>=5.16,<7' 'arviz>=0.18,<2' (PyMC 6 and ArviZ 1 need Python >= 3.12; "
    "optional fast samplers: pip install 'bayescal[fast]')"
)

#: BLAS routines referenced by PyTensor's C code (tensor/blas_headers.py).
_BLAS_ROUTINES = (
    "sgemm", "dgemm", "sgemv", "dgemv", "sger", "dger",
    "sdot", "ddot", "sscal", "dscal", "saxpy", "daxpy", "scopy", "dcopy",
)


def require(module: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`ImportError` with an install hint."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the deps
        hint = _INSTALL_HINT
        if extra is not None:
            hint = f"{module} is an optional extra: pip install 'bayescal[{extra}]'"
        raise ImportError(f"{hint} ({exc})") from exc


def pytensor_major() -> int | None:
    """Major version of the installed PyTensor (read without importing it), or None."""
    try:
        return int(importlib.metadata.version("pytensor").split(".")[0])
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - no PyMC installed
        return None


def _scipy_openblas() -> Path | None:
    """The 32-bit-integer OpenBLAS shipped inside the SciPy wheel, if any."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or spec.origin is None:
        return None
    libs = Path(spec.origin).resolve().parent.parent / "scipy.libs"
    found = sorted(p for p in libs.glob("libscipy_openblas*.so*") if "64_" not in p.name)
    return found[0] if found else None


def blas_flags() -> dict[str, str]:
    """PyTensor flags that link its C code to SciPy's bundled OpenBLAS.

    Returns
    -------
    flags : dict
        ``{"blas__ldflags": ..., "gcc__cxxflags": ...}``, or an empty dict
        when SciPy ships no OpenBLAS (e.g. a conda SciPy, where PyTensor finds
        the system BLAS by itself). The values contain no commas, so they can
        be joined into ``PYTENSOR_FLAGS``.
    """
    lib = _scipy_openblas()
    if lib is None:
        return {}
    name = lib.name.split(".so")[0].removeprefix("lib")
    ldflags = f"-L{lib.parent} -l{name} -Xlinker -rpath -Xlinker {lib.parent}"
    defines = " ".join(f"-D{r}_=scipy_{r}_" for r in _BLAS_ROUTINES)
    return {"blas__ldflags": ldflags, "gcc__cxxflags": defines}


def _user_set_blas() -> bool:
    if "blas__ldflags" in os.environ.get("PYTENSOR_FLAGS", ""):
        return True
    rc = os.environ.get("PYTENSORRC", str(Path.home() / ".pytensorrc"))
    return any(
        Path(p).is_file() and "ldflags" in Path(p).read_text(errors="ignore")
        for p in rc.split(os.pathsep)
    )


def configure_pytensor() -> None:
    """Set PyTensor up for the installed version (see module docstring).

    PyTensor 2: link its C code to SciPy's OpenBLAS unless the user chose a
    BLAS. Before PyTensor is imported the flags go into ``PYTENSOR_FLAGS``;
    after, they are set on ``pytensor.config``. PyTensor 3: nothing (its
    default Numba backend needs no BLAS flags). Idempotent.
    """
    major = pytensor_major()
    if major is None or major >= 3 or _user_set_blas():
        return
    flags = blas_flags()
    if not flags:
        return
    if "pytensor" not in sys.modules:
        extra = ",".join(f"{key}={value}" for key, value in flags.items())
        current = os.environ.get("PYTENSOR_FLAGS", "")
        os.environ["PYTENSOR_FLAGS"] = f"{current},{extra}" if current else extra
        return
    import pytensor

    cfg: Any = pytensor.config
    # (Reading cfg.blas__ldflags first would run PyTensor's slow BLAS search.)
    cfg.blas__ldflags = flags["blas__ldflags"]
    if flags["gcc__cxxflags"] not in cfg.gcc__cxxflags:
        cfg.gcc__cxxflags = f"{cfg.gcc__cxxflags} {flags['gcc__cxxflags']}".strip()


def import_pymc() -> ModuleType:
    """Import PyMC after :func:`configure_pytensor`."""
    configure_pytensor()
    return require("pymc")


def import_arviz() -> ModuleType:
    """Import ArviZ (raises ImportError with an install hint if missing)."""
    return require("arviz")


if __name__ == "__main__":  # pragma: no cover - used by the Makefile
    # Print the flags as a PYTENSOR_FLAGS fragment.
    print(",".join(f"{key}={value}" for key, value in blas_flags().items()))
