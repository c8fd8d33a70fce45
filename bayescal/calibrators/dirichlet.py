r"""Dirichlet calibration and matrix scaling: MAP fits of a full linear map.

Both estimators fit ``softmax(W x + b)`` with a full ``k x k`` matrix ``W`` by
:func:`bayescal.optimize.fit_multinomial` (exact Newton). They differ only in
the features: :class:`DirichletCalibrator` uses the log-probabilities
``x = max(ln q, ln eps)`` (Kull et al. 2019), :class:`MatrixScaler` the raw
logits (Guo et al. 2017; with ODIR this is the paper's MS-ODIR).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_nonnegative_float,
    check_option,
    check_positive_int,
)
from bayescal.calibrators._base import FamilyCalibratorMixin, check_input_params
from bayescal.maps import dirlin_from_features
from bayescal.optimize import (
    FitResult,
    dense_hessian,
    fit_multinomial,
    make_penalty,
    multinomial_log_loss,
)
from bayescal.structured import (
    StructuredFit,
    check_cv_param,
    check_strength,
    cv_splits,
    fit_structured,
    fit_temperature_scale,
    succession_floor,
    temperature_result,
)

__all__ = ["ODIR_GRID", "L2_GRID", "DirichletCalibrator", "MatrixScaler"]

#: Grid of ``reg_lambda`` and of ``reg_mu`` for ODIR (Kull et al. 2019).
ODIR_GRID: tuple[float, ...] = (1e3, 1e1, 1e-1, 1e-3, 1e-5, 1e-7)
#: Grid of ``reg_lambda`` for L2: eleven values 1e3, 1e2, ..., 1e-7.
L2_GRID: tuple[float, ...] = tuple(10.0**p for p in range(3, -8, -1))


class DirichletCalibrator(FamilyCalibratorMixin):
    r"""Dirichlet calibration: MAP fit of ``softmax(W ln q + b)``.

    Minimises the mean log-loss plus a penalty
    (:func:`bayescal.optimize.make_penalty`):

    * ``reg="structured"`` (default): a Gaussian prior centred on temperature
      scaling ``W = I/T, b = 0`` (``T`` fitted first), with separate strengths
      for the off-diagonal of ``W`` (``reg_lambda``), the diagonal's deviation
      from ``1/T`` (``reg_diag``) and ``b`` (``reg_mu``). Strong strengths give
      temperature scaling, weak ones the unpenalised map. With every strength
      ``"auto"`` they are chosen by type-II maximum likelihood (the Laplace
      evidence) and then checked by ``cv``-fold cross-validation against
      temperature scaling with a one-standard-error rule, so the map leaves
      temperature scaling only when the held-out data support it
      (:mod:`bayescal.structured`). From ``k = 31`` classes
      (:data:`bayescal.structured.HOLDOUT_MIN_K`) the evidence is skipped: the
      strengths, set alike, are chosen among temperature scaling and ``(10, 1,
      0.1, 0.01)`` on the first ``cv`` split only, stopping at the first rise
      of the held-out loss (1.0-1.3 CPU s at ``k = 100``, ``n = 5000`` on the
      CIFAR-100 outputs, against 7.6-8.4 s for evidence and five folds, at a
      test log-loss level with or below theirs). Beyond ``k = 100`` classes
      (:data:`bayescal.structured.FULL_AUTO_MAX_K`) an ``"auto"`` off-diagonal
      is not fitted: the map is the diagonal one (per-class scale and bias,
      centred on temperature scaling, chosen the same way) and
      ``reg_lambda_`` is ``inf``: each pass over the data fitting ``k (k - 1)``
      off-diagonal weights costs ``O(n k^2)`` (docs/benchmarks.md, "Scale"); a fixed
      ``reg_lambda`` still fits it at any ``k``;
    * ``reg="odir"`` (the paper's): :math:`\frac{\lambda}{k(k-1)}\sum_{i\ne j}
      W_{ij}^2 + \frac{\mu}{k}\sum_j b_j^2` (off-diagonal and intercept
      regularisation; the diagonal is free);
    * ``reg="l2"`` (the paper's): :math:`\frac{\lambda}{k(k+1)}(\sum_{ij}(W_{ij}-C_{ij})^2 +
      \sum_j b_j^2)` with ``C = 0`` or ``I`` (``center``). With ``"auto"``
      strengths the paper's penalties search a grid (36 points for ODIR, 11
      for L2) over ``cv`` folds, every point a full-``W`` fit: 21 CPU s (L2)
      and 84 s (ODIR) at ``k = 100``, ``n = 5000`` (docs/benchmarks.md,
      *Scale*), and out of reach at ``k = 1000`` (each pass
      over ``n = 25000`` rows is two ``n x k x k`` products, seconds; the
      grid needs thousands); use the default there;
    * ``reg="none"``: the plain maximum-likelihood fit.

    Features are ``x = max(ln q, ln eps)``; exact zeros in ``q`` become
    ``ln eps`` (-36.04 by default). Every fit uses the exact Hessian and stops
    when the largest absolute gradient entry is below ``tol``. No reference
    row is used: relabelling the classes permutes the fitted map exactly.

    Parameters
    ----------
    reg : {"structured", "odir", "l2", "none"}, default="structured"
        Penalty.
    reg_lambda : float or "auto", default="auto"
        :math:`\lambda \ge 0`: for ``"structured"`` the off-diagonal
        strength (units of :func:`bayescal.optimize.make_penalty`, where 1 is
        structured matrix scaling's fixed default), for ODIR and L2 the
        paper's ``lambda``. ``"auto"``: for ``"structured"`` see above; for
        ODIR and L2, stratified internal cross-validation (``cv`` folds) over
        :data:`ODIR_GRID` or :data:`L2_GRID` by mean held-out log-loss,
        warm-starting each fit from its neighbour on the grid. Unused (must
        stay ``"auto"`` or 0) for ``reg="none"``.
    reg_mu : float, "auto" or None, default="auto"
        :math:`\mu \ge 0`, the intercept strength (``"structured"`` and
        ODIR). ``None`` ties it to ``reg_lambda`` (``mu = lambda``; with
        ``reg_lambda="auto"`` one strength is searched for both). ``"auto"``
        searches it (for ODIR with ``reg_lambda="auto"``, the full 6 x 6 grid
        of the paper). Must be ``"auto"`` or ``None`` for ``reg="l2"`` and
        ``reg="none"``.
    reg_diag : float, "auto" or None, default="auto"
        Strength on the diagonal's deviation from ``1/T`` (``"structured"``
        only; ``None`` ties it to ``reg_lambda``). Must be ``"auto"`` or
        ``None`` for the other penalties.
    center : {"zero", "identity"}, default="zero"
        Centre of the L2 penalty: the uniform predictor (``W = 0``, as
        dirichletcal) or the uncalibrated scores (``W = I``).
    cv : int or cross-validation splitter, default=5
        Internal cross-validation for ``"auto"`` (the one-standard-error check
        of ``"structured"``, the grid search of ODIR and L2) and
        ``ensemble=True`` (an int means unshuffled
        :class:`~sklearn.model_selection.StratifiedKFold`, or
        :class:`~sklearn.model_selection.KFold` when a class has fewer than
        ``cv`` samples).
    ensemble : bool, default=False
        If True, keep the ``cv`` fold maps fitted at the chosen
        hyperparameters and average their calibrated probabilities (the
        paper's protocol) instead of refitting on all the data.
    input : {"probs", "logits"}, default="probs"
        What the scores hold. Logits are mapped to ``log_softmax(z)``, so
        ``z`` and ``softmax(z)`` give the same fit.
    eps : float or "auto", default="auto"
        Floor on probabilities before the logarithm, ``x = max(ln q, ln eps)``.
        ``"auto"``: for ``reg="structured"`` with some strength ``"auto"``, the
        floor with the larger Laplace evidence (from ``k = 31`` classes with
        every strength ``"auto"``: the lower held-out loss) of the two: float64 machine
        epsilon (2.22e-16, :data:`bayescal.EPS`) or ``1 / (k (n + 1))`` (the
        smallest probability ``n`` calibration samples can resolve, Laplace's
        rule of succession; it tames exact zeros, e.g. from trees); for the
        other penalties :data:`bayescal.EPS`. The floor used is ``eps_`` and
        applies to every later prediction. A number fixes it; use
        ``np.finfo(float).tiny`` to reproduce the paper text. (Raw logits of
        :class:`MatrixScaler` are not floored.)
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
        Penalty strengths used (``reg_mu_`` is None for L2 and ``"none"``;
        for ``"structured"``, ``inf`` when temperature scaling was chosen).
    reg_diag_ : float or None
        The diagonal strength used (``"structured"`` only, else None).
    temperature_ : float or None
        ``T`` of the centre ``W = I/T`` (``"structured"`` only, else None).
    eps_ : float
        The probability floor used (see ``eps``).
    cv_results_ : dict or None
        ODIR and L2 with ``"auto"``: ``{"reg_lambda", "reg_mu",
        "mean_test_log_loss"}`` arrays over the grid.
    selection_ : dict or None
        ``reg="structured"`` with some strength ``"auto"``: the evidence
        strengths (``"evidence_reg_lambda"``, ``"evidence_reg_diag"``,
        ``"evidence_reg_mu"``), ``"n_evidence_iter"``, ``"log_evidence"`` at
        those strengths (None, and 0 iterations, from
        :data:`~bayescal.structured.HOLDOUT_MIN_K` classes on, where the
        default full map is chosen by one held-out split without the
        evidence) and, when the check ran, its candidates
        (``"path_reg_lambda"``, ``"path_reg_diag"``, ``"path_reg_mu"``: their
        strengths, ``inf`` for temperature scaling; ``"path_mean_test_log_loss"``,
        ``"path_se_vs_best"``, ``"path_se_factor"``; ``"path_index"`` of the one
        chosen; else None). Absent for the other penalties.
    n_iter_ : int
        Newton iterations of the final fit (max over folds with ``ensemble``;
        for ``"structured"`` with "auto" strengths, all the Newton iterations
        spent on the full data, evidence updates included).
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
    >>> cal = DirichletCalibrator().fit(q, y)
    >>> cal.predict_proba(q[:2]).sum(axis=1)
    array([1., 1.])
    >>> bool(cal.converged_)
    True
    >>> odir = DirichletCalibrator(reg="odir", reg_lambda=1e-3, reg_mu=1e-3).fit(q, y)
    """

    _feature_space = "log"
    _eps_auto = True

    def __init__(
        self,
        *,
        reg: str = "structured",
        reg_lambda: float | str = "auto",
        reg_mu: float | str | None = "auto",
        reg_diag: float | str | None = "auto",
        center: str = "zero",
        cv: Any = 5,
        ensemble: bool = False,
        input: str = "probs",
        eps: float | str = "auto",
        max_iter: int = 100,
        tol: float = 1e-8,
        warm_start: bool = False,
        classes: ArrayLike | None = None,
    ) -> None:
        self.reg = reg
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_diag = reg_diag
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
    def _check_params(self) -> tuple[str, float | str, float | str | None, float | str | None]:
        reg = check_option(self.reg, "reg", ("structured", "odir", "l2", "none"))
        check_input_params(self)
        check_option(self.center, "center", ("zero", "identity"))
        check_option(self.ensemble, "ensemble", (False, True))
        check_option(self.warm_start, "warm_start", (False, True))
        check_positive_int(self.max_iter, "max_iter")
        check_nonnegative_float(self.tol, "tol", strict=True)
        lam = check_strength(self.reg_lambda, "reg_lambda", allow_none=False)
        mu = check_strength(self.reg_mu, "reg_mu", allow_none=True)
        diag = check_strength(self.reg_diag, "reg_diag", allow_none=True)
        if reg not in ("odir", "structured") and mu not in (None, "auto"):
            raise ValueError(
                f"reg_mu is only used by reg='structured' and reg='odir'; got "
                f"reg_mu={self.reg_mu!r} with reg={reg!r}"
            )
        if reg != "structured" and diag not in (None, "auto"):
            raise ValueError(
                f"reg_diag is only used by reg='structured'; got reg_diag={self.reg_diag!r} "
                f"with reg={reg!r}"
            )
        if reg == "none" and lam not in ("auto", 0.0):
            raise ValueError(
                f"reg_lambda is not used by reg='none'; got reg_lambda={self.reg_lambda!r}"
            )
        check_cv_param(self.cv)
        return reg, lam, mu, diag

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
        reg, lam, mu, diag = self._check_params()
        auto_eps = isinstance(self.eps, str)
        data = self._fit_data(scores, y, sample_weight,  # validates; writes nothing
                              eps=EPS if auto_eps else None)
        x, y, sw = data.x, data.y, data.sample_weight
        n, k = x.shape
        fitted = getattr(self, "coef_", None)
        previous = None
        if self.warm_start and fitted is not None and fitted.shape == (k, k):
            previous = (np.array(fitted, dtype=float), np.array(self.intercept_, dtype=float))
        state: dict[str, Any] = {
            "cv_results_": None, "reg_diag_": None, "temperature_": None,
            "eps_": EPS if auto_eps else float(self.eps),
        }
        drop = ("coefs_", "intercepts_", "selection_")
        if reg == "structured":
            state.update(self._fit_structured(x, y, sw, lam, mu, diag, previous, auto_eps))
            self._set_state(data, state, drop=drop)
            return self
        candidates = self._candidates(reg, lam, mu)
        need_cv = len(candidates) > 1 or self.ensemble
        if need_cv:
            previous = None
            splits = cv_splits(self.cv, y)
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
            state.update(self._ensemble_state([f[best] for f in fold_fits]))
            self._set_state(data, state, drop=drop)
            return self
        init = previous
        if need_cv:  # warm start from the mean of the fold maps at the chosen point
            fits = [f[best] for f in fold_fits]
            init = (np.mean([f.W for f in fits], axis=0), np.mean([f.b for f in fits], axis=0))
        res = self._solve(x, y, sw, penalty, init, warn=False)
        self._warn_unconverged(res)
        state.update(self._fit_state(res))
        self._set_state(data, state, drop=drop)
        return self

    def _structure(self) -> str:
        return "full"

    def _fit_structured(
        self, x: NDArray[np.float64], y: NDArray[np.intp], sw: NDArray[np.float64],
        lam: float | str, mu: float | str | None, diag: float | str | None, previous: Any,
        auto_eps: bool,
    ) -> dict[str, Any]:
        """The structured penalty (:func:`bayescal.structured.fit_structured`): its state.

        With ``eps="auto"`` the features floored at ``1 / (k (n + 1))`` compete
        by evidence with those floored at :data:`~bayescal.EPS` (``x``).
        """
        structure = self._structure()
        alternatives: tuple[NDArray[np.float64], ...] = ()
        floor = succession_floor(x.shape[1], sw.sum())
        log_space = not (self._feature_space == "raw" and self.input == "logits")
        if auto_eps and log_space and floor > EPS:
            alternatives = (np.maximum(x, np.log(floor)),)  # = max(ln q, ln floor)
        sf = fit_structured(
            x, y, structure=structure, reg_lambda=lam, reg_diag=diag, reg_mu=mu,
            sample_weight=sw, cv=self.cv, max_iter=self.max_iter, tol=self.tol, init=previous,
            alternatives=alternatives,
        )
        state: dict[str, Any] = {
            "reg_lambda_": float(sf.strengths["reg_lambda"]),
            "reg_diag_": float(sf.strengths["reg_diag"]),
            "reg_mu_": float(sf.strengths["reg_mu"]),
            "temperature_": 1.0 / sf.scale,
        }
        if sf.features == 1:
            state["eps_"] = floor
            x = alternatives[0]
        if sf.evidence_strengths is not None or sf.path is not None:
            path = sf.path or {}
            ev = sf.evidence_strengths or dict.fromkeys(sf.strengths)
            state["selection_"] = {
                **{f"evidence_{g}": None if v is None else float(v) for g, v in ev.items()},
                "n_evidence_iter": int(sf.n_evidence_iter),
                "log_evidence": None if sf.log_evidence is None else float(sf.log_evidence),
                **{f"path_{key}": path.get(key) for key in (
                    "reg_lambda", "reg_diag", "reg_mu", "mean_test_log_loss", "se_vs_best",
                    "se_factor", "index")},
            }
        else:
            state["selection_"] = None
        if self.ensemble:
            fits = [self._fixed_structured(x[tr], y[tr], sw[tr], sf) for tr, _ in
                    cv_splits(self.cv, y)]
            return {**state, **self._ensemble_state(fits)}
        self._warn_unconverged(sf.fit)
        return {**state, **self._fit_state(sf.fit)}

    def _fixed_structured(self, x: NDArray[np.float64], y: NDArray[np.intp],
                          sw: NDArray[np.float64], sf: StructuredFit) -> FitResult:
        """One fold's fit at the strengths chosen on all the data."""
        if not all(np.isfinite(v) for v in sf.strengths.values()):  # temperature scaling
            return temperature_result(x, y, sw, self._structure(),
                                      fit_temperature_scale(x, y, sw))
        return fit_structured(x, y, structure=self._structure(), sample_weight=sw, cv=None,
                              max_iter=self.max_iter, tol=self.tol, **sf.strengths).fit

    @staticmethod
    def _fit_state(res: FitResult) -> dict[str, Any]:
        return {"coef_": res.W, "intercept_": res.b, "n_iter_": res.n_iter,
                "converged_": bool(res.converged), "loss_": res.loss}

    def _ensemble_state(self, fits: list[FitResult]) -> dict[str, Any]:
        coefs, intercepts = np.stack([f.W for f in fits]), np.stack([f.b for f in fits])
        state = {"coefs_": coefs, "intercepts_": intercepts, "coef_": coefs.mean(axis=0),
                 "intercept_": intercepts.mean(axis=0),
                 "n_iter_": max(f.n_iter for f in fits),
                 "converged_": all(f.converged for f in fits),
                 "loss_": float(np.mean([f.loss for f in fits]))}
        if not state["converged_"]:
            self._warn_folds(sum(not f.converged for f in fits), len(fits))
        return state

    def _warn_unconverged(self, res: FitResult) -> None:
        if not res.converged:
            warnings.warn(
                f"{type(self).__name__} did not converge after {res.n_iter} Newton iterations "
                f"(max |gradient| {res.grad_norm:.3g} > tol {self.tol:g}; {res.message}). "
                "Increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _solve(
        self, x: NDArray[np.float64], y: NDArray[np.intp], sw: NDArray[np.float64],
        penalty: Any, init: Any, *, warn: bool, reuse: dict[str, Any] | None = None,
    ) -> FitResult:
        return fit_multinomial(
            x, y, structure="full", penalty=penalty, init=init, max_iter=self.max_iter,
            tol=self.tol, sample_weight=sw, warn=warn, reuse=reuse,
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
        # Dense Newton (up to DENSE_MAX_PARAMS) starts each warm-started fit of a fold
        # with chord steps from the previous fit's likelihood Hessian (fit_multinomial's
        # ``reuse``). Newton-CG gets no reuse here: its block preconditioner, kept from
        # the grid's first point, went stale along the snaking (lambda, mu) order and
        # cost more products than it saved (2x the CPU at k = 30).
        dense = dense_hessian("full", k * (k + 1))
        for f, (tr, te) in enumerate(splits):
            fits: list[FitResult] = []
            prev: FitResult | None = None
            x_tr, y_tr, sw_tr = x[tr], y[tr], sw[tr]
            reuse: dict[str, Any] | None = {} if dense else None
            for c, (lam, mu) in enumerate(candidates):
                res = self._solve(x_tr, y_tr, sw_tr, self._penalty(k, reg, lam, mu), prev,
                                  warn=False, reuse=reuse)
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
    r"""Matrix scaling: ``softmax(W z + b)`` on raw logits ``z``.

    The same fit as :class:`DirichletCalibrator` (shared code, same
    parameters and attributes) on the logits themselves (Guo et al. 2017):
    by default with the structured penalty centred on temperature scaling
    (structured matrix scaling, Berta et al. 2025, with its strengths chosen
    by evidence and checked by cross-validation); with ``reg="odir"`` this is
    the MS-ODIR method of Kull et al. (2019), with ``reg="none"`` the original
    unpenalised matrix scaling. Unlike the Dirichlet map it is not invariant to
    adding a constant to a row of logits. With ``input="probs"`` the features
    are ``ln q``, and the fit equals :class:`DirichletCalibrator`.

    Parameters
    ----------
    input : {"logits", "probs"}, default="logits"
        What the scores hold. Every other parameter (``reg``, ``reg_lambda``,
        ``reg_mu``, ``reg_diag``, ``center``, ``cv``, ``ensemble``, ``eps``,
        ``max_iter``, ``tol``, ``warm_start``, ``classes``) is that of
        :class:`DirichletCalibrator`.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import MatrixScaler
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> logits = np.eye(3)[y] * 4.0 + rng.normal(0, 1.0, (300, 3))
    >>> ms = MatrixScaler().fit(logits, y)
    >>> ms.coef_.shape, bool(ms.converged_)
    ((3, 3), True)
    """

    _feature_space = "raw"

    def __init__(
        self,
        *,
        reg: str = "structured",
        reg_lambda: float | str = "auto",
        reg_mu: float | str | None = "auto",
        reg_diag: float | str | None = "auto",
        center: str = "zero",
        cv: Any = 5,
        ensemble: bool = False,
        input: str = "logits",
        eps: float | str = "auto",
        max_iter: int = 100,
        tol: float = 1e-8,
        warm_start: bool = False,
        classes: ArrayLike | None = None,
    ) -> None:
        super().__init__(
            reg=reg, reg_lambda=reg_lambda, reg_mu=reg_mu, reg_diag=reg_diag, center=center,
            cv=cv, ensemble=ensemble, input=input, eps=eps, max_iter=max_iter, tol=tol,
            warm_start=warm_start, classes=classes,
        )
