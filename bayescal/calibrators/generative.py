r"""Generative Dirichlet calibration: one Dirichlet per class, fitted by maximum likelihood.

The model (DirGen, Kull et al. 2019) is

.. math:: y \sim \mathrm{Categorical}(\pi),\qquad q \mid y = j \sim \mathrm{Dir}(\alpha_j),

and the calibrated probability is the posterior
:math:`P(y=j \mid q) \propto \pi_j\,\mathrm{Dir}(q; \alpha_j)`, which is the DirLin
map :math:`\mathrm{softmax}(W \ln q + b)` with :math:`W_{ji} = \alpha_{ji} - 1`
and :math:`b_j = \ln\pi_j + \ln\Gamma(\alpha_{j0}) - \sum_i\ln\Gamma(\alpha_{ji})`
(:func:`bayescal.maps.dirgen_to_dirlin`). The fit reads the data once for the
sufficient statistics (class counts and per-class sums of log-features, and
for ``prior="auto"`` the temperature statistics of its centre), so it streams
(:meth:`GenerativeDirichletCalibrator.partial_fit`) and runs on Dask arrays
with one distributed reduction; the per-class Newton solves cost
:math:`O(k^2)` in total per iteration, whatever the number of rows.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_nonnegative_float,
    check_positive_int,
    check_sample_weight,
    check_scores,
    encode_labels,
    warn_sparse_classes,
)
from bayescal.calibrators._base import FamilyCalibratorMixin, check_input_params
from bayescal.dirichlet import (
    CHUNK_ELEMENTS,
    DirichletPrior,
    SufficientStatistics,
    _dask_reduce,
    _is_dask_array,
    as_prior,
    fit_dirgen,
    sufficient_statistics,
)
from bayescal.maps import dirgen_to_dirlin, log_features
from bayescal.structured import check_cv_param, cv_splits, one_standard_error

__all__ = ["AUTO_STRENGTHS", "TEMPERATURE_NODES", "GenerativeDirichletCalibrator", "auto_prior_at",
           "choose_auto_strength"]

_PARAM_ATTRS = ("alpha_", "pi_", "coef_", "intercept_", "n_iter_", "converged_", "fits_",
                "prior_strength_", "prior_center_", "cv_results_")


def _prior_state(prior: DirichletPrior | None, k: int) -> dict[str, Any]:
    """The prior used, as plain fitted values (``None`` for maximum likelihood)."""
    if prior is None:
        return {"prior_strength_": None, "prior_center_": None}
    return {"prior_strength_": float(prior.strength), "prior_center_": prior.concentration(k)}

#: Prior strengths (pseudo-samples per class) searched by ``prior="auto"``,
#: besides ``inf`` (temperature scaling).
AUTO_STRENGTHS: tuple[float, ...] = (1e4, 1e3, 1e2, 1e1, 1.0)

#: Nodes of :math:`u = \ln(1/T)` at which ``prior="auto"`` keeps its temperature
#: statistics (``temperature_stats_``): ``-4, -3.75, ..., 4``, the bounds
#: :math:`\ln T \in [-4, 4]` of :class:`~bayescal.TemperatureScaler`.
TEMPERATURE_NODES: NDArray[np.float64] = np.linspace(-4.0, 4.0, 33)

#: Mean-loss slope per unit of :math:`1/T` below which the temperature of
#: ``prior="auto"`` stops (the gradient tolerance of
#: :class:`~bayescal.TemperatureScaler`'s solver).
TEMPERATURE_TOL = 1e-8


def _temperature_terms(x: NDArray[np.float64], weights: NDArray[np.float64]
                       ) -> NDArray[np.float64]:
    r"""Weighted row sums of the tempered log-partition and its derivatives at the nodes.

    For row ``i`` and :math:`v = e^u x_i`: :math:`F_i(u) = \ln\sum_c e^{v_c}`,
    :math:`F_i'(u) = E_p[v]` and :math:`F_i''(u) = \mathrm{Var}_p[v] + E_p[v]`,
    with :math:`p = \mathrm{softmax}(v)`. Returns shape ``(m, G, 3)``: for row
    ``r`` of ``weights`` (m, n), :math:`\sum_i w_{ri}\,(F_i, F_i', F_i'')` at
    each of the ``G`` :data:`TEMPERATURE_NODES`. Sums over rows, so chunks and
    Dask blocks add them up.
    """
    out = np.empty((weights.shape[0], TEMPERATURE_NODES.size, 3))
    for g, u in enumerate(TEMPERATURE_NODES):
        v = np.exp(u) * x
        top = v.max(axis=1, keepdims=True)
        e = np.exp(v - top)
        z = e.sum(axis=1)
        p = e / z[:, None]
        mean = np.einsum("ij,ij->i", p, v)
        var = np.einsum("ij,ij->i", p, (v - mean[:, None]) ** 2)
        out[:, g] = weights @ np.stack([top[:, 0] + np.log(z), mean, var + mean], axis=1)
    return out


def _unit_terms(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`_temperature_terms` of unweighted rows, shape ``(G, 3)`` (a Dask block's)."""
    return _temperature_terms(x, np.ones((1, x.shape[0])))[0]


def _grid_scale(terms: NDArray[np.float64], trace: float, weight: float) -> float:
    r"""The inverse temperature :math:`s = 1/T` from temperature statistics.

    Temperature scaling's loss at :math:`u = \ln s` is
    :math:`L(u) = \sum_i w_i F_i(u) - e^u \operatorname{tr} S`, where
    :math:`\operatorname{tr} S = \sum_i w_i x_{i, y_i}` is the trace of the
    per-class feature sums and ``terms`` (G, 3) holds the sums of
    :math:`F_i, F_i', F_i''` at :data:`TEMPERATURE_NODES`
    (:func:`_temperature_terms`). The result minimises
    :math:`L + \tau W e^u` (:math:`W = \sum_i w_i`, :math:`\tau` =
    :data:`TEMPERATURE_TOL`): the point where the mean loss falls by less than
    :math:`\tau` per unit of :math:`s`, finite when the scores separate the
    classes, where :class:`~bayescal.TemperatureScaler`'s solver stops by its
    gradient tolerance. That objective is convex in :math:`s`, so unimodal in
    :math:`u`: the result minimises its quintic Hermite interpolant through
    the values and first two derivatives at the two nodes where the slope
    first turns positive, or is a bound when the slope keeps its sign (as the
    bounded fit of :class:`~bayescal.TemperatureScaler`).
    """
    u = TEMPERATURE_NODES
    lin = np.exp(u) * (trace - TEMPERATURE_TOL * weight)
    f, d1, d2 = terms[:, 0] - lin, terms[:, 1] - lin, terms[:, 2] - lin
    if d1[0] >= 0.0:
        return float(np.exp(u[0]))
    if d1[-1] <= 0.0:
        return float(np.exp(u[-1]))
    g = int(np.flatnonzero(d1 > 0.0)[0]) - 1  # d1[g] <= 0 < d1[g + 1]
    h = u[g + 1] - u[g]
    # p(t) = sum_m a_m t^m on t = (u - u_g) / h: value, slope, curvature at both ends
    a0, a1, a2 = f[g], h * d1[g], h * h * d2[g] / 2.0
    r1 = f[g + 1] - a0 - a1 - a2
    r2 = h * d1[g + 1] - a1 - 2.0 * a2
    r3 = h * h * d2[g + 1] - 2.0 * a2
    poly = np.polynomial.Polynomial([a0, a1, a2, 10.0 * r1 - 4.0 * r2 + r3 / 2.0,
                                     -15.0 * r1 + 7.0 * r2 - r3, 6.0 * r1 - 3.0 * r2 + r3 / 2.0])
    roots = poly.deriv().roots()
    t = roots.real[(np.abs(roots.imag) <= 1e-9) & (roots.real >= 0.0) & (roots.real <= 1.0)]
    t = np.concatenate([t, [0.0, 1.0]])
    return float(np.exp(u[g] + h * t[np.argmin(poly(t))]))


def auto_prior_at(strength: float, stats: SufficientStatistics,
                  terms: NDArray[np.float64]) -> DirichletPrior:
    r"""``prior="auto"``'s prior of ``strength``, centred on temperature scaling of the data.

    The centre is :math:`\beta_j = \mathbf 1 + e_j / T`, the DirGen model whose
    map is temperature scaling, with ``1/T`` from the temperature statistics
    ``terms`` (:func:`_grid_scale`) and the trace of ``stats.sums``.
    """
    k = stats.n_classes
    scale = _grid_scale(terms, float(np.trace(stats.sums)), float(stats.counts.sum()))
    return DirichletPrior(strength=strength, center=np.ones((k, k)) + scale * np.eye(k))


def choose_auto_strength(
    x: NDArray[np.float64], y: NDArray[np.intp], sample_weight: NDArray[np.float64], cv: Any,
    solve: Any,
) -> tuple[float, dict[str, Any], NDArray[np.float64]]:
    """The strength of ``prior="auto"``: cross-validated, one standard error towards TS.

    Every fold fits the MAP at each strength of ``(inf, *AUTO_STRENGTHS)``
    (strong to weak), centred on the temperature scaling of its training
    rows (:func:`auto_prior_at`); the first strength whose held-out log-loss
    is within one standard error of the best is chosen
    (:func:`bayescal.structured.one_standard_error`).

    Parameters
    ----------
    x : ndarray of shape (n, k)
        Floored log-features.
    y : ndarray of shape (n,)
        Integer labels ``0 .. k-1``.
    sample_weight : ndarray of shape (n,)
        Weights as counts.
    cv : int or splitter
        Folds (:func:`bayescal.structured.cv_splits`).
    solve : callable
        ``solve(stats, prior)``, a dict with the MAP's ``coef_`` and
        ``intercept_`` (:meth:`GenerativeDirichletCalibrator._solve`).

    Returns
    -------
    strength : float
        The chosen strength (``inf``: temperature scaling).
    info : dict
        ``cv_results_``: ``strength``, ``mean_test_log_loss``, ``se_vs_best``, ``index``.
    terms : ndarray of shape (33, 3)
        The temperature statistics of all the rows (the centre of the final fit).
    """
    n = x.shape[0]
    sw = sample_weight
    strengths = (np.inf, *AUTO_STRENGTHS)
    splits = cv_splits(cv, y)
    weights = np.zeros((len(splits) + 1, n))  # every training fold, then all the rows
    for f, (tr, _) in enumerate(splits):
        weights[f, tr] = sw[tr]
    weights[-1] = sw
    terms = _temperature_terms(x, weights)  # one pass for every centre
    loss = np.zeros((len(strengths), n))
    for f, (tr, te) in enumerate(splits):
        stats = SufficientStatistics.from_features(x[tr], y[tr], sample_weight=sw[tr])
        for i, nu in enumerate(strengths):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fit = solve(stats, auto_prior_at(nu, stats, terms[f]))
            z = x[te] @ fit["coef_"].T + fit["intercept_"]
            loss[i, te] = logsumexp(z, axis=1) - z[np.arange(len(te)), y[te]]
    index, info = one_standard_error(loss, sw)
    info["strength"] = np.array(strengths)
    return strengths[index], info, terms[-1]


class GenerativeDirichletCalibrator(FamilyCalibratorMixin):
    r"""Dirichlet calibration by maximum likelihood of class-conditional Dirichlets.

    Fits :math:`\pi_j = n_j / n` and, for each class, the maximum-likelihood
    :math:`\alpha_j` of :math:`q \mid y = j \sim \mathrm{Dir}(\alpha_j)` on the
    floored log-features :math:`x = \max(\ln q, \ln\epsilon)` (Newton on the
    diagonal-plus-rank-one Hessian, :mod:`bayescal.dirichlet`). Predictions
    use the equivalent DirLin map, so they equal
    :func:`bayescal.maps.dirgen_map` at ``(alpha_, pi_)``.

    Parameters
    ----------
    prior : "auto", None, float or DirichletPrior, default="auto"
        ``"auto"``: the MAP under ``DirichletPrior(strength=nu, center=beta)``
        with the centre :math:`\beta_j = \mathbf 1 + e_j / T`, the DirGen
        model whose calibration map is temperature scaling (``T`` fitted on
        the same scores from their temperature statistics, see Notes), and
        ``nu`` chosen from :data:`AUTO_STRENGTHS` (or ``inf``, temperature
        scaling itself) by ``cv``-fold cross-validation of the held-out
        log-loss with the one-standard-error rule towards the strongest
        prior; always finite, exact zeros included (the paper's
        maximum-likelihood fit is ``prior=None``). :meth:`partial_fit` and
        Dask arrays take ``nu = inf``, temperature scaling of all the rows
        streamed (Notes, "Streaming at the defaults").
        ``None``: plain maximum likelihood; classes without a finite MLE raise
        :class:`ValueError` (fewer than two samples, no samples at all,
        identical samples, or a column at the floor ``eps`` for every sample
        of the class). A number ``nu > 0`` is ``DirichletPrior(strength=nu)``:
        ``nu`` pseudo-samples per class drawn (in expectation) from the DirGen
        model of the identity map, :math:`\beta_j = \mathbf 1 + e_j`; the fit
        is then the MAP, always finite, and
        :math:`\pi_j = (n_j + \nu)/(n + k\nu)` (see
        :class:`bayescal.dirichlet.DirichletPrior`).
    input : {"probs", "logits"}, default="probs"
        What the scores hold. Logits ``z`` give the features
        ``log_softmax(z)`` (floored the same way), so ``z`` and ``softmax(z)``
        give the same fit.
    eps : float, default=EPS
        Probability floor (float64 machine epsilon, 2.2e-16).
    max_iter : int, default=100
        Newton iterations per class.
    tol : float, default=1e-10
        Convergence: largest absolute gradient entry of each class's mean
        log-likelihood.
    cv : int or cross-validation splitter, default=5
        Folds of ``prior="auto"``.
    classes : array-like of shape (n_classes,), default=None
        The label of each score column, in column order; ``None`` reads them
        from ``y`` (see :class:`~bayescal.DirichletCalibrator`).

    Attributes
    ----------
    alpha_ : ndarray of shape (k, k)
        Row ``j``: the Dirichlet concentration of class ``j``.
    pi_ : ndarray of shape (k,)
        Class priors.
    coef_ : ndarray of shape (k, k)
        DirLin ``W`` of the same map (``alpha_ - 1``).
    intercept_ : ndarray of shape (k,)
        DirLin ``b``.
    class_count_ : ndarray of shape (k,)
        Samples seen per class (accumulated by :meth:`partial_fit`).
    feature_sum_ : ndarray of shape (k, k)
        Row ``j``: the sum of the log-features of class ``j``'s samples.
    temperature_stats_ : ndarray of shape (33, 3) or None
        ``prior="auto"``: the temperature statistics of the samples seen,
        :math:`\sum_i w_i (F_i, F_i', F_i'')` at each of
        :data:`TEMPERATURE_NODES` (Notes); ``None`` with a fixed prior.
    n_iter_ : int
        Newton iterations of the slowest class (per class: ``fits_[j].n_iter``).
    converged_ : bool
        Whether every class converged.
    fits_ : list of DirichletFit
        Per-class solver reports (log-likelihood, gradient norm, message).
    classes_ : ndarray of shape (k,)
        The label of each score column.
    n_features_in_ : int
    prior_strength_ : float or None
        Pseudo-samples per class of the prior used (``None``: maximum
        likelihood; with ``prior="auto"``, ``inf`` when temperature scaling
        won: ``alpha_`` is then the centre and ``pi_`` uniform, the limit of
        an infinitely strong prior).
    prior_center_ : ndarray of shape (k, k) or None
        Its reference concentrations :math:`\beta`.
    cv_results_ : dict or None
        ``prior="auto"`` fitted on rows in memory: ``strength`` and
        ``mean_test_log_loss`` arrays, ``se_vs_best`` and the chosen
        ``index`` (``None`` after :meth:`partial_fit` or on Dask arrays).

    See Also
    --------
    bayescal.maps.dirgen_map, bayescal.dirichlet.fit_dirichlet
    bayescal.compare : generative against discriminative fits.

    Notes
    -----
    The fit is exact for the floored features, so the floor is part of the
    model: a probability below ``eps`` counts as ``eps``. For classifiers whose
    class-conditional concentrations are tiny (below about 0.1, when a
    sizeable share of the probabilities underflow the default floor
    2.2e-16) this biases ``alpha_`` upward; ``eps=np.finfo(float).tiny`` keeps
    such probabilities exact.

    The generative fit is efficient when the scores of each class really are
    Dirichlet, and biased when they are not (real network outputs usually are
    not: see ``docs/generative_vs_discriminative.md``), whereas the
    discriminative :class:`~bayescal.DirichletCalibrator` fits the best map of
    the same family whatever the class-conditionals are.

    A class with no samples has no estimate and raises (its maximum-likelihood
    prior would be ``pi_j = 0``, a class that is never predicted); with
    ``prior`` it gets the prior's pseudo-samples.

    **The temperature of** ``prior="auto"``. Temperature scaling's loss at
    :math:`u = \ln(1/T)` is
    :math:`L(u) = \sum_i w_i F_i(u) - e^u \operatorname{tr} S` with
    :math:`F_i(u) = \ln\sum_c \exp(e^u x_{ic})` and
    :math:`\operatorname{tr} S = \sum_j S_{jj}` from ``feature_sum_``. The
    sums of :math:`F_i` and of its derivatives
    :math:`F_i' = E_p[v]`, :math:`F_i'' = \mathrm{Var}_p[v] + E_p[v]`
    (:math:`v = e^u x_i`, :math:`p = \mathrm{softmax}(v)`) at the 33
    :data:`TEMPERATURE_NODES` add up over rows, chunks and Dask blocks
    (``temperature_stats_``). ``1/T`` minimises the quintic Hermite
    interpolant of :math:`L + \tau n e^u` through them (:math:`n = \sum_i w_i`, :math:`\tau` =
    :data:`TEMPERATURE_TOL`, which keeps ``T`` finite on separable scores, as
    the gradient tolerance of :class:`~bayescal.TemperatureScaler`'s solver
    does), within :math:`\ln T \in [-4, 4]`. On the 96 cases of the quality
    benchmark it differs from that solver's ``1/T`` by 7.5e-7 relative
    (median; 1.2e-3 at most, on nearly separable scores whose loss is flat).
    Every fold's centre and the final one come from these statistics.

    **Streaming at the defaults.** The held-out log-loss that chooses ``nu``
    needs, for every row, the log-partition of a map that is known only once
    every row has been read; sufficient statistics cannot give it. What they
    can give scores the generative (joint) likelihood -- cross-validation of
    the held-out Dirichlet likelihood from per-fold counts and log-feature
    sums, or the Laplace evidence of each strength -- and on the quality
    benchmark (``benchmarks/generative_streaming.py``, 96 cases) both
    choose ``nu`` = 1 or 10 in every case, with 2.16 and 2.22 times the test
    log-loss of the cross-validated choice on average: real scores are not
    Dirichlet within a class, so the density fit wants the weakest prior
    while calibration does not. :meth:`partial_fit`, and :meth:`fit` on
    Dask arrays, therefore take ``nu = inf``: temperature scaling, with the
    ``T`` above from the temperature statistics of all the rows streamed,
    which are the same statistics :meth:`fit` uses for its centre. So a
    stream and :meth:`fit` on the same rows give the same map (to rounding)
    whenever :meth:`fit`'s cross-validation chooses ``nu = inf`` (76
    of the 96 cases); where it chooses a finite ``nu`` they differ (on the
    96 cases the stream's test log-loss was 1.07 times fit's on
    average, worse by more than 1 % in 13 cases, better in
    3, at worst 5.0 times, naive Bayes on shuttle). For a generative fit of a
    stream pass a fixed ``prior``: the stream then equals :meth:`fit`.

    References
    ----------
    .. [1] M. Kull et al. "Beyond temperature scaling: Obtaining well-calibrated
       multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
    .. [2] T. P. Minka. "Estimating a Dirichlet distribution". 2000.

    Examples
    --------
    >>> from bayescal import make_dirgen
    >>> q, y, alpha, pi = make_dirgen(5000, 3, rng=0)
    >>> cal = GenerativeDirichletCalibrator(prior=None).fit(q, y)  # maximum likelihood
    >>> cal.alpha_.shape, bool(cal.converged_)
    ((3, 3), True)
    >>> cal.predict_proba(q[:2]).sum(axis=1).round(12)
    array([1., 1.])

    Streaming at the defaults (temperature scaling of all the chunks):

    >>> stream = GenerativeDirichletCalibrator()
    >>> for lo in range(0, 5000, 1000):
    ...     _ = stream.partial_fit(q[lo : lo + 1000], y[lo : lo + 1000])
    >>> float(stream.prior_strength_), int(stream.class_count_.sum())
    (inf, 5000)
    """

    _feature_space = "log"

    def __init__(
        self,
        *,
        prior: Any = "auto",
        input: str = "probs",
        eps: float = EPS,
        max_iter: int = 100,
        tol: float = 1e-10,
        cv: Any = 5,
        classes: ArrayLike | None = None,
    ) -> None:
        self.prior = prior
        self.input = input
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.cv = cv
        self.classes = classes

    # -- statistics -------------------------------------------------------
    def _check_params(self) -> None:
        check_input_params(self)
        if not (isinstance(self.prior, str) and self.prior == "auto"):
            as_prior(self.prior)
        check_cv_param(self.cv)
        check_positive_int(self.max_iter, "max_iter")
        check_nonnegative_float(self.tol, "tol", strict=True)

    def _auto(self) -> bool:
        return isinstance(self.prior, str) and self.prior == "auto"

    def _statistics(
        self, scores: Any, y: Any, sample_weight: Any, *, classes: Any = None,
        temperature: bool = False,
    ) -> tuple[SufficientStatistics, NDArray[Any], NDArray[np.float64] | None]:
        """Statistics, column labels and (``temperature``) temperature statistics of one
        batch (validates; writes nothing)."""
        if _is_dask_array(scores) or _is_dask_array(y):
            if classes is not None and not np.array_equal(classes, np.arange(len(classes))):
                raise ValueError(
                    "with dask arrays the labels must be the integer column codes 0..k-1; "
                    f"got classes={np.asarray(classes).tolist()!r}"
                )
            if not temperature:
                stats = sufficient_statistics(
                    scores, y, kind=self.input, eps=self.eps, sample_weight=sample_weight
                )
                return stats, np.arange(stats.n_classes), None
            if sample_weight is not None:
                raise ValueError("sample_weight is not supported with dask arrays of scores")
            stats, terms = _dask_reduce(scores, y, kind=self.input, eps=self.eps,
                                        feature_terms=_unit_terms,
                                        terms_shape=(TEMPERATURE_NODES.size, 3))
            return stats, np.arange(stats.n_classes), terms
        if hasattr(scores, "tocsr") or hasattr(scores, "todense"):
            check_scores(scores, kind=self.input)  # raises: sparse input is not supported
        try:
            arr = np.asarray(scores)
        except Exception:  # ragged lists and the like
            check_scores(scores, kind=self.input)  # raises, worded by the shared check
            raise
        if arr.dtype == object or arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
            check_scores(arr, kind=self.input)  # raises, worded by the shared check
        n, k = arr.shape
        if classes is None:
            cls, codes = self._encode_labels(y, n_samples=n, n_classes=k)
        else:
            cls, codes = encode_labels(y, n_samples=n, n_classes=k, classes=classes)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, n_samples=n)
        stats = sufficient_statistics(arr, codes, kind=self.input, eps=self.eps,
                                      sample_weight=sw)
        if not temperature:
            return stats, cls, None
        w = np.ones(n) if sw is None else sw
        step = max(1, CHUNK_ELEMENTS // k)  # as sufficient_statistics: bounded memory
        terms = np.zeros((TEMPERATURE_NODES.size, 3))
        for lo in range(0, n, step):
            x = log_features(arr[lo : lo + step], kind=self.input, eps=self.eps)
            terms += _temperature_terms(x, w[None, lo : lo + step])[0]
        return stats, cls, terms

    def _solve(self, stats: SufficientStatistics, prior: Any = None) -> dict[str, Any]:
        prior = self.prior if prior is None else prior
        if isinstance(prior, DirichletPrior) and np.isinf(prior.strength):
            k = stats.n_classes
            alpha, pi = prior.concentration(k), np.full(k, 1.0 / k)
            W, b = dirgen_to_dirlin(alpha, pi)
            return {"alpha_": alpha, "pi_": pi, "coef_": W, "intercept_": b, "n_iter_": 0,
                    "converged_": True, "fits_": [], **_prior_state(prior, k)}
        alpha, pi, fits = fit_dirgen(
            stats, prior=prior, eps=self.eps, max_iter=self.max_iter, tol=self.tol
        )
        W, b = dirgen_to_dirlin(alpha, pi)
        converged = all(f.converged for f in fits)
        if not converged:
            bad = [j for j, f in enumerate(fits) if not f.converged]
            worst = max(fits[j].grad_norm for j in bad)
            msg = (
                f"Newton did not converge for classes {bad} (largest gradient {worst:.3g} > "
                f"tol={self.tol:g}; {fits[bad[0]].message}); increase max_iter "
                f"(now {self.max_iter}) or tol"
            )
            warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        return {
            "alpha_": alpha,
            "pi_": pi,
            "coef_": W,
            "intercept_": b,
            "n_iter_": max(f.n_iter for f in fits),
            "converged_": converged,
            "fits_": fits,
            **_prior_state(as_prior(prior), stats.n_classes),
        }

    def _auto_prior(self, scores: Any, y: Any, sample_weight: Any
                    ) -> tuple[float, dict[str, Any], NDArray[np.float64]]:
        """``prior="auto"`` on rows in memory: the strength by cross-validation.

        Returns the strength, ``cv_results_`` and the temperature statistics of
        all the rows (class docstring).
        """
        x = log_features(check_scores(scores, kind=self.input), kind=self.input, eps=self.eps)
        n, k = x.shape
        _, y = self._encode_labels(y, n_samples=n, n_classes=k)
        sw = check_sample_weight(sample_weight, n_samples=n)
        return choose_auto_strength(x, y, sw, self.cv, self._solve)

    # -- fitting ------------------------------------------------------------
    def fit(
        self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> GenerativeDirichletCalibrator:
        """Fit from all the data in one pass over it.

        Parameters
        ----------
        scores : array-like or dask array of shape (n_samples, n_classes)
            Uncalibrated probabilities or logits (``input``). A
            ``dask.array.Array`` is reduced block by block where it lives
            (one ``compute`` of a ``k x (k+1)`` result, and of the
            ``33 x 3`` temperature statistics with ``prior="auto"``, which then
            takes the streaming choice ``nu = inf``: class Notes).
        y : array-like or dask array of shape (n_samples,)
            Class labels (see ``classes``); with dask arrays, the integer
            column codes ``0 .. k-1``.
        sample_weight : array-like of shape (n_samples,), optional
            Frequency weights: a sample of weight ``w`` counts ``w`` times in
            the class counts and log-feature sums (numpy input only).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad input, or (without ``prior``) a class with no finite MLE; the
            message names the class and the count or statistic at fault.
            The estimator's state is then left as it was.
        """
        self._check_params()
        auto = self._auto()
        dask = _is_dask_array(scores) or _is_dask_array(y)
        stats, classes, terms = self._statistics(scores, y, sample_weight,
                                                 temperature=auto and dask)
        strength, info = np.inf, None  # prior="auto" on Dask arrays: the streaming choice
        if auto and not dask:
            strength, info, terms = self._auto_prior(scores, y, sample_weight)
        prior = auto_prior_at(strength, stats, terms) if auto else None
        params = self._solve(stats, prior)  # raises before any state is written
        params["cv_results_"] = info
        # frequency weights count as rows, as in the fit
        warn_sparse_classes(stats.counts, classes, owner=type(self).__name__)
        self._store(stats, classes, params, terms)
        self._check_feature_names(scores, reset=True)
        return self

    def partial_fit(
        self,
        scores: ArrayLike,
        y: ArrayLike,
        classes: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> GenerativeDirichletCalibrator:
        """Add a chunk of data to the statistics and refit from all chunks so far.

        With a fixed ``prior``, fitting chunk by chunk gives the same result
        as :meth:`fit` on all rows at once (the statistics add up), so data
        larger than memory can be streamed. With ``prior="auto"`` the
        strength is ``inf`` (temperature scaling with ``T`` from the
        temperature statistics of every chunk so far): the same map as
        :meth:`fit` when its cross-validation chooses ``inf``, and otherwise
        not (class Notes, "Streaming at the defaults"); the chunking changes
        the result only by rounding. The first call fixes the number of
        classes from the score columns and their labels (``classes``, the estimator's ``classes``
        parameter, or those read from the first chunk's labels: pass
        ``classes`` on the first call when that chunk lacks a class and the
        labels are not column codes); :meth:`fit` starts over.

        The chunk's statistics are kept even when the refit raises because a
        class has no finite MLE yet (e.g. fewer than two of its samples seen
        so far): the fitted parameters are then removed until a later chunk
        makes every class estimable (or use ``prior``). A chunk that fails
        validation changes nothing. ``prior="auto"`` after chunks fitted with
        a fixed prior raises (their temperature statistics were not kept).

        Parameters
        ----------
        scores : array-like or dask array of shape (n_chunk, n_classes)
        y : array-like or dask array of shape (n_chunk,)
        classes : array-like of shape (n_classes,), optional
            The label of each score column, in column order (scikit-learn's
            ``partial_fit`` signature). On later calls it must equal
            ``classes_``.
        sample_weight : array-like of shape (n_chunk,), optional
            Frequency weights of the chunk's samples.

        Returns
        -------
        self
        """
        self._check_params()
        auto = self._auto()
        first = not hasattr(self, "class_count_")
        if auto and not first and getattr(self, "temperature_stats_", None) is None:
            raise ValueError(
                "prior='auto' in partial_fit needs the temperature statistics of every chunk, "
                "and the earlier chunks were fitted with a fixed prior; call fit() or start a "
                "new estimator to use prior='auto', or keep the fixed prior"
            )
        shape = getattr(scores, "shape", None)
        if not first and shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
            raise ValueError(
                f"scores has {shape[1]} columns but {self.n_features_in_} classes were seen "
                f"in earlier partial_fit calls (X has {shape[1]} features, but "
                f"{type(self).__name__} is expecting {self.n_features_in_} features as input)"
            )
        if first:
            given = classes if classes is not None else self.classes
        else:
            self._check_feature_names(scores, reset=False)
            if classes is not None and not np.array_equal(np.asarray(classes), self.classes_):
                raise ValueError(
                    f"classes={np.asarray(classes).tolist()!r} differs from classes_ "
                    f"{self.classes_.tolist()!r} fixed by the first partial_fit call"
                )
            given = self.classes_
        chunk, cls, chunk_terms = self._statistics(scores, y, sample_weight, classes=given,
                                                   temperature=auto)
        if not first and chunk.n_classes != self.n_features_in_:  # inputs without .shape
            raise ValueError(
                f"scores has {chunk.n_classes} columns but {self.n_features_in_} classes were "
                "seen in earlier partial_fit calls"
            )
        if first:
            stats, terms = chunk, chunk_terms
        else:
            stats = SufficientStatistics(self.class_count_, self.feature_sum_) + chunk
            terms = None if not auto else self.temperature_stats_ + chunk_terms
        try:
            params = self._solve(stats, auto_prior_at(np.inf, stats, terms) if auto else None)
        except ValueError:
            self._store(stats, cls, {}, terms)
            for name in _PARAM_ATTRS:
                self.__dict__.pop(name, None)
            raise
        finally:
            if first:
                self._check_feature_names(scores, reset=True)
        params["cv_results_"] = None
        self._store(stats, cls, params, terms)
        return self

    def _store(
        self, stats: SufficientStatistics, classes: NDArray[Any], params: dict[str, Any],
        terms: NDArray[np.float64] | None,
    ) -> None:
        self.class_count_ = stats.counts
        self.feature_sum_ = stats.sums
        self.temperature_stats_ = terms
        self.n_features_in_ = stats.n_classes
        self.classes_ = classes
        for name, value in params.items():
            setattr(self, name, value)

    # -- other forms --------------------------------------------------------
    def to_linear(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """DirLin parameters ``(W, b)`` of the fitted map (copies)."""
        check_is_fitted(self, ("coef_", "intercept_"))
        return self.coef_.copy(), self.intercept_.copy()

    def to_generative(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The fitted DirGen parameters ``(alpha_, pi_)`` themselves (copies).

        (The base class would return *a* DirGen parametrisation of the map;
        here the fitted one is the natural choice, and it gives the same map.)
        """
        check_is_fitted(self, ("alpha_", "pi_"))
        return self.alpha_.copy(), self.pi_.copy()
