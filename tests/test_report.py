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
