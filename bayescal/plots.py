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

from bayescal._validation import (
    check_fraction,
    check_labels,
    check_option,
    check_positive_int,
    check_proba_draws,
    check_scores,
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
    """

    figure: Figure
    axes: NDArray[np.object_]
    classes: list[int] | None
    tables: list[ReliabilityTable]
    bands: ReliabilityBands | None


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
        fig = _pyplot().figure(figsize=(size * ncols, size * nrows), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for extra in grid[n_panels:]:
        extra.remove()
    return fig, list(grid[:n_panels])


def _draw_reliability_panel(
    ax: Any,
    table: ReliabilityTable,
    band: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None,
    *,
    band_label: str,
    xlabel: str,
    ylabel: str,
    title: str,
    note: str,
    legend: bool,
) -> None:
    """Bars of observed frequency, bin means, the diagonal and the band of one panel.

    Artists added: one BarContainer (``n_bins`` rectangles), two Line2D
    (diagonal, bin means), one LineCollection (the band, if any), one Text (note).
    """
    acc = np.nan_to_num(table.accuracy, nan=0.0)
    ax.bar(table.edges[:-1], acc, width=np.diff(table.edges), align="edge", color="C0",
           alpha=0.55, edgecolor="C0", linewidth=0.5, label="observed frequency")
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.4", linewidth=1, label="calibrated")
    ax.plot(table.mean_confidence, table.accuracy, "o", color="C1", markersize=3,
            label="bin mean")
    if band is not None:
        x, low, high = band
        ok = np.isfinite(x)
        ax.vlines(x[ok], low[ok], high[ok], color="C3", linewidth=3, alpha=0.5, label=band_label)
    ax.text(0.03, 0.97, note, transform=ax.transAxes, va="top", ha="left", fontsize=8)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_aspect("equal")
    if legend:
        ax.legend(loc="lower right", fontsize=7, frameon=False)


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
    classes: Sequence[int] | None,
    max_classes: int,
    class_names: Sequence[str] | None,
    title: str | None,
) -> ReliabilityDisplay:
    k = p.shape[1]
    names = _class_names(class_names, k)
    if kind == "confidence" and classes is not None:
        raise ValueError("classes selects panels of kind='classwise'; got it with "
                         "kind='confidence'")
    if kind == "confidence":
        figure, axes = _panel_axes(1, ax, fig, size=4.0)
        table = reliability_table(y, p, n_bins=n_bins, strategy=strategy)
        band = None if bands is None else (bands.mean_confidence, bands.low, bands.high)
        ece = expected_calibration_error(y, p, n_bins, strategy=strategy)
        _draw_reliability_panel(
            axes[0], table, band, band_label=band_label, xlabel="confidence (top probability)",
            ylabel="accuracy", title=title or "Reliability diagram (confidence)",
            note=f"ECE = {ece:.4f}\nn = {len(y)}, {n_bins} {strategy} bins", legend=True,
        )
        return ReliabilityDisplay(figure, np.array(axes, dtype=object), None, [table], bands)
    shown, subset_note = _shown_classes(y, k, classes, max_classes)
    figure, axes = _panel_axes(len(shown), ax, fig)
    tables = []
    for j, axj in zip(shown, axes, strict=True):
        table = reliability_table(y, p, n_bins=n_bins, kind="class", class_index=j,
                                  strategy=strategy)
        tables.append(table)
        band = None if bands is None else (bands.mean_confidence[j], bands.low[j], bands.high[j])
        _draw_reliability_panel(
            axj, table, band, band_label=band_label, xlabel=f"predicted p({names[j]})",
            ylabel="observed frequency", title=names[j],
            note=f"ECE$_j$ = {table.ece():.4f}\nn$_j$ = {int(np.sum(y == j))}",
            legend=False,
        )
    cw = classwise_ece(y, p, n_bins, strategy=strategy)
    heading = title or "Classwise reliability diagrams"
    extra = f" ({subset_note})" if subset_note else ""
    figure.suptitle(f"{heading}{extra}; cw-ECE = {cw:.4f}", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    wide = len(axes) > 4  # grids of 3+ columns fit the legend on one line
    figure.legend(handles, labels, loc="outside lower center", ncols=4 if wide else 2,
                  fontsize=8, frameon=False)
    return ReliabilityDisplay(figure, np.array(axes, dtype=object), shown, tables, bands)


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
    classes: Sequence[int] | None = None,
    max_classes: int = 20,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    rng: np.random.Generator | int | None = None,
) -> ReliabilityDisplay:
    """Reliability diagram of the top-label confidence or of every class.

    Each panel shows the observed frequency per bin (bars over the bin's
    extent), the bin's mean predicted probability against that frequency
    (dots; a calibrated model's dots lie on the dashed diagonal) and, with
    ``bands=True``, the consistency band of each bin
    (:func:`bayescal.metrics.consistency_bands`): where the frequency would
    fall with probability ``level`` if the model were calibrated. A dot
    outside its band is evidence of miscalibration in that bin.

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
        band_label=f"{level:.0%} consistency band", classes=classes, max_classes=max_classes,
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
    observed frequency (bar top) lies inside the band, the data agree with
    some posterior draw in that bin.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    proba_draws : array-like of shape (n_draws, n_samples, n_classes)
        Calibrated probabilities of every posterior draw, as returned by a
        Bayesian calibrator's ``predict_proba_draws``.
    kind, ax, fig, n_bins, strategy, level, classes, max_classes, class_names, title
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
# Forest plot of posterior draws
# --------------------------------------------------------------------------


def _draws_dict(draws: Any, var_names: Sequence[str] | None) -> dict[str, NDArray[np.float64]]:
    """Named arrays of shape (n_draws, ...) from an array, a mapping or InferenceData."""
    if hasattr(draws, "posterior"):  # ArviZ InferenceData: merge chains and draws
        post = draws.posterior
        names = list(var_names) if var_names is not None else (
            ["W"] if "W" in post.data_vars else list(post.data_vars))
        missing = [v for v in names if v not in post.data_vars]
        if missing:
            raise ValueError(f"variables {missing} are not in the posterior; it has "
                             f"{list(post.data_vars)}")
        out = {}
        for v in names:
            values = np.asarray(post[v].values, dtype=np.float64)
            out[v] = values.reshape((-1,) + values.shape[2:])
        return out
    if isinstance(draws, Mapping):
        names = list(var_names) if var_names is not None else list(draws)
        missing = [v for v in names if v not in draws]
        if missing:
            raise ValueError(f"variables {missing} are not in draws; it has {list(draws)}")
        return {v: np.asarray(draws[v], dtype=np.float64) for v in names}
    name = var_names[0] if var_names else "W"
    return {name: np.asarray(draws, dtype=np.float64)}


def forest_plot(
    draws: Any,
    *,
    ax: Axes | None = None,
    var_names: Sequence[str] | None = None,
    level: float = 0.94,
    max_rows: int = 40,
    reference: float | None = 0.0,
    title: str | None = None,
) -> Axes:
    """Forest plot of posterior draws of calibration parameters (``W``, ``A``, ``b``, ``c``).

    One row per scalar parameter: the posterior mean (dot) and the central
    ``level`` interval (equal-tailed quantiles; a line). With more than
    ``max_rows`` scalars, the ``max_rows`` with the largest ``|mean|`` are
    drawn, in their original order, and the title says so.

    Parameters
    ----------
    draws : ndarray, mapping or InferenceData
        An array of shape ``(n_draws, ...)`` (e.g. ``(n_draws, k, k)`` for
        ``W``; named by ``var_names[0]``, default ``"W"``), a mapping from
        names to such arrays, or an ArviZ ``InferenceData`` whose
        ``posterior`` group has dims ``(chain, draw, ...)`` (chains are
        pooled; ArviZ itself is not imported).
    ax : Axes, optional
    var_names : sequence of str, optional
        Variables to draw (default: ``"W"`` if present, else all).
    level : float, default=0.94
    max_rows : int, default=40
    reference : float or None, default=0.0
        Position of a vertical reference line (``None`` for none).
    title : str, optional

    Returns
    -------
    Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> W = np.eye(3) + 0.1 * np.random.default_rng(0).normal(size=(200, 3, 3))
    >>> len(forest_plot(W).get_yticklabels())
    9
    """
    level = check_fraction(level, "level")
    max_rows = check_positive_int(max_rows, "max_rows")
    named = _draws_dict(draws, var_names)
    labels: list[str] = []
    columns: list[NDArray[np.float64]] = []
    for name, arr in named.items():
        if arr.ndim < 1 or arr.shape[0] < 2:
            raise ValueError(f"draws of {name!r} must have shape (n_draws >= 2, ...); "
                             f"got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"draws of {name!r} contain NaN or inf")
        flat = arr.reshape(arr.shape[0], -1)
        for pos, index in enumerate(np.ndindex(*arr.shape[1:])):
            labels.append(f"{name}[{', '.join(map(str, index))}]" if index else name)
            columns.append(flat[:, pos])
    n_params = len(labels)
    means = np.array([col.mean() for col in columns])
    tail = (1.0 - level) / 2.0
    lows = np.array([np.quantile(col, tail) for col in columns])
    highs = np.array([np.quantile(col, 1.0 - tail) for col in columns])
    keep = np.arange(n_params)
    if n_params > max_rows:
        keep = np.sort(np.argsort(-np.abs(means), kind="stable")[:max_rows])
    rows = np.arange(len(keep))[::-1]
    if ax is None:
        ax = _pyplot().figure(figsize=(5.0, 1.2 + 0.22 * len(keep)),
                              layout="constrained").add_subplot()
    ax.hlines(rows, lows[keep], highs[keep], color="C0", linewidth=2)
    ax.plot(means[keep], rows, "o", color="C0", markersize=4)
    if reference is not None:
        ax.axvline(float(reference), color="0.5", linestyle=":", linewidth=1)
    ax.set_yticks(rows, [labels[i] for i in keep], fontsize=7)
    subset = f", {len(keep)} of {n_params} with largest |mean|" if len(keep) < n_params else ""
    ax.set(xlabel="posterior value", ylabel="parameter",
           title=title or f"Posterior mean and {level:.0%} interval{subset}")
    return ax
