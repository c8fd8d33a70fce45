r"""Dirichlet calibration and matrix scaling: MAP fits of a full linear map.

Both estimators fit ``softmax(W x + b)`` with a full ``k x k`` matrix ``W`` by
:func:`bayescal.optimize.fit_multinomial` (exact Newton). They differ only in
the features: :class:`DirichletCalibrator` uses the log-probabilities
``x = max(ln q, ln eps)`` (Kull et al. 2019), :class:`MatrixScaler` the raw
logits (Guo et al. 2017; with ODIR this is the paper's MS-ODIR).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, check_cv
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_nonnegative_float,
    check_option,
    check_positive_int,
)
from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.maps import dirlin_from_features
from bayescal.optimize import (
    FitResult,
    fit_multinomial,
    make_penalty,
    multinomial_log_loss,
)

__all__ = ["ODIR_GRID", "L2_GRID", "DirichletCalibrator", "MatrixScaler"]

#: Grid of ``reg_lambda`` and of ``reg_mu`` for ODIR (Kull et al. 2019).
ODIR_GRID: tuple[float, ...] = (1e3, 1e1, 1e-1, 1e-3, 1e-5, 1e-7)
#: Grid of ``reg_lambda`` for L2: eleven values 1e3, 1e2, ..., 1e-7.
L2_GRID: tuple[float, ...] = tuple(10.0**p for p in range(3, -8, -1))


def _check_reg_value(value: Any, name: str, *, allow_none: bool) -> float | str | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{name} must be a non-negative float or 'auto'; got {value!r}")
        return value
    if isinstance(value, Real) and not isinstance(value, bool):
        return check_nonnegative_float(value, name)
    raise ValueError(f"{name} must be a non-negative float or 'auto'; got {value!r}")


class DirichletCalibrator(FamilyCalibratorMixin):
    r"""Dirichlet calibration: MAP fit of ``softmax(W ln q + b)``.

    Minimises the mean log-loss plus a normalised penalty
    (:func:`bayescal.optimize.make_penalty`):

    * ``reg="odir"``: :math:`\frac{\lambda}{k(k-1)}\sum_{i\ne j} W_{ij}^2 +
      \frac{\mu}{k}\sum_j b_j^2` (off-diagonal and intercept regularisation);
    * ``reg="l2"``: :math:`\frac{\lambda}{k(k+1)}(\sum_{ij}(W_{ij}-C_{ij})^2 +
      \sum_j b_j^2)` with ``C = 0`` or ``I`` (``center``);
    * ``reg="none"``: the plain maximum-likelihood fit.

    Features are ``x = max(ln q, ln eps)``; exact zeros in ``q`` become
    ``ln eps`` (-36.04 by default). The fit starts at the identity map, uses the
    exact Hessian, and stops when the largest absolute gradient entry is below
    ``tol``. No reference row is used: relabelling the classes permutes the
    fitted map exactly.

    Parameters
    ----------
    reg : {"odir", "l2", "none"}, default="odir"
        Penalty.
    reg_lambda : float or "auto", default="auto"
        :math:`\lambda \ge 0`. ``"auto"`` picks it by stratified internal
        cross-validation (``cv`` folds) over :data:`ODIR_GRID` (ODIR) or
        :data:`L2_GRID` (L2), by mean held-out log-loss, warm-starting each fit
        from its neighbour on the grid. Unused (must stay ``"auto"`` or 0) for
        ``reg="none"``.
    reg_mu : float, "auto" or None, default="auto"
        :math:`\mu \ge 0` (ODIR only). ``None`` ties it to ``reg_lambda``
        (``mu = lambda``; with ``reg_lambda="auto"`` a 1-D search). ``"auto"``
        searches it on the same grid (with ``reg_lambda="auto"``, the full
        6 x 6 grid of the paper). Must be ``"auto"`` or ``None`` for
        ``reg="l2"`` and ``reg="none"``.
    center : {"zero", "identity"}, default="zero"
        Centre of the L2 penalty: the uniform predictor (``W = 0``, as
        dirichletcal) or the uncalibrated scores (``W = I``).
    cv : int or cross-validation splitter, default=3
        Internal cross-validation for ``"auto"`` and ``ensemble=True`` (an int
        means unshuffled :class:`~sklearn.model_selection.StratifiedKFold`).
    ensemble : bool, default=False
        If True, keep the ``cv`` fold maps fitted at the chosen
        hyperparameters and average their calibrated probabilities (the
        paper's protocol) instead of refitting on all the data.
    input : {"probs", "logits"}, default="probs"
        What the scores hold. Logits are mapped to ``log_softmax(z)``, so
        ``z`` and ``softmax(z)`` give the same fit.
    eps : float, default=EPS
        Floor on probabilities before the logarithm (2.22e-16); use
        ``np.finfo(float).tiny`` to reproduce the paper text.
    max_iter : int, default=100
        Newton iterations per fit.
    tol : float, default=1e-8
        Convergence tolerance on the max-abs gradient of the objective.
    warm_start : bool, default=False
        When True and the estimator was already fitted on as many classes, a
        fit with fixed ``reg_lambda``/``reg_mu`` starts Newton's method from
        the previous ``coef_``, ``intercept_`` instead of the identity map (as
        in scikit-learn's linear models). The optimum is the same (the
        objective is strictly convex); only the number of iterations changes,
        which makes a hand-written path over penalties cheap. Ignored when
        cross-validation runs (``"auto"`` or ``ensemble=True``), which warm-
        starts along its own grid.
    classes : array-like of shape (n_classes,), default=None
        The label of each score column, in column order. ``None``: the sorted
        distinct labels of ``y`` when it holds one per column (scikit-learn's
        ``classes_`` order), else the integer column codes ``0 .. k-1`` (a
        class absent from ``y``); pass ``classes`` when a class is absent and
        the labels are not column codes
        (:func:`bayescal._validation.encode_labels`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        ``W`` (row ``j`` gives the logit of class ``j``). With ``ensemble=True``
        the mean of the fold maps' ``W`` (for inspection; predictions average
        the fold maps' probabilities instead).
    intercept_ : ndarray of shape (n_classes,)
        ``b`` (fold mean with ``ensemble=True``).
    coefs_, intercepts_ : ndarray of shape (n_folds, k, k) and (n_folds, k)
        The fold maps (only with ``ensemble=True``).
    classes_ : ndarray of shape (n_classes,)
        The label of each score column (``classes``, or as read from ``y``);
        ``predict`` returns these labels.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_classes,)
        Column names of DataFrame scores (only when fitted on one).
    reg_lambda_, reg_mu_ : float or None
        Penalty strengths used (``reg_mu_`` is None except for ODIR).
    cv_results_ : dict or None
        With ``"auto"``: ``{"reg_lambda", "reg_mu", "mean_test_log_loss"}``
        arrays over the grid.
    n_iter_ : int
        Newton iterations of the final fit (max over folds with ``ensemble``).
    converged_ : bool
    loss_ : float
        Objective at the fitted map (mean over folds with ``ensemble``).

    Notes
    -----
    A class absent from the calibration labels does not break the fit (the
    number of classes comes from the score columns). Its probability is pushed
    towards zero: with a penalised intercept (ODIR ``mu > 0`` or L2) its row
    stays finite; without one (``reg="none"`` or ``mu = 0``) the infimum is not
    attained and the solver stops where the gradient -- of the order of that
    class's predicted probability -- falls below ``tol``, so the class then
    gets calibrated probabilities of order ``tol``.

    References
    ----------
    .. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
       P. Flach. "Beyond temperature scaling: Obtaining well-calibrated
       multiclass probabilities with Dirichlet calibration". NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import DirichletCalibrator, make_dirgen
    >>> q, y, _, _ = make_dirgen(600, 3, rng=np.random.default_rng(0))
    >>> cal = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(q, y)
    >>> cal.predict_proba(q[:2]).sum(axis=1)
    array([1., 1.])
    >>> bool(cal.converged_)
    True
    """

    _feature_space = "log"

    def __init__(
        self,
        *,
        reg: str = "odir",
        reg_lambda: float | str = "auto",
        reg_mu: float | str | None = "auto",
        center: str = "zero",
        cv: Any = 3,
        ensemble: bool = False,
        input: str = "probs",
        eps: float = EPS,
        max_iter: int = 100,
        tol: float = 1e-8,
        warm_start: bool = False,
        classes: ArrayLike | None = None,
    ) -> None:
        self.reg = reg
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.center = center
        self.cv = cv
        self.ensemble = ensemble
        self.input = input
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.classes = classes

    # -- validation -------------------------------------------------------
    def _check_params(self) -> tuple[str, float | str, float | str | None]:
        reg = check_option(self.reg, "reg", ("odir", "l2", "none"))
        check_option(self.center, "center", ("zero", "identity"))
        check_option(self.ensemble, "ensemble", (False, True))
        check_option(self.warm_start, "warm_start", (False, True))
        check_positive_int(self.max_iter, "max_iter")
        check_nonnegative_float(self.tol, "tol", strict=True)
        lam = _check_reg_value(self.reg_lambda, "reg_lambda", allow_none=False)
        mu = _check_reg_value(self.reg_mu, "reg_mu", allow_none=True)
        if reg != "odir" and mu not in (None, "auto"):
            raise ValueError(
                f"reg_mu is only used by reg='odir'; got reg_mu={self.reg_mu!r} with reg={reg!r}"
            )
        if reg == "none" and lam not in ("auto", 0.0):
            raise ValueError(
                f"reg_lambda is not used by reg='none'; got reg_lambda={self.reg_lambda!r}"
            )
        if isinstance(self.cv, bool) or (
            isinstance(self.cv, Integral) and self.cv < 2
        ):
            raise ValueError(f"cv must be an integer >= 2 or a CV splitter; got {self.cv!r}")
        return reg, lam, mu

    # -- fitting ----------------------------------------------------------
    def fit(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> DirichletCalibrator:
        """Fit the calibration map on held-out scores.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities or logits (``input``).
        y : array-like of shape (n_samples,)
            Class labels: the sorted labels name the score columns, or the
            ``classes`` parameter does (see :class:`DirichletCalibrator`).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the log-loss terms.

        Returns
        -------
        self : DirichletCalibrator
        """
        reg, lam, mu = self._check_params()
        data = self._fit_data(scores, y, sample_weight)  # validates; writes nothing
        x, y, sw = data.x, data.y, data.sample_weight
        n, k = x.shape
        candidates = self._candidates(reg, lam, mu)
        need_cv = len(candidates) > 1 or self.ensemble
        previous = None
        fitted = getattr(self, "coef_", None)
        if self.warm_start and not need_cv and fitted is not None and fitted.shape == (k, k):
            previous = (np.array(fitted, dtype=float), np.array(self.intercept_, dtype=float))
        state: dict[str, Any] = {"cv_results_": None}
        if need_cv:
            splits = self._splits(x, y)
            fold_fits, losses = self._cross_validate(x, y, sw, reg, candidates, splits)
            best = int(np.argmin(losses))
            if len(candidates) > 1:
                state["cv_results_"] = {
                    "reg_lambda": np.array([c[0] for c in candidates]),
                    "reg_mu": np.array([np.nan if c[1] is None else c[1] for c in candidates]),
                    "mean_test_log_loss": np.asarray(losses),
                }
        else:
            best = 0
        state["reg_lambda_"], state["reg_mu_"] = candidates[best]
        penalty = self._penalty(k, reg, *candidates[best])
        if self.ensemble:
            fits = [f[best] for f in fold_fits]
            state["coefs_"] = np.stack([f.W for f in fits])
            state["intercepts_"] = np.stack([f.b for f in fits])
            state["coef_"] = state["coefs_"].mean(axis=0)
            state["intercept_"] = state["intercepts_"].mean(axis=0)
            state["n_iter_"] = max(f.n_iter for f in fits)
            state["converged_"] = all(f.converged for f in fits)
            state["loss_"] = float(np.mean([f.loss for f in fits]))
            if not state["converged_"]:
                self._warn_folds(sum(not f.converged for f in fits), len(fits))
            self._set_state(data, state)
            return self
        init = previous
        if need_cv:  # warm start from the mean of the fold maps at the chosen point
            fits = [f[best] for f in fold_fits]
            init = (np.mean([f.W for f in fits], axis=0), np.mean([f.b for f in fits], axis=0))
        res = self._solve(x, y, sw, penalty, init, warn=False)
        if not res.converged:
            warnings.warn(
                f"{type(self).__name__} did not converge after {res.n_iter} Newton iterations "
                f"(max |gradient| {res.grad_norm:.3g} > tol {self.tol:g}; {res.message}). "
                "Increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        state.update(coef_=res.W, intercept_=res.b, n_iter_=res.n_iter,
                     converged_=bool(res.converged), loss_=res.loss)
        self._set_state(data, state, drop=("coefs_", "intercepts_"))
        return self

    def _solve(
        self, x: NDArray[np.float64], y: NDArray[np.intp], sw: NDArray[np.float64],
        penalty: Any, init: Any, *, warn: bool,
    ) -> FitResult:
        return fit_multinomial(
            x, y, structure="full", penalty=penalty, init=init, max_iter=self.max_iter,
            tol=self.tol, sample_weight=sw, warn=warn,
        )

    def _penalty(self, k: int, reg: str, lam: float, mu: float | None) -> Any:
        if reg == "none":
            return make_penalty(k, "none")
        if reg == "l2":
            return make_penalty(k, "l2", lam, center=self.center)
        return make_penalty(k, "odir", lam, mu, center=self.center)

    def _candidates(
        self, reg: str, lam: float | str, mu: float | str | None
    ) -> list[tuple[float, float | None]]:
        """Grid points in warm-start order (strong to weak penalties, snaking in mu)."""
        if reg == "none":
            return [(0.0, None)]
        if reg == "l2":
            lams = L2_GRID if lam == "auto" else (lam,)
            return [(float(v), None) for v in lams]
        lams = ODIR_GRID if lam == "auto" else (lam,)
        if mu is None:
            return [(float(v), float(v)) for v in lams]
        mus = ODIR_GRID if mu == "auto" else (mu,)
        out = []
        for i, lv in enumerate(lams):
            row = mus if i % 2 == 0 else mus[::-1]
            out.extend((float(lv), float(mv)) for mv in row)
        return out

    def _splits(self, x: NDArray[np.float64], y: NDArray[np.intp]) -> list[tuple[Any, Any]]:
        if isinstance(self.cv, Integral):
            n = x.shape[0]
            if self.cv > n:
                raise ValueError(
                    f"cv={self.cv} folds need at least {self.cv} samples; got n_samples={n}"
                )
            counts = np.bincount(y)
            if counts.max() < self.cv:  # too few per class to stratify
                from sklearn.model_selection import KFold

                return list(KFold(self.cv).split(x, y))
            cv = StratifiedKFold(self.cv)
        else:
            cv = check_cv(self.cv, y, classifier=True)
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="The least populated class", category=UserWarning
            )
            return list(cv.split(x, y))

    def _cross_validate(
        self,
        x: NDArray[np.float64],
        y: NDArray[np.intp],
        sw: NDArray[np.float64],
        reg: str,
        candidates: list[tuple[float, float | None]],
        splits: list[tuple[Any, Any]],
    ) -> tuple[list[list[FitResult]], list[float]]:
        k = x.shape[1]
        fold_fits: list[list[FitResult]] = []
        held = np.zeros((len(splits), len(candidates)))
        failed = total = 0
        for f, (tr, te) in enumerate(splits):
            fits: list[FitResult] = []
            prev: FitResult | None = None
            for c, (lam, mu) in enumerate(candidates):
                res = self._solve(x[tr], y[tr], sw[tr], self._penalty(k, reg, lam, mu), prev,
                                  warn=False)
                failed += not res.converged
                total += 1
                fits.append(res)
                prev = res
                held[f, c] = multinomial_log_loss(x[te], y[te], res.W, res.b, sw[te])
            fold_fits.append(fits)
        if failed:
            self._warn_folds(failed, total)
        return fold_fits, list(held.mean(axis=0))

    def _warn_folds(self, failed: int, total: int) -> None:
        warnings.warn(
            f"{type(self).__name__}: {failed} of {total} cross-validation fits did not "
            "converge. Increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )

    # -- prediction -------------------------------------------------------
    def predict_proba(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Calibrated probabilities (the fold-map average with ``ensemble=True``).

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, ("coef_", "intercept_"))
        if not hasattr(self, "coefs_"):
            return super().predict_proba(scores)
        x = self._features(scores)
        return np.mean(
            [dirlin_from_features(x, W, b) for W, b in zip(self.coefs_, self.intercepts_,
                                                          strict=True)],
            axis=0,
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = self.input == "probs"
        return tags


class MatrixScaler(DirichletCalibrator):
    r"""Matrix scaling: ``softmax(W z + b)`` on raw logits ``z`` (MS-ODIR by default).

    The same fit as :class:`DirichletCalibrator` (shared code, same
    parameters and attributes) on the logits themselves (Guo et al. 2017);
    with the default ODIR penalty this is the MS-ODIR method of Kull et al.
    (2019). Unlike the Dirichlet map it is not invariant to adding a constant
    to a row of logits. With ``input="probs"`` the features are ``ln q``, and
    the fit equals :class:`DirichletCalibrator`.

    Parameters
    ----------
    reg, reg_lambda, reg_mu, center, cv, ensemble, eps, max_iter, tol, warm_start, classes
        As in :class:`DirichletCalibrator`.
    input : {"logits", "probs"}, default="logits"

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import MatrixScaler
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> logits = np.eye(3)[y] * 4.0 + rng.normal(0, 1.0, (300, 3))
    >>> ms = MatrixScaler(reg_lambda=1e-2, reg_mu=1e-2).fit(logits, y)
    >>> ms.coef_.shape, bool(ms.converged_)
    ((3, 3), True)
    """

    _feature_space = "raw"

    def __init__(
        self,
        *,
        reg: str = "odir",
        reg_lambda: float | str = "auto",
        reg_mu: float | str | None = "auto",
        center: str = "zero",
        cv: Any = 3,
        ensemble: bool = False,
        input: str = "logits",
        eps: float = EPS,
        max_iter: int = 100,
        tol: float = 1e-8,
        warm_start: bool = False,
        classes: ArrayLike | None = None,
    ) -> None:
        super().__init__(
            reg=reg, reg_lambda=reg_lambda, reg_mu=reg_mu, center=center, cv=cv,
            ensemble=ensemble, input=input, eps=eps, max_iter=max_iter, tol=tol,
            warm_start=warm_start, classes=classes,
        )
