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


def test_log_loss_clip_on_confident_mistake():
    # scikit-learn's rule since 1.5: the machine epsilon of the input's dtype
    assert log_loss([1], [[1.0, 0.0]]) == -np.log(np.finfo(np.float64).eps)
    f32 = np.array([[1.0, 0.0]], dtype=np.float32)
    assert log_loss([1], f32) == pytest.approx(-np.log(np.finfo(np.float32).eps), rel=1e-12)
    assert log_loss([0], [[1.0, 0.0]]) == pytest.approx(np.finfo(np.float64).eps, rel=1e-6)  # not 0
    # scikit-learn before 1.5 (and results computed with it)
    assert log_loss([1], [[1.0, 0.0]], eps=1e-15) == pytest.approx(-np.log(1e-15), rel=1e-15)
    with pytest.raises(ValueError, match="eps must be a number strictly between 0 and 1"):
        log_loss([1], [[1.0, 0.0]], eps=0.0)


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
        (["a", "b", "c"], P[:3, :2] / P[:3, :2].sum(1, keepdims=True), "3 distinct labels"),
        (["a", "b"], P[:2], "pass classes="),
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


# -- agreement with scikit-learn on shared inputs -----------------------------------
def _shared_cases():
    rng = np.random.default_rng(7)
    cases = []
    for k in (2, 3, 6):
        y = rng.integers(0, k, size=300)
        y[:k] = np.arange(k)  # every class present
        p = rng.dirichlet(np.full(k, 0.3), size=300)
        p[5] = np.eye(k)[(y[5] + 1) % k]  # a confident mistake: the clip decides
        p[6] = np.eye(k)[y[6]]  # a confident hit: clipped at 1 - eps
        cases.append((k, y, p))
    return cases


@pytest.mark.parametrize(("k", "y", "p"), _shared_cases(), ids=["k2", "k3", "k6"])
def test_log_loss_equals_sklearn(k, y, p):
    from sklearn.metrics import log_loss as sk_log_loss

    w = np.random.default_rng(k).uniform(0.0, 3.0, size=len(y))
    assert log_loss(y, p) == pytest.approx(sk_log_loss(y, p), rel=1e-14, abs=0)
    assert log_loss(y, p, sample_weight=w) == pytest.approx(
        sk_log_loss(y, p, sample_weight=w), rel=1e-14, abs=0)
    names = np.array([f"class-{j}" for j in range(k)])  # sorted like the columns
    assert log_loss(names[y], p) == pytest.approx(sk_log_loss(names[y], p), rel=1e-14, abs=0)
    p32 = p.astype(np.float32)
    p32 /= p32.sum(axis=1, keepdims=True)
    assert log_loss(y, p32) == pytest.approx(sk_log_loss(y, p32), rel=1e-6)
    # a class absent from y: labels name the columns, as in scikit-learn
    keep = y != k - 1
    assert log_loss(names[y[keep]], p[keep], labels=names) == pytest.approx(
        sk_log_loss(names[y[keep]], p[keep], labels=names), rel=1e-14, abs=0)
    with pytest.raises(ValueError, match="labels must be sorted"):
        log_loss(names[y], p, labels=names[::-1])


@pytest.mark.parametrize(("k", "y", "p"), _shared_cases(), ids=["k2", "k3", "k6"])
def test_brier_and_accuracy_relate_to_sklearn(k, y, p):
    import inspect

    from sklearn.metrics import accuracy_score, brier_score_loss

    assert accuracy(y, p) == accuracy_score(y, p.argmax(axis=1))
    names = np.array([f"c{j}" for j in range(k)])
    assert accuracy(names[y], p) == accuracy_score(names[y], names[p.argmax(axis=1)])
    if "scale_by_half" in inspect.signature(brier_score_loss).parameters:  # scikit-learn >= 1.7
        assert brier_score(y, p) == pytest.approx(
            brier_score_loss(y, p, scale_by_half=False), rel=1e-14)
    if k == 2:  # scikit-learn's binary Brier score is the second column's squared error
        assert brier_score(y, p) == pytest.approx(2 * brier_score_loss(y, p[:, 1]), rel=1e-14)


def test_accuracy_refuses_predicted_labels():
    with pytest.raises(ValueError, match=r"takes probabilities .*accuracy_score"):
        accuracy([0, 1, 1], [0, 1, 0])


def test_offset_and_string_labels_name_sorted_columns():
    for labels in (np.array([1, 2, 3]), np.array([0, 2, 5]), np.array(["x", "y", "z"])):
        for metric in (log_loss, brier_score, accuracy, expected_calibration_error,
                       classwise_ece):
            assert metric(labels[Y], P) == metric(Y, P)
