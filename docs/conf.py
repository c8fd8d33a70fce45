"""Sphinx configuration of the bayescal documentation.

Build with ``make docs`` (warnings are errors). Notebooks from ``notebooks/``
are rendered by myst-nb without being executed (``make test`` executes them).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bayescal  # noqa: E402

# API sections of modules that other parts of the project add (written here so
# the reference lists exactly what this checkout contains; api.md includes it)
OPTIONAL_API = [
    ("Generative and Bayesian calibrators", [
        ("bayescal.calibrators", ["GenerativeDirichletCalibrator"]),
        ("bayescal.bayes", ["BayesianDirichletCalibrator", "BayesianGenerativeCalibrator",
                            "DirLinPrior", "DirGenPrior"]),
    ]),
    ("Dirichlet distribution", [
        ("bayescal.dirichlet", ["dirichlet_logpdf", "fit_dirichlet", "DirichletPrior"]),
    ]),
    ("Plots", [
        ("bayescal.plots", ["reliability_diagram"]),
    ]),
    ("Generative vs discriminative", [
        ("bayescal.compare", ["compare_synthetic", "compare_dnn", "plot_synthetic", "plot_dnn"]),
    ]),
    ("Experiments", [
        ("bayescal.experiments", ["reproduce"]),
    ]),
]


def _write_optional_api() -> None:
    import importlib

    lines = []
    for title, modules in OPTIONAL_API:
        found = []
        for module, names in modules:
            try:
                mod = importlib.import_module(module)
            except ImportError:
                continue
            found += [(module, n) for n in names if hasattr(mod, n)]
        if not found:
            continue
        lines += [title, "-" * len(title), ""]
        for module, name in found:
            lines += [f".. currentmodule:: {module}", "", ".. autosummary::",
                      "   :toctree: api/generated", "   :nosignatures:", "", f"   {name}", ""]
    text = "\n".join(lines) + "\n"
    target = Path(__file__).parent / "_api_optional.rst"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


_write_optional_api()

project = "bayescal"
author = "bayescal developers"
copyright = "2026, bayescal developers"
version = release = bayescal.__version__

extensions = [
    "myst_nb",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_api_optional.rst"]

# notebooks are executed by the test suite, not by the docs build
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# api.md includes _api_optional.rst, so autosummary must scan both
autosummary_generate = ["api.md", "_api_optional.rst"]
autodoc_typehints = "none"
templates_path = ["_templates"]
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping: dict[str, tuple[str, None]] = {}

html_theme = "pydata_sphinx_theme"
html_title = f"bayescal {version}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated metadata-routing methods (not bayescal API)."""
    if name == "get_metadata_routing" or name == "set_output" or (
        name.startswith("set_") and name.endswith("_request")
    ):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)
