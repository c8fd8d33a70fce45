"""Score files of the command line: reading scores and labels, writing calibrated scores.

Formats
-------
* ``.npz`` with an array ``probs`` or ``logits`` (n, k) and optionally ``y``;
  only those arrays are read (never pickled objects);
* ``.npy`` holding the (n, k) scores; labels come from a separate file;
* ``.csv`` with one column per class and, optionally, a label column: the
  column named by ``label_column`` (a header name or a 0-based index, negative
  from the end), else a header column called ``y`` or ``label``, else (when
  labels are needed) the last column.

Labels are integer codes ``0..k-1``; column ``j`` of the scores is class ``j``.

No row is ever dropped or shifted
---------------------------------
Output row ``i`` of ``bayescal apply`` is input row ``i``, so the CSV reader
refuses what it cannot read with certainty instead of guessing:

* a UTF-8 byte-order mark is removed; fields may be quoted (``"0.25"``) and
  surrounded by spaces;
* every data cell must be a finite number: an empty cell, ``NA``, ``NaN``,
  ``null``, ``None``, ``?``, ``inf`` or any other text is refused with its line
  and column;
* the first line is a header only when it cannot be data: it holds text and
  every field is a column name (non-empty, not ``NA``; a numeric name such as
  pandas' ``0,1,2,y`` must be the column's 0- or 1-based position; names
  unique). A first line that mixes text with other numbers or with empty / NA
  cells is refused as ambiguous; pass ``header=True`` / ``False``
  (``--header`` / ``--no-header``) to say what it is;
* blank lines hold no row and are skipped; every other line must have as
  many fields as the first.
"""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._files import write_bytes

__all__ = ["NA_TOKENS", "ScoreData", "load_npz", "read_labels", "read_scores", "write_scores"]

#: Cell values read as "missing" (compared case-insensitively after stripping).
NA_TOKENS: frozenset[str] = frozenset(
    {"", "na", "n/a", "nan", "-nan", "+nan", "null", "none", "#n/a", "?"}
)

_NPZ_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_INT_RE = re.compile(r"[+-]?\d+")


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
    header : list of str or None
        The whole header row of a CSV file (None: no header).
    label_source : str or None
        Where the labels came from (for messages), e.g. ``"column 'y'"``.
    """

    scores: NDArray[np.float64]
    kind: str
    y: NDArray[np.intp] | None
    columns: list[str] | None = None
    header: list[str] | None = None
    label_source: str | None = None


# ---------------------------------------------------------------------------
# files as a whole
# ---------------------------------------------------------------------------
def _check_file(path: Path, what: str) -> None:
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a directory, not a file")
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a regular file")


def _magic(path: Path, n: int = 6) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError as exc:
        raise OSError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _load_npy(path: Path) -> NDArray[Any]:
    if _magic(path) != _NPY_MAGIC:
        raise ValueError(f"{path}: not a NumPy .npy file (no .npy signature)")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise ValueError(
                f"{path}: holds Python objects (dtype object); bayescal reads numeric arrays only"
            ) from None
        raise ValueError(f"{path}: damaged .npy file: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise ValueError(f"{path}: damaged or truncated .npy file: {exc}") from exc


def load_npz(path: str | os.PathLike[str], names: tuple[str, ...]
             ) -> tuple[dict[str, NDArray[Any]], list[str]]:
    """Read the arrays ``names`` that exist in an .npz, and list all of its arrays.

    Only those arrays are decompressed; none may hold pickled objects.

    Raises
    ------
    ValueError
        Naming the file: not an .npz archive, damaged or truncated, or an
        array of Python objects.
    """
    path = Path(path)
    if _magic(path, 4) not in _NPZ_MAGIC:
        raise ValueError(f"{path}: not a NumPy .npz archive (no zip signature)")
    try:
        with np.load(path, allow_pickle=False) as f:
            files = list(f.files)
            out = {}
            for name in names:
                if name in files:
                    try:
                        out[name] = f[name]
                    except ValueError as exc:
                        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                            raise ValueError(
                                f"{path}: array {name!r} holds Python objects (dtype object); "
                                "bayescal reads numeric arrays only"
                            ) from None
                        raise
            return out, files
    except ValueError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ValueError(f"{path}: damaged .npz archive: {exc}") from exc
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise ValueError(f"{path}: damaged or truncated .npz archive ({exc})") from exc


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------
def _cell(field: str) -> tuple[str, float | None]:
    """Classify a stripped CSV field: number (with its value), missing, nonfinite or text."""
    if field.lower() in NA_TOKENS:
        return "missing", None
    try:
        v = float(field)
    except ValueError:
        return "text", None
    if not np.isfinite(v):
        return "nonfinite", None
    return "number", v


def _is_header(path: Path, first: list[str]) -> bool:
    """Whether the first CSV line is a header (see the module docstring); raises if ambiguous."""
    kinds = [_cell(f)[0] for f in first]
    if "text" not in kinds:
        return False  # numbers, or a data row with missing cells (refused later)
    hint = "; pass --header (header=True) or --no-header (header=False) to say what it is"
    bad = [f for f, k in zip(first, kinds, strict=True) if k in ("missing", "nonfinite")]
    if bad:
        raise ValueError(
            f"{path}: line 1 mixes text with empty or missing cells ({bad[0]!r}), so it is "
            f"neither a clean header nor a data row{hint}"
        )
    for j, (f, k) in enumerate(zip(first, kinds, strict=True)):
        if k == "number" and not (_INT_RE.fullmatch(f) and int(f) in (j, j + 1)):
            text = next(g for g, kk in zip(first, kinds, strict=True) if kk == "text")
            raise ValueError(
                f"{path}: line 1 mixes text ({text!r}) with numbers ({f!r}), so it could be a "
                f"header or a data row with a bad cell{hint}"
            )
    return True


def _read_csv(path: Path, header: bool | None = None
              ) -> tuple[list[str] | None, list[list[str]], list[int]]:
    """Header (or None), the data rows (stripped fields) and their line numbers."""
    _check_file(path, "file")
    rows: list[list[str]] = []
    lines: list[int] = []
    reader = None
    try:
        # utf-8-sig drops a byte-order mark
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, skipinitialspace=True, strict=True)
            for r in reader:
                if not r or (len(r) == 1 and not r[0].strip()):
                    continue  # a blank line holds no row
                rows.append([f.strip() for f in r])
                lines.append(reader.line_num)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
                         ) from exc
    except csv.Error as exc:
        where = f" at line {reader.line_num}" if reader is not None else ""
        raise ValueError(f"{path}: malformed CSV{where}: {exc}") from None
    except OSError as exc:
        raise OSError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not rows:
        raise ValueError(f"{path}: CSV file is empty")
    head = None
    if header is None:
        header = _is_header(path, rows[0])
    if header:
        head = rows[0]
        rows, lines = rows[1:], lines[1:]
        dup = sorted({h for h in head if head.count(h) > 1})
        if dup:
            raise ValueError(f"{path}: header has duplicate column names {dup}")
    if not rows:
        raise ValueError(f"{path}: CSV file has a header but no data rows")
    width = len(head) if head is not None else len(rows[0])
    for r, line in zip(rows, lines, strict=True):
        if len(r) != width:
            raise ValueError(f"{path}: line {line} has {len(r)} fields, expected {width}")
    return head, rows, lines


def _column_name(header: list[str] | None, c: int) -> str:
    return f"column {header[c]!r}" if header else f"column {c}"


def _csv_matrix(path: Path, rows: list[list[str]], lines: list[int], cols: list[int],
                header: list[str] | None) -> NDArray[np.float64]:
    """The numbers in columns ``cols``; any other cell is refused naming line and column."""
    try:  # fast path: every cell a plain finite number
        out = np.array([[r[c] for c in cols] for r in rows], dtype=str).astype(np.float64)
        if np.isfinite(out).all():
            return out
    except ValueError:
        pass
    out = np.empty((len(rows), len(cols)))
    for i, (r, line) in enumerate(zip(rows, lines, strict=True)):
        for j, c in enumerate(cols):
            kind, v = _cell(r[c])
            if kind != "number":
                what = {"missing": "missing value", "nonfinite": "non-finite value",
                        "text": "non-numeric value"}[kind]
                raise ValueError(
                    f"{path}: {what} {r[c]!r} at line {line}, {_column_name(header, c)}"
                )
            out[i, j] = v
    return out


def _label_index(path: Path, header: list[str] | None, width: int,
                 label_column: str | int | None, need_labels: bool) -> int | None:
    if label_column is not None:
        if isinstance(label_column, str) and not _INT_RE.fullmatch(label_column.strip()):
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


# ---------------------------------------------------------------------------
# public readers and writer
# ---------------------------------------------------------------------------
def read_labels(path: str | os.PathLike[str], *, header: bool | None = None) -> NDArray[Any]:
    """Read a label file: ``.npy`` (1-D) or text / CSV with one label per line.

    Text files follow the CSV rules of the module docstring (a header line such
    as ``y`` is recognised; missing or non-numeric labels are refused with their
    line).
    """
    path = Path(path)
    _check_file(path, "label file")
    if path.suffix.lower() == ".npy":
        return _load_npy(path)
    head, rows, lines = _read_csv(path, header)
    if len(rows[0]) != 1:
        raise ValueError(f"{path}: a label file must have one column; got {len(rows[0])}")
    return _csv_matrix(path, rows, lines, [0], head)[:, 0]


def read_scores(
    path: str | os.PathLike[str],
    *,
    input: str | None = None,
    labels: str | os.PathLike[str] | None = None,
    label_column: str | int | None = None,
    need_labels: bool = False,
    n_classes: int | None = None,
    header: bool | None = None,
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
    header : bool, optional
        CSV only: whether the first line is a header. ``None`` (default)
        decides from the line itself and refuses an ambiguous line.

    Returns
    -------
    ScoreData
        As many score rows as the file has data rows, in the same order.

    Raises
    ------
    ValueError
        On unreadable or damaged files, missing arrays or label column, empty /
        NA / non-numeric cells (naming line and column), NaN or inf, invalid
        probabilities, wrong shapes or labels outside ``0..k-1``.
    FileNotFoundError, IsADirectoryError
        If a file does not exist, or is a directory.
    """
    from bayescal._validation import check_labels, check_option, check_scores

    path = Path(path)
    if input is not None:
        check_option(input, "input", ("probs", "logits"))
    _check_file(path, "score file")
    suffix = path.suffix.lower()
    if label_column is not None and suffix != ".csv":
        raise ValueError(f"{path}: --label-column applies to .csv score files only")
    if header is not None and suffix != ".csv":
        raise ValueError(f"{path}: --header / --no-header apply to .csv score files only")
    y: Any = None
    columns = head = None
    source = None
    if suffix == ".npz":
        arrays, names = load_npz(path, ("probs", "logits", "y"))
        present = [k for k in ("probs", "logits") if k in arrays]
        if input is None:
            if len(present) != 1:
                raise ValueError(
                    f"{path}: expected exactly one array named 'probs' or 'logits'; found "
                    f"arrays {sorted(names)} (choose with --input)"
                )
            input = present[0]
        if input not in arrays:
            raise ValueError(f"{path}: no array named {input!r}; found arrays {sorted(names)}")
        scores = arrays[input]
        y = arrays.get("y")
        source = "array 'y'" if y is not None else None
    elif suffix == ".npy":
        scores = _load_npy(path)
    elif suffix == ".csv":
        head, rows, lines = _read_csv(path, header)
        width = len(rows[0])
        li = _label_index(path, head, width, label_column, need_labels and labels is None)
        cols = [c for c in range(width) if c != li]
        if not cols:
            raise ValueError(f"{path}: no score columns besides the label column")
        scores = _csv_matrix(path, rows, lines, cols, head)
        columns = [head[c] for c in cols] if head else None
        if li is not None:
            y = _csv_matrix(path, rows, lines, [li], head)[:, 0]
            source = _column_name(head, li)
    else:
        raise ValueError(
            f"{path}: unsupported score file type {path.suffix!r} (use .npz, .npy or .csv)"
        )
    kind = input or "probs"
    scores = check_scores(scores, kind=kind, name=f"scores in {path}", n_classes=n_classes)
    if labels is not None:
        if y is not None:
            raise ValueError(f"labels given twice: {path} has a label column/array and "
                             f"--labels {labels} was passed")
        y = read_labels(labels)
        source = f"label file {labels}"
    if y is None and need_labels:
        raise ValueError(
            f"{path}: no labels found (an .npz needs an array 'y'; otherwise pass --labels)"
        )
    if y is not None:
        where = labels if labels is not None else path
        try:
            y = check_labels(y, n_samples=scores.shape[0], n_classes=scores.shape[1])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return ScoreData(scores=scores, kind=kind, y=y, columns=columns, header=head,
                     label_source=source)


def write_scores(path: str | os.PathLike[str], proba: ArrayLike, *,
                 overwrite: bool = False) -> Path:
    """Write calibrated probabilities atomically: ``.npz`` (array ``probs``) or ``.csv``.

    The CSV has a header ``p0,...,p{k-1}`` and full float64 precision
    (``%.17g``), one line per input row.
    """
    path = Path(path)
    proba = np.asarray(proba, dtype=np.float64)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        buf = io.BytesIO()
        np.savez(buf, probs=proba)
        return write_bytes(path, buf.getvalue(), overwrite=overwrite)
    if suffix == ".csv":
        buf = io.StringIO()
        buf.write(",".join(f"p{j}" for j in range(proba.shape[1])) + "\n")
        np.savetxt(buf, proba, delimiter=",", fmt="%.17g")
        return write_bytes(path, buf.getvalue().encode(), overwrite=overwrite)
    raise ValueError(f"unsupported output file type {path.suffix!r} for {path} (use .npz or .csv)")
