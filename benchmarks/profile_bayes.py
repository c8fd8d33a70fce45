"""Where a default Bayesian fit's time goes: a profile of ``BayesianDirichletCalibrator().fit``.

Run (the result is quoted in docs/benchmarks.md, section "Compiled sampler")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/profile_bayes.py \\
        --data ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz

One default fit (``random_seed=1``) under :mod:`cProfile` on the ``idx_val``
rows of a network-output file, after one unprofiled fit (``random_seed=0``)
that compiles what the fit needs. Prints the wall seconds of both, the
coordinates and tries of the profiled fit, and bayescal's functions by
cumulative time: the sampling (``compiled._run``) and what surrounds it (the
mode, the whitening, the ``log_likelihood`` group, the diagnostics).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import warnings
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a network-output .npz")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args(argv)

    from bayescal.bayes import BayesianDirichletCalibrator

    with np.load(args.data) as f:
        q, y = f["probs"][f["idx_val"]], f["y"][f["idx_val"]]
    print(f"{args.data.stem}: k={q.shape[1]}, n={len(y)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        BayesianDirichletCalibrator(random_seed=0, progressbar=False).fit(q, y)
        print(f"first fit {time.perf_counter() - t:.1f} s (compiles)")
        profile = cProfile.Profile()
        t = time.perf_counter()
        profile.enable()
        est = BayesianDirichletCalibrator(random_seed=1, progressbar=False).fit(q, y)
        profile.disable()
        print(f"profiled fit {time.perf_counter() - t:.1f} s; coordinates "
              f"{est.diagnostics_['coordinates']}, tries {len(est.diagnostics_['attempts'])}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(r"bayescal", args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
