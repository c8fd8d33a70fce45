"""Large k: the cheap preconditioners, per-class evidence blocks and the large-k default.

Each fast path is checked against a slower exact one on the same objective:
dense Newton, scipy's trust-region Krylov solver, the dense Hessian.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import bayescal.optimize as optimize
import bayescal.structured as structured
from bayescal import DirichletCalibrator, MatrixScaler, TemperatureScaler, log_features
from bayescal.datasets import make_dnn_scores
from bayescal.optimize import (
    fit_multinomial,
    log_evidence,
    make_penalty,
    multinomial_hessp,
    multinomial_objective,
)
from bayescal.structured import fit_structured


def _data(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    q, y = make_dnn_scores(n, k, rng=seed)
    return log_features(q), y


def _penalty(k: int, n: int) -> optimize.QuadraticPenalty:
    return make_penalty(k, "structured", 2.0, 5.0, reg_diag=1.0, n_samples=n, scale=0.8)


def test_make_dnn_scores_is_an_overconfident_network():
    q, y = make_dnn_scores(6000, 1000, rng=1)
    assert q.shape == (6000, 1000) and y.shape == (6000,)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    acc, conf = np.mean(q.argmax(axis=1) == y), q.max(axis=1).mean()
    assert 0.70 < acc < 0.80 and 0.80 < conf < 0.90 and conf > acc + 0.05
    x = log_features(q)
    assert 1.1 < TemperatureScaler().fit(x, y).temperature_ < 1.3
    q2, y2 = make_dnn_scores(6000, 1000, rng=1)
    np.testing.assert_array_equal(q, q2)
    np.testing.assert_array_equal(y, y2)
    # chunking changes nothing
    q3, y3 = make_dnn_scores(6000, 1000, rng=1, chunk_rows=6000)
    np.testing.assert_array_equal(y, y3)
    np.testing.assert_allclose(q, q3, rtol=1e-12)


def test_make_dnn_scores_calibrated_at_temperature_one():
    q, y = make_dnn_scores(20000, 10, rng=2, temperature=1.0)
    assert abs(np.mean(q.argmax(axis=1) == y) - q.max(axis=1).mean()) < 0.01


@pytest.mark.parametrize("kwargs, match", [
    ({"k": 1}, "k must be at least 2"),
    ({"temperature": 0.0}, "temperature must be"),
    ({"noise": -1.0}, "noise must be"),
    ({"spread": np.nan}, "spread must be"),
    ({"margin": np.inf}, "margin must be finite"),
])
def test_make_dnn_scores_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_dnn_scores(10, **{"k": 5, **kwargs})


@pytest.mark.parametrize("precond_max_k", [200, 0], ids=["block", "kronecker"])
def test_newton_cg_preconditioners_reach_the_dense_newton_optimum(monkeypatch, precond_max_k):
    """k = 20 (420 parameters): dense Newton and Newton-CG with either preconditioner agree."""
    monkeypatch.setattr(optimize, "BLOCK_PRECOND_MAX_K", precond_max_k)
    x, y = _data(400, 20)
    pen = _penalty(20, 400)
    dense = fit_multinomial(x, y, penalty=pen, solver="newton")
    cg = fit_multinomial(x, y, penalty=pen, solver="newton-cg")
    assert dense.converged and cg.converged
    np.testing.assert_allclose(cg.W, dense.W, atol=1e-7)
    np.testing.assert_allclose(cg.b, dense.b, atol=1e-7)


def test_preconditioner_is_block_jacobi_plus_the_invariant_directions():
    """Against the definition, from the dense Hessian: the inverse of each class's
    block plus ``Z (Z' H Z)^-1 Z'`` on the invariant directions ``Z`` (``1 u'``
    added to ``[W, b]``), where the likelihood's Hessian vanishes."""
    k, n = 12, 500
    x, y = _data(n, k)
    prob = optimize._make_problem(x, y, "full", _penalty(k, n), None)
    st = prob.state(prob.pen_center + 0.05)
    H = prob.hess_dense(st)
    Z = np.zeros((prob.m, k + 1))  # orthonormal basis of the invariant directions
    for j in range(k + 1):
        R = np.zeros((k, k + 1))
        R[:, j] = 1.0 / np.sqrt(k)
        Z[:, j] = np.concatenate([R[:, :k].ravel(), R[:, k]])
    ZHZ = Z.T @ H @ Z
    lam = prob._block_penalty().mean(axis=0)
    np.testing.assert_allclose(ZHZ, np.diag(lam), rtol=1e-9, atol=1e-12 * lam.max())
    Minv = Z @ np.linalg.solve(ZHZ, Z.T)
    for a in range(k):
        idx = np.r_[a * k:(a + 1) * k, k * k + a]
        Minv[np.ix_(idx, idx)] += np.linalg.inv(H[np.ix_(idx, idx)])
    M = prob.preconditioner(st)
    r = np.random.default_rng(3).normal(size=prob.m)
    np.testing.assert_allclose(M(r), Minv @ r, rtol=1e-4, atol=1e-6 * np.abs(Minv @ r).max())


@pytest.mark.parametrize("precond_max_k", [200, 0], ids=["block", "kronecker"])
@pytest.mark.parametrize("kind", ["structured", "none"])
def test_preconditioner_is_symmetric_and_positive(monkeypatch, precond_max_k, kind):
    monkeypatch.setattr(optimize, "BLOCK_PRECOND_MAX_K", precond_max_k)
    k, n = 12, 500
    x, y = _data(n, k)
    pen = _penalty(k, n) if kind == "structured" else make_penalty(k, "none")
    prob = optimize._make_problem(x, y, "full", pen, None)
    M = prob.preconditioner(prob.state(np.concatenate([0.8 * np.eye(k).ravel(), np.zeros(k)])))
    a, b = np.random.default_rng(4).normal(size=(2, prob.m))
    assert a @ M(b) == pytest.approx(b @ M(a), rel=1e-9)
    assert a @ M(a) > 0 and b @ M(b) > 0


def test_newton_cg_walks_the_papers_l2_grid_to_its_weakest_point():
    """L2's grid reaches 1e-7, near the unpenalised fit: a class's few informative
    rows and the softmax's invariant directions then decide whether CG copes. (Blocks
    summed over every 3rd row stalled here from 1e-3 on: 100 iterations, 50,000
    products; block Jacobi alone from 1e-4 on.)"""
    from bayescal.calibrators.dirichlet import L2_GRID

    k, n = 40, 1600
    x, y = _data(n, k, seed=40)
    prev = None
    for lam in L2_GRID:
        fit = fit_multinomial(x, y, penalty=make_penalty(k, "l2", lam), init=prev,
                              solver="newton-cg")
        assert fit.converged, lam
        assert fit.n_hessp < 60 * fit.n_iter, lam  # CG does not run to its cap
        prev = fit


def test_block_inverse_roots():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 30, 7))
    B = np.einsum("aij,aik->ajk", A, A)
    B[2] = np.outer(A[2, 0], A[2, 0])  # rank one: Cholesky fails, the eigenvalues step in
    F = optimize._block_inverse_roots(B)
    ok = [0, 1, 3, 4]
    np.testing.assert_allclose(np.einsum("aji,ajk->aik", F[ok], F[ok]), np.linalg.inv(B[ok]),
                               rtol=1e-8, atol=1e-10)
    assert np.isfinite(F[2]).all()
    w = A[2, 0] / np.linalg.norm(A[2, 0])  # the block's range: its eigenvalue inverted
    assert w @ F[2].T @ F[2] @ w == pytest.approx(1.0 / (A[2, 0] @ A[2, 0]), rel=1e-8)


def test_newton_cg_inner_solve_stops_below_the_fits_tolerance():
    """A residual floor (half the fit's ``tol``) ends CG early; the fit still meets ``tol``."""
    x, y = _data(300, 30)
    pen = _penalty(30, 300)
    prob = optimize._make_problem(x, y, "full", pen, None)
    near = fit_multinomial(x, y, penalty=pen, solver="newton-cg", tol=1e-4)
    st = prob.state(near.theta)  # a small gradient: the forcing term asks for many steps
    M = prob.preconditioner(st)
    _, used = optimize._cg_direction(prob, st, M)
    _, early = optimize._cg_direction(prob, st, M, floor=np.abs(st.grad).max())
    assert early == 1 < used
    for tol in (1e-4, 1e-8):
        fit = fit_multinomial(x, y, penalty=pen, solver="newton-cg", tol=tol)
        assert fit.converged and fit.grad_norm <= tol


def test_reused_preconditioner_gives_the_same_fits_along_a_path():
    x, y = _data(300, 30)
    reuse: dict = {}
    init = None
    for lam in (100.0, 10.0, 1.0, 0.1):
        pen = make_penalty(30, "structured", lam, lam, reg_diag=lam, n_samples=300, scale=0.8)
        shared = fit_multinomial(x, y, penalty=pen, init=init, reuse=reuse)
        alone = fit_multinomial(x, y, penalty=pen, init=init)
        assert shared.converged and alone.converged
        np.testing.assert_allclose(shared.W, alone.W, atol=1e-8)
        init = shared
    # other data: the dict notices (checksum) and rebuilds instead of reusing
    x2, y2 = _data(300, 30, seed=5)
    key = reuse["key"]
    fit_multinomial(x2, y2, penalty=_penalty(30, 300), reuse=reuse)
    assert reuse["key"] != key


def test_k300_fit_matches_an_independent_trust_region_solver():
    """k = 300 (90,300 parameters, Kronecker preconditioner) at small n against scipy."""
    k, n = 300, 200
    x, y = _data(n, k)
    pen = _penalty(k, n)
    fit = fit_multinomial(x, y, penalty=pen)
    assert fit.solver == "newton-cg" and fit.converged

    def fun(theta):
        return multinomial_objective(theta, x, y, penalty=pen)

    def hessp(theta, v):
        return multinomial_hessp(theta, v, x, y, penalty=pen)

    start = np.concatenate([0.8 * np.eye(k).ravel(), np.zeros(k)])
    ref = scipy.optimize.minimize(fun, start, jac=True, hessp=hessp, method="trust-krylov",
                                  options={"gtol": 1e-9})
    # trust-krylov may stop with "bad approximation" once rounding dominates: judge its gradient
    assert np.abs(ref.jac).max() < 1e-7, ref.message
    assert fit.loss <= ref.fun + 1e-12
    np.testing.assert_allclose(fit.theta, ref.x, atol=1e-6)


@pytest.mark.parametrize("structure", ["full", "diagonal"])
def test_class_blocks_are_the_diagonal_blocks_of_the_dense_hessian(structure):
    k, n = 6, 150
    x, y = _data(n, k)
    sw = np.random.default_rng(0).random(n)
    pen = _penalty(k, n)
    prob = optimize._make_problem(x, y, structure, pen, sw)
    theta = fit_multinomial(x, y, structure=structure, penalty=pen, sample_weight=sw).theta
    st = prob.state(theta)
    H = prob.hess_dense(st)
    blocks = prob.class_blocks(st)
    for a in range(k):
        order = ([a * k + i for i in range(k)] + [k * k + a] if structure == "full"
                 else [a, k + a])  # packed positions of class a's block, in block order
        np.testing.assert_allclose(H[np.ix_(order, order)], blocks[a], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("structure", ["full", "diagonal"])
def test_block_evidence_is_a_lower_bound_of_the_dense_evidence(monkeypatch, structure):
    k, n = 8, 300
    x, y = _data(n, k)
    pen = _penalty(k, n)
    theta = fit_multinomial(x, y, structure=structure, penalty=pen).theta
    dense = log_evidence(x, y, pen, theta, structure=structure)
    monkeypatch.setattr(optimize, "DENSE_MAX_PARAMS", 0)
    monkeypatch.setattr(optimize, "DIAGONAL_DENSE_MAX_PARAMS", 0)
    blocks = log_evidence(x, y, pen, theta, structure=structure)
    assert blocks <= dense + 1e-9
    assert dense - blocks < 0.1 * abs(dense)


def test_posterior_variances_from_blocks_are_exact_per_block(monkeypatch):
    k, n = 5, 200
    x, y = _data(n, k)
    pen = _penalty(k, n)
    prob = optimize._make_problem(x, y, "diagonal", pen, None)
    theta = fit_multinomial(x, y, structure="diagonal", penalty=pen).theta
    monkeypatch.setattr(optimize, "DIAGONAL_DENSE_MAX_PARAMS", 0)
    var, logdet = structured._posterior_variances(prob, theta, float(n))
    B = n * prob.class_blocks(prob.state(theta))
    inv = np.linalg.inv(B)
    np.testing.assert_allclose(var, np.concatenate([inv[:, 0, 0], inv[:, 1, 1]]), rtol=1e-10)
    np.testing.assert_allclose(logdet, np.sum(np.linalg.slogdet(B)[1]), rtol=1e-12)


@pytest.mark.parametrize("cls", [DirichletCalibrator, MatrixScaler])
def test_large_k_default_is_the_structured_diagonal_fit(cls):
    k = structured.FULL_AUTO_MAX_K + 20
    q, y = make_dnn_scores(600, k, rng=3)
    scores = q if cls is DirichletCalibrator else np.log(q)
    cal = cls().fit(scores, y)
    assert cal.reg_lambda_ == np.inf and np.all(np.isinf(cal.selection_["path_reg_lambda"]))
    assert cal.selection_["log_evidence"] is None  # chosen on one held-out split (k >= 31)
    W = cal.coef_
    np.testing.assert_array_equal(W - np.diag(np.diag(W)), 0.0)
    # the same map as the diagonal structure's own default fit
    x = log_features(q, eps=cal.eps_)
    diag = fit_structured(x, y, structure="diagonal", reg_diag="auto", reg_mu="auto")
    np.testing.assert_allclose(W, diag.fit.W, atol=1e-10)
    np.testing.assert_allclose(cal.intercept_, diag.fit.b, atol=1e-10)
    # a fixed off-diagonal strength still fits the full map
    full = cls(reg_lambda=1.0, reg_diag=1.0, reg_mu=1.0).fit(scores, y)
    assert np.abs(full.coef_ - np.diag(np.diag(full.coef_))).max() > 0


def test_at_the_threshold_the_default_still_fits_the_off_diagonal(monkeypatch):
    monkeypatch.setattr(structured, "FULL_AUTO_MAX_K", 6)
    x, y = _data(500, 6)
    sf = fit_structured(x, y)
    assert np.isfinite(sf.strengths["reg_lambda"]) or sf.path["index"] == 0
    monkeypatch.setattr(structured, "FULL_AUTO_MAX_K", 5)
    sf = fit_structured(x, y)
    assert sf.strengths["reg_lambda"] == np.inf and sf.fit.structure == "full"
    assert sf.fit.theta.shape == (6 * 7,)


def test_large_k_default_beats_uncalibrated_and_saves(tmp_path):
    from bayescal.io import load_model, save_model

    q, y = make_dnn_scores(4000, 150, rng=4)
    cal = DirichletCalibrator().fit(q[:2000], y[:2000])
    p = cal.predict_proba(q[2000:])
    rows = np.arange(2000)
    assert -np.mean(np.log(p[rows, y[2000:]])) < -np.mean(np.log(q[2000:][rows, y[2000:]]))
    path = tmp_path / "m.json"
    save_model(cal, path)
    again = load_model(path)
    np.testing.assert_array_equal(again.predict_proba(q[2000:]), p)


def test_recorded_log_evidence_is_log_evidence_at_the_chosen_strengths():
    x, y = _data(400, 6)
    sf = fit_structured(x, y, cv=None)
    pen = structured.structured_penalty(6, sf.strengths, 400.0, sf.scale)
    np.testing.assert_allclose(sf.log_evidence, log_evidence(x, y, pen, sf.fit.theta),
                               rtol=1e-10)


def test_reused_dense_hessian_gives_the_same_fits_along_a_path():
    """Dense Newton (k = 8): chord steps from the previous fit's Hessian change no fit."""
    x, y = _data(500, 8)
    reuse: dict = {}
    init = None
    for lam in (100.0, 10.0, 1.0, 0.1, 0.01):
        pen = make_penalty(8, "structured", lam, lam, reg_diag=lam, n_samples=500, scale=0.8)
        shared = fit_multinomial(x, y, penalty=pen, init=init, reuse=reuse)
        alone = fit_multinomial(x, y, penalty=pen, init=init)
        assert shared.solver == "newton" and shared.converged and alone.converged
        np.testing.assert_allclose(shared.W, alone.W, atol=1e-8)
        init = shared
    assert "hess_lik" in reuse


@pytest.mark.parametrize("structure", ["full", "diagonal"])
def test_many_classes_default_is_chosen_on_one_held_out_split(monkeypatch, structure):
    """From HOLDOUT_MIN_K classes: temperature scaling and the tied strengths on one split."""
    from bayescal.datasets import make_dirgen
    from bayescal.structured import HOLDOUT_STRENGTHS, cv_splits, one_standard_error

    monkeypatch.setattr(structured, "HOLDOUT_MIN_K", 5)
    q, y, _, _ = make_dirgen(700, 5, rng=np.random.default_rng(11))
    x = log_features(q)
    sf = fit_structured(x, y, structure=structure)
    assert sf.evidence_strengths is None and sf.log_evidence is None and sf.n_evidence_iter == 0
    path = sf.path
    strengths = path["reg_mu"]
    m = len(strengths)
    np.testing.assert_array_equal(strengths, [np.inf, *HOLDOUT_STRENGTHS[: m - 1]])
    np.testing.assert_array_equal(path["reg_diag"], strengths)
    np.testing.assert_array_equal(path["reg_lambda"],
                                  strengths if structure == "full" else np.zeros(m))
    # each candidate's held-out loss, refitted from scratch on the first fold's rows
    tr, te = cv_splits(5, y)[0]
    s = structured.fit_temperature_scale(x[tr], y[tr])
    losses = []
    for c in strengths:
        if np.isinf(c):
            W, b = s * np.eye(5), np.zeros(5)
        else:
            tied = {"reg_lambda": c if structure == "full" else 0.0, "reg_diag": c,
                    "reg_mu": c}
            pen = structured.structured_penalty(5, tied, len(tr), s)
            res = fit_multinomial(x[tr], y[tr], structure=structure, penalty=pen, tol=1e-10)
            W, b = res.W, res.b
        losses.append(structured._heldout_loss(x[te], y[te], W, b, structure))
    mean = np.mean(losses, axis=1)
    # (the path's fits stop at a max |gradient| of PATH_TOL = 1e-4)
    np.testing.assert_allclose(path["mean_test_log_loss"], mean, rtol=1e-5)
    # the path goes on while the loss falls, and stops at the first rise
    assert np.all(np.diff(mean[:-1]) <= 0)
    assert m == 1 + len(HOLDOUT_STRENGTHS) or mean[-1] > mean[-2]
    assert path["index"] == one_standard_error(np.array(losses))[0]
    # the final map is the fixed-strength fit at the chosen strengths on all the rows
    fixed = fit_structured(x, y, structure=structure, cv=None, **sf.strengths)
    np.testing.assert_allclose(sf.fit.W, fixed.fit.W, atol=1e-6)
    np.testing.assert_allclose(sf.fit.b, fixed.fit.b, atol=1e-6)
    assert sf.fit.converged and sf.features == 0


def test_many_classes_floor_is_chosen_by_held_out_loss(monkeypatch):
    """An alternative floor competes at the chosen strength, on the same split."""
    monkeypatch.setattr(structured, "HOLDOUT_MIN_K", 5)
    q, y = make_dnn_scores(600, 5, rng=12)
    x = log_features(q)
    floored = np.maximum(x, np.log(0.02))  # a floor far above the scores' smallest
    sf = fit_structured(x, y, alternatives=(x.copy(), floored))
    tr, te = structured.cv_splits(5, y)[0]
    i = sf.path["index"]
    loss = {}
    for j, xa in ((0, x), (2, floored)):
        c = sf.path["reg_lambda"][i]
        s = structured.fit_temperature_scale(xa[tr], y[tr])
        if np.isinf(c):
            W, b = s * np.eye(5), np.zeros(5)
        else:
            pen = structured.structured_penalty(5, dict.fromkeys(
                ("reg_lambda", "reg_diag", "reg_mu"), c), len(tr), s)
            res = fit_multinomial(xa[tr], y[tr], penalty=pen, tol=1e-10)
            W, b = res.W, res.b
        loss[j] = structured._heldout_loss(xa[te], y[te], W, b, "full").mean()
    assert sf.features == (2 if loss[2] < loss[0] - 1e-9 else 0)


def test_many_classes_default_saves_its_choice(tmp_path):
    """At k = HOLDOUT_MIN_K the default records no evidence, and its model file round-trips."""
    from bayescal.io import load_model, save_model

    k = structured.HOLDOUT_MIN_K
    q, y = make_dnn_scores(1600, k, rng=5)
    cal = DirichletCalibrator().fit(q[:800], y[:800])
    sel = cal.selection_
    assert sel["log_evidence"] is None and sel["evidence_reg_lambda"] is None
    assert sel["n_evidence_iter"] == 0 and np.isinf(sel["path_reg_lambda"][0])
    assert cal.reg_lambda_ == sel["path_reg_lambda"][sel["path_index"]]
    path = tmp_path / "m.json"
    save_model(cal, path)
    again = load_model(path)
    np.testing.assert_array_equal(again.predict_proba(q[800:]), cal.predict_proba(q[800:]))
    assert again.selection_["log_evidence"] is None
