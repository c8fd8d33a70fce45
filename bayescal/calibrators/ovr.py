r"""One-vs-rest calibrators: beta calibration, isotonic regression and binning.

These are the classical binary calibrators of the Dirichlet calibration paper's
comparison (Kull et al., 2019, section 4.1), extended to ``k`` classes the
one-vs-rest way:

1. For every class ``j`` a binary map ``g_j`` is fitted on the column
   ``s_j = q[:, j]`` against the indicator ``[y = j]``.
2. The calibrated vector is renormalised,
   ``p_j = g_j(s_j) / sum_l g_l(s_l)``. A row where every ``g_l`` is 0 (possible
   with isotonic regression and binning) gets the uniform vector ``1/k``.

Step 2 is part of the method, not a repair of the input: the one-vs-rest
outputs do not sum to one by construction, which is exactly the weakness of
these methods that the paper discusses. Only probability scores are accepted
(``input`` is fixed to ``"probs"``): the binary maps act on ``q_j`` in [0, 1].

Binary maps
-----------
* **Beta calibration** (Kull, Silva Filho and Flach, 2017), the full
  three-parameter version:

  .. math:: g(s) = \sigma\bigl(a \ln s - b \ln(1 - s) + c\bigr),\quad a, b \ge 0,

  i.e. logistic regression of ``[y = j]`` on the two features
  ``(ln s, -ln(1 - s))`` with an intercept, the scores floored to
  ``[eps, 1 - eps]``. The bounds ``a, b >= 0`` keep the map monotone (the
  reference implementation drops a feature whose coefficient comes out
  negative and refits; the bounded fit reaches the same constrained optimum).
  It is solved by L-BFGS-B with the exact gradient. A tiny ridge ``reg`` on
  ``(a, b)`` keeps the coefficients finite when a class is separable.
* **Isotonic regression** (Zadrozny and Elkan, 2002): scikit-learn's
  :class:`~sklearn.isotonic.IsotonicRegression` with ``out_of_bounds="clip"``
  and outputs in [0, 1].
* **Binning** (Zadrozny and Elkan, 2001): ``n_bins`` bins of ``s_j``;
  ``strategy="width"`` uses equal-width bins on [0, 1], ``strategy="frequency"``
  equal-frequency bins (edges at the quantiles of the calibration scores of
  that class; duplicated edges are merged). A bin predicts its smoothed
  positive rate ``(n_pos + alpha) / (n + 2 alpha)`` (Laplace smoothing,
  ``alpha=1`` by default, so an empty bin predicts 1/2).

References
----------
.. [1] M. Kull, T. Silva Filho and P. Flach. "Beta calibration: a well-founded
   and easily implemented improvement on logistic calibration for binary
   classifiers". AISTATS 2017.
.. [2] B. Zadrozny and C. Elkan. "Transforming classifier scores into accurate
   multiclass probability estimates". KDD 2002.
.. [3] B. Zadrozny and C. Elkan. "Obtaining calibrated probability estimates
   from decision trees and naive Bayesian classifiers". ICML 2001.
.. [4] M. Kull et al. "Beyond temperature scaling: obtaining well-calibrated
   multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_eps,
    check_labels,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_scores,
)

__all__ = [
    "BetaCalibrator",
    "BinningCalibrator",
    "IsotonicCalibrator",
    "OneVsRestCalibratorMixin",
]


class OneVsRestCalibratorMixin(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Shared fit/predict of the one-vs-rest calibrators.

    Subclasses implement ``_check_params()``, ``_fit_binary(s, t)`` (scores
    ``s`` of one class, 0/1 targets ``t``; returns the fitted binary state) and
    ``_predict_binary(state, s)`` (returns ``g(s)`` in [0, 1]).
    """

    def _check_params(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _fit_binary(self, s: NDArray[np.float64], t: NDArray[np.float64]) -> Any:
        raise NotImplementedError  # pragma: no cover

    def _predict_binary(self, state: Any, s: NDArray[np.float64]) -> NDArray[np.float64]:
        raise NotImplementedError  # pragma: no cover

    def fit(self, scores: ArrayLike, y: ArrayLike) -> OneVsRestCalibratorMixin:
        """Fit one binary map per class.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities (rows on the simplex).
        y : array-like of shape (n_samples,)
            Integer labels ``0 .. n_classes-1`` (column ``j`` is class ``j``).

        Returns
        -------
        self
        """
        self._check_params()
        q = check_scores(scores, kind="probs")
        y = check_labels(y, n_samples=q.shape[0], n_classes=q.shape[1])
        self.n_features_in_ = q.shape[1]
        self.classes_ = np.arange(q.shape[1])
        self.estimators_ = [
            self._fit_binary(q[:, j], (y == j).astype(np.float64)) for j in range(q.shape[1])
        ]
        return self

    def predict_proba(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Renormalised one-vs-rest calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            ``g_j(q_j) / sum_l g_l(q_l)``; rows whose one-vs-rest outputs are
            all zero are uniform.
        """
        check_is_fitted(self, "estimators_")
        q = check_scores(scores, kind="probs", n_classes=self.n_features_in_)
        g = np.column_stack(
            [self._predict_binary(est, q[:, j]) for j, est in enumerate(self.estimators_)]
        )
        total = g.sum(axis=1, keepdims=True)
        k = g.shape[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, g / total, 1.0 / k)

    def predict_binary(self, scores: ArrayLike) -> NDArray[np.float64]:
        """The one-vs-rest outputs ``g_j(q_j)`` before renormalisation."""
        check_is_fitted(self, "estimators_")
        q = check_scores(scores, kind="probs", n_classes=self.n_features_in_)
        return np.column_stack(
            [self._predict_binary(est, q[:, j]) for j, est in enumerate(self.estimators_)]
        )

    def transform(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Alias of :meth:`predict_proba`."""
        return self.predict_proba(scores)

    def predict(self, scores: ArrayLike) -> NDArray[np.intp]:
        """Most probable calibrated class (first on ties)."""
        return self.classes_[np.argmax(self.predict_proba(scores), axis=1)]


class BetaCalibrator(OneVsRestCalibratorMixin):
    r"""One-vs-rest beta calibration.

    Per class, :math:`g(s) = \sigma(a \ln s - b \ln(1-s) + c)` with
    :math:`a, b \ge 0`, fitted by maximum likelihood (logistic regression on
    ``(ln s, -ln(1-s))``); the ``k`` outputs are then renormalised (see the
    module docstring).

    Parameters
    ----------
    reg : float, default=1e-8
        Ridge on ``(a, b)`` added to the mean log-loss,
        ``reg * (a**2 + b**2)``; keeps separable classes finite.
    eps : float, default=EPS
        Scores are floored to ``[eps, 1 - eps]`` before the logarithms.
    max_iter : int, default=100
        Newton iteration limit per face.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, 3)
        ``(a, b, c)`` of each class.
    estimators_ : list of ndarray
        The same rows, one per class.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Examples
    --------
    >>> from bayescal.datasets import make_dirgen
    >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
    >>> cal = BetaCalibrator().fit(q, y)
    >>> cal.predict_proba(q).shape
    (500, 3)
    >>> bool((cal.coef_[:, :2] >= 0).all())
    True
    """

    def __init__(self, *, reg: float = 1e-8, eps: float = EPS, max_iter: int = 100) -> None:
        self.reg = reg
        self.eps = eps
        self.max_iter = max_iter

    def _check_params(self) -> None:
        check_nonnegative_float(self.reg, "reg")
        eps = check_eps(self.eps)
        if eps >= 0.5:
            raise ValueError(f"eps must be below 0.5 for beta calibration; got {eps!r}")
        check_positive_int(self.max_iter, "max_iter")

    def _features(self, s: NDArray[np.float64]) -> NDArray[np.float64]:
        s = np.clip(s, self.eps, 1.0 - self.eps)
        return np.column_stack([np.log(s), -np.log1p(-s), np.ones_like(s)])

    def _fit_binary(self, s: NDArray[np.float64], t: NDArray[np.float64]) -> NDArray[np.float64]:
        # Box constraints a, b >= 0 by enumerating the faces of the box: the
        # convex problem's constrained optimum is the restricted minimiser of
        # some face, and it is the feasible restricted minimiser of lowest loss.
        x = self._features(s)
        best_loss, best = np.inf, np.zeros(3)
        for free in ((0, 1, 2), (1, 2), (0, 2), (2,)):
            theta, loss = self._newton(x[:, free], t, np.array([f < 2 for f in free]))
            if (theta[:-1] >= 0).all() and loss < best_loss:
                best_loss = loss
                best = np.zeros(3)
                best[list(free)] = theta
            if free == (0, 1, 2) and np.isfinite(loss) and (theta[:-1] >= 0).all():
                break  # the unconstrained optimum is feasible
        return best

    def _newton(
        self, x: NDArray[np.float64], t: NDArray[np.float64], ridge: NDArray[np.bool_]
    ) -> tuple[NDArray[np.float64], float]:
        """Damped Newton for ``mean logloss(sigma(x @ theta), t) + reg * |theta_ridge|^2``."""
        n, d = x.shape
        reg = 2.0 * float(self.reg) * ridge

        def loss_of(theta: NDArray[np.float64]) -> float:
            z = x @ theta
            # -[t ln sig(z) + (1-t) ln sig(-z)] = softplus(z) - t z
            nll = np.sum(np.logaddexp(0.0, z) - t * z) / n
            return float(nll + 0.5 * np.sum(reg * theta**2))

        theta = np.zeros(d)
        theta[:-1] = 1.0  # start at the identity map where a and b are free
        loss = loss_of(theta)
        for _ in range(int(self.max_iter)):
            p = expit(x @ theta)
            grad = x.T @ (p - t) / n + reg * theta
            if np.max(np.abs(grad)) < 1e-10:
                break
            hess = (x * (p * (1.0 - p))[:, None]).T @ x / n + np.diag(reg + 1e-12)
            try:
                step = np.linalg.solve(hess, grad)
            except np.linalg.LinAlgError:
                step = np.linalg.lstsq(hess, grad, rcond=None)[0]
            if float(grad @ step) < 1e-14:  # Newton decrement: converged to rounding
                break
            alpha = 1.0
            while True:  # backtracking (Armijo) line search
                cand = theta - alpha * step
                new = loss_of(cand)
                if new <= loss - 1e-4 * alpha * float(grad @ step) or alpha < 1e-10:
                    break
                alpha *= 0.5
            if alpha < 1e-10:
                break
            theta, loss = cand, new
        return theta, loss

    def _predict_binary(
        self, state: NDArray[np.float64], s: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        return expit(self._features(s) @ state)

    def fit(self, scores: ArrayLike, y: ArrayLike) -> BetaCalibrator:
        """Fit ``(a, b, c)`` per class; see :meth:`OneVsRestCalibratorMixin.fit`."""
        super().fit(scores, y)
        self.coef_ = np.vstack(self.estimators_)
        return self


class IsotonicCalibrator(OneVsRestCalibratorMixin):
    """One-vs-rest isotonic regression (scikit-learn's ``IsotonicRegression``).

    Each class gets a non-decreasing step map fitted by pool-adjacent-violators
    on ``(q_j, [y = j])``, clipped to [0, 1] and constant outside the range of
    the calibration scores; outputs are renormalised (module docstring).

    Attributes
    ----------
    estimators_ : list of IsotonicRegression
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Examples
    --------
    >>> from bayescal.datasets import make_dirgen
    >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
    >>> p = IsotonicCalibrator().fit(q, y).predict_proba(q)
    >>> bool(abs(p.sum(axis=1) - 1).max() < 1e-12)
    True
    """

    def __init__(self) -> None:
        pass

    def _check_params(self) -> None:
        return None

    def _fit_binary(self, s: NDArray[np.float64], t: NDArray[np.float64]) -> IsotonicRegression:
        return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, t)

    def _predict_binary(
        self, state: IsotonicRegression, s: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        return np.asarray(state.predict(s), dtype=np.float64)


class BinningCalibrator(OneVsRestCalibratorMixin):
    """One-vs-rest histogram binning with equal-width or equal-frequency bins.

    Parameters
    ----------
    n_bins : int, default=10
        Number of bins per class (equal-frequency bins may merge duplicated
        edges, giving fewer).
    strategy : {"width", "frequency"}, default="width"
        ``"width"``: edges ``0, 1/M, ..., 1``; ``"frequency"``: edges at the
        ``m/M`` quantiles of the class's calibration scores, the outer edges
        replaced by ``-inf`` and ``+inf``.
    alpha : float, default=1.0
        Laplace smoothing: a bin predicts ``(n_pos + alpha) / (n + 2 alpha)``.

    Attributes
    ----------
    estimators_ : list of (edges, values)
        Per class, the inner bin edges and the prediction of each bin.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Examples
    --------
    >>> from bayescal.datasets import make_dirgen
    >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
    >>> cal = BinningCalibrator(n_bins=5, strategy="frequency").fit(q, y)
    >>> cal.predict_proba(q[:2]).shape
    (2, 3)
    """

    def __init__(self, *, n_bins: int = 10, strategy: str = "width", alpha: float = 1.0) -> None:
        self.n_bins = n_bins
        self.strategy = strategy
        self.alpha = alpha

    def _check_params(self) -> None:
        check_positive_int(self.n_bins, "n_bins")
        check_option(self.strategy, "strategy", ("width", "frequency"))
        check_nonnegative_float(self.alpha, "alpha", strict=True)

    def _fit_binary(
        self, s: NDArray[np.float64], t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        m = int(self.n_bins)
        if self.strategy == "width":
            inner = np.linspace(0.0, 1.0, m + 1)[1:-1]
        else:
            inner = np.unique(np.quantile(s, np.linspace(0.0, 1.0, m + 1)[1:-1]))
        idx = np.searchsorted(inner, s, side="right")
        n_b = np.bincount(idx, minlength=len(inner) + 1)
        pos = np.bincount(idx, weights=t, minlength=len(inner) + 1)
        a = float(self.alpha)
        return inner, (pos + a) / (n_b + 2.0 * a)

    def _predict_binary(
        self, state: tuple[NDArray[np.float64], NDArray[np.float64]], s: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        inner, values = state
        return values[np.searchsorted(inner, s, side="right")]
