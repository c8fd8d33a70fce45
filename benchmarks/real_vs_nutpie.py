"""The default Bayesian fit on one real calibration set: the compiled sampler against nutpie.

Side by side in one process, alternating (``jax`` seed 0, ``nutpie`` seed 0,
``jax`` seed 1, ``nutpie`` seed 1; the first ``jax`` fit reads or compiles its
program, nutpie compiles its JAX log density on each fit): wall and CPU
seconds, the smallest bulk or tail ESS over ``s``, ``tau``, ``W``, ``b`` and
ESS per wall second, R-hat, divergences, tries and the coordinates. The case
is a cached score file of ``benchmarks/bench_quality.py`` (seed 0), fitted on
its whole calibration split::

    OPENBLAS_NUM_THREADS=1 python benchmarks/real_vs_nutpie.py \\
        netcal_cifar10_wideresnet16-4__n5000 out.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SCORES = Path(__file__).resolve().parents[1] / "results" / "quality" / "scores"


def main(case: str, out: Path) -> None:
    from bayescal.bayes import BayesianDirichletCalibrator

    d = dict(np.load(SCORES / f"{case}.npz"))
    rows = []
    for sampler, seed in (("jax", 0), ("nutpie", 0), ("jax", 1), ("nutpie", 1)):
        t, c = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BayesianDirichletCalibrator(sampler=sampler, random_seed=seed,
                                              progressbar=False, on_failure="warn").fit(
                                                  d["p_cal"], d["y_cal"])
        wall = time.perf_counter() - t
        dg = est.diagnostics_
        ess = min(dg["ess_bulk_min"], dg["ess_tail_min"])
        rows.append({"sampler": sampler, "seed": seed, "wall": round(wall, 1),
                     "cpu": round(time.process_time() - c, 1), "ess": round(ess),
                     "ess_per_s": round(ess / wall, 1), "rhat": round(dg["r_hat_max"], 4),
                     "div": int(dg["divergences"]), "tries": len(dg.get("attempts", [1])),
                     "coords": dg.get("coordinates"),
                     "s_mean": round(float(est.idata_.posterior["s"].mean()), 4)})
        print(json.dumps(rows[-1]), flush=True)
        out.write_text(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
