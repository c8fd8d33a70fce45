"""Held-out calibration quality of every method at its defaults, against the peers.

Run (results and the exact commands in docs/benchmarks.md, section "Quality at defaults")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_quality.py --data ../shared/data \\
        --out results/quality                  # scores, every method, every peer installed
    python benchmarks/bench_quality.py --out results/quality --table   # the tables only

Protocol
--------
* **Tabular cases**: every dataset in ``DATA/uci`` (features z-scored on the
  training rows), four classifiers (Gaussian naive Bayes, a random forest,
  logistic regression, an MLP), three seeds; each seed splits the rows
  50 / 25 / 25 into training, calibration and test rows (stratified where
  every class has enough rows). The classifier is trained on the training
  rows; a calibrator is fitted on the calibration rows' scores and scored on
  the test rows.
* **Deep-network cases**: every ``DATA/dnn`` file, calibrated on its
  ``idx_val`` rows (5000) and scored on ``idx_test``, and again calibrated on
  a stratified 500-row subsample of ``idx_val`` (seed 0).
* **Methods**: ``uncalibrated`` (the scores themselves), every method of the
  registry (:data:`bayescal.calibrators.registry.METHODS`) at its defaults,
  exactly as ``make_calibrator(name)`` builds it, and the peers that are
  installed: probmetrics (``sms``, ``logistic``, ``svs``, ``temp-scaling``,
  ``ts-mix``), scikit-learn's ``CalibratedClassifierCV`` on a frozen
  classifier (``temperature``, ``sigmoid``, ``isotonic``), netcal
  (temperature scaling, logistic calibration) and dirichletcal's recommended
  grid search (``FullDirichletCalibrator`` in ``GridSearchCV``; Python >= 3.12).
* **Scores**: test log-loss (probabilities floored at float64 ``eps``, as
  scikit-learn), Brier score and classwise ECE (15 equal-width bins); fit time.

Every stage is cached under ``--out`` (classifier scores as ``.npz``, method
results as JSON lines), so an interrupted run resumes and the peers that need
another Python (dirichletcal) can be added by running the script there with
``--methods``. ``--table`` prints and writes the summary without fitting:
per measure and per suite (tabular, DNN), each method's mean rank among all
methods (ties averaged), mean ratio to the per-case best (denominators floored
at ``RATIO_FLOOR`` = 0.01, so near-perfect cases do not dominate), the number of cases
where it is worse than uncalibrated (by more than 1 %), the worst ratio to
uncalibrated, and the median fit time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"

CLASSIFIER_NAMES = ("nbayes", "forest", "logistic", "mlp")
SPLIT = (0.5, 0.25, 0.25)
DNN_SMALL = 500
MEASURES = ("log_loss", "brier", "cw_ece")
#: Margin for "worse than uncalibrated".
WORSE_MARGIN = 0.01
#: Floor on the denominators of the ratios (scores of perfect cases are ~0).
RATIO_FLOOR = 0.01


# ---------------------------------------------------------------------------
# cases: classifier scores
# ---------------------------------------------------------------------------
def make_classifier(name: str, seed: int) -> Any:
    """The four classifiers, scikit-learn defaults except where noted."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    models = {
        "nbayes": lambda: GaussianNB(),
        "forest": lambda: RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=1),
        "logistic": lambda: LogisticRegression(max_iter=2000),
        "mlp": lambda: MLPClassifier(max_iter=500, random_state=seed),
    }
    return make_pipeline(StandardScaler(), models[name]())


def split_rows(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """50/25/25 train/calibration/test indices, stratified when every class allows it."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    counts = np.bincount(y)
    strat = y if counts[counts > 0].min() >= 4 else None
    train, rest = train_test_split(idx, train_size=SPLIT[0], random_state=seed, stratify=strat)
    strat_rest = y[rest] if strat is not None else None
    cal, test = train_test_split(rest, train_size=0.5, random_state=seed, stratify=strat_rest)
    return train, cal, test


def class_scores(model: Any, X: np.ndarray, k: int) -> np.ndarray:
    """``predict_proba`` spread over all ``k`` columns (absent classes get 0)."""
    p = model.predict_proba(X)
    out = np.zeros((X.shape[0], k))
    out[:, model.classes_] = p
    return out


def tabular_case(data: Path, name: str, clf: str, seed: int) -> dict[str, np.ndarray]:
    with np.load(data / "uci" / f"{name}.npz", allow_pickle=False) as f:
        X, y = f["X"].astype(np.float64), f["y"].astype(np.int64)
    k = int(y.max()) + 1
    train, cal, test = split_rows(y, seed)
    model = make_classifier(clf, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[train], y[train])
        p_cal, p_test = class_scores(model, X[cal], k), class_scores(model, X[test], k)
    return {"p_cal": p_cal, "y_cal": y[cal], "p_test": p_test, "y_test": y[test]}


def dnn_case(data: Path, name: str, small: bool) -> dict[str, np.ndarray]:
    with np.load(data / "dnn" / f"{name}.npz", allow_pickle=False) as f:
        probs = f["probs"].astype(np.float64)
        y, iv, it = f["y"].astype(np.int64), f["idx_val"], f["idx_test"]
    q = probs / probs.sum(axis=1, keepdims=True)  # float32 rows renormalised in float64
    if small:
        from sklearn.model_selection import train_test_split

        iv, _ = train_test_split(iv, train_size=DNN_SMALL, random_state=0, stratify=None)
    return {"p_cal": q[iv], "y_cal": y[iv], "p_test": q[it], "y_test": y[it]}


def list_cases(data: Path, datasets: list[str] | None, classifiers: list[str],
               seeds: list[int], dnn: bool) -> list[tuple[str, str, Callable[[], dict]]]:
    """(case id, suite, builder) for every case."""
    cases = []
    names = sorted(p.stem for p in (data / "uci").glob("*.npz"))
    if datasets:
        unknown = sorted(set(datasets) - set(names))
        if unknown:
            raise SystemExit(f"unknown dataset(s) {unknown}; available: {names}")
        names = [n for n in names if n in datasets]
    for seed in seeds:
        for name in names:
            for clf in classifiers:
                cases.append((f"{name}/{clf}/{seed}", "tabular",
                              lambda n=name, c=clf, s=seed: tabular_case(data, n, c, s)))
    if dnn:
        for path in sorted((data / "dnn").glob("*.npz")):
            for small in (False, True):
                cid = f"{path.stem}/{'n500' if small else 'n5000'}"
                cases.append((cid, "dnn", lambda n=path.stem, s=small: dnn_case(data, n, s)))
    return cases


def load_case(out: Path, cid: str, build: Callable[[], dict]) -> dict[str, np.ndarray]:
    path = out / "scores" / (cid.replace("/", "__") + ".npz")
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return {key: f[key] for key in f.files}
    arrays = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return arrays


# ---------------------------------------------------------------------------
# methods: (p_cal, y_cal) -> predict(p_test)
# ---------------------------------------------------------------------------
Fitter = Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _uncalibrated(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda q: q


def _registry(name: str) -> Fitter:
    def fit(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        from bayescal.calibrators.registry import make_calibrator

        est = make_calibrator(name, input="probs").fit(p, y)
        return est.predict_proba

    return fit


def _log_features(p: np.ndarray) -> np.ndarray:
    from bayescal.maps import log_features

    return log_features(p)


class _PassThrough:
    """A fitted 'classifier' whose probabilities are its input (for sklearn's calibrators)."""

    def __init__(self, k: int) -> None:
        from sklearn.base import BaseEstimator, ClassifierMixin

        class _Scores(ClassifierMixin, BaseEstimator):
            def fit(self, X: Any, y: Any) -> Any:
                self.classes_ = np.arange(k)
                return self

            def predict_proba(self, X: Any) -> Any:
                return np.asarray(X)

            def predict(self, X: Any) -> Any:
                return np.argmax(np.asarray(X), axis=1)

            def decision_function(self, X: Any) -> Any:
                return _log_features(np.asarray(X))

        self.model = _Scores().fit(None, None)


def _sklearn(method: str) -> Fitter:
    def fit(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.frozen import FrozenEstimator

        k = p.shape[1]
        cal = CalibratedClassifierCV(FrozenEstimator(_PassThrough(k).model), method=method)
        cal.fit(p, y)
        return lambda q: _spread(cal, q, k)

    return fit


def _spread(model: Any, q: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((q.shape[0], k))
    out[:, np.asarray(model.classes_, dtype=int)] = model.predict_proba(q)
    return out


def _probmetrics(method: str) -> Fitter:
    def fit(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        from probmetrics.calibrators import get_calibrator

        cal = get_calibrator(method)
        cal.fit(p.astype(np.float64), y)
        return lambda q: np.asarray(cal.predict_proba(q.astype(np.float64)), dtype=np.float64)

    return fit


def _netcal(cls_path: str) -> Fitter:
    def fit(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        import importlib

        module, name = cls_path.rsplit(".", 1)
        cal = getattr(importlib.import_module(module), name)()
        cal.fit(p, y)
        return lambda q: np.asarray(cal.transform(q), dtype=np.float64)

    return fit


def _dirichletcal(p: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """dirichletcal's recommended use: ODIR grid search by 3-fold CV on log-loss."""
    from dirichletcal import FullDirichletCalibrator
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    grid = [1e-3, 1e-2, 1e-1, 1.0]
    counts = np.bincount(y, minlength=p.shape[1])
    folds = 3 if counts[counts > 0].min() >= 3 else 2
    search = GridSearchCV(
        FullDirichletCalibrator(), {"reg_lambda": grid, "reg_mu": grid},
        cv=StratifiedKFold(folds, shuffle=True, random_state=0), scoring="neg_log_loss",
    )
    search.fit(p, y)
    seen = np.unique(y)  # dirichletcal has no classes_: its columns are the classes seen

    def predict(q: np.ndarray) -> np.ndarray:
        out = np.asarray(search.best_estimator_.predict_proba(q), dtype=np.float64)
        if out.shape[1] == p.shape[1]:
            return out
        full = np.zeros((q.shape[0], p.shape[1]))
        full[:, seen] = out
        return full

    return predict


def available_methods() -> dict[str, tuple[str, Fitter]]:
    """Method name -> (origin, fitter) for bayescal and every installed peer."""
    from bayescal.calibrators.registry import METHODS

    methods: dict[str, tuple[str, Fitter]] = {"uncalibrated": ("-", _uncalibrated)}
    for name in METHODS:
        methods[name] = ("bayescal", _registry(name))
    import sklearn
    from sklearn.calibration import CalibratedClassifierCV

    sk = "scikit-learn " + sklearn.__version__
    skm = ["sigmoid", "isotonic"]
    if "temperature" in CalibratedClassifierCV._parameter_constraints["method"][0].options:
        skm.insert(0, "temperature")
    for m in skm:
        methods[f"sklearn-{m}"] = (sk, _sklearn(m))
    try:
        from importlib.metadata import version

        pm = "probmetrics " + version("probmetrics")
        import probmetrics.calibrators  # noqa: F401

        for m in ("sms", "logistic", "svs", "temp-scaling", "ts-mix"):
            methods[f"probmetrics-{m}"] = (pm, _probmetrics(m))
    except Exception:  # noqa: BLE001 -- not installed or broken: not a peer here
        pass
    try:
        import netcal

        nc = "netcal " + netcal.__version__
        methods["netcal-temperature"] = (nc, _netcal("netcal.scaling.TemperatureScaling"))
        methods["netcal-logistic"] = (nc, _netcal("netcal.scaling.LogisticCalibration"))
    except Exception:  # noqa: BLE001
        pass
    try:
        from importlib.metadata import version

        import dirichletcal  # noqa: F401

        methods["dirichletcal-gridsearch"] = ("dirichletcal " + version("dirichletcal"),
                                              _dirichletcal)
    except Exception:  # noqa: BLE001
        pass
    return methods


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------
def score(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """Test log-loss (floor float eps), Brier score and classwise ECE."""
    from bayescal.metrics import brier_score, classwise_ece

    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or not np.isfinite(p).all() or (p < -1e-12).any():
        raise ValueError("the method returned invalid probabilities")
    p = np.clip(p, 0.0, 1.0)
    p = p / p.sum(axis=1, keepdims=True)
    py = np.maximum(p[np.arange(len(y)), y], np.finfo(float).eps)
    return {"log_loss": float(-np.mean(np.log(py))), "brier": brier_score(y, p),
            "cw_ece": classwise_ece(y, p)}


def run_case(case: dict[str, np.ndarray], fitter: Fitter) -> dict[str, Any]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        predict = fitter(case["p_cal"], case["y_cal"])
        fit_time = time.perf_counter() - t0
        p = predict(case["p_test"])
    return {**score(case["y_test"], p), "fit_time": fit_time}


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interrupted run
                continue
    return rows


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------
def complete_cases(by_case: dict[str, dict[str, dict[str, Any]]],
                   methods: list[str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """Cases and methods to compare: (cases, methods run on all of them, methods left out).

    Cases without an uncalibrated row, or with fewer than half of the methods
    (a case still being run), are left out; then every method that is missing
    from one of the remaining cases is left out of the comparison (and named),
    so that a peer run on a few cases only (or one that did not finish on
    some) does not shrink the set of cases of all the others.
    """
    names = sorted({m for c in by_case.values() for m in c}) if methods is None else list(methods)
    cases = [c for c, m in by_case.items()
             if "uncalibrated" in m and "error" not in m["uncalibrated"]
             and 2 * sum(n in m for n in names) >= len(names)]
    kept = [n for n in names if all(n in by_case[c] for c in cases)]
    return cases, kept, [n for n in names if n not in kept]


def summarise(rows: list[dict[str, Any]], measure: str, suite: str,
              methods: list[str] | None = None) -> list[dict[str, Any]]:
    """Per-method summary over the cases of ``suite`` (see :func:`complete_cases`)."""
    rows = [r for r in rows if r["suite"] == suite]
    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["method"]] = r
    cases, names, omitted = complete_cases(by_case, methods)
    if not cases or "uncalibrated" not in names:
        return []
    from scipy.stats import rankdata

    # a method that failed on a case is scored as uncalibrated there (and counted)
    val = np.full((len(cases), len(names)), np.nan)
    failed = np.zeros(len(names), dtype=int)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i, c in enumerate(cases):
        unc = by_case[c]["uncalibrated"][measure]
        for j, n in enumerate(names):
            r = by_case[c][n]
            if "error" in r:
                failed[j] += 1
                val[i, j] = unc
            else:
                val[i, j] = r[measure]
                times[n].append(r["fit_time"])
    unc = val[:, names.index("uncalibrated")]
    ranks = np.apply_along_axis(rankdata, 1, val)
    best = val.min(axis=1)
    # ratios: denominators floored at RATIO_FLOOR (a case whose best score is ~0 says little)
    rel = val / np.maximum(best, RATIO_FLOOR)[:, None]
    vs_unc = val / np.maximum(unc, RATIO_FLOOR)[:, None]
    worse = val > unc[:, None] * (1 + WORSE_MARGIN) + 1e-12
    out = []
    for j, n in enumerate(names):
        out.append({
            "method": n,
            "mean_rank": float(ranks[:, j].mean()),
            "mean_rel_best": float(rel[:, j].mean()),
            "worse_than_uncal": int(worse[:, j].sum()),
            "worst_vs_uncal": float(vs_unc[:, j].max()),
            "median_fit_time": float(np.median(times[n])) if times[n] else float("nan"),
            "failed": int(failed[j]),
            "cases": int(len(val)),
            "omitted": omitted,
        })
    return sorted(out, key=lambda d: d["mean_rank"])


def markdown_table(summary: list[dict[str, Any]], measure: str, suite: str) -> str:
    if not summary:
        return f"(no complete cases for {suite} / {measure})\n"
    n_methods = len(summary)
    lines = [
        f"**{suite}, {measure}** ({summary[0]['cases']} cases, {n_methods} methods)",
        "",
        f"| method | mean rank of {n_methods} | mean {measure} / best | "
        f"cases worse than uncal. (>{WORSE_MARGIN:.0%}) | worst / uncal. | "
        "median fit time (s) | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['method']} | {s['mean_rank']:.2f} | {s['mean_rel_best']:.3f} | "
            f"{s['worse_than_uncal']} | {s['worst_vs_uncal']:.3g} | "
            f"{s['median_fit_time']:.3g} | {s['failed']} |"
        )
    if summary[0]["omitted"]:
        lines += ["", "Not run on every case, so left out of this table: "
                  + ", ".join(summary[0]["omitted"]) + "."]
    return "\n".join(lines) + "\n"


#: Calibration-set sizes and class counts of the breakdown table.
N_BUCKETS = ((0, 100), (100, 300), (300, 1000), (1000, 10**9))
K_BUCKETS = ((2, 5), (6, 10), (11, 10**6))


def breakdown(rows: list[dict[str, Any]], methods: list[str] | None = None,
              measure: str = "log_loss") -> str:
    """Mean rank (among all methods) by calibration-set size and number of classes.

    ``rows`` of one suite (the tabular cases, whose sizes vary).
    """
    from scipy.stats import rankdata

    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["method"]] = r
    cases, names, _ = complete_cases(by_case)
    shown = names if methods is None else [m for m in methods if m in names]
    cells: dict[tuple[int, int], list[np.ndarray]] = {}
    for case in (by_case[c] for c in cases):
        unc = case["uncalibrated"][measure]
        vals = np.array([unc if "error" in case[m] else case[m][measure] for m in names])
        any_row = next(iter(case.values()))
        n, k = any_row["n_cal"], any_row["k"]
        i = next(j for j, (lo, hi) in enumerate(N_BUCKETS) if lo < n <= hi)
        j = next(j for j, (lo, hi) in enumerate(K_BUCKETS) if lo <= k <= hi)
        cells.setdefault((i, j), []).append(rankdata(vals))
    lines = [f"**mean {measure} rank by calibration-set size n and classes k** "
             f"(among {len(names)} methods; cases per cell in brackets)", "",
             "| n | k | cases | " + " | ".join(shown) + " |",
             "|---|---|---|" + "---|" * len(shown)]
    def labels(i: int, j: int) -> tuple[str, str]:
        lo, hi = N_BUCKETS[i]
        klo, khi = K_BUCKETS[j]
        return (f"{lo + 1}-{hi}" if hi < 10**9 else f"> {lo}",
                f"{klo}-{khi}" if khi < 10**6 else f">= {klo}")

    for (i, j), ranks in sorted(cells.items()):
        r = np.mean(ranks, axis=0)
        best = min(r[names.index(m)] for m in shown)
        nlabel, klabel = labels(i, j)
        vals = [f"**{r[names.index(m)]:.1f}**" if r[names.index(m)] == best
                else f"{r[names.index(m)]:.1f}" for m in shown]
        lines.append(f"| {nlabel} | {klabel} | {len(ranks)} | " + " | ".join(vals) + " |")
    # a cell without cases has no row: say so, so that it is not read as left out
    empty = [labels(i, j) for i in range(len(N_BUCKETS)) for j in range(len(K_BUCKETS))
             if (i, j) not in cells]
    if empty:
        lines += ["", "No case falls in the cells " + "; ".join(
            f"n {n}, k {k}" for n, k in empty) + " (no row)."]
    return "\n".join(lines) + "\n"


def target_checks(rows: list[dict[str, Any]], default: str = "dirichlet",
                  reference: str = "temperature", measure: str = "log_loss") -> str:
    """The default against temperature scaling and uncalibrated, case by case, per suite.

    Reports, over the cases where every registry method finished: the cases
    where the default is worse than uncalibrated (by more than ``WORSE_MARGIN``)
    while temperature scaling is not, the largest ratio of the default's score
    to temperature scaling's, the median ratio to the per-case best, and for
    every bayescal method the number of cases worse than uncalibrated next to
    temperature scaling's.
    """
    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["method"]] = r
    ours = sorted({r["method"] for r in rows if r.get("origin") == "bayescal"})
    lines = [f"**{default} (the default) against {reference}, {measure}**", ""]
    lines += ["| suite | cases | default worse than uncal. where TS is not | "
              "max default / TS | median default / best | mean default / best (floor "
              f"{RATIO_FLOOR}) |", "|---|---|---|---|---|---|"]
    counts_lines = []
    for suite in ("tabular", "dnn"):
        cases = {c: m for c, m in by_case.items()
                 if m.get("uncalibrated", {}).get("suite") == suite
                 and all(x in m and "error" not in m[x]
                         for x in (default, reference, "uncalibrated"))}
        if not cases:
            continue
        bad, vs_ts, vs_best, vs_best_floor = [], [], [], []
        worse = {name: 0 for name in ours}
        for c, m in sorted(cases.items()):
            unc = m["uncalibrated"][measure]
            lim = unc * (1 + WORSE_MARGIN) + 1e-12
            d, t = m[default][measure], m[reference][measure]
            if d > lim and not t > lim:
                bad.append(f"{c} ({d:.4g} vs uncal. {unc:.4g}, TS {t:.4g})")
            vs_ts.append(d / t)
            best = min(v[measure] for v in m.values() if "error" not in v)
            vs_best.append(d / best if best > 0 else 1.0)
            vs_best_floor.append(d / max(best, RATIO_FLOOR))
            for name in ours:
                if name in m:
                    val = unc if "error" in m[name] else m[name][measure]
                    worse[name] += int(val > lim)
        lines.append(f"| {suite} | {len(cases)} | {len(bad)} | {max(vs_ts):.3f} | "
                     f"{np.median(vs_best):.3f} | {np.mean(vs_best_floor):.3f} |")
        if bad:
            counts_lines.append(f"{suite}: default worse than uncalibrated where TS is not: "
                                + "; ".join(bad))
        counts_lines.append(f"{suite}: cases worse than uncalibrated per bayescal method "
                            f"(temperature scaling: {worse.get(reference, 0)}): "
                            + ", ".join(f"{k} {v}" for k, v in sorted(worse.items(),
                                                                      key=lambda kv: kv[1])))
    return "\n".join(lines + [""] + [f"- {x}" for x in counts_lines]) + "\n"


def write_tables(out: Path, rows: list[dict[str, Any]], methods: list[str] | None) -> str:
    text, summaries = [], {}
    for suite in ("tabular", "dnn"):
        for measure in MEASURES:
            s = summarise(rows, measure, suite, methods)
            summaries[f"{suite}/{measure}"] = s
            text.append(markdown_table(s, measure, suite))
    key = ["dirichlet", "temperature", "vector", "dirichlet-odir", "probmetrics-sms",
           "probmetrics-ts-mix", "sklearn-isotonic", "uncalibrated"]
    text.append(breakdown([r for r in rows if r["suite"] == "tabular"
                           and (methods is None or r["method"] in methods)], key))
    text.append(target_checks(rows))
    doc = "\n".join(text)
    (out / "table.md").write_text(doc)
    (out / "summary.json").write_text(json.dumps(summaries, indent=1))
    return doc


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=Path("results/quality"))
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--classifiers", nargs="*", default=list(CLASSIFIER_NAMES))
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--no-dnn", action="store_true", help="skip the deep-network cases")
    ap.add_argument("--max-k", type=int, default=None,
                    help="skip the cases with more classes (e.g. 10 for the Bayesian methods)")
    ap.add_argument("--methods", nargs="*", default=None,
                    help="methods to run (default: every available one)")
    ap.add_argument("--skip", nargs="*", default=[], help="methods not to run")
    ap.add_argument("--table", action="store_true", help="only print and write the tables")
    ap.add_argument("--table-methods", nargs="*", default=None,
                    help="restrict the tables to these methods")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    if not args.table:
        available = available_methods()
        chosen = list(available) if args.methods is None else args.methods
        unknown = sorted(set(chosen) - set(available))
        if unknown:
            raise SystemExit(f"unknown or unavailable method(s) {unknown}; "
                             f"available: {sorted(available)}")
        chosen = [m for m in chosen if m not in set(args.skip)]
        if "uncalibrated" not in chosen:
            chosen.insert(0, "uncalibrated")
        done = {(r["case"], r["method"]) for r in read_results(results)}
        cases = list_cases(args.data, args.datasets, args.classifiers, args.seeds,
                           not args.no_dnn)
        with results.open("a") as fh:
            for cid, suite, build in cases:
                todo = [m for m in chosen if (cid, m) not in done]
                if not todo:
                    continue
                case = load_case(out, cid, build)
                if args.max_k is not None and case["p_cal"].shape[1] > args.max_k:
                    continue
                for m in todo:
                    origin, fitter = available[m]
                    row: dict[str, Any] = {"case": cid, "suite": suite, "method": m,
                                           "origin": origin, "n_cal": int(len(case["y_cal"])),
                                           "k": int(case["p_cal"].shape[1])}
                    try:
                        row.update(run_case(case, fitter))
                    except Exception as exc:  # noqa: BLE001 -- recorded as a failure
                        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                        if os.environ.get("BENCH_TRACEBACK"):
                            traceback.print_exc()
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                    status = row.get("error") or f"ll {row['log_loss']:.4f}"
                    print(f"{cid:45s} {m:28s} {status}", flush=True)
    print(write_tables(out, read_results(results), args.table_methods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
