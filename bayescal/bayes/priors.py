r"""Prior configurations of the Bayesian models, as plain serialisable data.

Bayesian DirLin
---------------
The MAP objective of :mod:`bayescal.optimize` is

.. math:: L(W, b) = \frac1n \sum_i -\ln \mathrm{softmax}(W x_i + b)_{y_i}
          + \sum_p \mathrm{prec}_p (\theta_p - \mathrm{center}_p)^2 ,

so :math:`\exp(-nL)` is a posterior whose prior is
:math:`\theta_p \sim \mathrm{Normal}(\mathrm{center}_p, \sigma_p^2)` with
:math:`\sigma_p^2 = 1 / (2 n\, \mathrm{prec}_p)`; ``prec_p = 0`` is a flat
prior (the ODIR diagonal). :class:`DirLinPrior` holds these ``sd`` and
``center`` arrays (``sd = inf`` for flat).

Bayesian DirGen
---------------
:class:`DirGenPrior`: :math:`\ln\alpha_{ji} \sim \mathrm{Normal}(m, s)`
(a LogNormal prior on every concentration) and
:math:`\pi \sim \mathrm{Dirichlet}(a \mathbf 1)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bayescal._validation import check_nonnegative_float

__all__ = ["DirGenPrior", "DirLinPrior", "penalty_to_prior"]


@dataclass(frozen=True)
class DirLinPrior:
    """Independent Gaussian (or flat) priors on the raw DirLin parameters.

    Attributes
    ----------
    sd_W, center_W : ndarray of shape (k, k)
        Prior sd (``inf`` = flat) and mean of every ``W[j, i]``.
    sd_b, center_b : ndarray of shape (k,)
        The same for ``b``.
    """

    sd_W: NDArray[np.float64]
    center_W: NDArray[np.float64]
    sd_b: NDArray[np.float64]
    center_b: NDArray[np.float64]

    @property
    def n_classes(self) -> int:
        return int(self.center_W.shape[0])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``inf`` written as the string ``"inf"``)."""
        def enc(a: NDArray[np.float64]) -> list[Any]:
            return [[("inf" if np.isinf(v) else float(v)) for v in row] for row in np.atleast_2d(a)]

        return {
            "sd_W": enc(self.sd_W),
            "center_W": enc(self.center_W),
            "sd_b": enc(self.sd_b)[0],
            "center_b": enc(self.center_b)[0],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DirLinPrior:
        def dec(a: Any) -> NDArray[np.float64]:
            return np.array(a, dtype=object).astype(np.float64)

        return cls(dec(d["sd_W"]), dec(d["center_W"]), dec(d["sd_b"]), dec(d["center_b"]))


def penalty_to_prior(penalty: Any, n_samples: int) -> DirLinPrior:
    r"""Gaussian prior equivalent to a quadratic penalty at sample size ``n``.

    A term ``prec * (theta - center)^2`` of the mean-loss objective is the
    prior ``Normal(center, sd)`` with ``sd^2 = 1 / (2 n prec)``; ``prec = 0``
    gives ``sd = inf`` (flat).

    Parameters
    ----------
    penalty : bayescal.optimize.QuadraticPenalty
        From :func:`bayescal.optimize.make_penalty` (its ``prior_sd`` gives
        the sds).
    n_samples : int
        Number of calibration samples ``n``.
    """
    sd_W, sd_b = penalty.prior_sd(n_samples)
    return DirLinPrior(
        sd_W=sd_W,
        center_W=np.asarray(penalty.center_W, dtype=np.float64).copy(),
        sd_b=sd_b,
        center_b=np.asarray(penalty.center_b, dtype=np.float64).copy(),
    )


@dataclass(frozen=True)
class DirGenPrior:
    r"""Priors of the Bayesian DirGen model.

    Attributes
    ----------
    log_alpha_mu, log_alpha_sigma : float
        :math:`\ln\alpha_{ji} \sim \mathrm{Normal}(\mu, \sigma)`.
    pi_concentration : float
        :math:`\pi \sim \mathrm{Dirichlet}(a \mathbf 1)`.
    """

    log_alpha_mu: float = 0.0
    log_alpha_sigma: float = 1.5
    pi_concentration: float = 1.0

    def __post_init__(self) -> None:
        if not np.isfinite(self.log_alpha_mu):
            raise ValueError(f"log_alpha_mu must be finite; got {self.log_alpha_mu!r}")
        check_nonnegative_float(self.log_alpha_sigma, "log_alpha_sigma", strict=True)
        check_nonnegative_float(self.pi_concentration, "pi_concentration", strict=True)

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DirGenPrior:
        return cls(**{key: float(v) for key, v in d.items()})
