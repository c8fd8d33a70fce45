"""Width and coverage of the Bayesian calibrator's credible bands against the calibration-set size.

Run from the repository root (several minutes on two cores; writes
``docs/bench/bayes_width.json`` and ``docs/bench/bayes_width.png``, the figure
notebook 02 shows)::

    PYTENSOR_FLAGS=base_compiledir=$HOME/.cache/bayescal/pytensor \\
        python benchmarks/bench_bayes_width.py --out-dir docs/bench

What it measures: one synthetic DirGen problem with k = 3 classes, whose true
parameters ``alpha_true, pi_true`` are those of ``make_dirgen(300, 3, rng=0)``
(the data set of notebook 02). For every size n in ``--sizes`` (default 100,
300, 1000, 3000) a calibration set ``make_dirgen(n, 3, rng=n, alpha=alpha_true,
pi=pi_true)`` is drawn and ``BayesianDirichletCalibrator(draws=500, tune=500,
random_seed=SEED, on_failure="warn")`` (4 chains, nutpie with its numba
backend, as in the notebook before this sweep moved here) is fitted to it. On
one fixed test set, ``make_dirgen(400, 3, rng=99, alpha=alpha_true,
pi=pi_true)``, it records the mean width of the 94 % HDI of every calibrated
probability and the share of those intervals that contain the true calibrated
probability (``dirgen_map`` at the true parameters): the coverage of the true
map on one data set per n, not the coverage over many data sets (that is
``bench_bayes.py --checks coverage``). It also records each fit's convergence checks
(passed, max R-hat, min bulk ESS, divergences, the problems found, and the
estimator's attempts: ``fit`` samples again, longer or at a higher
``target_accept``, when the first posterior fails) and its wall time (the first
fit includes nutpie's compilation of the model, as does the first fit in the
map's own coordinates, which the estimator chooses for large n).

A fit that failed its checks is kept in the JSON with ``"passed": false`` and
left out of the figure (its title says which sizes were left out); the
``1/sqrt(n)`` reference line is anchored at the first fit that passed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bayescal import make_dirgen  # noqa: E402
from bayescal.maps import dirgen_map  # noqa: E402

K = 3
HDI_PROB = 0.94
FIT_KWARGS: dict[str, Any] = {"draws": 500, "tune": 500, "progressbar": False,
                              "on_failure": "warn"}


def sweep(sizes: list[int], seed: int, nutpie_backend: str) -> dict[str, Any]:
    """Fit one calibrator per size; return the problem's settings and one row per fit."""
    from bayescal.bayes import BayesianDirichletCalibrator, SamplingWarning, config_context

    _, _, alpha_true, pi_true = make_dirgen(300, K, rng=0)
    q_test, _, _, _ = make_dirgen(400, K, rng=99, alpha=alpha_true, pi=pi_true)
    p_true = dirgen_map(q_test, alpha_true, pi_true)
    rows = []
    for n in sizes:
        qn, yn, _, _ = make_dirgen(n, K, rng=n, alpha=alpha_true, pi=pi_true)
        est = BayesianDirichletCalibrator(random_seed=seed, **FIT_KWARGS)
        with config_context(nutpie_backend=nutpie_backend), warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplingWarning)  # recorded in the row instead
            t0 = time.perf_counter()
            est.fit(qn, yn)
            seconds = time.perf_counter() - t0
        d = est.diagnostics_
        lo, hi = est.credible_interval(q_test, hdi_prob=HDI_PROB)
        row = {
            "n": int(n),
            "width": float((hi - lo).mean()),
            "coverage": float(((lo <= p_true) & (p_true <= hi)).mean()),
            "passed": bool(d["passed"]),
            "r_hat_max": float(d["r_hat_max"]),
            "ess_bulk_min": float(d["ess_bulk_min"]),
            "ess_tail_min": float(d["ess_tail_min"]),
            "divergences": int(d["divergences"]),
            "problems": list(d["problems"]),
            "coordinates": d.get("coordinates"),
            "attempts": [dict(a) for a in d.get("attempts", [])],
            "seconds": float(seconds),
        }
        rows.append(row)
        checks = "passed" if row["passed"] else "FAILED: " + "; ".join(row["problems"])
        print(f"n = {n:>5}: mean {HDI_PROB:.0%} HDI width {row['width']:.4f}, true map inside "
              f"the band {row['coverage']:.1%}, R-hat {row['r_hat_max']:.3f}, bulk ESS "
              f"{row['ess_bulk_min']:.0f}, {row['divergences']} divergences, "
              f"{len(row['attempts'])} attempt(s), {seconds:.0f} s; checks {checks}", flush=True)
    return {
        "k": K,
        "hdi_prob": HDI_PROB,
        "seed": seed,
        "nutpie_backend": nutpie_backend,
        "fit_kwargs": {**FIT_KWARGS, "random_seed": seed},
        "truth": "make_dirgen(300, 3, rng=0) -> alpha_true, pi_true",
        "calibration_sets": "make_dirgen(n, 3, rng=n, alpha=alpha_true, pi=pi_true)",
        "test_set": "make_dirgen(400, 3, rng=99, alpha=alpha_true, pi=pi_true)",
        "alpha_true": np.asarray(alpha_true).tolist(),
        "pi_true": np.asarray(pi_true).tolist(),
        "rows": rows,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Width (log-log, with a 1/sqrt(n) line) and coverage against n, passing fits only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in result["rows"] if r["passed"]]
    failed = [r["n"] for r in result["rows"] if not r["passed"]]
    fig, (ax_w, ax_c) = plt.subplots(1, 2, figsize=(9, 3.6))
    if ok:
        n = np.array([r["n"] for r in ok], dtype=float)
        ax_w.loglog(n, [r["width"] for r in ok], "o-",
                    label=f"mean {result['hdi_prob']:.0%} HDI width")
        ax_w.loglog(n, ok[0]["width"] * np.sqrt(n[0] / n), "k:",
                    label=r"$\propto 1/\sqrt{n}$ (from the first fit)")
        ax_c.semilogx(n, [100 * r["coverage"] for r in ok], "o-", label="true map in the band")
    ax_c.axhline(100 * result["hdi_prob"], color="grey", ls="--",
                 label=f"nominal {result['hdi_prob']:.0%}")
    ax_w.set(xlabel="calibration-set size n", ylabel="width")
    ax_c.set(xlabel="calibration-set size n", ylabel="% of test probabilities", ylim=(0, 102))
    ax_w.legend(fontsize=8)
    ax_c.legend(fontsize=8, loc="lower right")
    title = "Bayesian DirLin (default prior), k = 3, one data set per n"
    if failed:
        title += ("\nleft out (failed its convergence checks): n = "
                  + ", ".join(str(v) for v in failed))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "bench",
                    help="where bayes_width.json and bayes_width.png are written")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000])
    ap.add_argument("--seed", type=int, default=0, help="random_seed of every fit")
    ap.add_argument("--nutpie-backend", choices=("numba", "jax"), default="numba",
                    help="numba compiles once and reuses the model for every size")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = sweep(args.sizes, args.seed, args.nutpie_backend)
    result["total_seconds"] = time.perf_counter() - start
    result["command"] = " ".join(["python benchmarks/bench_bayes_width.py",
                                  *(sys.argv[1:] if argv is None else argv)])
    result["versions"] = {"python": platform.python_version(),
                          **{d: metadata.version(d) for d in ("pymc", "nutpie", "numpy")}}
    (args.out_dir / "bayes_width.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out_dir / "bayes_width.png")
    print()
    print("| n | mean HDI width | true map in band | checks passed | R-hat | bulk ESS | "
          "attempts | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        print(f"| {r['n']} | {r['width']:.4f} | {r['coverage']:.1%} | "
              f"{'yes' if r['passed'] else 'no'} | {r['r_hat_max']:.3f} | "
              f"{r['ess_bulk_min']:.0f} | {len(r['attempts'])} | {r['seconds']:.0f} |")
    print(f"total {result['total_seconds']:.0f} s; wrote {args.out_dir / 'bayes_width.json'} "
          f"and {args.out_dir / 'bayes_width.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
