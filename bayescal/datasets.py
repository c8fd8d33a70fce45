"""Synthetic data with a known calibration map, and loaders for real data.

:func:`make_dirgen` draws classifier scores from a known DirGen model, so the
true calibration map is available in closed form for tests, notebooks and
benchmarks.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._validation import check_alpha, check_pi, check_positive_int

__all__ = ["default_dirgen_params", "make_dirgen"]


def default_dirgen_params(
    k: int, *, rng: np.random.Generator | int | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Random DirGen parameters of an over-confident classifier.

    Class ``j`` puts concentration about 0.6 on its own corner and about 0.15
    elsewhere (log-normal jitter, sd 0.3); the small total concentration keeps
    the scores near the corners (confident) while a sizeable fraction of them
    sit at the wrong corner, so the classifier is over-confident (k=3: mean
    confidence about 0.81 at accuracy 0.62). Priors are ``Dirichlet(5, ..., 5)``.

    Returns
    -------
    alpha : ndarray of shape (k, k)
    pi : ndarray of shape (k,)
    """
    k = check_positive_int(k, "k")
    if k < 2:
        raise ValueError(f"k must be at least 2; got {k}")
    rng = np.random.default_rng(rng)
    off = 0.15 * np.exp(rng.normal(0.0, 0.3, size=(k, k)))
    diag = 0.6 * np.exp(rng.normal(0.0, 0.3, size=k))
    alpha = off.copy()
    alpha[np.diag_indices(k)] = diag
    pi = rng.dirichlet(np.full(k, 5.0))
    return alpha, pi


def make_dirgen(
    n: int,
    k: int,
    *,
    rng: np.random.Generator | int | None = None,
    alpha: ArrayLike | None = None,
    pi: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    r"""Draw scores and labels from a DirGen model.

    .. math:: y \sim \mathrm{Categorical}(\pi),\qquad q \mid y=j \sim \mathrm{Dir}(\alpha_j)

    The Bayes-optimal calibration map of these scores is
    :func:`bayescal.maps.dirgen_map` at ``(alpha, pi)``.

    Parameters
    ----------
    n : int
        Number of samples.
    k : int
        Number of classes.
    rng : Generator, int or None
        Seed or generator (never global state).
    alpha : array-like of shape (k, k), optional
        Row ``j`` is the concentration of class ``j``; default
        :func:`default_dirgen_params` (over-confident).
    pi : array-like of shape (k,), optional
        Class priors; default from :func:`default_dirgen_params`.

    Returns
    -------
    q : ndarray of shape (n, k)
        Scores on the simplex (exact zeros can occur for small concentrations,
        as with real classifiers).
    y : ndarray of shape (n,)
        Labels in ``0 .. k-1``.
    alpha : ndarray of shape (k, k)
    pi : ndarray of shape (k,)

    Examples
    --------
    >>> q, y, alpha, pi = make_dirgen(1000, 3, rng=0)
    >>> q.shape, y.shape, alpha.shape, pi.shape
    ((1000, 3), (1000,), (3, 3), (3,))
    """
    n = check_positive_int(n, "n")
    rng = np.random.default_rng(rng)
    a0, p0 = default_dirgen_params(k, rng=rng)
    alpha = a0 if alpha is None else check_alpha(alpha, n_classes=k)
    pi = p0 if pi is None else check_pi(pi, n_classes=k)
    y = rng.choice(k, size=n, p=pi)
    # Gamma draws normalised per row: the standard Dirichlet construction,
    # vectorised over rows with different concentrations.
    g = rng.standard_gamma(alpha[y])
    s = g.sum(axis=1, keepdims=True)
    # A row whose gammas all underflow (tiny concentrations) is redrawn.
    while np.any(s == 0):
        bad = np.flatnonzero(s[:, 0] == 0)
        g[bad] = rng.standard_gamma(alpha[y[bad]])
        s = g.sum(axis=1, keepdims=True)
    return g / s, y.astype(np.intp), alpha, pi
