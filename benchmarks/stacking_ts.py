"""Averaging the default posterior with temperature scaling by leave-one-out weights.

A trial for the small-n target of the held-out issue (the posterior mean no
worse than 1.02x temperature scaling in 90 % of the real-data cases at
n = 30, never worse than 1.1x), not adopted (docs/benchmarks.md, *Bayesian
defaults*, *Averaging with temperature scaling by leave-one-out*).

On every case of ``bench_bayes.py --checks realdata`` (the same subsamples,
seed 0, and the same default fit), the posterior predictive of the default
:class:`~bayescal.bayes.BayesianDirichletCalibrator` and temperature scaling
are mixed, ``w p_posterior + (1 - w) p_TS``, with ``w`` from the leave-one-out
predictive densities of the calibration rows: PSIS-LOO of the posterior draws
(:func:`arviz.loo`) and exact leave-one-out refits of temperature scaling.
Two weights: *stacking* (Yao et al. 2018, the ``w`` that maximises the
leave-one-out log score of the mixture) and *pseudo-BMA* (``w`` proportional
to ``exp(elpd)``). Each row is printed and appended to ``--out`` as JSON;
``--summary`` prints the small-n criteria of the three predictions.

Run::

    OPENBLAS_NUM_THREADS=1 python benchmarks/stacking_ts.py --n 30 --out results/stack30.jsonl
    python benchmarks/stacking_ts.py --summary results/stack30.jsonl

References
----------
Y. Yao, A. Vehtari, D. Simpson and A. Gelman. "Using stacking to average
Bayesian predictive distributions". Bayesian Analysis 13(3), 2018.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_bayes as bb  # noqa: E402

from bayescal import TemperatureScaler  # noqa: E402
from bayescal.maps import log_features  # noqa: E402

METHODS = ("bayes_mean", "stack", "pseudo_bma")


def _temperature(x: np.ndarray, y: np.ndarray) -> TemperatureScaler:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TemperatureScaler().fit(x, y)


def temperature_loo(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``ln p(y_i | x_i, rows other than i)`` of temperature scaling, exact (``n`` refits)."""
    x = log_features(p)
    out = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        out[i] = np.log(_temperature(x[keep], y[keep]).predict_proba(x[i:i + 1])[0, y[i]])
    return out


def stacking_weight(a: np.ndarray, b: np.ndarray) -> float:
    """The ``w`` in (0, 1) maximising ``sum_i ln(w e^a_i + (1 - w) e^b_i)``."""
    def neg(w: float) -> float:
        return -float(np.sum(np.logaddexp(np.log(w) + a, np.log1p(-w) + b)))

    return float(minimize_scalar(neg, bounds=(1e-6, 1 - 1e-6), method="bounded").x)


def run(n: int, out: Path, scores: Path) -> None:
    import arviz as az

    done = {json.loads(line)["case"] for line in out.open()} if out.exists() else set()
    for case in bb.real_cases(scores):
        if case in done:
            continue
        d = bb._load_case(scores / f"{case}.npz")
        if len(d["y_cal"]) < n:
            continue
        p, y = bb._subsample(d, n, 0)
        row = {"case": case, "n": n, **bb._baseline_scores(d, p, y)}
        t0 = time.perf_counter()
        est, _ = bb._fit_default(p, y, "auto", 0)  # with its log_likelihood group
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pareto k > 0.7 is recorded, not warned
            loo = az.loo(est.idata_, pointwise=True)
        loo_post = np.asarray(loo.loo_i).ravel()
        loo_ts = temperature_loo(p, y)
        w_stack = stacking_weight(loo_post, loo_ts)
        w_bma = float(1.0 / (1.0 + np.exp(loo_ts.sum() - loo_post.sum())))
        xt = log_features(d["p_test"])
        p_ts = _temperature(log_features(p), y).predict_proba(xt)
        p_post = est.predict_proba(d["p_test"])
        row.update({
            "bayes_mean": bb._log_loss(d, p_post),
            "stack": bb._log_loss(d, w_stack * p_post + (1 - w_stack) * p_ts),
            "pseudo_bma": bb._log_loss(d, w_bma * p_post + (1 - w_bma) * p_ts),
            "w_stack": w_stack, "w_bma": w_bma, "elpd_loo_posterior": float(loo_post.sum()),
            "elpd_loo_temperature": float(loo_ts.sum()),
            "pareto_k_max": float(np.max(np.asarray(loo.pareto_k))),
            "passed": bool(est.diagnostics_.get("passed")),
            "seconds": round(time.perf_counter() - t0, 2)})
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(case, {m: round(row[m] / row["temperature"], 3) for m in METHODS},
              f"w_stack={w_stack:.2f} w_bma={w_bma:.2f}", flush=True)


def summary(path: Path) -> None:
    rows = [json.loads(line) for line in path.open()]
    print("| prediction | cases | within 2 % of TS | worst ratio to TS | mean ratio to TS "
          "| mean ratio to the MAP default | no worse than the MAP default |")
    print("|---|---|---|---|---|---|---|")
    for m in METHODS:
        ts = np.array([r[m] / r["temperature"] for r in rows])
        mp = np.array([r[m] / r["map_default"] for r in rows])
        print(f"| {m} | {len(rows)} | {int(np.sum(ts <= 1.02))} | {ts.max():.3f} "
              f"| {ts.mean():.3f} | {mp.mean():.3f} | {int(np.sum(mp <= 1.0))} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="calibration rows per case")
    ap.add_argument("--out", type=Path, default=Path("results/stacking_ts.jsonl"))
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"),
                    help="cached classifier scores of bench_quality.py")
    ap.add_argument("--summary", type=Path, default=None, help="summarise these rows")
    args = ap.parse_args(argv)
    if args.summary is not None:
        summary(args.summary)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    run(args.n, args.out, args.scores)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
