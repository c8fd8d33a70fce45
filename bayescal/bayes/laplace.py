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
    "dirgen_log_posterior",
    "dirgen_mode",
    "dirlin_log_evidence",
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
            try:
                c = np.linalg.cholesky(neg_hess[j])
            except np.linalg.LinAlgError:
                c = np.linalg.cholesky(fisher[j])
            step[j] = np.linalg.solve(c.T, np.linalg.solve(c, grad[j]))
        t = np.ones(k)
        for _ in range(60):
            new = u + t[:, None] * step
            fn = dirgen_log_posterior(new, counts, S, prior)
            bad = ~(fn >= f - 1e-12 * np.abs(f))
            if not bad.any():
                break
            t[bad] *= 0.5
        u, f = new, fn
        if np.max(np.abs(grad)) < tol * max(1.0, counts.max()) or np.max(
            np.abs(t[:, None] * step)
        ) < 1e-12:
            break
    _, neg_hess, _ = _dirgen_grad_hess(u, counts, S, prior)
    return u, neg_hess
