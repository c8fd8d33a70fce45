"""BayesianGenerativeCalibrator: posterior recovery, conversions, persistence.

Sampling budget: one compiled NUTS fit (4 chains x (500 tune + 1000 draws), k=3,
the program of test_bayes_defaults' generative fit) shared by the module, plus
Laplace fits (no compilation). The recovery tests
sample the model without pseudo-samples (``prior=None``): the default's
pseudo-samples pull the concentrations towards temperature scaling, which is
not the truth of ``make_dirgen`` data; the default has tests of its own below.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayescal
from bayescal import BayesianGenerativeCalibrator, make_dirgen
from bayescal.bayes import SamplingWarning, _compat
from bayescal.maps import dirgen_map, dirlin_map, log_features

K = 3


@pytest.fixture(scope="module")
def data():
    q, y, alpha, pi = make_dirgen(3000, K, rng=20240101)
    return q, y, alpha, pi


@pytest.fixture(scope="module")
def nuts_fit(data):
    q, y, _, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", SamplingWarning)  # must converge
        # the run length of test_bayes_defaults' generative fit: one compiled program
        return BayesianGenerativeCalibrator(
            prior=None, draws=1000, tune=500, chains=4, random_seed=8
        ).fit(q, y)


@pytest.fixture(scope="module")
def laplace_fit(data):
    q, y, _, _ = data
    return BayesianGenerativeCalibrator(
        prior=None, sampler="laplace", draws=1000, chains=2, random_seed=7
    ).fit(q, y)


def test_nuts_diagnostics(nuts_fit):
    d = nuts_fit.diagnostics_
    assert d["r_hat_max"] <= 1.01 and d["divergences"] == 0 and d["ess_bulk_min"] >= 400
    summ = nuts_fit.summary()
    assert {"r_hat", "ess_bulk"} <= set(summ.columns)
    assert len(summ) == K * K


@pytest.mark.parametrize("which", ["nuts_fit", "laplace_fit"])
def test_true_parameters_inside_hdi(which, data, request):
    """94% HDIs hold the true alpha and pi for at least 10 of the 12 entries."""
    est = request.getfixturevalue(which)
    _, _, alpha, pi = data
    hdi = _compat.hdi(est.idata_, ["alpha", "pi"], prob=0.94)
    lo_a, hi_a = hdi["alpha"].values[..., 0], hdi["alpha"].values[..., 1]
    lo_p, hi_p = hdi["pi"].values[..., 0], hdi["pi"].values[..., 1]
    inside = np.concatenate(
        [((lo_a <= alpha) & (alpha <= hi_a)).ravel(), ((lo_p <= pi) & (pi <= hi_p)).ravel()]
    )
    # 12 entries, each covered with probability ~0.94: >= 10 fails with p ~ 4%
    # for a perfect posterior; the seeds are fixed, so this is deterministic.
    assert inside.sum() >= 10, inside


def test_every_draw_converts_exactly(nuts_fit, data):
    """Every draw's DirLin (W, b) gives the DirGen map of its (alpha, pi) (1e-10)."""
    q = data[0][:200]
    post = nuts_fit.idata_.posterior
    alpha = post["alpha"].values.reshape(-1, K, K)
    pi = post["pi"].values.reshape(-1, K)
    W, b = nuts_fit.posterior_draws("W"), nuts_fit.posterior_draws("b")
    for s in range(0, alpha.shape[0], 37):
        np.testing.assert_allclose(
            dirlin_map(q, W[s], b[s]), dirgen_map(q, alpha[s], pi[s]), atol=1e-10
        )
    maps = nuts_fit.predict_proba_draws(q)
    assert maps.shape == (alpha.shape[0], 200, K)
    np.testing.assert_allclose(maps[5], dirgen_map(q, alpha[5], pi[5]), atol=1e-10)


def test_canonical_draws(nuts_fit):
    A = nuts_fit.posterior_draws("A")
    c = nuts_fit.posterior_draws("c")
    assert (A >= 0).all() and np.allclose(A.min(axis=1), 0.0)
    np.testing.assert_allclose(c.sum(axis=1), 1.0, atol=1e-12)


def test_predictions_sum_to_one_and_intervals(nuts_fit, data):
    q = data[0][:50]
    p = nuts_fit.predict_proba(q)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    lo, hi = nuts_fit.credible_interval(q, hdi_prob=0.9)
    assert lo.shape == hi.shape == q.shape
    assert np.all(lo <= hi) and np.all((lo <= p + 1e-12) | (hi >= p - 1e-12))
    assert np.all(lo >= 0) and np.all(hi <= 1)
    with pytest.raises(ValueError, match="kind"):
        nuts_fit.predict_proba(q, kind="median")
    with pytest.raises(ValueError, match="hdi_prob"):
        nuts_fit.credible_interval(q, hdi_prob=1.5)


def test_mode_map_is_plugin_dirgen(nuts_fit, data):
    q = data[0][:50]
    np.testing.assert_allclose(
        nuts_fit.predict_proba(q, kind="mode"),
        dirgen_map(q, nuts_fit.alpha_mode_, nuts_fit.pi_mode_),
        atol=1e-10,
    )


def test_laplace_sd_close_to_nuts(nuts_fit, laplace_fit):
    """Laplace posterior sd of alpha within 20% of NUTS (n = 3000, k = 3)."""
    sd_nuts = nuts_fit.idata_.posterior["alpha"].std(("chain", "draw")).values
    sd_lap = laplace_fit.idata_.posterior["alpha"].std(("chain", "draw")).values
    np.testing.assert_array_less(np.abs(sd_lap / sd_nuts - 1.0), 0.2)


def test_save_load_round_trip(nuts_fit, data, tmp_path):
    q = data[0][:100]
    loaded = bayescal.load(nuts_fit.save(tmp_path / "gen.json"))
    assert loaded.get_params() == nuts_fit.get_params()
    assert loaded.model_id_ == nuts_fit.model_id_
    assert loaded.tune_ == nuts_fit.tune_ == 500
    np.testing.assert_allclose(loaded.predict_proba(q), nuts_fit.predict_proba(q), atol=1e-12)
    np.testing.assert_allclose(
        loaded.predict_proba(q, kind="mode"), nuts_fit.predict_proba(q, kind="mode"), atol=1e-12
    )
    assert loaded.idata_.posterior.attrs["bayescal_version"]
    np.testing.assert_allclose(loaded.alpha_mode_, nuts_fit.alpha_mode_, rtol=1e-12)
    np.testing.assert_allclose(loaded.pi_mode_, nuts_fit.pi_mode_, rtol=1e-10)
    assert loaded.prior_ == nuts_fit.prior_


def test_load_detects_tampering(laplace_fit, tmp_path):
    path = laplace_fit.save(tmp_path / "gen.json")
    post = path.with_suffix(".nc")
    idata = _compat.from_netcdf(post)
    const = _compat.group_dataset(idata, "constant_data").copy(deep=True)
    const["bayescal_counts"].values[0] += 1
    _compat.set_group(idata, "constant_data", const)
    post.write_bytes(_compat.to_netcdf_bytes(idata))
    with pytest.raises(ValueError, match="model id .* does not match its content"):
        bayescal.load(path)
    from bayescal import BayesianDirichletCalibrator

    with pytest.raises(ValueError, match="holds a BayesianGenerativeCalibrator, not a "
                                         "BayesianDirichletCalibrator"):
        BayesianDirichletCalibrator._read_posterior(post)


def test_relabelling_permutes_predictions(data):
    """Permuting the classes permutes the mode and posterior-mean predictions."""
    q, y, _, _ = data
    perm = np.array([2, 0, 1])
    inv = np.argsort(perm)
    kw = {"sampler": "laplace", "draws": 2000, "chains": 2, "random_seed": 3}
    a = BayesianGenerativeCalibrator(**kw).fit(q, y)
    b = BayesianGenerativeCalibrator(**kw).fit(q[:, perm], inv[y])
    qt = q[:300]
    np.testing.assert_allclose(
        b.predict_proba(qt[:, perm], kind="mode"), a.predict_proba(qt, kind="mode")[:, perm],
        atol=1e-8,
    )
    # posterior means differ only by Monte Carlo error (different draws)
    np.testing.assert_allclose(
        b.predict_proba(qt[:, perm]), a.predict_proba(qt)[:, perm], atol=5e-3
    )


def test_logits_input_matches_probs(data):
    q, y, _, _ = data
    z = log_features(q) + 3.0  # logits whose softmax is q (up to the eps floor)
    kw = {"sampler": "laplace", "draws": 200, "chains": 1, "random_seed": 0}
    a = BayesianGenerativeCalibrator(**kw).fit(q, y)
    b = BayesianGenerativeCalibrator(input="logits", **kw).fit(z, y)
    np.testing.assert_allclose(b.predict_proba(z[:50]), a.predict_proba(q[:50]), atol=1e-8)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"sampler": "gibbs"}, "sampler"),
        ({"alpha_prior": (0.0, -1.0)}, "log_alpha_sigma"),
        ({"alpha_prior": 1.0}, "alpha_prior"),
        ({"pi_prior": 0.0}, "pi_concentration"),
        ({"draws": 0}, "draws"),
        ({"tune": -1}, "tune"),
        ({"random_seed": 1.5}, "random_seed"),
        ({"prior": "flat"}, "prior"),
        ({"prior": -1.0}, "prior"),
        ({"cv": 1}, "cv"),
    ],
)
def test_bad_parameters(params, match, data):
    q, y, _, _ = data
    with pytest.raises(ValueError, match=match):
        BayesianGenerativeCalibrator(**params).fit(q[:20], y[:20])


def test_bad_labels(data):
    q, y, _, _ = data
    with pytest.raises(ValueError, match="outside the classes"):
        BayesianGenerativeCalibrator(sampler="laplace").fit(q[:10], np.full(10, 5))


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_pointwise_joint_is_the_class_prior_times_the_dirichlet_density(monkeypatch, chunk):
    """``ln pi_{y_i} + ln Dir(q_i; alpha_{y_i})`` per draw, to 1e-10, in chunks of any size.

    The reference is :func:`scipy.stats.dirichlet.logpdf`, draw by draw and row
    by row; the leading (chain, draw) axes are kept.
    """
    from scipy.stats import dirichlet

    from bayescal.bayes import laplace

    monkeypatch.setattr(laplace, "draws_per_chunk", lambda n, k: chunk)
    rng = np.random.default_rng(3)
    for k, n in ((3, 9), (4, 5)):
        alpha = rng.gamma(2.0, 2.0, size=(2, 4, k, k))
        pi = rng.dirichlet(np.ones(k), size=(2, 4))
        q = rng.dirichlet(np.ones(k), size=n)
        y = rng.integers(0, k, size=n)
        got = laplace.dirgen_pointwise_joint(alpha, pi, np.log(q), y)
        assert got.shape == (2, 4, n)
        for c in range(2):
            for d in range(4):
                want = [np.log(pi[c, d, y[i]]) + dirichlet.logpdf(q[i], alpha[c, d, y[i]])
                        for i in range(n)]
                np.testing.assert_allclose(got[c, d], want, rtol=1e-10, atol=1e-10)


# -- the default prior: the MAP generative default's pseudo-samples ---------------------
def test_auto_prior_is_the_map_defaults_choice(data):
    """``prior="auto"`` takes GenerativeDirichletCalibrator()'s centre and strength."""
    from bayescal import GenerativeDirichletCalibrator

    q, y, _, _ = data
    for n in (60, 600):
        est = BayesianGenerativeCalibrator(sampler="laplace", draws=50, chains=1,
                                           random_seed=0).fit(q[:n], y[:n])
        ref = GenerativeDirichletCalibrator().fit(q[:n], y[:n])
        np.testing.assert_allclose(est.prior_center_, ref.prior_center_, rtol=1e-12)
        np.testing.assert_allclose(est.cv_results_["mean_test_log_loss"],
                                   ref.cv_results_["mean_test_log_loss"], rtol=1e-12)
        want = ref.prior_strength_
        if np.isinf(want):  # temperature scaling kept: 1e4 pseudo-samples per row
            from bayescal.bayes.estimators import AUTO_TS_PSEUDO_PER_ROW

            want = max(1e4, AUTO_TS_PSEUDO_PER_ROW * n)
        assert est.prior_strength_ == want


@pytest.mark.parametrize("nu", [2.0, 50.0])
def test_mode_under_pseudo_samples_is_the_map_fit(data, nu):
    """With a flat ``ln alpha`` prior the posterior mode is the MAP generative fit.

    Both maximise the likelihood of the pooled statistics (data and ``nu``
    pseudo-samples per class); ``pi`` has the mode ``(n_j + nu) / (n + k nu)`` of
    ``Dirichlet(1 + n + nu)``.
    """
    from bayescal import GenerativeDirichletCalibrator

    q, y, _, _ = data
    est = BayesianGenerativeCalibrator(prior=nu, alpha_prior=(0.0, 1e8), sampler="laplace",
                                       draws=50, chains=1, random_seed=0).fit(q[:300], y[:300])
    ref = GenerativeDirichletCalibrator(prior=nu).fit(q[:300], y[:300])
    np.testing.assert_allclose(est.alpha_mode_, ref.alpha_, rtol=1e-7)
    np.testing.assert_allclose(est.pi_mode_, ref.pi_, rtol=1e-12)
    assert est.prior_strength_ == nu
    np.testing.assert_allclose(est.prior_center_, ref.prior_center_, rtol=0)


def test_pseudo_samples_divide_out_of_the_evidence(data):
    """``log_evidence_`` with pseudo-samples is ev(data + pseudo) - ev(pseudo)."""
    from bayescal.bayes.laplace import dirgen_log_evidence, dirgen_mode
    from bayescal.dirichlet import DirichletPrior, SufficientStatistics
    from bayescal.maps import log_features

    q, y, _, _ = data
    est = BayesianGenerativeCalibrator(prior=5.0, sampler="laplace", draws=20, chains=1,
                                       random_seed=0).fit(q[:200], y[:200])
    data_stats = SufficientStatistics.from_features(log_features(q[:200]), y[:200])
    extra = DirichletPrior(5.0).pseudo_statistics(K)

    def ev(counts, S):
        u, h = dirgen_mode(counts, S, est.prior_)
        return dirgen_log_evidence(u, h, counts, S, est.prior_)

    want = ev(data_stats.counts + extra.counts, data_stats.sums + extra.sums) - ev(
        extra.counts, extra.sums)
    assert est.log_evidence_ == pytest.approx(want, rel=1e-12)
    none = BayesianGenerativeCalibrator(prior=None, sampler="laplace", draws=20, chains=1,
                                        random_seed=0).fit(q[:200], y[:200])
    assert none.log_evidence_ == pytest.approx(ev(data_stats.counts, data_stats.sums),
                                               rel=1e-12)
    assert none.prior_strength_ is None and none.prior_center_ is None


def test_auto_prior_survives_save_and_load(data, tmp_path):
    q, y, _, _ = data
    est = BayesianGenerativeCalibrator(sampler="laplace", draws=100, chains=2,
                                       random_seed=1).fit(q[:150], y[:150])
    loaded = bayescal.load(est.save(tmp_path / "auto.json"))
    assert loaded.prior_strength_ == est.prior_strength_
    np.testing.assert_allclose(loaded.prior_center_, est.prior_center_, rtol=0)
    np.testing.assert_allclose(loaded.predict_proba(q[:50]), est.predict_proba(q[:50]),
                               atol=1e-12)
    assert loaded.cv_results_ is None  # the check's table is not part of the model file


def test_auto_prior_does_not_lose_to_temperature_scaling_on_an_overconfident_network():
    """Held-out: an over-confident network, whose true map is temperature scaling.

    The default's posterior mean is within 1 % of temperature scaling's test
    log-loss and better than the uncalibrated scores; the model without
    pseudo-samples (``prior=None``, the earlier default) is not.
    """
    from bayescal import TemperatureScaler
    from bayescal.datasets import make_dnn_scores
    from bayescal.metrics import log_loss

    q, y = make_dnn_scores(2100, 4, rng=3)
    qc, yc, qt, yt = q[:100], y[:100], q[100:], y[100:]
    kw = {"sampler": "laplace", "draws": 500, "chains": 2, "random_seed": 0}
    auto = BayesianGenerativeCalibrator(**kw).fit(qc, yc)
    none = BayesianGenerativeCalibrator(prior=None, **kw).fit(qc, yc)
    ts = TemperatureScaler().fit(log_features(qc), yc)
    loss_ts = log_loss(yt, ts.predict_proba(log_features(qt)))
    loss_auto = log_loss(yt, auto.predict_proba(qt))
    assert loss_auto <= 1.01 * loss_ts
    assert loss_auto < log_loss(yt, qt)
    assert log_loss(yt, none.predict_proba(qt)) > 1.05 * loss_ts


@pytest.mark.parametrize("prior", ["identity", "custom", 7.0, None])
def test_fixed_priors_round_trip_through_model_files(data, tmp_path, prior):
    """A DirichletPrior hyperparameter is saved with its centre and read back."""
    from bayescal.dirichlet import DirichletPrior

    q, y, _, _ = data
    if prior == "identity":
        prior = DirichletPrior(5.0)
    elif prior == "custom":
        prior = DirichletPrior(3.0, center=np.full((K, K), 2.0))
    est = BayesianGenerativeCalibrator(prior=prior, sampler="laplace", draws=50, chains=1,
                                       random_seed=0).fit(q[:200], y[:200])
    loaded = bayescal.load(est.save(tmp_path / "m.json"))
    if isinstance(prior, DirichletPrior):
        assert isinstance(loaded.prior, DirichletPrior)
        assert loaded.prior.strength == prior.strength
        np.testing.assert_array_equal(loaded.prior.concentration(K), prior.concentration(K))
    else:
        assert loaded.prior == prior
    assert loaded.prior_strength_ == est.prior_strength_
    np.testing.assert_allclose(loaded.predict_proba(q[:40]), est.predict_proba(q[:40]),
                               atol=1e-12)


def test_too_many_classes_are_refused_before_any_work():
    """Beyond MAX_GENERATIVE_CLASSES the MCMC fit refuses, naming what costs and what to use;
    the Laplace approximation still runs."""
    from bayescal.bayes.estimators import MAX_GENERATIVE_CLASSES
    from bayescal.datasets import make_dnn_scores

    k = MAX_GENERATIVE_CLASSES + 1
    q, y = make_dnn_scores(400, k, rng=0)
    with pytest.raises(ValueError, match=rf"k={k} samples {k * k} concentrations.*"
                                         r"sampler='laplace'.*GenerativeDirichletCalibrator"):
        BayesianGenerativeCalibrator().fit(q, y)
    est = BayesianGenerativeCalibrator(sampler="laplace", draws=20, chains=1,
                                       random_seed=0).fit(q, y)
    assert est.posterior_draws("alpha").shape == (20, k, k)


def test_a_posterior_written_before_prior_existed_is_refused(laplace_fit, tmp_path):
    """A posterior whose configuration lacks this release's parameters is refused by name,
    not read with today's defaults (``prior="auto"`` was not what it was fitted with)."""
    import json

    path = laplace_fit.save(tmp_path / "old.json")
    post = path.with_suffix(".nc")
    idata = _compat.from_netcdf(post)
    group = _compat.group_dataset(idata, "posterior").copy()
    config = json.loads(group.attrs["bayescal_config"])
    del config["params"]["prior"], config["params"]["cv"]
    group.attrs["bayescal_config"] = json.dumps(config, sort_keys=True)
    _compat.set_group(idata, "posterior", group)
    post.write_bytes(_compat.to_netcdf_bytes(idata))
    with pytest.raises(ValueError, match=r"lacks the parameters \['cv', 'prior'\].*older"):
        BayesianGenerativeCalibrator._read_posterior(post)
