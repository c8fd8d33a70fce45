"""Registry of calibration methods: one name per method, one factory.

The command line (``bayescal fit --method NAME``), the model files of
:mod:`bayescal.io` and :class:`bayescal.CalibratedClassifier` all name methods
through this table, so a method added here is available everywhere.

==================== ====================================================
name                 estimator
==================== ====================================================
``dirichlet-odir``   ``DirichletCalibrator(reg="odir")``, MAP, ODIR penalty
``dirichlet-l2``     ``DirichletCalibrator(reg="l2")``, MAP, L2 penalty
``generative``       ``GenerativeDirichletCalibrator``, DirGen by ML
``bayes``            ``BayesianDirichletCalibrator`` (PyMC, DirLin)
``bayes-generative`` ``BayesianGenerativeCalibrator`` (PyMC, DirGen)
``temperature``      ``TemperatureScaler`` (one parameter)
``vector``           ``VectorScaler`` (diagonal W and b)
``matrix``           ``MatrixScaler`` (full W and b, unpenalised)
==================== ====================================================

Estimator classes are imported only when a method is built, so the Bayesian
ones (PyMC) cost nothing until they are used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["METHODS", "MethodSpec", "make_calibrator", "method_name"]


@dataclass(frozen=True)
class MethodSpec:
    """How to build one registered method.

    Attributes
    ----------
    name : str
        Registry name (``bayescal fit --method NAME``).
    module, class_name : str
        Where the estimator class lives (imported on first use).
    fixed : mapping
        Parameters that define the method (e.g. ``reg="odir"``); a caller may
        not override them.
    bayesian : bool
        True when the fitted estimator holds a posterior, saved as netCDF
        beside the JSON model file.
    summary : str
        One line for ``--help`` and the docs.
    """

    name: str
    module: str
    class_name: str
    fixed: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    bayesian: bool = False
    summary: str = ""

    def load_class(self) -> type:
        """Import and return the estimator class."""
        try:
            module = importlib.import_module(self.module)
            return getattr(module, self.class_name)
        except (ImportError, AttributeError) as exc:
            raise ImportError(
                f"method {self.name!r} needs {self.module}.{self.class_name}, which "
                f"could not be imported: {exc}"
            ) from exc


def _spec(name: str, module: str, cls: str, summary: str, *, bayesian: bool = False,
          **fixed: Any) -> MethodSpec:
    return MethodSpec(name, module, cls, MappingProxyType(fixed), bayesian, summary)


_CAL = "bayescal.calibrators"
_BAYES = "bayescal.bayes"

#: Registered methods, by name.
METHODS: MappingProxyType = MappingProxyType(
    {
        s.name: s
        for s in (
            _spec("dirichlet-odir", _CAL, "DirichletCalibrator",
                  "Dirichlet calibration, MAP with the ODIR penalty", reg="odir"),
            _spec("dirichlet-l2", _CAL, "DirichletCalibrator",
                  "Dirichlet calibration, MAP with the L2 penalty", reg="l2"),
            _spec("generative", _CAL, "GenerativeDirichletCalibrator",
                  "Dirichlet calibration, generative form fitted by maximum likelihood"),
            _spec("bayes", _BAYES, "BayesianDirichletCalibrator",
                  "Bayesian Dirichlet calibration (linear form, PyMC)", bayesian=True),
            _spec("bayes-generative", _BAYES, "BayesianGenerativeCalibrator",
                  "Bayesian Dirichlet calibration (generative form, PyMC)", bayesian=True),
            _spec("temperature", _CAL, "TemperatureScaler", "temperature scaling (one parameter)"),
            _spec("vector", _CAL, "VectorScaler", "vector scaling (diagonal W and b)"),
            _spec("matrix", _CAL, "MatrixScaler", "matrix scaling (full W and b, no penalty)"),
        )
    }
)


def _get_spec(method: Any) -> MethodSpec:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(
            f"unknown calibration method {method!r}; valid methods are: "
            f"{', '.join(METHODS)}"
        )
    return METHODS[method]


def make_calibrator(method: str, *, input: str = "probs", **params: Any) -> Any:
    """Build an unfitted calibrator by registry name.

    Parameters
    ----------
    method : str
        One of :data:`METHODS` (``"dirichlet-odir"``, ``"dirichlet-l2"``,
        ``"generative"``, ``"bayes"``, ``"bayes-generative"``,
        ``"temperature"``, ``"vector"``, ``"matrix"``).
    input : {"probs", "logits"}, default="probs"
        What the scores given to ``fit`` / ``predict_proba`` hold.
    **params
        Further constructor parameters of the estimator (e.g.
        ``reg_lambda=1e-2`` or ``sampler="laplace"``). Parameters that define
        the method (``reg`` for the Dirichlet ones) cannot be overridden.

    Returns
    -------
    estimator
        An unfitted scikit-learn style calibrator.

    Raises
    ------
    ValueError
        For an unknown method name, a parameter the estimator does not take,
        or an attempt to override a defining parameter.

    Examples
    --------
    >>> from bayescal.calibrators.registry import make_calibrator
    >>> make_calibrator("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown calibration method 'nope'; valid methods are: dirichlet-odir, ...
    """
    spec = _get_spec(method)
    clash = sorted(set(params) & set(spec.fixed))
    if clash:
        raise ValueError(
            f"method {method!r} fixes {', '.join(f'{p}={spec.fixed[p]!r}' for p in clash)}; "
            f"got {', '.join(f'{p}={params[p]!r}' for p in clash)}"
        )
    cls = spec.load_class()
    kwargs = {"input": input, **spec.fixed, **params}
    valid = set(cls().get_params(deep=False)) if hasattr(cls, "get_params") else None
    if valid is not None:
        unknown = sorted(set(kwargs) - valid)
        if unknown:
            raise ValueError(
                f"method {method!r} ({cls.__name__}) has no parameter(s) {unknown}; "
                f"valid parameters are {sorted(valid)}"
            )
    return cls(**kwargs)


def method_name(estimator: Any) -> str:
    """Registry name of a calibrator instance (inverse of :func:`make_calibrator`).

    Raises
    ------
    ValueError
        If the estimator's class and defining parameters match no method.
    """
    cls = type(estimator)
    params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
    for spec in METHODS.values():
        if cls.__name__ != spec.class_name:
            continue
        try:
            if spec.load_class() is not cls:
                continue
        except ImportError:
            continue
        if all(params.get(p) == v for p, v in spec.fixed.items()):
            return spec.name
    raise ValueError(
        f"{cls.__module__}.{cls.__name__} with parameters {params} is not a registered "
        f"calibration method; valid methods are: {', '.join(METHODS)}"
    )
