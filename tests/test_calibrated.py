"""CalibratedClassifier: scikit-learn contract, Pipeline, GridSearchCV, cv modes."""

from __future__ import annotations

import numpy as np
import pytest
from _methods import FAST_METHODS
from sklearn.base import clone
from sklearn.datasets import load_wine, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GridSearchCV,
    StratifiedKFold,
    cross_val_predict,
    train_test_split,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayescal import CalibratedClassifier
from bayescal.calibrators.registry import make_calibrator
from bayescal.metrics import log_loss


@parametrize_with_checks(
    [
        # fixed penalty strengths keep the many small fits of the checks fast
        CalibratedClassifier(LogisticRegression(), method="dirichlet-odir", cv=3,
                             calibrator_params={"reg_lambda": 1e-2, "reg_mu": 1e-2}),
    ]
)
def test_sklearn_estimator_checks(estimator, check) -> None:
    if getattr(check, "func", check).__name__ == "check_array_api_input":
        # scikit-learn skips this check unless SCIPY_ARRAY_API is set; report it
        # as an expected failure with the reason instead of a silent skip.
        pytest.xfail("array-API inputs are not dispatched: scores are converted to float64 NumPy")
    check(estimator)


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return X[idx], y[idx]


def test_cross_fitting_matches_manual_protocol(wine) -> None:
    X, y = wine
    base = make_pipeline(StandardScaler(), LogisticRegression(C=0.1))
    clf = CalibratedClassifier(base, method="vector", cv=4).fit(X, y)
    oof = cross_val_predict(clone(base), X, y, cv=StratifiedKFold(4), method="predict_proba")
    cal = make_calibrator("vector").fit(oof, y)
    refit = clone(base).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), cal.predict_proba(refit.predict_proba(X)),
                               rtol=0, atol=1e-12)
    assert clf.input_ == "probs"


def test_prefit_uses_the_given_model(wine) -> None:
    X, y = wine
    base = GaussianNB().fit(X[:100], y[:100])
    clf = CalibratedClassifier(base, method="temperature", cv="prefit").fit(X[100:], y[100:])
    assert clf.estimator_ is base
    expect = make_calibrator("temperature").fit(base.predict_proba(X[100:]), y[100:])
    np.testing.assert_allclose(clf.predict_proba(X), expect.predict_proba(base.predict_proba(X)),
                               rtol=0, atol=1e-12)


def test_string_labels_and_decision_function(wine) -> None:
    X, y = wine
    names = np.array(["barolo", "grignolino", "barbera"])[y]
    clf = CalibratedClassifier(make_pipeline(StandardScaler(), LinearSVC()),
                               method="temperature", cv=3).fit(X, names)
    assert clf.input_ == "logits"
    assert list(clf.classes_) == ["barbera", "barolo", "grignolino"]
    assert set(clf.predict(X)) <= set(names)
    np.testing.assert_allclose(clf.predict_proba(X).sum(1), 1.0)


def test_binary_decision_function(wine) -> None:
    X, y = wine
    keep = y < 2
    clf = CalibratedClassifier(make_pipeline(StandardScaler(), LinearSVC()),
                               method="vector", cv=3).fit(X[keep], y[keep])
    assert clf.predict_proba(X[keep]).shape == (keep.sum(), 2)


def test_in_pipeline_and_grid_search(wine) -> None:
    X, y = wine
    pipe = make_pipeline(StandardScaler(),
                         CalibratedClassifier(LogisticRegression(), method="temperature", cv=3))
    search = GridSearchCV(
        pipe,
        {"calibratedclassifier__method": ["temperature", "vector"],
         "calibratedclassifier__estimator__C": [0.01, 1.0]},
        cv=2, scoring="neg_log_loss",
    ).fit(X, y)
    assert set(search.best_params_) == {"calibratedclassifier__method",
                                        "calibratedclassifier__estimator__C"}
    assert search.predict_proba(X).shape == (len(y), 3)
    # the best pipeline is refitted on all the data and calibrated
    best = search.best_estimator_[-1]
    assert best.method == search.best_params_["calibratedclassifier__method"]
    assert hasattr(best, "calibrator_")


@pytest.fixture(scope="module")
def redundant():
    # redundant features: naive Bayes counts the same evidence many times and
    # becomes grossly over-confident, a classic calibration case
    X, y = make_classification(n_samples=900, n_features=20, n_informative=4, n_redundant=12,
                               n_classes=3, n_clusters_per_class=1, random_state=0)
    return train_test_split(X, y, test_size=0.4, stratify=y, random_state=0)


@pytest.mark.parametrize("method", FAST_METHODS)
def test_every_method_repairs_over_confident_naive_bayes(method: str, redundant) -> None:
    X_tr, X_te, y_tr, y_te = redundant
    raw = log_loss(y_te, GaussianNB().fit(X_tr, y_tr).predict_proba(X_te))
    clf = CalibratedClassifier(GaussianNB(), method=method, cv=3).fit(X_tr, y_tr)
    calibrated = log_loss(y_te, clf.predict_proba(X_te))
    assert raw > 1.0  # the uncalibrated model is bad ...
    assert calibrated < 0.6 * raw  # ... and every method repairs most of it (measured 0.43-0.49)


def test_errors(wine) -> None:
    X, y = wine
    with pytest.raises(ValueError, match="unknown calibration method 'platt'"):
        CalibratedClassifier(method="platt").fit(X, y)
    with pytest.raises(ValueError, match="needs at least 5 samples of every class"):
        CalibratedClassifier(cv=5).fit(X[:40], np.r_[np.zeros(36), np.ones(4)])
    with pytest.raises(ValueError, match="cv must be an int, a splitter or 'prefit'"):
        CalibratedClassifier(cv="loo").fit(X, y)
    with pytest.raises(ValueError, match="prefit classifier does not know"):
        base = GaussianNB().fit(X[y < 2], y[y < 2])
        CalibratedClassifier(base, cv="prefit").fit(X, y)
