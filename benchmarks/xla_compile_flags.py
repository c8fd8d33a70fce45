"""XLA's compile options against the compiled sampler's first-fit cost.

Run (repository root)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/xla_compile_flags.py --case 3x300

For each set of ``XLA_FLAGS`` (none, then four options; or each ``--flag=...``
given, in turn: e.g. ``--flag= --flag=--xla_llvm_disable_expensive_passes=true``
twice for two alternating pairs), a fresh
process with an empty JAX cache fits the default ``BayesianDirichletCalibrator``
on ``make_dirgen(n, k, rng=0)`` three times and prints the seconds XLA took to
compile the sampler's program (the largest compilation JAX logs), the wall
seconds of each fit (the first pays the compilation and the imports), and the
first fit's smallest bulk ESS, so that a flag that buys a faster compile with
a slower or different sampler shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

DEFAULT_FLAGS = [
    "",
    "--xla_backend_optimization_level=0",
    "--xla_llvm_disable_expensive_passes=true",
    "--xla_cpu_parallel_codegen_split_count=1",
    "--xla_cpu_use_thunk_runtime=false",
]

_CHILD = r"""
import json, logging, re, sys, time
from bayescal import make_dirgen
from bayescal.bayes import BayesianDirichletCalibrator, compiled

compiles = []

class Grab(logging.Handler):
    def emit(self, record):
        m = re.search(r"Finished XLA compilation of (.*) in ([0-9.e-]+) sec", record.getMessage())
        if m:
            compiles.append((float(m.group(2)), m.group(1)[:40]))

jax = compiled.import_jax()
jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Grab())
logging.getLogger("jax").setLevel(logging.DEBUG)
k, n = map(int, sys.argv[1].split("x"))
q, y, _, _ = make_dirgen(n, k, rng=0)
fits = []
for seed in range(3):
    t = time.perf_counter()
    est = BayesianDirichletCalibrator(random_seed=seed, progressbar=False).fit(q, y)
    fits.append(time.perf_counter() - t)
    if seed == 0:
        ess = est.diagnostics_["ess_bulk_min"]
print(json.dumps({"compile": max(compiles)[0], "fits": fits, "ess_bulk_min": ess}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="3x300", help="KxN")
    ap.add_argument("--flag", action="append", dest="flags", metavar="XLA_FLAGS",
                    help="one set of XLA_FLAGS, repeatable, written --flag=... ('--flag=' "
                         "for none; default: the five sets of DEFAULT_FLAGS)")
    args = ap.parse_args(argv)
    args.flags = args.flags if args.flags is not None else DEFAULT_FLAGS
    print("| XLA_FLAGS | program compile s | fits, wall s (first, second, third) | "
          "min bulk ESS |\n|---|---|---|---|")
    for flags in args.flags:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XLA_FLAGS=flags, BAYESCAL_JAX_CACHE=cache)
            run = subprocess.run([sys.executable, "-c", _CHILD, args.case], env=env,
                                 capture_output=True, text=True, check=False)
        line = next((ln for ln in run.stdout.splitlines() if ln.startswith("{")), None)
        if line is None:
            print(f"| `{flags or '(none)'}` | failed: {run.stderr[-300:]!r} | | |")
            continue
        r = json.loads(line)
        fits = ", ".join(f"{s:.1f}" for s in r["fits"])
        print(f"| `{flags or '(none)'}` | {r['compile']:.2f} | {fits} | "
              f"{r['ess_bulk_min']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
