"""Benchmark of bayescal's Bayesian calibrators (issue 5).

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

from bayescal import make_dirgen  # noqa: E402
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
    args = ap.parse_args(argv)
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
