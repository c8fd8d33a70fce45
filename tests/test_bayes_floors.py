"""``eps="average"``: the Bayesian calibrator's posterior averaged over the two probability floors.

* :func:`bayescal.structured.floor_evidence` is the Laplace evidence of each
  floor's features, and ``choose_floor`` (``eps="auto"``) its larger one;
* the mixture's layout (:func:`_floor_mixture`): each posterior's share of the
  draws, spread alike over every chain, taken from its own chains;
* the fitted mixture: weights from the evidence, predictions of each draw at its
  own floor, the mode at the most probable floor, log-likelihood, files;
* the cases with nothing to average (no score below the floor, a floor outside
  Occam's window, the penalty readings) are single fits.

Budget: the Laplace sampler everywhere but one MCMC fit, which samples k = 3,
n = 200 with the program the default fits of tests/test_bayes_defaults.py use.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax

from bayescal import BayesianDirichletCalibrator, DirichletCalibrator, load, make_dirgen
from bayescal._validation import EPS
from bayescal.bayes import _compat
from bayescal.bayes.estimators import FLOOR_WEIGHT_MIN, _floor_mixture
from bayescal.maps import log_features
from bayescal.structured import (
    choose_floor,
    fit_structured,
    floor_evidence,
    succession_floor,
)

K = 3
LAPLACE = {"sampler": "laplace", "draws": 500, "chains": 2, "random_seed": 0}


def _zeroed(seed: int, below: float):
    """make_dirgen(200, 3) with every probability under ``below`` set to 0 (a tree's zeros)."""
    q, y, _, _ = make_dirgen(200, K, rng=seed)
    q = np.where(q < below, 0.0, q)
    return q / q.sum(axis=1, keepdims=True), y


@pytest.fixture(scope="module")
def mixed():
    """Both floors probable (posterior probability of the unfloored features 0.40)."""
    return _zeroed(5, 1e-3)


@pytest.fixture(scope="module")
def laplace_fit(mixed):
    return BayesianDirichletCalibrator(eps="average", **LAPLACE).fit(*mixed)


def _weights(q, y):
    e0, e1, floor = floor_evidence(log_features(q), y)
    w = np.exp(np.array([e0, e1]) - max(e0, e1))
    return w / w.sum(), floor


def test_floor_evidence_is_each_floors_laplace_evidence(mixed):
    q, y = mixed
    x = log_features(q)
    e0, e1, floor = floor_evidence(x, y)
    assert floor == succession_floor(K, len(y))
    auto = {"reg_lambda": "auto", "reg_diag": "auto", "reg_mu": "auto", "cv": None}
    assert e0 == pytest.approx(fit_structured(x, y, **auto).log_evidence, abs=1e-10)
    floored = fit_structured(np.maximum(x, np.log(floor)), y, **auto).log_evidence
    assert e1 == pytest.approx(floored, abs=1e-10)
    assert choose_floor(x, y) == (floor if e1 > e0 else None)
    # no score below the floor: one model, nothing to compare
    q_clear = np.clip(q, 0.01, None)
    q_clear /= q_clear.sum(axis=1, keepdims=True)
    assert floor_evidence(log_features(q_clear), y) is None
    assert choose_floor(log_features(q_clear), y) is None


def _fake_posterior(offset: float, draws: int, chains: int = 3):
    """A posterior whose draw ``d`` of chain ``c`` has ``s = offset + 10 c + d / 10^4``."""
    s = offset + 10.0 * np.arange(chains)[:, None] + np.arange(draws)[None, :] / 1e4
    W = np.broadcast_to(s[..., None, None], (chains, draws, K, K)).copy()
    stats = {"diverging": np.zeros((chains, draws), bool), "lp": -s}
    return _compat.from_dict({"posterior": {"s": s, "W": W, "b": W[..., 0]},
                              "sample_stats": stats},
                             dims={"W": ["class_out", "class_in"], "b": ["class_out"]},
                             coords={"class_out": np.arange(K), "class_in": np.arange(K)})


def test_floor_mixture_layout():
    """Shares by largest remainder, spread alike along every chain, from each own chain."""
    first, second = _fake_posterior(0.0, 2000), _fake_posterior(1000.0, 1000)  # a retry's 2000
    mix = _floor_mixture([first, second], np.array([1e-3, EPS]), np.array([0.7004, 0.2996]),
                         1000)
    post = _compat.group_dataset(mix, "posterior")
    eps = post["eps"].values
    assert eps.shape == (3, 1000) and np.all(eps == eps[:1])
    assert (eps[0] == 1e-3).sum() == 700 and (eps[0] == EPS).sum() == 300
    # each half (and each tenth) of a chain holds the shares: R-hat and ESS read one sample
    for part in np.split(eps[0], 10):
        assert abs((part == EPS).sum() - 30) <= 1
    s = post["s"].values
    for c in range(3):
        mine = s[c, eps[c] == 1e-3]
        assert np.all((mine >= 10 * c) & (mine < 10 * c + 1))  # from chain c of the first
        assert np.all(np.diff(mine) > 0)  # in the order drawn, evenly spaced
        assert mine[0] == 10 * c and mine[-1] == pytest.approx(10 * c + 0.1999)
        theirs = s[c, eps[c] == EPS]
        assert np.all((theirs >= 1000 + 10 * c) & (theirs < 1000 + 10 * c + 1))
    assert np.array_equal(post["W"].values[..., 1, 2], s)
    assert set(_compat.group_dataset(mix, "sample_stats").data_vars) == {"diverging", "lp"}


def test_average_weights_floors_by_their_evidence(mixed, laplace_fit):
    q, y = mixed
    est = laplace_fit
    w, floor = _weights(q, y)
    assert np.array_equal(est.floors_, [EPS, floor])
    np.testing.assert_allclose(est.floor_weights_, w, rtol=0, atol=1e-12)
    assert min(w) > 0.3  # a real mixture
    assert est.eps_ == est.floors_[np.argmax(w)]
    eps = est.idata_.posterior["eps"].values
    assert eps.shape == (2, 500)
    shares = [np.mean(eps == f) for f in est.floors_]
    np.testing.assert_allclose(shares, w, atol=1 / 500)
    floor_shares = [[f, s] for f, s in zip(est.floors_, shares, strict=True)]
    assert est.diagnostics_ == {"approximate": True, "floor_shares": floor_shares}


def test_average_predicts_each_draw_at_its_floor(mixed, laplace_fit):
    q, y = mixed
    est = laplace_fit
    qt = make_dirgen(40, K, rng=9)[0]
    qt[:5, 0] = 0.0  # below both floors
    qt /= qt.sum(axis=1, keepdims=True)
    draws = est.predict_proba_draws(qt)
    W, b = est.posterior_draws("W"), est.posterior_draws("b")
    floors = est.idata_.posterior["eps"].values.reshape(-1)
    x = {f: log_features(qt, eps=f) for f in est.floors_}
    expect = np.exp(log_softmax(np.stack([x[f] @ W[s].T + b[s] for s, f in enumerate(floors)]),
                                axis=-1))
    np.testing.assert_allclose(draws, expect, rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.predict_proba(qt), draws.mean(axis=0), rtol=0, atol=1e-12)
    lo, hi = est.credible_interval(qt, 0.9)
    assert np.all(lo <= est.predict_proba(qt) + 1e-12) and np.all(hi <= 1.0)
    # the mode is the most probable floor's fit's
    single = BayesianDirichletCalibrator(eps=est.eps_, **LAPLACE).fit(q, y)
    np.testing.assert_allclose(est.predict_proba(qt, kind="mode"),
                               single.predict_proba(qt, kind="mode"), rtol=0, atol=1e-12)
    # the log-likelihood of each draw at its own floor
    est.compute_log_likelihood(q, y)
    ll = est.idata_.log_likelihood["y"].values.reshape(-1, len(y))
    xq = {f: log_features(q, eps=f) for f in est.floors_}
    manual = np.stack([log_softmax(xq[f] @ W[s].T + b[s], axis=-1)[np.arange(len(y)), y]
                       for s, f in enumerate(floors)])
    np.testing.assert_allclose(ll, manual, rtol=0, atol=1e-10)
    pp = est.sample_posterior_predictive(qt, random_seed=0).posterior_predictive["y"].values
    assert pp.shape == (2, 500, 40) and set(np.unique(pp)) <= {0, 1, 2}


def test_average_round_trips_through_a_model_file(mixed, laplace_fit, tmp_path):
    q, _ = mixed
    path = laplace_fit.save(tmp_path / "avg.json")
    back = load(path)
    assert back.get_params()["eps"] == "average"
    assert np.array_equal(back.floors_, laplace_fit.floors_)
    assert np.array_equal(back.floor_weights_, laplace_fit.floor_weights_)
    assert back.eps_ == laplace_fit.eps_ and back.model_id_ == laplace_fit.model_id_
    np.testing.assert_array_equal(back.predict_proba(q), laplace_fit.predict_proba(q))
    # draws whose floors are not the ones recorded are refused (after the id check)
    back.floors_ = np.array([EPS, 0.5])
    with pytest.raises(ValueError, match="not among its recorded floors"):
        back._restore()
    back.floors_, back.floor_weights_ = laplace_fit.floors_, np.array([0.9, 0.3])
    with pytest.raises(ValueError, match="floor weights .* are not probabilities"):
        back._restore()


def test_nothing_to_average_is_one_fit():
    # no score below 1 / (k (n + 1)): the two floors give the same features
    q, y, _, _ = make_dirgen(200, K, rng=4)
    q = np.clip(q, 0.01, None)
    q /= q.sum(axis=1, keepdims=True)
    est = BayesianDirichletCalibrator(eps="average", **LAPLACE).fit(q, y)
    auto = BayesianDirichletCalibrator(eps="auto", **LAPLACE).fit(q, y)
    assert np.array_equal(est.floors_, [EPS]) and np.array_equal(est.floor_weights_, [1.0])
    assert "eps" not in est.idata_.posterior.data_vars and est.eps_ == auto.eps_ == EPS
    np.testing.assert_array_equal(est.predict_proba(q), auto.predict_proba(q))
    # a floor below Occam's window is not sampled: all draws at the other
    q, y = _zeroed(6, 1e-3)
    w, floor = _weights(q, y)
    assert w[0] < FLOOR_WEIGHT_MIN
    est = BayesianDirichletCalibrator(eps="average", **LAPLACE).fit(q, y)
    fixed = BayesianDirichletCalibrator(eps=floor, **LAPLACE).fit(q, y)
    assert est.eps_ == floor and "eps" not in est.idata_.posterior.data_vars
    np.testing.assert_allclose(est.floor_weights_, w, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(est.predict_proba(q), fixed.predict_proba(q))
    # the penalty readings keep their MAP floor, as with "auto"
    pen = BayesianDirichletCalibrator(prior="l2", eps="average", **LAPLACE).fit(q, y)
    assert pen.eps_ == EPS and not hasattr(pen, "floors_")


def test_eps_words_are_checked():
    q, y = _zeroed(5, 1e-3)
    with pytest.raises(ValueError, match=r"eps must be a float in \(0, 1\) or one of "
                                         r"\['auto', 'average'\]; got 'mean'"):
        BayesianDirichletCalibrator(eps="mean").fit(q, y)
    with pytest.raises(ValueError, match=r"eps must be a float in \(0, 1\) or one of "
                                         r"\['auto'\]; got 'average'"):
        DirichletCalibrator(eps="average").fit(q, y)


@pytest.mark.once  # the layout and the ArviZ containers are checked on both stacks above
def test_average_mcmc_mixture_passes_its_checks(mixed):
    """The compiled sampler at the default settings: both floors sampled and checked, the
    stored mixture checked as one sample (R-hat, ESS, divergences) with its shares."""
    q, y = mixed
    est = BayesianDirichletCalibrator(eps="average", random_seed=1, progressbar=False).fit(q, y)
    d = est.diagnostics_
    assert d["passed"], d
    assert d["n_draws"] == 1000 and d["n_chains"] == 4
    np.testing.assert_allclose([s for _, s in d["floor_shares"]], est.floor_weights_,
                               atol=1e-3)
    assert est.idata_.log_likelihood["y"].shape == (4, 1000, len(y))
    # the two floors' posteriors differ where a probability is 0: the mixture spans both
    qt = np.array([[0.0, 0.3, 0.7]])
    by_floor = [est.predict_proba_draws(qt)[est.idata_.posterior["eps"].values.reshape(-1) == f]
                for f in est.floors_]
    assert abs(by_floor[0][:, 0, 0].mean() - by_floor[1][:, 0, 0].mean()) > 0.01
