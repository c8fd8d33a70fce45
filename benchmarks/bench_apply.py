"""Wall time, CPU time and peak memory of ``bayescal apply`` on a large score file.

Run::

    python benchmarks/bench_apply.py --n 1000000 --k 10

In a temporary directory the script draws ``n`` rows of ``k`` probabilities
(Dirichlet(1)), writes them as a CSV (header ``p0..``, ``%.17g``, as
``bayescal apply`` writes) and as a float64 ``.npy``, fits a ``temperature``
model on the first ``--fit-rows`` rows, then runs ``bayescal apply`` in a
fresh subprocess (BLAS and OpenMP held to one thread) for each input, writing
a CSV. Each run is measured from a wrapper process: wall time, CPU time
(user + system) and peak resident memory (``ru_maxrss`` of the child). A
baseline run on a 100-row CSV gives the cost of starting the command
(imports). Prints a markdown table, and how far apart the CSV and ``.npy``
runs' outputs are on their first 10000 rows (the same values; they may differ
in the last bits, as a header makes the reader hand the model a
column-major array).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_MEASURE = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": r.returncode, "stderr": r.stderr[-2000:], "wall_s": wall,
                  "cpu_s": u.ru_utime + u.ru_stime, "peak_mb": u.ru_maxrss / 1024}))
"""


def _measure(argv: list[str]) -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True,
                       text=True, env=env, check=True)
    result = json.loads(r.stdout)
    if result["rc"] != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result['stderr']}")
    return result


def _write_csv(path: Path, q: np.ndarray, chunk: int = 100_000) -> None:
    with open(path, "wb") as fh:
        fh.write((",".join(f"p{j}" for j in range(q.shape[1])) + "\n").encode())
        for a in range(0, len(q), chunk):
            np.savetxt(fh, q[a:a + chunk], delimiter=",", fmt="%.17g")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (default: %(default)s)")
    parser.add_argument("--k", type=int, default=10, help="classes (default: %(default)s)")
    parser.add_argument("--fit-rows", type=int, default=5000,
                        help="rows the temperature model is fitted on (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp)
        rng = np.random.default_rng(args.seed)
        q = rng.dirichlet(np.ones(args.k), size=args.n)
        _write_csv(d / "scores.csv", q)
        np.save(d / "scores.npy", q)
        _write_csv(d / "small.csv", q[:100])
        m = min(args.fit_rows, args.n)
        y = (rng.random(m)[:, None] > np.cumsum(q[:m], axis=1)).sum(axis=1)
        np.savez(d / "train.npz", probs=q[:m], y=np.minimum(y, args.k - 1))
        del q
        cli = [sys.executable, "-m", "bayescal"]
        subprocess.run([*cli, "fit", str(d / "train.npz"), "--method", "temperature",
                        "-o", str(d / "model.json")], check=True, stdout=subprocess.DEVNULL)
        rows = []
        for name, src in (("start-up (100-row CSV)", "small.csv"), ("CSV -> CSV", "scores.csv"),
                          (".npy -> CSV", "scores.npy")):
            out = d / f"out-{src}.csv"
            t = time.perf_counter()
            r = _measure([*cli, "apply", str(d / "model.json"), str(d / src), "-o", str(out)])
            rows.append((name, (d / src).stat().st_size / 1e6, r, time.perf_counter() - t))
        a, b = (np.loadtxt(d / f"out-scores.{s}.csv", delimiter=",", skiprows=1,
                           max_rows=10_000) for s in ("csv", "npy"))
        gap = float(np.abs(a - b).max())

    print(f"bayescal apply, n = {args.n}, k = {args.k}, temperature model, one thread\n")
    print("| input | file MB | wall s | CPU s | peak MB |")
    print("|---|---:|---:|---:|---:|")
    for name, mb, r, _ in rows:
        print(f"| {name} | {mb:.1f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
              f"{r['peak_mb']:.0f} |")
    print(f"\nlargest difference between the CSV and .npy outputs (first 10000 rows): "
          f"{gap:.1e}")
    return 0 if gap < 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
