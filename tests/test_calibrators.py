"""Calibrators on top of the solver: Dirichlet, matrix, vector and temperature scaling."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import log_softmax, softmax
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold

import bayescal
from bayescal import (
    DirichletCalibrator,
    MatrixScaler,
    TemperatureScaler,
    VectorScaler,
    dirlin_to_canonical,
    dirlin_to_dirgen,
    log_features,
    log_loss,
    make_dirgen,
)
from bayescal._validation import encode_labels
from bayescal.calibrators.dirichlet import L2_GRID, ODIR_GRID
from bayescal.optimize import fit_multinomial, make_penalty, multinomial_log_loss

# scikit-learn's checks and the small cross-validation folds here have classes with
# fewer than five rows on purpose
pytestmark = pytest.mark.filterwarnings("ignore::bayescal._validation.SparseClassWarning")

ESTIMATORS = {
    "dirichlet": lambda: DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-2),
    "matrix": lambda: MatrixScaler(reg="odir", reg_lambda=1e-2, reg_mu=1e-2, input="probs"),
    "vector": lambda: VectorScaler(reg="none"),
    "temperature": lambda: TemperatureScaler(),
}


def _dnn(shared_data, name: str) -> dict[str, np.ndarray]:
    with np.load(shared_data / "dnn" / name) as f:
        probs, y = f["probs"].astype(np.float64), f["y"]
        q = probs / probs.sum(axis=1, keepdims=True)  # float32 rows, renormalised in float64
        return {"val": (q[f["idx_val"]], y[f["idx_val"]]),
                "test": (q[f["idx_test"]], y[f["idx_test"]])}


@pytest.fixture(scope="module")
def cifar10(shared_data):
    return _dnn(shared_data, "netcal_cifar10_wideresnet16-4.npz")


@pytest.fixture(scope="module")
def synth():
    q, y, _, _ = make_dirgen(400, 4, rng=np.random.default_rng(11))
    return q, y


def _fit_scores(name: str, q: np.ndarray) -> np.ndarray:
    """Scores in the input convention of each estimator."""
    return log_features(q) if name in ("vector", "temperature") else q


# -- the fit is the solver's fit -------------------------------------------------
def test_dirichlet_fixed_lambda_is_the_solver_fit(cifar10):
    q, y = cifar10["val"]
    cal = DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-3).fit(q, y)
    res = fit_multinomial(log_features(q), y, penalty=make_penalty(10, "odir", 1e-2, 1e-3))
    assert cal.converged_ and cal.n_iter_ == res.n_iter
    assert np.array_equal(cal.coef_, res.W) and np.array_equal(cal.intercept_, res.b)
    assert cal.reg_lambda_ == 1e-2 and cal.reg_mu_ == 1e-3 and cal.cv_results_ is None
    proba = cal.predict_proba(q)
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(cal.transform(q), proba)
    assert np.array_equal(cal.predict(q), proba.argmax(axis=1))
    for got, want in zip(cal.to_canonical(), dirlin_to_canonical(cal.coef_, cal.intercept_),
                         strict=True):
        assert np.allclose(got, want, rtol=1e-12)
    for got, want in zip(cal.to_generative(), dirlin_to_dirgen(cal.coef_, cal.intercept_),
                         strict=True):
        assert np.allclose(got, want, rtol=1e-12)


def test_l2_matches_dirichletcal_meaning(synth):
    q, y = synth
    cal = DirichletCalibrator(reg="l2", reg_lambda=0.5, reg_mu=None).fit(q, y)
    k = 4
    c = 0.5 / (k * (k + 1))
    obj = multinomial_log_loss(log_features(q), y, cal.coef_, cal.intercept_) + c * (
        np.sum(cal.coef_**2) + np.sum(cal.intercept_**2)
    )
    assert cal.loss_ == pytest.approx(obj, abs=1e-14)
    assert cal.reg_mu_ is None


def test_l2_identity_centre_leaves_calibrated_scores_alone():
    """Strong L2 toward I keeps W ~ I; toward 0 flattens the map to uniform."""
    q, y, _, _ = make_dirgen(300, 3, rng=np.random.default_rng(5))
    ident = DirichletCalibrator(reg="l2", reg_lambda=1e6, center="identity").fit(q, y)
    zero = DirichletCalibrator(reg="l2", reg_lambda=1e6).fit(q, y)
    assert np.allclose(ident.coef_, np.eye(3), atol=1e-3)
    assert np.allclose(zero.predict_proba(q), 1 / 3, atol=1e-3)


# -- logits vs probabilities -------------------------------------------------------
def test_logits_and_probs_give_the_same_fit(rng):
    z = rng.normal(size=(500, 5)) * 3.0
    y = np.array([rng.choice(5, p=p) for p in softmax(z / 1.7, axis=1)])
    t_logits = TemperatureScaler().fit(z, y).temperature_
    t_probs = TemperatureScaler().fit(log_features(softmax(z, axis=1)), y).temperature_
    assert t_probs == pytest.approx(t_logits, rel=1e-8, abs=1e-8)
    assert t_logits == pytest.approx(1.7, rel=0.2)
    d_logits = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3, input="logits").fit(z, y)
    d_probs = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(softmax(z, axis=1), y)
    assert np.allclose(d_logits.coef_, d_probs.coef_, atol=1e-8)
    assert np.allclose(d_logits.predict_proba(z), d_probs.predict_proba(softmax(z, axis=1)),
                       atol=1e-10)


def test_temperature_is_the_exact_optimum(rng):
    z = rng.normal(size=(400, 4)) * 4.0
    y = np.array([rng.choice(4, p=p) for p in softmax(z / 2.5, axis=1)])
    ts = TemperatureScaler(tol=1e-10).fit(z, y)
    x = log_softmax(z, axis=1)

    def nll(t):
        return -np.mean(log_softmax(x / t, axis=1)[np.arange(len(y)), y])

    t = ts.temperature_
    assert nll(t) <= min(nll(t * 1.0001), nll(t / 1.0001))
    assert ts.fitted_ and ts.coef_[0, 0] == pytest.approx(1 / t)
    assert np.array_equal(ts.predict(z), z.argmax(axis=1))  # accuracy preserved


def test_vector_scaler_beats_identity_and_matches_solver(rng):
    z = rng.normal(size=(300, 3)) + np.array([1.0, 0.0, -1.0])
    y = rng.integers(0, 3, 300)
    vs = VectorScaler(reg="none").fit(z, y)
    res = fit_multinomial(z, y, structure="diagonal", tol=1e-7)
    assert np.allclose(vs.weights_, np.diag(res.W)) and np.allclose(vs.bias_, res.b)
    assert vs.fitted_ and vs.converged_


# -- never worse than the identity as lambda -> 0 -----------------------------------
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_lambda_to_zero_never_worse_than_identity(cifar10, name):
    q, y = cifar10["val"]
    est = ESTIMATORS[name]()
    if name in ("dirichlet", "matrix"):
        est.set_params(reg_lambda=1e-12, reg_mu=1e-12)
    s = _fit_scores(name, q)
    est.fit(s, y)
    assert log_loss(y, est.predict_proba(s)) <= log_loss(y, q) + 1e-12


# -- missing classes ----------------------------------------------------------------
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_class_missing_from_labels(synth, name):
    q, y = synth
    y = np.where(y == 1, 0, y)
    s = _fit_scores(name, q)
    est = ESTIMATORS[name]().fit(s, y)
    proba = est.predict_proba(s)
    assert proba.shape == (len(y), 4) and np.isfinite(proba).all()
    assert np.array_equal(est.classes_, np.arange(4))
    if name != "temperature":  # temperature cannot single out a class
        assert proba[:, 1].max() < 1e-3
    if name == "dirichlet":
        free = DirichletCalibrator(reg="none").fit(q, y)
        assert free.converged_ and np.isfinite(free.coef_).all()


# -- hyperparameter search and the fold ensemble --------------------------------------
def test_auto_grid_picks_the_best_held_out_log_loss(synth):
    q, y = synth
    cal = DirichletCalibrator(reg="odir", cv=3).fit(q, y)  # lambda, mu "auto": the 6 x 6 grid
    res = cal.cv_results_
    assert len(res["mean_test_log_loss"]) == 36
    assert set(res["reg_lambda"]) == set(ODIR_GRID) and set(res["reg_mu"]) == set(ODIR_GRID)
    best = int(np.argmin(res["mean_test_log_loss"]))
    assert (cal.reg_lambda_, cal.reg_mu_) == (res["reg_lambda"][best], res["reg_mu"][best])
    # the held-out losses are those of independent fits on each fold
    x = log_features(q)
    losses = []
    for tr, te in StratifiedKFold(3).split(x, y):
        fit = fit_multinomial(x[tr], y[tr],
                              penalty=make_penalty(4, "odir", cal.reg_lambda_, cal.reg_mu_))
        losses.append(multinomial_log_loss(x[te], y[te], fit.W, fit.b))
    # to 1e-8: the grid's fits are warm-started along the grid (dense Newton with chord
    # steps from the previous point's Hessian) and stop at another point within the
    # solver's gradient tolerance (1e-8) than these cold fits (1.2e-9 apart here)
    assert np.mean(losses) == pytest.approx(res["mean_test_log_loss"][best], abs=1e-8)
    # refit on all the data at the chosen point
    ref = fit_multinomial(x, y, penalty=make_penalty(4, "odir", cal.reg_lambda_, cal.reg_mu_))
    assert np.allclose(cal.coef_, ref.W, atol=1e-8)


def test_auto_l2_and_tied_mu_grids(synth):
    q, y = synth
    l2 = DirichletCalibrator(reg="l2", reg_mu=None).fit(q, y)
    assert np.array_equal(l2.cv_results_["reg_lambda"], L2_GRID) and l2.reg_mu_ is None
    tied = DirichletCalibrator(reg="odir", reg_mu=None).fit(q, y)
    assert len(tied.cv_results_["mean_test_log_loss"]) == 6
    assert tied.reg_mu_ == tied.reg_lambda_


def test_ensemble_averages_the_fold_maps(synth):
    q, y = synth
    cal = DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-2, ensemble=True,
                              cv=KFold(3)).fit(q, y)
    assert cal.coefs_.shape == (3, 4, 4) and cal.intercepts_.shape == (3, 4)
    x = log_features(q)
    maps = []
    for (tr, _), W, b in zip(KFold(3).split(q), cal.coefs_, cal.intercepts_, strict=True):
        fit = fit_multinomial(x[tr], y[tr], penalty=make_penalty(4, "odir", 1e-2, 1e-2))
        assert np.allclose(W, fit.W, atol=1e-8) and np.allclose(b, fit.b, atol=1e-8)
        maps.append(softmax(x @ W.T + b, axis=1))
    assert np.allclose(cal.predict_proba(q), np.mean(maps, axis=0), atol=1e-12)
    assert np.allclose(cal.coef_, cal.coefs_.mean(axis=0))
    # refitting without the ensemble drops the fold maps
    cal.set_params(ensemble=False).fit(q, y)
    assert not hasattr(cal, "coefs_")


# -- scikit-learn round trips -------------------------------------------------------
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_clone_and_pickle_round_trip(synth, name):
    q, y = synth
    s = _fit_scores(name, q)
    est = ESTIMATORS[name]()
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    est.fit(s, y)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict_proba(s), est.predict_proba(s))
    assert np.array_equal(clone(est).fit(s, y).predict_proba(s), est.predict_proba(s))


def test_grid_search_over_lambda(synth):
    q, y = synth
    gs = GridSearchCV(DirichletCalibrator(reg_mu=None), {"reg_lambda": [1e-3, 1e-1, 10.0]},
                      scoring="neg_log_loss", cv=3).fit(q, y)
    assert gs.best_params_["reg_lambda"] in (1e-3, 1e-1, 10.0)
    assert gs.best_estimator_.reg_lambda_ == gs.best_params_["reg_lambda"]
    gs_t = GridSearchCV(TemperatureScaler(), {"tol": [1e-6, 1e-9]}, scoring="neg_log_loss",
                        cv=3).fit(log_features(q), y)
    assert np.isfinite(gs_t.best_score_)


def test_parameter_schema_and_repr(synth):
    q, y = synth
    for cls in (TemperatureScaler, VectorScaler):
        schema = cls.get_parameter_schema()
        assert schema["type"] == "object"
        assert set(schema["properties"]) == set(cls().get_params())
        for name, spec in schema["properties"].items():
            default = cls().get_params()[name]
            assert spec["default"] == (list(default) if isinstance(default, tuple) else default)
    ts = TemperatureScaler(max_iter=50)
    assert repr(ts) == "TemperatureScaler(max_iter=50)" and not ts.fitted_
    ts.fit(log_features(q), y)
    assert repr(ts) == f"TemperatureScaler(temperature={ts.temperature_:.4f})" and ts.fitted_
    assert repr(VectorScaler()) == "VectorScaler()"
    assert repr(VectorScaler().fit(log_features(q), y)).startswith("VectorScaler(n_classes=4")


def test_unconverged_fit_warns_with_the_setting(synth):
    q, y = synth
    with pytest.warns(ConvergenceWarning, match="Increase max_iter"):
        cal = DirichletCalibrator(reg="odir", reg_lambda=1e-3, reg_mu=1e-3, max_iter=1).fit(q, y)
    assert not cal.converged_
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        VectorScaler(max_iter=1, reg="none").fit(log_features(q), y)


# -- bad input --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"reg": "l1"}, "reg must be one of"),
        ({"reg_lambda": -1.0}, "reg_lambda must be a finite non-negative"),
        ({"reg_lambda": "best"}, "reg_lambda must be a non-negative float or 'auto'"),
        ({"reg_lambda": None}, "reg_lambda must be a non-negative float or 'auto'"),
        ({"reg_mu": np.inf}, "reg_mu must be a finite non-negative"),
        ({"reg": "l2", "reg_mu": 0.1}, "reg_mu is only used by reg='structured' and reg='odir'"),
        ({"reg": "odir", "reg_diag": 0.1}, "reg_diag is only used by reg='structured'"),
        ({"reg": "none", "reg_lambda": 0.1, "reg_mu": None}, "reg_lambda is not used by"),
        ({"center": "mean"}, "center must be one of"),
        ({"cv": 1}, "cv must be an integer >= 2"),
        ({"cv": 1000, "reg_lambda": "auto"}, "cv=1000 folds need at least 1000 samples; got "
         "n_samples=400"),
        ({"ensemble": "yes"}, "ensemble must be one of"),
        ({"input": "proba"}, "input must be one of"),
        ({"eps": 0.0}, "eps must be a float in"),
        ({"max_iter": 0}, "max_iter must be a positive integer"),
        ({"tol": -1.0}, "tol must be a finite positive"),
        ({"warm_start": "yes"}, "warm_start must be one of"),
    ],
)
def test_dirichlet_bad_params(synth, params, match):
    q, y = synth
    est = DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-2).set_params(**params)
    with pytest.raises(ValueError, match=match):
        est.fit(q, y)


@pytest.mark.parametrize(
    ("cls", "params", "match"),
    [
        (TemperatureScaler, {"max_iter": 0}, "max_iter must be a positive integer"),
        (TemperatureScaler, {"tol": 0.0}, "tol must be a finite positive"),
        (TemperatureScaler, {"log_t_bounds": (4.0, -4.0)}, "log_t_bounds must be finite"),
        (TemperatureScaler, {"log_t_bounds": ()}, r"log_t_bounds must be a pair"),
        (VectorScaler, {"learning_rate": -0.1}, "learning_rate must be a finite positive"),
        (VectorScaler, {"max_iter": 1.5}, "max_iter must be a positive integer"),
        (VectorScaler, {"tol": np.nan}, "tol must be a finite positive"),
    ],
)
def test_scaler_bad_params(synth, cls, params, match):
    q, y = synth
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(log_features(q), y)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_bad_scores_and_labels(synth, name):
    q, y = synth
    s = _fit_scores(name, q)
    est = ESTIMATORS[name]()
    with pytest.raises(ValueError, match="contains NaN or inf"):
        est.fit(np.where(s == s.max(), np.nan, s), y)
    with pytest.raises(ValueError, match="y has labels outside the classes 0..3"):
        est.fit(s, np.where(y == 0, 9, np.where(y == 1, 2, y)))  # {2, 3, 9}: which is absent?
    with pytest.raises(ValueError, match="y has 5 distinct labels but the scores have 4"):
        est.fit(s, np.where(np.arange(len(y)) == 0, 7, y))
    with pytest.raises(ValueError, match="y has 399 labels but the scores have 400 rows"):
        est.fit(s, y[1:])
    with pytest.raises(ValueError, match="must have at least 2 classes"):
        est.fit(s[:, :1], y * 0)
    if name in ("dirichlet", "matrix"):
        with pytest.raises(ValueError, match="rows must sum to 1"):
            est.fit(q * 2.0, y)
        with pytest.raises(ValueError, match="sample_weight must be finite and >= 0"):
            est.fit(q, y, sample_weight=-np.ones(len(y)))
    est.fit(s, y)
    with pytest.raises(ValueError, match="has 3 columns but 4 classes were expected"):
        est.predict_proba(s[:, :3])


def test_temperature_bounds_are_respected(rng):
    z = rng.normal(size=(200, 3)) * 5.0
    sep = TemperatureScaler().fit(z, z.argmax(axis=1))  # separable: T -> 0 without bounds
    assert sep.temperature_ == pytest.approx(np.exp(-4.0), rel=1e-12) and sep.converged_
    wide = TemperatureScaler(log_t_bounds=(-8.0, 8.0)).fit(z, z.argmax(axis=1))
    assert wide.temperature_ < sep.temperature_
    noise = TemperatureScaler().fit(z, (z.argmax(axis=1) + 1) % 3)  # anti-informative
    assert noise.temperature_ == pytest.approx(np.exp(4.0), rel=1e-12)


def test_warm_start_reaches_the_same_optimum_in_fewer_steps(synth):
    q, y = synth
    cold = DirichletCalibrator(reg="odir", reg_lambda=1e-3, reg_mu=1e-3, tol=1e-10).fit(q, y)
    warm = DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-2, warm_start=True)
    warm.fit(q, y)
    first_iter = warm.n_iter_
    warm.set_params(reg_lambda=1e-3, reg_mu=1e-3, tol=1e-10).fit(q, y)
    assert warm.converged_ and warm.n_iter_ < cold.n_iter_
    assert first_iter == DirichletCalibrator(reg="odir", reg_lambda=1e-2, reg_mu=1e-2).fit(
        q, y).n_iter_  # fmt: skip  (nothing to start from: the identity map)
    np.testing.assert_allclose(warm.coef_, cold.coef_, atol=1e-7)
    np.testing.assert_allclose(warm.predict_proba(q), cold.predict_proba(q), atol=1e-9)
    # a previous fit on another number of classes is not used
    q3, y3, _, _ = make_dirgen(200, 3, rng=np.random.default_rng(2))
    other = clone(warm).set_params(warm_start=True).fit(q3, y3)
    assert other.coef_.shape == (3, 3) and other.converged_


# -- labels as scikit-learn users give them (every calibrator) --------------------
def _every_calibrator():
    """(id, factory, input kind) of every calibrator, the Bayesian ones by Laplace."""
    from bayescal import (
        BayesianDirichletCalibrator,
        BayesianGenerativeCalibrator,
        BetaCalibrator,
        BinningCalibrator,
        GenerativeDirichletCalibrator,
        IsotonicCalibrator,
        SigmoidCalibrator,
    )
    from bayescal.calibrators.registry import make_calibrator

    laplace = {"sampler": "laplace", "draws": 20, "chains": 1, "random_seed": 0}
    return [
        ("dirichlet", lambda **kw: DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2, **kw),
         "probs"),
        ("dirichlet-ensemble", lambda **kw: DirichletCalibrator(
            reg="l2", reg_lambda=1e-2, reg_mu=None, ensemble=True, cv=2, **kw), "probs"),
        ("matrix", lambda **kw: MatrixScaler(reg_lambda=1e-2, reg_mu=1e-2, **kw), "logits"),
        ("vector", lambda **kw: VectorScaler(**kw), "logits"),
        ("temperature", lambda **kw: TemperatureScaler(**kw), "logits"),
        ("temperature-probs", lambda **kw: make_calibrator("temperature", **kw), "probs"),
        ("generative", lambda **kw: GenerativeDirichletCalibrator(prior=1.0, **kw), "probs"),
        ("sigmoid", lambda **kw: SigmoidCalibrator(**kw), "probs"),
        ("sigmoid-logits", lambda **kw: SigmoidCalibrator(input="logits", **kw), "logits"),
        ("beta", lambda **kw: BetaCalibrator(**kw), "probs"),
        ("isotonic", lambda **kw: IsotonicCalibrator(**kw), "probs"),
        ("binning", lambda **kw: BinningCalibrator(n_bins=5, **kw), "probs"),
        ("bayes", lambda **kw: BayesianDirichletCalibrator(prior="l2", reg_lambda=1.0,
                                                           **laplace, **kw), "probs"),
        ("bayes-generative", lambda **kw: BayesianGenerativeCalibrator(**laplace, **kw),
         "probs"),
    ]


EVERY = {name: (make, kind) for name, make, kind in _every_calibrator()}
NAMES = np.array(["ant", "bee", "cat", "dog"])  # sorted: column j is NAMES[j]


def _labelled(name, synth):
    make, kind = EVERY[name]
    q, y = synth
    s = q if kind == "probs" else np.log(q) + 0.5
    return make, s, y


@pytest.mark.parametrize("name", list(EVERY))
@pytest.mark.parametrize(
    "labels",
    [NAMES, np.array([1, 2, 3, 4]), np.array([0, 2, 5, 9]), np.array([-1.0, 0.0, 3.0, 7.0]),
     NAMES.astype(object)],
    ids=["strings", "one-based", "sparse-ints", "floats", "object-strings"],
)
def test_labels_name_the_sorted_columns(name, labels, synth):
    make, s, y = _labelled(name, synth)
    ref = make().fit(s, y)
    np.testing.assert_array_equal(ref.classes_, np.arange(4))
    est = make().fit(s, labels[y])
    np.testing.assert_array_equal(est.classes_, labels)
    p = est.predict_proba(s)
    np.testing.assert_allclose(p, ref.predict_proba(s), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(est.predict(s), labels[np.argmax(p, axis=1)])
    expect = [f"proba_{c}" for c in labels]
    assert list(est.get_feature_names_out()) == expect
    assert est.score(s, labels[y]) == pytest.approx(np.mean(est.predict(s) == labels[y]))


@pytest.mark.parametrize("name", list(EVERY))
def test_classes_parameter_names_columns_and_allows_absent_classes(name, synth):
    make, s, y = _labelled(name, synth)
    order = np.array(["dog", "cat", "bee", "ant"])  # any order: classes[j] names column j
    est = make(classes=order).fit(s, order[y])
    np.testing.assert_array_equal(est.classes_, order)
    np.testing.assert_allclose(est.predict_proba(s), make().fit(s, y).predict_proba(s),
                               rtol=0, atol=1e-12)
    keep = y != 2  # class "bee" (column 2) absent from a small calibration set
    named = make(classes=order).fit(s[keep], order[y[keep]])
    coded = make().fit(s[keep], y[keep])  # integer column codes with one absent: as before
    np.testing.assert_array_equal(coded.classes_, np.arange(4))
    np.testing.assert_allclose(named.predict_proba(s), coded.predict_proba(s), rtol=0,
                               atol=1e-12)
    assert set(named.predict(s)) <= set(order)
    with pytest.raises(ValueError, match=r"pass classes="):
        make().fit(s[keep], order[y[keep]])
    with pytest.raises(ValueError, match=r"y has labels that are not in classes"):
        make(classes=[*order[:3], "eel"]).fit(s, order[y])  # "ant" is not a class
    with pytest.raises(ValueError, match=r"classes must list one label per score column \(4\)"):
        make(classes=order[:3]).fit(s, order[y])
    with pytest.raises(ValueError, match=r"classes must be distinct"):
        make(classes=["a", "a", "b", "c"]).fit(s, np.array(["a", "b", "c", "a"])[y])


@pytest.mark.parametrize("name", list(EVERY))
def test_set_output_pandas(name, synth):
    import pandas as pd  # a runtime dependency: never skipped
    make, s, y = _labelled(name, synth)
    frame = pd.DataFrame(s, columns=[f"score_{c}" for c in NAMES])
    est = make().set_output(transform="pandas").fit(frame, NAMES[y])
    out = est.transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [f"proba_{c}" for c in NAMES]
    np.testing.assert_allclose(out.to_numpy(), est.predict_proba(frame), rtol=0, atol=1e-15)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        est.predict_proba(s)
    assert list(est.feature_names_in_) == list(frame.columns)
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        est.get_feature_names_out(["a", "b", "c", "d"])


# Not the Bayesian calibrators (no sample_weight: a weighted likelihood is no
# model of the data, so its posterior width would mean nothing) and not the
# internal-CV ensemble (its folds split repeated rows unlike weighted ones).
@pytest.mark.parametrize(
    "name", [n for n in EVERY if not n.startswith("bayes") and n != "dirichlet-ensemble"]
)
def test_integer_sample_weights_equal_repeated_rows(name, synth):
    make, s, y = _labelled(name, synth)
    w = np.random.default_rng(3).integers(0, 4, size=len(y))
    rows = np.repeat(np.arange(len(y)), w)
    weighted = make().fit(s, NAMES[y], sample_weight=w)
    repeated = make().fit(s[rows], NAMES[y[rows]])
    np.testing.assert_allclose(weighted.predict_proba(s), repeated.predict_proba(s), rtol=0,
                               atol=1e-7)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(400,\)"):
        make().fit(s, y, sample_weight=w[1:])


@pytest.mark.parametrize("name", list(EVERY))
def test_failed_refit_leaves_the_fitted_estimator_usable(name):
    import copy

    q6, y6, _, _ = make_dirgen(300, 6, rng=np.random.default_rng(4))
    make, kind = EVERY[name]
    s6 = q6 if kind == "probs" else np.log(q6)
    est = make().fit(s6, np.array(list("abcdef"))[y6])
    before = est.predict_proba(s6)
    state = copy.deepcopy({k: v for k, v in vars(est).items() if k != "idata_"})
    q3, y3, _, _ = make_dirgen(50, 3, rng=np.random.default_rng(5))
    s3 = q3 if kind == "probs" else np.log(q3)
    bad_refits = [
        lambda: est.fit(s3, y3 + 0.5),  # continuous labels
        lambda: est.fit(s3, np.r_[y3[:-1], 7]),  # 4 labels for 3 columns
        lambda: est.fit(np.where(s3 == s3.max(), np.nan, s3), y3),
        lambda: est.fit(s3, y3[1:]),
    ]
    if "sample_weight" in inspect_fit_parameters(est):
        bad_refits.append(lambda: est.fit(s3, y3, sample_weight=-np.ones(50)))
    for refit in bad_refits:
        with pytest.raises(ValueError):
            refit()
        np.testing.assert_array_equal(est.predict_proba(s6), before)
        assert est.n_features_in_ == 6 and list(est.classes_) == list("abcdef")
        after = {k: v for k, v in vars(est).items() if k != "idata_"}
        assert after.keys() == state.keys()
        for key, value in state.items():
            assert _same(after[key], value), key


def inspect_fit_parameters(est):
    import inspect

    return inspect.signature(est.fit).parameters


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if hasattr(a, "get_params") and hasattr(a, "fit"):
        return type(a) is type(b) and _same(vars(a), vars(b))
    return bool(a == b)


# -- the label rule as a property -------------------------------------------------
_LABEL_VALUES = st.one_of(
    st.lists(st.integers(-10**6, 10**6), min_size=2, max_size=7, unique=True),
    st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=7, unique=True),
)


@settings(max_examples=200, deadline=None)
@given(values=_LABEL_VALUES, data=st.data())
def test_encoding_names_sorted_columns_and_round_trips(values, data):
    k = len(values)
    names = np.asarray(values)
    codes = np.asarray(data.draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=40)))
    present = np.unique(codes)
    y = names[codes]
    if present.size == k:  # every class present: the sorted labels name the columns
        classes, got = encode_labels(y, n_samples=len(y), n_classes=k)
        np.testing.assert_array_equal(classes, np.sort(names))
        np.testing.assert_array_equal(classes[got], y)
    # with the columns named, any subset of the classes is read the same way
    order = np.asarray(data.draw(st.permutations(range(k))))
    classes, got = encode_labels(y, n_samples=len(y), n_classes=k, classes=names[order])
    np.testing.assert_array_equal(classes, names[order])
    np.testing.assert_array_equal(classes[got], y)
    # integer column codes with classes absent keep working as before
    classes, got = encode_labels(codes, n_samples=len(codes), n_classes=k)
    np.testing.assert_array_equal(got, codes)
    if present.size < k:
        np.testing.assert_array_equal(classes, np.arange(k))


@pytest.mark.parametrize("name", ["bayes", "bayes-generative"])
def test_bayesian_posterior_files_keep_the_labels(name, synth, tmp_path):
    make, s, y = _labelled(name, synth)
    est = make().fit(s, NAMES[y])
    back = bayescal.load(est.save(tmp_path / "post.json"))
    np.testing.assert_array_equal(back.classes_, NAMES)
    np.testing.assert_array_equal(back.predict(s), est.predict(s))
    assert back.model_id_ == est.model_id_
