"""Coverage on realistic truths when the posterior is averaged over the two probability floors.

Run (docs/benchmarks.md, *An empirical-Bayes hyperprior, tried and not adopted*)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/floor_average.py --out results/eb/floors.jsonl \\
        --datasets abalone,car,landsat-satellite,page-blocks,segment,waveform-5000 --n 1000

For each case and replication of ``bench_bayes.py --checks coverage_real`` (the same truth,
calibration draws, test scores and seeds), fits the default ``BayesianDirichletCalibrator`` at
each of the two floors that ``eps="auto"`` chooses between (``2.2e-16`` and ``1/(k(n+1))``),
and scores the 90 % intervals of (a) the fit at ``eps="auto"``'s floor, (b) an evidence-weighted
mixture of the two posteriors (draws taken from each in proportion to its posterior model
probability, from the MAP default's Laplace evidence at each floor). The measurement that
led to the estimator's ``eps="average"`` (which also drops a floor under 1 % and keeps the
draws' floors in its fitted state); ``bench_bayes.py --params '{"eps": "average"}'``
measures that.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_bayes as bb  # noqa: E402


def hdi_cover(draws: np.ndarray, truth: np.ndarray, prob: float = 0.9) -> float:
    """Share of the truth's entries inside the draws' ``prob`` highest-density intervals."""
    from bayescal.bayes.estimators import hdi_of_draws

    lo, hi = hdi_of_draws(draws, prob)
    return float(((lo <= truth) & (truth <= hi)).mean())


def main(argv=None) -> int:
    from bayescal import DirichletCalibrator
    from bayescal.datasets import make_from_calibrator

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"))
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--run-only", default=None)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args(argv)
    done = bb._done(args.out)
    only = args.run_only and set(args.run_only.split(","))
    for ci, case in enumerate(bb.real_cases(args.scores, args.datasets.split(","))):
        if only and case.split("__")[0] not in only:
            continue
        d = bb._load_case(args.scores / f"{case}.npz")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            truth = DirichletCalibrator().fit(d["p_cal"], d["y_cal"])
        n = args.n
        for r in range(args.reps):
            key = f"auto/{case}/n{n}/r{r}"
            if key in done:
                continue
            q, y, _ = make_from_calibrator(truth, d["p_cal"], n, rng=[11, ci, n, r])
            qt, _, pt = make_from_calibrator(truth, d["p_test"], 500, rng=[12, ci, n, r])
            k = q.shape[1]
            floors = {"none": float(np.finfo(float).eps), "floor": 1.0 / (k * (n + 1))}
            fits = {name: bb._fit_default(q, y, "auto", r, {"eps": eps})
                    for name, eps in floors.items()}
            with warnings.catch_warnings():  # eps="auto" takes the MAP default's floor
                warnings.simplefilter("ignore")
                chosen = "floor" if DirichletCalibrator().fit(q, y).eps_ > 1e-12 else "none"
            # each floor's evidence: the MAP default's Laplace evidence at that floor (the
            # hierarchical posterior reports none)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                le = np.array([DirichletCalibrator(eps=e).fit(q, y).selection_["log_evidence"]
                               for e in floors.values()])
            w = np.exp(le - le.max())
            w /= w.sum()
            draws = [fits[f][0].predict_proba_draws(qt) for f in ("none", "floor")]
            S = draws[0].shape[0]
            take = int(round(w[0] * S))
            mix = np.concatenate([draws[0][:take], draws[1][: S - take]], axis=0)
            row = {"key": key, "case": case, "n": n, "rep": r, "k": k,
                   "truth_eps": float(truth.eps_), "chosen": chosen,
                   "weight_none": float(w[0]),
                   "coverage_chosen": hdi_cover(draws[0 if chosen == "none" else 1], pt),
                   "coverage_none": hdi_cover(draws[0], pt),
                   "coverage_floor": hdi_cover(draws[1], pt),
                   "coverage_mixture": hdi_cover(mix, pt),
                   "passed": [bool(fits[f][0].diagnostics_["passed"]) for f in ("none", "floor")]}
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(key, {m: round(row[m], 3) for m in row if m.startswith("coverage")},
                  round(row["weight_none"], 3), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
