"""Newton-CG's preconditioner at many classes: Hessian-vector products per fit.

Run (the result is quoted in docs/benchmarks.md, section "Scale")::

    OPENBLAS_NUM_THREADS=1 python benchmarks/precond_hvps.py --data ../shared/data
    OPENBLAS_NUM_THREADS=1 python benchmarks/precond_hvps.py --l2-grid

Fits the full map (``fit_multinomial``, Newton-CG) under the structured
penalty with every strength tied at 10, 1, 0.1 and 0.01, started at
temperature scaling ``0.85 I``, on ``make_dnn_scores(n, k, rng=1)`` at
k = 100 and 150 (n = 5000 and 3000) and on the CIFAR-100 outputs'
calibration rows, with the preconditioner as it is (block Jacobi plus the
softmax's invariant directions, ``_Problem._add_invariant_directions``) and
with block Jacobi alone. Prints the Hessian-vector products of each fit and
their totals; every fit must converge to the same loss.

``--l2-grid`` instead walks the L2 penalty's grid of ``DirichletCalibrator``
(``L2_GRID``, 1e3 down to 1e-7, each fit warm-started from the previous) on
``make_dnn_scores(1600, 40, rng=40)``, near the unpenalised fit at its weak
end, and prints each fit's Newton iterations and products (a fit that does not
converge in ``max_iter`` is marked ``!``). It uses only the public solver, so
it also runs on an older tree (``PYTHONPATH=<worktree> python
benchmarks/precond_hvps.py --l2-grid``).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

import bayescal.optimize as optimize
from bayescal.datasets import make_dnn_scores
from bayescal.maps import log_features
from bayescal.optimize import fit_multinomial, make_penalty

STRENGTHS = (10.0, 1.0, 0.1, 0.01)


def cases(data: Path | None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    out = []
    for k, n in ((150, 3000), (100, 5000)):
        q, y = make_dnn_scores(n, k, rng=1)
        out.append((f"make_dnn_scores({n}, {k})", log_features(q), y))
    if data is not None:
        for f in sorted((data / "dnn").glob("*cifar100*.npz")):
            with np.load(f, allow_pickle=False) as d:
                p = d["probs"].astype(np.float64)
                p /= p.sum(axis=1, keepdims=True)
                out.append((f.stem, log_features(p[d["idx_val"]]), d["y"][d["idx_val"]]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="also the CIFAR-100 outputs of DIR/dnn")
    ap.add_argument("--l2-grid", action="store_true", help="L2's grid at k = 40 instead")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.l2_grid:
        return l2_grid()
    with_directions = optimize._Problem._add_invariant_directions
    totals = {"block Jacobi + invariant directions": 0, "block Jacobi alone": 0}
    for name, x, y in cases(args.data):
        k, n = x.shape[1], len(y)
        for c in STRENGTHS:
            pen = make_penalty(k, "structured", c, c, reg_diag=c, n_samples=n, scale=0.85)
            row = []
            losses = []
            for label in totals:
                optimize._Problem._add_invariant_directions = (
                    with_directions if label.endswith("directions")
                    else lambda self, solve: _alone(self, solve))
                fit = fit_multinomial(x, y, penalty=pen, init=(0.85 * np.eye(k), np.zeros(k)))
                assert fit.converged, (name, c, label)
                totals[label] += fit.n_hessp
                row.append(fit.n_hessp)
                losses.append(fit.loss)
            optimize._Problem._add_invariant_directions = with_directions
            print(f"{name} strength {c:g}: {row[0]} against {row[1]} products "
                  f"(loss {losses[0]:.10f} / {losses[1]:.10f})", flush=True)
    print(", ".join(f"{label}: {v}" for label, v in totals.items()))
    return 0


def l2_grid() -> int:
    """L2's grid, strong to weak, warm-started: products and convergence per fit."""
    import time

    from bayescal.calibrators.dirichlet import L2_GRID

    k, n = 40, 1600
    q, y = make_dnn_scores(n, k, rng=40)
    x = log_features(q)
    prev, total, out = None, 0, []
    t0 = time.process_time()
    for lam in L2_GRID:
        fit = fit_multinomial(x, y, penalty=make_penalty(k, "l2", lam), init=prev, warn=False)
        prev, total = fit, total + fit.n_hessp
        out.append(f"{lam:g}: {fit.n_iter}/{fit.n_hessp}{'' if fit.converged else '!'}")
    print(f"L2 grid, k = {k}, n = {n} (iterations/products): " + ", ".join(out))
    print(f"total {total} products, {time.process_time() - t0:.1f} CPU s")
    return 0


def _alone(prob: optimize._Problem, solve):  # noqa: ANN001, ANN202 -- the block solve only
    k = prob.k
    return lambda r: optimize._packed(solve(optimize._rows(r, k)))


if __name__ == "__main__":
    raise SystemExit(main())
