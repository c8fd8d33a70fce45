"""The structured default: penalty, evidence, limits, invariances and held-out quality."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB

from bayescal import (
    DirichletCalibrator,
    MatrixScaler,
    TemperatureScaler,
    VectorScaler,
    log_features,
    log_loss,
    make_dirgen,
)
from bayescal.bayes.laplace import dirlin_log_evidence
from bayescal.calibrators.registry import METHODS, make_calibrator
from bayescal.optimize import fit_multinomial, log_evidence, make_penalty
from bayescal.structured import (
    PATH_MULTIPLIERS,
    STRENGTH_BOUNDS,
    TIED_STRENGTHS,
    fit_structured,
    fit_temperature_scale,
    path_candidates,
    structured_penalty,
)

ROOT = Path(__file__).resolve().parents[1]
STRONG = {"reg_lambda": 1e9, "reg_diag": 1e9, "reg_mu": 1e9}
WEAK = {"reg_lambda": 1e-11, "reg_diag": 1e-11, "reg_mu": 1e-11}


@pytest.fixture(scope="module")
def synth():
    q, y, _, _ = make_dirgen(600, 4, rng=np.random.default_rng(5))
    return q, y


@pytest.fixture(scope="module")
def digits_nb():
    """GaussianNB on digits: near-separable, exact zeros, wildly over-confident."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=0.5, stratify=y,
                                                  random_state=0)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5, stratify=y_rest,
                                                random_state=0)
    nb = GaussianNB().fit(X_tr, y_tr)
    return nb.predict_proba(X_cal), y_cal, nb.predict_proba(X_te), y_te


# -- the penalty ----------------------------------------------------------------------
@settings(max_examples=30)
@given(k=st.integers(2, 7), lam=st.floats(1e-3, 1e3), diag=st.floats(1e-3, 1e3),
       mu=st.floats(1e-3, 1e3), n=st.integers(1, 10_000), s=st.floats(0.05, 20.0))
def test_structured_penalty_is_the_documented_prior(k, lam, diag, mu, n, s):
    pen = make_penalty(k, "structured", lam, mu, reg_diag=diag, n_samples=n, scale=s)
    eye = np.eye(k)
    assert np.allclose(pen.center_W, s * eye) and np.all(pen.center_b == 0)
    # W = s W': penalties on W' entries, in the units of structured matrix scaling
    assert np.allclose(pen.prec_W[~eye.astype(bool)], lam * k * (k - 1) / (n * s * s))
    assert np.allclose(np.diag(pen.prec_W), diag * k / (n * s * s))
    assert np.allclose(pen.prec_b, mu * k / n)
    # Gaussian reading: sd**2 = 1 / (2 n prec) does not depend on n (sd of W' times s)
    sd_W, sd_b = pen.prior_sd(n)
    assert np.allclose(sd_W[0, 1] ** 2, s * s / (2 * lam * k * (k - 1)))
    assert np.allclose(sd_W[0, 0] ** 2, s * s / (2 * diag * k))
    assert np.allclose(sd_b**2, 1 / (2 * mu * k))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "structured", "reg_lambda": 1.0}, "needs n_samples"),
        ({"kind": "odir", "reg_lambda": 1.0, "reg_diag": 1.0}, "only used by kind='structured'"),
        ({"kind": "structured", "reg_lambda": 1.0, "n_samples": 10, "scale": 0.0},
         "scale must be a finite positive"),
        ({"kind": "structured", "reg_lambda": 1.0, "n_samples": 10, "reg_diag": -1.0},
         "reg_diag must be a finite non-negative"),
        ({"kind": "l2", "reg_lambda": 1.0, "reg_mu": 1.0}, "reg_mu is only used by"),
    ],
)
def test_make_penalty_structured_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_penalty(3, **kwargs)


# -- the evidence ---------------------------------------------------------------------
def test_log_evidence_agrees_with_the_bayesian_laplace_evidence(synth):
    q, y = synth
    x = log_features(q)
    pen = make_penalty(4, "l2", 3.0)
    res = fit_multinomial(x, y, penalty=pen)
    assert log_evidence(x, y, pen, res.theta) == pytest.approx(
        dirlin_log_evidence(x, y, pen, res.W, res.b), abs=1e-8)


def test_log_evidence_is_the_exact_marginal_likelihood_of_a_gaussian_model(rng):
    """k = 2 scalar structure: integrate exp(-n L) by quadrature against the Laplace value."""
    z = rng.normal(size=(400, 2)) * np.array([2.0, 0.5])
    y = (rng.random(400) < softmax(z, axis=1)[:, 1]).astype(int)
    x = log_features(z, kind="logits")
    pen = make_penalty(2, "structured", 1.0, n_samples=400, scale=1.0)
    res = fit_multinomial(x, y, structure="scalar", penalty=pen)
    laplace = log_evidence(x, y, pen, res.theta, structure="scalar")
    # exact: integral over s of prod p(y|s) Normal(s; 1, sd) ds
    sd = 1.0 / np.sqrt(2 * 400 * np.sum(np.diag(pen.prec_W)))
    grid = np.linspace(res.theta[0] - 1.0, res.theta[0] + 1.0, 20001)
    logp = np.array([
        -400 * (fit_multinomial(x, y, structure="scalar", init=np.array([g]), max_iter=1,
                                warn=False, tol=1e300).loss)
        for g in grid[::100]
    ])
    del logp  # the loss evaluation above only exercises the API; integrate directly:
    zz = x[:, None, :] * grid[None, :, None]
    ll = (zz[np.arange(400), :, y] - np.logaddexp(zz[..., 0], zz[..., 1])).sum(axis=0)
    lp = ll - 0.5 * ((grid - 1.0) / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi))
    exact = np.log(np.trapezoid(np.exp(lp - lp.max()), grid)) + lp.max()
    assert laplace == pytest.approx(exact, abs=0.02)


def test_evidence_strengths_maximise_the_evidence(synth):
    """The type-II ML strengths are a (local) maximum of log_evidence."""
    q, y = synth
    x = log_features(q)
    sf = fit_structured(x, y, reg_lambda="auto", reg_diag="auto", reg_mu="auto", cv=None)
    ev = sf.evidence_strengths
    assert sf.path is None and sf.strengths == ev
    n, s = len(y), sf.scale

    def evidence(st):
        pen = structured_penalty(4, st, n, s)
        return log_evidence(x, y, pen, fit_multinomial(x, y, penalty=pen).theta)

    best = evidence(ev)
    for g, v in ev.items():
        lo, hi = STRENGTH_BOUNDS
        for f in (0.5, 2.0):
            if lo < v * f < hi:
                assert evidence({**ev, g: v * f}) <= best + 0.05


def test_an_alternative_equal_to_the_features_is_not_fitted_again(synth, monkeypatch):
    """eps="auto" with no score below the floor: the floored features equal ``x``, so
    their evidence would tie; the fit is the one without the alternative, fitted once."""
    import bayescal.structured as structured

    q, y = synth
    x = log_features(q)
    calls = []
    real = structured._evidence_strengths
    monkeypatch.setattr(structured, "_evidence_strengths",
                        lambda xa, *a, **kw: calls.append(xa) or real(xa, *a, **kw))
    alone = fit_structured(x, y)
    assert len(calls) == 1
    twice = fit_structured(x, y, alternatives=(x.copy(),))
    assert len(calls) == 2 and twice.features == 0
    np.testing.assert_array_equal(twice.fit.theta, alone.fit.theta)
    assert twice.strengths == alone.strengths and twice.log_evidence == alone.log_evidence
    other = np.maximum(x, np.quantile(x, 0.2))  # a real alternative is still fitted
    fit_structured(x, y, alternatives=(other,))
    assert len(calls) == 4


# -- the limits -----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [DirichletCalibrator, MatrixScaler])
def test_strong_end_is_temperature_scaling(synth, cls):
    q, y = synth
    est = cls(input="probs", **STRONG).fit(q, y)
    ts = TemperatureScaler().fit(log_features(q), y)
    assert est.temperature_ == pytest.approx(ts.temperature_, rel=1e-9)
    assert np.max(np.abs(est.predict_proba(q) - ts.predict_proba(log_features(q)))) < 1e-6


def test_strong_end_of_vector_scaling_is_temperature_scaling(synth):
    q, y = synth
    z = log_features(q)
    vs = VectorScaler(reg_diag=1e9, reg_mu=1e9).fit(z, y)
    ts = TemperatureScaler().fit(z, y)
    assert np.max(np.abs(vs.predict_proba(z) - ts.predict_proba(z))) < 1e-6


@pytest.mark.parametrize("cls", [DirichletCalibrator, MatrixScaler])
def test_weak_end_is_the_unpenalised_fit(synth, cls):
    q, y = synth
    est = cls(input="probs", tol=1e-10, **WEAK).fit(q, y)
    free = cls(input="probs", reg="none", tol=1e-10).fit(q, y)
    assert np.max(np.abs(est.predict_proba(q) - free.predict_proba(q))) < 1e-6


def test_weak_end_of_vector_scaling_is_unpenalised(synth):
    q, y = synth
    z = log_features(q)
    vs = VectorScaler(reg_diag=1e-11, reg_mu=1e-11, tol=1e-10).fit(z, y)
    free = VectorScaler(reg="none", tol=1e-10).fit(z, y)
    assert np.max(np.abs(vs.predict_proba(z) - free.predict_proba(z))) < 1e-6


def test_temperature_point_of_the_path_is_exact(synth):
    q, y = synth
    x = log_features(q)
    s = fit_temperature_scale(x, y)
    ts = TemperatureScaler().fit(x, y)
    assert 1.0 / s == pytest.approx(ts.temperature_, rel=1e-10)
    assert PATH_MULTIPLIERS[0] == np.inf


# -- invariances ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [DirichletCalibrator, MatrixScaler])
def test_relabelling_classes_permutes_the_default_fit(synth, cls, rng):
    q, y = synth
    perm = rng.permutation(4)
    inv = np.argsort(perm)
    a = cls(input="probs").fit(q, y)
    b = cls(input="probs").fit(q[:, perm], inv[y])
    assert np.allclose(b.predict_proba(q[:, perm]), a.predict_proba(q)[:, perm], atol=1e-9)
    assert b.reg_lambda_ == pytest.approx(a.reg_lambda_, rel=1e-6)


def test_logits_and_probabilities_give_the_same_default_fit(rng):
    z = rng.normal(size=(500, 3)) * 3.0
    y = rng.integers(0, 3, 500)
    a = DirichletCalibrator(input="logits").fit(z, y)
    b = DirichletCalibrator().fit(softmax(z, axis=1), y)
    assert np.allclose(a.predict_proba(z), b.predict_proba(softmax(z, axis=1)), atol=1e-9)


# -- the choice, and held-out quality ---------------------------------------------------
def test_default_records_its_choice(synth):
    q, y = synth
    cal = DirichletCalibrator().fit(q, y)
    assert cal.cv_results_ is None
    res = cal.selection_
    assert res["n_evidence_iter"] >= 1 and np.isfinite(res["log_evidence"])
    ev = {g: res[f"evidence_{g}"] for g in ("reg_lambda", "reg_diag", "reg_mu")}
    cands, factors = path_candidates(ev, "full")
    assert len(cands) == len(PATH_MULTIPLIERS) + len(TIED_STRENGTHS) == len(res["path_reg_mu"])
    assert np.all(np.isinf([res[f"path_{g}"][0] for g in ev]))  # temperature scaling first
    for g in ev:
        np.testing.assert_allclose(res[f"path_{g}"], [c[g] for c in cands])
    np.testing.assert_array_equal(res["path_se_factor"], factors)
    i = res["path_index"]
    mean, se = res["path_mean_test_log_loss"], res["path_se_vs_best"]
    best = int(np.argmin(mean))
    # the first candidate within its margin of standard errors of the best
    assert mean[i] - mean[best] <= factors[i] * se[i]
    for j in range(i):
        assert mean[j] - mean[best] > factors[j] * se[j]
    for g in ev:
        assert getattr(cal, f"{g}_") == pytest.approx(res[f"path_{g}"][i])


def test_tiny_calibration_set_falls_back_to_temperature_scaling(rng):
    q, y, _, _ = make_dirgen(25, 5, rng=rng)
    cal = DirichletCalibrator().fit(q, y)
    ts = TemperatureScaler().fit(log_features(q), y)
    assert np.isfinite(cal.coef_).all()
    assert log_loss(y, cal.predict_proba(q)) <= log_loss(y, ts.predict_proba(log_features(q))) + 0.1


def test_near_separable_digits_never_much_worse_than_temperature(digits_nb):
    p_cal, y_cal, p_te, y_te = digits_nb
    ts = TemperatureScaler().fit(log_features(p_cal), y_cal)
    ll_ts = log_loss(y_te, ts.predict_proba(log_features(p_te)))
    for est in (DirichletCalibrator(), MatrixScaler(input="probs"), VectorScaler()):
        s_cal, s_te = ((log_features(p_cal), log_features(p_te)) if isinstance(est, VectorScaler)
                       else (p_cal, p_te))
        ll = log_loss(y_te, est.fit(s_cal, y_cal).predict_proba(s_te))
        assert ll <= ll_ts + 0.02, type(est).__name__


def test_absent_class_keeps_a_finite_small_probability(synth):
    q, y = synth
    y = np.where(y == 1, 0, y)
    cal = DirichletCalibrator().fit(q, y)
    p = cal.predict_proba(q)
    assert np.isfinite(cal.coef_).all() and np.isfinite(p).all()
    assert p[:, 1].mean() < q[:, 1].mean()


def test_registry_default_is_first_and_every_method_fits_the_demo_classifiers():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    assert next(iter(METHODS)) == "dirichlet"
    X, y = load_digits(return_X_y=True)
    X_tr, X_cal, y_tr, y_cal = train_test_split(X, y, train_size=0.6, stratify=y, random_state=1)
    X_cal, y_cal = X_cal[:300], y_cal[:300]
    classifiers = [GaussianNB(), RandomForestClassifier(n_estimators=30, random_state=0),
                   make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))]
    for clf in classifiers:
        p = clf.fit(X_tr, y_tr).predict_proba(X_cal)
        for name, spec in METHODS.items():
            if spec.bayesian:  # sampled in the Bayesian tests, with small draws
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = make_calibrator(name).fit(p, y_cal)
            out = est.predict_proba(p)
            assert np.isfinite(out).all() and np.allclose(out.sum(axis=1), 1.0), name


# -- the small quality benchmark ---------------------------------------------------------
def _bench():
    path = ROOT / "benchmarks" / "bench_quality.py"
    spec = importlib.util.spec_from_file_location("bench_quality", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = mod
    spec.loader.exec_module(mod)
    return mod


SMALL_DATASETS = ("glass", "vehicle", "segment", "yeast")


@pytest.mark.slow
def test_small_quality_benchmark_default_never_hurts(shared_data, tmp_path):
    """The held-out benchmark on a few datasets (seed 0): the default is never worse than
    uncalibrated by more than 1 % where temperature scaling is not also worse, and never
    worse than temperature scaling by more than 10 %."""
    bench = _bench()
    out = tmp_path / "quality"
    bench.main(["--data", str(shared_data), "--out", str(out), "--seeds", "0", "--no-dnn",
                "--datasets", *SMALL_DATASETS, "--methods", "dirichlet", "temperature"])
    rows = bench.read_results(out / "results.jsonl")
    by = {}
    for r in rows:
        assert "error" not in r, r
        by.setdefault(r["case"], {})[r["method"]] = r["log_loss"]
    assert len(by) == 4 * len(SMALL_DATASETS)
    for case, v in by.items():
        unc, ts, d = v["uncalibrated"], v["temperature"], v["dirichlet"]
        if ts <= unc * 1.01:
            assert d <= unc * 1.01, case
        assert d <= ts * 1.1, case
    table = (out / "table.md").read_text()
    assert "| dirichlet |" in table and "mean rank" in table


def test_quality_breakdown_names_its_empty_cells():
    """A cell of the n x k grid without cases is named under the table, not left out silently."""
    rows = [{"case": case, "method": method, "n_cal": n, "k": k, "log_loss": loss}
            for case, n, k in (("a/nbayes/0", 50, 3), ("b/nbayes/0", 500, 8))
            for method, loss in (("uncalibrated", 1.0), ("dirichlet", 0.5))]
    text = _bench().breakdown(rows)
    assert "| 1-100 | 2-5 | 1 | **1.0** | 2.0 |" in text
    assert "| 301-1000 | 6-10 | 1 | **1.0** | 2.0 |" in text
    empty = text.split("No case falls in the cells ")[1]
    assert "n 101-300, k 6-10;" in empty and "n > 1000, k >= 11 (no row)" in empty
    assert "n 1-100, k 2-5" not in empty and "n 301-1000, k 6-10" not in empty


def test_the_paper_reproduction_keeps_the_papers_settings():
    """The new defaults do not reach the experiments: their methods pin the paper's settings."""
    from bayescal import EPS, GenerativeDirichletCalibrator
    from bayescal.calibrators.registry import ProbsToLogits
    from bayescal.experiments.calibrators import method_table

    table = method_table()
    inner = {name: (lambda e: e.estimator if isinstance(e, ProbsToLogits) else e)(
        m.build(m.candidates()[0], n_classes=3)) for name, m in table.items()}
    assert inner["dir_l2"].reg == "l2" and inner["dir_odir"].reg == "odir"
    assert inner["ms_odir"].reg == "odir"
    assert inner["vector"].reg == "none"
    assert isinstance(inner["dir_gen"], GenerativeDirichletCalibrator)
    assert inner["dir_gen"].prior is None
    q, y, _, _ = make_dirgen(200, 3, rng=np.random.default_rng(2))
    fitted = inner["dir_l2"].fit(q, y)
    assert fitted.eps_ == EPS  # the paper's floor, not the structured default's choice
