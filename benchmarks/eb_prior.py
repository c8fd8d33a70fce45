"""An empirical-Bayes hyperprior for the Bayesian default, learned from real calibration sets.

Run (docs/benchmarks.md, *An empirical-Bayes hyperprior*)::

    python benchmarks/bench_bayes.py --checks scales --check-dir results/eb
    python benchmarks/eb_prior.py learn results/eb/scales.jsonl \\
        --test car,page-blocks,waveform-5000
    python benchmarks/bench_bayes.py --checks coverage_real --reps 2 \\
        --datasets abalone,car,landsat-satellite,page-blocks,segment,waveform-5000 \\
        --params '{"log_tau_prior": [-2.93, 3.55], "log_scale_prior": [-0.45, 0.99]}' \\
        --check-dir results/eb/cov
    python benchmarks/eb_prior.py compare docs/bench/coverage_real.jsonl \\
        results/eb/cov/coverage_real.jsonl --test car,page-blocks,waveform-5000

``learn`` reads the scales that each real case's full calibration split
chooses (``bench_bayes.py --checks scales``: the MAP default's type-II
maximum-likelihood scales ``tau = 1/sqrt(strength)`` of the off-diagonal,
diagonal and intercept groups, and temperature scaling's ``ln s``), keeps
the cases of the training datasets (every dataset not in ``--test``) and
fits, by maximum likelihood,

* a normal distribution to ``ln tau``, left-censored at the evidence
  search's bound (``tau = 0.01``, a strength of ``1e4``: a case there only
  says its scale is at most that), per group and pooled over the groups;
* a normal distribution to ``ln s``.

These are the log-normal hyperprior ``log_tau_prior=(m, sd)`` and the
temperature prior ``log_scale_prior=(m_s, sd_s)`` of
:class:`bayescal.bayes.BayesianDirichletCalibrator`; the script prints them
as ``--params`` for ``bench_bayes.py``. Each case's scales are point
estimates on its whole split (370-5000 rows), so their own uncertainty is
left out of the fit.

``compare`` pairs coverage rows (``--checks coverage_real``) of a baseline
file with those of a candidate (the same keys: case, ``n``, replication),
and prints per ``n`` and per part (training datasets, held-out datasets) the
mean coverage of each with its standard error and the mean paired gain.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import optimize, stats

#: The evidence search's smallest scale (``structured.STRENGTH_BOUNDS``' largest strength).
TAU_FLOOR = 0.01


def censored_normal(values: np.ndarray, floor: float) -> tuple[float, float, int]:
    """Maximum-likelihood ``(mean, sd)`` of a normal left-censored at ``floor``, and how many
    values were censored."""
    v = np.asarray(values, dtype=np.float64)
    cens = v <= floor + 1e-9
    obs = v[~cens]

    def nll(p: np.ndarray) -> float:
        mu, sd = p[0], np.exp(p[1])
        return -(stats.norm.logpdf(obs, mu, sd).sum()
                 + cens.sum() * stats.norm.logcdf((floor - mu) / sd))

    start = np.array([v.mean(), np.log(v.std() + 0.1)])
    res = optimize.minimize(nll, start, method="Nelder-Mead",
                            options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
    return float(res.x[0]), float(np.exp(res.x[1])), int(cens.sum())


def _dataset(key: str) -> str:
    return key.split("__")[0]


def learn(path: Path, test: set[str]) -> dict:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("source") == "real"]
    parts = {"train": [r for r in rows if _dataset(r["key"]) not in test],
             "test": [r for r in rows if _dataset(r["key"]) in test]}
    out: dict = {}
    for name, sub in parts.items():
        if not sub:
            continue
        lt = np.log(np.array([r["tau"] for r in sub]))
        ls = np.array([r["ln_s"] for r in sub])
        fits = {g: censored_normal(lt[:, i], np.log(TAU_FLOOR))
                for i, g in enumerate(("off", "diag", "b"))}
        fits["pooled"] = censored_normal(lt.ravel(), np.log(TAU_FLOOR))
        out[name] = {"cases": len(sub), "datasets": sorted({_dataset(r["key"]) for r in sub}),
                     "ln_tau": {g: {"mean": round(m, 3), "sd": round(s, 3), "censored": c}
                                for g, (m, s, c) in fits.items()},
                     "ln_s": {"mean": round(float(ls.mean()), 3),
                              "sd": round(float(ls.std(ddof=1)), 3)}}
    tr = out["train"]
    out["params"] = {"log_tau_prior": [tr["ln_tau"]["pooled"]["mean"],
                                       tr["ln_tau"]["pooled"]["sd"]],
                     "log_scale_prior": [tr["ln_s"]["mean"], tr["ln_s"]["sd"]]}
    return out


def compare(base: Path, cands: list[Path], test: set[str]) -> list[dict]:
    def load(paths: list[Path]) -> dict:
        rows = {}
        for p in paths:
            for line in p.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    rows[r["key"]] = r
        return rows

    b, c = load([base]), load(cands)
    keys = sorted(set(b) & set(c))
    out = []
    for part in ("train", "test", "all"):
        for n in sorted({b[k]["n"] for k in keys}):
            ks = [k for k in keys if b[k]["n"] == n and (
                part == "all" or (_dataset(b[k]["case"]) in test) == (part == "test"))]
            if not ks:
                continue
            x = np.array([b[k]["coverage"] for k in ks])
            y = np.array([c[k]["coverage"] for k in ks])
            se = lambda a: float(a.std(ddof=1) / np.sqrt(len(a)))  # noqa: E731
            out.append({"part": part, "n": n, "sets": len(ks),
                        "baseline": round(float(x.mean()), 3), "baseline_se": round(se(x), 3),
                        "candidate": round(float(y.mean()), 3), "candidate_se": round(se(y), 3),
                        "gain": round(float((y - x).mean()), 3), "gain_se": round(se(y - x), 3),
                        "width_baseline": round(float(np.mean([b[k]["width"] for k in ks])), 3),
                        "width_candidate": round(float(np.mean([c[k]["width"] for k in ks])), 3),
                        "failing_baseline": sum(not b[k]["passed"] for k in ks),
                        "failing_candidate": sum(not c[k]["passed"] for k in ks),
                        "median_s_candidate": float(np.median([c[k]["seconds"] for k in ks]))})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("learn")
    a.add_argument("scales", type=Path)
    a.add_argument("--test", default="", help="held-out datasets, comma-separated")
    c = sub.add_parser("compare")
    c.add_argument("baseline", type=Path)
    c.add_argument("candidate", type=Path, nargs="+")
    c.add_argument("--test", default="")
    args = ap.parse_args(argv)
    test = {t for t in args.test.split(",") if t}
    if args.cmd == "learn":
        print(json.dumps(learn(args.scales, test), indent=1))
    else:
        rows = compare(args.baseline, args.candidate, test)
        cols = list(rows[0]) if rows else []
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(str(r[k]) for k in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
