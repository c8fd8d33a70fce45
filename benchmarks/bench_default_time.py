"""Fit time of the default calibrator against one fixed-penalty fit and the peers.

Run (results and the exact command in docs/benchmarks.md, section "Quality at defaults")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_default_time.py --data ../shared/data

On the ``idx_val`` rows (n = 5000) of each network-output file in ``DATA/dnn``,
side by side and interleaved (one repeat of every method, then the next
repeat), median of ``--repeat`` runs:

* ``DirichletCalibrator()`` (the default: evidence strengths, the floor choice
  and the 5-fold one-standard-error check);
* one fixed-penalty fit of the same map (``reg_lambda = reg_diag = reg_mu =
  1``, ``eps`` fixed), the unit the issue's "at most 20 x" is counted in;
* ``TemperatureScaler``;
* probmetrics' ``sms`` (structured matrix scaling) and ``ts-mix`` when installed.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bayescal import EPS, DirichletCalibrator, TemperatureScaler, log_features

HERE = Path(__file__).resolve().parent


def _methods() -> dict[str, Any]:
    out: dict[str, Any] = {
        "default DirichletCalibrator()": lambda q, y: DirichletCalibrator().fit(q, y),
        "one fixed-penalty fit": lambda q, y: DirichletCalibrator(
            reg_lambda=1.0, reg_diag=1.0, reg_mu=1.0, eps=EPS).fit(q, y),
        "TemperatureScaler": lambda q, y: TemperatureScaler().fit(log_features(q), y),
    }
    try:
        from probmetrics.calibrators import get_calibrator

        out["probmetrics sms"] = lambda q, y: get_calibrator("sms").fit(q, y)
        out["probmetrics ts-mix"] = lambda q, y: get_calibrator("ts-mix").fit(q, y)
    except ImportError:
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--files", nargs="*", default=None, help="dnn file stems (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = ap.parse_args(argv)
    files = sorted((args.data / "dnn").glob("*.npz"))
    if args.files:
        files = [f for f in files if f.stem in args.files]
    methods = _methods()
    results = []
    for path in files:
        with np.load(path, allow_pickle=False) as f:
            probs = f["probs"].astype(np.float64)
            q = probs / probs.sum(axis=1, keepdims=True)
            q, y = q[f["idx_val"]], f["y"][f["idx_val"]]
        times: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(args.repeat):
            for name, fit in methods.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    fit(q, y)
                    times[name].append(time.perf_counter() - t0)
        med = {m: float(np.median(t)) for m, t in times.items()}
        row = {"file": path.stem, "n": int(len(y)), "k": int(q.shape[1]), "median_s": med,
               "default_over_fixed": med["default DirichletCalibrator()"]
               / med["one fixed-penalty fit"]}
        if "probmetrics sms" in med:
            row["default_over_sms"] = med["default DirichletCalibrator()"] / med["probmetrics sms"]
        results.append(row)
        print(json.dumps(row), flush=True)
    print()
    names = list(methods)
    print("| data | k | n | " + " | ".join(names) + " | default / fixed | default / sms |")
    print("|---|---|---|" + "---|" * (len(names) + 2))
    for r in results:
        cells = " | ".join(f"{r['median_s'][m]:.3g} s" for m in names)
        sms = r.get("default_over_sms")
        print(f"| {r['file']} | {r['k']} | {r['n']} | {cells} | {r['default_over_fixed']:.1f}x | "
              f"{'-' if sms is None else f'{sms:.2f}x'} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
