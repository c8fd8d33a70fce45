"""Files: calibrator models as JSON, and the score files of the command line.

Model files
-----------
:func:`save_model` writes one JSON document holding everything needed to
rebuild a fitted calibrator, readable without bayescal:

* ``method`` (registry name, :mod:`bayescal.calibrators.registry`), ``input``
  (``"probs"`` or ``"logits"``), ``eps``, ``n_classes``;
* ``W``, ``b`` (the DirLin map ``softmax(W x + b)``) and, when the map acts
  on log-probabilities, its canonical form ``A``, ``c``;
* ``hyperparameters`` (``get_params()``), every fitted attribute
  (``fitted``), the ``bayescal_version`` and the SHA-256 of the training data
  (:func:`hash_training_data`).

Floats are written with Python's shortest round-trip repr, so a reloaded
model reproduces predictions exactly (tested to 1e-12). Bayesian methods also
write their posterior as netCDF beside the JSON (``model.nc`` for
``model.json``), through the estimator's own ``save`` / ``load``.

Every file is written to a temporary name in the target directory and moved
into place with :func:`os.replace`, so a reader never sees a half-written
file, and an existing file is never overwritten unless asked.

Score files
-----------
:func:`read_scores` reads the scores (and labels) of the command line:

* ``.npz`` with an array ``probs`` or ``logits`` (n, k) and optionally ``y``;
* ``.npy`` holding the (n, k) scores; labels come from a separate file;
* ``.csv`` with one column per class and a label column: the column named by
  ``label_column`` (a header name or a 0-based index, negative from the end),
  else a header column called ``y`` or ``label``, else (when labels are
  needed) the last column. A first row with any non-numeric field is a header.

Labels are integer codes ``0..k-1``; column ``j`` of the scores is class ``j``.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import inspect
import io
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._validation import check_labels, check_option, check_scores

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "ScoreData",
    "atomic_write",
    "hash_training_data",
    "load_model",
    "posterior_path",
    "read_labels",
    "read_scores",
    "save_model",
    "write_scores",
]

MODEL_FORMAT = "bayescal-model"
MODEL_FORMAT_VERSION = 1


# ---------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------
def atomic_write(path: str | os.PathLike, write: Callable[[Path], Any], *,
                 overwrite: bool = False) -> Path:
    """Write ``path`` through a temporary file in the same directory.

    ``write(tmp_path)`` produces the content; only when it returns is the file
    moved to ``path`` (:func:`os.replace`, atomic on POSIX). On any error the
    temporary file is removed and ``path`` is untouched.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists (use --force / overwrite=True to replace it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise FileNotFoundError(f"output directory {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        # mkstemp creates the file private (0600); give it the usual permissions
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_bytes(path: str | os.PathLike, data: bytes, *, overwrite: bool = False) -> Path:
    return atomic_write(path, lambda p: p.write_bytes(data), overwrite=overwrite)


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
# JSON encoding of parameters and fitted attributes
# ---------------------------------------------------------------------------
def _encode(value: Any, where: str) -> Any:
    """Encode ``value`` as JSON, exactly (arrays keep dtype and shape)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if np.isfinite(v) else {"__float__": repr(v)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biu":
            data = value.tolist()
        elif value.dtype.kind == "f":
            arr = value.astype(np.float64)
            data = arr.tolist() if np.isfinite(arr).all() else [float(v).hex() for v in arr.ravel()]
            if not np.isfinite(arr).all():
                return {"__ndarray__": data, "dtype": value.dtype.str, "shape": list(value.shape),
                        "hex": True}
        elif value.dtype.kind == "U":
            data = value.tolist()
        else:
            raise ValueError(f"cannot save {where}: array of dtype {value.dtype}")
        return {"__ndarray__": data, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        cls = type(value)
        return {"__namedtuple__": f"{cls.__module__}.{cls.__qualname__}",
                "fields": {f: _encode(getattr(value, f), f"{where}.{f}") for f in value._fields}}
    if isinstance(value, list | tuple):
        return {"__tuple__" if isinstance(value, tuple) else "__list__":
                [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(f"cannot save {where}: dict with non-string keys")
        return {"__dict__": {k: _encode(v, f"{where}[{k!r}]") for k, v in value.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return {"__dataclass__": f"{cls.__module__}.{cls.__qualname__}",
                "fields": {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(value) if f.init}}
    if hasattr(value, "get_params") and hasattr(value, "fit"):
        return {"__estimator__": _class_path(value),
                "params": _encode(value.get_params(deep=False), f"{where}.params"),
                "fitted": _encode(_fitted_attributes(value), f"{where}.fitted")}
    raise ValueError(f"cannot save {where}: unsupported type {type(value).__name__}")


def _import_qualified(path: str) -> Any:
    """Import ``module.Qual.Name`` trying successively shorter module paths.

    Only bayescal's own classes are imported: a model file cannot make
    :func:`load_model` import arbitrary modules.
    """
    if not path.startswith("bayescal."):
        raise ValueError(f"model files may only name bayescal classes; got {path!r}")
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(f"cannot import {path}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):  # plain JSON list (only inside W/b style fields)
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__float__" in value:
        return float(value["__float__"])
    if "__ndarray__" in value:
        data = value["__ndarray__"]
        if value.get("hex"):
            data = [float.fromhex(v) for v in data]
        return np.asarray(data, dtype=np.dtype(value["dtype"])).reshape(value["shape"])
    if "__list__" in value:
        return [_decode(v) for v in value["__list__"]]
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__dict__" in value:
        return {k: _decode(v) for k, v in value["__dict__"].items()}
    if "__namedtuple__" in value or "__dataclass__" in value:
        cls = _import_qualified(value.get("__namedtuple__") or value["__dataclass__"])
        return cls(**{k: _decode(v) for k, v in value["fields"].items()})
    if "__estimator__" in value:
        est = _import_qualified(value["__estimator__"])(**_decode(value["params"]))
        for name, attr in _decode(value["fitted"]).items():
            setattr(est, name, attr)
        return est
    return {k: _decode(v) for k, v in value.items()}


def _class_path(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _fitted_attributes(estimator: Any, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Public attributes ending in ``_`` (scikit-learn's fitted state)."""
    return {
        k: v for k, v in vars(estimator).items()
        if k.endswith("_") and not k.startswith("_") and k not in skip
    }


# ---------------------------------------------------------------------------
# model files
# ---------------------------------------------------------------------------
def posterior_path(model_path: str | os.PathLike) -> Path:
    """Where the posterior of a Bayesian model is stored: ``model.nc`` beside ``model.json``."""
    return Path(model_path).with_suffix(".nc")


def _canonical(estimator: Any) -> tuple[Any, Any, str | None]:
    try:
        A, c = estimator.to_canonical()
    except (AttributeError, ValueError) as exc:
        return None, None, f"no canonical form: {exc}"
    return np.asarray(A, dtype=np.float64), np.asarray(c, dtype=np.float64), None


def _map_description(estimator: Any) -> str:
    if getattr(estimator, "_feature_space", "log") == "raw" and estimator.input == "logits":
        return "calibrated = softmax(W z + b) on the raw logits z"
    return ("calibrated = softmax(W x + b), x = max(ln q, ln eps) (from logits z: "
            "x = max(log_softmax(z), ln eps)); canonical: softmax(A ln(k q) + ln c)")


def _model_document(estimator: Any, *, method: str, training_hash: str,
                    posterior: str | None, fitted_skip: tuple[str, ...]) -> dict[str, Any]:
    from bayescal import __version__

    params = estimator.get_params(deep=False)
    W = getattr(estimator, "coef_", None)
    b = getattr(estimator, "intercept_", None)
    A, c, note = _canonical(estimator) if W is not None else (None, None, "no linear map")

    def as_list(a: Any) -> Any:
        return None if a is None else np.asarray(a, dtype=np.float64).tolist()

    doc = {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "bayescal_version": __version__,
        "method": method,
        "estimator": _class_path(estimator),
        "input": getattr(estimator, "input", None),
        "eps": params.get("eps"),
        "n_classes": int(getattr(estimator, "n_features_in_", len(b) if b is not None else 0)),
        "training_data_sha256": training_hash,
        "map": _map_description(estimator),
        "W": as_list(W),
        "b": as_list(b),
        "A": as_list(A),
        "c": as_list(c),
        "hyperparameters": {k: _encode(v, f"hyperparameter {k}") for k, v in params.items()},
        "fitted": {k: _encode(v, f"fitted attribute {k}")
                   for k, v in _fitted_attributes(estimator, skip=fitted_skip).items()},
        "posterior": posterior,
    }
    if note is not None:
        doc["canonical_note"] = note
    return doc


def save_model(estimator: Any, path: str | os.PathLike, *, training_hash: str,
               overwrite: bool = False) -> Path:
    """Save a fitted calibrator as a JSON model file (and its posterior, if Bayesian).

    Parameters
    ----------
    estimator : fitted calibrator
        An estimator of a registered method
        (:func:`bayescal.calibrators.registry.method_name`).
    path : path-like
        The ``.json`` file to write.
    training_hash : str
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
        If the estimator is not fitted, not a registered method, or holds a
        fitted attribute that cannot be stored.
    FileExistsError
        If a target file exists and ``overwrite`` is False.
    """
    from sklearn.utils.validation import check_is_fitted

    from bayescal.calibrators.registry import METHODS, method_name

    path = Path(path)
    method = method_name(estimator)
    try:
        check_is_fitted(estimator)
    except Exception as exc:  # NotFittedError
        raise ValueError(f"cannot save an unfitted {type(estimator).__name__}: {exc}") from exc
    bayesian = METHODS[method].bayesian
    post = posterior_path(path) if bayesian else None
    if post is not None and post == path:
        raise ValueError(f"model path {path} must not end in .nc (the posterior goes there)")
    # Bayesian estimators keep their posterior (idata_ and friends) in netCDF;
    # the JSON holds what serialises exactly.
    skip = tuple(k for k, v in _fitted_attributes(estimator).items()
                 if bayesian and _unencodable(v))
    doc = _model_document(estimator, method=method, training_hash=training_hash,
                          posterior=post.name if post else None, fitted_skip=skip)
    # one top-level key per line, each value compact: W reads as one row per line
    text = "{\n" + ",\n".join(
        f" {json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in doc.items()
    ) + "\n}\n"
    if post is not None:
        if post.exists() and not overwrite:
            raise FileExistsError(f"{post} already exists (use --force / overwrite=True)")
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} already exists (use --force / overwrite=True)")
        atomic_write(post, estimator.save, overwrite=overwrite)
        try:
            _write_bytes(path, text.encode(), overwrite=overwrite)
        except BaseException:
            post.unlink(missing_ok=True)
            raise
    else:
        _write_bytes(path, text.encode(), overwrite=overwrite)
    return path


def _unencodable(value: Any) -> bool:
    try:
        _encode(value, "x")
    except ValueError:
        return True
    return False


def load_model(path: str | os.PathLike) -> Any:
    """Rebuild a fitted calibrator from :func:`save_model`'s JSON file.

    Parameters
    ----------
    path : path-like
        The ``.json`` model file.

    Returns
    -------
    estimator
        A fitted estimator of the saved class; its ``predict_proba``
        reproduces the saved model's predictions.

    Raises
    ------
    ValueError
        If the file is not a bayescal model, names an unknown method, or its
        posterior file is missing.
    """
    from bayescal import __version__
    from bayescal.calibrators.registry import METHODS, method_name

    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable JSON model file: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path} is not a bayescal model file (no \"format\": \"{MODEL_FORMAT}\")")
    if doc.get("format_version") != MODEL_FORMAT_VERSION:
        raise ValueError(
            f"{path} has model format version {doc.get('format_version')!r}; this bayescal "
            f"reads version {MODEL_FORMAT_VERSION}"
        )
    if doc.get("bayescal_version") != __version__:
        warnings.warn(
            f"{path} was written by bayescal {doc.get('bayescal_version')}, this is "
            f"{__version__}", UserWarning, stacklevel=2,
        )
    method = doc.get("method")
    if method not in METHODS:
        raise ValueError(f"{path} names unknown method {method!r}; valid: {', '.join(METHODS)}")
    spec = METHODS[method]
    params = {k: _decode(v) for k, v in doc["hyperparameters"].items()}
    if spec.bayesian:
        post = path.parent / doc["posterior"]
        if not post.is_file():
            raise ValueError(f"posterior file {post} of Bayesian model {path} is missing")
        cls = spec.load_class()
        if isinstance(inspect.getattr_static(cls, "load"), classmethod | staticmethod):
            est = cls.load(post)
        else:
            est = cls(**params)
            loaded = est.load(post)
            est = loaded if loaded is not None else est
        # the netCDF file is authoritative for a posterior; the JSON copy of the
        # fitted attributes is for readers without bayescal
        return est
    else:
        cls = _import_qualified(str(doc.get("estimator")))
        est = cls(**params)
        if method_name(est) != method:
            raise ValueError(
                f"{path}: estimator {doc.get('estimator')} with these hyperparameters is not "
                f"method {method!r}"
            )
    for name, value in doc["fitted"].items():
        setattr(est, name, _decode(value))
    return est


# ---------------------------------------------------------------------------
# score files
# ---------------------------------------------------------------------------
@dataclass
class ScoreData:
    """Scores read from a file.

    Attributes
    ----------
    scores : ndarray of shape (n, k), float64
    kind : {"probs", "logits"}
    y : ndarray of shape (n,) or None
    columns : list of str or None
        Header names of the score columns (CSV with a header).
    """

    scores: NDArray[np.float64]
    kind: str
    y: NDArray[np.intp] | None
    columns: list[str] | None = None


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _read_csv(path: Path) -> tuple[list[str] | None, list[list[str]]]:
    try:
        with path.open(newline="") as fh:
            rows = [r for r in csv.reader(fh) if r and any(f.strip() for f in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: cannot read CSV: {exc}") from exc
    if not rows:
        raise ValueError(f"{path}: CSV file is empty")
    header = None
    if not all(_is_number(f) for f in rows[0]):
        header = [f.strip() for f in rows[0]]
        rows = rows[1:]
    if not rows:
        raise ValueError(f"{path}: CSV file has a header but no data rows")
    width = len(header) if header is not None else len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            line = i + (2 if header is not None else 1)
            raise ValueError(f"{path}: line {line} has {len(r)} fields, expected {width}")
    return header, rows


def _csv_matrix(path: Path, rows: list[list[str]], cols: list[int], header: list[str] | None
                ) -> NDArray[np.float64]:
    out = np.empty((len(rows), len(cols)))
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            try:
                out[i, j] = float(r[c])
            except ValueError:
                name = header[c] if header else f"column {c}"
                line = i + (2 if header is not None else 1)
                raise ValueError(
                    f"{path}: non-numeric value {r[c]!r} in {name} at line {line}"
                ) from None
    return out


def _label_index(path: Path, header: list[str] | None, width: int,
                 label_column: str | int | None, need_labels: bool) -> int | None:
    if label_column is not None:
        if isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
            if header is None or label_column not in header:
                have = header if header is not None else "no header row"
                raise ValueError(
                    f"{path}: label column {label_column!r} not found (columns: {have})"
                )
            return header.index(label_column)
        idx = int(label_column)
        if not -width <= idx < width:
            raise ValueError(f"{path}: label column index {idx} out of range for {width} columns")
        return idx % width
    if header is not None:
        for name in ("y", "label"):
            if name in header:
                return header.index(name)
    if need_labels:
        if header is not None:
            raise ValueError(
                f"{path}: missing label column: no column named 'y' or 'label' in {header}; "
                "name it with --label-column"
            )
        return width - 1
    return None


def read_labels(path: str | os.PathLike) -> NDArray[Any]:
    """Read a label file: ``.npy`` (1-D) or text/CSV with one label per line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"label file {path} does not exist")
    if path.suffix == ".npy":
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read labels: {exc}") from exc
    header, rows = _read_csv(path)
    if len(rows[0]) != 1:
        raise ValueError(f"{path}: a label file must have one column; got {len(rows[0])}")
    arr = _csv_matrix(path, rows, [0], header)[:, 0]
    return arr


def read_scores(
    path: str | os.PathLike,
    *,
    input: str | None = None,
    labels: str | os.PathLike | None = None,
    label_column: str | int | None = None,
    need_labels: bool = False,
    n_classes: int | None = None,
) -> ScoreData:
    """Read and validate scores (and labels) from an .npz, .npy or .csv file.

    Parameters
    ----------
    path : path-like
        The score file (see the module docstring for the formats).
    input : {"probs", "logits"}, optional
        What the scores hold. For .npz files the array name decides when
        ``input`` is None (an error if both ``probs`` and ``logits`` are
        present); for .npy and .csv files the default is ``"probs"``.
    labels : path-like, optional
        A separate label file (:func:`read_labels`).
    label_column : str or int, optional
        CSV only: the label column, by header name or 0-based index.
    need_labels : bool, default=False
        Raise if no labels are found.
    n_classes : int, optional
        Expected number of score columns (e.g. the fitted model's).

    Returns
    -------
    ScoreData

    Raises
    ------
    ValueError
        On unreadable files, missing arrays or label column, NaN or inf,
        invalid probabilities, wrong shapes or labels outside ``0..k-1``.
    FileNotFoundError
        If a file does not exist.
    """
    path = Path(path)
    if input is not None:
        check_option(input, "input", ("probs", "logits"))
    if not path.is_file():
        raise FileNotFoundError(f"score file {path} does not exist")
    suffix = path.suffix.lower()
    y: Any = None
    columns = None
    if suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: cannot read .npz file: {exc}") from exc
        present = [k for k in ("probs", "logits") if k in arrays]
        if input is None:
            if len(present) != 1:
                raise ValueError(
                    f"{path}: expected exactly one array named 'probs' or 'logits'; found "
                    f"arrays {sorted(arrays)} (choose with --input)"
                )
            input = present[0]
        if input not in arrays:
            raise ValueError(f"{path}: no array named {input!r}; found arrays {sorted(arrays)}")
        scores = arrays[input]
        y = arrays.get("y")
    elif suffix == ".npy":
        try:
            scores = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: cannot read .npy file: {exc}") from exc
    elif suffix == ".csv":
        header, rows = _read_csv(path)
        width = len(rows[0])
        li = _label_index(path, header, width, label_column, need_labels and labels is None)
        cols = [c for c in range(width) if c != li]
        scores = _csv_matrix(path, rows, cols, header)
        columns = [header[c] for c in cols] if header else None
        if li is not None:
            y = _csv_matrix(path, rows, [li], header)[:, 0]
    else:
        raise ValueError(
            f"{path}: unsupported score file type {path.suffix!r} (use .npz, .npy or .csv)"
        )
    if label_column is not None and suffix != ".csv":
        raise ValueError("--label-column applies to .csv score files only")
    kind = input or "probs"
    scores = check_scores(scores, kind=kind, name=f"scores in {path.name}", n_classes=n_classes)
    if labels is not None:
        if y is not None:
            raise ValueError(f"labels given twice: {path} has a label column/array and "
                             f"--labels {labels} was passed")
        y = read_labels(labels)
    if y is None and need_labels:
        raise ValueError(
            f"{path}: no labels found (an .npz needs an array 'y'; otherwise pass --labels)"
        )
    if y is not None:
        y = check_labels(y, n_samples=scores.shape[0], n_classes=scores.shape[1])
    return ScoreData(scores=scores, kind=kind, y=y, columns=columns)


def write_scores(path: str | os.PathLike, proba: ArrayLike, *, overwrite: bool = False) -> Path:
    """Write calibrated probabilities atomically: ``.npz`` (array ``probs``) or ``.csv``.

    The CSV has a header ``p0,...,p{k-1}`` and full float64 precision.
    """
    path = Path(path)
    proba = np.asarray(proba, dtype=np.float64)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        buf = io.BytesIO()
        np.savez(buf, probs=proba)
        return _write_bytes(path, buf.getvalue(), overwrite=overwrite)
    if suffix == ".csv":
        buf = io.StringIO()
        buf.write(",".join(f"p{j}" for j in range(proba.shape[1])) + "\n")
        np.savetxt(buf, proba, delimiter=",", fmt="%.17g")
        return _write_bytes(path, buf.getvalue().encode(), overwrite=overwrite)
    raise ValueError(f"unsupported output file type {path.suffix!r} for {path} (use .npz or .csv)")
