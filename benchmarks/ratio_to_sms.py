"""The default fit against probmetrics' ``sms``, alternated in one process: paired ratios.

Run (the result is quoted in docs/benchmarks.md, section "Scale")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/ratio_to_sms.py --data ../shared/data \\
        --out docs/bench/ratio_to_sms.json

``bench_scale.py`` times one warm fit per fresh process, which a shared
machine's noise moves by tens of percent from run to run, for both methods
alike but not at the same moment. This script fits ``DirichletCalibrator()``
and ``sms`` alternately on the same data in one process (BLAS and torch at one
thread), after one warm-up fit of each, ``--reps`` times, and reports the
median CPU seconds of each and the median of the paired ratios (default / ``sms``
of each repetition). Cases: the four CIFAR calibration sets of ``DIR/dnn``
(``idx_val``) and ``make_dnn_scores(5000, k, rng=k)`` at k = 10 and 100 (the
first 5000 rows of ``bench_scale.py``'s draw).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def cases(data: Path | None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    from bayescal.datasets import make_dnn_scores

    out = []
    for k in (10, 100):
        q, y = make_dnn_scores(10000, k, rng=k)
        out.append((f"synthetic k={k}", q[:5000], y[:5000]))
    if data is not None:
        for f in sorted((data / "dnn").glob("*.npz")):
            with np.load(f, allow_pickle=False) as d:
                p = d["probs"].astype(np.float64)
                p /= p.sum(axis=1, keepdims=True)
                out.append((f.stem, p[d["idx_val"]], d["y"][d["idx_val"]]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch
    from probmetrics.calibrators import get_calibrator

    from bayescal import DirichletCalibrator

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    fitters = {"default": lambda q, y: DirichletCalibrator().fit(q, y),
               "sms": lambda q, y: get_calibrator("sms").fit(q, y)}
    rows = []
    print("| data | k | default CPU s | `sms` CPU s | median paired ratio (range) |")
    print("|---|---|---|---|---|")
    for name, q, y in cases(args.data):
        for fit in fitters.values():
            fit(q, y)  # warm-up: first-call costs
        times: dict[str, list[float]] = {m: [] for m in fitters}
        for _ in range(args.reps):
            for m, fit in fitters.items():
                t = time.process_time()
                fit(q, y)
                times[m].append(time.process_time() - t)
        ratio = np.array(times["default"]) / np.array(times["sms"])
        row = {"data": name, "k": q.shape[1], "n": len(y), **{f"{m}_cpu_s": times[m]
                                                                for m in fitters},
               "median_default": float(np.median(times["default"])),
               "median_sms": float(np.median(times["sms"])),
               "median_ratio": float(np.median(ratio)), "min_ratio": float(ratio.min()),
               "max_ratio": float(ratio.max())}
        rows.append(row)
        print(f"| {name} | {q.shape[1]} | {row['median_default']:.3f} | "
              f"{row['median_sms']:.3f} | {row['median_ratio']:.2f} "
              f"({row['min_ratio']:.2f}-{row['max_ratio']:.2f}) |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
