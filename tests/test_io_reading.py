"""Reading rules of score files: every row and column read exactly, or the file refused.

Each test names a way a file written by pandas or NumPy used to be misread
(a header taken for data, columns taken in file order, ``1_0`` read as 10,
string labels refused, labels read as a class) and checks the reader either
reads exactly the rows and columns written, or refuses the file with one line
naming it.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayescal.cli import main
from bayescal.io import load_model
from bayescal.score_files import check_output_probs, read_labels, read_scores

K = 3


def _probs(n: int, k: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).dirichlet(np.ones(k), size=n)
    return q


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temperature model on k=3 probabilities and a binary one, fitted through the CLI."""
    d = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(1)
    for k in (2, K):
        q = _probs(300, k, seed=k)
        y = np.array([rng.choice(k, p=row) for row in q])
        np.savez(d / f"train{k}.npz", probs=q, y=y)
        assert main(["fit", str(d / f"train{k}.npz"), "--method", "temperature",
                     "-o", str(d / f"t{k}.json")]) == 0
    return d


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    assert err.startswith("bayescal: error:") and err.count("\n") == 1, err
    return err


# ---------------------------------------------------------------------------
# 1. a numeric header written by pandas is a header, never a data row
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, K])
def test_pandas_numeric_header_is_a_header(tmp_path: Path, k: int) -> None:
    q = _probs(20, k)
    pd.DataFrame(q).to_csv(tmp_path / "s.csv", index=False)
    assert (tmp_path / "s.csv").read_text().splitlines()[0] == ",".join(map(str, range(k)))
    d = read_scores(tmp_path / "s.csv")
    np.testing.assert_array_equal(d.scores, q)
    assert d.header == [str(j) for j in range(k)]
    assert any("header" in note for note in d.notes)


def test_one_based_numeric_header_and_logits(tmp_path: Path) -> None:
    z = np.random.default_rng(0).normal(size=(15, 4))
    pd.DataFrame(z, columns=[1, 2, 3, 4]).to_csv(tmp_path / "z.csv", index=False)
    d = read_scores(tmp_path / "z.csv", input="logits")
    np.testing.assert_array_equal(d.scores, z)


def test_integer_first_row_of_integer_data_stays_data(tmp_path: Path) -> None:
    # one-hot rows written as integers: "0,1" is data here (no float row follows)
    (tmp_path / "s.csv").write_text("0,1\n1,0\n0,1\n")
    d = read_scores(tmp_path / "s.csv")
    assert d.scores.shape == (3, 2) and d.header is None


def test_no_header_forces_the_first_line_to_be_data(tmp_path: Path) -> None:
    z = np.random.default_rng(0).normal(size=(5, 3))
    text = "0,1,2\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in z) + "\n"
    (tmp_path / "z.csv").write_text(text)
    d = read_scores(tmp_path / "z.csv", input="logits", header=False)
    np.testing.assert_array_equal(d.scores, np.vstack([[0, 1, 2], z]))
    d = read_scores(tmp_path / "z.csv", input="logits")
    np.testing.assert_array_equal(d.scores, z)


@pytest.mark.parametrize("k", [2, K])
def test_apply_never_calibrates_a_pandas_header(tmp_path: Path, model_dir: Path, k: int,
                                                capsys: pytest.CaptureFixture) -> None:
    q = _probs(25, k, seed=5)
    pd.DataFrame(q).to_csv(tmp_path / "new.csv", index=False)
    code, out, _ = _run(["apply", str(model_dir / f"t{k}.json"), str(tmp_path / "new.csv"),
                         "-o", str(tmp_path / "out.npz")], capsys)
    assert code == 0
    assert "header" in out.splitlines()[0]
    with np.load(tmp_path / "out.npz") as f:
        got = f["probs"]
    np.testing.assert_allclose(got, load_model(model_dir / f"t{k}.json").predict_proba(q),
                               rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------
# 2. header names order the columns
# ---------------------------------------------------------------------------
def test_p_columns_are_reordered(tmp_path: Path) -> None:
    q = _probs(10, K)
    df = pd.DataFrame(q, columns=[f"p{j}" for j in range(K)])
    df[["p2", "p0", "p1"]].to_csv(tmp_path / "s.csv", index=False)
    d = read_scores(tmp_path / "s.csv")
    np.testing.assert_array_equal(d.scores, q)
    assert d.columns == ["p0", "p1", "p2"]
    assert any("reordered" in note for note in d.notes)


def test_class_name_columns_are_reordered(tmp_path: Path) -> None:
    q = _probs(12, K)
    labels = np.array(["cat", "cow", "dog"])
    y = np.arange(12) % K
    df = pd.DataFrame(q, columns=labels)
    df["label"] = labels[y]
    df[["dog", "label", "cat", "cow"]].to_csv(tmp_path / "s.csv", index=False)
    d = read_scores(tmp_path / "s.csv", need_labels=True)
    np.testing.assert_array_equal(d.scores, q)
    np.testing.assert_array_equal(d.y, y)
    assert d.classes.tolist() == labels.tolist()


def test_unknown_column_names_are_refused(tmp_path: Path) -> None:
    q = _probs(6, K)
    pd.DataFrame(q, columns=["a", "p1", "b"]).to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ValueError, match=r"s.csv: score column names \['a', 'b'\] are neither"):
        read_scores(tmp_path / "s.csv")


def test_apply_reorders_by_the_model_classes(tmp_path: Path, capsys: pytest.CaptureFixture
                                              ) -> None:
    q = _probs(200, K, seed=2)
    labels = np.array(["ant", "bee", "cat"])
    y = labels[np.arange(200) % K]
    df = pd.DataFrame(q, columns=labels)
    df["label"] = y
    df.to_csv(tmp_path / "train.csv", index=False)
    assert _run(["fit", str(tmp_path / "train.csv"), "--method", "temperature",
                 "-o", str(tmp_path / "m.json")], capsys)[0] == 0
    df[["cat", "ant", "bee"]].to_csv(tmp_path / "new.csv", index=False)
    code, out, err = _run(["apply", str(tmp_path / "m.json"), str(tmp_path / "new.csv"),
                           "-o", str(tmp_path / "o.npz")], capsys)
    assert code == 0, err
    with np.load(tmp_path / "o.npz") as f:
        np.testing.assert_allclose(f["probs"],
                                   load_model(tmp_path / "m.json").predict_proba(q), atol=1e-15)


# ---------------------------------------------------------------------------
# 3. cells that are not numbers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["0.2_5", "1_0", "0.25\x00", "0x1", "١"])
def test_python_float_spellings_are_refused(tmp_path: Path, cell: str) -> None:
    (tmp_path / "s.csv").write_text(f"p0,p1\n0.5,0.5\n{cell},0.75\n")
    with pytest.raises(ValueError, match=re.escape(
            f"s.csv: non-numeric value {cell!r} at line 3, column 'p0'")):
        read_scores(tmp_path / "s.csv")


def test_label_file_with_underscore_is_refused(tmp_path: Path) -> None:
    (tmp_path / "y.txt").write_text("0\n1_0\n")
    with pytest.raises(ValueError, match=r"y.txt: non-numeric value '1_0' at line 2"):
        read_labels(tmp_path / "y.txt")


@pytest.mark.parametrize("cell", ["", "cat"])
def test_apply_ignores_the_label_column(tmp_path: Path, model_dir: Path, cell: str,
                                        capsys: pytest.CaptureFixture) -> None:
    q = _probs(8, K)
    df = pd.DataFrame(q, columns=[f"p{j}" for j in range(K)])
    df["y"] = cell
    df.to_csv(tmp_path / "s.csv", index=False)
    code, _, err = _run(["apply", str(model_dir / f"t{K}.json"), str(tmp_path / "s.csv"),
                         "-o", str(tmp_path / "o.npz")], capsys)
    assert code == 0, err


# ---------------------------------------------------------------------------
# 4. string labels
# ---------------------------------------------------------------------------
def test_fit_with_string_labels_csv(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    q = _probs(150, K, seed=3)
    names = np.array([f"digit_{j}" for j in range(K)])
    y = np.arange(150) % K
    df = pd.DataFrame(q, columns=[f"p{j}" for j in range(K)])
    df["label"] = names[y]
    df.to_csv(tmp_path / "s.csv", index=False)
    code, _, err = _run(["fit", str(tmp_path / "s.csv"), "--method", "temperature",
                         "-o", str(tmp_path / "m.json")], capsys)
    assert code == 0, err
    assert load_model(tmp_path / "m.json").classes_.tolist() == names.tolist()
    code, out, err = _run(["evaluate", str(tmp_path / "s.csv"), "--model",
                           str(tmp_path / "m.json"), "--report", str(tmp_path / "r")], capsys)
    assert code == 0, err


def test_string_labels_npz_and_explicit_classes(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    q = _probs(150, K, seed=4)
    order = np.array(["zebra", "apple", "mango"])  # column j is order[j]
    y = np.arange(150) % K
    np.savez(tmp_path / "s.npz", probs=q, y=order[y])
    d = read_scores(tmp_path / "s.npz", need_labels=True, classes=list(order))
    np.testing.assert_array_equal(d.y, y)
    # a model file records the sorted labels only: another column order is refused
    code, _, err = _run(["fit", str(tmp_path / "s.npz"), "--classes", "zebra,apple,mango",
                         "--method", "temperature", "-o", str(tmp_path / "m.json")], capsys)
    assert code == 2 and "a model file records the sorted labels apple,mango,zebra" in (
        _one_line_error(err))
    assert not (tmp_path / "m.json").exists()
    # evaluate (no model) uses the order given
    code, _, err = _run(["evaluate", str(tmp_path / "s.npz"), "--classes", "zebra,apple,mango",
                         "--report", str(tmp_path / "r")], capsys)
    assert code == 0, err
    # without --classes: sorted order
    d = read_scores(tmp_path / "s.npz", need_labels=True)
    assert d.classes.tolist() == sorted(order)
    np.testing.assert_array_equal(d.classes[d.y], order[y])


def test_digit_string_labels_warn(tmp_path: Path) -> None:
    q = _probs(30, K)
    np.savez(tmp_path / "s.npz", probs=q, y=np.array(["0", "1", "2"] * 10))
    with pytest.warns(UserWarning, match="s.npz: every label is a digit string"):
        read_scores(tmp_path / "s.npz", need_labels=True)


def test_object_labels_are_never_unpickled(tmp_path: Path) -> None:
    q = _probs(3, K)
    np.savez(tmp_path / "s.npz", probs=q, y=np.array(["a", "b", "c"], dtype=object))
    with pytest.raises(ValueError, match="s.npz: array 'y' holds Python objects"):
        read_scores(tmp_path / "s.npz", need_labels=True)


def test_unknown_label_for_model_classes(tmp_path: Path) -> None:
    q = _probs(4, K)
    np.savez(tmp_path / "s.npz", probs=q, y=np.array(["a", "b", "c", "d"]))
    with pytest.raises(ValueError, match=r"s.npz: y has labels that are not in classes"):
        read_scores(tmp_path / "s.npz", need_labels=True, classes=["a", "b", "c"])


# ---------------------------------------------------------------------------
# 5. header-less CSV with labels last, in apply
# ---------------------------------------------------------------------------
def test_apply_drops_a_trailing_integer_label_column(tmp_path: Path, model_dir: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    q = _probs(30, K, seed=6)
    y = np.arange(30) % K
    np.savetxt(tmp_path / "s.csv", np.column_stack([q, y]), delimiter=",",
               fmt=["%.17g"] * K + ["%d"])
    code, out, err = _run(["apply", str(model_dir / f"t{K}.json"), str(tmp_path / "s.csv"),
                           "-o", str(tmp_path / "o.npz")], capsys)
    assert code == 0, err
    assert "last column" in out and "ignored" in out
    with np.load(tmp_path / "o.npz") as f:
        assert f["probs"].shape == (30, K)


def test_apply_names_label_column_option_when_unsure(tmp_path: Path, model_dir: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    q = _probs(30, K + 1, seed=6)
    np.savetxt(tmp_path / "s.csv", q, delimiter=",", fmt="%.17g")
    code, _, err = _run(["apply", str(model_dir / f"t{K}.json"), str(tmp_path / "s.csv"),
                         "-o", str(tmp_path / "o.npz")], capsys)
    assert code == 2
    assert "--label-column" in _one_line_error(err)
    assert not (tmp_path / "o.npz").exists()


# ---------------------------------------------------------------------------
# 6. outputs checked before writing
# ---------------------------------------------------------------------------
def test_check_output_probs() -> None:
    check_output_probs(np.array([[0.25, 0.75]]), n_rows=1, where="x")
    with pytest.raises(ValueError, match=r"x: calibrated probabilities are not finite .row 2"):
        check_output_probs(np.array([[0.5, 0.5], [np.nan, 1.0]]), n_rows=2, where="x")
    with pytest.raises(ValueError, match="do not sum to 1"):
        check_output_probs(np.array([[0.5, 0.6]]), n_rows=1, where="x")
    with pytest.raises(ValueError, match="2 rows for 3 input rows"):
        check_output_probs(np.array([[0.5, 0.5]] * 2), n_rows=3, where="x")


def test_apply_refuses_a_nonfinite_output(tmp_path: Path, model_dir: Path,
                                          capsys: pytest.CaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from bayescal.calibrators.registry import ProbsToLogits

    q = _probs(5, K)
    np.save(tmp_path / "s.npy", q)

    def bad(self, scores):
        return np.full((len(scores), K), np.nan)

    monkeypatch.setattr(ProbsToLogits, "predict_proba", bad)
    code, _, err = _run(["apply", str(model_dir / f"t{K}.json"), str(tmp_path / "s.npy"),
                         "-o", str(tmp_path / "o.csv")], capsys)
    assert code == 2 and "not finite" in _one_line_error(err)
    assert not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------------------
# 7. property: what pandas / NumPy write is read exactly, or refused
# ---------------------------------------------------------------------------
@st.composite
def _score_files(draw: st.DrawFn) -> dict:
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, 12))
    kind = draw(st.sampled_from(["probs", "logits"]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    scores = rng.dirichlet(np.ones(k), size=n) if kind == "probs" else rng.normal(size=(n, k))
    string_labels = draw(st.booleans())
    y = rng.integers(0, k, size=n)
    names = np.array([f"c{j}_{'x' * j}" for j in range(k)]) if string_labels else None
    return {
        "k": k, "n": n, "kind": kind, "scores": scores, "y": y, "names": names,
        "format": draw(st.sampled_from(["csv", "npz"])),
        "header": draw(st.booleans()), "index": draw(st.booleans()),
        "named": draw(st.booleans()), "perm": draw(st.permutations(range(k))),
        "with_labels": draw(st.booleans()),
    }


def _write(case: dict, directory: Path) -> Path:
    scores, y, names, k = case["scores"], case["y"], case["names"], case["k"]
    labels = names[y] if names is not None else y
    if case["format"] == "npz":
        path = directory / "s.npz"
        arrays = {case["kind"]: scores}
        if case["with_labels"]:
            arrays["y"] = labels
        np.savez(path, **arrays)
        return path
    path = directory / "s.csv"
    if case["named"]:
        df = pd.DataFrame(scores, columns=[f"p{j}" for j in range(k)])
        df = df[[f"p{j}" for j in case["perm"]]]
    else:
        df = pd.DataFrame(scores)
    if case["with_labels"]:
        df["y"] = labels
    df.to_csv(path, index=case["index"], header=case["header"])
    return path


@settings(max_examples=25, deadline=None)
@given(_score_files())
def test_written_files_are_read_exactly_or_refused(case: dict) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = _write(case, Path(d))
        classes = list(case["names"]) if case["names"] is not None else None
        try:
            data = read_scores(path, input=case["kind"], need_labels=case["with_labels"],
                               classes=classes)
        except ValueError as exc:
            assert str(exc).startswith(str(path)), exc
            return
    expected = case["scores"]
    if case["format"] == "csv" and case["named"] and not case["header"]:
        expected = expected[:, case["perm"]]  # no names: the columns as written
    np.testing.assert_array_equal(data.scores, expected)
    if case["with_labels"]:
        np.testing.assert_array_equal(data.y, case["y"])


def test_numeric_csv_labels_match_text_classes(tmp_path: Path) -> None:
    q = _probs(4, K)
    df = pd.DataFrame(q, columns=[f"p{j}" for j in range(K)])
    df["y"] = [10, 2, 3, 10]
    df.to_csv(tmp_path / "s.csv", index=False)
    d = read_scores(tmp_path / "s.csv", need_labels=True, classes=["10", "2", "3"])
    np.testing.assert_array_equal(d.y, [0, 1, 2, 0])


def test_npy_header_claiming_more_rows_than_the_file_holds_is_refused(tmp_path):
    """A header of 10^12 rows is refused naming the file, not a MemoryError."""
    from numpy.lib import format as npy

    from bayescal.score_files import read_scores

    path = tmp_path / "big.npy"
    with open(path, "wb") as f:
        npy.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                       "shape": (10**12, 3)})
        f.write(np.full((4, 3), 1 / 3).tobytes())
    with pytest.raises(ValueError, match="big.npy.*header claims shape"):
        read_scores(path)
