"""Running a sampler on a PyMC model and checking its convergence.

One entry point, :func:`sample_model`, for the MCMC and variational back
ends; :func:`check_convergence` turns ArviZ diagnostics into a
:class:`SamplingWarning` that names the setting to change.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

from bayescal.bayes import _compat
from bayescal.bayes._backend import import_pymc, require

__all__ = ["SamplingWarning", "check_convergence", "sample_model"]

#: Thresholds of :func:`check_convergence` (Vehtari et al., 2021).
RHAT_MAX = 1.01
ESS_BULK_MIN = 400


class SamplingWarning(UserWarning):
    """Posterior samples that may not be trustworthy (R-hat, ESS, divergences)."""


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
            low_rank_modified_mass_matrix=True,
            target_accept=target_accept,
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
                nuts_sampler_kwargs={"chain_method": method, "nuts_kwargs": {"dense_mass": True}},
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


def check_convergence(idata: Any, var_names: list[str], *, sampler: str) -> dict[str, float]:
    """Diagnostics of an MCMC run; warn when they fail the usual thresholds.

    Warns (:class:`SamplingWarning`) when any R-hat > 1.01, any bulk ESS < 400
    or any transition diverged, naming what to change.

    Returns
    -------
    diagnostics : dict
        ``r_hat_max``, ``ess_bulk_min``, ``divergences``.
    """
    n_chains = idata.posterior.sizes["chain"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = float("nan")
        if n_chains > 1:
            r = _compat.rhat(idata, var_names)
            rhat = float(np.nanmax([r[v].values.max() for v in var_names]))
        e = _compat.ess(idata, var_names, method="bulk")
        ess = float(np.nanmin([e[v].values.min() for v in var_names]))
    div = 0
    if "sample_stats" in _compat.group_names(idata) and "diverging" in idata.sample_stats:
        div = int(idata.sample_stats["diverging"].values.sum())
    problems = []
    if rhat > RHAT_MAX:
        problems.append(f"max R-hat {rhat:.3f} > {RHAT_MAX} (increase tune and draws)")
    if ess < ESS_BULK_MIN:
        problems.append(
            f"min bulk ESS {ess:.0f} < {ESS_BULK_MIN} (increase draws or chains)"
        )
    if div:
        problems.append(
            f"{div} divergent transitions (increase target_accept, e.g. 0.95, "
            "or use sampler='laplace' to compare)"
        )
    if problems:
        warnings.warn(
            f"sampler={sampler!r}: " + "; ".join(problems), SamplingWarning, stacklevel=3
        )
    return {"r_hat_max": rhat, "ess_bulk_min": ess, "divergences": float(div)}
