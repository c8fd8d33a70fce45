"""Lazy imports of PyMC / ArviZ and the PyTensor configuration they need.

Nothing here imports PyMC at module import time: :func:`import_pymc` does it
on first use, after :func:`configure_pytensor` has pointed PyTensor at a BLAS.

BLAS
----
A pip-installed PyTensor finds no BLAS to link its C code to (it warns
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

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["blas_flags", "configure_pytensor", "import_arviz", "import_pymc", "require"]

_INSTALL_HINT = (
    "bayescal's Bayesian calibrators need PyMC and ArviZ: "
    "pip install 'pymc>=5.16,<6' 'arviz>=0.18,<0.24' (optional fast samplers: "
    "pip install 'bayescal[fast]')"
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
    """Give PyTensor a BLAS (see module docstring) unless the user chose one.

    Before PyTensor is imported the flags go into ``PYTENSOR_FLAGS``; after,
    they are set on ``pytensor.config``. Idempotent.
    """
    if _user_set_blas():
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
    """Import PyMC after configuring PyTensor's BLAS."""
    configure_pytensor()
    return require("pymc")


def import_arviz() -> ModuleType:
    """Import ArviZ (raises ImportError with an install hint if missing)."""
    return require("arviz")


if __name__ == "__main__":  # pragma: no cover - used by the Makefile
    # Print the flags as a PYTENSOR_FLAGS fragment.
    print(",".join(f"{key}={value}" for key, value in blas_flags().items()))
