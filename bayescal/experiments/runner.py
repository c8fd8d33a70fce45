"""Run the paper's two experimental suites with caching, progress and joblib.

:func:`run_uci` and :func:`run_dnn` enumerate the settings, skip those whose
results are already in the cache (:mod:`bayescal.experiments.cache`), run the
rest through :class:`joblib.Parallel` and write, under ``out``:

* ``<suite>_results.csv``: one row per (dataset, classifier, repeat, fold,
  method) (deep networks: classifier ``"dnn"``, repeat and fold 0);
* ``<suite>_tables.md``: the tables in the paper's layout;
* ``<suite>_manifest.json``: the configuration, which methods ran, which
  were unavailable and why, and the wall time;
* ``cache/<suite>-<fingerprint>/``: the per-setting cache (a damaged entry
  is reported, set aside and recomputed: :mod:`bayescal.experiments.cache`);
* ``reproduce.lock`` while a run is in progress: a second run on the same
  ``out`` is refused while the first is alive (:class:`bayescal._files.DirectoryLock`;
  the lock of a killed run is released by the operating system).

Parallelism goes through joblib's active backend, so the same call fans out
over a Dask cluster when run inside ``joblib.parallel_backend("dask")`` (with
a ``dask.distributed.Client`` connected), or when ``scheduler`` names a
scheduler address. Workers only compute; the calling process writes every
file, so workers need no shared filesystem.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import sklearn

from bayescal._files import DirectoryLock, atomic_write
from bayescal.datasets import PAPER_UCI_DATASETS, load_network_outputs, load_uci
from bayescal.experiments import paper
from bayescal.experiments.cache import SettingCache, protocol_fingerprint
from bayescal.experiments.calibrators import (
    DNN_METHODS,
    UCI_METHODS,
    Method,
    method_table,
)
from bayescal.experiments.classifiers import CLASSIFIERS, make_classifier
from bayescal.experiments.protocol import (
    CalibrationFold,
    cross_fit,
    holdout_folds,
    inner_classifier_folds,
    outer_splits,
    shuffled,
)
from bayescal.experiments.scoring import METRICS, N_BINS, p_ece_available, score_all
from bayescal.experiments.tables import (
    dnn_table_markdown,
    rank_summary,
    rank_table_markdown,
    variant_table_markdown,
)

__all__ = [
    "QUICK_CLASSIFIERS",
    "QUICK_DATASETS",
    "DNNConfig",
    "UCIConfig",
    "dnn_report",
    "run_dnn",
    "run_uci",
    "uci_report",
]

QUICK_DATASETS: tuple[str, ...] = ("iris", "glass", "balance-scale")
QUICK_CLASSIFIERS: tuple[str, ...] = ("nbayes", "logistic", "tree")
QUICK_DNN: tuple[str, ...] = ("netcal_cifar10_lenet5",)

#: Bumped whenever the protocol changes in a way the fingerprint cannot see.
PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class UCIConfig:
    """Settings of the non-neural suite (defaults: the paper's protocol)."""

    datasets: tuple[str, ...] = PAPER_UCI_DATASETS
    classifiers: tuple[str, ...] = tuple(CLASSIFIERS)
    methods: tuple[str, ...] = UCI_METHODS
    n_repeats: int = 5
    n_folds: int = 5
    n_inner: int = 3
    seed: int = 0
    n_resamples: int = 1000
    selection: str = "train_rows"

    def protocol(self) -> dict[str, Any]:
        """What the cached results depend on (not which subsets are run)."""
        return {
            "suite": "uci", "version": PROTOCOL_VERSION, "n_folds": self.n_folds,
            "n_inner": self.n_inner, "seed": self.seed, "n_resamples": self.n_resamples,
            "selection": self.selection,
            "sklearn": sklearn.__version__,
            # every classifier's full settings: changing one starts a new cache
            "classifiers": {c: repr(make_classifier(c, 0)) for c in sorted(CLASSIFIERS)},
        }  # fmt: skip


@dataclass(frozen=True)
class DNNConfig:
    """Settings of the deep-network suite."""

    models: tuple[str, ...] | None = None  # None: every .npz in <data_dir>
    methods: tuple[str, ...] = DNN_METHODS
    n_folds: int = 5
    seed: int = 0
    n_resamples: int = 1000
    odir_grid: tuple[float, ...] | None = None  # None: the paper's grids
    l2_grid: tuple[float, ...] | None = None

    def protocol(self) -> dict[str, Any]:
        """What the cached results depend on."""
        return {
            "suite": "dnn", "version": PROTOCOL_VERSION, "n_folds": self.n_folds,
            "seed": self.seed, "n_resamples": self.n_resamples,
        }  # fmt: skip


@dataclass
class _Plan:
    methods: dict[str, Method]
    unavailable: dict[str, str] = field(default_factory=dict)


def _plan(names: Sequence[str], table: dict[str, Method]) -> _Plan:
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {sorted(table)}")
    plan = _Plan({})
    for n in names:
        reason = table[n].availability()
        if reason is None:
            plan.methods[n] = table[n]
        else:
            plan.unavailable[n] = reason
    return plan


def _seed(*parts: Any) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def _run_methods(
    methods: list[Method],
    folds: list[CalibrationFold],
    y_test: np.ndarray,
    *,
    base: dict[str, Any],
    n_resamples: int,
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    rows, arrays = [], {"y_test": np.asarray(y_test)}
    for m in methods:
        res = cross_fit(m, folds)
        row: dict[str, Any] = {**base, "method": m.name, "fingerprint": m.fingerprint()}
        if res.proba is None:
            row.update(dict.fromkeys(METRICS, float("nan")))
            row["error"] = " | ".join(res.errors)[:2000]
        else:
            row.update(score_all(y_test, res.proba, rng=_metric_rng(row),
                                 n_resamples=n_resamples))  # fmt: skip
            row["error"] = " | ".join(res.errors)[:2000]
            arrays[f"proba:{m.name}"] = res.proba
        row.update(
            params=json.dumps(res.params, sort_keys=True),
            val_log_loss=res.val_log_loss,
            n_fits=res.n_fits,
            fit_seconds=res.seconds,
            n_convergence_warnings=res.n_convergence_warnings,
        )
        rows.append(row)
    return rows, arrays


def _metric_rng(row: dict[str, Any]) -> np.random.Generator:
    """Generator of a row's resampling test, a function of the row's identity."""
    ident = [row[k] for k in ("suite", "dataset", "classifier", "repeat", "fold", "method")]
    return np.random.default_rng(_seed(*ident))


def _uci_task(
    dataset: str, X: np.ndarray, y: np.ndarray, n_classes: int, classifier: str,
    repeat: int, fold: int, tr: np.ndarray, te: np.ndarray, methods: list[Method],
    cfg: UCIConfig,
) -> tuple[tuple[Any, ...], list[dict[str, Any]], dict[str, np.ndarray]]:  # fmt: skip
    """One (dataset, classifier, repeat, fold): train classifiers, run methods."""
    key = (dataset, classifier, repeat, fold)
    base = {"suite": "uci", "dataset": dataset, "classifier": classifier,
            "repeat": repeat, "fold": fold}  # fmt: skip
    seed = _seed(cfg.seed, *key)
    try:
        folds, clf_seconds = inner_classifier_folds(
            lambda: make_classifier(classifier, seed % (2**31)),
            X[tr], y[tr], X[te], n_classes=n_classes, n_inner=cfg.n_inner, seed=seed % (2**31),
            selection=cfg.selection,
        )  # fmt: skip
    except (ValueError, np.linalg.LinAlgError) as exc:
        msg = f"classifier failed: {type(exc).__name__}: {exc}"
        return key, [
            {**base, "method": m.name, "fingerprint": m.fingerprint(),
             **dict.fromkeys(METRICS, float("nan")), "error": msg}  # fmt: skip
            for m in methods
        ], {}
    rows, arrays = _run_methods(methods, folds, y[te], base=base, n_resamples=cfg.n_resamples)
    for r in rows:
        r["classifier_seconds"] = clf_seconds
        r["n_test"] = len(te)
    return key, rows, arrays


def _dnn_task(
    model: str, probs: np.ndarray, y: np.ndarray, idx_val: np.ndarray, idx_test: np.ndarray,
    method: Method, cfg: DNNConfig,
) -> tuple[tuple[Any, ...], list[dict[str, Any]], dict[str, np.ndarray]]:  # fmt: skip
    """One (network, method) of the deep-network protocol."""
    folds = holdout_folds(
        probs[idx_val], y[idx_val], probs[idx_test], n_folds=cfg.n_folds, seed=cfg.seed
    )
    base = {"suite": "dnn", "dataset": model, "classifier": "dnn", "repeat": 0, "fold": 0}
    rows, arrays = _run_methods([method], folds, y[idx_test], base=base,
                                n_resamples=cfg.n_resamples)  # fmt: skip
    rows[0]["n_test"] = len(idx_test)
    return (model,), rows, arrays


@contextlib.contextmanager
def _backend(scheduler: str | None) -> Iterator[None]:
    if scheduler is None:
        yield
        return
    from dask.distributed import Client  # optional dependency: bayescal[dask]

    with Client(scheduler), joblib.parallel_backend("dask"):
        yield


def _execute(
    tasks: list[tuple[Any, ...]], func: Any, cache: SettingCache, *, jobs: int, progress: bool,
    desc: str, scheduler: str | None,
) -> None:  # fmt: skip
    if not tasks:
        return
    from tqdm.auto import tqdm

    with _backend(scheduler), tqdm(total=len(tasks), desc=desc, disable=not progress) as bar:
        parallel = joblib.Parallel(n_jobs=jobs, return_as="generator_unordered")
        for key, rows, arrays in parallel(joblib.delayed(func)(*t) for t in tasks):
            cache.save(key, rows, arrays)
            bar.update(1)


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"), overwrite=True)


def _check_config(cfg: Any) -> None:
    """Counts of the protocol: ``n_repeats >= 1``, ``n_folds >= 2``, ``n_inner >= 2``."""
    for name, minimum in (("n_repeats", 1), ("n_folds", 2), ("n_inner", 2)):
        value = getattr(cfg, name, minimum)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


def _lock(out: Path) -> DirectoryLock:
    return DirectoryLock(out, name="reproduce.lock")


def _collect(
    cache: SettingCache, keys: set[tuple[Any, ...]], plan: _Plan, n_resamples: int
) -> pd.DataFrame:
    """Rows of the current methods; p-cw-ECE filled in from stored probabilities
    for rows cached while ``bayescal.metrics.p_ece`` was unavailable."""
    from bayescal import metrics

    fps = {n: m.fingerprint() for n, m in plan.methods.items()}
    can_backfill = p_ece_available() is None
    rows = []
    for key in sorted(keys, key=str):
        current = [r for n, r in cache.load(key).items() if fps.get(n) == r.get("fingerprint")]
        stale = [r for r in current if can_backfill and not r.get("error")
                 and np.isnan(r.get("p_cw_ece", np.nan))]  # fmt: skip
        if stale:
            arrays = cache.load_arrays(key)
            for r in stale:
                name = f"proba:{r['method']}"
                if name in arrays:
                    r["p_cw_ece"] = float(metrics.p_ece(
                        arrays["y_test"], arrays[name], metric="classwise", n_bins=N_BINS,
                        n_resamples=n_resamples, rng=_metric_rng(r)))  # fmt: skip
            cache.save(key, stale)
        rows.extend(current)
    return pd.DataFrame(rows)


def _manifest(
    suite: str, cfg: Any, plan: _Plan, fingerprint: str, df: pd.DataFrame, seconds: float,
    n_computed: int, n_total: int,
) -> dict[str, Any]:  # fmt: skip
    notes = {}
    if (reason := p_ece_available()) is not None:
        notes["p_cw_ece"] = reason
    errors = int(df["error"].fillna("").astype(bool).sum()) if "error" in df else 0
    return {
        "suite": suite,
        "config": asdict(cfg),
        "protocol_fingerprint": fingerprint,
        "methods_ran": list(plan.methods),
        "methods_unavailable": plan.unavailable,
        "metric_notes": notes,
        "n_rows": len(df),
        "n_rows_with_errors": errors,
        "settings_total": n_total,
        "settings_computed_this_run": n_computed,
        "wall_seconds_this_run": round(seconds, 1),
        "python": platform.python_version(),
        "sklearn": sklearn.__version__,
    }


def run_uci(
    data_dir: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    cfg: UCIConfig,
    *,
    jobs: int = 1,
    progress: bool = True,
    scheduler: str | None = None,
    compute: bool = True,
) -> pd.DataFrame:
    """Run (or resume) the non-neural suite; returns the results table.

    With ``compute=False`` nothing is fitted: the outputs are written from
    the settings already in the cache (e.g. tables of an interrupted run).
    """
    t0 = time.perf_counter()
    unknown = [c for c in cfg.classifiers if c not in CLASSIFIERS]
    if unknown:
        raise ValueError(f"unknown classifiers {unknown}; choose from {sorted(CLASSIFIERS)}")
    _check_config(cfg)
    _check_data_dir(data_dir)
    plan = _plan(cfg.methods, method_table())
    out = Path(out)
    with _lock(out):
        return _run_uci(data_dir, out, cfg, plan, t0, jobs=jobs, progress=progress,
                        scheduler=scheduler, compute=compute)


def _run_uci(data_dir: str | os.PathLike[str] | None, out: Path, cfg: UCIConfig, plan: _Plan,
             t0: float, *, jobs: int, progress: bool, scheduler: str | None,
             compute: bool) -> pd.DataFrame:  # fmt: skip
    fp = protocol_fingerprint(cfg.protocol())
    cache = SettingCache(out / "cache" / f"uci-{fp}")
    fps = {n: m.fingerprint() for n, m in plan.methods.items()}
    tasks, keys = [], set()
    for name in cfg.datasets:
        ds = load_uci(name, data_home=data_dir)
        X, y = shuffled(ds.X, ds.y, _seed(cfg.seed, name) % (2**31))
        splits = [s for s in outer_splits(y, n_repeats=cfg.n_repeats, n_folds=cfg.n_folds,
                                          seed=cfg.seed)]  # fmt: skip
        for clf in cfg.classifiers:
            for r, f, tr, te in splits:
                key = (name, clf, r, f)
                keys.add(key)
                missing = cache.missing(key, fps)
                if missing:
                    ms = [plan.methods[m] for m in missing]
                    tasks.append((name, X, y, ds.n_classes, clf, r, f, tr, te, ms, cfg))
    # repeat by repeat, cheapest first within a repeat: a run stopped early has
    # every (dataset, classifier) block with as many complete repeats as it could
    tasks.sort(key=lambda t: (t[5], len(t[2]) * t[3] ** 2, t[0], t[4], t[6]))
    if not compute:
        tasks = []
    _execute(tasks, _uci_task, cache, jobs=jobs, progress=progress, desc="uci settings",
             scheduler=scheduler)  # fmt: skip
    df = _collect(cache, keys, plan, cfg.n_resamples)
    out.mkdir(parents=True, exist_ok=True)
    _write_outputs(out, "uci", df, _uci_tables(df, plan),
                   _manifest("uci", cfg, plan, fp, df, time.perf_counter() - t0,
                             len(tasks), len(keys)))  # fmt: skip
    return df


def _write_outputs(out: Path, suite: str, df: pd.DataFrame, tables: str,
                   manifest: dict[str, Any]) -> None:  # fmt: skip
    _write_text(out / f"{suite}_results.csv", df.to_csv(index=False))
    _write_text(out / f"{suite}_tables.md", tables)
    _write_text(out / f"{suite}_manifest.json", json.dumps(manifest, indent=2, default=str))


def _uci_tables(df: pd.DataFrame, plan: _Plan) -> str:
    return uci_report(df, [m for m in UCI_METHODS if m in plan.methods])


def uci_report(df: pd.DataFrame, methods: list[str]) -> str:
    """Markdown rank tables of the UCI suite: for every measure, the paper's
    seven calibrators (Tables 1-2 layout, the paper's ranks in parentheses
    when all seven ran), then all ``methods``."""
    if df.empty:
        return "No results.\n"
    labels = {n: m.label for n, m in method_table().items()}
    parts = []
    paper_set = [m for m in paper.UCI_COLUMNS if m in methods]
    all_set = [m for m in UCI_METHODS if m in methods]
    titles = {"p_cw_ece": ("Table 1", paper.TABLE1), "log_loss": ("Table 2", paper.TABLE2)}
    for metric in METRICS:
        if df[metric].isna().all():
            parts.append(f"## {metric}\n\nNo values (see the manifest's metric_notes).\n")
            continue
        title, published = titles.get(metric, ("", None))
        s = rank_summary(df, metric, paper_set)
        pub = published if paper_set == list(paper.UCI_COLUMNS) else None
        parts.append(
            f"## {metric}: average ranks, the paper's seven calibrators"
            + (f" (layout of {title}; paper in parentheses)" if title else "")
            + "\n\n" + rank_table_markdown(s, labels, paper=pub) + "\n"
        )
        if all_set != paper_set:
            s = rank_summary(df, metric, all_set)
            parts.append(f"## {metric}: average ranks, all methods\n\n"
                         + rank_table_markdown(s, labels) + "\n")  # fmt: skip
    variants = [m for m in _DIRICHLET_VARIANTS if m in methods]
    if variants and paper_set[:1] == ["dir_l2"] and len(paper_set) > 1:
        parts.append(
            "## Each Dirichlet variant in Dir-L2's place (the paper's seven-method layout)\n\n"
            + variant_table_markdown(
                df, ["log_loss", "p_cw_ece"], variants, paper_set[1:], labels,
                paper_first={"log_loss": paper.TABLE2["average"][0],
                             "p_cw_ece": paper.TABLE1["average"][0]},
            )
            + "\n"
        )  # fmt: skip
    return "\n".join(parts)


#: bayescal's Dirichlet fits compared in the paper's Dir-L2 column.
_DIRICHLET_VARIANTS = ("dir_l2", "dir_odir", "dir_bayes", "dir_gen_map", "dir_gen")


def _check_data_dir(data_dir: str | os.PathLike[str] | None) -> None:
    """A data directory given must exist (never silently replaced by a download)."""
    if data_dir is None:
        return
    path = Path(data_dir)
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise ValueError(f"data directory {path} {what}")


def _dnn_files(data_dir: Path, models: tuple[str, ...] | None) -> list[Path]:
    _check_data_dir(data_dir)
    files = sorted(data_dir.glob("*.npz"))
    if models is not None:
        by_stem = {p.stem: p for p in files}
        missing = [m for m in models if m not in by_stem]
        if missing:
            raise ValueError(f"no {missing} in {data_dir}; found {sorted(by_stem)}")
        files = [by_stem[m] for m in models]
    if not files:
        raise ValueError(f"no .npz files in {data_dir}")
    return files


def run_dnn(
    data_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    cfg: DNNConfig,
    *,
    jobs: int = 1,
    progress: bool = True,
    scheduler: str | None = None,
    compute: bool = True,
) -> pd.DataFrame:
    """Run (or resume) the deep-network suite; returns the results table.

    ``compute=False``: write the outputs from the cache only.
    """
    t0 = time.perf_counter()
    grids = {k: v for k, v in (("odir_grid", cfg.odir_grid), ("l2_grid", cfg.l2_grid)) if v}
    table = method_table(**grids, penalty_units="bayescal")
    _check_config(cfg)
    plan = _plan(cfg.methods, table)
    out = Path(out)
    with _lock(out):
        return _run_dnn(data_dir, out, cfg, plan, t0, jobs=jobs, progress=progress,
                        scheduler=scheduler, compute=compute)


def _run_dnn(data_dir: str | os.PathLike[str], out: Path, cfg: DNNConfig, plan: _Plan,
             t0: float, *, jobs: int, progress: bool, scheduler: str | None,
             compute: bool) -> pd.DataFrame:  # fmt: skip
    fp = protocol_fingerprint(cfg.protocol())
    cache = SettingCache(out / "cache" / f"dnn-{fp}")
    fps = {n: m.fingerprint() for n, m in plan.methods.items()}
    tasks, keys = [], set()
    for path in _dnn_files(Path(data_dir), cfg.models):
        d = load_network_outputs(path)
        key = (path.stem,)
        keys.add(key)
        for name in cache.missing(key, fps):
            tasks.append((path.stem, d.probs, d.y, d.idx_val, d.idx_test, plan.methods[name],
                          cfg))
    tasks.sort(key=lambda t: (t[1].shape[1], len(t[5].candidates())))
    if not compute:
        tasks = []
    _execute(tasks, _dnn_task, cache, jobs=jobs, progress=progress, desc="dnn fits",
             scheduler=scheduler)  # fmt: skip
    df = _collect(cache, keys, plan, cfg.n_resamples)
    out.mkdir(parents=True, exist_ok=True)
    _write_outputs(out, "dnn", df, _dnn_tables(df, plan),
                   _manifest("dnn", cfg, plan, fp, df, time.perf_counter() - t0,
                             len(tasks), len(keys) * len(plan.methods)))  # fmt: skip
    return df


def _dnn_tables(df: pd.DataFrame, plan: _Plan) -> str:
    return dnn_report(df, [m for m in DNN_METHODS if m in plan.methods])


def dnn_report(df: pd.DataFrame, methods: list[str]) -> str:
    """Markdown tables of the deep-network suite.

    Tables 3 and 4 rank the paper's six methods only (so that the ranks are
    comparable with the paper's); every measure is then also tabulated over
    all ``methods``.
    """
    if df.empty:
        return "No results.\n"
    labels = {n: m.label for n, m in method_table().items()}
    paper_set = [m for m in paper.DNN_COLUMNS if m in methods]
    parts = []
    for metric, title in (("cw_ece", "Table 3"), ("log_loss", "Table 4")):
        parts.append(f"## {metric} (layout of {title}; the paper's six methods)\n\n"
                     + dnn_table_markdown(df, metric, paper_set, labels,
                                          digits=4 if "ece" in metric else 3)
                     + "\n")  # fmt: skip
    for metric in METRICS:
        if df[metric].isna().all():
            continue
        parts.append(f"## {metric}, all methods\n\n"
                     + dnn_table_markdown(df, metric, methods, labels,
                                          digits=4 if "ece" in metric else 3)
                     + "\n")  # fmt: skip
    return "\n".join(parts)
