"""Resumable on-disk cache of finished experiment settings.

One small JSON file per setting (UCI: ``(dataset, classifier, repeat, fold)``;
deep networks: ``(model,)``) holds one result row per method, each tagged with
the method's fingerprint. Files are written atomically (a temporary file in
the same directory, then :func:`os.replace`), so a run killed at any moment
leaves either the previous file or the complete new one, never a torn file.

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

    def save(self, key: tuple[Any, ...], rows: list[dict[str, Any]]) -> Path:
        """Merge ``rows`` (by method) into the setting's file, atomically."""
        self.root.mkdir(parents=True, exist_ok=True)
        merged = self.load(key)
        for row in rows:
            merged[row["method"]] = row
        p = self.path(key)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=".tmp", dir=self.root)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(_encode({"key": list(key), "rows": list(merged.values())}), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
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
