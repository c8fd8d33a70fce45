"""The eleven scikit-learn classifiers of the paper's non-neural experiments.

Kull et al. (2019, section 4.1) calibrate AdaBoost (SAMME), random forest,
k-nearest neighbours, linear discriminant analysis, logistic regression, a
multilayer perceptron, Gaussian naive Bayes, quadratic discriminant analysis,
linear and RBF support vector machines with probability outputs, and a
decision tree. The paper does not list their settings; bayescal uses
scikit-learn's defaults except where noted below, so that a rerun depends on
nothing but the scikit-learn version:

* every classifier sits behind a :class:`~sklearn.preprocessing.StandardScaler`
  fitted on the classifier's own training rows (the paper z-scores the data);
* ``logistic``: ``max_iter=1000`` (the default 100 stops early on several
  datasets);
* ``qda``: ``solver="eigen", shrinkage=1e-6, tol=0`` (each class covariance
  is ``(1 - 1e-6) S + 1e-6 (tr S / d) I``). A class with no more rows than
  features has a singular covariance; scikit-learn >= 1.8 refuses it in the
  default ``svd`` solver whatever ``reg_param`` is (the scikit-learn of the
  paper only warned "Variables are collinear"), so the eigen solver with a
  negligible shrinkage keeps QDA what it was, an essentially unregularised and
  over-confident learner, and lets it run on all 21 datasets;
* ``svc-linear`` / ``svc-rbf``: ``SVC(kernel=..., probability=True)``, whose
  probabilities come from scikit-learn's internal Platt scaling with 5-fold
  cross-validation (an advantage the paper points out);
* stochastic learners get ``random_state`` from the protocol seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from sklearn.base import ClassifierMixin
from sklearn.discriminant_analysis import (
    LinearDiscriminantAnalysis,
    QuadraticDiscriminantAnalysis,
)
from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

__all__ = ["CLASSIFIERS", "CHEAP_CLASSIFIERS", "make_classifier", "class_scores"]

_Factory = Callable[[int], ClassifierMixin]

#: Name (as in the paper's Table 1) -> factory taking the random seed.
CLASSIFIERS: dict[str, _Factory] = {
    # AdaBoost: SAMME, the only algorithm left in scikit-learn >= 1.6
    "adas": lambda seed: AdaBoostClassifier(random_state=seed),
    "forest": lambda seed: RandomForestClassifier(random_state=seed),
    "knn": lambda seed: KNeighborsClassifier(),
    "lda": lambda seed: LinearDiscriminantAnalysis(),
    "logistic": lambda seed: LogisticRegression(max_iter=1000),
    "mlp": lambda seed: MLPClassifier(random_state=seed),
    "nbayes": lambda seed: GaussianNB(),
    "qda": lambda seed: QuadraticDiscriminantAnalysis(solver="eigen", shrinkage=1e-6, tol=0.0),
    "svc-linear": lambda seed: SVC(kernel="linear", probability=True, random_state=seed),
    "svc-rbf": lambda seed: SVC(kernel="rbf", probability=True, random_state=seed),
    "tree": lambda seed: DecisionTreeClassifier(random_state=seed),
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
