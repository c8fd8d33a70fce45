"""Model files are data: nothing runs on load, every field is checked, one source of truth."""

from __future__ import annotations

import copy
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _methods import FAST_METHODS
from sklearn.base import clone

from bayescal import MatrixScaler, TemperatureScaler, VectorScaler
from bayescal.calibrators import BetaCalibrator, BinningCalibrator, IsotonicCalibrator
from bayescal.calibrators.registry import make_calibrator, method_name
from bayescal.cli import main
from bayescal.datasets import make_dirgen
from bayescal.model_files import (
    MODEL_FORMAT_VERSION,
    STATE_SCHEMAS,
    _document,
    _fitted_document,
    _restore_state,
    hash_training_data,
    load_model,
    save_model,
)

K = 3
HASH = "sha256:" + "ab" * 32


def _data(n: int = 240, k: int = K, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    q, y, _, _ = make_dirgen(n, k, rng=seed)
    return q, y


def _scores(kind: str, q: np.ndarray) -> np.ndarray:
    return q if kind == "probs" else np.log(q + 1e-3) + 0.5


def _fit(method: str, kind: str = "probs", **params: Any) -> Any:
    q, y = _data()
    return make_calibrator(method, input=kind, **params).fit(_scores(kind, q), y)


def _doc(est: Any, tmp: Path, name: str = "m.json") -> tuple[Path, dict[str, Any]]:
    path = save_model(est, tmp / name, training_hash=HASH)
    return path, json.loads(path.read_text())


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


# ---------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", FAST_METHODS)
@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_round_trip_is_exact_and_stable(method: str, kind: str, tmp_path: Path) -> None:
    est = _fit(method, kind)
    path, doc = _doc(est, tmp_path)
    back = load_model(path)
    q2, _ = _data(100, seed=1)
    test = _scores(kind, q2)
    np.testing.assert_allclose(back.predict_proba(test), est.predict_proba(test), rtol=0,
                               atol=1e-12)
    assert method_name(back) == method == doc["method"]
    assert doc["format_version"] == MODEL_FORMAT_VERSION == 3
    # saving what was loaded writes the same document: nothing lost, nothing invented
    again = save_model(back, tmp_path / "again.json", training_hash=HASH)
    assert json.loads(again.read_text()) == doc
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.json", "m.json"]


@pytest.mark.parametrize("seed", range(12))
def test_temperature_round_trip_is_bit_identical(seed: int, tmp_path: Path) -> None:
    # the fitted W is I / T from the saved T itself: I * s and I / (1 / s) differ in
    # the last bit for some s, which once made a loaded scaler differ by 1 ulp
    q, y = _data(60 + 7 * seed, seed=seed)
    est = make_calibrator("temperature", input="probs").fit(q, y)
    back = load_model(_doc(est, tmp_path)[0])
    np.testing.assert_array_equal(back.predict_proba(q), est.predict_proba(q))


def test_matrix_scaler_at_its_default_is_savable(tmp_path: Path) -> None:
    q, y = _data()
    z = np.log(q + 1e-3)
    est = MatrixScaler().fit(z, y)  # the registry's "matrix" (structured penalty)
    path, doc = _doc(est, tmp_path)
    assert doc["estimator"] == "MatrixScaler" and doc["method"] == "matrix"
    odir = MatrixScaler(reg="odir", cv=3).fit(z, y)  # MS-ODIR: no registry method
    assert _doc(odir, tmp_path, "odir.json")[1]["method"] is None
    back = load_model(path)
    assert type(back) is MatrixScaler and back.get_params() == est.get_params()
    np.testing.assert_allclose(back.predict_proba(z), est.predict_proba(z), atol=1e-12, rtol=0)


def test_temperature_model_stores_the_temperature_not_matrices(tmp_path: Path) -> None:
    k = 300
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, 2000)
    z = np.eye(k)[y] * 3.0 + rng.normal(size=(2000, k))
    est = TemperatureScaler().fit(z, y)
    path, doc = _doc(est, tmp_path)
    assert path.stat().st_size < 5000  # k x k matrices would take megabytes
    assert doc["W"] is None and doc["A"] is None
    assert doc["fitted"]["temperature_"] == est.temperature_
    back = load_model(path)
    np.testing.assert_allclose(back.predict_proba(z[:50]), est.predict_proba(z[:50]), atol=1e-12)
    np.testing.assert_allclose(back.coef_, np.eye(k) / est.temperature_, rtol=1e-15)


def test_ensemble_dirichlet_round_trip(tmp_path: Path) -> None:
    est = _fit("dirichlet-odir", reg_lambda=1e-2, reg_mu=1e-2, ensemble=True, cv=3)
    path, doc = _doc(est, tmp_path)
    assert np.shape(doc["fitted"]["coefs_"]) == (3, K, K)
    back = load_model(path)
    q, _ = _data(50, seed=2)
    np.testing.assert_allclose(back.predict_proba(q), est.predict_proba(q), atol=1e-12, rtol=0)
    doc["fitted"]["coefs_"][0][0][0] += 0.5  # W is no longer the fold mean
    with pytest.raises(ValueError, match="W must be the mean of the fold maps"):
        load_model(_write(path, doc))


def test_scalers_built_directly_round_trip(tmp_path: Path) -> None:
    q, y = _data()
    z = np.log(q + 1e-3)
    for est in (VectorScaler().fit(z, y), TemperatureScaler().fit(z, y)):
        path = save_model(est, tmp_path / f"{type(est).__name__}.json")
        back = load_model(path)
        assert repr(back) == repr(est)
        np.testing.assert_allclose(back.predict_proba(z), est.predict_proba(z), atol=1e-12)


@pytest.mark.parametrize("est", [BetaCalibrator(), IsotonicCalibrator(),
                                 BinningCalibrator(n_bins=5, strategy="frequency"),
                                 BinningCalibrator()], ids=repr)
def test_one_vs_rest_state_schemas_round_trip(est: Any) -> None:
    # these classes' registry names are added separately; their state entries exist already
    q, y = _data(500, 4)
    est = clone(est).fit(q, y)
    schema = STATE_SCHEMAS[type(est).__name__]
    fitted = json.loads(json.dumps(_fitted_document(est, schema)))
    new = clone(est)
    _restore_state(new, schema, {"fitted": fitted, "W": None, "b": None}, est.get_params(),
                   est.classes_, "test")
    q2, _ = _data(300, 4, seed=5)
    np.testing.assert_allclose(new.predict_proba(q2), est.predict_proba(q2), rtol=0, atol=0)
    assert json.loads(json.dumps(_fitted_document(new, schema))) == fitted


def test_undeclared_fitted_attribute_is_refused_not_dropped(tmp_path: Path) -> None:
    est = _fit("temperature", "logits")
    est.extra_state_ = np.ones(3)
    with pytest.raises(ValueError, match=r"fitted attribute\(s\) \['extra_state_'\] are not in "
                                         "its model-file schema"):
        save_model(est, tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


def test_unsavable_hyperparameter_is_named(tmp_path: Path) -> None:
    from sklearn.model_selection import KFold

    q, y = _data()
    est = make_calibrator("dirichlet-l2", cv=KFold(3)).fit(q, y)
    with pytest.raises(ValueError, match=r"cannot save hyperparameter cv=KFold"):
        save_model(est, tmp_path / "m.json")


def test_unfitted_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot save an unfitted TemperatureScaler"):
        save_model(TemperatureScaler(), tmp_path / "m.json")


def test_generative_prior_object_round_trip(tmp_path: Path) -> None:
    from bayescal.dirichlet import DirichletPrior

    q, y = _data()
    for prior in (DirichletPrior(strength=2.0), DirichletPrior(0.5, center=np.full((K, K), 1.5))):
        est = make_calibrator("generative", prior=prior).fit(q, y)
        back = load_model(save_model(est, tmp_path / "g.json", overwrite=True))
        assert back.prior.strength == prior.strength
        np.testing.assert_array_equal(np.asarray(back.prior.center, dtype=object),
                                      np.asarray(prior.center, dtype=object))
        np.testing.assert_allclose(back.predict_proba(q), est.predict_proba(q), atol=1e-12)


# ---------------------------------------------------------------------------
# nothing in a file runs
# ---------------------------------------------------------------------------
def _exploits(target: Path) -> dict[str, Any]:
    return {
        "os.system": {"__dataclass__": "bayescal.io.os.system",
                      "fields": {"command": f"id > {target}"}},
        "_write_bytes": {"__dataclass__": "bayescal.io._write_bytes",
                         "fields": {"path": str(target), "data": "pwned"}},
        "estimator path": {"__estimator__": "bayescal.io.os.system",
                           "params": {"command": f"id > {target}"}, "fitted": {}},
    }


@pytest.mark.parametrize("exploit", ["os.system", "_write_bytes", "estimator path"])
@pytest.mark.parametrize("where", ["new fitted field", "fitted value", "hyperparameter",
                                   "estimator name"])
def test_code_and_file_write_exploits_are_refused(exploit: str, where: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "pwned.txt"
    est = _fit("dirichlet-odir")
    path, doc = _doc(est, tmp_path)
    payload = _exploits(target)[exploit]
    if where == "new fitted field":
        doc["fitted"]["evil_"] = payload
    elif where == "fitted value":
        doc["fitted"]["n_iter_"] = payload
    elif where == "hyperparameter":
        doc["hyperparameters"]["tol"] = payload
    else:
        doc["estimator"] = "bayescal.io.os.system" if exploit != "_write_bytes" else (
            "bayescal.io._write_bytes")
    _write(path, doc)
    with pytest.raises(ValueError):
        load_model(path)
    np.savez(tmp_path / "s.npz", probs=_data(20)[0])
    assert main(["apply", str(path), str(tmp_path / "s.npz"), "-o", str(tmp_path / "o.npz")]) == 2
    assert capsys.readouterr().err.startswith(f"bayescal: error: {path}")
    assert not target.exists()
    assert not (tmp_path / "o.npz").exists()


def test_exploit_in_a_bayesian_model_is_refused(bayes_pair: dict[str, Any],
                                                tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    for name in ("a.json", "a.nc"):
        shutil.copy(bayes_pair["dir"] / name, tmp_path / name)
    doc = json.loads((tmp_path / "a.json").read_text())
    doc["fitted"]["evil"] = _exploits(target)["os.system"]
    with pytest.raises(ValueError, match="unknown field"):
        load_model(_write(tmp_path / "a.json", doc))
    assert not target.exists()


def test_json_tricks_are_refused(tmp_path: Path) -> None:
    est = _fit("dirichlet-odir")
    path, _ = _doc(est, tmp_path)
    text = path.read_text()
    _, rest = text.split('"W": [[', 1)
    nan = text.replace('"W": [[' + rest.split(",", 1)[0], '"W": [[NaN', 1)
    path.write_text(nan)
    with pytest.raises(ValueError, match="JSON constant NaN is not allowed"):
        load_model(path)
    path.write_text(text.replace('"format": "bayescal-model",',
                                 '"format": "bayescal-model", "format": "bayescal-model",'))
    with pytest.raises(ValueError, match="duplicate JSON key 'format'"):
        load_model(path)


@pytest.mark.parametrize(("version", "match"), [
    (1, "version 1 files named Python classes"),
    (4, "has model format version 4"), ("3", "has model format version '3'"),
    (None, "has model format version None")])
def test_unknown_format_versions_are_refused(version: Any, match: str, tmp_path: Path) -> None:
    path, doc = _doc(_fit("temperature"), tmp_path)
    doc["format_version"] = version
    with pytest.raises(ValueError, match=match):
        load_model(_write(path, doc))


def test_version_2_files_without_a_posterior_still_load(tmp_path: Path) -> None:
    """Version 3 changed only a Bayesian posterior's id: MAP files of version 2 read as before."""
    est = _fit("temperature")
    path, doc = _doc(est, tmp_path)
    doc["format_version"] = 2
    again = load_model(_write(path, doc))
    q, _ = _data()
    np.testing.assert_array_equal(again.predict_proba(q), est.predict_proba(q))


# ---------------------------------------------------------------------------
# every field: refused, or exactly what is used
# ---------------------------------------------------------------------------
def _leaves(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths to every value (the first element of each array)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.extend(_leaves(value, (*prefix, key)))
    elif isinstance(doc, list) and doc:
        out.extend(_leaves(doc[0], (*prefix, 0)))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5 + 0.25
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value[:-1]
    if isinstance(value, dict):
        return {**value, "extra": 1}
    return 0  # null


MUTATIONS = {
    "change": _changed,
    "null": lambda v: None,
    "wrong type": lambda v: "text" if not isinstance(v, str) else 1.5,
    "nested list": lambda v: [v],
    "delete": None,
}

TAMPER_MODELS = {
    "dirichlet-odir": lambda: _fit("dirichlet-odir"),
    "temperature-probs": lambda: _fit("temperature", "probs"),
    "vector-logits": lambda: _fit("vector", "logits"),
    "matrix-logits": lambda: _fit("matrix", "logits"),
    "generative": lambda: _fit("generative"),
}


def _tamper_cases() -> list[Any]:
    import tempfile

    cases = []
    with tempfile.TemporaryDirectory() as d:
        for model, make in TAMPER_MODELS.items():
            _, doc = _doc(make(), Path(d), f"{model}.json")
            for path in _leaves(doc):
                for mutation in MUTATIONS:
                    if mutation == "delete" and isinstance(path[-1], int):
                        continue
                    value = _get(doc, path)
                    if mutation != "delete" and MUTATIONS[mutation](value) == value:
                        continue  # no change (null made null)
                    cases.append(pytest.param(model, path, mutation,
                                              id=f"{model}:{'.'.join(map(str, path))}:{mutation}"))
    return cases


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, dict[str, Any]]]:
    d = tmp_path_factory.mktemp("models")
    out = {}
    for model, make in TAMPER_MODELS.items():
        est = make()
        out[model] = (est, _doc(est, d, f"{model}.json")[1])
    return out


PROVENANCE = {"bayescal_version", "training_data_sha256"}


@pytest.mark.parametrize(("model", "path", "mutation"), _tamper_cases())
def test_every_tampered_field_is_refused_or_exactly_what_is_used(
    model: str, path: tuple, mutation: str, saved: dict[str, Any], tmp_path: Path
) -> None:
    est, doc = saved[model]
    doc = copy.deepcopy(doc)
    parent = _get(doc, path[:-1])
    if mutation == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = MUTATIONS[mutation](parent[path[-1]])
    file = _write(tmp_path / "m.json", doc)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            back = load_model(file)
    except ValueError as exc:
        assert str(exc).startswith(str(file)), exc  # the message names the file
        return
    # only a changed writer version warns (a file of another bayescal)
    assert [str(w.message) for w in caught] == (
        [f"{file} was written by bayescal {doc['bayescal_version']}, this is 0.1.0"]
        if path == ("bayescal_version",) else [])
    # accepted: the estimator is exactly what the file says
    again = _document(back, training_hash=doc.get("training_data_sha256"), posterior=None)
    again = json.loads(json.dumps(again))
    for key in set(doc) | set(again):
        if key not in PROVENANCE:
            assert again[key] == doc[key], key
    # what a file may change: provenance, hyperparameters and the stored state
    # (W, b are the state of a map on raw logits, which has no canonical copy)
    assert path[0] in PROVENANCE | {"hyperparameters", "fitted", "W", "b"}, path
    q, _ = _data(30, seed=9)
    test = _scores(doc["input"], q)
    if path[0] in PROVENANCE | {"hyperparameters"}:  # these do not change the map
        np.testing.assert_array_equal(back.predict_proba(test), est.predict_proba(test))


def test_zeroing_w_is_used_or_refused(tmp_path: Path) -> None:
    est = _fit("dirichlet-odir")
    path, doc = _doc(est, tmp_path)
    doc["W"] = np.zeros((K, K)).tolist()
    with pytest.raises(ValueError, match="A does not equal the canonical form of W, b"):
        load_model(_write(path, doc))
    doc["A"] = doc["c"] = None  # the copies cannot be dropped either
    with pytest.raises(ValueError, match="A must not be null"):
        load_model(_write(path, doc))


# ---------------------------------------------------------------------------
# Bayesian models: the posterior must be the one the JSON names
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bayes_pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("bayes")
    q, y = _data()
    a = make_calibrator("bayes", sampler="laplace", draws=40, chains=2, random_seed=0).fit(q, y)
    b = make_calibrator("bayes", sampler="laplace", draws=40, chains=2, random_seed=1).fit(q, y)
    g = make_calibrator("bayes-generative", sampler="laplace", draws=40, chains=2,
                        random_seed=0).fit(q, y)
    save_model(a, d / "a.json")
    save_model(b, d / "b.json")
    save_model(g, d / "g.json")
    return {"dir": d, "a": a, "b": b, "g": g, "q": q}


def _copy_pair(src: Path, dst: Path, *names: str) -> None:
    for name in names:
        shutil.copy(src / name, dst / name)


def test_bayesian_round_trip(bayes_pair: dict[str, Any]) -> None:
    for name in ("a", "g"):
        back = load_model(bayes_pair["dir"] / f"{name}.json")
        np.testing.assert_allclose(back.predict_proba(bayes_pair["q"]),
                                   bayes_pair[name].predict_proba(bayes_pair["q"]), atol=1e-12)


def test_swapped_posterior_is_refused(bayes_pair: dict[str, Any], tmp_path: Path) -> None:
    src = bayes_pair["dir"]
    shutil.copy(src / "a.json", tmp_path / "a.json")
    shutil.copy(src / "b.nc", tmp_path / "a.nc")  # another model's posterior
    with pytest.raises(ValueError, match=r"the posterior a.nc holds model '[0-9a-f]+', not the "
                                         r"model '[0-9a-f]+' this file describes"):
        load_model(tmp_path / "a.json")
    shutil.copy(src / "g.nc", tmp_path / "a.nc")  # another class's posterior
    with pytest.raises(ValueError, match="cannot read its posterior"):
        load_model(tmp_path / "a.json")


def test_posterior_field_cannot_point_elsewhere(bayes_pair: dict[str, Any],
                                                tmp_path: Path) -> None:
    _copy_pair(bayes_pair["dir"], tmp_path, "a.json", "a.nc", "b.nc")
    doc = json.loads((tmp_path / "a.json").read_text())
    for name in ("../a.nc", str(tmp_path / "a.nc"), "", None, 3):
        doc["posterior"] = name
        with pytest.raises(ValueError, match="posterior must be the file name"):
            load_model(_write(tmp_path / "a.json", doc))
    doc["posterior"] = "b.nc"
    with pytest.raises(ValueError, match="holds model"):
        load_model(_write(tmp_path / "a.json", doc))
    doc["posterior"] = "missing.nc"
    with pytest.raises(ValueError, match="its posterior file .*missing.nc is missing"):
        load_model(_write(tmp_path / "a.json", doc))


@pytest.mark.parametrize(("field", "value", "match"), [
    (("fitted", "model_id_"), "0" * 16, "holds model"),
    (("hyperparameters", "reg_lambda"), 0.5, "hyperparameter reg_lambda=0.5 differs"),
    (("hyperparameters", "draws"), 41, "hyperparameter draws=41 differs"),
    (("input",), "logits", "input is 'logits' but the posterior"),
    (("W",), [[0.0] * K] * K, "W does not equal the map of the stored state"),
    (("classes",), [1, 2, 3], r"classes \[1, 2, 3\] differ"),
    (("n_classes",), 4, "n_classes is 4"),
    (("method",), "bayes-generative", "not a registered method of BayesianDirichlet"),
    (("fitted",), None, "fitted must be an object"),
    (("hyperparameters",), None, "hyperparameters must be an object"),
])
def test_bayesian_json_fields_are_checked_against_the_posterior(
    field: tuple, value: Any, match: str, bayes_pair: dict[str, Any], tmp_path: Path
) -> None:
    _copy_pair(bayes_pair["dir"], tmp_path, "a.json", "a.nc")
    doc = json.loads((tmp_path / "a.json").read_text())
    _get(doc, field[:-1])[field[-1]] = value
    with pytest.raises(ValueError, match=match):
        load_model(_write(tmp_path / "a.json", doc))


def test_training_hash_is_checked_and_recorded(tmp_path: Path) -> None:
    q, y = _data()
    est = make_calibrator("temperature").fit(q, y)
    h = hash_training_data(q, y)
    doc = json.loads(save_model(est, tmp_path / "m.json", training_hash=h).read_text())
    assert doc["training_data_sha256"] == h
    with pytest.raises(ValueError, match="training_hash must be 'sha256:' and 64 hex digits"):
        save_model(est, tmp_path / "n.json", training_hash="md5:abc")
