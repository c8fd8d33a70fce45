"""Scikit-learn style calibrators of the Dirichlet family (fit / predict_proba)."""

from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.calibrators.dirichlet import DirichletCalibrator, MatrixScaler
from bayescal.calibrators.generative import GenerativeDirichletCalibrator
from bayescal.calibrators.scaling import TemperatureScaler, VectorScaler

__all__ = [
    "DirichletCalibrator",
    "FamilyCalibratorMixin",
    "GenerativeDirichletCalibrator",
    "MatrixScaler",
    "TemperatureScaler",
    "VectorScaler",
]
