"""Where the default fit's time goes: a profile of ``DirichletCalibrator().fit``.

Run (the result is quoted in docs/benchmarks.md, section "Scale")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/profile_default.py \\
        --data ../shared/data/dnn/netcal_cifar100_wideresnet16-4.npz
    OPENBLAS_NUM_THREADS=1 python benchmarks/profile_default.py --dnn 1000 25000

One fit under :mod:`cProfile` (``idx_val`` rows of a network-output file, or
``make_dnn_scores(n, k)``), after one unprofiled warm-up fit. Prints the CPU
time of the profiled fit, what the default chose, and the functions that
took the most time (own time), with their call counts: solver fits
(``fit_multinomial``), gradient passes (``state``), Hessian-vector products
(``hessp``), dense Hessians (``hess_dense``), preconditioner builds, and the
evidence's per-class blocks.
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

from bayescal import DirichletCalibrator
from bayescal.datasets import make_dnn_scores


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="a network-output .npz")
    ap.add_argument("--dnn", type=int, nargs=2, metavar=("K", "N"), default=None,
                    help="make_dnn_scores(N, K, rng=K) instead")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    if args.data is not None:
        with np.load(args.data, allow_pickle=False) as f:
            p = f["probs"].astype(np.float64)
            p /= p.sum(axis=1, keepdims=True)
            q, y = p[f["idx_val"]], f["y"][f["idx_val"]]
        name = args.data.stem
    else:
        k, n = args.dnn or (100, 5000)
        q, y = make_dnn_scores(n, k, rng=k)
        name = f"make_dnn_scores({n}, {k})"
    warnings.simplefilter("ignore")
    DirichletCalibrator().fit(q, y)  # warm-up: imports, first-call costs
    prof = cProfile.Profile()
    t0 = time.process_time()
    prof.enable()
    cal = DirichletCalibrator().fit(q, y)
    prof.disable()
    cpu = time.process_time() - t0
    sel = cal.selection_ or {}
    print(f"{name}: k={q.shape[1]}, n={len(y)}; profiled fit {cpu:.2f} CPU s "
          "(cProfile adds a little)")
    print(f"chose reg_lambda={cal.reg_lambda_:.3g}, reg_diag={cal.reg_diag_:.3g}, "
          f"reg_mu={cal.reg_mu_:.3g}, eps={cal.eps_:.3g}, T={cal.temperature_:.4f}; "
          f"evidence iterations {sel.get('n_evidence_iter')}, path index {sel.get('path_index')}")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
