"""Bayesian model builders: identified coordinates, log-densities, modes, Hessians.

No sampling here: these tests compile PyMC log-densities and compare them.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from bayescal import make_dirgen
from bayescal.bayes.gauge import dirlin_gauge
from bayescal.bayes.laplace import dirgen_log_posterior, dirgen_mode
from bayescal.bayes.models import (
    dirgen_model,
    dirgen_rowwise_model,
    dirlin_model,
    dirlin_raw_model,
    structured_model,
)
from bayescal.bayes.priors import DirGenPrior, DirLinPrior, penalty_to_prior
from bayescal.dirichlet import SufficientStatistics
from bayescal.maps import dirlin_from_features, log_features
from bayescal.optimize import make_penalty, multinomial_objective

# every test here evaluates model graphs at a few points: no C / Numba compilation
pytestmark = pytest.mark.usefixtures("pytensor_py_linker")


def _stats(x, y):
    st = SufficientStatistics.from_features(x, y)
    return st.counts, st.sums


def _prior(k: int, kind: str, n: int = 200, lam: float = 0.1, mu: float = 0.05) -> DirLinPrior:
    """Priors of the ODIR / L2 penalties (DESIGN section 3), built by hand."""
    if kind == "odir":
        sd_W = np.full((k, k), np.sqrt(k * (k - 1) / (2 * n * lam)))
        sd_W[np.diag_indices(k)] = np.inf
        sd_b = np.full(k, np.sqrt(k / (2 * n * mu)))
        center_W = np.zeros((k, k))
    else:
        sd_W = np.full((k, k), np.sqrt(k * (k + 1) / (2 * n * lam)))
        sd_b = np.full(k, np.sqrt(k * (k + 1) / (2 * n * lam)))
        center_W = np.eye(k)
    return DirLinPrior(sd_W, center_W, sd_b, np.zeros(k))


@pytest.fixture(scope="module")
def data3():
    q, y, _, _ = make_dirgen(200, 3, rng=5)
    return log_features(q), y


def test_import_bayescal_does_not_import_pymc():
    code = (
        "import sys, bayescal; bayescal.__all__; "
        "assert 'BayesianDirichletCalibrator' in bayescal.__all__; "
        "bad = [m for m in ('pymc', 'arviz', 'pytensor') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_export():
    import bayescal
    from bayescal.bayes import BayesianDirichletCalibrator

    assert bayescal.BayesianDirichletCalibrator is BayesianDirichletCalibrator
    with pytest.raises(AttributeError, match="no attribute"):
        bayescal.NotAThing  # noqa: B018


@pytest.mark.parametrize("kind", ["odir", "l2"])
def test_gauge_projection_keeps_maps(kind, rng):
    k = 4
    prior = _prior(k, kind)
    gauge = dirlin_gauge(prior)
    assert gauge.dim == k * k - 1
    raw = rng.normal(size=(5, k * k + k))
    x = log_features(rng.dirichlet(np.ones(k), size=30))
    theta = gauge.from_raw(raw)
    back = gauge.to_raw(theta)
    for r, s in zip(raw, back, strict=True):
        W0, b0 = gauge.split(r)
        W1, b1 = gauge.split(s)
        np.testing.assert_allclose(
            dirlin_from_features(x, W1, b1), dirlin_from_features(x, W0, b0), atol=1e-12
        )
    # from_raw(to_raw(theta)) is the identity on identified coordinates
    np.testing.assert_allclose(gauge.from_raw(gauge.to_raw(theta)), theta, atol=1e-10)


def test_gauge_rejects_unheld_shift():
    k = 3
    prior = _prior(k, "odir")
    flat_b = DirLinPrior(prior.sd_W, prior.center_W, np.full(k, np.inf), prior.center_b)
    with pytest.raises(ValueError, match="prior on b is flat"):
        dirlin_gauge(flat_b)


@pytest.mark.parametrize("kind", ["odir", "l2"])
def test_identified_model_equals_raw_model_up_to_constant(kind, data3, rng):
    """The identified model's log-density is the raw model's on the gauge plane."""
    x, y = data3
    k = x.shape[1]
    prior = _prior(k, kind)
    gauge = dirlin_gauge(prior)
    m_id = dirlin_model(x, y, gauge)
    m_lean = dirlin_model(x, y, gauge, lean=True)
    m_cat = dirlin_model(x, y, gauge, lean=False)
    m_raw = dirlin_raw_model(x, y, prior)
    lp_id, lp_cat, lp_raw = (m.compile_logp() for m in (m_id, m_cat, m_raw))
    diffs, diffs_cat = [], []
    for _ in range(4):
        theta = 0.3 * rng.normal(size=gauge.dim)
        W, b = gauge.split(gauge.to_raw(theta))
        pt_id = {"theta": theta[: gauge.n_gauss]}
        if gauge.n_flat:
            pt_id["theta_flat"] = theta[gauge.n_gauss :]
        if kind == "odir":
            off = ~np.eye(k, dtype=bool)
            pt_raw = {
                "W_gauss": W[off],
                "W_flat": W[~off],
                "b": b,
            }
        else:
            pt_raw = {"W": W, "b": b}
        diffs.append(lp_id(pt_id) - lp_raw(pt_raw))
        diffs_cat.append(lp_id(pt_id) - lp_cat(pt_id))
        assert m_lean is not None
    np.testing.assert_allclose(diffs, diffs[0], atol=1e-8)
    np.testing.assert_allclose(diffs_cat, diffs_cat[0], atol=1e-8)


def test_whitened_model_is_affine_reparametrisation(data3, rng):
    x, y = data3
    gauge = dirlin_gauge(_prior(3, "odir"))
    loc = 0.1 * rng.normal(size=gauge.dim)
    chol = np.tril(rng.normal(size=(gauge.dim, gauge.dim))) * 0.2 + np.eye(gauge.dim)
    lp_w = dirlin_model(x, y, gauge, whiten=(loc, chol)).compile_logp()
    lp = dirlin_model(x, y, gauge).compile_logp()
    diffs = []
    for _ in range(4):
        z = rng.normal(size=gauge.dim)
        theta = loc + chol @ z
        diffs.append(
            lp_w({"z": z})
            - lp({"theta": theta[: gauge.n_gauss], "theta_flat": theta[gauge.n_gauss :]})
        )
    np.testing.assert_allclose(diffs, diffs[0], atol=1e-8)


def test_solver_hessian_is_raw_model_posterior_hessian(data3, rng):
    """n x the solver's Hessian equals minus PyMC's d2logp of the raw model.

    This checks the prior reading of the penalty (sd^2 = 1 / (2 n prec)) used by
    the Laplace approximation and the whitening.
    """
    x, y = data3
    n, k = x.shape
    lam = 0.1
    pen = make_penalty(k, "l2", reg_lambda=lam, center="identity")
    prior = penalty_to_prior(pen, n)
    np.testing.assert_allclose(prior.sd_W, _prior(k, "l2", n=n, lam=lam).sd_W, rtol=1e-12)
    model = dirlin_raw_model(x, y, prior)
    W = np.eye(k) + 0.2 * rng.normal(size=(k, k))
    b = 0.1 * rng.normal(size=k)
    d2 = model.compile_d2logp(negate_output=False)({"W": W, "b": b})
    theta = np.concatenate([W.ravel(), b])
    _, _, H = multinomial_objective(theta, x, y, structure="full", penalty=pen, hessian=True)
    np.testing.assert_allclose(n * H, -d2, rtol=1e-9, atol=1e-9)


def test_sufficient_statistics_equal_rowwise_dirichlet(rng):
    """DirGen through (n_j, S_j) equals the row-by-row pm.Dirichlet log-density."""
    k = 4
    q, y, _, _ = make_dirgen(300, k, rng=3)
    q = np.clip(q, 1e-12, None)
    q /= q.sum(axis=1, keepdims=True)  # pm.Dirichlet gives -inf at exact zeros
    prior = DirGenPrior(0.0, 1.5, 1.0)
    counts, S = _stats(np.log(q), y)
    m_ss = dirgen_model(counts, S, prior)
    m_row = dirgen_rowwise_model(q, y, prior)
    lp_ss, lp_row = m_ss.compile_logp(), m_row.compile_logp()
    diffs = []
    for _ in range(5):
        point = {
            "log_alpha": rng.normal(0.0, 0.7, size=(k, k)),
            "pi_simplex__": rng.normal(size=k - 1),
        }
        diffs.append(lp_ss(point) - lp_row(point))
    np.testing.assert_allclose(diffs, diffs[0], atol=1e-7)


def test_dirgen_mode_is_stationary_and_hessian_exact():
    k = 3
    q, y, _, _ = make_dirgen(500, k, rng=11)
    counts, S = _stats(log_features(q), y)
    prior = DirGenPrior(0.0, 1.5, 1.0)
    u, neg_hess = dirgen_mode(counts, S, prior)
    for j in range(k):
        def f(v, j=j):
            w = u.copy()
            w[j] = v
            return dirgen_log_posterior(w, counts, S, prior)[j]

        g = approx_fprime(u[j], f, 1e-6)
        assert np.max(np.abs(g)) < 1e-3 * counts[j]
        def grad_i(v, i, f=f):
            return approx_fprime(v, f, 1e-5)[i]

        num_h = np.array([approx_fprime(u[j], grad_i, 1e-5, i) for i in range(k)])
        np.testing.assert_allclose(neg_hess[j], -num_h, rtol=1e-3, atol=1e-2)


def test_conditional_whitening_is_an_exact_change_of_variables(rng):
    """The whitened structured model's density is the flat one's times the Jacobian.

    ``logp_w(eta, xi) = logp(theta(eta, xi)) + ln|det d theta / d(eta, xi)|``
    at random points, the Jacobian from central differences of the model's
    own ``theta`` (``P``, and so the Jacobian, depends on ``eta``).
    """
    from bayescal.bayes.hierarchical import StructuredPrior, n_params
    from bayescal.bayes.laplace import conditional_whitening

    q, y, _, _ = make_dirgen(40, 3, rng=5)
    q[0] = [0.0, 0.3, 0.7]  # an exact zero: features at ln(EPS)
    x = log_features(q)
    prior = StructuredPrior()
    dim = n_params(prior, 3)
    mode = 0.3 * rng.normal(size=dim)
    whiten = conditional_whitening(mode, x, y, prior)
    mw = structured_model(x, y, prior, whiten=whiten)
    mf = structured_model(x, y, prior)
    lp_w, lp_f = mw.compile_logp(), mf.compile_logp()
    theta_of = mw.compile_fn(mw["theta"], inputs=[mw["eta"], mw["xi"]], point_fn=False)
    for _ in range(3):
        u = 0.7 * rng.normal(size=dim)
        t = np.asarray(theta_of(u[:4], u[4:]))
        h = 1e-5
        jac = np.column_stack([
            (np.asarray(theta_of((u + h * e)[:4], (u + h * e)[4:]))
             - np.asarray(theta_of((u - h * e)[:4], (u - h * e)[4:]))) / (2 * h)
            for e in np.eye(dim)])
        logdet = np.linalg.slogdet(jac)[1]
        got = lp_w({"eta": u[:4], "xi": u[4:]})
        np.testing.assert_allclose(got, lp_f({"theta": t}) + logdet, rtol=0, atol=1e-6)


@pytest.mark.parametrize("k, prior_kw", [
    (3, {}),
    (4, {"tau_scale": (0.5, 1.0, 2.0)}),
    (3, {"kind": "fixed", "tau": (0.7, 1.3, 0.4)}),
])
def test_centred_coordinates_hold_the_same_posterior(k, prior_kw, rng):
    """Centred and non-centred coordinates: one map and one density, Jacobian included.

    ``log_prior(theta) = centred_log_prior(c(theta)) + ln|det dc/dtheta|``
    exactly (no constant: both are normalised alike), with the Jacobian of
    :func:`to_centred` from central differences, and the maps equal up to
    the constants that leave every map unchanged.
    """
    from scipy.special import softmax

    from bayescal.bayes.hierarchical import (
        StructuredPrior,
        centred_log_prior,
        centred_map,
        log_prior,
        n_params,
        structured_map,
        to_centred,
    )

    prior = StructuredPrior(**prior_kw)
    dim = n_params(prior, k)
    x = np.log(rng.dirichlet(np.ones(k), size=5))
    for _ in range(4):
        t = 0.7 * rng.normal(size=dim)
        c = to_centred(t, prior, k)
        s1, W1, b1 = structured_map(t, prior, k)
        s2, W2, b2 = centred_map(c, prior, k)
        assert s1 == pytest.approx(s2, rel=1e-12)
        np.testing.assert_allclose(softmax(x @ W1.T + b1, axis=1),
                                   softmax(x @ W2.T + b2, axis=1), rtol=0, atol=1e-12)
        h = 1e-6
        jac = np.column_stack([(to_centred(t + h * e, prior, k) - to_centred(t - h * e, prior, k))
                               / (2 * h) for e in np.eye(dim)])
        np.testing.assert_allclose(log_prior(t, prior, k),
                                   centred_log_prior(c, prior, k) + np.linalg.slogdet(jac)[1],
                                   rtol=0, atol=1e-7)


@pytest.mark.parametrize(("k", "prior_kw"), [
    (4, {}),
    (3, {"kind": "fixed", "tau": (0.7, 1.3, 0.4)}),
    (5, {"kind": "fixed", "tau": (2.0, 0.2, 1.0)}),  # diagonal tighter than off-diagonal
])
def test_centred_prior_precision_is_the_prior_quadratic(k, prior_kw, rng):
    """The closed-form Gaussian of the centred coefficients given ``s`` and ``tau``.

    ``centred_log_prior`` minus its value at the mean ``s u0`` equals
    ``-0.5 (c - s u0)' Lambda (c - s u0)`` exactly, with
    ``Lambda = alpha I + (lam_b - alpha) E_b + g U U'`` (scalar plus rank 2k - 1).
    """
    from bayescal.bayes.hierarchical import (
        StructuredPrior,
        centred_log_prior,
        centred_prior_factors,
        centred_prior_precision,
        n_params,
    )

    prior = StructuredPrior(**prior_kw)
    m = k * (k - 1) + k - 1
    n_hyper = n_params(prior, k) - m
    u0, Y = centred_prior_factors(k)
    E = np.zeros((m, m))
    E[k * (k - 1):, k * (k - 1):] = np.eye(k - 1)
    U = Y[:, k - 1:]
    assert np.allclose(U.T @ U, (1 - 1 / k) * np.eye(k)) and np.allclose(U.T @ E, 0)
    for _ in range(3):
        eta = 0.6 * rng.normal(size=n_hyper)
        s, alpha, lam_b, g = centred_prior_precision(np.concatenate([eta, np.zeros(m)]), prior, k)
        lam = alpha * np.eye(m) + (lam_b - alpha) * E + g * U @ U.T
        for _ in range(3):
            c = s * u0 + rng.normal(size=m)
            dev = c - s * u0
            got = (centred_log_prior(np.concatenate([eta, c]), prior, k)
                   - centred_log_prior(np.concatenate([eta, s * u0]), prior, k))
            assert got == pytest.approx(-0.5 * dev @ lam @ dev, rel=1e-10)


def test_centred_prior_quadratic_is_exact_at_far_apart_scales():
    """Group scales 1e-3 and 1e-9 apart (a chain's start reached them, k = 10, n = 100).

    The quadratic form of ``centred_log_prior`` once came from the difference of
    two sums of order ``lambda_d ~ 1e20``: about -4000 at the prior mean, where it
    is 0, a spurious mode of the posterior in which that chain stalled (step size
    1e-15). Checked against the closed form at displacements whose exact value is
    of order one in every direction (``dev = L^-T z``, ``Lambda = L L'``).
    """
    from bayescal.bayes.hierarchical import (
        StructuredPrior,
        _log_group_sds,
        centred_log_prior,
        centred_prior_factors,
        centred_prior_precision,
    )

    k, prior = 10, StructuredPrior()
    m = k * (k - 1) + k - 1
    eta = np.array([-0.154, -7.026, -21.531, -0.344])  # the stalled chain's hyperparameters
    u0, Y = centred_prior_factors(k)
    E = np.zeros((m, m))
    E[k * (k - 1):, k * (k - 1):] = np.eye(k - 1)
    U = Y[:, k - 1:]
    s, alpha, lam_b, g = centred_prior_precision(np.concatenate([eta, np.zeros(m)]), prior, k)
    log_sd_o, log_sd_d, _ = _log_group_sds(np.concatenate([eta, np.zeros(m)]), prior, k)
    assert 2 * (log_sd_o - log_sd_d) > np.log(1e11)  # lambda_d / lambda_o: the cancellation's
    lam = alpha * (np.eye(m) - E) + lam_b * E + g * U @ U.T
    L = np.linalg.cholesky(lam)
    at_mean = centred_log_prior(np.concatenate([eta, s * u0]), prior, k)
    rng = np.random.default_rng(3)
    for _ in range(5):
        z = rng.normal(size=m)
        dev = np.linalg.solve(L.T, z)
        got = centred_log_prior(np.concatenate([eta, s * u0 + dev]), prior, k) - at_mean
        assert got == pytest.approx(-0.5 * z @ z, rel=1e-5)


def test_centred_coordinates_need_every_group_free():
    from bayescal.bayes.hierarchical import StructuredPrior, centred_map

    prior = StructuredPrior(kind="fixed", tau=(0.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="every group free"):
        centred_map(np.zeros(7), prior, 3)


def test_centred_model_density_is_the_centred_log_posterior(rng):
    """The PyMC model with a CentredWhitening: logp(z) = log posterior(loc + chol z) + const."""
    from bayescal.bayes.hierarchical import StructuredPrior, n_params
    from bayescal.bayes.models import CentredWhitening, structured_log_posterior

    q, y, _, _ = make_dirgen(60, 3, rng=4)
    x = log_features(q)
    prior = StructuredPrior()
    dim = n_params(prior, 3)
    loc = 0.3 * rng.normal(size=dim)
    chol = np.tril(0.2 * rng.normal(size=(dim, dim))) + 0.5 * np.eye(dim)
    lp = structured_model(x, y, prior, whiten=CentredWhitening(loc, chol)).compile_logp()
    f = structured_log_posterior(x, y, prior, centred=True)
    z = rng.normal(size=(3, dim))
    got = np.array([lp({"z": v}) for v in z])
    want = np.array([f(loc + chol @ v)[0] for v in z])
    np.testing.assert_allclose(np.diff(got), np.diff(want), rtol=0, atol=1e-8)


def test_centred_whitening_with_fixed_scales():
    """prior="fixed" (only s sampled among the hyperparameters) at a data-dominated n.

    The centred check reads the Laplace sd of ln s and of each sampled ln tau;
    with none sampled it used to fail on ``max`` of a single number.
    """
    from bayescal.bayes.hierarchical import StructuredPrior, n_params
    from bayescal.bayes.laplace import centred_whitening, conditional_whitening, structured_mode
    from bayescal.bayes.models import CentredWhitening, structured_log_posterior

    q, y, _, _ = make_dirgen(3000, 3, rng=[3, 1])
    x = log_features(q)
    prior = StructuredPrior(kind="fixed", tau=(100.0, 100.0, 100.0))
    theta, _, _ = structured_mode(structured_log_posterior(x, y, prior),
                                  np.zeros(n_params(prior, 3)))
    whiten = centred_whitening(theta, x, y, prior, conditional_whitening(theta, x, y, prior))
    assert isinstance(whiten, CentredWhitening)
    assert whiten.loc.shape == (n_params(prior, 3),)


def test_data_prior_ratio_scales_with_the_data():
    """The smallest data-to-prior ratio is linear in the data: repeating every row
    twice doubles the Fisher information at the same mode, and so the ratio; and
    it is the smallest eigenvalue of the data's precision in the prior's units."""
    from bayescal.bayes.hierarchical import (
        StructuredPrior,
        group_scales,
        linear_part,
        n_params,
    )
    from bayescal.bayes.laplace import conditional_whitening, data_prior_ratio, structured_mode
    from bayescal.bayes.models import structured_log_posterior

    q, y, _, _ = make_dirgen(400, 3, rng=[5, 2])
    x = log_features(q)
    prior = StructuredPrior()
    theta, _, _ = structured_mode(structured_log_posterior(x, y, prior),
                                  np.zeros(n_params(prior, 3)))
    once = data_prior_ratio(theta, prior, conditional_whitening(theta, x, y, prior))
    x2, y2 = np.concatenate([x, x]), np.concatenate([y, y])
    twice = data_prior_ratio(theta, prior, conditional_whitening(theta, x2, y2, prior))
    assert once > 0
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-10)
    s = float(np.exp(prior.log_scale(theta[0])))
    lin = linear_part(s, [float(t) for t in group_scales(theta, prior, 3)], prior, 3)
    J, F = lin.dense(), conditional_whitening(theta, x, y, prior).fisher
    np.testing.assert_allclose(once, np.linalg.eigvalsh(J.T @ F @ J).min(), rtol=1e-10)
