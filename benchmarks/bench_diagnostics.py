"""Speed of the vectorised consistency-resampling test against a per-resample loop.

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_diagnostics.py

Times ``p_ece`` (classwise and confidence) at n = 10,000 and k = 100 with
1,000 resamples (median of 3 runs), and the obvious loop implementation (draw
labels with ``Generator.choice`` per sample block and call ``classwise_ece``
once per resample) on 20 resamples, scaled to 1,000, in the same process.
Then times the two label samplers of the classwise test side by side at the
size of a ``shuttle`` test fold of the paper's 5 x 3 protocol (n = 19,333,
k = 7): direct CDF comparisons (used for k <= 32) against the single binary
search (used beyond).
"""

from __future__ import annotations

import time

import numpy as np

import bayescal.metrics as metrics
from bayescal.metrics import classwise_ece, consistency_bands, expected_calibration_error, p_ece

N, K, R = 10_000, 100, 1_000


def median_time(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def loop_p_ece(y, p, metric, n_resamples, rng):
    """Reference: one label draw and one metric call per resample."""
    ece = classwise_ece if metric == "classwise" else expected_calibration_error
    observed = ece(y, p)
    cum = np.cumsum(p, axis=1)
    cum /= cum[:, -1:]
    count = 0
    for _ in range(n_resamples):
        u = rng.random(len(y))
        ystar = np.minimum((u[:, None] >= cum).sum(axis=1), p.shape[1] - 1)
        count += ece(ystar, p) >= observed
    return (1 + count) / (1 + n_resamples)


def main() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(K, 0.1), size=N)
    y = np.array([rng.choice(K, p=row) for row in p])
    print(f"n = {N}, k = {K}, {R} resamples; median of 3 (loop: 20 resamples x {R // 20})")
    for metric in ("classwise", "confidence"):
        vec = median_time(lambda m=metric: p_ece(y, p, metric=m, n_resamples=R, rng=1))
        loop = median_time(lambda m=metric: loop_p_ece(y, p, m, 20, np.random.default_rng(1)))
        loop *= R / 20
        print(f"p_ece {metric:<10} vectorised {vec:7.2f} s   loop {loop:7.1f} s   "
              f"ratio {loop / vec:5.1f}x")
    bands = median_time(lambda: consistency_bands(p, kind="classwise", n_resamples=R, rng=1))
    print(f"consistency_bands classwise         {bands:7.2f} s")
    n, k = 19_333, 7
    p = rng.dirichlet(np.ones(k), size=n)
    y = np.array([rng.choice(k, p=row) for row in p])
    default = metrics._FEW_CLASSES  # k = 7 <= default: the comparison sampler
    comp = median_time(lambda: p_ece(y, p, n_resamples=R, rng=1))
    metrics._FEW_CLASSES = 0  # force the binary search
    search = median_time(lambda: p_ece(y, p, n_resamples=R, rng=1))
    metrics._FEW_CLASSES = default
    print(f"p_ece classwise n = {n}, k = {k}: comparisons {comp:5.2f} s   binary search "
          f"{search:5.2f} s   ratio {search / comp:4.2f}x")


if __name__ == "__main__":
    main()
