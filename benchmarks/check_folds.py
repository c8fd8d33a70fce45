"""What the default's held-out check buys at many rows: 5 folds against 3 and one split.

The default ``DirichletCalibrator()`` scores its candidate strengths by
``cv``-fold cross-validation (``bayescal.structured``, step 2): at k = 10 about
30 of its 48 solver fits. With many calibration rows each fold is large, so a
cheaper check might choose the same map. This refits the default on every
cached case of the quality grid (``benchmarks/bench_quality.py``'s scores)
with at least ``--min-rows`` calibration rows and at most 30 classes (larger k
already uses one split, ``structured.HOLDOUT_MIN_K``), once per variant of the
check, and prints each fit's test log-loss and CPU seconds::

    OPENBLAS_NUM_THREADS=1 python benchmarks/check_folds.py --scores results/quality/scores

Variants: ``5 folds`` (the default), ``3 folds`` (``StratifiedKFold(3)``) and
``1 split`` (the first of the 5 folds' splits: 80 / 20), set by replacing
``bayescal.structured.cv_splits`` for the fit.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"))
    ap.add_argument("--min-rows", type=int, default=2000)
    args = ap.parse_args(argv)

    import bayescal.structured as structured
    from bayescal.calibrators.registry import make_calibrator

    real = structured.cv_splits
    variants = {"5 folds": real,
                "3 folds": lambda cv, y: real(3, y),
                "1 split": lambda cv, y: real(cv, y)[:1]}
    print("| case | n | k | " + " | ".join(f"{v}: test log-loss (CPU s)" for v in variants)
          + " |")
    print("|---|---|---|" + "---|" * len(variants))
    for path in sorted(args.scores.glob("*.npz")):
        d = np.load(path)
        n, k = len(d["y_cal"]), d["p_cal"].shape[1]
        if n < args.min_rows or k >= structured.HOLDOUT_MIN_K:
            continue
        cells = []
        for splits in variants.values():
            structured.cv_splits = splits
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = time.process_time()
                    est = make_calibrator("dirichlet", input="probs").fit(d["p_cal"], d["y_cal"])
                    cpu = time.process_time() - t
            finally:
                structured.cv_splits = real
            p, y = est.predict_proba(d["p_test"]), d["y_test"]
            ll = -np.mean(np.log(np.maximum(p[np.arange(len(y)), y], np.finfo(float).eps)))
            cells.append(f"{ll:.6f} ({cpu:.2f})")
        print(f"| {path.stem} | {n} | {k} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
