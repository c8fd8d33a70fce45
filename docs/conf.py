"""Sphinx configuration of the bayescal documentation.

Build with ``make docs`` (warnings are errors; no network needed). The
notebooks of ``notebooks/``, the gallery's examples (``docs/examples/*.md``)
and the landing page are executed during the build by myst-nb, so every
figure they draw is on the site; results are cached by jupyter-cache under
``<outdir>/.jupyter_cache`` and a notebook runs again only when its code
changes. MathJax is served from the site itself (``sphinx-mathjax-offline``),
and the intersphinx inventories are read from ``docs/_intersphinx`` (see
``_intersphinx/inventories.py``), so a page needs no network to render or link.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "_intersphinx"))

from inventories import write_inventories  # noqa: E402

import bayescal  # noqa: E402

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
    "sphinx-mathjax-offline",  # copies MathJax 3 into _static/mathjax; sets mathjax_path
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# -- notebooks: executed at build time, cached between builds -----------------
nb_execution_mode = "cache"
# No per-cell wall-clock limit: how long a cell takes depends on the machine and
# on whether the PyTensor / nutpie compile caches are warm (a cold cache once
# pushed a cell of notebook 02 past 600 s and failed the whole build). myst-nb
# validates this as an int (None is rejected) and hands it to nbclient, which
# treats -1 (or 0) as "no timeout". Heavy sweeps live in benchmarks/ instead.
nb_execution_timeout = -1
nb_execution_raise_on_error = True  # a failing cell (or a failing assert) fails the build
nb_execution_show_tb = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# -- API reference ------------------------------------------------------------
autosummary_generate = True
autodoc_typehints = "none"
templates_path = ["_templates"]
autodoc_default_options = {"members": True, "inherited-members": True}
autodoc_member_order = "groupwise"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# parameter and return types link to their documentation (words not listed
# here stay plain text)
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
numpydoc_xref_aliases = {
    "ndarray": "numpy.ndarray",
    "Generator": "numpy.random.Generator",
    "InferenceData": "arviz.InferenceData",
    "arviz.InferenceData": "arviz.InferenceData",
    "Axes": "matplotlib.axes.Axes",
    "Figure": "matplotlib.figure.Figure",
    "ReliabilityTable": "bayescal.metrics.ReliabilityTable",
    "ReliabilityBands": "bayescal.metrics.ReliabilityBands",
    "BootstrapInterval": "bayescal.metrics.BootstrapInterval",
    "ReliabilityDisplay": "bayescal.plots.ReliabilityDisplay",
    "FitResult": "bayescal.optimize.FitResult",
    "QuadraticPenalty": "bayescal.optimize.QuadraticPenalty",
    "DirichletPrior": "bayescal.dirichlet.DirichletPrior",
    "DirLinPrior": "bayescal.bayes.DirLinPrior",
    "DirGenPrior": "bayescal.bayes.DirGenPrior",
    "ScoreData": "bayescal.io.ScoreData",
    "UCIDataset": "bayescal.datasets.UCIDataset",
}

# -- links to the documentation of the libraries bayescal builds on ----------
# The inventories are committed as text (docs/_intersphinx/*.txt) and compiled
# here, so the build reads no URL; links point to the projects' own sites.
intersphinx_mapping = {
    name: (url, str(path)) for name, (url, path) in write_inventories().items()
}
intersphinx_timeout = 1

# -- HTML ---------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"bayescal {version}"
html_static_path = ["_static"]
html_css_files = ["bayescal.css"]
toc_object_entries_show_parents = "hide"  # "fit()", not "DirichletCalibrator.fit()"
# pages without a section of their own get the whole width (no empty left sidebar)
html_sidebars = {page: [] for page in (
    "index", "getting_started", "choosing", "cli", "notebooks", "notebooks/*", "benchmarks",
    "results", "generative_vs_discriminative", "gallery", "examples/*")}
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
}


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated metadata-routing methods (not bayescal API)."""
    if name == "get_metadata_routing" or name == "set_output" or (
        name.startswith("set_") and name.endswith("_request")
    ):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)
