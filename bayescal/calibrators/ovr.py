r"""One-vs-rest calibrators: Platt scaling, beta calibration, isotonic regression, binning.

These are the classical binary calibrators of scikit-learn's
``CalibratedClassifierCV`` (``sigmoid``, ``isotonic``) and of the Dirichlet
calibration paper's comparison (Kull et al., 2019, section 4.1), extended to
``k`` classes the one-vs-rest way, normalised as scikit-learn does:

1. For every class ``j`` a binary map ``g_j`` is fitted on the score column
   ``s_j`` against the indicator ``[y = j]`` (weighted by ``sample_weight``).
2. With ``k > 2`` classes the calibrated vector is renormalised,
   ``p_j = g_j(s_j) / sum_l g_l(s_l)``; a row where every ``g_l`` is 0
   (possible with isotonic regression and binning) gets the uniform vector
   ``1/k``. With two classes one map is fitted, for the second class
   ``classes_[1]``, and ``p = (1 - g_1(s_1), g_1(s_1))``.

Step 2 is part of the method, not a repair of the input: the one-vs-rest
outputs do not sum to one by construction, which is exactly the weakness of
these methods that the paper discusses.

Score columns ``s_j``. Platt scaling and isotonic regression are maps of the
real line: they act on ``q_j`` (``input="probs"``) or on the raw logit
``z_j`` (``input="logits"``, e.g. a decision function, as scikit-learn
does). Beta calibration and binning act on probabilities in [0, 1]: with
``input="logits"`` they see ``softmax(z)_j``.

Binary maps
-----------
* **Platt scaling** (Platt, 1999): :math:`g(s) = 1 / (1 + e^{a s + b})`, fitted
  by maximum likelihood on Platt's smoothed targets ``(N_+ + 1)/(N_+ + 2)`` and
  ``1/(N_- + 2)`` (weighted counts), exactly as scikit-learn's ``sigmoid``
  method, but solved by Newton's method to the exact optimum.
* **Beta calibration** (Kull, Silva Filho and Flach, 2017), the full
  three-parameter version:

  .. math:: g(s) = \sigma\bigl(a \ln s - b \ln(1 - s) + c\bigr),\quad a, b \ge 0,

  i.e. logistic regression of ``[y = j]`` on the two features
  ``(ln s, -ln(1 - s))`` with an intercept, the scores floored to
  ``[eps, 1 - eps]``. The bounds ``a, b >= 0`` keep the map monotone (the
  reference implementation drops a feature whose coefficient comes out
  negative and refits; the bounded fit reaches the same constrained optimum).
  It is solved by damped Newton on each face of the box. A tiny ridge ``reg``
  on ``(a, b)`` keeps the coefficients finite when a class is separable.
* **Isotonic regression** (Zadrozny and Elkan, 2002): scikit-learn's
  :class:`~sklearn.isotonic.IsotonicRegression` with ``out_of_bounds="clip"``
  and outputs in [0, 1]; the fitted step points are kept as arrays and
  interpolated linearly, as scikit-learn predicts.
* **Binning** (Zadrozny and Elkan, 2001): ``n_bins`` bins of ``s_j``;
  ``strategy="width"`` uses equal-width bins on [0, 1], ``strategy="frequency"``
  equal-frequency bins (edges at the quantiles of the calibration scores of
  that class, unweighted; duplicated edges are merged). A bin predicts its
  smoothed positive rate ``(n_pos + alpha) / (n + 2 alpha)`` (Laplace
  smoothing, ``alpha=1`` by default, so an empty bin predicts 1/2; with
  ``sample_weight`` the counts are sums of weights).

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
.. [5] J. Platt. "Probabilistic outputs for support vector machines and
   comparisons to regularized likelihood methods". Advances in Large Margin
   Classifiers, 1999.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, softmax
from sklearn.isotonic import IsotonicRegression
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_eps,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_scores,
)
from bayescal.calibrators._base import CalibratorMixin

__all__ = [
    "BetaCalibrator",
    "BinningCalibrator",
    "IsotonicCalibrator",
    "OneVsRestCalibratorMixin",
    "SigmoidCalibrator",
]

Array = NDArray[np.float64]


class OneVsRestCalibratorMixin(CalibratorMixin):
    """Shared fit/predict of the one-vs-rest calibrators.

    Subclasses implement ``_check_params()``, ``_fit_binary(s, t, w)`` (scores
    ``s`` of one class, 0/1 targets ``t``, weights ``w``; returns the map's
    fitted arrays as a tuple), ``_state(maps)`` (the fitted attributes built
    from the tuples of every map) and ``_predict_binary(m, s)`` (``g(s)`` in
    [0, 1] of fitted map ``m``), and declare ``_domain``: ``"real"`` for maps
    of the real line (logits are used as given), ``"unit"`` for maps of [0, 1]
    (logits are turned into ``softmax(z)`` first).
    """

    _domain: str = "unit"
    _fitted_attr: str = "coef_"

    def _check_params(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _fit_binary(self, s: Array, t: Array, w: Array) -> tuple[Any, ...]:
        raise NotImplementedError  # pragma: no cover

    def _state(self, maps: list[tuple[Any, ...]]) -> dict[str, Any]:
        raise NotImplementedError  # pragma: no cover

    def _predict_binary(self, m: int, s: Array) -> Array:
        raise NotImplementedError  # pragma: no cover

    # -- scores -------------------------------------------------------------
    def _columns(self, scores: ArrayLike, *, reset: bool = False) -> Array:
        """Validated score columns ``s_j`` the binary maps act on (writes nothing)."""
        kind = check_option(self.input, "input", ("probs", "logits"))
        n_classes = None if reset else self._check_n_columns(scores)
        s = check_scores(scores, kind=kind, n_classes=n_classes)
        if not reset:
            self._check_feature_names(scores, reset=False)
        if kind == "logits" and self._domain == "unit":
            return softmax(s, axis=1)
        return s

    @staticmethod
    def _mapped_columns(k: int) -> list[int]:
        """Score columns that get a binary map: the second one only, for two classes."""
        return [1] if k == 2 else list(range(k))

    # -- fit / predict -------------------------------------------------------
    def fit(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> OneVsRestCalibratorMixin:
        """Fit one binary map per class (one for two classes).

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities or logits (``input``).
        y : array-like of shape (n_samples,)
            Class labels (see ``classes``).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the samples in every binary fit.

        Returns
        -------
        self
        """
        self._check_params()
        data = self._make_fit_data(scores, self._columns(scores, reset=True), y, sample_weight)
        maps = [
            self._fit_binary(data.x[:, j], (data.y == j).astype(np.float64), data.sample_weight)
            for j in self._mapped_columns(data.x.shape[1])
        ]
        self._set_state(data, self._state(maps))
        return self

    def predict_binary(self, scores: ArrayLike) -> Array:
        """The one-vs-rest outputs ``g_j(s_j)`` before renormalisation.

        Returns
        -------
        g : ndarray of shape (n_samples, n_classes)
            With two classes, ``(1 - g_1, g_1)`` of the one fitted map.
        """
        check_is_fitted(self, self._fitted_attr)
        s = self._columns(scores)
        cols = self._mapped_columns(s.shape[1])
        g = np.column_stack([self._predict_binary(m, s[:, j]) for m, j in enumerate(cols)])
        if s.shape[1] == 2:
            return np.column_stack([1.0 - g[:, 0], g[:, 0]])
        return g

    def predict_proba(self, scores: ArrayLike) -> Array:
        """Normalised one-vs-rest calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            ``g_j(s_j) / sum_l g_l(s_l)`` (``(1 - g_1, g_1)`` for two
            classes); rows whose one-vs-rest outputs are all zero are uniform.
        """
        g = self.predict_binary(scores)
        if g.shape[1] == 2:
            return g
        total = g.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, g / total, 1.0 / g.shape[1])


def _weighted_logistic_newton(
    x: Array, t: Array, w: Array, ridge: Array, theta0: Array, *, max_iter: int
) -> tuple[Array, float, int]:
    r"""Damped Newton for a weighted logistic regression with soft targets.

    Minimises :math:`\sum_i w_i [\mathrm{softplus}(x_i\theta) - t_i x_i\theta] / \sum_i w_i
    + \frac12 \sum_p r_p \theta_p^2` (convex), from ``theta0``, with a
    backtracking line search; stops when the Newton decrement reaches rounding.
    Returns the parameters, the objective and the iterations run (gradient
    evaluations, at least one).
    """
    wn = w / w.sum()

    def loss_of(theta: Array) -> float:
        z = x @ theta
        # -[t ln sig(z) + (1-t) ln sig(-z)] = softplus(z) - t z
        return float(wn @ (np.logaddexp(0.0, z) - t * z) + 0.5 * np.sum(ridge * theta**2))

    theta = theta0.astype(np.float64).copy()
    loss = loss_of(theta)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        p = expit(x @ theta)
        grad = x.T @ (wn * (p - t)) + ridge * theta
        if np.max(np.abs(grad)) < 1e-10:
            break
        hess = (x * (wn * p * (1.0 - p))[:, None]).T @ x + np.diag(ridge + 1e-12)
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
    return theta, loss, n_iter


class SigmoidCalibrator(OneVsRestCalibratorMixin):
    r"""One-vs-rest Platt scaling, scikit-learn's ``sigmoid`` method.

    Per class, :math:`g(s) = 1 / (1 + \exp(a s + b))` on the score column
    ``s`` (probabilities, or raw logits / decision values with
    ``input="logits"``), fitted by maximum likelihood against Platt's
    smoothed targets :math:`t_+ = (N_+ + 1)/(N_+ + 2)` and
    :math:`t_- = 1/(N_- + 2)` (``N`` the weighted counts of positives and
    negatives), as :class:`sklearn.calibration.CalibratedClassifierCV` with
    ``method="sigmoid"``; normalised the same way (module docstring). The
    problem is convex: Newton's method reaches its exact optimum (scikit-learn
    stops L-BFGS-B at a gradient tolerance).

    Parameters
    ----------
    input : {"probs", "logits"}, default="probs"
        What the score columns hold.
    max_iter : int, default=100
        Newton iteration limit per class.
    classes : array-like of shape (n_classes,), default=None
        The label of each score column, in column order; ``None`` reads them
        from ``y`` (see :class:`~bayescal.DirichletCalibrator`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_maps, 2)
        ``(a, b)`` of each map: one per class, or one (for ``classes_[1]``)
        with two classes.
    n_iter_ : int
        Newton iterations of the slowest map.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    References
    ----------
    .. [1] J. Platt. "Probabilistic outputs for support vector machines and
       comparisons to regularized likelihood methods". 1999.

    Examples
    --------
    >>> from bayescal.datasets import make_dirgen
    >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
    >>> cal = SigmoidCalibrator().fit(q, y)
    >>> cal.coef_.shape, cal.predict_proba(q[:2]).sum(axis=1).round(12)
    ((3, 2), array([1., 1.]))
    """

    _domain = "real"

    def __init__(
        self, *, input: str = "probs", max_iter: int = 100, classes: ArrayLike | None = None
    ) -> None:
        self.input = input
        self.max_iter = max_iter
        self.classes = classes

    def _check_params(self) -> None:
        check_positive_int(self.max_iter, "max_iter")

    def _fit_binary(self, s: Array, t: Array, w: Array) -> tuple[Array, int]:
        pos = t > 0
        n_pos, n_neg = float(w[pos].sum()), float(w[~pos].sum())
        target = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        # Newton is affine invariant: scaling the scores only conditions the
        # Hessian, it does not move the optimum (the slope is scaled back).
        scale = max(1.0, float(np.max(np.abs(s))))
        x = np.column_stack([s / scale, np.ones_like(s)])
        theta0 = np.array([0.0, np.log((n_pos + 1.0) / (n_neg + 1.0))])
        theta, _, n_iter = _weighted_logistic_newton(x, target, w, np.zeros(2), theta0,
                                                     max_iter=int(self.max_iter))
        return np.array([-theta[0] / scale, -theta[1]]), n_iter

    def _state(self, maps: list[tuple[Any, ...]]) -> dict[str, Any]:
        return {"coef_": np.vstack([m[0] for m in maps]),
                "n_iter_": max(m[1] for m in maps)}

    def _predict_binary(self, m: int, s: Array) -> Array:
        a, b = self.coef_[m]
        return expit(-(a * s + b))


class BetaCalibrator(OneVsRestCalibratorMixin):
    r"""One-vs-rest beta calibration.

    Per class, :math:`g(s) = \sigma(a \ln s - b \ln(1-s) + c)` with
    :math:`a, b \ge 0`, fitted by maximum likelihood (logistic regression on
    ``(ln s, -ln(1-s))``); the outputs are then normalised (see the module
    docstring).

    Parameters
    ----------
    reg : float, default=1e-8
        Ridge on ``(a, b)`` added to the mean log-loss,
        ``reg * (a**2 + b**2)``; keeps separable classes finite.
    eps : float, default=EPS
        Scores are floored to ``[eps, 1 - eps]`` before the logarithms.
    max_iter : int, default=100
        Newton iteration limit per face.
    input : {"probs", "logits"}, default="probs"
        What the scores hold; logits are mapped to ``softmax(z)``.
    classes : array-like of shape (n_classes,), default=None
        As in :class:`SigmoidCalibrator`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_maps, 3)
        ``(a, b, c)`` of each map: one per class, or one (for
        ``classes_[1]``) with two classes.
    n_iter_ : int
        Newton iterations of the slowest map (over the faces of the box tried).
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

    def __init__(
        self,
        *,
        reg: float = 1e-8,
        eps: float = EPS,
        max_iter: int = 100,
        input: str = "probs",
        classes: ArrayLike | None = None,
    ) -> None:
        self.reg = reg
        self.eps = eps
        self.max_iter = max_iter
        self.input = input
        self.classes = classes

    def _check_params(self) -> None:
        check_nonnegative_float(self.reg, "reg")
        eps = check_eps(self.eps)
        if eps >= 0.5:
            raise ValueError(f"eps must be below 0.5 for beta calibration; got {eps!r}")
        check_positive_int(self.max_iter, "max_iter")

    def _beta_features(self, s: Array) -> Array:
        s = np.clip(s, self.eps, 1.0 - self.eps)
        return np.column_stack([np.log(s), -np.log1p(-s), np.ones_like(s)])

    def _fit_binary(self, s: Array, t: Array, w: Array) -> tuple[Array, int]:
        # Box constraints a, b >= 0 by enumerating the faces of the box: the
        # convex problem's constrained optimum is the restricted minimiser of
        # some face, and it is the feasible restricted minimiser of lowest loss.
        x = self._beta_features(s)
        best_loss, best, n_iter = np.inf, np.zeros(3), 0
        for free in ((0, 1, 2), (1, 2), (0, 2), (2,)):
            ridge = 2.0 * float(self.reg) * np.array([f < 2 for f in free])
            theta0 = np.array([1.0 if f < 2 else 0.0 for f in free])  # the identity map
            theta, loss, face_iter = _weighted_logistic_newton(
                x[:, free], t, w, ridge, theta0, max_iter=int(self.max_iter)
            )
            n_iter += face_iter
            if (theta[:-1] >= 0).all() and loss < best_loss:
                best_loss = loss
                best = np.zeros(3)
                best[list(free)] = theta
            if free == (0, 1, 2) and np.isfinite(loss) and (theta[:-1] >= 0).all():
                break  # the unconstrained optimum is feasible
        return best, n_iter

    def _state(self, maps: list[tuple[Any, ...]]) -> dict[str, Any]:
        return {"coef_": np.vstack([m[0] for m in maps]),
                "n_iter_": max(m[1] for m in maps)}

    def _predict_binary(self, m: int, s: Array) -> Array:
        return expit(self._beta_features(s) @ self.coef_[m])


class IsotonicCalibrator(OneVsRestCalibratorMixin):
    """One-vs-rest isotonic regression (scikit-learn's ``IsotonicRegression``).

    Each class gets a non-decreasing piecewise-linear map fitted by
    pool-adjacent-violators on ``(s_j, [y = j])`` (weighted), within [0, 1]
    and constant outside the range of the calibration scores, as
    scikit-learn's ``isotonic`` method; outputs are normalised (module
    docstring).

    Parameters
    ----------
    input : {"probs", "logits"}, default="probs"
        What the score columns hold (logits are used as given).
    classes : array-like of shape (n_classes,), default=None
        As in :class:`SigmoidCalibrator`.

    Attributes
    ----------
    x_thresholds_, y_thresholds_ : list of ndarray
        Per map (one per class, or one for ``classes_[1]`` with two classes),
        the increasing knots of the map and its values there
        (``IsotonicRegression.X_thresholds_`` and ``y_thresholds_``).
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

    _domain = "real"
    _fitted_attr = "x_thresholds_"

    def __init__(self, *, input: str = "probs", classes: ArrayLike | None = None) -> None:
        self.input = input
        self.classes = classes

    def _check_params(self) -> None:
        return None

    def _fit_binary(self, s: Array, t: Array, w: Array) -> tuple[Array, Array]:
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        iso.fit(s, t, sample_weight=w)
        return (np.asarray(iso.X_thresholds_, dtype=np.float64),
                np.asarray(iso.y_thresholds_, dtype=np.float64))

    def _state(self, maps: list[tuple[Any, ...]]) -> dict[str, Any]:
        return {"x_thresholds_": [m[0] for m in maps], "y_thresholds_": [m[1] for m in maps]}

    def _predict_binary(self, m: int, s: Array) -> Array:
        # IsotonicRegression.predict: clip to the knots' range, interpolate linearly
        return np.interp(s, self.x_thresholds_[m], self.y_thresholds_[m])


class BinningCalibrator(OneVsRestCalibratorMixin):
    """One-vs-rest histogram binning with equal-width or equal-frequency bins.

    Parameters
    ----------
    n_bins : int, default=10
        Number of bins per class (equal-frequency bins may merge duplicated
        edges, giving fewer).
    strategy : {"width", "frequency"}, default="width"
        ``"width"``: edges ``0, 1/M, ..., 1``; ``"frequency"``: edges at the
        ``m/M`` quantiles of the class's calibration scores (unweighted), the
        outer edges replaced by ``-inf`` and ``+inf``.
    alpha : float, default=1.0
        Laplace smoothing: a bin predicts ``(n_pos + alpha) / (n + 2 alpha)``
        (``n`` and ``n_pos`` are sums of sample weights).
    input : {"probs", "logits"}, default="probs"
        What the scores hold; logits are mapped to ``softmax(z)``.
    classes : array-like of shape (n_classes,), default=None
        As in :class:`SigmoidCalibrator`.

    Attributes
    ----------
    bin_edges_ : list of ndarray
        Per map (one per class, or one for ``classes_[1]`` with two classes),
        the inner bin edges.
    bin_values_ : list of ndarray
        The prediction of each bin (one more than the inner edges).
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

    _fitted_attr = "bin_edges_"

    def __init__(
        self,
        *,
        n_bins: int = 10,
        strategy: str = "width",
        alpha: float = 1.0,
        input: str = "probs",
        classes: ArrayLike | None = None,
    ) -> None:
        self.n_bins = n_bins
        self.strategy = strategy
        self.alpha = alpha
        self.input = input
        self.classes = classes

    def _check_params(self) -> None:
        check_positive_int(self.n_bins, "n_bins")
        check_option(self.strategy, "strategy", ("width", "frequency"))
        check_nonnegative_float(self.alpha, "alpha", strict=True)

    def _fit_binary(self, s: Array, t: Array, w: Array) -> tuple[Array, Array]:
        m = int(self.n_bins)
        if self.strategy == "width":
            inner = np.linspace(0.0, 1.0, m + 1)[1:-1]
        else:
            inner = np.unique(np.quantile(s, np.linspace(0.0, 1.0, m + 1)[1:-1]))
        idx = np.searchsorted(inner, s, side="right")
        n_b = np.bincount(idx, weights=w, minlength=len(inner) + 1)
        pos = np.bincount(idx, weights=w * t, minlength=len(inner) + 1)
        a = float(self.alpha)
        return inner, (pos + a) / (n_b + 2.0 * a)

    def _state(self, maps: list[tuple[Any, ...]]) -> dict[str, Any]:
        return {"bin_edges_": [m[0] for m in maps], "bin_values_": [m[1] for m in maps]}

    def _predict_binary(self, m: int, s: Array) -> Array:
        return self.bin_values_[m][np.searchsorted(self.bin_edges_[m], s, side="right")]
