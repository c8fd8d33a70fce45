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
``label``, else the last column); see :mod:`bayescal.score_files`. Model files
are :mod:`bayescal.model_files` JSON documents.

Exit status: 0 on success; 2 for every failure (unreadable or damaged file,
missing labels or label column, NaN or inf, labels that do not match the
score columns, wrong shapes, an invalid model file, existing output without
``--force``), with one line ``bayescal: error: ...`` on stderr naming the file
and the problem, no traceback (``BAYESCAL_DEBUG=1`` shows it), and no output
file written; 130 when interrupted. Temporary files are removed on failure,
``SIGTERM`` included; those of a killed process are removed by the next write
into their directory (:mod:`bayescal._files`).

The module imports only the standard library at start-up: ``bayescal --help``
and ``bayescal --version`` load no estimator, and the method list of
``bayescal fit --help`` is read from the registry only when shown.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main"]

class CLIError(ValueError):
    """A user error: reported on one line, exit status 2."""


def _method(name: str) -> str:
    """argparse ``type`` of ``--method``: a registry name (the registry is read only here)."""
    from bayescal.calibrators.registry import METHODS

    if name not in METHODS:
        raise argparse.ArgumentTypeError(
            f"unknown method {name!r}; choose from {', '.join(METHODS)}"
        )
    return name


def _info(message: str) -> None:
    """Progress for a person watching (stderr is a terminal); failures stay one line."""
    if sys.stderr.isatty():
        print(message, file=sys.stderr)


def _methods_text() -> str:
    from bayescal.calibrators.registry import METHODS

    width = max(len(n) for n in METHODS)
    return "\n".join(f"  {s.name:<{width}}  {s.summary}" for s in METHODS.values())


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' layout; fills ``{methods}`` from the registry when shown."""

    def format_help(self) -> str:
        text = super().format_help()
        return text.replace("{methods}", _methods_text()) if "{methods}" in text else text


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise CLIError(f"--param must look like NAME=VALUE; got {item!r}")
        if key == "input":
            raise CLIError("--param input=... is not a parameter here: use --input probs|logits")
        if key in params:
            raise CLIError(f"--param {key} given twice")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def _label_column(value: str | None) -> str | int | None:
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _parse_classes(value: str | None) -> list[str] | None:
    """``--classes a,b,c``: the label of each score column, in column order."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",")]
    if len(names) < 2 or not all(names):
        raise CLIError(f"--classes must list the class labels separated by commas, one per "
                       f"score column (e.g. --classes cat,dog,cow); got {value!r}")
    return names


def _model_classes(model: Any, given: list[str] | None, path: str) -> Any:
    """A model's ``classes_``; ``--classes``, if given, must name the same labels in order."""
    classes = model.classes_
    if given is not None and [str(c) for c in classes] != given:
        raise CLIError(f"--classes {','.join(given)} differs from the classes of {path}: "
                       f"{','.join(str(c) for c in classes)}")
    return classes


def _check_recordable_classes(classes: Any, labels: Any, path: str) -> None:
    """Refuse column classes that a model file cannot record yet.

    A fitted estimator takes the sorted distinct labels as its classes (the
    column codes ``0..k-1`` for integers with a class absent); another column
    order needs the estimator's ``classes`` parameter, which model files do
    not store yet, so fitting with it would save a model that reads the
    columns in another order.
    """
    from bayescal._validation import encode_labels

    try:
        inferred, _ = encode_labels(labels, n_samples=len(labels), n_classes=len(classes))
    except ValueError:
        inferred = None
    if inferred is not None and list(inferred) == list(classes):
        return
    shown = ",".join(str(c) for c in classes)
    recorded = ("the sorted labels " + ",".join(str(c) for c in inferred)
                if inferred is not None else "the sorted labels, and every class needs a label")
    raise CLIError(
        f"{path}: cannot fit with the classes {shown} (in column order): a model file records "
        f"{recorded}; put the score columns in that order, or name them in a CSV header"
    )


def _progress(iterable: Any, *, total: int | None = None, desc: str = "",
              enabled: bool = True) -> Any:
    """A tqdm progress bar on stderr (hidden when not a terminal or disabled)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency; stay usable without it
        return iterable
    return tqdm(iterable, total=total, desc=desc, disable=None if enabled else True,
                file=sys.stderr, leave=False)


def _method_label(model: Any) -> str:
    from bayescal.calibrators.registry import method_name

    try:
        return method_name(model)
    except ValueError:
        return type(model).__name__


def _describe_read(path: str, data: Any) -> str:
    n, k = data.shape if hasattr(data, "shape") else data.scores.shape
    parts = [f"read {n} rows x {k} {data.kind} from {path}"]
    if data.header is not None:
        parts.append("header " + ",".join(data.header))
    if data.label_source is not None and getattr(data, "y", None) is not None:
        parts.append(f"labels from {data.label_source}")
    parts.extend(data.notes)
    return "; ".join(parts)


# ---------------------------------------------------------------------------
# fit / apply / evaluate
# ---------------------------------------------------------------------------
def _fit(args: argparse.Namespace) -> int:
    from bayescal.calibrators.registry import METHODS, make_calibrator
    from bayescal.model_files import hash_training_data, posterior_path, save_model
    from bayescal.score_files import read_scores

    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise CLIError(f"model file must end in .json; got {out}")
    bayesian = METHODS[args.method].bayesian
    for target in [out] + ([posterior_path(out)] if bayesian else []):
        if target.exists() and not args.force:
            raise CLIError(f"{target} already exists (use --force to replace it)")
    params = _parse_params(args.param)
    data = read_scores(args.scores, input=args.input, labels=args.labels,
                       label_column=_label_column(args.label_column), need_labels=True,
                       header=args.header, classes=_parse_classes(args.classes))
    est = make_calibrator(args.method, input=data.kind, **params)
    labels = data.classes[data.y]
    _check_recordable_classes(data.classes, labels, args.scores)
    _info(f"fitting {args.method} on {data.scores.shape[0]} samples, "
          f"{data.scores.shape[1]} classes ({data.kind})")
    try:
        est.fit(data.scores, labels)
    except (ValueError, ArithmeticError, RuntimeError) as exc:
        raise CLIError(f"{args.scores}: cannot fit {args.method}: {exc}") from None
    save_model(est, out, training_hash=hash_training_data(data.scores, data.y),
               overwrite=args.force)
    print(_describe_read(args.scores, data))
    print(f"wrote {out}" + (f" and {posterior_path(out)}" if bayesian else ""))
    return 0


def _load(path: str) -> Any:
    from bayescal.model_files import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        return load_model(path)


def _apply(args: argparse.Namespace) -> int:
    from bayescal.score_files import apply_scores

    out = Path(args.output)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise CLIError(f"output must end in .npz or .csv; got {out}")
    if out.exists() and not args.force:
        raise CLIError(f"{out} already exists (use --force to replace it)")
    model = _load(args.model)

    def predict(scores: Any) -> Any:
        try:
            return model.predict_proba(scores)
        except (ValueError, ArithmeticError) as exc:
            raise CLIError(f"{args.scores}: cannot apply {args.model}: {exc}") from None

    # read, calibrated and written in chunks of rows (score_files.CHUNK_ROWS;
    # BAYESCAL_CHUNK_ROWS overrides it, for tests): memory is bounded by a chunk
    chunk_rows = os.environ.get("BAYESCAL_CHUNK_ROWS")
    done = apply_scores(args.scores, out, predict, input=getattr(model, "input", "probs"),
                        label_column=_label_column(args.label_column),
                        n_classes=model.n_features_in_, header=args.header,
                        classes=model.classes_,
                        column_names=getattr(model, "feature_names_in_", None),
                        overwrite=args.force,
                        chunk_rows=int(chunk_rows) if chunk_rows else None)
    print(_describe_read(args.scores, done))
    print(f"wrote {out} ({done.shape[0]} rows, row i calibrates row i of {args.scores})")
    return 0


def _posterior_diagnostics(model: Any) -> str:
    """One line on a Bayesian model's posterior checks ("" for a point estimate)."""
    d = getattr(model, "diagnostics_", None)
    if d is None:
        return ""
    sampler = getattr(model, "sampler_", "?")
    if d.get("approximate"):
        return (f"Posterior: sampler {sampler}, an approximation with no convergence check "
                "(its measured coverage is in the user guide).")
    verdict = "passed" if d["passed"] else "FAILED: " + "; ".join(d["problems"])
    return (f"Posterior: sampler {sampler}, {d['n_chains']} chains x {d['n_draws']} draws; "
            f"max R-hat {d['r_hat_max']:.4f} (<= {d['rhat_threshold']:g}), min bulk / tail "
            f"ESS {d['ess_bulk_min']:.0f} / {d['ess_tail_min']:.0f} (>= "
            f"{d['ess_threshold']:g}), {d['divergences']} divergences (<= "
            f"{d['divergence_threshold']}): {verdict}.")


def _evaluate(args: argparse.Namespace) -> int:
    from bayescal.maps import softmax
    from bayescal.report import Report
    from bayescal.score_files import check_output_probs, read_scores

    model = _load(args.model) if args.model else None
    model_input = getattr(model, "input", "probs") if model is not None else None
    kind = args.input if args.input is not None else model_input
    classes = _parse_classes(args.classes)
    if model is not None:
        classes = _model_classes(model, classes, args.model)
    data = read_scores(args.scores, input=kind, labels=args.labels,
                       label_column=_label_column(args.label_column), need_labels=True,
                       n_classes=model.n_features_in_ if model is not None else None,
                       header=args.header, classes=classes,
                       column_names=getattr(model, "feature_names_in_", None))
    if model is not None and data.kind != model_input:
        raise CLIError(f"{args.model} was fitted on {model_input} but {args.scores} holds "
                       f"{data.kind}")
    before = softmax(data.scores) if data.kind == "logits" else data.scores
    report = Report(title=f"bayescal evaluation of {Path(args.scores).name}", keys=["scores"])
    report.notes.append(f"{data.scores.shape[0]} samples, {data.scores.shape[1]} classes.")
    report.add(data.y, before, image="reliability_uncalibrated.png", scores="uncalibrated")
    if model is not None:
        name = _method_label(model)
        report.notes.append(f"Model: {args.model} (method {name}).")
        try:
            proba = model.predict_proba(data.scores)
        except (ValueError, ArithmeticError) as exc:
            raise CLIError(f"{args.scores}: cannot apply {args.model}: {exc}") from None
        proba = check_output_probs(proba, n_rows=data.scores.shape[0],
                                   where=f"{args.model} applied to {args.scores}")
        report.add(data.y, proba, image="reliability_calibrated.png",
                   scores=f"calibrated ({name})", calibrator=model)
        diagnostics = _posterior_diagnostics(model)
        if diagnostics:
            report.notes.append(diagnostics)
            print(diagnostics)
    path = report.write(args.report, overwrite=args.force)
    print(_describe_read(args.scores, data))
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

    # The Bayesian methods sample with NUTS at their defaults (measured on 2 cores
    # with the compiled sampler: bayes 14-66 s a fit on this data, k = 10 and 449
    # rows, bayes-generative 2 s), so the demo runs them only when asked for by
    # --methods.
    methods = args.methods or [name for name, spec in METHODS.items() if not spec.bayesian]
    skipped = [name for name, spec in METHODS.items() if spec.bayesian and name not in methods]
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
        "metrics are on the test split. Every method runs with the defaults a user gets."
    )
    if skipped:
        report.notes.append(
            f"Not run: {', '.join(skipped)} (Bayesian: NUTS sampling at the defaults takes "
            "seconds to a minute per fit here; add them with --methods)."
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
            est = make_calibrator(method)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                est.fit(p_cal, y_cal)
            p = est.predict_proba(p_te)
        except (ImportError, ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            problems.append(f"{clf_name} / {method} not run: {type(exc).__name__}: {exc}")
            continue
        report.add(y_te, p, classifier=clf_name, method=method, calibrator=est)
    report.notes.extend(problems)
    print(report.table())
    for line in problems:
        print(f"note: {line}", file=sys.stderr)
    path = report.write(args.report, overwrite=True)
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------
_EXAMPLES = {
    "main": """\
examples:
  bayescal demo                                  # try every method on sklearn's digits
  bayescal fit val.npz --method dirichlet-l2 -o model.json
  bayescal apply model.json test.csv -o calibrated.csv
  bayescal evaluate test.npz --model model.json --report report/
  bayescal fit --help                            # the methods and their options

Score files: .npz (arrays 'probs' or 'logits', and 'y'), .npy (scores; labels
with --labels) or .csv (score columns plus a label column). Every failure
exits with status 2 and one line naming the file and the problem.
""",
    "fit": """\
methods:
{methods}

examples:
  bayescal fit val.npz -o model.json          # the recommended default: --method dirichlet
  bayescal fit val.npz --method temperature -o temp.json
  bayescal fit val.csv --label-column target --method dirichlet-l2 -o model.json
  bayescal fit logits.npy --input logits --labels y.npy --method vector -o vec.json
  bayescal fit val.npz --method dirichlet-odir --param reg_lambda=0.01 --param reg_mu=0.01 \\
      -o odir.json
  bayescal fit val.npz --method bayes --param sampler=nutpie -o bayes.json   # + bayes.nc

The model file is JSON (its format: "The command line" in the bayescal
documentation); a Bayesian method also writes its posterior as netCDF beside
it (bayes.nc for bayes.json).
""",
    "apply": """\
examples:
  bayescal apply model.json test.npz -o calibrated.npz
  bayescal apply model.json test.csv -o calibrated.csv
  bayescal apply model.json test.csv --no-header -o calibrated.csv

Row i of the output calibrates row i of SCORES; a label column, if any, is
ignored (use --label-column to say which column it is).
""",
    "evaluate": """\
examples:
  bayescal evaluate test.npz --report report/
  bayescal evaluate test.npz --model model.json --report report/
  bayescal evaluate test.npy --labels y.npy --model model.json --report report/ --force

The report directory gets report.html (self-contained), metrics.csv and the
reliability diagrams as PNG.
""",
    "demo": """\
examples:
  bayescal demo
  bayescal demo --methods temperature dirichlet-l2 --report demo-report
  bayescal demo --methods dirichlet bayes           # the Bayesian fit at its defaults (NUTS)
""",
}


def _version() -> str:
    from bayescal import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``bayescal`` command (imports no estimator)."""
    parser = argparse.ArgumentParser(
        prog="bayescal",
        description="Calibrate the probabilities of multiclass classifiers (Dirichlet "
                    "calibration: exact, fast and Bayesian).",
        epilog=_EXAMPLES["main"],
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def scores_options(p: argparse.ArgumentParser, *, labels: bool = True,
                       input: bool = True) -> None:
        p.add_argument("scores", metavar="SCORES", help="score file (.npz, .npy or .csv)")
        if input:
            p.add_argument("--input", choices=("probs", "logits"), default=None,
                           help="what the scores hold (default: the .npz array name, else probs)")
        if labels:
            p.add_argument("--labels", metavar="FILE",
                           help="label file (.npy, or text with one label per line)")
            p.add_argument("--classes", metavar="A,B,...",
                           help="the label of each score column, in column order (default: "
                                "integer labels are the column numbers 0..k-1; text labels "
                                "are the classes in sorted order; a model's own classes)")
        p.add_argument("--label-column", metavar="NAME|INDEX",
                       help="CSV label column by header name or 0-based index "
                            "(default: column 'y' or 'label', else the last column"
                            + (")" if labels else " when it holds integer labels and the "
                               "file has one column more than the model has classes)"))
        p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                       help="CSV: the first line is (--header) or is not (--no-header) a header "
                            "(default: decided from the line; an ambiguous line is refused)")
        p.add_argument("--force", action="store_true", help="replace existing output files")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description,
                              epilog=_EXAMPLES[name], formatter_class=_Formatter)

    fit = command("fit", "fit a calibrator and save it as JSON",
                  "Fit a calibrator on held-out scores and labels and save it as a model file.")
    scores_options(fit)
    fit.add_argument("--method", default="dirichlet", type=_method, metavar="METHOD",
                     help="calibration method (listed below; default: dirichlet, the "
                          "recommended one)")
    fit.add_argument("--param", action="append", metavar="NAME=VALUE",
                     help="estimator parameter (JSON value), e.g. --param reg_lambda=0.01")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL.json",
                     help="model file to write")
    fit.set_defaults(func=_fit)

    apply = command("apply", "calibrate scores with a saved model",
                    "Calibrate scores with a model file written by 'bayescal fit'.")
    apply.add_argument("model", metavar="MODEL.json")
    scores_options(apply, labels=False, input=False)
    apply.add_argument("-o", "--output", required=True, metavar="OUT",
                       help="calibrated probabilities (.npz with array 'probs', or .csv)")
    apply.set_defaults(func=_apply)

    ev = command("evaluate", "metrics and reliability diagrams, before and after",
                 "Score probabilities (and a model's calibration of them) against labels.")
    scores_options(ev)
    ev.add_argument("--model", metavar="MODEL.json", help="calibrator to evaluate")
    ev.add_argument("--report", required=True, metavar="DIR",
                    help="directory for report.html, metrics.csv and the PNG diagrams")
    ev.set_defaults(func=_evaluate)

    demo = command("demo", "calibrate scikit-learn classifiers on the digits data",
                   "Train three classifiers on scikit-learn's digits, calibrate their "
                   "held-out probabilities with every method and write a report.")
    demo.add_argument("--report", default="bayescal-demo-report", metavar="DIR",
                      help="report directory, replaced files included (default: %(default)s)")
    demo.add_argument("--methods", nargs="+", type=_method, metavar="METHOD",
                      help="methods to run (default: every non-Bayesian method; listed by "
                           "'bayescal fit --help')")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    demo.set_defaults(func=_demo)

    from bayescal.experiments.command import add_reproduce_parser

    add_reproduce_parser(sub)
    return parser


def _one_line_warnings(message: Any, category: type, filename: str, lineno: int,
                       file: Any = None, line: Any = None) -> None:
    text = " ".join(str(message).split())
    print(f"bayescal: warning: {category.__name__}: {text}", file=sys.stderr)


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds, so temporary files are removed


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayescal`` console script; returns the exit status."""
    import signal

    parser = build_parser()
    args = parser.parse_args(argv)
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: leave SIGTERM alone
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("BAYESCAL_DEBUG"):
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        if not isinstance(exc, ValueError | OSError | ImportError | RuntimeError):
            message = (f"{type(exc).__name__}: {message} (unexpected; BAYESCAL_DEBUG=1 shows "
                       "the traceback)")
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
