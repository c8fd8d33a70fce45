"""The penalised multinomial-logistic solver: derivatives, optimality, invariances."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from bayescal.datasets import make_dirgen
from bayescal.maps import log_features
from bayescal.optimize import (
    FitResult,
    QuadraticPenalty,
    fit_multinomial,
    make_penalty,
    multinomial_hessp,
    multinomial_log_loss,
    multinomial_objective,
    n_params,
    pack_params,
    unpack_params,
)

STRUCTURES = ("full", "diagonal", "scalar")


def _penalties(k: int) -> dict[str, QuadraticPenalty | None]:
    return {
        "odir": make_penalty(k, "odir", 0.7, 0.3),
        "l2": make_penalty(k, "l2", 0.5),
        "l2-identity": make_penalty(k, "l2", 0.5, center="identity"),
        "structured": make_penalty(k, "structured", 0.7, 0.3, reg_diag=0.5, n_samples=120,
                                   scale=0.8),
        "none": None,
    }


@pytest.fixture(scope="module")
def small() -> tuple[np.ndarray, np.ndarray]:
    q, y, _, _ = make_dirgen(120, 4, rng=np.random.default_rng(3))
    return log_features(q), y


@pytest.fixture(scope="module")
def cifar10(shared_data) -> tuple[np.ndarray, np.ndarray]:
    with np.load(shared_data / "dnn" / "netcal_cifar10_wideresnet16-4.npz") as f:
        probs, y, idx = f["probs"].astype(np.float64), f["y"], f["idx_val"]
    q = probs[idx] / probs[idx].sum(axis=1, keepdims=True)  # float32 rows, renormalised in f64
    return log_features(q), y[idx]


# -- penalties -----------------------------------------------------------------
def test_odir_penalty_matches_formula(rng):
    k, lam, mu = 5, 2.5, 0.4
    pen = make_penalty(k, "odir", lam, mu)
    W, b = rng.normal(size=(k, k)), rng.normal(size=k)
    off = W - np.diag(np.diag(W))
    expected = lam / (k * (k - 1)) * np.sum(off**2) + mu / k * np.sum(b**2)
    assert pen.value(W, b) == pytest.approx(expected, rel=1e-12)
    # mu defaults to lambda; the diagonal is free whatever the centre
    assert np.array_equal(make_penalty(k, "odir", lam).prec_b, np.full(k, lam / k))
    assert make_penalty(k, "odir", lam, mu, center="identity").value(W, b) == pytest.approx(
        expected, rel=1e-12
    )


def test_l2_penalty_matches_formula_and_centre(rng):
    k, lam = 4, 3.0
    W, b = rng.normal(size=(k, k)), rng.normal(size=k)
    c = lam / (k * (k + 1))
    assert make_penalty(k, "l2", lam).value(W, b) == pytest.approx(
        c * (np.sum(W**2) + np.sum(b**2)), rel=1e-12
    )
    assert make_penalty(k, "l2", lam, center="identity").value(W, b) == pytest.approx(
        c * (np.sum((W - np.eye(k)) ** 2) + np.sum(b**2)), rel=1e-12
    )
    assert make_penalty(k, "none").value(W, b) == 0.0


def test_prior_sd_is_gaussian_reading():
    k, n, lam, mu = 4, 500, 2.0, 0.5
    sd_W, sd_b = make_penalty(k, "odir", lam, mu).prior_sd(n)
    assert np.allclose(sd_W[~np.eye(k, dtype=bool)], np.sqrt(k * (k - 1) / (2 * n * lam)))
    assert np.all(np.isinf(np.diag(sd_W)))
    assert np.allclose(sd_b, np.sqrt(k / (2 * n * mu)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "ridge"}, "kind must be one of"),
        ({"reg_lambda": -1.0}, "reg_lambda must be a finite non-negative"),
        ({"reg_lambda": np.nan}, "reg_lambda must be a finite non-negative"),
        ({"kind": "odir", "reg_mu": -2.0}, "reg_mu must be a finite non-negative"),
        ({"kind": "l2", "reg_mu": 1.0}, "reg_mu is only used by kind='odir'"),
        ({"center": "mean"}, "center must be one of"),
    ],
)
def test_make_penalty_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_penalty(3, **kwargs)


def test_make_penalty_bad_k():
    with pytest.raises(ValueError, match="k must be at least 2"):
        make_penalty(1)
    with pytest.raises(ValueError, match="prec_W must be >= 0"):
        QuadraticPenalty(-np.ones((2, 2)), np.zeros(2), np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="center_b must have shape"):
        QuadraticPenalty(np.ones((2, 2)), np.zeros(2), np.zeros((2, 2)), np.zeros(3))


# -- packing ---------------------------------------------------------------------
@pytest.mark.parametrize("structure", STRUCTURES)
def test_pack_unpack_round_trip(structure, rng):
    k = 4
    theta = rng.normal(size=n_params(structure, k))
    W, b = unpack_params(theta, structure, k)
    assert np.array_equal(pack_params(W, b, structure), theta)
    if structure == "full":
        assert W[2, 1] == theta[2 * k + 1] and b[3] == theta[k * k + 3]


def test_pack_rejects_wrong_structure():
    with pytest.raises(ValueError, match="W must be diagonal"):
        pack_params(np.ones((3, 3)), np.zeros(3), "diagonal")
    with pytest.raises(ValueError, match="structure must be one of"):
        unpack_params(np.zeros(3), "banded", 3)


# -- derivatives ------------------------------------------------------------------
@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("pen_name", ["odir", "l2", "l2-identity", "structured", "none"])
def test_gradient_hessian_hvp_match_finite_differences(small, structure, pen_name, rng):
    x, y = small
    k = x.shape[1]
    pen = _penalties(k)[pen_name]
    m = n_params(structure, k)
    theta = rng.normal(scale=0.5, size=m) + (1.0 if structure == "scalar" else 0.0)
    sw = rng.uniform(0.2, 2.0, size=len(y))
    kw = {"structure": structure, "penalty": pen, "sample_weight": sw}
    loss, grad, hess = multinomial_objective(theta, x, y, hessian=True, **kw)
    h = 1e-6
    eye = np.eye(m)
    fd_grad = np.array([
        (multinomial_objective(theta + h * e, x, y, **kw)[0]
         - multinomial_objective(theta - h * e, x, y, **kw)[0]) / (2 * h)
        for e in eye
    ])
    fd_hess = np.array([
        (multinomial_objective(theta + h * e, x, y, **kw)[1]
         - multinomial_objective(theta - h * e, x, y, **kw)[1]) / (2 * h)
        for e in eye
    ])
    assert np.allclose(grad, fd_grad, atol=1e-7, rtol=1e-6)
    assert np.allclose(hess, fd_hess, atol=1e-7, rtol=1e-6)
    assert np.allclose(hess, hess.T, atol=1e-13)
    v = rng.normal(size=m)
    assert np.allclose(multinomial_hessp(theta, v, x, y, **kw), hess @ v, atol=1e-12, rtol=1e-10)
    # the objective is the weighted mean log-loss plus the penalty
    W, b = unpack_params(theta, structure, k)
    penalty = 0.0 if pen is None else pen.value(W, b)
    assert loss == pytest.approx(multinomial_log_loss(x, y, W, b, sw) + penalty, rel=1e-12)


# -- optimality -------------------------------------------------------------------
@pytest.mark.parametrize("structure", STRUCTURES)
def test_first_order_optimality_on_real_dnn_outputs(cifar10, structure):
    x, y = cifar10
    pen = make_penalty(10, "odir", 1e-2, 1e-2)
    res = fit_multinomial(x, y, structure=structure, penalty=pen)
    assert res.converged and res.grad_norm <= 1e-8
    _, grad = multinomial_objective(res.theta, x, y, structure=structure, penalty=pen)
    assert np.max(np.abs(grad)) <= 1e-8
    assert res.loss == pytest.approx(multinomial_objective(res.theta, x, y, structure=structure,
                                                           penalty=pen)[0], abs=1e-15)


@pytest.mark.parametrize(
    ("structure", "pen_name"), [("full", "odir"), ("full", "l2"), ("diagonal", "none"),
                                ("scalar", "none")]
)
def test_objective_no_worse_than_scipy_lbfgs(cifar10, structure, pen_name):
    x, y = cifar10
    x, y = x[:2000], y[:2000]
    pen = _penalties(10)[pen_name]
    res = fit_multinomial(x, y, structure=structure, penalty=pen)

    def fun(theta):
        return multinomial_objective(theta, x, y, structure=structure, penalty=pen)

    theta0 = fit_multinomial(x, y, structure=structure, penalty=pen, max_iter=1, warn=False).theta
    ref = scipy.optimize.minimize(fun, theta0, jac=True, method="L-BFGS-B",
                                  options={"maxiter": 20000, "ftol": 0.0, "gtol": 1e-9})
    assert res.loss <= ref.fun + 1e-9


@pytest.mark.parametrize("structure", STRUCTURES)
def test_cg_hessian_product_matches_exact_one(structure):
    """CG's product (float32 for a full W) equals the exact float64 one to float32 rounding."""
    from bayescal.optimize import _make_problem

    rng = np.random.default_rng(3)
    q, y, _, _ = make_dirgen(400, 12, rng=rng)
    x = log_features(q)
    pen = _penalties(12)["structured"]
    prob = _make_problem(x, y, structure, pen, rng.uniform(0.5, 2.0, size=len(y)))
    st = prob.state(rng.normal(scale=0.3, size=prob.m) + (1.0 if structure == "scalar" else 0))
    for _ in range(3):
        v = rng.normal(size=prob.m)
        exact, cg = prob.hessp(st, v), prob.hessp(st, v, np.float32)
        assert cg.dtype == np.float64
        assert np.linalg.norm(cg - exact) <= 1e-5 * np.linalg.norm(exact)
        if structure != "full":  # only a full W's products are worth float32
            assert np.array_equal(cg, exact)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_float32_newton_hessian_matches_exact_one(structure):
    """Dense Newton's float32 Hessian is float64 and within float32 rounding of the exact one."""
    from bayescal.optimize import _make_problem

    rng = np.random.default_rng(4)
    q, y, _, _ = make_dirgen(600, 9, rng=rng)
    prob = _make_problem(log_features(q), y, structure, _penalties(9)["structured"],
                         rng.uniform(0.5, 2.0, size=len(y)))
    st = prob.state(rng.normal(scale=0.3, size=prob.m) + (1.0 if structure == "scalar" else 0))
    exact, low = prob.hess_dense(st), prob.hess_dense(st, np.float32)
    assert low.dtype == np.float64 and low.shape == exact.shape
    assert np.array_equal(low, low.T) and np.array_equal(exact, exact.T)
    assert np.linalg.norm(low - exact) <= 1e-5 * np.linalg.norm(exact)
    if structure != "full":  # only a full W's Hessian is worth float32
        assert np.array_equal(low, exact)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), k=st.integers(1, 45), seed=st.integers(0, 2**16))
def test_row_reductions_equal_numpy(n, k, seed):
    """The BLAS / column-loop row reductions of the solver's hot path equal NumPy's."""
    from bayescal.optimize import col_sum, row_max, row_sum

    z = np.random.default_rng(seed).normal(scale=30.0, size=(n, k))
    assert np.array_equal(row_max(z), z.max(axis=1))
    np.testing.assert_allclose(row_sum(z), z.sum(axis=1), rtol=1e-12, atol=1e-12 * k * 30)
    np.testing.assert_allclose(col_sum(z), z.sum(axis=0), rtol=1e-12, atol=1e-12 * n * 30)


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("pen_name", ["odir", "l2-identity", "none"])
def test_newton_cg_reaches_same_optimum(small, structure, pen_name):
    x, y = small
    pen = _penalties(4)[pen_name]
    kw = {"structure": structure, "penalty": pen}
    dense = fit_multinomial(x, y, solver="newton", **kw)
    cg = fit_multinomial(x, y, solver="newton-cg", **kw)
    assert cg.converged and cg.solver == "newton-cg" and cg.n_hessp > 0
    assert dense.n_hess > 0 and dense.n_hessp == 0
    assert abs(cg.loss - dense.loss) < 1e-13
    z, z_cg = x @ dense.W.T + dense.b, x @ cg.W.T + cg.b
    assert np.allclose(z - z.mean(axis=1, keepdims=True), z_cg - z_cg.mean(axis=1, keepdims=True),
                       atol=1e-6)
    if pen is not None:  # a penalised optimum is unique
        assert np.allclose(cg.W, dense.W, atol=1e-7) and np.allclose(cg.b, dense.b, atol=1e-7)


@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), kind=st.sampled_from(["odir", "l2"]))
def test_relabelling_property(seed, k, kind):
    """Hypothesis: for any data, penalty and relabelling, the fitted map permutes."""
    rng = np.random.default_rng(seed)
    q, y, _, _ = make_dirgen(60, k, rng=rng)
    x = log_features(q)
    perm = rng.permutation(k)
    pen = make_penalty(k, kind, 0.05)
    res = fit_multinomial(x, y, penalty=pen)
    res_p = fit_multinomial(x[:, perm], np.argsort(perm)[y], penalty=pen)
    assert np.allclose(res_p.W, res.W[np.ix_(perm, perm)], atol=1e-7)
    assert np.allclose(res_p.b, res.b[perm], atol=1e-7)


def test_starts_at_identity_and_warm_starts(small):
    x, y = small
    pen = make_penalty(4, "odir", 1e-1, 1e-1)
    res = fit_multinomial(x, y, penalty=pen)
    again = fit_multinomial(x, y, penalty=pen, init=res)
    assert again.n_iter == 0 and again.converged
    first = fit_multinomial(x, y, penalty=pen, max_iter=1, warn=False)
    assert first.n_iter == 1
    # max_iter=0 is not allowed, but the identity is where the first step starts from
    loss0 = multinomial_objective(
        np.concatenate([np.eye(4).ravel(), np.zeros(4)]), x, y, penalty=pen
    )[0]
    assert first.loss < loss0


def test_unpenalised_full_fit_is_invariant_to_row_shifts(small):
    """Without a penalty, W + 1 v' and b + c give the same map: the flat directions are fine."""
    x, y = small
    res = fit_multinomial(x, y)
    assert res.converged
    shifted = (res.W + 3.0, res.b - 1.0)
    assert multinomial_log_loss(x, y, *shifted) == pytest.approx(res.loss, abs=1e-12)


@pytest.mark.parametrize("pen_name", ["odir", "l2", "l2-identity", "structured", "none"])
def test_relabelling_classes_permutes_the_fit_exactly(small, pen_name, rng):
    x, y = small
    k = x.shape[1]
    perm = rng.permutation(k)
    inv = np.argsort(perm)
    pen = _penalties(k)[pen_name]
    res = fit_multinomial(x, y, penalty=pen)
    res_p = fit_multinomial(x[:, perm], inv[y], penalty=pen)
    z = x @ res.W.T + res.b
    z_p = x[:, perm] @ res_p.W.T + res_p.b
    p = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    p_p = np.exp(z_p - np.logaddexp.reduce(z_p, axis=1, keepdims=True))
    assert np.allclose(p_p, p[:, perm], atol=1e-10)
    if pen is not None:  # penalised: the parameters themselves are identified
        assert np.allclose(res_p.W, res.W[np.ix_(perm, perm)], atol=1e-8)


def test_missing_class_stays_finite(small):
    x, y = small
    y = np.where(y == 2, 0, y)
    for pen in (make_penalty(4, "odir", 1e-2, 1e-2), None):
        res = fit_multinomial(x, y, penalty=pen)
        assert res.converged and np.isfinite(res.W).all() and np.isfinite(res.b).all()
        z = x @ res.W.T + res.b
        p = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
        assert p[:, 2].max() < 1e-6


def test_sample_weight_equals_repetition(small, rng):
    x, y = small
    w = rng.integers(0, 4, size=len(y))
    pen = make_penalty(4, "odir", 1e-2, 1e-2)
    weighted = fit_multinomial(x, y, penalty=pen, sample_weight=w)
    repeated = fit_multinomial(np.repeat(x, w, axis=0), np.repeat(y, w), penalty=pen)
    assert np.allclose(weighted.W, repeated.W, atol=1e-8)
    assert weighted.loss == pytest.approx(repeated.loss, abs=1e-12)


def test_scalar_bounds_give_constrained_optimum(rng):
    x = rng.normal(size=(200, 3)) * 5.0
    y = x.argmax(axis=1)  # separable: the unbounded inverse temperature diverges
    res = fit_multinomial(x, y, structure="scalar", bounds=(0.1, 20.0))
    assert res.converged and res.theta[0] == 20.0
    _, g = multinomial_objective(res.theta, x, y, structure="scalar")
    assert g[0] < 0  # it would go further without the bound


def test_convergence_warning_names_the_setting(small):
    x, y = small
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        res = fit_multinomial(x, y, penalty=make_penalty(4, "odir", 1e-3), max_iter=1)
    assert not res.converged and "max_iter" in res.message
    assert isinstance(res, FitResult)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"structure": "banded"}, "structure must be one of"),
        ({"max_iter": 0}, "max_iter must be a positive integer"),
        ({"tol": 0.0}, "tol must be a finite positive"),
        ({"solver": "lbfgs"}, "solver must be one of"),
        ({"penalty": "odir"}, "penalty must be a QuadraticPenalty"),
        ({"penalty": make_penalty(3)}, "penalty is for 3 classes but x has 4"),
        ({"init": np.zeros(5)}, r"init must be None, a FitResult"),
        ({"init": (np.eye(3), np.zeros(3))}, r"init \(W, b\) must have shapes"),
        ({"bounds": (1.0, 2.0)}, "bounds are only supported for structure='scalar'"),
        ({"structure": "scalar", "bounds": (2.0, 1.0)}, "bounds must be finite with lo < hi"),
        ({"sample_weight": -np.ones(120)}, "sample_weight must be finite and >= 0"),
        ({"sample_weight": np.ones(3)}, r"sample_weight must have shape \(120,\)"),
    ],
)
def test_fit_multinomial_bad_input(small, kwargs, match):
    x, y = small
    with pytest.raises(ValueError, match=match):
        fit_multinomial(x, y, **kwargs)


def test_fit_multinomial_bad_data(small):
    x, y = small
    with pytest.raises(ValueError, match="x contains NaN or inf"):
        fit_multinomial(np.where(x < -5, np.nan, x), y)
    with pytest.raises(ValueError, match="y has labels outside the classes 0..3"):
        fit_multinomial(x, y + 1)
    with pytest.raises(ValueError, match="y has 119 labels but the scores have 120 rows"):
        fit_multinomial(x, y[1:])
