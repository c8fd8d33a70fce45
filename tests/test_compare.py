"""The generative-vs-discriminative comparison tool."""

from __future__ import annotations

import numpy as np
import pytest

from bayescal import DirichletCalibrator, GenerativeDirichletCalibrator
from bayescal.compare import (
    compare_dnn,
    compare_synthetic,
    mixture_map,
    plot_dnn,
    plot_synthetic,
    sample_mixture,
)
from bayescal.metrics import log_loss


def test_mixture_map_is_bayes_rule(rng):
    """The true map of the misspecified scenario beats every fitted map in expectation."""
    q, y = sample_mixture(20000, 3, rng=1)
    mu = mixture_map(q, 3)
    np.testing.assert_allclose(mu.sum(axis=1), 1.0)
    fitted = GenerativeDirichletCalibrator(prior=None).fit(q[:10000], y[:10000])
    assert log_loss(y[10000:], mu[10000:]) < log_loss(y[10000:], fitted.predict_proba(q[10000:]))


def test_synthetic_rows_and_consistency():
    rows = compare_synthetic((200, 5000), k=3, repeats=2, n_test=5000, methods=["generative"])
    assert len(rows) == 2 * 2 * 2  # (true map + generative) x n x repeats
    keys = {"scenario", "k", "n", "repeat", "method", "log_loss", "classwise_ece", "ece",
            "accuracy", "map_tv", "fit_seconds", "error"}
    assert all(set(r) == keys for r in rows)
    gen = {(r["n"], r["repeat"]): r for r in rows if r["method"] == "generative"}
    truth = next(r for r in rows if r["method"] == "true map")
    # correct model: the generative fit approaches the true map as n grows
    assert max(gen[5000, rep]["map_tv"] for rep in range(2)) < min(
        gen[200, rep]["map_tv"] for rep in range(2)
    )
    assert gen[5000, 0]["log_loss"] < truth["log_loss"] + 0.01
    # the same seed gives the same rows
    again = compare_synthetic((200,), k=3, repeats=1, n_test=5000, methods=["generative"])
    assert again[1]["log_loss"] == gen[200, 0]["log_loss"]


def test_misspecified_generative_fit_stays_away_from_the_true_map():
    rows = compare_synthetic(
        (20000,), k=3, scenario="mixture", repeats=1, n_test=5000, methods=["generative"]
    )
    gen = next(r for r in rows if r["method"] == "generative")
    assert gen["map_tv"] > 0.05  # does not shrink with n: the model is wrong


def test_failed_fits_are_recorded_not_hidden():
    rows = compare_synthetic(
        (3,), k=3, repeats=1, n_test=100, methods={"ml": GenerativeDirichletCalibrator(prior=None)}
    )
    ml = next(r for r in rows if r["method"] == "ml")
    assert np.isnan(ml["log_loss"]) and "sample" in ml["error"]


def test_dnn_rows(shared_data):
    rows = compare_dnn(
        shared_data / "dnn",
        files=["netcal_cifar10_wideresnet16-4.npz"],
        methods=["generative", "generative_prior"],
    )
    assert [r["method"] for r in rows] == ["uncalibrated", "generative", "generative_prior"]
    assert all(r["k"] == 10 and r["n_fit"] == 5000 for r in rows)
    assert all(np.isfinite(r["log_loss"]) for r in rows)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"scenario must be one of \['dirgen', 'mixture'\]"):
        compare_synthetic((10,), scenario="gmm")
    with pytest.raises(ValueError, match=r"method must be one of .* got 'svm'"):
        compare_synthetic((10,), methods=["svm"])
    with pytest.raises(ValueError, match=r"no .npz files in"):
        compare_dnn(tmp_path)
    with pytest.raises(ValueError, match=r"data_dir is not a directory"):
        compare_dnn(tmp_path / "missing")


def test_plots_draw_on_the_given_axes(shared_data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = compare_synthetic((100, 1000), k=3, repeats=1, n_test=2000, methods=["generative"])
    fig, axes = plt.subplots(1, 3)
    try:
        assert plot_synthetic(rows, ax=axes[0]) is axes[0]
        assert len(axes[0].get_lines()) >= 2  # true map + generative
        assert plot_synthetic(rows, metric="map_tv", ax=axes[1]) is axes[1]
        # labels for readers, not the row keys ('map tv', 'dirgen')
        assert axes[1].get_ylabel() == "distance to the true map (TV)"
        assert axes[1].get_title() == "Dirichlet scores (model right)"
        dnn = compare_dnn(
            shared_data / "dnn", files=["netcal_cifar10_lenet5.npz"], methods=["generative"]
        )
        assert plot_dnn(dnn, ax=axes[2]) is axes[2]
        assert len(axes[2].patches) == 1
        assert axes[2].get_ylabel() == "log-loss / uncalibrated"
        with pytest.raises(ValueError, match=r"metric must be one of"):
            plot_dnn(dnn, metric="auc", ax=axes[2])
    finally:
        plt.close(fig)


def test_discriminative_beats_misspecified_generative():
    """With mixture class-conditionals, the best DirLin map (ODIR/L2) is closer to the truth."""
    rows = compare_synthetic((8000,), k=3, scenario="mixture", repeats=1, n_test=5000)
    by = {r["method"]: r for r in rows}
    assert set(by) == {"true map", "generative", "odir", "l2"}
    for method in ("odir", "l2"):
        assert by[method]["error"] is None
        assert by[method]["map_tv"] < by["generative"]["map_tv"] - 0.005
        assert by[method]["log_loss"] < by["generative"]["log_loss"]


def test_real_network_generative_worse_than_uncalibrated(shared_data):
    rows = compare_dnn(
        shared_data / "dnn",
        files=["netcal_cifar10_wideresnet16-4.npz"],
        # fixed strengths (no CV) keep the test fast
        methods={
            "generative": GenerativeDirichletCalibrator(prior=None),
            "odir": DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2),
        },
    )
    ll = {r["method"]: r["log_loss"] for r in rows}
    assert ll["odir"] < ll["uncalibrated"] < ll["generative"]
