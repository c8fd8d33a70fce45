r"""The paper's evaluation protocols: nested cross-validation and cross-fitting.

Non-neural protocol (Kull et al. 2019, section 4.1)
---------------------------------------------------
The rows of a dataset are shuffled with the protocol seed and split by
``n_repeats`` times stratified ``n_folds``-fold cross-validation (the paper:
5 x 5; the authors' run script: 5 x 3). For every outer training part the
classifier and the calibrator are trained by 3-fold inner cross-validation
(:func:`inner_classifier_folds`): in inner fold ``i`` the classifier ``C_i``
is trained on two thirds of the rows and scores the remaining third ``S_i``
(the calibration set of map ``i``) and the outer test rows ``T_i``. Map ``i``
is fitted on ``S_i``; the reported prediction on the test rows is the mean of
the three maps' outputs ``mean_i map_i(T_i)`` (for the uncalibrated method,
the mean of the three classifiers' scores).

Hyperparameters (grids in :mod:`bayescal.experiments.calibrators`) are chosen
by inner log-loss, without a further level of nesting. Two choices of the rows
on which map ``i``'s candidates are scored (``selection``):

* ``"train_rows"`` (default; the authors' code): the rows classifier ``C_i``
  was trained on, scored by ``C_i``. They are in-sample for the classifier,
  so its scores there are over-confident, but they come from the classifier
  whose scores map ``i`` calibrates.
* ``"held_out"``: the other calibration sets ``S_j, j != i``. They are
  held out from classifier and map alike, but scored by *other* classifiers
  ``C_j``; for unstable learners (trees, kNN, forests) a map is then judged
  on score distributions it will never see, which favours strong
  regularisation. Measured on six UCI datasets x 8 classifiers (1 x 3 folds):
  Dir-L2's average p-cw-ECE rank among the paper's seven calibrators is 4.15
  with ``"held_out"`` and 2.92 with ``"train_rows"`` (log-loss rank 2.88 and
  1.92).

The candidate with the lowest pooled log-loss over the three maps wins, and
its three already fitted maps are averaged; no extra fits are needed.

Deep-network protocol (section 4.2)
-----------------------------------
The calibration rows (``idx_val``) are split by stratified 5-fold
cross-validation (:func:`holdout_folds`). Each candidate is fitted on four
fifths and scored on the held-out fifth; the candidate with the lowest pooled
held-out log-loss wins and its five fold maps are averaged on the test rows
(``idx_test``): "five calibration models are averaged" as in the paper.

Both protocols reduce to one routine, :func:`cross_fit`, over a list of
:class:`CalibrationFold`.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold

from bayescal.experiments.calibrators import Method
from bayescal.experiments.classifiers import class_scores
from bayescal.metrics import log_loss

__all__ = [
    "CalibrationFold",
    "CrossFitResult",
    "cross_fit",
    "holdout_folds",
    "inner_classifier_folds",
    "outer_splits",
    "shuffled",
]


@dataclass(frozen=True)
class CalibrationFold:
    """Data of one of the maps that :func:`cross_fit` averages.

    Attributes
    ----------
    fit_scores, fit_y : arrays
        Calibration set of this map.
    val_scores, val_y : arrays
        Held-out scores on which hyperparameter candidates are compared.
    test_scores : array
        Scores of the test rows (as produced by this fold's classifier).
    """

    fit_scores: NDArray[np.float64]
    fit_y: NDArray[np.intp]
    val_scores: NDArray[np.float64]
    val_y: NDArray[np.intp]
    test_scores: NDArray[np.float64]


@dataclass
class CrossFitResult:
    """Outcome of :func:`cross_fit` for one method."""

    proba: NDArray[np.float64] | None
    params: dict[str, Any]
    val_log_loss: float
    n_fits: int
    seconds: float
    n_convergence_warnings: int = 0
    errors: list[str] = field(default_factory=list)


def shuffled(
    X: NDArray[np.float64], y: NDArray[np.intp], seed: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Rows of ``(X, y)`` in a seeded random order (UCI files are sorted by class)."""
    perm = np.random.default_rng(seed).permutation(len(y))
    return X[perm], y[perm]


def outer_splits(
    y: NDArray[np.intp], *, n_repeats: int, n_folds: int, seed: int
) -> list[tuple[int, int, NDArray[np.intp], NDArray[np.intp]]]:
    """``(repeat, fold, train_idx, test_idx)`` of repeated stratified k-fold CV."""
    out = []
    for r in range(n_repeats):
        skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed + r)
        with warnings.catch_warnings():
            # a class with fewer rows than folds is legitimate here (shuttle)
            warnings.filterwarnings("ignore", message="The least populated class")
            for f, (tr, te) in enumerate(skf.split(np.zeros(len(y)), y)):
                out.append((r, f, tr, te))
    return out


def inner_classifier_folds(
    make_model: Callable[[], ClassifierMixin],
    X_train: NDArray[np.float64],
    y_train: NDArray[np.intp],
    X_test: NDArray[np.float64],
    *,
    n_classes: int,
    n_inner: int = 3,
    seed: int = 0,
    selection: str = "train_rows",
) -> tuple[list[CalibrationFold], float]:
    """Train ``n_inner`` classifiers and build the inner calibration folds.

    Returns the folds and the seconds spent training and scoring classifiers.
    The rows on which fold ``i``'s hyperparameter candidates are scored
    (``val``) are, with ``selection="train_rows"`` (the authors' code), the
    rows classifier ``i`` was trained on, scored by classifier ``i``; with
    ``selection="held_out"``, the calibration sets of the other folds.
    """
    if selection not in ("held_out", "train_rows"):
        raise ValueError(f"selection must be 'held_out' or 'train_rows'; got {selection!r}")
    t0 = time.perf_counter()
    skf = StratifiedKFold(n_splits=n_inner, shuffle=True, random_state=seed)
    parts = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class")
        splits = list(skf.split(np.zeros(len(y_train)), y_train))
    for tr, cal in splits:
        model = make_model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.filterwarnings("ignore", message="Variables are collinear")
            # SVC(probability=True) is deprecated in scikit-learn 1.9 (removal in
            # 1.11) but is what the paper used; see classifiers.py
            warnings.filterwarnings("ignore", message="The `probability` parameter")
            model.fit(X_train[tr], y_train[tr])
            s_cal = class_scores(model, X_train[cal], n_classes)
            s_test = class_scores(model, X_test, n_classes)
            s_tr = None
            if selection == "train_rows":
                s_tr = class_scores(model, X_train[tr], n_classes)
        parts.append((s_cal, y_train[cal], s_test, s_tr, y_train[tr]))
    folds = []
    for i, (s_cal, y_cal, s_test, s_tr, y_tr) in enumerate(parts):
        others = [p for j, p in enumerate(parts) if j != i]
        if selection == "train_rows":
            val_scores, val_y = s_tr, y_tr
        else:
            val_scores = np.vstack([p[0] for p in others])
            val_y = np.concatenate([p[1] for p in others])
        folds.append(
            CalibrationFold(
                fit_scores=s_cal, fit_y=y_cal, val_scores=val_scores, val_y=val_y,
                test_scores=s_test,
            )
        )  # fmt: skip
    return folds, time.perf_counter() - t0


def holdout_folds(
    scores: NDArray[np.float64],
    y: NDArray[np.intp],
    test_scores: NDArray[np.float64],
    *,
    n_folds: int = 5,
    seed: int = 0,
) -> list[CalibrationFold]:
    """Stratified ``n_folds`` split of one calibration set (deep-network protocol)."""
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class")
        splits = list(skf.split(np.zeros(len(y)), y))
    return [
        CalibrationFold(scores[tr], y[tr], scores[va], y[va], test_scores) for tr, va in splits
    ]


def _distinct_rows(
    scores: NDArray[np.float64], y: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64] | None]:
    """Distinct ``(score row, label)`` pairs and their counts.

    Returns ``(scores, y, None)`` unchanged when fewer than a tenth of the rows
    repeat (the weighted fit would save little).
    """
    rows, counts = np.unique(np.column_stack([scores, y]), axis=0, return_counts=True)
    if len(rows) > 0.9 * len(y):
        return scores, y, None
    return rows[:, :-1], rows[:, -1].astype(np.intp), counts.astype(float)


def cross_fit(method: Method, folds: list[CalibrationFold]) -> CrossFitResult:
    """Choose a hyperparameter by held-out log-loss and average the fold maps.

    For every candidate of ``method``'s grid, one map per fold is fitted on
    ``fit_scores``; the candidate's score is the log-loss of every map on its
    ``val_scores``, pooled over folds. The winner's maps are applied to their
    ``test_scores`` and averaged. A candidate whose fit raises is skipped and
    its error recorded; if every candidate fails, ``proba`` is None.
    """
    t0 = time.perf_counter()
    candidates = method.candidates()
    n_classes = folds[0].fit_scores.shape[1]
    errors: list[str] = []
    evidence_loss = float("nan")
    if method.select_by == "evidence" and len(candidates) > 1:
        # type-II maximum likelihood: compare the candidates' Laplace evidence
        # (mode and Hessian only), then fit and sample the winner alone
        losses = []
        n_rows = sum(len(f.fit_y) for f in folds)
        for params in candidates:
            try:
                ev = sum(method.build(params, n_classes).log_evidence(f.fit_scores, f.fit_y)
                         for f in folds)  # fmt: skip
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                errors.append(f"{params}: {type(exc).__name__}: {exc}")
                continue
            if np.isfinite(ev):
                losses.append((-ev / n_rows, params))
        if losses:
            evidence_loss, best_params = min(losses, key=lambda t: t[0])
            candidates = [best_params]
    best: tuple[float, dict[str, Any], list[Any]] | None = None
    previous: list[Any] = [None] * len(folds)
    fit_data = [
        _distinct_rows(f.fit_scores, f.fit_y) if method.compress else (f.fit_scores, f.fit_y, None)
        for f in folds
    ]
    n_fits = 0
    n_conv = 0
    for params in candidates:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                models = []
                for i, (fit_s, fit_y, fit_w) in enumerate(fit_data):
                    est = method.build(params, n_classes)
                    if method.warm_start and previous[i] is not None:
                        # sklearn's warm_start idiom: the previous candidate's fitted
                        # estimator, given this candidate's parameters, refits from its
                        # solution (a copy, so the kept candidates stay untouched)
                        est = copy.deepcopy(previous[i]).set_params(**est.get_params())
                    kw = {} if fit_w is None else {"sample_weight": fit_w}
                    models.append(est.fit(fit_s, fit_y, **kw))
                    n_fits += 1
            n_conv += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            previous = list(models)
            if len(candidates) > 1:
                total = sum(
                    log_loss(f.val_y, m.predict_proba(f.val_scores)) * len(f.val_y)
                    for m, f in zip(models, folds, strict=True)
                )
                loss = total / sum(len(f.val_y) for f in folds)
            else:
                loss = float("nan")
        except (
            ValueError, TypeError, RuntimeError, np.linalg.LinAlgError, FloatingPointError
        ) as exc:  # fmt: skip
            # TypeError: an estimator whose signature differs from the table's
            errors.append(f"{params}: {type(exc).__name__}: {exc}")
            continue
        if best is None or (np.isfinite(loss) and not loss >= best[0]):
            best = (loss, params, models)
    if best is None:
        return CrossFitResult(None, {}, float("nan"), n_fits, time.perf_counter() - t0, n_conv,
                              errors)
    loss, params, models = best
    if np.isfinite(evidence_loss):
        loss = evidence_loss  # minus the log evidence per calibration row
    proba = np.mean(
        [m.predict_proba(f.test_scores) for m, f in zip(models, folds, strict=True)], axis=0
    )
    return CrossFitResult(proba, params, loss, n_fits, time.perf_counter() - t0, n_conv, errors)
