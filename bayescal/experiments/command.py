"""The ``bayescal reproduce`` subcommand (argparse glue around :func:`reproduce`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_reproduce_parser", "run_reproduce"]


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _floats(text: str) -> list[float]:
    try:
        return [float(t) for t in _csv(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers; got {text!r}") from exc


def _count(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}; got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _jobs(text: str) -> int:
    value = _count(-1)(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be -1 (all cores) or at least 1; got 0")
    return value


EXAMPLES = """\
examples:
  bayescal reproduce --suite uci --quick --out results-quick
  bayescal reproduce --suite uci --data-dir data/uci --out results --jobs -1
  bayescal reproduce --suite uci --datasets iris,glass --repeats 2 --folds 3 --out r
  bayescal reproduce --suite dnn --data-dir data/dnn --out results-dnn
  bayescal reproduce --suite uci --out results --report-only

A run locks OUT (OUT/reproduce.lock): a second run on the same OUT stops with
an error while the first is alive. A damaged cache entry is reported, moved
aside (renamed *.damaged-<time>) and recomputed.
"""


def add_reproduce_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``reproduce`` to an argparse ``subparsers`` object and return its parser.

    The parser's default ``func`` is :func:`run_reproduce`.
    """
    p = subparsers.add_parser(
        "reproduce",
        help="rerun the Dirichlet calibration paper's experiments (resumable)",
        description="Run the UCI (Tables 1-2) or deep-network (Tables 3-4) suite of "
        "Kull et al. (2019). Finished settings are cached under OUT/cache, so a "
        "killed run continues where it stopped.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--suite", required=True, choices=["uci", "dnn"])
    p.add_argument("--data-dir", default=None,
                   help="directory of .npz files (uci: optional, else downloaded)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--quick", action="store_true",
                   help="small smoke run (uci: 3 datasets x 3 classifiers, 1x3 folds)")
    p.add_argument("--jobs", type=_jobs, default=1, help="parallel jobs (-1: all cores)")
    p.add_argument("--datasets", type=_csv, default=None, help="comma-separated subset")
    p.add_argument("--classifiers", type=_csv, default=None, help="comma-separated subset")
    p.add_argument("--methods", type=_csv, default=None, help="comma-separated subset")
    p.add_argument("--repeats", type=_count(1), default=None,
                   help="outer CV repeats, >= 1 (uci; default 5, --quick 1)")
    p.add_argument("--folds", type=_count(2), default=None,
                   help="outer CV folds, >= 2 (uci; default 5, --quick 3; dnn: calibration "
                   "CV folds, default 5)")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address")
    p.add_argument("--odir-grid", type=_floats, default=None,
                   help="dnn: comma-separated ODIR strengths (default: the paper's 6 values)")
    p.add_argument("--l2-grid", type=_floats, default=None,
                   help="dnn: comma-separated L2 strengths (default: 1e3 ... 1e-7)")
    p.add_argument("--selection", choices=["train_rows", "held_out"], default="train_rows",
                   help="uci: score hyperparameter candidates on the other inner calibration "
                   "sets (default) or on the classifier's training rows (the authors' code)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--report-only", action="store_true",
                   help="fit nothing; write results and tables from the cache")
    p.set_defaults(func=run_reproduce)
    return p


def run_reproduce(args: argparse.Namespace) -> int:
    """Call :func:`bayescal.experiments.reproduce` with parsed arguments."""
    from bayescal.experiments import reproduce

    df = reproduce(
        args.suite,
        data_dir=args.data_dir,
        out=args.out,
        quick=args.quick,
        jobs=args.jobs,
        progress=not args.no_progress,
        datasets=args.datasets,
        classifiers=args.classifiers,
        methods=args.methods,
        n_repeats=args.repeats,
        n_folds=args.folds,
        scheduler=args.scheduler,
        odir_grid=args.odir_grid,
        l2_grid=args.l2_grid,
        report_only=args.report_only,
        selection=args.selection,
    )
    print(f"{len(df)} result rows written to {args.out}")
    return 0
