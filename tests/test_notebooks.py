"""The teaching notebooks execute from top to bottom without errors.

Each is run in a fresh kernel with ``notebooks/`` as working directory and
this checkout first on ``PYTHONPATH`` (so the kernel imports this bayescal).
Budget: under 2 minutes each on 2 cores.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT_PER_CELL = 300
def _param(path: Path):
    return pytest.param(path, id=path.stem)


def test_notebooks_are_present_and_stripped() -> None:
    names = [nb.name for nb in NOTEBOOKS]
    assert names == [
        "01_the_theorem.ipynb",
        "02_uncertainty_on_weights.ipynb",
        "03_generative_vs_discriminative.ipynb",
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (
                    f"{path.name}: output cells must be stripped before committing"
                )


@pytest.mark.slow
@pytest.mark.parametrize("path", [_param(p) for p in NOTEBOOKS])
def test_notebook_executes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT_PER_CELL, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    assert elapsed < 180, f"{path.name} took {elapsed:.0f} s (budget: 2 minutes on 2 cores)"
