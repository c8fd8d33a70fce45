"""Registry of calibration methods: one name per method, one factory.

The command line (``bayescal fit --method NAME``), the model files of
:mod:`bayescal.io` and :class:`bayescal.CalibratedClassifier` all name methods
through this table, so a method added here is available everywhere.

==================== ====================================================
name                 estimator
==================== ====================================================
``dirichlet``        ``DirichletCalibrator()``: MAP, structured penalty
                     centred on temperature scaling (the default)
``dirichlet-odir``   ``DirichletCalibrator(reg="odir")``, MAP, ODIR penalty
``dirichlet-l2``     ``DirichletCalibrator(reg="l2")``, MAP, L2 penalty
``generative``       ``GenerativeDirichletCalibrator``, DirGen by ML
``bayes``            ``BayesianDirichletCalibrator`` (PyMC, DirLin)
``bayes-generative`` ``BayesianGenerativeCalibrator`` (PyMC, DirGen)
``temperature``      ``TemperatureScaler`` (one parameter)
``vector``           ``VectorScaler()`` (diagonal W and b, penalised
                     towards temperature scaling)
``matrix``           ``MatrixScaler()`` (full W and b on logits, penalised
                     towards temperature scaling)
``sigmoid``          ``SigmoidCalibrator``: one-vs-rest Platt scaling
                     (scikit-learn's ``sigmoid``)
``isotonic``         ``IsotonicCalibrator``: one-vs-rest isotonic regression
                     (scikit-learn's ``isotonic``)
``beta``             ``BetaCalibrator``: one-vs-rest beta calibration
``binning``          ``BinningCalibrator``: one-vs-rest histogram binning
==================== ====================================================

The first entry, ``dirichlet``, is the recommended default (of
:class:`~bayescal.CalibratedClassifier`, the command line and the demo).

Estimator classes are imported only when a method is built, so the Bayesian
ones (PyMC) cost nothing until they are used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bayescal._validation import EPS, check_option
from bayescal.calibrators._base import CalibratorMixin

__all__ = ["METHODS", "MethodSpec", "ProbsToLogits", "make_calibrator", "method_name"]


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
            _spec("dirichlet", _CAL, "DirichletCalibrator",
                  "Dirichlet calibration, MAP with the structured penalty centred on "
                  "temperature scaling (recommended)", reg="structured"),
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
            _spec("vector", _CAL, "VectorScaler",
                  "vector scaling (diagonal W and b), penalised towards temperature scaling",
                  reg="structured"),
            _spec("matrix", _CAL, "MatrixScaler",
                  "matrix scaling (full W and b on logits), penalised towards temperature "
                  "scaling", reg="structured"),
            _spec("sigmoid", _CAL, "SigmoidCalibrator",
                  "one-vs-rest Platt scaling (scikit-learn's sigmoid method)"),
            _spec("isotonic", _CAL, "IsotonicCalibrator",
                  "one-vs-rest isotonic regression (scikit-learn's isotonic method)"),
            _spec("beta", _CAL, "BetaCalibrator", "one-vs-rest beta calibration"),
            _spec("binning", _CAL, "BinningCalibrator", "one-vs-rest histogram binning"),
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
        One of :data:`METHODS` (``"dirichlet"``, ``"dirichlet-odir"``, ``"dirichlet-l2"``,
        ``"generative"``, ``"bayes"``, ``"bayes-generative"``,
        ``"temperature"``, ``"vector"``, ``"matrix"``, ``"sigmoid"``,
        ``"isotonic"``, ``"beta"``, ``"binning"``).
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
    >>> make_calibrator("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown calibration method 'nope'; valid methods are: dirichlet, ...
    """
    spec = _get_spec(method)
    clash = sorted(set(params) & set(spec.fixed))
    if clash:
        raise ValueError(
            f"method {method!r} fixes {', '.join(f'{p}={spec.fixed[p]!r}' for p in clash)}; "
            f"got {', '.join(f'{p}={params[p]!r}' for p in clash)}"
        )
    cls = spec.load_class()
    kwargs = {**spec.fixed, **params}
    valid = set(cls().get_params(deep=False))
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise ValueError(
            f"method {method!r} ({cls.__name__}) has no parameter(s) {unknown}; "
            f"valid parameters are {sorted(valid | {'input'})}"
        )
    if "input" in valid:
        return cls(input=input, **kwargs)
    # a logits-only estimator (no ``input`` parameter)
    check_option(input, "input", ("probs", "logits"))
    if input == "logits":
        return cls(**kwargs)
    eps = kwargs.pop("eps", EPS) if "eps" not in valid else EPS
    return ProbsToLogits(cls(**kwargs), eps=eps)


class ProbsToLogits(CalibratorMixin):
    r"""Feed probabilities to a calibrator that takes logits only.

    Uses the log-probability features as logits,
    :math:`z = \max(\ln q, \ln\epsilon)` (:func:`bayescal.maps.log_features`),
    which is exact for every map of the family: ``softmax`` cannot see the
    per-row constant that separates true logits from ``ln q``. Built by
    :func:`make_calibrator` for ``input="probs"`` when the estimator class has
    no ``input`` parameter.

    Parameters
    ----------
    estimator : estimator
        Unfitted calibrator taking logits (its ``classes`` parameter, if any,
        names the columns).
    eps : float, default=EPS
        Probability floor before the logarithm.

    Attributes
    ----------
    estimator_ : estimator
        The fitted inner calibrator.
    coef_, intercept_ : ndarray
        ``W``, ``b`` of the fitted map on ``ln q`` (copied from ``estimator_``).
    classes_, n_features_in_
        As for every calibrator (``classes_`` is the inner calibrator's).
    """

    input = "probs"

    def __init__(self, estimator: Any = None, *, eps: float = EPS) -> None:
        self.estimator = estimator
        self.eps = eps

    def _z(self, scores: Any, *, reset: bool = False) -> Any:
        from bayescal._validation import check_eps, check_scores
        from bayescal.maps import log_features

        n = None if reset else self._check_n_columns(scores)
        q = check_scores(scores, kind="probs", n_classes=n)
        if not reset:
            self._check_feature_names(scores, reset=False)
        return log_features(q, kind="probs", eps=check_eps(self.eps))

    def fit(self, scores: Any, y: Any, sample_weight: Any = None) -> ProbsToLogits:
        """Fit the inner calibrator on ``z = max(ln q, ln eps)`` (weights passed on)."""
        from sklearn.base import clone

        z = self._z(scores, reset=True)
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        inner = clone(self.estimator).fit(z, y, **weights)
        self.estimator_ = inner
        self.n_features_in_ = z.shape[1]
        self.classes_ = inner.classes_
        self._check_feature_names(scores, reset=True)
        for name in ("coef_", "intercept_"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))
        return self

    def predict_proba(self, scores: Any) -> Any:
        """Calibrated probabilities of the inner calibrator."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(self._z(scores))

    def to_canonical(self) -> tuple[Any, Any]:
        """Canonical ``(A, c)`` of the fitted map, which acts on ``ln q``."""
        from sklearn.utils.validation import check_is_fitted

        from bayescal.maps import dirlin_to_canonical

        check_is_fitted(self, "estimator_")
        return dirlin_to_canonical(self.coef_, self.intercept_)

    def to_generative(self) -> tuple[Any, Any]:
        """DirGen ``(alpha, pi)`` of the fitted map."""
        from sklearn.utils.validation import check_is_fitted

        from bayescal.maps import dirlin_to_dirgen

        check_is_fitted(self, "estimator_")
        return dirlin_to_dirgen(self.coef_, self.intercept_)


def method_name(estimator: Any) -> str:
    """Registry name of a calibrator instance (inverse of :func:`make_calibrator`).

    Raises
    ------
    ValueError
        If the estimator's class and defining parameters match no method.
    """
    if isinstance(estimator, ProbsToLogits):
        return method_name(estimator.estimator)
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
