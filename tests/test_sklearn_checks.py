"""scikit-learn's estimator contract, checked over every calibrator.

The calibrators are not general classifiers: label ``j`` means score column
``j`` (the number of classes is the number of score columns), so checks that
fit arbitrary feature matrices with arbitrary labels cannot pass. Each such
check is listed below with its reason; everything else must pass.
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayescal import (
    DirichletCalibrator,
    GenerativeDirichletCalibrator,
    MatrixScaler,
    TemperatureScaler,
    VectorScaler,
)

ESTIMATORS = [
    DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2, input="logits"),
    DirichletCalibrator(reg="l2", reg_mu=None, cv=2, ensemble=True, input="logits"),
    MatrixScaler(reg_lambda=1e-2, reg_mu=1e-2),
    TemperatureScaler(),
    VectorScaler(),
    GenerativeDirichletCalibrator(prior=1.0, input="logits"),
]

_LABELS = (
    "labels are score-column codes 0..k-1; this check fits 3 classes on 2 columns"
)

_COMMON = {
    "check_estimators_overwrite_params": _LABELS,
    "check_estimators_fit_returns_self": _LABELS,
    "check_readonly_memmap_input": _LABELS,
    "check_classifier_data_not_an_array": _LABELS,
    "check_classifiers_train": _LABELS,
    "check_classifiers_train(readonly_memmap=True)": _LABELS,
    "check_classifiers_train(readonly_memmap=True,X_dtype=float32)": _LABELS,
    "check_classifiers_classes": "string labels: labels must be the integer codes of the "
    "score columns",
    "check_dtype_object": "object arrays are refused rather than converted (no silent "
    "conversion of scores)",
}

_WEIGHTS = {
    "check_sample_weights_pandas_series": _LABELS,
    "check_sample_weights_not_an_array": _LABELS,
    "check_sample_weights_shape": _LABELS,
    "check_sample_weights_not_overwritten": _LABELS,
}


def _expected_failed_checks(estimator):
    failed = dict(_COMMON)
    if isinstance(estimator, DirichletCalibrator):
        failed.update(_WEIGHTS)
        failed["check_sample_weight_equivalence_on_dense_data"] = (
            "the check's labels use only 3 of the score columns: the absent classes' logits "
            "run towards -inf and the fit stops where the gradient drops below tol, so their "
            "log-probabilities (-20 to -200) agree only to ~1e-4 relative (predict_proba "
            "agrees); it passes on some draws of the check's data"
        )
    if isinstance(estimator, GenerativeDirichletCalibrator):
        failed["check_estimators_partial_fit_n_features"] = _LABELS
    if isinstance(estimator, TemperatureScaler):
        failed["check_classifiers_one_label"] = (
            "a temperature never changes the argmax of the scores, so it cannot predict "
            "the single training class"
        )
    return failed


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    name = getattr(check, "func", check).__name__
    if name == "check_array_api_input":
        # scikit-learn skips this check unless SCIPY_ARRAY_API is set; report it
        # as an expected failure with the reason instead of a silent skip.
        pytest.xfail(
            "array-API inputs are not dispatched: scores are converted to float64 NumPy"
        )
    check(estimator)
