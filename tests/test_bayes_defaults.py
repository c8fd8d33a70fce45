"""The Bayesian calibrators at their defaults: proper priors, honest failure, LOO.

* the default (hierarchical) DirLin prior: prior predictive not degenerate,
  a class absent from the labels gives a proper, converged posterior, a small
  seeded simulation-based calibration (SBC, Talts et al. 2018);
* a posterior failing its convergence checks raises
  :class:`~bayescal.bayes.ConvergenceError` (or warns on request) and leaves
  the estimator unfitted;
* ``log_likelihood`` in ``idata_``: :func:`arviz.loo` on both estimators and
  :func:`bayescal.bayes.compare`;
* the penalty reading of the structured MAP default still has the MAP fit as
  its mode.

Budget: small k = 3 posteriors, 4 chains of 1000 draws after 500 warm-up steps,
each fitted once per module.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import chisquare
from sklearn.exceptions import NotFittedError

from bayescal import (
    BayesianDirichletCalibrator,
    BayesianGenerativeCalibrator,
    DirichletCalibrator,
    make_dirgen,
)
from bayescal._validation import EPS
from bayescal.bayes import ConvergenceError, SamplingWarning, compare
from bayescal.bayes._sampling import enforce
from bayescal.bayes.estimators import TUNE_AUTO, TUNE_AUTO_CENTRED, TUNE_AUTO_COMPILED
from bayescal.bayes.hierarchical import draw_prior, maps_of
from bayescal.maps import dirlin_map, log_features

K = 3
#: Runs that pass the default checks (R-hat 1.01, ESS 400, no divergence) with a
#: margin: the default's 4 chains of 1000 draws, a shorter warm-up. Two chains of 500
#: fell short of ESS 400 on PyMC 6; four of 500 left R-hat at 1.0085-1.0092 and a
#: tail ESS of 269-518 at k = 3, n = 3000, too close to the thresholds on another CPU.
SMALL = {"draws": 1000, "tune": 500, "chains": 4, "progressbar": False}


@pytest.fixture(scope="module")
def data():
    q, y, _, _ = make_dirgen(200, K, rng=4)
    return q, y


@pytest.fixture(scope="module")
def default_fit(data):
    """The default prior and sampler, default checks (a failure raises)."""
    return BayesianDirichletCalibrator(random_seed=1, **SMALL).fit(*data)


@pytest.fixture(scope="module")
def dirgen_fit(data):
    return BayesianGenerativeCalibrator(random_seed=1, **SMALL).fit(*data)


@pytest.fixture(scope="module")
def temperature_fit(data):
    return BayesianDirichletCalibrator(prior="temperature", random_seed=1,
                                       **SMALL).fit(*data)


def test_default_fit_passes_its_checks(default_fit):
    d = default_fit.diagnostics_
    assert d["passed"] and d["divergences"] == 0 and d["r_hat_max"] <= 1.01, d
    assert default_fit.prior_.kind == "hierarchical"
    assert d["coordinates"] == "conditional"  # n = 200: the prior still holds directions
    post = default_fit.idata_.posterior
    assert {"s", "tau", "W", "b", "A", "c"} <= set(post.data_vars)
    assert np.all(post["tau"].values > 0) and np.all(post["s"].values > 0)


@pytest.mark.once
def test_data_dominated_posterior_samples_centred_coordinates(monkeypatch):
    """At large n the default samples the map itself, and gets the conditional posterior.

    k = 3, n = 3000: every direction of the map is held by the data (the
    centred coordinates' condition holds), so the fit runs in centred
    coordinates; the same fit forced into the conditional whitening gives the
    same posterior within Monte Carlo error. Both compute the likelihood's rows
    in single precision (``compiled._loglik_f32``, from
    ``compiled.SINGLE_PRECISION_MIN_ROWS`` padded rows in every coordinate system).
    """
    import bayescal.bayes.laplace as laplace
    from bayescal.bayes import _compat, compiled

    kinds = []
    run = compiled._run

    def spy(model, data, *args, **kwargs):
        kinds.append(model[3])
        return run(model, data, *args, **kwargs)

    monkeypatch.setattr(compiled, "_run", spy)
    q, y, _, _ = make_dirgen(3000, K, rng=[3, 1])
    # the default warm-up (tune="auto": 300 steps in centred coordinates);
    # tail ESS of tau at seeds 0-3: 875, 584, 1139, 951 (PyMC 6; seed 2, 858 on PyMC 5);
    # with tune=500 662-870, and 269-518 at 4 x 500 draws
    centred = BayesianDirichletCalibrator(random_seed=2, **(SMALL | {"tune": "auto"})).fit(q, y)
    assert centred.diagnostics_["coordinates"] == "centred"
    assert centred.tune_ == TUNE_AUTO_CENTRED
    assert centred.diagnostics_["passed"], centred.diagnostics_
    monkeypatch.setattr(laplace, "centred_whitening", lambda *a, **kw: None)
    cond = BayesianDirichletCalibrator(random_seed=2, **SMALL).fit(q, y)
    assert cond.diagnostics_["coordinates"] == "conditional"
    assert cond.tune_ == SMALL["tune"]  # an integer tune is used as given
    # the likelihood's rows in single precision in both (3072 padded rows)
    assert kinds == ["centred_f32", "conditional_f32"]

    for name in ("s", "tau", "W"):
        a, b = (np.asarray(e.idata_.posterior[name].values) for e in (centred, cond))
        # the ESS of the mean (bulk) and of the standard deviation ("sd": lower, as
        # squared deviations mix more slowly; with the bulk ESS for both, seed 2 gave
        # z = 5.2 on sd(s) with OpenBLAS threads unset and 1.7 with one thread)
        ess, ess_sd = ([np.asarray(_compat.ess(e.idata_, [name], method=m)[name])
                        for e in (centred, cond)] for m in ("bulk", "sd"))
        a, b = a.reshape(-1, *a.shape[2:]), b.reshape(-1, *b.shape[2:])
        if name == "W":  # the columns are defined up to a constant (ESS of the raw entries)
            a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
            ess, ess_sd = ([np.full(a.shape[1:], e.min()) for e in v] for v in (ess, ess_sd))
        sd = np.sqrt(0.5 * (a.var(axis=0) + b.var(axis=0)))
        # independent runs: the means differ by 5 Monte Carlo standard errors at most,
        # the sds (relative error about 1 / sqrt(2 ESS_sd) each) by 5 of theirs
        mcse = sd * np.sqrt(1.0 / ess[0] + 1.0 / ess[1])
        z = np.abs(a.mean(axis=0) - b.mean(axis=0)) / mcse
        assert np.all(z <= 5.0), (name, z)
        rel = np.sqrt(0.5 / ess_sd[0] + 0.5 / ess_sd[1])
        z = np.abs(a.std(axis=0) / b.std(axis=0) - 1.0) / rel
        assert np.all(z <= 5.0), (name, z)
    np.testing.assert_allclose(centred.predict_proba(q[:50]), cond.predict_proba(q[:50]),
                               rtol=0, atol=5e-3)


def test_tune_auto_resolves_by_coordinates():
    """``tune="auto"``: 300 warm-up steps in centred coordinates, else 500 with the compiled
    sampler and 1000 with the others; an integer as given."""
    from bayescal.bayes.models import CentredWhitening

    centred = CentredWhitening(loc=np.zeros(3), chol=np.eye(3))
    est = BayesianDirichletCalibrator()
    assert est.tune == "auto"
    assert est._resolve_tune(None) == est.tune_ == TUNE_AUTO == 1000
    assert est._resolve_tune(None, compiled=True) == est.tune_ == TUNE_AUTO_COMPILED == 500
    assert est._resolve_tune(centred) == est.tune_ == TUNE_AUTO_CENTRED == 300
    assert est._resolve_tune(centred, compiled=True) == TUNE_AUTO_CENTRED
    assert BayesianDirichletCalibrator(tune=50)._resolve_tune(centred) == 50
    assert BayesianDirichletCalibrator(tune=50)._resolve_tune(None, compiled=True) == 50
    assert BayesianGenerativeCalibrator(tune="auto")._resolve_tune() == TUNE_AUTO


def test_prior_predictive_is_not_degenerate():
    """At n = 30, k = 10, fewer than half of the prior maps' outputs are > 0.99 on one class.

    (The penalty reading of ODIR at n = 30 put > 0.99 on one class in 89-99 % of them.)
    """
    q = make_dirgen(30, 10, rng=3)[0]
    idata = BayesianDirichletCalibrator().sample_prior_predictive(q, draws=500, random_seed=0)
    W, b = idata.prior["W"].values[0], idata.prior["b"].values[0]
    p = np.stack([dirlin_map(q, W[s], b[s]) for s in range(W.shape[0])])
    share = float(np.mean(p.max(axis=-1) > 0.99))
    share_q = float(np.mean(q.max(axis=-1) > 0.99))
    assert share < 0.5, share
    assert share < max(0.5, 2 * share_q)
    y_sim = idata.prior_predictive["y"].values[0]
    assert y_sim.shape == (500, 30) and len(np.unique(y_sim)) == 10
    # the scales are the hyperprior's: tau ~ HalfNormal(0.5) (median 0.337), ln s ~ N(0, 1)
    tau = idata.prior["tau"].values[0]
    assert np.all(tau > 0) and 0.28 < np.median(tau) < 0.40
    assert 0.8 < np.std(np.log(idata.prior["s"].values[0])) < 1.2
    assert abs(np.median(np.log(idata.prior["s"].values[0]))) < 0.3


@pytest.fixture(scope="module")
def absent_fit(data):
    """Class 2 absent from the labels; the estimator's own draws, tune and chains.

    200 rows, as ``data`` (the same compiled program as ``default_fit``).
    """
    q, y, _, _ = make_dirgen(400, K, rng=4)
    keep = np.flatnonzero(y != 2)[:200]
    assert keep.size == 200
    est = BayesianDirichletCalibrator(classes=[0, 1, 2], random_seed=2, progressbar=False,
                                      on_failure="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SamplingWarning)  # judged below
        est.fit(q[keep], y[keep])
    est.test_warnings_ = [str(w.message) for w in caught
                          if issubclass(w.category, SamplingWarning)]
    return est


def test_absent_class_gives_a_proper_posterior(absent_fit, data):
    q, y = data
    W, b = absent_fit.posterior_draws("W"), absent_fit.posterior_draws("b")
    # bounded: no drift to W_22 = 4e12 as with the flat ODIR diagonal
    assert np.all(np.isfinite(W)) and np.abs(W).max() < 50 and np.abs(b).max() < 50
    # (convergence: the next test)
    p = absent_fit.predict_proba(q[y == 2])
    assert np.all(p[:, 2] > 0) and np.all(p[:, 2] < 1)
    # a failed check names the absent class and what samples it
    if not absent_fit.diagnostics_["passed"]:
        assert any("Classes [2] have no calibration samples" in m and "prior='fixed'" in m
                   for m in absent_fit.test_warnings_), absent_fit.test_warnings_


def test_failure_hint_names_absent_classes_only():
    est = BayesianDirichletCalibrator(classes=["ant", "bee", "cat"])
    est.classes_ = np.array(["ant", "bee", "cat"])
    hint = est._failure_hint(np.array([0, 0, 1]), 3)
    assert "['cat'] have no calibration samples" in hint and "prior='fixed'" in hint
    assert est._failure_hint(np.array([0, 1, 2]), 3) == ""
    assert est.set_params(prior="fixed")._failure_hint(np.array([0, 0, 1]), 3) == ""
    with pytest.raises(ConvergenceError, match=r"2 divergences\. Classes \['cat'\]"):
        enforce({"passed": False, "problems": ["2 divergences"]}, on_failure="raise",
                sampler="nutpie", hint=hint)


def test_absent_class_fit_passes_the_default_checks(absent_fit):
    """With a class absent the default fit converges: no divergence, R-hat and ESS pass.

    The scales' posterior mixes slowly there (tail ESS 250-930 in 4 x 1000
    draws over seeds and stacks), which the default retries handle: smaller
    steps after a divergence, longer chains after a short ESS.
    """
    d = absent_fit.diagnostics_
    assert d["passed"] and d["divergences"] == 0 and d["r_hat_max"] <= 1.01, d
    assert d["ess_bulk_min"] >= 400 and d["ess_tail_min"] >= 400, d
    assert not absent_fit.test_warnings_
    assert 1 <= len(d["attempts"]) <= 3 and d["attempts"][-1]["passed"]


def _failing_first(mod, monkeypatch, **failure):
    """Patch ``mod``'s sampler and checks: the first posterior fails with ``failure``.

    Returns the list of ``(target_accept, draws)`` of every sampling run; the
    run checked right after the list's first entry is the one made to fail
    (clear the list before the next fit).
    """
    used = []
    real_diagnose = mod.diagnose

    def recording(real):
        def sample(*args, **kwargs):
            used.append((kwargs["target_accept"], kwargs["draws"]))
            return real(*args, **kwargs)
        return sample

    def diagnose(*args, **kwargs):
        d = real_diagnose(*args, **kwargs)
        if len(used) == 1:
            d.update(failure, passed=False, problems=[f"made to fail: {failure}"])
        return d

    # the PyMC samplers and the compiled ones (sampler="jax", the default here)
    monkeypatch.setattr(mod, "sample_model", recording(mod.sample_model))
    monkeypatch.setattr(mod, "sample_compiled", recording(mod.sample_compiled))
    monkeypatch.setattr(mod, "sample_compiled_dirgen", recording(mod.sample_compiled_dirgen))
    monkeypatch.setattr(mod, "diagnose", diagnose)
    return used


def _fresh_fit(used, est, *data):
    """``est`` fitted under :func:`_failing_first`'s patches without the made-up failure
    (only the list's first run fails): a fresh run to compare a retry with."""
    used.clear()
    used.append(None)
    return est.fit(*data)


def _assert_same_draws(a, b, *names):
    """``a`` and ``b`` drew exactly the same ``(group, variable)`` arrays."""
    from bayescal.bayes import _compat

    for group, name in names:
        np.testing.assert_array_equal(
            *(np.asarray(_compat.group_dataset(e.idata_, group)[name]) for e in (a, b)))


def test_divergences_resample_at_the_retry_target(data, monkeypatch):
    """A posterior failing with divergences is sampled again at retry_target_accept."""
    import bayescal.bayes.estimators as mod

    used = _failing_first(mod, monkeypatch, divergences=3, ess_tail_min=350.0)
    q, y = data
    est = BayesianDirichletCalibrator(prior="temperature", random_seed=0, **SMALL).fit(q, y)
    assert used == [(0.95, 1000), (0.999, 1000)]
    assert est.diagnostics_["passed"]
    assert est.diagnostics_["attempts"] == [
        {"target_accept": 0.95, "draws": 1000, "divergences": 3, "passed": False},
        {"target_accept": 0.999, "draws": 1000, "divergences": 0, "passed": True}]
    # None (or a retry target not above target_accept) samples once, and fails
    used.clear()
    with pytest.raises(ConvergenceError, match="made to fail"):
        BayesianDirichletCalibrator(prior="temperature", random_seed=0, retry_target_accept=None,
                                    **SMALL).fit(q, y)
    assert used == [(0.95, 1000)]


def test_short_ess_or_high_rhat_resample_with_longer_chains(data, monkeypatch):
    """No divergences but R-hat or ESS short: sampled again with retry_draws per chain.

    The compiled sampler's retry continues the first try's chains for the extra
    draws only (``compiled.Chains``), and gets exactly the draws of a fresh run
    of that length with the same seed.
    """
    import bayescal.bayes.estimators as mod

    used = _failing_first(mod, monkeypatch, ess_tail_min=341.0)
    resumed = []
    inner = mod.sample_compiled

    def spy(*args, **kwargs):
        resumed.append(kwargs["resume"] is not None)
        return inner(*args, **kwargs)

    monkeypatch.setattr(mod, "sample_compiled", spy)
    q, y = data
    # draws = 500, so that the retry's 1000 draws run the program the module's other
    # fits (SMALL) compiled; then a given retry_draws unlike "auto"'s, likewise 1000
    small = SMALL | {"draws": 500}
    est = BayesianDirichletCalibrator(prior="temperature", random_seed=0, **small).fit(q, y)
    assert used == [(0.95, 500), (0.95, 1000)]  # "auto": twice draws
    assert resumed == [False, True]
    assert est.diagnostics_["passed"] and est.diagnostics_["n_draws"] == 1000
    assert est.posterior_draws("W").shape[0] == SMALL["chains"] * 1000
    assert [a["draws"] for a in est.diagnostics_["attempts"]] == [500, 1000]
    fresh = _fresh_fit(used, BayesianDirichletCalibrator(prior="temperature", random_seed=0,
                                                         **SMALL), q, y)
    assert resumed == [False, True, False] and fresh.diagnostics_["passed"]
    _assert_same_draws(est, fresh, ("posterior", "W"), ("posterior", "s"),
                       ("sample_stats", "step_size"))
    used.clear()
    BayesianDirichletCalibrator(prior="temperature", random_seed=0, retry_draws=1000,
                                **(small | {"draws": 400})).fit(q, y)
    assert used == [(0.95, 400), (0.95, 1000)]  # "auto" would have drawn 800
    used.clear()
    with pytest.raises(ConvergenceError, match="made to fail"):
        BayesianDirichletCalibrator(prior="temperature", random_seed=0, retry_draws=None,
                                    **small).fit(q, y)
    assert used == [(0.95, 500)]


@pytest.mark.once  # the compiled sampler's logic, the same on both stacks
def test_a_chain_stalled_in_its_warm_up_runs_again_in_double_precision(data, monkeypatch):
    """With single-precision rows, a run whose chain's step size adapts below the
    estimator's STALL_STEP_SIZE stops at the end of its warm-up and runs again
    afresh in double precision; the tries say so. Here the first run is forced
    to single precision with a threshold every chain is below. Stopping after
    the warm-up changes no draw (a run continues its state exactly)."""
    import bayescal.bayes.estimators as mod

    calls, force = [], []
    inner = mod.sample_compiled

    def spy(*args, **kwargs):
        calls.append({key: kwargs.get(key) for key in ("single_precision", "stop_stalled",
                                                         "resume")})
        return inner(*args, **(kwargs | (force.pop(0) if force else {})))

    monkeypatch.setattr(mod, "sample_compiled", spy)
    q, y = data

    def fit(**params):
        return BayesianDirichletCalibrator(prior="temperature", random_seed=0,
                                           **(SMALL | params)).fit(q, y)

    force.append({"single_precision": True, "stop_stalled": 10.0})
    est = fit()
    assert calls == [{"single_precision": None, "stop_stalled": mod.STALL_STEP_SIZE,
                      "resume": None},
                     {"single_precision": False, "stop_stalled": None, "resume": None}]
    (attempt,) = est.diagnostics_["attempts"]
    assert attempt["double_precision"] and attempt["passed"]
    assert 0 < attempt["stalled_step_size"] < 10.0
    # n = 200 rows run in double precision anyway: the rerun's draws are a plain fit's
    _assert_same_draws(est, fit(), ("posterior", "W"), ("sample_stats", "step_size"))
    # in single precision, a run that stops for nothing draws what a run without the
    # check does (short runs: only the draws are compared)
    short = {"draws": 100, "on_failure": "warn", "retry_draws": None}
    force.extend([{"single_precision": True, "stop_stalled": 1e-30},
                  {"single_precision": True, "stop_stalled": None}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplingWarning)
        _assert_same_draws(fit(**short), fit(**short), ("posterior", "W"),
                           ("sample_stats", "step_size"))
        # retry_draws=None asks for no check
        calls.clear()
        fit(**short)
    assert calls == [{"single_precision": None, "stop_stalled": None, "resume": None}]


def test_generative_mixing_retry_continues_its_chains(data, monkeypatch):
    """The generative calibrator's mixing retry continues its compiled chains too: the
    same draws as a fresh run of twice the draws with the same seed."""
    import bayescal.bayes.estimators as mod

    used = _failing_first(mod, monkeypatch, ess_tail_min=341.0)
    kw = {"random_seed": 1, "tune": 500, "chains": 4, "progressbar": False}
    est = BayesianGenerativeCalibrator(draws=500, **kw).fit(*data)
    assert used == [(0.8, 500), (0.8, 1000)]
    fresh = _fresh_fit(used, BayesianGenerativeCalibrator(draws=1000, **kw), *data)
    assert len(fresh.diagnostics_["attempts"]) == 1
    _assert_same_draws(est, fresh, ("posterior", "alpha"), ("sample_stats", "step_size"))


def test_convergence_error_leaves_the_estimator_unfitted(data):
    q, y = data
    # 2 x 30 draws cannot reach an ESS of 400; the default warm-up, so that the
    # compiled program is the default fit's (one compilation fewer in a cold suite)
    est = BayesianDirichletCalibrator(draws=30, chains=2, random_seed=0,
                                      progressbar=False, retry_draws=None)
    with pytest.raises(ConvergenceError, match=r"failed its convergence checks: .*ESS"):
        est.fit(q, y)
    with pytest.raises(NotFittedError):
        est.predict_proba(q)
    assert not hasattr(est, "idata_")
    with pytest.warns(SamplingWarning, match="ESS"):
        est.set_params(on_failure="warn").fit(q, y)
    assert est.diagnostics_["passed"] is False
    assert est.predict_proba(q[:5]).shape == (5, K)


def test_strict_thresholds_raise_on_a_good_posterior(default_fit, data):
    """The thresholds are the user's: an R-hat bound of exactly 1 fails every finite run."""
    est = BayesianDirichletCalibrator(prior="temperature", rhat_max=1.0, retry_draws=None,
                                      random_seed=3, **SMALL)
    with pytest.raises(ConvergenceError, match="R-hat"):
        est.fit(*data)


def test_arviz_loo_on_both_estimators(default_fit, dirgen_fit, data):
    import arviz as az

    n = data[0].shape[0]
    for est in (default_fit, dirgen_fit):
        ll = est.idata_.log_likelihood["y"]
        assert ll.shape == (SMALL["chains"], SMALL["draws"], n)
        assert np.all(np.isfinite(ll.values)) and np.all(ll.values <= 0)
    loo = az.loo(default_fit.idata_, pointwise=True)
    elpd = float(getattr(loo, "elpd_loo", getattr(loo, "elpd", np.nan)))
    assert np.isfinite(elpd) and elpd < 0
    # DirGen's log_likelihood holds ln p(y | q) ("y", what compare scores) and the
    # joint ln p(q, y) ("q_y"); name the one az.loo should read
    loo_g = az.loo(dirgen_fit.idata_, var_name="y")
    assert np.isfinite(float(getattr(loo_g, "elpd_loo", getattr(loo_g, "elpd", np.nan))))


def test_compare_ranks_dirlin_dirgen_and_temperature(default_fit, dirgen_fit, temperature_fit,
                                                     data):
    table = compare({"dirlin": default_fit, "dirgen": dirgen_fit,
                     "temperature": temperature_fit}, *data)
    assert set(table.index) == {"dirlin", "dirgen", "temperature"}
    assert list(table["rank"]) == [0, 1, 2] or list(table["rank"]) == [1, 2, 3]
    assert np.all(np.diff(table["elpd_loo"].to_numpy()) <= 0)  # best first
    assert table["elpd_diff"].iloc[0] == 0
    assert np.all(table["se"] > 0) and np.all(np.isfinite(table["p_loo"]))
    # the DirLin LOO of compare is az.loo's (label given scores); az.loo estimates
    # the relative efficiency of the draws, compare takes reff=1 (a 1e-6 effect here)
    import arviz as az

    loo = az.loo(default_fit.idata_)
    elpd = float(getattr(loo, "elpd_loo", getattr(loo, "elpd", np.nan)))
    assert table.loc["dirlin", "elpd_loo"] == pytest.approx(elpd, rel=1e-4)


def test_compare_warns_when_loo_is_unreliable(default_fit, temperature_fit, data,
                                              monkeypatch):
    """Samples with Pareto k > 0.7: the table still comes, with a warning naming them."""
    import bayescal.bayes.comparison as comparison

    real = comparison.loo_pointwise

    def high_k(est, *args, **kwargs):
        p = real(est, *args, **kwargs)
        if est is default_fit:
            p["pareto_k"] = p["pareto_k"].copy()
            p["pareto_k"][:3] = [0.8, 0.9, 1.2]
        return p

    monkeypatch.setattr(comparison, "loo_pointwise", high_k)
    with pytest.warns(UserWarning, match=r"compare: samples with Pareto k > 0\.7 in 'dirlin' "
                                         r"\(3 of 200, max 1\.20\): the leave-one-out estimate"):
        table = compare({"dirlin": default_fit, "temperature": temperature_fit}, *data)
    assert table.loc["dirlin", "n_high_k"] == 3 and table.loc["temperature", "n_high_k"] == 0


def test_structured_penalty_prior_mode_is_the_map_default(data):
    """prior="structured" (the penalty reading) has DirichletCalibrator(reg="structured")'s map."""
    q, y = data
    qt = make_dirgen(300, K, rng=5)[0]
    for lam, diag, mu in ((1.0, 1.0, 1.0), (3.0, 0.5, 2.0)):
        ref = DirichletCalibrator(reg="structured", reg_lambda=lam, reg_diag=diag, reg_mu=mu,
                                  eps=EPS, tol=1e-10).fit(q, y)
        est = BayesianDirichletCalibrator(prior="structured", reg_lambda=lam, reg_diag=diag,
                                          reg_mu=mu, sampler="laplace", draws=10,
                                          chains=1).fit(q, y)
        gap = np.max(np.abs(est.predict_proba(qt, kind="mode") - ref.predict_proba(qt)))
        kw = (lam, diag, mu)
        assert gap <= 1e-5, (kw, gap)


@pytest.mark.slow
@pytest.mark.once
def test_seeded_small_sbc():
    """Simulation-based calibration of the default prior and sampler (k = 3, n = 30).

    Each replication draws (s, tau, W, b) from the prior and labels from the
    map, fits the default estimator (its prior, sampler, draws, checks and
    retries; ``eps=EPS`` because the labels come from the features floored
    there; two chains instead of four: the ranks use 99 thinned draws either
    way, and the test costs a third less CPU, 89 s against 135 s alone),
    and ranks the true log-likelihood, ``ln s`` and one calibrated
    probability among thinned posterior draws. With uniform ranks the
    chi-square p-value over 4 bins is uniform: p > 0.001 fails a correct
    sampler once in a thousand runs, and a grossly biased posterior (rank
    p = 1e-33 was measured for the Laplace sampler at the old ODIR default)
    fails it; the central 90 % intervals must hold the truth in 80-98 % of
    the 120 (replication, quantity) pairs. Forty replications with the
    default (compiled) sampler, one program reused for every data set;
    benchmarks/bench_bayes.py runs the 200-replication check.
    """
    from scipy.special import log_softmax

    n, reps, keep = 30, 40, 99
    q = make_dirgen(n, K, rng=12345)[0]
    x = log_features(q)
    xt = log_features(np.array([[0.2, 0.5, 0.3]]))
    prior = BayesianDirichletCalibrator()._structured_prior()
    ranks: dict[str, list[int]] = {"log_s": [], "loglik": [], "p0": []}
    inside = []

    def quantities(s, W, b, y):
        ll = log_softmax(np.einsum("ni,sji->snj", x, W) + b[:, None, :], axis=-1)
        p0 = np.exp(log_softmax(np.einsum("ni,sji->snj", xt, W) + b[:, None, :], axis=-1))
        return {"log_s": np.log(s), "loglik": ll[:, np.arange(n), y].sum(axis=1),
                "p0": p0[:, 0, 0]}

    for r in range(reps):
        rng = np.random.default_rng([2024, r])
        theta = draw_prior(prior, K, 1, rng)
        s, W, b = maps_of(theta, prior, K)
        p = np.exp(log_softmax(x @ W[0].T + b[0], axis=1))
        y = (p.cumsum(1) < rng.random((n, 1))).sum(1).clip(0, K - 1)
        est = BayesianDirichletCalibrator(classes=list(range(K)), random_seed=r, chains=2,
                                          progressbar=False, on_failure="warn", eps=EPS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplingWarning)  # judged by the ranks
            est.fit(q, y)
        assert est.tune_ == TUNE_AUTO_COMPILED  # the default warm-up of the compiled sampler
        post = est.idata_.posterior
        draws = quantities(post["s"].values.ravel(), post["W"].values.reshape(-1, K, K),
                           post["b"].values.reshape(-1, K), y)
        truth = quantities(s, W, b, y)
        idx = np.linspace(0, draws["log_s"].size - 1, keep).round().astype(int)
        for name, d in draws.items():
            ranks[name].append(int(np.sum(d[idx] < truth[name][0])))
            lo, hi = np.quantile(d, [0.05, 0.95])
            inside.append(bool(lo <= truth[name][0] <= hi))
    for name, rk in ranks.items():
        counts = np.bincount(np.asarray(rk) * 4 // (keep + 1), minlength=4)
        assert chisquare(counts).pvalue > 1e-3, (name, counts)
    assert 0.80 <= np.mean(inside) <= 0.98, np.mean(inside)


def test_psis_log_weights_follow_the_log_ratios():
    """_compat.psislw smooths log *ratios* on both ArviZ stacks (arviz-stats negates its input)."""
    from scipy.special import logsumexp

    from bayescal.bayes import _compat

    r = np.random.default_rng(0).normal(size=(3, 2000))
    lw, k = _compat.psislw(r, 1.0)
    np.testing.assert_allclose(logsumexp(lw, axis=1), 0.0, atol=1e-10)
    assert all(np.corrcoef(lw[i], r[i])[0, 1] > 0.99 for i in range(3))
    assert k.shape == (3,) and np.all(k < 0.7)


@pytest.mark.filterwarnings("ignore::bayescal._validation.SparseClassWarning")  # few rows
def test_a_model_too_large_to_sample_is_refused_before_any_work(data, monkeypatch):
    """Beyond MAX_COEFS sampled coefficients (the full map at k = 30): a ValueError
    that names the size and what to use, before the mode is sought, and an earlier fit
    of the estimator is kept."""
    import bayescal.bayes.laplace as laplace
    from bayescal.bayes.estimators import MAX_COEFS

    q, y = data
    est = BayesianDirichletCalibrator(prior="temperature", sampler="laplace", draws=20,
                                      chains=1, random_seed=0).fit(q, y)
    W = est.coef_.copy()

    def no_work(*args, **kwargs):
        raise AssertionError("the mode was sought")

    monkeypatch.setattr(laplace, "structured_mode", no_work)
    q31, y31, _, _ = make_dirgen(124, 31, rng=0)
    assert 31 * 31 - 1 > MAX_COEFS >= 30 * 30 - 1  # the full map's identified coefficients
    for prior in ("hierarchical", "l2"):
        with pytest.raises(ValueError, match=(
                rf"BayesianDirichletCalibrator\(prior='{prior}'\) at k=31 samples 960 map "
                rf"coefficients, more than the {MAX_COEFS} it takes")) as err:
            est.set_params(prior=prior).fit(q31, y31)
        msg = str(err.value)
        assert ("prior='fixed' with reg_lambda=float('inf'), reg_diag=1.0, reg_mu=1.0 "
                "(61 coefficients)") in msg
        assert "prior='temperature'" in msg and "DirichletCalibrator()" in msg
        np.testing.assert_array_equal(est.coef_, W)  # the earlier fit is untouched
    # the diagonal map and temperature scaling are small at this k
    diagonal = est.set_params(prior="fixed", reg_lambda=np.inf, reg_diag=1.0, reg_mu=1.0)
    assert diagonal._n_coefs(31) == 61
    diagonal._check_size(31)
    assert est.set_params(prior="temperature", reg_lambda=1.0, reg_diag=None,
                          reg_mu=None)._n_coefs(1000) == 0


@pytest.mark.filterwarnings("ignore::bayescal._validation.SparseClassWarning")  # few rows
def test_conditional_coordinates_beyond_their_size_are_refused_before_sampling(monkeypatch):
    """k = 16 (255 coefficients) on few rows: the data do not dominate the prior, the
    conditional coordinates would be needed, and the fit is refused after the mode and
    before sampling, saying what it measured for the sampler used."""
    import bayescal.bayes.estimators as estimators
    from bayescal.bayes.estimators import MAX_CONDITIONAL_COEFS

    def no_sampling(*args, **kwargs):
        raise AssertionError("sampled")

    monkeypatch.setattr(estimators, "sample_compiled", no_sampling)
    monkeypatch.setattr(estimators, "sample_model", no_sampling)
    q, y, _, _ = make_dirgen(160, 16, rng=1)
    assert 16 * 16 - 1 > MAX_CONDITIONAL_COEFS >= 15 * 15 - 1
    with pytest.raises(ValueError, match=(
            r"at k=16 samples 255 map coefficients, more than the 224 it takes in the "
            r"conditional coordinates.*the largest measured to pass its checks: k = 15, "
            r"n = 100 took 47 s with the compiled sampler")):
        BayesianDirichletCalibrator(progressbar=False).fit(q, y)
    with pytest.raises(ValueError, match=(
            r"conditional coordinates.*factorises a 255 x 255 matrix with sampler='pymc'.*"
            r"7\.4 minutes measured at 224 \(k = 15, n = 100\), about 11 minutes here")):
        BayesianDirichletCalibrator(sampler="pymc", progressbar=False).fit(q, y)


def test_an_infinite_strength_pins_its_group(data):
    """prior='fixed': reg_lambda=inf pins the off-diagonal at the centre (a diagonal map);
    the penalty readings refuse it."""
    q, y = data
    est = BayesianDirichletCalibrator(prior="fixed", reg_lambda=np.inf, reg_diag=1.0,
                                      reg_mu=1.0, sampler="laplace", draws=50, chains=2,
                                      random_seed=0).fit(q, y)
    W = est.posterior_draws("W")
    off = ~np.eye(K, dtype=bool)
    assert np.all(W[..., off] == 0.0) and np.ptp(W[..., ~off]) > 0
    with pytest.raises(ValueError, match=r"prior='l2' needs finite strengths; got "
                                         r"reg_lambda=inf"):
        BayesianDirichletCalibrator(prior="l2", reg_lambda=np.inf).fit(q, y)
    for bad in (-np.inf, np.nan, -1.0, "1", True):
        with pytest.raises(ValueError, match=r"reg_mu must be a non-negative number \(inf "
                                             r"pins its group with prior='fixed'\); got "):
            BayesianDirichletCalibrator(prior="fixed", reg_mu=bad).fit(q, y)


def test_a_failure_message_says_what_was_tried_and_what_next(data, monkeypatch):
    """Divergences after the retry at 0.999: the error lists both tries and names the next
    step (not 'increase target_accept' again)."""
    import bayescal.bayes.estimators as mod

    real_diagnose = mod.diagnose

    def diverging(*args, **kwargs):
        d = real_diagnose(*args, **kwargs)
        d.update(divergences=3, passed=False)
        d["problems"] = [p for p in d["problems"] if "divergent" not in p] + [
            "3 divergent transitions > 0 (smaller steps: a target_accept closer to 1 than the "
            "one used; the posterior is not to be trusted)"]
        return d

    monkeypatch.setattr(mod, "diagnose", diverging)
    q, y = data
    with pytest.raises(ConvergenceError) as err:
        BayesianDirichletCalibrator(prior="temperature", random_seed=0, **SMALL).fit(q, y)
    msg = str(err.value)
    assert ("Sampled 2 times (1000 draws per chain at target_accept=0.95: 3 divergences; then "
            "1000 draws per chain at target_accept=0.999: 3 divergences). Divergences remain "
            "at target_accept=0.999, so smaller steps will not remove them: a simpler prior "
            "(prior='fixed' or prior='temperature'), the MAP fit DirichletCalibrator() or more "
            "calibration data is the next step.") in msg, msg
    assert "e.g. 0.95" not in msg
    # one try (no retry): what was used, and no claim about smaller steps
    with pytest.raises(ConvergenceError, match=r"Sampled 1 time \(1000 draws per chain at "
                                               r"target_accept=0\.95: 3 divergences\)") as err:
        BayesianDirichletCalibrator(prior="temperature", random_seed=0, retry_target_accept=None,
                                    **SMALL).fit(q, y)
    assert "will not remove them" not in str(err.value)


@pytest.mark.parametrize("cls", [BayesianDirichletCalibrator, BayesianGenerativeCalibrator])
def test_sample_weight_is_refused_with_a_reason(cls, data):
    q, y = data
    with pytest.raises(ValueError, match=rf"{cls.__name__} does not take sample_weight \(got "
                                         r"an array of type ndarray\): its likelihood counts"):
        cls().fit(q, y, sample_weight=np.ones(len(y)))
