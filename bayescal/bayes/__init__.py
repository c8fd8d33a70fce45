"""Bayesian Dirichlet calibration with PyMC.

Importing this package imports neither PyMC nor ArviZ; they are loaded when a
model is built or an estimator is fitted (an :class:`ImportError` with an
install hint is raised if they are missing).

* :class:`BayesianDirichletCalibrator`, :class:`BayesianGenerativeCalibrator`:
  the estimators (:mod:`bayescal.bayes.estimators`).
* :func:`compare`: PSIS-LOO comparison of fitted models
  (:mod:`bayescal.bayes.comparison`); :func:`diagnose`: convergence checks,
  :class:`ConvergenceError` when they fail; :func:`set_config` /
  :func:`config_context`: how nutpie compiles (JAX, or numba reused across
  the fits of a process).
* :mod:`bayescal.bayes.models`: pure PyMC model builders;
  :mod:`bayescal.bayes.hierarchical`: the default structured prior.
* :mod:`bayescal.bayes.priors`, :mod:`bayescal.bayes.gauge`,
  :mod:`bayescal.bayes.laplace`: prior configs, identified coordinates, modes
  and Hessians.
"""

from bayescal.bayes._sampling import (
    ConvergenceError,
    SamplingWarning,
    config_context,
    diagnose,
    get_config,
    set_config,
)
from bayescal.bayes.comparison import compare
from bayescal.bayes.estimators import BayesianDirichletCalibrator, BayesianGenerativeCalibrator
from bayescal.bayes.hierarchical import StructuredPrior
from bayescal.bayes.priors import DirGenPrior, DirLinPrior

__all__ = [
    "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator",
    "ConvergenceError",
    "DirGenPrior",
    "DirLinPrior",
    "SamplingWarning",
    "StructuredPrior",
    "compare",
    "config_context",
    "diagnose",
    "get_config",
    "set_config",
]
