"""Running a sampler on a PyMC model and checking its convergence.

One entry point, :func:`sample_model`, for the MCMC and variational back
ends; :func:`diagnose` checks ArviZ diagnostics against thresholds and
:func:`enforce` turns a failure into a :class:`ConvergenceError` (or, on
request, a :class:`SamplingWarning`) that names the setting to change.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

from bayescal.bayes import _compat
from bayescal.bayes._backend import import_pymc, require

__all__ = ["ConvergenceError", "SamplingWarning", "diagnose", "enforce", "sample_model"]

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


def _cores(chains: int) -> int:
    return max(1, min(chains, os.cpu_count() or 1))


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
) -> Any:
    """Sample ``model`` and return the posterior of ``var_names``.

    The result is the installed ArviZ's container (``InferenceData`` on
    ArviZ 0.2x, ``xarray.DataTree`` on 1.x; see :mod:`bayescal.bayes._compat`).

    Parameters
    ----------
    sampler : {"pymc", "nutpie", "numpyro", "advi"}
        ``"pymc"``: PyMC's NUTS (diagonal mass adapted; the bayescal models
        are whitened so that suffices). ``"nutpie"``: nutpie with its JAX
        backend (fast compilation) and low-rank modified mass matrix.
        ``"numpyro"``: NumPyro NUTS with a dense mass matrix (runs on a GPU
        when JAX sees one); chains run in parallel when JAX has a device per
        chain, else vectorised on one device. ``"advi"``: mean-field ADVI (``tune`` * 10
        iterations, capped at 50,000), then ``draws * chains`` draws as one
        chain.
    progressbar : bool, default=True
        Show the sampler's progress bar (PyMC's, nutpie's or NumPyro's).
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
                init="jitter+adapt_diag",
                target_accept=target_accept,
                progressbar=progressbar,
                compute_convergence_checks=False,
                var_names=var_names,
            )
    if sampler == "nutpie":
        nutpie = require("nutpie", extra="fast")
        compiled = nutpie.compile_pymc_model(
            model, backend="jax", gradient_backend="jax", var_names=var_names
        )
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
        problems.append(f"{div} divergent transitions > {max_divergences} (increase "
                        "target_accept, e.g. 0.95; the posterior is not to be trusted)")
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
