"""Binning strategies, the consistency-resampling test, bands, bootstrap and debiased ECE."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bayescal.metrics as metrics
from bayescal.datasets import make_dirgen
from bayescal.maps import softmax
from bayescal.metrics import (
    bootstrap_ci,
    classwise_ece,
    consistency_bands,
    debiased_ece,
    expected_calibration_error,
    max_calibration_error,
    p_ece,
    reliability_table,
)


def _calibrated(n, k, rng, concentration=1.0):
    """Scores from a flat Dirichlet and labels drawn from the scores themselves."""
    p = rng.dirichlet(np.full(k, concentration), size=n)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return p, np.minimum(y, k - 1)


def _tempered(n, rng, temperature=0.5):
    """Known model: calibrated p, reported q = softmax(ln p / T) (over-confident for T < 1)."""
    p, y = _calibrated(n, 3, rng)
    return p, softmax(np.log(p) / temperature), y


@functools.cache
def _true_tempered_ece():
    """True binned confidence ECE (15 uniform bins) of :func:`_tempered`.

    Computed from 10^6 draws using the true probabilities p instead of labels
    (Monte Carlo sd about 1e-4).
    """
    p_big, q_big, _ = _tempered(1_000_000, np.random.default_rng(0))
    pred = q_big.argmax(axis=1)
    conf = q_big[np.arange(len(q_big)), pred]
    bins = np.minimum((conf * 15).astype(int), 14)
    gap = np.bincount(bins, weights=p_big[np.arange(len(q_big)), pred] - conf, minlength=15)
    return float(np.abs(gap).sum() / len(q_big))


# --------------------------------------------------------------------------
# hand-computed binning
# --------------------------------------------------------------------------


def test_quantile_bins_by_hand():
    # class-1 scores 0.1, 0.2, 0.3, 0.4; median 0.25 splits them 2 / 2
    p1 = np.array([0.1, 0.2, 0.3, 0.4])
    proba = np.column_stack([1 - p1, p1])
    y = [0, 1, 0, 1]
    t = reliability_table(y, proba, kind="class", class_index=1, n_bins=2, strategy="quantile")
    np.testing.assert_allclose(t.edges, [0.0, 0.25, 1.0])
    np.testing.assert_array_equal(t.counts, [2, 2])
    np.testing.assert_allclose(t.mean_confidence, [0.15, 0.35])
    np.testing.assert_allclose(t.accuracy, [0.5, 0.5])
    # (2 * |0.5 - 0.15| + 2 * |0.5 - 0.35|) / 4
    assert t.ece() == pytest.approx(0.25, abs=1e-12)


def test_quantile_edge_value_goes_to_upper_bin():
    p1 = np.array([0.1, 0.3, 0.3, 0.5])  # median 0.3 is an inner edge
    proba = np.column_stack([1 - p1, p1])
    t = reliability_table([0, 0, 0, 0], proba, kind="class", class_index=1, n_bins=2,
                          strategy="quantile")
    np.testing.assert_array_equal(t.counts, [1, 3])


def test_quantile_ties_leave_empty_bins():
    proba = np.array([[1.0, 0.0]] * 5 + [[0.6, 0.4]])
    t = reliability_table([0] * 6, proba, n_bins=4, strategy="quantile")
    # confidences 1,1,1,1,1,0.6: every inner quantile is 1.0 -> bins 0..2 hold 0.6 only
    np.testing.assert_array_equal(t.counts, [1, 0, 0, 5])
    assert np.isnan(t.accuracy[1:3]).all()
    assert t.ece() == pytest.approx((1 * 0.4 + 5 * 0.0) / 6, abs=1e-12)


def test_classwise_ece_by_hand_empty_and_closed_last_bin():
    # n_bins=2. class 0 scores 1.0 (closed last bin) and 0.5 (0.5*2 = 1 -> bin 1):
    #   bin 1: conf 0.75, freq 0.5 -> 0.25; bin 0 empty.
    # class 1 scores 0.0 (bin 0, freq 0, gap 0) and 0.5 (bin 1, freq 1, gap 0.5 * 1/2).
    proba = [[1.0, 0.0], [0.5, 0.5]]
    y = [0, 1]
    assert classwise_ece(y, proba, n_bins=2) == pytest.approx(0.25, abs=1e-12)
    assert classwise_ece(y, proba, n_bins=2, strategy="quantile") == pytest.approx(
        np.mean([reliability_table(y, proba, n_bins=2, kind="class", class_index=j,
                                   strategy="quantile").ece() for j in range(2)]),
        abs=1e-12,
    )


def test_mce_and_strategy_by_hand():
    # confidences 0.9 (right), 0.6 (wrong), 0.8 (right), 0.7 (wrong); 2 quantile bins:
    # median 0.75 -> {0.6, 0.7} conf 0.65 acc 0 ; {0.8, 0.9} conf 0.85 acc 1
    proba = [[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7]]
    y = [0, 1, 1, 0]
    assert max_calibration_error(y, proba, n_bins=2, strategy="quantile") == pytest.approx(0.65)
    assert expected_calibration_error(y, proba, n_bins=2, strategy="quantile") == pytest.approx(
        (2 * 0.65 + 2 * 0.15) / 4
    )
    # uniform, 2 bins: everything is >= 0.5 -> one bin, conf 0.75, acc 0.5
    assert max_calibration_error(y, proba, n_bins=2) == pytest.approx(0.25)


@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(2, 6),
    n=st.integers(1, 60),
    n_bins=st.integers(1, 12),
    strategy=st.sampled_from(["uniform", "quantile"]),
)
def test_vectorised_classwise_equals_per_class_tables(seed, k, n, n_bins, strategy):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.5), size=n)
    p[rng.random(n) < 0.2] = np.eye(k)[0]  # exact zeros and ones
    y = rng.integers(0, k, size=n)
    per_class = [
        reliability_table(y, p, n_bins=n_bins, kind="class", class_index=j, strategy=strategy).ece()
        for j in range(k)
    ]
    assert classwise_ece(y, p, n_bins, strategy=strategy) == pytest.approx(
        np.mean(per_class), abs=1e-12
    )


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: classwise_ece([0], [[0.5, 0.5]], strategy="equal"), "strategy must be one of"),
        (lambda: p_ece([0], [[0.5, 0.5]], metric="top"), "metric must be one of"),
        (lambda: p_ece([0], [[0.5, 0.5]], n_resamples=0), "n_resamples must be a positive"),
        (lambda: p_ece([0], [[0.5, 0.5]], rng="seed"), "rng must be None"),
        (lambda: p_ece([0], [[0.5, 0.5]], rng=-1), "rng must be None"),
        (lambda: p_ece([2], [[0.5, 0.5]]), "outside the classes"),
        (lambda: debiased_ece([0], [[0.5, 0.5]], order=3), "order must be one of"),
        (lambda: consistency_bands([[0.5, 0.5]], level=1.0), "level must be a number strictly"),
        (lambda: consistency_bands([[0.5, 0.5]], kind="class"), "kind must be one of"),
        (lambda: bootstrap_ci("ece", [0], [[0.5, 0.5]]), "metric must be a callable"),
        (lambda: bootstrap_ci(classwise_ece, [0], [[0.5, 0.5]], confidence=95),
         "confidence must be a number strictly"),
        (lambda: bootstrap_ci(classwise_ece, [0], [[0.5, 0.5]], method="bca"),
         "method must be one of"),
        (lambda: bootstrap_ci(lambda y, p: np.nan, [0], [[0.5, 0.5]], n_boot=3),
         "non-finite value"),
    ],
)
def test_diagnostic_input_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------
# debiased ECE
# --------------------------------------------------------------------------


def test_debiased_ece_by_hand():
    # one bin (uniform, 15 bins: 0.8 -> bin 12): ybar = 0.75, sbar = 0.8, n = 4
    y = [0, 0, 1, 0]
    p = [[0.8, 0.2]] * 4
    gap, var = -0.05, 0.75 * 0.25
    assert debiased_ece(y, p, order=2) == 0.0  # 0.0025 - 0.1875/3 < 0, clipped
    sigma = np.sqrt(var / 4)
    from scipy.stats import foldnorm

    folded = foldnorm(abs(gap) / sigma, scale=sigma).mean()
    assert debiased_ece(y, p, order=1) == pytest.approx(2 * abs(gap) - folded, abs=1e-12)


def test_debiased_ece_matches_monte_carlo_normal_debiasing(rng):
    # Kumar et al.'s estimator: 2 * plug-in - mean plug-in over normal label resamples
    q, y, _, _ = make_dirgen(600, 3, rng=4)
    t = reliability_table(y, q, n_bins=15)
    ok = t.counts > 0
    w, ybar, sbar = t.counts[ok] / 600, t.accuracy[ok], t.mean_confidence[ok]
    sd = np.sqrt(ybar * (1 - ybar) / t.counts[ok])
    draws = rng.normal(ybar, sd, size=(200_000, ok.sum()))
    mc = 2 * t.ece() - np.mean(np.abs(draws - sbar) @ w)
    assert debiased_ece(y, q, n_bins=15) == pytest.approx(mc, abs=2e-4)


def test_debiased_ece_reduces_bias_on_calibrated_data(rng):
    # The true binned error of calibrated scores is exactly 0 for any bins, so
    # every positive mean here is bias. The order-1 normal debiasing removes
    # only part of it when the true gaps are 0 (measured: about 40%); the
    # order-2 estimator is unbiased for the squared error before clipping.
    plug, deb1, plug2, deb2 = [], [], [], []
    for _ in range(150):
        p, y = _calibrated(400, 3, rng)
        plug.append(classwise_ece(y, p))
        deb1.append(debiased_ece(y, p, metric="classwise"))
        t = reliability_table(y, p)
        ok = t.counts > 0
        plug2.append(np.sum(t.counts[ok] * t.gaps[ok] ** 2) / 400)
        deb2.append(debiased_ece(y, p, order=2) ** 2)
    assert np.mean(plug) > 0.04  # the plug-in bias
    assert np.mean(deb1) < 0.75 * np.mean(plug)
    assert np.mean(deb2) < 0.35 * np.mean(plug2)


def test_debiased_ece_nearly_unbiased_for_a_miscalibrated_model():
    rng = np.random.default_rng(5)
    true_ece = _true_tempered_ece()
    plug, deb = [], []
    for _ in range(400):
        _, q, y = _tempered(300, rng)
        plug.append(expected_calibration_error(y, q))
        deb.append(debiased_ece(y, q))
    bias_plug = np.mean(plug) - true_ece
    assert bias_plug > 0.005  # measured about 0.01 at n = 300
    # measured: debiased mean within about 0.002 of the truth (sd of the mean 0.001)
    assert abs(np.mean(deb) - true_ece) < 0.5 * bias_plug


# --------------------------------------------------------------------------
# consistency resampling
# --------------------------------------------------------------------------


def _reference_p_ece(y, p, metric, n_resamples, seed, n_bins=15):
    """Loop-over-resamples reference consuming the same uniforms as p_ece."""
    rng = np.random.default_rng(seed)
    n, k = p.shape
    u = rng.random((n_resamples, n))
    ece = classwise_ece if metric == "classwise" else expected_calibration_error
    observed = ece(y, p, n_bins)
    pred = np.argmax(p, axis=1)
    cum = np.cumsum(p, axis=1)
    cum /= cum[:, -1:]
    count = 0
    for r in range(n_resamples):
        if metric == "classwise":
            ystar = np.minimum((u[r][:, None] >= cum).sum(axis=1), k - 1)
        else:
            hit = u[r] < p[np.arange(n), pred] / p.sum(axis=1)
            ystar = np.where(hit, pred, (pred + 1) % k)
        count += ece(ystar, p, n_bins) >= observed - 1e-12
    return (1 + count) / (1 + n_resamples)


@pytest.mark.parametrize("metric", ["classwise", "confidence"])
def test_p_ece_equals_loop_reference(metric):
    q, y, _, _ = make_dirgen(150, 4, rng=11)
    # a mildly miscalibrated model so the p-value is not at its floor
    p = softmax(np.log(np.maximum(q, 1e-12)) * 0.6)
    got = p_ece(y, p, metric=metric, n_resamples=300, rng=5)
    assert 0.0 < got < 1.0
    assert got == pytest.approx(_reference_p_ece(y, p, metric, 300, 5), abs=1e-12)


def test_p_ece_does_not_depend_on_chunking(monkeypatch):
    q, y, _, _ = make_dirgen(300, 5, rng=2)
    p = softmax(np.log(np.maximum(q, 1e-12)) * 0.5)
    full = [p_ece(y, p, metric=m, n_resamples=250, rng=9) for m in metrics.METRICS]
    monkeypatch.setattr(metrics, "RESAMPLE_CHUNK_ELEMENTS", 7 * 300 + 5)  # chunks of 7
    assert [p_ece(y, p, metric=m, n_resamples=250, rng=9) for m in metrics.METRICS] == full


@pytest.mark.parametrize("metric", ["classwise", "confidence"])
def test_resampled_outcomes_have_the_predicted_means(metric):
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(4, 0.7), size=40)
    d = metrics._design(p, metric, 5, "uniform")
    sums = np.concatenate(list(d.resampled_outcome_sums(20_000, rng)))
    # E[O_g] = S_g under the null; binomial-type sd <= sqrt(count / 4 / R)
    sd = np.sqrt(np.maximum(d.counts, 1) / 4 / 20_000)
    assert np.all(np.abs(sums.mean(axis=0) - d.score_sums) < 5 * sd)


def test_zero_probability_classes_are_never_drawn():
    # bins of 3: class 2 has p = 0 in row 0 (bin 0) and p = 1 in row 1 (last bin);
    # class 0 has p = 0 in row 2 (last row, where u + i is largest)
    p = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.3, 0.7]] * 50)
    d = metrics._design(p, "classwise", 3, "uniform")
    sums = np.concatenate(list(d.resampled_outcome_sums(2000, np.random.default_rng(0))))
    zero_groups = d.score_sums == 0
    assert zero_groups.any()
    assert np.all(sums[:, zero_groups] == 0)


@pytest.mark.parametrize("metric", ["classwise", "confidence"])
def test_p_value_uniform_on_calibrated_data(metric):
    # 300 seeded repetitions; H0 true -> rejection rate at 0.05 near 0.05
    rng = np.random.default_rng(20191028)
    pvals = np.array(
        [p_ece(*_calibrated(200, 3, rng)[::-1], metric=metric, n_resamples=199, rng=rng)
         for _ in range(300)]
    )
    rate = np.mean(pvals <= 0.05)
    assert 0.02 <= rate <= 0.09, rate
    # roughly uniform beyond the 5% tail too
    assert 0.4 <= pvals.mean() <= 0.6
    assert 0.35 <= np.mean(pvals <= 0.5) <= 0.65


@pytest.mark.parametrize("metric", ["classwise", "confidence"])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_p_value_small_on_overconfident_data(metric, strategy):
    q, y, _, _ = make_dirgen(3000, 4, rng=21)
    assert p_ece(y, q, metric=metric, strategy=strategy, n_resamples=300, rng=0) < 0.01


def test_consistency_bands_cover_calibrated_frequencies(rng):
    p, y = _calibrated(4000, 3, rng)
    for kind in ("confidence", "classwise"):
        bands = consistency_bands(p, kind=kind, n_bins=10, n_resamples=400, level=0.9, rng=1)
        shape = (10,) if kind == "confidence" else (3, 10)
        assert bands.low.shape == bands.high.shape == bands.counts.shape == shape
        if kind == "confidence":
            freq = reliability_table(y, p, n_bins=10).accuracy
        else:
            freq = np.stack([reliability_table(y, p, n_bins=10, kind="class", class_index=j)
                             .accuracy for j in range(3)])
        ok = bands.counts > 0
        assert np.all(bands.low[ok] <= bands.high[ok])
        inside = (freq[ok] >= bands.low[ok]) & (freq[ok] <= bands.high[ok])
        assert inside.mean() >= 0.7  # nominal 0.9 (discreteness makes bands conservative)


# --------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------


def test_bootstrap_interval_covers_true_ece_at_nominal_rate():
    rng = np.random.default_rng(1)
    true_ece = _true_tempered_ece()
    assert true_ece > 0.1
    reps = 150
    covered = 0
    for _ in range(reps):
        _, q, y = _tempered(1000, rng)
        ci = bootstrap_ci(expected_calibration_error, y, q, n_boot=150, rng=rng)
        covered += ci.low <= true_ece <= ci.high
    # nominal 0.95; tolerance 0.88..0.99 is about +-3.5 binomial sd at 150 repetitions
    assert 0.88 <= covered / reps <= 0.99, covered / reps


def test_bootstrap_basic_reflects_percentile():
    q, y, _, _ = make_dirgen(400, 3, rng=1)
    a = bootstrap_ci(classwise_ece, y, q, n_boot=100, rng=3)
    b = bootstrap_ci(classwise_ece, y, q, n_boot=100, method="basic", rng=3)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert b.low == pytest.approx(2 * a.estimate - a.high)
    assert b.high == pytest.approx(2 * a.estimate - a.low)
    assert a.estimate == classwise_ece(y, q)
    assert a.replicates.shape == (100,) and a.confidence == 0.95


# --------------------------------------------------------------------------
# posterior bands
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["confidence", "classwise"])
def test_posterior_bands_collapse_for_identical_draws(kind):
    q, _, _, _ = make_dirgen(300, 4, rng=3)
    bands = metrics.posterior_bands(np.stack([q, q, q]), kind=kind, n_bins=6)
    ok = bands.counts > 0
    np.testing.assert_allclose(bands.low[ok], bands.mean_confidence[ok], atol=1e-12)
    np.testing.assert_allclose(bands.high[ok], bands.mean_confidence[ok], atol=1e-12)
    assert np.isnan(bands.low[~ok]).all()


def test_posterior_bands_by_hand():
    # two draws of two samples; bins fixed by the mean: confidences 0.7 and 0.8 -> bin 1 of 2
    draws = np.array([[[0.6, 0.4], [0.9, 0.1]], [[0.8, 0.2], [0.7, 0.3]]])
    bands = metrics.posterior_bands(draws, n_bins=2, level=0.5)
    # per-draw bin means of p[:, argmax(mean)] = (0.6+0.9)/2 = 0.75 and (0.8+0.7)/2 = 0.75
    np.testing.assert_allclose(bands.low[1], 0.75)
    np.testing.assert_allclose(bands.high[1], 0.75)
    np.testing.assert_array_equal(bands.counts, [0, 2])
    spread = metrics.posterior_bands(np.array([[[0.6, 0.4]], [[0.9, 0.1]]]), n_bins=2, level=0.5)
    # quantiles 0.25 and 0.75 of {0.6, 0.9}
    np.testing.assert_allclose([spread.low[1], spread.high[1]], [0.675, 0.825])


def test_posterior_bands_input_errors():
    with pytest.raises(ValueError, match="must be 3-D"):
        metrics.posterior_bands(np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match=r"proba_draws\[1\] contains negative"):
        metrics.posterior_bands(np.array([[[0.5, 0.5]], [[-0.5, 1.5]]]))


@pytest.mark.parametrize("k", [2, 7, 12])
def test_p_ece_label_draws_agree_across_the_two_samplers(monkeypatch, k):
    """Few classes: labels by CDF comparisons; many: one binary search. Both are
    the same inverse-CDF draw, so the same generator gives the same p-value
    (rows with zero-probability classes included)."""
    import bayescal.metrics as m

    rng = np.random.default_rng(k)
    p = rng.dirichlet(np.full(k, 0.3), size=400)
    p[::7, 0] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, k, 400)
    fast = m.p_ece(y, p, n_resamples=300, rng=1)
    monkeypatch.setattr(m, "_FEW_CLASSES", 0)
    assert m.p_ece(y, p, n_resamples=300, rng=1) == fast
