"""Calibrate any scikit-learn classifier in one line: :class:`CalibratedClassifier`."""

from __future__ import annotations

import inspect
import warnings
from numbers import Integral
from typing import Any

import numpy as np
import sklearn
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.model_selection import check_cv
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import Bunch, _safe_indexing
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, column_or_1d, indexable

from bayescal._validation import check_option, check_sample_weight
from bayescal.calibrators.registry import METHODS, make_calibrator

try:  # scikit-learn >= 1.6
    from sklearn.frozen import FrozenEstimator
except ImportError:  # pragma: no cover - scikit-learn 1.5
    FrozenEstimator = None

__all__ = ["CalibratedClassifier"]


class CalibratedClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A classifier whose probabilities are calibrated by a bayescal method.

    Works like scikit-learn's ``CalibratedClassifierCV``: the classifier's
    scores on data it was not trained on are used to fit a calibration map
    (Dirichlet calibration by default), which is then applied to every
    prediction. Any method of :mod:`bayescal.calibrators.registry` can be
    chosen with ``method`` (``"sigmoid"`` and ``"isotonic"`` are
    scikit-learn's), so the estimator drops into a ``Pipeline`` or a
    ``GridSearchCV`` unchanged.

    Scores are the classifier's ``predict_proba`` (``input="probs"``), or its
    ``decision_function`` treated as logits (``input="logits"``; a binary
    decision value ``d`` becomes the logits ``(0, d)``) when it has no
    ``predict_proba``.

    Parameters
    ----------
    estimator : classifier, default=None
        The classifier to calibrate; ``None`` means ``LogisticRegression()``.
        An already fitted classifier wrapped in
        :class:`sklearn.frozen.FrozenEstimator` is used as it is: the data
        passed to ``fit`` (which must not be its training data) only fit the
        calibrator.
    method : str, default="dirichlet"
        Registry name of the calibrator (:data:`bayescal.calibrators.registry.METHODS`):
        ``"dirichlet"`` (the structured penalty centred on temperature
        scaling, recommended), ``"dirichlet-odir"``, ``"dirichlet-l2"``,
        ``"generative"``, ``"bayes"``, ``"bayes-generative"``,
        ``"temperature"``, ``"vector"``, ``"matrix"``, ``"sigmoid"``,
        ``"isotonic"``, ``"beta"`` or ``"binning"``.
    cv : int, cross-validation splitter or iterable, default=5
        How held-out scores are produced: a clone of ``estimator`` is fitted
        on each training fold and scores its held-out fold (an int means
        ``StratifiedKFold(cv)``). Ignored for a ``FrozenEstimator`` unless
        ``ensemble=True``. ``"prefit"`` is deprecated: wrap the fitted
        classifier in ``FrozenEstimator`` instead (scikit-learn 1.8 removed
        ``"prefit"`` from ``CalibratedClassifierCV``).
    calibrator_params : dict, default=None
        Further parameters of the calibrator (e.g. ``{"reg_lambda": 1e-2}``
        or ``{"sampler": "laplace"}``).
    ensemble : bool or "auto", default=False
        ``False``: one calibrator fitted on all ``n`` out-of-fold scores and
        the classifier refitted on all the data (see Notes). ``True``: as
        ``CalibratedClassifierCV(ensemble=True)``, one (classifier,
        calibrator) pair per fold, the calibrator fitted on that fold's
        held-out scores; predictions average the pairs' calibrated
        probabilities. ``"auto"``: scikit-learn's default, ``True`` unless the
        estimator is a ``FrozenEstimator``.
    n_jobs : int, default=None
        Folds fitted in parallel (joblib, :mod:`sklearn.utils.parallel`);
        ``None`` means 1 unless in a ``joblib.parallel_backend`` context,
        ``-1`` all processors.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (sorted, as ``LabelEncoder`` orders them; those of the
        classifier for a ``FrozenEstimator``).
    calibrated_classifiers_ : list of (classifier, calibrator) pairs
        The fitted pairs whose calibrated probabilities are averaged: one
        pair unless ``ensemble``.
    estimator_ : classifier
        The fitted classifier used at prediction time (not with ``ensemble``).
    calibrator_ : estimator
        The fitted calibration map (not with ``ensemble``).
    input_ : {"probs", "logits"}
        Which scores of the classifier are calibrated.
    n_features_in_ : int
        Number of features seen by the classifier (when it reports it).
    feature_names_in_ : ndarray of str
        Feature names seen by the classifier (when it reports them).

    Notes
    -----
    Single refit by default rather than an ensemble: scikit-learn's
    ``ensemble=True`` keeps one (classifier, calibrator) pair per fold, each
    calibrator fitted on only ``n / cv`` held-out scores. A Dirichlet map has
    ``k (k + 1)`` parameters, so bayescal fits one calibrator on all ``n``
    cross-fitted scores (``ensemble=False`` in scikit-learn's terms, the
    protocol of the Dirichlet calibration paper) and predicts with a single
    classifier, which is also ``cv`` times cheaper at prediction time. The
    refitted classifier has seen more data than the fold models whose scores
    trained the calibrator, usually a small, slightly conservative mismatch.

    Every class must have at least ``cv`` samples so that each training fold
    contains every class.

    ``sample_weight`` is sliced per fold and passed to the classifier's
    ``fit`` (when it takes one; otherwise with scikit-learn's warning) and to
    the calibrator. With metadata routing enabled
    (``sklearn.set_config(enable_metadata_routing=True)``) the classifier
    receives only what it requested (``set_fit_request``), the splitter what
    its ``split`` requested (e.g. ``groups``), and the calibrator always the
    weights. The Bayesian methods take no weights (a weighted likelihood is
    not a model of the data).

    References
    ----------
    .. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
       P. Flach. "Beyond temperature scaling: Obtaining well-calibrated
       multiclass probabilities with Dirichlet calibration". NeurIPS 2019.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from bayescal import CalibratedClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedClassifier(GaussianNB(), method="temperature", cv=3).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)

    An already trained model:

    >>> from sklearn.frozen import FrozenEstimator
    >>> nb = GaussianNB().fit(X[::2], y[::2])
    >>> cal = CalibratedClassifier(FrozenEstimator(nb), method="sigmoid").fit(X[1::2], y[1::2])
    >>> cal.estimator_ is cal.estimator
    True
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        method: str = "dirichlet",
        cv: Any = 5,
        calibrator_params: dict[str, Any] | None = None,
        ensemble: bool | str = False,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.cv = cv
        self.calibrator_params = calibrator_params
        self.ensemble = ensemble
        self.n_jobs = n_jobs

    # -- helpers ------------------------------------------------------------
    def _base(self) -> Any:
        if self.estimator is None:
            from sklearn.linear_model import LogisticRegression

            return LogisticRegression()
        return self.estimator

    @staticmethod
    def _input_kind(estimator: Any) -> str:
        if hasattr(estimator, "predict_proba"):
            return "probs"
        if hasattr(estimator, "decision_function"):
            return "logits"
        raise ValueError(
            f"{type(estimator).__name__} has neither predict_proba nor decision_function; "
            "it cannot be calibrated"
        )

    def _check_params(self) -> tuple[bool | str, int | None]:
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise ValueError(
                f"unknown calibration method {self.method!r}; valid methods are: "
                f"{', '.join(METHODS)}"
            )
        if self.calibrator_params is not None and not isinstance(self.calibrator_params, dict):
            raise ValueError(
                f"calibrator_params must be a dict or None; got {self.calibrator_params!r}"
            )
        ensemble = check_option(self.ensemble, "ensemble", (False, True, "auto"))
        if self.n_jobs is not None and (
            isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, Integral)
            or self.n_jobs == 0
        ):
            raise ValueError(f"n_jobs must be None or a non-zero integer; got {self.n_jobs!r}")
        if isinstance(self.cv, str) and self.cv != "prefit":
            raise ValueError(f"cv must be an int, a splitter or an iterable; got {self.cv!r}")
        return ensemble, self.n_jobs

    def _frozen(self, base: Any) -> tuple[Any, bool]:
        """The classifier to use and whether it is already fitted (frozen)."""
        if isinstance(self.cv, str):  # "prefit", checked in _check_params
            warnings.warn(
                "cv='prefit' is deprecated and will be removed in a future release "
                "(scikit-learn 1.8 removed it from CalibratedClassifierCV): wrap the fitted "
                "classifier instead, CalibratedClassifier(FrozenEstimator(clf)) with "
                "FrozenEstimator from sklearn.frozen",
                FutureWarning,
                stacklevel=3,
            )
            return base, True
        return base, FrozenEstimator is not None and isinstance(base, FrozenEstimator)

    def get_metadata_routing(self) -> MetadataRouter:
        """How ``fit`` routes metadata: to the classifier's ``fit`` and the splitter's ``split``.

        The estimator itself consumes ``sample_weight`` (for the calibrator).
        Used when ``sklearn.set_config(enable_metadata_routing=True)``.
        """
        router = MetadataRouter(owner=self).add_self_request(self).add(
            estimator=self._base(),
            method_mapping=MethodMapping().add(caller="fit", callee="fit"),
        )
        if not isinstance(self.cv, str):
            router.add(
                splitter=check_cv(self.cv, classifier=True),
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        return router

    def _route(self, base: Any, sample_weight: Any, fit_params: dict[str, Any]) -> Bunch:
        if sklearn.get_config().get("enable_metadata_routing", False):
            routed = process_routing(self, "fit", sample_weight=sample_weight, **fit_params)
            if "splitter" not in routed:
                routed.splitter = Bunch(split={})
            return routed
        fit_kwargs = dict(fit_params)
        if sample_weight is not None:
            if "sample_weight" in inspect.signature(base.fit).parameters:
                fit_kwargs["sample_weight"] = sample_weight
            else:
                warnings.warn(
                    f"Since {type(base).__name__} does not appear to accept sample_weight, "
                    "sample weights will only be used for the calibration itself",
                    UserWarning,
                    stacklevel=3,
                )
        return Bunch(estimator=Bunch(fit=fit_kwargs), splitter=Bunch(split={}))

    def _calibrator(self, kind: str, sample_weight: Any) -> Any:
        calibrator = make_calibrator(self.method, input=kind, **dict(self.calibrator_params or {}))
        if sample_weight is not None and (
            "sample_weight" not in inspect.signature(calibrator.fit).parameters
            # the Bayesian calibrators name it only to refuse it with a reason
            or not getattr(calibrator, "_takes_sample_weight", True)
        ):
            raise ValueError(
                f"method {self.method!r} ({type(calibrator).__name__}) does not take "
                "sample_weight; fit without weights or choose another method"
            )
        return calibrator

    # -- fit / predict --------------------------------------------------------
    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, **fit_params: Any
    ) -> CalibratedClassifier:
        """Fit the classifier and the calibration map.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, in whatever form ``estimator`` accepts.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), optional
            Weights of the samples, sliced per fold and given to the
            classifier and to the calibrator (see Notes).
        **fit_params
            Passed to ``estimator.fit`` (sliced per fold where they have one
            entry per sample); with metadata routing enabled, routed as
            requested.

        Returns
        -------
        self : CalibratedClassifier
        """
        ensemble, n_jobs = self._check_params()
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        X, y = indexable(X, y)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        sw = None if sample_weight is None else check_sample_weight(
            sample_weight, n_samples=len(y)
        )
        encoder = LabelEncoder().fit(y)
        classes = encoder.classes_
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y; got {len(classes)} "
                f"class: {classes.tolist()}"
            )
        base, frozen = self._frozen(self._base())
        kind = self._input_kind(base)
        if ensemble == "auto":
            ensemble = not frozen
        if ensemble and isinstance(self.cv, str):
            raise ValueError(
                "ensemble=True needs cross-validation folds; cv='prefit' has none (wrap the "
                "classifier in FrozenEstimator and give cv to calibrate it fold by fold)"
            )
        make_cal = self._calibrator(kind, sw)  # unfitted; refuses weights it cannot take
        routed = self._route(base, sw, fit_params)

        if frozen:
            check_is_fitted(base)
            unknown = np.setdiff1d(classes, base.classes_)
            if unknown.size:
                raise ValueError(
                    f"y has classes {unknown.tolist()} that the prefit classifier does not know "
                    f"(its classes_: {np.asarray(base.classes_).tolist()})"
                )
            classes = np.asarray(base.classes_)
        y_enc = np.searchsorted(classes, y)

        if frozen and not ensemble:
            scores = _scores(base, X, kind, classes)
            pairs = [(base, _fit_calibrator(make_cal, scores, y_enc, sw))]
        else:
            splits = self._splits(X, y, y_enc, classes, routed.splitter.split)
            fold_params = routed.estimator.fit
            folds = Parallel(n_jobs=n_jobs)(
                delayed(_fit_fold)(
                    base if frozen else clone(base), X, y, train, test, fold_params, kind,
                    classes, make_cal if ensemble else None, y_enc, sw, refit=not frozen,
                )
                for train, test in splits
            )
            if ensemble:
                pairs = [(clf, cal) for clf, cal, _ in folds]
            else:
                scores = np.empty((len(y), len(classes)))
                seen = np.zeros(len(y), dtype=bool)
                for (_, test), (_, _, fold_scores) in zip(splits, folds, strict=True):
                    scores[test] = fold_scores
                    seen[test] = True
                if not seen.all():
                    raise ValueError(
                        f"the cv splitter left {int((~seen).sum())} samples out of every test "
                        "fold; each sample needs one held-out score"
                    )
                final = clone(base).fit(X, y, **fold_params)
                pairs = [(final, _fit_calibrator(make_cal, scores, y_enc, sw))]

        self.classes_ = classes
        self.input_ = kind
        self.calibrated_classifiers_ = pairs
        for name in ("estimator_", "calibrator_", "n_features_in_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        if len(pairs) == 1 and not ensemble:
            self.estimator_, self.calibrator_ = pairs[0]
        first = pairs[0][0]
        if hasattr(first, "n_features_in_"):
            self.n_features_in_ = first.n_features_in_
        if hasattr(first, "feature_names_in_"):
            self.feature_names_in_ = first.feature_names_in_
        return self

    def _splits(
        self, X: Any, y: Any, y_enc: NDArray[np.intp], classes: Any, split_params: dict
    ) -> list[tuple[Any, Any]]:
        cv = check_cv(self.cv, y, classifier=True)
        n_splits = cv.get_n_splits(X, y, **split_params)
        counts = np.bincount(y_enc, minlength=len(classes))
        if isinstance(self.cv, Integral) and counts.min() < n_splits:
            j = int(np.argmin(counts))
            raise ValueError(
                f"cv={self.cv} needs at least {n_splits} samples of every class; class "
                f"{classes[j]!r} has {counts[j]}"
            )
        return list(cv.split(X, y, **split_params))

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Calibrated class probabilities, columns in ``classes_`` order.

        With several (classifier, calibrator) pairs (``ensemble``), the mean of
        their calibrated probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "calibrated_classifiers_")
        total = None
        for clf, cal in self.calibrated_classifiers_:
            p = cal.predict_proba(_scores(clf, X, self.input_, self.classes_))
            total = p if total is None else total + p
        return total / len(self.calibrated_classifiers_)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Most probable class under the calibrated probabilities."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        base_tags = clone(self._base()).__sklearn_tags__()
        tags.input_tags = base_tags.input_tags
        return tags


def _scores(estimator: Any, X: Any, kind: str, classes: Any) -> NDArray[np.float64]:
    """Scores of ``estimator`` on ``X`` as (n, n_classes), columns in ``classes`` order."""
    k = len(classes)
    cols = np.searchsorted(classes, estimator.classes_)
    if kind == "probs":
        raw = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        out = np.zeros((raw.shape[0], k))
        out[:, cols] = raw
        return out
    raw = np.asarray(estimator.decision_function(X), dtype=np.float64)
    if raw.ndim == 1:
        raw = np.column_stack([np.zeros_like(raw), raw])
    if len(cols) != k:
        missing = np.setdiff1d(classes, estimator.classes_)
        raise ValueError(
            f"the classifier never saw classes {missing.tolist()} and has no predict_proba; "
            "its decision values cannot be mapped to every class"
        )
    out = np.empty_like(raw)
    out[:, cols] = raw
    return out


def _fit_calibrator(calibrator: Any, scores: Any, y_enc: Any, sw: Any) -> Any:
    weights = {} if sw is None else {"sample_weight": sw}
    return clone(calibrator).fit(scores, y_enc, **weights)


def _fold_params(params: dict[str, Any], n: int, idx: NDArray[np.intp]) -> dict[str, Any]:
    """Rows ``idx`` of every parameter with one entry per sample; others unchanged."""
    out = {}
    for key, value in params.items():
        if hasattr(value, "__len__") and not isinstance(value, str | dict) and len(value) == n:
            out[key] = _safe_indexing(value, idx)
        else:
            out[key] = value
    return out


def _fit_fold(
    estimator: Any, X: Any, y: Any, train: Any, test: Any, fit_params: dict[str, Any],
    kind: str, classes: Any, calibrator: Any, y_enc: Any, sw: Any, *, refit: bool,
) -> tuple[Any, Any, NDArray[np.float64]]:
    """Fit one fold: the classifier on ``train`` (unless frozen); scores and calibrator on
    ``test``."""
    if refit:
        estimator.fit(_safe_indexing(X, train), y[train],
                      **_fold_params(fit_params, len(y), train))
    scores = _scores(estimator, _safe_indexing(X, test), kind, classes)
    fitted = None
    if calibrator is not None:
        fitted = _fit_calibrator(calibrator, scores, y_enc[test],
                                 None if sw is None else sw[test])
    return estimator, fitted, scores
