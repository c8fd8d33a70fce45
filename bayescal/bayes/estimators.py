r"""Bayesian Dirichlet calibrators (scikit-learn style estimators).

* :class:`BayesianDirichletCalibrator`: posterior over DirLin maps
  ``softmax(W x + b)`` with Gaussian priors equal to the ODIR / L2 penalties
  of :class:`bayescal.DirichletCalibrator`, sampled in identified coordinates
  (:mod:`bayescal.bayes.gauge`) whitened by the exact Hessian at the mode.
* :class:`BayesianGenerativeCalibrator`: posterior of the DirGen model
  (LogNormal concentrations, Dirichlet class priors) through the per-class
  sufficient statistics.

Both predict, by default, with the posterior-averaged map
:math:`\mathbb E_{\text{post}}[\mathrm{softmax}(W x + b)]` (never worse than
the plug-in map in our measurements, much better on small calibration sets),
and keep every draw in ``idata_`` with ``W``, ``b`` and the canonical ``A``,
``c`` per draw. ``idata_`` is the installed ArviZ's own container:
``arviz.InferenceData`` on ArviZ 0.2x, ``xarray.DataTree`` on ArviZ 1.x (read
both as ``idata_.posterior["W"]``; :mod:`bayescal.bayes._compat`).

References
----------
.. [1] M. Kull et al. "Beyond temperature scaling: Obtaining well-calibrated
   multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
.. [2] M. D. Hoffman and A. Gelman. "The No-U-Turn Sampler". JMLR 15, 2014.
.. [3] A. Vehtari et al. "Rank-normalization, folding, and localization: an
   improved R-hat". Bayesian Analysis 16(2), 2021.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_labels,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_scores,
)
from bayescal.bayes import _compat
from bayescal.bayes._sampling import SamplingWarning, check_convergence, sample_model
from bayescal.bayes.gauge import dirlin_gauge
from bayescal.bayes.laplace import dirgen_mode, dirlin_log_evidence
from bayescal.bayes.models import dirgen_model, dirlin_model
from bayescal.bayes.priors import DirGenPrior, DirLinPrior, penalty_to_prior
from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.dirichlet import SufficientStatistics
from bayescal.maps import dirgen_to_dirlin, dirlin_to_canonical, log_features

__all__ = [
    "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator",
    "SamplingWarning",
]

Array = NDArray[np.float64]
SAMPLERS = ("pymc", "nutpie", "numpyro", "laplace", "advi")
_MCMC = ("pymc", "nutpie", "numpyro")
#: Draws processed together when averaging maps (bounds memory to ~160 MB).
_CHUNK_ELEMENTS = 20_000_000


def _inv_chol(H: Array) -> Array:
    """``L`` with ``L L^T = H^{-1}`` (upper triangular), for SPD ``H``."""
    C = np.linalg.cholesky(H)
    return np.linalg.inv(C).T


def _per_draw(func, P: Array, Q: Array) -> tuple[Array, Array]:
    """Apply a conversion of :mod:`bayescal.maps` to every draw (leading axes)."""
    lead = P.shape[: P.ndim - 2]
    pairs = zip(P.reshape(-1, *P.shape[-2:]), Q.reshape(-1, Q.shape[-1]), strict=True)
    out = [func(p, q) for p, q in pairs]
    R1 = np.stack([o[0] for o in out]).reshape(*lead, *P.shape[-2:])
    R2 = np.stack([o[1] for o in out]).reshape(*lead, Q.shape[-1])
    return R1, R2


class _BayesianFamilyBase(FamilyCalibratorMixin):
    """Posterior side shared by the Bayesian calibrators.

    Subclasses implement ``_fit_posterior(x, y)`` which sets ``idata_`` with
    ``W``, ``b`` in its posterior, ``coef_`` / ``intercept_`` (the map at the
    posterior mode) and ``_stats`` (arrays fingerprinting the fit).
    """

    _diag_vars: tuple[str, ...] = ("W", "b")

    # -- fitting ----------------------------------------------------------
    def fit(self, scores: ArrayLike, y: ArrayLike):
        """Sample the posterior of the calibration map.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities (``input="probs"``) or logits.
        y : array-like of shape (n_samples,)
            Integer labels ``0 .. n_classes - 1`` (column ``j`` is class ``j``).

        Returns
        -------
        self
        """
        self._check_params()
        x = self._features(scores, reset=True)
        y = check_labels(y, n_samples=x.shape[0], n_classes=x.shape[1])
        self._fit_posterior(x, y)
        post = _compat.group_dataset(self.idata_, "posterior")
        A, c = _per_draw(dirlin_to_canonical, post["W"].values, post["b"].values)
        post = post.assign(
            A=(("chain", "draw", "class_out", "class_in"), A), c=(("chain", "draw", "class_out"), c)
        )
        _compat.set_group(self.idata_, "posterior", post)
        if self.sampler in _MCMC:
            self.diagnostics_ = check_convergence(
                self.idata_, list(self._diag_vars), sampler=self.sampler
            )
        else:
            self.diagnostics_ = {}
        self._stamp()
        return self

    def _check_common(self) -> None:
        check_option(self.sampler, "sampler", SAMPLERS)
        ta = self.target_accept
        if (
            isinstance(ta, bool)
            or not isinstance(ta, int | float | np.integer | np.floating)
            or not 0.0 < float(ta) < 1.0
        ):
            raise ValueError(f"target_accept must be in (0, 1); got {ta!r}")
        if not isinstance(self.progressbar, bool | np.bool_):
            raise ValueError(f"progressbar must be True or False; got {self.progressbar!r}")
        check_positive_int(self.draws, "draws")
        check_positive_int(self.chains, "chains")
        tune = self.tune
        if isinstance(tune, bool) or not isinstance(tune, int | np.integer) or tune < 0:
            raise ValueError(f"tune must be a non-negative integer; got {self.tune!r}")
        if self.random_seed is not None and (
            isinstance(self.random_seed, bool) or not isinstance(self.random_seed, int | np.integer)
        ):
            raise ValueError(f"random_seed must be an int or None; got {self.random_seed!r}")

    # -- posterior draws --------------------------------------------------
    def _draws(self, name: str) -> Array:
        check_is_fitted(self, "idata_")
        v = self.idata_.posterior[name].values
        return v.reshape(-1, *v.shape[2:])

    @property
    def n_draws_(self) -> int:
        """Total number of posterior draws (chains x draws)."""
        return int(self._draws("b").shape[0])

    def posterior_draws(self, name: str) -> Array:
        """Every draw of ``"W"``, ``"b"``, ``"A"`` or ``"c"``, chains stacked.

        Returns
        -------
        draws : ndarray of shape (n_draws, k, k) or (n_draws, k)
        """
        check_option(name, "name", tuple(self.idata_.posterior.data_vars))
        return self._draws(name)

    def _iter_draw_maps(self, x: Array):
        W, b = self._draws("W"), self._draws("b")
        n, k = x.shape
        step = max(1, _CHUNK_ELEMENTS // max(1, n * k))
        for s in range(0, W.shape[0], step):
            Ws = W[s : s + step]
            m = Ws.shape[0]
            # one GEMM for the chunk: logits[s, n, j] = sum_i x[n, i] W[s, j, i] + b[s, j]
            logits = (x @ Ws.reshape(m * k, k).T).reshape(n, m, k).transpose(1, 0, 2)
            logits = logits + b[s : s + step, None, :]
            logits -= logits.max(axis=-1, keepdims=True)
            np.exp(logits, out=logits)
            logits /= logits.sum(axis=-1, keepdims=True)
            yield logits

    def predict_proba_draws(self, scores: ArrayLike) -> Array:
        """The calibrated probabilities of every posterior draw.

        Returns
        -------
        proba : ndarray of shape (n_draws, n_samples, n_classes)
        """
        check_is_fitted(self, "idata_")
        x = self._features(scores)
        return np.concatenate(list(self._iter_draw_maps(x)), axis=0)

    def predict_proba(self, scores: ArrayLike, kind: str = "mean") -> Array:
        r"""Calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        kind : {"mean", "map"}, default="mean"
            ``"mean"``: the posterior-averaged map
            :math:`\frac1S\sum_s \mathrm{softmax}(W_s x + b_s)`;
            ``"map"``: the map at the posterior mode (``coef_``, ``intercept_``).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to one.
        """
        check_option(kind, "kind", ("mean", "map"))
        check_is_fitted(self, "idata_")
        if kind == "map":
            return super().predict_proba(scores)
        x = self._features(scores)
        total = np.zeros_like(x)
        for chunk in self._iter_draw_maps(x):
            total += chunk.sum(axis=0)
        return total / self.n_draws_

    def credible_interval(
        self, scores: ArrayLike, hdi_prob: float = 0.94
    ) -> tuple[Array, Array]:
        """Highest-density interval of every calibrated probability.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        hdi_prob : float in (0, 1), default=0.94

        Returns
        -------
        lower, upper : ndarray of shape (n_samples, n_classes)
            The shortest interval holding ``ceil(hdi_prob * n_draws)`` draws.
        """
        hdi_prob = check_nonnegative_float(hdi_prob, "hdi_prob", strict=True)
        if hdi_prob >= 1.0:
            raise ValueError(f"hdi_prob must be in (0, 1); got {hdi_prob!r}")
        p = np.sort(self.predict_proba_draws(scores), axis=0)
        S = p.shape[0]
        m = min(S, max(1, int(np.ceil(hdi_prob * S))))
        widths = p[m - 1 :] - p[: S - m + 1]
        i = np.argmin(widths, axis=0)
        lower = np.take_along_axis(p, i[None], axis=0)[0]
        upper = np.take_along_axis(p, (i + m - 1)[None], axis=0)[0]
        return lower, upper

    def summary(
        self, var_names: list[str] | None = None, *, ci_prob: float = 0.94, **kwargs: Any
    ):
        """ArviZ summary table: mean, sd, HDI, MCSE, ESS and ``r_hat`` per entry.

        Parameters
        ----------
        var_names : list of str, optional
            Default: the model's parameters (``W``, ``b`` or ``alpha``);
            ``A``, ``c`` (and ``pi``) are also available.
        ci_prob : float, default=0.94
            Probability of the highest-density interval, on both ArviZ stacks
            (columns ``hdi_3%``, ``hdi_97%`` on ArviZ 0.2x and ``hdi94_lb``,
            ``hdi94_ub`` on ArviZ 1.x, for 0.94).
        **kwargs
            Passed to ``arviz.summary``.

        Returns
        -------
        pandas.DataFrame
            One row per scalar entry (``W[0, 1]``, ...).
        """
        check_is_fitted(self, "idata_")
        names = list(self._diag_vars) if var_names is None else list(var_names)
        return _compat.summary(self.idata_, names, ci_prob=ci_prob, **kwargs)

    # -- persistence -------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        params = {
            key: (list(v) if isinstance(v, tuple) else v) for key, v in self.get_params().items()
        }
        return {"class": type(self).__name__, "params": params}

    def _model_id(self, config_json: str, stats: dict[str, Array]) -> str:
        h = hashlib.sha256(config_json.encode())
        for key in sorted(stats):
            h.update(key.encode())
            h.update(np.ascontiguousarray(stats[key], dtype=np.float64).tobytes())
        return h.hexdigest()[:16]

    def _stamp(self) -> None:
        from bayescal import __version__

        config_json = json.dumps(self._config(), sort_keys=True)
        stats = self._stats | {"mode_W": self.coef_, "mode_b": self.intercept_}
        self.model_id_ = self._model_id(config_json, stats)
        attrs = {
            "bayescal_config": config_json,
            "bayescal_version": __version__,
            "bayescal_model_id": self.model_id_,
            "bayescal_prior": json.dumps(self.prior_.to_dict(), sort_keys=True),
        }
        if hasattr(self, "log_evidence_"):
            attrs["bayescal_log_evidence"] = repr(float(self.log_evidence_))
        self.idata_.posterior.attrs.update(attrs)
        import xarray as xr

        const = xr.Dataset(
            {
                f"bayescal_{key}": (tuple(f"{key}_{i}" for i in range(np.ndim(v))), np.asarray(v))
                for key, v in stats.items()
            }
        )
        _compat.set_group(self.idata_, "constant_data", const)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the posterior and configuration to a netCDF file.

        The file is written next to ``path`` and renamed into place, so an
        interrupted save never leaves a half-written file at ``path``.
        """
        check_is_fitted(self, "idata_")
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        try:
            _compat.to_netcdf(self.idata_, tmp)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    @classmethod
    def load(cls, path: str | os.PathLike):
        """Read an estimator written by :meth:`save` (checks its model id)."""
        idata = _compat.from_netcdf(path)
        attrs = idata.posterior.attrs
        if "bayescal_config" not in attrs:
            raise ValueError(f"{path} was not written by {cls.__name__}.save (no bayescal_config)")
        config = json.loads(attrs["bayescal_config"])
        if config["class"] != cls.__name__:
            raise ValueError(
                f"{path} holds a {config['class']}, not a {cls.__name__}; "
                f"use {config['class']}.load"
            )
        params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in config["params"].items()}
        est = cls(**params)
        stats = {
            key.removeprefix("bayescal_"): idata.constant_data[key].values
            for key in idata.constant_data.data_vars
            if key.startswith("bayescal_")
        }
        config_json = json.dumps(est._config(), sort_keys=True)
        if est._model_id(config_json, stats) != attrs.get("bayescal_model_id"):
            raise ValueError(
                f"{path}: model id mismatch (stored {attrs.get('bayescal_model_id')!r}); "
                "the file was modified or is corrupt"
            )
        est.idata_ = idata
        est.model_id_ = attrs["bayescal_model_id"]
        est.coef_ = stats.pop("mode_W")
        est.intercept_ = stats.pop("mode_b")
        est._stats = stats
        k = est.coef_.shape[0]
        est.n_features_in_ = k
        est.classes_ = np.arange(k)
        est.diagnostics_ = {}
        prior = json.loads(attrs["bayescal_prior"])
        est.prior_ = (DirLinPrior if "sd_W" in prior else DirGenPrior).from_dict(prior)
        if "bayescal_log_evidence" in attrs:
            est.log_evidence_ = float(attrs["bayescal_log_evidence"])
        est._restore()
        return est

    def _restore(self) -> None:
        """Rebuild derived fitted attributes after :meth:`load`."""


class BayesianDirichletCalibrator(_BayesianFamilyBase):
    r"""Bayesian Dirichlet calibration (DirLin) with priors equal to the penalties.

    Model: :math:`y_i \sim \mathrm{Categorical}(\mathrm{softmax}(W x_i + b))`
    with :math:`x = \max(\ln q, \ln\epsilon)` and independent priors
    :math:`\theta_p \sim \mathrm{Normal}(\mathrm{center}_p, \sigma_p)`,
    :math:`\sigma_p^2 = 1/(2 n\,\mathrm{prec}_p)`, where ``prec`` are the
    precisions of the penalty of :class:`bayescal.DirichletCalibrator`
    (ODIR: off-diagonal entries of ``W`` with
    :math:`\sigma^2 = k(k-1)/(2n\lambda)`, flat diagonal, ``b`` with
    :math:`\sigma^2 = k/(2n\mu)`; L2: every entry with
    :math:`\sigma^2 = k(k+1)/(2n\lambda)`). So the posterior mode is exactly
    the regularised fit.

    Sampling happens in identified coordinates (the directions that leave
    every map unchanged integrated out analytically; the posterior over maps
    is exactly the raw model's), whitened by the exact Hessian at the mode.

    Parameters
    ----------
    prior : {"odir", "l2"}, default="odir"
    reg_lambda : float > 0, default=1e-3
        Weight of the ``W`` penalty (same meaning as in DirichletCalibrator).
    reg_mu : float > 0, default=1e-3
        Weight of the ``b`` penalty (ODIR; L2 uses ``reg_lambda`` for both).
    center : {"identity", "zero"}, default="identity"
        Shrink toward the identity map (leaves a calibrated model alone) or
        toward ``W = 0`` (the uniform predictor).
    draws, tune, chains : int, default=1000, 1000, 4
    sampler : {"pymc", "nutpie", "numpyro", "laplace", "advi"}, default="pymc"
        ``"laplace"``: Gaussian at the mode with the exact Hessian (seconds).
    random_seed : int or None
    input : {"probs", "logits"}, default="probs"
    eps : float, default=EPS
        Probability floor of the log features.
    target_accept : float in (0, 1), default=0.8
        NUTS target acceptance rate.
    progressbar : bool, default=True
        Show the sampler's progress bar while sampling (MCMC and ADVI).

    Attributes
    ----------
    idata_ : arviz.InferenceData or xarray.DataTree
        The installed ArviZ's container (InferenceData on ArviZ 0.2x,
        DataTree on 1.x): ``posterior`` with ``W``, ``b``, ``A``, ``c`` per
        draw (dims ``chain, draw, class_out[, class_in]``), the sampler's
        ``sample_stats`` (MCMC) and ``constant_data`` fingerprinting the fit.
    coef_, intercept_ : ndarray
        ``W``, ``b`` at the posterior mode.
    diagnostics_ : dict
        ``r_hat_max``, ``ess_bulk_min``, ``divergences`` (MCMC samplers).
    prior_ : DirLinPrior
        The Gaussian prior sds and centres (serialisable: ``prior_.to_dict()``).
    log_evidence_ : float
        Laplace estimate of the log marginal likelihood ``ln p(y)`` of the
        calibration labels (:func:`bayescal.bayes.laplace.dirlin_log_evidence`),
        for choosing ``reg_lambda`` by type-II maximum likelihood; ``nan`` with
        ``prior="odir"``, whose flat diagonal is improper.
    model_id_ : str
        Hash of the configuration and the data's sufficient statistics;
        checked by :meth:`load`.
    """

    def __init__(
        self,
        *,
        prior: str = "odir",
        reg_lambda: float = 1e-3,
        reg_mu: float = 1e-3,
        center: str = "identity",
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 4,
        sampler: str = "pymc",
        random_seed: int | None = None,
        input: str = "probs",
        eps: float = EPS,
        target_accept: float = 0.8,
        progressbar: bool = True,
    ) -> None:
        self.prior = prior
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.center = center
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.sampler = sampler
        self.random_seed = random_seed
        self.input = input
        self.eps = eps
        self.target_accept = target_accept
        self.progressbar = progressbar

    def _check_params(self) -> None:
        check_option(self.prior, "prior", ("odir", "l2"))
        check_option(self.center, "center", ("identity", "zero"))
        check_nonnegative_float(self.reg_lambda, "reg_lambda", strict=True)
        check_nonnegative_float(self.reg_mu, "reg_mu", strict=True)
        self._check_common()

    def _penalty(self, k: int):
        """The penalty whose Gaussian reading is this estimator's prior."""
        from bayescal.optimize import make_penalty

        reg_mu = self.reg_mu if self.prior == "odir" else None
        return make_penalty(k, kind=self.prior, reg_lambda=self.reg_lambda, reg_mu=reg_mu,
                            center=self.center)  # fmt: skip

    def log_evidence(self, scores: ArrayLike, y: ArrayLike) -> float:
        """Laplace log evidence ``ln p(y)`` of the configured prior, without sampling.

        The same number as ``log_evidence_`` after :meth:`fit`, at the cost of
        the posterior mode and one Hessian: for comparing prior scales
        (``reg_lambda``) by type-II maximum likelihood before fitting the
        chosen one. Needs ``prior="l2"`` (a proper prior). Does not change the
        estimator.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        y : array-like of shape (n_samples,)

        Returns
        -------
        float
        """
        from bayescal.optimize import fit_multinomial

        self._check_params()
        if self.prior != "l2":
            raise ValueError(
                f"the evidence needs a proper prior: use prior='l2'; got prior={self.prior!r}"
            )
        x = log_features(check_scores(scores, kind=self.input), kind=self.input, eps=self.eps)
        y = check_labels(y, n_samples=x.shape[0], n_classes=x.shape[1])
        penalty = self._penalty(x.shape[1])
        res = fit_multinomial(x, y, structure="full", penalty=penalty, tol=1e-10)
        return dirlin_log_evidence(x, y, penalty, res.W, res.b)

    def laplace_approximation(self, x: Array, y: Array):
        """Mode and whitening of the posterior in identified coordinates.

        Returns ``(gauge, penalty, theta_mode, L)`` with ``L L^T`` the inverse
        Hessian of the negative log-posterior at the mode.
        """
        from bayescal.optimize import fit_multinomial, multinomial_objective

        n, k = x.shape
        penalty = self._penalty(k)
        gauge = dirlin_gauge(penalty_to_prior(penalty, n))
        res = fit_multinomial(x, y, structure="full", penalty=penalty, tol=1e-10)
        raw = gauge.project(np.concatenate([res.W.ravel(), res.b]))
        # Hessian of n L (the negative log-posterior) in raw coordinates
        _, _, H = multinomial_objective(raw, x, y, structure="full", penalty=penalty, hessian=True)
        H_theta = n * (gauge.T.T @ H @ gauge.T)
        return gauge, penalty, gauge.from_raw(raw), _inv_chol(H_theta)

    def _fit_posterior(self, x: Array, y: Array) -> None:
        gauge, penalty, theta, L = self.laplace_approximation(x, y)
        self.prior_ = penalty_to_prior(penalty, x.shape[0])
        self.coef_, self.intercept_ = gauge.split(gauge.to_raw(theta))
        self.log_evidence_ = float("nan")
        if self.prior == "l2":
            self.log_evidence_ = dirlin_log_evidence(x, y, penalty, self.coef_, self.intercept_)
        k = x.shape[1]
        dims = {"W": ["class_out", "class_in"], "b": ["class_out"]}
        coords = {"class_out": np.arange(k), "class_in": np.arange(k)}
        if self.sampler == "laplace":
            rng = np.random.default_rng(self.random_seed)
            z = rng.standard_normal((self.chains, self.draws, gauge.dim))
            W, b = gauge.split(gauge.to_raw(theta + z @ L.T))
            self.idata_ = _compat.from_dict(
                {"posterior": {"W": W, "b": b}}, dims=dims, coords=coords
            )
        else:
            model = dirlin_model(x, y, gauge, whiten=(theta, L))
            idata = sample_model(
                model,
                sampler=self.sampler,
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                random_seed=self.random_seed,
                var_names=["W", "b"],
                target_accept=self.target_accept,
                progressbar=self.progressbar,
            )
            self.idata_ = idata
        stats = SufficientStatistics.from_features(x, y)
        counts, S = stats.counts, stats.sums
        self._stats = {"counts": counts, "S": S}


class BayesianGenerativeCalibrator(_BayesianFamilyBase):
    r"""Bayesian DirGen calibration: class-conditional Dirichlet scores.

    Model: :math:`q_i \mid y_i=j \sim \mathrm{Dir}(\alpha_j)`,
    :math:`y_i \sim \mathrm{Categorical}(\pi)`, with
    :math:`\ln\alpha_{ji} \sim \mathrm{Normal}(m, s)` (``alpha_prior = (m, s)``)
    and :math:`\pi \sim \mathrm{Dirichlet}(a\mathbf 1)` (``pi_prior = a``).
    The likelihood enters through the per-class counts and sums of
    :math:`x = \max(\ln q, \ln\epsilon)`, so sampling costs the same for
    ``n = 10^3`` and ``n = 10^6``. The rows of ``alpha`` are independent a
    posteriori and each is sampled whitened by its exact Hessian at the mode;
    ``pi`` has the conjugate posterior ``Dirichlet(a + n_j)`` and is drawn
    exactly. Every draw is also converted to its DirLin map
    ``W = alpha - 1``, ``b = ln pi + lnGamma(sum alpha) - sum lnGamma(alpha)``.

    Parameters
    ----------
    alpha_prior : (float, float), default=(0.0, 1.5)
        Mean and sd of the Normal prior on every ``ln alpha``.
    pi_prior : float > 0, default=1.0
        Symmetric Dirichlet concentration of the class priors.
    draws, tune, chains, sampler, random_seed, input, eps, target_accept, progressbar
        As in :class:`BayesianDirichletCalibrator`.

    Attributes
    ----------
    idata_ : arviz.InferenceData or xarray.DataTree
        As in :class:`BayesianDirichletCalibrator`; ``posterior`` with
        ``alpha``, ``pi``, ``W``, ``b``, ``A``, ``c``.
    coef_, intercept_ : ndarray
        DirLin map at the mode of ``alpha`` and the mode of ``pi`` (its mean
        when some ``a + n_j <= 1``).
    alpha_mode_, pi_mode_ : ndarray
        That mode.
    prior_ : DirGenPrior
    diagnostics_, model_id_
        As in :class:`BayesianDirichletCalibrator`.
    """

    _diag_vars = ("alpha",)

    def __init__(
        self,
        *,
        alpha_prior: tuple[float, float] = (0.0, 1.5),
        pi_prior: float = 1.0,
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 4,
        sampler: str = "pymc",
        random_seed: int | None = None,
        input: str = "probs",
        eps: float = EPS,
        target_accept: float = 0.8,
        progressbar: bool = True,
    ) -> None:
        self.alpha_prior = alpha_prior
        self.pi_prior = pi_prior
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.sampler = sampler
        self.random_seed = random_seed
        self.input = input
        self.eps = eps
        self.target_accept = target_accept
        self.progressbar = progressbar

    def _prior(self) -> DirGenPrior:
        ap = self.alpha_prior
        if not isinstance(ap, tuple | list) or len(ap) != 2:
            raise ValueError(f"alpha_prior must be a pair (mean, sd) of ln alpha; got {ap!r}")
        return DirGenPrior(float(ap[0]), float(ap[1]), float(self.pi_prior))

    def _check_params(self) -> None:
        self._prior()
        self._check_common()

    def _fit_posterior(self, x: Array, y: Array) -> None:
        prior = self.prior_ = self._prior()
        k = x.shape[1]
        stats = SufficientStatistics.from_features(x, y)
        counts, S = stats.counts, stats.sums
        u, neg_hess = dirgen_mode(counts, S, prior)
        L = np.stack([_inv_chol(h) for h in neg_hess])
        rng = np.random.default_rng(self.random_seed)
        shape = (self.chains, self.draws)
        if self.sampler == "laplace":
            z = rng.standard_normal((*shape, k, k))
            alpha = np.exp(u + np.einsum("jab,cdjb->cdja", L, z))
        else:
            model = dirgen_model(counts, S, prior, whiten=(u, L), include_pi=False)
            idata = sample_model(
                model,
                sampler=self.sampler,
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                random_seed=self.random_seed,
                var_names=["alpha"],
                target_accept=self.target_accept,
                progressbar=self.progressbar,
            )
            alpha = idata.posterior["alpha"].values
            shape = alpha.shape[:2]
        conc = prior.pi_concentration + counts
        pi = rng.dirichlet(conc, size=shape)
        W, b = _per_draw(dirgen_to_dirlin, alpha, pi)
        dims = {"alpha": ["class_out", "class_in"], "pi": ["class_out"],
                "W": ["class_out", "class_in"], "b": ["class_out"]}
        coords = {"class_out": np.arange(k), "class_in": np.arange(k)}
        post = _compat.from_dict(
            {"posterior": {"alpha": alpha, "pi": pi, "W": W, "b": b}}, dims=dims, coords=coords
        )
        if self.sampler == "laplace":
            self.idata_ = post
        else:  # keep the sampler's other groups (sample_stats: divergences, ...)
            _compat.set_group(idata, "posterior", _compat.group_dataset(post, "posterior"))
            self.idata_ = idata
        pi_mode = (conc - 1.0) / (conc - 1.0).sum() if np.all(conc > 1.0) else conc / conc.sum()
        W0, b0 = dirgen_to_dirlin(np.exp(u), pi_mode)
        self.coef_, self.intercept_ = W0, b0
        self.alpha_mode_, self.pi_mode_ = np.exp(u), pi_mode
        self._stats = {"counts": counts, "S": S}

    def _restore(self) -> None:
        # W = alpha - 1 and b = ln pi + lnGamma(sum alpha) - sum lnGamma(alpha)
        self.alpha_mode_ = self.coef_ + 1.0
        a = self.alpha_mode_
        log_pi = self.intercept_ - gammaln(a.sum(axis=1)) + gammaln(a).sum(axis=1)
        self.pi_mode_ = np.exp(log_pi - logsumexp(log_pi))
