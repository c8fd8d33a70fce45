"""The default Bayesian fit at other step-size targets, on one network-output file.

Run (quoted in docs/benchmarks.md, section "A lower step-size target")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/target_accept.py \\
        ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz --targets 0.95,0.9,0.8

One unprofiled fit first (it compiles the program; a target is an argument of
the program, so the others compile nothing), then for every target and seed a
default ``BayesianDirichletCalibrator`` with that ``target_accept``, without
its retries (``retry_draws=None``, ``retry_target_accept=None``: one run each,
judged by its own checks), on the ``idx_val`` rows. Prints one JSON line per
fit: wall seconds, mean leapfrog steps per kept draw, the smallest bulk and
tail ESS, ESS per second (the smaller of the two over the wall time), the
largest R-hat, divergences and whether the checks passed.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="a network-output .npz (probs, y, idx_val)")
    ap.add_argument("--targets", default="0.95,0.9,0.8")
    ap.add_argument("--seeds", default="1,2")
    args = ap.parse_args(argv)

    from bayescal.bayes import BayesianDirichletCalibrator

    with np.load(args.data) as f:
        q, y = f["probs"][f["idx_val"]], f["y"][f["idx_val"]]
    once = {"progressbar": False, "retry_draws": None, "retry_target_accept": None,
            "on_failure": "warn"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # judged by the printed diagnostics
        BayesianDirichletCalibrator(random_seed=0, **once).fit(q, y)
        for target in (float(t) for t in args.targets.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                t0 = time.perf_counter()
                est = BayesianDirichletCalibrator(random_seed=seed, target_accept=target,
                                                  **once).fit(q, y)
                wall = time.perf_counter() - t0
                d = est.diagnostics_
                ess = min(d["ess_bulk_min"], d["ess_tail_min"])
                print(json.dumps({
                    "target_accept": target, "seed": seed, "wall_s": round(wall, 1),
                    "leapfrog_per_draw": round(float(est.idata_.sample_stats["n_steps"].mean()), 1),
                    "ess_bulk": round(d["ess_bulk_min"]), "ess_tail": round(d["ess_tail_min"]),
                    "ess_per_s": round(ess / wall, 1), "r_hat_max": round(d["r_hat_max"], 4),
                    "divergences": int(d["divergences"]), "passed": bool(d["passed"]),
                    "coordinates": d.get("coordinates")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
