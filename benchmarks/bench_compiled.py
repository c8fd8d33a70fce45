"""The default Bayesian fit by sampler: first fit in a fresh process, then warm.

Each (case, sampler) cell runs in its own fresh Python process, which fits
the default ``BayesianDirichletCalibrator`` twice on one ``make_dirgen`` data
set (seeds 0 and 1 of the sampler): the first fit pays compilation (from the
disk caches when they hold the model), the second is what every further fit
of that shape costs. Reported per fit: wall and CPU seconds (imports
excluded), the coordinates, the smallest bulk and tail ESS over ``s``,
``tau``, ``W``, ``b``, ESS per wall second, max R-hat, divergences and tries.

    python benchmarks/bench_compiled.py --out docs/bench/compiled.json
    python benchmarks/bench_compiled.py --markdown docs/bench/compiled.json

Options: ``--cases 3x300,10x5000`` (k x n), ``--samplers jax,nutpie,pymc``,
``--fits 1`` (the first fit only).
BLAS is held to one thread (the samplers do it themselves while sampling).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, sys, time, warnings
import numpy as np
k, n, sampler, fits = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
from bayescal.bayes import BayesianDirichletCalibrator
from bayescal.datasets import make_dirgen
q, y = make_dirgen(n, k, rng=0)[:2]
out = []
for seed in range(fits):
    w, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianDirichletCalibrator(sampler=sampler, random_seed=seed, progressbar=False,
                                          on_failure="warn").fit(q, y)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    d = est.diagnostics_
    ess = min(d["ess_bulk_min"], d["ess_tail_min"])
    out.append({"fit": "first" if seed == 0 else "warm", "wall_s": wall, "cpu_s": cpu,
                "sampler_used": est.sampler_, "coordinates": d.get("coordinates"),
                "ess_bulk": d["ess_bulk_min"], "ess_tail": d["ess_tail_min"],
                "ess_per_s": ess / wall, "r_hat": d["r_hat_max"],
                "divergences": d["divergences"], "tries": len(d["attempts"]),
                "passed": d["passed"]})
print("RESULT " + json.dumps(out))
"""


def run_cell(k: int, n: int, sampler: str, timeout: float, fits: int = 2) -> list[dict]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(k), str(n), sampler, str(fits)],
                              capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"fit": "first", "error": f"stopped after {timeout:.0f} s"}]
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            rows = json.loads(line[7:])
            for r in rows:
                r["process_s"] = time.perf_counter() - start
            return rows
    # a refusal or a crash: its last line, and the whole process's wall time (imports too)
    return [{"fit": "first", "error": "".join(proc.stderr.strip().splitlines()[-1:]),
             "process_s": time.perf_counter() - start}]


def markdown(path: Path) -> str:
    doc = json.loads(path.read_text())
    lines = ["| k | n | sampler | fit | wall s | CPU s | coordinates | min bulk / tail ESS | "
             "ESS / s | max R-hat | divergences | tries |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in doc["cells"]:
        for r in cell["fits"]:
            if "error" in r:
                error = r["error"] if len(r["error"]) < 100 else r["error"][:97] + "..."
                took = f" (process {r['process_s']:.1f} s)" if "process_s" in r else ""
                lines.append(f"| {cell['k']} | {cell['n']} | {cell['sampler']} | {r['fit']} | "
                             f"{error}{took} | | | | | | | |")
                continue
            used = r["sampler_used"]
            name = cell["sampler"] if used == cell["sampler"] else f"{cell['sampler']} ({used})"
            lines.append(
                f"| {cell['k']} | {cell['n']} | {name} | {r['fit']} | {r['wall_s']:.1f} | "
                f"{r['cpu_s']:.1f} | {r['coordinates']} | {r['ess_bulk']:.0f} / "
                f"{r['ess_tail']:.0f} | {r['ess_per_s']:.0f} | {r['r_hat']:.4f} | "
                f"{r['divergences']} | {r['tries']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="3x300,10x5000")
    ap.add_argument("--samplers", default="jax,nutpie,pymc")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--fits", type=int, choices=range(1, 21), default=2, metavar="{1..20}",
                    help="fits per process (seeds 0, 1, ...): 1 (the first only, for the slow "
                         "cells), 2 (first and warm), or more warm fits for a median")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(args.markdown))
        return 0
    cells = []
    for case in args.cases.split(","):
        k, n = (int(v) for v in case.split("x"))
        for sampler in args.samplers.split(","):
            fits = run_cell(k, n, sampler, args.timeout, args.fits)
            cells.append({"k": k, "n": n, "sampler": sampler, "fits": fits})
            print(json.dumps(cells[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"),
                                                "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
