"""Warm default Bayesian fits on one network-output file: wall, CPU, leapfrog steps, ESS.

Run (the result is quoted in docs/benchmarks.md, section "Compiled sampler")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/default_fit_times.py \\
        --data ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz --fits 3
    OPENBLAS_NUM_THREADS=1 taskset -c 0 python benchmarks/default_fit_times.py \\
        --data ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz --fits 3

``BayesianDirichletCalibrator(random_seed=i)`` for ``i = 0 .. fits - 1`` on the
file's ``idx_val`` rows, one after the other in this process (the first fit
reads or compiles the sampler's program). Per fit: wall and CPU seconds, the
mean leapfrog steps per kept draw, wall and CPU seconds per thousand kept
steps (the kept draws' steps, 4 chains; the warm-up's are not counted),
min(bulk, tail) ESS, divergences and the coordinates sampled. Under
``taskset -c 0`` the process has one core: the chains take turns on it.

``--pairing`` fits each seed twice, without and with the chains regrouped by
step size after their warm-up (``compiled.PAIR_TURNS``), alternating which
goes first, after one unmeasured fit that reads the program; the draws are
the same, so the two differ only in how the chains share the devices::

    OPENBLAS_NUM_THREADS=1 python benchmarks/default_fit_times.py \\
        --data ../shared/data/dnn/netcal_cifar10_wideresnet16-4.npz --fits 3 --pairing
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a network-output .npz")
    ap.add_argument("--fits", type=int, default=3)
    ap.add_argument("--pairing", action="store_true",
                    help="each seed without and with the chains regrouped by step size")
    args = ap.parse_args(argv)

    from bayescal.bayes import BayesianDirichletCalibrator, compiled

    with np.load(args.data) as f:
        q, y = f["probs"][f["idx_val"]], f["y"][f["idx_val"]]
    print(f"{args.data.stem}: k={q.shape[1]}, n={len(y)}")
    if args.pairing:
        return _pairing(BayesianDirichletCalibrator, compiled, q, y, args.fits)
    print("| seed | wall s | CPU s | steps per draw | wall s / 1000 steps | CPU s / 1000 steps "
          "| min ESS | divergences | coordinates |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in range(args.fits):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, c = time.perf_counter(), time.process_time()
            est = BayesianDirichletCalibrator(random_seed=seed, progressbar=False).fit(q, y)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        steps = est.idata_.sample_stats["n_steps"].values
        d = est.diagnostics_
        ess = min(d["ess_bulk_min"], d["ess_tail_min"])
        print(f"| {seed} | {wall:.1f} | {cpu:.1f} | {steps.mean():.1f} | "
              f"{1e3 * wall / steps.sum():.2f} | {1e3 * cpu / steps.sum():.2f} | {ess:.0f} | "
              f"{d['divergences']} | {d['coordinates']} |", flush=True)
    return 0


def _pairing(cls, compiled, q: np.ndarray, y: np.ndarray, fits: int) -> int:
    """``--pairing``: wall seconds of each seed without and with the regrouping."""
    before = compiled.PAIR_TURNS
    try:
        return _pairs(cls, compiled, q, y, fits)
    finally:
        compiled.PAIR_TURNS = before


def _pairs(cls, compiled, q: np.ndarray, y: np.ndarray, fits: int) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls(random_seed=fits, progressbar=False).fit(q, y)  # reads or compiles the program
        print("| seed | steps per chain | wall s, chains in their slots | wall s, regrouped "
              "| same draws |")
        print("|---|---|---|---|---|")
        for seed in range(fits):
            wall, draws = {}, {}
            for flag in (False, True) if seed % 2 == 0 else (True, False):
                compiled.PAIR_TURNS = flag
                t = time.perf_counter()
                est = cls(random_seed=seed, progressbar=False).fit(q, y)
                wall[flag] = time.perf_counter() - t
                draws[flag] = est.idata_.posterior["s"].values
            steps = est.idata_.sample_stats["n_steps"].values.sum(axis=1)
            print(f"| {seed} | {', '.join(str(int(v)) for v in steps)} | {wall[False]:.1f} | "
                  f"{wall[True]:.1f} | {np.array_equal(draws[False], draws[True])} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
