"""Scikit-learn style calibrators of the Dirichlet family."""

from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.calibrators.dirichlet import DirichletCalibrator, MatrixScaler
from bayescal.calibrators.scaling import TemperatureScaler, VectorScaler

__all__ = [
    "DirichletCalibrator",
    "FamilyCalibratorMixin",
    "MatrixScaler",
    "TemperatureScaler",
    "VectorScaler",
]
