"""Cost of every calibrator against the number of classes k, side by side with peers.

Run (results, figure and the exact commands in docs/benchmarks.md, section "Scale")::

    python benchmarks/bench_scale.py --ks 10 30 100 300 1000 --ns 5000 25000 \\
        --out docs/bench/scale.json --figure docs/bench/scale.png

Every (method, k, n) cell runs in a fresh Python process with BLAS, OpenMP and
torch held to one thread. The process draws ``2 n`` scores from
:func:`bayescal.datasets.make_dnn_scores` (an over-confident network:
accuracy about 0.75, confidence about 0.85 at k = 1000; rows ``:n`` to fit,
``n:`` to score), then fits the method twice and records

* ``first_cpu_s``: CPU time (process time, imports excluded) of the first fit
  in the fresh process (what a user's first call costs, one-off set-up
  included);
* ``warm_cpu_s``: CPU time of a second fit of the same data in the same
  process;
* ``peak_mb``: the process's peak resident memory (data included) and
  ``data_mb`` the scores' own size;
* ``test_log_loss`` of the fitted map on the held-out rows.

A cell that runs past ``--timeout`` seconds of wall time is recorded as not
finished. ``--real DIR`` adds the CIFAR network outputs of ``DIR/dnn`` (k = 10
and 100, ``idx_val`` to fit, ``idx_test`` to score). The figure plots the warm
CPU time against k on log-log axes per n, and the summary gives each method's
growth exponent (least-squares slope of log time on log k over k >= 30).

Peers (installed with ``pip install -e ".[bench]"``): probmetrics' ``sms``
(structured matrix scaling), netcal's ``TemperatureScaling`` and scikit-learn's
``CalibratedClassifierCV(method="temperature")`` on a frozen identity
classifier; a peer that is not installed is left out and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ONE_THREAD = {v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
#: bayescal's registry methods timed by default (the Bayesian ones are timed by
#: bench_bayes.py) and the peers.
DEFAULT_METHODS = ("dirichlet", "vector", "matrix", "temperature", "generative",
                   "dirichlet-odir", "dirichlet-l2", "sms", "netcal-ts", "sklearn-ts")
PEERS = ("sms", "netcal-ts", "sklearn-ts")


def _fitter(method: str, k: int) -> Any:
    """A function ``fit(q, y) -> predict_proba`` for one method (imports done here)."""
    if method == "sms":
        import torch
        from probmetrics.calibrators import get_calibrator

        torch.set_num_threads(1)

        def fit_sms(q: np.ndarray, y: np.ndarray) -> Any:
            cal = get_calibrator("sms").fit(q, y)
            return cal.predict_proba
        return fit_sms
    if method == "netcal-ts":
        from netcal.scaling import TemperatureScaling

        def fit_netcal(q: np.ndarray, y: np.ndarray) -> Any:
            cal = TemperatureScaling()
            cal.fit(q, y)
            return cal.transform
        return fit_netcal
    if method == "sklearn-ts":
        from bench_quality import _sklearn  # the quality benchmark's frozen pass-through

        return _sklearn("temperature")
    from bayescal.calibrators.registry import make_calibrator

    def fit_bayescal(q: np.ndarray, y: np.ndarray) -> Any:
        return make_calibrator(method).fit(q, y).predict_proba
    return fit_bayescal


def _data(k: int, n: int, real: str | None) -> tuple[np.ndarray, ...]:
    if real:
        with np.load(real, allow_pickle=False) as f:
            p = f["probs"].astype(np.float64)
            p /= p.sum(axis=1, keepdims=True)
            return p[f["idx_val"]], f["y"][f["idx_val"]], p[f["idx_test"]], f["y"][f["idx_test"]]
    from bayescal.datasets import make_dnn_scores

    q, y = make_dnn_scores(2 * n, k, rng=k)
    return q[:n], y[:n], q[n:], y[n:]


def child(method: str, k: int, n: int, real: str | None) -> dict[str, Any]:
    """One cell, in this (fresh) process."""
    q, y, qt, yt = _data(k, n, real)
    k, n = q.shape[1], len(y)
    fit = _fitter(method, k)
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            t0 = time.process_time()
            predict = fit(q, y)
            times.append(time.process_time() - t0)
        p = np.asarray(predict(qt), dtype=np.float64)
    ll = float(-np.mean(np.log(np.clip(p[np.arange(len(yt)), yt], 1e-300, None))))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    data = Path(real).stem if real else "make_dnn_scores"
    return {"method": method, "k": k, "n": n, "data": data,
            "first_cpu_s": times[0], "warm_cpu_s": times[1], "peak_mb": peak,
            "data_mb": (q.nbytes + qt.nbytes) / 2**20, "test_log_loss": ll,
            "uncalibrated_log_loss": float(-np.mean(np.log(np.clip(
                qt[np.arange(len(yt)), yt], 1e-300, None))))}


def run_cell(method: str, k: int, n: int, real: str | None, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", method, str(k), str(n)]
    if real:
        cmd += ["--real-file", real]
    env = {**os.environ, **ONE_THREAD}
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           check=False)
    except subprocess.TimeoutExpired:
        return {"method": method, "k": k, "n": n, "finished": False,
                "note": f"stopped after {timeout:.0f} s wall"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"method": method, "k": k, "n": n, "finished": False,
                "note": (r.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return {**json.loads(lines[-1]), "finished": True,
            "wall_s": time.perf_counter() - start}


def available(method: str) -> bool:
    mod = {"sms": "probmetrics", "netcal-ts": "netcal", "sklearn-ts": "sklearn.frozen"}.get(method)
    if mod is None:
        return True
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except ModuleNotFoundError:
        return False


def exponents(rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Slope of log(warm CPU s) on log k over k >= 30, per (method, n)."""
    out = {}
    keys = {(r["method"], r["n"]) for r in rows if r.get("finished") and r["data"] ==
            "make_dnn_scores"}
    for m, n in sorted(keys):
        pts = [(r["k"], r["warm_cpu_s"]) for r in rows if r.get("finished")
               and r["method"] == m and r["n"] == n and r["k"] >= 30
               and r["data"] == "make_dnn_scores"]
        if len(pts) >= 2:
            ks, ts = np.log([p[0] for p in pts]), np.log([max(p[1], 1e-4) for p in pts])
            out[(m, n)] = float(np.polyfit(ks, ts, 1)[0])
    return out


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted({r["n"] for r in rows if r["data"] == "make_dnn_scores"})
    fig, axes = plt.subplots(1, len(ns), figsize=(6 * len(ns), 4.6), squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        for m in dict.fromkeys(r["method"] for r in rows):
            pts = sorted((r["k"], r["warm_cpu_s"]) for r in rows if r.get("finished")
                         and r["method"] == m and r["n"] == n and r["data"] == "make_dnn_scores")
            if pts:
                style = "--" if m in PEERS else "-"
                ax.loglog(*zip(*pts, strict=True), style, marker="o", label=m)
        ax.set(xlabel="classes k", ylabel="CPU s per fit (warm, one thread)",
               title=f"make_dnn_scores, n = {n}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 30, 100, 300, 1000])
    ap.add_argument("--ns", type=int, nargs="+", default=[5000, 25000])
    ap.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    ap.add_argument("--timeout", type=float, default=600.0, help="wall seconds per cell")
    ap.add_argument("--real", type=Path, default=None,
                    help="data dir: also run the CIFAR outputs of DIR/dnn")
    ap.add_argument("--out", type=Path, default=None, help="append the rows to this JSON file")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--real-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        method, k, n = args.child
        print(json.dumps(child(method, int(k), int(n), args.real_file)), flush=True)
        return 0
    methods = [m for m in args.methods if available(m)]
    for m in args.methods:
        if m not in methods:
            print(f"# {m}: not installed, left out", flush=True)
    rows: list[dict[str, Any]] = []
    if args.out and args.out.exists():
        rows = json.loads(args.out.read_text())
    cells = [(m, k, n, None) for n in args.ns for k in args.ks for m in methods]
    if args.real:
        cells += [(m, 100 if "cifar100" in f.name else 10, 5000, str(f))
                  for f in sorted((args.real / "dnn").glob("*.npz")) for m in methods]
    for m, k, n, real in cells:
        row = run_cell(m, k, n, real, args.timeout)
        row.setdefault("data", Path(real).stem if real else "make_dnn_scores")
        rows = [r for r in rows if (r["method"], r["k"], r["n"], r.get("data")) !=
                (m, k, n, row["data"])] + [row]
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))
    print()
    print("| data | k | n | method | first fit CPU s | warm CPU s | peak MB | test log-loss |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r.get("data", ""), r["n"], r["k"])):
        if r.get("finished"):
            print(f"| {r['data']} | {r['k']} | {r['n']} | {r['method']} | "
                  f"{r['first_cpu_s']:.3g} | {r['warm_cpu_s']:.3g} | {r['peak_mb']:.0f} | "
                  f"{r['test_log_loss']:.4f} |")
        else:
            print(f"| {r.get('data')} | {r['k']} | {r['n']} | {r['method']} | "
                  f"not finished: {r['note']} | | | |")
    print()
    for (m, n), e in exponents(rows).items():
        print(f"growth exponent {m} n={n}: {e:.2f}")
    if args.figure:
        figure(rows, args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
