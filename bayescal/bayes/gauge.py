r"""Identified (gauge-fixed) coordinates of the Bayesian DirLin posterior.

A DirLin map ``softmax(W x + b)`` is unchanged by ``W[:, i] += t_i`` (the
same number added to every entry of column ``i``; :math:`x_i` enters every
logit equally) and by ``b += t``. With independent priors
:math:`\theta_p \sim \mathrm{Normal}(m_p, s_p)` those directions are held by
the prior alone, which is what makes the raw model hard to sample.

For one such group of entries (a column of ``W``, or ``b``) with precisions
:math:`\lambda_p = s_p^{-2}` (0 for a flat entry), integrating the prior along
the shift gives, with :math:`d = \theta - m`,

.. math::

    \int \exp\!\Big(-\tfrac12 \sum_p \lambda_p (d_p + t)^2\Big)\,dt
    \;\propto\; \exp\!\Big(-\tfrac12 \sum_p \lambda_p d_p^2\Big)
    \quad\text{on the plane}\quad \sum_p \lambda_p d_p = 0 ,

because the cross term vanishes there. So sampling ``d`` on that plane (the
*gauge*) with the Gaussian density restricted to it gives exactly the raw
model's posterior over maps, and its mode is the raw model's mode (which
lies on the plane). On the plane, ``d_pos = s ⊙ (Q w)`` with ``Q`` an
orthonormal basis of the complement of :math:`(1/s_p)_p` turns the prior into
:math:`w \sim \mathrm{Normal}(0, I)`; flat entries stay free coordinates.
Each group loses one dimension: ``k (k + 1) - (k + 1) = k^2 - 1`` coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import null_space

from bayescal.bayes.priors import DirLinPrior

__all__ = ["Gauge", "dirlin_gauge"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Gauge:
    """Affine map ``raw = offset + T @ theta`` from identified coordinates.

    ``raw`` is ``concat(W.ravel(), b)`` (length ``k^2 + k``, ``W`` row-major).
    The first ``n_gauss`` entries of ``theta`` have a standard normal prior,
    the remaining ``n_flat`` a flat one.
    """

    n_classes: int
    offset: Array
    T: Array
    n_gauss: int
    n_flat: int
    groups: tuple[tuple[Array, Array, Array], ...]  # (raw indices, precision, basis rows)

    @property
    def dim(self) -> int:
        return self.n_gauss + self.n_flat

    def to_raw(self, theta: ArrayLike) -> Array:
        """``offset + theta @ T.T`` for ``theta`` of shape (..., dim)."""
        return self.offset + np.asarray(theta, dtype=np.float64) @ self.T.T

    def split(self, raw: ArrayLike) -> tuple[Array, Array]:
        """``(W, b)`` of shape (..., k, k) and (..., k) from raw vectors."""
        raw = np.asarray(raw, dtype=np.float64)
        k = self.n_classes
        return raw[..., : k * k].reshape(*raw.shape[:-1], k, k), raw[..., k * k :]

    def project(self, raw: ArrayLike) -> Array:
        """Move raw parameters onto the gauge plane (same maps)."""
        d = np.array(raw, dtype=np.float64) - self.offset
        for idx, lam, _ in self.groups:
            t = -(d[..., idx] @ lam) / lam.sum()
            d[..., idx] += t[..., None]
        return self.offset + d

    def from_raw(self, raw: ArrayLike) -> Array:
        """Identified coordinates of the map given by ``raw`` (projected first)."""
        d = self.project(raw) - self.offset
        theta, *_ = np.linalg.lstsq(self.T, np.moveaxis(np.atleast_2d(d), -1, 0), rcond=None)
        theta = np.moveaxis(theta, 0, -1)
        return theta if np.ndim(raw) > 1 else theta[0]


def dirlin_gauge(prior: DirLinPrior) -> Gauge:
    """The gauge of a DirLin prior (see module docstring).

    Raises
    ------
    ValueError
        If a column of ``W`` or ``b`` has no proper (finite-sd) entry: the
        shift direction would then be held by nothing and the posterior over
        raw parameters would be improper (use ``reg_lambda > 0`` /
        ``reg_mu > 0``).
    """
    k = prior.n_classes
    D = k * k + k
    offset = np.concatenate([prior.center_W.ravel(), prior.center_b])
    sd = np.concatenate([prior.sd_W.ravel(), prior.sd_b])
    groups_idx = [np.arange(i, k * k, k) for i in range(k)] + [np.arange(k * k, D)]
    gauss_cols: list[Array] = []
    flat_cols: list[Array] = []
    groups: list[tuple[Array, Array, Array]] = []
    for g, idx in enumerate(groups_idx):
        s = sd[idx]
        pos = np.isfinite(s)
        what = f"column {g} of W" if g < k else "b"
        if not pos.any():
            raise ValueError(
                f"the prior on {what} is flat everywhere, so adding a constant to it "
                "(which leaves every map unchanged) is not held by anything; use a "
                "positive reg_lambda / reg_mu"
            )
        lam = np.where(pos, 1.0 / np.where(pos, s, 1.0) ** 2, 0.0)
        Q = null_space((1.0 / s[pos])[None, :])  # (|pos|, |pos| - 1), orthonormal
        for col in Q.T:
            t = np.zeros(D)
            t[idx[pos]] = s[pos] * col
            gauss_cols.append(t)
        for p in idx[~pos]:
            t = np.zeros(D)
            t[p] = 1.0
            flat_cols.append(t)
        groups.append((idx, lam, Q))
    T = np.array(gauss_cols + flat_cols).T
    return Gauge(
        n_classes=k,
        offset=offset,
        T=T,
        n_gauss=len(gauss_cols),
        n_flat=len(flat_cols),
        groups=tuple(groups),
    )
