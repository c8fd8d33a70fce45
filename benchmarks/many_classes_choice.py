"""The default's choice at many classes against the evidence and five folds (CIFAR-100).

Run (needs probmetrics and torch for ``sms``; the result is quoted in
docs/benchmarks.md, section "Scale")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/many_classes_choice.py \\
        --data ../shared/data --out results.jsonl

For each CIFAR-100 network-output file of ``DATA/dnn`` and each calibration
size ``n`` (random subsamples of its ``idx_val`` rows, three seeds below the
full set, the full set permuted by seed 0), fits ``DirichletCalibrator()``
twice -- with its many-class choice (one held-out split,
:data:`bayescal.structured.HOLDOUT_MIN_K` classes and more) and with that
threshold set beyond reach (the evidence and the five-fold check) -- plus
temperature scaling and probmetrics' ``sms``, and writes each one's test
log-loss on ``idx_test`` and CPU seconds (one thread) as a JSON line.
``--summary FILE`` prints the per-(file, n) mean ratios.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import log_loss

import bayescal.structured as structured
from bayescal import DirichletCalibrator, TemperatureScaler


def _sms(q: np.ndarray, y: np.ndarray, qt: np.ndarray) -> np.ndarray:
    import torch
    from probmetrics.calibrators import get_calibrator

    torch.set_num_threads(1)
    return np.asarray(get_calibrator("sms").fit(q, y).predict_proba(qt))


def run(data: Path, out: Path, sizes: list[int]) -> None:
    threshold = structured.HOLDOUT_MIN_K
    with out.open("a") as f:
        for path in sorted((data / "dnn").glob("*cifar100*.npz")):
            with np.load(path, allow_pickle=False) as d:
                p = d["probs"].astype(np.float64)
                p /= p.sum(axis=1, keepdims=True)
                iv, it = d["idx_val"], d["idx_test"]
                Q, Y, qt, yt = p[iv], d["y"][iv], p[it], d["y"][it]
            k = Q.shape[1]
            for n in sizes:
                for seed in ((0, 1, 2) if n < len(Y) else (0,)):
                    rows = np.random.default_rng(seed).permutation(len(Y))[:n]
                    q, y = Q[rows], Y[rows]
                    rec = {"case": path.stem, "n": n, "seed": seed}
                    for name in ("new", "old", "ts", "sms"):
                        t = time.process_time()
                        if name in ("new", "old"):
                            structured.HOLDOUT_MIN_K = threshold if name == "new" else 10**9
                            try:
                                pt = DirichletCalibrator().fit(q, y).predict_proba(qt)
                            finally:
                                structured.HOLDOUT_MIN_K = threshold
                        elif name == "ts":
                            pt = TemperatureScaler().fit(np.log(q), y).predict_proba(np.log(qt))
                        else:
                            pt = _sms(q, y, qt)
                        rec[name + "_s"] = time.process_time() - t
                        rec[name] = float(log_loss(yt, np.clip(pt, 1e-300, None),
                                                   labels=np.arange(k)))
                    print(json.dumps(rec), file=f, flush=True)
                    print(json.dumps(rec), flush=True)


def summary(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print("| file | n | subsamples | new / old | new / sms | new / TS | CPU s new / old / sms |")
    print("|---|---|---|---|---|---|---|")
    for case in sorted({r["case"] for r in rows}):
        for n in sorted({r["n"] for r in rows if r["case"] == case}):
            rr = [r for r in rows if r["case"] == case and r["n"] == n]

            def ratio(a: str, b: str, rr: list = rr) -> float:
                return float(np.mean([r[a] / r[b] for r in rr]))

            secs = " / ".join(f"{np.mean([r[m + '_s'] for r in rr]):.2f}"
                              for m in ("new", "old", "sms"))
            print(f"| {case} | {n} | {len(rr)} | {ratio('new', 'old'):.4f} | "
                  f"{ratio('new', 'sms'):.4f} | {ratio('new', 'ts'):.4f} | {secs} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=Path("many_classes_choice.jsonl"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    ap.add_argument("--summary", type=Path, default=None, help="only summarise this file")
    args = ap.parse_args(argv)
    if args.summary is not None:
        summary(args.summary)
        return 0
    warnings.simplefilter("ignore")
    run(args.data, args.out, args.sizes)
    summary(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
