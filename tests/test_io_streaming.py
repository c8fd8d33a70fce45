"""``bayescal apply`` reads, calibrates and writes in chunks of rows.

The chunked path must read exactly what :func:`read_scores` reads (the same
rules, the same refusals with the same message) and write exactly the bytes
of the whole-file path, atomically. Small files with a chunk of 7 rows
exercise every multi-chunk branch; one subprocess test measures peak memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayescal import score_files
from bayescal.cli import main
from bayescal.io import load_model
from bayescal.score_files import (
    apply_scores,
    check_output_probs,
    read_scores,
    write_scores,
)

K = 3
CHUNK = 7


def _probs(n: int, k: int = K, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(k), size=n)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Temperature and Dirichlet models on probabilities, temperature on logits (k=3)."""
    d = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(1)
    q = _probs(300, seed=3)
    y = np.array([rng.choice(K, p=row) for row in q])
    np.savez(d / "train.npz", probs=q, y=y)
    np.savez(d / "train_logits.npz", logits=np.log(q) + 0.3, y=y)
    for name, method, data in (("t", "temperature", "train.npz"),
                               ("dir", "dirichlet-l2", "train.npz"),
                               ("tlogits", "temperature", "train_logits.npz")):
        assert main(["fit", str(d / data), "--method", method,
                     "-o", str(d / f"{name}.json")]) == 0
    return d


@pytest.fixture()
def spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Chunks of CHUNK rows; records the number of rows each ``_csv_matrix`` call holds."""
    sizes: list[int] = []
    real = score_files._csv_matrix

    def counting(path, rows, lines, cols, header):  # noqa: ANN001, ANN202
        sizes.append(len(rows))
        return real(path, rows, lines, cols, header)

    monkeypatch.setattr(score_files, "CHUNK_ROWS", CHUNK)
    monkeypatch.setattr(score_files, "_csv_matrix", counting)
    return sizes


def _whole_file_bytes(model: Path, scores: Path, out: Path, **kw: object) -> bytes:
    """The output of the whole-file path: read_scores, predict, check, write."""
    m = load_model(model)
    data = read_scores(scores, input=getattr(m, "input", "probs"), n_classes=m.n_features_in_,
                       classes=m.classes_, ignore_labels=True, **kw)
    proba = check_output_probs(m.predict_proba(data.scores), n_rows=data.scores.shape[0],
                               where=str(out))
    write_scores(out, proba)
    return out.read_bytes()


def _text(rows: np.ndarray, header: list[str] | None = None, extra: list[str] | None = None
          ) -> str:
    lines = [",".join(header)] if header else []
    for i, row in enumerate(rows):
        cells = [repr(float(v)) for v in row] + ([extra[i]] if extra else [])
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def _cases(n: int) -> dict[str, tuple[str, str, list[str]]]:
    """name -> (model, CSV text, extra CLI arguments)."""
    q = _probs(n, seed=n)
    y = [str(i % K) for i in range(n)]
    buf = pd.DataFrame(q).to_csv(index=False)
    return {
        "header": ("t", _text(q, ["p0", "p1", "p2"]), []),
        "no-header": ("t", _text(q), []),
        "permuted": ("t", _text(q[:, [2, 0, 1]], ["p2", "p0", "p1"]), []),
        "permuted-dirichlet": ("dir", _text(q[:, [1, 2, 0]], ["p1", "p2", "p0"]), []),
        "label-y": ("dir", _text(q, ["p0", "p1", "p2", "y"], y), []),
        "labels-last": ("t", _text(q, None, y), []),
        "label-column": ("t", _text(q, ["a", "p0", "p1", "p2"][1:] + ["target"], y),
                         ["--label-column", "target"]),
        "pandas-header": ("t", buf, []),
        "logits": ("tlogits", _text(np.log(q) * 1.7, ["p0", "p1", "p2"]), []),
        "crlf-blank-bom": ("t", "\ufeff" + _text(q, ["p0", "p1", "p2"]).replace("\n", "\r\n\r\n"),
                           []),
    }


# ---------------------------------------------------------------------------
# (a) the same bytes as the whole-file path, over many chunks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [50, 51, 8])  # 50 = 7 * 7 + 1: no chunk of one row
@pytest.mark.parametrize("case", list(_cases(8)))
@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_chunked_output_is_byte_identical(tmp_path: Path, models: Path, spy: list[int],
                                          case: str, n: int, suffix: str) -> None:
    model, text, extra = _cases(n)[case]
    src = tmp_path / "s.csv"
    src.write_text(text, encoding="utf-8")
    label_column = extra[1] if extra else None
    expected = _whole_file_bytes(models / f"{model}.json", src, tmp_path / f"ref{suffix}",
                                 label_column=label_column)
    spy.clear()
    out = tmp_path / f"out{suffix}"
    assert main(["apply", str(models / f"{model}.json"), str(src), "-o", str(out), *extra]) == 0
    assert out.read_bytes() == expected
    # read chunk by chunk (the whole-file reader reads all n rows in one call)
    assert spy and max(spy) <= CHUNK + 1 and sum(spy) == n


def test_npy_input_is_read_in_row_slices(tmp_path: Path, models: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(score_files, "CHUNK_ROWS", CHUNK)
    q = _probs(60, seed=2)
    for order in ("C", "F"):
        np.save(tmp_path / f"s{order}.npy", np.asarray(q, order=order))
        np.save(tmp_path / f"s{order}32.npy", np.asarray(q, dtype=np.float32, order=order))
    seen: list[int] = []
    real = score_files.check_output_probs
    monkeypatch.setattr(score_files, "check_output_probs",
                        lambda p, *, n_rows, where: (seen.append(n_rows), real(
                            p, n_rows=n_rows, where=where))[1])
    for name in ("sC", "sF", "sC32", "sF32"):
        src = tmp_path / f"{name}.npy"
        expected = _whole_file_bytes(models / "t.json", src, tmp_path / f"ref{name}.csv")
        seen.clear()
        done = apply_scores(src, tmp_path / f"{name}.csv", load_model(models / "t.json")
                            .predict_proba, n_classes=K, classes=[0, 1, 2])
        assert done.streamed and done.shape == (60, K)
        assert (tmp_path / f"{name}.csv").read_bytes() == expected
        assert max(seen) <= CHUNK + 1 and sum(seen) == 60


def test_float32_precision_rows_fall_back_to_the_whole_file(tmp_path: Path, models: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # float32 probabilities written as float64: rows sum to 1 within 1e-4 only, which
    # is accepted when every value of the file is a float32; that needs the whole file
    monkeypatch.setattr(score_files, "CHUNK_ROWS", CHUNK)
    q = _probs(40, seed=4).astype(np.float32)
    q[30] = np.float32([0.33333, 0.33333, 0.33336])
    src = tmp_path / "s.csv"
    src.write_text(_text(q.astype(np.float64), ["p0", "p1", "p2"]))
    expected = _whole_file_bytes(models / "t.json", src, tmp_path / "ref.csv")
    done = apply_scores(src, tmp_path / "o.csv", load_model(models / "t.json").predict_proba,
                        n_classes=K, classes=[0, 1, 2])
    assert not done.streamed
    assert (tmp_path / "o.csv").read_bytes() == expected


# ---------------------------------------------------------------------------
# (b) an error in a late chunk: no output, one line naming file, line and cell
# ---------------------------------------------------------------------------
def _late_error_file(tmp_path: Path, cell_row: int | None, sum_row: int | None) -> Path:
    q = _probs(1200, seed=7)
    if sum_row is not None:
        q[sum_row] = [0.5, 0.5, 0.5]
    lines = _text(q, ["p0", "p1", "p2"]).splitlines()
    if cell_row is not None:
        cells = lines[cell_row + 1].split(",")
        cells[1] = "1_0"
        lines[cell_row + 1] = ",".join(cells)
    src = tmp_path / "late.csv"
    src.write_text("\n".join(lines) + "\n")
    return src


@pytest.mark.parametrize(("cell_row", "sum_row"), [(999, None), (999, 10), (None, 1100)])
def test_late_error_writes_nothing(tmp_path: Path, models: Path, spy: list[int],
                                   capsys: pytest.CaptureFixture, cell_row: int | None,
                                   sum_row: int | None) -> None:
    src = _late_error_file(tmp_path, cell_row, sum_row)
    with pytest.raises(ValueError) as whole:  # the whole-file reader's message
        read_scores(src, n_classes=K, ignore_labels=True)
    spy.clear()
    for suffix in (".csv", ".npz"):
        out = tmp_path / f"out{suffix}"
        capsys.readouterr()
        assert main(["apply", str(models / "t.json"), str(src), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == f"bayescal: error: {whole.value}\n"
        assert not out.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["late.csv"]  # no temp file
    if cell_row is not None:
        assert str(whole.value) == (f"{src}: non-numeric value '1_0' at line {cell_row + 2}, "
                                    "column 'p1'")
    if sum_row is None:  # found while streaming, not by reading the file whole
        assert max(spy) <= CHUNK + 1


def test_ambiguous_header_and_index_column_are_refused_as_before(tmp_path: Path,
                                                                 models: Path,
                                                                 spy: list[int],
                                                                 capsys: pytest.CaptureFixture
                                                                 ) -> None:
    q = _probs(30, seed=8)
    files = {
        "ambiguous.csv": "p0,0.5,p2\n" + _text(q),
        "index.csv": pd.DataFrame(q).to_csv(index=True),
        "index-noheader.csv": "".join(f"{i},{a!r},{b!r},{c!r}\n" for i, (a, b, c) in
                                      enumerate(q)),
        "width.csv": _text(q, ["p0", "p1", "p2"]) + "0.5,0.5\n",
        "names.csv": _text(q, ["p0", "p1", "q"]),
    }
    for name, text in files.items():
        src = tmp_path / name
        src.write_text(text)
        with pytest.raises(ValueError) as whole:
            read_scores(src, n_classes=K, classes=[0, 1, 2], ignore_labels=True)
        capsys.readouterr()
        assert main(["apply", str(models / "t.json"), str(src),
                     "-o", str(tmp_path / "o.csv")]) == 2
        assert capsys.readouterr().err == f"bayescal: error: {whole.value}\n", name
        assert not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------------------
# (c) memory: rows held at once, and the peak of a real run
# ---------------------------------------------------------------------------
def test_rows_held_at_once_are_bounded_by_the_chunk(tmp_path: Path, models: Path,
                                                    spy: list[int]) -> None:
    q = _probs(5000, seed=9)
    src = tmp_path / "big.csv"
    src.write_text(_text(q, ["p0", "p1", "p2"]))
    assert main(["apply", str(models / "t.json"), str(src), "-o", str(tmp_path / "o.csv")]) == 0
    assert len(spy) == -(-5000 // CHUNK) and max(spy) <= CHUNK + 1 and sum(spy) == 5000


_PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

_WHOLE = """
import sys
from bayescal.io import load_model
from bayescal.score_files import check_output_probs, read_scores, write_scores
m = load_model(sys.argv[1])
d = read_scores(sys.argv[2], n_classes=m.n_features_in_, classes=m.classes_,
                ignore_labels=True)
write_scores(sys.argv[3], check_output_probs(m.predict_proba(d.scores),
             n_rows=d.scores.shape[0], where="out"))
"""


def _peak_kib(argv: list[str]) -> int:
    """Peak resident memory (KiB on Linux) of one command, run in its own wrapper process."""
    r = subprocess.run([sys.executable, "-c", _PEAK, *argv], check=True, capture_output=True,
                       text=True)
    return int(r.stdout.strip())


@pytest.mark.slow
@pytest.mark.once
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB on Linux")
def test_peak_memory_of_a_200k_row_csv(tmp_path: Path, models: Path) -> None:
    n = 200_000
    q = np.random.default_rng(0).dirichlet(np.ones(10), size=n)
    rng = np.random.default_rng(1)
    y = np.array([rng.choice(10, p=row) for row in q[:500]])
    np.savez(tmp_path / "train.npz", probs=q[:500], y=y)
    assert main(["fit", str(tmp_path / "train.npz"), "--method", "temperature",
                 "-o", str(tmp_path / "m.json")]) == 0
    header = ",".join(f"p{j}" for j in range(10))
    np.savetxt(tmp_path / "big.csv", q, delimiter=",", fmt="%.17g", header=header, comments="")
    np.savetxt(tmp_path / "small.csv", q[:50], delimiter=",", fmt="%.17g", header=header,
               comments="")
    cli = [sys.executable, "-m", "bayescal", "apply", str(tmp_path / "m.json")]
    base = _peak_kib([*cli, str(tmp_path / "small.csv"), "-o", str(tmp_path / "small.out.csv")])
    streamed = _peak_kib([*cli, str(tmp_path / "big.csv"), "-o", str(tmp_path / "out.csv")])
    whole = _peak_kib([sys.executable, "-c", _WHOLE, str(tmp_path / "m.json"),
                       str(tmp_path / "big.csv"), str(tmp_path / "ref.csv")])
    assert (tmp_path / "out.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    report = json.dumps({"base": base, "streamed": streamed, "whole": whole})
    # memory above the interpreter's own (imports): a chunk, not the file
    assert streamed - base < 0.4 * (whole - base), report
