"""Benchmark of bayescal's Bayesian calibrators.

Every ratio is measured in the same run, on the same data, on this machine:

* ``dirlin_k3``: ESS/s of bayescal's samplers against the naive raw-W PyMC
  model (priors = ODIR penalties, ``pm.Categorical``), k=3, n=1000.
* ``dirlin_k10``: ESS/s against the identified (zero-sum) model sampled by
  PyMC's default NUTS (diagonal mass, ``pm.Categorical``), k=10, n=5000.
* ``dirgen``: the sufficient-statistics DirGen likelihood against the
  row-by-row ``pm.Dirichlet`` model (k=10, n=5000, same sampler settings),
  the estimator's time at n=1e3 vs n=1e6, and k=100 convergence.
* ``laplace``: Laplace posterior sd against NUTS.
* ``pytensor``: gradient time with and without the BLAS link, and model
  compile time with an empty vs a warm compile cache (subprocesses).

ESS is the minimum bulk ESS over the identified map parameters (``W``, ``b``
projected onto the gauge plane; ``alpha`` for DirGen); ESS/s divides it by the
wall time of the whole fit (compilation, tuning and sampling included; the
compile cache is warm except in the ``pytensor`` section).

Run::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_bayes.py --out bench_bayes.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bayescal import EPS, make_dirgen  # noqa: E402
from bayescal.maps import log_features  # noqa: E402


def _ess_min(arrays: list[np.ndarray]) -> float:
    """Minimum bulk ESS over every entry of arrays shaped (chain, draw, ...)."""
    import arviz as az

    out = []
    for a in arrays:
        flat = a.reshape(a.shape[0], a.shape[1], -1)
        for i in range(flat.shape[2]):
            if np.ptp(flat[:, :, i]) > 0:
                out.append(float(az.ess(flat[:, :, i], method="bulk")))
    return min(out)


def _stats(st):
    return st.counts, st.sums


def _leapfrog(idata) -> float:
    ss = getattr(idata, "sample_stats", None)
    for key in ("n_steps", "tree_size", "n_leapfrog"):
        if ss is not None and key in ss:
            return float(ss[key].values.mean())
    return float("nan")


def _row(name, seconds, ess, idata=None, **extra):
    return {
        "name": name,
        "seconds": round(seconds, 2),
        "ess_bulk_min": round(ess, 1),
        "ess_per_s": round(ess / seconds, 2),
        "leapfrog_per_draw": round(_leapfrog(idata), 1) if idata is not None else None,
        **extra,
    }


def _estimator_rows(est_cls, q, y, samplers, **kw):
    rows, fits = [], {}
    for sampler in samplers:
        t = time.perf_counter()
        est = est_cls(sampler=sampler, **kw).fit(q, y)
        dt = time.perf_counter() - t
        fits[sampler] = est
        post = est.idata_.posterior
        if sampler == "laplace":
            rows.append({"name": f"bayescal {sampler}", "seconds": round(dt, 2)})
            continue
        names = ["W", "b"] if "alpha" not in post else ["alpha"]
        ess = _ess_min([post[v].values for v in names])
        d = est.diagnostics_
        rows.append(_row(f"bayescal {sampler}", dt, ess, est.idata_,
                         r_hat_max=round(d["r_hat_max"], 4), divergences=int(d["divergences"])))
    return rows, fits


def bench_dirlin(k, n, chains, draws, tune, baseline, samplers, seed=1, baseline_chains=None):
    import pymc as pm

    from bayescal.bayes import BayesianDirichletCalibrator
    from bayescal.bayes.gauge import dirlin_gauge
    from bayescal.bayes.models import dirlin_model, dirlin_raw_model
    from bayescal.bayes.priors import penalty_to_prior
    from bayescal.optimize import make_penalty

    q, y, _, _ = make_dirgen(n, k, rng=seed)
    x = log_features(q)
    pen = make_penalty(k, "odir", reg_lambda=1e-3, reg_mu=1e-3, center="identity")
    prior = penalty_to_prior(pen, n)
    gauge = dirlin_gauge(prior)
    if baseline == "raw":
        model = dirlin_raw_model(x, y, prior)
        label = "naive raw-W model, PyMC default NUTS"
    else:
        model = dirlin_model(x, y, gauge, lean=False)
        label = "zero-sum model, PyMC default NUTS (diagonal mass)"
    bc = baseline_chains or chains
    t = time.perf_counter()
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=bc, cores=min(bc, CORES),
                          random_seed=seed, progressbar=False, compute_convergence_checks=False)
    dt = time.perf_counter() - t
    W, b = idata.posterior["W"].values, idata.posterior["b"].values
    raw = gauge.project(np.concatenate([W.reshape(*W.shape[:2], -1), b], axis=-1))
    Wg, bg = gauge.split(raw)
    base = _row(label, dt, _ess_min([Wg, bg]), idata, chains=bc)
    rows, fits = _estimator_rows(
        BayesianDirichletCalibrator, q, y, samplers, reg_lambda=1e-3, reg_mu=1e-3,
        draws=draws, tune=tune, chains=chains, random_seed=seed,
    )
    for r in rows:
        if "ess_per_s" in r:
            r["ratio_vs_baseline"] = round(r["ess_per_s"] / base["ess_per_s"], 1)
    # Laplace vs NUTS posterior sd (per entry of W, b on the gauge plane)
    lap = fits.get("laplace")
    nuts = fits.get("pymc")
    sd_cmp = None
    if lap is not None and nuts is not None:
        def sd(est):
            return np.concatenate([est.posterior_draws("W").reshape(est.n_draws_, -1),
                                   est.posterior_draws("b")], axis=1).std(axis=0)
        s_l, s_n = sd(lap), sd(nuts)
        keep = s_n > 0
        ratio = s_l[keep] / s_n[keep]
        sd_cmp = {"median_ratio": round(float(np.median(ratio)), 3),
                  "max_abs_dev": round(float(np.max(np.abs(ratio - 1))), 3)}
    return {"k": k, "n": n, "chains": chains, "draws": draws, "tune": tune,
            "rows": [base, *rows], "laplace_vs_nuts_sd": sd_cmp}


CORES = os.cpu_count() or 1


def bench_dirgen(k, n, chains, draws, tune, seed=2):
    import pymc as pm

    from bayescal.bayes import BayesianGenerativeCalibrator
    from bayescal.bayes.models import dirgen_model, dirgen_rowwise_model
    from bayescal.bayes.priors import DirGenPrior
    from bayescal.dirichlet import SufficientStatistics

    q, y, _, _ = make_dirgen(n, k, rng=seed)
    q = np.clip(q, 1e-300, None)
    q /= q.sum(axis=1, keepdims=True)
    prior = DirGenPrior()
    rows = []
    for label, build in [
        ("row-by-row pm.Dirichlet, PyMC default NUTS", lambda: dirgen_rowwise_model(q, y, prior)),
        ("sufficient statistics, PyMC default NUTS",
         lambda: dirgen_model(*_stats(SufficientStatistics.from_features(np.log(q), y)), prior)),
    ]:
        t = time.perf_counter()
        model = build()
        with model:
            idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=min(chains, CORES),
                              random_seed=seed, progressbar=False,
                              compute_convergence_checks=False)
        dt = time.perf_counter() - t
        rows.append(_row(label, dt, _ess_min([idata.posterior["alpha"].values]), idata))
    est_rows, _ = _estimator_rows(BayesianGenerativeCalibrator, q, y, ["pymc"],
                                  draws=draws, tune=tune, chains=chains, random_seed=seed)
    est_rows[0]["name"] = "bayescal pymc (sufficient statistics, whitened)"
    rows += est_rows
    for r in rows:
        r["ratio_vs_rowwise"] = round(r["ess_per_s"] / rows[0]["ess_per_s"], 1)
    return {"k": k, "n": n, "chains": chains, "draws": draws, "tune": tune, "rows": rows}


def bench_dirgen_scaling(k, sizes, chains, draws, tune, seed=3):
    from bayescal.bayes import BayesianGenerativeCalibrator

    out = []
    for n in sizes:
        q, y, _, _ = make_dirgen(n, k, rng=seed)
        t = time.perf_counter()
        est = BayesianGenerativeCalibrator(draws=draws, tune=tune, chains=chains,
                                           random_seed=seed).fit(q, y)
        dt = time.perf_counter() - t
        out.append({"n": n, "seconds": round(dt, 2),
                    "r_hat_max": round(est.diagnostics_["r_hat_max"], 4),
                    "ess_bulk_min": round(est.diagnostics_["ess_bulk_min"], 1),
                    "divergences": int(est.diagnostics_["divergences"])})
    return out


_GRAD_SNIPPET = r"""
import time, numpy as np, sys
sys.path.insert(0, {root!r})
from bayescal.bayes._backend import import_pymc
pm = import_pymc()
import pytensor
from bayescal import make_dirgen
from bayescal.maps import log_features
from bayescal.bayes.gauge import dirlin_gauge
from bayescal.bayes.models import dirlin_model
from bayescal.bayes.priors import penalty_to_prior
from bayescal.optimize import make_penalty
k, n = 10, 5000
q, y, _, _ = make_dirgen(n, k, rng=0)
g = dirlin_gauge(penalty_to_prior(make_penalty(k, "odir", 1e-3, 1e-3), n))
m = dirlin_model(log_features(q), y, g, whiten=(np.zeros(g.dim), np.eye(g.dim)))
t = time.perf_counter()
f = m.logp_dlogp_function(ravel_inputs=True)
f.set_extra_values({{}})
compile_s = time.perf_counter() - t
z = np.zeros(g.dim)
f(z)
reps = 300
t = time.perf_counter()
for _ in range(reps):
    f(z)
grad_ms = (time.perf_counter() - t) / reps * 1e3
print("RESULT", compile_s, grad_ms, repr(pytensor.config.blas__ldflags != ""))
"""


def bench_pytensor():
    def run(flags):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        env["PYTENSOR_FLAGS"] = flags
        out = subprocess.run([sys.executable, "-c", _GRAD_SNIPPET.format(root=str(ROOT))],
                             env=env, capture_output=True, text=True, check=True).stdout
        line = next(s for s in out.splitlines() if s.startswith("RESULT"))
        _, c, g, blas = line.split()
        return float(c), float(g), blas == "True"

    rows = {}
    base = os.environ.get("PYTENSOR_FLAGS", "")
    with tempfile.TemporaryDirectory() as cold:
        flags = ",".join(p for p in (base, f"base_compiledir={cold}") if p)
        c_cold, g_blas, linked = run(flags)
        c_warm, _, _ = run(flags)
        rows["compile_s_empty_cache"] = round(c_cold, 2)
        rows["compile_s_warm_cache"] = round(c_warm, 2)
        rows["blas_linked"] = linked
        rows["grad_ms_with_blas"] = round(g_blas, 4)
        _, g_none, linked_none = run(",".join([flags, "blas__ldflags="]))
        rows["grad_ms_without_blas"] = round(g_none, 4)
        rows["blas_linked_in_control"] = linked_none
    return rows


# ---------------------------------------------------------------------------
# Checks of the default prior: SBC, coverage, real outputs, default timing
# ---------------------------------------------------------------------------
def _done(path: Path) -> set[str]:
    """Keys of the rows already in a JSON-lines file (the runs resume)."""
    if not path.exists():
        return set()
    return {json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()}


def _append(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _backend() -> str:
    """nutpie's compile backend in use (``bayescal.bayes.get_config``)."""
    from bayescal.bayes import get_config

    return get_config()["nutpie_backend"]


def _fit_default(q, y, sampler: str, seed: int, params: dict | None = None):
    """The default estimator (or one with ``params`` changed) fitted to ``(q, y)``, failures kept.

    Returns ``(est, seconds)``.
    """
    from bayescal.bayes import BayesianDirichletCalibrator

    params = dict(params or {})
    cls = BayesianDirichletCalibrator
    if "log_tau_prior" in params:  # a prior the estimator does not offer (eb_prior.py)
        cls = _log_normal_tau(tuple(params.pop("log_tau_prior")))
    t0 = time.perf_counter()
    est = cls(sampler=sampler, random_seed=seed, progressbar=False, on_failure="warn", **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the diagnostics are recorded, not warned
        est.fit(q, y)
    return est, time.perf_counter() - t0


def _log_normal_tau(log_tau: tuple[float, float]) -> type:
    """The default estimator with the log-normal hyperprior ``ln tau ~ N(m, sd^2)`` on every
    group (:class:`bayescal.bayes.hierarchical.StructuredPrior`'s ``log_tau``) in place of
    ``HalfNormal(tau_scale)``: the empirical-Bayes candidate of ``benchmarks/eb_prior.py``,
    tried and not adopted (docs/benchmarks.md, *An empirical-Bayes hyperprior*)."""
    from dataclasses import replace

    from bayescal.bayes import BayesianDirichletCalibrator

    class LogNormalTau(BayesianDirichletCalibrator):
        def _structured_prior(self):
            prior = super()._structured_prior()
            return replace(prior, log_tau=log_tau) if prior.kind == "hierarchical" else prior

    return LogNormalTau


#: Posterior draws kept for the SBC ranks (thinned evenly from all draws).
SBC_RANK_DRAWS = 199
#: Fixed score vectors at which SBC monitors calibrated probabilities.
SBC_TEST_POINTS = np.array([[0.8, 0.15, 0.05], [0.2, 0.5, 0.3], [0.34, 0.33, 0.33]])


def sbc_quantities(s, tau, W, b, x, y, xt):
    """SBC quantities of one map (or of draws: leading axes): a dict of arrays."""
    from scipy.special import log_softmax

    z = np.einsum("ni,...ji->...nj", x, W) + b[..., None, :]
    ll = log_softmax(z, axis=-1)[..., np.arange(len(y)), y].sum(axis=-1)
    zt = np.einsum("ni,...ji->...nj", xt, W) + b[..., None, :]
    pt = np.exp(log_softmax(zt, axis=-1))
    out = {"log_s": np.log(s), "log_tau_off": np.log(tau[..., 0]),
           "log_tau_diag": np.log(tau[..., 1]), "log_tau_b": np.log(tau[..., 2]),
           "loglik": ll}
    for t in range(xt.shape[0]):
        out[f"p0_at_{t}"] = pt[..., t, 0]
    return out


def bench_sbc(out: Path, sizes, reps, k=3, sampler="auto", seed0=0, params=None):
    """Simulation-based calibration of the default prior (Talts et al. 2018).

    For each replication: draw the parameters from the prior, labels from
    the map at fixed scores (``make_dirgen(n, k, rng=12345)``), fit the
    default estimator, and record the rank of every true quantity among
    :data:`SBC_RANK_DRAWS` evenly thinned posterior draws, whether it lies in
    the central 90 % interval of all draws, and the sampler's diagnostics.
    """
    from bayescal.bayes import BayesianDirichletCalibrator
    from bayescal.bayes.hierarchical import draw_prior, maps_of

    done = _done(out)
    prior = BayesianDirichletCalibrator(**(params or {}))._structured_prior()
    xt = log_features(SBC_TEST_POINTS[:, :k] / SBC_TEST_POINTS[:, :k].sum(1, keepdims=True))
    for n in sizes:
        q, _, _, _ = make_dirgen(n, k, rng=12345)
        x = log_features(q)
        for r in range(reps):
            key = f"{sampler}/n{n}/r{r}"
            if key in done:
                continue
            rng = np.random.default_rng([seed0, n, r])
            theta = draw_prior(prior, k, 1, rng)[0]
            s, W, b = maps_of(theta[None], prior, k)
            tau = np.exp(theta[1:4])[None] if prior.kind == "hierarchical" else None
            z = x @ W[0].T + b[0]
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            y = (p.cumsum(1) < rng.random((n, 1))).sum(1).clip(0, k - 1)
            # the labels come from the features floored at EPS, so the fit uses them too
            est, dt = _fit_default(q, y, sampler, r, {**(params or {}), "eps": EPS})
            post = est.idata_.posterior
            truth = sbc_quantities(s[0], tau[0], W[0], b[0], x, y, xt)
            draws = sbc_quantities(post["s"].values.ravel(), post["tau"].values.reshape(-1, 3),
                                   post["W"].values.reshape(-1, k, k),
                                   post["b"].values.reshape(-1, k), x, y, xt)
            S = next(iter(draws.values())).shape[0]
            keep = np.linspace(0, S - 1, SBC_RANK_DRAWS).round().astype(int)
            row = {"key": key, "n": n, "rep": r, "seconds": round(dt, 2),
                   "sampler": est.sampler_, "backend": _backend(), "ranks": {},
                   "in90": {}}
            for name, v in truth.items():
                d = draws[name]
                row["ranks"][name] = int(np.sum(d[keep] < v))
                lo, hi = np.quantile(d, [0.05, 0.95])
                row["in90"][name] = bool(lo <= v <= hi)
            diag = est.diagnostics_
            row.update({m: diag.get(m) for m in ("r_hat_max", "ess_bulk_min", "ess_tail_min",
                                                 "divergences", "passed")})
            _append(out, row)
            print(key, f"{dt:.0f}s", diag.get("divergences"), diag.get("r_hat_max"), flush=True)


def summarise_sbc(path: Path, bins: int = 10) -> list[dict]:
    """Per (sampler, n, quantity): chi-square p of rank uniformity and 90 % coverage."""
    from scipy.stats import chisquare

    rows = _rows(path)
    out = []
    for key in sorted({(r["sampler"], r["n"]) for r in rows}):
        sub = [r for r in rows if (r["sampler"], r["n"]) == key]
        names = list(sub[0]["ranks"])
        cov_all = []
        for name in names:
            ranks = np.array([r["ranks"][name] for r in sub])
            counts = np.bincount(ranks * bins // (SBC_RANK_DRAWS + 1), minlength=bins)
            cov = np.mean([r["in90"][name] for r in sub])
            cov_all.append(cov)
            out.append({"sampler": key[0], "n": key[1], "quantity": name, "reps": len(sub),
                        "rank_p": float(chisquare(counts).pvalue), "coverage90": float(cov)})
        div = np.array([r["divergences"] or 0 for r in sub])
        rh = np.array([r["r_hat_max"] if r["r_hat_max"] is not None else np.nan for r in sub])
        out.append({"sampler": key[0], "n": key[1], "quantity": "(all)", "reps": len(sub),
                    "coverage90": float(np.mean(cov_all)),
                    "fits_with_divergences": int((div > 0).sum()),
                    "fits_rhat_gt_1.01": int((rh > 1.01).sum()),
                    "median_seconds": float(np.median([r["seconds"] for r in sub]))})
    return out


def _slope(W):
    r"""The overall slope (inverse temperature) of ``softmax(W x + b)``: ``tr(W_c) / (k - 1)``.

    ``W_c`` is ``W`` less its column means (the gauge-free part); for
    ``W = s I`` it is ``s``. ``W`` of shape ``(..., k, k)``.
    """
    W = np.asarray(W, dtype=float)
    Wc = W - W.mean(axis=-2, keepdims=True)
    return np.trace(Wc, axis1=-2, axis2=-1) / (W.shape[-1] - 1)


def _interval_check(est, qt, truth, hdi: float) -> dict:
    """How often ``est``'s ``hdi`` credible intervals at scores ``qt`` hold ``truth``, with
    the mean width, the fit's floor and its diagnostics (the coverage checks' row fields)."""
    lo, hi = est.credible_interval(qt, hdi_prob=hdi)
    inside = (lo <= truth) & (truth <= hi)
    return {"sampler": est.sampler_, "backend": _backend(), "coverage": float(inside.mean()),
            "width": float(np.mean(hi - lo)), "eps": float(est.eps_),
            **{m: est.diagnostics_.get(m) for m in ("r_hat_max", "divergences", "passed")}}


def bench_coverage(out: Path, sizes, reps, k=3, n_test=500, hdi=0.9, sampler="auto",
                   params=None):
    """Coverage of ``credible_interval(hdi_prob)`` on the true calibrated probability.

    Each replication draws a new DirGen model and data (``make_dirgen``),
    fits the default estimator and checks, on ``n_test`` fresh scores, how
    often the interval of each class's calibrated probability holds the
    true one (:func:`bayescal.maps.dirgen_map`). Each row also records
    ``slope_rank``, the posterior share of draws whose overall slope
    (:func:`_slope`) is below the truth's (uniform over replications when
    the posterior is calibrated for these truths; low when the fitted maps
    are too sharp).
    """
    from bayescal.maps import dirgen_map, dirgen_to_dirlin

    done = _done(out)
    for n in sizes:
        for r in range(reps):
            key = f"{sampler}/n{n}/r{r}"
            if key in done:
                continue
            q, y, alpha, pi = make_dirgen(n, k, rng=[7, n, r])
            qt, _, _, _ = make_dirgen(n_test, k, rng=[8, n, r], alpha=alpha, pi=pi)
            truth = dirgen_map(qt, alpha, pi)
            est, dt = _fit_default(q, y, sampler, r, params)
            check = _interval_check(est, qt, truth, hdi)
            post = getattr(est, "idata_", None)
            slope_rank = (float(np.mean(_slope(post.posterior["W"].values)
                                        < _slope(dirgen_to_dirlin(alpha, pi)[0])))
                          if post is not None and "W" in post.posterior else None)
            _append(out, {"key": key, "n": n, "rep": r, **check, "slope_rank": slope_rank,
                          "seconds": round(dt, 2)})
            print(key, check["coverage"], flush=True)


def summarise_coverage(path: Path) -> list[dict]:
    rows = _rows(path)
    out = []
    for key in sorted({(r["sampler"], r["n"]) for r in rows}):
        sub = [r for r in rows if (r["sampler"], r["n"]) == key]
        c = np.array([r["coverage"] for r in sub])
        out.append({"sampler": key[0], "n": key[1], "reps": len(sub),
                    "coverage": float(c.mean()),
                    "se": float(c.std(ddof=1) / np.sqrt(len(c))) if len(c) > 1 else None,
                    "mean_width": float(np.mean([r["width"] for r in sub])),
                    # data sets whose features the default floored above EPS
                    # (eps="auto"): there the true map is outside the model
                    "floored": (int(sum(r["eps"] > EPS for r in sub))
                                if all("eps" in r for r in sub) else None),
                    # the truth's posterior rank of the overall slope: mean 0.5
                    # when calibrated, below when the fitted maps are too sharp
                    "slope_rank_mean": (float(np.mean([r["slope_rank"] for r in sub]))
                                        if all(r.get("slope_rank") is not None for r in sub)
                                        else None),
                    "fits_with_divergences": int(sum((r["divergences"] or 0) > 0 for r in sub))})
    return out


#: Real-data grid: the tabular cases of ``bench_quality.py`` (seed 0) on these
#: datasets (every classifier), and its CIFAR-10 cases.
REAL_DATASETS = ("abalone", "car", "landsat-satellite", "mfeat-karhunen", "optdigits",
                 "page-blocks", "segment", "waveform-5000", "yeast")
REAL_DNN = ("netcal_cifar10_lenet5__n5000", "netcal_cifar10_wideresnet16-4__n5000")


def real_cases(scores_dir: Path, datasets: list[str] | None = None) -> list[str]:
    """The grid's cached score files; ``datasets`` keeps those datasets only (a subset run)."""
    names = [f"{d}__{c}__0" for d in REAL_DATASETS
             for c in ("nbayes", "forest", "logistic", "mlp")] + list(REAL_DNN)
    if datasets is not None:
        unknown = sorted(set(datasets) - set(REAL_DATASETS) - set(REAL_DNN))
        if unknown:
            raise SystemExit(f"unknown datasets {unknown}: choose from {REAL_DATASETS + REAL_DNN}")
        names = [c for c in names if c.split("__")[0] in datasets or c in datasets]
    missing = [c for c in names if not (scores_dir / f"{c}.npz").exists()]
    if missing:
        raise SystemExit(f"missing cached scores {missing[:3]}... in {scores_dir}: run "
                         "benchmarks/bench_quality.py first")
    return names


def _log_loss(d: dict, proba) -> float:
    """Test log-loss of one case (``bench_quality.score``, the held-out grid's metric)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_quality import score

    return score(d["y_test"], proba)["log_loss"]


def _load_case(path: Path) -> dict:
    with np.load(path) as f:
        return {key: f[key] for key in f.files}


def _subsample(d: dict, n: int, seed: int):
    """``n`` calibration rows drawn without replacement (stratification not forced)."""
    idx = np.random.default_rng(seed).choice(len(d["y_cal"]), size=n, replace=False)
    return d["p_cal"][idx], d["y_cal"][idx]


def _baseline_scores(d: dict, p, y) -> dict:
    """Test log-loss of temperature scaling (on ln q, floored) and the MAP default on (p, y)."""
    from bayescal import DirichletCalibrator, TemperatureScaler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = TemperatureScaler().fit(log_features(p), y)
        mp = DirichletCalibrator().fit(p, y)
    return {"temperature": _log_loss(d, ts.predict_proba(log_features(d["p_test"]))),
            "map_default": _log_loss(d, mp.predict_proba(d["p_test"]))}


def bench_realdata(out: Path, scores_dir: Path, sizes, sampler="auto", datasets=None,
                   params=None):
    """Test log-loss of the default Bayesian fit against temperature scaling and the MAP default.

    Every case's calibration scores are subsampled (without replacement,
    seed 0, stratification not forced) to each ``n``; every method is scored
    on the case's full test split.
    """
    for d, p, y, row in _realdata_rows(out, scores_dir, sizes, sampler, datasets):
        est, dt = _fit_default(p, y, sampler, 0, params)
        row["bayes_seconds"] = round(dt, 2)
        row["backend"] = _backend()
        row["bayes_mean"] = _log_loss(d, est.predict_proba(d["p_test"]))
        row["bayes_mode"] = _log_loss(d, est.predict_proba(d["p_test"], kind="mode"))
        diag = est.diagnostics_
        row.update({m: diag.get(m) for m in ("r_hat_max", "ess_bulk_min", "divergences",
                                             "passed")})
        row["attempts"] = [{m: a[m] for m in ("target_accept", "tune", "divergences", "passed")
                            if m in a} for a in diag.get("attempts", [])]
        _append(out, row)
        print(row["key"], {m: round(row[m], 4) for m in ("temperature", "map_default",
                                                         "bayes_mean")},
              diag.get("divergences"), flush=True)


def _realdata_rows(out: Path, scores_dir: Path, sizes, sampler: str, datasets):
    """``(case data, p, y, row)`` of every real case and ``n`` not yet in ``out``.

    ``p, y``: the case's calibration split subsampled to ``n`` (seed 0); ``row``
    starts with the key, the case, ``n``, ``k`` and the baselines' test log-loss.
    """
    done = _done(out)
    for case in real_cases(scores_dir, datasets):
        d = _load_case(scores_dir / f"{case}.npz")
        uncalibrated = _log_loss(d, d["p_test"])
        for n in sizes:
            key = f"{sampler}/{case}/n{n}"
            if key in done or len(d["y_cal"]) < n:
                continue
            p, y = _subsample(d, n, 0)
            yield d, p, y, {"key": key, "case": case, "n": n, "k": p.shape[1],
                            "uncalibrated": uncalibrated, **_baseline_scores(d, p, y)}


def bench_realdata_generative(out: Path, scores_dir: Path, sizes, sampler="auto",
                              datasets=None, params=None):
    """The generative Bayesian calibrator at its defaults on the real-data grid.

    As :func:`bench_realdata` (the same subsamples, seed 0): test log-loss of
    the posterior mean of ``BayesianGenerativeCalibrator(**params)`` beside
    the uncalibrated scores, temperature scaling, the MAP generative default
    ``GenerativeDirichletCalibrator()`` and the earlier default
    ``BayesianGenerativeCalibrator(prior=None)``. A fit that fails its checks
    is kept (``on_failure="warn"``) and counted.
    """
    from bayescal import GenerativeDirichletCalibrator
    from bayescal.bayes import BayesianGenerativeCalibrator

    for d, p, y, row in _realdata_rows(out, scores_dir, sizes, sampler, datasets):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gen = GenerativeDirichletCalibrator().fit(p, y)
            row["map_generative"] = _log_loss(d, gen.predict_proba(d["p_test"]))
            for name, extra in (("bayes_gen", params or {}), ("bayes_gen_none",
                                                              {"prior": None})):
                t0 = time.perf_counter()
                est = BayesianGenerativeCalibrator(
                    sampler=sampler, random_seed=0, progressbar=False, on_failure="warn",
                    **extra).fit(p, y)
                row[f"{name}_seconds"] = round(time.perf_counter() - t0, 2)
                row[name] = _log_loss(d, est.predict_proba(d["p_test"]))
                row[f"{name}_passed"] = bool(est.diagnostics_.get("passed", True))
                if name == "bayes_gen":
                    row["prior_strength"] = est.prior_strength_
        _append(out, row)
        print(row["key"], {m: round(row[m], 4) for m in ("uncalibrated", "temperature",
                                                         "map_generative", "bayes_gen",
                                                         "bayes_gen_none")}, flush=True)


def summarise_realdata_generative(path: Path, margin: float = 1.01) -> list[dict]:
    """Per n: mean log-loss; cases worse than uncalibrated (by ``margin``) where TS is not."""
    rows = _rows(path)
    out = []
    methods = ("uncalibrated", "temperature", "map_generative", "bayes_gen", "bayes_gen_none")
    for n in sorted({r["n"] for r in rows}):
        sub = [r for r in rows if r["n"] == n]
        row = {"n": n, "cases": len(sub)}
        row |= {f"mean_{m}": float(np.mean([r[m] for r in sub])) for m in methods}
        ts_ok = [r for r in sub if r["temperature"] <= margin * r["uncalibrated"]]
        for m in ("map_generative", "bayes_gen", "bayes_gen_none"):
            row[f"{m}_worse_than_uncal_where_ts_not"] = int(
                sum(r[m] > margin * r["uncalibrated"] for r in ts_ok))
            ratio = np.array([r[m] / r["temperature"] for r in sub])
            row[f"{m}_over_ts_median"] = float(np.median(ratio))
            row[f"{m}_over_ts_max"] = float(ratio.max())
        for m in ("bayes_gen", "bayes_gen_none"):
            row[f"{m}_clean"] = int(sum(r[f"{m}_passed"] for r in sub))
            row[f"{m}_median_seconds"] = float(np.median([r[f"{m}_seconds"] for r in sub]))
        out.append(row)
    return out


def bench_baselines(out: Path, scores_dir: Path, sizes, reps=3):
    """Temperature scaling and the MAP default against the uncalibrated scores on small subsamples.

    For every cached case of the held-out grid (split 0) and each ``n``,
    ``reps`` subsamples (seeds ``0 .. reps - 1``) of the calibration split;
    each method is scored on the full test split. No sampling: seconds per
    case.
    """
    done = _done(out)
    for path in sorted(scores_dir.glob("*__0.npz")):
        case = path.stem
        d = _load_case(path)
        uncalibrated = _log_loss(d, d["p_test"])
        for n in sizes:
            for r in range(reps):
                key = f"{case}/n{n}/r{r}"
                if key in done or len(d["y_cal"]) < n:
                    continue
                p, y = _subsample(d, n, r)
                _append(out, {"key": key, "case": case, "n": n, "rep": r, "k": p.shape[1],
                              "uncalibrated": uncalibrated, **_baseline_scores(d, p, y)})


def summarise_baselines(path: Path, margin: float = 1.05) -> list[dict]:
    """Per n: mean log-loss, and fits more than ``margin`` times the uncalibrated log-loss."""
    rows = _rows(path)
    out = []
    for n in sorted({r["n"] for r in rows}):
        sub = [r for r in rows if r["n"] == n]
        row = {"n": n, "cases": len({r["case"] for r in sub}), "fits": len(sub)}
        for m in ("uncalibrated", "temperature", "map_default"):
            row[f"mean_{m}"] = float(np.mean([r[m] for r in sub]))
        for m in ("temperature", "map_default"):
            row[f"{m}_worse_than_uncalibrated"] = int(
                sum(r[m] > margin * r["uncalibrated"] for r in sub))
        out.append(row)
    return out


def summarise_realdata(path: Path) -> list[dict]:
    rows = _rows(path)
    out = []
    methods = ("uncalibrated", "temperature", "map_default", "bayes_mode", "bayes_mean")
    for n in sorted({r["n"] for r in rows}):
        sub = [r for r in rows if r["n"] == n]
        ok = [r for r in sub if (r["divergences"] or 0) == 0 and (r["r_hat_max"] or 9) <= 1.01]
        row = {"n": n, "cases": len(sub)}
        row |= {f"mean_{m}": float(np.mean([r[m] for r in sub])) for m in methods}
        row["bayes_beats_ts"] = int(sum(r["bayes_mean"] <= r["temperature"] for r in sub))
        row["bayes_beats_map"] = int(sum(r["bayes_mean"] <= r["map_default"] for r in sub))
        row["clean_fits"] = len(ok)
        row["median_seconds"] = float(np.median([r["bayes_seconds"] for r in sub]))
        out.append(row)
    return out


def small_n_criteria(path: Path) -> list[dict]:
    """The held-out issue's small-n targets on the ``realdata`` rows, per n.

    At every n: the share of cases where the posterior mean is within 2 % of
    temperature scaling and its worst ratio to it; the mean ratio to the MAP
    default and the share of cases no worse than it.
    """
    rows = _rows(path)
    out = []
    for n in sorted({r["n"] for r in rows}):
        sub = [r for r in rows if r["n"] == n]
        ts = np.array([r["bayes_mean"] / r["temperature"] for r in sub])
        mp = np.array([r["bayes_mean"] / r["map_default"] for r in sub])
        out.append({"n": n, "cases": len(sub),
                    "within_2pct_of_ts": float(np.mean(ts <= 1.02)),
                    "max_ratio_to_ts": float(ts.max()),
                    "mean_ratio_to_map": float(mp.mean()),
                    "no_worse_than_map": float(np.mean(mp <= 1.0))})
    return out


def per_case_markdown(path: Path, bayes: str = "bayes_mean") -> str:
    """Per-case table of test log-losses and ratios (rows sorted by n, then case)."""
    rows = sorted(_rows(path), key=lambda r: (r["n"], r["case"]))
    lines = ["| n | case | k | uncalibrated | TS | MAP default | posterior mean | / TS | / MAP "
             "| checks |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = "pass" if r.get("passed") else "fail"
        lines.append(f"| {r['n']} | {r['case'].removesuffix('__0').removesuffix('__n5000')} "
                     f"| {r['k']} | {r['uncalibrated']:.4f} | {r['temperature']:.4f} "
                     f"| {r['map_default']:.4f} | {r[bayes]:.4f} "
                     f"| {r[bayes] / r['temperature']:.3f} | {r[bayes] / r['map_default']:.3f} "
                     f"| {ok} |")
    return "\n".join(lines)


def _evidence_taus(p, y) -> list[float]:
    """``[tau_off, tau_diag, tau_b]`` of the MAP default's evidence strengths (``1/sqrt``)."""
    from bayescal import DirichletCalibrator
    from bayescal.bayes.estimators import _tau_of  # the estimator's own strength-to-tau

    sel = DirichletCalibrator().fit(p, y).selection_
    return [_tau_of(sel[f"evidence_reg_{g}"]) for g in ("lambda", "diag", "mu")]


def _ts_log_slope(p, y) -> float:
    """``ln s = -ln T`` of temperature scaling fitted on the log features of ``p``."""
    from bayescal import TemperatureScaler

    return float(-np.log(TemperatureScaler().fit(log_features(p), y).temperature_))


def bench_scales(out: Path, scores_dir: Path, reps=20, n_dirgen=3000, datasets=None):
    """The scales that the data choose: real classifiers against make_dirgen truths.

    The MAP default's type-II maximum-likelihood strengths (Laplace
    evidence), read as ``tau = 1/sqrt(strength)``, the quantity the default
    prior's hyperpriors ``HalfNormal(tau_scale)`` are on, and the inverse
    temperature ``ln s`` that temperature scaling fits (the quantity of
    ``log_scale_prior``): for every real-data case on its full calibration
    split, and for ``reps`` make_dirgen data sets (k = 3, ``n_dirgen`` rows,
    the coverage check's models; these rows also hold the truth's overall
    slope, ``ln_s_true``). No sampling.
    """
    from bayescal.maps import dirgen_to_dirlin

    done = _done(out)
    for case in real_cases(scores_dir, datasets):
        if case not in done:
            d = _load_case(scores_dir / f"{case}.npz")
            p, y = d["p_cal"], d["y_cal"]
            _append(out, {"key": case, "source": "real", "k": p.shape[1], "n": len(y),
                          "tau": _evidence_taus(p, y), "ln_s": _ts_log_slope(p, y)})
    for r in range(reps):
        key = f"dirgen/n{n_dirgen}/r{r}"
        if key not in done:
            q, y, alpha, pi = make_dirgen(n_dirgen, 3, rng=[7, n_dirgen, r])
            _append(out, {"key": key, "source": "make_dirgen", "k": 3, "n": n_dirgen,
                          "tau": _evidence_taus(q, y), "ln_s": _ts_log_slope(q, y),
                          "ln_s_true": float(np.log(_slope(dirgen_to_dirlin(alpha, pi)[0])))})


def summarise_scales(path: Path) -> list[dict]:
    """Per source: quantiles of each group's evidence ``tau`` and of ``ln s``."""
    rows = _rows(path)
    out = []
    for source in ("real", "make_dirgen"):
        sub = [r for r in rows if r["source"] == source]
        if not sub:
            continue
        t = np.array([r["tau"] for r in sub])
        cols = {f"tau_{g}": t[:, i] for i, g in enumerate(("off", "diag", "b"))}
        for m in ("ln_s", "ln_s_true"):
            if all(m in r for r in sub):
                cols[m] = np.array([r[m] for r in sub])
        for q in (0.1, 0.5, 0.9):
            out.append({"source": source, "cases": len(sub), "quantile": q,
                        **{c: float(np.quantile(v, q)) for c, v in cols.items()}})
    return out


def bench_default_timing(k=10, n=5000, repeats=2, sampler="auto"):
    """Wall time of the default fit (the first run warms the compile cache)."""
    from bayescal.bayes import BayesianDirichletCalibrator

    q, y, _, _ = make_dirgen(n, k, rng=11)
    rows = []
    for i in range(repeats):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BayesianDirichletCalibrator(sampler=sampler, random_seed=i,
                                              progressbar=False).fit(q, y)
        d = est.diagnostics_
        rows.append({"run": i, "seconds": round(time.perf_counter() - t0, 2),
                     "sampler": est.sampler_, "coordinates": d.get("coordinates"),
                     "tune": est.tune_,
                     "r_hat_max": d["r_hat_max"],
                     "ess_bulk_min": d["ess_bulk_min"], "divergences": d["divergences"],
                     "load_average": os.getloadavg()[0]})
        print(rows[-1], flush=True)
    return {"k": k, "n": n, "rows": rows}


def checks_markdown(rows: list[dict]) -> str:
    """One markdown table of summary rows (columns: the union of their keys)."""
    cols = list(dict.fromkeys(c for r in rows for c in r))

    def fmt(v):
        return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(res: dict) -> str:
    """Markdown tables of a results dict (as written by ``--out``)."""
    lines = []

    def table(rows, cols):
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for r in rows:
            lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
        lines.append("")

    cols = ["name", "seconds", "ess_bulk_min", "ess_per_s", "leapfrog_per_draw", "r_hat_max",
            "divergences"]
    for key in ("dirlin_k3", "dirlin_k10"):
        if key in res:
            r = res[key]
            lines.append(f"**{key}**: k={r['k']}, n={r['n']}, {r['chains']} chains x "
                         f"({r['tune']} tune + {r['draws']} draws)\n")
            table(r["rows"], [*cols, "ratio_vs_baseline"])
            if r.get("laplace_vs_nuts_sd"):
                lines.append(f"Laplace / NUTS posterior sd: {r['laplace_vs_nuts_sd']}\n")
    if "dirgen" in res:
        r = res["dirgen"]
        lines.append(f"**dirgen**: k={r['k']}, n={r['n']}, {r['chains']} chains x "
                     f"({r['tune']} tune + {r['draws']} draws)\n")
        table(r["rows"], [*cols, "ratio_vs_rowwise"])
    for key in ("scaling", "k100"):
        if key in res:
            lines.append(f"**{key}** (BayesianGenerativeCalibrator, sampler='pymc')\n")
            table(res[key], ["n", "seconds", "r_hat_max", "ess_bulk_min", "divergences"])
    if "pytensor" in res:
        lines.append("**pytensor**\n")
        table([res["pytensor"]], list(res["pytensor"]))
    return "\n".join(lines)


def bench_coverage_real(out: Path, scores_dir: Path, sizes, reps=1, n_test=500, hdi=0.9,
                        sampler="auto", datasets=None, params=None, run_only=None):
    """Coverage of ``credible_interval(hdi_prob)`` on realistic truths (issue: held-out claims).

    Every case of the real-data grid (:func:`real_cases`, every ``k <= 10``)
    gives one truth: the MAP default ``DirichletCalibrator()`` fitted to the
    case's whole calibration split. Each replication draws ``n`` calibration
    rows from that split's scores and labels from the truth
    (:func:`bayescal.datasets.make_from_calibrator`), fits the default
    Bayesian estimator, and checks how often the interval of each class's
    calibrated probability holds the truth's on ``n_test`` scores drawn from
    the case's test split. A cell (sampler, n) holds ``reps`` data sets per
    case; its standard error is over data sets. The draws are seeded by the
    case's position in the run's list of cases, so a table is reproduced with
    the same ``--datasets``.
    """
    from bayescal import DirichletCalibrator
    from bayescal.datasets import make_from_calibrator

    done = _done(out)
    for ci, case in enumerate(real_cases(scores_dir, datasets)):
        if run_only is not None and case.split("__")[0] not in run_only:
            continue
        d = _load_case(scores_dir / f"{case}.npz")
        truth = None
        for n in sizes:
            for r in range(reps):
                key = f"{sampler}/{case}/n{n}/r{r}"
                if key in done:
                    continue
                if truth is None:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        truth = DirichletCalibrator().fit(d["p_cal"], d["y_cal"])
                q, y, _ = make_from_calibrator(truth, d["p_cal"], n, rng=[11, ci, n, r])
                qt, _, pt = make_from_calibrator(truth, d["p_test"], n_test, rng=[12, ci, n, r])
                est, dt = _fit_default(q, y, sampler, r, params)
                check = _interval_check(est, qt, pt, hdi)
                _append(out, {"key": key, "case": case, "n": n, "rep": r, "k": q.shape[1],
                              **check, "truth_eps": float(truth.eps_), "slope_rank": None,
                              "truth_reg": {g: float(getattr(truth, f"{g}_"))
                                            for g in ("reg_lambda", "reg_diag", "reg_mu")},
                              "seconds": round(dt, 2)})
                print(key, round(check["coverage"], 3), round(dt, 1), flush=True)


def _run_check(name: str, path: Path, args, sizes) -> None:
    """One check of ``--checks``, appending to ``path``."""
    if name == "sbc":
        bench_sbc(path, sizes or [30, 300], args.reps or 200, sampler=args.sampler,
                  params=args.params)
    elif name == "coverage":
        bench_coverage(path, sizes or [30, 100, 300, 1000], args.reps or 200,
                       sampler=args.sampler, params=args.params)
    elif name == "coverage_real":
        bench_coverage_real(path, args.scores, sizes or [30, 100, 300, 1000], args.reps or 1,
                            sampler=args.sampler,
                            datasets=args.datasets and args.datasets.split(","),
                            params=args.params,
                            run_only=args.run_only and args.run_only.split(","))
    elif name == "realdata":
        bench_realdata(path, args.scores, sizes or [30, 100, 300], sampler=args.sampler,
                       datasets=args.datasets and args.datasets.split(","), params=args.params)
    elif name == "realdata_generative":
        bench_realdata_generative(path, args.scores, sizes or [30, 100, 300],
                                  sampler=args.sampler,
                                  datasets=args.datasets and args.datasets.split(","),
                                  params=args.params)
    elif name == "scales":
        bench_scales(path, args.scores, reps=args.reps or 20,
                     datasets=args.datasets and args.datasets.split(","))
    elif name == "baselines":
        bench_baselines(path, args.scores, sizes or [30, 100], reps=args.reps or 3)
    elif name == "timing":
        res = bench_default_timing(sampler=args.sampler)
        args.check_dir.mkdir(parents=True, exist_ok=True)
        (args.check_dir / "timing.json").write_text(json.dumps(res, indent=1))
    else:
        raise SystemExit(f"unknown check {name!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny runs (smoke test)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    ap.add_argument("--samplers", default="numpyro,pymc,nutpie,laplace",
                    help="bayescal samplers to time (comma-separated)")
    ap.add_argument("--draws", type=int, default=None,
                    help="override every section's draws and tune (shorter runs)")
    ap.add_argument("--only", default="pytensor,dirlin_k3,dirlin_k10,dirgen,scaling,k100")
    ap.add_argument("--markdown", nargs="+", type=Path, default=None,
                    help="print the tables of result JSON files and exit")
    ap.add_argument("--checks", default=None,
                    help="checks of the default prior to run: sbc,coverage,coverage_real "
                         "(realistic truths: the MAP default of each real case),realdata,"
                         "realdata_generative (BayesianGenerativeCalibrator),timing, "
                         "baselines (temperature scaling and the MAP default on small "
                         "subsamples) and scales (the evidence scales tau of the real cases "
                         "and of make_dirgen truths); each appends to a JSON-lines file in "
                         "--check-dir and resumes")
    ap.add_argument("--check-dir", type=Path, default=Path("results/bayes"))
    ap.add_argument("--sizes", default=None, help="calibration-set sizes of the checks")
    ap.add_argument("--reps", type=int, default=None,
                    help="replications (sbc, coverage: 200; baselines: subsamples, 3)")
    ap.add_argument("--sampler", default="auto", help="sampler of the checks")
    ap.add_argument("--nutpie-backend", default=None, choices=("jax", "numba"),
                    help="how nutpie compiles (bayescal.bayes.set_config): default numba "
                         "for the loops of fits (sbc, coverage, realdata: one compilation "
                         "per model structure, reused for every data set), the library's "
                         "default for timing")
    ap.add_argument("--datasets", default=None,
                    help="realdata: comma-separated datasets of the grid to run (default: all)")
    ap.add_argument("--run-only", default=None,
                    help="coverage_real: run only these datasets of --datasets' list (the "
                         "same draws as the whole run)")
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"),
                    help="cached classifier scores of bench_quality.py (realdata)")
    ap.add_argument("--params", type=json.loads, default=None,
                    help='sbc, coverage, realdata: estimator parameters other than the '
                         'defaults, as JSON (e.g. \'{"tau_scale": 0.5}\'); use a --check-dir '
                         'of their own')
    ap.add_argument("--summary", action="store_true",
                    help="summarise the JSON-lines files in --check-dir and exit")
    ap.add_argument("--per-case", action="store_true",
                    help="with --summary: the realdata check's per-case table")
    args = ap.parse_args(argv)
    if args.summary:
        summary = {}
        for name, fn in (("sbc", summarise_sbc), ("coverage", summarise_coverage),
                         ("coverage_real", summarise_coverage),
                         ("realdata", summarise_realdata),
                         ("realdata_generative", summarise_realdata_generative),
                         ("baselines", summarise_baselines),
                         ("scales", summarise_scales)):
            path = args.check_dir / f"{name}.jsonl"
            if path.exists():
                summary[name] = fn(path)
                print(f"**{name}**\n")
                print(checks_markdown(summary[name]))
        realdata = args.check_dir / "realdata.jsonl"
        if realdata.exists():
            summary["small_n"] = small_n_criteria(realdata)
            print("**small-n criteria**\n")
            print(checks_markdown(summary["small_n"]))
            if args.per_case:
                print(per_case_markdown(realdata))
        (args.check_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        return
    if args.checks:
        from bayescal.bayes import config_context

        sizes = None if args.sizes is None else [int(v) for v in args.sizes.split(",")]
        for name in args.checks.split(","):
            path = args.check_dir / f"{name}.jsonl"
            backend = args.nutpie_backend or ("numba" if name in ("sbc", "coverage",
                                                                  "coverage_real", "realdata",
                                                                  "realdata_generative")
                                              else None)
            with config_context(nutpie_backend=backend):
                _run_check(name, path, args, sizes)
        return
    if args.markdown:
        merged = {}
        for path in args.markdown:
            merged |= json.loads(path.read_text())
        print(to_markdown(merged))
        return
    only = set(args.only.split(","))
    quick = args.quick
    res = {}
    # numpyro first: it needs XLA's host device count set before JAX starts
    # (nutpie's JAX backend would start JAX with one device).
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={CORES}")
    samplers = args.samplers.split(",")

    def size(d, t):
        return (args.draws, args.draws) if args.draws else (d, t)

    def step(name, fn):
        if name in only:
            t = time.perf_counter()
            res[name] = fn()
            print(f"[{name}: {time.perf_counter() - t:.0f} s]", json.dumps(res[name], indent=1),
                  flush=True)

    step("pytensor", bench_pytensor)
    d, t = (100, 100) if quick else (500, 500)
    d, t = size(d, t)
    step("dirlin_k3", lambda: bench_dirlin(3, 1000, 2, d, t, "raw", samplers))
    d, t = (100, 100) if quick else (1000, 1000)
    d, t = size(d, t)
    step("dirlin_k10", lambda: bench_dirlin(10, 5000, 2 if quick else 4, d, t, "zerosum",
                                            samplers, baseline_chains=2))
    d, t = (100, 100) if quick else (500, 500)
    d, t = size(d, t)
    step("dirgen", lambda: bench_dirgen(10, 5000, 2, d, t))
    step("scaling", lambda: bench_dirgen_scaling(10, [1000, 10_000 if quick else 1_000_000],
                                                 2, d, t))
    d, t = (100, 100) if quick else (1000, 1000)
    d, t = size(d, t)
    step("k100", lambda: bench_dirgen_scaling(100, [2000 if quick else 20_000], 4, d, t))
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
