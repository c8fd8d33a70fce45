"""Result tables in the layout of the paper's Tables 1-4 (Markdown).

* :func:`rank_summary` / :func:`rank_table_markdown`: average rank of every
  calibrator per classifier (rows) and over all settings (last row), with the
  Friedman p-value and the Nemenyi critical difference (Tables 1 and 2).
* :func:`dnn_table_markdown`: the measure per network with each method's rank
  in parentheses, rank 1 in bold, and the average rank (Tables 3 and 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayescal.experiments.ranking import block_ranks, friedman_pvalue, nemenyi_cd
from bayescal.experiments.scoring import HIGHER_IS_BETTER

__all__ = [
    "RankSummary",
    "dnn_table_markdown",
    "rank_summary",
    "rank_table_markdown",
    "variant_table_markdown",
]


@dataclass
class RankSummary:
    """Average ranks of a set of methods on one measure.

    Attributes
    ----------
    ranks : DataFrame
        Rows: classifiers, then ``"average"`` (over all blocks); columns: methods.
    n_blocks : dict
        Number of complete (dataset, classifier) blocks per row.
    friedman_p : float
        Friedman test over all blocks.
    cd : float
        Nemenyi critical difference (alpha = 0.05) over all blocks.
    dropped : list of tuple
        Blocks left out because a method has no value there.
    """

    metric: str
    ranks: pd.DataFrame
    n_blocks: dict[str, int]
    friedman_p: float
    cd: float
    dropped: list[tuple[str, str]]


def rank_summary(results: pd.DataFrame, metric: str, methods: list[str]) -> RankSummary:
    """Average ranks of ``methods`` on ``metric`` per classifier and overall.

    Parameters
    ----------
    results : DataFrame
        One row per (dataset, classifier, repeat, fold, method) with a column
        ``metric``. The measure is averaged over folds first; each
        (dataset, classifier) pair is one block.
    metric : str
    methods : list of str
        Columns of the table, in order.
    """
    sub = results[results["method"].isin(methods)]
    means = sub.groupby(["classifier", "dataset", "method"])[metric].mean().unstack("method")
    means = means.reindex(columns=methods)
    complete = means.notna().all(axis=1)
    dropped = [tuple(ix) for ix in means.index[~complete]]
    means = means[complete]
    hib = metric in HIGHER_IS_BETTER
    rows, counts = {}, {}
    if len(means):
        ranks = pd.DataFrame(
            block_ranks(means.to_numpy(), higher_is_better=hib),
            index=means.index,
            columns=methods,
        )
        for clf, block in ranks.groupby(level="classifier"):
            rows[clf] = block.mean()
            counts[clf] = len(block)
        rows["average"] = ranks.mean()
        counts["average"] = len(ranks)
        p = friedman_pvalue(means.to_numpy(), higher_is_better=hib)
        cd = nemenyi_cd(len(methods), len(ranks)) if len(methods) >= 2 else float("nan")
    else:
        p = cd = float("nan")
    table = pd.DataFrame(rows).T.reindex(columns=methods)
    return RankSummary(metric, table, counts, p, cd, dropped)


def _fmt(v: float, nd: int) -> str:
    return "—" if not np.isfinite(v) else f"{v:.{nd}f}"


def rank_table_markdown(
    summary: RankSummary,
    labels: dict[str, str],
    *,
    paper: dict[str, tuple[float, ...]] | None = None,
) -> str:
    """Markdown table of a :class:`RankSummary` (best rank of a row in bold).

    With ``paper`` (rows by classifier name, same column order) each cell
    reads ``ours (paper)``.
    """
    methods = list(summary.ranks.columns)
    head = "| Classifier | " + " | ".join(labels.get(m, m) for m in methods) + " | blocks |"
    lines = [head, "|" + "---|" * (len(methods) + 2)]
    for clf, row in summary.ranks.iterrows():
        best = np.nanmin(row.to_numpy())
        nd = 2 if clf == "average" else 1
        cells = []
        for j, m in enumerate(methods):
            cell = _fmt(row[m], nd)
            if row[m] == best:
                cell = f"**{cell}**"
            if paper is not None and clf in paper:
                cell += f" ({paper[clf][j]:.{nd}f})"
            cells.append(cell)
        name = "**average rank**" if clf == "average" else str(clf)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {summary.n_blocks[clf]} |")
    lines.append("")
    lines.append(
        f"Friedman p-value {summary.friedman_p:.3g}; Nemenyi critical difference "
        f"(alpha=0.05) {summary.cd:.3f} over {summary.n_blocks.get('average', 0)} blocks."
    )
    if summary.dropped:
        lines.append(
            f"{len(summary.dropped)} block(s) left out because a method has no value: "
            + ", ".join(f"{c}/{d}" for c, d in summary.dropped[:10])
            + (" ..." if len(summary.dropped) > 10 else "")
        )
    return "\n".join(lines)


def variant_table_markdown(
    results: pd.DataFrame,
    metrics: list[str],
    variants: list[str],
    others: list[str],
    labels: dict[str, str],
    *,
    paper_first: dict[str, float] | None = None,
) -> str:
    """Each variant in turn in the first column of a table with ``others``.

    One row per (measure, variant): the variant's average rank when it takes
    the first column's place (the paper's Dir-L2) among ``others``, and the
    others' ranks in that comparison. ``paper_first`` maps a measure to the
    paper's average rank of its first column, shown for reference.
    """
    cols = ["Measure", "first column", *(labels.get(m, m) for m in others), "blocks"]
    if paper_first:
        cols.insert(2, "paper's Dir-L2")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for metric in metrics:
        for v in variants:
            if v not in set(results["method"]):
                continue
            s = rank_summary(results, metric, [v, *others])
            if "average" not in s.ranks.index:
                continue
            avg = s.ranks.loc["average"]
            cells = [metric, f"{labels.get(v, v)} **{avg[v]:.2f}**"]
            if paper_first:
                cells.append(_fmt(paper_first.get(metric, float("nan")), 2))
            cells += [f"{avg[m]:.2f}" for m in others]
            cells.append(str(s.n_blocks["average"]))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dnn_table_markdown(
    results: pd.DataFrame,
    metric: str,
    methods: list[str],
    labels: dict[str, str],
    *,
    digits: int = 3,
) -> str:
    """Markdown table: value (rank) per network, rank 1 in bold, average rank last."""
    wide = (
        results[results["method"].isin(methods)]
        .pivot_table(index="dataset", columns="method", values=metric, aggfunc="mean")
        .reindex(columns=methods)
    )
    hib = metric in HIGHER_IS_BETTER
    complete = wide.dropna()
    ranks = (
        pd.DataFrame(block_ranks(complete.to_numpy(), higher_is_better=hib),
                     index=complete.index, columns=methods)
        if len(complete) else pd.DataFrame(columns=methods)
    )
    lines = ["| Model | " + " | ".join(labels.get(m, m) for m in methods) + " |",
             "|" + "---|" * (len(methods) + 1)]
    for model, row in wide.iterrows():
        cells = []
        for m in methods:
            if model in ranks.index:
                r = ranks.loc[model, m]
                cell = f"{row[m]:.{digits}f} ({r:g})"
                cells.append(f"**{cell}**" if r == ranks.loc[model].min() else cell)
            else:
                cells.append(_fmt(row[m], digits))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    avg = ranks.mean() if len(ranks) else pd.Series(np.nan, index=methods)
    lines.append("| **average rank** | " + " | ".join(_fmt(avg[m], 2) for m in methods) + " |")
    return "\n".join(lines)
