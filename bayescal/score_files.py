"""Score files of the command line: reading scores and labels, writing calibrated scores.

Formats
-------
* ``.npz`` with an array ``probs`` or ``logits`` (n, k) and optionally ``y``;
  only those arrays are read (never pickled objects);
* ``.npy`` holding the (n, k) scores; labels come from a separate file;
* ``.csv`` with one column per class and, optionally, a label column: the
  column named by ``label_column`` (a header name or a 0-based index, negative
  from the end), else a header column called ``y`` or ``label``, else (when
  labels are needed) the last column; with ``n_classes`` given (``apply``), the
  last column of a header-less file with ``n_classes + 1`` columns when it
  holds integer labels or class names.

Labels are integer codes ``0..k-1`` (column ``j`` of the scores is class
``j``) or text: the classes in sorted order, or in the order ``classes``
gives. Score columns named ``p<j>`` or by class are put in class order.

No row is ever dropped or shifted
---------------------------------
Output row ``i`` of ``bayescal apply`` is input row ``i``, so the CSV reader
refuses what it cannot read with certainty instead of guessing:

* a UTF-8 byte-order mark is removed; fields may be quoted (``"0.25"``) and
  surrounded by spaces;
* every data cell must be a finite number written in plain ASCII decimal
  notation: an empty cell, ``NA``, ``NaN``, ``null``, ``None``, ``?``, ``inf``,
  ``1_0`` or ``0.2_5`` (which Python's ``float`` reads as 10 and 0.25), a NUL
  byte or any other text is refused with its line and column;
* the first line is a header only when it cannot be data: it holds text and
  every field is a column name (non-empty, not ``NA``; a numeric name such as
  pandas' ``0,1,2,y`` must be the column's 0- or 1-based position; names
  unique), or it is exactly the column numbers ``0..w-1`` / ``1..w`` that
  ``DataFrame.to_csv`` writes, above rows that are not all integers. A first
  line whose text lies only in text label columns is data. A first line that
  mixes text with other numbers or with empty / NA cells is refused as
  ambiguous; pass ``header=True`` / ``False`` (``--header`` / ``--no-header``)
  to say what it is;
* header names of score columns must be ``p0..p{k-1}``, the class names, the
  column numbers, or the names the model was fitted on; the columns are put in
  class order by name and any other name is refused;
* a first column holding the row numbers ``0..n-1`` (the index ``to_csv``
  writes by default) is refused;
* blank lines hold no row and are skipped; every other line must have as
  many fields as the first.
"""

from __future__ import annotations

import csv
import io
import os
import re
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._files import read_npy, write_bytes

__all__ = [
    "NA_TOKENS",
    "ScoreData",
    "check_output_probs",
    "load_npz",
    "read_labels",
    "read_scores",
    "write_scores",
]

#: Cell values read as "missing" (compared case-insensitively after stripping).
NA_TOKENS: frozenset[str] = frozenset(
    {"", "na", "n/a", "nan", "-nan", "+nan", "null", "none", "#n/a", "?"}
)

_NPZ_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_INT_RE = re.compile(r"[+-]?\d+", re.ASCII)
#: A number as bayescal reads it: plain ASCII decimal, no ``_``, no hex, no padding.
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_NONFINITE_RE = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)
_P_RE = re.compile(r"p\d+", re.ASCII)


@dataclass
class ScoreData:
    """Scores read from a file.

    Attributes
    ----------
    scores : ndarray of shape (n, k), float64
    kind : {"probs", "logits"}
    y : ndarray of shape (n,) or None
        Labels as column codes: ``classes[y[i]]`` is the label of row ``i``.
    columns : list of str or None
        Header names of the score columns (CSV with a header), in class order.
    header : list of str or None
        The whole header row of a CSV file as written (None: no header).
    label_source : str or None
        Where the labels came from (for messages), e.g. ``"column 'y'"``.
    classes : ndarray of shape (k,) or None
        The label of each score column (None when no labels were read and no
        classes given).
    notes : list of str
        How the file was read, where a reader could have guessed otherwise
        (a numeric header, reordered columns, an ignored label column).
    """

    scores: NDArray[np.float64]
    kind: str
    y: NDArray[np.intp] | None
    columns: list[str] | None = None
    header: list[str] | None = None
    label_source: str | None = None
    classes: NDArray[Any] | None = None
    notes: list[str] = field(default_factory=list)


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
    """A ``.npy`` file read whole by :func:`bayescal._files.read_npy` (header checked
    against the file's size before anything is allocated; no pickles)."""
    if _magic(path) != _NPY_MAGIC:
        raise ValueError(f"{path}: not a NumPy .npy file (no .npy signature)")
    try:
        return read_npy(path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None


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
    """Classify a stripped CSV field: number (with its value), missing, nonfinite or text.

    A number is written in plain ASCII decimal notation (``_NUMBER_RE``):
    Python's ``float`` also takes ``1_0`` (10), ``0.2_5``, non-ASCII digits and
    surrounding NUL bytes, which are text here.
    """
    if field.lower() in NA_TOKENS:
        return "missing", None
    if _NONFINITE_RE.fullmatch(field):
        return "nonfinite", None
    if not _NUMBER_RE.fullmatch(field):
        return "text", None
    v = float(field)
    if not np.isfinite(v):  # overflow, e.g. 1e400
        return "nonfinite", None
    return "number", v


def _is_numbered_header(first: list[str], rest: list[list[str]]) -> bool:
    """Whether an all-number first line is the column numbers a DataFrame writes.

    ``pd.DataFrame(p).to_csv(index=False)`` writes ``0,1,...`` (or ``1,2,...``
    for 1-based column names) above rows of floats: the line is a header when
    its fields are exactly the integers ``0..w-1`` or ``1..w`` and some later
    cell is not an integer (rows of integers, e.g. one-hot scores, keep an
    integer first line as data).
    """
    if len(first) < 2 or not all(_INT_RE.fullmatch(f) for f in first):
        return False
    values = [int(f) for f in first]
    if values not in (list(range(len(first))), list(range(1, len(first) + 1))):
        return False
    return any(not _INT_RE.fullmatch(f) for row in rest for f in row)


def _is_labelled_data_row(first: list[str], kinds: list[str], rest: list[list[str]]) -> bool:
    """Whether a first line with text is a data row with text labels.

    It is when its text lies only in columns that hold text on every line
    (label columns, e.g. ``0.2,0.8,cat``) and its numbers are not the column
    numbers of a pandas header (``0,1,y`` above ``0.2,0.8,cat``).
    """
    text_cols = [j for j, k in enumerate(kinds) if k == "text"]
    if not rest or not all(_cell(r[j])[0] == "text" for r in rest for j in text_cols
                           if j < len(r)):
        return False
    numbers = [f for f, k in zip(first, kinds, strict=True) if k == "number"]
    positions = [j for j, k in enumerate(kinds) if k == "number"]
    return not (numbers and all(_INT_RE.fullmatch(f) for f in numbers) and (
        [int(f) for f in numbers] in (positions, [j + 1 for j in positions])))


def _is_header(path: Path, rows: list[list[str]]) -> bool:
    """Whether the first CSV line is a header (see the module docstring); raises if ambiguous."""
    first = rows[0]
    kinds = [_cell(f)[0] for f in first]
    bad = [f for f, k in zip(first, kinds, strict=True) if k in ("missing", "nonfinite")]
    if bad == [""] and first[0] == "" and len(first) > 1 and (
            "text" in kinds or _is_numbered(first[1:])):
        raise ValueError(
            f"{path}: line 1 starts with an empty column name, like the index column "
            "pandas writes with to_csv(index=True); write the file with index=False"
        )
    if "text" not in kinds:
        # numbers (a data row, or the column numbers pandas writes), or a data
        # row with missing cells (refused later)
        return _is_numbered_header(first, rows[1:])
    if not bad and _is_labelled_data_row(first, kinds, rows[1:]):
        return False
    hint = "; pass --header (header=True) or --no-header (header=False) to say what it is"
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


def _check_no_index_column(path: Path, rows: list[list[str]]) -> None:
    """Refuse a first column holding the row numbers ``0..n-1`` above float cells.

    That is the index ``DataFrame.to_csv`` writes by default; read as scores
    it would add a class, so the file is refused rather than guessed at.
    """
    if len(rows[0]) < 2:
        return
    if any(r[0] != str(i) for i, r in enumerate(rows)):
        return
    if any("." in f or "e" in f.lower() for r in rows for f in r[1:]):
        raise ValueError(
            f"{path}: column 0 holds the row numbers 0..{len(rows) - 1} written as integers, "
            "like the index pandas writes with to_csv(index=True); write the file with "
            "index=False (a score column of whole numbers must be written as floats, e.g. 0.0)"
        )


def _read_rows(path: Path) -> tuple[list[list[str]], list[int]]:
    """The non-blank lines of a CSV file as stripped fields, with their line numbers."""
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
    return rows, lines


def _read_csv(path: Path, header: bool | None = None
              ) -> tuple[list[str] | None, list[list[str]], list[int]]:
    """Header (or None), the data rows (stripped fields) and their line numbers."""
    _check_file(path, "file")
    rows, lines = _read_rows(path)
    head = None
    if header is None:
        header = _is_header(path, rows)
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
    if head is None:
        _check_no_index_column(path, rows)
    return head, rows, lines


def _column_name(header: list[str] | None, c: int) -> str:
    return f"column {header[c]!r}" if header else f"column {c}"


def _bad_cell(path: Path, kind: str, cell: str, line: int, column: str) -> ValueError:
    what = {"missing": "missing value", "nonfinite": "non-finite value",
            "text": "non-numeric value"}[kind]
    return ValueError(f"{path}: {what} {cell!r} at line {line}, {column}")


def _csv_matrix(path: Path, rows: list[list[str]], lines: list[int], cols: list[int],
                header: list[str] | None) -> NDArray[np.float64]:
    """The numbers in columns ``cols``; any other cell is refused naming line and column."""
    out = np.empty((len(rows), len(cols)))
    for i, (r, line) in enumerate(zip(rows, lines, strict=True)):
        for j, c in enumerate(cols):
            kind, v = _cell(r[c])
            if kind != "number":
                raise _bad_cell(path, kind, r[c], line, _column_name(header, c))
            out[i, j] = v
    return out


def _csv_labels(path: Path, rows: list[list[str]], lines: list[int], col: int,
                header: list[str] | None) -> NDArray[Any]:
    """The labels of column ``col``: numbers (float64) when every cell is one, else text.

    A missing cell is refused, and so is a column that mixes numbers with
    text (``1_0`` among integers is a typo, not a class name).
    """
    cells = [r[col] for r in rows]
    kinds = [_cell(f)[0] for f in cells]
    for f, kind, line in zip(cells, kinds, lines, strict=True):
        if kind in ("missing", "nonfinite"):
            raise _bad_cell(path, kind, f, line, _column_name(header, col))
    if all(kind == "number" for kind in kinds):
        return np.array([float(f) for f in cells])
    if any(kind == "number" for kind in kinds):
        i = kinds.index("text")
        raise ValueError(
            f"{path}: non-numeric value {cells[i]!r} at line {lines[i]}, "
            f"{_column_name(header, col)} (the other labels there are numbers)"
        )
    return np.array(cells, dtype=str)


def _trailing_labels(rows: list[list[str]], classes: NDArray[Any] | None) -> bool:
    """Whether the last column of header-less rows holds labels: integers or class names."""
    last = [r[-1] for r in rows]
    if all(_INT_RE.fullmatch(f) for f in last):
        return True
    return classes is not None and set(last) <= {str(c) for c in classes}


def _label_index(path: Path, header: list[str] | None, rows: list[list[str]],
                 label_column: str | int | None, need_labels: bool,
                 n_classes: int | None, classes: NDArray[Any] | None
                 ) -> tuple[int | None, bool]:
    """The label column (or None) and whether it was guessed as the last column."""
    width = len(rows[0])
    if label_column is not None:
        if isinstance(label_column, str) and not _INT_RE.fullmatch(label_column.strip()):
            if header is None or label_column not in header:
                have = header if header is not None else "no header row"
                raise ValueError(
                    f"{path}: label column {label_column!r} not found (columns: {have})"
                )
            return header.index(label_column), False
        idx = int(label_column)
        if not -width <= idx < width:
            raise ValueError(f"{path}: label column index {idx} out of range for {width} columns")
        return idx % width, False
    if header is not None:
        for name in ("y", "label"):
            if name in header:
                return header.index(name), False
    if need_labels:
        if header is not None:
            raise ValueError(
                f"{path}: missing label column: no column named 'y' or 'label' in {header}; "
                "name it with --label-column"
            )
        return width - 1, True
    if header is None and n_classes is not None and width == n_classes + 1:
        if _trailing_labels(rows, classes):
            return width - 1, True
        raise ValueError(
            f"{path}: {width} columns but the model has {n_classes} classes, and the last "
            "column does not hold integer labels; if a column holds labels, name it with "
            "--label-column"
        )
    return None, False


# ---------------------------------------------------------------------------
# column names and labels
# ---------------------------------------------------------------------------
def _is_numbered(names: list[str]) -> bool:
    """Whether names are the column numbers ``0..k-1`` or ``1..k`` (pandas' default names)."""
    if not all(_INT_RE.fullmatch(n) for n in names):
        return False
    values = [int(n) for n in names]
    return values in (list(range(len(names))), list(range(1, len(names) + 1)))


def _column_order(path: Path, names: list[str], classes: NDArray[Any] | None,
                  known: list[str] | None) -> tuple[list[int], str | None]:
    """Permutation putting the named score columns in class order, and a note if not identity.

    The names must be the score-column names the model was fitted on
    (``known``), ``p0..p{k-1}``, the class names, or the column numbers.

    Raises
    ------
    ValueError
        Naming the file and the names that match none of these.
    """
    k = len(names)
    if known is not None:
        target = [str(n) for n in known]
    elif _is_numbered(names):
        return list(range(k)), None
    elif all(_P_RE.fullmatch(n) for n in names):
        target = [f"p{j}" for j in range(k)]
    elif classes is not None:
        target = [str(c) for c in classes]
    else:
        target = [f"p{j}" for j in range(k)]
    bad = [n for n in names if n not in target]
    if bad or sorted(names) != sorted(target):
        if known is not None:
            expected = f"among the score columns the model was fitted on, {target}"
        else:
            shown = [str(c) for c in classes] if classes is not None else "unknown"
            expected = f"neither p0..p{k - 1} nor the class names ({shown})"
        raise ValueError(f"{path}: score column names {bad or names} are {expected}")
    order = [names.index(t) for t in target]
    if order == list(range(k)):
        return order, None
    return order, f"columns reordered by name from {','.join(names)} to {','.join(target)}"


def _as_classes(classes: ArrayLike, like: NDArray[Any] | None) -> NDArray[Any]:
    """Explicit classes as an array; strings of numbers become numbers for numeric labels."""
    arr = np.asarray(classes)
    if arr.dtype.kind == "U" and like is not None and like.dtype.kind in "biuf":
        try:
            num = np.array([float(_strict_number(c)) for c in arr])
        except ValueError:
            return arr
        return num.astype(np.int64) if (num == np.round(num)).all() else num
    return arr


def _strict_number(text: str) -> str:
    if _cell(text.strip())[0] != "number":
        raise ValueError(text)
    return text.strip()


def _numbers_as_text(y: NDArray[Any]) -> NDArray[np.str_]:
    """Numeric labels as the text a class name would have (``2.0`` -> ``"2"``)."""
    return np.array([str(int(v)) if float(v).is_integer() else repr(float(v)) for v in y],
                    dtype=str)


def _warn_digit_strings(where: Path | str, y: NDArray[Any]) -> None:
    if y.dtype.kind == "U" and y.size and all(s.isdigit() for s in np.unique(y)):
        warnings.warn(
            f"{where}: every label is a digit string, so the classes are sorted as text "
            f"({', '.join(sorted(np.unique(y))[:4])}, ...: '10' before '2'); store integer "
            "labels or give the order with --classes",
            UserWarning, stacklevel=4,
        )


def _encode(where: Path | str, y: Any, n_classes: int, classes: ArrayLike | None
            ) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """The label of each score column and the column code of each label.

    Numeric labels without ``classes`` are the column codes ``0..k-1``
    (:func:`bayescal._validation.check_labels`); string labels are the
    classes in sorted order; ``classes`` (a model's ``classes_`` or
    ``--classes``) fixes the label of each column.
    """
    from bayescal._validation import check_labels, encode_labels

    y = np.asarray(y)
    if y.dtype.kind not in "biufU":
        raise ValueError(f"{where}: labels must be numbers or text; got dtype {y.dtype}")
    try:
        if classes is None and y.dtype.kind != "U":
            return np.arange(n_classes), check_labels(y, n_samples=y.shape[0],
                                                      n_classes=n_classes)
        cls = None if classes is None else _as_classes(classes, y)
        if cls is not None and cls.dtype.kind == "U" and y.dtype.kind in "biuf":
            y = _numbers_as_text(y)  # text classes "0", "1" read from a CSV as numbers
        if cls is not None and cls.dtype.kind in "iu" and y.dtype.kind != "U" and (
                np.array_equal(cls, np.arange(n_classes))):
            return cls, check_labels(y, n_samples=y.shape[0], n_classes=n_classes)
        if cls is None:
            _warn_digit_strings(where, y)
        return encode_labels(y, n_samples=y.shape[0], n_classes=n_classes, classes=cls)
    except ValueError as exc:
        message = str(exc).replace("pass classes=", "pass --classes (classes=)")
        raise ValueError(f"{where}: {message}") from None


# ---------------------------------------------------------------------------
# public readers and writer
# ---------------------------------------------------------------------------
def read_labels(path: str | os.PathLike[str], *, header: bool | None = None) -> NDArray[Any]:
    """Read a label file: ``.npy`` (1-D) or text / CSV with one label per line.

    Text files follow the CSV rules of the module docstring (a header line such
    as ``y`` is recognised; missing labels, and text among numbers, are
    refused with their line). Labels that are all numbers come back as
    float64, others as text (``<U``).
    """
    path = Path(path)
    _check_file(path, "label file")
    if path.suffix.lower() == ".npy":
        return _load_npy(path)
    head, rows, lines = _read_csv(path, header)
    if len(rows[0]) != 1:
        raise ValueError(f"{path}: a label file must have one column; got {len(rows[0])}")
    return _csv_labels(path, rows, lines, 0, head)


@dataclass
class _RawCSV:
    """The cells of a score CSV in file order, before labels and column names are resolved."""

    scores: NDArray[np.float64]
    names: list[str] | None
    header: list[str] | None
    y: NDArray[Any] | None
    label_source: str | None
    notes: list[str]


def _read_score_csv(path: Path, *, header: bool | None, label_column: str | int | None,
                    need_labels: bool, ignore_labels: bool, n_classes: int | None,
                    classes: NDArray[Any] | None) -> _RawCSV:
    """Score cells (file order), score-column names and labels of a CSV score file."""
    head, rows, lines = _read_csv(path, header)
    notes = []
    if head is not None and header is None and _is_numbered(head):
        notes.append(f"line 1 ({','.join(head)}) read as a header: the column numbers "
                     "pandas writes (--no-header reads it as data)")
    li, guessed = _label_index(path, head, rows, label_column, need_labels, n_classes,
                               classes)
    cols = [c for c in range(len(rows[0])) if c != li]
    if not cols:
        raise ValueError(f"{path}: no score columns besides the label column")
    if n_classes is not None and len(cols) != n_classes:
        raise ValueError(
            f"{path}: {len(cols)} score columns but the model has {n_classes} classes; if a "
            "column holds labels, name it with --label-column"
        )
    scores = _csv_matrix(path, rows, lines, cols, head)
    y = source = None
    if li is not None:
        source = _column_name(head, li) + (" (the last column)" if guessed and head is None
                                           else "")
        if ignore_labels:
            notes.append(f"labels in {source} ignored")
        else:
            y = _csv_labels(path, rows, lines, li, head)
    return _RawCSV(scores=scores,
                   names=[head[c] for c in cols] if head else None,
                   header=head, y=y, label_source=source, notes=notes)


def _read_arrays(path: Path, input: str | None) -> tuple[str | None, Any, Any]:
    """``(input, scores, y)`` of an .npz (arrays ``probs`` / ``logits`` and ``y``)."""
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
    return input, arrays[input], arrays.get("y")


def read_scores(
    path: str | os.PathLike[str],
    *,
    input: str | None = None,
    labels: str | os.PathLike[str] | None = None,
    label_column: str | int | None = None,
    need_labels: bool = False,
    n_classes: int | None = None,
    header: bool | None = None,
    classes: ArrayLike | None = None,
    ignore_labels: bool = False,
    column_names: ArrayLike | None = None,
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
        Expected number of score columns (e.g. the fitted model's). A
        header-less CSV with one more column whose last column holds integer
        labels (or class names) has that column read as labels.
    header : bool, optional
        CSV only: whether the first line is a header. ``None`` (default)
        decides from the line itself and refuses an ambiguous line.
    classes : array-like of shape (n_classes,), optional
        The label of each score column, in column order (a model's
        ``classes_``, or ``--classes``). Without it numeric labels are the
        column codes ``0..k-1`` and text labels are the classes in sorted
        order.
    ignore_labels : bool, default=False
        Locate a label column (so that it is not read as scores) but do not
        read its cells.
    column_names : array-like of str, optional
        CSV only: the score-column names the model was fitted on; a header
        must hold exactly these names, in any order.

    Returns
    -------
    ScoreData
        As many score rows as the file has data rows, in the same order;
        score columns in class order.

    Raises
    ------
    ValueError
        On unreadable or damaged files, missing arrays or label column, empty /
        NA / non-numeric cells (naming line and column), NaN or inf, invalid
        probabilities, wrong shapes, unknown column names or labels outside
        the classes.
    FileNotFoundError, IsADirectoryError
        If a file does not exist, or is a directory.
    """
    from bayescal._validation import check_option, check_scores

    path = Path(path)
    if input is not None:
        check_option(input, "input", ("probs", "logits"))
    _check_file(path, "score file")
    suffix = path.suffix.lower()
    if label_column is not None and suffix != ".csv":
        raise ValueError(f"{path}: --label-column applies to .csv score files only")
    if header is not None and suffix != ".csv":
        raise ValueError(f"{path}: --header / --no-header apply to .csv score files only")
    cls = None if classes is None else np.asarray(classes)
    raw = _RawCSV(scores=np.empty((0, 0)), names=None, header=None, y=None,
                  label_source=None, notes=[])
    if suffix == ".npz":
        input, raw.scores, raw.y = _read_arrays(path, input)
        raw.label_source = "array 'y'" if raw.y is not None else None
        if ignore_labels:
            raw.y = None
    elif suffix == ".npy":
        raw.scores = _load_npy(path)
    elif suffix == ".csv":
        raw = _read_score_csv(path, header=header, label_column=label_column,
                              need_labels=need_labels and labels is None,
                              ignore_labels=ignore_labels, n_classes=n_classes, classes=cls)
    else:
        raise ValueError(
            f"{path}: unsupported score file type {path.suffix!r} (use .npz, .npy or .csv)"
        )
    kind = input or "probs"
    scores = check_scores(raw.scores, kind=kind, name=f"scores in {path}", n_classes=n_classes)
    y, where = raw.y, path
    if labels is not None:
        if y is not None:
            raise ValueError(f"labels given twice: {path} has a label column/array and "
                             f"--labels {labels} was passed")
        y, where = read_labels(labels), Path(labels)
        raw.label_source = f"label file {labels}"
    if y is None and need_labels:
        raise ValueError(
            f"{path}: no labels found (an .npz needs an array 'y'; otherwise pass --labels)"
        )
    codes = None
    if y is not None:
        cls, codes = _encode(where, y, scores.shape[1], cls)
    columns = raw.names
    if columns is not None:
        known = None if column_names is None else [str(c) for c in np.asarray(column_names)]
        order, note = _column_order(path, columns, cls, known)
        scores, columns = scores[:, order], [columns[j] for j in order]
        if note:
            raw.notes.append(note)
    return ScoreData(scores=scores, kind=kind, y=codes, columns=columns, header=raw.header,
                     label_source=raw.label_source, classes=cls, notes=raw.notes)


def check_output_probs(proba: ArrayLike, *, n_rows: int, where: str) -> NDArray[np.float64]:
    """Check calibrated probabilities before they are written: one finite row per input row.

    Parameters
    ----------
    proba : array-like of shape (n_rows, k)
        The output.
    n_rows : int
        The number of input rows.
    where : str
        Names the output in messages (e.g. the file to be written).

    Returns
    -------
    ndarray of shape (n_rows, k), float64

    Raises
    ------
    ValueError
        If the shape is wrong, a value is not finite or negative, or a row does
        not sum to 1 within 1e-9 (naming the first bad row, 1-based).
    """
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != n_rows:
        raise ValueError(f"{where}: calibrated probabilities have shape {p.shape}: "
                         f"{p.shape[0] if p.ndim else 0} rows for {n_rows} input rows")
    checks = (
        (~np.isfinite(p).all(axis=1), "are not finite"),
        ((p < 0).any(axis=1), "are negative"),
        (np.abs(p.sum(axis=1) - 1.0) > 1e-9, "do not sum to 1 (within 1e-9)"),
    )
    for bad, what in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{where}: calibrated probabilities {what} (row {i + 1}: "
                             f"{p[i].tolist()}); nothing was written")
    return p


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
