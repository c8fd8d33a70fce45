"""``reproduce``: damaged cache entries are named, set aside and recomputed; one run per --out."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bayescal._files import DirectoryLock, LockedError
from bayescal.cli import main
from bayescal.datasets import load_network_outputs, make_dirgen
from bayescal.experiments import reproduce
from bayescal.experiments.cache import CacheWarning, SettingCache

SMALL = {"datasets": ["iris"], "classifiers": ["nbayes"], "methods": ["uncal", "beta"],
         "n_repeats": 1, "n_folds": 2}  # fmt: skip
COLS = ["dataset", "classifier", "fold", "method", "log_loss", "brier", "accuracy"]


def _run(shared_data: Path, out: Path) -> pd.DataFrame:
    return reproduce("uci", data_dir=shared_data / "uci", out=out, progress=False, **SMALL)


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    return df[COLS].sort_values(["fold", "method"]).reset_index(drop=True)


def _computed(out: Path) -> int:
    return json.loads((out / "uci_manifest.json").read_text())["settings_computed_this_run"]


@pytest.fixture(scope="module")
def first_run(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("reproduce") / "out"
    return out, _run(shared_data, out)


def _damage(case: str, cache: Path) -> Path:
    json_file = sorted(cache.glob("*.json"))[0]
    npz = json_file.with_suffix(".npz")
    if case == "truncated npz":
        raw = npz.read_bytes()
        npz.write_bytes(raw[: len(raw) // 2])
        return npz
    if case == "garbage npz":
        npz.write_bytes(b"PK\x03\x04 not really")
        return npz
    if case == "npz missing":
        npz.unlink()
        return json_file
    if case == "truncated json":
        text = json_file.read_text()
        json_file.write_text(text[: len(text) // 2])
        return json_file
    if case == "json of the wrong shape":
        json_file.write_text('{"rows": 3}')
        return json_file
    if case == "json missing":
        json_file.unlink()
        return npz
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["truncated npz", "garbage npz", "npz missing",
                                  "truncated json", "json of the wrong shape", "json missing"])
def test_damaged_cache_entry_is_named_set_aside_and_recomputed(
    case: str, first_run: tuple[Path, Any], shared_data: Path, tmp_path: Path
) -> None:
    src, df = first_run
    out = tmp_path / "out"
    shutil.copytree(src, out)
    (cache,) = (out / "cache").iterdir()
    damaged = _damage(case, cache)
    with pytest.warns(CacheWarning, match=r"damaged cache entry .*iris__nbayes__0__0.json: "
                                          r".*moved aside as .*\.damaged-\d+T\d+"):
        df2 = _run(shared_data, out)
    assert _computed(out) == 1
    pd.testing.assert_frame_equal(_frame(df), _frame(df2))
    aside = sorted(p.name for p in cache.iterdir() if ".damaged-" in p.name)
    assert aside and all(p.startswith(damaged.stem) for p in aside)
    assert len(list(cache.glob("*.json"))) == 2 and len(list(cache.glob("*.npz"))) == 2
    # the recomputed entry is sound: a third run computes nothing and warns nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _run(shared_data, out)
    assert _computed(out) == 0


def test_cache_loads_never_raise_on_damage(tmp_path: Path) -> None:
    cache = SettingCache(tmp_path)
    key = ("iris", "nbayes", 0, 0)
    cache.save(key, [{"method": "m", "log_loss": 0.5, "fingerprint": "f"}],
               {"y_test": np.arange(3), "proba:m": np.ones((3, 2)) / 2})
    cache.path(key).with_suffix(".npz").write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="iris__nbayes__0__0.json: .*not a readable .npz"):
        assert cache.missing(key, {"m": "f"}) == ["m"]
    assert cache.load(key) == {} and cache.load_arrays(key) == {}
    cache.path(key).write_text("{")
    with pytest.warns(CacheWarning, match="unreadable JSON"):
        assert cache.all_rows() == []


def test_second_run_on_the_same_out_is_refused(shared_data: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    with DirectoryLock(out, name="reproduce.lock"):
        with pytest.raises(LockedError, match="is in use by another bayescal run"):
            _run(shared_data, out)
        assert main(["reproduce", "--suite", "uci", "--data-dir", str(shared_data / "uci"),
                     "--out", str(out), "--datasets", "iris", "--classifiers", "nbayes",
                     "--methods", "uncal", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bayescal: error: {out} is in use by another bayescal run (pid ")
        assert err.count("\n") == 1
        assert sorted(p.name for p in out.iterdir()) == ["reproduce.lock"]  # nothing written


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--repeats", "0", "argument --repeats: must be at least 1; got 0"),
    ("--folds", "0", "argument --folds: must be at least 2; got 0"),
    ("--folds", "1", "argument --folds: must be at least 2; got 1"),
    ("--jobs", "0", "argument --jobs: must be -1 (all cores) or at least 1; got 0"),
    ("--repeats", "two", "argument --repeats: expected an integer; got 'two'"),
])
def test_counts_are_checked_on_the_command_line(option: str, value: str, message: str,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--suite", "uci", "--out", str(tmp_path / "o"), option, value])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_repeats": 0}, "n_repeats must be an integer >= 1; got 0"),
    ({"n_folds": 0}, "n_folds must be an integer >= 2; got 0"),
    ({"n_folds": 1}, "n_folds must be an integer >= 2; got 1"),
    ({"jobs": 0}, r"jobs \(-1: all cores\) must be an integer >= 1; got 0"),
])
def test_counts_are_checked_in_the_api(kwargs: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        reproduce("uci", data_dir=None, out=tmp_path / "o", datasets=["iris"], **kwargs)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("arrays", "message"), [
    ({"idx_val": None}, r"lacks the arrays \['idx_val'\]"),
    ({"idx_val": np.arange(5.0)}, "idx_val must be a non-empty 1-D integer array"),
    ({"idx_val": np.array([0, 0, 1])}, "idx_val must hold distinct row numbers"),
    ({"idx_test": np.array([299, 300])}, r"idx_test must hold distinct row numbers in 0..299"),
    ({"idx_test": np.arange(3)}, "idx_val and idx_test share rows"),
    ({"y": np.full(300, 7)}, "y has labels outside the classes 0..2"),
])
def test_network_output_files_are_checked(arrays: dict, message: str, tmp_path: Path) -> None:
    q, y, _, _ = make_dirgen(300, 3, rng=0)
    base = {"probs": q.astype(np.float32), "y": y, "idx_val": np.arange(0, 150),
            "idx_test": np.arange(150, 300)}
    base.update(arrays)
    np.savez(tmp_path / "net.npz", **{k: v for k, v in base.items() if v is not None})
    with pytest.raises(ValueError, match=r"net.npz.*" + message):
        load_network_outputs(tmp_path / "net.npz")


def test_damaged_cache_through_the_command_line(first_run: tuple[Path, Any], shared_data: Path,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    src, _ = first_run
    out = tmp_path / "out"
    shutil.copytree(src, out)
    (cache,) = (out / "cache").iterdir()
    damaged = _damage("truncated npz", cache)
    argv = ["reproduce", "--suite", "uci", "--data-dir", str(shared_data / "uci"), "--out",
            str(out), "--datasets", "iris", "--classifiers", "nbayes", "--methods", "uncal,beta",
            "--repeats", "1", "--folds", "2", "--no-progress"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("bayescal: warning: CacheWarning")]
    assert f"damaged cache entry {damaged.with_suffix('.json')}" in line
    assert _computed(out) == 1
