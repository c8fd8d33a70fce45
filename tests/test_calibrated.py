"""CalibratedClassifier: scikit-learn contract, Pipeline, GridSearchCV, cv modes."""

from __future__ import annotations

import numpy as np
import pytest
from _array_api import array_api_pairs, is_array_api_check, result_of, run_array_api_checks
from _methods import BAYES_METHODS, FAST_METHODS
from sklearn.base import clone
from sklearn.datasets import load_wine, make_classification
from sklearn.frozen import FrozenEstimator
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
from bayescal.metrics import brier_score, log_loss

# scikit-learn's checks and the small cross-validation folds here have classes with
# fewer than five rows on purpose
pytestmark = pytest.mark.filterwarnings("ignore::bayescal._validation.SparseClassWarning")

CHECKS = parametrize_with_checks(
    [
        # fixed penalty strengths keep the many small fits of the checks fast
        CalibratedClassifier(LogisticRegression(), method="dirichlet-odir", cv=3,
                             calibrator_params={"reg_lambda": 1e-2, "reg_mu": 1e-2}),
        CalibratedClassifier(LogisticRegression(), method="sigmoid", cv=3, ensemble=True),
    ]
)
ARRAY_API = array_api_pairs(CHECKS)


@pytest.fixture(scope="module")
def array_api_results():
    return run_array_api_checks(ARRAY_API)


@CHECKS
def test_sklearn_estimator_checks(estimator, check, request) -> None:
    if is_array_api_check(check):  # run for real where SciPy's array-API mode is on
        error = result_of(ARRAY_API, request.getfixturevalue("array_api_results"), estimator,
                          check)
        assert error is None, error
        return
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


def test_frozen_estimator_uses_the_given_model(wine) -> None:
    X, y = wine
    base = GaussianNB().fit(X[:100], y[:100])
    frozen = FrozenEstimator(base)
    clf = CalibratedClassifier(frozen, method="temperature").fit(X[100:], y[100:])
    assert clf.estimator_ is frozen and len(clf.calibrated_classifiers_) == 1
    expect = make_calibrator("temperature").fit(base.predict_proba(X[100:]), y[100:])
    np.testing.assert_allclose(clf.predict_proba(X), expect.predict_proba(base.predict_proba(X)),
                               rtol=0, atol=1e-12)
    assert base.theta_ is frozen.estimator.theta_  # never refitted
    # fewer calibration samples of a class than cv folds: no folds are needed
    few = np.r_[np.flatnonzero(y[100:] != 2)[:40], np.flatnonzero(y[100:] == 2)[:2]] + 100
    CalibratedClassifier(frozen, method="vector", cv=5).fit(X[few], y[few])


def test_prefit_is_deprecated_for_frozen_estimator(wine) -> None:
    X, y = wine
    base = GaussianNB().fit(X[:100], y[:100])
    with pytest.warns(FutureWarning, match=r"cv='prefit' is deprecated.*FrozenEstimator"):
        old = CalibratedClassifier(base, method="temperature", cv="prefit").fit(X[100:], y[100:])
    assert old.estimator_ is base
    new = CalibratedClassifier(FrozenEstimator(base), method="temperature").fit(X[100:], y[100:])
    np.testing.assert_array_equal(old.predict_proba(X), new.predict_proba(X))
    with pytest.raises(ValueError, match="ensemble=True needs cross-validation folds"), \
            pytest.warns(FutureWarning, match="prefit"):
        CalibratedClassifier(base, cv="prefit", ensemble=True).fit(X[100:], y[100:])


def test_frozen_ensemble_calibrates_fold_by_fold(wine) -> None:
    X, y = wine
    base = GaussianNB().fit(X[:60], y[:60])
    Xc, yc = X[60:], y[60:]
    clf = CalibratedClassifier(FrozenEstimator(base), method="sigmoid", cv=3,
                               ensemble=True).fit(Xc, yc)
    maps = [make_calibrator("sigmoid").fit(base.predict_proba(Xc[te]), yc[te])
            for _, te in StratifiedKFold(3).split(Xc, yc)]
    expect = np.mean([m.predict_proba(base.predict_proba(X)) for m in maps], axis=0)
    np.testing.assert_allclose(clf.predict_proba(X), expect, rtol=0, atol=1e-12)


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
    p_raw = GaussianNB().fit(X_tr, y_tr).predict_proba(X_te)
    raw = log_loss(y_te, p_raw)
    clf = CalibratedClassifier(GaussianNB(), method=method, cv=3).fit(X_tr, y_tr)
    p = clf.predict_proba(X_te)
    assert raw > 1.0  # the uncalibrated model is bad ...
    if method == "isotonic":
        # isotonic steps give probability exactly 0 to the true class of 6 of the 360 test
        # samples, whose log-loss is then the clip floor (36 nats each): it repairs the
        # Brier score instead (measured 0.316 -> 0.260)
        assert brier_score(y_te, p) < 0.85 * brier_score(y_te, p_raw)
        return
    # ... and every method repairs most of it (measured 0.43-0.55 of the raw log-loss)
    assert log_loss(y_te, p) < 0.6 * raw


def test_errors(wine) -> None:
    X, y = wine
    with pytest.raises(ValueError, match="unknown calibration method 'platt'"):
        CalibratedClassifier(method="platt").fit(X, y)
    with pytest.raises(ValueError, match="needs at least 5 samples of every class"):
        CalibratedClassifier(cv=5).fit(X[:40], np.r_[np.zeros(36), np.ones(4)])
    with pytest.raises(ValueError, match="cv must be an int, a splitter or an iterable"):
        CalibratedClassifier(cv="loo").fit(X, y)
    with pytest.raises(ValueError, match="prefit classifier does not know"):
        base = GaussianNB().fit(X[y < 2], y[y < 2])
        CalibratedClassifier(FrozenEstimator(base)).fit(X, y)
    with pytest.raises(ValueError, match="ensemble must be one of"):
        CalibratedClassifier(ensemble="yes").fit(X, y)
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
        CalibratedClassifier(n_jobs=0).fit(X, y)


# -- sample weights, ensembles, parallel folds, metadata routing ------------------
def _hand_fit(base, method, params, X, y, w, *, ensemble=False, cv=3):
    """CalibratedClassifier's protocol written out by hand: weights sliced per fold."""
    def weights(idx=slice(None)):
        return {} if w is None else {"sample_weight": w[idx]}

    k = len(np.unique(y))
    splits = list(StratifiedKFold(cv).split(X, y))
    folds = [clone(base).fit(X[tr], y[tr], **weights(tr)) for tr, _ in splits]
    if ensemble:
        maps = [make_calibrator(method, **params).fit(f.predict_proba(X[te]), y[te],
                                                      **weights(te))
                for f, (_, te) in zip(folds, splits, strict=True)]
        return lambda Z: np.mean([m.predict_proba(f.predict_proba(Z))
                                  for f, m in zip(folds, maps, strict=True)], axis=0)
    oof = np.empty((len(y), k))
    for f, (_, te) in zip(folds, splits, strict=True):
        oof[te] = f.predict_proba(X[te])
    cal = make_calibrator(method, **params).fit(oof, y, **weights())
    final = clone(base).fit(X, y, **weights())
    return lambda Z: cal.predict_proba(final.predict_proba(Z))


@pytest.mark.parametrize("ensemble", [False, True])
@pytest.mark.parametrize("method", ["dirichlet-l2", "temperature", "sigmoid", "generative"])
def test_sample_weight_equals_a_hand_weighted_fit(method, ensemble, wine) -> None:
    X, y = wine
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=len(y))
    base = GaussianNB()
    params = {"dirichlet-l2": {"reg_lambda": 1e-2}, "generative": {"prior": 1.0}}.get(method, {})
    clf = CalibratedClassifier(base, method=method, cv=3, ensemble=ensemble,
                               calibrator_params=params).fit(X, y, sample_weight=w)
    expect = _hand_fit(base, method, params, X, y, w, ensemble=ensemble)
    np.testing.assert_allclose(clf.predict_proba(X), expect(X), rtol=0, atol=1e-12)
    unweighted = clone(clf).fit(X, y)
    assert np.abs(unweighted.predict_proba(X) - clf.predict_proba(X)).max() > 1e-4


def test_ensemble_averages_the_fold_pairs(wine) -> None:
    X, y = wine
    # a well-conditioned fit: (naive Bayes' extreme scores leave vector scaling flat
    # directions where two equal problems stop 1e-6 apart, within tol)
    base = make_pipeline(StandardScaler(), LogisticRegression(C=0.1))
    clf = CalibratedClassifier(base, method="vector", cv=4, ensemble=True).fit(X, y)
    assert len(clf.calibrated_classifiers_) == 4
    assert not hasattr(clf, "calibrator_") and not hasattr(clf, "estimator_")
    expect = _hand_fit(base, "vector", {}, X, y, None, ensemble=True, cv=4)
    np.testing.assert_allclose(clf.predict_proba(X), expect(X), rtol=0, atol=1e-12)
    auto = CalibratedClassifier(base, method="vector", cv=4, ensemble="auto").fit(X, y)
    np.testing.assert_array_equal(auto.predict_proba(X), clf.predict_proba(X))
    single = CalibratedClassifier(base, method="vector", cv=4).fit(X, y)
    assert len(single.calibrated_classifiers_) == 1 and hasattr(single, "calibrator_")


@pytest.mark.parametrize("ensemble", [False, True])
def test_n_jobs_gives_the_same_fit(ensemble, wine) -> None:
    X, y = wine
    one = CalibratedClassifier(GaussianNB(), method="dirichlet-l2", cv=3, ensemble=ensemble,
                               calibrator_params={"reg_lambda": 1e-2}).fit(X, y)
    two = clone(one).set_params(n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(one.predict_proba(X), two.predict_proba(X))


def test_classifier_without_sample_weight_warns_and_calibrator_gets_them(wine) -> None:
    from sklearn.neighbors import KNeighborsClassifier

    X, y = wine
    w = np.random.default_rng(2).uniform(0.2, 3.0, size=len(y))
    base = make_pipeline(StandardScaler(), KNeighborsClassifier(15))
    with pytest.warns(UserWarning, match="does not appear to accept sample_weight"):
        clf = CalibratedClassifier(base, method="temperature", cv=3).fit(X, y, sample_weight=w)
    oof = cross_val_predict(clone(base), X, y, cv=StratifiedKFold(3), method="predict_proba")
    cal = make_calibrator("temperature").fit(oof, y, sample_weight=w)
    np.testing.assert_allclose(
        clf.predict_proba(X), cal.predict_proba(clone(base).fit(X, y).predict_proba(X)),
        rtol=0, atol=1e-12,
    )


@pytest.mark.parametrize("method", BAYES_METHODS)
def test_bayesian_methods_refuse_sample_weight(method, wine) -> None:
    X, y = wine
    with pytest.raises(ValueError, match=rf"method '{method}' .* does not take sample_weight"):
        CalibratedClassifier(GaussianNB(), method=method, cv=3).fit(X, y, sample_weight=np.ones(
            len(y)))


def test_metadata_routing(wine) -> None:
    from sklearn import config_context
    from sklearn.exceptions import UnsetMetadataPassedError
    from sklearn.model_selection import GroupKFold

    X, y = wine
    w = np.random.default_rng(3).uniform(0.2, 3.0, size=len(y))
    groups = np.arange(len(y)) % 6
    plain = CalibratedClassifier(GaussianNB(), method="vector",
                                 cv=3).fit(X, y, sample_weight=w)
    with config_context(enable_metadata_routing=True):
        nb = GaussianNB().set_fit_request(sample_weight=True)
        routed = CalibratedClassifier(nb, method="vector", cv=3).fit(X, y, sample_weight=w)
        np.testing.assert_array_equal(routed.predict_proba(X), plain.predict_proba(X))
        # the splitter receives the groups it asks for
        grouped = CalibratedClassifier(nb, method="vector", cv=GroupKFold(3)).fit(
            X, y, sample_weight=w, groups=groups)
        expect = CalibratedClassifier(
            GaussianNB(), method="vector",
            cv=list(GroupKFold(3).split(X, y, groups)),
        )
        with config_context(enable_metadata_routing=False):
            expect.fit(X, y, sample_weight=w)
        np.testing.assert_allclose(grouped.predict_proba(X), expect.predict_proba(X), rtol=0,
                                   atol=1e-12)
        # a classifier that did not say whether it wants the weights: scikit-learn's error
        with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
            CalibratedClassifier(GaussianNB(), method="vector", cv=3).fit(
                X, y, sample_weight=w)
        # weights the classifier declines still reach the calibrator
        no = GaussianNB().set_fit_request(sample_weight=False)
        declined = CalibratedClassifier(no, method="vector", cv=3).fit(X, y, sample_weight=w)
        oof = cross_val_predict(GaussianNB(), X, y,
                                cv=StratifiedKFold(3), method="predict_proba")
        cal = make_calibrator("vector").fit(oof, y, sample_weight=w)
        final = GaussianNB().fit(X, y)
        np.testing.assert_allclose(declined.predict_proba(X),
                                   cal.predict_proba(final.predict_proba(X)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", BAYES_METHODS)
def test_bayesian_methods_calibrate_a_classifier(method, wine) -> None:
    X, y = wine
    names = np.array(["barolo", "grignolino", "barbera"])[y]
    params = {"sampler": "laplace", "draws": 50, "chains": 1, "random_seed": 0}
    if method == "bayes":
        params |= {"prior": "l2", "reg_lambda": 1.0}
    clf = CalibratedClassifier(make_pipeline(StandardScaler(), LogisticRegression(C=0.1)),
                               method=method, cv=3, calibrator_params=params).fit(X, names)
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert set(clf.predict(X)) <= set(names)
    assert clf.calibrator_.n_draws_ == 50
