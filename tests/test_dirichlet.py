"""Dirichlet log-density, sufficient statistics, Newton MLE and the conjugate prior."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import digamma, gammaln
from scipy.stats import dirichlet as sp_dirichlet

from bayescal.dirichlet import (
    DirichletPrior,
    SufficientStatistics,
    dirichlet_loglik,
    dirichlet_loglik_grad,
    dirichlet_logpdf,
    fit_dirgen,
    fit_dirichlet,
    inverse_digamma,
    sufficient_statistics,
)
from bayescal.maps import log_features

TINY = float(np.finfo(np.float64).tiny)


def expected_log(alpha):
    """E[ln q] under Dir(alpha): the statistic whose MLE is alpha exactly."""
    alpha = np.asarray(alpha, dtype=float)
    return digamma(alpha) - digamma(alpha.sum(axis=-1, keepdims=True))


# -- density -------------------------------------------------------------------
def test_logpdf_matches_scipy_and_vectorises(rng):
    alpha = np.array([[0.5, 2.0, 3.0], [1.0, 1.0, 1.0], [4.0, 0.3, 7.0]])
    q = rng.dirichlet([2.0, 2.0, 2.0], size=50)
    out = dirichlet_logpdf(q, alpha)
    assert out.shape == (50, 3)
    for j in range(3):
        np.testing.assert_allclose(out[:, j], sp_dirichlet.logpdf(q.T, alpha[j]), rtol=1e-12)
        np.testing.assert_allclose(dirichlet_logpdf(q, alpha[j]), out[:, j], atol=1e-12)
    # logits give the same density (features are log_softmax(z)).
    z = np.log(q) + rng.normal(size=(50, 1))
    np.testing.assert_allclose(dirichlet_logpdf(z, alpha, kind="logits"), out, rtol=1e-12)


def test_logpdf_uses_the_floor_at_exact_zeros():
    q = np.array([[0.5, 0.5, 0.0]])
    x = log_features(q)
    expected = gammaln(3.0) - 3 * gammaln(1.0) + (np.array([1.0, 1.0, 1.0]) - 1) @ x[0]
    assert dirichlet_logpdf(q, [1.0, 1.0, 1.0])[0] == pytest.approx(expected)
    assert np.isfinite(dirichlet_logpdf(q, [2.0, 2.0, 0.5])[0])


@pytest.mark.parametrize(
    ("alpha", "match"),
    [
        ([1.0, -1.0, 2.0], r"alpha must be finite and > 0; alpha\[1\] = -1.0"),
        ([[1.0, 1.0, np.nan]], r"alpha\[0, 2\] = nan"),
        ([1.0, 2.0], r"alpha has 2 coordinates but the scores have 3 columns"),
        (np.ones((2, 2, 3)), r"shape \(k,\) or \(m, k\)"),
    ],
)
def test_logpdf_rejects_bad_alpha(alpha, match):
    with pytest.raises(ValueError, match=match):
        dirichlet_logpdf([[0.2, 0.3, 0.5]], alpha)


# -- small pieces ------------------------------------------------------------------
def test_inverse_digamma():
    x = np.array([1e-4, 0.01, 0.3, 1.0, 7.5, 1e3, 1e6])
    np.testing.assert_allclose(inverse_digamma(digamma(x)), x, rtol=1e-12)


def test_gradient_matches_finite_differences(rng):
    alpha = np.exp(rng.normal(size=6))
    s = expected_log(np.exp(rng.normal(size=6)))
    h = 1e-6
    fd = np.array(
        [
            (dirichlet_loglik(alpha + h * e, s) - dirichlet_loglik(alpha - h * e, s)) / (2 * h)
            for e in np.eye(6)
        ]
    )
    np.testing.assert_allclose(dirichlet_loglik_grad(alpha, s), fd, rtol=1e-6, atol=1e-8)


def test_loglik_is_mean_of_logpdf(rng):
    alpha = np.array([0.7, 1.5, 3.0, 0.4])
    q = rng.dirichlet(alpha, size=200)
    s = log_features(q).mean(axis=0)
    assert dirichlet_loglik(alpha, s) == pytest.approx(dirichlet_logpdf(q, alpha).mean(), rel=1e-12)


# -- statistics --------------------------------------------------------------------
def test_statistics_match_per_class_loops_and_chunking(rng):
    k = 4
    q = rng.dirichlet(np.ones(k), size=101)
    y = rng.integers(0, k, size=101)
    stats = sufficient_statistics(q, y)
    x = log_features(q)
    for j in range(k):
        assert stats.counts[j] == np.sum(y == j)
        np.testing.assert_allclose(stats.sums[j], x[y == j].sum(axis=0), rtol=1e-13)
        np.testing.assert_allclose(stats.mean_log[j], x[y == j].mean(axis=0), rtol=1e-13)
    chunked = sufficient_statistics(q, y, chunk_rows=7)
    np.testing.assert_allclose(chunked.sums, stats.sums, rtol=1e-13)
    np.testing.assert_array_equal(chunked.counts, stats.counts)
    both = SufficientStatistics.from_features(x[:50], y[:50]) + SufficientStatistics.from_features(
        x[50:], y[50:]
    )
    np.testing.assert_allclose(both.sums, stats.sums, rtol=1e-13)


def test_statistics_errors_name_the_global_row(rng):
    q = rng.dirichlet(np.ones(3), size=40)
    q[33] = [0.5, 0.6, -0.1]
    with pytest.raises(ValueError, match=r"negative probabilities \(first at row 33"):
        sufficient_statistics(q, np.zeros(40, dtype=int), chunk_rows=8)
    with pytest.raises(ValueError, match=r"y has 3 labels but the scores have 40 rows"):
        sufficient_statistics(np.full((40, 3), 1 / 3), [0, 1, 2])
    with pytest.raises(ValueError, match=r"labels outside the classes 0..2"):
        sufficient_statistics(np.full((2, 3), 1 / 3), [0, 3])


# -- maximum likelihood ----------------------------------------------------------
@given(
    k=st.integers(2, 120),
    log_scale=st.floats(-2.5, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_newton_finds_the_exact_maximiser(k, log_scale, seed):
    alpha = 10.0**log_scale * np.exp(np.random.default_rng(seed).normal(0.0, 1.0, size=k))
    fit = fit_dirichlet(100, expected_log(alpha))
    assert fit.converged, fit.message
    assert fit.n_iter <= 20
    np.testing.assert_allclose(fit.alpha, alpha, rtol=1e-5)


def test_mle_recovers_alpha_within_5_percent(rng):
    """k = 5, 20000 samples per class, from the (over-confident) default model."""
    from bayescal.datasets import default_dirgen_params

    alpha, _ = default_dirgen_params(5, rng=3)
    for j in range(5):
        q = rng.dirichlet(alpha[j], size=20000)
        # eps=tiny keeps every coordinate exact (concentrations here go down to
        # 0.07, where the default floor 2.2e-16 is reached by about 1% of them).
        s = log_features(q, eps=TINY).mean(axis=0)
        fit = fit_dirichlet(20000, s)
        assert fit.converged
        np.testing.assert_allclose(fit.alpha, alpha[j], rtol=0.05)
        # gradient ~ 0 at the optimum, and the optimum is a maximum
        assert np.max(np.abs(dirichlet_loglik_grad(fit.alpha, s))) < 1e-9
        for e in np.eye(5):
            assert dirichlet_loglik(fit.alpha * (1 + 1e-3 * e), s) < fit.loglik


def test_max_iter_is_reported_not_hidden():
    alpha = np.array([0.2, 3.0, 40.0])
    fit = fit_dirichlet(10, expected_log(alpha), max_iter=1)
    assert not fit.converged and fit.n_iter == 1 and fit.grad_norm > 1e-10
    assert "max_iter=1" in fit.message


# -- degenerate statistics -------------------------------------------------------
def test_degenerate_statistics_raise():
    s = expected_log([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"class 4 has 1 sample\(s\); .* at least 2"):
        fit_dirichlet(1, s, name="class 4")
    same = np.log([0.2, 0.3, 0.5])  # every sample the same point
    with pytest.raises(ValueError, match=r"class 1: its 30 samples are .*identical.*Jensen gap"):
        fit_dirichlet(30, same, name="class 1")
    floor = np.log(2.220446049250313e-16)
    with pytest.raises(ValueError, match=r"class 2: every sample has probability <= eps .* col"):
        fit_dirichlet(30, [-0.5, -1.2, floor], log_floor=floor, name="class 2")


# -- prior -----------------------------------------------------------------------------
def test_prior_alone_gives_its_center():
    k = 4
    alpha, pi, fits = fit_dirgen(SufficientStatistics.zeros(k), prior=DirichletPrior(2.5))
    np.testing.assert_allclose(alpha, np.ones((k, k)) + np.eye(k), rtol=1e-9)
    np.testing.assert_allclose(pi, np.full(k, 1 / k))
    centre = np.full((k, k), 0.5) + 3 * np.eye(k)
    alpha, _, _ = fit_dirgen(SufficientStatistics.zeros(k), prior=DirichletPrior(1.0, centre))
    np.testing.assert_allclose(alpha, centre, rtol=1e-9)
    alpha, _, _ = fit_dirgen(SufficientStatistics.zeros(k), prior=DirichletPrior(1.0, "uniform"))
    np.testing.assert_allclose(alpha, np.ones((k, k)), rtol=1e-9)


def test_prior_map_maximises_the_log_posterior(rng):
    """The pooled-statistics MLE is the maximiser of n*l(alpha) + log prior."""
    k, n, nu = 3, 7, 2.0
    q = rng.dirichlet([0.4, 1.0, 2.0], size=n)
    y = np.zeros(n, dtype=int)
    stats = sufficient_statistics(q, y)
    alpha, pi, _ = fit_dirgen(stats, prior=nu)
    beta = np.ones(k) + np.eye(k)[0]
    eta = expected_log(beta)

    def neg_log_post(log_a):
        a = np.exp(log_a)
        log_norm = gammaln(a.sum()) - gammaln(a).sum()
        return -(n * (log_norm + a @ stats.mean_log[0]) + nu * (log_norm + a @ eta))

    res = minimize(neg_log_post, np.zeros(k), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(alpha[0], np.exp(res.x), rtol=1e-5)
    np.testing.assert_allclose(pi, (np.array([n, 0, 0]) + nu) / (n + k * nu))


def test_prior_regularises_every_degenerate_class():
    x = log_features(np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]]))
    stats = SufficientStatistics.from_features(x, np.array([0, 0, 1]))  # class 2 empty
    with pytest.raises(ValueError, match=r"class 2 has no samples"):
        fit_dirgen(stats)
    alpha, pi, fits = fit_dirgen(stats, prior=0.5)
    assert np.isfinite(alpha).all() and (alpha > 0).all()
    assert all(f.converged for f in fits)
    assert pi[2] == pytest.approx(0.5 / (3 + 1.5))


@pytest.mark.parametrize(
    ("prior", "match"),
    [
        (-1.0, r"prior must be a finite positive number; got -1.0"),
        ("strong", r"prior must be None, a positive number .* got 'strong'"),
        (DirichletPrior(0.0), r"prior strength must be a finite positive number; got 0.0"),
        (DirichletPrior(1.0, "flat"), r"center must be one of \['identity', 'uniform'\]"),
        (DirichletPrior(1.0, np.ones((2, 2))), r"prior center has 2 coordinates"),
    ],
)
def test_bad_priors(prior, match):
    with pytest.raises(ValueError, match=match):
        fit_dirgen(SufficientStatistics.zeros(3), prior=prior)


def test_trigamma_matches_scipy():
    from scipy.special import polygamma

    from bayescal.dirichlet import _trigamma

    x = np.concatenate([10.0 ** np.linspace(-8, 8, 2001), np.linspace(0.01, 20, 2001)])
    np.testing.assert_allclose(_trigamma(x), polygamma(1, x), rtol=1e-13)
