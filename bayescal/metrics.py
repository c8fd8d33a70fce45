r"""Metrics of calibrated probabilities: pure functions returning floats.

All functions take integer labels ``y`` (``0 .. k-1``, column ``j`` is class
``j``) and probabilities ``proba`` of shape ``(n, k)``; inputs are validated by
:mod:`bayescal._validation`.

Binning (``reliability_table`` and the ECE family): ``n_bins`` equal-width bins
on [0, 1]; bin ``m`` (0-based) holds scores in ``[m/M, (m+1)/M)`` and the last
bin is closed, ``[(M-1)/M, 1]``. Empty bins contribute nothing.

References
----------
.. [1] M. P. Naeini, G. Cooper and M. Hauskrecht. "Obtaining well calibrated
   probabilities using Bayesian binning". AAAI 2015.
.. [2] M. Kull et al. "Beyond temperature scaling". NeurIPS 2019 (classwise ECE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._validation import check_labels, check_positive_int, check_scores

__all__ = [
    "ReliabilityTable",
    "accuracy",
    "brier_score",
    "classwise_ece",
    "expected_calibration_error",
    "log_loss",
    "max_calibration_error",
    "reliability_table",
]

#: Floor on the probability of the true class inside :func:`log_loss`, so a
#: confident mistake costs ``-ln(1e-15) = 34.5`` nats instead of ``inf``.
LOG_LOSS_FLOOR = 1e-15


def _check(y: ArrayLike, proba: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    p = check_scores(proba, kind="probs", name="proba")
    return check_labels(y, n_samples=p.shape[0], n_classes=p.shape[1]), p


def log_loss(y: ArrayLike, proba: ArrayLike) -> float:
    r"""Mean negative log-likelihood of the true class.

    .. math:: \mathrm{LL} = -\frac1n \sum_i \ln \max(p_{i,y_i}, 10^{-15})

    Examples
    --------
    >>> log_loss([0, 1], [[0.5, 0.5], [0.25, 0.75]])  # (ln 2 + ln 4/3) / 2
    0.4904146265058631
    """
    y, p = _check(y, proba)
    return float(-np.mean(np.log(np.maximum(p[np.arange(len(y)), y], LOG_LOSS_FLOOR))))


def brier_score(y: ArrayLike, proba: ArrayLike) -> float:
    r"""Multiclass Brier score: squared error summed over classes, mean over samples.

    .. math:: \mathrm{BS} = \frac1n \sum_i \sum_j (p_{ij} - [y_i = j])^2

    Ranges from 0 (perfect) to 2.

    Examples
    --------
    >>> brier_score([0], [[0.75, 0.25]])  # 0.25**2 + 0.25**2
    0.125
    """
    y, p = _check(y, proba)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y)), y] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def accuracy(y: ArrayLike, proba: ArrayLike) -> float:
    """Fraction of samples whose most probable class (first on ties) is the label."""
    y, p = _check(y, proba)
    return float(np.mean(np.argmax(p, axis=1) == y))


@dataclass(frozen=True)
class ReliabilityTable:
    """Per-bin statistics behind a reliability diagram.

    Attributes
    ----------
    edges : ndarray of shape (n_bins + 1,)
        Bin edges on [0, 1].
    counts : ndarray of shape (n_bins,)
        Number of scores in each bin.
    mean_confidence : ndarray of shape (n_bins,)
        Mean score in each bin (NaN where empty).
    accuracy : ndarray of shape (n_bins,)
        Mean outcome in each bin (NaN where empty).
    """

    edges: NDArray[np.float64]
    counts: NDArray[np.intp]
    mean_confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]

    @property
    def gaps(self) -> NDArray[np.float64]:
        """``|accuracy - mean_confidence|`` per bin (NaN where empty)."""
        return np.abs(self.accuracy - self.mean_confidence)

    def ece(self) -> float:
        """Count-weighted mean gap over non-empty bins."""
        nonempty = self.counts > 0
        total = self.counts.sum()
        if total == 0:
            return 0.0
        return float(np.sum(self.counts[nonempty] * self.gaps[nonempty]) / total)

    def mce(self) -> float:
        """Largest gap over non-empty bins."""
        nonempty = self.counts > 0
        return float(self.gaps[nonempty].max()) if nonempty.any() else 0.0


def _bin_index(scores: NDArray[np.float64], n_bins: int) -> NDArray[np.intp]:
    """Equal-width bin of each score; the last bin is closed at 1."""
    return np.minimum((scores * n_bins).astype(np.intp), n_bins - 1)


def _binned(
    scores: NDArray[np.float64], outcomes: NDArray[np.float64], n_bins: int
) -> ReliabilityTable:
    n_bins = check_positive_int(n_bins, "n_bins")
    idx = _bin_index(scores, n_bins)
    counts = np.bincount(idx, minlength=n_bins)
    sum_conf = np.bincount(idx, weights=scores, minlength=n_bins)
    sum_acc = np.bincount(idx, weights=outcomes, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.where(counts > 0, sum_conf / counts, np.nan)
        acc = np.where(counts > 0, sum_acc / counts, np.nan)
    return ReliabilityTable(np.linspace(0.0, 1.0, n_bins + 1), counts, conf, acc)


def reliability_table(
    y: ArrayLike,
    proba: ArrayLike,
    *,
    n_bins: int = 15,
    kind: str = "confidence",
    class_index: int | None = None,
) -> ReliabilityTable:
    """Per-bin counts, mean confidences and accuracies.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes)
    n_bins : int, default=15
        Equal-width bins on [0, 1], last bin closed.
    kind : {"confidence", "class"}, default="confidence"
        ``"confidence"`` bins the top probability ``max_j p_ij`` against
        ``[argmax = y]``; ``"class"`` bins ``p_{i,class_index}`` against
        ``[y = class_index]``.
    class_index : int, optional
        Required with ``kind="class"``.

    Returns
    -------
    ReliabilityTable

    Examples
    --------
    >>> t = reliability_table([0, 1], [[0.9, 0.1], [0.6, 0.4]], n_bins=5)
    >>> t.counts
    array([0, 0, 0, 1, 1])
    >>> t.accuracy[3:], t.mean_confidence[3:]
    (array([0., 1.]), array([0.6, 0.9]))
    """
    y, p = _check(y, proba)
    if kind == "confidence":
        pred = np.argmax(p, axis=1)
        return _binned(p[np.arange(len(y)), pred], (pred == y).astype(float), n_bins)
    if kind == "class":
        if class_index is None or not 0 <= int(class_index) < p.shape[1]:
            raise ValueError(
                f"class_index must be in 0..{p.shape[1] - 1} with kind='class'; got {class_index!r}"
            )
        j = int(class_index)
        return _binned(p[:, j], (y == j).astype(float), n_bins)
    raise ValueError(f"kind must be one of ['confidence', 'class']; got {kind!r}")


def expected_calibration_error(y: ArrayLike, proba: ArrayLike, n_bins: int = 15) -> float:
    r"""Confidence ECE with equal-width bins.

    .. math:: \mathrm{ECE} = \sum_m \frac{|B_m|}{n}\,
              \bigl|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)\bigr|

    where :math:`B_m` are the samples whose top probability falls in bin ``m``.

    Examples
    --------
    >>> expected_calibration_error([0, 1], [[0.9, 0.1], [0.6, 0.4]], n_bins=5)
    0.35
    """
    return reliability_table(y, proba, n_bins=n_bins).ece()


def classwise_ece(y: ArrayLike, proba: ArrayLike, n_bins: int = 15) -> float:
    r"""Classwise ECE: the mean over classes of each class's binned calibration error.

    .. math:: \mathrm{cwECE} = \frac1k \sum_j \sum_m \frac{|B_{mj}|}{n}\,
              \bigl|\mathrm{freq}_j(B_{mj}) - \mathrm{conf}_j(B_{mj})\bigr|

    where :math:`B_{mj}` are the samples whose ``p_ij`` falls in bin ``m``.
    """
    y, p = _check(y, proba)
    k = p.shape[1]
    return float(
        np.mean([reliability_table(y, p, n_bins=n_bins, kind="class", class_index=j).ece()
                 for j in range(k)])
    )


def max_calibration_error(y: ArrayLike, proba: ArrayLike, n_bins: int = 15) -> float:
    r"""Confidence MCE: the largest bin gap.

    .. math:: \mathrm{MCE} = \max_m |\mathrm{acc}(B_m) - \mathrm{conf}(B_m)|
    """
    return reliability_table(y, proba, n_bins=n_bins).mce()
