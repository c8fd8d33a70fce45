"""Calibration reports: metric tables, reliability diagrams, one HTML file.

Used by ``bayescal evaluate`` and ``bayescal demo``. Everything is computed in
memory first and then written into a temporary directory that is moved into
place at the end (:func:`bayescal._files.atomic_write_dir`), so a failure
leaves no partial report.
The HTML file is self-contained: the PNG diagrams are embedded as base64
``data:`` URIs, so it can be mailed or archived alone.

Which method to trust is said in the report itself: within each group of
rows (e.g. one classifier), the recommended method -- the one
:class:`bayescal.CalibratedClassifier` uses by default -- comes first, then
the ``"uncalibrated"`` reference, then the other methods; a row whose
log-loss is above the reference's is marked as worse than uncalibrated.
The reliability diagrams of the reference and of the recommended method are
always drawn.

What each fit chose is said too: a row added with its fitted ``calibrator``
gets a "fit" column (:func:`describe_fit`, e.g. "the data supported
temperature scaling only (T=1.3)"), and a row whose fitted map is the map of
an earlier row of its group (:func:`same_map`; e.g. matrix scaling on
probabilities, which is the Dirichlet map) is noted "same map as NAME"
instead of being listed as if it were another result.

Matplotlib is imported only when a diagram is drawn, through its
object-oriented API (no pyplot state, no display needed).
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from bayescal.metrics import (
    accuracy,
    brier_score,
    classwise_ece,
    expected_calibration_error,
    log_loss,
    max_calibration_error,
)

__all__ = [
    "METRICS",
    "REFERENCE",
    "Report",
    "default_method",
    "describe_fit",
    "format_table",
    "metric_row",
    "reliability_png",
    "same_map",
]

#: Label (last key) of the rows every other row of a group is compared with.
REFERENCE = "uncalibrated"

#: Columns of the metric table: (header, function of (y, proba), lower is better).
METRICS: tuple[tuple[str, object, bool], ...] = (
    ("log-loss", log_loss, True),
    ("Brier", brier_score, True),
    ("accuracy", accuracy, False),
    ("ECE", expected_calibration_error, True),
    ("cw-ECE", classwise_ece, True),
    ("MCE", max_calibration_error, True),
)


def metric_row(y: ArrayLike, proba: ArrayLike) -> dict[str, float]:
    """Every metric of :data:`METRICS` for one set of probabilities."""
    return {name: float(fn(y, proba)) for name, fn, _ in METRICS}


def default_method() -> str:
    """The method a user gets by default: ``CalibratedClassifier().method``.

    The report recommends it (shown first, with its reliability diagram).
    """
    from bayescal.calibrated import CalibratedClassifier

    return str(CalibratedClassifier().get_params()["method"])


def format_table(rows: Sequence[Mapping[str, object]], *, keys: Sequence[str],
                 notes: Sequence[str] | None = None,
                 fits: Sequence[str] | None = None) -> str:
    """Plain-text table: the ``keys`` columns (labels), the metrics, then ``notes`` and
    ``fits`` (what each fit chose, :func:`describe_fit`) if given."""
    heads = list(keys) + [m for m, _, _ in METRICS]
    cells = [[str(r[k]) for k in keys] + [f"{float(r[m]):.4f}" for m, _, _ in METRICS]
             for r in rows]
    for head, column in (("note", notes), ("fit", fits)):
        if column is not None:
            heads.append(head)
            cells = [c + [n] for c, n in zip(cells, column, strict=True)]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(heads)]
    nk = len(keys)
    n_metrics = len(METRICS)

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if nk <= i < nk + n_metrics else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out += [line(c) for c in cells]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# what a fit chose, and which fits are one map
# ---------------------------------------------------------------------------
#: The groups of the structured penalty, as a reader names them.
_GROUP_WORDS = {"reg_lambda": "off-diagonal", "reg_diag": "scales", "reg_mu": "biases"}


def _num(value: float) -> str:
    """Three significant digits; whole thousands written out (1000, not 1e+03)."""
    value = float(value)
    return f"{value:.0f}" if 1e3 <= abs(value) < 1e5 and value == round(value) else f"{value:.3g}"


def _cv_words(cv: object) -> str:
    return f"{cv}-fold cross-validation" if isinstance(cv, int) else "cross-validation"


def _describe_structured(est: object, groups: tuple[str, ...], *, chosen: bool) -> str:
    """The structured penalty's choice: temperature scaling only, or what it let free."""
    from bayescal.structured import FULL_AUTO_MAX_K

    lead = "the data supported " if chosen else ""
    T = _num(est.temperature_)
    values = {g: float(getattr(est, f"{g}_")) for g in groups}
    pinned = [g for g in groups if np.isinf(values[g])]
    if len(pinned) == len(groups):
        return f"{lead}temperature scaling only (T={T})"
    free = [g for g in groups if g not in pinned]
    if "reg_lambda" in free:
        shape = "a full map"
    else:
        shape = {("reg_diag", "reg_mu"): "per-class scales and biases",
                 ("reg_diag",): "per-class scales", ("reg_mu",): "per-class biases"}[tuple(free)]
    text = (f"{lead}{shape} around temperature scaling (T={T}; "
            + ", ".join(f"{g}={_num(values[g])}" for g in free))
    if pinned == ["reg_lambda"] and chosen and est.n_features_in_ > FULL_AUTO_MAX_K:
        return text + f"; off-diagonal not fitted beyond k = {FULL_AUTO_MAX_K})"
    if pinned:
        text += "; " + " and ".join(_GROUP_WORDS[g] for g in pinned) + " pinned"
    return text + ")"


def _describe_full(est: object) -> str:
    """A :class:`~bayescal.DirichletCalibrator` or :class:`~bayescal.MatrixScaler` fit."""
    if est.reg == "structured":
        text = _describe_structured(est, ("reg_lambda", "reg_diag", "reg_mu"),
                                    chosen=getattr(est, "selection_", None) is not None)
    elif est.reg == "none":
        text = "a full map, unpenalised (maximum likelihood)"
    else:
        strengths = [f"reg_lambda={_num(est.reg_lambda_)}"]
        if est.reg == "odir":
            strengths.append(f"reg_mu={_num(est.reg_mu_)}")
        if getattr(est, "cv_results_", None) is not None:
            strengths.append(f"chosen by {_cv_words(est.cv)}")
        penalty = ("ODIR penalty" if est.reg == "odir" else "L2 penalty towards "
                   + ("W = 0" if est.center == "zero" else "W = I"))
        text = f"a full map, {penalty} ({', '.join(strengths)})"
    coefs = getattr(est, "coefs_", None)
    if coefs is not None:
        text += f", average of {len(coefs)} fold maps"
    return text


def _describe_generative(est: object) -> str:
    """A :class:`~bayescal.GenerativeDirichletCalibrator` fit: its prior, or none."""
    nu = est.prior_strength_
    if nu is None:
        return "class-conditional Dirichlets by maximum likelihood"
    plural = "" if nu == 1 else "s"
    if not (isinstance(est.prior, str) and est.prior == "auto"):
        return (f"class-conditional Dirichlets with a prior of {nu:g} pseudo-sample{plural} "
                "per class")
    # the "auto" prior's centre is the DirGen model of temperature scaling: 1 + e_j / T
    T = _num(1.0 / (float(est.prior_center_[0, 0]) - 1.0))
    if np.isinf(nu):
        return f"the data supported temperature scaling only (T={T})"
    return (f"the data supported class-conditional Dirichlets with a prior of {nu:g} "
            f"pseudo-sample{plural} per class around temperature scaling (T={T})")


def describe_fit(calibrator: object) -> str:
    """One line of plain English on what a fitted calibrator chose.

    Read from the estimator's fitted attributes (nothing is refitted): the
    temperature, the penalty strengths kept (``inf`` pins a group at
    temperature scaling), the prior strength of the generative fit, the
    probability floor when it is not :data:`bayescal.EPS`. "The data
    supported" marks a choice made from the data (strengths ``"auto"``).

    Parameters
    ----------
    calibrator : fitted calibrator
        Any calibrator of :data:`bayescal.calibrators.registry.METHODS`, as
        :func:`~bayescal.calibrators.registry.make_calibrator` builds it or
        as :func:`bayescal.load` reads it.

    Returns
    -------
    str
        E.g. ``"the data supported temperature scaling only (T=1.3)"`` or
        ``"the data supported a full map around temperature scaling (T=8.06;
        reg_lambda=0.429, reg_diag=0.452, reg_mu=0.515)"``.

    Examples
    --------
    >>> from bayescal import TemperatureScaler, make_dirgen, log_features
    >>> from bayescal.report import describe_fit
    >>> q, y, _, _ = make_dirgen(300, 3, rng=0)
    >>> describe_fit(TemperatureScaler().fit(log_features(q), y))
    'temperature scaling (T=2.6)'
    """
    from bayescal._validation import EPS
    from bayescal.calibrators import (
        DirichletCalibrator,
        GenerativeDirichletCalibrator,
        TemperatureScaler,
        VectorScaler,
    )
    from bayescal.calibrators.ovr import OneVsRestCalibratorMixin
    from bayescal.calibrators.registry import ProbsToLogits

    est = calibrator.estimator_ if isinstance(calibrator, ProbsToLogits) else calibrator
    if hasattr(est, "idata_"):  # Bayesian: a posterior, not one map
        return (f"posterior average ({getattr(est, 'prior', '?')} prior, sampler "
                f"{getattr(est, 'sampler_', '?')})")
    if isinstance(est, TemperatureScaler):
        text = f"temperature scaling (T={_num(est.temperature_)})"
    elif isinstance(est, VectorScaler):
        if est.reg == "none":
            text = "per-class scales and biases, unpenalised (maximum likelihood)"
        else:
            text = _describe_structured(est, ("reg_diag", "reg_mu"), chosen=(
                est.reg_diag in ("auto", None) or est.reg_mu == "auto"))
    elif isinstance(est, DirichletCalibrator):  # MatrixScaler too
        text = _describe_full(est)
    elif isinstance(est, GenerativeDirichletCalibrator):
        text = _describe_generative(est)
    elif isinstance(est, OneVsRestCalibratorMixin):
        kind = {"SigmoidCalibrator": "a sigmoid", "BetaCalibrator": "a beta map",
                "IsotonicCalibrator": "an isotonic map",
                "BinningCalibrator": f"{getattr(est, 'n_bins', '?')} bins"}.get(
                    type(est).__name__, type(est).__name__)
        return f"one-vs-rest: {kind} per class, renormalised"
    else:
        return type(est).__name__
    floor = getattr(calibrator, "eps_", getattr(calibrator, "eps", EPS))
    raw = getattr(est, "_feature_space", "") == "raw" and est.input == "logits"
    if isinstance(floor, float) and floor != EPS and not raw:
        text += f", probability floor {floor:.2g}"
    return text


def _linear_map(calibrator: object) -> tuple[tuple[object, ...], np.ndarray, np.ndarray] | None:
    """``(features, W, b)`` of a fitted map ``softmax(W x + b)``, or None.

    ``features`` names what ``x`` is (the kind of scores and the probability
    floor of ``x = max(ln q, ln eps)``, or raw logits); ``W`` and ``b`` are
    centred (column means of ``W``, the mean of ``b`` removed), which removes
    exactly the shifts that change no prediction. None for a calibrator that
    is not one such map (one-vs-rest, a posterior, an average of fold maps).
    """
    from bayescal.calibrators._base import FamilyCalibratorMixin
    from bayescal.calibrators.registry import ProbsToLogits

    def single(est: object) -> bool:
        return (isinstance(est, FamilyCalibratorMixin) and not hasattr(est, "coefs_")
                and not hasattr(est, "idata_") and hasattr(est, "coef_"))

    if isinstance(calibrator, ProbsToLogits):  # x = max(ln q, ln eps) as logits
        inner = calibrator.estimator_
        if not single(inner):
            return None
        features: tuple[object, ...] = ("probs", float(calibrator.eps))
        W, b = inner.coef_, inner.intercept_
    elif single(calibrator):
        if calibrator._feature_space == "raw" and calibrator.input == "logits":
            features = ("logits", "raw")
        else:
            eps = getattr(calibrator, "eps_", calibrator.eps)
            features = (calibrator.input, float(eps))
        W, b = calibrator.coef_, calibrator.intercept_
    else:
        return None
    W, b = np.asarray(W, dtype=float), np.asarray(b, dtype=float)
    return features, W - W.mean(axis=0), b - b.mean()


def _maps_equal(a: tuple | None, b: tuple | None, rtol: float) -> bool:
    if a is None or b is None or a[0] != b[0] or a[1].shape != b[1].shape:
        return False
    scale = max(float(np.abs(p).max(initial=0.0)) for p in (*a[1:], *b[1:]))
    diff = max(float(np.abs(a[1] - b[1]).max()), float(np.abs(a[2] - b[2]).max()))
    return diff <= rtol * scale


def same_map(a: object, b: object, *, rtol: float = 1e-9) -> bool:
    """Whether two fitted calibrators are the same map ``softmax(W x + b)``.

    True when both are single maps of the Dirichlet family on the same
    features (the same kind of scores and probability floor) whose
    coefficients agree to ``rtol`` relative to the largest, after removing
    the shifts that change no prediction (one vector added to every row of
    ``W``, one constant to ``b``). On probabilities, for instance,
    :class:`~bayescal.MatrixScaler` fits the features ``ln q`` of
    :class:`~bayescal.DirichletCalibrator` and is the same map; and every
    fit that chose temperature scaling only is the map of
    :class:`~bayescal.TemperatureScaler` on the same features. One-vs-rest
    calibrators, posteriors and averages of fold maps are never "the same
    map".

    Parameters
    ----------
    a, b : fitted calibrator
        As for :func:`describe_fit`.
    rtol : float, default=1e-9
        Largest difference of the centred coefficients, relative to the
        largest of them.

    Returns
    -------
    bool
    """
    return _maps_equal(_linear_map(a), _linear_map(b), rtol)


def _draw_reliability(ax, y: ArrayLike, proba: ArrayLike, *, n_bins: int, title: str) -> None:
    """Confidence reliability diagram on ``ax``.

    Uses :func:`bayescal.plots.reliability_diagram` (with its consistency
    bands, seeded) when the plots module is present; otherwise draws the bars
    of :func:`bayescal.metrics.reliability_table` itself.
    """
    from bayescal.metrics import expected_calibration_error, reliability_table

    heading = f"{title}\nECE = {expected_calibration_error(y, proba, n_bins=n_bins):.4f}"
    try:
        from bayescal.plots import reliability_diagram
    except ImportError:  # bayescal.plots not installed in this checkout
        reliability_diagram = None
    if reliability_diagram is not None:
        reliability_diagram(y, proba, ax=ax, n_bins=n_bins, rng=0)
        ax.set_title(title, fontsize=10)  # the diagram prints the ECE itself
        return
    t = reliability_table(y, proba, n_bins=n_bins)
    width = np.diff(t.edges)
    nonempty = t.counts > 0
    ax.bar(t.edges[:-1][nonempty], t.accuracy[nonempty], width=width[nonempty], align="edge",
           edgecolor="black", color="#4c72b0", label="accuracy")
    ax.bar(t.edges[:-1][nonempty], (t.mean_confidence - t.accuracy)[nonempty],
           bottom=t.accuracy[nonempty], width=width[nonempty], align="edge",
           color="#dd8452", alpha=0.5, edgecolor="#dd8452", label="gap to confidence")
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (top probability)",
           ylabel="accuracy", title=heading)
    ax.legend(loc="upper left", fontsize="small")


def reliability_png(y: ArrayLike, proba: ArrayLike, *, title: str, n_bins: int = 15,
                    dpi: int = 90) -> bytes:
    """A confidence reliability diagram as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.6, 5.4), layout="compressed")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_reliability(ax, y, proba, n_bins=n_bins, title=title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}th,td{padding:.25em .7em;border-bottom:1px solid #ddd}
th{text-align:left;white-space:nowrap}td{white-space:nowrap}td.note{white-space:normal}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{font-weight:bold}tr.recommended td{background:#eef6ee}
tr.worse td{background:#fbeaea}tr.worse td.note{color:#a11}tr.reference td{color:#555}
tr.group-start td{border-top:2px solid #999}
figure{display:inline-block;vertical-align:top;margin:.5em;max-width:440px}
figure img{max-width:100%}figcaption{font-size:90%;line-height:1.35}
"""


@dataclass
class Report:
    """A calibration report held in memory until :meth:`write`.

    Rows are grouped by the first key when there are several keys (e.g. by
    classifier); the last key names what was scored (e.g. the method). In
    each group the rows of the ``recommended`` method come first, then the
    :data:`REFERENCE` (``"uncalibrated"``) row, then the others in the order
    they were added; a row whose log-loss exceeds its group's reference is
    marked "worse than uncalibrated" in the table, the HTML and the CSV.

    Attributes
    ----------
    title : str
    keys : list of str
        Label columns of the metric table (e.g. ``["classifier", "method"]``).
    rows : list of dict
        One row per set of probabilities, in the order added: the ``keys``
        plus every metric.
    images : dict of str to bytes
        PNG files by file name.
    fits : list of str
        What the fit of each row chose (:func:`describe_fit`; ``""`` for a
        row added without its ``calibrator``), shown as the "fit" column when
        any row has one.
    notes : list of str
        Paragraphs shown under the title.
    recommended : str or None
        The method the report recommends; default :func:`default_method`.
        Its rows get a reliability diagram even when :meth:`add` is given
        no ``image`` name.
    """

    title: str
    keys: list[str]
    rows: list[dict[str, object]] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    recommended: str | None = field(default_factory=default_method)
    fits: list[str] = field(default_factory=list, init=False)
    _maps: list[object] = field(default_factory=list, init=False, repr=False)
    _image_rows: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _sizes: list[int] = field(default_factory=list, init=False, repr=False)

    def add(self, y: ArrayLike, proba: ArrayLike, *, image: str | None = None,
            calibrator: object = None, **labels: object) -> dict[str, object]:
        """Add a metric row and, with ``image`` (a PNG file name), its reliability diagram.

        Rows of the reference and of the recommended method always get a
        diagram (named from their labels when ``image`` is None). With the
        fitted ``calibrator`` that gave ``proba``, the row says what its fit
        chose (:attr:`fits`) and whether its map is that of another row
        (:meth:`verdicts`).
        """
        missing = [k for k in self.keys if k not in labels]
        if missing:
            raise ValueError(f"Report.add needs the labels {self.keys}; missing {missing}")
        row: dict[str, object] = {k: labels[k] for k in self.keys}
        row.update(metric_row(y, proba))
        fit = describe_fit(calibrator) if calibrator is not None else ""
        linear = _linear_map(calibrator) if calibrator is not None else None
        self.rows.append(row)
        self.fits.append(fit)
        self._maps.append(linear)
        self._sizes.append(int(np.shape(y)[0]))
        if image is None and self._role(row) in ("recommended", "reference"):
            image = " - ".join(str(labels[k]) for k in self.keys).replace(" ", "_") + ".png"
        if image is not None:
            if image in self.images:
                raise ValueError(f"the report already has an image named {image!r}")
            title = " / ".join(str(labels[k]) for k in self.keys)
            if self._role(row) == "recommended":
                title += " (recommended)"
            self.images[image] = reliability_png(y, proba, title=title)
            self._image_rows[image] = len(self.rows) - 1
        return row

    # -- grouping, order and verdicts --------------------------------------
    def _group(self, row: Mapping[str, object]) -> object:
        return row[self.keys[0]] if len(self.keys) > 1 else None

    def _role(self, row: Mapping[str, object]) -> str:
        label = str(row[self.keys[-1]])
        if label == REFERENCE:
            return "reference"
        if self.recommended is not None and label == self.recommended:
            return "recommended"
        return "other"

    def order(self) -> list[int]:
        """Indices of :attr:`rows` in display order (groups in order of first appearance)."""
        rank = {"recommended": 0, "reference": 1, "other": 2}
        groups: dict[object, list[int]] = {}
        for i, r in enumerate(self.rows):
            groups.setdefault(self._group(r), []).append(i)
        return [i for members in groups.values()
                for i in sorted(members, key=lambda i: rank[self._role(self.rows[i])])]

    def verdicts(self) -> list[str]:
        """One note per row of :attr:`rows`: ``"recommended"``, ``"reference"``,
        ``"worse than uncalibrated (log-loss +x%)"``, ``"same map as NAME"``
        (its fitted map is that of the first row of its group, in display
        order, with the same map: :func:`same_map`) or ``""``, joined by
        ``"; "``."""
        ref = {self._group(r): float(r["log-loss"]) for r in self.rows
               if self._role(r) == "reference"}
        first_of: dict[int, int] = {}
        shown: dict[object, list[int]] = {}
        for i in self.order():
            earlier = shown.setdefault(self._group(self.rows[i]), [])
            match = next((j for j in earlier if _maps_equal(self._maps[j], self._maps[i], 1e-9)),
                         None)
            if match is not None:
                first_of[i] = match
            earlier.append(i)
        out = []
        for i, r in enumerate(self.rows):
            role = self._role(r)
            base = ref.get(self._group(r))
            parts = [] if role == "other" else [role]
            if role != "reference" and base is not None and float(r["log-loss"]) > base:
                parts.append(f"worse than uncalibrated (log-loss "
                             f"{100 * (float(r['log-loss']) / base - 1):+.1f}%)")
            if i in first_of:
                parts.append(f"same map as {self.rows[first_of[i]][self.keys[-1]]}")
            out.append("; ".join(parts))
        return out

    def _fit_column(self) -> bool:
        return any(self.fits)

    def table(self) -> str:
        """The metric table as plain text, in display order, with the notes column."""
        order, notes = self.order(), self.verdicts()
        fits = [self.fits[i] for i in order] if self._fit_column() else None
        return format_table([self.rows[i] for i in order], keys=self.keys,
                            notes=[notes[i] for i in order], fits=fits)

    def _caption(self, image: str) -> str:
        i = self._image_rows[image]
        r, note = self.rows[i], self.verdicts()[i]
        what = " / ".join(str(r[k]) for k in self.keys)
        text = (f"{what}: log-loss {float(r['log-loss']):.4f}, ECE {float(r['ECE']):.4f}, "
                f"accuracy {float(r['accuracy']):.4f} on {self._sizes[i]} samples")
        return f"{text} ({note})." if note else f"{text}."

    def html(self) -> str:
        """A self-contained HTML document (images embedded as base64)."""
        esc = html.escape
        best: dict[tuple[object, str], float] = {}
        for name, _, lower in METRICS:
            for g in {self._group(r) for r in self.rows}:
                vals = [float(r[name]) for r in self.rows if self._group(r) == g]
                best[g, name] = min(vals) if lower else max(vals)
        notes_col = self.verdicts()
        with_fit = self._fit_column()
        head = "".join(f"<th>{esc(h)}</th>"
                       for h in [*self.keys, *(m for m, _, _ in METRICS), "note",
                                 *(["fit"] if with_fit else [])])
        body, previous = [], object()
        for i in self.order():
            r = self.rows[i]
            cells = [f"<td>{esc(str(r[k]))}</td>" for k in self.keys]
            for name, _, _ in METRICS:
                v = float(r[name])
                top = np.isclose(v, best[self._group(r), name], rtol=0, atol=5e-5)
                cls = "num best" if top else "num"
                cells.append(f'<td class="{cls}">{v:.4f}</td>')
            cells.append(f'<td class="note">{esc(notes_col[i])}</td>')
            if with_fit:
                cells.append(f'<td class="note">{esc(self.fits[i])}</td>')
            classes = [self._role(r)]
            if "worse than uncalibrated" in notes_col[i]:
                classes.append("worse")
            if self._group(r) != previous and len(self.keys) > 1 and body:
                classes.append("group-start")
            previous = self._group(r)
            body.append(f'<tr class="{" ".join(classes)}">' + "".join(cells) + "</tr>")
        position = {i: n for n, i in enumerate(self.order())}
        figs = []
        for name in sorted(self.images, key=lambda n: position[self._image_rows[n]]):
            b64 = base64.b64encode(self.images[name]).decode("ascii")
            caption = esc(self._caption(name))
            figs.append(f'<figure><img alt="{caption}" src="data:image/png;base64,{b64}">'
                        f"<figcaption>{caption}</figcaption></figure>")
        notes = "".join(f"<p>{esc(n)}</p>" for n in self.notes)
        per_group = f" for each {esc(self.keys[0])}" if len(self.keys) > 1 else ""
        lower = ", ".join(m for m, _, lo in METRICS if lo)
        rec = ""
        if self.recommended is not None and any(self._role(r) == "recommended"
                                                for r in self.rows):
            rec = (f"<p>Recommended: <b>{esc(self.recommended)}</b>, the method bayescal uses "
                   "by default (first row of each group, green). Red rows have a higher "
                   "test log-loss than the uncalibrated probabilities: do not use those "
                   "methods on these data.</p>")
        worse = sum("worse than uncalibrated" in n for n in notes_col)
        calibrated = sum(self._role(r) != "reference" for r in self.rows)
        count = (f"<p>{worse} of {calibrated} calibrated rows are worse than uncalibrated.</p>"
                 if any(self._role(r) == "reference" for r in self.rows) and calibrated else "")
        fit_text = (
            "<p>fit: what each calibrator's fit chose, read from the fitted estimator (the "
            "temperature T; the penalty strengths it kept, in the units of the estimator's "
            "parameters of the same names, a group at temperature scaling being pinned; "
            "\"the data supported\": chosen from the calibration data). \"Same map as "
            "NAME\": the row's fitted map is that row's map (the same coefficients, to "
            "1e-9), so its numbers are that row's, not a second result.</p>"
            if with_fit else "")
        diagrams = (
            "<p>Each diagram shows the top-label confidence on the test rows: dots, the "
            "observed accuracy of each bin against its mean confidence (on the dotted "
            "diagonal when calibrated); shaded boxes, where the accuracy of a calibrated "
            "model would fall with probability 90% (consistency band); grey bars, the "
            "number of rows in each bin (right axis).</p>"
        )
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(self.title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{esc(self.title)}</h1>{notes}"
            f"<h2>Metrics</h2>{rec}{count}<p>Lower is better for {esc(lower)}; higher for "
            f"accuracy. Bold: best in the column{per_group}. ECE: confidence ECE, 15 "
            f"equal-width bins.</p>{fit_text}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<h2>Reliability diagrams</h2>{diagrams}{''.join(figs)}</body></html>\n"
        )

    def csv(self) -> str:
        """``metrics.csv``: the rows in display order (keys, metrics, the :meth:`verdicts` note,
        and :attr:`fits` as ``fit`` when a row has one)."""
        notes, with_fit = self.verdicts(), self._fit_column()
        lines = [",".join([*self.keys, *(m for m, _, _ in METRICS), "note",
                           *(["fit"] if with_fit else [])])]
        lines += [",".join([*(_csv(self.rows[i][k]) for k in self.keys),
                            *(repr(float(self.rows[i][m])) for m, _, _ in METRICS),
                            _csv(notes[i]), *([_csv(self.fits[i])] if with_fit else [])])
                  for i in self.order()]
        return "\n".join(lines) + "\n"

    def files(self) -> dict[str, bytes]:
        """Every file of the report by name: the PNGs, ``metrics.csv``, ``report.html``."""
        return {**self.images, "metrics.csv": self.csv().encode(),
                "report.html": self.html().encode()}

    def write(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write ``report.html``, ``metrics.csv`` and the PNGs into ``directory``.

        The report is written whole or not at all: into a temporary directory
        beside ``directory``, moved into place at the end
        (:func:`bayescal._files.atomic_write_dir`); a failure (a full disk)
        leaves ``directory`` as it was. The directory is created if missing
        (its parents too); other files in it are kept. Existing report files
        are an error unless ``overwrite``.

        Returns
        -------
        Path
            The path of ``report.html``.
        """
        from bayescal._files import atomic_write_dir, write_error

        directory = Path(directory)
        files = self.files()
        if not overwrite:
            clash = [n for n in files if (directory / n).exists()]
            if clash:
                raise FileExistsError(
                    f"report files already exist in {directory}: {', '.join(sorted(clash))} "
                    "(use --force to replace them)"
                )
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(directory, exc) from exc
        atomic_write_dir(directory, files)
        return directory / "report.html"


def _csv(value: object) -> str:
    """One CSV field: quoted when it holds a comma, a quote or a newline (RFC 4180)."""
    text = str(value)
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text
