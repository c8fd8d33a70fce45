"""The calibration report: recommended method first, rows worse than uncalibrated marked."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from bayescal.datasets import make_dirgen
from bayescal.maps import temperature_map
from bayescal.metrics import log_loss
from bayescal.report import REFERENCE, Report, default_method


@pytest.fixture(scope="module")
def scores():
    q, y, _, _ = make_dirgen(300, 3, rng=0)
    return q, y


def _report(scores, recommended="good") -> Report:
    q, y = scores
    rep = Report(title="t", keys=["classifier", "method"], recommended=recommended)
    for clf in ("one", "two"):
        rep.add(y, q, classifier=clf, method=REFERENCE)
        rep.add(y, temperature_map(q, 0.2, kind="probs"), classifier=clf, method="sharper")
        rep.add(y, temperature_map(q, 1.5, kind="probs"), classifier=clf, method="good")
    return rep


def test_default_recommendation_is_the_calibrated_classifier_default():
    from bayescal import CalibratedClassifier

    assert default_method() == CalibratedClassifier().method
    assert Report(title="t", keys=["method"]).recommended == default_method()


def test_recommended_first_then_reference_and_worse_rows_marked(scores):
    q, y = scores
    rep = _report(scores)
    shown = [(rep.rows[i]["classifier"], rep.rows[i]["method"]) for i in rep.order()]
    assert shown == [("one", "good"), ("one", REFERENCE), ("one", "sharper"),
                     ("two", "good"), ("two", REFERENCE), ("two", "sharper")]
    base = log_loss(y, q)
    sharper = log_loss(y, temperature_map(q, 0.2, kind="probs"))
    good = log_loss(y, temperature_map(q, 1.5, kind="probs"))
    assert good < base < sharper  # what the verdicts below must say
    notes = rep.verdicts()
    assert notes[:3] == ["reference",
                         f"worse than uncalibrated (log-loss {100 * (sharper / base - 1):+.1f}%)",
                         "recommended"]
    table = rep.table().splitlines()
    assert table[2].split()[:2] == ["one", "good"] and table[2].endswith("recommended")
    assert "worse than uncalibrated" in table[4]


def test_html_shows_the_recommended_diagram_with_captions(scores, tmp_path):
    rep = _report(scores)
    # the reference and the recommended rows get diagrams without asking; others don't
    assert sorted(rep.images) == ["one_-_good.png", "one_-_uncalibrated.png",
                                  "two_-_good.png", "two_-_uncalibrated.png"]
    html = rep.html()
    assert html.count('<tr class="other worse') == 2
    assert html.count('<tr class="recommended') == 2
    assert "4 of 6 calibrated rows" not in html and "2 of 4 calibrated rows" in html
    assert "one_-_good" not in html  # captions, not file names
    assert "one / good: log-loss" in html and "(recommended)." in html
    # figures follow the display order: recommended before reference
    png_good = base64.b64encode(rep.images["one_-_good.png"]).decode()
    png_ref = base64.b64encode(rep.images["one_-_uncalibrated.png"]).decode()
    assert html.index(png_good) < html.index(png_ref)
    path = rep.write(tmp_path)
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0].endswith(",MCE,note") and rows[1].startswith("one,good,")
    assert rows[1].endswith(",recommended") and "worse than uncalibrated" in rows[3]
    assert path.read_text() == html


def test_recommended_worse_than_uncalibrated_says_so(scores):
    q, y = scores
    rep = Report(title="t", keys=["method"], recommended="sharp")
    rep.add(y, q, method=REFERENCE)
    rep.add(y, temperature_map(q, 0.2, kind="probs"), method="sharp")
    assert rep.verdicts()[1].startswith("recommended; worse than uncalibrated")


def test_add_checks_its_labels(scores):
    q, y = scores
    rep = Report(title="t", keys=["classifier", "method"])
    with pytest.raises(ValueError, match=r"missing \['method'\]"):
        rep.add(y, q, classifier="a")
    rep.add(y, q, image="x.png", classifier="a", method="m")
    with pytest.raises(ValueError, match="already has an image named 'x.png'"):
        rep.add(y, q, image="x.png", classifier="b", method="m")


def test_report_without_reference_or_recommendation(scores):
    q, y = scores
    rep = Report(title="t", keys=["scores"], recommended=None)
    rep.add(y, q, scores="calibrated (temperature)")
    assert rep.verdicts() == [""] and rep.images == {}
    assert "Recommended:" not in rep.html()
    assert np.isfinite(float(rep.rows[0]["log-loss"]))


# -- what each fit chose, and fits that are one map -------------------------
FAMILY = ("dirichlet", "generative", "temperature", "vector", "matrix")


@pytest.fixture(scope="module")
def temperature_data():
    """Probabilities whose labels follow temperature scaling (T = 2) exactly: every
    default of the family keeps to one temperature on them (seed checked)."""
    from bayescal.maps import softmax

    rng = np.random.default_rng(0)
    z = rng.normal(0.0, 3.0, (200, 3))
    y = (rng.random(200)[:, None] > np.cumsum(softmax(z / 2.0), axis=1)).sum(axis=1)
    return softmax(z), y


def _fits(q, y, methods=FAMILY):
    from bayescal.calibrators.registry import make_calibrator

    return {m: make_calibrator(m).fit(q, y) for m in methods}


def test_describe_fit_temperature_scaling_only(temperature_data):
    from bayescal.report import describe_fit

    fits = _fits(*temperature_data)
    T = fits["temperature"].estimator_.temperature_
    assert describe_fit(fits["temperature"]) == f"temperature scaling (T={T:.3g})"
    for m in ("dirichlet", "vector", "matrix", "generative"):
        text = describe_fit(fits[m])
        assert text.startswith("the data supported temperature scaling only (T="), (m, text)
        assert f"T={T:.3g}" in text, (m, text)


def test_describe_fit_full_map_names_the_strengths(scores):
    from bayescal import DirichletCalibrator, MatrixScaler
    from bayescal.report import describe_fit

    q, y = scores
    for est in (DirichletCalibrator().fit(q, y), MatrixScaler(input="probs").fit(q, y)):
        assert np.isfinite([est.reg_lambda_, est.reg_diag_, est.reg_mu_]).all()  # data as seeded
        text = describe_fit(est)
        assert text.startswith("the data supported a full map around temperature scaling "
                               f"(T={est.temperature_:.3g}; "), text
        for name in ("reg_lambda", "reg_diag", "reg_mu"):
            assert f"{name}={getattr(est, name + '_'):.3g}" in text
        assert "pinned" not in text
    odir = DirichletCalibrator(reg="odir", reg_lambda=1e-3, reg_mu=1e-2).fit(q, y)
    assert describe_fit(odir) == "a full map, ODIR penalty (reg_lambda=0.001, reg_mu=0.01)"
    l2 = DirichletCalibrator(reg="l2", cv=3).fit(q, y)
    assert describe_fit(l2) == (f"a full map, L2 penalty towards W = 0 (reg_lambda="
                                f"{l2.reg_lambda_:.3g}, chosen by 3-fold cross-validation)")
    assert describe_fit(DirichletCalibrator(reg="none").fit(q, y)) == (
        "a full map, unpenalised (maximum likelihood)")


def test_describe_fit_vector_and_generative(scores):
    from bayescal import GenerativeDirichletCalibrator, VectorScaler, log_features
    from bayescal.report import describe_fit

    q, y = scores
    vec = VectorScaler().fit(log_features(q), y)
    text = describe_fit(vec)
    if np.isinf(vec.reg_diag_) and np.isinf(vec.reg_mu_):
        assert text.startswith("the data supported temperature scaling only"), text
    else:
        assert text.startswith("the data supported per-class"), text
        assert f"T={vec.temperature_:.3g}" in text and "off-diagonal" not in text
    assert describe_fit(VectorScaler(reg="none").fit(log_features(q), y)) == (
        "per-class scales and biases, unpenalised (maximum likelihood)")
    gen = GenerativeDirichletCalibrator().fit(q, y)
    assert np.isfinite(gen.prior_strength_)  # data as seeded
    text = describe_fit(gen)
    assert text.startswith("the data supported class-conditional Dirichlets with a prior of "
                           f"{gen.prior_strength_:g} pseudo-sample"), text
    assert "around temperature scaling (T=" in text
    assert describe_fit(GenerativeDirichletCalibrator(prior=None).fit(q, y)) == (
        "class-conditional Dirichlets by maximum likelihood")
    assert describe_fit(GenerativeDirichletCalibrator(prior=10.0).fit(q, y)) == (
        "class-conditional Dirichlets with a prior of 10 pseudo-samples per class")


def test_same_map_up_to_the_shifts_that_change_no_prediction(scores):
    import copy

    from bayescal.report import same_map

    q, y = scores
    fits = _fits(q, y, ("dirichlet", "matrix", "temperature"))
    # on probabilities matrix scaling acts on ln q: the Dirichlet map, mathematically
    assert same_map(fits["matrix"], fits["dirichlet"])
    assert not same_map(fits["dirichlet"], fits["temperature"])
    shifted = copy.deepcopy(fits["dirichlet"])
    shifted.coef_ = shifted.coef_ + np.array([0.3, -1.0, 2.0])  # v added to every row of W
    shifted.intercept_ = shifted.intercept_ + 5.0
    assert same_map(shifted, fits["dirichlet"])
    shifted.coef_[0, 1] *= 1 + 1e-6
    assert not same_map(shifted, fits["dirichlet"])
    floor = copy.deepcopy(fits["dirichlet"])
    floor.eps_ = 1e-3  # the same coefficients on other features: another map
    assert not same_map(floor, fits["dirichlet"])


def test_report_says_what_each_fit_chose_and_which_are_one_map(temperature_data, scores):
    from bayescal.report import describe_fit, same_map

    data = {"ts": temperature_data, "dirgen": scores}
    fitted = {clf: _fits(q, y) for clf, (q, y) in data.items()}
    rep = Report(title="t", keys=["classifier", "method"], recommended="dirichlet")
    for clf, (q, y) in data.items():
        rep.add(y, q, classifier=clf, method=REFERENCE)
        for m, est in fitted[clf].items():
            rep.add(y, est.predict_proba(q), classifier=clf, method=m, calibrator=est)
    assert rep.fits[0] == "" and rep.fits[1] == describe_fit(fitted["ts"]["dirichlet"])
    notes = dict(zip(((r["classifier"], r["method"]) for r in rep.rows), rep.verdicts(),
                     strict=True))
    order = ["dirichlet", *(m for m in FAMILY if m != "dirichlet")]  # display order
    for clf, fits in fitted.items():
        for i, m in enumerate(order):
            first = next((e for e in order[:i] if same_map(fits[e], fits[m])), None)
            note = notes[clf, m]
            if first is None:
                assert "same map" not in note, (clf, m, note)
            else:
                assert f"same map as {first}" in note, (clf, m, note)
    # mathematically one map: matrix scaling on probabilities is dirichlet, in every group
    assert "same map as dirichlet" in notes["ts", "matrix"]
    assert "same map as dirichlet" in notes["dirgen", "matrix"]
    # vector scaling keeps to the temperature the default fitted on these data: one map
    # (the generative fit's temperature is its own, so it is the same map only to its
    # precision, which the loop above leaves to same_map)
    assert "same map as dirichlet" in notes["ts", "vector"]
    # a full map is not temperature scaling: no note
    assert "same map" not in notes["dirgen", "temperature"]
    table = rep.table()
    assert table.splitlines()[0].split()[-2:] == ["note", "fit"]
    assert "the data supported temperature scaling only" in table
    html = rep.html()
    assert "<th>fit</th>" in html and "same map as dirichlet" in html
    assert rep.csv().splitlines()[0].endswith(",note,fit")


def test_report_without_calibrators_has_no_fit_column(scores):
    rep = _report(scores)
    assert rep.fits == [""] * len(rep.rows)
    assert "fit" not in rep.table().splitlines()[0].split()
    assert "<th>fit</th>" not in rep.html() and rep.csv().splitlines()[0].endswith(",note")
