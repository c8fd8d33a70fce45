"""The ``bayescal`` command line: a thin layer over the library.

Subcommands::

    bayescal fit SCORES --method NAME [--input probs|logits] [--labels FILE] -o model.json
    bayescal apply model.json SCORES -o calibrated.npz|.csv
    bayescal evaluate SCORES [--labels FILE] [--model model.json] --report DIR
    bayescal demo [--report DIR]
    bayescal reproduce --suite uci|dnn --out DIR [...]

Score files are ``.npz`` (arrays ``probs`` or ``logits``, and ``y``), ``.npy``
(scores; labels from ``--labels``) or ``.csv`` (one column per class plus a
label column: ``--label-column NAME|INDEX``, else a header column ``y`` or
``label``, else the last column); see :mod:`bayescal.io`.

Exit status: 0 on success; 2 for bad input (unreadable file, missing labels or
label column, NaN or inf, labels that do not match the score columns, wrong
shapes, existing output without ``--force``), with a one-line message
``bayescal: error: ...`` on stderr and no output file written.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main"]

#: Settings of the Bayesian methods in ``bayescal demo``: the Laplace
#: approximation keeps them fast. The linear model uses the L2 prior centred at
#: the identity map: with ODIR's flat prior on the diagonal, near-separable
#: calibration sets (digits) leave the diagonal of W almost unconstrained and
#: the posterior-averaged map degenerates.
DEMO_FAST_PARAMS: dict[str, dict[str, Any]] = {
    "bayes": {"sampler": "laplace", "prior": "l2", "reg_lambda": 10.0, "random_seed": 0},
    "bayes-generative": {"sampler": "laplace", "random_seed": 0},
}


class CLIError(ValueError):
    """A user error: reported on one line, exit status 2."""


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise CLIError(f"--param must look like NAME=VALUE; got {item!r}")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def _label_column(value: str | None) -> str | int | None:
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _progress(iterable: Any, *, total: int | None = None, desc: str = "",
              enabled: bool = True) -> Any:
    """A tqdm progress bar on stderr (hidden when not a terminal or disabled)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency; stay usable without it
        return iterable
    return tqdm(iterable, total=total, desc=desc, disable=None if enabled else True,
                file=sys.stderr, leave=False)


# ---------------------------------------------------------------------------
# fit / apply / evaluate
# ---------------------------------------------------------------------------
def _fit(args: argparse.Namespace) -> int:
    from bayescal.calibrators.registry import METHODS, make_calibrator
    from bayescal.io import hash_training_data, posterior_path, read_scores, save_model

    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise CLIError(f"model file must end in .json; got {out}")
    for target in [out] + ([posterior_path(out)] if METHODS[args.method].bayesian else []):
        if target.exists() and not args.force:
            raise CLIError(f"{target} already exists (use --force to replace it)")
    data = read_scores(args.scores, input=args.input, labels=args.labels,
                       label_column=_label_column(args.label_column), need_labels=True)
    est = make_calibrator(args.method, input=data.kind, **_parse_params(args.param))
    print(f"fitting {args.method} on {data.scores.shape[0]} samples, "
          f"{data.scores.shape[1]} classes ({data.kind})", file=sys.stderr)
    est.fit(data.scores, data.y)
    save_model(est, out, training_hash=hash_training_data(data.scores, data.y),
               overwrite=args.force)
    print(f"wrote {out}" + (f" and {posterior_path(out)}" if METHODS[args.method].bayesian else ""))
    return 0


def _load(path: str) -> Any:
    from bayescal.io import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        return load_model(path)


def _apply(args: argparse.Namespace) -> int:
    from bayescal.io import read_scores, write_scores

    out = Path(args.output)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise CLIError(f"output must end in .npz or .csv; got {out}")
    if out.exists() and not args.force:
        raise CLIError(f"{out} already exists (use --force to replace it)")
    model = _load(args.model)
    data = read_scores(args.scores, input=model.input,
                       label_column=_label_column(args.label_column),
                       n_classes=model.n_features_in_)
    write_scores(out, model.predict_proba(data.scores), overwrite=args.force)
    print(f"wrote {out} ({data.scores.shape[0]} rows)")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from bayescal.io import read_scores
    from bayescal.maps import softmax
    from bayescal.report import Report

    model = _load(args.model) if args.model else None
    kind = args.input if args.input is not None else (model.input if model is not None else None)
    data = read_scores(args.scores, input=kind, labels=args.labels,
                       label_column=_label_column(args.label_column), need_labels=True,
                       n_classes=model.n_features_in_ if model is not None else None)
    if model is not None and data.kind != model.input:
        raise CLIError(f"the model was fitted on {model.input} but {args.scores} holds {data.kind}")
    before = softmax(data.scores) if data.kind == "logits" else data.scores
    report = Report(title=f"bayescal evaluation of {Path(args.scores).name}", keys=["scores"])
    report.notes.append(f"{data.scores.shape[0]} samples, {data.scores.shape[1]} classes.")
    report.add(data.y, before, image="reliability_uncalibrated.png", scores="uncalibrated")
    if model is not None:
        from bayescal.calibrators.registry import method_name

        name = method_name(model)
        report.notes.append(f"Model: {args.model} (method {name}).")
        report.add(data.y, model.predict_proba(data.scores), image="reliability_calibrated.png",
                   scores=f"calibrated ({name})")
    path = report.write(args.report, overwrite=args.force)
    print(report.table())
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------
def _demo_classifiers(seed: int) -> dict[str, Any]:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {
        "naive Bayes": GaussianNB(),
        "random forest": RandomForestClassifier(n_estimators=100, random_state=seed),
        "logistic regression": make_pipeline(StandardScaler(), LogisticRegression(C=10.0,
                                                                                  max_iter=2000)),
    }


def _demo(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from bayescal.calibrators.registry import METHODS, make_calibrator
    from bayescal.report import Report

    methods = args.methods or list(METHODS)
    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=0.5, stratify=y,
                                                  random_state=args.seed)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5, stratify=y_rest,
                                                random_state=args.seed)
    report = Report(title="bayescal demo: calibrating classifiers on scikit-learn's digits",
                    keys=["classifier", "method"])
    report.notes.append(
        f"Digits (10 classes): {len(y_tr)} training, {len(y_cal)} calibration and "
        f"{len(y_te)} test images. Each classifier is trained on the training split; each "
        "calibrator is fitted on the classifier's probabilities for the calibration split; "
        "metrics are on the test split. Bayesian methods use a Laplace approximation here "
        "(bayes: L2 prior centred at the identity, reg_lambda=10); every other method runs "
        "with its defaults."
    )
    classifiers = _demo_classifiers(args.seed)
    jobs = [(c, m) for c in classifiers for m in methods]
    bar = _progress(jobs, total=len(jobs), desc="calibrating", enabled=not args.no_progress)
    probs: dict[str, tuple[Any, Any]] = {}
    problems: list[str] = []
    for clf_name, method in bar:
        if clf_name not in probs:
            clf = classifiers[clf_name].fit(X_tr, y_tr)
            p_cal, p_te = clf.predict_proba(X_cal), clf.predict_proba(X_te)
            probs[clf_name] = (p_cal, p_te)
            report.add(y_te, p_te, image=f"{clf_name} - uncalibrated.png".replace(" ", "_"),
                       classifier=clf_name, method="uncalibrated")
        p_cal, p_te = probs[clf_name]
        try:
            est = make_calibrator(method, **DEMO_FAST_PARAMS.get(method, {}))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                est.fit(p_cal, y_cal)
            p = est.predict_proba(p_te)
        except (ImportError, ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            problems.append(f"{clf_name} / {method} not run: {type(exc).__name__}: {exc}")
            continue
        image = None
        if method == "dirichlet-odir":
            image = f"{clf_name} - {method}.png".replace(" ", "_")
        report.add(y_te, p, image=image, classifier=clf_name, method=method)
    report.notes.extend(problems)
    print(report.table())
    for line in problems:
        print(f"note: {line}", file=sys.stderr)
    path = report.write(args.report, overwrite=True)
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------------------
# reproduce
# ---------------------------------------------------------------------------
def _reproduce(args: argparse.Namespace) -> int:
    try:
        from bayescal.experiments import reproduce
    except ImportError as exc:
        raise CLIError(f"the experiments module is not available: {exc}") from exc
    reproduce(args.suite, data_dir=args.data_dir, out=args.out, quick=args.quick,
              jobs=args.jobs, progress=not args.no_progress)
    return 0


def _add_reproduce(sub: Any) -> None:
    """``bayescal reproduce``: the parser of :mod:`bayescal.experiments.command`.

    Falls back to a parser with the same core options when the experiments
    module cannot be imported (it needs the optional pandas), so that
    ``bayescal reproduce`` then fails with a clear message.
    """
    try:
        from bayescal.experiments.command import add_reproduce_parser
    except ImportError:
        add_reproduce_parser = None
    if add_reproduce_parser is not None:
        add_reproduce_parser(sub)
        return
    p = sub.add_parser("reproduce", help="rerun the Dirichlet calibration paper's experiments",
                       description="Run an experiment suite of bayescal.experiments.")
    p.add_argument("--suite", required=True, help="experiment suite (uci or dnn)")
    p.add_argument("--data-dir", default=None, help="directory of .npz data files")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--quick", action="store_true", help="small smoke run")
    p.add_argument("--jobs", type=int, default=1, help="parallel jobs (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_reproduce)


# ---------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``bayescal`` command."""
    from bayescal.calibrators.registry import METHODS

    parser = argparse.ArgumentParser(
        prog="bayescal",
        description="Calibrate the probabilities of multiclass classifiers (Dirichlet "
                    "calibration: exact, fast and Bayesian).",
        epilog="Score files: .npz (arrays 'probs' or 'logits', and 'y'), .npy (scores; "
               "labels with --labels) or .csv (score columns plus a label column).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    methods = "; ".join(f"{s.name}: {s.summary}" for s in METHODS.values())

    def scores_options(p: argparse.ArgumentParser, *, labels: bool = True,
                       input: bool = True) -> None:
        p.add_argument("scores", metavar="SCORES", help="score file (.npz, .npy or .csv)")
        if input:
            p.add_argument("--input", choices=("probs", "logits"), default=None,
                           help="what the scores hold (default: the .npz array name, else probs)")
        if labels:
            p.add_argument("--labels", metavar="FILE",
                           help="label file (.npy, or text with one integer per line)")
        p.add_argument("--label-column", metavar="NAME|INDEX",
                       help="CSV label column by header name or 0-based index "
                            "(default: column 'y' or 'label', else the last column)")
        p.add_argument("--force", action="store_true", help="replace existing output files")

    fit = sub.add_parser("fit", help="fit a calibrator and save it as JSON",
                         description=f"Fit a calibrator. Methods: {methods}.")
    scores_options(fit)
    fit.add_argument("--method", required=True, choices=list(METHODS), metavar="METHOD",
                     help=f"one of: {', '.join(METHODS)}")
    fit.add_argument("--param", action="append", metavar="NAME=VALUE",
                     help="estimator parameter (JSON value), e.g. --param reg_lambda=0.01")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL.json",
                     help="model file to write")
    fit.set_defaults(func=_fit)

    apply = sub.add_parser("apply", help="calibrate scores with a saved model")
    apply.add_argument("model", metavar="MODEL.json")
    scores_options(apply, labels=False, input=False)
    apply.add_argument("-o", "--output", required=True, metavar="OUT",
                       help="calibrated probabilities (.npz with array 'probs', or .csv)")
    apply.set_defaults(func=_apply)

    ev = sub.add_parser("evaluate", help="metrics and reliability diagrams, before and after")
    scores_options(ev)
    ev.add_argument("--model", metavar="MODEL.json", help="calibrator to evaluate")
    ev.add_argument("--report", required=True, metavar="DIR",
                    help="directory for report.html, metrics.csv and the PNG diagrams")
    ev.set_defaults(func=_evaluate)

    demo = sub.add_parser("demo", help="calibrate scikit-learn classifiers on the digits data")
    demo.add_argument("--report", default="bayescal-demo-report", metavar="DIR",
                      help="report directory, replaced files included (default: %(default)s)")
    demo.add_argument("--methods", nargs="+", choices=list(METHODS), metavar="METHOD",
                      help="methods to run (default: all)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    demo.set_defaults(func=_demo)

    _add_reproduce(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayescal`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError, ImportError) as exc:
        message = " ".join(str(exc).split())
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
