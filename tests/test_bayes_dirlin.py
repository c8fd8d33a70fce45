"""BayesianDirichletCalibrator: mode = regularised fit, Laplace vs NUTS, predictions.

The penalty-reading priors (``prior="odir"``, ``"l2"``): their posterior mode
is the regularised :class:`~bayescal.DirichletCalibrator` fit. The default
(hierarchical) prior is tested in ``test_bayes_defaults.py``.

Sampling budget: one PyMC NUTS fit (2 chains x (300 tune + 1000 draws), k=3,
n=1000) shared by the module; everything else uses the Laplace sampler or
compiled log-densities.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

import bayescal
from bayescal import BayesianDirichletCalibrator, make_dirgen
from bayescal.bayes import SamplingWarning
from bayescal.bayes.gauge import dirlin_gauge
from bayescal.bayes.models import dirlin_model
from bayescal.bayes.priors import penalty_to_prior
from bayescal.calibrators import DirichletCalibrator
from bayescal.maps import dirlin_map, log_features
from bayescal.optimize import make_penalty

K = 3
LAM, MU = 0.5, 0.2


@pytest.fixture(scope="module")
def data():
    q, y, _, _ = make_dirgen(1000, K, rng=99)
    return q, y


@pytest.fixture(scope="module")
def nuts_fit(data):
    q, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", SamplingWarning)  # must converge
        return BayesianDirichletCalibrator(
            prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="pymc", draws=1000, tune=300,
            chains=2, random_seed=5, progressbar=False,
        ).fit(q, y)


@pytest.fixture(scope="module")
def laplace_fit(data):
    q, y = data
    return BayesianDirichletCalibrator(
        prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="laplace", draws=2000, chains=2,
        random_seed=5,
    ).fit(q, y)


@pytest.mark.parametrize(
    ("prior", "center", "reg_mu"), [("odir", "identity", MU), ("l2", "identity", None),
                                    ("l2", "zero", None)]
)
def test_pymc_model_mode_equals_dirichlet_calibrator(prior, center, reg_mu, data,
                                                    pytensor_py_linker):
    """Maximising the PyMC model's own log-density gives DirichletCalibrator's map."""
    q, y = data
    x = log_features(q)
    n = x.shape[0]
    pen = make_penalty(K, prior, reg_lambda=LAM, reg_mu=reg_mu, center=center)
    gauge = dirlin_gauge(penalty_to_prior(pen, n))
    model = dirlin_model(x, y, gauge)
    names = [v.name for v in model.value_vars]  # theta (, theta_flat)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()

    def point(v):
        return dict(zip(names, np.split(v, [gauge.n_gauss])[: len(names)], strict=True))

    res = minimize(lambda v: -logp(point(v)), np.zeros(gauge.dim),
                   jac=lambda v: -dlogp(point(v)), method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 2000})
    theta = res.x
    W, b = gauge.split(gauge.to_raw(theta))
    ref = DirichletCalibrator(
        reg=prior, reg_lambda=LAM, reg_mu=reg_mu, center=center, tol=1e-10
    ).fit(q, y)
    qt = make_dirgen(500, K, rng=1)[0]
    assert np.max(np.abs(dirlin_map(qt, W, b) - ref.predict_proba(qt))) <= 1e-5
    est = BayesianDirichletCalibrator(
        prior=prior, reg_lambda=LAM, reg_mu=reg_mu, center=center, sampler="laplace", draws=10,
        chains=1,
    ).fit(q, y)
    assert np.max(np.abs(est.predict_proba(qt, kind="mode") - ref.predict_proba(qt))) <= 1e-5


def test_nuts_diagnostics_and_summary(nuts_fit):
    d = nuts_fit.diagnostics_
    assert d["r_hat_max"] <= 1.01 and d["divergences"] == 0 and d["ess_bulk_min"] >= 400
    summ = nuts_fit.summary()
    assert {"r_hat", "ess_bulk", "mean", "sd"} <= set(summ.columns)
    assert len(summ) == K * K + K
    assert set(nuts_fit.idata_.posterior.data_vars) >= {"W", "b", "A", "c"}
    assert nuts_fit.idata_.posterior["W"].dims[2:] == ("class_out", "class_in")


def test_laplace_sd_close_to_nuts(nuts_fit, laplace_fit):
    """Laplace posterior sd of every W, b entry within 20% of NUTS (k=3, n=1000)."""
    def sd(est):
        return np.concatenate(
            [est.posterior_draws("W").reshape(est.n_draws_, -1), est.posterior_draws("b")], axis=1
        ).std(axis=0)

    ratio = sd(laplace_fit) / sd(nuts_fit)
    np.testing.assert_array_less(np.abs(ratio - 1.0), 0.2)


def test_nuts_mode_and_laplace_mode_agree(nuts_fit, laplace_fit, data):
    q = data[0][:100]
    np.testing.assert_allclose(
        nuts_fit.predict_proba(q, kind="mode"), laplace_fit.predict_proba(q, kind="mode"),
        atol=1e-12,
    )
    # posterior means agree within Monte Carlo error
    np.testing.assert_allclose(nuts_fit.predict_proba(q), laplace_fit.predict_proba(q),
                               atol=1e-2)


def test_posterior_average_sums_to_one_and_approaches_map():
    """E[softmax(Wx+b)] is a probability vector and tends to the MAP map as n grows."""
    qt = make_dirgen(400, K, rng=123)[0]
    gaps = []
    for n in (30, 300, 3000):
        q, y, _, _ = make_dirgen(n, K, rng=n)
        est = BayesianDirichletCalibrator(
            prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="laplace", draws=1000, chains=2,
            random_seed=0,
        ).fit(q, y)
        p = est.predict_proba(qt)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        gaps.append(np.mean(np.abs(p - est.predict_proba(qt, kind="mode"))))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.01, gaps


def test_predict_draws_and_intervals(nuts_fit, data):
    q = data[0][:40]
    draws = nuts_fit.predict_proba_draws(q)
    assert draws.shape == (nuts_fit.n_draws_, 40, K)
    np.testing.assert_allclose(draws.mean(axis=0), nuts_fit.predict_proba(q), atol=1e-12)
    W, b = nuts_fit.posterior_draws("W"), nuts_fit.posterior_draws("b")
    np.testing.assert_allclose(draws[17], dirlin_map(q, W[17], b[17]), atol=1e-12)
    lo, hi = nuts_fit.credible_interval(q)
    inside = ((draws >= lo) & (draws <= hi)).mean(axis=0)
    assert np.all(inside >= 0.94 - 1e-9)
    A, c = nuts_fit.posterior_draws("A"), nuts_fit.posterior_draws("c")
    assert (A >= 0).all() and np.allclose(A.min(axis=1), 0.0)
    np.testing.assert_allclose(c.sum(axis=1), 1.0, atol=1e-12)


def test_to_canonical_uses_mode(nuts_fit, data):
    A, c = nuts_fit.to_canonical()
    assert A.shape == (K, K) and np.isclose(c.sum(), 1.0)


def test_save_load_round_trip(nuts_fit, data, tmp_path):
    q = data[0][:100]
    loaded = bayescal.load(nuts_fit.save(tmp_path / "lin.json"))
    assert loaded.get_params() == nuts_fit.get_params()
    assert loaded.tune_ == nuts_fit.tune_ == 300
    np.testing.assert_allclose(loaded.predict_proba(q), nuts_fit.predict_proba(q), atol=1e-12)
    np.testing.assert_allclose(
        loaded.predict_proba(q, kind="mode"), nuts_fit.predict_proba(q, kind="mode"), atol=1e-12
    )
    assert json.dumps(loaded.prior_.to_dict()) == json.dumps(nuts_fit.prior_.to_dict())
    np.testing.assert_array_equal(loaded.prior_.sd_W, nuts_fit.prior_.sd_W)  # inf on the diagonal
    lo0, hi0 = nuts_fit.credible_interval(q)
    lo1, hi1 = loaded.credible_interval(q)
    np.testing.assert_allclose(lo1, lo0, atol=1e-12)
    np.testing.assert_allclose(hi1, hi0, atol=1e-12)


def test_relabelling_permutes_predictions(data):
    q, y = data
    perm = np.array([1, 2, 0])
    inv = np.argsort(perm)
    kw = {"prior": "odir", "reg_lambda": LAM, "reg_mu": MU, "sampler": "laplace", "draws": 2000,
          "chains": 2, "random_seed": 1}
    a = BayesianDirichletCalibrator(**kw).fit(q, y)
    b = BayesianDirichletCalibrator(**kw).fit(q[:, perm], inv[y])
    qt = q[:300]
    np.testing.assert_allclose(
        b.predict_proba(qt[:, perm], kind="mode"), a.predict_proba(qt, kind="mode")[:, perm],
        atol=1e-7,
    )
    np.testing.assert_allclose(
        b.predict_proba(qt[:, perm]), a.predict_proba(qt)[:, perm], atol=5e-3
    )


def test_short_run_warns_on_request(data):
    """on_failure="warn": a failing posterior is kept, with a SamplingWarning.

    Too few draws for ESS 400: the fit tries again with twice the draws
    (``retry_draws="auto"``), fails again, and keeps the second posterior.
    """
    q, y = data
    with pytest.warns(SamplingWarning, match="increase"):
        est = BayesianDirichletCalibrator(
            prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="pymc", draws=20, tune=20,
            chains=2, random_seed=0, progressbar=False, on_failure="warn",
        ).fit(q, y)
    assert est.diagnostics_["passed"] is False and est.n_draws_ == 80
    assert [a["draws"] for a in est.diagnostics_["attempts"]] == [20, 40]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"prior": "lasso"}, "prior"),
        ({"center": "ones"}, "center"),
        ({"prior": "odir", "reg_lambda": 0.0}, "reg_lambda"),
        ({"prior": "fixed", "reg_lambda": 0.0}, "reg_lambda"),
        ({"prior": "l2", "reg_mu": 1.0}, "reg_mu is not used"),
        ({"log_scale_prior": 1.5}, "log_scale_prior"),
        ({"on_failure": "ignore"}, "on_failure"),
        ({"reg_mu": -1.0}, "reg_mu"),
        ({"sampler": "hmc"}, "sampler"),
        ({"chains": 0}, "chains"),
        ({"input": "logprobs"}, "input"),
        ({"retry_target_accept": 1.0}, "retry_target_accept"),
        ({"retry_target_accept": "yes"}, "retry_target_accept"),
        ({"retry_draws": 0}, "retry_draws must be a positive integer, 'auto' or None; got 0"),
        ({"retry_draws": "more"}, "retry_draws .* got 'more'"),
        ({"retry_draws": True}, "retry_draws"),
        ({"eps": "floor"}, "eps"),
        ({"tune": "fast"}, "tune must be a non-negative integer or 'auto'; got 'fast'"),
        ({"tune": -1}, "tune"),
        ({"tau_scale": 0.0}, "tau_scale"),
        ({"tau_scale": (0.5, 1.0)}, "tau_scale"),
        ({"tau_scale": (0.5, -1.0, 1.0)}, "tau_scale of diag"),
        ({"tau_scale": (0.5, 1.0, float("inf"))}, "tau_scale of b"),
    ],
)
def test_bad_parameters(params, match, data):
    q, y = data
    with pytest.raises(ValueError, match=match):
        BayesianDirichletCalibrator(**params).fit(q[:20], y[:20])


def test_not_fitted_and_wrong_width(laplace_fit, data):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        BayesianDirichletCalibrator().predict_proba(data[0])
    with pytest.raises(ValueError, match="columns"):
        laplace_fit.predict_proba(np.full((2, 4), 0.25))


def test_laplace_log_evidence_matches_importance_sampling():
    """ln p(y) by Laplace agrees with an importance-sampling estimate that uses
    the Laplace Gaussian as proposal (raw coordinates, proper L2 prior)."""
    from scipy.special import log_softmax, logsumexp

    from bayescal.bayes.laplace import dirlin_log_evidence
    from bayescal.optimize import fit_multinomial, make_penalty, multinomial_objective

    n, k, lam = 200, 3, 0.1
    q, y, _, _ = make_dirgen(n, k, rng=np.random.default_rng(1))
    x = log_features(q)
    pen = make_penalty(k, "l2", lam)
    res = fit_multinomial(x, y, penalty=pen, tol=1e-12)
    laplace = dirlin_log_evidence(x, y, pen, res.W, res.b)
    theta0 = np.concatenate([res.W.ravel(), res.b])
    _, _, H = multinomial_objective(theta0, x, y, penalty=pen, hessian=True)
    L = np.linalg.cholesky(np.linalg.inv(n * H))
    z = np.random.default_rng(0).standard_normal((20_000, theta0.size))
    theta = theta0 + z @ L.T
    W, b = theta[:, : k * k].reshape(-1, k, k), theta[:, k * k :]
    logits = np.einsum("ni,sji->snj", x, W) + b[:, None, :]
    loglik = log_softmax(logits, axis=-1)[:, np.arange(n), y].sum(axis=1)
    prec = np.concatenate([pen.prec_W.ravel(), pen.prec_b])
    logprior = (-n * prec * theta**2 - 0.5 * np.log(np.pi / (n * prec))).sum(axis=1)
    logq = (-0.5 * (z**2).sum(axis=1) - 0.5 * theta0.size * np.log(2 * np.pi)
            - np.log(np.diag(L)).sum())  # fmt: skip
    logw = loglik + logprior - logq
    ess = np.exp(2 * logsumexp(logw) - logsumexp(2 * logw))
    assert ess > 500
    assert laplace == pytest.approx(logsumexp(logw) - np.log(len(logw)), abs=0.25)


def test_log_evidence_attribute_prior_and_round_trip(tmp_path):
    q, y, _, _ = make_dirgen(150, 3, rng=np.random.default_rng(2))
    kw = {"sampler": "laplace", "draws": 20, "chains": 1, "random_seed": 0}
    est = BayesianDirichletCalibrator(prior="l2", reg_lambda=1.0, **kw).fit(q, y)
    assert np.isfinite(est.log_evidence_) and est.log_evidence_ < 0
    # type-II ML over the prior scale: an absurdly strong prior has less evidence
    strong = BayesianDirichletCalibrator(prior="l2", reg_lambda=1e5, **kw).fit(q, y)
    assert strong.log_evidence_ < est.log_evidence_
    # the sampling-free method gives the same number and leaves the estimator alone
    fresh = BayesianDirichletCalibrator(prior="l2", reg_lambda=1.0, **kw)
    assert fresh.log_evidence(q, y) == pytest.approx(est.log_evidence_, rel=1e-9)
    assert not hasattr(fresh, "idata_")
    odir = BayesianDirichletCalibrator(prior="odir", **kw).fit(q, y)
    assert np.isnan(odir.log_evidence_)  # flat diagonal: improper prior
    with pytest.raises(ValueError, match="use prior='l2'"):
        odir.log_evidence(q, y)
    path = est.save(tmp_path / "post.json")
    assert bayescal.load(path).log_evidence_ == est.log_evidence_


def test_auto_floor_is_the_map_default_floor(tmp_path):
    """``eps="auto"``: the floor DirichletCalibrator() picks, applied, saved and reloaded."""
    from bayescal import EPS

    q, y, _, _ = make_dirgen(60, 3, rng=0)
    q = np.where(q < 1e-2, 0.0, q)  # exact zeros, as trees give
    q /= q.sum(axis=1, keepdims=True)
    floor = DirichletCalibrator().fit(q, y).eps_
    assert floor == pytest.approx(1 / (3 * 61))
    est = BayesianDirichletCalibrator(sampler="laplace", draws=50, random_seed=0).fit(q, y)
    assert est.eps_ == floor
    z = np.log(np.maximum(q, floor)) @ est.coef_.T + est.intercept_
    expected = np.exp(z - logsumexp(z, axis=1, keepdims=True))
    np.testing.assert_allclose(est.predict_proba(q, kind="mode"), expected, atol=1e-12)
    back = bayescal.load(est.save(tmp_path / "auto.json"))
    assert back.eps_ == floor
    np.testing.assert_allclose(back.predict_proba(q), est.predict_proba(q), atol=1e-12)
    # a fixed floor and the penalty readings keep theirs
    assert BayesianDirichletCalibrator(sampler="laplace", draws=20, eps=1e-3).fit(q, y).eps_ \
        == 1e-3
    assert BayesianDirichletCalibrator(sampler="laplace", draws=20, prior="l2").fit(q, y).eps_ \
        == EPS


def test_tau_scale_per_group(tmp_path):
    """``tau_scale=(h_off, h_diag, h_b)``: each group's hyperprior, saved and reloaded."""
    from bayescal.bayes.hierarchical import StructuredPrior, log_prior, n_params

    prior = StructuredPrior(tau_scale=(0.5, 1.0, 2.0))
    theta = np.linspace(-1.0, 1.0, n_params(prior, 3))
    lt = theta[1:4]
    h = np.array([0.5, 1.0, 2.0])
    expected = (-0.5 * theta[0] ** 2 + np.sum(lt - 0.5 * np.exp(2 * lt) / h**2)
                - 0.5 * np.sum(theta[4:] ** 2))
    assert log_prior(theta, prior, 3) == pytest.approx(expected, abs=1e-12)
    assert log_prior(theta, StructuredPrior(tau_scale=(0.7, 0.7, 0.7)), 3) == pytest.approx(
        log_prior(theta, StructuredPrior(tau_scale=0.7), 3), abs=1e-12)
    assert StructuredPrior.from_dict(prior.to_dict()) == prior
    q, y, _, _ = make_dirgen(60, 3, rng=0)
    est = BayesianDirichletCalibrator(sampler="laplace", draws=50, random_seed=0,
                                      tau_scale=(0.5, 1.0, 2.0)).fit(q, y)
    assert est.prior_ == prior
    back = bayescal.load(est.save(tmp_path / "tau.json"))
    assert back.prior_ == prior
    np.testing.assert_allclose(back.predict_proba(q), est.predict_proba(q), atol=1e-12)


def test_log_normal_tau_hyperprior():
    """``StructuredPrior(log_tau=(m, sd))``: ``ln tau ~ N(m, sd^2)`` in the sampled coordinate,
    no Jacobian; its draws have that law; it round-trips, and the half-normal prior's dict
    has no such key (posterior files written before it read alike); bad values are named."""
    from bayescal.bayes.hierarchical import StructuredPrior, draw_prior, log_prior, n_params

    prior = StructuredPrior(log_tau=(-2.5, 3.0))
    theta = np.linspace(-1.0, 1.0, n_params(prior, 3))
    expected = (-0.5 * theta[0] ** 2 - 0.5 * np.sum(((theta[1:4] + 2.5) / 3.0) ** 2)
                - 0.5 * np.sum(theta[4:] ** 2))
    assert log_prior(theta, prior, 3) == pytest.approx(expected, abs=1e-12)
    lt = draw_prior(prior, 3, 20000, rng=0)[:, 1:4]
    np.testing.assert_allclose(lt.mean(axis=0), -2.5, atol=4 * 3.0 / np.sqrt(20000))
    np.testing.assert_allclose(lt.std(axis=0), 3.0, rtol=0.03)
    assert prior.log_tau_start == (-2.5, -2.5, -2.5)
    assert StructuredPrior(tau_scale=(0.5, 1.0, 2.0)).log_tau_start == pytest.approx(
        tuple(np.log([0.25, 0.5, 1.0])))
    assert StructuredPrior.from_dict(prior.to_dict()) == prior
    assert "log_tau" not in StructuredPrior().to_dict()["structured"]
    for bad, match in [((-3.0,), r"log_tau must be a pair \(mean, sd\) of ln tau; got \(-3.0,\)"),
                       ((float("nan"), 1.0), "log_tau's mean must be a finite number; got nan"),
                       (("-3", 1.0), "log_tau's mean must be a finite number; got '-3'"),
                       ((-3.0, 0.0), "log_tau's sd must be a finite positive number; got 0.0"),
                       ((-3.0, float("inf")), "log_tau's sd must be a finite positive number")]:
        with pytest.raises(ValueError, match=match):
            StructuredPrior(log_tau=bad)


def test_mode_is_spelled_mode_and_map_warns(laplace_fit, data):
    """``kind="mode"`` is the posterior mode; the old ``"map"`` warns and gives the same."""
    q = data[0][:20]
    mode = laplace_fit.predict_proba(q, kind="mode")
    from bayescal.calibrators._base import FamilyCalibratorMixin

    np.testing.assert_array_equal(mode, FamilyCalibratorMixin.predict_proba(laplace_fit, q))
    with pytest.warns(FutureWarning, match=r"not DirichletCalibrator's MAP.*kind='mode'"):
        old = laplace_fit.predict_proba(q, kind="map")
    np.testing.assert_array_equal(old, mode)
    with pytest.raises(ValueError, match="kind"):
        laplace_fit.predict_proba(q, kind="median")


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_pointwise_log_likelihood_is_the_log_softmax_of_every_draw(monkeypatch, chunk):
    """``ln softmax(W_s x_i + b_s)[y_i]``, draw by draw, to 1e-12, in chunks of any size.

    The reference is the direct per-draw formula; ``chunk`` draws at a time
    (1, a size that leaves a remainder, and all at once), with the leading
    (chain, draw) axes kept.
    """
    from bayescal.bayes import estimators

    monkeypatch.setattr(estimators, "draws_per_chunk", lambda n, k: chunk)
    rng = np.random.default_rng(7)
    for k, n in ((3, 11), (5, 4)):
        W = rng.normal(size=(2, 5, k, k)) * 3.0
        b = rng.normal(size=(2, 5, k))
        x = rng.normal(size=(n, k)) * 10.0  # large logits: the max shift matters
        y = rng.integers(0, k, size=n)
        got = estimators.pointwise_log_likelihood(W, b, x, y)
        assert got.shape == (2, 5, n)
        for c in range(2):
            for d in range(5):
                z = x @ W[c, d].T + b[c, d]
                want = z[np.arange(n), y] - logsumexp(z, axis=1)
                np.testing.assert_allclose(got[c, d], want, rtol=0, atol=1e-12)
        # into the rows of a larger table (as the log_likelihood group is filled)
        table = np.full((12, n), np.nan)
        back = estimators.pointwise_log_likelihood(W, b, x, y, out=table[1:11])
        assert np.shares_memory(back, table)
        np.testing.assert_array_equal(table[1:11], got.reshape(10, n))
        assert np.isnan(table[[0, 11]]).all()  # the other rows untouched
    for bad in (np.empty((10, n + 1)), np.empty((10, n), dtype=np.float32), np.empty(10 * n)):
        with pytest.raises(ValueError, match=r"out must be a writeable float64 array of shape"):
            estimators.pointwise_log_likelihood(W, b, x, y, out=bad)
