"""load_uci: local copies, checksummed download cache; never the network."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from bayescal import datasets
from bayescal.datasets import PAPER_UCI_DATASETS, UCI_CHECKSUMS, load_uci


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def forbidden(url, dest):
        raise AssertionError(f"network access attempted: {url}")

    monkeypatch.setattr(datasets, "_download", forbidden)


@pytest.fixture
def uci_dir(shared_data: Path) -> Path:
    return shared_data / "uci"


def test_loads_local_copy(uci_dir):
    ds = load_uci("iris", data_home=uci_dir)
    assert ds.X.shape == (150, 4) and ds.X.dtype == np.float64
    assert ds.y.shape == (150,) and set(np.unique(ds.y)) == {0, 1, 2}
    assert ds.n_classes == 3 and ds.name == "iris"


def test_paper_datasets_all_present_with_the_published_checksums(uci_dir):
    assert len(PAPER_UCI_DATASETS) == 21
    for name, digest in UCI_CHECKSUMS.items():
        data = (uci_dir / f"{name}.npz").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown UCI dataset 'irises'"):
        load_uci("irises")


def _fake_download(uci_dir, calls, payload=None):
    def fetch(url, dest):
        calls.append(url)
        name = url.rsplit("/", 1)[-1]
        if payload is None:
            shutil.copyfile(uci_dir / name, dest)
        else:
            Path(dest).write_bytes(payload)

    return fetch


def test_downloads_into_cache_once(uci_dir, tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setenv("BAYESCAL_DATA", str(tmp_path / "cache"))
    monkeypatch.setenv("BAYESCAL_DATA_URL", "https://example.invalid/uci/{name}.npz")
    monkeypatch.setattr(datasets, "_download", _fake_download(uci_dir, calls))
    ds = load_uci("glass", data_home=tmp_path / "empty")
    assert calls == ["https://example.invalid/uci/glass.npz"]
    assert (tmp_path / "cache" / "glass.npz").is_file()
    again = load_uci("glass")
    assert calls == ["https://example.invalid/uci/glass.npz"]  # served from the cache
    np.testing.assert_array_equal(again.X, ds.X)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["glass.npz"]


def test_checksum_mismatch_is_rejected_and_discarded(uci_dir, tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setenv("BAYESCAL_DATA", str(tmp_path))
    monkeypatch.setattr(datasets, "_download", _fake_download(uci_dir, calls, b"not a dataset"))
    with pytest.raises(OSError, match="checksum mismatch for 'iris'"):
        load_uci("iris")
    assert list(tmp_path.iterdir()) == []


def test_corrupted_cache_file_is_set_aside_and_fetched_again(uci_dir, tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setenv("BAYESCAL_DATA", str(tmp_path))
    monkeypatch.setenv("BAYESCAL_DATA_URL", "https://example.invalid/uci/{name}.npz")
    monkeypatch.setattr(datasets, "_download", _fake_download(uci_dir, calls))
    good = (uci_dir / "zoo.npz").read_bytes()
    (tmp_path / "zoo.npz").write_bytes(good[: len(good) // 2])  # truncated
    with pytest.warns(UserWarning, match=r"cached file .*zoo.npz has sha256 .* moved aside as "
                                         r"zoo.npz.damaged-\d+T\d+ and downloading"):
        ds = load_uci("zoo")
    assert calls == ["https://example.invalid/uci/zoo.npz"]
    assert ds.X.shape[0] > 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[0] == "zoo.npz" and names[1].startswith("zoo.npz.damaged-") and len(names) == 2


def test_truncated_local_file_is_named(uci_dir, tmp_path):
    good = (uci_dir / "iris.npz").read_bytes()
    (tmp_path / "iris.npz").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"iris.npz: damaged or truncated .npz archive"):
        load_uci("iris", data_home=tmp_path)


@pytest.mark.parametrize("template", ["https://x.invalid/{0}.npz", "https://x.invalid/a.npz",
                                      "https://x.invalid/{name}/{other}.npz",
                                      "https://x.invalid/{name.npz"])
def test_bad_data_url_template_is_refused(template, tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESCAL_DATA", str(tmp_path))
    monkeypatch.setenv("BAYESCAL_DATA_URL", template)
    with pytest.raises(ValueError, match="BAYESCAL_DATA_URL=.* placeholder"):
        load_uci("iris")
    assert list(tmp_path.iterdir()) == []


def test_bad_local_file(tmp_path):
    np.savez(tmp_path / "iris.npz", X=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"lacks the arrays \['class_names', 'y'\]"):
        load_uci("iris", data_home=tmp_path)
