"""Metrics against hand-computed examples and known-truth properties."""

from __future__ import annotations

import numpy as np
import pytest

from bayescal.metrics import (
    accuracy,
    brier_score,
    classwise_ece,
    expected_calibration_error,
    log_loss,
    max_calibration_error,
    reliability_table,
)

Y = np.array([0, 1, 1, 2])
P = np.array(
    [
        [0.7, 0.2, 0.1],
        [0.1, 0.6, 0.3],
        [0.5, 0.4, 0.1],
        [0.2, 0.2, 0.6],
    ]
)


def test_log_loss_by_hand():
    expected = -(np.log(0.7) + np.log(0.6) + np.log(0.4) + np.log(0.6)) / 4
    assert log_loss(Y, P) == pytest.approx(expected, abs=1e-15)


def test_log_loss_floor_on_confident_mistake():
    assert log_loss([1], [[1.0, 0.0]]) == pytest.approx(-np.log(1e-15))


def test_brier_by_hand():
    rows = [
        0.3**2 + 0.2**2 + 0.1**2,
        0.1**2 + 0.4**2 + 0.3**2,
        0.5**2 + 0.6**2 + 0.1**2,
        0.2**2 + 0.2**2 + 0.4**2,
    ]
    assert brier_score(Y, P) == pytest.approx(np.mean(rows), abs=1e-15)


def test_accuracy_by_hand():
    assert accuracy(Y, P) == 0.75


def test_confidence_ece_by_hand():
    # confidences 0.7, 0.6, 0.5, 0.6; correct 1, 1, 0, 1; 10 bins
    # bin [0.5,0.6): {0.5 wrong} gap 0.5; bin [0.6,0.7): {0.6, 0.6 right} gap 0.4;
    # bin [0.7,0.8): {0.7 right} gap 0.3  -> ECE = (0.5 + 2*0.4 + 0.3)/4 = 0.4
    assert expected_calibration_error(Y, P, n_bins=10) == pytest.approx(0.4, abs=1e-12)
    assert max_calibration_error(Y, P, n_bins=10) == pytest.approx(0.5, abs=1e-12)


def test_last_bin_is_closed_and_empty_bins_ignored():
    t = reliability_table([0, 0], [[1.0, 0.0], [1.0, 0.0]], n_bins=4)
    np.testing.assert_array_equal(t.counts, [0, 0, 0, 2])
    assert np.isnan(t.accuracy[:3]).all()
    assert t.ece() == 0.0
    assert t.mce() == 0.0


def test_classwise_ece_by_hand():
    # two classes, two samples, 2 bins
    y = [0, 1]
    p = [[0.8, 0.2], [0.3, 0.7]]
    # class 0 scores: 0.8 (y=1 -> gap 0.2, bin 1), 0.3 (y=0 -> gap 0.3, bin 0) -> 0.25
    # class 1 scores: 0.2 (0 -> 0.2), 0.7 (1 -> 0.3) -> 0.25
    assert classwise_ece(y, p, n_bins=2) == pytest.approx(0.25, abs=1e-12)


def test_ece_near_zero_for_calibrated_draws(rng):
    n, k = 200_000, 4
    p = rng.dirichlet(np.ones(k), size=n)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    assert expected_calibration_error(y, p) < 0.01
    assert classwise_ece(y, p) < 0.01


def test_ece_large_for_overconfident(rng):
    from bayescal.datasets import make_dirgen

    q, y, _, _ = make_dirgen(20000, 5, rng=3)
    assert expected_calibration_error(y, q) > 0.05


@pytest.mark.parametrize(
    ("y", "p", "match"),
    [
        ([0, 3], P[:2], "outside the classes"),
        ([0], P[:2], "1 labels but the scores have 2 rows"),
        ([0, 1], [[0.5, 0.6], [0.5, 0.5]], "rows must sum to 1"),
        ([0, 1], [[np.nan, 1.0], [0.5, 0.5]], "NaN or inf"),
        ([0, 1], [[-0.1, 1.1], [0.5, 0.5]], "negative probabilities"),
        ([0], [[1.0]], "at least 2 classes"),
        ([0], [0.5, 0.5], "must be 2-D"),
        ([0.5, 1], [[0.5, 0.5], [0.5, 0.5]], "non-integer"),
    ],
)
def test_metric_input_errors(y, p, match):
    with pytest.raises(ValueError, match=match):
        log_loss(y, p)


def test_reliability_table_class_index_checked():
    with pytest.raises(ValueError, match="class_index must be in 0..2"):
        reliability_table(Y, P, kind="class", class_index=5)
    with pytest.raises(ValueError, match="n_bins must be a positive integer"):
        expected_calibration_error(Y, P, n_bins=0)
