"""bayescal: exact, fast and Bayesian Dirichlet calibration of multiclass classifiers.

``import bayescal`` stays light: PyMC and ArviZ are imported only by
:mod:`bayescal.bayes` when a Bayesian model is built.
"""

from bayescal._validation import EPS
from bayescal.calibrated import CalibratedClassifier
from bayescal.calibrators import (
    BetaCalibrator,
    BinningCalibrator,
    DirichletCalibrator,
    GenerativeDirichletCalibrator,
    IsotonicCalibrator,
    MatrixScaler,
    SigmoidCalibrator,
    TemperatureScaler,
    VectorScaler,
)
from bayescal.datasets import load_uci, make_dirgen
from bayescal.dirichlet import DirichletPrior, dirichlet_logpdf, fit_dirichlet
from bayescal.maps import (
    canonical_map,
    canonical_to_dirlin,
    dirgen_map,
    dirgen_to_dirlin,
    dirlin_map,
    dirlin_to_canonical,
    dirlin_to_dirgen,
    log_features,
)
from bayescal.metrics import (
    accuracy,
    bootstrap_ci,
    brier_score,
    classwise_ece,
    consistency_bands,
    debiased_ece,
    expected_calibration_error,
    log_loss,
    max_calibration_error,
    p_ece,
    posterior_bands,
    reliability_table,
)
from bayescal.optimize import FitResult, QuadraticPenalty, fit_multinomial, make_penalty

__version__ = "0.1.0"

#: Exported lazily (module ``__getattr__``) so that ``import bayescal`` does
#: not import PyMC / ArviZ.
_LAZY = {
    "BayesianDirichletCalibrator": "bayescal.bayes",
    "BayesianGenerativeCalibrator": "bayescal.bayes",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bayescal' has no attribute {name!r}")


__all__ = [
    "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator",
    "BetaCalibrator",
    "BinningCalibrator",
    "CalibratedClassifier",
    "DirichletCalibrator",
    "DirichletPrior",
    "EPS",
    "FitResult",
    "GenerativeDirichletCalibrator",
    "IsotonicCalibrator",
    "MatrixScaler",
    "QuadraticPenalty",
    "SigmoidCalibrator",
    "TemperatureScaler",
    "VectorScaler",
    "__version__",
    "accuracy",
    "bootstrap_ci",
    "brier_score",
    "canonical_map",
    "canonical_to_dirlin",
    "classwise_ece",
    "consistency_bands",
    "debiased_ece",
    "dirgen_map",
    "dirgen_to_dirlin",
    "dirichlet_logpdf",
    "dirlin_map",
    "dirlin_to_canonical",
    "dirlin_to_dirgen",
    "expected_calibration_error",
    "fit_dirichlet",
    "fit_multinomial",
    "load_uci",
    "log_features",
    "log_loss",
    "make_dirgen",
    "make_penalty",
    "max_calibration_error",
    "p_ece",
    "posterior_bands",
    "reliability_table",
]
