"""Shared estimator state of every calibrator in the Dirichlet family.

Every map in the family is ``softmax(W x + b)`` on a feature vector ``x`` of
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

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import check_eps, check_option, check_raw_logits, check_scores
from bayescal.maps import (
    dirlin_from_features,
    dirlin_to_canonical,
    dirlin_to_dirgen,
    log_features,
)

__all__ = ["FamilyCalibratorMixin", "check_input_params"]


def check_input_params(estimator: Any) -> None:
    """Validate the ``input`` and ``eps`` parameters shared by all calibrators.

    ``eps="auto"`` is accepted by estimators that choose their floor in
    ``fit`` (``_eps_auto = True``) and store it as ``eps_``.
    """
    check_option(estimator.input, "input", ("probs", "logits"))
    if not (getattr(estimator, "_eps_auto", False) and isinstance(estimator.eps, str)
            and estimator.eps == "auto"):
        check_eps(estimator.eps)


class FamilyCalibratorMixin(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Prediction side of a fitted Dirichlet-family map ``softmax(W x + b)``.

    Subclasses set ``coef_``, ``intercept_``, ``classes_`` and
    ``n_features_in_`` in ``fit`` and declare ``_feature_space``.
    """

    _feature_space: str = "log"

    # -- features -------------------------------------------------------
    def _features(self, scores: ArrayLike, *, reset: bool = False,
                  eps: float | None = None) -> NDArray[np.float64]:
        """Validate ``scores`` and map them to the features of the fitted map.

        The floor is ``eps`` if given, else the fitted ``eps_`` (estimators
        that choose it), else the ``eps`` parameter.
        """
        check_input_params(self)
        n_classes = None if reset else getattr(self, "n_features_in_", None)
        shape = np.shape(scores) if hasattr(scores, "shape") else None
        if n_classes is not None and shape is not None and len(shape) == 2 and (
            shape[1] != n_classes
        ):
            raise ValueError(
                f"scores has {shape[1]} columns but {n_classes} classes were expected "
                f"(X has {shape[1]} features, but {type(self).__name__} is expecting "
                f"{n_classes} features as input)"
            )
        s = check_scores(scores, kind=self.input, n_classes=n_classes)
        if reset:
            self.n_features_in_ = s.shape[1]
            self.classes_ = np.arange(s.shape[1])
        if self._feature_space == "raw" and self.input == "logits":
            return check_raw_logits(s, name="scores")
        if eps is None:
            eps = getattr(self, "eps_", None) if not reset else None
        return log_features(s, kind=self.input, eps=self.eps if eps is None else eps)

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
            Rows sum to one.
        """
        check_is_fitted(self, ("coef_", "intercept_"))
        return dirlin_from_features(self._features(scores), self.coef_, self.intercept_)

    def transform(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Alias of :meth:`predict_proba`."""
        return self.predict_proba(scores)

    def predict(self, scores: ArrayLike) -> NDArray[np.intp]:
        """Most probable calibrated class (first on ties)."""
        proba = self.predict_proba(scores)  # checks fitted before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]

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
