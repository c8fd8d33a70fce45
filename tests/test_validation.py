"""Every bad input gets a ValueError naming the problem and the value."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bayescal import maps
from bayescal._validation import check_labels, check_scores


@pytest.mark.parametrize(
    ("scores", "kind", "match"),
    [
        ([[np.inf, 0.0]], "logits", r"NaN or inf \(first at row 0"),
        ([[0.2, 0.3]], "probs", r"row 0 sums to 0.5"),
        ([[1.2, -0.2]], "probs", r"negative probabilities \(first at row 0"),
        (np.ones((2, 2, 2)), "probs", r"must be 2-D .* got ndim=3"),
        (np.ones((3, 1)), "logits", r"at least 2 classes"),
        (np.ones((0, 3)), "logits", r"at least one row"),
        ([["a", "b"]], "logits", r"must be numeric"),
    ],
)
def test_bad_scores(scores, kind, match):
    with pytest.raises(ValueError, match=match):
        check_scores(scores, kind=kind)


def test_bad_kind():
    with pytest.raises(ValueError, match=r"kind must be one of \['probs', 'logits'\]; got 'proba'"):
        check_scores([[0.5, 0.5]], kind="proba")


def test_float32_rows_accepted_with_looser_tolerance():
    q = np.array([[0.3333333, 0.3333333, 0.3333334 + 3e-5]], dtype=np.float32)
    out = check_scores(q)
    assert out.dtype == np.float64
    # the float64 copy still holds float32 data: a second check keeps the tolerance
    np.testing.assert_array_equal(check_scores(out), out)
    # float64 data off by as much are refused
    with pytest.raises(ValueError, match="tolerance 1e-06 for float64"):
        check_scores(np.array([[0.3333333, 0.3333333, 0.3333334 + 3e-5]]))
    with pytest.raises(ValueError, match="tolerance 0.0001 for float32"):
        check_scores(np.array([[0.3, 0.3, 0.4 + 3e-4]], dtype=np.float32))


@pytest.mark.parametrize("method", ["dirichlet-odir", "dirichlet-l2", "generative", "temperature",
                                    "vector", "matrix"])
def test_every_estimator_applies_the_float32_tolerance(method):
    from bayescal.calibrators.registry import make_calibrator
    from bayescal.datasets import make_dirgen

    q, y, _, _ = make_dirgen(200, 3, rng=0)
    q32 = q.astype(np.float32)
    q32[:, 0] += np.float32(5e-5)  # rows off by 5e-5: within float32's 1e-4
    est = make_calibrator(method).fit(q32, y)
    assert est.predict_proba(q32).shape == (200, 3)
    with pytest.raises(ValueError, match="rows must sum to 1"):
        make_calibrator(method).fit(q + np.array([5e-5, 0.0, 0.0]), y)


@pytest.mark.parametrize("cls", ["VectorScaler", "MatrixScaler"])
@pytest.mark.parametrize("magnitude", [1e9, 1e60, 1e300])
def test_huge_raw_logits_are_a_value_error(cls, magnitude):
    import bayescal

    rng = np.random.default_rng(0)
    z = rng.normal(size=(100, 3))
    y = rng.integers(0, 3, 100)
    z[7, 1] = magnitude
    with pytest.raises(ValueError, match=r"too large for a fit on raw logits: \|z\| = .* at row "
                                         r"7, column 1"):
        getattr(bayescal, cls)().fit(z, y)
    # log-probability maps take any finite logits
    bayescal.DirichletCalibrator(input="logits", reg_lambda=1e-2, reg_mu=1e-2).fit(z, y)


def test_huge_float_label_is_shown_as_itself():
    with pytest.raises(ValueError, match=r"outside the classes 0..2 .*\[1.e\+20\]"):
        check_labels(np.array([0.0, 1e20]), n_samples=2, n_classes=3)
    with pytest.raises(ValueError, match=r"outside the classes 0..2 .*\[-4,  7\]"):
        check_labels(np.array([0.0, -4.0, 7.0]), n_samples=3, n_classes=3)


def test_scores_are_not_renormalised():
    q = np.array([[0.3, 0.7 + 5e-7]])
    np.testing.assert_array_equal(check_scores(q), q)


def test_bad_labels():
    with pytest.raises(ValueError, match=r"outside the classes 0..2 .*\[3\]"):
        check_labels([0, 3], n_samples=2, n_classes=3)
    with pytest.raises(ValueError, match="must be 1-D"):
        check_labels(np.zeros((2, 2)), n_samples=2, n_classes=3)
    with pytest.raises(ValueError, match="integer class codes"):
        check_labels(["a", "b"], n_samples=2, n_classes=3)
    with pytest.raises(ValueError, match="3 labels but the scores have 2 rows"):
        check_labels([0, 1, 2], n_samples=2, n_classes=3)


def test_bad_parameters():
    q = np.full((1, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"W must be a square \(k, k\) matrix; got shape \(3, 2\)"):
        maps.dirlin_map(q, np.ones((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match=r"W has shape \(2, 2\) but the scores have 3 columns"):
        maps.dirlin_map(q, np.eye(2), np.zeros(2))
    with pytest.raises(ValueError, match=r"b must have shape \(3,\)"):
        maps.dirlin_map(q, np.eye(3), np.zeros(2))
    with pytest.raises(ValueError, match=r"alpha must be finite and > 0; alpha\[1, 2\] = -1.0"):
        a = np.ones((3, 3))
        a[1, 2] = -1.0
        maps.dirgen_map(q, a, np.full(3, 1 / 3))
    with pytest.raises(ValueError, match="pi must be a probability vector"):
        maps.dirgen_map(q, np.ones((3, 3)), np.array([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match=r"pi must have shape \(3,\)"):
        maps.dirgen_map(q, np.ones((3, 3)), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="eps must be a float in"):
        maps.log_features(q, eps=0.0)
    with pytest.raises(ValueError, match="A must be finite and >= 0"):
        maps.canonical_to_dirlin(-np.ones((3, 3)), np.full(3, 1 / 3))
    with pytest.raises(ValueError, match="temperature must be a finite positive"):
        maps.temperature_to_dirlin(0.0, 3)


def test_import_does_not_import_pymc():
    code = (
        "import sys, bayescal; "
        "bad = [m for m in ('pymc', 'arviz', 'pytensor', 'matplotlib') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def _sparse_labels():
    """k = 4, n = 60: class 3 absent, class 2 with 2 rows, classes 0 and 1 plentiful."""
    from bayescal import make_dirgen

    q, y, _, _ = make_dirgen(60, 4, rng=0)
    y = np.where(y >= 2, 0, y)
    y[:2] = 2
    return q, y


@pytest.mark.parametrize("name", ["DirichletCalibrator", "TemperatureScaler", "VectorScaler",
                                  "SigmoidCalibrator", "GenerativeDirichletCalibrator"])
def test_sparse_class_warns_every_estimator(name):
    import bayescal
    from bayescal import SparseClassWarning

    q, y = _sparse_labels()
    with pytest.warns(SparseClassWarning, match=(
            rf"{name}: 2 of 4 classes have fewer than 5 calibration rows, 1 with none "
            r"\(class 2 has 2, class 3 has 0\)")) as seen:
        getattr(bayescal, name)().fit(q, y)
    assert seen[0].filename == __file__  # points at the caller's fit


def test_sparse_class_warns_bayesian_before_sampling():
    from bayescal import SparseClassWarning
    from bayescal.bayes import BayesianDirichletCalibrator

    q, y = _sparse_labels()
    est = BayesianDirichletCalibrator(prior="temperature", sampler="laplace", draws=10,
                                      chains=1, random_seed=0)
    with pytest.warns(SparseClassWarning, match="BayesianDirichletCalibrator: 2 of 4"):
        est.fit(q, y)


def test_no_sparse_class_warning_and_bad_input_raises_first():
    import warnings

    from bayescal import DirichletCalibrator, SparseClassWarning, make_dirgen

    q, y, _, _ = make_dirgen(200, 3, rng=0)
    assert np.bincount(y).min() >= 5
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseClassWarning)
        DirichletCalibrator().fit(q, y)
    qs, ys = _sparse_labels()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseClassWarning)
        with pytest.raises(ValueError, match="sample_weight"):  # the error, not the warning
            DirichletCalibrator().fit(qs, ys, sample_weight=-np.ones(len(ys)))


def test_sparse_class_message_without_absent_classes_and_with_many():
    from bayescal import SparseClassWarning
    from bayescal._validation import warn_sparse_classes

    with pytest.warns(SparseClassWarning, match=r"^X: 1 of 2 classes have fewer than 5 "
                                                r"calibration rows \(class b has 2\)\. Their"):
        warn_sparse_classes([10, 2], np.array(["a", "b"]), owner="X")
    with pytest.warns(SparseClassWarning, match=r"X: 12 of 12 classes .* 12 with none \(class 0 "
                                                r"has 0, .*, class 7 has 0, \.\.\.\)"):
        warn_sparse_classes(np.zeros(12), np.arange(12), owner="X")
