r"""Gaussian (Laplace) approximations at the posterior mode.

DirLin
------
The negative log-posterior is :math:`n L(W, b)` (mean log-loss plus the
quadratic penalty); its mode and exact Hessian ``H`` in raw coordinates come
from the shared solver :mod:`bayescal.optimize`. In the identified
coordinates :math:`\theta` of :mod:`bayescal.bayes.gauge` the Hessian is
:math:`n\,T^\top H T` (positive definite); see
:meth:`bayescal.bayes.BayesianDirichletCalibrator.laplace_approximation`.

Model evidence
--------------
With a proper Gaussian prior on every raw parameter (every precision of the
penalty positive, e.g. the L2 prior), the Laplace estimate of the log
marginal likelihood of the labels is

.. math::

    \ln p(y) \approx -n L(\theta^*) + \tfrac12 \sum_p \ln(2 n\,\mathrm{prec}_p)
    - \tfrac12 \ln\det\bigl(n \nabla^2 L(\theta^*)\bigr)

(:func:`dirlin_log_evidence`; the :math:`2\pi` factors of the prior's
normaliser and of the Gaussian integral cancel). The directions that leave
every map unchanged are flat in the likelihood, so the posterior is the prior
there and the approximation is exact along them. Maximising it over the
penalty strength is type-II maximum likelihood (MacKay 1992).

DirGen
------
Per class ``j`` in :math:`u = \ln\alpha_j` (``a = e^u``,
:math:`A = \sum_l a_l`, :math:`g = n_j(\psi(A) - \psi(a)) + S_j`), the
log-posterior has gradient :math:`a \odot g - (u - m)/s^2` and Hessian
:math:`\mathrm{diag}(a \odot g) + n_j \psi'(A) a a^\top
- n_j \mathrm{diag}(a^2 \psi'(a)) - I/s^2`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import digamma, gammaln, polygamma

from bayescal.bayes.priors import DirGenPrior

__all__ = [
    "CENTRED_RATIO_FLOOR",
    "centred_whitening",
    "conditional_whitening",
    "data_prior_ratio",
    "dirgen_log_evidence",
    "dirgen_log_posterior",
    "dirgen_mode",
    "dirgen_pointwise_joint",
    "dirlin_log_evidence",
    "draws_per_chunk",
    "finite_difference_hessian",
    "structured_mode",
    "whitening",
]

Array = NDArray[np.float64]


def dirlin_log_evidence(
    x: ArrayLike, y: ArrayLike, penalty: Any, W: ArrayLike, b: ArrayLike
) -> float:
    """Laplace estimate of the log evidence of a DirLin model (module docstring).

    Parameters
    ----------
    x : array-like of shape (n_samples, k)
        Features (``max(ln q, ln eps)``).
    y : array-like of shape (n_samples,)
        Labels ``0 .. k-1``.
    penalty : bayescal.optimize.QuadraticPenalty
        The penalty read as the prior; every precision must be positive.
    W, b : array-like of shape (k, k) and (k,)
        The posterior mode (the penalised fit of ``penalty``).

    Returns
    -------
    float
        ``ln p(y)`` in nats.

    Raises
    ------
    ValueError
        If a precision is zero (a flat, improper prior has no evidence).
    """
    from bayescal.optimize import multinomial_objective

    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    prec = np.concatenate([np.ravel(penalty.prec_W), np.ravel(penalty.prec_b)])
    if (prec <= 0).any():
        raise ValueError(
            f"the evidence needs a proper prior: {int((prec <= 0).sum())} penalty precisions "
            "are 0 (flat); use prior='l2'"
        )
    theta = np.concatenate([np.ravel(W), np.ravel(b)])
    obj, _, H = multinomial_objective(theta, x, y, structure="full", penalty=penalty,
                                      hessian=True)  # fmt: skip
    sign, logdet = np.linalg.slogdet(n * H)
    if sign <= 0:
        raise ValueError("the Hessian at the mode is not positive definite")
    return float(-n * obj + 0.5 * np.sum(np.log(2.0 * n * prec)) - 0.5 * logdet)


def dirgen_log_posterior(
    log_alpha: ArrayLike, counts: ArrayLike, S: ArrayLike, prior: DirGenPrior
) -> Array:
    """Per-class log-posterior of ``log_alpha`` (k, k) up to a constant -> (k,)."""
    u = np.asarray(log_alpha, dtype=np.float64)
    a = np.exp(u)
    counts = np.asarray(counts, dtype=np.float64)
    ll = counts * (gammaln(a.sum(axis=1)) - gammaln(a).sum(axis=1)) + ((a - 1.0) * S).sum(axis=1)
    z = (u - prior.log_alpha_mu) / prior.log_alpha_sigma
    return ll - 0.5 * (z * z).sum(axis=1)


def _dirgen_grad_hess(u: Array, counts: Array, S: Array, prior: DirGenPrior):
    a = np.exp(u)
    A = a.sum(axis=1, keepdims=True)
    g = counts[:, None] * (digamma(A) - digamma(a)) + S
    s2 = prior.log_alpha_sigma**2
    grad = a * g - (u - prior.log_alpha_mu) / s2
    k = u.shape[1]
    fisher = (
        counts[:, None, None] * (np.einsum("ji,il->jil", a**2 * polygamma(1, a), np.eye(k)))
        - (counts * polygamma(1, A[:, 0]))[:, None, None] * a[:, :, None] * a[:, None, :]
        + np.eye(k) / s2
    )  # positive definite part of -Hessian
    neg_hess = fisher - np.einsum("ji,il->jil", a * g, np.eye(k))
    return grad, neg_hess, fisher


#: Largest change of any ln(alpha) in one Newton iteration of :func:`dirgen_mode`.
MAX_LOG_STEP = 2.0


def _ascent_step(neg_hess: Array, fisher: Array, grad: Array) -> Array:
    """Newton step where the negative Hessian is positive definite, else Fisher scoring.

    The Fisher part is positive definite in exact arithmetic; should rounding
    make it otherwise, its eigenvalues are floored (the step is then a
    scaled gradient ascent step, still uphill).
    """
    for H in (neg_hess, fisher):
        try:
            c = np.linalg.cholesky(H)
            return np.linalg.solve(c.T, np.linalg.solve(c, grad))
        except np.linalg.LinAlgError:
            continue
    vals, vecs = np.linalg.eigh(fisher)
    vals = np.maximum(vals, 1e-8 * max(float(np.abs(vals).max()), 1.0))
    return vecs @ ((vecs.T @ grad) / vals)


def dirgen_mode(
    counts: ArrayLike,
    S: ArrayLike,
    prior: DirGenPrior,
    *,
    max_iter: int = 200,
    tol: float = 1e-9,
) -> tuple[Array, Array]:
    """Posterior mode of ``log_alpha`` and the negative Hessian there.

    Damped Newton per class (all classes at once), falling back to Fisher
    scoring where the Hessian is not negative definite, with backtracking on
    the log-posterior. O(k^3) per class and iteration, independent of ``n``.

    Returns
    -------
    log_alpha : ndarray of shape (k, k)
    neg_hessian : ndarray of shape (k, k, k)
        Per class, the positive definite negative Hessian at the mode.
    """
    counts = np.asarray(counts, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    k = counts.shape[0]
    u = np.full((k, S.shape[1]), float(prior.log_alpha_mu))
    f = dirgen_log_posterior(u, counts, S, prior)
    for _ in range(max_iter):
        grad, neg_hess, fisher = _dirgen_grad_hess(u, counts, S, prior)
        step = np.empty_like(u)
        for j in range(k):
            step[j] = _ascent_step(neg_hess[j], fisher[j], grad[j])
        # Newton steps far from the mode can be huge (tiny concentrations of
        # scores at the floor): at most MAX_LOG_STEP in ln(alpha) per iteration.
        size = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, MAX_LOG_STEP / np.maximum(size, 1e-300))[:, None]
        t = np.ones(k)
        for _ in range(60):
            new = u + t[:, None] * step
            fn = dirgen_log_posterior(new, counts, S, prior)
            bad = ~(fn >= f - 1e-12 * np.abs(f))
            if not bad.any():
                break
            t[bad] *= 0.5
        t[bad] = 0.0  # no improving step found for these classes: they stay put
        new = u + t[:, None] * step
        fn = np.where(bad, f, fn)
        u, f = new, fn
        if np.max(np.abs(grad)) < tol * max(1.0, counts.max()) or np.max(
            np.abs(t[:, None] * step)
        ) < 1e-12:
            break
    _, neg_hess, _ = _dirgen_grad_hess(u, counts, S, prior)
    return u, neg_hess


def dirgen_log_evidence(log_alpha: ArrayLike, neg_hessian: ArrayLike, counts: ArrayLike,
                        S: ArrayLike, prior: DirGenPrior) -> float:
    r"""Log evidence :math:`\ln p(q, y)` of the Bayesian DirGen model.

    The labels' part is exact (Dirichlet-multinomial):
    :math:`\ln\Gamma(ka) - \ln\Gamma(ka + n) + \sum_j [\ln\Gamma(a + n_j) - \ln\Gamma(a)]`.
    Each class's concentrations get a Laplace approximation in
    :math:`u = \ln\alpha_j` at the mode ``log_alpha`` (rows independent a
    posteriori): :math:`\ln p(S_j \mid u^*) + \ln N(u^*; m, s^2) +
    \tfrac k2 \ln 2\pi - \tfrac12 \ln\det H_j`.

    Parameters
    ----------
    log_alpha : array-like of shape (k, k)
        The mode (:func:`dirgen_mode`).
    neg_hessian : array-like of shape (k, k, k)
        Negative Hessians there (positive definite).
    counts, S : array-like
        Class counts and sums of log features.
    prior : DirGenPrior

    Returns
    -------
    float
    """
    u = np.asarray(log_alpha, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    k = u.shape[1]
    a = prior.pi_concentration
    labels = float(gammaln(k * a) - gammaln(k * a + counts.sum())
                   + np.sum(gammaln(a + counts) - gammaln(a)))
    ll = dirgen_log_posterior(u, counts, S, prior)  # likelihood - sum z^2 / 2
    log_norm = -0.5 * k * np.log(2.0 * np.pi * prior.log_alpha_sigma**2)
    _, logdet = np.linalg.slogdet(np.asarray(neg_hessian, dtype=np.float64))
    per_class = ll + log_norm + 0.5 * k * np.log(2.0 * np.pi) - 0.5 * logdet
    return labels + float(per_class.sum())


#: Elements of the (draws, n, k) temporaries computed at once by the per-draw loops:
#: 2 MB of float64, which stay in the CPU's cache through the loop's several passes
#: (the pointwise log-likelihood of 4000 draws, n = 5000, k = 10: 0.53 s against
#: 1.2 s in chunks of 20 million elements).
CHUNK_ELEMENTS = 1 << 18


def draws_per_chunk(n: int, k: int) -> int:
    """Draws processed together by a per-draw loop over ``n`` samples of ``k`` classes.

    Bounds the (draws, n, k) temporaries to :data:`CHUNK_ELEMENTS` elements
    (at least one draw).
    """
    return max(1, CHUNK_ELEMENTS // max(1, n * k))


def dirgen_pointwise_joint(alpha: ArrayLike, pi: ArrayLike, x: Array, y: Array) -> Array:
    """``ln pi_{y_i} + ln Dir(q_i; alpha_{y_i})`` per draw and sample, shape (..., n).

    ``x`` are the floored log features (``ln q``), as in the likelihood the
    posterior was sampled with.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    lead = alpha.shape[:-2]
    n, k = x.shape
    af, pf = alpha.reshape(-1, k, k), pi.reshape(-1, k)
    n_draws = af.shape[0]
    # what depends on the class only, once per (draw, class): ln pi_c plus the
    # Dirichlet's log normaliser ln Gamma(sum_j alpha_cj) - sum_j ln Gamma(alpha_cj)
    per_class = np.log(pf) + gammaln(af.sum(axis=-1)) - gammaln(af).sum(axis=-1)
    out = np.empty((n_draws, n))
    step = draws_per_chunk(n, k)
    rows = np.arange(n)
    xt = np.ascontiguousarray(x.T)
    for s in range(0, n_draws, step):
        c = min(step, n_draws - s)
        # sum_j (alpha_cj - 1) ln q_ij for every class c as one product; keep c = y_i
        z = ((af[s : s + c] - 1.0).reshape(c * k, k) @ xt).reshape(c, k, n)
        out[s : s + c] = z[:, y, rows] + per_class[s : s + c][:, y]
    return out.reshape(*lead, n)


def finite_difference_hessian(grad: Any, theta: ArrayLike, *, step: float = 1e-5) -> Array:
    """Symmetrised central-difference Hessian of a function from its gradient.

    Parameters
    ----------
    grad : callable
        ``grad(theta) -> ndarray`` of shape (d,).
    theta : array-like of shape (d,)
    step : float, default=1e-5
        Relative step ``h_i = step * max(1, |theta_i|)``.

    Returns
    -------
    ndarray of shape (d, d)
    """
    theta = np.asarray(theta, dtype=np.float64)
    d = theta.shape[0]
    H = np.empty((d, d))
    for i in range(d):
        h = step * max(1.0, abs(theta[i]))
        e = np.zeros(d)
        e[i] = h
        H[:, i] = (grad(theta + e) - grad(theta - e)) / (2.0 * h)
    return 0.5 * (H + H.T)


def whitening(neg_hessian: ArrayLike) -> Array:
    """``L`` with ``L L^T = H^{-1}`` for a symmetric ``H`` (eigenvalues floored if needed).

    A Hessian that is not positive definite (a mode found only
    approximately, or a nearly flat direction) has its eigenvalues floored
    at ``1e-8`` times the largest, so ``L`` is always defined; it is only used
    to whiten the sampler's coordinates, so this changes no density.
    """
    H = np.asarray(neg_hessian, dtype=np.float64)
    try:
        C = np.linalg.cholesky(H)
        return np.linalg.inv(C).T
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(H)
        vals = np.maximum(vals, 1e-8 * max(vals.max(), 1.0))
        return vecs / np.sqrt(vals)


def structured_mode(
    log_posterior: Any,
    theta0: ArrayLike,
    *,
    max_iter: int = 2000,
    gtol: float = 1e-6,
) -> tuple[Array, Array, Any]:
    r"""Mode of the structured model's log posterior and the whitening there.

    L-BFGS on :math:`-\ln p(\theta \mid y)` (analytic gradient from
    :func:`bayescal.bayes.models.structured_log_posterior`), then the
    central-difference Hessian of the gradient at the mode.

    Returns
    -------
    theta : ndarray of shape (d,)
        The mode (in the non-centred coordinates, where it always exists:
        the Jacobian of :math:`\tau = e^\ell` keeps every scale away from 0).
    L : ndarray of shape (d, d)
        ``L L^T`` is the inverse of the negative Hessian (:func:`whitening`).
    result : scipy.optimize.OptimizeResult
    """
    x, H, res = _maximise(log_posterior, theta0, max_iter=max_iter, gtol=gtol)
    return x, whitening(H), res


def _maximise(log_posterior: Any, theta0: ArrayLike, *, max_iter: int = 2000,
              gtol: float = 1e-6) -> tuple[Array, Array, Any]:
    """L-BFGS on the negative log posterior: the mode, the negative Hessian there, the result."""
    from scipy.optimize import minimize

    def neg(t: Array) -> tuple[float, Array]:
        v, g = log_posterior(t)
        return -v, -g

    res = minimize(neg, np.asarray(theta0, dtype=np.float64), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": gtol, "maxcor": 30})
    return res.x, finite_difference_hessian(lambda t: neg(t)[1], res.x), res


def conditional_whitening(theta: ArrayLike, x: ArrayLike, y: ArrayLike, prior: Any):
    """The :class:`~bayescal.bayes.models.ConditionalWhitening` at a mode ``theta``.

    The log likelihood's gradient and negative Hessian in the raw
    parameters ``concat(W.ravel(), b)`` at the mode's map, from the shared
    solver's exact derivatives (:func:`bayescal.optimize.multinomial_objective`).
    """
    from bayescal.bayes.hierarchical import structured_map
    from bayescal.bayes.models import ConditionalWhitening
    from bayescal.optimize import multinomial_objective

    theta = np.asarray(theta, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    n, k = x.shape
    _, W, b = structured_map(theta, prior, k)
    r = np.concatenate([np.ravel(W), np.ravel(b)])
    _, g, H = multinomial_objective(r, x, y, structure="full", penalty=None, hessian=True)
    return ConditionalWhitening(hyper_loc=theta[: 1 + sum(prior.sampled)].copy(),
                                fisher=n * H, grad=-n * g, r_star=r)


def data_prior_ratio(theta: ArrayLike, prior: Any, conditional: Any) -> float:
    r"""The smallest data-to-prior ratio of the map's coefficients at the mode ``theta``.

    The smallest eigenvalue of :math:`J^\top F J`, where at the mode's
    hyperparameters the conditional precision of the coefficients ``w`` is
    :math:`I + J^\top F J` (prior plus data, in units of the prior;
    :class:`~bayescal.bayes.models.ConditionalWhitening`, whose ``fisher`` is
    ``F``): how many times the prior's precision the data give in the
    direction they hold least. Every group of the prior must be present.

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
        The mode (:func:`structured_mode`).
    prior : bayescal.bayes.priors.StructuredPrior
    conditional : bayescal.bayes.models.ConditionalWhitening
        :func:`conditional_whitening` at ``theta``.

    Returns
    -------
    float
    """
    from bayescal.bayes.hierarchical import group_scales, linear_part

    theta = np.asarray(theta, dtype=np.float64)
    k = int(round((-1 + np.sqrt(1 + 4 * np.asarray(conditional.fisher).shape[0])) / 2))
    s = float(np.exp(prior.log_scale(theta[0])))
    lin = linear_part(s, [float(t) for t in group_scales(theta, prior, k)], prior, k)
    return float(np.linalg.eigvalsh(lin.gram(np.asarray(conditional.fisher))).min())


#: Below this smallest data-to-prior ratio :func:`centred_whitening` does not
#: look for the centred mode (the prior holds some direction as much as the data).
CENTRED_RATIO_FLOOR = 0.5


def centred_whitening(theta: ArrayLike, x: ArrayLike, y: ArrayLike, prior: Any,
                      conditional: Any, *, log_posterior: Any = None):
    r"""A :class:`~bayescal.bayes.models.CentredWhitening` when the data dominate, else ``None``.

    At the non-centred mode ``theta`` the conditional precision of the map's
    coefficients is :math:`I + J^\top F J` (prior plus data, in units of the
    prior there; :class:`~bayescal.bayes.models.ConditionalWhitening`). In
    centred coordinates a direction with data-to-prior ratio ``r`` (an
    eigenvalue of :math:`J^\top F J`) has conditional variance proportional
    to :math:`1/(r + e^{-2\Delta})` when the log prior scale moves by
    :math:`\Delta`. So:

    1. ``None`` when a group is pinned or :math:`\min r` < 0.5
       (:data:`CENTRED_RATIO_FLOOR`);
    2. the centred mode (L-BFGS from ``theta``'s map) and the negative
       Hessian there (central differences of the analytic gradient);
       ``None`` when it is not positive definite (no mode: a funnel);
    3. with :math:`\delta` twice the largest Laplace sd of :math:`\ln s`
       and the :math:`\ln \tau` there, the centred coordinates are used
       when moving them by :math:`\delta` changes no direction's
       conditional variance by more than a factor 2,
       :math:`\min r \ge e^{2\delta} - 2`: the funnel that centring risks
       is then mild and the posterior close to Gaussian.

    ``log_posterior`` builds the compiled log posterior (default
    :func:`bayescal.bayes.models.structured_log_posterior`, PyTensor;
    :func:`bayescal.bayes.compiled.log_posterior`, JAX, for the compiled sampler).
    """
    from bayescal.bayes.hierarchical import to_centred
    from bayescal.bayes.models import CentredWhitening, structured_log_posterior

    if not all(prior.present):
        return None
    theta = np.asarray(theta, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    k = x.shape[1]
    ratio = data_prior_ratio(theta, prior, conditional)
    if not ratio >= CENTRED_RATIO_FLOOR:
        return None
    log_posterior = log_posterior or structured_log_posterior
    loc, H, _ = _maximise(log_posterior(x, y, prior, centred=True),
                          to_centred(theta, prior, k))
    try:
        C = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        return None
    chol = np.linalg.inv(C).T
    n_hyper = 1 + sum(prior.sampled)
    sd = np.sqrt(np.sum(chol[:n_hyper] ** 2, axis=1))
    delta = 2.0 * max([prior.log_scale_sd * sd[0], *sd[1:]])  # only s when tau is fixed
    if not ratio >= np.exp(2.0 * delta) - 2.0:
        return None
    return CentredWhitening(loc=loc, chol=chol)
