"""Intersphinx inventories of the libraries bayescal builds on, written without network.

The documentation links its references to NumPy, SciPy, scikit-learn,
matplotlib, ArviZ and PyMC objects to those projects' own sites. Sphinx finds
where an object is documented from the project's ``objects.inv``, which is
normally downloaded at build time; the docs must build offline, so the
entries bayescal's documentation uses are listed here, each with the page
where that project documents it, and :func:`write_inventories` compiles them
into Sphinx inventory files (format version 2) beside this module.

To link a new name, add it to its project's table below (``$`` at the end of a
URI stands for the object's name as anchor, as in Sphinx's own inventories).
"""

from __future__ import annotations

import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: project -> (base URL, version shown, {object: (role, URI relative to the base URL)}).
#: A role without a domain is a Python one (``"class"`` is ``py:class``); labels
#: and glossary terms (``std:label``, ``std:term``) are those that numpydoc's
#: type links and the docstrings inherited from scikit-learn refer to.
PROJECTS: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {
    "python": ("https://docs.python.org/3/", "3", {
        **{name: ("class", f"library/stdtypes.html#{name}")
           for name in ("list", "tuple", "str", "dict", "set")},
        **{name: ("class", f"library/functions.html#{name}") for name in ("int", "float", "bool")},
        "callable": ("function", "library/functions.html#callable"),
        **{name: ("data", f"library/constants.html#{name}") for name in ("None", "True", "False")},
        **{name: ("std:term", f"glossary.html#term-{name}")
           for name in ("sequence", "iterable", "function", "generator", "mapping")},
        "bltin-boolean-values": ("std:label", "library/stdtypes.html#bltin-boolean-values"),
    }),
    "numpy": ("https://numpy.org/doc/stable/", "stable", {
        "array_like": ("std:term", "glossary.html#term-array_like"),
        "numpy.ndarray": ("class", "reference/generated/numpy.ndarray.html#$"),
        "numpy.random.Generator": ("class", "reference/random/generator.html#$"),
        "numpy.random.default_rng": ("function", "reference/random/generator.html#$"),
        "numpy.typing.ArrayLike": ("data", "reference/typing.html#$"),
        "numpy.typing.NDArray": ("data", "reference/typing.html#$"),
        "numpy.bincount": ("function", "reference/generated/numpy.bincount.html#$"),
        "numpy.quantile": ("function", "reference/generated/numpy.quantile.html#$"),
        "numpy.log": ("data", "reference/generated/numpy.log.html#$"),
        "numpy.load": ("function", "reference/generated/numpy.load.html#$"),
        "numpy.savez": ("function", "reference/generated/numpy.savez.html#$"),
    }),
    "scipy": ("https://docs.scipy.org/doc/scipy/", "stable", {
        "scipy.special.softmax": ("function", "reference/generated/scipy.special.softmax.html#$"),
        "scipy.special.log_softmax": (
            "function", "reference/generated/scipy.special.log_softmax.html#$"),
        "scipy.special.logsumexp": (
            "function", "reference/generated/scipy.special.logsumexp.html#$"),
        "scipy.special.gammaln": ("data", "reference/generated/scipy.special.gammaln.html#$"),
        "scipy.special.digamma": ("data", "reference/generated/scipy.special.digamma.html#$"),
        "scipy.special.polygamma": (
            "function", "reference/generated/scipy.special.polygamma.html#$"),
        "scipy.optimize.minimize": (
            "function", "reference/generated/scipy.optimize.minimize.html#$"),
        "scipy.optimize.minimize_scalar": (
            "function", "reference/generated/scipy.optimize.minimize_scalar.html#$"),
        "scipy.stats.dirichlet": ("data", "reference/generated/scipy.stats.dirichlet.html#$"),
    }),
    "sklearn": ("https://scikit-learn.org/stable/", "stable", {
        **{f"sklearn.{name}": ("class", f"modules/generated/sklearn.{name}.html#$") for name in (
            "base.BaseEstimator", "base.ClassifierMixin", "calibration.CalibratedClassifierCV",
            "calibration.CalibrationDisplay", "model_selection.GridSearchCV",
            "model_selection.StratifiedKFold", "model_selection.KFold", "pipeline.Pipeline",
            "isotonic.IsotonicRegression", "linear_model.LogisticRegression",
            "naive_bayes.GaussianNB", "ensemble.RandomForestClassifier",
            "neural_network.MLPClassifier", "frozen.FrozenEstimator",
        )},
        **{f"sklearn.{name}": ("function", f"modules/generated/sklearn.{name}.html#$")
           for name in (
            "base.clone", "calibration.calibration_curve", "model_selection.train_test_split",
            "model_selection.cross_val_predict", "pipeline.make_pipeline", "metrics.log_loss",
            "metrics.brier_score_loss", "datasets.load_digits", "utils.validation.check_is_fitted",
        )},
        **{f"sklearn.base.BaseEstimator.{m}": (
            "method", "modules/generated/sklearn.base.BaseEstimator.html#$")
           for m in ("get_params", "set_params")},
        "sklearn.base.ClassifierMixin.score": (
            "method", "modules/generated/sklearn.base.ClassifierMixin.html#$"),
        "accuracy_score": ("std:label", "modules/model_evaluation.html#accuracy-score"),
    }),
    "matplotlib": ("https://matplotlib.org/stable/", "stable", {
        "matplotlib.axes.Axes": ("class", "api/_as_gen/matplotlib.axes.Axes.html#$"),
        "matplotlib.figure.Figure": ("class", "api/_as_gen/matplotlib.figure.Figure.html#$"),
        "matplotlib.pyplot.subplots": (
            "function", "api/_as_gen/matplotlib.pyplot.subplots.html#$"),
        "matplotlib.pyplot.show": ("function", "api/_as_gen/matplotlib.pyplot.show.html#$"),
    }),
    "arviz": ("https://python.arviz.org/en/stable/", "0.x", {
        **{f"arviz.{name}": ("function", f"api/generated/arviz.{name}.html#$") for name in (
            "plot_forest", "plot_trace", "summary", "ess", "rhat", "hdi", "from_dict",
            "from_netcdf", "to_netcdf",
        )},
        "arviz.InferenceData": ("class", "api/generated/arviz.InferenceData.html#$"),
    }),
    "pymc": ("https://www.pymc.io/projects/docs/en/stable/", "stable", {
        **{f"pymc.{name}": ("function", f"api/generated/pymc.{name}.html#$") for name in (
            "sample", "find_MAP", "sample_posterior_predictive", "Deterministic",
        )},
        "pymc.Model": ("class", "api/generated/pymc.Model.html#$"),
        **{f"pymc.{name}": ("class", f"api/distributions/generated/pymc.{name}.html#$")
           for name in ("Normal", "Dirichlet", "Flat", "Categorical")},
    }),
}


#: Titles of the labels above (what a reference to them shows).
_TITLES = {"bltin-boolean-values": "Boolean Values", "accuracy_score": "Accuracy score"}


def inventory_bytes(project: str, version: str, entries: dict[str, tuple[str, str]]) -> bytes:
    """One Sphinx inventory (format version 2) of ``entries`` ``{name: (role, uri)}``."""
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    lines = "".join(
        f"{name} {role if ':' in role else 'py:' + role} {'-1' if ':' in role else '1'} {uri} "
        f"{_TITLES.get(name, '-')}\n" for name, (role, uri) in sorted(entries.items()))
    return header + zlib.compress(lines.encode())


def write_inventories(directory: Path = HERE) -> dict[str, tuple[str, Path]]:
    """Write ``<project>.inv`` for every project; returns ``{project: (base URL, path)}``.

    A file is rewritten only when its content changes, so Sphinx's inventory
    cache stays valid between builds.
    """
    out = {}
    for project, (url, version, entries) in PROJECTS.items():
        path = directory / f"{project}.inv"
        data = inventory_bytes(project, version, entries)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
        out[project] = (url, path)
    return out
