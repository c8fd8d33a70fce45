r"""PyMC model builders (pure functions returning :class:`pymc.Model`).

Every model has the coords ``class_out`` (row ``j``: the class whose logit or
concentration it is) and ``class_in`` (column ``i``: the feature
:math:`x_i = \ln q_i`).

* :func:`dirlin_model`: Bayesian DirLin in identified coordinates
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

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal.bayes._backend import import_pymc
from bayescal.bayes.gauge import Gauge
from bayescal.bayes.priors import DirGenPrior, DirLinPrior
from bayescal.dirichlet import SufficientStatistics

__all__ = [
    "dirgen_model",
    "dirgen_rowwise_model",
    "dirlin_model",
    "dirlin_raw_model",
]

Array = NDArray[np.float64]


def _coords(k: int) -> dict[str, list[int]]:
    return {"class_out": list(range(k)), "class_in": list(range(k))}


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


def _dirgen_loglik_q(alpha, counts: Array, S: Array):
    import pytensor.tensor as pt

    log_norm = pt.gammaln(pt.sum(alpha, axis=1)) - pt.sum(pt.gammaln(alpha), axis=1)
    return pt.dot(counts, log_norm) + pt.sum((alpha - 1.0) * S)


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
