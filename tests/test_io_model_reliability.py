"""Files bayescal writes are whole or absent; files it reads are read whole or refused.

Every refusal is one line naming the file and the problem (``ValueError`` or
``OSError`` in the API, exit status 2 on the command line).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _methods import FAST_METHODS

import bayescal
from bayescal._files import TEMP_PREFIX
from bayescal.calibrators.registry import make_calibrator
from bayescal.cli import main
from bayescal.datasets import make_dirgen
from bayescal.model_files import MODEL_FORMAT_VERSION, load_model, save_model
from bayescal.report import Report

K = 3


def _data(n: int = 240, k: int = K, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    q, y, _, _ = make_dirgen(n, k, rng=seed)
    return q, y


def _write_doc(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _edit(path: Path, edit: Any) -> Path:
    doc = json.loads(path.read_text())
    edit(doc)
    return _write_doc(path, doc)


def _one_line_error(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("bayescal: error: "), err
    assert "unexpected" not in err, err
    return err


def _scores_file(tmp: Path, n: int = 40) -> Path:
    q, y = _data(n, seed=3)
    path = tmp / "scores.npz"
    np.savez(path, probs=q, y=y)
    return path


def _full_disk(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOSPC) -> None:
    """Every ``Path.write_bytes`` writes a little, then fails like a full (or read-only) disk."""

    def write_bytes(self: Path, data: bytes) -> int:
        with open(self, "wb") as f:
            f.write(bytes(data)[:10])
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


# ---------------------------------------------------------------------------
# a Bayesian model, fitted once (the smallest settings of tests/test_model_files.py)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bayes_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("bayes")
    q, y = _data()
    est = make_calibrator("bayes", sampler="laplace", draws=40, chains=2,
                          random_seed=0).fit(q, y)
    save_model(est, d / "a.json")
    return {"dir": d, "est": est, "q": q}


@pytest.fixture()
def pair(bayes_model: dict[str, Any], tmp_path: Path) -> Path:
    """A fresh copy of the saved Bayesian model; returns its JSON path."""
    for name in ("a.json", "a.nc"):
        shutil.copy(bayes_model["dir"] / name, tmp_path / name)
    return tmp_path / "a.json"


def _edit_posterior(nc: Path, edit: Any) -> None:
    import h5py  # a runtime dependency (the netCDF engine): never skipped

    with h5py.File(nc, "a") as f:
        edit(f)


# ---------------------------------------------------------------------------
# 1. posterior draws: finite, and covered by the model id
# ---------------------------------------------------------------------------
def test_non_finite_posterior_draw_is_refused(pair: Path, capsys: pytest.CaptureFixture) -> None:
    def nan(f: Any) -> None:
        w = f["posterior/W"]
        w[0, 0, 0, 0] = np.nan

    _edit_posterior(pair.with_suffix(".nc"), nan)
    with pytest.raises(ValueError, match=r"a\.nc.*'W'.*non-finite") as exc:
        load_model(pair)
    assert str(exc.value).startswith(str(pair))
    scores = _scores_file(pair.parent)
    out = pair.parent / "out.npz"
    assert main(["apply", str(pair), str(scores), "-o", str(out)]) == 2
    assert "'W'" in _one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("names", [("W",), ("W", "b", "A", "c")])
def test_scaled_posterior_draws_are_refused(names: tuple[str, ...], pair: Path) -> None:
    def scale(f: Any) -> None:
        for name in names:
            v = f[f"posterior/{name}"]
            v[...] = v[...] * 10.0

    _edit_posterior(pair.with_suffix(".nc"), scale)
    with pytest.raises(ValueError, match=r"a\.nc.*model id .*modified or is corrupt"):
        load_model(pair)


def test_deleted_posterior_variable_is_named(pair: Path, capsys: pytest.CaptureFixture) -> None:
    def delete(f: Any) -> None:
        del f["posterior/W"]

    _edit_posterior(pair.with_suffix(".nc"), delete)
    with pytest.raises(ValueError, match=r"a\.nc.* lacks the variable\(s\) \['W'\]"):
        load_model(pair)
    out = pair.parent / "out.npz"
    assert main(["apply", str(pair), str(_scores_file(pair.parent)), "-o", str(out)]) == 2
    assert "['W']" in _one_line_error(capsys)


def test_model_files_of_format_version_2_are_refused_with_a_reason(pair: Path) -> None:
    assert MODEL_FORMAT_VERSION == 3
    _edit(pair, lambda d: d.update(format_version=2))
    with pytest.raises(ValueError, match="version 2 .*posterior draws.*refit"):
        load_model(pair)


# ---------------------------------------------------------------------------
# 2. a full disk while saving a Bayesian model: a plain write error, nothing left
# ---------------------------------------------------------------------------
def test_bayesian_save_on_a_full_disk_leaves_nothing(bayes_model: dict[str, Any], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _full_disk(monkeypatch)
    with pytest.raises(OSError, match=r"^cannot write .*m\.(nc|json): No space left on device$"):
        save_model(bayes_model["est"], tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


def test_bayesian_posterior_is_serialised_before_anything_is_written(
    bayes_model: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real = Path.write_bytes

    def record(self: Path, data: bytes) -> int:
        written.append(self.name.rsplit("-", 1)[-1])
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", record)
    save_model(bayes_model["est"], tmp_path / "m.json")
    assert written == ["m.nc", "m.json"]  # both through the atomic writer
    back = load_model(tmp_path / "m.json")
    q = bayes_model["q"]
    np.testing.assert_array_equal(back.predict_proba(q), bayes_model["est"].predict_proba(q))


def test_fit_on_a_full_disk_exits_2_naming_the_output(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    scores = _scores_file(tmp_path)
    out = tmp_path / "model.json"
    _full_disk(monkeypatch)
    assert main(["fit", str(scores), "--method", "temperature", "-o", str(out)]) == 2
    err = _one_line_error(capsys)
    assert err == f"bayescal: error: cannot write {out}: No space left on device\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.npz"]


def test_read_only_output_names_the_output_not_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    scores = _scores_file(tmp_path)
    model = save_model(make_calibrator("temperature").fit(*_data()), tmp_path / "t.json")
    out = tmp_path / "out.npz"
    _full_disk(monkeypatch, errno.EROFS)
    assert main(["apply", str(model), str(scores), "-o", str(out)]) == 2
    err = _one_line_error(capsys)
    assert err == f"bayescal: error: cannot write {out}: Read-only file system\n"
    assert TEMP_PREFIX not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.npz", "t.json"]


# ---------------------------------------------------------------------------
# 3. hyperparameters: the estimator's own validation, and the fitted state
# ---------------------------------------------------------------------------
HYPERPARAMETER_CASES = [
    ("temperature", {}, "max_iter", 0, "max_iter must be a positive integer; got 0"),
    ("temperature", {}, "tol", -1e-6, "tol must be a finite positive number; got -1e-06"),
    ("vector", {}, "cv", "inf", "cv must be None, an integer >= 2 or a CV splitter; got 'inf'"),
    ("binning", {}, "n_bins", 10**30, r"n_bins=1000000000000000000000000000000 contradicts"),
    ("temperature", {}, "classes", "x", r"classes='x'"),
    ("isotonic", {}, "classes", "x", r"classes='x'"),
    ("dirichlet-l2", {}, "classes", [0, 1, 5], r"classes=\[0, 1, 5\]"),
    ("dirichlet-l2", {"reg_lambda": 1e-3}, "reg_lambda", 5.0,
     r"reg_lambda=5.0 contradicts the fitted reg_lambda_ = 0.001"),
]


@pytest.mark.parametrize(("method", "params", "field", "value", "match"), HYPERPARAMETER_CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in HYPERPARAMETER_CASES])
def test_invalid_hyperparameters_are_refused(method: str, params: dict[str, Any], field: str,
                                             value: Any, match: str, tmp_path: Path) -> None:
    est = make_calibrator(method, **params).fit(*_data())
    path = save_model(est, tmp_path / "m.json")
    _edit(path, lambda d: d["hyperparameters"].update({field: value}))
    with pytest.raises(ValueError, match=match) as exc:
        load_model(path)
    message = str(exc.value)
    assert message.startswith(str(path)) and field in message and "\n" not in message


def test_valid_classes_and_fixed_strengths_load(tmp_path: Path) -> None:
    q, y = _data()
    labels = np.array(["a", "b", "c"])
    for est in (make_calibrator("dirichlet-l2", reg_lambda=1e-3, classes=labels).fit(q, labels[y]),
                make_calibrator("binning", n_bins=7).fit(q, y),
                make_calibrator("temperature", classes=labels).fit(q, labels[y])):
        back = load_model(save_model(est, tmp_path / "m.json", overwrite=True))
        np.testing.assert_array_equal(back.predict_proba(q), est.predict_proba(q))


# ---------------------------------------------------------------------------
# 4. one-vs-rest models: as many maps as the classes need
# ---------------------------------------------------------------------------
OVR_FIELDS = {"sigmoid": ("coef_",), "beta": ("coef_",),
              "isotonic": ("x_thresholds_", "y_thresholds_"),
              "binning": ("bin_edges_", "bin_values_")}


@pytest.mark.parametrize("method", list(OVR_FIELDS))
@pytest.mark.parametrize("change", ["drop", "add"])
def test_one_vs_rest_map_count_is_checked(method: str, change: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    est = make_calibrator(method).fit(*_data())
    path = save_model(est, tmp_path / "m.json")

    def edit(doc: dict[str, Any]) -> None:
        for name in OVR_FIELDS[method]:
            maps = doc["fitted"][name]
            doc["fitted"][name] = maps[:-1] if change == "drop" else [*maps, maps[0]]

    _edit(path, edit)
    n = K - 1 if change == "drop" else K + 1
    with pytest.raises(ValueError, match=rf"holds {n} one-vs-rest maps; {K} classes need {K}"):
        load_model(path)
    out = tmp_path / "o.npz"
    assert main(["apply", str(path), str(_scores_file(tmp_path)), "-o", str(out)]) == 2
    _one_line_error(capsys)


# ---------------------------------------------------------------------------
# 5. a failed report leaves nothing, so the rerun works
# ---------------------------------------------------------------------------
def _report() -> Report:
    q, y = _data(60)
    report = Report(title="t", keys=["scores"])
    report.add(y, q, image="reliability_uncalibrated.png", scores="uncalibrated")
    return report


def test_failed_report_leaves_no_partial_report(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report"
    report = _report()
    with monkeypatch.context() as m:
        _full_disk(m)
        with pytest.raises(OSError, match=r"cannot write .*report.*: No space left on device"):
            report.write(target)
    assert list(tmp_path.iterdir()) == []
    path = report.write(target)  # the rerun is not refused
    assert path == target / "report.html"
    assert sorted(p.name for p in target.iterdir()) == [
        "metrics.csv", "reliability_uncalibrated.png", "report.html"]


def test_report_into_an_existing_directory_keeps_other_files(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    target = tmp_path / "report"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    report = _report()
    with monkeypatch.context() as m:
        _full_disk(m)
        with pytest.raises(OSError):
            report.write(target)
    assert [p.name for p in tmp_path.iterdir()] == ["report"]
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    report.write(target)
    with pytest.raises(FileExistsError, match="report files already exist"):
        report.write(target)
    report.write(target, overwrite=True)
    assert len(list(target.iterdir())) == 4


def test_evaluate_on_a_full_disk_then_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    scores = _scores_file(tmp_path)
    target = tmp_path / "rep"
    with monkeypatch.context() as m:
        _full_disk(m)
        assert main(["evaluate", str(scores), "--report", str(target)]) == 2
    assert "No space left on device" in _one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.npz"]
    assert main(["evaluate", str(scores), "--report", str(target)]) == 0


# ---------------------------------------------------------------------------
# 6. every refusal names the file
# ---------------------------------------------------------------------------
def test_npy_header_claiming_more_than_the_file_holds(tmp_path: Path) -> None:
    from bayescal._files import read_npy

    path = tmp_path / "huge.npy"
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**12, 3)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(np.zeros(6).tobytes())
    with pytest.raises(ValueError, match=r"huge\.npy: its header claims shape "
                                         r"\(1000000000000, 3\) .* but the file holds 48"):
        read_npy(path)
    good = tmp_path / "good.npy"
    np.save(good, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(read_npy(good), np.arange(6.0).reshape(2, 3))
    (tmp_path / "bad.npy").write_bytes(b"not npy")
    with pytest.raises(ValueError, match=r"bad\.npy: not a \.npy file"):
        read_npy(tmp_path / "bad.npy")


def test_huge_json_integer_is_refused_naming_the_file(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    path = save_model(make_calibrator("temperature").fit(*_data()), tmp_path / "t.json")
    path.write_text(path.read_text().replace('"max_iter": 200', '"max_iter": ' + "9" * 5000))
    with pytest.raises(ValueError, match=r"t\.json: .*integer of 5000 digits"):
        load_model(path)
    out = tmp_path / "o.npz"
    assert main(["apply", str(path), str(_scores_file(tmp_path)), "-o", str(out)]) == 2
    assert str(path) in _one_line_error(capsys)


def test_reproduce_with_a_missing_data_dir_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    missing, out = tmp_path / "missing", tmp_path / "out"
    assert main(["reproduce", "--suite", "uci", "--data-dir", str(missing), "--out", str(out),
                 "--datasets", "iris", "--classifiers", "nbayes", "--methods", "uncal",
                 "--no-progress"]) == 2
    assert _one_line_error(capsys) == (f"bayescal: error: data directory {missing} does not "
                                       "exist\n")
    assert not out.exists()


# ---------------------------------------------------------------------------
# 7. one persistence API: est.save(path) and bayescal.load(path)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", FAST_METHODS)
def test_every_estimator_saves_and_bayescal_loads(method: str, tmp_path: Path) -> None:
    q, y = _data()
    est = make_calibrator(method).fit(q, y)
    path = est.save(tmp_path / "m.json")
    assert path == tmp_path / "m.json"
    assert json.loads(path.read_text())["format"] == "bayescal-model"
    back = bayescal.load(path)
    np.testing.assert_allclose(back.predict_proba(q), est.predict_proba(q), rtol=0, atol=1e-12)


def test_bayesian_save_writes_the_cli_format(bayes_model: dict[str, Any], tmp_path: Path) -> None:
    est = bayes_model["est"]
    path = est.save(tmp_path / "m.json")
    assert json.loads(path.read_text())["posterior"] == "m.nc"  # JSON text, not HDF5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.nc"]
    back = bayescal.load(path)
    q = bayes_model["q"]
    np.testing.assert_array_equal(back.predict_proba(q), est.predict_proba(q))
    assert back.model_id_ == est.model_id_


@pytest.mark.parametrize("name", ["m.nc", "m.pkl", "m"])
def test_wrong_extensions_say_what_to_use(name: str, bayes_model: dict[str, Any],
                                          tmp_path: Path) -> None:
    est = make_calibrator("temperature").fit(*_data())
    with pytest.raises(ValueError, match=r"must end in \.json"):
        est.save(tmp_path / name)
    with pytest.raises(ValueError, match=r"must end in \.json"):
        bayes_model["est"].save(tmp_path / name)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match=r"load the model file a\.json beside it"):
        bayescal.load(bayes_model["dir"] / "a.nc")


def test_load_is_public() -> None:
    assert "load" in bayescal.__all__ and "load" in dir(bayescal)
    assert bayescal.load is load_model
