"""One build of the documentation per test session, shared by test_docs and test_notebooks.

The build executes the notebooks (myst-nb, ``nb_execution_mode = "cache"``)
into a fresh jupyter-cache, so the notebooks run exactly once in ``make test``:
test_notebooks reads the executed notebooks from that cache and test_docs
checks the HTML pages built from them.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class DocsBuild:
    html: Path
    returncode: int
    log: str
    seconds: float

    @property
    def jupyter_cache(self) -> Path:
        return self.html.parent / ".jupyter_cache"  # myst-nb's default: beside the outdir

    def executed(self) -> dict[str, object]:
        """Executed notebooks from the build's cache: absolute source path -> NotebookNode."""
        from jupyter_cache import get_cache

        cache = get_cache(str(self.jupyter_cache))
        return {rec.uri: cache.get_cache_bundle(rec.pk).nb for rec in cache.list_cache_records()}

    def seconds_per_notebook(self) -> dict[str, float]:
        from jupyter_cache import get_cache

        cache = get_cache(str(self.jupyter_cache))
        return {Path(rec.uri).name: float(rec.data.get("execution_seconds", float("nan")))
                for rec in cache.list_cache_records()}


@functools.cache
def build_docs() -> DocsBuild:
    """``sphinx -W --keep-going -b html docs <tmp>/html`` (as ``make docs``), once."""
    tmp = Path(tempfile.mkdtemp(prefix="bayescal-docs-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    out = tmp / "html"
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp / "doctrees"), str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    return DocsBuild(out, r.returncode, r.stderr + r.stdout, time.perf_counter() - start)


def check_site():
    """The ``docs/check_site.py`` module (the checks ``make docs-check`` runs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_site", ROOT / "docs" / "check_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
