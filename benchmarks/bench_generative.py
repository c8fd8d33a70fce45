"""Fit time of the generative Dirichlet calibrator against n, k = 100.

Compares, on the same data and in the same run (median of ``--reps``):

* ``log``: one pass ``np.log(q)`` over the scores (the yardstick of the target:
  the whole fit should cost at most 3x this at n = 1e6, k = 100);
* ``fit``: ``GenerativeDirichletCalibrator(prior=None).fit(q, y)`` (validation, chunked
  features, statistics, the k Newton solves);
* ``newton``: the k Newton solves alone from the statistics;
* ``scipy``: ``scipy.optimize.minimize`` (L-BFGS-B on log alpha, analytic
  gradient) on the same per-class likelihood from the same statistics;
* ``dirichlet-pkg``: the PyPI package ``dirichlet`` (``mle``, Minka's
  mean-precision iteration) on the raw rows of each class, floored at eps as
  bayescal does (it recomputes ``log(D)`` at every iteration, so it is only
  run up to ``--peer-max-n`` rows).

Run from the repository root::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/bench_generative.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402
from scipy.special import digamma, gammaln  # noqa: E402

from bayescal import EPS, GenerativeDirichletCalibrator, make_dirgen  # noqa: E402
from bayescal.datasets import default_dirgen_params  # noqa: E402
from bayescal.dirichlet import fit_dirgen, sufficient_statistics  # noqa: E402


def make_data(n: int, k: int, *, seed: int = 0, chunk: int = 100_000):
    """DirGen scores drawn chunk by chunk into one preallocated array (bounded memory)."""
    alpha, pi = default_dirgen_params(k, rng=seed)
    q = np.empty((n, k))
    y = np.empty(n, dtype=np.intp)
    rng = np.random.default_rng(seed + 1)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        q[start : start + m], y[start : start + m], _, _ = make_dirgen(
            m, k, rng=rng, alpha=alpha, pi=pi
        )
    return q, y


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def scipy_solve(stats) -> np.ndarray:
    """Generic optimiser on the same mean log-likelihood (per class, log alpha)."""
    out = []
    for j in range(stats.n_classes):
        s = stats.mean_log[j]

        def fun(la, s=s):
            a = np.exp(la)
            f = gammaln(a.sum()) - gammaln(a).sum() + (a - 1.0) @ s
            g = (digamma(a.sum()) - digamma(a) + s) * a
            return -f, -g

        res = minimize(fun, np.zeros_like(s), jac=True, method="L-BFGS-B",
                       options={"maxiter": 10_000, "gtol": 1e-10, "ftol": 1e-15})
        out.append(np.exp(res.x))
    return np.stack(out)


def dirichlet_pkg_solve(q: np.ndarray, y: np.ndarray, k: int) -> np.ndarray | None:
    try:
        import dirichlet as dirichlet_pkg
    except ImportError:
        return None
    clipped = np.maximum(q, EPS)
    return np.stack([dirichlet_pkg.mle(clipped[y == j]) for j in range(k)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--ns", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--peer-max-n", type=int, default=100_000)
    args = parser.parse_args()
    k = args.k
    rows = []
    for n in args.ns:
        q, y = make_data(n, k)
        t_log = timed(lambda q=q: np.log(q), args.reps)
        t_fit = timed(lambda q=q, y=y: GenerativeDirichletCalibrator(prior=None).fit(q, y),
                      args.reps)
        stats = sufficient_statistics(q, y)
        t_newton = timed(lambda stats=stats: fit_dirgen(stats), args.reps)
        alpha, _, fits = fit_dirgen(stats)
        t_scipy = timed(lambda stats=stats: scipy_solve(stats), 1)
        a_scipy = scipy_solve(stats)
        ll_gap = max(
            fits[j].loglik
            - (gammaln(a_scipy[j].sum()) - gammaln(a_scipy[j]).sum()
               + (a_scipy[j] - 1) @ stats.mean_log[j])
            for j in range(k)
        )
        t_pkg = a_pkg_err = None
        if n <= args.peer_max_n:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                try:
                    a_pkg = dirichlet_pkg_solve(q, y, k)
                except Exception as exc:  # report, do not hide, a peer failure
                    a_pkg, a_pkg_err = None, f"failed: {type(exc).__name__}"
                t_pkg = time.perf_counter() - t0
            if a_pkg is not None:
                a_pkg_err = f"{np.max(np.abs(a_pkg / alpha - 1)):.1e}"
        rows.append((n, t_log, t_fit, t_newton, t_scipy, ll_gap, t_pkg, a_pkg_err))
        del q, y
    print(f"k = {k}; median of {args.reps} runs (scipy and dirichlet-pkg: 1 run)\n")
    print("| n | log(q) s | fit s | fit / log | fit us/row | Newton s | scipy L-BFGS s | "
          "scipy / Newton | loglik(ours) - loglik(scipy) | dirichlet-pkg s | pkg rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, t_log, t_fit, t_newton, t_scipy, ll_gap, t_pkg, pkg_err in rows:
        pkg = "not run" if t_pkg is None else f"{t_pkg:.2f}"
        print(f"| {n:,} | {t_log:.3f} | {t_fit:.3f} | {t_fit / t_log:.2f} | "
              f"{1e6 * t_fit / n:.3f} | {t_newton:.4f} | {t_scipy:.3f} | "
              f"{t_scipy / t_newton:.0f} | {ll_gap:.1e} | {pkg} | {pkg_err or '-'} |")


if __name__ == "__main__":
    main()
