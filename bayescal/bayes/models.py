r"""PyMC model builders (pure functions returning :class:`pymc.Model`).

Every model has the coords ``class_out`` (row ``j``: the class whose logit or
concentration it is) and ``class_in`` (column ``i``: the feature
:math:`x_i = \ln q_i`).

* :func:`structured_model`: the default Bayesian DirLin, centred on
  temperature scaling with learned scales (:mod:`bayescal.bayes.hierarchical`),
  optionally whitened by a Laplace fit (:class:`ConditionalWhitening`, or
  :class:`CentredWhitening` in the map's own coordinates); :func:`structured_log_posterior`
  compiles its log density and gradient for the mode.
* :func:`dirlin_model`: Bayesian DirLin with fixed Gaussian priors (the
  reading of a penalty) in identified coordinates
  (:mod:`bayescal.bayes.gauge`), optionally whitened by a Laplace fit.
* :func:`dirlin_raw_model`: the naive model on raw ``W``, ``b`` (benchmark
  baseline and reference; slow to sample).
* :func:`dirgen_model`: Bayesian DirGen through per-class sufficient
  statistics, so one gradient costs :math:`O(k^2)` whatever ``n`` is.
* :func:`dirgen_rowwise_model`: the same model with one ``pm.Dirichlet`` term
  per row (reference for tests and the benchmark).

Sufficient statistics of DirGen: with :math:`n_j` the count of class ``j`` and
:math:`S_j = \sum_{i: y_i = j} x_i`,

.. math::

    \sum_{i: y_i=j} \ln \mathrm{Dir}(q_i; \alpha_j)
    = n_j\Big[\ln\Gamma\big(\textstyle\sum_l \alpha_{jl}\big)
      - \sum_l \ln\Gamma(\alpha_{jl})\Big] + (\alpha_j - 1)\cdot S_j ,

The labels add :math:`\sum_j n_j \ln\pi_j`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal.bayes._backend import import_pymc
from bayescal.bayes.gauge import Gauge
from bayescal.bayes.hierarchical import (
    StructuredPrior,
    centred_log_prior,
    centred_map,
    group_scales,
    linear_part,
    log_prior,
    n_params,
    structured_map,
)
from bayescal.bayes.priors import DirGenPrior, DirLinPrior
from bayescal.dirichlet import SufficientStatistics

__all__ = [
    "dirgen_model",
    "dirgen_rowwise_model",
    "dirlin_model",
    "dirlin_raw_model",
    "CentredWhitening",
    "ConditionalWhitening",
    "structured_log_posterior",
    "structured_model",
    "structured_model_key",
]

Array = NDArray[np.float64]


def _coords(k: int) -> dict[str, list[int]]:
    return {"class_out": list(range(k)), "class_in": list(range(k))}


def _data(pm, **arrays: ArrayLike) -> dict:
    """One float64 :func:`pymc.Data` input per array, by name (inside a model context)."""
    return {name: pm.Data(name, np.asarray(v, dtype=np.float64)) for name, v in arrays.items()}


def structured_model_key(prior: StructuredPrior, k: int,
                         whiten: ConditionalWhitening | CentredWhitening | None) -> tuple:
    """What fixes the compiled graph of :func:`structured_model`: its data are inputs.

    Two models with equal keys differ only in the values of their
    :func:`pymc.Data` inputs, so a sampler compiled for one serves the other
    (:func:`bayescal.bayes._sampling.sample_model`, ``reuse_key``).
    """
    return ("structured", prior, int(k), type(whiten).__name__)


def _loglik(W, b, x, counts, sums, *, xp=None, logsumexp=None, weights=None):
    """DirLin log likelihood: class sums for the linear term, one logsumexp per row.

    ``x``, ``counts`` and ``sums`` (:class:`bayescal.dirichlet.SufficientStatistics`)
    are symbolic inputs or arrays of the array module ``xp`` (default
    ``pytensor.tensor``, whose ``logsumexp`` is used unless one is given).
    ``weights`` (shape (n,), optional) weighs each row's ``logsumexp``: the
    compiled sampler pads ``x`` with rows of weight 0 (:mod:`bayescal.bayes.compiled`).
    """
    if xp is None:
        import pytensor.tensor as xp
    lse = (logsumexp or xp.logsumexp)(xp.dot(x, W.T) + b, axis=1)
    rows = xp.sum(lse) if weights is None else xp.dot(weights, lse)
    return xp.sum(W * sums) + xp.dot(b, counts) - rows


def conditional_theta(eta, xi, whiten, prior: StructuredPrior, k: int, xp, linalg):
    r"""``theta`` and the log Jacobian of the conditional coordinates ``(eta, xi)``.

    The change of variables of :class:`ConditionalWhitening`:
    :math:`w = P^{-1} J^\top (g + F (r^* - r_0)) + L^{-\top}\xi` with
    :math:`P = I + J^\top F J = L L^\top`, log Jacobian :math:`-\sum\ln L_{ii}`.
    Written once for both back ends: ``xp`` is ``pytensor.tensor`` or
    ``jax.numpy`` and ``linalg`` provides ``cholesky(P)`` (lower factor) and
    ``solve_triangular(L, b, lower)``; ``whiten`` maps ``fisher``, ``grad``
    and ``r_star`` to arrays of that back end.

    Parameters
    ----------
    eta : array of shape (n_hyper,)
        The hyperparameters ``(u_s, ln tau...)`` themselves (not offset).
    xi : array of shape (n_params - n_hyper,) or None
        The whitened coefficients (``None`` when the prior has none).

    Returns
    -------
    theta : array of shape (n_params,)
    log_jacobian : scalar
    """
    dim = n_params(prior, k)
    n_hyper = 1 + sum(prior.sampled)
    if dim == n_hyper:
        return eta, 0.0
    s = xp.exp(prior.log_scale(eta[0]))
    lin = linear_part(s, group_scales(xp.concatenate([eta, xp.zeros(dim - n_hyper)]),
                                      prior, k, xp), prior, k, xp)
    F = whiten["fisher"]
    P = xp.eye(dim - n_hyper) + lin.gram(F)
    L = linalg.cholesky(P)
    r0 = xp.concatenate([(s * np.eye(k)).reshape((k * k,)), xp.zeros(k)])
    rhs = lin.rmatvec(whiten["grad"] + xp.dot(F, whiten["r_star"] - r0))
    # w = P^-1 rhs + L^-T xi (cho_solve has no gradient in PyTensor 2)
    half = linalg.solve_triangular(L, rhs, lower=True)
    w = linalg.solve_triangular(L.T, half + xi, lower=False)
    return xp.concatenate([eta, w]), -xp.sum(xp.log(xp.diagonal(L)))


def structured_log_posterior(x: ArrayLike, y: ArrayLike, prior: StructuredPrior, *,
                             centred: bool = False):
    """Compiled log posterior of the structured model and its gradient in ``theta``.

    With ``centred=True``, in the centred coordinates of
    :func:`bayescal.bayes.hierarchical.centred_map`. The data enter the
    compiled function as inputs, so one compilation per ``(prior, k,
    centred)`` serves every data set in the process (:func:`_structured_logp_fn`).

    Returns
    -------
    f : callable
        ``f(theta) -> (logp, grad)`` on NumPy arrays of shape (n_params,),
        ``logp`` up to a constant (prior of
        :func:`bayescal.bayes.hierarchical.log_prior` plus the log
        likelihood).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    stats = SufficientStatistics.from_features(x, np.asarray(y))
    counts = np.asarray(stats.counts, dtype=np.float64)
    sums = np.asarray(stats.sums, dtype=np.float64)
    fn = _structured_logp_fn(prior, x.shape[1], centred)

    def f(t: Array) -> tuple[float, Array]:
        v, g = fn(np.asarray(t, dtype=np.float64), x, counts, sums)
        return float(v), np.asarray(g, dtype=np.float64)

    return f


@lru_cache(maxsize=16)
def _structured_logp_fn(prior: StructuredPrior, k: int, centred: bool):
    """The compiled ``(theta, x, counts, sums) -> (logp, grad)`` of one model structure."""
    import_pymc()
    import pytensor
    import pytensor.tensor as pt

    theta = pt.vector("theta", dtype="float64")
    x = pt.matrix("x", dtype="float64")
    counts = pt.vector("counts", dtype="float64")
    sums = pt.matrix("sums", dtype="float64")
    to_map, density = (centred_map, centred_log_prior) if centred else (structured_map, log_prior)
    _, W, b = to_map(theta, prior, k, pt)
    total = density(theta, prior, k, pt) + _loglik(W, b, x, counts, sums)
    return pytensor.function([theta, x, counts, sums], [total, pt.grad(total, theta)])


class _PytensorLinalg:
    """PyTensor's ``cholesky`` and ``solve_triangular`` as :func:`conditional_theta` calls them."""

    @staticmethod
    def cholesky(P):
        from pytensor.tensor import linalg

        return linalg.cholesky(P, lower=True)

    @staticmethod
    def solve_triangular(L, b, lower):
        from pytensor.tensor import linalg

        return linalg.solve_triangular(L, b, lower=lower)


@dataclass(frozen=True)
class ConditionalWhitening:
    r"""Where to centre and how to scale the structured model's coordinates.

    With the hyperparameters :math:`\eta = (u_s, \ln\tau)` fixed, the map's
    raw parameters are linear in the coefficients ``w``:
    :math:`r = r_0(\eta) + J(\eta) w`
    (:func:`bayescal.bayes.hierarchical.linear_part`). Expanding the log
    likelihood to second order at the mode's map :math:`r^*` (gradient ``g``,
    negative Hessian ``F``) gives a Gaussian conditional posterior of ``w``
    with precision :math:`P(\eta) = I + J^\top F J` and mean
    :math:`m(\eta) = P^{-1} J^\top (g + F (r^* - r_0))`. The model samples
    :math:`\xi` with :math:`w = m(\eta) + L(\eta)^{-\top}\xi`,
    :math:`P = L L^\top`, adding the log Jacobian :math:`-\sum \ln L_{ii}`:
    an exact change of variables for every :math:`\eta`, which makes
    :math:`\xi` close to standard normal whatever the scales are. That is
    what removes the funnels of a hierarchical prior in both regimes: the
    directions the data pin down behave as in a centred parameterisation, the
    ones only the prior holds as in a non-centred one.

    ``J`` is block sparse (one block per column of ``W``, one for ``b``), so
    :math:`J^\top F J` costs :math:`O(k^5)` rather than :math:`O(k^6)`
    (:meth:`bayescal.bayes.hierarchical.LinearPart.gram`), and one Cholesky
    factorisation of ``P`` per gradient. The density is exact whatever
    ``F``, ``g`` and :math:`r^*` are: they only choose the coordinates.

    Attributes
    ----------
    hyper_loc : ndarray of shape (n_hyper,)
        :math:`\eta` at the mode (the sampler starts there).
    fisher : ndarray of shape (k^2 + k, k^2 + k)
    grad : ndarray of shape (k^2 + k,)
    r_star : ndarray of shape (k^2 + k,)
    """

    hyper_loc: Array
    fisher: Array
    grad: Array
    r_star: Array


@dataclass(frozen=True)
class CentredWhitening:
    r"""A fixed affine whitening of the centred coordinates (a posterior the data dominate).

    The model samples ``z`` with :math:`\theta_c = \mathrm{loc} + \mathrm{chol}\, z`,
    ``theta_c`` the centred coordinates of
    :func:`bayescal.bayes.hierarchical.centred_map` (the map itself, with
    ``s`` and the scales), ``loc`` their posterior mode and
    ``chol chol^T`` the inverse of the negative Hessian there. Constant
    Jacobian, so the density is exact. Where every direction of the map is
    held by the data far more than by the prior, this Gaussian fits the whole
    posterior and one gradient costs the likelihood and one matrix-vector
    product, against a Cholesky factorisation for
    :class:`ConditionalWhitening`; where some direction is held by the prior
    alone the centred coordinates have a funnel (and the density no mode), so
    the estimator uses :class:`ConditionalWhitening` there
    (:func:`bayescal.bayes.laplace.centred_whitening`).
    """

    loc: Array
    chol: Array


def structured_model(
    x: ArrayLike,
    y: ArrayLike,
    prior: StructuredPrior,
    *,
    whiten: ConditionalWhitening | CentredWhitening | None = None,
):
    r"""The structured Bayesian DirLin model (:mod:`bayescal.bayes.hierarchical`).

    .. math::

        \theta \sim p(\theta) \text{ (identified, non-centred coordinates)},\quad
        (s, W, b) = f(\theta),\quad
        y_i \sim \mathrm{Categorical}(\mathrm{softmax}(W x_i + b))

    Parameters
    ----------
    x : array-like of shape (n, k)
        Features (:func:`bayescal.maps.log_features`).
    y : array-like of shape (n,)
        Labels.
    prior : StructuredPrior
    whiten : ConditionalWhitening or CentredWhitening, optional
        Sample ``eta - hyper_loc`` and ``xi`` instead of ``theta`` (an exact
        change of variables; see :class:`ConditionalWhitening`), or ``z`` of
        the centred coordinates (:class:`CentredWhitening`). Without it the
        model has one flat vector ``theta``.

    Returns
    -------
    model : pymc.Model
        Deterministics ``s`` (scalar), ``tau`` (group: off, diag, b), ``W``
        (class_out, class_in) and ``b`` (class_out), and with ``whiten`` also
        ``theta`` (param). Prior and likelihood are
        :func:`pymc.Potential` terms (class sums for the linear term of the
        likelihood, one ``logsumexp`` per row); the estimator computes the
        pointwise log-likelihood from the draws.
    """
    pm = import_pymc()
    import pytensor.tensor as pt

    x = np.asarray(x, dtype=np.float64)
    k = x.shape[1]
    stats = SufficientStatistics.from_features(x, np.asarray(y))
    dim = n_params(prior, k)
    n_hyper = 1 + sum(prior.sampled)
    coords = _coords(k) | {"param": list(range(dim)), "group": ["off", "diag", "b"],
                           "hyper": list(range(n_hyper)), "coef": list(range(dim - n_hyper))}
    with pm.Model(coords=coords) as model:
        # Every number that depends on the data is a pm.Data input, so the
        # compiled graph depends on (prior, k, whitening kind) alone and one
        # compilation serves every data set (structured_model_key).
        data = _data(pm, x=x, class_counts=stats.counts, class_sums=stats.sums)
        jac = 0.0
        density = log_prior
        if isinstance(whiten, CentredWhitening):
            w_in = _data(pm, loc=whiten.loc, chol=whiten.chol)
            z = pm.Flat("z", dims="param")
            theta = w_in["loc"] + pt.dot(w_in["chol"], z)
            s, W, b = centred_map(theta, prior, k, pt)
            density = centred_log_prior
        elif whiten is None:
            theta = pm.Flat("theta", dims="param")
            s, W, b = structured_map(theta, prior, k, pt)
        else:
            w_in = _data(pm, hyper_loc=whiten.hyper_loc, fisher=whiten.fisher,
                         grad=whiten.grad, r_star=whiten.r_star)
            eta = w_in["hyper_loc"] + pm.Flat("eta", dims="hyper")
            xi = pm.Flat("xi", dims="coef") if dim > n_hyper else None
            theta, jac = conditional_theta(eta, xi, w_in, prior, k, pt, _PytensorLinalg)
            s, W, b = structured_map(theta, prior, k, pt)
        tau = pt.stack([pt.as_tensor(t, dtype="float64")
                        for t in group_scales(theta, prior, k, pt)])
        if whiten is not None:
            # the coordinates in use: non-centred (ConditionalWhitening) or centred
            pm.Deterministic("theta", theta, dims="param")
        pm.Deterministic("s", s)
        pm.Deterministic("tau", tau, dims="group")
        pm.Deterministic("W", W, dims=("class_out", "class_in"))
        pm.Deterministic("b", b, dims="class_out")
        pm.Potential("prior", density(theta, prior, k, pt) + jac)
        pm.Potential("loglik", _loglik(W, b, data["x"], data["class_counts"],
                                       data["class_sums"]))
    return model


def dirlin_model(
    x: ArrayLike,
    y: ArrayLike,
    gauge: Gauge,
    *,
    whiten: tuple[ArrayLike, ArrayLike] | None = None,
    lean: bool = True,
):
    r"""Bayesian DirLin in the identified coordinates of ``gauge``.

    .. math::

        (W, b) = \mathrm{offset} + T\theta,\quad
        \theta_{\text{gauss}} \sim \mathrm{Normal}(0, I),\ \theta_{\text{flat}}
        \text{ flat},\quad y_i \sim \mathrm{Categorical}(\mathrm{softmax}(W x_i + b))

    Parameters
    ----------
    x : array-like of shape (n, k)
        Features (:func:`bayescal.maps.log_features`).
    y : array-like of shape (n,)
        Labels.
    gauge : Gauge
        From :func:`bayescal.bayes.gauge.dirlin_gauge` (holds the prior).
    whiten : (loc, chol), optional
        Sample ``z`` with ``theta = loc + chol @ z`` (flat ``z``; the prior is a
        potential). With ``loc`` the posterior mode and ``chol`` the Cholesky
        factor of the inverse Hessian there, ``z`` is close to standard normal,
        which is what NUTS samples best. The density is exact (affine change
        of variables, constant Jacobian).
    lean : bool, default=True
        Write the likelihood as ``sum(W * S) + b . n - sum_i logsumexp(W x_i + b)``
        (``S``, ``n``: class statistics) in a :func:`pymc.Potential`; with
        ``False`` use ``pm.Categorical`` (slower; keeps a ``log_likelihood``).

    Returns
    -------
    model : pymc.Model
        Deterministics ``W`` (class_out, class_in) and ``b`` (class_out).
    """
    pm = import_pymc()
    import pytensor.tensor as pt

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    k = gauge.n_classes
    stats = SufficientStatistics.from_features(x, y)
    counts, S = stats.counts, stats.sums
    with pm.Model(coords=_coords(k) | {"param": list(range(gauge.dim))}) as model:
        if whiten is None:
            parts = [pm.Normal("theta", 0.0, 1.0, shape=gauge.n_gauss)]
            if gauge.n_flat:
                parts.append(pm.Flat("theta_flat", shape=gauge.n_flat))
            theta = pt.concatenate(parts) if len(parts) > 1 else parts[0]
        else:
            loc, chol = (np.asarray(a, dtype=np.float64) for a in whiten)
            z = pm.Flat("z", dims="param")
            theta = pt.as_tensor(loc) + pt.dot(pt.as_tensor(chol), z)
            g = theta[: gauge.n_gauss]
            pm.Potential("prior", -0.5 * pt.sum(g * g))
        raw = pt.as_tensor(gauge.offset) + pt.dot(pt.as_tensor(gauge.T), theta)
        W = pm.Deterministic("W", raw[: k * k].reshape((k, k)), dims=("class_out", "class_in"))
        b = pm.Deterministic("b", raw[k * k :], dims="class_out")
        logits = pt.dot(pt.as_tensor(x), W.T) + b
        if lean:
            pm.Potential(
                "loglik",
                pt.sum(W * S) + pt.dot(b, counts) - pt.sum(pt.logsumexp(logits, axis=1)),
            )
        else:
            pm.Categorical("y", logit_p=logits, observed=y)
    return model


def dirlin_raw_model(x: ArrayLike, y: ArrayLike, prior: DirLinPrior):
    r"""Naive Bayesian DirLin on raw ``W``, ``b`` with independent priors.

    ``W[j, i] ~ Normal(center, sd)`` (flat where ``sd = inf``), ``b`` likewise,
    ``y_i ~ Categorical(softmax(W x_i + b))``. The likelihood is flat along
    ``W[:, i] += t`` and ``b += t``; only the prior holds those directions,
    which makes NUTS take hundreds of leapfrog steps per draw. Kept as the
    benchmark baseline; the estimators use :func:`dirlin_model`.
    """
    pm = import_pymc()
    import pytensor.tensor as pt

    x = np.asarray(x, dtype=np.float64)
    k = prior.n_classes
    with pm.Model(coords=_coords(k)) as model:
        def param(name, sd, center, dims):
            sd = np.asarray(sd)
            flat = ~np.isfinite(sd)
            if not flat.any():
                return pm.Normal(name, center, sd, dims=dims)
            g = pm.Normal(f"{name}_gauss", center[~flat], sd[~flat])
            f = pm.Flat(f"{name}_flat", shape=int(flat.sum()))
            full = pt.zeros(sd.shape)
            full = pt.set_subtensor(full[np.nonzero(~flat)], g)
            full = pt.set_subtensor(full[np.nonzero(flat)], f)
            return pm.Deterministic(name, full, dims=dims)

        W = param("W", prior.sd_W, prior.center_W, ("class_out", "class_in"))
        b = param("b", prior.sd_b, prior.center_b, "class_out")
        pm.Categorical("y", logit_p=pt.dot(pt.as_tensor(x), W.T) + b, observed=np.asarray(y))
    return model


def _dirgen_loglik_q(alpha, counts: Array, S: Array, xp: Any = None, gammaln: Any = None):
    r"""The scores' log-likelihood through the class statistics, in PyTensor (default) or JAX.

    :math:`\sum_j n_j[\ln\Gamma(\sum_l\alpha_{jl}) - \sum_l\ln\Gamma(\alpha_{jl})]
    + \sum_{jl} (\alpha_{jl} - 1) S_{jl}`; ``xp`` and ``gammaln`` are the array
    namespace and its log-gamma (``jax.numpy`` and ``jax.scipy.special.gammaln``
    for :mod:`bayescal.bayes.compiled`).
    """
    if xp is None:
        import pytensor.tensor as xp

        gammaln = xp.gammaln
    log_norm = gammaln(xp.sum(alpha, axis=1)) - xp.sum(gammaln(alpha), axis=1)
    return xp.dot(counts, log_norm) + xp.sum((alpha - 1.0) * S)


def dirgen_model(
    counts: ArrayLike,
    S: ArrayLike,
    prior: DirGenPrior,
    *,
    whiten: tuple[ArrayLike, ArrayLike] | None = None,
    include_pi: bool = True,
):
    r"""Bayesian DirGen through the sufficient statistics.

    .. math::

        \ln\alpha_{ji} \sim \mathrm{Normal}(\mu, \sigma),\quad
        \pi \sim \mathrm{Dirichlet}(a\mathbf 1),\quad
        q_i \mid y_i = j \sim \mathrm{Dir}(\alpha_j),\quad y_i \sim \mathrm{Cat}(\pi)

    with the likelihood written as
    :math:`\sum_j n_j[\ln\Gamma(\sum_l\alpha_{jl}) - \sum_l\ln\Gamma(\alpha_{jl})]
    + \sum_{jl} (\alpha_{jl} - 1) S_{jl} + \sum_j n_j \ln\pi_j`
    (exactly the row-by-row likelihood when ``S`` sums unfloored ``ln q``).

    Parameters
    ----------
    counts : array-like of shape (k,)
    S : array-like of shape (k, k)
        ``counts`` and ``S`` are :class:`bayescal.dirichlet.SufficientStatistics`
        ``counts`` and ``sums`` (:math:`S_j = \sum_{y_i=j} x_i`).
    prior : DirGenPrior
    whiten : (loc, chol), optional
        ``loc`` (k, k) and per-class Cholesky factors ``chol`` (k, k, k):
        ``log_alpha[j] = loc[j] + chol[j] @ z[j]`` with flat ``z`` (exact
        affine reparametrisation; the prior becomes a potential).
    include_pi : bool, default=True
        Include ``pi`` and the label likelihood. Its posterior is
        ``Dirichlet(a + n)`` independently of ``alpha`` (conjugate), so the
        estimator draws it exactly and samples ``alpha`` alone.

    Returns
    -------
    model : pymc.Model
        With ``alpha`` (class_out, class_in) and, if ``include_pi``, ``pi``.
    """
    pm = import_pymc()
    import pytensor.tensor as pt

    counts = np.asarray(counts, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    k = counts.shape[0]
    dims = ("class_out", "class_in")
    with pm.Model(coords=_coords(k)) as model:
        if whiten is None:
            log_alpha = pm.Normal(
                "log_alpha", prior.log_alpha_mu, prior.log_alpha_sigma, dims=dims
            )
        else:
            loc, chol = (np.asarray(a, dtype=np.float64) for a in whiten)
            z = pm.Flat("z", dims=dims)
            log_alpha = pt.as_tensor(loc) + pt.sum(pt.as_tensor(chol) * z[:, None, :], axis=2)
            u = (log_alpha - prior.log_alpha_mu) / prior.log_alpha_sigma
            pm.Potential("prior", -0.5 * pt.sum(u * u))
        alpha = pm.Deterministic("alpha", pt.exp(log_alpha), dims=dims)
        pm.Potential("loglik_q", _dirgen_loglik_q(alpha, counts, S))
        if include_pi:
            pi = pm.Dirichlet("pi", a=np.full(k, prior.pi_concentration), dims="class_out")
            pm.Potential("loglik_y", pt.dot(counts, pt.log(pi)))
    return model


def dirgen_rowwise_model(q: ArrayLike, y: ArrayLike, prior: DirGenPrior):
    """The DirGen model of :func:`dirgen_model` with one ``pm.Dirichlet`` per row.

    ``q`` must be strictly positive (``pm.Dirichlet`` gives ``-inf`` at an
    exact zero). Reference implementation: O(n k) per gradient.
    """
    pm = import_pymc()
    import pytensor.tensor as pt

    q = np.asarray(q, dtype=np.float64)
    y = np.asarray(y)
    k = q.shape[1]
    dims = ("class_out", "class_in")
    with pm.Model(coords=_coords(k)) as model:
        log_alpha = pm.Normal("log_alpha", prior.log_alpha_mu, prior.log_alpha_sigma, dims=dims)
        alpha = pm.Deterministic("alpha", pt.exp(log_alpha), dims=dims)
        pi = pm.Dirichlet("pi", a=np.full(k, prior.pi_concentration), dims="class_out")
        pm.Dirichlet("q", a=alpha[y], observed=q)
        pm.Categorical("y", p=pi, observed=y)
    return model
