"""Running a sampler on a PyMC model and checking its convergence.

One entry point, :func:`sample_model`, for the MCMC and variational back
ends; :func:`diagnose` checks ArviZ diagnostics against thresholds and
:func:`enforce` turns a failure into a :class:`ConvergenceError` (or, on
request, a :class:`SamplingWarning`) that names the setting to change.

:func:`set_config` / :func:`config_context` choose how nutpie compiles a
model's log density, process-wide (as :func:`sklearn.set_config` does for
scikit-learn): ``nutpie_backend="jax"`` (the default) compiles in about two
seconds per model, but every gradient is a call into Python;
``"numba"`` compiles to machine code once per model *structure* (about a
minute, less from PyTensor 3's disk cache) and then serves every further data
set of that structure in the process through :func:`pymc.Data` inputs, at a
tenth of the sampling time of small models. Use it for loops of many fits
(simulation studies, cross-validation, benchmarks); the posterior is the same.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from bayescal.bayes import _compat
from bayescal.bayes._backend import import_pymc, require

__all__ = ["ConvergenceError", "SamplingWarning", "config_context", "diagnose", "enforce",
           "get_config", "sample_model", "set_config"]

#: Default thresholds of :func:`diagnose` (Vehtari et al., 2021).
RHAT_MAX = 1.01
ESS_MIN = 400


class SamplingWarning(UserWarning):
    """Posterior samples that may not be trustworthy (R-hat, ESS, divergences)."""


class ConvergenceError(RuntimeError):
    """An MCMC posterior that failed its convergence checks (R-hat, ESS, divergences).

    Raised by ``fit`` of the Bayesian calibrators with ``on_failure="raise"``
    (the default); the estimator is left unfitted, so a posterior that is not
    to be trusted can neither predict nor be saved.

    Attributes
    ----------
    diagnostics : dict
        What :func:`diagnose` returned (values, thresholds, problems).
    idata : arviz.InferenceData, xarray.DataTree or None
        The rejected posterior, for inspection.
    """

    def __init__(self, message: str, *, diagnostics: dict[str, Any] | None = None,
                 idata: Any = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or {}
        self.idata = idata


#: Process-wide settings (:func:`set_config`).
_CONFIG: dict[str, Any] = {"nutpie_backend": "jax"}
_NUTPIE_BACKENDS = ("jax", "numba")
#: nutpie models compiled with numba and the names of the inputs each reads, by
#: (reuse key, var_names); the oldest goes first.
_COMPILED: OrderedDict[tuple, Any] = OrderedDict()
_COMPILED_MAX = 8


def get_config() -> dict[str, Any]:
    """The current settings of :func:`set_config` (a copy)."""
    return dict(_CONFIG)


def set_config(*, nutpie_backend: str | None = None) -> None:
    """Set how the Bayesian calibrators sample, for the whole process.

    Parameters
    ----------
    nutpie_backend : {"jax", "numba"}, optional
        How nutpie (``sampler="auto"`` or ``"nutpie"``) compiles the log
        density. ``"jax"`` (default): about 2 s per model, then one Python
        call per gradient (at k = 3, n = 30: 20-24 s to sample 4 x 2000
        iterations here). ``"numba"``: machine code with no Python in the
        loop (2-3 s for the same draws), compiled once per model structure
        and process (55-75 s, about 20 s on PyTensor 3 once its disk cache
        holds the structure) and reused for every further data set of that
        structure: the default ``BayesianDirichletCalibrator`` passes its
        data as :func:`pymc.Data` inputs. Worth it from a few fits of the
        same ``k`` and prior in one process. The posterior is the same.
        ``None`` leaves the setting unchanged.
    """
    if nutpie_backend is not None:
        if nutpie_backend not in _NUTPIE_BACKENDS:
            raise ValueError(f"nutpie_backend must be one of {_NUTPIE_BACKENDS}; "
                             f"got {nutpie_backend!r}")
        _CONFIG["nutpie_backend"] = nutpie_backend


@contextmanager
def config_context(**settings: Any) -> Iterator[None]:
    """:func:`set_config` inside a ``with`` block; the previous settings come back after it.

    Examples
    --------
    >>> from bayescal.bayes import config_context, get_config
    >>> with config_context(nutpie_backend="numba"):
    ...     get_config()["nutpie_backend"]
    'numba'
    >>> get_config()["nutpie_backend"]
    'jax'
    """
    old = get_config()
    set_config(**settings)
    try:
        yield
    finally:
        set_config(**old)


def _compile_nutpie(model: Any, var_names: list[str], reuse_key: tuple | None) -> Any:
    """nutpie's compiled model of ``model``, through the numba cache where it applies."""
    nutpie = require("nutpie", extra="fast")
    if _CONFIG["nutpie_backend"] == "jax":
        return nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax",
                                         var_names=var_names)
    if reuse_key is None:
        return nutpie.compile_pymc_model(model, backend="numba", var_names=var_names)
    key = (reuse_key, tuple(var_names))
    values = {v.name: v.get_value() for v in model.data_vars}
    if key not in _COMPILED:
        compiled = nutpie.compile_pymc_model(model, backend="numba", var_names=var_names)
        # an input the graph does not read (b = 0 makes the class counts drop out)
        # was compiled away, and nutpie rejects it: keep the names it takes
        _COMPILED[key] = (compiled, {name for name in values if _takes(compiled, name, values)})
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    _COMPILED.move_to_end(key)
    compiled, used = _COMPILED[key]
    return compiled.with_data(**{name: v for name, v in values.items() if name in used})


@contextmanager
def _quiet_numba() -> Iterator[None]:
    """Hide numba's performance hints while nutpie compiles and samples with numba.

    They are about the code PyTensor generates for the model (e.g. "np.dot()
    is faster on contiguous arrays", seen on the first compilation of the
    centred model on PyMC 5), which a user can do nothing about. Every other
    warning passes; with the JAX backend nothing is filtered.
    """
    with warnings.catch_warnings():
        if _CONFIG["nutpie_backend"] == "numba":
            from numba.core.errors import NumbaPerformanceWarning

            warnings.simplefilter("ignore", NumbaPerformanceWarning)
        yield


def _takes(compiled: Any, name: str, values: dict[str, Any]) -> bool:
    """Whether nutpie's ``compiled.with_data`` knows the input ``name``.

    Asked through ``with_data`` itself (a ``KeyError`` for an unknown name):
    how nutpie keys its ``shared_data`` differs between its versions (by
    name in 0.16.8, by a random key mapped from the variable in 0.16.11).
    """
    try:
        compiled.with_data(**{name: values[name]})
    except KeyError:
        return False
    return True


def _chain_context(chains: int) -> Any:
    """The multiprocessing context of PyMC's chain processes (``None``: PyMC's default).

    Forking a process that runs JAX's threads (the compiled sampler) can
    deadlock, so once JAX is imported the chains start from a fork server,
    which imports PyMC and the models once (its preload): each chain is then
    forked from a process that has them, not started bare (a 20-draw fit at
    k = 3 took 6 s with a bare fork server, 1.8 s with the preload).
    """
    if "jax" not in sys.modules or chains <= 1:
        return None
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pymc", "bayescal.bayes.models"])  # no-op once started
    return ctx


def _cores(chains: int) -> int:
    return max(1, min(chains, os.cpu_count() or 1))


def _one_blas_thread(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``func`` with BLAS held to one thread, lifted on return.

    The samplers run their chains in parallel threads or processes, each
    evaluating the log density of a small model (``k x k`` weights), where
    a multi-threaded BLAS only adds contention: with OpenBLAS's default of
    one thread per core, a ``k = 3``, ``n = 30`` nutpie fit (numba build,
    PyMC 5, 2 cores) took 9-34 s against 2.5-10 s held to one thread
    (:func:`threadpoolctl.threadpool_limits`).
    """

    @functools.wraps(func)
    def held(*args: Any, **kwargs: Any) -> Any:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return held


@_one_blas_thread
def sample_model(
    model: Any,
    *,
    sampler: str,
    draws: int,
    tune: int,
    chains: int,
    random_seed: int | None,
    var_names: list[str],
    target_accept: float = 0.8,
    progressbar: bool = True,
    reuse_key: tuple | None = None,
) -> Any:
    """Sample ``model`` and return the posterior of ``var_names``.

    BLAS is held to one thread while it samples (:func:`_one_blas_thread`).
    The result is the installed ArviZ's container (``InferenceData`` on
    ArviZ 0.2x, ``xarray.DataTree`` on 1.x; see :mod:`bayescal.bayes._compat`).

    Parameters
    ----------
    sampler : {"pymc", "nutpie", "numpyro", "advi"}
        ``"pymc"``: PyMC's NUTS (diagonal mass adapted; the bayescal models
        are whitened so that suffices). ``"nutpie"``: nutpie with a low-rank
        modified mass matrix, the log density compiled by JAX (fast
        compilation) or numba (:func:`set_config`).
        ``"numpyro"``: NumPyro NUTS with a dense mass matrix (runs on a GPU
        when JAX sees one); chains run in parallel when JAX has a device per
        chain, else vectorised on one device. ``"advi"``: mean-field ADVI (``tune`` * 10
        iterations, capped at 50,000), then ``draws * chains`` draws as one
        chain.
    progressbar : bool, default=True
        Show the sampler's progress bar (PyMC's, nutpie's or NumPyro's).
    reuse_key : tuple, optional
        What fixes ``model``'s compiled graph when its data are
        :func:`pymc.Data` inputs (e.g.
        :func:`bayescal.bayes.models.structured_model_key`): with
        ``nutpie_backend="numba"`` (:func:`set_config`) a model compiled under
        the same key is reused with this model's data.
    """
    pm = import_pymc()
    seed = None if random_seed is None else int(random_seed)
    if sampler == "pymc":
        with model:
            return pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                cores=_cores(chains),
                random_seed=seed,
                nuts_sampler="pymc",  # PyMC 6 would pick nutpie when installed
                mp_ctx=_chain_context(chains),
                init="jitter+adapt_diag",
                target_accept=target_accept,
                progressbar=progressbar,
                compute_convergence_checks=False,
                var_names=var_names,
            )
    if sampler == "nutpie":
        nutpie = require("nutpie", extra="fast")
        with _quiet_numba():
            compiled = _compile_nutpie(model, var_names, reuse_key)
            return nutpie.sample(
                compiled,
                draws=draws,
                tune=tune,
                chains=chains,
                cores=_cores(chains),
                seed=seed,
                progress_bar=progressbar,
                target_accept=target_accept,
                **_compat.nutpie_low_rank(nutpie.sample),
            )
    if sampler == "numpyro":
        xla = os.environ.get("XLA_FLAGS", "")
        if "jax" not in sys.modules and "xla_force_host_platform_device_count" not in xla:
            flag = f"--xla_force_host_platform_device_count={_cores(chains)}"
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
        require("numpyro", extra="fast")
        import jax

        # One device per chain runs chains in parallel; otherwise vectorise
        # them in one device (far better than numpyro's sequential fallback).
        method = "parallel" if jax.local_device_count() >= chains else "vectorized"
        with model:
            return pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                random_seed=seed,
                nuts_sampler="numpyro",
                target_accept=target_accept,
                progressbar=progressbar,
                compute_convergence_checks=False,
                var_names=var_names,
                **_compat.numpyro_options(chain_method=method, dense_mass=True),
            )
    if sampler == "advi":
        with model:
            approx = pm.fit(
                n=min(50_000, 10 * max(tune, 100)),
                method="advi",
                random_seed=seed,
                progressbar=progressbar,
            )
            idata = approx.sample(draws * chains, random_seed=seed)
        post = _compat.group_dataset(idata, "posterior")[var_names]
        return _compat.from_datasets({"posterior": post})
    raise ValueError(f"unknown sampler {sampler!r}")


def diagnose(
    idata: Any,
    var_names: list[str],
    *,
    rhat_max: float = RHAT_MAX,
    ess_min: float = ESS_MIN,
    max_divergences: int = 0,
) -> dict[str, Any]:
    """Convergence diagnostics of an MCMC posterior against thresholds.

    Uses ArviZ's rank-normalised split R-hat and bulk / tail effective
    sample sizes (Vehtari et al. 2021) over every entry of ``var_names``
    (entries constant across draws, which have no R-hat, are skipped), and
    the sampler's divergent transitions (``sample_stats.diverging``).

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
    var_names : list of str
        Posterior variables to check.
    rhat_max : float, default=1.01
        Largest acceptable R-hat (needs at least two chains).
    ess_min : float, default=400
        Smallest acceptable bulk and tail ESS.
    max_divergences : int, default=0
        Largest acceptable number of divergent transitions (all chains).

    Returns
    -------
    diagnostics : dict
        ``r_hat_max``, ``ess_bulk_min``, ``ess_tail_min``, ``divergences``,
        ``n_chains``, ``n_draws`` (per chain), the thresholds
        (``rhat_threshold``, ``ess_threshold``, ``divergence_threshold``),
        ``passed`` (bool) and ``problems`` (list of str, each naming the
        setting to change).
    """
    post = idata.posterior
    n_chains, n_draws = int(post.sizes["chain"]), int(post.sizes["draw"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = float("nan")
        if n_chains > 1:
            r = _compat.rhat(idata, var_names)
            rhat = float(np.nanmax(np.concatenate([np.ravel(r[v].values) for v in var_names])))
        ess = {}
        for method in ("bulk", "tail"):
            e = _compat.ess(idata, var_names, method=method)
            vals = np.concatenate([np.ravel(e[v].values) for v in var_names])
            ess[method] = float(np.nanmin(vals)) if np.isfinite(vals).any() else float("nan")
    div = 0
    if "sample_stats" in _compat.group_names(idata) and "diverging" in idata.sample_stats:
        div = int(np.asarray(idata.sample_stats["diverging"].values).sum())
    problems = []
    if n_chains < 2:
        problems.append(f"{n_chains} chain: R-hat needs at least 2 (use chains=4)")
    elif not rhat <= rhat_max:
        problems.append(f"max R-hat {rhat:.4f} > {rhat_max} (increase tune and draws)")
    for method in ("bulk", "tail"):
        if not ess[method] >= ess_min:
            problems.append(f"min {method} ESS {ess[method]:.0f} < {ess_min:g} "
                            "(increase draws or chains)")
    if div > max_divergences:
        problems.append(f"{div} divergent transitions > {max_divergences} (smaller steps: "
                        "a target_accept closer to 1 than the one used; the posterior is not "
                        "to be trusted)")
    return {
        "r_hat_max": rhat,
        "ess_bulk_min": ess["bulk"],
        "ess_tail_min": ess["tail"],
        "divergences": div,
        "n_chains": n_chains,
        "n_draws": n_draws,
        "rhat_threshold": float(rhat_max),
        "ess_threshold": float(ess_min),
        "divergence_threshold": int(max_divergences),
        "passed": not problems,
        "problems": problems,
    }


def enforce(diagnostics: dict[str, Any], *, on_failure: str, sampler: str,
            idata: Any = None, hint: str = "") -> None:
    """Raise :class:`ConvergenceError` (or warn) when ``diagnostics`` did not pass.

    ``on_failure="raise"`` raises, ``"warn"`` issues a
    :class:`SamplingWarning`; nothing happens when the diagnostics passed.
    ``hint``, when given, is appended to the message (what to try).
    """
    if diagnostics["passed"]:
        return
    message = (f"the posterior sampled by sampler={sampler!r} failed its convergence checks: "
               + "; ".join(diagnostics["problems"]) + (f". {hint}" if hint else ""))
    if on_failure == "warn":
        warnings.warn(message, SamplingWarning, stacklevel=3)
        return
    raise ConvergenceError(message + " (the estimator was left unfitted; pass "
                           "on_failure='warn' to keep such a posterior)",
                           diagnostics=diagnostics, idata=idata)
