"""The paper's experiments: ``reproduce("uci" | "dnn", ...)``.

Kull et al. (2019) compare calibrators on 21 UCI datasets x 11 classifiers
(section 4.1) and on deep networks (section 4.2). :func:`reproduce` runs
either suite with bayescal's estimators, caches every finished setting so a
killed run resumes, and writes CSV results and Markdown tables in the layout
of the paper's Tables 1-4 (see :mod:`bayescal.experiments.runner`).

Running on a Dask cluster
-------------------------
Work is dispatched with joblib, so any joblib backend applies. With
``dask.distributed`` installed (``pip install bayescal[dask]``)::

    from dask.distributed import Client
    import joblib
    client = Client("tcp://scheduler:8786")      # or Client() for a local cluster
    with joblib.parallel_backend("dask"):
        reproduce("uci", data_dir=..., out="results", jobs=-1)

or from the shell, ``bayescal reproduce --suite uci ... --scheduler tcp://scheduler:8786``.
Only the calling process writes files; workers need the Python packages but
no access to ``out`` (the UCI data are sent to them with each task).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bayescal.experiments.command import add_reproduce_parser

if TYPE_CHECKING:
    import pandas as pd

    from bayescal.experiments.runner import DNNConfig, UCIConfig

__all__ = ["DNNConfig", "UCIConfig", "add_reproduce_parser", "reproduce"]


def __getattr__(name: str) -> Any:
    # the runner imports pandas and joblib: only on first use
    if name in ("DNNConfig", "UCIConfig"):
        from bayescal.experiments import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'bayescal.experiments' has no attribute {name!r}")


def _check_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def reproduce(
    suite: str,
    *,
    data_dir: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    quick: bool = False,
    jobs: int = 1,
    progress: bool = True,
    datasets: Sequence[str] | None = None,
    classifiers: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    n_repeats: int | None = None,
    n_folds: int | None = None,
    scheduler: str | None = None,
    odir_grid: Sequence[float] | None = None,
    l2_grid: Sequence[float] | None = None,
    report_only: bool = False,
    selection: str = "train_rows",
) -> pd.DataFrame:
    """Run (or resume) one of the paper's experimental suites.

    Parameters
    ----------
    suite : {"uci", "dnn"}
        ``"uci"``: 21 datasets x 11 classifiers, outer ``n_repeats x n_folds``
        cross-validation (default 5 x 5), 3-fold inner cross-validation per
        calibrator (:mod:`bayescal.experiments.protocol`). ``"dnn"``: every
        ``.npz`` of deep-network outputs in ``data_dir`` (fit on ``idx_val``,
        score on ``idx_test``).
    data_dir : path-like or None
        ``uci``: directory of ``<name>.npz`` files (None: download into the
        cache of :func:`bayescal.datasets.load_uci`); ``dnn``: required.
    out : path-like
        Output directory (results CSV, tables, manifest, cache).
    quick : bool, default=False
        A small smoke run: ``uci`` on 3 datasets x 3 classifiers with 1 x 3
        folds, ``dnn`` on one CIFAR-10 network. Explicit ``datasets`` /
        ``classifiers`` / fold counts still win.
    jobs : int, default=1
        joblib ``n_jobs`` (-1: all cores / all Dask workers).
    progress : bool, default=True
        Show a tqdm progress bar.
    datasets, classifiers, methods : sequence of str, optional
        Subsets (``datasets`` names UCI datasets or DNN file stems).
    n_repeats, n_folds : int, optional
        Outer cross-validation of the ``uci`` suite (``n_folds`` is the
        calibration CV of the ``dnn`` suite, default 5): ``n_repeats >= 1``,
        ``n_folds >= 2``; None means the default (5 and 5; ``quick``: 1 and 3).
    scheduler : str, optional
        Address of a Dask scheduler to run on (needs ``dask.distributed``).
    odir_grid, l2_grid : sequence of float, optional
        ``dnn`` suite only: replace the paper's hyperparameter grids (ODIR:
        the axis of both strengths; L2: the strength), e.g. to budget the
        100-class networks. Results under other grids are cached separately.
    report_only : bool, default=False
        Fit nothing; write the results and tables from the cache.
    selection : {"train_rows", "held_out"}, default="train_rows"
        ``uci`` suite: rows on which hyperparameter candidates are compared
        (:func:`bayescal.experiments.protocol.inner_classifier_folds`): the
        rows the inner classifier was trained on, scored by that classifier
        (the authors' code, the default), or the other inner calibration sets,
        which another classifier scored.

    Returns
    -------
    DataFrame
        One row per (dataset, classifier, repeat, fold, method).
    """
    from bayescal._validation import check_option
    from bayescal.experiments.runner import (
        QUICK_CLASSIFIERS,
        QUICK_DATASETS,
        QUICK_DNN,
        DNNConfig,
        UCIConfig,
        run_dnn,
        run_uci,
    )

    check_option(suite, "suite", ("uci", "dnn"))
    if jobs != -1:
        _check_count(jobs, "jobs (-1: all cores)", 1)
    if suite == "uci":
        cfg = UCIConfig(
            datasets=tuple(datasets or (QUICK_DATASETS if quick else UCIConfig.datasets)),
            classifiers=tuple(classifiers or (QUICK_CLASSIFIERS if quick else
                                              UCIConfig.classifiers)),
            methods=tuple(methods or UCIConfig.methods),
            n_repeats=_check_count((1 if quick else 5) if n_repeats is None else n_repeats,
                                   "n_repeats", 1),
            n_folds=_check_count((3 if quick else 5) if n_folds is None else n_folds,
                                 "n_folds", 2),
            selection=check_option(selection, "selection", ("held_out", "train_rows")),
        )  # fmt: skip
        return run_uci(data_dir, out, cfg, jobs=jobs, progress=progress, scheduler=scheduler,
                       compute=not report_only)  # fmt: skip
    if data_dir is None:
        raise ValueError("the dnn suite needs data_dir (a directory of .npz network outputs)")
    cfg_dnn = DNNConfig(
        models=tuple(datasets) if datasets else (QUICK_DNN if quick else None),
        methods=tuple(methods or DNNConfig.methods),
        n_folds=_check_count(5 if n_folds is None else n_folds, "n_folds", 2),
        odir_grid=tuple(float(v) for v in odir_grid) if odir_grid else None,
        l2_grid=tuple(float(v) for v in l2_grid) if l2_grid else None,
    )
    return run_dnn(data_dir, out, cfg_dnn, jobs=jobs, progress=progress, scheduler=scheduler,
                   compute=not report_only)  # fmt: skip
