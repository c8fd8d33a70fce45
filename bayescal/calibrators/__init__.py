"""Scikit-learn style calibrators (fit / predict_proba)."""

from bayescal.calibrators.ovr import BetaCalibrator, BinningCalibrator, IsotonicCalibrator

__all__ = ["BetaCalibrator", "BinningCalibrator", "IsotonicCalibrator"]
