"""Before/after check of the MAP family on the quality benchmark's cached scores.

Run once per commit (e.g. the old one from a ``git worktree``, through
``PYTHONPATH``), then compare (the result is quoted in docs/benchmarks.md,
section "Scale")::

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=OLD_TREE python benchmarks/same_fits.py \\
        --scores results/quality/scores --out before.json
    OPENBLAS_NUM_THREADS=1 python benchmarks/same_fits.py \\
        --scores results/quality/scores --out after.json
    python benchmarks/same_fits.py --compare before.json after.json

``--scores`` is ``benchmarks/bench_quality.py``'s cache of classifier scores
(``OUT/scores/*.npz``: ``p_cal``, ``y_cal``, ``p_test``, ``y_test``). Each
method is the registry's (:func:`bayescal.calibrators.registry.make_calibrator`
with ``input="probs"``, as the quality benchmark fits it) at its defaults; the
file records each case's test log-loss, ``k`` and fit CPU seconds (one
thread). ``--compare`` lists the cases whose test log-loss moved by more than
``--rtol`` and the largest relative move of the rest.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def run(scores: Path, methods: list[str]) -> dict[str, dict[str, float]]:
    from bayescal.calibrators.registry import make_calibrator

    out: dict[str, dict[str, float]] = {}
    for path in sorted(scores.glob("*.npz")):
        with np.load(path, allow_pickle=False) as d:
            pc, yc, pt, yt = d["p_cal"], d["y_cal"], d["p_test"], d["y_test"]
        k = pc.shape[1]
        for m in methods:
            t = time.process_time()
            p = make_calibrator(m, input="probs").fit(pc, yc).predict_proba(pt)
            cpu = time.process_time() - t
            ll = float(-np.mean(np.log(np.clip(p[np.arange(len(yt)), yt], 1e-300, None))))
            out[f"{path.stem}/{m}"] = {"log_loss": ll, "k": k, "n": len(yc), "cpu_s": cpu}
        print(path.stem, {m: round(out[f"{path.stem}/{m}"]["log_loss"], 5) for m in methods},
              flush=True)
    return out


def compare(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], rtol: float) -> None:
    keys = sorted(set(a) & set(b))
    moved = [c for c in keys if abs(b[c]["log_loss"] / a[c]["log_loss"] - 1) > rtol]
    rest = [c for c in keys if c not in moved]
    print(f"{len(keys)} fits; {len(moved)} moved by more than {rtol:g} relative")
    for c in moved:
        print(f"  {c} (k={a[c]['k']}, n={a[c]['n']}): {a[c]['log_loss']:.5f} -> "
              f"{b[c]['log_loss']:.5f} ({b[c]['log_loss'] / a[c]['log_loss']:.4f}); "
              f"CPU s {a[c]['cpu_s']:.2f} -> {b[c]['cpu_s']:.2f}")
    if rest:
        worst = max(abs(b[c]["log_loss"] / a[c]["log_loss"] - 1) for c in rest)
        print(f"the rest: largest relative move {worst:.2g}")
    print(f"total CPU s {sum(a[c]['cpu_s'] for c in keys):.1f} -> "
          f"{sum(b[c]['cpu_s'] for c in keys):.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scores", type=Path, default=Path("results/quality/scores"))
    ap.add_argument("--methods", nargs="+", default=["dirichlet", "matrix", "vector"])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--compare", type=Path, nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--rtol", type=float, default=1e-8)
    args = ap.parse_args(argv)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        compare(before, after, args.rtol)
        return 0
    warnings.simplefilter("ignore")
    out = run(args.scores, args.methods)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
