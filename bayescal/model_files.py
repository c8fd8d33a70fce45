"""Model files: a fitted calibrator as a JSON document that is pure data.

:func:`save_model` writes, and :func:`load_model` reads, format
``"bayescal-model"`` version :data:`MODEL_FORMAT_VERSION`; ``docs/cli.md``
documents every field. Three rules make a model file safe to load and mean
what it says:

* **Nothing in a file is imported or called.** The estimator class is looked
  up by its name among the classes of the method registry
  (:data:`bayescal.calibrators.registry.METHODS`) and built by
  :func:`~bayescal.calibrators.registry.make_calibrator`; every value is a
  JSON number, string, boolean, null, list or object (no pickles, no dotted
  paths, no type tags). JSON ``NaN`` / ``Infinity`` literals and duplicate
  keys are refused.
* **Everything is checked against a declared schema.** Hyperparameters must
  be exactly the estimator's ``get_params()`` names, with values of the types
  of its constructor's annotations. Fitted state must match the estimator's
  entry in :data:`STATE_SCHEMAS`: field names, shapes in terms of the number
  of classes ``k``, dtypes, finiteness and ranges. Unknown or missing fields,
  unknown format versions and unknown estimators are refused with a message
  naming the file and the field.
* **One source of truth.** The estimator is rebuilt from the stored state
  only; every other field (``n_classes``, ``eps``, ``estimator``, ``map``, and
  ``W``, ``b``, ``A``, ``c`` where they are not the stored state) is a copy
  for readers without bayescal and must equal the value recomputed from the
  stored state, else the file is refused. A Bayesian model's state is its
  netCDF posterior; the JSON names the posterior's model id, and a posterior
  with another id (another model's file), other hyperparameters or another
  map is refused.

Adding a method
---------------
A new estimator class becomes savable by adding one :class:`StateSchema` to
:data:`STATE_SCHEMAS` in :mod:`bayescal.model_schema` (its fitted attributes
as :class:`Field` entries, and how derived attributes are rebuilt); a new
hyperparameter needs nothing when its constructor annotation is a JSON type
(``float``, ``int``, ``str``, ``bool``, ``None``, ``tuple`` or a union of
them), otherwise an entry in :data:`PARAM_CODECS`. :func:`save_model`
refuses an estimator with a fitted attribute its schema does not declare, so
no state is ever dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import warnings
from pathlib import Path
from types import NoneType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from bayescal._files import write_bytes
from bayescal.model_schema import (
    _LOG_X,
    COMMON_FIELDS,
    PARAM_CODECS,
    STATE_SCHEMAS,
    Field,
    ParamCodec,
    StateSchema,
    _close,
    _decode_field,
    _decode_params,
    _encode_field,
    _encode_params,
    _encode_value,
    _exact_keys,
    _f,
)

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "PARAM_CODECS",
    "STATE_SCHEMAS",
    "Field",
    "ParamCodec",
    "StateSchema",
    "hash_training_data",
    "load_model",
    "posterior_path",
    "save_model",
]

MODEL_FORMAT = "bayescal-model"
#: Version 3: a Bayesian model's id covers every posterior draw. Version 2 files
#: without a posterior (the MAP calibrators) still load; older files are refused
#: with the reason (:data:`_OLD_VERSIONS`): version 2 posteriors' ids did not
#: cover the draws, version 1 files named Python classes.
MODEL_FORMAT_VERSION = 3
_OLD_VERSIONS = {
    1: "version 1 files named Python classes and cannot be read safely: refit the model",
    2: "the model id of version 2 files does not cover a Bayesian model's posterior draws, "
       "so a changed draw would go unnoticed: refit the model and save it with this bayescal",
}
#: JSON integers longer than this are refused (int64 needs 19 digits).
_MAX_INT_DIGITS = 40

_SHA256_RE = re.compile(r"sha256:[0-9a-f]{64}")


# ---------------------------------------------------------------------------
# hashing
# ---------------------------------------------------------------------------
def hash_training_data(scores: ArrayLike, y: ArrayLike) -> str:
    """SHA-256 of the training data, independent of the file format.

    The digest covers the shape, the scores as little-endian float64 and the
    labels as little-endian int64 (C order), so the same data read from an
    .npz, .npy or .csv file hash alike.

    Returns
    -------
    str
        ``"sha256:<hex digest>"``.
    """
    s = np.ascontiguousarray(np.asarray(scores, dtype="<f8"))
    t = np.ascontiguousarray(np.asarray(y, dtype="<i8"))
    h = hashlib.sha256()
    h.update(f"bayescal-training-data:{s.shape}:{t.shape}".encode())
    h.update(s.tobytes())
    h.update(t.tobytes())
    return "sha256:" + h.hexdigest()


# ---------------------------------------------------------------------------
# estimators <-> documents
# ---------------------------------------------------------------------------
def posterior_path(model_path: str | os.PathLike[str]) -> Path:
    """Where the posterior of a Bayesian model is stored: ``model.nc`` beside ``model.json``."""
    return Path(model_path).with_suffix(".nc")


def _inner(est: Any) -> Any:
    """The estimator holding the state (the inner one of a ``ProbsToLogits``)."""
    from bayescal.calibrators.registry import ProbsToLogits

    if isinstance(est, ProbsToLogits):
        return getattr(est, "estimator_", est.estimator)
    return est


def _registry_specs(class_name: Any, where: str) -> list[Any]:
    from bayescal.calibrators.registry import METHODS

    specs = [s for s in METHODS.values() if s.class_name == class_name]
    if not specs:
        names = sorted({s.class_name for s in METHODS.values()})
        raise ValueError(f"{where}: unknown estimator {class_name!r}; model files can hold: "
                         f"{', '.join(names)}")
    return specs


def _method_of(est: Any) -> str | None:
    from bayescal.calibrators.registry import method_name

    try:
        return method_name(est)
    except ValueError:
        return None


def _features_text(est: Any) -> str:
    inner = _inner(est)
    if getattr(inner, "_feature_space", "log") == "raw" and getattr(est, "input", None) == "logits":
        return "x = z, the raw logits"
    return _LOG_X


def _describe(est: Any, schema: StateSchema) -> str:
    return schema.describe.format(x=_features_text(est))


def _canonical(est: Any) -> tuple[Any, Any]:
    """``(A, c)`` of a map on log-probabilities, else ``(None, None)``."""
    if _features_text(est) != _LOG_X or not hasattr(est, "to_canonical"):
        return None, None
    try:
        A, c = est.to_canonical()
    except (AttributeError, ValueError):
        return None, None
    return np.asarray(A, dtype=np.float64), np.asarray(c, dtype=np.float64)


def _public_fitted(est: Any) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


def _fitted_document(inner: Any, schema: StateSchema) -> dict[str, Any]:
    """The ``"fitted"`` object of an estimator's state (refusing undeclared attributes)."""
    name = type(inner).__name__
    fields = {**schema.fields, **COMMON_FIELDS}
    if not schema.posterior:
        covered = set(fields) | set(schema.derived) | {"classes_", "n_features_in_"}
        if schema.linear_map == "stored":
            covered |= {"coef_", "intercept_"}
        extra = sorted(_public_fitted(inner) - covered)
        if extra:
            raise ValueError(
                f"cannot save {name}: fitted attribute(s) {extra} are not in its model-file "
                "schema (bayescal.model_schema.STATE_SCHEMAS), so they would be lost"
            )
    if schema.dump is not None:
        stored = {**schema.dump(inner),
                  **{n: getattr(inner, n) for n in COMMON_FIELDS if hasattr(inner, n)}}
    else:
        stored = {n: getattr(inner, n) for n in fields if hasattr(inner, n)}
    missing = [n for n, f in schema.fields.items()
               if n not in stored and f.required and f.when is None]
    if missing:
        raise ValueError(f"cannot save {name}: it is not fitted ({', '.join(missing)} missing)")
    fitted = {n: _encode_field(fields[n], v) for n, v in stored.items() if n in fields}
    return fitted


def _document(est: Any, *, training_hash: str | None, posterior: str | None) -> dict[str, Any]:
    """The JSON document of a fitted estimator (not yet validated)."""
    from bayescal import __version__

    inner = _inner(est)
    name = type(inner).__name__
    schema = STATE_SCHEMAS.get(name)
    if schema is None:
        raise ValueError(f"cannot save {name}: it has no model-file schema "
                         "(bayescal.model_schema.STATE_SCHEMAS)")
    _registry_specs(name, "cannot save")
    fitted = _fitted_document(inner, schema)
    W = b = None
    if schema.linear_map != "none":
        W, b = np.asarray(inner.coef_, dtype=np.float64), np.asarray(inner.intercept_,
                                                                      dtype=np.float64)
    A, c = _canonical(est) if W is not None else (None, None)
    classes = getattr(est, "classes_", None)
    return {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "bayescal_version": __version__,
        "method": _method_of(est),
        "estimator": name,
        "input": getattr(est, "input", "probs"),
        "eps": _encode_value(_floor(est)),
        "n_classes": int(est.n_features_in_),
        "classes": _encode_value(np.asarray(classes)) if classes is not None else None,
        "training_data_sha256": training_hash,
        "map": _describe(est, schema),
        "hyperparameters": _encode_params(est),
        "fitted": fitted,
        "posterior": posterior,
        "W": None if W is None else W.tolist(),
        "b": None if b is None else b.tolist(),
        "A": None if A is None else A.tolist(),
        "c": None if c is None else c.tolist(),
    }


_TOP_LEVEL = ("format", "format_version", "bayescal_version", "method", "estimator", "input",
              "eps", "n_classes", "classes", "training_data_sha256", "map", "hyperparameters",
              "fitted", "posterior", "W", "b", "A", "c")


def _decode_classes(v: Any, where: str) -> np.ndarray:
    if not isinstance(v, list) or len(v) < 2:
        raise ValueError(f"{where} must be a list of at least 2 class labels; got {v!r}")
    types = {type(x) for x in v}
    if types == {str}:
        arr = np.array(v)
    elif types <= {int, float} and all(math.isfinite(x) for x in v):
        if types == {int} and not all(-(2**63) <= x < 2**63 for x in v):
            raise ValueError(f"{where}: labels out of the int64 range")
        arr = np.array(v, dtype=np.int64 if types == {int} else np.float64)
    else:
        raise ValueError(f"{where} must hold only strings or only finite numbers; got {v!r}")
    if len(np.unique(arr)) != len(arr):
        raise ValueError(f"{where} holds duplicate labels: {v!r}")
    return arr


def _build(doc: dict[str, Any], where: str) -> tuple[Any, StateSchema, dict[str, Any]]:
    """An unfitted estimator from ``estimator``, ``method``, ``input`` and ``hyperparameters``."""
    from bayescal.calibrators.registry import METHODS, ProbsToLogits, make_calibrator

    name = doc["estimator"]
    specs = _registry_specs(name, where)
    schema = STATE_SCHEMAS.get(name)
    if schema is None:
        raise ValueError(f"{where}: estimator {name!r} has no model-file schema")
    kind = doc["input"]
    if kind not in ("probs", "logits"):
        raise ValueError(f"{where}: input must be 'probs' or 'logits'; got {kind!r}")
    method = doc["method"]
    if method is not None and (method not in METHODS or METHODS[method] not in specs):
        raise ValueError(f"{where}: method {method!r} is not a registered method of {name} "
                         f"(those are: {', '.join(s.name for s in specs)})")
    spec = METHODS[method] if method is not None else specs[0]
    cls = spec.load_class()
    try:
        wrapper = isinstance(make_calibrator(spec.name, input=kind), ProbsToLogits)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    params = _decode_params(cls, wrapper, doc["hyperparameters"], f"{where}: hyperparameters")
    fixed = {k: params.pop(k) for k in list(spec.fixed) if k in params}
    if method is not None:
        clash = {k: v for k, v in fixed.items() if v != spec.fixed[k]}
        if clash:
            raise ValueError(f"{where}: hyperparameters {clash} contradict method {method!r}, "
                             f"which fixes {dict(spec.fixed)}")
    try:
        outer = {"eps": params.pop("eps")} if wrapper else {}
        est = make_calibrator(spec.name, input=kind, **params)
        est.set_params(**outer)  # the adapter's floor (the registry cannot take it)
        inner = est.estimator if isinstance(est, ProbsToLogits) else est
        if fixed:
            inner.set_params(**fixed)
        inner._check_params()  # the checks fit starts with, without fitting
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: invalid hyperparameters: {exc}") from None
    found = _method_of(est)
    if found != method:
        raise ValueError(f"{where}: method is {method!r} but these hyperparameters make "
                         f"{'method ' + repr(found) if found else 'no registered method'}")
    return est, schema, {**params, **fixed, **outer}


def _restore_state(est: Any, schema: StateSchema, doc: dict[str, Any], params: dict[str, Any],
                   classes: np.ndarray, where: str) -> None:
    """Set the fitted state of ``est`` from the document's stored fields."""
    from sklearn.base import clone

    from bayescal.calibrators.registry import ProbsToLogits

    k = len(classes)
    fitted = doc["fitted"]
    if not isinstance(fitted, dict):
        raise ValueError(f"{where}: fitted must be an object; got "
                         f"{type(fitted).__name__ if fitted is not None else 'null'}")
    fields = {**schema.fields, **COMMON_FIELDS}
    optional = set()
    for n, f in fields.items():
        if f.when is not None:
            present = params.get(f.when[0]) == f.when[1]
            if not present and n in fitted:
                raise ValueError(f"{where}: fitted.{n} is only stored when "
                                 f"{f.when[0]}={f.when[1]!r}")
            if not present:
                optional.add(n)
        elif not f.required:
            optional.add(n)
    _exact_keys(fitted, fields, f"{where}: fitted", optional)
    dims = {"k": k}
    state = {n: _decode_field(fields[n], v, f"{where}: fitted.{n}", dims)
             for n, v in fitted.items()}
    if schema.linear_map == "stored":
        state["coef_"] = _decode_field(_f("float", "k", "k"), doc["W"], f"{where}: W", dims)
        state["intercept_"] = _decode_field(_f("float", "k"), doc["b"], f"{where}: b", dims)
    if schema.check is not None:
        schema.check(state, params, k, where)
    _check_fixed_params(schema, state, params, where)
    wrapper = isinstance(est, ProbsToLogits)
    inner = clone(est.estimator) if wrapper else est
    attrs = dict(state) if schema.dump is None else {}
    if schema.restore is not None:
        attrs.update(schema.restore(inner, state, k))
    if "feature_names_in_" in state:
        attrs["feature_names_in_"] = state["feature_names_in_"]
    attrs.update(classes_=classes, n_features_in_=k)
    for name, value in attrs.items():
        setattr(inner, name, value)
    if wrapper:
        est.estimator_ = inner
        est.n_features_in_, est.classes_ = k, classes
        for name in ("coef_", "intercept_"):
            if hasattr(inner, name):
                setattr(est, name, getattr(inner, name))


def _check_fixed_params(schema: StateSchema, state: dict[str, Any], params: dict[str, Any],
                        where: str) -> None:
    """A hyperparameter fixed to a number must be the value its fit used (``<name>_``)."""
    for name in schema.fixed_params:
        value, fitted = params.get(name), state.get(f"{name}_")
        if type(value) in (int, float) and fitted is not None and float(value) != fitted:
            raise ValueError(f"{where}: hyperparameter {name}={value!r} contradicts the fitted "
                             f"{name}_ = {fitted!r} (the value its fit used)")


def _check_classes_param(params: dict[str, Any], classes: np.ndarray, where: str) -> None:
    """The ``classes`` hyperparameter, when set, must name the fitted classes, in order."""
    from bayescal._validation import check_classes

    value = params.get("classes")
    if value is None:
        return
    shown = list(value) if isinstance(value, tuple) else value
    try:
        given = check_classes(value, n_classes=len(classes))
    except ValueError as exc:
        raise ValueError(f"{where}: hyperparameter classes={shown!r} is invalid: {exc}") from None
    if not np.array_equal(given, classes):
        raise ValueError(f"{where}: hyperparameter classes={shown!r} contradicts the fitted "
                         f"classes {classes.tolist()}")


def _floor(est: Any) -> Any:
    """The probability floor the fitted map applies: ``eps_`` when chosen in fit, else ``eps``."""
    eps = getattr(est, "eps_", None)
    return getattr(est, "eps", None) if eps is None else eps


def _verify_copies(est: Any, schema: StateSchema, doc: dict[str, Any], where: str) -> None:
    """The redundant fields must equal what the stored state gives."""
    k = int(est.n_features_in_)
    if doc["n_classes"] != k or type(doc["n_classes"]) is not int:
        raise ValueError(f"{where}: n_classes is {doc['n_classes']!r} but the state has {k} "
                         "classes")
    eps = _floor(est)
    if doc["eps"] != (None if eps is None else float(eps)) or type(doc["eps"]) not in (
            float, NoneType):
        raise ValueError(f"{where}: eps is {doc['eps']!r} but the estimator's is {eps!r}")
    if doc["map"] != _describe(est, schema):
        raise ValueError(f"{where}: map is {doc['map']!r}, which does not describe this "
                         f"{doc['estimator']} (expected {_describe(est, schema)!r})")
    inner = _inner(est)
    if schema.linear_map == "none":
        for key in ("W", "b"):
            if doc[key] is not None:
                raise ValueError(f"{where}: {key} must be null for {doc['estimator']}")
    elif schema.linear_map == "copy":
        for key, attr in (("W", "coef_"), ("b", "intercept_")):
            value = getattr(inner, attr)
            try:
                stored = _decode_field(_f("float", *np.shape(value)), doc[key], key, {})
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            if not _close(stored, value):
                raise ValueError(f"{where}: {key} does not equal the map of the stored state")
    A, c = _canonical(est) if schema.linear_map != "none" else (None, None)
    for key, value in (("A", A), ("c", c)):
        if value is None:
            if doc[key] is not None:
                raise ValueError(f"{where}: {key} must be null (this map has no canonical form)")
            continue
        try:
            stored = _decode_field(_f("float", *value.shape), doc[key], key, {})
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not _close(stored, value):
            raise ValueError(f"{where}: {key} does not equal the canonical form of W, b")


def _check_header(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise ValueError(f"{where} is not a bayescal model file (no \"format\": "
                         f"\"{MODEL_FORMAT}\")")
    version = doc.get("format_version")
    # version 3 changed only the id of a Bayesian model's posterior: a version 2 file
    # without a posterior reads exactly as before
    readable = version == MODEL_FORMAT_VERSION or (version == 2 and doc.get("posterior") is None)
    if not readable or type(version) is not int:
        reason = _OLD_VERSIONS.get(version) if type(version) is int else None
        hint = f" ({reason})" if reason else ""
        raise ValueError(f"{where} has model format version {version!r}; this bayescal reads "
                         f"version {MODEL_FORMAT_VERSION}{hint}")
    _exact_keys(doc, set(_TOP_LEVEL), where)
    for key in ("bayescal_version", "estimator", "map"):
        if type(doc[key]) is not str:
            raise ValueError(f"{where}: {key} must be a string; got {doc[key]!r}")
    if doc["method"] is not None and type(doc["method"]) is not str:
        raise ValueError(f"{where}: method must be a string or null; got {doc['method']!r}")
    h = doc["training_data_sha256"]
    if h is not None and (type(h) is not str or not _SHA256_RE.fullmatch(h)):
        raise ValueError(f"{where}: training_data_sha256 must be 'sha256:' and 64 hex digits, "
                         f"or null; got {h!r}")
    return doc


def _from_document(doc: dict[str, Any], where: str, *, posterior: Path | None = None,
                   posterior_estimator: Any = None) -> Any:
    """Rebuild and verify a fitted estimator from a parsed document."""
    _check_header(doc, where)
    est, schema, params = _build(doc, where)
    classes = _decode_classes(doc["classes"], f"{where}: classes")
    _check_classes_param(params, classes, where)
    if schema.posterior:
        if posterior_estimator is None:
            posterior_estimator = _load_posterior(type(est), doc, posterior, where)
        est = posterior_estimator
        _verify_posterior(est, schema, doc, params, classes, where)
    else:
        if doc["posterior"] is not None:
            raise ValueError(f"{where}: posterior must be null for {doc['estimator']}")
        _restore_state(est, schema, doc, params, classes, where)
    _verify_copies(est, schema, doc, where)
    return est


def _load_posterior(cls: type, doc: dict[str, Any], posterior: Path | None, where: str) -> Any:
    name = doc["posterior"]
    if type(name) is not str or not name or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"{where}: posterior must be the file name of the netCDF posterior "
                         f"beside the model file; got {name!r}")
    assert posterior is not None
    post = posterior / name
    if not post.is_file():
        raise ValueError(f"{where}: its posterior file {post} is missing")
    try:
        return cls._read_posterior(post)
    except ValueError as exc:  # the posterior's own checks
        problem = str(exc)
    except Exception as exc:  # netCDF / HDF5 errors of every kind
        problem = f"{type(exc).__name__}: {exc}"
    raise ValueError(f"{where}: cannot read its posterior {post}: {' '.join(problem.split())}")


def _verify_posterior(est: Any, schema: StateSchema, doc: dict[str, Any],
                      params: dict[str, Any], classes: np.ndarray, where: str) -> None:
    fitted = doc["fitted"]
    if not isinstance(fitted, dict):
        raise ValueError(f"{where}: fitted must be an object")
    _exact_keys(fitted, schema.fields, f"{where}: fitted")
    state = {n: _decode_field(f, fitted[n], f"{where}: fitted.{n}", {})
             for n, f in schema.fields.items()}
    post = doc["posterior"]
    if state["model_id_"] != getattr(est, "model_id_", None):
        raise ValueError(
            f"{where}: the posterior {post} holds model {getattr(est, 'model_id_', None)!r}, "
            f"not the model {state['model_id_']!r} this file describes (a posterior of another "
            "model?)"
        )
    if getattr(est, "input", None) != doc["input"]:
        raise ValueError(f"{where}: input is {doc['input']!r} but the posterior {post} was "
                         f"fitted on {getattr(est, 'input', None)!r}")
    have = _encode_params(est)
    want = _encode_params(type(est)(**params))
    for name in want:
        if have.get(name) != want[name]:
            raise ValueError(f"{where}: hyperparameter {name}={want[name]!r} differs from the "
                             f"posterior's {have.get(name)!r}")
    if not np.array_equal(np.asarray(est.classes_), classes):
        raise ValueError(f"{where}: classes {classes.tolist()} differ from the posterior's "
                         f"{np.asarray(est.classes_).tolist()}")


def _strict_json(text: str, where: str) -> Any:
    def constant(name: str) -> Any:
        raise ValueError(f"{where}: JSON constant {name} is not allowed (non-finite values "
                         "are written as the strings \"nan\", \"inf\", \"-inf\")")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"{where}: duplicate JSON key {key!r}")
            out[key] = value
        return out

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
            raise ValueError(f"{where}: JSON integer of {len(digits.lstrip('-'))} digits is "
                             f"too large for a model file (at most {_MAX_INT_DIGITS})")
        return int(digits)

    try:
        return json.loads(text, parse_constant=constant, object_pairs_hook=pairs,
                          parse_int=integer)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply") from None


def _check_model_path(path: Path, *, saving: bool) -> None:
    """Model files end in ``.json``; say what to use instead of a posterior or another file."""
    if path.suffix.lower() == ".json":
        return
    if not saving and path.suffix.lower() == ".nc":
        raise ValueError(f"{path} is the posterior of a Bayesian model: load the model file "
                         f"{path.with_suffix('.json').name} beside it")
    hint = (" (a Bayesian model's posterior is written beside it as .nc)" if saving else "")
    raise ValueError(f"model file {path} must end in .json: bayescal model files are JSON "
                     f"documents{hint}")


def _write_files(path: Path, text: str, posterior: bytes | None, *, overwrite: bool) -> None:
    """Write the JSON model file and, for a Bayesian model, its posterior: both or neither."""
    if posterior is None:
        write_bytes(path, text.encode(), overwrite=overwrite)
        return
    post = posterior_path(path)
    write_bytes(post, posterior, overwrite=overwrite)
    try:
        write_bytes(path, text.encode(), overwrite=overwrite)
    except BaseException:
        post.unlink(missing_ok=True)
        raise


def _dumps(doc: dict[str, Any]) -> str:
    # one top-level key per line, each value compact
    return "{\n" + ",\n".join(
        f" {json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in doc.items()
    ) + "\n}\n"


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------
def save_model(estimator: Any, path: str | os.PathLike[str], *,
               training_hash: str | None = None, overwrite: bool = False) -> Path:
    """Save a fitted calibrator as a JSON model file (and its posterior, if Bayesian).

    The document is checked by rebuilding the estimator from it before
    anything is written, so every file :func:`save_model` writes loads.

    Parameters
    ----------
    estimator : fitted calibrator
        An estimator whose class is in the method registry
        (:data:`bayescal.calibrators.registry.METHODS`) and in
        :data:`STATE_SCHEMAS`, with any hyperparameters (``method`` is stored
        as null when they match no registered method, e.g. ``MatrixScaler()``
        with a penalty other than the registry's).
    path : path-like
        The file to write, ending in ``.json`` (Bayesian: the posterior goes
        to :func:`posterior_path`, serialised in memory first, so that each
        file is written whole or not at all).
    training_hash : str, optional
        Digest of the training data (:func:`hash_training_data`), stored so a
        model can be traced to its data.
    overwrite : bool, default=False
        Replace existing files; otherwise an existing file is an error.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        If the estimator is not fitted, not savable, or holds a value a model
        file cannot store (the message names it); if ``path`` does not end in
        ``.json``.
    FileExistsError
        If a target file exists and ``overwrite`` is False.
    OSError
        If a file cannot be written (``"cannot write <file>: <reason>"``);
        nothing is left behind.
    """
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    path = Path(path)
    _check_model_path(path, saving=True)
    try:
        check_is_fitted(estimator)
    except (NotFittedError, TypeError) as exc:
        raise ValueError(f"cannot save an unfitted {type(estimator).__name__}: {exc}") from exc
    if training_hash is not None and (
        not isinstance(training_hash, str) or not _SHA256_RE.fullmatch(training_hash)
    ):
        raise ValueError(f"training_hash must be 'sha256:' and 64 hex digits (see "
                         f"hash_training_data); got {training_hash!r}")
    schema = STATE_SCHEMAS.get(type(_inner(estimator)).__name__)
    bayesian = schema is not None and schema.posterior
    post = posterior_path(path) if bayesian else None
    doc = _document(estimator, training_hash=training_hash,
                    posterior=post.name if post is not None else None)
    text = _dumps(doc)
    # what the file says must rebuild this estimator (validates the document)
    _from_document(_strict_json(text, str(path)), f"cannot save to {path}",
                   posterior=path.parent, posterior_estimator=estimator if bayesian else None)
    targets = [path] + ([post] if post is not None else [])
    for target in targets:
        if target.exists() and not overwrite:
            raise FileExistsError(f"{target} already exists (use --force / overwrite=True)")
    _write_files(path, text, estimator._netcdf_bytes() if bayesian else None,
                 overwrite=overwrite)
    return path


def load_model(path: str | os.PathLike[str]) -> Any:
    """Rebuild a fitted calibrator from :func:`save_model`'s JSON file.

    Nothing the file names is imported or called: the class comes from the
    method registry, its parameters and fitted state are checked against the
    declared schema, and the redundant fields against the rebuilt state (see
    the module docstring).

    Parameters
    ----------
    path : path-like
        The model file (``.json``; a Bayesian model's posterior is read from
        beside it).

    Returns
    -------
    estimator
        A fitted estimator; its ``predict_proba`` reproduces the saved
        model's predictions.

    Raises
    ------
    ValueError
        If the file is not a valid bayescal model file of this format version,
        or any field breaks the schema or disagrees with the state (the message
        names the file and the field); if ``path`` does not end in ``.json``;
        for Bayesian models, if the posterior is missing, unreadable, holds a
        non-finite draw, was changed or belongs to another model.
    FileNotFoundError, IsADirectoryError
        If the file does not exist or is a directory.
    """
    from bayescal import __version__

    path = Path(path)
    _check_model_path(path, saving=False)
    if path.is_dir():
        raise IsADirectoryError(f"model file {path} is a directory, not a file")
    if not path.exists():
        raise FileNotFoundError(f"model file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a JSON model file (not UTF-8 text: {exc.reason})"
                         ) from None
    doc = _strict_json(text, str(path))
    _check_header(doc, str(path))
    if doc["bayescal_version"] != __version__:
        warnings.warn(f"{path} was written by bayescal {doc['bayescal_version']}, this is "
                      f"{__version__}", UserWarning, stacklevel=2)
    return _from_document(doc, str(path), posterior=path.parent)
