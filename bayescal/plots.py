r"""Calibration figures: reliability diagrams with bands, the simplex map, A/c heatmaps.

Every function draws on matplotlib axes it is given (``ax=``, or ``fig=`` /
``axes=`` for multi-panel figures) or on a new figure, returns the axes (or a
:class:`ReliabilityDisplay` for reliability diagrams), and never calls
``show()`` or writes files. Matplotlib is imported inside the functions, so
``import bayescal`` does not import it. All numbers drawn are computed by
:mod:`bayescal.metrics`; this module only draws them.

Figures of Kull et al. (2019) [1]_: :func:`reliability_diagram` (fig. 1, and
its classwise version), :func:`simplex_map` (fig. 2a), :func:`canonical_heatmap`
(fig. 2b), :func:`confusion_change` (fig. 2c). Beyond the paper:
consistency bands (Bröcker and Smith 2007), :func:`posterior_reliability_diagram`
and :func:`forest_plot` for Bayesian calibrators.

References
----------
.. [1] M. Kull et al. "Beyond temperature scaling: obtaining well-calibrated
   multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    check_fraction,
    check_labels,
    check_option,
    check_positive_int,
    check_proba_draws,
    check_scores,
    encode_labels,
)
from bayescal.metrics import (
    ReliabilityBands,
    ReliabilityTable,
    classwise_ece,
    consistency_bands,
    expected_calibration_error,
    posterior_bands,
    reliability_table,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "ReliabilityDisplay",
    "canonical_heatmap",
    "confusion_change",
    "forest_plot",
    "posterior_reliability_diagram",
    "reliability_diagram",
    "simplex_map",
]

#: Annotate heatmap cells with their values up to this many classes (``annotate="auto"``).
ANNOTATE_MAX_CLASSES = 12


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a runtime dependency
        raise ImportError("bayescal.plots needs matplotlib: pip install matplotlib") from exc
    return plt


def _class_names(class_names: Sequence[str] | None, k: int) -> list[str]:
    if class_names is None:
        return [f"class {j}" for j in range(k)]
    names = [str(c) for c in class_names]
    if len(names) != k:
        raise ValueError(f"class_names must have {k} entries (one per column); got {len(names)}")
    return names


def _annotate_flag(annotate: bool | str, k: int) -> bool:
    check_option(annotate, "annotate", (True, False, "auto"))
    return k <= ANNOTATE_MAX_CLASSES if annotate == "auto" else bool(annotate)


# --------------------------------------------------------------------------
# Reliability diagrams
# --------------------------------------------------------------------------


@dataclass
class ReliabilityDisplay:
    """What a reliability diagram drew.

    Built by :func:`reliability_diagram` and
    :func:`posterior_reliability_diagram`, or, as scikit-learn's
    :class:`~sklearn.calibration.CalibrationDisplay`, by
    :meth:`from_predictions` and :meth:`from_estimator`.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    axes : ndarray of Axes, shape (n_panels,)
        One panel for ``kind="confidence"``, one per shown class otherwise.
    classes : list of int or None
        Class of each panel (``None`` for the confidence diagram).
    tables : list of ReliabilityTable
        The binned statistics of each panel.
    bands : ReliabilityBands or None
        The band drawn (consistency or posterior), for all classes.
    histograms : ndarray of Axes or None
        The inset axes (right y-axis: count) holding each panel's histogram of
        scores per bin, parallel to ``axes``; ``None`` with ``histogram=False``.
    """

    figure: Figure
    axes: NDArray[np.object_]
    classes: list[int] | None
    tables: list[ReliabilityTable]
    bands: ReliabilityBands | None
    histograms: NDArray[np.object_] | None = None

    @classmethod
    def from_predictions(
        cls,
        y_true: ArrayLike,
        y_prob: ArrayLike,
        *,
        kind: str = "confidence",
        ax: Axes | Sequence[Axes] | None = None,
        **kwargs: Any,
    ) -> ReliabilityDisplay:
        """Reliability diagram of predicted probabilities and the true classes.

        The figure of :func:`reliability_diagram`, which draws it.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Integer class codes ``0 .. n_classes - 1``: label ``j`` is the
            class of column ``j`` of ``y_prob``. For labels as a classifier
            was given them (strings, ``1..k``), use :meth:`from_estimator`.
        y_prob : array-like of shape (n_samples, n_classes)
            Predicted (calibrated or not) probabilities; rows sum to 1.
        kind : {"confidence", "classwise"}, default="confidence"
            One panel of the top probability, or one panel per class.
        ax : Axes or sequence of Axes, optional
            One Axes for ``"confidence"``, one per shown class for
            ``"classwise"``. Default: a new figure.
        **kwargs
            The other options of :func:`reliability_diagram`: ``fig``,
            ``n_bins``, ``strategy``, ``bands``, ``level``, ``n_resamples``,
            ``histogram``, ``classes``, ``max_classes``, ``class_names``,
            ``title``, ``rng``.

        Returns
        -------
        ReliabilityDisplay

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bayescal.datasets import make_dirgen
        >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
        >>> disp = ReliabilityDisplay.from_predictions(y, q, kind="classwise", bands=False)
        >>> len(disp.axes), disp.classes
        (3, [0, 1, 2])
        """
        return reliability_diagram(y_true, y_prob, kind=kind, ax=ax, **kwargs)

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        X: ArrayLike,
        y: ArrayLike,
        *,
        kind: str = "confidence",
        ax: Axes | Sequence[Axes] | None = None,
        **kwargs: Any,
    ) -> ReliabilityDisplay:
        """Reliability diagram of a fitted calibrator's (or classifier's) probabilities.

        Draws :meth:`from_predictions` of ``estimator.predict_proba(X)``,
        with each label of ``y`` mapped to its column through the
        estimator's ``classes_`` (as ``predict`` maps columns to labels).

        Parameters
        ----------
        estimator : fitted estimator
            Anything with ``predict_proba`` that scikit-learn's
            :func:`~sklearn.utils.validation.check_is_fitted` accepts: a
            bayescal calibrator, a :class:`~bayescal.CalibratedClassifier`,
            a scikit-learn classifier.
        X : array-like of shape (n_samples, n_features)
            Its input: scores of shape ``(n_samples, n_classes)`` for a
            calibrator, features for a classifier.
        y : array-like of shape (n_samples,)
            True labels, as in ``fit`` (strings, ``1..k``, ...): each must be
            one of ``estimator.classes_``.
        kind : {"confidence", "classwise"}, default="confidence"
        ax : Axes or sequence of Axes, optional
            As in :meth:`from_predictions`.
        **kwargs
            The other options of :func:`reliability_diagram`. ``class_names``
            defaults to the estimator's ``classes_``; ``classes`` selects
            panels by column index ``0 .. n_classes - 1``.

        Returns
        -------
        ReliabilityDisplay

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If ``estimator`` is not fitted.
        ValueError
            If it has no ``predict_proba``, or a label of ``y`` is not in
            its ``classes_``.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bayescal import DirichletCalibrator
        >>> from bayescal.datasets import make_dirgen
        >>> q, y, _, _ = make_dirgen(600, 3, rng=0)
        >>> cal = DirichletCalibrator().fit(q[:300], y[:300])
        >>> disp = ReliabilityDisplay.from_estimator(cal, q[300:], y[300:], bands=False)
        >>> disp.axes.shape
        (1,)
        """
        predict_proba = getattr(estimator, "predict_proba", None)
        if not callable(predict_proba):
            raise ValueError("estimator must have predict_proba (a fitted calibrator or "
                             f"classifier); got {estimator!r}")
        check_is_fitted(estimator)
        proba = check_scores(predict_proba(X), kind="probs", name="predict_proba(X)")
        classes = getattr(estimator, "classes_", None)
        _, codes = encode_labels(y, n_samples=proba.shape[0], n_classes=proba.shape[1],
                                 classes=classes)
        if classes is not None:
            kwargs.setdefault("class_names", [str(c) for c in classes])
        return cls.from_predictions(codes, proba, kind=kind, ax=ax, **kwargs)


def _shown_classes(
    y: NDArray[np.intp], k: int, classes: Sequence[int] | None, max_classes: int
) -> tuple[list[int], str]:
    """Classes to draw: all up to ``max_classes``, else the most frequent ones."""
    if classes is not None:
        shown = [int(j) for j in np.atleast_1d(np.asarray(classes))]
        bad = [j for j in shown if not 0 <= j < k]
        if not shown or bad:
            raise ValueError(f"classes must be a non-empty list of classes in 0..{k - 1}; "
                             f"got {list(np.atleast_1d(classes))!r}")
        return shown, ""
    max_classes = check_positive_int(max_classes, "max_classes")
    if k <= max_classes:
        return list(range(k)), ""
    freq = np.bincount(y, minlength=k)
    top = np.argsort(-freq, kind="stable")[:max_classes]
    return [int(j) for j in top], f"{max_classes} most frequent of {k} classes"


def _panel_axes(n_panels: int, ax: Any, fig: Any, size: float = 2.7) -> tuple[Any, list[Any]]:
    """A grid of ``n_panels`` axes on ``fig`` (or a new figure), or the given ``ax``."""
    if ax is not None and fig is not None:
        raise ValueError("pass either ax= or fig=, not both")
    if ax is not None:
        axes = list(np.atleast_1d(np.asarray(ax, dtype=object)).ravel())
        if len(axes) != n_panels:
            raise ValueError(f"this diagram has {n_panels} panels but {len(axes)} axes were "
                             "given; pass fig= (or ax=None) for a grid of small multiples")
        return axes[0].figure, axes
    ncols = int(np.ceil(np.sqrt(n_panels)))
    nrows = int(np.ceil(n_panels / ncols))
    if fig is None:
        fig = _pyplot().figure(figsize=(size * ncols, size * nrows), layout="compressed")
    grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for extra in grid[n_panels:]:
        extra.remove()
    return fig, list(grid[:n_panels])


def _draw_reliability_panel(
    ax: Any,
    table: ReliabilityTable,
    band: tuple[NDArray[np.float64], NDArray[np.float64]] | None,
    *,
    band_label: str,
    xlabel: str,
    ylabel: str,
    title: str,
    note: str,
    legend: bool,
    histogram: bool,
) -> Any:
    """Observed frequencies, the diagonal, the band and the count histogram of one panel.

    Drawn only where bins hold data: one dot per non-empty bin at (mean
    predicted probability, observed frequency), joined by a line as in
    scikit-learn's :class:`~sklearn.calibration.CalibrationDisplay`; the band
    as one shaded rectangle per non-empty bin, spanning the bin and its band;
    the number of scores per bin as grey bars on an inset axes over the bottom
    quarter of the panel (count on its right axis), drawn beneath the curve.

    Artists added to ``ax``: two Line2D (diagonal, observed frequency), one
    BarContainer of the band (if any), one Text (the note, unless it goes in
    the legend's title). Returns the inset axes of the histogram (or ``None``).
    """
    nonempty = table.counts > 0
    left, width = table.edges[:-1], np.diff(table.edges)
    hist_ax = None
    if histogram:
        # an inset over the bottom quarter of the panel, below the curve (zorder < lines)
        hist_ax = ax.inset_axes([0.0, 0.0, 1.0, 0.25], sharex=ax, zorder=0.9)
        hist_ax.bar(left[nonempty], table.counts[nonempty], width=width[nonempty], align="edge",
                    color="0.55", alpha=0.45, linewidth=0, label="count per bin (right axis)")
        top = int(table.counts.max())
        hist_ax.set_ylim(0, max(top, 1))
        hist_ax.patch.set_visible(False)
        hist_ax.yaxis.tick_right()
        hist_ax.yaxis.set_label_position("right")
        hist_ax.set_yticks([0, top])
        hist_ax.tick_params(axis="y", labelsize=8, colors="0.35")
        hist_ax.tick_params(axis="x", bottom=False, labelbottom=False)
        hist_ax.set_ylabel("count", fontsize=8, color="0.35", labelpad=1)
        for side in ("top", "left", "bottom"):
            hist_ax.spines[side].set_visible(False)
    if band is not None:
        low, high = band
        ok = nonempty & np.isfinite(low) & np.isfinite(high)
        ax.bar(left[ok], (high - low)[ok], bottom=low[ok], width=width[ok], align="edge",
               color="C0", alpha=0.18, linewidth=0, label=band_label)
    ax.plot([0, 1], [0, 1], linestyle=":", color="0.3", linewidth=1, label="perfectly calibrated")
    ax.plot(table.mean_confidence[nonempty], table.accuracy[nonempty], "o-", color="C0",
            markersize=3.5, linewidth=1.2, label="observed frequency")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_box_aspect(1)  # a square panel
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        if hist_ax is not None:
            more = hist_ax.get_legend_handles_labels()
            handles, labels = handles + more[0], labels + more[1]
        # below the panel, where it hides no data
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(-0.02, -0.13), ncols=2,
                  fontsize=8, title=note, title_fontsize=8, frameon=False, alignment="left")
    else:
        ax.text(0.03, 0.97, note, transform=ax.transAxes, va="top", ha="left", fontsize=7)
    return hist_ax


def _band_rows(bands: ReliabilityBands | None, table: ReliabilityTable, j: int | None
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """``(low, high)`` of the band on the panel's bins (class ``j``, or the confidence)."""
    if bands is None:
        return None
    edges = bands.edges if j is None else bands.edges[j]
    if not np.array_equal(edges, table.edges):  # pragma: no cover - same binning by design
        raise RuntimeError("the band and the reliability table use different bins")
    return (bands.low, bands.high) if j is None else (bands.low[j], bands.high[j])


def _reliability_figure(
    y: NDArray[np.intp],
    p: NDArray[np.float64],
    *,
    kind: str,
    ax: Any,
    fig: Any,
    n_bins: int,
    strategy: str,
    bands: ReliabilityBands | None,
    band_label: str,
    histogram: bool,
    classes: Sequence[int] | None,
    max_classes: int,
    class_names: Sequence[str] | None,
    title: str | None,
) -> ReliabilityDisplay:
    check_option(histogram, "histogram", (True, False))
    k = p.shape[1]
    names = _class_names(class_names, k)
    if kind == "confidence" and classes is not None:
        raise ValueError("classes selects panels of kind='classwise'; got it with "
                         "kind='confidence'")
    if kind == "confidence":
        figure, axes = _panel_axes(1, ax, fig, size=4.2)
        table = reliability_table(y, p, n_bins=n_bins, strategy=strategy)
        ece = expected_calibration_error(y, p, n_bins, strategy=strategy)
        hist = _draw_reliability_panel(
            axes[0], table, _band_rows(bands, table, None), band_label=band_label,
            xlabel="confidence (top predicted probability)", ylabel="accuracy",
            title=title or "Reliability diagram (confidence)",
            note=f"ECE = {ece:.4f}; n = {len(y)}, {n_bins} {strategy} bins", legend=True,
            histogram=histogram,
        )
        return ReliabilityDisplay(figure, np.array(axes, dtype=object), None, [table], bands,
                                  np.array([hist], dtype=object) if histogram else None)
    shown, subset_note = _shown_classes(y, k, classes, max_classes)
    figure, axes = _panel_axes(len(shown), ax, fig)
    tables, hists = [], []
    for j, axj in zip(shown, axes, strict=True):
        table = reliability_table(y, p, n_bins=n_bins, kind="class", class_index=j,
                                  strategy=strategy)
        tables.append(table)
        hists.append(_draw_reliability_panel(
            axj, table, _band_rows(bands, table, j), band_label=band_label,
            xlabel=f"predicted p({names[j]})", ylabel="observed frequency", title=names[j],
            note=f"ECE$_j$ = {table.ece():.4f}\nn$_j$ = {int(np.sum(y == j))}",
            legend=False, histogram=histogram,
        ))
    cw = classwise_ece(y, p, n_bins, strategy=strategy)
    heading = title or "Classwise reliability diagrams"
    extra = f" ({subset_note})" if subset_note else ""
    figure.suptitle(f"{heading}{extra}; cw-ECE = {cw:.4f}", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    if histogram:
        more = hists[0].get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    wide = len(axes) > 4  # grids of 3+ columns fit the legend on one line
    figure.legend(handles, labels, loc="outside lower center", ncols=4 if wide else 2,
                  fontsize=8, frameon=False)
    return ReliabilityDisplay(figure, np.array(axes, dtype=object), shown, tables, bands,
                              np.array(hists, dtype=object) if histogram else None)


def reliability_diagram(
    y: ArrayLike,
    proba: ArrayLike,
    *,
    kind: str = "confidence",
    ax: Axes | Sequence[Axes] | None = None,
    fig: Figure | None = None,
    n_bins: int = 15,
    strategy: str = "uniform",
    bands: bool = True,
    level: float = 0.9,
    n_resamples: int = 1000,
    histogram: bool = True,
    classes: Sequence[int] | None = None,
    max_classes: int = 20,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    rng: np.random.Generator | int | None = None,
) -> ReliabilityDisplay:
    """Reliability diagram of the top-label confidence or of every class.

    Each panel shows, for every bin that holds scores, the bin's mean
    predicted probability against the observed frequency of the event (dots
    joined by a line, as scikit-learn's
    :class:`~sklearn.calibration.CalibrationDisplay`; a calibrated model's
    dots lie on the dotted diagonal), the number of scores in the bin (grey
    histogram, right axis) and, with ``bands=True``, the consistency band of
    the bin (:func:`bayescal.metrics.consistency_bands`) as a shaded
    rectangle: where the frequency would fall with probability ``level`` if
    the model were calibrated. A dot outside its rectangle is evidence of
    miscalibration in that bin; empty bins draw nothing.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes)
    kind : {"confidence", "classwise"}, default="confidence"
        One panel of the top probability (paper fig. 1), or a grid of small
        multiples, one per class.
    ax : Axes or sequence of Axes, optional
        Axes to draw on: one for ``"confidence"``, one per shown class for
        ``"classwise"``. Default: a new figure.
    fig : Figure, optional
        Figure on which to create the grid of small multiples.
    n_bins : int, default=15
    strategy : {"uniform", "quantile"}, default="uniform"
    bands : bool, default=True
        Draw consistency bands (``n_resamples`` label resamples, vectorised).
    level : float, default=0.9
        Probability covered by each band.
    n_resamples : int, default=1000
    histogram : bool, default=True
        Draw the number of scores per bin as a histogram along the bottom of
        each panel (inset axes, count on the right).
    classes : sequence of int, optional
        Classes to draw with ``kind="classwise"``. Default: all classes when
        ``k <= max_classes``, else the ``max_classes`` most frequent in ``y``.
    max_classes : int, default=20
    class_names : sequence of str, optional
    title : str, optional
    rng : Generator, int or None
        Seed of the band resampling.

    Returns
    -------
    ReliabilityDisplay

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal.datasets import make_dirgen
    >>> q, y, _, _ = make_dirgen(500, 3, rng=0)
    >>> disp = reliability_diagram(y, q, kind="classwise", n_resamples=200, rng=0)
    >>> len(disp.axes), disp.classes
    (3, [0, 1, 2])
    """
    check_option(kind, "kind", ("confidence", "classwise"))
    check_option(bands, "bands", (True, False))
    p = check_scores(proba, kind="probs", name="proba")
    yy = check_labels(y, n_samples=p.shape[0], n_classes=p.shape[1])
    band = (
        consistency_bands(p, kind=kind, n_bins=n_bins, strategy=strategy,
                          n_resamples=n_resamples, level=level, rng=rng)
        if bands
        else None
    )
    return _reliability_figure(
        yy, p, kind=kind, ax=ax, fig=fig, n_bins=n_bins, strategy=strategy, bands=band,
        band_label=f"{level:.0%} consistency band", histogram=histogram, classes=classes,
        max_classes=max_classes,
        class_names=class_names, title=title,
    )


def posterior_reliability_diagram(
    y: ArrayLike,
    proba_draws: ArrayLike,
    *,
    kind: str = "confidence",
    ax: Axes | Sequence[Axes] | None = None,
    fig: Figure | None = None,
    n_bins: int = 15,
    strategy: str = "uniform",
    level: float = 0.9,
    histogram: bool = True,
    classes: Sequence[int] | None = None,
    max_classes: int = 20,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
) -> ReliabilityDisplay:
    """Reliability diagram of a Bayesian calibrator, with its posterior band.

    The bars and dots are those of :func:`reliability_diagram` for the
    posterior-mean probabilities ``proba_draws.mean(axis=0)``. The band of
    each bin (:func:`bayescal.metrics.posterior_bands`) is the central
    ``level`` interval, over posterior draws, of the bin's mean calibrated
    probability: the calibrated map is uncertain to this extent. Where the
    observed frequency (dot) lies inside the shaded band, the data agree with
    some posterior draw in that bin.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    proba_draws : array-like of shape (n_draws, n_samples, n_classes)
        Calibrated probabilities of every posterior draw, as returned by a
        Bayesian calibrator's ``predict_proba_draws``.
    kind, ax, fig, n_bins, strategy, level, histogram, classes, max_classes, class_names, title
        As in :func:`reliability_diagram`.

    Returns
    -------
    ReliabilityDisplay
    """
    check_option(kind, "kind", ("confidence", "classwise"))
    level = check_fraction(level, "level")
    draws = check_proba_draws(proba_draws)
    yy = check_labels(y, n_samples=draws.shape[1], n_classes=draws.shape[2])
    band = posterior_bands(draws, kind=kind, n_bins=n_bins, strategy=strategy, level=level)
    return _reliability_figure(
        yy, draws.mean(axis=0), kind=kind, ax=ax, fig=fig, n_bins=n_bins, strategy=strategy,
        bands=band, band_label=f"{level:.0%} posterior band ({draws.shape[0]} draws)",
        histogram=histogram,
        classes=classes, max_classes=max_classes, class_names=class_names,
        title=title or ("Posterior reliability diagram" + (" (confidence)" if kind ==
                                                            "confidence" else "")),
    )


# --------------------------------------------------------------------------
# The calibration map on the simplex (k = 3)
# --------------------------------------------------------------------------

_SQRT3_2 = np.sqrt(3.0) / 2.0


def _to_plane(q: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Barycentric -> 2-D: class 0 at (0, 0), class 1 at (1, 0), class 2 at (1/2, sqrt(3)/2)."""
    return q[:, 1] + 0.5 * q[:, 2], _SQRT3_2 * q[:, 2]


def simplex_map(
    calibrator: Any | Callable[[NDArray[np.float64]], ArrayLike],
    *,
    ax: Axes | None = None,
    resolution: int = 14,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
) -> Axes:
    """A 3-class calibration map as arrows on the probability simplex (paper fig. 2a).

    An arrow starts at each point ``q`` of a triangular grid inside the
    simplex (``q = (a, b, c) / resolution`` with positive integers summing to
    ``resolution``) and ends at the calibrated ``mu(q)``; colour shows the
    length of the move (total variation ``0.5 * |mu(q) - q|_1``).

    Parameters
    ----------
    calibrator : fitted calibrator or callable
        Anything with ``predict_proba(q)`` (a bayescal or scikit-learn style
        calibrator fitted on probabilities), or a function ``q -> mu(q)``
        mapping ``(m, 3)`` probabilities to ``(m, 3)`` probabilities.
    ax : Axes, optional
    resolution : int, default=14
        Grid steps per edge (``(resolution - 1)(resolution - 2) / 2`` arrows).
    class_names : sequence of 3 str, optional
    title : str, optional

    Returns
    -------
    Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from bayescal.maps import dirlin_map
    >>> ax = simplex_map(lambda q: dirlin_map(q, 2 * np.eye(3), np.zeros(3)))
    >>> ax.get_title()
    'Calibration map on the simplex'
    """
    resolution = check_positive_int(resolution, "resolution")
    if resolution < 3:
        raise ValueError(f"resolution must be at least 3 (one interior point); got {resolution}")
    fn = getattr(calibrator, "predict_proba", calibrator)
    if not callable(fn):
        raise ValueError(
            f"calibrator must have predict_proba or be a callable q -> mu(q); got {calibrator!r}"
        )
    names = _class_names(class_names, 3)
    steps = [(a, b, resolution - a - b) for a in range(1, resolution)
             for b in range(1, resolution - a)]
    q = np.array(steps, dtype=float) / resolution
    mu = check_scores(fn(q), kind="probs", name="calibrated probabilities", n_classes=3)
    if mu.shape[0] != q.shape[0]:
        raise ValueError(f"the calibrator returned {mu.shape[0]} rows for {q.shape[0]} inputs")
    if ax is None:
        ax = _pyplot().figure(figsize=(5.0, 4.6), layout="constrained").add_subplot()
    x0, y0 = _to_plane(q)
    x1, y1 = _to_plane(mu)
    shift = 0.5 * np.abs(mu - q).sum(axis=1)
    arrows = ax.quiver(x0, y0, x1 - x0, y1 - y0, shift, angles="xy", scale_units="xy",
                       scale=1.0, width=0.004, cmap="viridis")
    ax.figure.colorbar(arrows, ax=ax, shrink=0.7, label="total variation |mu(q) - q|/2")
    ax.plot([0, 1, 0.5, 0], [0, 0, _SQRT3_2, 0], color="0.2", linewidth=1)
    for (xc, yc), name, va in zip([(0, 0), (1, 0), (0.5, _SQRT3_2)], names,
                                  ["top", "top", "bottom"], strict=True):
        ax.text(xc, yc + (-0.03 if va == "top" else 0.03), name, ha="center", va=va)
    ax.set(xlim=(-0.08, 1.08), ylim=(-0.1, _SQRT3_2 + 0.1),
           xlabel=f"{names[1]} (right) vs {names[0]} (left)", ylabel=f"{names[2]} (up)",
           title=title or "Calibration map on the simplex")
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    return ax


# --------------------------------------------------------------------------
# Heatmaps: canonical parameters and confusion change
# --------------------------------------------------------------------------


def _annotate_cells(ax: Any, values: NDArray[np.float64], fmt: str, threshold: float) -> None:
    for (r, c), v in np.ndenumerate(values):
        ax.text(c, r, format(v, fmt), ha="center", va="center", fontsize=7,
                color="white" if abs(v) > threshold else "black")


def _class_ticks(ax: Any, names: list[str], *, x: bool = True, y: bool = True) -> None:
    k = len(names)
    step = max(1, int(np.ceil(k / 20)))
    ticks = np.arange(0, k, step)
    if x:
        ax.set_xticks(ticks, [names[t] for t in ticks], rotation=90, fontsize=7)
    if y:
        ax.set_yticks(ticks, [names[t] for t in ticks], fontsize=7)


def canonical_heatmap(
    A: ArrayLike,
    c: ArrayLike,
    *,
    axes: Sequence[Axes] | None = None,
    class_names: Sequence[str] | None = None,
    annotate: bool | str = "auto",
    fmt: str = ".2f",
    title: str | None = None,
) -> NDArray[np.object_]:
    r"""The canonical parameters ``A`` and ``c`` as annotated heatmaps (paper fig. 2b).

    The canonical map is :math:`\mathrm{softmax}(A \ln(k q) + \ln c)`
    (:func:`bayescal.maps.dirlin_to_canonical`): ``A[j, i]`` is how much the
    log-probability of input class ``i`` raises the logit of output class
    ``j`` (the identity map has ``A = I``), and ``c`` is the calibrated
    probability vector at the centre of the simplex.

    Parameters
    ----------
    A : array-like of shape (k, k)
        Rows are output classes, columns input classes. Any finite matrix is
        drawn (for example a posterior mean of ``W``); canonical ``A`` is >= 0.
    c : array-like of shape (k,)
        A probability vector.
    axes : two Axes, optional
        Where to draw ``A`` and ``c``. Default: a new figure.
    class_names : sequence of str, optional
    annotate : bool or "auto", default="auto"
        Write each value in its cell ("auto": when ``k <= ANNOTATE_MAX_CLASSES``).
    fmt : str, default=".2f"
    title : str, optional

    Returns
    -------
    ndarray of 2 Axes
        The ``A`` and the ``c`` panel.
    """
    A_arr = np.asarray(A, dtype=np.float64)
    if A_arr.ndim != 2 or A_arr.shape[0] != A_arr.shape[1] or A_arr.shape[0] < 2:
        raise ValueError(f"A must be a square (k, k) matrix with k >= 2; got shape {A_arr.shape}")
    if not np.isfinite(A_arr).all():
        raise ValueError("A contains NaN or inf")
    k = A_arr.shape[0]
    c_arr = check_scores(np.asarray(c, dtype=np.float64).reshape(1, -1), kind="probs",
                         name="c", n_classes=k)[0]
    names = _class_names(class_names, k)
    show_values = _annotate_flag(annotate, k)
    if axes is None:
        size = min(0.45 * k + 2.5, 12.0)
        fig = _pyplot().figure(figsize=(size + 1.6, size), layout="constrained")
        ax_list = fig.subplots(1, 2, gridspec_kw={"width_ratios": [k, max(1.0, k / 8)]})
    else:
        ax_list = list(axes)
        if len(ax_list) != 2:
            raise ValueError(f"axes must be two Axes (A and c); got {len(ax_list)}")
    ax_a, ax_c = ax_list
    vmax = float(np.max(np.abs(A_arr))) or 1.0
    im = ax_a.imshow(A_arr, cmap="Blues" if A_arr.min() >= 0 else "RdBu_r",
                     vmin=0.0 if A_arr.min() >= 0 else -vmax, vmax=vmax)
    ax_a.figure.colorbar(im, ax=ax_a, shrink=0.8)
    _class_ticks(ax_a, names)
    ax_a.set(xlabel="input class i (ln q_i)", ylabel="output class j", title=title or "A")
    ax_c.imshow(c_arr[:, None], cmap="Oranges", vmin=0.0, vmax=max(float(c_arr.max()), 1e-12),
                aspect="auto")
    _class_ticks(ax_c, names, x=False)
    ax_c.set_xticks([])
    ax_c.set(xlabel="c_j", ylabel="output class j", title="c")
    ax_c.yaxis.set_label_position("right")
    ax_c.yaxis.tick_right()
    if show_values:
        _annotate_cells(ax_a, A_arr, fmt, 0.6 * vmax)
        _annotate_cells(ax_c, c_arr[:, None], fmt, 0.6 * float(c_arr.max()))
    return np.array([ax_a, ax_c], dtype=object)


def _confusion(y: NDArray[np.intp], pred: NDArray[np.intp], k: int) -> NDArray[np.float64]:
    return np.bincount(y * k + pred, minlength=k * k).reshape(k, k).astype(float)


def confusion_change(
    y: ArrayLike,
    proba_before: ArrayLike,
    proba_after: ArrayLike,
    *,
    ax: Axes | None = None,
    normalize: bool = False,
    class_names: Sequence[str] | None = None,
    annotate: bool | str = "auto",
    title: str | None = None,
) -> Axes:
    """Change of the confusion matrix after calibration (paper fig. 2c).

    Draws ``C_after - C_before`` where ``C[t, p]`` counts samples of true class
    ``t`` predicted (argmax, first on ties) as ``p``. Positive diagonal cells
    mean more correct predictions; the annotation in the title gives the
    change in accuracy.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    proba_before, proba_after : array-like of shape (n_samples, n_classes)
    ax : Axes, optional
    normalize : bool, default=False
        Divide each row by the number of samples of that true class (so cells
        are changes in rates).
    class_names : sequence of str, optional
    annotate : bool or "auto", default="auto"
    title : str, optional

    Returns
    -------
    Axes
    """
    before = check_scores(proba_before, kind="probs", name="proba_before")
    k = before.shape[1]
    after = check_scores(proba_after, kind="probs", name="proba_after", n_classes=k)
    if after.shape[0] != before.shape[0]:
        raise ValueError(f"proba_after has {after.shape[0]} rows but proba_before has "
                         f"{before.shape[0]}")
    yy = check_labels(y, n_samples=before.shape[0], n_classes=k)
    check_option(normalize, "normalize", (True, False))
    names = _class_names(class_names, k)
    diff = _confusion(yy, after.argmax(axis=1), k) - _confusion(yy, before.argmax(axis=1), k)
    if normalize:
        diff = diff / np.maximum(np.bincount(yy, minlength=k), 1)[:, None]
    if ax is None:
        size = min(0.45 * k + 2.5, 12.0)
        ax = _pyplot().figure(figsize=(size + 1.2, size), layout="constrained").add_subplot()
    vmax = float(np.max(np.abs(diff))) or 1.0
    im = ax.imshow(diff, cmap="RdBu", vmin=-vmax, vmax=vmax)
    ax.figure.colorbar(im, ax=ax, shrink=0.8,
                       label="change in rate" if normalize else "change in count")
    _class_ticks(ax, names)
    if _annotate_flag(annotate, k):
        _annotate_cells(ax, diff, ".2f" if normalize else ".0f", 0.6 * vmax)
    delta_acc = np.trace(_confusion(yy, after.argmax(axis=1), k)
                         - _confusion(yy, before.argmax(axis=1), k)) / len(yy)
    ax.set(xlabel="predicted class", ylabel="true class",
           title=title or f"Confusion change after - before (accuracy {delta_acc:+.4f})")
    return ax


# --------------------------------------------------------------------------
# Forest plot of posterior draws (drawn by ArviZ)
# --------------------------------------------------------------------------

_SAMPLE_DIMS = ("chain", "draw")


def _named_draws(
    draws: Any, var_names: Sequence[str] | None
) -> dict[str, tuple[NDArray[np.float64], list[str]]]:
    """Named draws of shape ``(n_chains, n_draws, m)`` with a label per scalar entry.

    ``draws`` is an array ``(n_draws, ...)`` (one chain, named ``var_names[0]``
    or ``"W"``), a mapping of such arrays, or an object with a ``posterior``
    group of dims ``(chain, draw, ...)`` (ArviZ ``InferenceData`` or an xarray
    ``DataTree``). Labels are the entry's coordinate values, e.g. ``"0, 1"``.
    """
    if hasattr(draws, "posterior"):
        post = draws.posterior
        available = list(post.data_vars)
        names = list(var_names) if var_names is not None else (
            ["W"] if "W" in available else available)
        missing = [v for v in names if v not in available]
        if missing:
            raise ValueError(f"variables {missing} are not in the posterior; it has {available}")
        out = {}
        for v in names:
            da = post[v]
            if tuple(da.dims[:2]) != _SAMPLE_DIMS:
                raise ValueError(f"posterior variable {v!r} must have dims (chain, draw, ...); "
                                 f"got {da.dims}")
            values = np.asarray(da.values, dtype=np.float64)
            coords = [[str(c) for c in (da[d].values if d in da.coords else range(n))]
                      for d, n in zip(da.dims[2:], values.shape[2:], strict=True)]
            labels = [", ".join(coords[i][j] for i, j in enumerate(idx))
                      for idx in np.ndindex(*values.shape[2:])]
            out[v] = (values.reshape(values.shape[:2] + (-1,)), labels)
        return out
    if isinstance(draws, Mapping):
        names = list(var_names) if var_names is not None else (
            ["W"] if "W" in draws else list(draws))
        missing = [v for v in names if v not in draws]
        if missing:
            raise ValueError(f"variables {missing} are not in draws; it has {list(draws)}")
        arrays = {v: np.asarray(draws[v], dtype=np.float64) for v in names}
    else:
        arrays = {var_names[0] if var_names else "W": np.asarray(draws, dtype=np.float64)}
    out = {}
    for v, arr in arrays.items():
        if arr.ndim < 1 or arr.shape[0] < 2:
            raise ValueError(f"draws of {v!r} must have shape (n_draws >= 2, ...); "
                             f"got {arr.shape}")
        labels = [", ".join(map(str, idx)) for idx in np.ndindex(*arr.shape[1:])]
        out[v] = (arr.reshape(1, arr.shape[0], -1), labels)
    return out


def _arviz_forest(dataset: Any, *, hdi_prob: float, diagnostics: bool, axes: Any,
                  figsize: tuple[float, float]) -> NDArray[np.object_]:
    """``arviz.plot_forest`` of every variable of ``dataset``, chains combined.

    The one place where this module calls ArviZ. Returns the interval panel
    and, with ``diagnostics``, the panels of effective sample sizes and
    R-hat. ArviZ 0.x draws on ``axes`` (or on a new figure); ArviZ 1.x
    (``arviz_plots``) always makes its own figure, so ``axes`` must be None.
    """
    import arviz as az

    n_panels = 3 if diagnostics else 1
    if int(az.__version__.split(".")[0]) < 1:
        if axes is None:
            fig = _pyplot().figure(figsize=figsize, layout="constrained")
            axes = fig.subplots(1, n_panels, sharey=True, squeeze=False,
                                gridspec_kw={"width_ratios": [3, 1, 1][:n_panels]})[0]
        az.plot_forest(dataset, var_names=list(dataset.data_vars), combined=True,
                       hdi_prob=hdi_prob, ess=diagnostics, r_hat=diagnostics, textsize=8,
                       ax=axes if diagnostics else axes[0], backend="matplotlib", show=False)
        return np.asarray(axes, dtype=object)
    if axes is not None:
        raise ValueError("ax= needs ArviZ < 1: ArviZ 1 draws the forest plot on a figure of "
                         "its own; call forest_plot without ax")
    import arviz_plots as azp

    columns = ["labels", "forest", "ess", "r_hat"][: 2 + 2 * diagnostics]
    data = dataset.expand_dims(column=len(columns)).assign_coords(column=columns)
    pc = azp.plot_forest(data, combined=True, ci_kind="hdi", ci_probs=(0.5, hdi_prob),
                         point_estimate="median", backend="matplotlib",
                         figure_kwargs={"figsize": figsize,
                                        "width_ratios": [1.5, 3, 1, 1][: len(columns)]})
    if diagnostics:
        # the statistics arviz 0.x's plot_forest shows: method "identity" (no rank normalisation)
        for name, values in (("ess", dataset.azstats.ess(method="identity")),
                             ("r_hat", dataset.azstats.rhat(method="identity"))):
            pc.map(azp.visuals.scatter_x, name, data=values, coords={"column": name},
                   color="C0")
    return np.array([pc.get_target(None, {"column": c}) for c in columns[1:]], dtype=object)


def forest_plot(
    draws: Any,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    var_names: Sequence[str] | None = None,
    level: float = 0.94,
    max_rows: int = 40,
    reference: float | None = 0.0,
    diagnostics: bool | None = None,
    title: str | None = None,
) -> NDArray[np.object_]:
    """Forest plot of posterior draws of calibration parameters (``W``, ``A``, ``b``, ``c``).

    Drawn by :func:`arviz.plot_forest` with chains combined: one row per
    scalar parameter, with the posterior median (dot), the interquartile
    range (thick line) and the ``level`` highest-density interval (thin
    line). For posterior samples from several chains, two more columns show
    each parameter's effective sample size (ESS) and R-hat, as ArviZ's forest
    plot computes them (:func:`arviz.ess` and :func:`arviz.rhat` with
    ``method="identity"``, i.e. without rank normalisation; the
    rank-normalised values are in ``arviz.summary`` and a Bayesian
    calibrator's ``summary()``). R-hat near 1 and ESS in the hundreds mean
    the chains agree. With more than ``max_rows`` scalars,
    the ``max_rows`` with the largest ``|mean|`` are drawn, in their original
    order, and the title says so.

    Parameters
    ----------
    draws : ndarray, mapping or InferenceData
        An array of shape ``(n_draws, ...)`` (e.g. ``(n_draws, k, k)`` for
        ``W``; named by ``var_names[0]``, default ``"W"``), a mapping from
        names to such arrays (draws of one chain, e.g. bootstrap refits), or
        an ArviZ ``InferenceData`` (or xarray ``DataTree``) whose
        ``posterior`` group has dims ``(chain, draw, ...)``, such as the
        ``idata_`` of a Bayesian calibrator.
    ax : Axes or sequence of Axes, optional
        One Axes, or three (interval, ESS, R-hat) when diagnostics are
        shown. Default: a new figure.
    var_names : sequence of str, optional
        Variables to draw (default: ``"W"`` if present, else all).
    level : float, default=0.94
        Probability of the highest-density interval.
    max_rows : int, default=40
    reference : float or None, default=0.0
        Position of a vertical reference line on the interval panel (``None``
        for none).
    diagnostics : bool or None, default=None
        Show the ESS and R-hat columns. ``None``: when there are at least two
        chains (R-hat compares chains; one chain of draws has none).
    title : str, optional

    Returns
    -------
    ndarray of Axes
        The interval panel, then (with diagnostics) the ESS and R-hat panels.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> W = np.eye(3) + 0.1 * np.random.default_rng(0).normal(size=(200, 3, 3))
    >>> axes = forest_plot(W)  # one row per entry W_ij: nine rows
    >>> len(axes)  # draws without chains: the interval panel only
    1
    """
    level = check_fraction(level, "level")
    max_rows = check_positive_int(max_rows, "max_rows")
    check_option(diagnostics, "diagnostics", (True, False, None))
    named = _named_draws(draws, var_names)
    n_chains = {name: arr.shape[0] for name, (arr, _) in named.items()}
    chains = min(n_chains.values())
    for name, (arr, _) in named.items():
        if not np.isfinite(arr).all():
            raise ValueError(f"draws of {name!r} contain NaN or inf")
    if diagnostics is None:
        diagnostics = chains >= 2
    elif diagnostics and chains < 2:
        raise ValueError("diagnostics=True needs draws from at least two chains (R-hat "
                         f"compares chains); got {chains} chain")
    # keep the max_rows scalars of largest |posterior mean|, in their original order
    flat = [(name, i) for name, (arr, _) in named.items() for i in range(arr.shape[2])]
    means = np.array([named[name][0][:, :, i].mean() for name, i in flat])
    keep = set(range(len(flat)))
    if len(flat) > max_rows:
        keep = set(np.argsort(-np.abs(means), kind="stable")[:max_rows].tolist())

    import xarray as xr

    data_vars, pos = {}, 0
    for name, (arr, labels) in named.items():
        rows = [i for i in range(arr.shape[2]) if pos + i in keep]
        pos += arr.shape[2]
        if rows:
            dim = f"{name}_entry"
            data_vars[name] = xr.DataArray(arr[:, :, rows], dims=(*_SAMPLE_DIMS, dim),
                                           coords={dim: [labels[i] for i in rows]})
    dataset = xr.Dataset(data_vars)
    n_rows = len(keep)
    axes = None
    if ax is not None:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if len(axes) != (3 if diagnostics else 1):
            wanted = "three Axes (interval, ESS, R-hat)" if diagnostics else "one Axes"
            raise ValueError(f"ax must be {wanted}; got {len(axes)}")
    figsize = (7.0 if diagnostics else 5.0, 1.3 + 0.22 * n_rows)
    with np.errstate(invalid="ignore", divide="ignore"):  # constant draws have no R-hat
        out = _arviz_forest(dataset, hdi_prob=level, diagnostics=diagnostics, axes=axes,
                            figsize=figsize)
    if reference is not None:
        out[0].axvline(float(reference), color="0.5", linestyle=":", linewidth=1)
    subset = f", {n_rows} of {len(flat)} with largest |mean|" if n_rows < len(flat) else ""
    out[0].set_title(title or f"Posterior median, quartiles and {level:.0%} HDI{subset}",
                     fontsize=9)
    out[0].set_xlabel("posterior value", fontsize=8)
    if diagnostics:
        from matplotlib.ticker import MaxNLocator

        out[1].set_xlabel("effective sample size", fontsize=8)
        out[1].xaxis.set_major_locator(MaxNLocator(2))
        out[2].set_xlabel("R-hat", fontsize=8)
    return out
