"""What the mixing retry costs: the first try's chains continued, against a fresh longer run.

On one cached case of the real-data grid (``benchmarks/bench_quality.py``'s
scores, seed 0) the default :class:`~bayescal.bayes.BayesianDirichletCalibrator`
is fitted with its first try made to fail on ESS (so the retry draws twice as
many per chain), twice each way, alternating in one process: ``continue``
(the default: the retry continues the first try's chains for the extra draws,
``compiled.Chains``) and ``fresh`` (the retry samples from the start, as before).
Prints each fit's wall seconds and whether both ways gave the same draws::

    OPENBLAS_NUM_THREADS=1 python benchmarks/retry_cost.py pendigits__nbayes__0

``--ways continue`` fits only the default way (twice: in a process with a cold
JAX cache, ``BAYESCAL_JAX_CACHE=$(mktemp -d)``, the first fit compiles
everything its retry runs).
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

SCORES = Path(__file__).resolve().parents[1] / "results" / "quality" / "scores"


def main(case: str, ways: tuple[str, ...] = ("continue", "fresh")) -> None:
    import bayescal.bayes.estimators as mod
    from bayescal.bayes import BayesianDirichletCalibrator

    d = dict(np.load(SCORES / f"{case}.npz"))
    real_diagnose, real_resume = mod.diagnose, BayesianDirichletCalibrator._resume
    calls: list[int] = []

    def diagnose(*args, **kwargs):
        out = real_diagnose(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            out.update(ess_tail_min=341.0, passed=False, problems=["made to fail"])
        return out

    def fresh(self, attempt):
        self._reused.pop("chains", None)
        return None

    mod.diagnose = diagnose
    draws = {}
    for rnd in range(2):
        for how in ways:
            calls.clear()
            BayesianDirichletCalibrator._resume = real_resume if how == "continue" else fresh
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = BayesianDirichletCalibrator(random_seed=0, progressbar=False).fit(
                    d["p_cal"], d["y_cal"])
            draws[how] = np.asarray(est.idata_.posterior["W"].values)
            print(rnd, how, f"{time.perf_counter() - t:.1f} s", est.diagnostics_["attempts"],
                  flush=True)
        if len(draws) == 2:
            print("same draws:", np.array_equal(draws["continue"], draws["fresh"]))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help="a case of results/quality/scores, e.g. pendigits__nbayes__0")
    ap.add_argument("--ways", default="continue,fresh",
                    help="comma-separated: continue (the default retry), fresh")
    args = ap.parse_args()
    main(args.case, tuple(args.ways.split(",")))
