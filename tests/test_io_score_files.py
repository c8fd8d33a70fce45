"""Score files: every row kept, in order, or the file refused naming the line and column."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal.score_files import read_labels, read_scores, write_scores

Q = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.25, 0.25, 0.5], [0.1, 0.1, 0.8]])
Y = np.array([2, 0, 1, 2])


def _csv(tmp_path: Path, text: str, name: str = "s.csv", bom: bool = False) -> Path:
    p = tmp_path / name
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return p


def _rows(q: np.ndarray, y: np.ndarray | None = None, fmt=repr) -> list[str]:
    out = []
    for i, row in enumerate(q):
        cells = [fmt(float(v)) for v in row]
        if y is not None:
            cells.append(str(int(y[i])))
        out.append(",".join(cells))
    return out


@pytest.mark.parametrize("bom", [False, True])
@pytest.mark.parametrize("header", [None, "p0,p1,p2,y", "0,1,2,y", "1,2,3,label"])
def test_every_row_is_kept(tmp_path: Path, bom: bool, header: str | None) -> None:
    lines = ([header] if header else []) + _rows(Q, Y)
    d = read_scores(_csv(tmp_path, "\n".join(lines) + "\n", bom=bom), need_labels=True)
    np.testing.assert_array_equal(d.scores, Q)
    np.testing.assert_array_equal(d.y, Y)
    assert d.header == (header.split(",") if header else None)


def test_quoted_and_spaced_fields_are_numbers(tmp_path: Path) -> None:
    lines = _rows(Q, Y, fmt=lambda v: f'"{v!r}"')
    lines[1] = " " + lines[1].replace(",", ",  ")
    d = read_scores(_csv(tmp_path, "\n".join(lines) + "\n", bom=True), need_labels=True)
    np.testing.assert_array_equal(d.scores, Q)
    assert d.header is None
    lines[3] = lines[3].replace(",", " x,", 1)
    with pytest.raises(ValueError, match="s.csv: malformed CSV at line 4"):
        read_scores(_csv(tmp_path, "\n".join(lines) + "\n"), need_labels=True)


def test_blank_lines_hold_no_row(tmp_path: Path) -> None:
    lines = _rows(Q, Y)
    text = "\n" + lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n\n  \n"
    d = read_scores(_csv(tmp_path, text), need_labels=True)
    np.testing.assert_array_equal(d.scores, Q)


@pytest.mark.parametrize("cell", ["", "NA", "nan", "NaN", "null", "None", "?", "#N/A", "n/a"])
@pytest.mark.parametrize("line", [1, 3])
def test_missing_cells_are_refused_naming_line_and_column(tmp_path: Path, cell: str,
                                                          line: int) -> None:
    lines = _rows(Q, Y)
    cells = lines[line - 1].split(",")
    cells[1] = cell
    lines[line - 1] = ",".join(cells)
    path = _csv(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"s.csv: missing value '{cell}' at line "
                                                   f"{line}, column 1")):
        read_scores(path, need_labels=True)


def test_missing_cell_with_header_names_the_column(tmp_path: Path) -> None:
    lines = ["p0,p1,p2,y", *_rows(Q, Y)]
    lines[2] = lines[2].replace(lines[2].split(",")[2], "")
    with pytest.raises(ValueError, match=r"missing value '' at line 3, column 'p2'"):
        read_scores(_csv(tmp_path, "\n".join(lines) + "\n"), need_labels=True)


@pytest.mark.parametrize(("first", "match"), [
    ("0.2,abc,0.5,2", "line 1 mixes text .'abc'. with numbers .'0.2'."),
    ("p0,,p2,y", "line 1 mixes text with empty or missing cells"),
    ("p0,NA,p2,y", "line 1 mixes text with empty or missing cells"),
    ("0,1,0,x", "line 1 mixes text .'x'. with numbers .'0'."),
    ("5,p1,p2,y", "line 1 mixes text .'p1'. with numbers .'5'."),
])
def test_ambiguous_first_line_is_refused(tmp_path: Path, first: str, match: str) -> None:
    path = _csv(tmp_path, "\n".join([first, *_rows(Q, Y)]) + "\n")
    with pytest.raises(ValueError, match=match + ".*pass --header"):
        read_scores(path, need_labels=True)


def test_explicit_header_choice(tmp_path: Path) -> None:
    # a first line the reader would refuse: the caller says what it is
    path = _csv(tmp_path, "\n".join(["p0,p1,p2,5", *_rows(Q, Y)]) + "\n")
    with pytest.raises(ValueError, match="line 1 mixes text .'p0'. with numbers .'5'."):
        read_scores(path, need_labels=True)
    d = read_scores(path, need_labels=True, header=True, label_column=-1)
    np.testing.assert_array_equal(d.scores, Q)
    with pytest.raises(ValueError, match="non-numeric value 'p0' at line 1, column 0"):
        read_scores(path, need_labels=True, header=False)
    # a forced header still names the score columns: names that say nothing are refused
    odd = _csv(tmp_path, "\n".join(["0.2,abc,0.5,2", *_rows(Q, Y)]) + "\n", "o.csv")
    with pytest.raises(ValueError, match=r"o.csv: score column names \['0.2', 'abc', '0.5'\] "
                                         "are neither p0..p2 nor the class names"):
        read_scores(odd, need_labels=True, header=True, label_column=-1)
    # header=False keeps a first row that looks like names... and refuses it
    named = _csv(tmp_path, "\n".join(["p0,p1,p2,y", *_rows(Q, Y)]) + "\n", "n.csv")
    with pytest.raises(ValueError, match="non-numeric value 'p0' at line 1"):
        read_scores(named, need_labels=True, header=False)


def test_duplicate_header_names_are_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, "\n".join(["p,p,p2,y", *_rows(Q, Y)]) + "\n")
    with pytest.raises(ValueError, match=r"duplicate column names \['p'\]"):
        read_scores(path, need_labels=True)


def test_nonfinite_and_ragged_rows(tmp_path: Path) -> None:
    lines = _rows(Q, Y)
    bad = lines.copy()
    bad[2] = bad[2].replace(bad[2].split(",")[0], "inf", 1)
    with pytest.raises(ValueError, match="non-finite value 'inf' at line 3, column 0"):
        read_scores(_csv(tmp_path, "\n".join(bad) + "\n"), need_labels=True)
    ragged = lines.copy()
    ragged[3] += ",0.1"
    with pytest.raises(ValueError, match="line 4 has 5 fields, expected 4"):
        read_scores(_csv(tmp_path, "\n".join(ragged) + "\n"), need_labels=True)
    with pytest.raises(ValueError, match="CSV file is empty"):
        read_scores(_csv(tmp_path, "\n\n"))
    with pytest.raises(ValueError, match="has a header but no data rows"):
        read_scores(_csv(tmp_path, "p0,p1,y\n"))


def test_label_files(tmp_path: Path) -> None:
    p = _csv(tmp_path, "y\n2\n0\n1\n2\n", "y.txt", bom=True)
    np.testing.assert_array_equal(read_labels(p), Y)
    p = _csv(tmp_path, "2\n0\nNA\n2\n", "y.txt")
    with pytest.raises(ValueError, match="missing value 'NA' at line 3"):
        read_labels(p)
    np.savez(tmp_path / "s.npz", probs=Q)
    with pytest.raises(ValueError, match=r"y.txt: missing value"):
        read_scores(tmp_path / "s.npz", labels=p)


def test_binary_files(tmp_path: Path) -> None:
    (tmp_path / "r.npz").write_bytes(np.random.default_rng(0).bytes(100))
    with pytest.raises(ValueError, match=r"r.npz: not a NumPy .npz archive \(no zip signature\)"):
        read_scores(tmp_path / "r.npz")
    (tmp_path / "r.npy").write_bytes(b"hello")
    with pytest.raises(ValueError, match=r"r.npy: not a NumPy .npy file"):
        read_scores(tmp_path / "r.npy")
    np.save(tmp_path / "o.npy", np.array([[{"a": 1}, 2]], dtype=object))
    with pytest.raises(ValueError, match="o.npy: holds Python objects"):
        read_scores(tmp_path / "o.npy")
    np.savez(tmp_path / "ok.npz", probs=Q, y=Y, extra=np.array([{"unused": 1}], dtype=object))
    d = read_scores(tmp_path / "ok.npz", need_labels=True)  # arrays not needed are not read
    np.testing.assert_array_equal(d.y, Y)
    raw = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[:-30])
    with pytest.raises(ValueError, match="cut.npz: damaged or truncated .npz archive"):
        read_scores(tmp_path / "cut.npz")
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(IsADirectoryError, match="score file .*d.npz is a directory"):
        read_scores(tmp_path / "d.npz")
    with pytest.raises(FileNotFoundError, match="score file .*none.npz does not exist"):
        read_scores(tmp_path / "none.npz")


@given(st.lists(st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3), min_size=1,
                max_size=30),
       st.booleans(), st.booleans(), st.booleans())
def test_csv_round_trip_keeps_rows_in_order(rows, header, bom, quoted) -> None:
    import tempfile

    q = np.array(rows)
    q = q / q.sum(axis=1, keepdims=True)
    y = np.arange(len(q)) % 3
    fmt = (lambda v: f'"{v!r}"') if quoted else repr
    lines = (["p0,p1,p2,y"] if header else []) + _rows(q, y, fmt=fmt)
    with tempfile.TemporaryDirectory() as d:
        d = read_scores(_csv(Path(d), "\n".join(lines) + "\n", bom=bom), need_labels=True)
    np.testing.assert_array_equal(d.scores, q)
    np.testing.assert_array_equal(d.y, y)


def test_write_scores_formats(tmp_path: Path) -> None:
    write_scores(tmp_path / "o.csv", Q)
    back = read_scores(tmp_path / "o.csv")
    np.testing.assert_array_equal(back.scores, Q)
    assert back.header == ["p0", "p1", "p2"]
    with pytest.raises(FileExistsError, match="already exists"):
        write_scores(tmp_path / "o.csv", Q)
    with pytest.raises(ValueError, match="unsupported output file type '.txt'"):
        write_scores(tmp_path / "o.txt", Q)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv"]
