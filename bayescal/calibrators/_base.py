"""Shared estimator plumbing of every calibrator.

:class:`CalibratorMixin` is the one place where a calibrator reads its labels,
sample weights and feature names (every calibrator of bayescal derives from
it): labels are mapped to score columns by
:func:`bayescal._validation.encode_labels` (or by the ``classes`` parameter),
``classes_`` holds them, ``predict`` returns them, and ``transform`` output
columns are named ``proba_<class>`` (``get_feature_names_out``, so
``set_output(transform="pandas")`` works). A fit validates everything before
it writes any fitted attribute, so a refit that fails leaves a fitted
estimator as it was.

:class:`FamilyCalibratorMixin` adds the prediction side of the Dirichlet
family. Every map in the family is ``softmax(W x + b)`` on a feature vector ``x`` of
the scores, so the estimators share one ``predict_proba``: subclasses only fit
``coef_`` (W, shape (k, k)) and ``intercept_`` (b, shape (k,)).

Features (``_feature_space``):

* ``"log"``: ``x = max(ln q, ln eps)``; from logits ``x = log_softmax(z)``
  floored the same way (:func:`bayescal.maps.log_features`). Used by Dirichlet
  and temperature scaling, for which logits and their softmax give the same
  fit.
* ``"raw"``: the logits ``z`` themselves when ``input="logits"`` (vector and
  matrix scaling of Guo et al. act on logits, and are not invariant to a
  per-row shift of ``z``), else ``ln q`` as above.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    check_eps,
    check_option,
    check_raw_logits,
    check_sample_weight,
    check_scores,
    encode_labels,
    warn_sparse_classes,
)
from bayescal.maps import (
    dirlin_from_features,
    dirlin_to_canonical,
    dirlin_to_dirgen,
    log_features,
)

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.5
    _sk_validate_data = None

__all__ = ["CalibratorMixin", "FamilyCalibratorMixin", "FitData", "check_input_params"]


def check_input_params(estimator: Any) -> None:
    """Validate the ``input`` and ``eps`` parameters shared by all calibrators.

    ``eps="auto"`` is accepted by estimators that choose their floor in
    ``fit`` (``_eps_auto = True``) and store it as ``eps_``; the words of
    ``_eps_words`` (default ``("auto",)``) by those that take more.
    """
    check_option(estimator.input, "input", ("probs", "logits"))
    words = (getattr(estimator, "_eps_words", ("auto",))
             if getattr(estimator, "_eps_auto", False) else ())
    if isinstance(estimator.eps, str) and words:
        if estimator.eps not in words:
            raise ValueError(f"eps must be a float in (0, 1) or one of {list(words)}; "
                             f"got {estimator.eps!r}")
        return
    check_eps(estimator.eps)


class FitData(NamedTuple):
    """Validated training data of one ``fit``, not yet written to the estimator.

    Attributes
    ----------
    scores : object
        The scores as given (kept for their feature names).
    x : ndarray of shape (n_samples, n_classes)
        Validated scores or features of the estimator.
    y : ndarray of shape (n_samples,), intp
        Column index of each label.
    sample_weight : ndarray of shape (n_samples,)
        Validated weights (ones when none were given).
    classes : ndarray of shape (n_classes,)
        The label of each score column.
    """

    scores: Any
    x: NDArray[np.float64]
    y: NDArray[np.intp]
    sample_weight: NDArray[np.float64]
    classes: NDArray[Any]


class CalibratorMixin(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Labels, sample weights, feature names and predictions of every calibrator.

    A calibrator maps scores of shape ``(n_samples, n_classes)`` to calibrated
    probabilities of the same shape, so score column ``j`` and output column
    ``j`` belong to the same class, ``classes_[j]``.

    Labels (:func:`bayescal._validation.encode_labels`): with the estimator's
    ``classes`` parameter set, ``classes[j]`` names column ``j``; otherwise
    the sorted distinct labels of ``y`` when there are as many as score
    columns (so strings, ``1..3`` or ``{0, 2, 5}`` work), and the integer
    column codes ``0 .. k-1`` when a class is absent from ``y``.

    Subclasses validate their data with :meth:`_fit_data` (which writes
    nothing), compute the fit, and only then call :meth:`_set_fit_data` and
    set their own fitted attributes.
    """

    # -- labels and fitted data ---------------------------------------------
    def _encode_labels(
        self, y: ArrayLike, *, n_samples: int, n_classes: int
    ) -> tuple[NDArray[Any], NDArray[np.intp]]:
        """Classes and column codes of ``y`` (the ``classes`` parameter, if any, decides)."""
        return encode_labels(
            y, n_samples=n_samples, n_classes=n_classes, classes=getattr(self, "classes", None)
        )

    def _make_fit_data(
        self, scores: Any, x: NDArray[np.float64], y: ArrayLike, sample_weight: ArrayLike | None
    ) -> FitData:
        n, k = x.shape
        classes, codes = self._encode_labels(y, n_samples=n, n_classes=k)
        sw = check_sample_weight(sample_weight, n_samples=n)
        warn_sparse_classes(np.bincount(codes, minlength=k), classes, owner=type(self).__name__)
        return FitData(scores, x, codes, sw, classes)

    def _set_fit_data(self, data: FitData) -> None:
        """Write ``classes_``, ``n_features_in_`` and ``feature_names_in_`` of a successful fit."""
        self.classes_ = data.classes
        self.n_features_in_ = int(data.x.shape[1])
        self._check_feature_names(data.scores, reset=True)

    def _check_feature_names(self, scores: Any, *, reset: bool) -> None:
        """Record (``reset``) or compare the column names of DataFrame scores, as scikit-learn."""
        if not hasattr(scores, "columns"):
            if reset:
                self.__dict__.pop("feature_names_in_", None)
            elif hasattr(self, "feature_names_in_"):
                _sk_check_names(self, scores, reset=False)
            return
        _sk_check_names(self, scores, reset=reset)

    def _check_n_columns(self, scores: Any) -> int | None:
        """Columns expected at prediction time; a mismatch raises naming both counts."""
        n_classes = getattr(self, "n_features_in_", None)
        shape = np.shape(scores) if hasattr(scores, "shape") else None
        if n_classes is not None and shape is not None and len(shape) == 2 and (
            shape[1] != n_classes
        ):
            raise ValueError(
                f"scores has {shape[1]} columns but {n_classes} classes were expected "
                f"(X has {shape[1]} features, but {type(self).__name__} is expecting "
                f"{n_classes} features as input)"
            )
        return n_classes

    # -- prediction -------------------------------------------------------
    def transform(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Calibrated probabilities, as :meth:`predict_proba`.

        The columns are named by :meth:`get_feature_names_out`
        (``proba_<class>``); after ``set_output(transform="pandas")`` this
        returns a DataFrame with those columns.
        """
        return self.predict_proba(scores)

    def _set_state(self, data: FitData, state: dict[str, Any], *, drop: tuple[str, ...] = ()
                   ) -> None:
        """Write a successful fit at once: labels and columns, ``state``, minus stale ``drop``."""
        self._set_fit_data(data)
        for name in drop:
            if name not in state:
                self.__dict__.pop(name, None)
        for name, value in state.items():
            setattr(self, name, value)

    def predict(self, scores: ArrayLike) -> NDArray[Any]:
        """Most probable calibrated class (first on ties), as a label of ``classes_``."""
        proba = self.predict_proba(scores)  # checks fitted before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]

    def get_feature_names_out(self, input_features: ArrayLike | None = None) -> NDArray[Any]:
        """Names of the :meth:`transform` columns: ``proba_<class>`` for each of ``classes_``.

        Parameters
        ----------
        input_features : array-like of str, optional
            The score column names; checked against ``feature_names_in_``
            (when fitted on a DataFrame) and ``n_features_in_``, otherwise
            unused (output column ``j`` is the probability of class
            ``classes_[j]``, whatever the input columns are called).

        Returns
        -------
        names : ndarray of str objects, shape (n_classes,)
        """
        check_is_fitted(self, "classes_")
        if input_features is not None:
            names = np.asarray(input_features, dtype=object)
            if names.ndim != 1 or names.shape[0] != self.n_features_in_:
                raise ValueError(
                    f"input_features should have length equal to number of features "
                    f"({self.n_features_in_}), got {names.size}"
                )
            fitted = getattr(self, "feature_names_in_", None)
            if fitted is not None and not np.array_equal(names, fitted):
                raise ValueError(
                    f"input_features is not equal to feature_names_in_: got {names.tolist()}, "
                    f"fitted on {list(fitted)}"
                )
        return np.asarray([f"proba_{c}" for c in self.classes_], dtype=object)

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the fitted calibrator as a model file; :func:`bayescal.load` reads it back.

        The file is the JSON model file of ``bayescal fit``
        (:func:`bayescal.model_files.save_model`): pure data, checked on load.
        A Bayesian calibrator's posterior is written beside it as netCDF
        (``model.nc`` for ``model.json``). Each file is written whole or not
        at all.

        Parameters
        ----------
        path : path-like
            The model file; must end in ``.json``.
        overwrite : bool, default=False
            Replace existing files; otherwise an existing file is an error.

        Returns
        -------
        Path
            ``path``.

        Raises
        ------
        ValueError
            If the calibrator is not fitted or ``path`` does not end in ``.json``.
        FileExistsError
            If a file to write exists and ``overwrite`` is False.

        Examples
        --------
        >>> import bayescal
        >>> from bayescal import DirichletCalibrator, make_dirgen
        >>> q, y, _, _ = make_dirgen(200, 3, rng=0)
        >>> cal = DirichletCalibrator().fit(q, y)
        >>> cal.save("calibrator.json")  # doctest: +SKIP
        >>> bayescal.load("calibrator.json").predict_proba(q[:1])  # doctest: +SKIP
        """
        from bayescal.model_files import save_model

        return save_model(self, path, overwrite=overwrite)


def _sk_check_names(estimator: Any, scores: Any, *, reset: bool) -> None:
    """scikit-learn's feature-name bookkeeping (``feature_names_in_`` and its warnings)."""
    if _sk_validate_data is not None:
        _sk_validate_data(estimator, X=scores, reset=reset, skip_check_array=True)
    else:  # pragma: no cover - scikit-learn 1.5
        estimator._check_feature_names(scores, reset=reset)


class FamilyCalibratorMixin(CalibratorMixin):
    """Prediction side of a fitted Dirichlet-family map ``softmax(W x + b)``.

    Subclasses set ``coef_`` and ``intercept_`` in ``fit`` (after
    :meth:`_fit_data` and :meth:`_set_fit_data`) and declare
    ``_feature_space``.
    """

    _feature_space: str = "log"

    # -- features -------------------------------------------------------
    def _features(self, scores: ArrayLike, *, reset: bool = False,
                  eps: float | None = None) -> NDArray[np.float64]:
        """Validate ``scores`` and map them to the features of the map (writes nothing).

        The floor is ``eps`` if given, else the fitted ``eps_`` (estimators
        that choose it in ``fit``), else the ``eps`` parameter.
        """
        check_input_params(self)
        n_classes = None if reset else self._check_n_columns(scores)
        s = check_scores(scores, kind=self.input, n_classes=n_classes)
        if not reset:
            self._check_feature_names(scores, reset=False)
        if self._feature_space == "raw" and self.input == "logits":
            return check_raw_logits(s, name="scores")
        if eps is None:
            eps = getattr(self, "eps_", None) if not reset else None
        return log_features(s, kind=self.input, eps=self.eps if eps is None else eps)

    def _fit_data(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, *,
        eps: float | None = None,
    ) -> FitData:
        """Validated features, label codes, weights and classes of a fit (writes nothing)."""
        return self._make_fit_data(scores, self._features(scores, reset=True, eps=eps), y,
                                   sample_weight)

    # -- prediction -----------------------------------------------------
    def predict_proba(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Calibrated probabilities ``softmax(W x + b)``.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities or logits (as set by ``input``).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to one; column ``j`` is class ``classes_[j]``.
        """
        check_is_fitted(self, ("coef_", "intercept_"))
        return dirlin_from_features(self._features(scores), self.coef_, self.intercept_)

    def decision_function(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Calibrated log-probabilities (the map's logits, normalised).

        Shape ``(n_samples, n_classes)``; for two classes, scikit-learn's binary
        convention: the log-odds ``ln p_1 - ln p_0`` of shape ``(n_samples,)``.
        """
        check_is_fitted(self, ("coef_", "intercept_"))
        x = self._features(scores)
        logits = x @ self.coef_.T + self.intercept_
        logp = logits - logsumexp(logits, axis=1, keepdims=True)
        return logp[:, 1] - logp[:, 0] if logp.shape[1] == 2 else logp

    # -- other forms ------------------------------------------------------
    def to_canonical(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Canonical parameters ``(A, c)`` of the fitted map (log-probability features)."""
        self._check_log_space("to_canonical")
        return dirlin_to_canonical(self.coef_, self.intercept_)

    def to_generative(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """DirGen parameters ``(alpha, pi)`` of the fitted map (log-probability features)."""
        self._check_log_space("to_generative")
        return dirlin_to_dirgen(self.coef_, self.intercept_)

    def _check_log_space(self, what: str) -> None:
        check_is_fitted(self, ("coef_", "intercept_"))
        if self._feature_space == "raw" and self.input == "logits":
            raise ValueError(
                f"{what}() needs a map on log-probabilities; this {type(self).__name__} "
                "was fitted on raw logits (input='logits'). Fit with input='probs' instead."
            )
