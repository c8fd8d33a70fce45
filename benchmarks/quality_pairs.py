"""Per-case test log-loss of one method against others, from bench_quality.py's results.

    python benchmarks/quality_pairs.py results/quality-bayes/results.jsonl \\
        --method bayes --against temperature dirichlet

Prints one row per case (k, calibration rows, the log-losses and the ratios
``method / other``) and, per other method, how many cases the method is no
worse than it (ratio <= 1), within 2 % (<= 1.02), the largest ratio, the mean
ratio and the mean log-losses, over the cases where every method has a
result; failed fits (an error recorded instead of a log-loss) are counted and
listed apart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--method", default="bayes")
    ap.add_argument("--against", nargs="+", default=["temperature", "dirichlet"])
    args = ap.parse_args(argv)
    rows: dict[str, dict[str, dict]] = {}
    for line in args.results.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:  # a line cut by an interrupted run
            continue
        rows.setdefault(r["case"], {})[r["method"]] = r
    names = [args.method, *args.against]
    done, failed = [], []
    for case, by in rows.items():
        if not all(m in by for m in names):
            continue
        if any("log_loss" not in by[m] for m in names):
            failed.append((case, [m for m in names if "log_loss" not in by[m]]))
            continue
        done.append((case, by))
    head = ["case", "k", "n_cal", *names, *[f"{args.method}/{o}" for o in args.against]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios = {o: [] for o in args.against}
    for case, by in done:
        ll = [by[m]["log_loss"] for m in names]
        rs = [ll[0] / by[o]["log_loss"] for o in args.against]
        for o, r in zip(args.against, rs, strict=True):
            ratios[o].append(r)
        first = by[args.method]
        print(f"| {case} | {first['k']} | {first['n_cal']} | "
              + " | ".join(f"{v:.4f}" for v in ll) + " | "
              + " | ".join(f"{r:.3f}" for r in rs) + " |")
    print()
    n = len(done)
    for o in args.against:
        r = np.asarray(ratios[o])
        if n == 0:
            break
        print(f"{args.method} vs {o}: {n} cases; no worse in {np.sum(r <= 1.0)} "
              f"({np.mean(r <= 1.0):.0%}), within 2 % in {np.sum(r <= 1.02)} "
              f"({np.mean(r <= 1.02):.0%}); max ratio {r.max():.3f}, mean ratio {r.mean():.4f}")
    if n:
        means = {m: np.mean([by[m]["log_loss"] for _, by in done]) for m in names}
        print("mean log-loss: " + ", ".join(f"{m} {v:.4f}" for m, v in means.items()))
    print(f"failed fits: {len(failed)}" + "".join(f"\n  {c}: {', '.join(ms)}"
                                                 for c, ms in failed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
