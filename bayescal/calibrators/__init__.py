"""Scikit-learn style calibrators: the Dirichlet family and one-vs-rest baselines."""

from bayescal.calibrators._base import CalibratorMixin, FamilyCalibratorMixin
from bayescal.calibrators.dirichlet import DirichletCalibrator, MatrixScaler
from bayescal.calibrators.generative import GenerativeDirichletCalibrator
from bayescal.calibrators.ovr import (
    BetaCalibrator,
    BinningCalibrator,
    IsotonicCalibrator,
    SigmoidCalibrator,
)
from bayescal.calibrators.scaling import TemperatureScaler, VectorScaler

__all__ = [
    "BetaCalibrator",
    "BinningCalibrator",
    "CalibratorMixin",
    "DirichletCalibrator",
    "FamilyCalibratorMixin",
    "GenerativeDirichletCalibrator",
    "IsotonicCalibrator",
    "MatrixScaler",
    "SigmoidCalibrator",
    "TemperatureScaler",
    "VectorScaler",
]
