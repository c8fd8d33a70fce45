"""Make the figures of docs/gallery.md from the shared real-data outputs.

Usage (from the repository root)::

    python docs/make_gallery.py [--data-dir ../shared/data] [--out docs/_static/gallery]

Deep-network outputs (``dnn/*.npz``): calibrators are fitted on the ``idx_val``
rows and every figure shows the ``idx_test`` rows. The 3-class simplex figure
(paper fig. 2a) needs a 3-class problem, so, as in the paper, it uses an MLP on
UCI abalone (``uci/abalone.npz``), trained, calibrated and shown on three
disjoint, stratified thirds of the data.

Prints the numbers quoted in the gallery (ECE, cw-ECE, p-cw-ECE, temperature).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import minimize_scalar  # noqa: E402
from scipy.special import log_softmax  # noqa: E402

import bayescal  # noqa: E402
from bayescal import plots  # noqa: E402
from bayescal.maps import log_features, temperature_map  # noqa: E402
from bayescal.metrics import classwise_ece, expected_calibration_error, p_ece  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEED = 20191028
DPI = 80


def load_dnn(data_dir: Path, name: str) -> dict[str, np.ndarray]:
    with np.load(data_dir / "dnn" / f"{name}.npz") as f:
        d = {key: f[key] for key in f.files}
    probs, y = d["probs"], d["y"].astype(np.intp)
    return {
        "q_val": probs[d["idx_val"]], "y_val": y[d["idx_val"]],
        "q_test": probs[d["idx_test"]], "y_test": y[d["idx_test"]],
    }


def temperature_nll(x: np.ndarray, y: np.ndarray, log_t: float) -> float:
    """Mean negative log-likelihood of ``softmax(x / T)`` at ``T = exp(log_t)``."""
    return float(-np.mean(log_softmax(x * np.exp(-log_t), axis=1)[np.arange(len(y)), y]))


def fit_temperature(q: np.ndarray, y: np.ndarray) -> float:
    """Temperature minimising the validation NLL of ``softmax(ln q / T)``.

    Uses ``bayescal.TemperatureScaler`` on the logits ``ln q`` (equal to the
    network's logits up to a per-row constant) when it is available, else a
    bounded 1-D minimisation over ln T; both give the same T to ~1e-6.
    """
    x = log_features(q)
    if hasattr(bayescal, "TemperatureScaler"):
        return float(bayescal.TemperatureScaler().fit(x, y).temperature_)
    res = minimize_scalar(lambda t: temperature_nll(x, y, t), bounds=(-3.0, 3.0),
                          method="bounded", options={"xatol": 1e-10})
    return float(np.exp(res.x))


def temperature_posterior(q: np.ndarray, y: np.ndarray, t_hat: float, n_draws: int,
                          rng: np.random.Generator) -> np.ndarray:
    """Posterior draws of T under a flat prior on ln T, exact up to a 4001-point grid.

    ``p(ln T | data) ∝ exp(-n NLL(T))``; a 1-parameter model, so the grid is exact
    enough and needs no sampler.
    """
    x = log_features(q)
    grid = np.log(t_hat) + np.linspace(-0.3, 0.3, 4001)
    logp = np.array([-len(y) * temperature_nll(x, y, t) for t in grid])
    w = np.exp(logp - logp.max())
    return np.exp(rng.choice(grid, size=n_draws, p=w / w.sum()))


def dirichlet_odir(q: np.ndarray, y: np.ndarray):
    """Dirichlet calibrator with ODIR regularisation, fitted on (q, y)."""
    return bayescal.DirichletCalibrator(reg="odir").fit(q, y)


def save(fig, out: Path, name: str) -> Path:
    path = out / name
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    size = path.stat().st_size
    if size > 300_000:
        raise RuntimeError(f"{path} is {size} bytes; keep gallery PNGs under 300 KB")
    print(f"  wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
          f"({size / 1000:.0f} kB)")
    return path


def summary(label: str, y: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> None:
    print(f"  {label:<28} ECE {expected_calibration_error(y, p):.4f}  "
          f"cw-ECE {classwise_ece(y, p):.4f}  "
          f"p-cw-ECE {p_ece(y, p, n_resamples=1000, rng=rng):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_static" / "gallery")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()

    # --- CIFAR-10, wide ResNet 16-4: confidence and classwise diagrams -----------
    print("CIFAR-10 WRN-16-4")
    d = load_dnn(args.data_dir, "netcal_cifar10_wideresnet16-4")
    t_hat = fit_temperature(d["q_val"], d["y_val"])
    q_ts = temperature_map(d["q_test"], t_hat, kind="probs")
    print(f"  temperature T = {t_hat:.4f}")
    summary("uncalibrated", d["y_test"], d["q_test"], rng)
    summary("temperature-scaled", d["y_test"], q_ts, rng)

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.6), layout="compressed")
    plots.reliability_diagram(d["y_test"], d["q_test"], ax=axes[0], rng=rng,
                              title="Uncalibrated")
    plots.reliability_diagram(d["y_test"], q_ts, ax=axes[1], rng=rng,
                              title=f"Temperature scaling (T = {t_hat:.2f})")
    save(fig, args.out, "reliability_confidence_c10_wrn.png")

    disp = plots.reliability_diagram(d["y_test"], d["q_test"], kind="classwise", rng=rng,
                                     title="CIFAR-10 WRN-16-4, uncalibrated")
    save(disp.figure, args.out, "reliability_classwise_c10_wrn.png")

    cal = dirichlet_odir(d["q_val"], d["y_val"])
    q_dir = cal.predict_proba(d["q_test"])
    summary("Dirichlet ODIR", d["y_test"], q_dir, rng)
    acc0 = float(np.mean(d["q_test"].argmax(axis=1) == d["y_test"]))
    acc1 = float(np.mean(q_dir.argmax(axis=1) == d["y_test"]))
    print(f"  accuracy {acc0:.4f} uncalibrated, {acc1:.4f} Dirichlet ODIR ({acc1 - acc0:+.4f})")
    A, c = cal.to_canonical()
    names = [str(j) for j in range(10)]
    axes = plots.canonical_heatmap(A, c, class_names=names,
                                   title="A of Dirichlet ODIR, CIFAR-10 WRN-16-4")
    save(axes[0].figure, args.out, "canonical_c10_wrn.png")
    ax = plots.confusion_change(d["y_test"], d["q_test"], q_dir, class_names=names)
    save(ax.figure, args.out, "confusion_change_c10_wrn.png")

    # --- CIFAR-100, wide ResNet: top classes of a 100-class problem ---------------
    print("CIFAR-100 WRN-16-4")
    d100 = load_dnn(args.data_dir, "netcal_cifar100_wideresnet16-4")
    t100 = fit_temperature(d100["q_val"], d100["y_val"])
    q100 = temperature_map(d100["q_test"], t100, kind="probs")
    print(f"  temperature T = {t100:.4f}")
    summary("uncalibrated", d100["y_test"], d100["q_test"], rng)
    summary("temperature-scaled", d100["y_test"], q100, rng)
    disp = plots.reliability_diagram(
        d100["y_test"], q100, kind="classwise", max_classes=12, n_bins=10, rng=rng,
        title=f"CIFAR-100 WRN-16-4, temperature scaling (T = {t100:.2f})",
    )
    save(disp.figure, args.out, "reliability_classwise_c100_wrn_top12.png")

    # --- CIFAR-10 LeNet-5: posterior band of a Bayesian temperature ---------------
    print("CIFAR-10 LeNet-5")
    dl = load_dnn(args.data_dir, "netcal_cifar10_lenet5")
    tl = fit_temperature(dl["q_val"], dl["y_val"])
    t_draws = temperature_posterior(dl["q_val"], dl["y_val"], tl, 200, rng)
    print(f"  temperature T = {tl:.4f}; posterior 90% interval "
          f"{np.quantile(t_draws, 0.05):.4f} .. {np.quantile(t_draws, 0.95):.4f}")
    draws = np.stack([temperature_map(dl["q_test"], t, kind="probs") for t in t_draws])
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.6), layout="compressed")
    plots.posterior_reliability_diagram(dl["y_test"], draws, ax=axes[0],
                                        title="LeNet-5, Bayesian temperature")
    plots.reliability_diagram(dl["y_test"], draws.mean(axis=0), ax=axes[1], rng=rng,
                              title="same, consistency bands")
    save(fig, args.out, "posterior_reliability_c10_lenet.png")

    # --- abalone MLP: the calibration map on the simplex (paper fig. 2a) ----------
    print("UCI abalone MLP (k = 3)")
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with np.load(args.data_dir / "uci" / "abalone.npz") as f:
        X, y, class_names = f["X"], f["y"].astype(np.intp), [str(c) for c in f["class_names"]]
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=2 / 3, stratify=y,
                                                  random_state=0)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5,
                                                stratify=y_rest, random_state=0)
    mlp = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(32,),
                                                        max_iter=2000, random_state=0))
    mlp.fit(X_tr, y_tr)
    q_cal, q_te = mlp.predict_proba(X_cal), mlp.predict_proba(X_te)
    cal3 = dirichlet_odir(q_cal, y_cal)
    summary("abalone MLP uncalibrated", y_te, q_te, rng)
    summary("abalone MLP Dirichlet ODIR", y_te, cal3.predict_proba(q_te), rng)
    names3 = {"F": "female", "I": "infant", "M": "male"}
    ax = plots.simplex_map(cal3, class_names=[names3.get(c, c) for c in class_names],
                           title="Dirichlet ODIR map, abalone MLP")
    save(ax.figure, args.out, "simplex_map_abalone_mlp.png")

    # --- posterior of the abalone map: Bayesian calibrator, else bootstrap ----------
    bayes = bayesian_dirichlet(q_cal, y_cal)
    if bayes is not None:
        print(f"  BayesianDirichletCalibrator(prior={bayes.prior!r}), sampler "
              f"{bayes.sampler_!r}: {bayes.n_draws_} draws, {bayes.diagnostics_}")
        disp = plots.posterior_reliability_diagram(
            y_te, bayes.predict_proba_draws(q_te), kind="classwise", n_bins=10,
            class_names=[names3.get(c, c) for c in class_names],
            title="Bayesian Dirichlet (hierarchical prior), abalone MLP",
        )
        save(disp.figure, args.out, "posterior_reliability_abalone_mlp.png")
        axes = plots.forest_plot(bayes.idata_, var_names=["A", "c"],
                                 title="Posterior of A and c (NUTS), abalone MLP")
    else:
        a_draws, c_draws = bootstrap_canonical(q_cal, y_cal, 100, rng)
        axes = plots.forest_plot({"A": a_draws, "c": c_draws}, reference=0.0,
                                 title="Dir-ODIR A and c: 100 bootstrap refits")
    save(axes[0].figure, args.out, "forest_A_abalone_mlp.png")
    print(f"done in {time.perf_counter() - start:.0f} s")


def bayesian_dirichlet(q: np.ndarray, y: np.ndarray):
    """``BayesianDirichletCalibrator`` (its default prior and sampler, 2 chains x 500
    draws) if ``bayescal.bayes`` is available, else ``None``."""
    try:
        from bayescal.bayes import BayesianDirichletCalibrator
    except ImportError:
        return None
    return BayesianDirichletCalibrator(draws=500, tune=500, chains=2,
                                       random_seed=SEED).fit(q, y)


def bootstrap_canonical(q: np.ndarray, y: np.ndarray, n_boot: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Canonical ``A``, ``c`` of Dirichlet ODIR refitted on bootstrap resamples.

    A frequentist stand-in for posterior draws until the Bayesian calibrator
    lands (its ``idata_`` can be passed to :func:`bayescal.plots.forest_plot`
    directly).
    """
    fits = [dirichlet_odir(q[i], y[i]).to_canonical()
            for i in rng.integers(0, len(y), size=(n_boot, len(y)))]
    return np.stack([a for a, _ in fits]), np.stack([c for _, c in fits])


if __name__ == "__main__":
    main()
