"""Refit the failing fits of a ``bench_bayes.py --checks realdata`` run with other settings.

The same subsamples and seeds as the run; one JSON line per fit, with each try's
``target_accept`` and divergences (resumes)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/refit_failing.py \\
        docs/bench/realdata_default_2026-12-06.jsonl '{"tune": 1000}' out.jsonl [sampler]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_bayes as bb  # noqa: E402

from bayescal.bayes import config_context  # noqa: E402


def main(argv: list[str]) -> None:
    rows_path, params, out = Path(argv[0]), json.loads(argv[1]), Path(argv[2])
    sampler = argv[3] if len(argv) > 3 else "auto"
    fails = [r for r in map(json.loads, rows_path.open()) if not r["passed"]]
    done = {json.loads(line)["key"] for line in out.open()} if out.exists() else set()
    with config_context(nutpie_backend="numba"):
        for r in fails:
            if r["key"] in done:
                continue
            d = bb._load_case(Path("results/quality/scores") / f"{r['case']}.npz")
            p, y = bb._subsample(d, r["n"], 0)
            est, dt = bb._fit_default(p, y, sampler, 0, params)
            dg = est.diagnostics_
            row = {"key": r["key"], "params": params, "sampler": est.sampler_,
                   "seconds": round(dt, 1), "passed": bool(dg["passed"]),
                   "divergences": dg["divergences"], "r_hat_max": dg["r_hat_max"],
                   "ess_bulk_min": dg["ess_bulk_min"],
                   "attempts": [{k: a[k] for k in ("target_accept", "tune", "divergences",
                                                   "passed") if k in a}
                                for a in dg.get("attempts", [])],
                   "bayes_mean": bb._log_loss(d, est.predict_proba(d["p_test"])),
                   "before": r["bayes_mean"]}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
