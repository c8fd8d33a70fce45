"""Every sampler back end on the installed stack: nutpie, NumPyro, ADVI; the progress bar.

nutpie and NumPyro are the optional extra ``[fast]``: required under
``make test`` (``BAYESCAL_REQUIRE_EXTRAS=1``), skipped with a reason elsewhere.
Budget: small k = 3 posteriors, 2 chains x (300 tune + 500 draws).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from _extras import import_extra

import bayescal
from bayescal import BayesianDirichletCalibrator, BayesianGenerativeCalibrator, make_dirgen
from bayescal.bayes import SamplingWarning, _compat
from bayescal.bayes._backend import import_pymc

K = 3
LAM, MU = 0.5, 0.2
SHORT = {"draws": 500, "tune": 300, "chains": 2, "random_seed": 11, "progressbar": False}


@pytest.fixture(scope="module")
def data():
    q, y, _, _ = make_dirgen(500, K, rng=21)
    return q, y


@pytest.fixture(scope="module")
def laplace_fit(data):
    q, y = data
    return BayesianDirichletCalibrator(
        prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="laplace", draws=2000, chains=2,
        random_seed=3,
    ).fit(q, y)


def _check_posterior(est, n_draws: int) -> None:
    assert type(est.idata_) is type(_compat.from_dict({"posterior": {"x": np.zeros((1, 2))}}))
    assert {"W", "b", "A", "c"} <= set(est.idata_.posterior.data_vars)
    assert est.idata_.posterior["W"].dims == ("chain", "draw", "class_out", "class_in")
    assert est.n_draws_ == n_draws


@pytest.mark.parametrize(("sampler", "module"), [("nutpie", "nutpie"), ("numpyro", "numpyro")])
def test_fast_mcmc_samplers_match_laplace(sampler, module, data, laplace_fit, tmp_path):
    """nutpie / NumPyro converge and agree with the Laplace posterior (k = 3, n = 500)."""
    import_extra(module, "fast")
    q, y = data
    est = BayesianDirichletCalibrator(prior="odir", reg_lambda=LAM, reg_mu=MU, sampler=sampler,
                                      on_failure="warn", **SHORT)
    with warnings.catch_warnings():
        # a short run, judged by the asserts below (R-hat < 1.05), not the 1.01 of production
        warnings.simplefilter("ignore", SamplingWarning)
        est.fit(q, y)
    _check_posterior(est, 2 * 500)
    # the map's parameters first (az.summary's first rows), sampler coordinates after
    assert list(est.idata_.posterior.data_vars)[:4] == ["W", "b", "A", "c"]
    assert "sample_stats" in _compat.group_names(est.idata_)
    d = est.diagnostics_
    assert d["r_hat_max"] < 1.05 and d["divergences"] == 0, d
    np.testing.assert_allclose(est.predict_proba(q[:100]), laplace_fit.predict_proba(q[:100]),
                               atol=2e-2)
    loaded = bayescal.load(est.save(tmp_path / f"{sampler}.json"))
    np.testing.assert_allclose(loaded.predict_proba(q[:50]), est.predict_proba(q[:50]),
                               atol=1e-12)


def test_nutpie_generative(data):
    import_extra("nutpie", "fast")
    q, y = data
    est = BayesianGenerativeCalibrator(sampler="nutpie", **(SHORT | {"tune": 500})).fit(q, y)
    assert {"alpha", "pi", "W", "b", "A", "c"} <= set(est.idata_.posterior.data_vars)
    assert est.diagnostics_["r_hat_max"] < 1.05
    lap = BayesianGenerativeCalibrator(sampler="laplace", draws=2000, random_seed=0).fit(q, y)
    np.testing.assert_allclose(est.predict_proba(q[:100]), lap.predict_proba(q[:100]), atol=2e-2)


def test_advi_gives_one_chain_of_draws(data, laplace_fit, pytensor_py_linker):
    """ADVI's draws, diagnostics and map (under the Python linker: its 3000 optimisation
    steps at k = 3 take 4-6 s there against 34-36 s for a cold C or Numba compilation of
    the ADVI graph, with the same map to 1e-15)."""
    q, y = data
    est = BayesianDirichletCalibrator(prior="odir", reg_lambda=LAM, reg_mu=MU, sampler="advi",
                                      **SHORT)
    est.fit(q, y)
    _check_posterior(est, 2 * 500)
    assert est.idata_.posterior.sizes["chain"] == 1
    assert est.diagnostics_ == {"approximate": True}  # no convergence check for ADVI
    # mean-field ADVI: the map is close, not exact
    np.testing.assert_allclose(est.predict_proba(q[:100]), laplace_fit.predict_proba(q[:100]),
                               atol=5e-2)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("progressbar", [None, True, False], ids=["default", "on", "off"])
@pytest.mark.parametrize(("sampler", "target"), [("pymc", "sample"), ("advi", "fit")])
def test_progressbar_reaches_pymc(progressbar, sampler, target, data, monkeypatch):
    """PyMC shows its progress bar by default; progressbar=False turns it off."""
    pm = import_pymc()
    seen = {}

    def record(*args, **kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(pm, target, record)
    kw = {} if progressbar is None else {"progressbar": progressbar}
    est = BayesianDirichletCalibrator(sampler=sampler, draws=10, tune=10, chains=1, **kw)
    with pytest.raises(_Stop):
        est.fit(*data)
    assert seen["progressbar"] is (True if progressbar is None else progressbar)


def test_sampling_holds_blas_to_one_thread_and_restores_it(data, monkeypatch):
    """BLAS runs single-threaded while the sampler runs, and as before afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    pm = import_pymc()
    seen = []

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    def record(*args, **kwargs):
        seen.extend(blas_threads())
        raise _Stop

    monkeypatch.setattr(pm, "sample", record)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        est = BayesianDirichletCalibrator(sampler="pymc", draws=10, tune=10, chains=1)
        with pytest.raises(_Stop):
            est.fit(*data)
        assert blas_threads() == before
    assert seen and set(seen) == {1}, seen


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5, -0.2, float("nan"), "0.9", True, None])
@pytest.mark.parametrize("cls", [BayesianDirichletCalibrator, BayesianGenerativeCalibrator])
def test_target_accept_must_be_in_open_unit_interval(cls, value, data):
    q, y = data
    with pytest.raises(ValueError, match=r"target_accept must be in \(0, 1\); got " +
                       re.escape(repr(value))):
        cls(target_accept=value, sampler="laplace").fit(q[:20], y[:20])


def test_progressbar_must_be_a_bool(data):
    q, y = data
    with pytest.raises(ValueError, match="progressbar must be True or False; got 'yes'"):
        BayesianDirichletCalibrator(progressbar="yes", sampler="laplace").fit(q[:20], y[:20])


# ---------------------------------------------------------------------------
# set_config(nutpie_backend="numba"): one compilation per model structure
# ---------------------------------------------------------------------------
def test_config_validates_and_restores():
    from bayescal.bayes import config_context, get_config, set_config

    assert get_config() == {"nutpie_backend": "jax"}
    with pytest.raises(ValueError, match=r"nutpie_backend must be one of .*'cuda'"):
        set_config(nutpie_backend="cuda")
    with pytest.raises(ValueError, match="'fast'"), config_context(nutpie_backend="fast"):
        pass
    assert get_config()["nutpie_backend"] == "jax"
    with pytest.raises(RuntimeError), config_context(nutpie_backend="numba"):
        assert get_config()["nutpie_backend"] == "numba"
        raise RuntimeError  # the setting comes back after an exception too
    assert get_config()["nutpie_backend"] == "jax"


@pytest.mark.filterwarnings("ignore::bayescal.bayes.SamplingWarning")  # short draws, warn
def test_numba_backend_reuses_one_compilation_across_data_sets(data, monkeypatch):
    """Fits of one structure share a compiled model; each sees its own data, exactly.

    Bayesian temperature scaling (the smallest structured graph) on two data
    sets of different sizes, then the first again: one numba compilation, the
    repeated fit is draw-for-draw the first one (no data left over from the
    second), and the posterior of ``s`` agrees with the JAX backend's within
    Monte Carlo error.
    """
    nutpie = import_extra("nutpie", "fast")
    from bayescal.bayes import _sampling, config_context

    compiles = []
    real_compile = nutpie.compile_pymc_model

    def counting(model, **kw):
        compiles.append(kw.get("backend"))
        return real_compile(model, **kw)

    monkeypatch.setattr(nutpie, "compile_pymc_model", counting)
    monkeypatch.setattr(_sampling, "_COMPILED", type(_sampling._COMPILED)())
    q, y = data
    q2, y2, _, _ = make_dirgen(120, K, rng=5)
    kw = SHORT | {"prior": "temperature", "sampler": "nutpie", "on_failure": "warn",
                  "retry_draws": None, "retry_target_accept": None}
    with config_context(nutpie_backend="numba"):
        first = BayesianDirichletCalibrator(**kw).fit(q, y)
        other = BayesianDirichletCalibrator(**kw).fit(q2, y2)
        again = BayesianDirichletCalibrator(**kw).fit(q, y)
    assert compiles == ["numba"]
    s1, s2, s3 = (np.ravel(e.idata_.posterior["s"].values) for e in (first, other, again))
    np.testing.assert_array_equal(s1, s3)
    assert abs(np.median(s1) - np.median(s2)) > 0.01  # the second data set's own posterior
    jax_fit = BayesianDirichletCalibrator(**kw).fit(q, y)
    assert compiles == ["numba", "jax"]
    s_jax = np.ravel(jax_fit.idata_.posterior["s"].values)
    ess = [float(_compat.ess(e.idata_, ["s"])["s"]) for e in (first, jax_fit)]
    assert min(ess) > 100
    se = np.sqrt(s1.var() / ess[0] + s_jax.var() / ess[1])
    assert abs(s1.mean() - s_jax.mean()) < 5 * se


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_numba_performance_hints_are_hidden_other_warnings_pass(backend, data, monkeypatch):
    """numba's hints about PyTensor's generated code are hidden; no other warning is."""
    import_extra("nutpie", "fast")
    from numba.core.errors import NumbaPerformanceWarning

    from bayescal.bayes import _sampling, config_context

    def compile_and_warn(model, var_names, reuse_key):
        warnings.warn("np.dot() is faster on contiguous arrays", NumbaPerformanceWarning,
                      stacklevel=1)
        warnings.warn("something else", RuntimeWarning, stacklevel=1)
        raise _Stop

    monkeypatch.setattr(_sampling, "_compile_nutpie", compile_and_warn)
    est = BayesianDirichletCalibrator(sampler="nutpie", draws=10, tune=10, chains=1)
    with config_context(nutpie_backend=backend), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(_Stop):
            est.fit(*data)
    kinds = {w.category for w in seen}
    assert RuntimeWarning in kinds
    assert (NumbaPerformanceWarning in kinds) is (backend == "jax")


def test_pymc_chains_start_from_a_preloaded_fork_server_once_jax_runs(monkeypatch):
    """No fork of a process running JAX's threads; the fork server holds PyMC already."""
    import multiprocessing
    import sys

    from bayescal.bayes._sampling import _chain_context

    monkeypatch.delitem(sys.modules, "jax", raising=False)
    assert _chain_context(4) is None  # PyMC's default (fork on Linux) without JAX
    monkeypatch.setitem(sys.modules, "jax", object())
    assert _chain_context(1) is None  # one chain runs in this process
    ctx = _chain_context(2)
    assert ctx.get_start_method() == "forkserver"
    from multiprocessing import forkserver

    assert "pymc" in forkserver._forkserver._preload_modules
    assert isinstance(ctx, type(multiprocessing.get_context("forkserver")))

