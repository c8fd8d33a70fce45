"""The cost of ``eps="average"`` against ``eps="auto"``, side by side on realistic truths.

Run (docs/benchmarks.md, *Averaging over the floor*)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/floor_cost.py --n 300 \\
        --datasets abalone,car,landsat-satellite,page-blocks,segment,waveform-5000

For each case of ``bench_bayes.py --checks coverage_real`` (the same truth and
calibration draws as its first replication at this ``n``), fits the default
``BayesianDirichletCalibrator`` with ``eps="auto"`` and with ``eps="average"``
one after the other in one process, after one warm-up fit of each (compiled
programs loaded), and reports CPU seconds (process time, all threads) and
wall seconds of each, the number of floors sampled, whether each fit passed its
checks, and the medians. The first case's warm-up fits load or compile its
programs only: a later case of another ``k`` compiles its own in its first
(``"auto"``) fit, so compare runs of one commit against another case by case.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_bayes as bb  # noqa: E402


def _timed(q, y, eps: str, seed: int):
    from bayescal.bayes import BayesianDirichletCalibrator

    est = BayesianDirichletCalibrator(eps=eps, random_seed=seed, progressbar=False,
                                      on_failure="warn")
    c0, w0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(q, y)
    return est, time.process_time() - c0, time.perf_counter() - w0


def main(argv=None) -> int:
    from bayescal import DirichletCalibrator
    from bayescal.datasets import make_from_calibrator

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"))
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None, help="JSON lines, one per case")
    args = ap.parse_args(argv)
    rows = []
    for ci, case in enumerate(bb.real_cases(args.scores, args.datasets.split(","))):
        d = bb._load_case(args.scores / f"{case}.npz")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            truth = DirichletCalibrator().fit(d["p_cal"], d["y_cal"])
        q, y, _ = make_from_calibrator(truth, d["p_cal"], args.n, rng=[11, ci, args.n, 0])
        if not rows:  # warm-up: load (or compile) the programs of both
            for eps in ("auto", "average"):
                _timed(q, y, eps, 0)
        auto, auto_cpu, auto_wall = _timed(q, y, "auto", 0)
        avg, avg_cpu, avg_wall = _timed(q, y, "average", 0)
        shares = avg.diagnostics_.get("floor_shares")
        row = {"case": case, "n": args.n, "k": q.shape[1],
               "auto_cpu": auto_cpu, "auto_wall": auto_wall,
               "average_cpu": avg_cpu, "average_wall": avg_wall,
               "floors_sampled": 1 if shares is None else len(shares),
               "ratio_cpu": avg_cpu / auto_cpu,
               "auto_passed": bool(auto.diagnostics_["passed"]),
               "average_passed": bool(avg.diagnostics_["passed"])}
        rows.append(row)
        if args.out is not None:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
        print(case, {key: round(v, 2) if isinstance(v, float) else v for key, v in row.items()
                     if key not in ("case", "n", "k")}, flush=True)
    med = {key: float(np.median([r[key] for r in rows]))
           for key in ("auto_cpu", "average_cpu", "ratio_cpu")}
    print("medians", {key: round(v, 2) for key, v in med.items()},
          "cases with two floors sampled:", sum(r["floors_sampled"] == 2 for r in rows),
          "of", len(rows), "; passing their checks, auto / average:",
          sum(r["auto_passed"] for r in rows), "/", sum(r["average_passed"] for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
