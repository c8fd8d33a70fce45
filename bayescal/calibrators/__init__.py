"""Scikit-learn style calibrators of the Dirichlet family (fit / predict_proba)."""

from bayescal.calibrators.generative import GenerativeDirichletCalibrator

__all__ = ["GenerativeDirichletCalibrator"]
