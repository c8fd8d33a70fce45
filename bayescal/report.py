"""Calibration reports: metric tables, reliability diagrams, one HTML file.

Used by ``bayescal evaluate`` and ``bayescal demo``. Everything is computed in
memory first and then written, each file atomically
(:func:`bayescal.io.atomic_write`), so a failure leaves no partial report.
The HTML file is self-contained: the PNG diagrams are embedded as base64
``data:`` URIs, so it can be mailed or archived alone.

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
    "Report",
    "format_table",
    "metric_row",
    "reliability_png",
]

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


def format_table(rows: Sequence[Mapping[str, object]], *, keys: Sequence[str]) -> str:
    """Plain-text table: the ``keys`` columns (labels), then the metrics."""
    heads = list(keys) + [m for m, _, _ in METRICS]
    cells = [[str(r[k]) for k in keys] + [f"{float(r[m]):.4f}" for m, _, _ in METRICS]
             for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(heads)]
    nk = len(keys)

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) if i < nk else v.rjust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True)))

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out += [line(c) for c in cells]
    return "\n".join(out)


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
        ax.set_title(title)  # the diagram prints the ECE itself
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

    fig = Figure(figsize=(4.8, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_reliability(ax, y, proba, n_bins=n_bins, title=title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:.25em .7em;border-bottom:1px solid #ddd}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.best{font-weight:bold}
figure{display:inline-block;margin:.5em}figcaption{text-align:center;font-size:90%}
"""


@dataclass
class Report:
    """A calibration report held in memory until :meth:`write`.

    Attributes
    ----------
    title : str
    keys : list of str
        Label columns of the metric table (e.g. ``["model"]``).
    rows : list of dict
        One row per set of probabilities: the ``keys`` plus every metric.
    images : dict of str to bytes
        PNG files by file name.
    notes : list of str
        Paragraphs shown under the title.
    """

    title: str
    keys: list[str]
    rows: list[dict[str, object]] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, y: ArrayLike, proba: ArrayLike, *, image: str | None = None,
            **labels: object) -> dict[str, object]:
        """Add a metric row (and, with ``image``, its reliability diagram)."""
        row: dict[str, object] = {k: labels[k] for k in self.keys}
        row.update(metric_row(y, proba))
        self.rows.append(row)
        if image is not None:
            title = " / ".join(str(labels[k]) for k in self.keys)
            self.images[image] = reliability_png(y, proba, title=title)
        return row

    def table(self) -> str:
        """The metric table as plain text."""
        return format_table(self.rows, keys=self.keys)

    def html(self) -> str:
        """A self-contained HTML document (images embedded as base64)."""
        esc = html.escape
        # best value per metric, within each group of rows sharing the first
        # label (e.g. per classifier) when there are several label columns
        def group(r: dict[str, object]) -> object:
            return r[self.keys[0]] if len(self.keys) > 1 else None

        best: dict[tuple[object, str], float] = {}
        for name, _, lower in METRICS:
            for g in {group(r) for r in self.rows}:
                vals = [float(r[name]) for r in self.rows if group(r) == g]
                best[g, name] = min(vals) if lower else max(vals)
        head = "".join(f"<th>{esc(h)}</th>" for h in [*self.keys, *(m for m, _, _ in METRICS)])
        body = []
        for r in self.rows:
            cells = [f"<td>{esc(str(r[k]))}</td>" for k in self.keys]
            for name, _, _ in METRICS:
                v = float(r[name])
                top = np.isclose(v, best[group(r), name], rtol=0, atol=5e-5)
                cls = "num best" if top else "num"
                cells.append(f'<td class="{cls}">{v:.4f}</td>')
            body.append("<tr>" + "".join(cells) + "</tr>")
        figs = []
        for name, png in self.images.items():
            b64 = base64.b64encode(png).decode("ascii")
            figs.append(f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{b64}">'
                        f"<figcaption>{esc(name)}</figcaption></figure>")
        notes = "".join(f"<p>{esc(n)}</p>" for n in self.notes)
        per_group = f" for each {esc(self.keys[0])}" if len(self.keys) > 1 else ""
        lower = ", ".join(m for m, _, lo in METRICS if lo)
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(self.title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{esc(self.title)}</h1>{notes}"
            f"<h2>Metrics</h2><p>Lower is better for {esc(lower)}; higher for accuracy. "
            f"Bold: best in the column{per_group}. ECE: confidence ECE, 15 equal-width bins.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<h2>Reliability diagrams</h2>{''.join(figs)}</body></html>\n"
        )

    def write(self, directory: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write ``report.html``, ``metrics.csv`` and the PNGs into ``directory``.

        The directory is created if missing. Existing report files are an
        error unless ``overwrite``. Returns the path of ``report.html``.
        """
        from bayescal.io import atomic_write

        directory = Path(directory)
        files: dict[str, bytes] = {name: png for name, png in self.images.items()}
        csv_lines = [",".join([*self.keys, *(m for m, _, _ in METRICS)])]
        csv_lines += [",".join([*(str(r[k]) for k in self.keys),
                                *(repr(float(r[m])) for m, _, _ in METRICS)]) for r in self.rows]
        files["metrics.csv"] = ("\n".join(csv_lines) + "\n").encode()
        files["report.html"] = self.html().encode()
        if not overwrite:
            clash = [n for n in files if (directory / n).exists()]
            if clash:
                raise FileExistsError(
                    f"report files already exist in {directory}: {', '.join(sorted(clash))} "
                    "(use --force to replace them)"
                )
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            atomic_write(directory / name, lambda p, d=data: p.write_bytes(d), overwrite=True)
        return directory / "report.html"
