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

Penalty units. bayescal's estimators normalise their penalties as the
paper's formula does (ODIR: ``lam/(k(k-1))``, ``mu/k``; L2: ``lam/(k(k+1))``,
DESIGN.md section 3). The authors' experiments called the dirichletcal
library with its default ``reg_norm=False``, which multiplies the plain sums
of squares by ``lam`` and ``mu``. A grid value of the paper's code is
therefore ``k(k+1)`` (L2), ``k(k-1)`` and ``k`` (ODIR) times stronger than the
same number in bayescal's units: on a 15-class dataset the paper's strongest
L2 value, ``1e3``, is ``2.4e5`` in bayescal's units. The paper's methods
therefore declare ``penalty_units="paper"``: their grids are written in the
paper code's units, reported in those units in the results, and converted
for the number of classes of the data when the estimator is built
(:func:`paper_to_bayescal_units`). With the grid copied in bayescal's own
units, the strong end of the L2 grid was the one picked in 14 of 24
libras-movement settings, i.e. the grid was cut short.

The generative fit (``dir_gen``, maximum likelihood) has no finite
estimate when every score of a class is an exact 0 in some column (trees,
boosting): such settings are recorded as errors. ``dir_gen_map`` adds the
estimator's documented pseudo-count prior (``prior=1.0``) and always fits.

The Bayesian method (``dir_bayes``) uses the Gaussian prior that corresponds
to the Dir-L2 penalty (centred at ``W = 0``), so its posterior mode at a given
strength is the Dir-L2 fit; its predictions average the map over the Laplace
posterior (200 draws). Its prior scale ``reg_lambda`` (same grid) is chosen
the Bayesian way, by the Laplace estimate of the marginal likelihood of each
inner calibration set (``select_by="evidence"``, type-II maximum likelihood),
not by log-loss: the log-loss criterion of the paper's protocol picks weak
priors (small lambdas), under which the Laplace posterior of a small
calibration set is so wide that its averaged map is worse than its mode
(measured on the six smallest datasets x 11 classifiers, 5 x 3 folds: mean
log-loss 0.56 against Dir-L2's 0.14 on iris, 1.10 against 0.32 on
dermatology).
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
    "paper_to_bayescal_units",
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
    penalty_units : {"bayescal", "paper"}
        Units of ``reg_lambda``/``reg_mu`` in ``grid``: bayescal's normalised
        penalties, or the paper code's unnormalised ones (module docstring),
        converted by :func:`paper_to_bayescal_units` in :meth:`build`.
    warm_start : bool
        The estimator has a ``warm_start`` parameter: the protocol refits one
        estimator per fold along the grid, each fit starting from the previous
        candidate's solution (same optimum, fewer Newton steps).
    select_by : {"log_loss", "evidence"}
        How candidates are compared: pooled log-loss on the folds' ``val``
        rows, or (Bayesian methods) the Laplace log evidence of each fold's
        calibration labels (the estimator's ``log_evidence(scores, y)``),
        summed over folds (type-II maximum likelihood; no held-out rows are
        used); only the winner is then fitted and sampled.
    compress : bool
        The estimator's ``fit`` takes ``sample_weight`` and its objective is a
        weighted mean over rows: the protocol fits each distinct
        (score row, label) pair once, weighted by its count. The objective is
        the same, so is the fit (to the solver's tolerance); trees, forests,
        boosting and kNN repeat few score vectors (15,467 calibration rows of
        ``shuttle`` hold 97 distinct pairs under the random forest).
    """

    name: str
    label: str
    target: str
    fixed: dict[str, Any] = field(default_factory=dict)
    grid: tuple[dict[str, Any], ...] = ()
    on_log_probs: bool = False
    penalty_units: str = "bayescal"
    warm_start: bool = False
    compress: bool = False
    select_by: str = "log_loss"

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

    def build(self, params: dict[str, Any], n_classes: int | None = None) -> Any:
        """A fresh estimator with ``fixed`` and ``params``.

        ``n_classes`` is needed (and used) only with ``penalty_units="paper"``.
        """
        kwargs = {**self.fixed, **params}
        if self.penalty_units == "paper":
            if n_classes is None:
                raise ValueError(f"method {self.name!r} has paper penalty units: pass n_classes")
            reg = kwargs.get("reg", kwargs.get("prior"))
            kwargs.update(paper_to_bayescal_units(
                reg, n_classes, kwargs.get("reg_lambda"), kwargs.get("reg_mu")))  # fmt: skip
        if self.warm_start:
            kwargs["warm_start"] = True
        est = self.resolve()(**kwargs)
        return ProbsToLogits(est) if self.on_log_probs else est

    def fingerprint(self) -> str:
        """Hash of everything that defines the method's results."""
        spec = {"target": self.target, "fixed": self.fixed, "grid": list(self.grid),
                "on_log_probs": self.on_log_probs}  # fmt: skip
        # fields added later enter only when they differ from their default, so
        # earlier caches stay valid (warm_start changes no result, only speed)
        if self.penalty_units != "bayescal":
            spec["penalty_units"] = self.penalty_units
        if self.select_by != "log_loss":
            spec["select_by"] = self.select_by
        blob = json.dumps(spec, sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def paper_to_bayescal_units(
    reg: str | None, n_classes: int, reg_lambda: float | None, reg_mu: float | None
) -> dict[str, float]:
    """Convert the paper code's penalty strengths to bayescal's normalised ones.

    The code of Kull et al. (2019) penalises ``lam * sum(W**2 + b**2)`` (L2)
    and ``lam * sum_{i != j} W_ij**2 + mu * sum(b**2)`` (ODIR); bayescal's
    :func:`~bayescal.optimize.make_penalty` divides ``lam`` by ``k(k+1)``
    (L2) or ``k(k-1)`` and ``mu`` by ``k`` (ODIR), so the same penalty has
    ``lam' = k(k+1) lam`` (L2), ``lam' = k(k-1) lam``, ``mu' = k mu`` (ODIR).

    Returns
    -------
    dict
        The converted ``reg_lambda`` (and ``reg_mu`` for ODIR); entries that
        are None are left out.

    Examples
    --------
    >>> paper_to_bayescal_units("l2", 3, 1e-3, None)
    {'reg_lambda': 0.012}
    >>> paper_to_bayescal_units("odir", 4, 1.0, 0.5)
    {'reg_lambda': 12.0, 'reg_mu': 2.0}
    """
    k = int(n_classes)
    if reg == "l2":
        scale_lam, scale_mu = k * (k + 1), None
    elif reg == "odir":
        scale_lam, scale_mu = k * (k - 1), k
    else:
        raise ValueError(f"paper penalty units need reg 'l2' or 'odir'; got {reg!r}")
    out: dict[str, float] = {}
    if reg_lambda is not None:
        out["reg_lambda"] = float(reg_lambda) * scale_lam
    if reg_mu is not None and scale_mu is not None:
        out["reg_mu"] = float(reg_mu) * scale_mu
    return out


def _grid(**axes: tuple[Any, ...]) -> tuple[dict[str, Any], ...]:
    """Cartesian product of named axes, in order (first axis slowest)."""
    out: list[dict[str, Any]] = [{}]
    for key, values in axes.items():
        out = [{**d, key: v} for d in out for v in values]
    return tuple(out)


_CAL = "bayescal.calibrators"


def method_table(
    *,
    odir_grid: tuple[float, ...] = ODIR_GRID,
    l2_grid: tuple[float, ...] = L2_GRID,
    penalty_units: str = "paper",
) -> dict[str, Method]:
    """Every method bayescal's experiments know, by name.

    ``odir_grid`` is the axis of both ``reg_lambda`` and ``reg_mu`` of the
    ODIR methods; ``l2_grid`` the ``reg_lambda`` axis of the L2 methods;
    ``penalty_units`` the units of both grids (:class:`Method`): ``"paper"``
    for the UCI suite, whose grids are the paper code's; the deep-network suite
    uses ``"bayescal"``, since the paper's deep-network grids were never
    published with the paper.
    """
    units = penalty_units
    if units not in ("paper", "bayescal"):
        raise ValueError(f"penalty_units must be 'paper' or 'bayescal'; got {units!r}")
    return {
        m.name: m
        for m in (
            Method("uncal", "Uncal.", "bayescal.experiments.calibrators:Uncalibrated"),
            Method("temp", "Temp. scaling", f"{_CAL}:TemperatureScaler", on_log_probs=True),
            Method(
                "dir_l2", "Dir-L2", f"{_CAL}:DirichletCalibrator",
                {"reg": "l2"}, _grid(reg_lambda=l2_grid),
                penalty_units=units, warm_start=True, compress=True,
            ),
            Method(
                "dir_odir", "Dir-ODIR", f"{_CAL}:DirichletCalibrator",
                {"reg": "odir"}, _grid(reg_lambda=odir_grid, reg_mu=odir_grid),
                penalty_units=units, warm_start=True, compress=True,
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
            Method("vector", "Vector scaling", f"{_CAL}:VectorScaler", {"reg": "none"},
                   on_log_probs=True),
            Method(
                "ms_odir", "MS-ODIR", f"{_CAL}:MatrixScaler",
                {"reg": "odir", "input": "probs"}, _grid(reg_lambda=odir_grid, reg_mu=odir_grid),
                penalty_units=units, warm_start=True, compress=True,
            ),
            Method("dir_gen", "Dir-Gen (ML)", f"{_CAL}:GenerativeDirichletCalibrator",
                   {"prior": None}),
            Method(
                "dir_gen_map", "Dir-Gen (prior 1)", f"{_CAL}:GenerativeDirichletCalibrator",
                {"prior": 1.0},
            ),
            Method(
                "dir_bayes", "Dir-Bayes (Laplace)", "bayescal.bayes:BayesianDirichletCalibrator",
                {"sampler": "laplace", "prior": "l2", "center": "zero", "draws": 200,
                 "chains": 1, "random_seed": 0},
                _grid(reg_lambda=l2_grid), penalty_units=units, select_by="evidence",
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
