"""A chain that stalls with the likelihood's rows in single precision, and the retry in double.

Run (quoted in docs/benchmarks.md, section "A stalled chain in single precision")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/precision_stall.py --precision single
    OPENBLAS_NUM_THREADS=1 python benchmarks/precision_stall.py --precision double
    OPENBLAS_NUM_THREADS=1 python benchmarks/precision_stall.py --precision default --retries

One default ``BayesianDirichletCalibrator`` (``random_seed=0``) at
``--target`` (default 0.8) on the whole calibration split of a cached score
file of ``benchmarks/bench_quality.py`` (default pendigits' logistic
regression, k = 10, n = 2748). ``--precision single`` / ``double`` force the
compiled sampler's likelihood rows (``compiled.sample``'s
``single_precision``) and sample once (no retries); ``default`` leaves the
choice to the estimator (single precision from 2048 rows) and, with
``--retries``, keeps its retries (a stalled chain is sampled again in double
precision). Prints one JSON line: wall seconds, the checks, and per chain the
mean leapfrog steps per draw and the adapted step size, and every try.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="pendigits__logistic__0")
    ap.add_argument("--scores", type=Path, default=ROOT / "results/quality/scores")
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--precision", choices=("single", "double", "default"), default="default")
    ap.add_argument("--retries", action="store_true", help="keep the estimator's retries")
    args = ap.parse_args(argv)

    import bayescal.bayes.estimators as mod
    from bayescal.bayes import BayesianDirichletCalibrator

    if args.precision != "default":
        inner = mod.sample_compiled
        single = args.precision == "single"
        mod.sample_compiled = lambda *a, **kw: inner(*a, **(kw | {"single_precision": single}))
    with np.load(args.scores / f"{args.case}.npz") as f:
        q, y = f["p_cal"], f["y_cal"]
    once = {} if args.retries else {"retry_draws": None, "retry_target_accept": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # judged by the printed diagnostics
        t0 = time.perf_counter()
        est = BayesianDirichletCalibrator(random_seed=0, progressbar=False, on_failure="warn",
                                          target_accept=args.target, **once).fit(q, y)
        wall = time.perf_counter() - t0
    d, stats = est.diagnostics_, est.idata_.sample_stats
    print(json.dumps({
        "case": args.case, "n": int(len(y)), "target_accept": args.target,
        "precision": args.precision, "retries": args.retries, "wall_s": round(wall, 1),
        "passed": bool(d["passed"]), "r_hat_max": round(d["r_hat_max"], 4),
        "ess_bulk_min": round(d["ess_bulk_min"]), "divergences": int(d["divergences"]),
        "steps_per_draw": stats["n_steps"].mean("draw").values.round(1).tolist(),
        "step_size": [float(f"{v:.3g}") for v in stats["step_size"].median("draw").values],
        "attempts": d.get("attempts")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
