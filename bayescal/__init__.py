"""bayescal: exact, fast and Bayesian Dirichlet calibration of multiclass classifiers.

``import bayescal`` stays light: every public name is imported on first use,
so PyMC and ArviZ are imported only when a Bayesian model is built, and the
command line starts without loading the estimators.
"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: Where each public name lives. Every name is imported on first use (module
#: ``__getattr__``), so ``import bayescal`` (and the ``bayescal`` command's
#: ``--help`` / ``--version``) costs no scikit-learn, SciPy, PyMC or ArviZ.
_EXPORTS: dict[str, str] = {
    "EPS": "bayescal._validation",
    "SparseClassWarning": "bayescal._validation",
    "CalibratedClassifier": "bayescal.calibrated",
    **dict.fromkeys(
        ("BetaCalibrator", "BinningCalibrator", "DirichletCalibrator",
         "GenerativeDirichletCalibrator", "IsotonicCalibrator", "MatrixScaler",
         "SigmoidCalibrator", "TemperatureScaler", "VectorScaler"),
        "bayescal.calibrators",
    ),
    "BayesianDirichletCalibrator": "bayescal.bayes",
    "BayesianGenerativeCalibrator": "bayescal.bayes",
    "load": "bayescal.model_files",
    "load_uci": "bayescal.datasets",
    "make_dirgen": "bayescal.datasets",
    "make_dnn_scores": "bayescal.datasets",
    "make_from_calibrator": "bayescal.datasets",
    **dict.fromkeys(("DirichletPrior", "dirichlet_logpdf", "fit_dirichlet"),
                    "bayescal.dirichlet"),
    **dict.fromkeys(
        ("canonical_map", "canonical_to_dirlin", "dirgen_map", "dirgen_to_dirlin",
         "dirlin_map", "dirlin_to_canonical", "dirlin_to_dirgen", "log_features"),
        "bayescal.maps",
    ),
    **dict.fromkeys(
        ("accuracy", "bootstrap_ci", "brier_score", "classwise_ece", "consistency_bands",
         "debiased_ece", "expected_calibration_error", "log_loss", "max_calibration_error",
         "p_ece", "posterior_bands", "reliability_table"),
        "bayescal.metrics",
    ),
    **dict.fromkeys(("FitResult", "QuadraticPenalty", "fit_multinomial", "make_penalty"),
                    "bayescal.optimize"),
}


#: Public names that are another name of their module's function.
_ALIASES: dict[str, str] = {"load": "load_model"}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bayescal' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), _ALIASES.get(name, name))
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static analysis sees the eager imports
    from bayescal._validation import EPS, SparseClassWarning
    from bayescal.bayes import BayesianDirichletCalibrator, BayesianGenerativeCalibrator
    from bayescal.calibrated import CalibratedClassifier
    from bayescal.calibrators import (
        BetaCalibrator,
        BinningCalibrator,
        DirichletCalibrator,
        GenerativeDirichletCalibrator,
        IsotonicCalibrator,
        MatrixScaler,
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
    from bayescal.model_files import load_model as load
    from bayescal.optimize import FitResult, QuadraticPenalty, fit_multinomial, make_penalty

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
    "SparseClassWarning",
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
    "load",
    "load_uci",
    "log_features",
    "log_loss",
    "make_dirgen",
    "make_dnn_scores",
    "make_from_calibrator",
    "make_penalty",
    "max_calibration_error",
    "p_ece",
    "posterior_bands",
    "reliability_table",
]
