"""Bayesian Dirichlet calibration with PyMC.

Importing this package imports neither PyMC nor ArviZ; they are loaded when a
model is built or an estimator is fitted (an :class:`ImportError` with an
install hint is raised if they are missing).

* :class:`BayesianDirichletCalibrator`, :class:`BayesianGenerativeCalibrator`:
  the estimators (:mod:`bayescal.bayes.estimators`).
* :mod:`bayescal.bayes.models`: pure PyMC model builders.
* :mod:`bayescal.bayes.priors`, :mod:`bayescal.bayes.gauge`,
  :mod:`bayescal.bayes.laplace`: prior configs, identified coordinates, modes
  and Hessians.
"""

from bayescal.bayes._sampling import SamplingWarning
from bayescal.bayes.estimators import BayesianDirichletCalibrator, BayesianGenerativeCalibrator
from bayescal.bayes.priors import DirGenPrior, DirLinPrior

__all__ = [
    "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator",
    "DirGenPrior",
    "DirLinPrior",
    "SamplingWarning",
]
