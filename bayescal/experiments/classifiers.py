"""The eleven scikit-learn classifiers of the paper's non-neural experiments.

Kull et al. (2019, section 4.1) calibrate AdaBoost, random forest, k-nearest
neighbours, linear discriminant analysis, logistic regression, a multilayer
perceptron, Gaussian naive Bayes, quadratic discriminant analysis, linear and
RBF support vector machines with probability outputs, and a decision tree.
The paper does not list their settings. The authors' experiment code (the
``classifiers`` table of ``main.py`` in the ``calib`` experiment project, read
from a later revision of that code; the paper-era revision pins
scikit-learn 0.19.1) uses the settings of scikit-learn's "classifier
comparison" example, which bayescal copies:

==============  ============================================================
``adas``        ``AdaBoostClassifier(n_estimators=200)``
``forest``      ``RandomForestClassifier(n_estimators=200)``
``knn``         ``KNeighborsClassifier(3)``
``lda``         ``LinearDiscriminantAnalysis()``
``logistic``    ``LogisticRegression()`` of scikit-learn 0.19-0.21:
                liblinear, one-vs-rest, ``C=1``
``mlp``         ``MLPClassifier()``
``nbayes``      ``GaussianNB()``
``qda``         ``QuadraticDiscriminantAnalysis(reg_param=0.1)``
``svc-linear``  ``SVC(kernel="linear", C=0.025, probability=True)``
``svc-rbf``     ``SVC(gamma=2, C=1, probability=True)``
``tree``        ``DecisionTreeClassifier(max_depth=5)``
==============  ============================================================

What differs under scikit-learn >= 1.8, and how bayescal keeps the learner:

* ``logistic``: ``multi_class="ovr"`` is gone;
  ``OneVsRestClassifier(LogisticRegression(solver="liblinear"))`` is the same
  model (one penalised binary fit per class, probabilities normalised over
  the classes);
* ``adas``: only the discrete SAMME algorithm is left (the paper-era default
  was SAMME.R), so AdaBoost's scores differ from the paper's;
* ``qda``: the ``svd`` solver now refuses a class with no more rows than
  features whatever ``reg_param`` is, so the covariance ``(1 - 0.1) S + 0.1 I``
  that ``reg_param=0.1`` means is computed by :class:`ShrunkCovariance`
  and handed to the ``eigen`` solver: the same model (tested against the
  ``svd`` solver where that one runs), on all 21 datasets;
* every classifier sits behind a :class:`~sklearn.preprocessing.StandardScaler`
  fitted on the classifier's own training rows (the paper z-scores the data);
* ``SVC(probability=True)`` calibrates internally with 5-fold Platt scaling (an
  advantage the paper points out); stochastic learners get ``random_state``
  from the protocol seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.discriminant_analysis import (
    LinearDiscriminantAnalysis,
    QuadraticDiscriminantAnalysis,
)
from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

__all__ = [
    "CLASSIFIERS",
    "CHEAP_CLASSIFIERS",
    "ShrunkCovariance",
    "class_scores",
    "make_classifier",
]

_Factory = Callable[[int], ClassifierMixin]


class ShrunkCovariance(BaseEstimator):
    """Covariance ``(1 - r) S + r I``: what QDA's ``reg_param=r`` means.

    ``S`` is the maximum-likelihood covariance of the rows (divisor ``n``, as
    scikit-learn's ``svd`` solver). Passed as ``covariance_estimator`` to
    ``QuadraticDiscriminantAnalysis(solver="eigen")``, it gives the ``svd``
    solver's regularised QDA, also for classes with no more rows than
    features, which that solver refuses.

    Parameters
    ----------
    reg_param : float in [0, 1], default=0.1
    """

    def __init__(self, reg_param: float = 0.1) -> None:
        self.reg_param = reg_param

    def fit(self, X: NDArray[np.float64], y: object = None) -> ShrunkCovariance:
        """Compute ``covariance_`` of shape ``(n_features, n_features)``."""
        X = np.asarray(X, dtype=np.float64)
        r = float(self.reg_param)
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"reg_param must be in [0, 1]; got {self.reg_param!r}")
        S = np.atleast_2d(np.cov(X, rowvar=False, bias=True))
        self.covariance_ = (1.0 - r) * S + r * np.eye(X.shape[1])
        return self


#: Name (as in the paper's Table 1) -> factory taking the random seed.
CLASSIFIERS: dict[str, _Factory] = {
    "adas": lambda seed: AdaBoostClassifier(n_estimators=200, random_state=seed),
    "forest": lambda seed: RandomForestClassifier(n_estimators=200, random_state=seed),
    "knn": lambda seed: KNeighborsClassifier(3),
    "lda": lambda seed: LinearDiscriminantAnalysis(),
    "logistic": lambda seed: OneVsRestClassifier(LogisticRegression(solver="liblinear")),
    "mlp": lambda seed: MLPClassifier(random_state=seed),
    "nbayes": lambda seed: GaussianNB(),
    "qda": lambda seed: QuadraticDiscriminantAnalysis(
        solver="eigen", covariance_estimator=ShrunkCovariance(0.1)
    ),
    "svc-linear": lambda seed: SVC(kernel="linear", C=0.025, probability=True, random_state=seed),
    "svc-rbf": lambda seed: SVC(gamma=2, C=1, probability=True, random_state=seed),
    "tree": lambda seed: DecisionTreeClassifier(max_depth=5, random_state=seed),
}

#: Classifiers whose training stays cheap on every dataset (no SVC, MLP,
#: boosting or forests): the default subset for runs on a small machine.
CHEAP_CLASSIFIERS: tuple[str, ...] = ("knn", "lda", "logistic", "nbayes", "qda", "tree")


def make_classifier(name: str, seed: int) -> Pipeline:
    """A fresh ``StandardScaler -> classifier`` pipeline.

    Parameters
    ----------
    name : str
        A key of :data:`CLASSIFIERS`.
    seed : int
        Random state of stochastic learners.
    """
    if name not in CLASSIFIERS:
        raise ValueError(f"unknown classifier {name!r}; choose from {sorted(CLASSIFIERS)}")
    return make_pipeline(StandardScaler(), CLASSIFIERS[name](int(seed)))


def class_scores(model: Pipeline, X: NDArray[np.float64], n_classes: int) -> NDArray[np.float64]:
    """``predict_proba`` spread over all ``n_classes`` columns.

    A class absent from the classifier's training rows gets probability 0
    (its column is missing from ``predict_proba``).

    Raises
    ------
    ValueError
        If the classifier returns non-finite probabilities.
    """
    p = model.predict_proba(X)
    classes = model.classes_
    out = np.zeros((X.shape[0], n_classes))
    out[:, classes] = p
    if not np.isfinite(out).all():
        raise ValueError(
            f"{type(model[-1]).__name__} returned non-finite probabilities "
            f"({int((~np.isfinite(out)).any(axis=1).sum())} rows)"
        )
    return out
