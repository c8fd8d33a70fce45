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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SettingCache", "protocol_fingerprint"]


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

    def load(self, key: tuple[Any, ...]) -> dict[str, dict[str, Any]]:
        """Cached rows of a setting by method name (empty if none)."""
        p = self.path(key)
        if not p.is_file():
            return {}
        with open(p, encoding="utf-8") as f:
            data = _decode(json.load(f))
        return {row["method"]: row for row in data["rows"]}

    def missing(self, key: tuple[Any, ...], fingerprints: dict[str, str]) -> list[str]:
        """Methods (by name) without a cached row of the same fingerprint."""
        have = self.load(key)
        return [m for m, fp in fingerprints.items() if have.get(m, {}).get("fingerprint") != fp]

    def load_arrays(self, key: tuple[Any, ...]) -> dict[str, np.ndarray]:
        """Cached arrays of a setting (empty if none)."""
        p = self.path(key).with_suffix(".npz")
        if not p.is_file():
            return {}
        with np.load(p, allow_pickle=False) as f:
            return {name: f[name] for name in f.files}

    def _replace(self, target: Path, write: Any) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

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
        """Every cached row of every setting."""
        rows: list[dict[str, Any]] = []
        if not self.root.is_dir():
            return rows
        for p in sorted(self.root.glob("*.json")):
            with open(p, encoding="utf-8") as f:
                rows.extend(_decode(json.load(f))["rows"])
        return rows
