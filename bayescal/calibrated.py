"""Calibrate any scikit-learn classifier in one line: :class:`CalibratedClassifier`."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.model_selection import check_cv
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, indexable

from bayescal.calibrators.registry import METHODS, make_calibrator

__all__ = ["CalibratedClassifier"]


class CalibratedClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A classifier whose probabilities are calibrated by a bayescal method.

    Works like scikit-learn's ``CalibratedClassifierCV``: the classifier's
    scores on data it was not trained on are used to fit a calibration map
    (Dirichlet calibration by default), which is then applied to every
    prediction. Any method of :mod:`bayescal.calibrators.registry` can be
    chosen with ``method``, so the estimator drops into a ``Pipeline`` or a
    ``GridSearchCV`` unchanged.

    Scores are the classifier's ``predict_proba`` (``input="probs"``), or its
    ``decision_function`` treated as logits (``input="logits"``; a binary
    decision value ``d`` becomes the logits ``(0, d)``) when it has no
    ``predict_proba``.

    Parameters
    ----------
    estimator : classifier, default=None
        The classifier to calibrate; ``None`` means
        ``LogisticRegression()``.
    method : str, default="dirichlet"
        Registry name of the calibrator (:data:`bayescal.calibrators.registry.METHODS`):
        ``"dirichlet"`` (the structured penalty centred on temperature
        scaling, recommended), ``"dirichlet-odir"``, ``"dirichlet-l2"``,
        ``"generative"``, ``"bayes"``, ``"bayes-generative"``,
        ``"temperature"``, ``"vector"`` or ``"matrix"``.
    cv : int, cross-validation splitter, iterable or "prefit", default=5
        How held-out scores are produced. With an int or splitter
        (stratified ``StratifiedKFold(cv)`` for an int), a clone of
        ``estimator`` is fitted on each training fold and scores its held-out
        fold; the calibrator is fitted once on all ``n`` out-of-fold scores,
        and the final classifier is ``estimator`` refitted on all the data.
        With ``"prefit"``, ``estimator`` must already be fitted and all of
        ``X`` is used for calibration.
    calibrator_params : dict, default=None
        Further parameters of the calibrator (e.g. ``{"reg_lambda": 1e-2}``
        or ``{"sampler": "laplace"}``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (sorted, as ``LabelEncoder`` orders them).
    estimator_ : classifier
        The fitted classifier used at prediction time.
    calibrator_ : estimator
        The fitted calibration map.
    input_ : {"probs", "logits"}
        Which scores of ``estimator_`` are calibrated.
    n_features_in_ : int
        Number of features seen by the classifier (when it reports it).

    Notes
    -----
    Single refit rather than an ensemble: scikit-learn's ``ensemble=True``
    keeps one (classifier, calibrator) pair per fold, each calibrator fitted
    on only ``n / cv`` held-out scores. A Dirichlet map has ``k (k + 1)``
    parameters, so bayescal fits one calibrator on all ``n`` cross-fitted
    scores (``ensemble=False`` in scikit-learn's terms, the protocol of the
    Dirichlet calibration paper) and predicts with a single classifier, which
    is also ``cv`` times cheaper at prediction time. The refitted classifier
    has seen more data than the fold models whose scores trained the
    calibrator, usually a small, slightly conservative mismatch.

    Every class must have at least ``cv`` samples so that each training fold
    contains every class.

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
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        method: str = "dirichlet",
        cv: Any = 5,
        calibrator_params: dict[str, Any] | None = None,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.cv = cv
        self.calibrator_params = calibrator_params

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

    def _scores(self, estimator: Any, X: Any, kind: str) -> NDArray[np.float64]:
        """Scores of ``estimator`` on ``X`` as (n, n_classes), columns in ``classes_`` order."""
        k = len(self.classes_)
        cols = np.searchsorted(self.classes_, estimator.classes_)
        if kind == "probs":
            raw = np.asarray(estimator.predict_proba(X), dtype=np.float64)
            out = np.zeros((raw.shape[0], k))
            out[:, cols] = raw
            return out
        raw = np.asarray(estimator.decision_function(X), dtype=np.float64)
        if raw.ndim == 1:
            raw = np.column_stack([np.zeros_like(raw), raw])
        if len(cols) != k:
            missing = np.setdiff1d(self.classes_, estimator.classes_)
            raise ValueError(
                f"the classifier never saw classes {missing.tolist()} and has no predict_proba; "
                "its decision values cannot be mapped to every class"
            )
        out = np.empty_like(raw)
        out[:, cols] = raw
        return out

    # -- fit / predict --------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params: Any) -> CalibratedClassifier:
        """Fit the classifier and the calibration map.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, in whatever form ``estimator`` accepts.
        y : array-like of shape (n_samples,)
            Class labels.
        **fit_params
            Passed to ``estimator.fit``.

        Returns
        -------
        self : CalibratedClassifier
        """
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise ValueError(
                f"unknown calibration method {self.method!r}; valid methods are: "
                f"{', '.join(METHODS)}"
            )
        if self.calibrator_params is not None and not isinstance(self.calibrator_params, dict):
            raise ValueError(
                f"calibrator_params must be a dict or None; got {self.calibrator_params!r}"
            )
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        X, y = indexable(X, y)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y; got {len(self.classes_)} "
                f"class: {self.classes_.tolist()}"
            )
        y_enc = encoder.transform(y)
        base = self._base()
        kind = self._input_kind(base)

        if isinstance(self.cv, str):
            if self.cv != "prefit":
                raise ValueError(f"cv must be an int, a splitter or 'prefit'; got {self.cv!r}")
            check_is_fitted(base)
            unknown = np.setdiff1d(self.classes_, base.classes_)
            if unknown.size:
                raise ValueError(
                    f"y has classes {unknown.tolist()} that the prefit classifier does not know "
                    f"(its classes_: {np.asarray(base.classes_).tolist()})"
                )
            self.classes_ = np.asarray(base.classes_)
            y_enc = np.searchsorted(self.classes_, y)
            self.estimator_ = base
            scores = self._scores(base, X, kind)
        else:
            cv = check_cv(self.cv, y, classifier=True)
            n_splits = cv.get_n_splits(X, y)
            counts = np.bincount(y_enc)
            if isinstance(self.cv, int) and counts.min() < n_splits:
                j = int(np.argmin(counts))
                raise ValueError(
                    f"cv={self.cv} needs at least {n_splits} samples of every class; class "
                    f"{self.classes_[j]!r} has {counts[j]}"
                )
            scores = np.empty((len(y), len(self.classes_)))
            seen = np.zeros(len(y), dtype=bool)
            for train, test in cv.split(X, y):
                fold = clone(base).fit(_take(X, train), y[train], **fit_params)
                scores[test] = self._scores(fold, _take(X, test), kind)
                seen[test] = True
            if not seen.all():
                raise ValueError(
                    f"the cv splitter left {int((~seen).sum())} samples out of every test fold; "
                    "each sample needs one held-out score"
                )
            self.estimator_ = clone(base).fit(X, y, **fit_params)
        self.input_ = kind
        params = dict(self.calibrator_params or {})
        self.calibrator_ = make_calibrator(self.method, input=kind, **params).fit(scores, y_enc)
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        if hasattr(self.estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.estimator_.feature_names_in_
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Calibrated class probabilities, columns in ``classes_`` order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, ("calibrator_", "estimator_"))
        return self.calibrator_.predict_proba(self._scores(self.estimator_, X, self.input_))

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Most probable class under the calibrated probabilities."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        base_tags = clone(self._base()).__sklearn_tags__()
        tags.input_tags = base_tags.input_tags
        return tags


def _take(X: Any, idx: NDArray[np.intp]) -> Any:
    """Rows ``idx`` of X (arrays, sparse matrices, DataFrames or lists)."""
    from sklearn.utils import _safe_indexing

    return _safe_indexing(X, idx)
