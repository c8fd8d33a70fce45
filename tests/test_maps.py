"""The three forms of the Dirichlet family are one family (Theorem 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.special import expit, log_softmax, softmax

from bayescal import maps
from bayescal.maps import (
    EPS,
    canonical_map,
    canonical_to_dirlin,
    dirgen_map,
    dirgen_to_dirlin,
    dirlin_map,
    dirlin_to_canonical,
    dirlin_to_dirgen,
    log_features,
    temperature_to_dirlin,
    vector_to_dirlin,
)

TOL = 1e-10


@st.composite
def problems(draw):
    """Random k, scores with entries down to 1e-300 and exact zeros, and a seed."""
    k = draw(st.integers(2, 12))
    n = draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(k, draw(st.sampled_from([0.05, 0.5, 2.0]))), size=n)
    # Inject extreme entries: tiny positives and exact zeros.
    mask = rng.random((n, k)) < 0.2
    tiny = 10.0 ** rng.uniform(-300, -5, size=(n, k))
    q = np.where(mask, tiny, q)
    zeros = rng.random((n, k)) < 0.1
    q = np.where(zeros, 0.0, q)
    keep = rng.integers(0, k, size=n)
    q[np.arange(n), keep] += 1e-3  # every row keeps some mass
    # Renormalise the remaining mass so rows are on the simplex (test data only).
    q = q / q.sum(axis=1, keepdims=True)
    return k, q, rng


@given(problems())
def test_dirgen_equals_dirlin_and_canonical(prob):
    k, q, rng = prob
    alpha = np.exp(rng.normal(0, 1, size=(k, k)))
    pi = rng.dirichlet(np.ones(k))
    p_gen = dirgen_map(q, alpha, pi)
    W, b = dirgen_to_dirlin(alpha, pi)
    p_lin = dirlin_map(q, W, b)
    A, c = dirlin_to_canonical(W, b)
    p_can = canonical_map(q, A, c)
    assert np.max(np.abs(p_gen - p_lin)) <= TOL
    assert np.max(np.abs(p_lin - p_can)) <= TOL
    np.testing.assert_allclose(p_gen.sum(axis=1), 1.0, atol=1e-12)


@given(problems())
def test_random_dirlin_round_trips(prob):
    k, q, rng = prob
    W = rng.normal(0, 2, size=(k, k))
    b = rng.normal(0, 2, size=k)
    p = dirlin_map(q, W, b)
    alpha, pi = dirlin_to_dirgen(W, b)
    assert (alpha > 0).all()
    np.testing.assert_allclose(pi.sum(), 1.0, atol=1e-12)
    assert np.max(np.abs(dirgen_map(q, alpha, pi) - p)) <= TOL
    # DirGen -> DirLin -> same map
    W2, b2 = dirgen_to_dirlin(alpha, pi)
    assert np.max(np.abs(dirlin_map(q, W2, b2) - p)) <= TOL
    # DirLin -> canonical -> DirLin
    A, c = dirlin_to_canonical(W, b)
    W3, b3 = canonical_to_dirlin(A, c)
    assert np.max(np.abs(dirlin_map(q, W3, b3) - p)) <= TOL
    assert np.max(np.abs(canonical_map(q, A, c) - p)) <= TOL


@given(problems())
def test_canonical_invariants_and_identifiability(prob):
    k, q, rng = prob
    W = rng.normal(0, 2, size=(k, k))
    b = rng.normal(0, 2, size=k)
    A, c = dirlin_to_canonical(W, b)
    assert (A >= 0).all()
    assert np.all((A == 0).any(axis=0)), "every column of A holds a zero"
    np.testing.assert_allclose(c.sum(), 1.0, atol=1e-12)
    assert (c >= 0).all()
    # Same map, other DirLin parameters: same canonical form.
    v = rng.normal(0, 3, size=k)
    W2, b2 = W + v[None, :], b + rng.normal(0, 3)
    A2, c2 = dirlin_to_canonical(W2, b2)
    np.testing.assert_allclose(A2, A, atol=1e-10)
    np.testing.assert_allclose(c2, c, atol=1e-10)
    assert np.max(np.abs(dirlin_map(q, W2, b2) - dirlin_map(q, W, b))) <= TOL
    # Canonical form of a canonical map is itself.
    A3, c3 = dirlin_to_canonical(*canonical_to_dirlin(A, c))
    np.testing.assert_allclose(A3, A, atol=1e-10)
    np.testing.assert_allclose(c3, c, atol=1e-10)


def test_different_maps_have_different_canonical_forms(rng):
    W = rng.normal(size=(4, 4))
    b = rng.normal(size=4)
    A, c = dirlin_to_canonical(W, b)
    W2 = W.copy()
    W2[1, 2] += 0.5  # not a shift of every row
    A2, _ = dirlin_to_canonical(W2, b)
    assert np.max(np.abs(A2 - A)) > 0.1


def test_canonical_c_is_output_at_uniform_input(rng):
    W = rng.normal(size=(5, 5))
    b = rng.normal(size=5)
    _, c = dirlin_to_canonical(W, b)
    np.testing.assert_allclose(dirlin_map(np.full((1, 5), 0.2), W, b)[0], c, atol=1e-12)


@given(st.integers(2, 12), st.floats(0.05, 20.0), st.integers(0, 2**32 - 1))
def test_temperature_is_dirlin_point(k, T, seed):
    z = np.random.default_rng(seed).normal(0, 5, size=(30, k))
    # the identity holds where no log-probability is floored at ln(EPS)
    assume(log_softmax(z, axis=1).min() > np.log(EPS))
    W, b = temperature_to_dirlin(T, k)
    expected = softmax(z / T, axis=1)
    got = dirlin_map(z, W, b, kind="logits")
    assert np.max(np.abs(got - expected)) <= TOL
    np.testing.assert_allclose(maps.temperature_map(z, T), expected, atol=TOL)


def test_vector_scaling_is_dirlin_point(rng):
    """Vector scaling is W = diag(w) on its features: raw logits z (Guo et al.)
    or log-probabilities ln q. Unlike temperature scaling it is *not* invariant
    to a per-row shift of the logits, so the feature choice matters."""
    z = rng.normal(0, 3, size=(50, 4))
    w = rng.uniform(0.5, 2, size=4)
    bias = rng.normal(size=4)
    W, b = vector_to_dirlin(w, bias)
    np.testing.assert_allclose(
        maps.dirlin_from_features(z, W, b), softmax(w * z + bias, axis=1), atol=TOL
    )
    q = softmax(z, axis=1)
    np.testing.assert_allclose(
        dirlin_map(q, W, b), softmax(w * np.log(q) + bias, axis=1), atol=TOL
    )


def beta_calibration(s, a, b, c):
    """Beta calibration (Kull, Silva Filho & Flach 2017), parametrised as
    mu(s) = 1 / (1 + 1 / (exp(c) * s**a / (1 - s)**b)),
    i.e. logit(mu) = a ln s - b ln(1 - s) + c."""
    return expit(a * np.log(s) - b * np.log1p(-s) + c)


@given(
    st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3),
    st.floats(-3, 3), st.floats(-3, 3), st.integers(0, 2**32 - 1),
)
def test_k2_family_is_beta_calibration(w00, w01, w10, w11, b0, b1, seed):
    s = np.random.default_rng(seed).uniform(1e-6, 1 - 1e-6, size=40)
    q = np.column_stack([s, 1 - s])
    W = np.array([[w00, w01], [w10, w11]])
    bias = np.array([b0, b1])
    # Probability of class 0 under DirLin: logit = (w00-w10) ln s + (w01-w11) ln(1-s) + b0-b1
    a, bb, c = w00 - w10, w11 - w01, b0 - b1
    got = dirlin_map(q, W, bias)[:, 0]
    np.testing.assert_allclose(got, beta_calibration(s, a, bb, c), atol=TOL)


def test_log_features_floor_and_logits_path():
    q = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    x = log_features(q)
    assert x.min() == pytest.approx(np.log(EPS))
    x_tiny = log_features(q, eps=np.finfo(float).tiny)
    assert x_tiny.min() == pytest.approx(np.log(np.finfo(float).tiny))
    z = np.array([[800.0, 0.0, -5.0], [1.0, 2.0, 3.0]])
    x_z = log_features(z, kind="logits")
    ref = np.maximum(log_softmax(z, axis=1), np.log(EPS))
    np.testing.assert_allclose(x_z, ref, atol=1e-12)
    # logits and their softmax give the same features
    np.testing.assert_allclose(
        log_features(softmax(z, axis=1)), x_z, atol=1e-12
    )


def test_identity_point_returns_input(rng):
    q = rng.dirichlet(np.ones(6), size=20)
    np.testing.assert_allclose(dirlin_map(q, np.eye(6), np.zeros(6)), q, atol=1e-12)


def test_true_dirgen_map_beats_raw_scores():
    from bayescal.datasets import make_dirgen
    from bayescal.metrics import log_loss

    q, y, alpha, pi = make_dirgen(20000, 5, rng=1)
    assert log_loss(y, dirgen_map(q, alpha, pi)) < log_loss(y, q) - 0.05
