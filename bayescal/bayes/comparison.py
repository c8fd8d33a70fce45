r"""Comparing Bayesian calibrators by leave-one-out cross-validation (PSIS-LOO).

:func:`compare` scores every fitted Bayesian calibrator by the expected log
predictive density of each calibration label given its scores when that
sample is left out,

.. math:: \mathrm{elpd}_{\text{loo}} = \sum_i \ln p(y_i \mid q_i, D_{-i}),

estimated from one posterior by Pareto-smoothed importance sampling
(Vehtari, Gelman and Gabry 2017; the smoothing is ArviZ's). The importance
ratio of draw ``s`` for sample ``i`` is :math:`1 / p(D_i \mid \theta_s)` for the
term :math:`D_i` that the posterior conditioned on: the label given the
scores for the linear model and temperature scaling, so the estimate is
exactly :func:`arviz.loo`'s, but the *pair* :math:`(q_i, y_i)` for the
generative model, which models the scores too. Its predictions are still
scored by :math:`p(y_i \mid q_i, \theta_s)`, so every model is compared on
the same quantity, the calibrated probability of the observed label.

References
----------
.. [1] A. Vehtari, A. Gelman and J. Gabry. "Practical Bayesian model
   evaluation using leave-one-out cross-validation and WAIC". Statistics and
   Computing 27, 2017.
.. [2] A. Vehtari, D. Simpson, A. Gelman, Y. Yao and J. Gabry. "Pareto
   smoothed importance sampling". JMLR 25, 2024.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from sklearn.utils.validation import check_is_fitted

from bayescal.bayes import _compat

__all__ = ["PARETO_K_MAX", "compare", "loo_pointwise"]

#: Pareto shape above which an importance-sampling estimate is unreliable.
PARETO_K_MAX = 0.7


def loo_pointwise(est: Any, scores: ArrayLike, y: ArrayLike, *,
                  reff: float = 1.0) -> dict[str, NDArray[np.float64]]:
    """PSIS-LOO of one fitted Bayesian calibrator, per calibration sample.

    Parameters
    ----------
    est : BayesianDirichletCalibrator or BayesianGenerativeCalibrator
        Fitted on ``scores``, ``y`` (checked against its stored statistics).
    scores : array-like of shape (n_samples, n_classes)
    y : array-like of shape (n_samples,)
    reff : float, default=1.0
        Relative efficiency of the posterior draws used by the smoothing.

    Returns
    -------
    dict
        ``elpd_i`` (leave-one-out log predictive densities), ``lppd_i``
        (in-sample log predictive densities) and ``pareto_k``, arrays of
        shape (n_samples,).
    """
    from bayescal.bayes.estimators import BayesianGenerativeCalibrator, pointwise_log_likelihood
    from bayescal.bayes.laplace import dirgen_pointwise_joint

    check_is_fitted(est, "idata_")
    x = est._features(scores)
    y = est._encode_labels(y, n_samples=x.shape[0], n_classes=x.shape[1])[1]
    est._check_same_data(x, y)
    post = est.idata_.posterior
    k = x.shape[1]
    cond = pointwise_log_likelihood(post["W"].values.reshape(-1, k, k),
                                    post["b"].values.reshape(-1, k), x, y)   # (S, n)
    if isinstance(est, BayesianGenerativeCalibrator):
        conditioned = dirgen_pointwise_joint(post["alpha"].values.reshape(-1, k, k),
                                             post["pi"].values.reshape(-1, k), x, y)
    else:
        conditioned = cond
    log_w, pareto_k = _compat.psislw(-conditioned.T, reff)
    S = cond.shape[0]
    return {"elpd_i": logsumexp(log_w + cond.T, axis=1),
            "lppd_i": logsumexp(cond, axis=0) - np.log(S),
            "pareto_k": pareto_k}


def compare(models: Mapping[str, Any], scores: ArrayLike, y: ArrayLike, *,
            reff: float = 1.0):
    r"""Rank fitted Bayesian calibrators by PSIS-LOO on their common calibration set.

    Parameters
    ----------
    models : mapping of str to fitted estimator
        :class:`~bayescal.BayesianDirichletCalibrator` (any prior, e.g.
        ``prior="temperature"`` as the temperature-scaling baseline) and
        :class:`~bayescal.BayesianGenerativeCalibrator` instances, all fitted
        on ``scores``, ``y``.
    scores : array-like of shape (n_samples, n_classes)
        The calibration scores (probabilities or logits, as each model's
        ``input``).
    y : array-like of shape (n_samples,)
    reff : float, default=1.0
        Relative efficiency passed to the Pareto smoothing.

    Returns
    -------
    pandas.DataFrame
        One row per model, best first: ``rank``, ``elpd_loo``, ``se``,
        ``p_loo`` (in-sample minus leave-one-out log predictive density, the
        effective number of parameters), ``elpd_diff`` and ``dse`` (the
        difference to the best model and its standard error from the paired
        pointwise differences), ``pareto_k_max`` and ``n_high_k`` (samples
        with :math:`\hat k >` :data:`PARETO_K_MAX`, whose estimate is
        unreliable: refit without them, or use K-fold cross-validation;
        ``compare`` warns when any model has one).

    Raises
    ------
    ValueError
        If fewer than two models are given, or a model was fitted on other
        data.

    Examples
    --------
    >>> from bayescal import BayesianDirichletCalibrator, make_dirgen
    >>> from bayescal.bayes import compare
    >>> q, y, _, _ = make_dirgen(200, 3, rng=0)
    >>> fits = {p: BayesianDirichletCalibrator(prior=p, progressbar=False).fit(q, y)
    ...         for p in ("hierarchical", "temperature")}  # doctest: +SKIP
    >>> compare(fits, q, y)[["rank", "elpd_loo", "elpd_diff"]]  # doctest: +SKIP
    """
    import pandas as pd

    if not isinstance(models, Mapping) or len(models) < 2:
        raise ValueError(f"compare needs a mapping of at least two named fitted models; got "
                         f"{type(models).__name__} of length "
                         f"{len(models) if hasattr(models, '__len__') else '?'}")
    point = {}
    for name, est in models.items():
        try:
            point[name] = loo_pointwise(est, scores, y, reff=reff)
        except ValueError as exc:
            raise ValueError(f"model {name!r}: {exc}") from exc
    elpd = {name: float(p["elpd_i"].sum()) for name, p in point.items()}
    order = sorted(elpd, key=elpd.get, reverse=True)
    best = point[order[0]]["elpd_i"]
    rows = []
    for rank, name in enumerate(order):
        p = point[name]
        n = p["elpd_i"].shape[0]
        diff = best - p["elpd_i"]
        rows.append({
            "model": name,
            "rank": rank,
            "elpd_loo": elpd[name],
            "se": float(np.sqrt(n * np.var(p["elpd_i"]))),
            "p_loo": float(p["lppd_i"].sum() - elpd[name]),
            "elpd_diff": float(diff.sum()),
            "dse": float(np.sqrt(n * np.var(diff))),
            "pareto_k_max": float(np.max(p["pareto_k"])),
            "n_high_k": int(np.sum(p["pareto_k"] > PARETO_K_MAX)),
        })
    high = [f"{r['model']!r} ({r['n_high_k']} of {point[r['model']]['elpd_i'].shape[0]}, "
            f"max {r['pareto_k_max']:.2f})" for r in rows if r["n_high_k"]]
    if high:
        warnings.warn(
            f"compare: samples with Pareto k > {PARETO_K_MAX} in {', '.join(high)}: the "
            "leave-one-out estimate of those models is unreliable and so is the ranking; "
            "refit without those samples, compare on held-out data, or use K-fold "
            "cross-validation (column n_high_k)", UserWarning, stacklevel=2)
    return pd.DataFrame(rows).set_index("model")
