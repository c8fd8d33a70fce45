r"""Average ranks, the Friedman test and the Nemenyi critical difference.

Following Demšar (2006), as in the paper's Tables 1 and 2: in every *block*
(one dataset x classifier setting, the measure averaged over the outer folds)
the ``k`` calibrators are ranked, 1 = best, ties sharing the mean rank. The
Friedman test asks whether the average ranks differ more than chance allows;
two methods differ significantly (Nemenyi post-hoc test) when their average
ranks are more than

.. math:: CD = q_\alpha \sqrt{\frac{k(k+1)}{6N}}

apart, where :math:`N` is the number of blocks and :math:`q_\alpha` the
studentised range quantile divided by :math:`\sqrt 2`.

References
----------
.. [1] J. Demšar. "Statistical comparisons of classifiers over multiple data
   sets". JMLR 7, 2006.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

__all__ = ["block_ranks", "friedman_pvalue", "nemenyi_cd"]


def block_ranks(values: ArrayLike, *, higher_is_better: bool = False) -> NDArray[np.float64]:
    """Rank the columns (methods) within every row (block); 1 = best, ties averaged.

    Parameters
    ----------
    values : array-like of shape (n_blocks, n_methods)
        NaN is not allowed (a block with a failed method must be dropped or
        handled by the caller, so that no method is ranked on fewer blocks).

    Examples
    --------
    >>> block_ranks([[0.1, 0.3, 0.3], [3.0, 2.0, 1.0]])
    array([[1. , 2.5, 2.5],
           [3. , 2. , 1. ]])
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be 2-D (blocks x methods); got shape {v.shape}")
    if np.isnan(v).any():
        raise ValueError("values contain NaN; drop incomplete blocks before ranking")
    return stats.rankdata(-v if higher_is_better else v, axis=1)


def friedman_pvalue(values: ArrayLike, *, higher_is_better: bool = False) -> float:
    """p-value of the Friedman test that all methods have equal average rank.

    Uses :func:`scipy.stats.friedmanchisquare` (columns = methods); the
    direction does not change the statistic. NaN for fewer than 3 methods or
    2 blocks.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] < 3 or v.shape[0] < 2:
        return float("nan")
    if np.all(v == v[:, :1]):
        return 1.0
    return float(stats.friedmanchisquare(*v.T).pvalue)


def nemenyi_cd(n_methods: int, n_blocks: int, *, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of average ranks.

    Examples
    --------
    >>> round(nemenyi_cd(7, 231), 3)  # the paper's 7 calibrators, 231 settings
    0.593
    """
    if n_methods < 2 or n_blocks < 1:
        raise ValueError(f"need >= 2 methods and >= 1 block; got {n_methods}, {n_blocks}")
    q = stats.studentized_range.ppf(1.0 - alpha, n_methods, np.inf) / np.sqrt(2.0)
    return float(q * np.sqrt(n_methods * (n_methods + 1) / (6.0 * n_blocks)))
