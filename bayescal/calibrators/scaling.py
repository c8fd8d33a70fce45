r"""Temperature and vector scaling (Guo et al. 2017), solved exactly.

Drop-in replacements for ``tuiml.uncertainty.TemperatureScaler`` and
``VectorScaler``: the same positional parameters, attributes and methods, but
both reach the exact optimum of their objective with Newton's method
(:func:`bayescal.optimize.fit_multinomial`, structures ``"scalar"`` and
``"diagonal"``), where the reference uses a golden-section search and
fixed-step gradient descent. By default ``VectorScaler`` penalises its fit
towards temperature scaling (``reg="structured"``); ``reg="none"`` minimises
the reference's objective, the plain calibration log-loss.

Input convention. Both scalers take **logits**. They do not guess whether the
scores are probabilities (no value sniffing): to calibrate probabilities
``q``, pass their logarithm, e.g. ``bayescal.log_features(q)`` (``ln q``
floored at ``ln eps``, so exact zeros stay finite), which is a valid logit
vector because ``log_softmax(ln q) = ln q``. For temperature scaling this gives
the same temperature as the logits themselves (the features are
``log_softmax(z)``, floored at ``ln(EPS)``). Vector scaling acts on the
logits as given (it is not invariant to a per-row shift), so ``z`` and
``ln softmax(z)`` give different, equally valid, fits.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from bayescal._validation import (
    EPS,
    check_nonnegative_float,
    check_option,
    check_positive_int,
)
from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.maps import temperature_to_dirlin
from bayescal.optimize import FitResult, fit_multinomial
from bayescal.structured import check_cv_param, check_strength, fit_structured

__all__ = ["TemperatureScaler", "VectorScaler"]


def _check_log_t_bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"log_t_bounds must be a pair (lo, hi) of numbers; got {bounds!r}"
        ) from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"log_t_bounds must be finite with lo < hi; got {bounds!r}")
    return lo, hi


class _LogitScaler(FamilyCalibratorMixin):
    """Shared plumbing: logits in, tuiml-style ``fitted_`` and repr."""

    #: The tuiml signatures have no ``input``/``eps``: scores are logits.
    input = "logits"
    eps = EPS

    @property
    def fitted_(self) -> bool:
        """Whether :meth:`fit` has been called."""
        return hasattr(self, "coef_")

    def _warn_unconverged(self, res: FitResult) -> None:
        if not res.converged:
            from sklearn.exceptions import ConvergenceWarning

            warnings.warn(
                f"{type(self).__name__} did not converge after {res.n_iter} Newton "
                f"iterations (max |gradient| {res.grad_norm:.3g} > tol {self.tol:g}; "
                f"{res.message}). Increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=3,
            )


class TemperatureScaler(_LogitScaler):
    r"""Multiclass calibration by one temperature: ``softmax(z / T)``.

    A positive temperature does not change the ranking of the logits, so
    accuracy is unchanged; only the confidence moves (``T > 1`` softens an
    over-confident model). ``T`` minimises the mean log-loss

    .. math:: L(T) = -\frac{1}{n}\sum_i \ln \mathrm{softmax}(z_i / T)_{y_i},

    which is convex in the inverse temperature ``s = 1/T``: Newton's method on
    ``s`` (started at ``T = 1``) finds the exact optimum in a handful of
    iterations, each ``O(n k)``.

    Parameters
    ----------
    max_iter : int, default=200
        Maximum Newton iterations (a few are used in practice).
    tol : float, default=1e-6
        Stop when ``|dL/ds| <= tol``. Newton converges quadratically, so the
        returned ``ln T`` is usually exact to far below ``tol``. (The reference
        implementation used it as the width of a golden-section bracket on
        ``ln T``.)
    log_t_bounds : tuple of float, default=(-4.0, 4.0)
        ``ln T`` is kept in ``[lo, hi]`` (``T`` in [0.018, 54.6] by default);
        the loss is convex, so a bound is returned exactly when the unbounded
        optimum lies beyond it (e.g. ``T -> 0`` on separable logits, or
        ``T -> inf`` on logits unrelated to the labels).
    classes : array-like of shape (n_classes,), default=None
        The label of each logit column, in column order; ``None`` reads them
        from ``y`` (see :class:`~bayescal.DirichletCalibrator`).

    Attributes
    ----------
    temperature_ : float
        The fitted temperature.
    n_iter_ : int
        Newton iterations performed.
    classes_ : ndarray of shape (n_classes,)
        The label of each logit column.
    fitted_ : bool
        Whether :meth:`fit` has been called.
    coef_ : ndarray of shape (n_classes, n_classes)
        The DirLin weights ``I / T``; ``intercept_`` is zero.
    converged_ : bool
    n_features_in_ : int

    Notes
    -----
    Scores are logits; for probabilities pass ``bayescal.log_features(q)``
    (see the module docstring). The features are ``log_softmax(z)`` floored at
    ``ln(EPS)`` = -36.04, as for every map of the Dirichlet family, so logits
    and their softmax give the same temperature.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger. "On Calibration of
       Modern Neural Networks". ICML 2017, 1321-1330. arXiv:1706.04599.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import TemperatureScaler
    >>> from bayescal import expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> noisy = np.where(rng.random(300) < 0.3, (y + 1) % 3, y)
    >>> logits = np.eye(3)[noisy] * 6.0 + rng.normal(0, 1.0, (300, 3))
    >>> scaler = TemperatureScaler().fit(logits, y)
    >>> bool(scaler.temperature_ > 1.0)  # the model was over-confident
    True
    >>> proba = scaler.transform(logits)
    >>> bool(expected_calibration_error(y, proba) < 0.1)
    True
    """

    _feature_space = "log"

    def __init__(
        self,
        max_iter: int = 200,
        tol: float = 1e-06,
        log_t_bounds: tuple = (-4.0, 4.0),
        *,
        classes: ArrayLike | None = None,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.log_t_bounds = log_t_bounds
        self.classes = classes

    def _check_params(self) -> tuple[int, float, float, float]:
        """The validated ``max_iter``, ``tol`` and ``log_t_bounds`` (raises ValueError)."""
        max_iter = check_positive_int(self.max_iter, "max_iter")
        tol = check_nonnegative_float(self.tol, "tol", strict=True)
        lo, hi = _check_log_t_bounds(self.log_t_bounds)
        return max_iter, tol, lo, hi

    def fit(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> TemperatureScaler:
        """Fit the temperature on held-out logits.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated logits (for probabilities pass their log).
        y : array-like of shape (n_samples,)
            True labels (see ``classes``).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the log-loss terms.

        Returns
        -------
        self : TemperatureScaler
            The fitted scaler.
        """
        max_iter, tol, lo, hi = self._check_params()
        data = self._fit_data(scores, y, sample_weight)
        res = fit_multinomial(
            data.x, data.y, structure="scalar", max_iter=max_iter, tol=tol,
            bounds=(np.exp(-hi), np.exp(-lo)), sample_weight=data.sample_weight, warn=False,
        )
        self._warn_unconverged(res)
        temperature = float(1.0 / res.theta[0])
        # W = I / T from the stored T itself, so a loaded model is bit-identical
        # (I * s and I / (1 / s) can differ in the last bit)
        W, b = temperature_to_dirlin(temperature, data.x.shape[1])
        self._set_state(data, {
            "coef_": W, "intercept_": b, "temperature_": temperature,
            "n_iter_": res.n_iter, "converged_": bool(res.converged),
        })
        return self

    def transform(self, scores: ArrayLike) -> np.ndarray:
        """Apply the fitted temperature and return calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated logits.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Calibrated probabilities, rows summing to one.
        """
        return self.predict_proba(scores)

    @classmethod
    def get_parameter_schema(cls) -> dict[str, Any]:
        """Return the JSON Schema of the constructor parameters."""
        return {
            "type": "object",
            "properties": {
                "max_iter": {"type": "integer", "default": 200, "minimum": 1,
                             "description": "Maximum Newton iterations."},
                "tol": {"type": "number", "default": 1e-6, "exclusiveMinimum": 0,
                        "description": "Tolerance on |dL/d(1/T)|."},
                "log_t_bounds": {"type": "array", "default": [-4.0, 4.0],
                                 "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                                 "description": "Bounds (lo, hi) on log T, lo < hi."},
                "classes": {"type": ["array", "null"], "default": None,
                            "description": "Label of each logit column, in column order."},
            },
            "additionalProperties": False,
        }

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """Return a readable representation of the scaler."""
        if self.fitted_:
            return f"TemperatureScaler(temperature={self.temperature_:.4f})"
        return super().__repr__(N_CHAR_MAX)


class VectorScaler(_LogitScaler):
    r"""Multiclass calibration with a per-class scale and bias on the logits.

    .. math:: p = \mathrm{softmax}(w \odot z + b)

    ``2k`` parameters; it can fix class-dependent miscalibration that one
    temperature cannot, but does not preserve the ranking. By default the fit
    is penalised towards temperature scaling (``w = 1/T``, ``b = 0``; the
    structured penalty of :func:`bayescal.optimize.make_penalty` restricted to
    a diagonal ``W``), with the two strengths chosen by the Laplace evidence
    and checked by cross-validation against temperature scaling
    (:mod:`bayescal.structured`; from ``k = 31`` classes, chosen alike on one
    held-out split instead), so it moves away from one temperature only
    when the calibration data support it; ``reg="none"`` is the original
    unpenalised vector scaling. The objective is convex in ``(w, b)``;
    Newton's method with the exact ``2k x 2k`` Hessian reaches its exact
    minimum.

    Parameters
    ----------
    max_iter : int, default=500
        Maximum Newton iterations (usually fewer than 20 are used).
    learning_rate : float, default=0.05
        Kept for compatibility with the gradient-descent reference
        implementation, where it was the initial step size. Newton's method
        with a line search needs no step size, so it does not affect the fit;
        it is validated (must be > 0).
    tol : float, default=1e-7
        Stop when the max-abs gradient of the mean log-loss is ``<= tol``.
    reg : {"structured", "none"}, default="structured"
        Penalty: centred on temperature scaling, or none.
    reg_diag : float, "auto" or None, default="auto"
        Strength on the scales' deviation from ``1/T`` (``"structured"``
        only; ``None`` means ``"auto"``).
    reg_mu : float, "auto" or None, default="auto"
        Strength on the biases (``"structured"`` only; ``None`` ties it to
        ``reg_diag``).
    cv : int, cross-validation splitter or None, default=5
        Folds of the check against temperature scaling (run when both
        strengths are "auto"); ``None`` keeps the evidence's choice unchecked.
    classes : array-like of shape (n_classes,), default=None
        As in :class:`TemperatureScaler`.

    Attributes
    ----------
    weights_ : ndarray of shape (n_classes,)
        Per-class logit scale ``w``.
    bias_ : ndarray of shape (n_classes,)
        Per-class logit offset ``b``.
    n_iter_ : int
        Newton iterations performed.
    classes_ : ndarray of shape (n_classes,)
    fitted_ : bool
        Whether :meth:`fit` has been called.
    coef_, intercept_ : ndarray
        ``diag(weights_)`` and ``bias_``.
    converged_ : bool
    n_features_in_ : int
    reg_diag_, reg_mu_ : float or None
        Strengths used (``"structured"``; ``inf`` when temperature scaling was
        chosen).
    temperature_ : float or None
        ``T`` of the centre (``"structured"``).

    Notes
    -----
    With ``reg="none"``, a class absent from the labels gets an ever smaller bias: the solver stops
    when the gradient (about that class's mean predicted probability) is below
    ``tol``, so its calibrated probabilities are of order ``tol``.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger. "On Calibration of
       Modern Neural Networks". ICML 2017, 1321-1330. arXiv:1706.04599.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import VectorScaler
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> logits = np.eye(3)[y] * 5.0 + rng.normal(0, 1.0, (300, 3))
    >>> scaler = VectorScaler(max_iter=200).fit(logits, y)
    >>> proba = scaler.transform(logits)
    >>> bool(np.allclose(proba.sum(axis=1), 1.0))
    True
    """

    _feature_space = "raw"

    def __init__(
        self,
        max_iter: int = 500,
        learning_rate: float = 0.05,
        tol: float = 1e-07,
        *,
        reg: str = "structured",
        reg_diag: float | str | None = "auto",
        reg_mu: float | str | None = "auto",
        cv: Any = 5,
        classes: ArrayLike | None = None,
    ) -> None:
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.tol = tol
        self.reg = reg
        self.reg_diag = reg_diag
        self.reg_mu = reg_mu
        self.cv = cv
        self.classes = classes

    def _check_params(self) -> tuple[int, float, str, Any, Any]:
        """The validated ``max_iter``, ``tol``, ``reg``, ``reg_diag``, ``reg_mu`` (ValueError)."""
        max_iter = check_positive_int(self.max_iter, "max_iter")
        tol = check_nonnegative_float(self.tol, "tol", strict=True)
        check_nonnegative_float(self.learning_rate, "learning_rate", strict=True)
        reg = check_option(self.reg, "reg", ("structured", "none"))
        diag = check_strength(self.reg_diag, "reg_diag", allow_none=True)
        mu = check_strength(self.reg_mu, "reg_mu", allow_none=True)
        if reg == "none" and (diag not in (None, "auto") or mu not in (None, "auto")):
            raise ValueError(f"reg_diag and reg_mu are not used by reg='none'; got "
                             f"reg_diag={self.reg_diag!r}, reg_mu={self.reg_mu!r}")
        check_cv_param(self.cv, allow_none=True)
        return max_iter, tol, reg, diag, mu

    def fit(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> VectorScaler:
        """Fit the per-class scale and bias on held-out logits.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated logits (for probabilities pass their log).
        y : array-like of shape (n_samples,)
            True labels (see ``classes``).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the log-loss terms.

        Returns
        -------
        self : VectorScaler
            The fitted scaler.
        """
        max_iter, tol, reg, diag, mu = self._check_params()
        data = self._fit_data(scores, y, sample_weight)
        state: dict[str, Any] = {"reg_diag_": None, "reg_mu_": None, "temperature_": None}
        if reg == "none":
            res = fit_multinomial(data.x, data.y, structure="diagonal", max_iter=max_iter,
                                  tol=tol, sample_weight=data.sample_weight, warn=False)
        else:
            sf = fit_structured(data.x, data.y, structure="diagonal", reg_diag=diag, reg_mu=mu,
                                sample_weight=data.sample_weight, cv=self.cv,
                                max_iter=max_iter, tol=tol)
            res = sf.fit
            state.update(reg_diag_=float(sf.strengths["reg_diag"]),
                         reg_mu_=float(sf.strengths["reg_mu"]), temperature_=1.0 / sf.scale)
        self._warn_unconverged(res)
        self._set_state(data, {
            **state, "coef_": res.W, "intercept_": res.b, "weights_": np.diag(res.W).copy(),
            "bias_": res.b.copy(), "n_iter_": res.n_iter, "converged_": bool(res.converged),
        })
        return self

    def transform(self, scores: ArrayLike) -> np.ndarray:
        """Apply the fitted scale and bias and return calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated logits.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Calibrated probabilities, rows summing to one.
        """
        return self.predict_proba(scores)

    @classmethod
    def get_parameter_schema(cls) -> dict[str, Any]:
        """Return the JSON Schema of the constructor parameters."""
        return {
            "type": "object",
            "properties": {
                "max_iter": {"type": "integer", "default": 500, "minimum": 1,
                             "description": "Maximum Newton iterations."},
                "learning_rate": {"type": "number", "default": 0.05, "exclusiveMinimum": 0,
                                  "description": "Unused by Newton's method (compatibility)."},
                "tol": {"type": "number", "default": 1e-7, "exclusiveMinimum": 0,
                        "description": "Tolerance on the max-abs gradient."},
                "reg": {"enum": ["structured", "none"], "default": "structured",
                        "description": "Penalty towards temperature scaling, or none."},
                "reg_diag": {"anyOf": [{"type": "number", "minimum": 0},
                                       {"enum": ["auto", None]}], "default": "auto",
                             "description": "Strength on the scales (structured)."},
                "reg_mu": {"anyOf": [{"type": "number", "minimum": 0},
                                     {"enum": ["auto", None]}], "default": "auto",
                           "description": "Strength on the biases (structured)."},
                "cv": {"anyOf": [{"type": "integer", "minimum": 2}, {"enum": [None]}],
                       "default": 5, "description": "Folds of the check against "
                       "temperature scaling."},
                "classes": {"type": ["array", "null"], "default": None,
                            "description": "Label of each logit column, in column order."},
            },
            "additionalProperties": False,
        }

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """Return a readable representation of the scaler."""
        if self.fitted_:
            return f"VectorScaler(n_classes={self.weights_.shape[0]}, n_iter={self.n_iter_})"
        return super().__repr__(N_CHAR_MAX)
