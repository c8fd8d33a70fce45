"""The method table: which calibrators an experiment runs, and their grids.

A :class:`Method` names an estimator class by import path (so that a method
whose estimator has not been installed or written yet is reported as
*unavailable* with the import error, never silently dropped), its fixed
keyword arguments, and the grid of hyperparameters that the protocol chooses
from by held-out log-loss (:func:`bayescal.experiments.protocol.cross_fit`).

Grids (Kull et al. 2019 code, ``calib/models/calibration.py``):

* Dirichlet L2: ``reg_lambda`` in ``1e3, 1e2, ..., 1e-7`` (11 values);
* Dirichlet ODIR and MS-ODIR: ``reg_lambda`` and ``reg_mu`` each in
  ``1e3, 1e1, 1e-1, 1e-3, 1e-5, 1e-7`` (36 pairs);
* binning: ``n_bins`` in ``5, 10, ..., 30``.

bayescal's penalties are normalised as in the paper (ODIR:
``lam/(k(k-1))``, ``mu/k``; L2: ``lam/(k(k+1))``), see DESIGN.md section 3.

The generative fit (``dir_gen``, maximum likelihood) has no finite
estimate when every score of a class is an exact 0 in some column (trees,
boosting): such settings are recorded as errors. ``dir_gen_map`` adds the
estimator's documented pseudo-count prior (``prior=1.0``) and always fits.

The Bayesian method (``dir_bayes``) uses the Gaussian prior that corresponds
to the Dir-L2 penalty (centred at ``W = 0``), so its posterior mode is the
Dir-L2 fit and the only difference is the posterior averaging of the map
(Laplace approximation, 200 draws); its ``reg_lambda`` is chosen on the same
grid by the same held-out log-loss.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from bayescal._validation import check_labels, check_scores
from bayescal.calibrators.registry import ProbsToLogits

__all__ = [
    "DNN_METHODS",
    "L2_GRID",
    "Method",
    "ODIR_GRID",
    "PAPER_UCI_METHODS",
    "UCI_METHODS",
    "Uncalibrated",
    "method_table",
]

L2_GRID: tuple[float, ...] = tuple(10.0**e for e in range(3, -8, -1))
ODIR_GRID: tuple[float, ...] = (1e3, 1e1, 1e-1, 1e-3, 1e-5, 1e-7)
BIN_GRID: tuple[int, ...] = (5, 10, 15, 20, 25, 30)


class Uncalibrated(BaseEstimator):
    """The identity map: returns the (validated) scores unchanged."""

    def fit(self, scores: ArrayLike, y: ArrayLike) -> Uncalibrated:
        """Record the number of classes; nothing is learnt."""
        q = check_scores(scores, kind="probs")
        check_labels(y, n_samples=q.shape[0], n_classes=q.shape[1])
        self.n_features_in_ = q.shape[1]
        return self

    def predict_proba(self, scores: ArrayLike) -> NDArray[np.float64]:
        """The scores themselves (validated as probabilities)."""
        return check_scores(scores, kind="probs", n_classes=self.n_features_in_)


@dataclass(frozen=True)
class Method:
    """One calibrator of an experiment.

    Attributes
    ----------
    name : str
        Short identifier used in CSV files (``"dir_l2"``).
    label : str
        Column label in the tables (``"Dir-L2"``).
    target : str
        ``"module:Class"`` of the estimator.
    fixed : dict
        Keyword arguments passed to every instance.
    grid : tuple of dict
        Hyperparameter candidates; empty means one fit with ``fixed`` only.
    on_log_probs : bool
        Wrap the estimator in
        :class:`~bayescal.calibrators.registry.ProbsToLogits` (logit-only scalers).
    """

    name: str
    label: str
    target: str
    fixed: dict[str, Any] = field(default_factory=dict)
    grid: tuple[dict[str, Any], ...] = ()
    on_log_probs: bool = False

    def resolve(self) -> type:
        """Import the estimator class (raises ImportError/AttributeError if absent)."""
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)

    def availability(self) -> str | None:
        """None when the estimator can be imported, else the reason it cannot."""
        try:
            self.resolve()
        except (ImportError, AttributeError) as exc:
            return f"{self.target} unavailable: {exc}"
        return None

    def candidates(self) -> list[dict[str, Any]]:
        """The hyperparameter settings to try (at least one)."""
        return [dict(g) for g in self.grid] or [{}]

    def build(self, params: dict[str, Any]) -> Any:
        """A fresh estimator with ``fixed`` and ``params``."""
        est = self.resolve()(**self.fixed, **params)
        return ProbsToLogits(est) if self.on_log_probs else est

    def fingerprint(self) -> str:
        """Hash of everything that defines the method's results."""
        blob = json.dumps(
            {"target": self.target, "fixed": self.fixed, "grid": list(self.grid),
             "on_log_probs": self.on_log_probs},  # fmt: skip
            sort_keys=True,
            default=repr,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _grid(**axes: tuple[Any, ...]) -> tuple[dict[str, Any], ...]:
    """Cartesian product of named axes, in order (first axis slowest)."""
    out: list[dict[str, Any]] = [{}]
    for key, values in axes.items():
        out = [{**d, key: v} for d in out for v in values]
    return tuple(out)


_CAL = "bayescal.calibrators"


def method_table(
    *, odir_grid: tuple[float, ...] = ODIR_GRID, l2_grid: tuple[float, ...] = L2_GRID
) -> dict[str, Method]:
    """Every method bayescal's experiments know, by name.

    ``odir_grid`` is the axis of both ``reg_lambda`` and ``reg_mu`` of the
    ODIR methods; ``l2_grid`` the ``reg_lambda`` axis of the L2 methods.
    """
    return {
        m.name: m
        for m in (
            Method("uncal", "Uncal.", "bayescal.experiments.calibrators:Uncalibrated"),
            Method("temp", "Temp. scaling", f"{_CAL}:TemperatureScaler", on_log_probs=True),
            Method(
                "dir_l2", "Dir-L2", f"{_CAL}:DirichletCalibrator",
                {"reg": "l2"}, _grid(reg_lambda=l2_grid),
            ),
            Method(
                "dir_odir", "Dir-ODIR", f"{_CAL}:DirichletCalibrator",
                {"reg": "odir"}, _grid(reg_lambda=odir_grid, reg_mu=odir_grid),
            ),
            Method("beta", "Beta", f"{_CAL}.ovr:BetaCalibrator"),
            Method("isotonic", "Isotonic", f"{_CAL}.ovr:IsotonicCalibrator"),
            Method(
                "width_bin", "Width bin", f"{_CAL}.ovr:BinningCalibrator",
                {"strategy": "width"}, _grid(n_bins=BIN_GRID),
            ),
            Method(
                "freq_bin", "Freq. bin", f"{_CAL}.ovr:BinningCalibrator",
                {"strategy": "frequency"}, _grid(n_bins=BIN_GRID),
            ),
            Method("vector", "Vector scaling", f"{_CAL}:VectorScaler", on_log_probs=True),
            Method(
                "ms_odir", "MS-ODIR", f"{_CAL}:MatrixScaler",
                {"reg": "odir", "input": "probs"}, _grid(reg_lambda=odir_grid, reg_mu=odir_grid),
            ),
            Method("dir_gen", "Dir-Gen (ML)", f"{_CAL}:GenerativeDirichletCalibrator"),
            Method(
                "dir_gen_map", "Dir-Gen (prior 1)", f"{_CAL}:GenerativeDirichletCalibrator",
                {"prior": 1.0},
            ),
            Method(
                "dir_bayes", "Dir-Bayes (Laplace)", "bayescal.bayes:BayesianDirichletCalibrator",
                {"sampler": "laplace", "prior": "l2", "center": "zero", "draws": 200,
                 "chains": 1, "random_seed": 0},
                _grid(reg_lambda=l2_grid),
            ),
        )
    }  # fmt: skip


#: The seven calibrators of the paper's Tables 1 and 2, in their column order.
PAPER_UCI_METHODS: tuple[str, ...] = (
    "dir_l2", "beta", "freq_bin", "isotonic", "width_bin", "temp", "uncal",
)  # fmt: skip
#: Everything run on the UCI suite: the paper's seven plus bayescal's variants.
UCI_METHODS: tuple[str, ...] = (
    *PAPER_UCI_METHODS, "dir_odir", "dir_gen", "dir_gen_map", "dir_bayes",
)  # fmt: skip
#: The deep-network suite (the paper's Tables 3 and 4, plus bayescal's variants).
DNN_METHODS: tuple[str, ...] = (
    "uncal", "temp", "dir_l2", "dir_odir", "vector", "ms_odir", "dir_gen", "dir_bayes",
)  # fmt: skip
