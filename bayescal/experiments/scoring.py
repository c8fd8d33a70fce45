"""The seven measures reported for every (setting, calibrator).

``log_loss`` (clipped at 1e-15, as the paper's scikit-learn), ``brier``,
``accuracy``, ``conf_ece`` (confidence ECE),
``cw_ece`` (classwise ECE), ``mce`` (confidence MCE), all with 15 equal-width
bins, from :mod:`bayescal.metrics`; and ``p_cw_ece``, the p-value of the
consistency-resampling test of classwise calibration (Vaicenavicius et al.,
2019) that the paper ranks in its Table 1, from
``bayescal.metrics.p_ece(..., metric="classwise")``. A larger p-value means
less evidence of miscalibration, so it is the one measure where higher is
better (:data:`HIGHER_IS_BETTER`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from bayescal import metrics

__all__ = [
    "HIGHER_IS_BETTER", "METRICS", "N_BINS", "PAPER_LOG_LOSS_EPS", "p_ece_available", "score_all",
]

METRICS: tuple[str, ...] = (
    "log_loss", "brier", "accuracy", "conf_ece", "cw_ece", "mce", "p_cw_ece",
)  # fmt: skip
HIGHER_IS_BETTER: frozenset[str] = frozenset({"accuracy", "p_cw_ece"})
N_BINS = 15
#: Clip of the log-loss in the paper's protocol (scikit-learn < 1.5); the
#: default of :func:`bayescal.metrics.log_loss` is scikit-learn's current rule.
PAPER_LOG_LOSS_EPS = 1e-15


def p_ece_available() -> str | None:
    """None when ``bayescal.metrics.p_ece`` exists, else why p-cw-ECE is NaN."""
    if hasattr(metrics, "p_ece"):
        return None
    return "bayescal.metrics.p_ece is not available in this bayescal; p_cw_ece is NaN"


def score_all(
    y: NDArray[np.intp],
    proba: NDArray[np.float64],
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
) -> dict[str, float]:
    """Every measure of :data:`METRICS` for one set of calibrated probabilities."""
    out = {
        # the paper's protocol: scikit-learn's log_loss of its time, clipped at 1e-15
        "log_loss": metrics.log_loss(y, proba, eps=PAPER_LOG_LOSS_EPS),
        "brier": metrics.brier_score(y, proba),
        "accuracy": metrics.accuracy(y, proba),
        "conf_ece": metrics.expected_calibration_error(y, proba, n_bins=N_BINS),
        "cw_ece": metrics.classwise_ece(y, proba, n_bins=N_BINS),
        "mce": metrics.max_calibration_error(y, proba, n_bins=N_BINS),
        "p_cw_ece": float("nan"),
    }
    if p_ece_available() is None:
        out["p_cw_ece"] = float(
            metrics.p_ece(
                y, proba, metric="classwise", n_bins=N_BINS, n_resamples=n_resamples, rng=rng
            )
        )
    return out
