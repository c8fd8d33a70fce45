r"""Generative (DirGen maximum likelihood) against discriminative (DirLin MAP) calibration.

Both fits describe the same family of maps (every DirGen map is a DirLin map
and back, :mod:`bayescal.maps`), but they choose different members of it:

* the **generative** fit (:class:`~bayescal.GenerativeDirichletCalibrator`)
  models the scores of each class as a Dirichlet and reads off the posterior;
  when the scores of each class really are Dirichlet it is the efficient
  estimator (the maximum-likelihood estimate of the full joint model);
* the **discriminative** fits (:class:`~bayescal.DirichletCalibrator` with ODIR
  or L2 penalties) minimise the log-loss of the map directly, and converge to
  the best map of the family whatever the class-conditional densities are.

So the generative fit can only win when its model holds. This module measures
both on (a) data simulated from a DirGen model, as ``n`` grows, with the true
map known, (b) a *misspecified* simulation whose class-conditionals are
mixtures of two Dirichlets (the true map is then outside the family), and (c)
the outputs of real networks (``../shared/data/dnn``: fit on ``idx_val``,
score on ``idx_test``).

Every function returns tidy results (a list of flat dicts, one per fit) and the
plotting functions draw them on a matplotlib ``Axes`` (imported lazily).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp
from sklearn.base import clone

from bayescal._validation import check_option, check_positive_int
from bayescal.calibrators.generative import GenerativeDirichletCalibrator
from bayescal.datasets import default_dirgen_params, make_dirgen
from bayescal.dirichlet import dirichlet_logpdf
from bayescal.maps import dirgen_map
from bayescal.metrics import accuracy, classwise_ece, expected_calibration_error, log_loss

__all__ = [
    "DEFAULT_METHODS",
    "compare_dnn",
    "compare_synthetic",
    "default_estimators",
    "mixture_map",
    "plot_dnn",
    "plot_synthetic",
    "sample_mixture",
]

#: Methods compared by default: generative ML, and the discriminative fits
#: with ODIR and L2 penalties (strengths chosen by internal cross-validation).
DEFAULT_METHODS: tuple[str, ...] = ("generative", "odir", "l2")

_METRICS: dict[str, Callable[[Any, Any], float]] = {
    "log_loss": log_loss,
    "classwise_ece": classwise_ece,
    "ece": expected_calibration_error,
    "accuracy": accuracy,
}
#: Axis labels and panel titles of the plots (the row keys are not for readers).
_LABELS = {"log_loss": "log-loss", "classwise_ece": "classwise ECE", "ece": "ECE",
           "accuracy": "accuracy", "map_tv": "distance to the true map (TV)",
           "fit_seconds": "fit time (s)"}
_SCENARIOS = {"dirgen": "Dirichlet scores (model right)",
              "mixture": "Dirichlet-mixture scores (model wrong)"}


def default_estimators(methods: Iterable[str] = DEFAULT_METHODS) -> dict[str, Any]:
    """Unfitted estimators for the method names ``generative``, ``generative_prior``,
    ``odir``, ``l2`` and ``none`` (discriminative maximum likelihood)."""
    out: dict[str, Any] = {}
    for name in methods:
        check_option(name, "method", ("generative", "generative_prior", "odir", "l2", "none"))
        if name == "generative":
            out[name] = GenerativeDirichletCalibrator(prior=None)
        elif name == "generative_prior":
            out[name] = GenerativeDirichletCalibrator(prior=1.0)
        else:
            from bayescal.calibrators import DirichletCalibrator

            out[name] = DirichletCalibrator(reg=name)
    return out


def _estimators(methods: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    if methods is None:
        return default_estimators()
    if isinstance(methods, Mapping):
        return dict(methods)
    return default_estimators(methods)


def _score(y: NDArray, proba: NDArray) -> dict[str, float]:
    return {name: fn(y, proba) for name, fn in _METRICS.items()}


def _fit_and_score(
    estimator: Any, q_fit: NDArray, y_fit: NDArray, q_eval: NDArray, y_eval: NDArray
) -> tuple[dict[str, Any], NDArray | None]:
    """Fit a clone, score it; a fit that raises ValueError is recorded, not hidden."""
    est = clone(estimator)
    t0 = time.perf_counter()
    try:
        est.fit(q_fit, y_fit)
    except ValueError as exc:
        row = {name: float("nan") for name in _METRICS}
        row.update(fit_seconds=time.perf_counter() - t0, error=str(exc))
        return row, None
    seconds = time.perf_counter() - t0
    proba = est.predict_proba(q_eval)
    row = _score(y_eval, proba)
    row.update(fit_seconds=seconds, error=None)
    return row, proba


# ---------------------------------------------------------------------------
# misspecified simulation: class-conditional mixtures of two Dirichlets
# ---------------------------------------------------------------------------
def _mixture_params(k: int, seed: int) -> tuple[NDArray, NDArray, NDArray]:
    """Two Dirichlet components per class and class priors.

    Component 1 is the over-confident default of :func:`make_dirgen`; component
    2 is a diffuse, nearly uninformative one (concentration 3 on the class's
    own corner and 2 elsewhere): half of each class is scored confidently (and
    often wrongly), the other half near the centre of the simplex. A single
    Dirichlet per class cannot be both.
    """
    alpha1, pi = default_dirgen_params(k, rng=seed)
    alpha2 = np.full((k, k), 2.0) + np.eye(k)
    return np.stack([alpha1, alpha2], axis=1), np.array([0.5, 0.5]), pi


def sample_mixture(
    n: int, k: int, *, rng: np.random.Generator | int | None = None, seed: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    r"""Scores whose class-conditionals are mixtures of two Dirichlets.

    .. math:: q \mid y=j \sim \tfrac12\mathrm{Dir}(\alpha_{j1}) + \tfrac12\mathrm{Dir}(\alpha_{j2})

    with parameters fixed by ``seed`` (see :func:`mixture_map`); ``rng`` draws
    the samples.

    Returns
    -------
    q : ndarray of shape (n, k)
    y : ndarray of shape (n,)
    """
    n = check_positive_int(n, "n")
    alphas, weights, pi = _mixture_params(k, seed)
    rng = np.random.default_rng(rng)
    y = rng.choice(k, size=n, p=pi)
    comp = rng.choice(len(weights), size=n, p=weights)
    g = rng.standard_gamma(alphas[y, comp])
    s = g.sum(axis=1, keepdims=True)
    while np.any(s == 0):  # all gammas underflowed: redraw those rows
        bad = np.flatnonzero(s[:, 0] == 0)
        g[bad] = rng.standard_gamma(alphas[y[bad], comp[bad]])
        s = g.sum(axis=1, keepdims=True)
    return g / s, y.astype(np.intp)


def mixture_map(q: NDArray, k: int, *, seed: int = 0) -> NDArray[np.float64]:
    r"""The true calibration map of :func:`sample_mixture` (Bayes' rule, exact).

    .. math:: P(y=j\mid q) \propto \pi_j \sum_c w_c\,\mathrm{Dir}(q;\alpha_{jc})

    evaluated on the same floored log-features as every fitted map.
    """
    alphas, weights, pi = _mixture_params(k, seed)
    log_comp = np.stack(
        [dirichlet_logpdf(q, alphas[:, c, :]) + np.log(weights[c]) for c in range(len(weights))]
    )  # (components, n, k)
    log_joint = logsumexp(log_comp, axis=0) + np.log(pi)
    return np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))


# ---------------------------------------------------------------------------
# (a), (b): synthetic data as n grows
# ---------------------------------------------------------------------------
def compare_synthetic(
    ns: Sequence[int] = (100, 300, 1000, 3000, 10000),
    *,
    k: int = 3,
    scenario: str = "dirgen",
    n_test: int = 20000,
    repeats: int = 3,
    methods: Iterable[str] | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    r"""Generative vs discriminative fits on simulated scores with a known true map.

    For each ``n`` in ``ns`` and each repeat, draws ``n`` calibration rows,
    fits every method, and scores it on ``n_test`` fresh rows (the same test
    rows for every ``n`` and method).

    Parameters
    ----------
    ns : sequence of int
        Calibration-set sizes.
    k : int, default=3
        Number of classes.
    scenario : {"dirgen", "mixture"}, default="dirgen"
        ``"dirgen"``: :func:`bayescal.make_dirgen` with the default
        (over-confident) parameters, so the generative model is correct.
        ``"mixture"``: :func:`sample_mixture`, class-conditionals that are
        mixtures of two Dirichlets, so it is misspecified.
    n_test : int, default=20000
    repeats : int, default=3
    methods : names or {name: estimator}, optional
        Default :data:`DEFAULT_METHODS`.
    seed : int, default=0
        Fixes the model parameters and all draws.

    Returns
    -------
    list of dict
        One row per (n, repeat, method) with keys ``scenario, k, n, repeat,
        method, log_loss, classwise_ece, ece, accuracy, map_tv, fit_seconds,
        error``, where ``map_tv`` is the mean total-variation distance
        :math:`\frac12\lVert\hat\mu(q) - \mu(q)\rVert_1` to the true map on the
        test rows. Rows with ``method="true map"`` score the true map itself
        (the floor no method can beat on average).
    """
    check_option(scenario, "scenario", ("dirgen", "mixture"))
    k = check_positive_int(k, "k")
    n_test = check_positive_int(n_test, "n_test")
    repeats = check_positive_int(repeats, "repeats")
    ns = [check_positive_int(n, "n") for n in ns]
    estimators = _estimators(methods)
    alpha, pi = default_dirgen_params(k, rng=seed)

    def draw(n: int, rng: np.random.Generator) -> tuple[NDArray, NDArray]:
        if scenario == "dirgen":
            q, y, _, _ = make_dirgen(n, k, rng=rng, alpha=alpha, pi=pi)
            return q, y
        return sample_mixture(n, k, rng=rng, seed=seed)

    def true_map(q: NDArray) -> NDArray:
        return dirgen_map(q, alpha, pi) if scenario == "dirgen" else mixture_map(q, k, seed=seed)

    q_test, y_test = draw(n_test, np.random.default_rng([seed, 1]))
    mu_test = true_map(q_test)
    base = {"scenario": scenario, "k": k}
    rows: list[dict[str, Any]] = []
    truth = _score(y_test, mu_test)
    for n in ns:
        for rep in range(repeats):
            q, y = draw(n, np.random.default_rng([seed, 2, n, rep]))
            rows.append(
                {**base, "n": n, "repeat": rep, "method": "true map", **truth,
                 "map_tv": 0.0, "fit_seconds": 0.0, "error": None}
            )
            for name, est in estimators.items():
                row, proba = _fit_and_score(est, q, y, q_test, y_test)
                tv = (
                    float("nan")
                    if proba is None
                    else float(0.5 * np.abs(proba - mu_test).sum(axis=1).mean())
                )
                rows.append({**base, "n": n, "repeat": rep, "method": name, **row, "map_tv": tv})
    return rows


# ---------------------------------------------------------------------------
# (c): real network outputs
# ---------------------------------------------------------------------------
def compare_dnn(
    data_dir: str | Path,
    *,
    files: Sequence[str] | None = None,
    methods: Iterable[str] | Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Generative vs discriminative fits on real network outputs.

    Reads each ``*.npz`` of ``data_dir`` (arrays ``probs``, ``y``, ``idx_val``,
    ``idx_test``), fits every method on the ``idx_val`` rows and scores it on
    the ``idx_test`` rows.

    Parameters
    ----------
    data_dir : path
        Folder with the npz files (e.g. ``../shared/data/dnn``).
    files : sequence of str, optional
        File names (default: every ``*.npz``, sorted).
    methods : names or {name: estimator}, optional

    Returns
    -------
    list of dict
        One row per (dataset, method) with keys ``dataset, k, n_fit, method,
        log_loss, classwise_ece, ece, accuracy, fit_seconds, error``; rows with
        ``method="uncalibrated"`` score the network's own probabilities.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"data_dir is not a directory: {str(data_dir)!r}")
    names = sorted(p.name for p in data_dir.glob("*.npz")) if files is None else list(files)
    if not names:
        raise ValueError(f"no .npz files in {str(data_dir)!r}")
    estimators = _estimators(methods)
    rows: list[dict[str, Any]] = []
    for name in names:
        path = data_dir / name
        if not path.is_file():
            raise ValueError(f"no such file: {str(path)!r}")
        with np.load(path) as f:
            missing = {"probs", "y", "idx_val", "idx_test"} - set(f.files)
            if missing:
                raise ValueError(f"{name} lacks the arrays {sorted(missing)}")
            probs, y = f["probs"], f["y"].astype(np.intp)
            val, test = f["idx_val"], f["idx_test"]
        base = {"dataset": Path(name).stem, "k": probs.shape[1], "n_fit": len(val)}
        rows.append(
            {**base, "method": "uncalibrated", **_score(y[test], probs[test]),
             "fit_seconds": 0.0, "error": None}
        )
        for method, est in estimators.items():
            row, _ = _fit_and_score(est, probs[val], y[val], probs[test], y[test])
            rows.append({**base, "method": method, **row})
    return rows


# ---------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------
def _axes(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax


def plot_synthetic(
    results: Sequence[Mapping[str, Any]], *, metric: str = "log_loss", ax: Any = None
) -> Any:
    """Draw ``metric`` against ``n`` (log scale) for each method of :func:`compare_synthetic`.

    Lines join the means over repeats; error bars span the repeats' min-max.
    The ``"true map"`` rows become a dashed reference line (except for
    ``map_tv``, where it is 0).

    Returns
    -------
    ax : matplotlib Axes
    """
    check_option(metric, "metric", (*_METRICS, "map_tv", "fit_seconds"))
    ax = _axes(ax)
    methods = list(dict.fromkeys(r["method"] for r in results))
    for method in methods:
        mine = [r for r in results if r["method"] == method]
        ns = sorted({r["n"] for r in mine})
        vals = [np.array([r[metric] for r in mine if r["n"] == n], dtype=float) for n in ns]
        mean = np.array([np.nanmean(v) if np.isfinite(v).any() else np.nan for v in vals])
        if method == "true map":
            if metric != "map_tv":
                ax.plot(ns, mean, "k--", lw=1, label="true map")
            continue
        lo = np.array([np.nanmin(v) if np.isfinite(v).any() else np.nan for v in vals])
        hi = np.array([np.nanmax(v) if np.isfinite(v).any() else np.nan for v in vals])
        ax.errorbar(ns, mean, yerr=[mean - lo, hi - mean], marker="o", ms=4, capsize=2,
                    label=method)
    ax.set_xscale("log")
    ax.set_xlabel("calibration rows n")
    ax.set_ylabel(_LABELS[metric])
    scen = {r.get("scenario") for r in results} - {None}
    if scen:
        ax.set_title(", ".join(_SCENARIOS.get(s, s) for s in sorted(scen)))
    ax.legend(fontsize="small")
    return ax


def plot_dnn(
    results: Sequence[Mapping[str, Any]],
    *,
    metric: str = "log_loss",
    relative: bool = True,
    ax: Any = None,
) -> Any:
    """Grouped bars of ``metric`` per dataset and method from :func:`compare_dnn`.

    With ``relative=True`` each value is divided by the uncalibrated network's
    (so 1 is "no change" and lower is better for losses); failed fits (rows
    with an ``error``) are marked with an ``x`` at the baseline, and methods
    absent for a dataset get no bar.

    Returns
    -------
    ax : matplotlib Axes
    """
    check_option(metric, "metric", tuple(_METRICS))
    ax = _axes(ax)
    datasets = list(dict.fromkeys(r["dataset"] for r in results))
    methods = [m for m in dict.fromkeys(r["method"] for r in results)
               if not (relative and m == "uncalibrated")]
    width = 0.8 / max(len(methods), 1)
    for i, method in enumerate(methods):
        vals, failed = [], []
        for ds in datasets:
            row = next((r for r in results if r["dataset"] == ds and r["method"] == method), None)
            base = next(r for r in results if r["dataset"] == ds and r["method"] == "uncalibrated")
            v = np.nan if row is None else float(row[metric])
            vals.append(v / base[metric] if relative else v)
            failed.append(row is not None and row.get("error") is not None)
        xs = np.arange(len(datasets)) + (i - (len(methods) - 1) / 2) * width
        vals_arr = np.array(vals)
        shown = np.isfinite(vals_arr)  # methods not run on a dataset get no bar
        ax.bar(xs[shown], vals_arr[shown], width, label=method)
        bad = np.array(failed)
        if bad.any():
            ax.plot(xs[bad], np.full(bad.sum(), 1.0 if relative else 0.0), "kx")
    if relative:
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(datasets)))
    ax.set_xticklabels([d.replace("netcal_", "") for d in datasets], rotation=20, ha="right",
                       fontsize="small")
    label = _LABELS[metric]
    ax.set_ylabel(f"{label} / uncalibrated" if relative else label)
    ax.legend(fontsize="small")
    return ax
