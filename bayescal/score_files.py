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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._files import atomic_write, read_npy, write_bytes

__all__ = [
    "CHUNK_ROWS",
    "NA_TOKENS",
    "AppliedScores",
    "ScoreData",
    "apply_scores",
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
#: A row of such numbers joined by commas (a fast check of a whole row, same rule).
_NUMBER_ROW_RE = re.compile(rf"{_NUMBER_RE.pattern}(?:,{_NUMBER_RE.pattern})*", re.ASCII)
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


#: Rows of a CSV: a function giving a fresh iterator over ``(stripped fields, line number)``
#: each time it is called (a list in memory, or the file read again: one pass per call).
_RowSource = Callable[[], Iterator[tuple[list[str], int]]]


def _fields(rows: Iterable[tuple[list[str], int]]) -> Iterator[list[str]]:
    return (r for r, _ in rows)


def _is_numbered_header(first: list[str], rest: Iterable[list[str]]) -> bool:
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


def _is_labelled_data_row(first: list[str], kinds: list[str], rest: Iterable[list[str]]
                          ) -> bool:
    """Whether a first line with text is a data row with text labels.

    It is when its text lies only in columns that hold text on every line
    (label columns, e.g. ``0.2,0.8,cat``) and its numbers are not the column
    numbers of a pandas header (``0,1,y`` above ``0.2,0.8,cat``).
    """
    text_cols = [j for j, k in enumerate(kinds) if k == "text"]
    seen = False
    for r in rest:
        seen = True
        if not all(_cell(r[j])[0] == "text" for j in text_cols if j < len(r)):
            return False
    if not seen:
        return False
    numbers = [f for f, k in zip(first, kinds, strict=True) if k == "number"]
    positions = [j for j, k in enumerate(kinds) if k == "number"]
    return not (numbers and all(_INT_RE.fullmatch(f) for f in numbers) and (
        [int(f) for f in numbers] in (positions, [j + 1 for j in positions])))


def _is_header(path: Path, first: list[str], rest: Callable[[], Iterable[list[str]]]) -> bool:
    """Whether the first CSV line is a header (see the module docstring); raises if ambiguous.

    ``rest()`` iterates over the lines after the first (read only when needed).
    """
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
        return _is_numbered_header(first, rest())
    if not bad and _is_labelled_data_row(first, kinds, rest()):
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


def _check_no_index_column(path: Path, width: int, rows: Iterable[list[str]]) -> None:
    """Refuse a first column holding the row numbers ``0..n-1`` above float cells.

    That is the index ``DataFrame.to_csv`` writes by default; read as scores
    it would add a class, so the file is refused rather than guessed at.
    ``rows`` are the data rows, all ``width`` wide; the scan stops at the first
    row whose first cell is not its row number.
    """
    if width < 2:
        return
    n, floats = 0, False
    for i, r in enumerate(rows):
        if r[0] != str(i):
            return
        n = i + 1
        floats = floats or any("." in f or "e" in f.lower() for f in r[1:])
    if floats:
        raise ValueError(
            f"{path}: column 0 holds the row numbers 0..{n - 1} written as integers, "
            "like the index pandas writes with to_csv(index=True); write the file with "
            "index=False (a score column of whole numbers must be written as floats, e.g. 0.0)"
        )


def _iter_rows(path: Path) -> Iterator[tuple[list[str], int]]:
    """The non-blank lines of a CSV file as stripped fields, with their line numbers.

    The one line-level parser of bayescal: the whole-file reader and the
    streaming reader of :func:`apply_scores` both read through it.
    """
    reader = None
    try:
        # utf-8-sig drops a byte-order mark
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, skipinitialspace=True, strict=True)
            for r in reader:
                if not r or (len(r) == 1 and not r[0].strip()):
                    continue  # a blank line holds no row
                yield [f.strip() for f in r], reader.line_num
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})"
                         ) from exc
    except csv.Error as exc:
        where = f" at line {reader.line_num}" if reader is not None else ""
        raise ValueError(f"{path}: malformed CSV{where}: {exc}") from None
    except OSError as exc:
        raise OSError(f"{path}: cannot read: {exc.strerror or exc}") from exc


@dataclass
class _CSVShape:
    """What one pass over a CSV tells: its first line, its number of rows, the first row of
    another width (line, fields) and the header decision (``head``, None without one)."""

    first: list[str]
    n_rows: int
    bad_width: tuple[int, int] | None
    head: list[str] | None = None

    @property
    def n_data(self) -> int:
        return self.n_rows - (self.head is not None)


def _csv_shape(path: Path, header: bool | None, rows: _RowSource) -> _CSVShape:
    """Read every row once (any unreadable line is refused first), then decide the header.

    Checks, in this order: the header line (:func:`_is_header` unless
    ``header`` says), duplicate names, no data rows, rows of another width,
    and (without a header) an index column.
    """
    first: list[str] | None = None
    n, bad_width = 0, None
    for r, line in rows():
        if first is None:
            first = r
        elif bad_width is None and len(r) != len(first):
            bad_width = (line, len(r))
        n += 1
    if first is None:
        raise ValueError(f"{path}: CSV file is empty")
    shape = _CSVShape(first=first, n_rows=n, bad_width=bad_width)
    if header is None:
        header = _is_header(path, first, lambda: islice(_fields(rows()), 1, None))
    if header:
        shape.head = first
        dup = sorted({h for h in first if first.count(h) > 1})
        if dup:
            raise ValueError(f"{path}: header has duplicate column names {dup}")
    if shape.n_data == 0:
        raise ValueError(f"{path}: CSV file has a header but no data rows")
    if bad_width is not None:
        raise ValueError(f"{path}: line {bad_width[0]} has {bad_width[1]} fields, expected "
                         f"{len(first)}")
    if shape.head is None:
        _check_no_index_column(path, len(first), _fields(rows()))
    return shape


def _read_csv(path: Path, header: bool | None = None
              ) -> tuple[list[str] | None, list[list[str]], list[int]]:
    """Header (or None), the data rows (stripped fields) and their line numbers."""
    _check_file(path, "file")
    rows: list[list[str]] = []
    lines: list[int] = []
    for r, line in _iter_rows(path):
        rows.append(r)
        lines.append(line)
    shape = _csv_shape(path, header, lambda: zip(rows, lines, strict=True))
    skip = int(shape.head is not None)
    return shape.head, rows[skip:], lines[skip:]


def _column_name(header: list[str] | None, c: int) -> str:
    return f"column {header[c]!r}" if header else f"column {c}"


def _bad_cell(path: Path, kind: str, cell: str, line: int, column: str) -> ValueError:
    what = {"missing": "missing value", "nonfinite": "non-finite value",
            "text": "non-numeric value"}[kind]
    return ValueError(f"{path}: {what} {cell!r} at line {line}, {column}")


def _csv_matrix(path: Path, rows: list[list[str]], lines: list[int], cols: list[int],
                header: list[str] | None) -> NDArray[np.float64]:
    """The numbers in columns ``cols``; any other cell is refused naming line and column.

    Rows whose cells are all numbers (one :data:`_NUMBER_ROW_RE` match per
    row: the rule of :func:`_cell`) are converted at once; otherwise, or when
    a value overflows, the cells are read one by one to name the first bad one.
    """
    picked = [[r[c] for c in cols] for r in rows]
    if all(_NUMBER_ROW_RE.fullmatch(j) and j.count(",") == len(cols) - 1
           for j in map(",".join, picked)):
        out = np.array(picked, dtype=np.float64).reshape(len(rows), len(cols))
        if np.isfinite(out).all():
            return out
    del picked
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


def _trailing_labels(rows: Callable[[], Iterable[list[str]]],
                     classes: NDArray[Any] | None) -> bool:
    """Whether the last column of header-less rows holds labels: integers or class names."""
    if all(_INT_RE.fullmatch(r[-1]) for r in rows()):
        return True
    if classes is None:
        return False
    names = {str(c) for c in classes}
    return all(r[-1] in names for r in rows())


def _label_index(path: Path, header: list[str] | None, width: int,
                 rows: Callable[[], Iterable[list[str]]],
                 label_column: str | int | None, need_labels: bool,
                 n_classes: int | None, classes: NDArray[Any] | None
                 ) -> tuple[int | None, bool]:
    """The label column (or None) and whether it was guessed as the last column.

    ``rows()`` iterates over the data rows (read only to recognise trailing labels).
    """
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


@dataclass
class _CSVLayout:
    """Which columns of a score CSV hold the scores and which the labels."""

    cols: list[int]
    label: int | None
    label_source: str | None
    notes: list[str]


def _csv_layout(path: Path, head: list[str] | None, width: int,
                rows: Callable[[], Iterable[list[str]]], *, header: bool | None,
                label_column: str | int | None, need_labels: bool, ignore_labels: bool,
                n_classes: int | None, classes: NDArray[Any] | None) -> _CSVLayout:
    """The score and label columns of a score CSV (``rows()``: its data rows)."""
    notes = []
    if head is not None and header is None and _is_numbered(head):
        notes.append(f"line 1 ({','.join(head)}) read as a header: the column numbers "
                     "pandas writes (--no-header reads it as data)")
    li, guessed = _label_index(path, head, width, rows, label_column, need_labels, n_classes,
                               classes)
    cols = [c for c in range(width) if c != li]
    if not cols:
        raise ValueError(f"{path}: no score columns besides the label column")
    if n_classes is not None and len(cols) != n_classes:
        raise ValueError(
            f"{path}: {len(cols)} score columns but the model has {n_classes} classes; if a "
            "column holds labels, name it with --label-column"
        )
    source = None
    if li is not None:
        source = _column_name(head, li) + (" (the last column)" if guessed and head is None
                                           else "")
        if ignore_labels:
            notes.append(f"labels in {source} ignored")
    return _CSVLayout(cols=cols, label=li, label_source=source, notes=notes)


def _read_score_csv(path: Path, *, header: bool | None, label_column: str | int | None,
                    need_labels: bool, ignore_labels: bool, n_classes: int | None,
                    classes: NDArray[Any] | None) -> _RawCSV:
    """Score cells (file order), score-column names and labels of a CSV score file."""
    head, rows, lines = _read_csv(path, header)
    layout = _csv_layout(path, head, len(rows[0]), lambda: rows, header=header,
                         label_column=label_column, need_labels=need_labels,
                         ignore_labels=ignore_labels, n_classes=n_classes, classes=classes)
    scores = _csv_matrix(path, rows, lines, layout.cols, head)
    y = None
    if layout.label is not None and not ignore_labels:
        y = _csv_labels(path, rows, lines, layout.label, head)
    return _RawCSV(scores=scores,
                   names=[head[c] for c in layout.cols] if head else None,
                   header=head, y=y, label_source=layout.label_source, notes=layout.notes)


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


def _check_request(path: Path, input: str | None, label_column: str | int | None,
                   header: bool | None) -> str:
    """The checks of a score-file request before any reading; returns the file's suffix."""
    from bayescal._validation import check_option

    if input is not None:
        check_option(input, "input", ("probs", "logits"))
    _check_file(path, "score file")
    suffix = path.suffix.lower()
    if label_column is not None and suffix != ".csv":
        raise ValueError(f"{path}: --label-column applies to .csv score files only")
    if header is not None and suffix != ".csv":
        raise ValueError(f"{path}: --header / --no-header apply to .csv score files only")
    return suffix


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
    from bayescal._validation import check_scores

    path = Path(path)
    suffix = _check_request(path, input, label_column, header)
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


# ---------------------------------------------------------------------------
# apply: read, calibrate and write in chunks of rows
# ---------------------------------------------------------------------------
#: Rows read, calibrated and written at a time by :func:`apply_scores`.
CHUNK_ROWS = 16384


@dataclass
class AppliedScores:
    """What :func:`apply_scores` read and wrote.

    Attributes
    ----------
    shape : tuple of int
        ``(n, k)``: rows and score columns read (and rows written).
    kind, header, label_source, notes
        As in :class:`ScoreData`.
    streamed : bool
        Whether the rows were read, calibrated and written chunk by chunk
        (else the file was read whole).
    """

    shape: tuple[int, int]
    kind: str
    header: list[str] | None
    label_source: str | None
    notes: list[str]
    streamed: bool


class _WholeFile(Exception):  # noqa: N818 (a signal, not an error)
    """The chunked reader cannot decide alone; read the file whole, as :func:`read_scores`."""


def _chunk_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """Row ranges of at most ``size`` (at least 2) rows covering ``0..n``, none of 1 row
    unless ``n`` is 1 (a one-row matrix product may round differently from a larger one)."""
    size = max(2, size)
    starts = list(range(0, n, size))
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return list(zip(starts, [*starts[1:], n], strict=True))


def _csv_chunks(path: Path, header: bool | None, label_column: str | int | None,
                n_classes: int | None, cls: NDArray[Any] | None, size: int
                ) -> tuple[tuple[int, int], list[str] | None, list[str] | None, _CSVLayout,
                           Callable[[], Iterator[NDArray[np.float64]]]]:
    """Shape, header, score-column names, layout and chunk iterator of a score CSV.

    The file is read once through to find its shape and any unreadable line
    (:func:`_csv_shape`), as :func:`_read_csv` does; the chunks then read it
    again, holding ``size`` rows at a time.
    """
    def rows() -> Iterator[tuple[list[str], int]]:
        return _iter_rows(path)

    shape = _csv_shape(path, header, rows)
    head = shape.head
    skip = int(head is not None)

    def data_rows() -> Iterator[tuple[list[str], int]]:
        return islice(rows(), skip, None)

    layout = _csv_layout(path, head, len(shape.first), lambda: _fields(data_rows()),
                         header=header, label_column=label_column, need_labels=False,
                         ignore_labels=True, n_classes=n_classes, classes=cls)
    n = shape.n_data

    def chunks() -> Iterator[NDArray[np.float64]]:
        it = data_rows()
        for a, b in _chunk_bounds(n, size):
            pairs = list(islice(it, b - a))
            yield _csv_matrix(path, [r for r, _ in pairs], [line for _, line in pairs],
                              layout.cols, head)

    names = [head[c] for c in layout.cols] if head else None
    return (n, len(layout.cols)), head, names, layout, chunks


def _npy_chunks(path: Path, size: int
                ) -> tuple[tuple[int, int], Callable[[], Iterator[NDArray[Any]]]]:
    """Shape and chunk iterator of a float ``.npy`` of shape (n, k), memory-mapped.

    Anything :func:`bayescal._files.read_npy` could refuse, or that is not a
    2-D float array, raises :class:`_WholeFile` (the whole-file reader then
    says why, as before).
    """
    from numpy.lib import format as npy

    if _magic(path) != _NPY_MAGIC:
        raise _WholeFile
    try:
        with open(path, "rb") as f:
            if npy.read_magic(f) not in ((1, 0), (2, 0)):
                raise _WholeFile
        mm = np.load(path, mmap_mode="r", allow_pickle=False)
    except _WholeFile:
        raise
    except Exception as exc:
        raise _WholeFile from exc
    if (not isinstance(mm, np.memmap) or mm.ndim != 2 or mm.dtype.kind != "f"
            or mm.shape[0] < 1 or mm.offset + mm.nbytes != path.stat().st_size):
        raise _WholeFile

    def chunks() -> Iterator[NDArray[Any]]:
        for a, b in _chunk_bounds(mm.shape[0], size):
            yield np.array(mm[a:b])  # a copy, in the file's memory order

    return (int(mm.shape[0]), int(mm.shape[1])), chunks


def _apply_chunked(path: Path, out: Path, predict: Callable[[NDArray[np.float64]], Any], *,
                   size: int, overwrite: bool, input: str | None,
                   label_column: str | int | None, n_classes: int | None,
                   header: bool | None, classes: ArrayLike | None,
                   column_names: ArrayLike | None) -> AppliedScores:
    """:func:`apply_scores` chunk by chunk; raises :class:`_WholeFile` where it cannot
    tell alone what the whole-file path would do."""
    from bayescal._validation import ROW_SUM_ATOL, check_scores

    suffix = _check_request(path, input, label_column, header)
    parent = out.parent if str(out.parent) else Path(".")
    if suffix not in (".csv", ".npy") or out.suffix.lower() not in (".csv", ".npz") or (
            out.is_dir() or not parent.is_dir() or (out.exists() and not overwrite)):
        raise _WholeFile  # reported by the whole-file path, in its order
    kind = input or "probs"
    cls = None if classes is None else np.asarray(classes)
    head = names = None
    notes: list[str] = []
    label_source = None
    if suffix == ".csv":
        shape, head, names, layout, chunks = _csv_chunks(path, header, label_column,
                                                         n_classes, cls, size)
        notes, label_source = list(layout.notes), layout.label_source
    else:
        shape, chunks = _npy_chunks(path, size)
    order = None
    if names is not None:
        known = None if column_names is None else [str(c) for c in np.asarray(column_names)]
        try:
            order, note = _column_order(path, names, cls, known)
        except ValueError as exc:  # refused after every cell is read
            raise _WholeFile from exc
        if note:
            notes.append(note)

    def calibrate(raw: NDArray[Any]) -> NDArray[np.float64]:
        try:
            scores = check_scores(raw, kind=kind, name=f"scores in {path}", n_classes=n_classes)
            if kind == "probs" and raw.dtype == np.float64 and (
                    np.abs(scores.sum(axis=1) - 1.0) > ROW_SUM_ATOL["float64"]).any():
                raise _WholeFile  # the tolerance depends on the precision of the whole file
            if order is not None:
                scores = scores[:, order]
            return check_output_probs(predict(scores), n_rows=scores.shape[0], where=str(out))
        except _WholeFile:
            raise
        except Exception as exc:  # noqa: BLE001 (reported by the whole-file path)
            raise _WholeFile from exc

    if out.suffix.lower() == ".csv":
        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                for i, raw in enumerate(chunks()):
                    proba = calibrate(raw)
                    if i == 0:
                        fh.write((",".join(f"p{j}" for j in range(proba.shape[1])) + "\n"
                                  ).encode())
                    np.savetxt(fh, proba, delimiter=",", fmt="%.17g")

        atomic_write(out, write, overwrite=overwrite)
    else:  # an .npz is written whole: its zip member needs the array's size first
        write_scores(out, np.concatenate([calibrate(raw) for raw in chunks()]),
                     overwrite=overwrite)
    return AppliedScores(shape=shape, kind=kind, header=head, label_source=label_source,
                         notes=notes, streamed=True)


def apply_scores(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    predict: Callable[[NDArray[np.float64]], Any],
    *,
    input: str | None = None,
    label_column: str | int | None = None,
    n_classes: int | None = None,
    header: bool | None = None,
    classes: ArrayLike | None = None,
    column_names: ArrayLike | None = None,
    overwrite: bool = False,
    chunk_rows: int | None = None,
) -> AppliedScores:
    """Calibrate a score file into ``out`` (``bayescal apply``), in chunks of rows.

    Equivalent to :func:`read_scores` (with ``ignore_labels=True``), then
    ``predict``, :func:`check_output_probs` and :func:`write_scores`: the same
    files are read or refused with the same message, and the same bytes are
    written. A ``.csv`` or float ``.npy`` score file is read ``chunk_rows``
    rows at a time (default :data:`CHUNK_ROWS`; an ``.npy`` is memory-mapped),
    each chunk checked, calibrated, checked again and written into the
    temporary output file, which is renamed into place at the end or removed
    on any error. A ``.csv`` output holds one chunk at a time; an ``.npz``
    output is assembled in memory.

    The file is read whole instead (as before) when it is an ``.npz``, and
    when a decision needs the whole file: a check of the scores, of the
    column names or of the output fails (the message then comes from the
    whole-file reader, in its order), or probability rows sum to 1 only
    within float32 / float16 precision (the tolerance depends on the whole
    file's precision).

    Parameters
    ----------
    path, out : path-like
        The score file and the output (``.npz`` or ``.csv``).
    predict : callable
        Maps scores (m, k) in class order to probabilities (m, k); rows are
        calibrated independently.
    input, label_column, n_classes, header, classes, column_names
        As in :func:`read_scores`.
    overwrite : bool, default=False
        Replace an existing ``out``.
    chunk_rows : int, optional
        Rows per chunk (at least 2).

    Returns
    -------
    AppliedScores
    """
    path, out = Path(path), Path(out)
    size = CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
    options: dict[str, Any] = dict(input=input, label_column=label_column, n_classes=n_classes,
                                   header=header, classes=classes, column_names=column_names)
    try:
        return _apply_chunked(path, out, predict, size=size, overwrite=overwrite, **options)
    except _WholeFile:
        pass
    data = read_scores(path, ignore_labels=True, **options)
    n = data.scores.shape[0]
    proba = check_output_probs(predict(data.scores), n_rows=n, where=str(out))
    write_scores(out, proba, overwrite=overwrite)
    return AppliedScores(shape=(n, data.scores.shape[1]), kind=data.kind, header=data.header,
                         label_source=data.label_source, notes=data.notes, streamed=False)
