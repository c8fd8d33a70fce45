"""The Sphinx documentation builds with warnings as errors (as ``make docs``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "html"
    r = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-5000:]
    for page in ("index", "getting_started", "choosing", "cli", "api", "benchmarks", "results",
                 "user_guide/dirichlet", "notebooks/01_the_theorem"):
        assert (out / f"{page}.html").is_file(), page
    api = (out / "api" / "generated" / "bayescal.CalibratedClassifier.html").read_text()
    assert "cross-fitted" in api  # the docstring made it into the API reference
