"""One place for what differs between the two supported PyMC / ArviZ stacks.

bayescal supports

* **ArviZ 0.2x** (with PyMC 5, Python >= 3.11): posteriors are
  ``arviz.InferenceData``, whose groups are ``xarray.Dataset`` objects;
* **ArviZ 1.x** (with PyMC 6, Python >= 3.12): posteriors are
  ``xarray.DataTree`` (``arviz.InferenceData`` is only a deprecated alias of
  it), whose groups are ``DataTree`` nodes.

Every call into ArviZ, and every change to a posterior container, goes
through the functions below, so that the rest of bayescal never asks which
stack is installed. Reading works the same on both and needs no shim:
``idata.posterior["W"].values``, ``idata.posterior.data_vars``,
``idata.posterior.sizes``, ``idata.posterior.attrs`` (a mutable dict).

What differs, and the shim that hides it:

* building from arrays, :func:`from_dict`: ``from_dict(posterior=...)`` on
  0.2x, ``from_dict({"posterior": ...})`` on 1.x;
* building from datasets, :func:`from_datasets`: ``InferenceData(**groups)``
  on 0.2x, ``DataTree.from_dict(groups)`` on 1.x;
* a group as an ``xarray.Dataset``, :func:`group_dataset`: the group itself on
  0.2x, ``node.to_dataset()`` on 1.x; selecting several variables with
  ``idata.posterior[[names]]`` raises on a DataTree node;
* adding or replacing a group, :func:`set_group`: ``add_groups`` is gone in
  1.x, and in 0.23 ``idata[name] = dataset`` lists an existing group twice;
* group names, :func:`group_names`: ``idata.groups()`` on 0.2x, the tree's
  children on 1.x (``tree.groups`` holds paths, ``"/posterior"``);
* :func:`rhat`, :func:`ess`: 1.x raises on a Dataset and returns a DataTree
  node for a DataTree, so both take the container and return a Dataset;
* :func:`hdi`: ``hdi_prob=`` and a last dim ``hdi`` on 0.2x, ``prob=`` and
  ``ci_bound`` on 1.x;
* :func:`summary`: the same ``ci_prob`` HDI on both (1.x defaults to an 89 %
  equal-tailed interval, columns ``eti89_lb``, ``eti89_ub``);
* :func:`to_netcdf`, :func:`from_netcdf`: the engine named explicitly (1.x
  does not install one) and the file read eagerly on both;
* :func:`psislw`: ``arviz.psislw`` on 0.2x, ``arviz_stats.base.array_stats.psislw``
  on 1.x (no top-level function).
* sampler options, :func:`numpyro_options`: NumPyro's settings go through
  ``nuts_sampler_kwargs`` (with a nested ``nuts_kwargs``) in PyMC 5 and one
  flat ``nuts={...}`` in PyMC 6; :func:`nutpie_low_rank`: nutpie renamed
  ``low_rank_modified_mass_matrix=True`` to ``adaptation="low_rank"`` (0.16.x).

The PyTensor back end (C with BLAS on PyTensor 2, Numba on PyTensor 3) is set
up in :mod:`bayescal.bayes._backend`.

Assigning a variable into a group (``idata.posterior["A"] = (dims, values)``)
is the pitfall this module exists for: on an ``xarray.Dataset`` it adds the
variable, on a ``DataTree`` node it silently stores the *tuple* as a 0-d
object array (which then fails when written to netCDF). Build the group as a
Dataset and use :func:`set_group`.

Nothing here imports ArviZ or xarray at module import time.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from typing import Any

from bayescal.bayes._backend import import_arviz

__all__ = [
    "NETCDF_ENGINE",
    "arviz_major",
    "ess",
    "from_datasets",
    "from_dict",
    "from_netcdf",
    "group_dataset",
    "group_names",
    "hdi",
    "is_datatree",
    "psislw",
    "numpyro_options",
    "nutpie_low_rank",
    "pymc_major",
    "rhat",
    "set_group",
    "summary",
    "to_netcdf_bytes",
]

#: netCDF engine used to write and read posteriors (a declared dependency).
NETCDF_ENGINE = "h5netcdf"


def arviz_major() -> int:
    """Major version of the installed ArviZ (0 or 1), read without importing it."""
    return int(importlib.metadata.version("arviz").split(".")[0])


def pymc_major() -> int:
    """Major version of the installed PyMC (5 or 6), read without importing it."""
    return int(importlib.metadata.version("pymc").split(".")[0])


def numpyro_options(*, chain_method: str, dense_mass: bool) -> dict[str, Any]:
    """Keyword arguments of ``pm.sample(nuts_sampler="numpyro", ...)`` for these settings.

    Parameters
    ----------
    chain_method : {"parallel", "vectorized"}
        How NumPyro runs the chains (one device each, or batched on one).
    dense_mass : bool
        Adapt a dense mass matrix.
    """
    if pymc_major() >= 6:
        return {"nuts": {"chain_method": chain_method, "dense_mass": dense_mass}}
    return {"nuts_sampler_kwargs": {"chain_method": chain_method,
                                    "nuts_kwargs": {"dense_mass": dense_mass}}}


def nutpie_low_rank(sample: Any) -> dict[str, Any]:
    """Keyword arguments of ``nutpie.sample`` (passed as ``sample``) for a low-rank mass matrix."""
    import inspect

    if "adaptation" in inspect.signature(sample).parameters:
        return {"adaptation": "low_rank"}
    return {"low_rank_modified_mass_matrix": True}


def is_datatree(idata: Any) -> bool:
    """Whether ``idata`` is an ``xarray.DataTree`` (ArviZ 1.x) rather than InferenceData."""
    import xarray as xr

    tree = getattr(xr, "DataTree", None)  # xarray >= 2024.10
    return tree is not None and isinstance(idata, tree)


def from_dict(
    groups: Mapping[str, Mapping[str, Any]],
    *,
    dims: Mapping[str, Sequence[str]] | None = None,
    coords: Mapping[str, Any] | None = None,
) -> Any:
    """The installed ArviZ's posterior container built from arrays.

    Parameters
    ----------
    groups : mapping
        ``{group: {variable: array}}``, e.g. ``{"posterior": {"W": W}}``; the
        arrays of sampled groups have leading axes ``(chain, draw)``.
    dims : mapping, optional
        Names of the axes after ``(chain, draw)`` of each variable.
    coords : mapping, optional
        Coordinates of those dims.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
    """
    az = import_arviz()
    if arviz_major() >= 1:
        return az.from_dict(dict(groups), dims=dims, coords=coords)
    return az.from_dict(**groups, dims=dims, coords=coords)


def from_datasets(groups: Mapping[str, Any]) -> Any:
    """The installed ArviZ's container holding ``{group: xarray.Dataset}``."""
    if arviz_major() >= 1:
        import xarray as xr

        return xr.DataTree.from_dict(dict(groups))
    return import_arviz().InferenceData(**groups)


def group_names(idata: Any) -> list[str]:
    """Names of the groups of ``idata`` (``["posterior", "sample_stats", ...]``)."""
    if is_datatree(idata):
        return list(idata.children)
    return list(idata.groups())


def group_dataset(idata: Any, group: str) -> Any:
    """Group ``group`` as an ``xarray.Dataset`` (read it; change it with :func:`set_group`).

    On ArviZ 0.2x this is the group itself, on 1.x a new Dataset sharing the
    node's arrays; in both cases write a changed copy back with
    :func:`set_group`.
    """
    if group not in group_names(idata):
        raise KeyError(f"no group {group!r}; the posterior has {group_names(idata)}")
    if is_datatree(idata):
        return idata[group].to_dataset()
    return getattr(idata, group)


def set_group(idata: Any, group: str, dataset: Any) -> None:
    """Add group ``group`` to ``idata``, or replace it, in place (attrs included)."""
    if is_datatree(idata):
        idata[group] = dataset
        return
    if group in idata.groups():
        del idata[group]
    idata.add_groups({group: dataset})


def _as_dataset(result: Any) -> Any:
    """ArviZ 1.x returns a DataTree node where 0.2x returned a Dataset."""
    return result.to_dataset() if hasattr(result, "to_dataset") else result


def rhat(idata: Any, var_names: Sequence[str]) -> Any:
    """Rank-normalised split R-hat (Vehtari et al. 2021) of posterior variables.

    Returns
    -------
    xarray.Dataset
        One variable per name, with the non-sample dims of the posterior.
    """
    az = import_arviz()
    return _as_dataset(az.rhat(idata, var_names=list(var_names)))


def ess(idata: Any, var_names: Sequence[str], method: str = "bulk") -> Any:
    """Effective sample size (``method="bulk"``, ``"tail"`` or ``"sd"``) of posterior variables.

    Returns
    -------
    xarray.Dataset
    """
    az = import_arviz()
    return _as_dataset(az.ess(idata, var_names=list(var_names), method=method))


def hdi(idata: Any, var_names: Sequence[str], prob: float = 0.94) -> Any:
    """Highest-density interval of posterior variables.

    Returns
    -------
    xarray.Dataset
        Each variable has one more dim than in the posterior, last, of
        length 2: ``(lower, upper)``.
    """
    az = import_arviz()
    if arviz_major() >= 1:
        out = _as_dataset(az.hdi(idata, prob=prob, var_names=list(var_names)))
        return out.transpose(..., "ci_bound")
    return az.hdi(idata, hdi_prob=prob, var_names=list(var_names))


def summary(idata: Any, var_names: Sequence[str], *, ci_prob: float = 0.94, **kwargs: Any):
    """ArviZ's summary table with a ``ci_prob`` highest-density interval on both stacks.

    Columns (ArviZ's own names): ``mean``, ``sd``, the interval bounds
    (``hdi_3%``, ``hdi_97%`` on ArviZ 0.2x; ``hdi94_lb``, ``hdi94_ub`` on
    1.x, for ``ci_prob=0.94``), ``mcse_mean``, ``mcse_sd``, ``ess_bulk``,
    ``ess_tail``, ``r_hat``. ``kwargs`` go to ``arviz.summary``.

    Returns
    -------
    pandas.DataFrame
    """
    az = import_arviz()
    if arviz_major() >= 1:
        kwargs = {"ci_prob": ci_prob, "ci_kind": "hdi"} | kwargs
    else:
        kwargs = {"hdi_prob": ci_prob} | kwargs
    return az.summary(idata, var_names=list(var_names), **kwargs)


def to_netcdf_bytes(idata: Any) -> bytes:
    """Every group of ``idata`` as the bytes of one netCDF-4 file (engine :data:`NETCDF_ENGINE`).

    The file is built in memory, so the caller writes it with a plain write
    (:func:`bayescal._files.write_bytes`): a full disk is then an ordinary
    ``OSError``, never libhdf5 failing half-way through the target file.
    :func:`from_netcdf` reads it back on either ArviZ stack.
    """
    tree = idata if is_datatree(idata) else idata.to_datatree()
    return bytes(tree.to_netcdf(None, engine=NETCDF_ENGINE))


def from_netcdf(path: str | os.PathLike) -> Any:
    """Read a file written by :func:`to_netcdf`, fully into memory.

    Loading eagerly closes the file, so it can be replaced or deleted while
    the returned object is in use (a lazily opened file would be read again
    later, possibly after it changed).

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
    """
    az = import_arviz()
    idata = az.from_netcdf(str(path), engine=NETCDF_ENGINE)
    if is_datatree(idata):
        idata.load()
        idata.close()
        return idata
    for group in idata.groups():
        getattr(idata, group).load().close()  # the data stay; the file handle goes
    return idata


def psislw(log_ratios: Any, reff: float = 1.0) -> tuple[Any, Any]:
    """Pareto-smoothed importance sampling (Vehtari et al. 2024) of log importance ratios.

    Parameters
    ----------
    log_ratios : ndarray of shape (n_observations, n_samples)
    reff : float, default=1.0
        Relative efficiency of the draws.

    Returns
    -------
    log_weights : ndarray of shape (n_observations, n_samples)
        Smoothed and normalised (each row's weights sum to one).
    pareto_k : ndarray of shape (n_observations,)
        The estimated tail shapes (above 0.7: the estimate is unreliable).
    """
    import numpy as np

    if arviz_major() >= 1:
        from arviz_stats.base import array_stats

        # arviz-stats' array-level psislw takes the log-likelihood and negates it
        # itself (ArviZ 0.x's took the log ratios): pass -log_ratios
        lw, k = array_stats.psislw(-np.asarray(log_ratios, dtype=np.float64), reff)
    else:
        lw, k = import_arviz().psislw(np.asarray(log_ratios, dtype=np.float64), reff)
    return np.asarray(lw, dtype=np.float64), np.asarray(k, dtype=np.float64)
