"""One-vs-rest beta, isotonic and binning calibrators."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from bayescal.calibrators.ovr import BetaCalibrator, BinningCalibrator, IsotonicCalibrator
from bayescal.datasets import make_dirgen

ALL = [BetaCalibrator, IsotonicCalibrator, BinningCalibrator]


def _binary_scores(rng, n, a, b, c):
    """Scores s of class 1 and labels drawn from the beta map (a, b, c)."""
    s = rng.uniform(0.01, 0.99, size=n)
    y = (rng.uniform(size=n) < expit(a * np.log(s) - b * np.log1p(-s) + c)).astype(int)
    return np.column_stack([1 - s, s]), y


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_outputs_are_probabilities(cls, k, rng):
    q, y, _, _ = make_dirgen(600, k, rng=rng)
    p = cls().fit(q, y).predict_proba(q)
    assert p.shape == (600, k)
    assert (p >= 0).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("cls", ALL)
def test_renormalises_the_one_vs_rest_outputs(cls, rng):
    q, y, _, _ = make_dirgen(400, 4, rng=rng)
    cal = cls().fit(q, y)
    g = cal.predict_binary(q)
    np.testing.assert_allclose(cal.predict_proba(q), g / g.sum(axis=1, keepdims=True), rtol=1e-12)


def test_beta_recovers_known_parameters(rng):
    q, y = _binary_scores(rng, 40_000, 1.5, 0.7, 0.3)
    coef = BetaCalibrator().fit(q, y).coef_[1]
    np.testing.assert_allclose(coef, [1.5, 0.7, 0.3], atol=0.08)


def test_beta_matches_unpenalised_logistic_regression(rng):
    q, y = _binary_scores(rng, 3000, 0.8, 1.2, -0.2)
    s = q[:, 1]
    feats = np.column_stack([np.log(s), -np.log1p(-s)])
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(feats, y)
    coef = BetaCalibrator(reg=0.0).fit(q, y).coef_[1]
    np.testing.assert_allclose(coef[:2], lr.coef_[0], atol=1e-4)
    np.testing.assert_allclose(coef[2], lr.intercept_[0], atol=1e-4)


def test_beta_map_is_monotone_even_for_reversed_scores(rng):
    q, y = _binary_scores(rng, 2000, 1.0, 1.0, 0.0)
    cal = BetaCalibrator().fit(q, 1 - y)  # labels anti-correlated with the scores
    assert (cal.coef_[:, :2] >= 0).all()
    grid = np.linspace(0.01, 0.99, 50)
    g = cal.predict_binary(np.column_stack([1 - grid, grid]))[:, 1]
    assert np.all(np.diff(g) >= -1e-12)


def test_isotonic_equals_sklearn_per_class(rng):
    q, y, _, _ = make_dirgen(500, 3, rng=rng)
    cal = IsotonicCalibrator().fit(q, y)
    g = cal.predict_binary(q)
    for j in range(3):
        ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(q[:, j], y == j)
        np.testing.assert_allclose(g[:, j], ref.predict(q[:, j]), rtol=0, atol=1e-12)


def test_width_binning_counts_by_hand():
    s = np.array([0.05, 0.1, 0.3, 0.6, 0.7, 0.95])
    q = np.column_stack([1 - s, s])
    y = np.array([0, 1, 0, 1, 1, 1])
    cal = BinningCalibrator(n_bins=2, strategy="width", alpha=1.0).fit(q, y)
    # class 1, bins [0, .5) and [.5, 1]: (1+1)/(3+2) and (3+1)/(3+2)
    g = cal.predict_binary(np.array([[0.8, 0.2], [0.2, 0.8]]))[:, 1]
    np.testing.assert_allclose(g, [2 / 5, 4 / 5])


def test_frequency_binning_balances_counts(rng):
    q, y, _, _ = make_dirgen(1000, 3, rng=rng)
    cal = BinningCalibrator(n_bins=4, strategy="frequency").fit(q, y)
    inner, _ = cal.estimators_[0]
    counts = np.bincount(np.searchsorted(inner, q[:, 0], side="right"), minlength=4)
    assert counts.min() >= 240 and counts.max() <= 260


def test_empty_width_bin_predicts_one_half():
    q = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9]])
    cal = BinningCalibrator(n_bins=10, strategy="width").fit(q, [0, 0, 1])
    np.testing.assert_allclose(cal.predict_binary(np.array([[0.5, 0.5]])), [[0.5, 0.5]])


@pytest.mark.parametrize(
    ("est", "match"),
    [
        (BinningCalibrator(n_bins=0), "n_bins must be a positive integer; got 0"),
        (BinningCalibrator(strategy="kmeans"), "strategy must be one of"),
        (BinningCalibrator(alpha=0.0), "alpha must be a finite positive number"),
        (BetaCalibrator(reg=-1.0), "reg must be a finite non-negative number"),
        (BetaCalibrator(eps=0.7), "eps must be below 0.5"),
    ],
)
def test_bad_parameters_raise_in_fit(est, match, rng):
    q, y, _, _ = make_dirgen(50, 3, rng=rng)
    with pytest.raises(ValueError, match=match):
        est.fit(q, y)


@pytest.mark.parametrize("cls", ALL)
def test_input_validation(cls, rng):
    q, y, _, _ = make_dirgen(50, 3, rng=rng)
    with pytest.raises(ValueError, match="negative probabilities"):
        cls().fit(q - 0.5, y)
    with pytest.raises(ValueError, match="outside the classes"):
        cls().fit(q, np.full(50, 3))
    cal = cls().fit(q, y)
    with pytest.raises(ValueError, match="3 classes were expected"):
        cal.predict_proba(q[:, :2] / q[:, :2].sum(axis=1, keepdims=True))


@pytest.mark.parametrize("cls", ALL)
def test_sklearn_contract(cls, rng):
    est = cls()
    params = est.get_params()
    q, y, _, _ = make_dirgen(80, 3, rng=rng)
    fitted = est.fit(q, y)
    assert fitted is est
    assert est.get_params() == params  # fit never mutates hyperparameters
    assert clone(est).get_params() == params
    assert est.n_features_in_ == 3
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    np.testing.assert_array_equal(est.predict(q), np.argmax(est.predict_proba(q), axis=1))


@pytest.mark.parametrize("cls", ALL)
def test_class_permutation_equivariance(cls, rng):
    q, y, _, _ = make_dirgen(300, 4, rng=rng)
    perm = np.array([2, 0, 3, 1])
    inv = np.argsort(perm)
    p = cls().fit(q, y).predict_proba(q)
    p_perm = cls().fit(q[:, perm], inv[y]).predict_proba(q[:, perm])
    np.testing.assert_allclose(p_perm, p[:, perm], atol=1e-6)
