"""Every figure renders to PNG with the Agg backend, with the expected artists and labels."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.quiver import Quiver  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from bayescal import DirichletCalibrator  # noqa: E402
from bayescal.datasets import make_dirgen  # noqa: E402
from bayescal.maps import dirlin_map, dirlin_to_canonical, temperature_map  # noqa: E402
from bayescal.metrics import posterior_bands, reliability_table  # noqa: E402
from bayescal.plots import (  # noqa: E402
    ReliabilityDisplay,
    canonical_heatmap,
    confusion_change,
    forest_plot,
    posterior_reliability_diagram,
    reliability_diagram,
    simplex_map,
)

KS = [2, 3, 10, 100]
N_BINS = 8


@pytest.fixture(autouse=True)
def _close_figures(monkeypatch, tmp_path):
    """No plot may call show() or write files; close every figure afterwards."""

    def _no_show(*args, **kwargs):
        raise AssertionError("plots must never call show()")

    monkeypatch.setattr(plt, "show", _no_show)
    monkeypatch.chdir(tmp_path)
    yield
    plt.close("all")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module", params=KS, ids=[f"k{k}" for k in KS])
def data(request):
    k = request.param
    q, y, _, _ = make_dirgen(600, k, rng=k)
    draws = np.stack([temperature_map(q, t, kind="probs") for t in (1.2, 1.5, 1.8, 2.1)])
    return k, q, y, draws


def _render(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=30)
    png = buf.getvalue()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 500
    return png


def _labelled(ax) -> None:
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def _check_reliability_panel(ax, table, *, band: bool, hist_ax=None) -> None:
    """Only bins that hold scores draw: one band rectangle and one dot each."""
    nonempty = table.counts > 0
    diagonal, curve = ax.lines  # the diagonal, then the observed frequencies
    np.testing.assert_allclose(curve.get_xdata(), table.mean_confidence[nonempty])
    np.testing.assert_allclose(curve.get_ydata(), table.accuracy[nonempty])
    assert list(diagonal.get_xdata()) == [0, 1]
    assert len(ax.patches) == (int(nonempty.sum()) if band else 0)  # band rectangles
    assert not [c for c in ax.collections if isinstance(c, LineCollection)]  # no bars of ink
    assert len(ax.texts) + (ax.get_legend() is not None) >= 1  # the ECE note
    if hist_ax is not None:
        heights = [r.get_height() for r in hist_ax.patches]
        np.testing.assert_array_equal(heights, table.counts[nonempty])
        assert hist_ax.get_ylabel() == "count"
        assert hist_ax.get_ylim()[1] == table.counts.max()
        assert hist_ax in ax.child_axes  # an inset over the bottom quarter of the panel
    _labelled(ax)


@pytest.mark.parametrize("bands", [True, False])
@pytest.mark.parametrize("histogram", [True, False])
def test_confidence_reliability_diagram(data, bands, histogram):
    k, q, y, _ = data
    disp = reliability_diagram(y, q, n_bins=N_BINS, bands=bands, histogram=histogram,
                               n_resamples=100, rng=0)
    assert disp.axes.shape == (1,) and disp.classes is None
    table = reliability_table(y, q, n_bins=N_BINS)
    hist = disp.histograms[0] if histogram else None
    assert (disp.histograms is None) == (not histogram)
    _check_reliability_panel(disp.axes[0], table, band=bands, hist_ax=hist)
    if bands:
        ok = table.counts > 0
        rects = disp.axes[0].patches
        np.testing.assert_allclose([r.get_y() for r in rects], disp.bands.low[ok])
        np.testing.assert_allclose([r.get_y() + r.get_height() for r in rects],
                                   disp.bands.high[ok])
        np.testing.assert_allclose([r.get_x() for r in rects], table.edges[:-1][ok])
        labels = disp.axes[0].get_legend_handles_labels()[1]
        assert "90% consistency band" in labels
    # legend and count axis readable when the figure is shown at text width: 8 pt or more
    legend = disp.axes[0].get_legend()
    assert min(x.get_fontsize() for x in [*legend.get_texts(), legend.get_title()]) >= 8
    if histogram:
        assert min(x.get_fontsize() for x in hist.get_yticklabels()) >= 8
        assert hist.yaxis.label.get_fontsize() >= 8
    _render(disp.figure)


def test_bands_skip_empty_bins():
    """Scores in 2 of 10 bins: two band rectangles, two dots, two histogram bars."""
    rng = np.random.default_rng(0)
    top = rng.choice([0.55, 0.95], size=400)
    q = np.column_stack([top, 1 - top])
    y = (rng.random(400) > top).astype(int)
    disp = reliability_diagram(y, q, n_bins=10, n_resamples=100, rng=0)
    ax = disp.axes[0]
    assert int(np.sum(disp.tables[0].counts > 0)) == 2
    assert len(ax.patches) == 2 and len(ax.lines[1].get_xdata()) == 2
    assert len(disp.histograms[0].patches) == 2


def test_classwise_reliability_diagram(data):
    k, q, y, _ = data
    max_classes = 6  # k = 100 shows the 6 most frequent classes (keeps the test fast)
    disp = reliability_diagram(y, q, kind="classwise", n_bins=N_BINS, n_resamples=100,
                               max_classes=max_classes, rng=0)
    n_panels = min(k, max_classes)
    assert len(disp.axes) == n_panels == len(disp.tables) == len(disp.classes)
    assert len(disp.figure.axes) == n_panels  # unused grid cells removed
    for ax, table, hist in zip(disp.axes, disp.tables, disp.histograms, strict=True):
        _check_reliability_panel(ax, table, band=True, hist_ax=hist)
    if k > max_classes:
        freq = np.bincount(y, minlength=k)
        assert sorted(freq[disp.classes]) == sorted(freq)[-max_classes:]
        assert f"6 most frequent of {k} classes" in disp.figure._suptitle.get_text()
    else:
        assert disp.classes == list(range(k))
    assert len(disp.figure.legends) == 1
    _render(disp.figure)


def test_classwise_default_top20_beyond_20_classes():
    q, y, _, _ = make_dirgen(400, 30, rng=1)
    disp = reliability_diagram(y, q, kind="classwise", bands=False)
    assert len(disp.axes) == 20
    assert len(set(disp.classes)) == 20


def test_posterior_reliability_diagram(data):
    k, q, y, draws = data
    kind = "confidence" if k == 2 else "classwise"
    disp = posterior_reliability_diagram(y, draws, kind=kind, n_bins=N_BINS, max_classes=4)
    assert len(disp.axes) == (1 if kind == "confidence" else min(k, 4))
    for ax, table, hist in zip(disp.axes, disp.tables, disp.histograms, strict=True):
        _check_reliability_panel(ax, table, band=True, hist_ax=hist)
    expected = posterior_bands(draws, kind=kind, n_bins=N_BINS)
    np.testing.assert_array_equal(disp.bands.low, expected.low)
    labels = disp.axes[0].get_legend_handles_labels()[1]
    assert "90% posterior band (4 draws)" in labels
    _render(disp.figure)


def _same_display(a, b) -> None:
    """Two displays drew the same panels: classes, binned tables and bands."""
    assert a.classes == b.classes and len(a.axes) == len(b.axes) == len(a.tables)
    for ta, tb in zip(a.tables, b.tables, strict=True):
        for field in ("edges", "counts", "mean_confidence", "accuracy"):
            np.testing.assert_array_equal(getattr(ta, field), getattr(tb, field))
    assert (a.bands is None) == (b.bands is None)
    if a.bands is not None:
        np.testing.assert_array_equal(a.bands.low, b.bands.low)
        np.testing.assert_array_equal(a.bands.high, b.bands.high)


@pytest.fixture(scope="module")
def fitted():
    """A DirichletCalibrator fitted on 3-class scores, and held-out scores and labels."""
    q, y, _, _ = make_dirgen(600, 3, rng=7)
    cal = DirichletCalibrator().fit(q[:300], y[:300])
    return cal, q[300:], y[300:]


@pytest.mark.parametrize("kind", ["confidence", "classwise"])
def test_display_from_predictions_is_reliability_diagram(kind):
    q, y, _, _ = make_dirgen(400, 4, rng=3)
    disp = ReliabilityDisplay.from_predictions(y, q, kind=kind, n_bins=N_BINS,
                                               n_resamples=100, rng=0)
    assert isinstance(disp, ReliabilityDisplay)
    _same_display(disp, reliability_diagram(y, q, kind=kind, n_bins=N_BINS, n_resamples=100,
                                            rng=0))
    assert disp.figure is disp.axes[0].figure
    _render(disp.figure)


@pytest.mark.parametrize("kind", ["confidence", "classwise"])
def test_display_from_estimator_is_from_predictions_of_its_proba(fitted, kind):
    cal, q, y = fitted
    disp = ReliabilityDisplay.from_estimator(cal, q, y, kind=kind, n_bins=N_BINS,
                                             n_resamples=100, rng=0)
    _same_display(disp, ReliabilityDisplay.from_predictions(
        y, cal.predict_proba(q), kind=kind, n_bins=N_BINS, n_resamples=100, rng=0))
    if kind == "classwise":  # one panel per class, titled by the estimator's classes_
        assert disp.classes == [0, 1, 2] and len(disp.axes) == 3
        assert [ax.get_title() for ax in disp.axes] == ["0", "1", "2"]
    else:
        assert disp.classes is None and len(disp.axes) == 1


def test_display_from_estimator_maps_labels_through_classes(fitted):
    _, q, y = fitted
    names = np.array(["cat", "cow", "dog"])
    cal = DirichletCalibrator().fit(q, names[y])
    disp = ReliabilityDisplay.from_estimator(cal, q, names[y], kind="classwise", bands=False)
    _same_display(disp, ReliabilityDisplay.from_predictions(
        y, cal.predict_proba(q), kind="classwise", bands=False))
    assert [ax.get_title() for ax in disp.axes] == ["cat", "cow", "dog"]
    disp = ReliabilityDisplay.from_estimator(cal, q, names[y], class_names=["C", "O", "D"],
                                             kind="classwise", bands=False)
    assert [ax.get_title() for ax in disp.axes] == ["C", "O", "D"]
    with pytest.raises(ValueError, match="bird"):
        ReliabilityDisplay.from_estimator(cal, q, np.where(y == 0, "bird", names[y]))


def test_display_from_estimator_needs_a_fitted_classifier(fitted):
    _, q, y = fitted
    with pytest.raises(NotFittedError):
        ReliabilityDisplay.from_estimator(DirichletCalibrator(), q, y)
    with pytest.raises(ValueError, match="must have predict_proba.*'identity'"):
        ReliabilityDisplay.from_estimator("identity", q, y)


def test_display_uses_given_axes(fitted):
    cal, q, y = fitted
    fig, axes = plt.subplots(1, 3)
    disp = ReliabilityDisplay.from_estimator(cal, q, y, kind="classwise", ax=axes,
                                             bands=False)
    assert list(disp.axes) == list(axes) and disp.figure is fig


def test_simplex_map():
    W = np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.3, 0.0, 1.5]])
    b = np.array([0.2, 0.0, -0.2])
    ax = simplex_map(lambda q: dirlin_map(q, W, b), resolution=10, class_names=["a", "b", "c"])
    quivers = [c for c in ax.collections if isinstance(c, Quiver)]
    assert len(quivers) == 1 and quivers[0].N == 9 * 8 // 2
    assert len(ax.lines) == 1  # the triangle
    assert [t.get_text() for t in ax.texts] == ["a", "b", "c"]
    _labelled(ax)
    _render(ax.figure)


def test_simplex_map_identity_has_no_arrows_and_accepts_estimators():
    class Identity:
        def predict_proba(self, q):
            return dirlin_map(q, np.eye(3), np.zeros(3))

    ax = simplex_map(Identity(), resolution=6)
    quiver = ax.collections[0]
    np.testing.assert_allclose(quiver.U, 0.0, atol=1e-12)
    np.testing.assert_allclose(quiver.V, 0.0, atol=1e-12)


def test_canonical_heatmap(data):
    k, q, *_ = data
    rng = np.random.default_rng(k)
    A, c = dirlin_to_canonical(np.eye(k) + 0.2 * rng.random((k, k)), rng.normal(size=k))
    axes = canonical_heatmap(A, c)
    assert axes.shape == (2,)
    ax_a, ax_c = axes
    assert len(ax_a.images) == 1 and len(ax_c.images) == 1
    np.testing.assert_allclose(ax_a.images[0].get_array(), A)
    annotated = k <= 12
    assert len(ax_a.texts) == (k * k if annotated else 0)
    assert len(ax_c.texts) == (k if annotated else 0)
    for ax in axes:
        _labelled(ax)
    _render(ax_a.figure)


def test_confusion_change(data):
    k, q, y, _ = data
    after = dirlin_map(q, 0.5 * np.eye(k), np.linspace(0.0, 1.0, k))
    ax = confusion_change(y, q, after)
    assert len(ax.images) == 1
    diff = np.asarray(ax.images[0].get_array())
    pred_b, pred_a = q.argmax(1), after.argmax(1)
    assert diff.sum() == 0  # samples move between cells, none appear
    assert np.trace(diff) == np.sum(pred_a == y) - np.sum(pred_b == y)
    assert len(ax.texts) == (k * k if k <= 12 else 0)
    _labelled(ax)
    _render(ax.figure)


def _marker_x(ax) -> np.ndarray:
    """x of every point marker on ``ax`` (Line2D markers or scatter offsets)."""
    xs = [line.get_xdata() for line in ax.lines if line.get_marker() not in (None, "None", "")]
    xs += [c.get_offsets()[:, 0] for c in ax.collections
           if isinstance(c, PathCollection) and len(c.get_offsets())]
    return np.concatenate([np.ravel(x) for x in xs]) if xs else np.array([])


def test_forest_plot_of_draws(data):
    """One chain of draws: ArviZ's intervals, no diagnostics, medians as the dots."""
    k, *_ = data
    rng = np.random.default_rng(0)
    draws = np.eye(k) + 0.1 * rng.normal(size=(300, k, k))
    axes = forest_plot(draws, max_rows=40)
    assert axes.shape == (1,)
    ax = axes[0]
    n_rows = min(k * k, 40)
    medians = np.sort(_marker_x(ax))
    flat = draws.reshape(300, -1)
    kept = np.argsort(-np.abs(flat.mean(0)), kind="stable")[:n_rows]
    np.testing.assert_allclose(medians, np.sort(np.median(flat[:, kept], axis=0)), atol=1e-12)
    assert any(line.get_linestyle() == ":" for line in ax.lines)  # the reference line at 0
    if k * k > 40:
        assert "40 of" in ax.get_title()
    assert ax.get_xlabel() == "posterior value" and ax.get_title()
    _render(ax.figure)


def test_forest_plot_shows_rhat_and_ess_of_chains():
    """Several chains: the ESS and R-hat panels hold ArviZ's own diagnostics."""
    import arviz as az

    rng = np.random.default_rng(1)
    post = {"A": rng.gamma(2.0, size=(2, 100, 2, 2)), "c": rng.dirichlet([1, 1], size=(2, 100))}
    idata = xr.Dataset({
        "A": (("chain", "draw", "class_out", "class_in"), post["A"]),
        "c": (("chain", "draw", "class_out"), post["c"]),
    })

    class Fitted:  # anything with a ``posterior`` group, like InferenceData / DataTree
        posterior = idata

    axes = forest_plot(Fitted(), var_names=["A", "c"])
    assert axes.shape == (3,)
    assert [a.get_xlabel() for a in axes] == ["posterior value", "effective sample size", "R-hat"]
    ess = np.concatenate([np.ravel(az.ess(idata, method="identity")[v].values) for v in "Ac"])
    rhat = np.concatenate([np.ravel(az.rhat(idata, method="identity")[v].values) for v in "Ac"])
    np.testing.assert_allclose(np.sort(_marker_x(axes[1])), np.sort(ess), rtol=1e-10)
    np.testing.assert_allclose(np.sort(_marker_x(axes[2])), np.sort(rhat), rtol=1e-10)
    assert len(_marker_x(axes[0])) == 6
    assert len(forest_plot(Fitted(), diagnostics=False)) == 1
    _render(axes[0].figure)


def test_forest_plot_accepts_mapping_and_bayesian_idata():
    rng = np.random.default_rng(1)
    flat = {"W": rng.normal(size=(50, 3, 3)), "b": rng.normal(size=(50, 3))}
    assert len(_marker_x(forest_plot(flat)[0])) == 9
    assert len(_marker_x(forest_plot(flat, var_names=["W", "b"])[0])) == 12
    with pytest.raises(ValueError, match="at least two chains"):
        forest_plot(flat, diagnostics=True)


def test_user_axes_are_used():
    q, y, _, _ = make_dirgen(300, 3, rng=0)
    fig, axes = plt.subplots(1, 2)
    disp = reliability_diagram(y, q, ax=axes[0], bands=False)
    assert disp.axes[0] is axes[0] and disp.figure is fig
    disp = reliability_diagram(y, q, kind="classwise", classes=[2], ax=axes[1], bands=False)
    assert disp.classes == [2] and disp.axes[0] is axes[1]
    fig2 = plt.figure()
    disp = reliability_diagram(y, q, kind="classwise", fig=fig2, bands=False)
    assert disp.figure is fig2 and len(fig2.axes) == 3
    A, c = dirlin_to_canonical(np.eye(3), np.zeros(3))
    fig3, pair = plt.subplots(1, 2)
    assert list(canonical_heatmap(A, c, axes=pair)) == list(pair)


def test_import_bayescal_does_not_import_matplotlib():
    code = (
        "import sys, bayescal, bayescal.plots, bayescal.metrics; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env=env)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda q, y: reliability_diagram(y, q, kind="class"), "kind must be one of"),
        (lambda q, y: reliability_diagram(y, q, ax=plt.gca(), fig=plt.figure()),
         "either ax= or fig="),
        (lambda q, y: reliability_diagram(y, q, kind="classwise", ax=plt.gca(), bands=False),
         "has 3 panels but 1 axes"),
        (lambda q, y: reliability_diagram(y, q, kind="classwise", classes=[5]),
         "classes must be a non-empty list"),
        (lambda q, y: reliability_diagram(y, q, class_names=["a"]), "class_names must have 3"),
        (lambda q, y: reliability_diagram(y, q, classes=[0], bands=False),
         "classes selects panels of kind='classwise'"),
        (lambda q, y: posterior_reliability_diagram(y, q), "must be 3-D"),
        (lambda q, y: posterior_reliability_diagram(y, np.stack([q, q + 0.1])),
         r"proba_draws\[1\] rows must sum to 1"),
        (lambda q, y: simplex_map("identity"), "must have predict_proba or be a callable"),
        (lambda q, y: simplex_map(lambda p: p[:, :2]), "has 2 columns but 3 classes"),
        (lambda q, y: simplex_map(lambda p: p, resolution=2), "resolution must be at least 3"),
        (lambda q, y: canonical_heatmap(np.eye(3), [0.5, 0.6, 0.1]), "c rows must sum to 1"),
        (lambda q, y: canonical_heatmap(np.ones((3, 2)), [0.5, 0.5]), "A must be a square"),
        (lambda q, y: canonical_heatmap(np.eye(3), [0.2, 0.3, 0.5], annotate="yes"),
         "annotate must be one of"),
        (lambda q, y: confusion_change(y, q, q[:, :2] / q[:, :2].sum(1, keepdims=True)),
         "proba_after has 2 columns"),
        (lambda q, y: forest_plot(np.ones((1, 3, 3))), "n_draws >= 2"),
        (lambda q, y: forest_plot(np.full((5, 2), np.nan)), "contain NaN or inf"),
        (lambda q, y: forest_plot({"W": np.ones((5, 2))}, var_names=["A"]),
         r"variables \['A'\] are not in draws"),
        (lambda q, y: forest_plot(np.ones((5, 2)), level=94), "level must be a number"),
        (lambda q, y: forest_plot(np.ones((5, 2)), ax=plt.subplots(1, 2)[1]), "ax must be one"),
        (lambda q, y: forest_plot(np.ones((5, 2)), diagnostics="yes"),
         "diagnostics must be one of"),
        (lambda q, y: reliability_diagram(y, q, histogram=None), "histogram must be one of"),
        (lambda q, y: ReliabilityDisplay.from_predictions(y, q, kind="class"),
         "kind must be one of"),
        (lambda q, y: ReliabilityDisplay.from_predictions(y, q, n_bins=0), "n_bins .*got 0"),
        (lambda q, y: ReliabilityDisplay.from_predictions(y + 3, q), r"outside .*\[3, 4, 5\]"),
    ],
)
def test_plot_input_errors(call, match):
    q, y, _, _ = make_dirgen(50, 3, rng=0)
    with pytest.raises(ValueError, match=match):
        call(q, y)
