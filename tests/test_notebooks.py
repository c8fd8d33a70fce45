"""The teaching notebooks run from top to bottom and draw every figure they promise.

They are executed once, by the documentation build that test_docs also checks
(``tests/_docs_build.py``): myst-nb runs each notebook in a fresh IPython
kernel with this checkout importable, and a failing cell -- including an
``assert`` that checks a sentence of the prose -- fails the build. Here the
executed notebooks are read back from the build's jupyter-cache.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from tests._docs_build import ROOT, build_docs, check_site

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# one docs build per session: under pytest-xdist both files run on the same worker
pytestmark = [pytest.mark.once, pytest.mark.xdist_group("docs")]


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


def test_notebooks_need_only_data_that_ships_with_the_packages() -> None:
    """No outside data; the one file read besides, a benchmark's result, is in the repository.

    Notebook 02 shows the figure and table that ``benchmarks/bench_bayes_width.py``
    writes to ``docs/bench`` (committed, like the other benchmark results).
    """
    for path in NOTEBOOKS:
        text = path.read_text()
        for needle in ("shared/data", "BAYESCAL_SHARED_DATA", "np.load(", "read_csv("):
            assert needle not in text, f"{path.name} reads outside data ({needle!r})"
        for name in re.findall(r"\bbench/(\w+\.(?:json|png))", text):
            assert (ROOT / "docs" / "bench" / name).is_file(), f"{path.name}: docs/bench/{name}"


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)


def bayesian_fit_loops(source: str) -> list[int]:
    """Lines of loops or comprehensions calling ``.fit(`` in a cell naming a Bayesian calibrator.

    IPython magics (lines starting with ``%`` or ``!``) are dropped before parsing.
    A cell that does not name a ``Bayesian...Calibrator`` is never flagged.
    """
    if not re.search(r"\bBayesian\w*Calibrator\b", source):
        return []
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())
    return [loop.lineno for loop in ast.walk(ast.parse(code)) if isinstance(loop, _LOOPS)
            and any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "fit" for node in ast.walk(loop))]


def test_bayesian_fit_loop_detector() -> None:
    sweep = ("from bayescal.bayes import BayesianDirichletCalibrator\n%time x = 1\n"
             "for n in sizes:\n    est = BayesianDirichletCalibrator()\n    est.fit(q, y)\n")
    assert bayesian_fit_loops(sweep) == [3]
    assert bayesian_fit_loops("fits = {m: BayesianDirichletCalibrator(prior=m).fit(q, y)\n"
                              "        for m in priors}") == [1]
    assert bayesian_fit_loops("bayes = BayesianDirichletCalibrator().fit(q, y)") == []
    assert bayesian_fit_loops("for m in methods:\n    clone(m).fit(q, y)") == []  # not Bayesian


def test_notebooks_leave_sweeps_of_bayesian_fits_to_the_benchmarks() -> None:
    """Each NUTS fit costs from seconds to minutes: a loop of them belongs in benchmarks/.

    The docs build runs every notebook (with no per-cell time limit, docs/conf.py), so
    a sweep of Bayesian fits in a notebook makes every build slow; the sweep of
    notebook 02 is ``benchmarks/bench_bayes_width.py`` and the notebook shows its figure.
    """
    for path in NOTEBOOKS:
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code":
                lines = bayesian_fit_loops(cell.source)
                assert not lines, (f"{path.name}, cell {i}: a loop of Bayesian fits (line "
                                   f"{lines[0]}); move it to benchmarks/ and show its results")


def test_figures_are_displayed_by_the_inline_backend() -> None:
    """Figures reach the outputs even when MPLBACKEND=Agg is set in the environment."""
    for path in NOTEBOOKS:
        first = next(c for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code")
        assert first.source.startswith("%matplotlib inline"), path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_draws_its_figures(path) -> None:
    build = build_docs()
    assert build.returncode == 0, build.log[-5000:]
    executed = build.executed()
    source = str(ROOT / "docs" / "notebooks" / path.name)
    assert source in executed, f"{path.name} was not executed by the build: {list(executed)}"
    nb = executed[source]
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    # the reader sees no warning about the docs' own environment (ipywidgets is a
    # docs extra: without it numpyro's tqdm.auto prints one into the first fit's cell)
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "IProgress not found" not in stderr, stderr[:2000]
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code_cells)  # every cell ran
    figures = sum("image/png" in o.get("data", {}) for o in outputs)
    expected = check_site().EXPECTED_FIGURES[f"notebooks/{path.stem}"]
    assert figures == expected, f"{path.name}: {figures} figures, expected {expected}"
    print(f"{path.name}: executed in {build.seconds_per_notebook()[path.name]:.0f} s")
