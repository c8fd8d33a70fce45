"""Where the docs build's execution time goes: every code cell of every executed page, timed.

Run (repository root)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/docs_cell_times.py            # every page
    OPENBLAS_NUM_THREADS=1 python benchmarks/docs_cell_times.py --min 1.0 \\
        notebooks/02_uncertainty_on_weights.ipynb docs/examples/score_files.md

``make docs`` (and ``tests/test_docs.py``) execute the three notebooks, the
gallery's six examples and the landing page, each in a kernel of its own, in
the page's own folder. This script runs each page's code cells the same way
in a fresh Python process (one per page, in the page's folder, with
Matplotlib's Agg back end and IPython's ``%`` lines left out) and prints the
wall and CPU seconds of each cell above ``--min`` and of each page, plus the
process's start-up. The compile caches (PyTensor's, JAX's) are whatever the
environment names: set ``PYTENSOR_FLAGS=base_compiledir=$(mktemp -d)`` and
``BAYESCAL_JAX_CACHE=$(mktemp -d)`` for a cold build's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The pages the docs build executes, in the order it reads them.
PAGES = [*sorted((ROOT / "docs" / "examples").glob("*.md")), ROOT / "docs" / "index.md",
         *sorted((ROOT / "notebooks").glob("*.ipynb"))]

_RUNNER = r"""
import contextlib, io, json, os, sys, time
start = time.perf_counter()
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.show = lambda *args, **kwargs: None
cells = json.loads(sys.stdin.read())
g = {"__name__": "__main__"}
print(json.dumps({"startup": time.perf_counter() - start}), flush=True)
for i, code in enumerate(cells):
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, f"cell {i}", "exec"), g)
    print(json.dumps({"cell": i, "wall": time.perf_counter() - wall,
                      "cpu": time.process_time() - cpu}), flush=True)
"""


def code_cells(path: Path) -> list[str]:
    """The code of a page's code cells, without IPython's ``%`` lines and MyST options."""
    if path.suffix == ".ipynb":
        cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                 if c["cell_type"] == "code"]
    else:
        cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", path.read_text(),
                           flags=re.M | re.S)
        cells = [re.sub(r"\A(?::\w+:[^\n]*\n)+", "", c) for c in cells]
    return ["\n".join(line for line in c.splitlines() if not line.lstrip().startswith("%"))
            for c in cells]


def time_page(path: Path) -> tuple[float, list[dict]]:
    """Start-up seconds and one ``{"cell", "wall", "cpu"}`` per cell, in a fresh process."""
    cells = code_cells(path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    run = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(cells),
                         capture_output=True, text=True, cwd=path.parent, env=env,
                         check=False)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0:
        raise RuntimeError(f"{path.name} failed:\n{run.stderr[-3000:]}")
    return rows[0]["startup"], rows[1:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, help="pages to time (default: all)")
    ap.add_argument("--min", type=float, default=1.0, help="print cells above this many s")
    args = ap.parse_args(argv)
    pages = [p.resolve() for p in args.pages] or PAGES
    total = 0.0
    print("| page | cell | wall s | CPU s | first line |\n|---|---|---|---|---|")
    for path in pages:
        startup, rows = time_page(path)
        cells = code_cells(path)
        page_wall = startup + sum(r["wall"] for r in rows)
        total += page_wall
        for r in rows:
            if r["wall"] >= args.min:
                first = next((ln for ln in cells[r["cell"]].splitlines() if ln.strip()), "")
                print(f"| {path.name} | {r['cell']} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                      f"`{first.strip()[:50]}` |")
        print(f"| {path.name} | all {len(rows)} + start-up {startup:.1f} s | "
              f"**{page_wall:.1f}** | {sum(r['cpu'] for r in rows):.1f} | |", flush=True)
    print(f"\nall pages: {total:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
