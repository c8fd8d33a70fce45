"""Side-by-side timings of the MAP fits against scipy L-BFGS and installed peers.

Run (results and the exact command in docs/benchmarks.md, section "Fitting")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fit.py --data ../shared/data --out bench_fit.json

Every case is fitted in one run, side by side, on the same machine state:

* fixed-lambda ODIR Dirichlet fits (``n = 5000`` rows ``idx_val`` of the
  CIFAR-10 / CIFAR-100 network outputs in ``data/dnn``) by
  :func:`bayescal.optimize.fit_multinomial` versus scipy's L-BFGS-B on the
  *same* objective and gradient code (started at the identity, stopped at the
  same max-abs gradient 1e-8), printing the time ratio, the objective gap and
  the test log-loss (rows ``idx_test``);
* ``reg_lambda="auto"`` (full 6 x 6 ODIR grid, 3 folds) versus one fixed fit;
* temperature and vector scaling versus tuiml, netcal and scikit-learn's
  temperature calibration where installed (dirichletcal needs Python >= 3.12);
* synthetic ``make_dirgen`` data: ``n = 100000, k = 10`` (versus L-BFGS) and
  ``n = 10000, k = 1000`` (time and peak memory; L-BFGS is not run there).

Times are medians over ``--repeat`` runs (one run for the slow cases).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize

from bayescal import DirichletCalibrator, TemperatureScaler, VectorScaler, log_features, make_dirgen
from bayescal.optimize import _make_problem, fit_multinomial, make_penalty, multinomial_log_loss


def _median_time(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def _load(data: Path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    with np.load(data / "dnn" / name) as f:
        probs = f["probs"].astype(np.float64)
        q = probs / probs.sum(axis=1, keepdims=True)  # float32 rows renormalised in float64
        return q[f["idx_val"]], f["y"][f["idx_val"]], q[f["idx_test"]], f["y"][f["idx_test"]]


def lbfgs(x: np.ndarray, y: np.ndarray, penalty: Any, structure: str = "full") -> tuple[float, Any]:
    """scipy L-BFGS-B on the solver's own (validated-once) objective and gradient."""
    prob = _make_problem(x, y, structure, penalty, None)
    k = x.shape[1]
    theta0 = {"full": np.concatenate([np.eye(k).ravel(), np.zeros(k)]),
              "diagonal": np.concatenate([np.ones(k), np.zeros(k)]),
              "scalar": np.ones(1)}[structure]

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        st = prob.state(theta)
        return st.loss, st.grad

    t0 = time.perf_counter()
    res = scipy.optimize.minimize(fun, theta0, jac=True, method="L-BFGS-B",
                                  options={"maxiter": 100000, "maxfun": 200000, "ftol": 0.0,
                                           "gtol": 1e-8})
    return time.perf_counter() - t0, res


def bench_dirichlet(x, y, xt, yt, lam, mu, repeat, rows, label, run_lbfgs=True, max_iter=500):
    k = x.shape[1]
    pen = make_penalty(k, "odir", lam, mu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_ours, res = _median_time(
            lambda: fit_multinomial(x, y, penalty=pen, max_iter=max_iter), repeat)
    row = {"case": label, "k": k, "n": len(y), "lambda": lam, "mu": mu,
           "bayescal_s": t_ours, "bayescal_iter": res.n_iter, "bayescal_solver": res.solver,
           "bayescal_grad": res.grad_norm, "bayescal_converged": bool(res.converged),
           "bayescal_hessp": res.n_hessp, "objective": res.loss,
           "test_log_loss": multinomial_log_loss(xt, yt, res.W, res.b)}
    if run_lbfgs:
        t_ref, ref = lbfgs(x, y, pen)
        Wr = ref.x[: k * k].reshape(k, k)
        row.update({"lbfgs_s": t_ref, "lbfgs_iter": int(ref.nit), "ratio": t_ref / t_ours,
                    "objective_gap": float(ref.fun - res.loss),
                    "lbfgs_grad": float(np.max(np.abs(ref.jac))),
                    "lbfgs_test_log_loss": multinomial_log_loss(xt, yt, Wr, ref.x[k * k:])})
    rows.append(row)
    print(json.dumps(row), flush=True)


def bench_auto(q, y, qt, yt, repeat, rows):
    t_fixed, fixed = _median_time(
        lambda: DirichletCalibrator(reg="odir", reg_lambda=10.0, reg_mu=0.1).fit(q, y), repeat)
    t_auto, auto = _median_time(lambda: DirichletCalibrator(reg="odir", cv=3).fit(q, y), 1)
    row = {"case": "auto 6x6 ODIR grid, 3 folds", "k": q.shape[1], "n": len(y),
           "fixed_s": t_fixed, "auto_s": t_auto, "ratio_auto_over_fixed": t_auto / t_fixed,
           "chosen_lambda": auto.reg_lambda_, "chosen_mu": auto.reg_mu_,
           "test_log_loss": float(multinomial_log_loss(log_features(qt), yt, auto.coef_,
                                                       auto.intercept_))}
    rows.append(row)
    print(json.dumps(row), flush=True)
    del fixed


def _nll(y: np.ndarray, proba: np.ndarray) -> float:
    return float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), y], 1e-300))))


def bench_scalers(q, y, qt, yt, repeat, rows, label):
    z, zt = log_features(q), log_features(qt)  # log-probabilities are valid logits
    entries: list[tuple[str, Any]] = [
        ("bayescal TemperatureScaler", lambda: TemperatureScaler().fit(z, y)),
        ("bayescal VectorScaler", lambda: VectorScaler().fit(z, y)),
    ]
    try:
        import tuiml.uncertainty as tu

        entries += [("tuiml TemperatureScaler", lambda: tu.TemperatureScaler().fit(z, y)),
                    ("tuiml VectorScaler", lambda: tu.VectorScaler().fit(z, y))]
    except ImportError:
        print("tuiml not installed: skipped", file=sys.stderr)
    try:
        from netcal.scaling import TemperatureScaling

        entries.append(("netcal TemperatureScaling", lambda: TemperatureScaling().fit(q, y)))
    except ImportError:
        print("netcal not installed: skipped", file=sys.stderr)
    entries.append(("sklearn temperature", lambda: _sklearn_temperature(q, y, qt)))
    for name, fit in entries:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t, est = _median_time(fit, repeat)
                if name.startswith("sklearn"):
                    n = len(q)
                    val = est.predict_proba(np.arange(n)[:, None])
                    test = est.predict_proba(n + np.arange(len(qt))[:, None])
                elif name.startswith("netcal"):
                    val, test = est.transform(q), est.transform(qt)
                else:
                    val, test = est.transform(z), est.transform(zt)
        except Exception as exc:  # a peer failing is a result, not a crash
            row = {"case": label, "method": name, "error": repr(exc)[:200]}
        else:
            row = {"case": label, "method": name, "seconds": t,
                   "val_log_loss": _nll(y, np.asarray(val)),
                   "test_log_loss": _nll(yt, np.asarray(test))}
        rows.append(row)
        print(json.dumps(row), flush=True)


def _sklearn_temperature(q: np.ndarray, y: np.ndarray, qt: np.ndarray) -> Any:
    """scikit-learn's temperature calibration of a frozen classifier whose
    ``predict_proba`` looks the stored scores up by row index (rows of
    ``[q; qt]``), since it only calibrates fitted classifiers."""
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    table = np.vstack([q, qt])

    class Stored(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_ = np.arange(table.shape[1])
            return self

        def predict_proba(self, X):
            return table[np.asarray(X)[:, 0].astype(int)]

        def predict(self, X):
            return self.predict_proba(X).argmax(axis=1)

    clf = Stored().fit(None, y)
    cal = CalibratedClassifierCV(FrozenEstimator(clf), method="temperature")
    return cal.fit(np.arange(len(q))[:, None], y)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="skip k=100 L-BFGS and k=1000")
    parser.add_argument("--part", choices=("all", "main", "k1000"), default="all",
                        help="run everything, everything but k=1000, or only k=1000")
    parser.add_argument("--k1000-iter", type=int, default=8,
                        help="Newton iterations allowed at k=1000 (each costs minutes)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    if args.part != "k1000":
        _main_cases(args, rows)
    if args.part != "main" and not args.quick:
        rng = np.random.default_rng(1)
        q, y, _, _ = make_dirgen(11000, 1000, rng=rng)
        x = log_features(q)
        del q
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        bench_dirichlet(x[:10000], y[:10000], x[10000:], y[10000:], 1e3, 1e3, 1, rows,
                        "make_dirgen ODIR", run_lbfgs=False, max_iter=args.k1000_iter)
        rows[-1]["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows[-1]["peak_rss_before_fit_mb"] = rss0 / 1024
        print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def _main_cases(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:

    for name in ("netcal_cifar10_wideresnet16-4.npz", "netcal_cifar10_lenet5.npz"):
        q, y, qt, yt = _load(args.data, name)
        x, xt = log_features(q), log_features(qt)
        for lam, mu in ((10.0, 0.1), (1e-1, 1e-1), (1e-3, 1e-3)):
            bench_dirichlet(x, y, xt, yt, lam, mu, args.repeat, rows, f"{name} ODIR")
        bench_scalers(q, y, qt, yt, args.repeat, rows, name)
    q, y, qt, yt = _load(args.data, "netcal_cifar10_wideresnet16-4.npz")
    bench_auto(q, y, qt, yt, args.repeat, rows)

    for name in ("netcal_cifar100_wideresnet16-4.npz", "netcal_cifar100_lenet5.npz"):
        q, y, qt, yt = _load(args.data, name)
        x, xt = log_features(q), log_features(qt)
        bench_dirichlet(x, y, xt, yt, 10.0, 10.0, 1, rows, f"{name} ODIR",
                        run_lbfgs=not args.quick)
        bench_scalers(q, y, qt, yt, 1, rows, name)

    rng = np.random.default_rng(0)
    q, y, _, _ = make_dirgen(110000, 10, rng=rng)
    x = log_features(q)
    bench_dirichlet(x[:100000], y[:100000], x[100000:], y[100000:], 1e-1, 1e-1, 1, rows,
                    "make_dirgen ODIR")


if __name__ == "__main__":
    raise SystemExit(main())
