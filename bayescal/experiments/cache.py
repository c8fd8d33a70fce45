"""Resumable on-disk cache of finished experiment settings.

One small JSON file per setting (UCI: ``(dataset, classifier, repeat, fold)``;
deep networks: ``(model,)``) holds one result row per method, each tagged with
the method's fingerprint; a compressed ``.npz`` beside it keeps the test labels
and every method's calibrated test probabilities, so measures can be added or
recomputed later without refitting anything. Files are written atomically (a
temporary file in the same directory, then :func:`os.replace`; the arrays
before the rows that refer to them), so a run killed at any moment leaves
either the previous files or the complete new ones, never a torn file.

A later run with the same protocol (same directory, see
:func:`protocol_fingerprint`) reuses every row whose method fingerprint still
matches and computes only the methods that are missing, e.g. a calibrator that
was unavailable before.

A damaged entry (a truncated or corrupt JSON or ``.npz`` file, rows without
their arrays) is never trusted: it is named in a :class:`CacheWarning`, both
of its files are renamed ``<name>.damaged-<time>`` (kept for inspection, no
longer read) and the setting counts as missing, so it is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from bayescal._files import atomic_write

__all__ = ["CacheWarning", "SettingCache", "protocol_fingerprint"]


class CacheWarning(UserWarning):
    """A damaged cache entry was set aside and will be recomputed."""


def protocol_fingerprint(config: dict[str, Any]) -> str:
    """Short hash of a protocol description (folds, seeds, classifier settings...)."""
    blob = json.dumps(config, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _encode(value: Any) -> Any:
    # JSON has no NaN; keep it explicit and reversible
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class SettingCache:
    """Directory of per-setting JSON files.

    Parameters
    ----------
    root : path-like
        Directory (created on first write).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, key: tuple[Any, ...]) -> Path:
        """File of one setting."""
        return self.root / ("__".join(str(k) for k in key) + ".json")

    def _set_aside(self, key: tuple[Any, ...], problem: str) -> None:
        """Rename the entry's files out of the way and warn, naming them."""
        self._move_aside([self.path(key), self.path(key).with_suffix(".npz")], problem)

    def _move_aside(self, paths: list[Path], problem: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved = []
        for p in paths:
            if p.exists():
                target = p.with_name(f"{p.name}.damaged-{stamp}")
                os.replace(p, target)
                moved.append(target.name)
        warnings.warn(
            f"damaged cache entry {paths[0]}: {problem}; moved aside as "
            f"{', '.join(moved)} and recomputed",
            CacheWarning,
            stacklevel=4,
        )

    def _read_rows(self, p: Path) -> dict[str, dict[str, Any]]:
        """Rows of a JSON file by method; ValueError if it is damaged."""
        try:
            with open(p, encoding="utf-8") as f:
                data = _decode(json.load(f))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"unreadable JSON ({exc})") from None
        if not (isinstance(data, dict) and isinstance(data.get("rows"), list)
                and all(isinstance(r, dict) and isinstance(r.get("method"), str)
                        for r in data["rows"])):
            raise ValueError("JSON without a list of result rows")
        return {row["method"]: row for row in data["rows"]}

    def _problem(self, key: tuple[Any, ...]) -> str | None:
        """What is wrong with an entry (None: nothing), cheaply.

        The JSON is parsed; the ``.npz`` must open as a zip archive (a
        truncated file has lost its central directory) and hold the arrays of
        every row that has results.
        """
        p = self.path(key)
        try:
            rows = self._read_rows(p)
        except ValueError as exc:
            return str(exc)
        need = {f"proba:{m}.npy" for m, r in rows.items()
                if isinstance(r.get("log_loss"), float) and math.isfinite(r["log_loss"])}
        npz = p.with_suffix(".npz")
        if not npz.exists():
            return f"{npz.name} is missing" if need else None
        try:
            with zipfile.ZipFile(npz) as z:
                names = set(z.namelist())
        except (OSError, zipfile.BadZipFile) as exc:
            return f"{npz.name} is not a readable .npz ({exc})"
        lost = sorted(need - names)
        if lost or (need and "y_test.npy" not in names):
            return f"{npz.name} lacks the arrays {lost or ['y_test']}"
        return None

    def check(self, key: tuple[Any, ...]) -> bool:
        """Whether the entry is sound; a damaged one is set aside (and False returned)."""
        if not self.path(key).exists() and not self.path(key).with_suffix(".npz").exists():
            return True
        problem = self._problem(key) if self.path(key).exists() else "its JSON file is missing"
        if problem is not None:
            self._set_aside(key, problem)
            return False
        return True

    def load(self, key: tuple[Any, ...]) -> dict[str, dict[str, Any]]:
        """Cached rows of a setting by method name (empty if none or damaged)."""
        p = self.path(key)
        if not p.is_file():
            return {}
        try:
            return self._read_rows(p)
        except ValueError as exc:
            self._set_aside(key, str(exc))
            return {}

    def missing(self, key: tuple[Any, ...], fingerprints: dict[str, str]) -> list[str]:
        """Methods (by name) without a cached row of the same fingerprint.

        A damaged entry is set aside first, so all its methods are missing.
        """
        have = self.load(key) if self.check(key) else {}
        return [m for m, fp in fingerprints.items() if have.get(m, {}).get("fingerprint") != fp]

    def load_arrays(self, key: tuple[Any, ...]) -> dict[str, np.ndarray]:
        """Cached arrays of a setting (empty if none; a damaged entry is set aside)."""
        p = self.path(key).with_suffix(".npz")
        if not p.is_file():
            return {}
        try:
            with np.load(p, allow_pickle=False) as f:
                return {name: f[name] for name in f.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            self._set_aside(key, f"{p.name} is damaged ({exc})")
            return {}

    def _replace(self, target: Path, write: Any) -> None:
        def produce(tmp: Path) -> None:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())

        atomic_write(target, produce, overwrite=True)

    def save(
        self,
        key: tuple[Any, ...],
        rows: list[dict[str, Any]],
        arrays: dict[str, np.ndarray] | None = None,
    ) -> Path:
        """Merge ``rows`` (by method) and ``arrays`` (by name) into the setting's files."""
        self.root.mkdir(parents=True, exist_ok=True)
        if arrays:
            stored = {**self.load_arrays(key), **arrays}
            self._replace(self.path(key).with_suffix(".npz"),
                          lambda f: np.savez_compressed(f, **stored))  # fmt: skip
        merged = self.load(key)
        for row in rows:
            merged[row["method"]] = row
        p = self.path(key)
        blob = json.dumps(_encode({"key": list(key), "rows": list(merged.values())}))
        self._replace(p, lambda f: f.write(blob.encode("utf-8")))
        return p

    def all_rows(self) -> list[dict[str, Any]]:
        """Every cached row of every sound setting (damaged ones are set aside)."""
        rows: list[dict[str, Any]] = []
        if not self.root.is_dir():
            return rows
        for p in sorted(self.root.glob("*.json")):
            try:
                rows.extend(self._read_rows(p).values())
            except ValueError as exc:
                self._move_aside([p, p.with_suffix(".npz")], str(exc))
        return rows
