"""GenerativeDirichletCalibrator: recovery, exact forms, streaming, Dask, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _extras import import_extra
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from bayescal import GenerativeDirichletCalibrator, make_dirgen
from bayescal.maps import canonical_map, dirgen_map, dirlin_map

TINY = float(np.finfo(np.float64).tiny)


@pytest.fixture(scope="module")
def data():
    q, y, alpha, pi = make_dirgen(100_000, 5, rng=11, pi=np.full(5, 0.2))
    return q, y, alpha, pi


@pytest.fixture(scope="module")
def fitted(data):
    q, y, _, _ = data
    return GenerativeDirichletCalibrator(prior=None).fit(q, y)


def test_recovers_alpha_and_pi(data):
    """k = 5 and about 20000 samples per class."""
    q, y, alpha, pi = data
    assert np.bincount(y).min() > 19_000
    cal = GenerativeDirichletCalibrator(prior=None, eps=TINY).fit(q, y)
    assert cal.converged_ and 1 <= cal.n_iter_ <= 20
    np.testing.assert_allclose(cal.alpha_, alpha, rtol=0.05)
    np.testing.assert_allclose(cal.pi_, pi, atol=0.01)
    np.testing.assert_array_equal(cal.class_count_, np.bincount(y, minlength=5))
    assert all(f.grad_norm < 1e-9 for f in cal.fits_)


def test_three_forms_give_the_same_map(data, fitted):
    q = data[0][:2000]
    p = fitted.predict_proba(q)
    np.testing.assert_allclose(p, dirgen_map(q, fitted.alpha_, fitted.pi_), atol=1e-10)
    W, b = fitted.to_linear()
    np.testing.assert_allclose(p, dirlin_map(q, W, b), atol=1e-10)
    A, c = fitted.to_canonical()
    np.testing.assert_allclose(p, canonical_map(q, A, c), atol=1e-10)
    alpha, pi = fitted.to_generative()
    np.testing.assert_array_equal(alpha, fitted.alpha_)
    W[0, 0] = 99.0  # copies, not views
    assert fitted.coef_[0, 0] != 99.0


def test_partial_fit_over_chunks_equals_fit(data, fitted):
    q, y, _, _ = data
    cal = GenerativeDirichletCalibrator(prior=None)
    for start in range(0, len(y), 17_000):
        cal.partial_fit(q[start : start + 17_000], y[start : start + 17_000])
    np.testing.assert_array_equal(cal.class_count_, fitted.class_count_)
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-10)
    np.testing.assert_allclose(cal.intercept_, fitted.intercept_, rtol=1e-10, atol=1e-10)
    # fit starts over
    cal.fit(q[:5000], y[:5000])
    assert cal.class_count_.sum() == 5000


def test_partial_fit_keeps_statistics_through_a_degenerate_chunk(data, fitted):
    q, y, _, _ = data
    first = np.flatnonzero(y == 0)[:1].tolist() + np.flatnonzero(y != 0)[:50].tolist()
    rest = np.setdiff1d(np.arange(len(y)), first)
    cal = GenerativeDirichletCalibrator(prior=None)
    with pytest.raises(ValueError, match=r"class 0 has 1 sample\(s\)"):
        cal.partial_fit(q[first], y[first])
    assert cal.class_count_.sum() == 51
    with pytest.raises(NotFittedError):
        cal.predict_proba(q[:3])
    cal.partial_fit(q[rest], y[rest])
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-10)
    with pytest.raises(ValueError, match=r"scores has 3 columns but 5 classes"):
        cal.partial_fit(np.full((2, 3), 1 / 3), [0, 1])
    with pytest.raises(ValueError, match=r"differs from classes_ \[0, 1, 2, 3, 4\] fixed by"):
        cal.partial_fit(q[:10], y[:10], classes=["a", "b"])


def test_logits_and_probabilities_give_the_same_fit(data, fitted, rng):
    q, y, _, _ = data
    z = np.log(np.maximum(q, TINY)) + rng.normal(0.0, 3.0, size=(len(q), 1))
    cal = GenerativeDirichletCalibrator(prior=None, input="logits").fit(z, y)
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-9)
    np.testing.assert_allclose(cal.predict_proba(z[:500]), fitted.predict_proba(q[:500]), atol=1e-9)


def test_class_permutation_permutes_the_fit(data, fitted):
    q, y, _, _ = data
    perm = np.array([3, 0, 4, 1, 2])  # new column c holds old class perm[c]
    inv = np.argsort(perm)
    cal = GenerativeDirichletCalibrator(prior=None).fit(q[:, perm], inv[y])
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_[np.ix_(perm, perm)], rtol=1e-10)
    np.testing.assert_allclose(
        cal.predict_proba(q[:300, perm]), fitted.predict_proba(q[:300])[:, perm], atol=1e-12
    )


def test_dask_fit_equals_numpy_fit(data, fitted):
    # dask is a declared optional dependency ([dask] extra); make test requires it
    da = import_extra("dask.array", "dask")
    q, y, _, _ = data
    qd = da.from_array(q, chunks=(13_000, 5))
    cal = GenerativeDirichletCalibrator(prior=None).fit(qd, da.from_array(y, chunks=9_000))
    np.testing.assert_array_equal(cal.class_count_, fitted.class_count_)
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-10)
    cal = GenerativeDirichletCalibrator(prior=None).fit(qd, y)  # numpy labels with dask scores
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-10)
    streamed = GenerativeDirichletCalibrator(prior=None)
    streamed.partial_fit(qd[:40_000], y[:40_000]).partial_fit(qd[40_000:], y[40_000:])
    np.testing.assert_allclose(streamed.alpha_, fitted.alpha_, rtol=1e-10)
    bad = q[:30_000].copy()
    bad[20_000, 0] = np.nan
    with pytest.raises(ValueError, match=r"in rows 13000..25999 of the dask array: .*NaN"):
        GenerativeDirichletCalibrator(prior=None).fit(da.from_array(bad, chunks=(13_000, 5)),
                                                      y[:30_000])
    with pytest.raises(ValueError, match=r"y must be 1-D with one label per score row"):
        GenerativeDirichletCalibrator(prior=None).fit(qd, y[:10])


def _degenerate_cases():
    rng = np.random.default_rng(5)
    q = rng.dirichlet(np.ones(3), size=60)
    y = np.repeat([0, 1, 2], 20)
    one = y.copy()
    one[40:59] = 1  # class 2 keeps a single sample
    none = y.copy()
    none[40:] = 1  # class 2 has no sample
    const = q.copy()
    const[y == 1] = [0.2, 0.3, 0.5]  # class 1: constant features
    corner = q.copy()
    corner[y == 0, 2] = 0.0  # class 0 never puts mass on column 2
    corner[y == 0] /= corner[y == 0].sum(axis=1, keepdims=True)
    return [
        ("one_sample", q, one, r"class 2 has 1 sample\(s\); a Dirichlet maximum-likelihood"),
        ("no_sample", q, none, r"class 2 has no samples .*pass prior="),
        ("constant", const, y, r"class 1: its 20 samples are \(numerically\) identical"),
        ("corner", corner, y, r"class 0: every sample has probability <= eps .*column\(s\) \[2\]"),
    ]


@pytest.mark.parametrize(("case", "q", "y", "match"), _degenerate_cases())
def test_degenerate_classes_raise_or_use_the_prior(case, q, y, match):
    cal = GenerativeDirichletCalibrator(prior=None)
    with pytest.raises(ValueError, match=match):
        cal.fit(q, y)
    assert not hasattr(cal, "coef_")  # nothing half-fitted
    reg = GenerativeDirichletCalibrator(prior=1.0).fit(q, y)
    assert reg.converged_ and np.isfinite(reg.alpha_).all() and (reg.alpha_ > 0).all()
    p = reg.predict_proba(q)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_prior_shrinks_toward_the_identity_map(rng):
    q = rng.dirichlet(np.ones(3), size=30)
    y = rng.integers(0, 3, size=30)
    strong = GenerativeDirichletCalibrator(prior=1e7).fit(q, y)
    np.testing.assert_allclose(strong.predict_proba(q), q, atol=1e-4)


def test_convergence_warning_names_the_setting(data):
    q, y, _, _ = data
    with pytest.warns(ConvergenceWarning, match=r"increase max_iter \(now 1\)"):
        cal = GenerativeDirichletCalibrator(prior=None, max_iter=1).fit(q[:3000], y[:3000])
    assert not cal.converged_ and cal.n_iter_ == 1


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"input": "proba"}, r"input must be one of \['probs', 'logits'\]; got 'proba'"),
        ({"eps": 0.0}, r"eps must be a float in \(0, 1\); got 0.0"),
        ({"max_iter": 0}, r"max_iter must be a positive integer; got 0"),
        ({"tol": -1.0}, r"tol must be a finite positive number; got -1.0"),
        ({"prior": "yes"}, r"prior must be None, a positive number"),
        ({"prior": "auto", "cv": 1}, r"cv=1|cv must be"),
    ],
)
def test_bad_parameters(params, match):
    cal = GenerativeDirichletCalibrator(**params)
    with pytest.raises(ValueError, match=match):
        cal.fit(np.full((4, 2), 0.5), [0, 1, 0, 1])
    assert clone(cal).get_params() == cal.get_params()


def test_bad_scores_and_labels():
    cal = GenerativeDirichletCalibrator(prior=None)
    with pytest.raises(ValueError, match=r"row 1 sums to 0.5"):
        cal.fit([[0.5, 0.5], [0.25, 0.25]], [0, 1])
    with pytest.raises(ValueError, match=r"y has 1 labels but the scores have 2 rows"):
        cal.fit([[0.5, 0.5], [0.25, 0.75]], [0])
    with pytest.raises(NotFittedError):
        cal.to_linear()


def test_fit_on_real_network_outputs_is_the_mle(dnn_cifar10):
    """CIFAR-10 WRN softmax outputs (float32, some rows exactly one-hot).

    Real outputs are not Dirichlet per class (docs/generative_vs_discriminative.md),
    but the fit must still be the exact maximiser: scipy's generic optimiser on
    the row-by-row likelihood finds nothing better.
    """
    from scipy.optimize import minimize

    from bayescal.dirichlet import dirichlet_logpdf

    d = dnn_cifar10
    val, test = d["idx_val"], d["idx_test"]
    cal = GenerativeDirichletCalibrator(prior=None).fit(d["probs"][val], d["y"][val])
    assert cal.converged_ and max(f.grad_norm for f in cal.fits_) < 1e-9
    q0 = d["probs"][val][d["y"][val] == 0]
    res = minimize(
        lambda la: -dirichlet_logpdf(q0, np.exp(la)).mean(),
        np.zeros(10),
        method="L-BFGS-B",
        options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-10},
    )
    ours = dirichlet_logpdf(q0, cal.alpha_[0]).mean()
    assert ours >= -res.fun - 1e-9
    assert ours == pytest.approx(cal.fits_[0].loglik, rel=1e-12)
    p = cal.predict_proba(d["probs"][test])
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert np.isfinite(p).all()


def test_dask_fit_never_materialises_the_array(data, fitted, monkeypatch):
    """The statistics come from one compute of a (k, k+1) result; the scores are
    never turned into one numpy array on the client."""
    da = import_extra("dask.array", "dask")
    q, y, _, _ = data
    qd = da.from_array(q, chunks=(20_000, 5))
    calls = []
    original = type(qd).compute

    def forbid(self, *args, **kwargs):
        raise AssertionError("the dask array was materialised on the client")

    def counting(self, *args, **kwargs):
        calls.append(self.shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(qd), "__array__", forbid)
    monkeypatch.setattr(type(qd), "compute", counting)
    cal = GenerativeDirichletCalibrator(prior=None).fit(qd, da.from_array(y, chunks=20_000))
    assert calls == [(5, 6)]
    np.testing.assert_allclose(cal.alpha_, fitted.alpha_, rtol=1e-10)


# ---------------------------------------------------------------------------
# streaming at the defaults (prior="auto")
# ---------------------------------------------------------------------------
def _overconfident(n, k=4, seed=3):
    """Scores softmax(z) of labels drawn from softmax(z / 2): temperature scaling's model."""
    from scipy.special import softmax

    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, size=(n, k))
    y = (rng.random(n)[:, None] > np.cumsum(softmax(z / 2.0, axis=1), axis=1)).sum(axis=1)
    return softmax(z, axis=1), np.minimum(y, k - 1)


@pytest.fixture(scope="module")
def overconfident():
    return _overconfident(6000)


def _stream(cal, q, y, sizes=(1, 1699, 2300)):
    """partial_fit over uneven chunks (the first a single row)."""
    bounds = np.cumsum((0, *sizes, len(y)))
    bounds = np.minimum(bounds, len(y))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        if hi > lo:
            cal.partial_fit(q[lo:hi], y[lo:hi], classes=np.arange(q.shape[1]))
    return cal


def test_partial_fit_at_defaults_is_temperature_scaling_of_the_stream(overconfident):
    from bayescal import TemperatureScaler, log_features

    q, y = overconfident
    cal = _stream(GenerativeDirichletCalibrator(), q, y)
    assert cal.prior_strength_ == np.inf and cal.cv_results_ is None
    assert cal.temperature_stats_.shape == (33, 3)
    ts = TemperatureScaler().fit(log_features(q), y)
    scale = cal.prior_center_[0, 0] - 1.0
    assert scale == pytest.approx(1.0 / ts.temperature_, rel=1e-4)
    np.testing.assert_allclose(cal.alpha_, 1.0 + scale * np.eye(4), rtol=1e-15)
    np.testing.assert_allclose(cal.predict_proba(q[:500]), ts.predict_proba(log_features(q[:500])),
                               atol=1e-5)
    # the chunks do not matter, and the result is deterministic
    once = GenerativeDirichletCalibrator().partial_fit(q, y)
    np.testing.assert_allclose(once.alpha_, cal.alpha_, rtol=1e-10)
    np.testing.assert_allclose(once.intercept_, cal.intercept_, atol=1e-10)
    again = _stream(GenerativeDirichletCalibrator(), q, y)
    np.testing.assert_array_equal(again.alpha_, cal.alpha_)
    np.testing.assert_array_equal(again.temperature_stats_, cal.temperature_stats_)


def test_fit_and_partial_fit_agree_at_defaults_when_fit_chooses_temperature_scaling(
    overconfident,
):
    q, y = overconfident
    fit = GenerativeDirichletCalibrator().fit(q, y)
    assert fit.prior_strength_ == np.inf  # the cross-validated choice on these data
    stream = _stream(GenerativeDirichletCalibrator(), q, y)
    np.testing.assert_allclose(stream.alpha_, fit.alpha_, rtol=1e-10)
    np.testing.assert_allclose(stream.intercept_, fit.intercept_, atol=1e-10)
    np.testing.assert_allclose(stream.temperature_stats_, fit.temperature_stats_, rtol=1e-10)
    np.testing.assert_allclose(stream.predict_proba(q), fit.predict_proba(q), atol=1e-10)
    # partial_fit continues from fit's statistics (temperature ones included)
    cont = GenerativeDirichletCalibrator().fit(q[:2500], y[:2500])
    cont.partial_fit(q[2500:], y[2500:])
    np.testing.assert_allclose(cont.alpha_, fit.alpha_, rtol=1e-10)
    assert cont.cv_results_ is None


def test_partial_fit_with_a_fixed_prior_equals_fit(overconfident):
    q, y = overconfident
    fit = GenerativeDirichletCalibrator(prior=10.0).fit(q, y)
    stream = _stream(GenerativeDirichletCalibrator(prior=10.0), q, y)
    assert fit.temperature_stats_ is None and stream.temperature_stats_ is None
    np.testing.assert_allclose(stream.alpha_, fit.alpha_, rtol=1e-10)
    np.testing.assert_allclose(stream.intercept_, fit.intercept_, atol=1e-10)


def test_partial_fit_at_defaults_after_chunks_without_temperature_statistics(overconfident):
    q, y = overconfident
    cal = GenerativeDirichletCalibrator(prior=10.0).partial_fit(q[:100], y[:100])
    alpha = cal.alpha_.copy()
    cal.set_params(prior="auto")
    with pytest.raises(ValueError, match=r"prior='auto' .*temperature statistics .*fit\(\)"):
        cal.partial_fit(q[100:200], y[100:200])
    assert cal.class_count_.sum() == 100
    np.testing.assert_array_equal(cal.alpha_, alpha)


def test_dask_at_defaults_equals_the_numpy_stream(overconfident, monkeypatch):
    da = import_extra("dask.array", "dask")
    q, y = overconfident
    stream = _stream(GenerativeDirichletCalibrator(), q, y)
    qd, yd = da.from_array(q, chunks=(1300, 4)), da.from_array(y, chunks=1300)

    def forbid(self, *args, **kwargs):
        raise AssertionError("the dask array was materialised on the client")

    monkeypatch.setattr(type(qd), "__array__", forbid)
    cal = GenerativeDirichletCalibrator().fit(qd, yd)
    assert cal.prior_strength_ == np.inf and cal.cv_results_ is None
    np.testing.assert_allclose(cal.alpha_, stream.alpha_, rtol=1e-10)
    np.testing.assert_allclose(cal.temperature_stats_, stream.temperature_stats_, rtol=1e-10)
    chunked = GenerativeDirichletCalibrator()
    chunked.partial_fit(qd[:2000], yd[:2000]).partial_fit(qd[2000:], yd[2000:])
    np.testing.assert_allclose(chunked.alpha_, stream.alpha_, rtol=1e-10)
    np.testing.assert_allclose(chunked.intercept_, stream.intercept_, atol=1e-10)


def test_a_saved_stream_goes_on_after_loading(overconfident, tmp_path):
    from bayescal.model_files import load_model, save_model

    q, y = overconfident
    whole = _stream(GenerativeDirichletCalibrator(), q, y)
    half = GenerativeDirichletCalibrator().partial_fit(q[:3000], y[:3000])
    back = load_model(save_model(half, tmp_path / "stream.json"))
    np.testing.assert_array_equal(back.temperature_stats_, half.temperature_stats_)
    back.partial_fit(q[3000:], y[3000:])
    np.testing.assert_allclose(back.alpha_, whole.alpha_, rtol=1e-10)
