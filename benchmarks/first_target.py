"""What a default Bayesian fit knows before sampling, against how its first try went.

Run (quoted in docs/benchmarks.md, section "A first step-size target from the data")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/first_target.py \\
        --rows docs/bench/realdata_target095_2026-12-07.jsonl \\
               docs/bench/realdata_target080_2026-12-07.jsonl \\
        --out docs/bench/first_target_ratios_2026-12-07.jsonl

For every real-data grid case of ``benchmarks/bench_bayes.py --checks realdata``
(the cached scores of ``benchmarks/bench_quality.py``, the same subsamples,
seed 0) and every ``n`` of the given rows, runs the default
``BayesianDirichletCalibrator`` up to the point where it would sample: the
probability floor, the mode, the coordinates (centred or conditional) and the
smallest data-to-prior ratio of the map's coefficients at the mode
(:func:`bayescal.bayes.laplace.data_prior_ratio`). No sampling: about a second
a case. Each line of ``--out`` joins these to the first try of every file of
``--rows`` (a realdata run at one ``target_accept``): its target and its
divergences. ``--summary`` prints, for bins of the ratio, how many first tries
in each were divergent at each target.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


class _Stop(Exception):
    """Raised in place of sampling, carrying what the fit had chosen."""


def before_sampling(p: np.ndarray, y: np.ndarray) -> dict:
    """The default fit's coordinates and smallest data-to-prior ratio on ``(p, y)``."""
    from bayescal.bayes import BayesianDirichletCalibrator
    from bayescal.bayes.laplace import conditional_whitening, data_prior_ratio
    from bayescal.bayes.models import CentredWhitening

    est = BayesianDirichletCalibrator(sampler="jax", random_seed=0, progressbar=False)

    def capture(sample, x, y, prior, whiten, **kwargs):
        theta = est._reused["mode"][0]
        cond = (conditional_whitening(theta, x, y, prior)
                if isinstance(whiten, CentredWhitening) else whiten)
        raise _Stop({"coordinates": "centred" if isinstance(whiten, CentredWhitening)
                     else "conditional",
                     "ratio": data_prior_ratio(theta, prior, cond)})

    est._sample_compiled = capture  # the fit stops where it would sample
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(p, y)
    except _Stop as stop:
        return stop.args[0]
    raise RuntimeError("the fit did not reach the compiled sampler")


def _first_tries(paths: list[Path]) -> dict[str, list[dict]]:
    """Per row key: the first try of each file (target, divergences, seconds)."""
    out: dict[str, list[dict]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            first = row["attempts"][0]
            out.setdefault(row["key"], []).append(
                {"target_accept": first["target_accept"], "divergences": first["divergences"],
                 "tries": len(row["attempts"]), "passed": row["passed"],
                 "seconds": row["bayes_seconds"], "n": row["n"], "k": row["k"],
                 "case": row["case"]})
    return out


def summarise(path: Path, edges=(1e-3, 1e-2)) -> list[dict]:
    """Per bin of the ratio (below ``edges[0]``, between the edges, above the last):
    the fits, their ``n``, and how many first tries were divergent at each target."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    targets = sorted({t["target_accept"] for r in rows for t in r["first"]})
    bounds = [-np.inf, *edges, np.inf]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        sub = [r for r in rows if lo <= r["ratio"] < hi]
        row = {"ratio_from": lo, "ratio_below": hi, "fits": len(sub),
               "n": sorted({r["n"] for r in sub}),
               "centred": sum(r["coordinates"] == "centred" for r in sub)}
        for t in targets:
            tries = [f for r in sub for f in r["first"] if f["target_accept"] == t]
            row[f"divergent_at_{t}"] = sum(f["divergences"] > 0 for f in tries)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, nargs="+", required=True,
                    help="realdata rows of bench_bayes.py, one file per target_accept")
    ap.add_argument("--scores", type=Path, default=ROOT / "results/quality/scores")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--summary", action="store_true", help="summarise --out only")
    args = ap.parse_args(argv)
    if not args.summary:
        from bench_bayes import _load_case, _subsample

        done = ({json.loads(line)["key"] for line in args.out.read_text().splitlines()}
                if args.out.exists() else set())
        for key, first in _first_tries(args.rows).items():
            if key in done:
                continue
            d = _load_case(args.scores / f"{first[0]['case']}.npz")
            p, y = _subsample(d, first[0]["n"], 0)
            row = {"key": key, "case": first[0]["case"], "n": first[0]["n"],
                   "k": first[0]["k"], **before_sampling(p, y), "first": first}
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(key, row["coordinates"], round(row["ratio"], 3),
                  [(t["target_accept"], t["divergences"]) for t in first], flush=True)
    for row in summarise(args.out):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
