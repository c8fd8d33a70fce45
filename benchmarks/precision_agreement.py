"""Posterior summaries of the default Bayesian fit, to compare two versions of the sampler.

``fit OUT CASE...`` fits the default :class:`~bayescal.bayes.BayesianDirichletCalibrator`
(seed 0) on ``make_dirgen(n, k, rng=r)`` for each ``CASE`` written ``KxNxR`` and
stores, per case, the coordinates it sampled, its time and, for ``s``, ``tau``,
the column-centred ``W`` and the centred ``b``, the posterior means and sds with
their bulk and sd ESS. ``compare BEFORE AFTER`` prints, per case and quantity,
the largest z-scores of the differences of the means (in Monte Carlo standard
errors) and of the ratios of the sds (in their relative errors), as the
conditional / centred agreement test does.

Run (the "before" from a worktree of the older commit, from outside the
checkout so that the worktree is imported; docs/benchmarks.md, *Single
precision in the centred coordinates*)::

    cd /tmp && PYTHONPATH=<worktree> OPENBLAS_NUM_THREADS=1 python \\
        <checkout>/benchmarks/precision_agreement.py fit before.json 10x5000x0 3x3000x1 5x5000x2
    OPENBLAS_NUM_THREADS=1 python benchmarks/precision_agreement.py fit after.json \\
        10x5000x0 3x3000x1 5x5000x2
    python benchmarks/precision_agreement.py compare before.json after.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

NAMES = ("s", "tau", "W", "b")


def fit(out: Path, cases: list[str]) -> None:
    import bayescal
    from bayescal.bayes import BayesianDirichletCalibrator, _compat
    from bayescal.datasets import make_dirgen

    result = {}
    for case in cases:
        k, n, r = (int(v) for v in case.split("x"))
        q, y = make_dirgen(n, k, rng=r)[:2]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BayesianDirichletCalibrator(random_seed=0, progressbar=False,
                                              on_failure="warn").fit(q, y)
        rec = {"coordinates": est.diagnostics_.get("coordinates"),
               "seconds": time.perf_counter() - t0, "passed": bool(est.diagnostics_["passed"])}
        for name in NAMES:
            a = np.asarray(est.idata_.posterior[name].values)
            a = a.reshape(-1, *a.shape[2:])
            ess, ess_sd = (np.asarray(_compat.ess(est.idata_, [name], method=m)[name])
                           for m in ("bulk", "sd"))
            if name in ("W", "b"):  # defined up to a shift: centred, the raw entries' least ESS
                a = a - a.mean(axis=1 if name == "W" else -1, keepdims=True)
                ess, ess_sd = np.full(a.shape[1:], ess.min()), np.full(a.shape[1:], ess_sd.min())
            rec[name] = {"mean": a.mean(0).tolist(), "sd": a.std(0).tolist(),
                         "ess": np.broadcast_to(ess, a.shape[1:]).tolist(),
                         "ess_sd": np.broadcast_to(ess_sd, a.shape[1:]).tolist()}
        result[case] = rec
        print(case, rec["coordinates"], f"{rec['seconds']:.1f} s", "passed" if rec["passed"]
              else "failed its checks", bayescal.__file__, flush=True)
    out.write_text(json.dumps(result))


def compare(before: Path, after: Path) -> None:
    a, b = (json.loads(p.read_text()) for p in (before, after))
    for case in a:
        worst = {}
        for name in NAMES:
            A, B = (np.asarray(x[case][name]["mean"]) for x in (a, b))
            sa, sb = (np.asarray(x[case][name]["sd"]) for x in (a, b))
            ess = [np.asarray(x[case][name]["ess"]) for x in (a, b)]
            ess_sd = [np.asarray(x[case][name]["ess_sd"]) for x in (a, b)]
            mcse = np.sqrt(0.5 * (sa**2 + sb**2)) * np.sqrt(1 / ess[0] + 1 / ess[1])
            rel = np.sqrt(0.5 / ess_sd[0] + 0.5 / ess_sd[1])
            worst[name] = (round(float(np.max(np.abs(A - B) / mcse)), 2),
                           round(float(np.max(np.abs(sa / sb - 1) / rel)), 2))
        print(f"{case}: {a[case]['coordinates']} -> {b[case]['coordinates']}; largest z "
              f"(means, sds): {worst}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 3 and args[0] == "fit":
        fit(Path(args[1]), args[2:])
    elif len(args) == 3 and args[0] == "compare":
        compare(Path(args[1]), Path(args[2]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
