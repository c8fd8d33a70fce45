"""What the stalled-chain check costs a default fit: the same fits with and without it.

Run (quoted in docs/benchmarks.md, section "A stalled chain in single precision")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/stall_check_cost.py \\
        ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz --seeds 1,2,3

One unmeasured fit first (it compiles the program), then for every seed the
default ``BayesianDirichletCalibrator`` on the ``idx_val`` rows twice, in
turn: with its retries (``retry_draws="auto"``: where the likelihood's rows
are in single precision, every chain's warm-up runs as a call of its own and
its step size is checked) and with ``retry_draws=None`` (no check, one call
per chain). The draws are the same (the posterior mean of ``s`` is printed
to show it); one JSON line per fit with its wall seconds.
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
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args(argv)

    from bayescal.bayes import BayesianDirichletCalibrator

    with np.load(args.data) as f:
        q, y = f["probs"][f["idx_val"]], f["y"][f["idx_val"]]
    kw = {"progressbar": False, "on_failure": "warn"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # judged by the printed diagnostics
        BayesianDirichletCalibrator(random_seed=0, **kw).fit(q, y)
        for seed in (int(s) for s in args.seeds.split(",")):
            for retry_draws in ("auto", None):
                t0 = time.perf_counter()
                est = BayesianDirichletCalibrator(random_seed=seed, retry_draws=retry_draws,
                                                  **kw).fit(q, y)
                print(json.dumps({
                    "seed": seed, "stall_check": retry_draws is not None,
                    "wall_s": round(time.perf_counter() - t0, 1),
                    "passed": bool(est.diagnostics_["passed"]),
                    "tries": len(est.diagnostics_["attempts"]),
                    "s_mean": float(est.idata_.posterior["s"].mean())}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
