"""What a change of ``draws``, ``chains`` or a retry costs the compiled sampler in a fresh process.

Run (docs/benchmarks.md, *One program whatever the run's length*), with an empty JAX
cache so that every compilation is paid::

    OPENBLAS_NUM_THREADS=1 BAYESCAL_JAX_CACHE=$(mktemp -d) python benchmarks/program_reuse.py \\
        --out docs/bench/program_reuse.json

In one process, on ``make_dirgen(n, 3, rng=0)``, fits the default
``BayesianDirichletCalibrator`` (4 chains x 1000 draws), then the same data with the
mixing retry's length (``draws=2000``), with two chains, and with 500 draws, and
reports each fit's wall and CPU seconds and how many programs the compiled sampler
built for it (``bayescal.bayes.compiled._program``'s cache misses). With ``--warm``,
instead, the warm cost: for each case (``k x n``, and options), six fits with seeds
0-5, the first one's wall seconds and the median of the other five. Run it once per
commit to compare (``PYTHONPATH=<a worktree of the other commit>``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import warnings
from pathlib import Path

FITS = (("default", {}), ("retry length (draws=2000)", {"draws": 2000}),
        ("chains=2", {"chains": 2}), ("draws=500", {"draws": 500}))
#: ``--warm`` cases: (name, k, n, estimator, options)
WARM = (("k=3, n=300", 3, 300, "dirlin", {}), ("k=3, n=30, 2 chains", 3, 30, "dirlin",
                                                 {"chains": 2}),
        ("k=4, n=150", 4, 150, "dirlin", {}), ("k=10, n=100", 10, 100, "dirlin", {}),
        ("generative, k=3, n=100", 3, 100, "dirgen", {}))


def _warm(rows: list) -> None:
    import numpy as np

    from bayescal import make_dirgen
    from bayescal.bayes import BayesianDirichletCalibrator, BayesianGenerativeCalibrator

    for name, k, n, kind, kw in WARM:
        q, y = make_dirgen(n, k, rng=3)[:2]
        cls = BayesianGenerativeCalibrator if kind == "dirgen" else BayesianDirichletCalibrator
        walls = []
        for seed in range(6):
            est = cls(random_seed=seed, progressbar=False, on_failure="warn", retry_draws=None,
                      **kw)
            w0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(q, y)
            walls.append(time.perf_counter() - w0)
        rows.append({"case": name, "first_wall_s": walls[0],
                     "warm_median_wall_s": float(np.median(walls[1:])), "walls": walls})
        print(f"{name:>24}: first {walls[0]:6.2f} s, warm median {np.median(walls[1:]):6.2f} s",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--warm", action="store_true", help="the warm cases instead")
    args = parser.parse_args(argv)

    import bayescal
    from bayescal import make_dirgen
    from bayescal.bayes import BayesianDirichletCalibrator, compiled

    q, y = make_dirgen(args.n, 3, rng=0)[:2]
    rows: list = []
    for name, kw in () if args.warm else FITS:
        misses = compiled._program.cache_info().misses
        est = BayesianDirichletCalibrator(random_seed=1, progressbar=False, on_failure="warn",
                                          retry_draws=None, **kw)
        c0, w0 = time.process_time(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(q, y)
        row = {"fit": name, "params": kw, "wall_s": time.perf_counter() - w0,
               "cpu_s": time.process_time() - c0,
               "programs_built": compiled._program.cache_info().misses - misses,
               "passed": bool(est.diagnostics_["passed"])}
        rows.append(row)
        print(f"{name:>28}: {row['wall_s']:6.2f} s wall, {row['cpu_s']:6.2f} s CPU, "
              f"{row['programs_built']} program(s) built", flush=True)
    if args.warm:
        _warm(rows)
    commit = subprocess.run(["git", "-C", str(Path(bayescal.__file__).parent), "rev-parse",
                             "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if args.out:
        args.out.write_text(json.dumps({"commit": commit, "n": args.n, "rows": rows},
                                       indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
