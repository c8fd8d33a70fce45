"""The default Bayesian fit on the real-data grid's largest calibration sets, one after another.

For each case (a cached score file of ``benchmarks/bench_quality.py``, seed 0)
it fits the default :class:`~bayescal.bayes.BayesianDirichletCalibrator`
(``random_seed=0``, failures kept) on the whole calibration split and stores
its wall and CPU seconds, the checks, the tries, the leapfrog steps per draw,
the posterior mean and sd of ``s`` and ``tau`` and the posterior mean's test
log-loss. A case named twice is fitted twice (the second row ``CASE#2``: a
warm fit, its program compiled). Used to compare two versions side by side
(docs/benchmarks.md, *Single precision at many rows*), the older one from a
worktree, run from outside the checkout so that the worktree is imported::

    cd /tmp && PYTHONPATH=<worktree> OPENBLAS_NUM_THREADS=1 python \\
        <checkout>/benchmarks/many_rows_grid.py before.json CASE[,CASE...]
    OPENBLAS_NUM_THREADS=1 python benchmarks/many_rows_grid.py after.json CASE[,CASE...]

A third argument, a JSON object, is passed to the estimator as parameters (a
variant of the default, e.g. ``'{"target_accept": 0.8}'``). Each row keeps
every try's ``target_accept``, divergences and result (``attempts``).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCORES = HERE.parent / "results" / "quality" / "scores"


def main(out: Path, cases: list[str], params: dict | None = None) -> None:
    import bayescal
    from bayescal.bayes import BayesianDirichletCalibrator

    sys.path.insert(0, str(HERE))
    from bench_quality import score

    res: dict[str, dict] = {}
    for case in cases:
        d = dict(np.load(SCORES / f"{case}.npz"))
        key = case if case not in res else f"{case}#2"
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                est = BayesianDirichletCalibrator(
                    random_seed=0, progressbar=False, on_failure="warn",
                    **(params or {})).fit(d["p_cal"], d["y_cal"])
            except Exception as e:  # a refusal or an error is a row too
                res[key] = {"error": repr(e)[:200], "wall": time.perf_counter() - t0}
                print(key, res[key], flush=True)
                continue
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        dg, post = est.diagnostics_, est.idata_.posterior
        res[key] = {
            "wall": wall, "cpu": cpu, "passed": bool(dg["passed"]),
            "coords": dg.get("coordinates"), "tries": len(dg.get("attempts", [1])),
            "rhat": dg["r_hat_max"], "ess_bulk": dg["ess_bulk_min"],
            "ess_tail": dg["ess_tail_min"], "div": int(dg["divergences"]),
            "steps": float(est.idata_.sample_stats["n_steps"].mean()),
            "attempts": dg.get("attempts", []), "n": int(len(d["y_cal"])),
            "logloss": score(d["y_test"], est.predict_proba(d["p_test"]))["log_loss"],
            "s_mean": float(post["s"].mean()), "s_sd": float(post["s"].std()),
            "tau_mean": post["tau"].mean(("chain", "draw")).values.tolist(),
            "tau_sd": post["tau"].std(("chain", "draw")).values.tolist()}
        print(key, json.dumps({k: round(v, 4) if isinstance(v, float) else v
                               for k, v in res[key].items()}), bayescal.__file__, flush=True)
        out.write_text(json.dumps(res))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2].split(","),
         json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
