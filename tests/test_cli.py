"""The command line end to end: fit -> apply -> evaluate, model files, bad files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _methods import BAYES_METHODS, FAST_METHODS

from bayescal.calibrators.registry import make_calibrator, method_name
from bayescal.cli import main
from bayescal.datasets import make_dirgen
from bayescal.io import hash_training_data, load_model, read_scores, save_model

ROOT = Path(__file__).resolve().parents[1]
K = 4


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "bayescal", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    q, y, alpha, pi = make_dirgen(600, K, rng=3)
    q2, y2, _, _ = make_dirgen(300, K, rng=4, alpha=alpha, pi=pi)
    return {"q": q, "y": y, "q2": q2, "y2": y2}


@pytest.fixture
def files(tmp_path: Path, data: dict[str, np.ndarray]) -> Path:
    np.savez(tmp_path / "train.npz", probs=data["q"], y=data["y"])
    np.savez(tmp_path / "test.npz", probs=data["q2"], y=data["y2"])
    np.save(tmp_path / "test.npy", data["q2"])
    np.save(tmp_path / "test_labels.npy", data["y2"])
    header = ",".join([f"p{j}" for j in range(K)] + ["y"])
    np.savetxt(tmp_path / "test.csv", np.column_stack([data["q2"], data["y2"]]),
               delimiter=",", header=header, comments="", fmt="%.17g")
    return tmp_path


def outputs(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# ---------------------------------------------------------------------------
# end to end through a subprocess
# ---------------------------------------------------------------------------
def test_fit_apply_evaluate_end_to_end(files: Path, data: dict[str, np.ndarray]) -> None:
    r = run_cli("fit", "train.npz", "--method", "dirichlet-odir", "-o", "model.json", cwd=files)
    assert r.returncode == 0, r.stderr
    doc = json.loads((files / "model.json").read_text())
    assert doc["method"] == "dirichlet-odir" and doc["input"] == "probs"
    assert doc["training_data_sha256"] == hash_training_data(data["q"], data["y"])
    W, b, A, c = (np.array(doc[key]) for key in ("W", "b", "A", "c"))
    assert W.shape == (K, K) and b.shape == (K,) and A.shape == (K, K)
    assert (A >= 0).all() and np.isclose(c.sum(), 1.0)
    assert doc["hyperparameters"]["reg"] == "odir"
    assert doc["estimator"] == "DirichletCalibrator" and doc["fitted"]["converged_"] is True

    r = run_cli("apply", "model.json", "test.csv", "-o", "calibrated.npz", cwd=files)
    assert r.returncode == 0, r.stderr
    with np.load(files / "calibrated.npz") as f:
        applied = f["probs"]
    # the same model fitted in this process, and the model reloaded from JSON
    direct = make_calibrator("dirichlet-odir").fit(data["q"], data["y"]).predict_proba(data["q2"])
    reloaded = load_model(files / "model.json").predict_proba(data["q2"])
    np.testing.assert_allclose(applied, reloaded, rtol=0, atol=1e-12)
    np.testing.assert_allclose(applied, direct, rtol=0, atol=1e-10)

    r = run_cli("evaluate", "test.npy", "--labels", "test_labels.npy", "--model", "model.json",
                "--report", "report", cwd=files)
    assert r.returncode == 0, r.stderr
    assert "uncalibrated" in r.stdout and "calibrated (dirichlet-odir)" in r.stdout
    assert {"report.html", "metrics.csv", "reliability_uncalibrated.png",
            "reliability_calibrated.png"} <= outputs(files / "report")


def test_python_dash_m_help(tmp_path: Path) -> None:
    r = run_cli("--help", cwd=tmp_path)
    assert r.returncode == 0
    for command in ("fit", "apply", "evaluate", "demo", "reproduce"):
        assert command in r.stdout


def test_bad_file_through_subprocess_exits_2(files: Path) -> None:
    q = np.load(files / "test.npy")
    q[5, 1] = np.nan
    np.savez(files / "nan.npz", probs=q, y=np.zeros(len(q), dtype=int))
    r = run_cli("fit", "nan.npz", "--method", "temperature", "-o", "m.json", cwd=files)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("bayescal: error:") and "NaN or inf" in r.stderr
    assert not (files / "m.json").exists()


# ---------------------------------------------------------------------------
# model files: exact round trip for every method
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", FAST_METHODS)
@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_model_json_round_trip(method: str, kind: str, tmp_path: Path,
                               data: dict[str, np.ndarray]) -> None:
    scores = data["q"] if kind == "probs" else np.log(data["q"] + 1e-3) + 2.0
    test = data["q2"] if kind == "probs" else np.log(data["q2"] + 1e-3) - 1.0
    est = make_calibrator(method, input=kind).fit(scores, data["y"])
    path = save_model(est, tmp_path / "m.json",
                      training_hash=hash_training_data(scores, data["y"]))
    back = load_model(path)
    assert type(back) is type(est) and method_name(back) == method
    def plain(e):  # deep parameters, nested estimators compared by their own parameters
        return {k: v for k, v in e.get_params(deep=True).items() if not hasattr(v, "get_params")}

    assert plain(back) == plain(est)
    np.testing.assert_allclose(back.predict_proba(test), est.predict_proba(test), rtol=0,
                               atol=1e-12)
    with pytest.raises(FileExistsError, match="already exists"):
        save_model(est, path)
    assert outputs(tmp_path) == {"m.json"}  # no temporary files left behind


def test_training_hash_independent_of_file_format(files: Path) -> None:
    a = read_scores(files / "test.npz", need_labels=True)
    b = read_scores(files / "test.csv", need_labels=True)
    c = read_scores(files / "test.npy", labels=files / "test_labels.npy", need_labels=True)
    assert hash_training_data(a.scores, a.y) == hash_training_data(b.scores, b.y)
    assert hash_training_data(a.scores, a.y) == hash_training_data(c.scores, c.y)
    assert hash_training_data(a.scores, a.y) != hash_training_data(a.scores[1:], a.y[1:])


def test_csv_output_round_trip(files: Path, data: dict[str, np.ndarray]) -> None:
    assert main(["fit", str(files / "train.npz"), "--method", "vector",
                 "-o", str(files / "v.json")]) == 0
    assert main(["apply", str(files / "v.json"), str(files / "test.npz"),
                 "-o", str(files / "out.csv")]) == 0
    out = np.loadtxt(files / "out.csv", delimiter=",", skiprows=1)
    expect = load_model(files / "v.json").predict_proba(data["q2"])
    np.testing.assert_allclose(out, expect, rtol=0, atol=1e-15)


def test_fit_param_and_logits_npz(files: Path, data: dict[str, np.ndarray]) -> None:
    z = np.log(data["q"] + 1e-6)
    np.savez(files / "logits.npz", logits=z, y=data["y"])
    assert main(["fit", str(files / "logits.npz"), "--method", "matrix",
                 "-o", str(files / "mx.json")]) == 0
    assert json.loads((files / "mx.json").read_text())["input"] == "logits"


# ---------------------------------------------------------------------------
# the HTML report
# ---------------------------------------------------------------------------
def test_html_report_embeds_the_images(files: Path) -> None:
    assert main(["fit", str(files / "train.npz"), "--method", "temperature",
                 "-o", str(files / "t.json")]) == 0
    assert main(["evaluate", str(files / "test.csv"), "--model", str(files / "t.json"),
                 "--report", str(files / "rep")]) == 0
    html = (files / "rep" / "report.html").read_text()
    for png in ("reliability_uncalibrated.png", "reliability_calibrated.png"):
        raw = (files / "rep" / png).read_bytes()
        assert raw.startswith(b"\x89PNG")
        assert f'src="data:image/png;base64,{base64.b64encode(raw).decode()}"' in html
    assert "<img" in html and 'src="http' not in html  # self-contained
    rows = (files / "rep" / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("scores,log-loss") and len(rows) == 3


# ---------------------------------------------------------------------------
# bad files: exit code 2, one line naming the problem, no output
# ---------------------------------------------------------------------------
def _write_bad(d: Path, case: str) -> list[str]:
    q, y = np.load(d / "test.npy"), np.load(d / "test_labels.npy")
    header = ",".join(f"class{j}" for j in range(K))
    if case == "csv without label column":
        np.savetxt(d / "bad.csv", q, delimiter=",", header=header, comments="")
        return ["fit", "bad.csv", "--method", "temperature", "-o", "OUT.json"]
    if case == "named label column absent":
        np.savetxt(d / "bad.csv", np.column_stack([q, y]), delimiter=",",
                   header=header + ",y", comments="")
        return ["fit", "bad.csv", "--label-column", "target", "--method", "temperature",
                "-o", "OUT.json"]
    if case == "nan in scores":
        q[3, 2] = np.nan
        np.savez(d / "bad.npz", probs=q, y=y)
        return ["fit", "bad.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "label outside score columns":
        y = y.copy()
        y[7] = K
        np.savez(d / "bad.npz", probs=q, y=y)
        return ["fit", "bad.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "scores not 2-D":
        np.save(d / "bad.npy", q[:, 0])
        return ["fit", "bad.npy", "--labels", "test_labels.npy", "--method", "temperature",
                "-o", "OUT.json"]
    if case == "labels of wrong length":
        np.save(d / "short.npy", y[:-3])
        return ["fit", "test.npy", "--labels", "short.npy", "--method", "temperature",
                "-o", "OUT.json"]
    if case == "unreadable npz":
        (d / "bad.npz").write_bytes(b"this is not a zip file")
        return ["fit", "bad.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "npz without labels":
        np.savez(d / "bad.npz", probs=q)
        return ["fit", "bad.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "rows not summing to one":
        np.savez(d / "bad.npz", probs=q * 1.1, y=y)
        return ["fit", "bad.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "non-numeric csv field":
        lines = (d / "test.csv").read_text().splitlines()
        lines[4] = "a," + lines[4].split(",", 1)[1]
        (d / "bad.csv").write_text("\n".join(lines) + "\n")
        return ["fit", "bad.csv", "--method", "temperature", "-o", "OUT.json"]
    if case == "scores with other class count than the model":
        assert main(["fit", "train.npz", "--method", "temperature", "-o", "t.json"]) == 0
        np.save(d / "bad.npy", q[:, :3] / q[:, :3].sum(1, keepdims=True))
        return ["apply", "t.json", "bad.npy", "-o", "OUT.npz"]
    if case == "not a model file":
        (d / "bad.json").write_text('{"hello": 1}')
        return ["apply", "bad.json", "test.npy", "-o", "OUT.npz"]
    if case == "output exists":
        (d / "OUT.json").write_text("keep me")
        return ["fit", "train.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "missing file":
        return ["evaluate", "nothere.npz", "--report", "OUT"]
    raise AssertionError(case)


BAD_CASES = {
    "csv without label column": "missing label column",
    "named label column absent": "label column 'target' not found",
    "nan in scores": "contains NaN or inf",
    "label outside score columns": "labels outside the classes 0..3",
    "scores not 2-D": "must be 2-D",
    "labels of wrong length": "has 297 labels but the scores have 300 rows",
    "unreadable npz": "not a NumPy .npz archive (no zip signature)",
    "npz without labels": "no labels found",
    "rows not summing to one": "rows must sum to 1",
    "non-numeric csv field": "non-numeric value 'a'",
    "scores with other class count than the model": "has 3 columns but 4 classes were expected",
    "not a model file": "not a bayescal model file",
    "output exists": "already exists",
    "missing file": "does not exist",
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_files_exit_2_with_one_line_and_no_output(
    case: str, files: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(files)
    argv = _write_bad(files, case)
    before = outputs(files)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayescal: error:") and err.count("\n") == 1, err
    assert BAD_CASES[case] in err, err
    assert outputs(files) == before  # no output file, no temporary file
    if case == "output exists":
        assert (files / "OUT.json").read_text() == "keep me"


def test_unknown_method_is_a_usage_error(files: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(files / "train.npz"), "--method", "platt", "-o", "x.json"])
    assert exc.value.code == 2


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------
def test_registry_unknown_name_lists_valid_methods() -> None:
    with pytest.raises(ValueError, match="unknown calibration method 'platt'; valid methods "
                                         "are: dirichlet, dirichlet-odir, dirichlet-l2, "):
        make_calibrator("platt")


def test_registry_refuses_to_override_defining_parameter() -> None:
    with pytest.raises(ValueError, match="fixes reg='odir'"):
        make_calibrator("dirichlet-odir", reg="l2")
    with pytest.raises(ValueError, match="has no parameter"):
        make_calibrator("temperature", not_a_param=1)


@pytest.mark.parametrize("method", FAST_METHODS)
@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_registry_names_round_trip(method: str, kind: str) -> None:
    est = make_calibrator(method, input=kind)
    assert est.input == kind  # a parameter, or fixed by a logits-only class / adapter
    assert method_name(est) == method


def test_logits_only_scalers_take_probabilities_through_log_features(
    data: dict[str, np.ndarray]
) -> None:
    from sklearn.base import clone

    from bayescal.calibrators.registry import ProbsToLogits
    from bayescal.maps import log_features

    for method in ("temperature", "vector"):
        est = make_calibrator(method, input="probs")
        if not isinstance(est, ProbsToLogits):
            continue  # the class takes probabilities itself
        est.fit(data["q"], data["y"])
        inner = clone(est.estimator).fit(log_features(data["q"]), data["y"])
        np.testing.assert_allclose(est.predict_proba(data["q2"]),
                                   inner.predict_proba(log_features(data["q2"])), atol=1e-12)
        A, c = est.to_canonical()
        from bayescal.maps import canonical_map

        np.testing.assert_allclose(canonical_map(data["q2"], A, c), est.predict_proba(data["q2"]),
                                   atol=1e-10)


# ---------------------------------------------------------------------------
# Bayesian methods: JSON + netCDF posterior
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", BAYES_METHODS)
def test_bayesian_model_round_trip(method: str, tmp_path: Path,
                                   data: dict[str, np.ndarray]) -> None:
    est = make_calibrator(method, sampler="laplace", draws=200, random_seed=0)
    est.fit(data["q"], data["y"])
    path = save_model(est, tmp_path / "b.json")
    assert outputs(tmp_path) == {"b.json", "b.nc"}
    doc = json.loads(path.read_text())
    assert doc["posterior"] == "b.nc" and doc["method"] == method
    back = load_model(path)
    np.testing.assert_allclose(back.predict_proba(data["q2"]), est.predict_proba(data["q2"]),
                               rtol=0, atol=1e-12)
    (tmp_path / "b.nc").unlink()
    with pytest.raises(ValueError, match="posterior file .* is missing"):
        load_model(path)
    assert outputs(tmp_path) == {"b.json"}


def test_cli_fit_bayes_writes_posterior(files: Path, data: dict[str, np.ndarray]) -> None:
    argv = ["fit", str(files / "train.npz"), "--method", "bayes", "--param", "sampler=laplace",
            "--param", "draws=100", "--param", "random_seed=1", "-o", str(files / "bayes.json")]
    assert main(argv) == 0
    assert (files / "bayes.nc").is_file()
    assert main(["apply", str(files / "bayes.json"), str(files / "test.npz"),
                 "-o", str(files / "b.npz")]) == 0
    with np.load(files / "b.npz") as f:
        applied = f["probs"]
    np.testing.assert_allclose(applied, load_model(files / "bayes.json").predict_proba(data["q2"]),
                               rtol=0, atol=1e-12)
    assert main(argv) == 2  # both files exist now: refused without --force


def test_cli_refuses_to_save_a_non_converged_posterior(files: Path, capsys) -> None:
    """A posterior failing its checks: exit 2, one line naming them, no file written."""
    before = outputs(files)
    argv = ["fit", str(files / "train.npz"), "--method", "bayes",
            "--param", "draws=20", "--param", "tune=20", "--param", "chains=2",
            "--param", "progressbar=false", "--param", "random_seed=0",
            "--param", "retry_draws=null",  # no retry with more draws: one program to compile
            "-o", str(files / "bad.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    # (PyMC's chain processes may add a "bayescal: warning:" line about os.fork)
    errors = [line for line in err.splitlines() if line.startswith("bayescal: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "failed its convergence checks" in errors[0] and "ESS" in errors[0], err
    assert outputs(files) == before  # neither bad.json nor bad.nc


def test_cli_evaluate_reports_posterior_diagnostics(files: Path, capsys) -> None:
    # 1000 draws: 500 fell short of the ESS check and a retry compiled a second program
    assert main(["fit", str(files / "train.npz"), "--method", "bayes-generative",
                 "--param", "draws=1000", "--param", "tune=500", "--param", "chains=4",
                 "--param", "progressbar=false", "--param", "random_seed=0",
                 "-o", str(files / "g.json")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(files / "test.npz"), "--model", str(files / "g.json"),
                 "--report", str(files / "rep")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Posterior:"))
    assert "max R-hat" in line and "divergences" in line and line.endswith(": passed."), line
    assert "Posterior: sampler" in (files / "rep" / "report.html").read_text()


def test_output_files_have_the_usual_permissions(files: Path) -> None:
    assert main(["fit", str(files / "train.npz"), "--method", "temperature",
                 "-o", str(files / "p.json")]) == 0
    mask = os.umask(0o022)
    os.umask(mask)
    assert (files / "p.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_demo_small(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    report = tmp_path / "demo"
    assert main(["demo", "--methods", "temperature", "dirichlet-l2", "--report", str(report),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    for row in ("naive Bayes", "random forest", "logistic regression", "uncalibrated",
                "temperature", "dirichlet-l2"):
        assert row in out
    html = (report / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3  # one uncalibrated diagram per classifier
    rows = (report / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 3  # header + 3 classifiers x (uncalibrated + 2 methods)


def test_demo_and_evaluate_say_what_each_fit_chose(tmp_path: Path, files: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "--methods", "dirichlet", "matrix", "--report", str(tmp_path / "d"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[-2:] == ["note", "fit"]
    # on probabilities matrix scaling is the Dirichlet map: said once per classifier
    matrix = [line for line in out.splitlines() if "  matrix  " in line]
    assert len(matrix) == 3 and all("same map as dirichlet" in line for line in matrix)
    assert out.count("the data supported") == 6
    assert "same map as dirichlet" in (tmp_path / "d" / "report.html").read_text()
    assert main(["fit", str(files / "train.npz"), "--method", "temperature",
                 "-o", str(files / "t.json")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(files / "test.npz"), "--model", str(files / "t.json"),
                 "--report", str(files / "rep")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("calibrated (temperature)"))
    assert "temperature scaling (T=" in line
    assert (files / "rep" / "metrics.csv").read_text().splitlines()[0].endswith(",note,fit")


@pytest.mark.parametrize(("param", "message"), [
    ("reg_lambda", "--param must look like NAME=VALUE; got 'reg_lambda'"),
    ("not_a_param=1", "has no parameter(s) ['not_a_param']"),
    ("reg=l2", "fixes reg='odir'"),
])
def test_bad_param_exits_2(param: str, message: str, files: Path,
                           capsys: pytest.CaptureFixture) -> None:
    assert main(["fit", str(files / "train.npz"), "--method", "dirichlet-odir",
                 "--param", param, "-o", str(files / "x.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (files / "x.json").exists()


# ---------------------------------------------------------------------------
# every failure the issue lists: exit 2, one line naming the file, no traceback
# ---------------------------------------------------------------------------
def _model(d: Path, method: str = "temperature") -> dict:
    if not (d / f"{method}.json").exists():
        assert main(["fit", str(d / "train.npz"), "--method", method,
                     "-o", str(d / f"{method}.json")]) == 0
    return json.loads((d / f"{method}.json").read_text())


def _edited(d: Path, edit) -> list[str]:
    doc = _model(d)
    edit(doc)
    (d / "edited.json").write_text(json.dumps(doc))
    return ["apply", "edited.json", "test.npz", "-o", "OUT.npz"]


def _issue_case(d: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    q, y = np.load(d / "test.npy"), np.load(d / "test_labels.npy")
    if case == "truncated npz":
        raw = (d / "train.npz").read_bytes()
        (d / "cut.npz").write_bytes(raw[: len(raw) // 2])
        return ["fit", "cut.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "random bytes npz":
        (d / "rand.npz").write_bytes(np.random.default_rng(0).bytes(500))
        return ["fit", "rand.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "npz of objects":
        np.savez(d / "obj.npz", probs=np.array([{"a": 1}], dtype=object), y=y[:1])
        return ["fit", "obj.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "directory as scores":
        (d / "adir.npz").mkdir()
        return ["fit", "adir.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "--param input":
        return ["fit", "train.npz", "--method", "dirichlet-l2", "--param", "input=logits",
                "-o", "OUT.json"]
    if case == "logits holding 1e300":
        z = np.log(q + 1e-3)
        z[4, 2] = 1e300
        np.savez(d / "huge.npz", logits=z, y=y)
        return ["fit", "huge.npz", "--method", "vector", "-o", "OUT.json"]
    if case == "label 1e20":
        np.savez(d / "big.npz", probs=q, y=np.where(np.arange(len(y)) == 3, 1e20, y))
        return ["fit", "big.npz", "--method", "temperature", "-o", "OUT.json"]
    if case == "NA in csv":
        lines = (d / "test.csv").read_text().splitlines()
        cells = lines[3].split(",")
        cells[1] = "NA"
        lines[3] = ",".join(cells)
        (d / "na.csv").write_text("\n".join(lines) + "\n")
        return ["fit", "na.csv", "--method", "temperature", "-o", "OUT.json"]
    if case.startswith("model: "):
        what = case.removeprefix("model: ")
        edits = {
            "hyperparameters missing": lambda doc: doc.pop("hyperparameters"),
            "hyperparameters null": lambda doc: doc.update(hyperparameters=None),
            "fitted missing": lambda doc: doc.pop("fitted"),
            "fitted null": lambda doc: doc.update(fitted=None),
            "posterior missing": lambda doc: doc.pop("posterior"),
            "unknown hyperparameter": lambda doc: doc["hyperparameters"].update(bogus=1),
            "unknown estimator": lambda doc: doc.update(estimator="bayescal.io.os.system"),
            "bad dtype": lambda doc: doc["fitted"].update(n_iter_="3"),
            "bad temperature": lambda doc: doc["fitted"].update(temperature_=-1.0),
            "not json": None,
        }
        if what == "not json":
            (d / "edited.json").write_text("{not json")
            return ["apply", "edited.json", "test.npz", "-o", "OUT.npz"]
        return _edited(d, edits[what])
    if case == "model is a directory":
        (d / "m.json").mkdir()
        return ["apply", "m.json", "test.npz", "-o", "OUT.npz"]
    if case == "dnn npz without idx_val":
        (d / "dnn").mkdir()
        np.savez(d / "dnn" / "net.npz", probs=q, y=y, idx_test=np.arange(10))
        return ["reproduce", "--suite", "dnn", "--data-dir", "dnn", "--out", "OUT",
                "--no-progress"]
    if case == "BAYESCAL_DATA_URL with {0}":
        monkeypatch.setenv("BAYESCAL_DATA", str(d / "cache-dir"))
        monkeypatch.setenv("BAYESCAL_DATA_URL", "https://example.invalid/{0}.npz")
        return ["reproduce", "--suite", "uci", "--datasets", "iris", "--classifiers", "nbayes",
                "--methods", "uncal", "--out", "OUT", "--no-progress"]
    raise AssertionError(case)


ISSUE_CASES = {
    "truncated npz": "cut.npz: damaged or truncated .npz archive",
    "random bytes npz": "rand.npz: not a NumPy .npz archive (no zip signature)",
    "npz of objects": "obj.npz: array 'probs' holds Python objects",
    "directory as scores": "adir.npz is a directory, not a file",
    "--param input": "--param input=... is not a parameter here: use --input",
    "logits holding 1e300": "huge.npz: cannot fit vector: scores are too large for a fit on raw "
                            "logits: |z| = 1e+300 at row 4, column 2",
    "label 1e20": "big.npz: y has labels outside the classes 0..3 given by the score columns: "
                  "[1.e+20]",
    "NA in csv": "na.csv: missing value 'NA' at line 4, column 'p1'",
    "model: hyperparameters missing": "edited.json lacks the field(s) ['hyperparameters']",
    "model: hyperparameters null": "edited.json: hyperparameters must be an object of "
                                   "hyperparameters; got null",
    "model: fitted missing": "lacks the field(s) ['fitted']",
    "model: fitted null": "edited.json: fitted must be an object; got null",
    "model: posterior missing": "lacks the field(s) ['posterior']",
    "model: unknown hyperparameter": "hyperparameters has unknown field(s) ['bogus']",
    "model: unknown estimator": "edited.json: unknown estimator 'bayescal.io.os.system'",
    "model: bad dtype": "edited.json: fitted.n_iter_ must be an integer; got '3'",
    "model: bad temperature": "edited.json: fitted.temperature_ must be > 0; got -1.0",
    "model: not json": "edited.json is not valid JSON",
    "model is a directory": "model file m.json is a directory, not a file",
    "dnn npz without idx_val": "net.npz lacks the arrays ['idx_val']",
    "BAYESCAL_DATA_URL with {0}": "BAYESCAL_DATA_URL='https://example.invalid/{0}.npz' must "
                                  "contain the placeholder {name}",
}


@pytest.mark.parametrize("case", list(ISSUE_CASES))
def test_issue_cases_exit_2_with_one_line_naming_the_file(
    case: str, files: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(files)
    argv = _issue_case(files, case, monkeypatch)
    before = outputs(files)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayescal: error:") and err.count("\n") == 1, err
    assert ISSUE_CASES[case] in err, err
    assert "Traceback" not in err
    assert outputs(files) == before, outputs(files) ^ before  # nothing written, no temp files


def test_issue_cases_through_a_real_process(files: Path) -> None:
    raw = (files / "train.npz").read_bytes()
    (files / "cut.npz").write_bytes(raw[: len(raw) // 3])
    r = run_cli("fit", "cut.npz", "--method", "temperature", "-o", "m.json", cwd=files)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("bayescal: error: cut.npz: damaged or truncated .npz archive")
    assert r.stderr.count("\n") == 1 and not (files / "m.json").exists()
    r = run_cli("fit", "train.npz", "--method", "temperature", "--param", "input=logits",
                "-o", "m.json", cwd=files)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr


def test_unexpected_errors_are_one_line_too(files: Path, capsys: pytest.CaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import bayescal.score_files

    def boom(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr(bayescal.score_files, "read_scores", boom)
    assert main(["fit", str(files / "train.npz"), "--method", "temperature",
                 "-o", str(files / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err == ("bayescal: error: KeyError: 'surprise' (unexpected; BAYESCAL_DEBUG=1 shows "
                   "the traceback)\n")
    monkeypatch.setenv("BAYESCAL_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["fit", str(files / "train.npz"), "--method", "temperature",
              "-o", str(files / "m.json")])


def test_warnings_are_one_line(files: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["fit", str(files / "train.npz"), "--method", "dirichlet-odir", "--param",
                 "max_iter=1", "--param", "reg_lambda=0.001", "--param", "reg_mu=0.001",
                 "-o", str(files / "m.json")]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("bayescal: warning")]
    assert warning and warning[0].startswith("bayescal: warning: ConvergenceWarning: "
                                             "DirichletCalibrator did not converge")


def test_apply_keeps_every_row_of_a_bom_csv_without_header(files: Path,
                                                            data: dict[str, np.ndarray]) -> None:
    q = data["q2"]
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in q) + "\n"
    (files / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert main(["fit", str(files / "train.npz"), "--method", "temperature",
                 "-o", str(files / "t.json")]) == 0
    assert main(["apply", str(files / "t.json"), str(files / "bom.csv"),
                 "-o", str(files / "out.csv")]) == 0
    out = np.loadtxt(files / "out.csv", delimiter=",", skiprows=1)
    assert out.shape == q.shape  # the first row was not taken for a header
    np.testing.assert_allclose(out, load_model(files / "t.json").predict_proba(q), atol=1e-15)


def test_version_and_help_with_examples(capsys: pytest.CaptureFixture) -> None:
    import bayescal

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"bayescal {bayescal.__version__}\n"
    for command in ([], ["fit"], ["apply"], ["evaluate"], ["demo"], ["reproduce"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        out = capsys.readouterr().out
        assert "examples:\n  bayescal " in out, command
        for line in out.split("examples:\n", 1)[1].splitlines():
            if line.startswith("  bayescal "):
                assert line.split()[1] in ("demo", "fit", "apply", "evaluate", "reproduce")
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert "temperature    " in capsys.readouterr().out  # the method list, from the registry


def test_help_and_version_import_no_estimator() -> None:
    code = (
        "import sys\n"
        "from bayescal.cli import main\n"
        "for argv in (['--help'], ['--version'], ['apply', '--help'], ['evaluate', '--help'],"
        " ['reproduce', '--help'], ['demo', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('numpy', 'scipy', 'sklearn', 'pandas', 'pymc', 'arviz', 'matplotlib',"
        " 'bayescal.calibrators', 'bayescal._validation')\n"
        "print([m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "[]"


def test_lazy_exports_cover_all_and_resolve() -> None:
    import bayescal

    assert set(bayescal.__all__) - {"__version__"} == set(bayescal._EXPORTS)
    for name in bayescal.__all__:
        assert getattr(bayescal, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        bayescal.nope  # noqa: B018


def test_sigterm_removes_the_temporary_file(tmp_path: Path) -> None:
    import signal
    import time

    code = (
        "import signal, sys, time\n"
        "from bayescal import cli\n"
        "from bayescal._files import atomic_write\n"
        "signal.signal(signal.SIGTERM, cli._terminate)\n"
        "def slow(p):\n"
        "    p.write_bytes(b'x' * 1000)\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
        f"atomic_write({str(tmp_path / 'model.json')!r}, slow)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env,
                            text=True)
    assert proc.stdout.readline() == "writing\n"
    assert any(p.name.startswith(".bayescal-tmp-") for p in tmp_path.iterdir())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait() == 128 + signal.SIGTERM
    time.sleep(0.1)
    assert list(tmp_path.iterdir()) == []
