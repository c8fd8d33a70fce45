"""One-vs-rest Platt scaling, beta, isotonic and binning calibrators."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from bayescal.calibrators.ovr import (
    BetaCalibrator,
    BinningCalibrator,
    IsotonicCalibrator,
    SigmoidCalibrator,
)
from bayescal.datasets import make_dirgen

ALL = [SigmoidCalibrator, BetaCalibrator, IsotonicCalibrator, BinningCalibrator]


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
    coef = BetaCalibrator().fit(q, y).coef_
    assert coef.shape == (1, 3)  # two classes: one map, for the second class
    np.testing.assert_allclose(coef[0], [1.5, 0.7, 0.3], atol=0.08)


def test_beta_matches_unpenalised_logistic_regression(rng):
    q, y = _binary_scores(rng, 3000, 0.8, 1.2, -0.2)
    s = q[:, 1]
    feats = np.column_stack([np.log(s), -np.log1p(-s)])
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(feats, y)
    coef = BetaCalibrator(reg=0.0).fit(q, y).coef_[0]
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
    inner = cal.bin_edges_[0]
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


def test_two_classes_fit_one_map_and_complement_it(rng):
    # scikit-learn's binary rule: one map for classes_[1], p_0 = 1 - p_1
    q, y = _binary_scores(rng, 800, 1.0, 1.0, 0.2)
    for cls in ALL:
        cal = cls().fit(q, y)
        p = cal.predict_proba(q)
        g = cal.predict_binary(q)
        np.testing.assert_allclose(p[:, 0], 1.0 - p[:, 1], rtol=0, atol=1e-15)
        np.testing.assert_array_equal(p, g)


def test_isotonic_knots_are_sklearns(rng):
    q, y, _, _ = make_dirgen(300, 3, rng=rng)
    w = rng.uniform(0.2, 3.0, size=300)
    cal = IsotonicCalibrator().fit(q, y, sample_weight=w)
    for j in range(3):
        ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
        ref.fit(q[:, j], y == j, sample_weight=w)
        np.testing.assert_array_equal(cal.x_thresholds_[j], ref.X_thresholds_)
        np.testing.assert_array_equal(cal.y_thresholds_[j], ref.y_thresholds_)
        grid = np.linspace(-0.1, 1.1, 57)  # outside the knots too: clipped
        np.testing.assert_allclose(np.interp(grid, cal.x_thresholds_[j], cal.y_thresholds_[j]),
                                   ref.predict(grid), rtol=0, atol=1e-12)


def _platt_by_hand(s, t, w):
    """Platt's weighted objective minimised by scipy (the definition of the fit)."""
    from scipy.optimize import minimize

    n_pos, n_neg = w[t == 1].sum(), w[t == 0].sum()
    target = np.where(t == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def f(ab):
        z = -(ab[0] * s + ab[1])
        return np.sum(w * (np.logaddexp(0, z) - target * z))

    return minimize(f, [0.0, 0.0], method="BFGS", options={"gtol": 1e-12}).x


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_sigmoid_solves_platts_problem_exactly(kind, rng):
    q, y, _, _ = make_dirgen(600, 3, rng=rng)
    scores = q if kind == "probs" else np.log(q) + rng.normal(size=(600, 1))
    w = rng.uniform(0.5, 2.0, size=600)
    cal = SigmoidCalibrator(input=kind).fit(scores, y, sample_weight=w)
    for j in range(3):
        np.testing.assert_allclose(cal.coef_[j], _platt_by_hand(scores[:, j], y == j, w),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
@pytest.mark.parametrize("k", [2, 4])
def test_equals_sklearn_calibrated_classifier_cv(method, k):
    # CalibratedClassifierCV on a frozen model calibrates its decision values
    # per class and normalises the same way
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import make_classification
    from sklearn.frozen import FrozenEstimator
    from sklearn.svm import LinearSVC

    X, y = make_classification(n_samples=600, n_features=8, n_informative=5, n_classes=k,
                               random_state=0)
    svc = LinearSVC().fit(X[:300], y[:300])
    ref = CalibratedClassifierCV(FrozenEstimator(svc), method=method).fit(X[300:], y[300:])
    d = svc.decision_function(X[300:])
    z = np.column_stack([np.zeros_like(d), d]) if k == 2 else d
    cls = SigmoidCalibrator if method == "sigmoid" else IsotonicCalibrator
    cal = cls(input="logits").fit(z, y[300:])
    d_all = svc.decision_function(X)
    z_all = np.column_stack([np.zeros_like(d_all), d_all]) if k == 2 else d_all
    # scikit-learn stops L-BFGS-B at gtol=1e-6; Newton reaches the optimum
    atol = 1e-5 if method == "sigmoid" else 1e-12
    np.testing.assert_allclose(cal.predict_proba(z_all), ref.predict_proba(X), rtol=0, atol=atol)


@pytest.mark.parametrize("cls", ALL)
def test_integer_weights_equal_repeated_samples(cls, rng):
    q, y, _, _ = make_dirgen(200, 3, rng=rng)
    w = rng.integers(0, 4, size=200)
    rep = np.repeat(np.arange(200), w)
    est = cls(strategy="width") if cls is BinningCalibrator else cls()
    weighted = clone(est).fit(q, y, sample_weight=w)
    repeated = clone(est).fit(q[rep], y[rep])
    np.testing.assert_allclose(weighted.predict_proba(q), repeated.predict_proba(q),
                               rtol=0, atol=1e-8)


@pytest.mark.parametrize("cls", [BetaCalibrator, BinningCalibrator])
def test_unit_interval_maps_see_softmax_of_logits(cls, rng):
    from scipy.special import softmax

    q, y, _, _ = make_dirgen(300, 3, rng=rng)
    z = np.log(q) + rng.normal(size=(300, 1))
    from_logits = cls(input="logits").fit(z, y).predict_proba(z)
    from_probs = cls().fit(softmax(z, axis=1), y).predict_proba(softmax(z, axis=1))
    np.testing.assert_allclose(from_logits, from_probs, rtol=0, atol=1e-12)
