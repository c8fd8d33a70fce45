"""Figure and tables of docs/generative_vs_discriminative.md.

Run from the repository root (about a minute on 2 cores: 55-64 s on 2026-12-05;
ODIR and L2 choose their strengths by DirichletCalibrator's default 5-fold CV)::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/figure_generative_vs_discriminative.py

Writes ``docs/_static/generative_vs_discriminative.png`` and prints the
markdown tables quoted in the docs page.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import matplotlib  # noqa: E402
import matplotlib.ticker  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bayescal.compare import compare_dnn, compare_synthetic, plot_dnn, plot_synthetic  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def synthetic_table(rows, metric: str) -> str:
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ns = sorted({r["n"] for r in rows})
    lines = ["| n | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for n in ns:
        cells = [
            f"{np.nanmean([r[metric] for r in rows if r['n'] == n and r['method'] == m]):.4f}"
            for m in methods
        ]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dnn_table(rows) -> str:
    lines = ["| dataset | method | log-loss | ECE | classwise ECE | accuracy | fit s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['dataset']} | {r['method']} | failed: {r['error'][:60]} |||||")
            continue
        lines.append(
            f"| {r['dataset']} | {r['method']} | {r['log_loss']:.4f} | {r['ece']:.4f} | "
            f"{r['classwise_ece']:.5f} | {r['accuracy']:.4f} | {r['fit_seconds']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "dnn"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "_static"
                                             / "generative_vs_discriminative.png"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-k100", action="store_true")
    args = parser.parse_args()
    ns = (100, 300, 1000, 3000, 10000, 30000)
    methods = ["generative", "odir", "l2"]
    dirgen = compare_synthetic(ns, k=3, repeats=args.repeats, methods=methods)
    mixture = compare_synthetic(ns, k=3, scenario="mixture", repeats=args.repeats,
                                methods=methods)
    # k = 10 networks: every method. k = 100 networks: the generative fits
    # only, because one discriminative fit of 10,100 parameters takes about
    # 30 s on the 2-core machine (measured before 2026-12-05), and the default
    # 5-fold CV over the 36-point ODIR grid needs about 180 of them per network.
    data_dir = Path(args.data_dir)
    dnn = compare_dnn(data_dir, files=[p.name for p in sorted(data_dir.glob("*cifar10_*.npz"))],
                      methods=["generative", "generative_prior", "odir", "l2"])
    if not args.skip_k100:
        dnn += compare_dnn(
            data_dir, files=[p.name for p in sorted(data_dir.glob("*cifar100_*.npz"))],
            methods=["generative", "generative_prior"],
        )

    # panels titled by what they show, without letters: the page's sections are
    # (a) DirGen data (top row), (b) mixtures (bottom left), (c) networks (bottom right)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    plot_synthetic(dirgen, metric="log_loss", ax=axes[0, 0])
    axes[0, 0].set_title("DirGen data (model right): test log-loss")
    plot_synthetic(dirgen, metric="map_tv", ax=axes[0, 1])
    axes[0, 1].set_yscale("log")
    axes[0, 1].set_title("DirGen data: distance to the true map")
    plot_synthetic(mixture, metric="map_tv", ax=axes[1, 0])
    axes[1, 0].set_yscale("log")
    axes[1, 0].set_title("Dirichlet mixtures (model wrong): distance")
    plot_dnn(dnn, metric="log_loss", ax=axes[1, 1])
    axes[1, 1].set_yscale("log")
    axes[1, 1].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axes[1, 1].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[1, 1].set_yticks([0.5, 0.75, 1, 2, 3, 5])
    axes[1, 1].set_title("CIFAR networks: test log-loss / uncalibrated")
    # the discriminative fits are not run at k = 100 (above): say so where their bars would be
    methods_run = [m for m in dict.fromkeys(r["method"] for r in dnn) if m != "uncalibrated"]
    datasets = list(dict.fromkeys(r["dataset"] for r in dnn))
    width = 0.8 / len(methods_run)
    for x, ds in enumerate(datasets):
        missing = [i for i, m in enumerate(methods_run)
                   if not any(r["dataset"] == ds and r["method"] == m for r in dnn)]
        if missing:
            offset = (np.mean(missing) - (len(methods_run) - 1) / 2) * width
            note = ", ".join(methods_run[i] for i in missing) + ": not run"
            axes[1, 1].text(x + offset, 0.55, note, rotation=90, ha="center", va="bottom",
                            fontsize="small", color="0.3")
    # room for the last network's note inside the panel (autoscale ends at its last bar)
    axes[1, 1].set_xlim(-0.5, len(datasets) - 0.5)
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=72)
    plt.close(fig)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)\n")
    for name, rows in (("DirGen", dirgen), ("mixture", mixture)):
        for metric in ("log_loss", "map_tv", "classwise_ece"):
            print(f"### {name}: {metric} (mean of {args.repeats} repeats)\n")
            print(synthetic_table(rows, metric) + "\n")
    print("### CIFAR networks (fit on idx_val, scored on idx_test)\n")
    print(dnn_table(dnn))


if __name__ == "__main__":
    main()
