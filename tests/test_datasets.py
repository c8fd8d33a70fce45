"""make_from_calibrator: data whose true calibration map is a fitted calibrator."""

from __future__ import annotations

import numpy as np
import pytest

from bayescal import DirichletCalibrator, make_dirgen
from bayescal.datasets import make_from_calibrator


@pytest.fixture(scope="module")
def truth():
    pool, labels, _, _ = make_dirgen(400, 3, rng=3)
    return DirichletCalibrator().fit(pool, labels), pool


def test_rows_come_from_the_pool_and_p_is_the_truth(truth):
    cal, pool = truth
    q, y, p = make_from_calibrator(cal, pool, 300, rng=0)
    assert q.shape == p.shape == (300, 3) and y.shape == (300,) and y.dtype == np.intp
    # every drawn row is a row of the pool (drawn with replacement)
    match = (q[:, None, :] == pool[None, :, :]).all(axis=2)
    assert match.any(axis=1).all()
    np.testing.assert_array_equal(p, cal.predict_proba(q))
    again = make_from_calibrator(cal, pool, 300, rng=0)
    for a, b in zip((q, y, p), again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(make_from_calibrator(cal, pool, 300, rng=1)[0], q)


def test_labels_follow_the_truth(truth):
    """The labels' frequencies given the truth's probabilities are those probabilities.

    At n = 20000 the mean of ``onehot(y) - p`` is zero within 4 standard
    errors (the labels' own, ``sqrt(sum p (1 - p)) / n``) for each class, and
    so is its mean within each third of ``p``.
    """
    cal, pool = truth
    q, y, p = make_from_calibrator(cal, pool, 20_000, rng=5)
    onehot = np.eye(3)[y]
    for j in range(3):
        for part in (np.arange(len(y)), *np.array_split(np.argsort(p[:, j]), 3)):
            r = onehot[part, j] - p[part, j]
            se = np.sqrt(np.sum(p[part, j] * (1 - p[part, j]))) / len(part)
            assert abs(r.mean()) <= 4 * se, (j, r.mean(), se)


@pytest.mark.parametrize(("which", "n", "match"), [
    ("pool", 0, r"n must be a positive integer; got 0"),
    ("scalar", 10, r"scores must be a non-empty 2-D array; got shape \(\)"),
    ("row", 10, r"scores must be a non-empty 2-D array; got shape \(3,\)"),
])
def test_bad_input(truth, which, n, match):
    cal, pool = truth
    scores = {"pool": pool, "scalar": np.float64(1.0), "row": pool[0]}[which]
    with pytest.raises(ValueError, match=match):
        make_from_calibrator(cal, scores, n)


def test_a_calibrator_without_predict_proba_is_refused(truth):
    _, pool = truth
    with pytest.raises(ValueError, match=r"calibrator must be a fitted estimator with "
                                         r"predict_proba; got list"):
        make_from_calibrator([], pool, 10)
