r"""The Dirichlet calibration family in its three exact forms.

Pure functions, float64, vectorised over samples; no estimator state.

Notation (Kull et al., 2019): ``k`` classes, scores ``q`` of shape ``(n, k)``
(probabilities) or ``z`` (logits), features :math:`x = \max(\ln q, \ln\epsilon)`.

* **DirGen**: :math:`q \mid y=j \sim \mathrm{Dir}(\alpha_j)`, :math:`P(y=j)=\pi_j`;
  the calibrated probability is :math:`P(y=j\mid q) \propto \pi_j\,\mathrm{Dir}(q;\alpha_j)`.
  ``alpha`` is ``(k, k)`` with row ``j`` the concentration of class ``j``.
* **DirLin**: :math:`\mu(q) = \mathrm{softmax}(W x + b)`; row ``j`` of ``W``
  produces the logit of class ``j``.
* **Canonical**: :math:`\mu(q) = \mathrm{softmax}(A \ln(k q) + \ln c)` with
  :math:`A \ge 0`, a zero in every column of ``A`` and ``c`` a probability
  vector. It is unique for each map, so it identifies the map.

The conversions between the forms are exact (Theorem 1 of the paper).
Temperature scaling is the DirLin point :math:`W = I/T, b = 0`; vector scaling
on logits is :math:`W = \mathrm{diag}(w)` with bias ``b``.

References
----------
.. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and
   P. Flach. "Beyond temperature scaling: Obtaining well-calibrated multiclass
   probabilities with Dirichlet calibration". NeurIPS 2019. arXiv:1910.12656.
.. [2] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger. "On Calibration of
   Modern Neural Networks". ICML 2017. arXiv:1706.04599.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, log_softmax, logsumexp

from bayescal._validation import (
    EPS,
    check_alpha,
    check_eps,
    check_linear_params,
    check_nonnegative_float,
    check_pi,
    check_scores,
)

__all__ = [
    "EPS",
    "canonical_map",
    "canonical_to_dirlin",
    "dirgen_map",
    "dirgen_to_dirlin",
    "dirlin_from_features",
    "dirlin_map",
    "dirlin_to_canonical",
    "dirlin_to_dirgen",
    "log_features",
    "softmax",
    "temperature_map",
    "temperature_to_dirlin",
    "vector_to_dirlin",
]

Array = NDArray[np.float64]


def softmax(logits: ArrayLike) -> Array:
    """Row-wise softmax, computed as ``exp(log_softmax(logits))`` (stable)."""
    return np.exp(log_softmax(np.asarray(logits, dtype=np.float64), axis=-1))


def log_features(
    scores: ArrayLike, *, kind: str = "probs", eps: float = EPS
) -> Array:
    r"""Log-probability features of every Dirichlet map.

    .. math:: x = \max(\ln q, \ln \epsilon)

    From logits ``z`` the log-probabilities are ``log_softmax(z)`` computed
    directly (never through ``q``, so nothing underflows), and the same floor
    is applied, so passing ``z`` or ``softmax(z)`` gives the same features up
    to rounding.

    Parameters
    ----------
    scores : array-like of shape (n_samples, n_classes)
        Probabilities (rows on the simplex) or logits.
    kind : {"probs", "logits"}, default="probs"
        What ``scores`` holds.
    eps : float, default=EPS
        Floor on the probabilities, 2.22e-16 (float64 machine epsilon, as in
        the paper authors' code). Exact zeros (trees, naive Bayes) become
        ``ln eps`` = -36.04. ``eps=np.finfo(float).tiny`` reproduces the paper
        text (floor 2.2e-308, ``ln`` = -708.4).

    Returns
    -------
    x : ndarray of shape (n_samples, n_classes)

    Examples
    --------
    >>> import numpy as np
    >>> log_features(np.array([[0.5, 0.5, 0.0]])).round(3)
    array([[ -0.693,  -0.693, -36.044]])
    """
    eps = check_eps(eps)
    s = check_scores(scores, kind=kind)
    if kind == "logits":
        x = log_softmax(s, axis=1)
    else:
        with np.errstate(divide="ignore"):
            x = np.log(s)
    # In place: x is a fresh array, and a second (n, k) allocation costs more
    # than the maximum itself (page faults on first touch).
    return np.maximum(x, np.log(eps), out=x)


def dirlin_from_features(x: ArrayLike, W: ArrayLike, b: ArrayLike) -> Array:
    r"""DirLin map on precomputed features: :math:`\mathrm{softmax}(x W^\top + b)`.

    Parameters
    ----------
    x : array-like of shape (n_samples, k)
        Features, usually from :func:`log_features`.
    W : array-like of shape (k, k)
    b : array-like of shape (k,)

    Returns
    -------
    proba : ndarray of shape (n_samples, k)
    """
    x = np.asarray(x, dtype=np.float64)
    W, b = check_linear_params(W, b, n_classes=x.shape[-1])
    return softmax(x @ W.T + b)


def dirlin_map(
    q: ArrayLike, W: ArrayLike, b: ArrayLike, *, eps: float = EPS, kind: str = "probs"
) -> Array:
    r"""Linear form of the family: :math:`\mu(q) = \mathrm{softmax}(W \ln q + b)`.

    Parameters
    ----------
    q : array-like of shape (n_samples, k)
        Scores (probabilities, or logits with ``kind="logits"``).
    W : array-like of shape (k, k)
        Row ``j`` gives the logit of class ``j``.
    b : array-like of shape (k,)
    eps : float, default=EPS
        Probability floor of :func:`log_features`.
    kind : {"probs", "logits"}, default="probs"

    Returns
    -------
    proba : ndarray of shape (n_samples, k)

    Examples
    --------
    The identity point ``W = I, b = 0`` leaves probabilities unchanged:

    >>> import numpy as np
    >>> q = np.array([[0.7, 0.2, 0.1]])
    >>> dirlin_map(q, np.eye(3), np.zeros(3)).round(6)
    array([[0.7, 0.2, 0.1]])
    """
    return dirlin_from_features(log_features(q, kind=kind, eps=eps), W, b)


def dirgen_map(
    q: ArrayLike,
    alpha: ArrayLike,
    pi: ArrayLike,
    *,
    eps: float = EPS,
    kind: str = "probs",
) -> Array:
    r"""Generative form: the posterior of class-conditional Dirichlets.

    .. math::

        \mu_j(q) = \frac{\pi_j f(q; \alpha_j)}{\sum_l \pi_l f(q; \alpha_l)},\qquad
        \ln f(q;\alpha) = \ln\Gamma(\textstyle\sum_i \alpha_i)
        - \sum_i \ln\Gamma(\alpha_i) + \sum_i (\alpha_i - 1) x_i

    with :math:`x` the floored log-probabilities of :func:`log_features`.

    Parameters
    ----------
    q : array-like of shape (n_samples, k)
    alpha : array-like of shape (k, k)
        Row ``j`` is the Dirichlet concentration of class ``j``; all > 0.
    pi : array-like of shape (k,)
        Class priors (a probability vector).
    eps : float, default=EPS
    kind : {"probs", "logits"}, default="probs"

    Returns
    -------
    proba : ndarray of shape (n_samples, k)
    """
    x = log_features(q, kind=kind, eps=eps)
    k = x.shape[1]
    alpha = check_alpha(alpha, n_classes=k)
    pi = check_pi(pi, n_classes=k)
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    log_norm = gammaln(alpha.sum(axis=1)) - gammaln(alpha).sum(axis=1)
    log_joint = x @ (alpha - 1.0).T + log_norm + log_pi
    return np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))


def canonical_map(
    q: ArrayLike,
    A: ArrayLike,
    c: ArrayLike,
    *,
    eps: float = EPS,
    kind: str = "probs",
) -> Array:
    r"""Canonical form: :math:`\mu(q) = \mathrm{softmax}(A \ln(k q) + \ln c)`.

    Parameters
    ----------
    q : array-like of shape (n_samples, k)
    A : array-like of shape (k, k)
        Non-negative, with at least one zero in every column.
    c : array-like of shape (k,)
        The calibrated probabilities of the uniform input ``q = 1/k``.
    eps : float, default=EPS
    kind : {"probs", "logits"}, default="probs"

    Returns
    -------
    proba : ndarray of shape (n_samples, k)
    """
    W, b = canonical_to_dirlin(A, c)
    return dirlin_map(q, W, b, eps=eps, kind=kind)


def dirgen_to_dirlin(alpha: ArrayLike, pi: ArrayLike) -> tuple[Array, Array]:
    r"""Convert DirGen parameters to the linear form.

    .. math::

        W_{ji} = \alpha_{ji} - 1,\qquad
        b_j = \ln\pi_j + \ln\Gamma(\textstyle\sum_i\alpha_{ji}) - \sum_i\ln\Gamma(\alpha_{ji})

    A class with ``pi_j = 0`` gets ``b_j = -inf`` (it is never predicted).

    Parameters
    ----------
    alpha : array-like of shape (k, k)
    pi : array-like of shape (k,)

    Returns
    -------
    W : ndarray of shape (k, k)
    b : ndarray of shape (k,)
    """
    alpha = check_alpha(alpha)
    pi = check_pi(pi, n_classes=alpha.shape[0])
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    b = log_pi + gammaln(alpha.sum(axis=1)) - gammaln(alpha).sum(axis=1)
    return alpha - 1.0, b


def dirlin_to_dirgen(W: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    r"""Convert linear parameters to a DirGen parametrisation of the same map.

    Adding one vector ``s`` to every row of ``W`` leaves the map unchanged, so
    ``alpha_j = W_j + s`` with :math:`s_i = 1 - \min_j W_{ji}` (every
    concentration >= 1), and

    .. math::

        \ln\pi_j = b_j - \ln\Gamma(\textstyle\sum_i\alpha_{ji})
        + \sum_i\ln\Gamma(\alpha_{ji}) + \text{const},

    normalised so that ``pi`` sums to 1.

    Parameters
    ----------
    W : array-like of shape (k, k)
    b : array-like of shape (k,)

    Returns
    -------
    alpha : ndarray of shape (k, k)
    pi : ndarray of shape (k,)
    """
    W, b = check_linear_params(W, b)
    alpha = W + (1.0 - W.min(axis=0))
    log_pi = b - gammaln(alpha.sum(axis=1)) + gammaln(alpha).sum(axis=1)
    pi = np.exp(log_pi - logsumexp(log_pi))
    return alpha, pi


def dirlin_to_canonical(W: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    r"""Convert linear parameters to the canonical form.

    .. math::

        A_{ji} = W_{ji} - \min_{j'} W_{j'i},\qquad
        c = \mathrm{softmax}(W \ln(\tfrac1k \mathbf 1) + b)

    Two DirLin parameters define the same map iff their canonical forms agree.

    Parameters
    ----------
    W : array-like of shape (k, k)
    b : array-like of shape (k,)

    Returns
    -------
    A : ndarray of shape (k, k)
        Non-negative with a zero in every column.
    c : ndarray of shape (k,)
        A probability vector: the map's output at the uniform input.
    """
    W, b = check_linear_params(W, b)
    k = W.shape[0]
    A = W - W.min(axis=0)
    c = softmax(b - np.log(k) * W.sum(axis=1))
    return A, c


def canonical_to_dirlin(A: ArrayLike, c: ArrayLike) -> tuple[Array, Array]:
    r"""Convert canonical parameters to the linear form.

    .. math:: W = A,\qquad b = \ln(k)\, A\mathbf 1 + \ln c

    Parameters
    ----------
    A : array-like of shape (k, k)
    c : array-like of shape (k,)
        Probability vector; a zero entry gives ``b_j = -inf``.

    Returns
    -------
    W : ndarray of shape (k, k)
    b : ndarray of shape (k,)
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"A must be a square (k, k) matrix with k >= 2; got shape {A.shape}")
    if not np.isfinite(A).all() or (A < 0).any():
        raise ValueError(f"A must be finite and >= 0; got min {float(np.nanmin(A))!r}")
    c = check_pi(c, n_classes=A.shape[0])
    k = A.shape[0]
    with np.errstate(divide="ignore"):
        log_c = np.log(c)
    return A.copy(), np.log(k) * A.sum(axis=1) + log_c


def temperature_to_dirlin(temperature: float, n_classes: int) -> tuple[Array, Array]:
    """Temperature scaling as a DirLin point: ``W = I / T``, ``b = 0``.

    On ``x = log_softmax(z)`` this gives ``softmax(z / T)`` exactly, because
    ``log_softmax(z) = z - logsumexp(z)`` and the row constant cancels.
    """
    T = check_nonnegative_float(temperature, "temperature", strict=True)
    return np.eye(n_classes) / T, np.zeros(n_classes)


def vector_to_dirlin(weights: ArrayLike, bias: ArrayLike) -> tuple[Array, Array]:
    """Vector scaling as a DirLin point: ``W = diag(weights)``, ``b = bias``."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"weights must be 1-D of shape (k,); got shape {w.shape}")
    W, b = check_linear_params(np.diag(w), bias)
    return W, b


def temperature_map(
    scores: ArrayLike, temperature: float, *, kind: str = "logits", eps: float = EPS
) -> Array:
    """Temperature-scaled probabilities ``softmax(x / T)`` with ``x`` the log features."""
    x = log_features(scores, kind=kind, eps=eps)
    return softmax(x / check_nonnegative_float(temperature, "temperature", strict=True))
