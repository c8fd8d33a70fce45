"""Streaming at the defaults: GenerativeDirichletCalibrator's partial_fit against its fit.

Run on the classifier scores that ``bench_quality.py`` cached (no classifier is trained)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/generative_streaming.py \\
        --scores results/quality-bayes/scores --out results/generative-streaming.jsonl

Per case (calibration rows -> test rows, test log-loss as ``bench_quality.score``):

* ``fit``: ``GenerativeDirichletCalibrator().fit`` (``prior="auto"``: the strength
  by cross-validated conditional log-loss);
* ``stream``: ``partial_fit`` over chunks of ``--chunk`` rows at the defaults
  (temperature scaling from the streamed temperature statistics);
* ``joint_cv``, ``evidence``: the strengths that statistics alone can choose,
  scored on the joint (generative) likelihood: ``cv`` folds by row position
  modulo 5 (per-fold counts and log-feature sums; held-out
  :math:`\\sum_j n_j[\\ln\\pi_j + \\ln\\Gamma(\\alpha_{j0}) - \\sum_c\\ln\\Gamma(\\alpha_{jc})]
  + \\sum_{jc}(\\alpha_{jc} - 1)S_{jc}`, one-standard-error rule over the fold
  totals), and the Laplace evidence of each strength on all the rows.

The summary prints, for each of the last three against ``fit``: the mean ratio
of test log-losses, the cases worse (and better) by more than 1 %, the worst
ratio, and how often the strength chosen equals fit's; and how far the
stream's ``1/T`` is from :class:`~bayescal.TemperatureScaler`'s on the same rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import digamma, gammaln, polygamma

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_quality import score  # noqa: E402

from bayescal import GenerativeDirichletCalibrator, TemperatureScaler  # noqa: E402
from bayescal.calibrators.generative import (  # noqa: E402
    AUTO_STRENGTHS,
    _temperature_terms,
    auto_prior_at,
)
from bayescal.dirichlet import SufficientStatistics  # noqa: E402
from bayescal.maps import log_features  # noqa: E402

STRENGTHS = (np.inf, *AUTO_STRENGTHS)


def _fit(st: SufficientStatistics, x: np.ndarray, nu: float) -> dict:
    terms = _temperature_terms(x, np.ones((1, len(x))))[0]
    return GenerativeDirichletCalibrator()._solve(st, auto_prior_at(nu, st, terms))


def _joint(fit: dict, st: SufficientStatistics) -> float:
    a, pi = fit["alpha_"], fit["pi_"]
    log_norm = gammaln(a.sum(axis=1)) - gammaln(a).sum(axis=1)
    return float(st.counts @ (np.log(pi) + log_norm) + np.sum((a - 1.0) * st.sums))


def _laplace_log_z(m: float, a: np.ndarray) -> float:
    """Laplace terms of ln Z(m, t): k/2 ln 2pi - 1/2 ln det(m H), H = diag(psi1(a)) - psi1(a0)."""
    d, c = polygamma(1, a), polygamma(1, a.sum())
    logdet = a.size * np.log(m) + np.log(d).sum() + np.log1p(-c * np.sum(1.0 / d))
    return 0.5 * a.size * np.log(2.0 * np.pi) - 0.5 * logdet


def _evidence(st: SufficientStatistics, x: np.ndarray, nu: float) -> float:
    k = st.n_classes
    fit = _fit(st, x, nu)
    beta = fit["prior_center_"]
    if np.isinf(nu):
        return _joint(fit, st)
    eta = digamma(beta) - digamma(beta.sum(axis=1, keepdims=True))
    total = 0.0
    for j in range(k):
        a, m = fit["alpha_"][j], st.counts[j] + nu
        post = (st.sums[j] + nu * eta[j]) / m
        f_post = m * (gammaln(a.sum()) - gammaln(a).sum() + a @ post)
        f_prior = nu * (gammaln(beta[j].sum()) - gammaln(beta[j]).sum() + beta[j] @ eta[j])
        total += (f_post + _laplace_log_z(m, a) - f_prior - _laplace_log_z(nu, beta[j])
                  - st.sums[j].sum())
    n = st.counts
    return float(total + gammaln(k * nu + k) - k * gammaln(nu + 1.0)
                 + np.sum(gammaln(n + nu + 1.0)) - gammaln(n.sum() + k * nu + k))


def _one_se_folds(loss: np.ndarray, n_fold: np.ndarray) -> int:
    mean = loss.sum(axis=1) / n_fold.sum()
    best = int(np.argmin(mean))
    per_row = (loss - loss[best]) / n_fold
    se = per_row.std(axis=1, ddof=1) / np.sqrt(loss.shape[1])
    return next(i for i in range(len(mean)) if mean[i] - mean[best] <= se[i])


def run_case(path: Path, chunk: int) -> dict:
    with np.load(path) as f:
        p, y, pt, yt = f["p_cal"], f["y_cal"].astype(np.intp), f["p_test"], f["y_test"]
    k = p.shape[1]
    fit = GenerativeDirichletCalibrator().fit(p, y)
    stream = GenerativeDirichletCalibrator()
    for lo in range(0, len(y), chunk):
        stream.partial_fit(p[lo : lo + chunk], y[lo : lo + chunk], classes=np.arange(k))
    x, xt = log_features(p), log_features(pt)
    st = SufficientStatistics.from_features(x, y)
    test = []
    for nu in STRENGTHS:
        f = _fit(st, x, nu)
        z = xt @ f["coef_"].T + f["intercept_"]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        test.append(score(yt, e / e.sum(axis=1, keepdims=True))["log_loss"])
    fold = np.arange(len(y)) % 5
    loss = np.zeros((len(STRENGTHS), 5))
    for g in range(5):
        tr, te = fold != g, fold == g
        st_tr = SufficientStatistics.from_features(x[tr], y[tr])
        st_te = SufficientStatistics.from_features(x[te], y[te])
        for i, nu in enumerate(STRENGTHS):
            loss[i, g] = -_joint(_fit(st_tr, x[tr], nu), st_te)
    joint_cv = _one_se_folds(loss, np.bincount(fold, minlength=5).astype(float))
    evidence = int(np.argmax([_evidence(st, x, nu) for nu in STRENGTHS]))
    exact = 1.0 / TemperatureScaler().fit(x, y).temperature_
    return {"case": path.stem, "k": k, "n": len(y),
            "scale_rel_err": abs((stream.prior_center_[0, 0] - 1.0) / exact - 1.0),
            "fit": score(yt, fit.predict_proba(pt))["log_loss"],
            "fit_strength": fit.prior_strength_,
            "stream": score(yt, stream.predict_proba(pt))["log_loss"],
            "stream_strength": stream.prior_strength_,
            "joint_cv": test[joint_cv], "joint_cv_strength": STRENGTHS[joint_cv],
            "evidence": test[evidence], "evidence_strength": STRENGTHS[evidence]}


def summary(rows: list[dict]) -> str:
    fit = np.array([r["fit"] for r in rows])
    lines = [f"{len(rows)} cases; test log-loss of each choice / fit's (prior='auto')",
             "| choice | mean ratio | worse > 1 % | better > 1 % | worst ratio | same strength |",
             "|---|---|---|---|---|---|"]
    for name in ("stream", "joint_cv", "evidence"):
        r = np.array([row[name] for row in rows]) / fit
        same = sum(row[f"{name}_strength"] == row["fit_strength"] for row in rows)
        lines.append(f"| {name} | {r.mean():.4f} | {(r > 1.01).sum()} | {(r < 0.99).sum()} | "
                     f"{r.max():.3f} | {same} |")
    err = np.array([r["scale_rel_err"] for r in rows])
    lines.append(f"stream 1/T against TemperatureScaler's: relative difference median "
                 f"{np.median(err):.1e}, 90th percentile {np.quantile(err, 0.9):.1e}, "
                 f"max {err.max():.1e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scores", type=Path, default=Path("results/quality-bayes/scores"))
    ap.add_argument("--out", type=Path, default=Path("results/generative-streaming.jsonl"))
    ap.add_argument("--chunk", type=int, default=100, help="rows per partial_fit call")
    args = ap.parse_args(argv)
    done = {}
    if args.out.exists():
        done = {r["case"]: r for r in map(json.loads, args.out.read_text().splitlines())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as fh, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in sorted(args.scores.glob("*.npz")):
            if path.stem in done:
                continue
            done[path.stem] = row = run_case(path, args.chunk)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"{path.stem:45s} fit {row['fit']:.4f} stream {row['stream']:.4f}", flush=True)
    print(summary(list(done.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
