"""Every shim of bayescal.bayes._compat on the installed ArviZ stack.

The suite runs on both supported stacks (PyMC 5 + ArviZ 0.2x, PyMC 6 +
ArviZ 1.x; see ``make test``), so each test here checks its shim against
numbers computed by hand, not against the other stack.
"""

from __future__ import annotations

import importlib.metadata
import json

import numpy as np
import pytest
import xarray as xr
from scipy.special import ndtri
from scipy.stats import rankdata

from bayescal.bayes import _compat
from bayescal.bayes._backend import pytensor_major

K = 3


def _major(dist: str) -> int:
    return int(importlib.metadata.version(dist).split(".")[0])


@pytest.fixture
def draws(rng):
    """W of shape (chains=4, draws=500, 3, 3) and b of shape (4, 500, 3), iid normal."""
    return rng.normal(size=(4, 500, K, K)), rng.normal(size=(4, 500, K))


@pytest.fixture
def idata(draws):
    W, b = draws
    return _compat.from_dict(
        {"posterior": {"W": W, "b": b}},
        dims={"W": ["class_out", "class_in"], "b": ["class_out"]},
        coords={"class_out": np.arange(K), "class_in": np.arange(K)},
    )


def test_installed_stack_is_a_supported_one():
    """ArviZ 0.x with PyMC 5 / PyTensor 2, or ArviZ 1.x with PyMC 6 / PyTensor 3."""
    import arviz as az

    assert _compat.arviz_major() == int(az.__version__.split(".")[0])
    stack = (_compat.arviz_major(), _major("pymc"), pytensor_major())
    assert stack in {(0, 5, 2), (1, 6, 3)}, stack


def test_from_dict_gives_the_native_container(idata, draws):
    W, b = draws
    native = xr.DataTree if _compat.arviz_major() >= 1 else __import__("arviz").InferenceData
    assert type(idata) is native
    assert _compat.is_datatree(idata) == (_compat.arviz_major() >= 1)
    assert _compat.group_names(idata) == ["posterior"]
    assert idata.posterior["W"].dims == ("chain", "draw", "class_out", "class_in")
    assert idata.posterior.sizes["chain"] == 4 and idata.posterior.sizes["draw"] == 500
    np.testing.assert_array_equal(idata.posterior["W"].values, W)
    np.testing.assert_array_equal(idata.posterior["b"].values, b)
    assert set(idata.posterior.data_vars) == {"W", "b"}


def test_group_dataset_and_from_datasets(idata):
    post = _compat.group_dataset(idata, "posterior")
    assert isinstance(post, xr.Dataset)
    only_b = _compat.from_datasets({"posterior": post[["b"]]})  # [[names]]: a Dataset's own API
    assert type(only_b) is type(idata)
    assert list(only_b.posterior.data_vars) == ["b"]
    np.testing.assert_array_equal(only_b.posterior["b"].values, idata.posterior["b"].values)
    with pytest.raises(KeyError, match="no group 'sample_stats'"):
        _compat.group_dataset(idata, "sample_stats")


def test_set_group_adds_and_replaces_in_place(idata, draws):
    W, _ = draws
    post = _compat.group_dataset(idata, "posterior")
    post = post.assign(A=(("chain", "draw", "class_out", "class_in"), W + 1.0))
    post.attrs["note"] = "kept"
    _compat.set_group(idata, "posterior", post)
    assert idata.posterior["A"].dims == ("chain", "draw", "class_out", "class_in")
    np.testing.assert_array_equal(idata.posterior["A"].values, W + 1.0)
    assert idata.posterior.attrs["note"] == "kept"

    const = xr.Dataset({"counts": (("k",), np.arange(3.0))})
    _compat.set_group(idata, "constant_data", const)
    _compat.set_group(idata, "constant_data", const + 1.0)  # replace, never list it twice
    assert sorted(_compat.group_names(idata)) == ["constant_data", "posterior"]
    np.testing.assert_array_equal(idata.constant_data["counts"].values, [1.0, 2.0, 3.0])


def test_posterior_attrs_update_in_place(idata):
    """Estimators stamp their config into posterior.attrs: a mutable dict on both stacks."""
    idata.posterior.attrs.update({"bayescal_x": "1"})
    assert idata.posterior.attrs["bayescal_x"] == "1"


def _split_rhat_by_hand(x: np.ndarray) -> float:
    """Rank-normalised split R-hat, max of bulk and folded (Vehtari et al. 2021)."""

    def classic(z):  # z: (chains, draws)
        n = z.shape[1]
        b = n * z.mean(axis=1).var(ddof=1)
        w = z.var(axis=1, ddof=1).mean()
        return np.sqrt(((n - 1) / n * w + b / n) / w)

    def rank_normal(z):
        r = rankdata(z, method="average").reshape(z.shape)
        return ndtri((r - 0.375) / (z.size + 0.25))

    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, -half:]], axis=0)
    folded = np.abs(split - np.median(split))
    return max(classic(rank_normal(split)), classic(rank_normal(folded)))


def test_rhat_equals_the_definition(idata, draws, rng):
    W, b = draws
    r = _compat.rhat(idata, ["W", "b"])
    assert isinstance(r, xr.Dataset) and r["W"].shape == (K, K) and r["b"].shape == (K,)
    for i in range(K):
        assert float(r["b"].values[i]) == pytest.approx(_split_rhat_by_hand(b[..., i]), abs=1e-10)
    assert float(r["W"].values[1, 2]) == pytest.approx(_split_rhat_by_hand(W[..., 1, 2]), abs=1e-10)
    # chains that disagree: R-hat far above 1
    apart = rng.normal(size=(4, 500)) + np.arange(4)[:, None]
    shifted = _compat.from_dict({"posterior": {"m": apart}})
    assert float(_compat.rhat(shifted, ["m"])["m"]) > 1.5


def test_ess_bulk_of_iid_and_autocorrelated_chains(idata, rng):
    e = _compat.ess(idata, ["W", "b"], method="bulk")
    assert isinstance(e, xr.Dataset) and e["W"].shape == (K, K)
    S = 4 * 500
    assert np.all((e["b"].values > 0.8 * S) & (e["b"].values < 1.25 * S)), e["b"].values
    # AR(1) with rho = 0.9: ESS ~ S (1 - rho) / (1 + rho)
    rho, n = 0.9, 4000
    z = rng.normal(size=(4, n))
    ar = np.empty_like(z)
    ar[:, 0] = z[:, 0] / np.sqrt(1 - rho**2)
    for t in range(1, n):
        ar[:, t] = rho * ar[:, t - 1] + z[:, t]
    ess_ar = float(_compat.ess(_compat.from_dict({"posterior": {"m": ar}}), ["m"])["m"])
    expected = 4 * n * (1 - rho) / (1 + rho)
    assert 0.75 * expected < ess_ar < 1.33 * expected, (ess_ar, expected)
    tail = _compat.ess(idata, ["b"], method="tail")
    assert np.all(tail["b"].values > 0)


def _shortest_interval(v: np.ndarray, prob: float) -> tuple[float, float]:
    v = np.sort(v.ravel())
    m = int(np.floor(prob * v.size))
    i = int(np.argmin(v[m:] - v[: v.size - m]))
    return v[i], v[i + m]


def test_hdi_is_the_shortest_interval(idata, draws):
    W, b = draws
    h = _compat.hdi(idata, ["W", "b"], prob=0.9)
    assert isinstance(h, xr.Dataset)
    assert h["W"].shape == (K, K, 2) and h["b"].shape == (K, 2)
    for i in range(K):
        np.testing.assert_allclose(h["b"].values[i], _shortest_interval(b[..., i], 0.9), atol=1e-12)
    np.testing.assert_allclose(h["W"].values[2, 0], _shortest_interval(W[..., 2, 0], 0.9),
                               atol=1e-12)


def test_summary_uses_the_requested_hdi_on_both_stacks(idata, draws):
    _, b = draws
    s = _compat.summary(idata, ["b"], ci_prob=0.9, round_to="none")
    assert list(s.index) == ["b[0]", "b[1]", "b[2]"]
    assert {"mean", "sd", "ess_bulk", "ess_tail", "r_hat", "mcse_mean", "mcse_sd"} <= set(s.columns)
    bounds = [c for c in s.columns if c.startswith("hdi")]
    expected = ["hdi90_lb", "hdi90_ub"] if _compat.arviz_major() >= 1 else ["hdi_5%", "hdi_95%"]
    assert bounds == expected
    flat = b.reshape(-1, K)
    np.testing.assert_allclose(s["mean"].values, flat.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(s["sd"].values, flat.std(axis=0, ddof=1), atol=1e-12)
    h = _compat.hdi(idata, ["b"], prob=0.9)["b"].values
    np.testing.assert_allclose(s[bounds].values, h, atol=1e-12)


def test_netcdf_round_trip_is_eager(idata, tmp_path):
    const = xr.Dataset({"bayescal_counts": (("k",), np.array([3.0, 4.0, 5.0]))})
    _compat.set_group(idata, "constant_data", const)
    idata.posterior.attrs["bayescal_config"] = json.dumps({"a": [1, 2]})
    path = tmp_path / "post.nc"
    path.write_bytes(_compat.to_netcdf_bytes(idata))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89HDF\r\n\x1a\n"  # netCDF-4 (HDF5), the declared engine
    loaded = _compat.from_netcdf(path)
    path.unlink()  # read fully into memory: the file is no longer needed
    assert type(loaded) is type(idata)
    assert sorted(_compat.group_names(loaded)) == ["constant_data", "posterior"]
    for name in ("W", "b"):
        np.testing.assert_array_equal(loaded.posterior[name].values, idata.posterior[name].values)
        assert loaded.posterior[name].dims == idata.posterior[name].dims
    np.testing.assert_array_equal(loaded.posterior["class_in"].values, np.arange(K))
    np.testing.assert_array_equal(loaded.constant_data["bayescal_counts"].values, [3.0, 4.0, 5.0])
    assert json.loads(loaded.posterior.attrs["bayescal_config"]) == {"a": [1, 2]}
    # a loaded container can be changed and written again
    _compat.set_group(loaded, "constant_data", const * 2.0)
    path.write_bytes(_compat.to_netcdf_bytes(loaded))
    again = _compat.from_netcdf(path)
    np.testing.assert_array_equal(again.constant_data["bayescal_counts"].values, [6.0, 8.0, 10.0])


def test_netcdf_rewritten_in_place_is_read_afresh(idata, tmp_path):
    """A file read, then rewritten in place (same inode) and read again, gives the new
    content: reading leaves no file handle open whose cached attributes could be
    returned (ArviZ 0.2x's reader kept xarray's handles open until this was closed)."""
    path = tmp_path / "post.nc"
    _compat.set_group(idata, "constant_data",
                      xr.Dataset({"bayescal_counts": (("k",), np.array([3.0, 4.0, 5.0]))}))
    idata.posterior.attrs["bayescal_config"] = json.dumps({"v": 1, "pad": "x" * 500})
    path.write_bytes(_compat.to_netcdf_bytes(idata))
    first = _compat.from_netcdf(path)
    assert json.loads(first.posterior.attrs["bayescal_config"])["v"] == 1
    group = _compat.group_dataset(first, "posterior").copy()
    group.attrs["bayescal_config"] = json.dumps({"v": 2})
    _compat.set_group(first, "posterior", group)
    path.write_bytes(_compat.to_netcdf_bytes(first))  # in place: the same inode
    second = _compat.from_netcdf(path)
    assert json.loads(second.posterior.attrs["bayescal_config"]) == {"v": 2}


def test_numpyro_options_match_the_installed_pymc():
    """PyMC 5: nested nuts_sampler_kwargs; PyMC 6: one flat nuts={...} (see test_bayes_samplers)."""
    import inspect

    from bayescal.bayes._backend import import_pymc

    opts = _compat.numpyro_options(chain_method="vectorized", dense_mass=True)
    params = inspect.signature(import_pymc().sample).parameters
    if _compat.pymc_major() >= 6:
        assert opts == {"nuts": {"chain_method": "vectorized", "dense_mass": True}}
        assert any(p.kind is p.VAR_KEYWORD for p in params.values())  # nuts= goes in **kwargs
    else:
        assert opts == {"nuts_sampler_kwargs": {"chain_method": "vectorized",
                                                "nuts_kwargs": {"dense_mass": True}}}
        assert "nuts_sampler_kwargs" in params


def test_nutpie_low_rank_is_a_parameter_of_the_given_function():
    def new(*, adaptation="diag"):
        return adaptation

    def old(*, low_rank_modified_mass_matrix=False):
        return low_rank_modified_mass_matrix

    assert new(**_compat.nutpie_low_rank(new)) == "low_rank"
    assert old(**_compat.nutpie_low_rank(old)) is True
