"""Input checks: the one place where bayescal validates user input.

Every public function and estimator calls into this module, so the wording of
an error is the same wherever the bad value enters. Each check raises
:class:`ValueError` naming the problem and showing the offending value (or the
first offending row), and never repairs the input: nothing is renormalised,
and the only clipping anywhere in bayescal is the documented ``eps`` floor of
:func:`bayescal.maps.log_features`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import DataConversionWarning

__all__ = [
    "EPS",
    "MAX_RAW_LOGIT",
    "ROW_SUM_ATOL",
    "check_alpha",
    "check_classes",
    "check_concentration",
    "check_dirichlet_statistics",
    "check_eps",
    "encode_labels",
    "check_features",
    "check_fraction",
    "check_labels",
    "check_linear_params",
    "check_pi",
    "check_sample_weight",
    "check_scores",
    "check_option",
    "check_positive_int",
    "check_nonnegative_float",
    "check_proba_draws",
    "check_raw_logits",
    "check_rng",
]

#: Default floor for probabilities before the logarithm: float64 machine
#: epsilon, as in the paper authors' calibration utilities. Pass
#: ``eps=np.finfo(float).tiny`` to reproduce the paper text (2.2e-308).
EPS: float = float(np.finfo(np.float64).eps)

#: Absolute tolerance on ``|sum(q) - 1|`` for a probability row, by the
#: precision of the data. Float32 softmax outputs (common for neural networks)
#: routinely miss 1 by a few 1e-7 per entry, so their tolerance scales with
#: float32 precision. The precision is that of the input dtype, or, for float64
#: input, the narrowest float type holding every value exactly: float32 data
#: converted to float64 (by a caller, a file format, or bayescal itself between
#: two checks) keep the float32 tolerance.
ROW_SUM_ATOL: dict[str, float] = {"float64": 1e-6, "float32": 1e-4, "float16": 1e-2}

#: Largest accepted magnitude of raw logits for the fits on raw logits (vector
#: and matrix scaling): their Hessian mixes terms of order ``z**2`` with terms
#: of order 1, and beyond ``|z| = 1e8`` the ratio exceeds float64's dynamic
#: range for a Cholesky factorisation (``1 / eps = 4.5e15``), so no fit is
#: meaningful. (Maps on log-probabilities take any finite logits.)
MAX_RAW_LOGIT: float = 1e8

_MAX_SHOW = 6


def _show(values: ArrayLike) -> str:
    """Format a (possibly long) array for an error message."""
    arr = np.asarray(values)
    if arr.size <= _MAX_SHOW:
        return np.array2string(arr, precision=6, separator=", ")
    flat = arr.ravel()[:_MAX_SHOW]
    return np.array2string(flat, precision=6, separator=", ")[:-1] + ", ...]"


def check_option(value: Any, name: str, options: Iterable[Any]) -> Any:
    """Check that ``value`` is one of ``options``."""
    options = tuple(options)
    if not isinstance(value, str | type(None) | bool | Integral) or value not in options:
        raise ValueError(f"{name} must be one of {list(options)}; got {value!r}")
    return value


def check_positive_int(value: Any, name: str) -> int:
    """Check that ``value`` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def check_nonnegative_float(value: Any, name: str, *, strict: bool = False) -> float:
    """Check that ``value`` is a finite real >= 0 (> 0 with ``strict``)."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok:
        ok = value > 0 if strict else value >= 0
    if not ok:
        what = "positive" if strict else "non-negative"
        raise ValueError(f"{name} must be a finite {what} number; got {value!r}")
    return float(value)


def check_fraction(value: Any, name: str) -> float:
    """Check that ``value`` is a real number strictly between 0 and 1 (a level or quantile)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not np.isfinite(value)
        or not 0.0 < value < 1.0
    ):
        raise ValueError(f"{name} must be a number strictly between 0 and 1; got {value!r}")
    return float(value)


def check_rng(rng: Any) -> np.random.Generator:
    """Turn ``None``, a non-negative integer seed or a Generator into a Generator.

    Legacy ``RandomState`` objects and global seeding are not accepted, so a
    result is reproducible exactly when the caller passes a seed or generator.
    """
    if rng is None or isinstance(rng, np.random.Generator):
        return np.random.default_rng(rng)
    if isinstance(rng, Integral) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ValueError(
        f"rng must be None, a non-negative integer seed or a numpy Generator; got {rng!r}"
    )


def check_eps(eps: Any) -> float:
    """Check the probability floor ``eps``: a float in (0, 1)."""
    if (
        isinstance(eps, bool)
        or not isinstance(eps, Real)
        or not np.isfinite(eps)
        or not 0.0 < eps < 1.0
    ):
        raise ValueError(f"eps must be a float in (0, 1); got {eps!r}")
    return float(eps)


def _as_2d_float(scores: ArrayLike, name: str) -> NDArray[np.floating]:
    if hasattr(scores, "tocsr") or hasattr(scores, "todense"):  # scipy.sparse
        raise ValueError(
            f"{name} must be a dense array: sparse input is not supported "
            f"(got {type(scores).__name__}); call .toarray() first"
        )
    try:
        arr = np.asarray(scores)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be read as an array: {exc}") from exc
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real: Complex data not supported (dtype {arr.dtype})")
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or arr.dtype == bool
    ):
        raise ValueError(f"{name} must be numeric; got dtype {arr.dtype}")
    if arr.ndim != 2:
        hint = " Reshape your data: one row per sample, one column per class." * (arr.ndim == 1)
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes); got ndim={arr.ndim} "
            f"with shape {arr.shape}.{hint}"
        )
    if arr.shape[0] < 1:
        raise ValueError(
            f"{name} must have at least one row; got shape {arr.shape}: 0 sample(s) "
            f"(shape={arr.shape}) while a minimum of 1 is required."
        )
    if arr.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least 2 classes (columns); got shape {arr.shape}: "
            f"{arr.shape[1]} feature(s) (shape={arr.shape}) while a minimum of 2 is required."
        )
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def check_scores(
    scores: ArrayLike,
    *,
    kind: str = "probs",
    name: str = "scores",
    n_classes: int | None = None,
) -> NDArray[np.float64]:
    """Validate classifier scores and return them as float64 ``(n, k)``.

    Parameters
    ----------
    scores : array-like of shape (n_samples, n_classes)
        Probabilities (``kind="probs"``) or logits (``kind="logits"``).
    kind : {"probs", "logits"}, default="probs"
        What the columns hold. Probabilities must lie in [0, 1] and each row
        must sum to 1 within :data:`ROW_SUM_ATOL` for its dtype (float32 input
        is accepted with a looser tolerance). Logits only need to be finite.
    name : str, default="scores"
        Name used in error messages.
    n_classes : int, optional
        Expected number of columns (e.g. the number seen during ``fit``).

    Returns
    -------
    scores : ndarray of shape (n_samples, n_classes), float64
        The same values, converted to float64; never renormalised.

    Raises
    ------
    ValueError
        On NaN or inf, wrong ndim or shape, fewer than 2 classes, negative
        probabilities or probability rows that do not sum to 1.
    """
    check_option(kind, "kind", ("probs", "logits"))
    arr = _as_2d_float(scores, name)
    if n_classes is not None and arr.shape[1] != n_classes:
        raise ValueError(
            f"{name} has {arr.shape[1]} columns but {n_classes} classes were expected "
            f"(got shape {arr.shape})"
        )
    finite = np.isfinite(arr)
    if not finite.all():
        row = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise ValueError(
            f"{name} contains NaN or inf (first at row {row}: {_show(arr[row])})"
        )
    dtype_name = arr.dtype.name
    out = arr.astype(np.float64, copy=False)
    if kind == "probs":
        neg = out < 0
        if neg.any():
            row = int(np.flatnonzero(neg.any(axis=1))[0])
            raise ValueError(
                f"{name} contains negative probabilities (first at row {row}: "
                f"{_show(out[row])}); pass kind/input='logits' if these are logits"
            )
        atol = ROW_SUM_ATOL.get(dtype_name, 1e-6)
        dev = np.abs(out.sum(axis=1) - 1.0)
        bad = dev > atol
        if bad.any() and dtype_name == "float64":
            dtype_name = _data_precision(out)
            atol = ROW_SUM_ATOL[dtype_name]
            bad = dev > atol
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name} rows must sum to 1 (tolerance {atol:g} for {dtype_name}); "
                f"row {row} sums to {out[row].sum():.10g}: {_show(out[row])}. "
                "Pass kind/input='logits' if these are logits"
            )
    return out


def _data_precision(arr: NDArray[np.float64]) -> str:
    """Narrowest float dtype (of float16, float32, float64) holding every value exactly."""
    for name in ("float16", "float32"):
        with np.errstate(over="ignore"):
            if np.array_equal(arr.astype(name).astype(np.float64), arr):
                return name
    return "float64"


def check_raw_logits(z: NDArray[np.float64], *, name: str = "logits") -> NDArray[np.float64]:
    """Refuse raw logits beyond :data:`MAX_RAW_LOGIT` in magnitude (see there)."""
    big = np.abs(z) > MAX_RAW_LOGIT
    if big.any():
        row, col = (int(i) for i in np.argwhere(big)[0])
        raise ValueError(
            f"{name} are too large for a fit on raw logits: |z| = {abs(float(z[row, col])):.3g} "
            f"at row {row}, column {col} exceeds {MAX_RAW_LOGIT:g}, beyond which the fit "
            "cannot be computed in float64; divide the logits by a constant, or calibrate "
            "their log-probabilities (input='probs' with softmax(z), or a log-space method)"
        )
    return z


def check_proba_draws(
    proba_draws: ArrayLike, *, name: str = "proba_draws", n_samples: int | None = None
) -> NDArray[np.float64]:
    """Validate per-posterior-draw probabilities of shape ``(n_draws, n_samples, n_classes)``.

    Every draw must be a valid probability matrix (see :func:`check_scores`);
    the error names the first offending draw.
    """
    try:
        arr = np.asarray(proba_draws)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be read as an array: {exc}") from exc
    if arr.ndim != 3:
        raise ValueError(
            f"{name} must be 3-D of shape (n_draws, n_samples, n_classes); got ndim="
            f"{arr.ndim} with shape {arr.shape}"
        )
    if arr.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one draw; got shape {arr.shape}")
    if n_samples is not None and arr.shape[1] != n_samples:
        raise ValueError(
            f"{name} has {arr.shape[1]} samples per draw but {n_samples} were expected "
            f"(shape {arr.shape})"
        )
    out = np.empty(arr.shape, dtype=np.float64)
    for d in range(arr.shape[0]):
        out[d] = check_scores(arr[d], kind="probs", name=f"{name}[{d}]")
    return out


def _label_vector(y: ArrayLike, *, n_samples: int) -> NDArray[Any]:
    """``y`` as a 1-D array of ``n_samples`` labels (a column vector is accepted with a warning)."""
    if y is None:
        raise ValueError(
            "y is missing: this estimator requires y to be passed, but the target y is None"
        )
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is read as "
            "shape (n_samples,)",
            DataConversionWarning,
            stacklevel=4,
        )
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D of shape (n_samples,); got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(
            f"y has {arr.shape[0]} labels but the scores have {n_samples} rows"
        )
    return arr


def _integral(arr: NDArray[Any]) -> NDArray[np.bool_] | None:
    """Mask of integral entries of a float array (None for other dtypes)."""
    return np.isfinite(arr) & (arr == np.round(arr)) if arr.dtype.kind == "f" else None


def check_labels(y: ArrayLike, *, n_samples: int, n_classes: int) -> NDArray[np.intp]:
    """Validate class labels that are integer codes of the score columns.

    Labels are integer codes ``0 .. n_classes - 1``: label ``j`` is the class of
    score column ``j`` (the number of classes comes from the score columns,
    never from the labels, so a class may be absent from ``y``). Estimators
    and metrics that take labels as scikit-learn users give them go through
    :func:`encode_labels` instead.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Integer labels (floats with integral values are accepted).
    n_samples : int
        Expected length (the number of score rows).
    n_classes : int
        Number of score columns.

    Returns
    -------
    y : ndarray of shape (n_samples,), intp
    """
    arr = _label_vector(y, n_samples=n_samples)
    if arr.dtype == bool:
        arr = arr.astype(np.intp)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(
            f"y must hold integer class codes 0..{n_classes - 1} (column j of the scores "
            f"is class j); got dtype {arr.dtype} with values {_show(np.unique(arr))}"
        )
    integral = _integral(arr)
    if integral is not None and not integral.all():
        raise ValueError(
            "y must hold integer class codes; got continuous (non-integer) values "
            f"{_show(arr[~integral])}"
        )
    # range first: casting a huge float label to int would wrap around
    outside = (arr < 0) | (arr >= n_classes)
    if outside.any():
        shown = np.unique(arr[outside])
        if arr.dtype.kind == "f" and (np.abs(shown) < 2**53).all():
            shown = shown.astype(np.int64)
        raise ValueError(
            f"y has labels outside the classes 0..{n_classes - 1} given by the score "
            f"columns: {_show(shown)}"
        )
    return arr.astype(np.intp)


def _plain_labels(arr: NDArray[Any], name: str) -> NDArray[Any]:
    """Labels as a numeric, boolean or string array (object arrays of str become str)."""
    if arr.dtype == object and arr.size and all(isinstance(v, str) for v in arr.ravel()):
        return arr.astype(str)
    if arr.dtype.kind in "biufU":
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf: {_show(arr[~np.isfinite(arr)])}")
        return arr
    raise ValueError(
        f"Unknown label type: {name} must hold numbers or strings; got dtype {arr.dtype} "
        f"with values {_show(arr[:_MAX_SHOW])}"
    )


def check_classes(classes: ArrayLike, *, n_classes: int) -> NDArray[Any]:
    """Validate an explicit list of class labels, one per score column, in column order.

    Parameters
    ----------
    classes : array-like of shape (n_classes,)
        Distinct labels (numbers or strings); ``classes[j]`` is the class of
        score column ``j``.
    n_classes : int
        Number of score columns.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        The labels in the given order (object arrays of strings become str).
    """
    try:
        arr = np.asarray(classes)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"classes could not be read as an array: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"classes must be 1-D (one label per score column); got shape "
                         f"{arr.shape}")
    arr = _plain_labels(arr, "classes")
    if arr.shape[0] != n_classes:
        raise ValueError(
            f"classes must list one label per score column ({n_classes}); got "
            f"{arr.shape[0]}: {_show(arr)}"
        )
    uniq, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"classes must be distinct; repeated: {_show(uniq[counts > 1])}")
    return arr


#: A class with fewer calibration rows than this draws a :class:`SparseClassWarning`.
MIN_CLASS_ROWS: int = 5


class SparseClassWarning(UserWarning):
    """A class is absent from the calibration labels or has very few rows there.

    Raised by every estimator's ``fit`` (:func:`warn_sparse_classes`): what the
    map does to such a class rests on its penalty or prior rather than on
    data, so a class that is absent at calibration but frequent at test time
    receives far too little probability.
    """


def _caller_stacklevel() -> int:
    """``stacklevel`` of the first frame outside bayescal, seen from the caller's ``warn``."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def warn_sparse_classes(counts: ArrayLike, classes: ArrayLike, *, owner: str) -> None:
    """Warn (:class:`SparseClassWarning`) when a class has < :data:`MIN_CLASS_ROWS` rows.

    The warning points at the user's call (the first frame outside bayescal).

    Parameters
    ----------
    counts : array-like of shape (n_classes,)
        Calibration rows of each class (``np.bincount`` of the column codes).
    classes : array-like of shape (n_classes,)
        The label of each column, used to name the sparse classes.
    owner : str
        Who fits (the estimator's class name), for the message.
    """
    classes = np.asarray(classes)
    counts = np.asarray(counts)
    sparse = np.flatnonzero(counts < MIN_CLASS_ROWS)
    if sparse.size == 0:
        return
    shown = ", ".join(f"class {classes[j]} has {counts[j]:g}" for j in sparse[:8])
    if sparse.size > 8:
        shown += ", ..."
    absent = int(np.count_nonzero(counts[sparse] == 0))
    warnings.warn(
        f"{owner}: {sparse.size} of {classes.shape[0]} classes have fewer than "
        f"{MIN_CLASS_ROWS} calibration rows{f', {absent} with none' if absent else ''} ({shown}). "
        "Their calibrated probabilities rest on the penalty or prior, not on data: a class "
        "rare or absent here but common at test time gets far too little probability. "
        "Calibrate on a set that holds every class (e.g. a stratified split).",
        SparseClassWarning, stacklevel=_caller_stacklevel())


def encode_labels(
    y: ArrayLike, *, n_samples: int, n_classes: int, classes: ArrayLike | None = None
) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """Read labels as scikit-learn users give them and map them to score columns.

    The one place where bayescal decides which score column a label belongs
    to. With ``classes`` given, ``classes[j]`` is the label of column ``j``
    and every label must be one of them. Without it:

    1. if ``y`` holds exactly ``n_classes`` distinct labels (numbers or
       strings), they are the classes in sorted order -- scikit-learn's
       ``classes_`` convention, the column order of every classifier's
       ``predict_proba`` -- so ``1..3``, ``{0, 2, 5}`` and strings work;
    2. if it holds fewer (a class absent from a small calibration set), the
       labels must be the integer column codes ``0 .. n_classes - 1`` and the
       classes are ``arange(n_classes)``: any other label is ambiguous (which
       column is missing?), and the error asks for ``classes``;
    3. more distinct labels than score columns is an error.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels: integers, integral floats, booleans or strings.
    n_samples : int
        Expected length (the number of score rows).
    n_classes : int
        Number of score columns.
    classes : array-like of shape (n_classes,), optional
        The label of each score column, in column order
        (:func:`check_classes`).

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        The label of each score column (``classes_`` of an estimator).
    codes : ndarray of shape (n_samples,), intp
        Column index of each label, ``classes[codes] == y``.

    Raises
    ------
    ValueError
        Naming the offending labels: continuous (non-integer) values
        ("Unknown label type"), NaN, wrong length or shape, more labels than
        columns, labels outside ``classes``, or codes outside
        ``0 .. n_classes - 1`` when some class is absent.
    """
    arr = _plain_labels(_label_vector(y, n_samples=n_samples), "y")
    if classes is not None:
        cls = check_classes(classes, n_classes=n_classes)
        if (arr.dtype.kind == "U") != (cls.dtype.kind == "U"):
            raise ValueError(
                f"y and classes mix strings and numbers: y has dtype {arr.dtype}, classes "
                f"{_show(cls)}"
            )
        order = np.argsort(cls, kind="stable")
        pos = np.clip(np.searchsorted(cls[order], arr), 0, n_classes - 1)
        unknown = cls[order][pos] != arr
        if unknown.any():
            raise ValueError(
                f"y has labels that are not in classes {_show(cls)}: "
                f"{_show(np.unique(arr[unknown]))}"
            )
        return cls, order[pos].astype(np.intp)
    integral = _integral(arr)
    if integral is not None and not integral.all():
        raise ValueError(
            "Unknown label type: continuous. y must hold class labels; got continuous "
            f"(non-integer) values {_show(arr[~integral])}"
        )
    uniq, codes = np.unique(arr, return_inverse=True)
    if uniq.shape[0] == n_classes:
        return uniq, codes.astype(np.intp)
    if uniq.shape[0] > n_classes:
        raise ValueError(
            f"y has {uniq.shape[0]} distinct labels but the scores have {n_classes} "
            f"columns (one per class): {_show(uniq)}"
        )
    hint = (
        f"with fewer distinct labels ({uniq.shape[0]}) than score columns ({n_classes}) "
        "the labels must be the column codes 0..k-1; pass classes= (the label of each "
        "score column, in column order) to name them"
    )
    if arr.dtype.kind == "U":
        raise ValueError(
            f"y has {uniq.shape[0]} distinct labels {_show(uniq)} but the scores have "
            f"{n_classes} columns: {hint}"
        )
    outside = (arr < 0) | (arr >= n_classes)
    if outside.any():
        raise ValueError(
            f"y has labels outside the classes 0..{n_classes - 1} given by the score "
            f"columns: {_show(np.unique(arr[outside]))} ({hint})"
        )
    return np.arange(n_classes), arr.astype(np.intp)


def check_linear_params(
    W: ArrayLike, b: ArrayLike, *, n_classes: int | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate DirLin parameters: ``W`` square (k, k), ``b`` of length k, finite."""
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square (k, k) matrix; got shape {W.shape}")
    k = W.shape[0]
    if k < 2:
        raise ValueError(f"W must describe at least 2 classes; got shape {W.shape}")
    if n_classes is not None and k != n_classes:
        raise ValueError(f"W has shape {W.shape} but the scores have {n_classes} columns")
    if b.shape != (k,):
        raise ValueError(f"b must have shape ({k},) to match W {W.shape}; got {b.shape}")
    if not np.isfinite(W).all():
        raise ValueError(f"W contains NaN or inf: {_show(W[~np.isfinite(W)])}")
    if not np.isfinite(b).all():
        raise ValueError(f"b contains NaN or inf: {_show(b)}")
    return W, b


def check_alpha(alpha: ArrayLike, *, n_classes: int | None = None) -> NDArray[np.float64]:
    """Validate Dirichlet concentrations: (k, k), finite and > 0 (row j = class j)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim != 2 or alpha.shape[0] != alpha.shape[1] or alpha.shape[0] < 2:
        raise ValueError(
            f"alpha must be a (k, k) matrix with k >= 2 (row j is the concentration of "
            f"class j); got shape {alpha.shape}"
        )
    if n_classes is not None and alpha.shape[0] != n_classes:
        raise ValueError(
            f"alpha has shape {alpha.shape} but the scores have {n_classes} columns"
        )
    bad = ~np.isfinite(alpha) | (alpha <= 0)
    if bad.any():
        j, i = np.argwhere(bad)[0]
        raise ValueError(
            f"alpha must be finite and > 0; alpha[{j}, {i}] = {float(alpha[j, i])!r}"
        )
    return alpha


def check_pi(pi: ArrayLike, *, n_classes: int | None = None) -> NDArray[np.float64]:
    """Validate class priors: a probability vector (>= 0, sums to 1 within 1e-8)."""
    pi = np.asarray(pi, dtype=np.float64)
    if pi.ndim != 1 or (n_classes is not None and pi.shape[0] != n_classes):
        want = f"({n_classes},)" if n_classes is not None else "(k,)"
        raise ValueError(f"pi must have shape {want}; got {pi.shape}")
    if not np.isfinite(pi).all() or (pi < 0).any() or abs(pi.sum() - 1.0) > 1e-8:
        raise ValueError(
            f"pi must be a probability vector (entries >= 0 summing to 1); got "
            f"{_show(pi)} summing to {pi.sum():.10g}"
        )
    return pi


def check_features(x: ArrayLike, *, name: str = "x") -> NDArray[np.float64]:
    """Validate a feature matrix (e.g. log-probabilities): 2-D, >= 2 columns, finite."""
    arr = _as_2d_float(x, name).astype(np.float64, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        row = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise ValueError(f"{name} contains NaN or inf (first at row {row}: {_show(arr[row])})")
    return arr


def check_sample_weight(sample_weight: ArrayLike | None, *, n_samples: int) -> NDArray[np.float64]:
    """Validate sample weights: ``None`` (all ones) or finite, >= 0, shape (n,), sum > 0."""
    if sample_weight is None:
        return np.ones(n_samples)
    sw = np.asarray(sample_weight)
    if sw.ndim == 0:
        sw = np.full(n_samples, sw)
    if sw.ndim != 1 or sw.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must have shape ({n_samples},) to match the scores; got {sw.shape}"
        )
    if not (np.issubdtype(sw.dtype, np.floating) or np.issubdtype(sw.dtype, np.integer)):
        raise ValueError(f"sample_weight must be numeric; got dtype {sw.dtype}")
    sw = sw.astype(np.float64)
    if not np.isfinite(sw).all() or (sw < 0).any():
        raise ValueError(
            f"sample_weight must be finite and >= 0; got {_show(sw[~np.isfinite(sw) | (sw < 0)])}"
        )
    if sw.sum() <= 0:
        raise ValueError("sample_weight must have a positive sum; got all zeros")
    return sw
def check_concentration(
    alpha: ArrayLike, *, n_classes: int | None = None, name: str = "alpha"
) -> NDArray[np.float64]:
    """Validate Dirichlet concentration vectors: shape (k,) or (m, k), finite and > 0.

    Unlike :func:`check_alpha` (one row per class of a DirGen model, so square),
    this accepts any number of rows, each a concentration over ``k`` coordinates.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim not in (1, 2) or alpha.shape[-1] < 2:
        raise ValueError(
            f"{name} must have shape (k,) or (m, k) with k >= 2; got shape {alpha.shape}"
        )
    if n_classes is not None and alpha.shape[-1] != n_classes:
        raise ValueError(
            f"{name} has {alpha.shape[-1]} coordinates but the scores have {n_classes} columns"
        )
    bad = ~np.isfinite(alpha) | (alpha <= 0)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        idx = ", ".join(map(str, where))
        raise ValueError(
            f"{name} must be finite and > 0; {name}[{idx}] = {float(alpha[where])!r}"
        )
    return alpha


#: A Jensen gap ``-logsumexp(mean log q)`` at or below this value means that the
#: samples of a class are (numerically) all the same point of the simplex: the
#: Dirichlet likelihood then grows without bound as the concentration grows.
JENSEN_GAP_TOL: float = 1e-10


def check_dirichlet_statistics(
    count: float,
    mean_log: ArrayLike,
    *,
    log_floor: float | None = None,
    name: str = "the data",
    min_count: float = 2.0,
) -> tuple[float, NDArray[np.float64]]:
    r"""Check that a Dirichlet maximum-likelihood estimate exists for these statistics.

    The Dirichlet log-likelihood depends on the samples only through their
    number ``n`` and the mean log-features :math:`s = \frac1n\sum_i \ln q_i`.
    A finite maximiser exists iff ``n >= 2`` and the samples are not all equal,
    which the statistics reveal through the Jensen gap
    :math:`\gamma = -\ln\sum_i e^{s_i} \ge 0` (zero iff every sample is the same
    point). A coordinate whose mean equals the floor ``log_floor`` (every sample
    has that probability at or below ``eps``) sends its concentration to zero.

    Parameters
    ----------
    count : float
        Number of samples (pseudo-samples of a prior included).
    mean_log : array-like of shape (k,)
        Mean floored log-features of those samples.
    log_floor : float, optional
        ``ln eps`` of the features; when given, coordinates at the floor raise.
    name : str
        What the statistics describe (e.g. ``"class 3"``), for the messages.
    min_count : float, default=2.0
        Smallest accepted ``count`` (pooled prior statistics may be fractional).

    Returns
    -------
    count : float
    mean_log : ndarray of shape (k,)

    Raises
    ------
    ValueError
        Naming ``name`` and the offending count, coordinate or gap.
    """
    hint = "pass prior= (e.g. prior=1.0) to regularise the fit"
    s = np.asarray(mean_log, dtype=np.float64)
    if s.ndim != 1 or s.shape[0] < 2:
        raise ValueError(f"mean_log of {name} must have shape (k,) with k >= 2; got {s.shape}")
    if not np.isfinite(count) or count < min_count or count <= 0:
        raise ValueError(
            f"{name} has {count:g} sample(s); a Dirichlet maximum-likelihood fit needs at "
            f"least {min_count:g} distinct samples: {hint}"
        )
    if not np.isfinite(s).all() or (s > 0).any():
        raise ValueError(
            f"mean log-features of {name} must be finite and <= 0; got {_show(s)}"
        )
    if log_floor is not None:
        at_floor = s <= log_floor * (1.0 - 1e-12)
        if at_floor.any():
            cols = np.flatnonzero(at_floor)
            raise ValueError(
                f"{name}: every sample has probability <= eps = {np.exp(log_floor):.3g} in "
                f"column(s) {_show(cols)} (mean log-feature {s[cols[0]]:.6g} = ln eps), so all "
                f"its mass sits on a face of the simplex and the maximum-likelihood "
                f"concentration of those columns is 0: {hint}"
            )
    gap = -float(np.logaddexp.reduce(s))
    if gap <= JENSEN_GAP_TOL:
        raise ValueError(
            f"{name}: its {count:g} samples are (numerically) identical, constant features "
            f"(Jensen gap -logsumexp(mean log q) = {gap:.3g} <= {JENSEN_GAP_TOL:g}), so the "
            f"maximum-likelihood concentration is infinite: {hint}"
        )
    return float(count), s
