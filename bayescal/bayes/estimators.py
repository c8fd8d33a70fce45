r"""Bayesian Dirichlet calibrators (scikit-learn style estimators).

* :class:`BayesianDirichletCalibrator`: posterior over DirLin maps
  ``softmax(W x + b)``; by default a hierarchical prior centred on
  temperature scaling with learned scales (:mod:`bayescal.bayes.hierarchical`),
  or, by parameter, Gaussian readings of the structured / ODIR / L2 penalties
  of :class:`bayescal.DirichletCalibrator` (posterior mode = MAP fit), sampled
  in identified coordinates whitened at the mode.
* :class:`BayesianGenerativeCalibrator`: posterior of the DirGen model
  (LogNormal concentrations, Dirichlet class priors) through the per-class
  sufficient statistics.

Both predict, by default, with the posterior-averaged map
:math:`\mathbb E_{\text{post}}[\mathrm{softmax}(W x + b)]` (better than the
plug-in map on small synthetic calibration sets; on real outputs it is not
always better), and keep every draw in ``idata_`` with ``W``, ``b`` and the canonical ``A``,
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

import functools
import hashlib
import importlib.util
import json
import os
import warnings
from dataclasses import dataclass, replace
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp
from sklearn.utils.validation import check_is_fitted

from bayescal._validation import (
    EPS,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_scores,
)
from bayescal.bayes import _compat
from bayescal.bayes._sampling import (
    ConvergenceError,
    SamplingWarning,
    diagnose,
    enforce,
    sample_model,
)
from bayescal.bayes.compiled import StalledChain
from bayescal.bayes.compiled import log_posterior as compiled_log_posterior
from bayescal.bayes.compiled import sample as sample_compiled
from bayescal.bayes.compiled import sample_dirgen as sample_compiled_dirgen
from bayescal.bayes.gauge import dirlin_gauge
from bayescal.bayes.hierarchical import (
    GROUPS,
    StructuredPrior,
    draw_prior,
    maps_of,
    n_params,
    structured_map,
)
from bayescal.bayes.laplace import (
    dirgen_log_evidence,
    dirgen_mode,
    dirgen_pointwise_joint,
    dirlin_log_evidence,
    draws_per_chunk,
    whitening,
)
from bayescal.bayes.models import CentredWhitening, dirgen_model, dirlin_model
from bayescal.bayes.priors import DirGenPrior, DirLinPrior, penalty_to_prior
from bayescal.calibrators._base import FamilyCalibratorMixin
from bayescal.calibrators.generative import (
    AUTO_STRENGTHS,
    GenerativeDirichletCalibrator,
    auto_prior_at,
    choose_auto_strength,
)
from bayescal.dirichlet import DirichletPrior, SufficientStatistics, as_prior
from bayescal.maps import dirgen_to_dirlin, log_features, softmax

__all__ = [
    "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator",
    "ConvergenceError",
    "SamplingWarning",
    "hdi_of_draws",
    "pointwise_log_likelihood",
    "posterior_model_id",
    "resolve_sampler",
]

Array = NDArray[np.float64]
SAMPLERS = ("auto", "jax", "pymc", "nutpie", "numpyro", "laplace", "advi")
_MCMC = ("jax", "pymc", "nutpie", "numpyro")
#: Warm-up steps of ``tune="auto"``: PyMC's default, and a shorter warm-up where
#: the posterior is sampled in centred coordinates with a fixed whitening by the
#: Hessian at its mode (close to a standard normal there, so little is left to
#: adapt: at k = 10, n = 5000 R-hat, ESS and divergences match tune = 1000 at
#: 0.65 x the time; docs/benchmarks.md, *Bayesian defaults*).
TUNE_AUTO = 1000
TUNE_AUTO_CENTRED = 300
#: Warm-up steps of ``tune="auto"`` for the compiled sampler (``sampler="jax"``) in
#: the conditional coordinates: on 44 real calibration sets (k = 3-10, n = 30-300)
#: the same fits passed their checks as with 1000 steps, the posterior-mean test
#: log-loss moved by less than 1 %, and the fits took 0.7 x the time; the
#: 200-replication SBC passes (docs/benchmarks.md, *Compiled sampler*).
TUNE_AUTO_COMPILED = 500

#: Most map coefficients that :class:`BayesianDirichletCalibrator` samples (the
#: identified entries of ``W`` and ``b``: ``k^2 - 1`` for the full map): the
#: mode's whitening is a dense square matrix of that size and one gradient costs
#: about its square. 899 is the full map at ``k = 30``, the largest measured (one
#: compiled gradient in the map's own coordinates 2.1 ms at n = 5000); the full
#: map at ``k = 100`` has 9,999 (docs/benchmarks.md, *How large a model*).
MAX_COEFS = 899
#: Most coefficients sampled in the conditional coordinates: 224 is the full map
#: at ``k = 15``, the largest measured to pass its checks. With PyMC's samplers
#: every gradient factorises a matrix of that size (one compiled gradient 2.5 ms
#: at ``k = 15``; 10 ms at ``k = 20``, 92 ms at ``k = 30``); the compiled
#: sampler's low-rank form (:func:`bayescal.bayes.compiled.lowrank_theta`) does
#: not (0.34 ms at ``k = 15``, 0.72 ms at ``k = 20``), but at ``k = 20``,
#: ``n = 100`` a default fit took 14.4 minutes: 60 divergences at
#: ``target_accept=0.95``, then a retry at 0.999 (111 leapfrog steps per draw).
MAX_CONDITIONAL_COEFS = 224
#: Minutes a default fit took at that limit when every gradient factorised
#: (k = 15, n = 100, the compiled sampler before its low-rank form, 2 cores), and
#: seconds with the low-rank form, the compilation included (docs/benchmarks.md,
#: *How large a model*).
CONDITIONAL_FIT_MINUTES = 7.4
LOWRANK_FIT_SECONDS = 47.0


def _fast_extra_installed() -> bool:
    """Whether JAX and NumPyro (the ``fast`` extra) can be imported."""
    return all(importlib.util.find_spec(m) is not None for m in ("jax", "numpyro"))


def resolve_sampler(sampler: str, *, compiled: bool = False) -> str:
    """The sampler ``"auto"`` stands for (any other name is returned as is).

    ``"jax"`` (:mod:`bayescal.bayes.compiled`) where the model has a compiled
    sampler (``compiled``: the structured priors) and NumPyro and JAX (the
    ``fast`` extra) are installed; else nutpie when installed; else PyMC's NUTS.
    """
    if sampler != "auto":
        return sampler
    if compiled and _fast_extra_installed():
        return "jax"
    return "nutpie" if importlib.util.find_spec("nutpie") is not None else "pymc"


def _shifted_logits(W: Array, b: Array, x: Array):
    """``(start, z)`` per chunk of draws: ``z[s, j, i] = W_s x_i + b_s`` less its max over ``j``.

    ``W`` of shape (draws, k, k) and ``b`` of shape (draws, k); ``z`` of shape
    (c, k, n) for the draws ``start .. start + c``, one matrix product per
    chunk (:func:`~bayescal.bayes.laplace.draws_per_chunk`), laid out (draw,
    class, sample) so that every elementwise pass that follows runs over
    contiguous samples. The caller may overwrite ``z``.
    """
    n, k = x.shape
    n_draws = W.shape[0]
    step = draws_per_chunk(n, k)
    xt = np.ascontiguousarray(x.T)
    for s in range(0, n_draws, step):
        c = min(step, n_draws - s)
        z = (W[s : s + c].reshape(c * k, k) @ xt).reshape(c, k, n)
        z += b[s : s + c, :, None]
        z -= z.max(axis=1)[:, None, :]
        yield s, z


def pointwise_log_likelihood(W: ArrayLike, b: ArrayLike, x: Array, y: Array, *,
                             out: Array | None = None) -> Array:
    r"""``ln softmax(W_s x_i + b_s)[y_i]`` for every draw ``s`` and sample ``i``.

    Parameters
    ----------
    W : array-like of shape (..., k, k)
    b : array-like of shape (..., k)
    x : ndarray of shape (n, k)
    y : ndarray of shape (n,)
    out : ndarray of shape (n_draws, n), optional
        A float64 array to write the result into (``n_draws`` the product of
        ``W``'s leading dimensions), e.g. the rows of a larger table, so that
        no second ``n_draws x n`` array is allocated and copied.

    Returns
    -------
    ndarray of shape (..., n)
        ``out`` reshaped, when given.
    """
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    lead = W.shape[:-2]
    n, k = x.shape
    Wf = W.reshape(-1, k, k)
    if out is None:
        out = np.empty((Wf.shape[0], n))
    elif (not isinstance(out, np.ndarray) or out.shape != (Wf.shape[0], n)
          or out.dtype != np.float64 or not out.flags.writeable):
        raise ValueError(f"out must be a writeable float64 array of shape {(Wf.shape[0], n)}; "
                         f"got {getattr(out, 'dtype', type(out).__name__)} of shape "
                         f"{getattr(out, 'shape', None)}")
    rows = np.arange(n)
    for s, z in _shifted_logits(Wf, b.reshape(-1, k), x):
        picked = z[:, y, rows]
        np.exp(z, out=z)
        out[s : s + len(z)] = picked - np.log(z.sum(axis=1))
    return out.reshape(*lead, n)


def hdi_of_draws(draws: ArrayLike, hdi_prob: float = 0.94) -> tuple[Array, Array]:
    """Highest-density interval of each quantity, from its draws along the first axis.

    Parameters
    ----------
    draws : array-like of shape (n_draws, ...)
    hdi_prob : float in (0, 1), default=0.94

    Returns
    -------
    lower, upper : ndarray of shape ``draws.shape[1:]``
        The shortest interval holding ``ceil(hdi_prob * n_draws)`` draws.
    """
    hdi_prob = check_nonnegative_float(hdi_prob, "hdi_prob", strict=True)
    if hdi_prob >= 1.0:
        raise ValueError(f"hdi_prob must be in (0, 1); got {hdi_prob!r}")
    p = np.sort(np.asarray(draws, dtype=np.float64), axis=0)
    S = p.shape[0]
    m = min(S, max(1, int(np.ceil(hdi_prob * S))))
    widths = p[m - 1 :] - p[: S - m + 1]
    i = np.argmin(widths, axis=0)
    lower = np.take_along_axis(p, i[None], axis=0)[0]
    upper = np.take_along_axis(p, (i + m - 1)[None], axis=0)[0]
    return lower, upper


def _check_open_unit(value: Any, name: str, also: str = "") -> None:
    """A real number in (0, 1) (not a bool), else ValueError naming ``name`` and the value."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not 0.0 < float(value) < 1.0
    ):
        raise ValueError(f"{name} must be {also}in (0, 1); got {value!r}")


@dataclass(frozen=True)
class _Attempt:
    """The sampler settings of one try at the posterior (``fit`` makes at most three)."""

    target_accept: float
    draws: int


#: A chain whose step size adapts below this in its warm-up has stalled (no move
#: within a tree of 1023 leapfrog steps). With the compiled sampler's
#: single-precision rows (``compiled.SINGLE_PRECISION_MIN_ROWS``) this was seen
#: on pendigits' logistic scores (k = 10, n = 2748) at ``target_accept=0.8``,
#: seed 0: one chain at 2.6e-14 where the same chain in double precision adapted
#: to 0.23 (docs/benchmarks.md, *A stalled chain in single precision*). Such a
#: run stops at the end of its warm-up and runs again in double precision.
STALL_STEP_SIZE = 1e-8


def _failed_on(diagnostics: dict[str, Any]) -> str | None:
    """Why an MCMC posterior failed its checks: ``"divergences"``, ``"mixing"`` or ``None``.

    ``"divergences"``: divergent transitions above the threshold (whatever else
    failed); ``"mixing"``: no divergence problem, but R-hat or ESS.
    """
    d = diagnostics
    if d["passed"]:
        return None
    return "divergences" if d["divergences"] > d["divergence_threshold"] else "mixing"


def _prior_from_dict(d: dict[str, Any]) -> Any:
    """The prior object of a saved posterior (the inverse of ``prior_.to_dict()``)."""
    if "structured" in d:
        return StructuredPrior.from_dict(d)
    return (DirLinPrior if "sd_W" in d else DirGenPrior).from_dict(d)


def _inv_chol(H: Array) -> Array:
    """``L`` with ``L L^T = H^{-1}`` (upper triangular), for SPD ``H``."""
    C = np.linalg.cholesky(H)
    return np.linalg.inv(C).T


def canonical_draws(W: Array, b: Array) -> tuple[Array, Array]:
    """:func:`bayescal.maps.dirlin_to_canonical` of every draw (leading axes), vectorised.

    ``A = W - min_j W[j]`` column by column and ``c = softmax(b - ln(k) W 1)``.
    """
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    k = W.shape[-1]
    return W - W.min(axis=-2, keepdims=True), softmax(b - np.log(k) * W.sum(axis=-1))


def _per_draw(func, P: Array, Q: Array) -> tuple[Array, Array]:
    """Apply a conversion of :mod:`bayescal.maps` to every draw (leading axes)."""
    lead = P.shape[: P.ndim - 2]
    pairs = zip(P.reshape(-1, *P.shape[-2:]), Q.reshape(-1, Q.shape[-1]), strict=True)
    out = [func(p, q) for p, q in pairs]
    R1 = np.stack([o[0] for o in out]).reshape(*lead, *P.shape[-2:])
    R2 = np.stack([o[1] for o in out]).reshape(*lead, Q.shape[-1])
    return R1, R2


#: Posterior variables every Bayesian calibrator stores and predicts with.
_MAP_DRAWS = ("W", "b", "A", "c")


def _update_digest(h: Any, arrays: dict[str, Any]) -> None:
    """Feed named arrays to a hash: name, shape and little-endian float64 values, by name."""
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype="<f8")
        h.update(f"{name}{a.shape}:".encode())
        h.update(a.tobytes())


def posterior_model_id(idata: Any) -> str:
    """The model id of a Bayesian calibrator's posterior: a digest of all it stores.

    SHA-256 (first 16 hex digits) of the ``bayescal_*`` attributes of the
    posterior group (configuration, classes, prior, sampler; not the id
    itself), the ``bayescal_*`` arrays of ``constant_data`` (the fit's
    sufficient statistics and posterior mode) and every array of the
    posterior group (the draws). A posterior whose draws were changed, even
    all scaled alike, has another id, and is refused on load.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        ``idata_`` of a fitted Bayesian calibrator.

    Returns
    -------
    str
        16 hexadecimal digits.
    """
    post = _compat.group_dataset(idata, "posterior")
    attrs = {k: str(v) for k, v in post.attrs.items()
             if k.startswith("bayescal_") and k != "bayescal_model_id"}
    h = hashlib.sha256(b"bayescal-posterior:")
    h.update(json.dumps(attrs, sort_keys=True).encode())
    const = _compat.group_dataset(idata, "constant_data")
    _update_digest(h, {k: v.values for k, v in const.data_vars.items()
                       if k.startswith("bayescal_")})
    _update_digest(h, {k: v.values for k, v in post.data_vars.items()})
    return h.hexdigest()[:16]


def _check_draws(post: Any, names: tuple[str, ...]) -> None:
    """Refuse a posterior group that lacks one of ``names`` or holds a non-finite draw of one."""
    missing = sorted(set(names) - set(post.data_vars))
    if missing:
        raise ValueError(f"the posterior group lacks the variable(s) {missing}")
    for name in dict.fromkeys(names):
        values = np.asarray(post[name].values)
        if values.dtype.kind not in "fiu" or not np.isfinite(values).all():
            raise ValueError(f"variable {name!r} holds non-finite draws (NaN or infinity) or "
                             f"is not numeric ({values.dtype})")


class _BayesianFamilyBase(FamilyCalibratorMixin):
    """Posterior side shared by the Bayesian calibrators.

    Subclasses implement ``_fit_posterior(x, y, attempt)`` which sets ``idata_`` with
    ``W``, ``b`` in its posterior, ``coef_`` / ``intercept_`` (the map at the
    posterior mode) and ``_stats`` (arrays fingerprinting the fit).
    """

    _diag_vars: tuple[str, ...] = ("W", "b")

    # -- fitting ----------------------------------------------------------
    def _failure_hint(self, y: Array, k: int) -> str:
        """What to try when the posterior fails its checks ("" : nothing specific)."""
        return ""

    def _compiled_sampler(self) -> bool:
        """Whether this model has the compiled sampler ``sampler="jax"``."""
        return False

    def _check_size(self, k: int) -> None:
        """Refuse, before any work, a model too large to sample (``ValueError``)."""

    def _model_name(self) -> str:
        """How error messages name this model."""
        return type(self).__name__

    def fit(self, scores: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Sample the posterior of the calibration map.

        After MCMC the posterior is checked (:func:`bayescal.bayes.diagnose`:
        R-hat, bulk and tail ESS, divergences against ``rhat_max``,
        ``ess_min``, ``max_divergences``). A posterior that fails raises
        :class:`~bayescal.bayes.ConvergenceError` and leaves the estimator
        unfitted (``on_failure="raise"``, the default), or warns
        (:class:`~bayescal.bayes.SamplingWarning`, ``on_failure="warn"``).

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated probabilities (``input="probs"``) or logits.
        y : array-like of shape (n_samples,)
            Class labels (see ``classes``).
        sample_weight : None
            Not supported: must be ``None`` (the likelihood counts every
            calibration row once; a weighted likelihood is not a posterior
            of the data). Accepted as a keyword so that a weight gets a clear
            ``ValueError`` rather than a ``TypeError``.

        Returns
        -------
        self

        Raises
        ------
        ConvergenceError
            If the MCMC posterior fails its checks and ``on_failure="raise"``.
        ValueError
            Bad input, a model too large to sample, or ``sample_weight`` given.
        """
        if sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} does not take sample_weight (got an array of type "
                f"{type(sample_weight).__name__}): its likelihood counts every calibration "
                "row once, and a weighted likelihood is not the posterior of any data. Repeat "
                "rows to give them integer weights, or use the MAP fit (DirichletCalibrator or "
                "GenerativeDirichletCalibrator), which takes sample_weight.")
        self._check_params()
        # validates everything; writes nothing
        data = self._fit_data(scores, y, eps=self._param_floor())
        self._check_size(data.x.shape[1])  # before any work, and before clearing a fit
        self._clear_fitted()
        try:
            self._fit_validated(scores, y, data)
        except BaseException:
            self._clear_fitted()
            raise
        return self

    def _fit_validated(self, scores: ArrayLike, y: ArrayLike, data: Any) -> None:
        """``fit``'s work on validated ``data`` (an exception leaves the estimator unfitted)."""
        self.sampler_ = resolve_sampler(self.sampler, compiled=self._compiled_sampler())
        data = self._choose_floor(data)
        self._set_fit_data(data)
        attempts = []
        self._reused = {}  # what a retry takes from the first attempt (mode, whitening)
        attempt: _Attempt | None = _Attempt(float(self.target_accept), int(self.draws))
        while attempt is not None:
            self._fit_posterior(data.x, data.y, attempt)
            self.diagnostics_ = self._diagnose()  # of the model's variables, not A, c
            whiten = self._reused.get("whitening")
            if whiten is not None:
                self.diagnostics_["coordinates"] = (
                    "centred" if isinstance(whiten, CentredWhitening) else "conditional")
            if self.sampler_ not in _MCMC:
                break
            attempts.append({"target_accept": attempt.target_accept, "draws": attempt.draws,
                             "divergences": self.diagnostics_["divergences"],
                             "passed": self.diagnostics_["passed"]}
                            | self._reused.get("precision_note", {}))
            self.diagnostics_["attempts"] = list(attempts)
            attempt = self._retry(attempt)
        self._reused = {}
        post = _compat.group_dataset(self.idata_, "posterior")
        A, c = canonical_draws(post["W"].values, post["b"].values)
        post = post.assign(A=(("chain", "draw", "class_out", "class_in"), A),
                           c=(("chain", "draw", "class_out"), c))
        # the map's parameters first (what az.summary lists first), the sampler's
        # whitened coordinates (nutpie keeps xi, eta) after them
        first = [v for v in (*self._diag_vars, "A", "c") if v in post.data_vars]
        post = post[first + [v for v in post.data_vars if v not in first]]
        _compat.set_group(self.idata_, "posterior", post)
        if self.sampler_ in _MCMC:
            hint = self._failure_hint(data.y, data.x.shape[1])
            if len(attempts) > 1 or attempts[-1]["divergences"]:
                tries = [f"{a['draws']} draws per chain at target_accept="
                         f"{a['target_accept']}: {a['divergences']} divergences"
                         for a in attempts]
                hint = (f"Sampled {len(attempts)} time{'s' if len(attempts) > 1 else ''} "
                        f"({'; then '.join(tries)}). {self._next_step(attempts)}"
                        f"{hint}").strip()
            enforce(self.diagnostics_, on_failure=self.on_failure, sampler=self.sampler_,
                    idata=self.idata_, hint=hint)
        if self.log_likelihood:
            self._add_log_likelihood([(slice(None), data.x)], data.y)
        self._stamp()

    def _next_step(self, attempts: list[dict[str, Any]]) -> str:
        """What to try after the tries ``attempts`` failed ("" when more of the same may do)."""
        last = attempts[-1]
        if last["divergences"] and last["target_accept"] >= 0.999:
            return (f"Divergences remain at target_accept={last['target_accept']}, so smaller "
                    f"steps will not remove them: {self._simpler} or more calibration data "
                    "is the next step. ")
        return ""

    #: What to use when NUTS cannot sample this model at any step size.
    _simpler = "a MAP fit"
    #: ``fit`` names ``sample_weight`` only to refuse it (CalibratedClassifier reads this).
    _takes_sample_weight = False

    def _retry(self, attempt: _Attempt) -> _Attempt | None:
        """The next try after a failed one (``diagnostics_``), or ``None``.

        Divergent transitions: ``retry_target_accept`` (smaller steps), when
        set and higher than the try's. No divergence problem but R-hat or ESS
        short: ``retry_draws`` draws per chain (longer chains), when set and
        more than the try's. So each remedy is applied once at most (three
        tries at most: smaller steps, then longer chains at those steps).
        """
        why = _failed_on(self.diagnostics_)
        if why == "divergences" and self.retry_target_accept is not None:
            ta = float(self.retry_target_accept)
            return replace(attempt, target_accept=ta) if ta > attempt.target_accept else None
        if why == "mixing" and self.retry_draws is not None:
            draws = self._retry_draws()
            return replace(attempt, draws=draws) if draws > attempt.draws else None
        return None

    def _sample_compiled(self, sample: Any, *args: Any, attempt: _Attempt, tune: int,
                         precision: bool = False) -> dict[str, Any]:
        """``sample(*args, ...)`` (:func:`bayescal.bayes.compiled.sample` or ``sample_dirgen``)
        for ``attempt``: the mixing retry continues the previous try's chains
        (:meth:`_resume`), and this run's chains are kept for the next try.

        ``precision`` (``compiled.sample``, which may run the likelihood's rows
        in single precision): unless ``retry_draws`` is ``None``, a run whose
        chain stalls in its warm-up (:data:`STALL_STEP_SIZE`,
        :class:`~bayescal.bayes.compiled.StalledChain`) runs again afresh in
        double precision, as does every later try of this fit; the tries say so
        (``"double_precision"``, ``"stalled_step_size"``).
        """
        kwargs: dict[str, Any] = {}
        if precision and self._reused.get("precision_note"):
            kwargs["single_precision"] = False
        elif precision and self.retry_draws is not None:
            kwargs["stop_stalled"] = STALL_STEP_SIZE
        run = functools.partial(sample, *args, draws=attempt.draws, tune=tune,
                                chains=self.chains, random_seed=self.random_seed,
                                target_accept=attempt.target_accept)
        try:
            groups = run(resume=self._resume(attempt), **kwargs)
        except StalledChain as stalled:
            self._reused["precision_note"] = {"double_precision": True,
                                              "stalled_step_size": stalled.step_size}
            groups = run(resume=None, single_precision=False)
        self._reused["chains"] = groups.pop("chains")
        return groups

    def _resume(self, attempt: _Attempt) -> Any:
        """The previous try's compiled chains when ``attempt`` only runs them longer.

        The mixing retry (more draws at the same ``target_accept``) continues
        the chains of the try before it (:class:`bayescal.bayes.compiled.Chains`):
        the same draws as a fresh run of that length with the same seed, for
        the extra steps only. Any other try starts afresh.
        """
        chains = self._reused.pop("chains", None)
        if chains is not None and chains.target_accept == attempt.target_accept:
            return chains
        return None

    def _retry_draws(self) -> int:
        """``retry_draws`` resolved (``"auto"``: twice ``draws``)."""
        return 2 * int(self.draws) if self.retry_draws == "auto" else int(self.retry_draws)

    def _param_floor(self) -> float:
        """The floor of the ``eps`` parameter (``"auto"``: EPS, before any choice)."""
        return EPS if isinstance(self.eps, str) else self.eps

    def _choose_floor(self, data: Any) -> Any:
        """The fit's data under the floor chosen in ``fit`` (``eps="auto"``; sets ``eps_``)."""
        return data

    def _clear_fitted(self) -> None:
        """Forget every fitted attribute (a failed fit leaves the estimator unfitted)."""
        for name in list(vars(self)):
            if (name.endswith("_") and not name.startswith("__")) or name == "_stats":
                delattr(self, name)

    def _diagnose(self) -> dict[str, Any]:
        """:func:`diagnose` of ``idata_`` with this estimator's thresholds ({} if not MCMC)."""
        if getattr(self, "sampler_", self.sampler) not in _MCMC:
            return {"approximate": True}
        return diagnose(self.idata_, list(self._diag_vars), rhat_max=self.rhat_max,
                        ess_min=self.ess_min, max_divergences=self.max_divergences)

    def _add_log_likelihood(self, groups: list[tuple[Any, Array]], y: Array) -> None:
        """The ``log_likelihood`` group: ``ln p(y_i | q_i, draw)``, dims (chain, draw, obs).

        ``groups`` as :meth:`_draw_features` returns them.
        """
        import xarray as xr

        post = self.idata_.posterior
        n = groups[0][1].shape[0]
        ll = np.empty((self.n_draws_, n))
        W, b = self._draws("W"), self._draws("b")
        for index, x in groups:
            if isinstance(index, slice):  # rows of ll: written in place, no copy
                pointwise_log_likelihood(W[index], b[index], x, y, out=ll[index])
            else:
                ll[index] = pointwise_log_likelihood(W[index], b[index], x, y)
        ll = ll.reshape(post.sizes["chain"], post.sizes["draw"], n)
        coords = {"chain": post["chain"].values, "draw": post["draw"].values,
                  "obs": np.arange(n)}
        group = xr.Dataset({"y": (("chain", "draw", "obs"), ll)}, coords=coords)
        _compat.set_group(self.idata_, "log_likelihood", group)

    def compute_log_likelihood(self, scores: ArrayLike, y: ArrayLike):
        """Add (or replace) the ``log_likelihood`` group for the calibration data.

        For an estimator fitted with ``log_likelihood=False`` or loaded from a
        file saved without the group; ``scores`` and ``y`` must be the data it
        was fitted on (checked against the stored sufficient statistics).

        Returns
        -------
        self
        """
        check_is_fitted(self, "idata_")
        x = self._features(scores)
        y = self._encode_labels(y, n_samples=x.shape[0], n_classes=x.shape[1])[1]
        self._check_same_data(x, y)
        self._add_log_likelihood(self._draw_features(scores), y)
        return self

    def _resolve_tune(self, whitening: Any = None, compiled: bool = False) -> int:
        """Warm-up steps of this fit, stored as ``tune_`` (``"auto"``: :data:`TUNE_AUTO`,
        :data:`TUNE_AUTO_CENTRED` when ``whitening`` is a centred one, else
        :data:`TUNE_AUTO_COMPILED` for the ``compiled`` sampler)."""
        if isinstance(self.tune, str):
            if isinstance(whitening, CentredWhitening):
                self.tune_ = TUNE_AUTO_CENTRED
            else:
                self.tune_ = TUNE_AUTO_COMPILED if compiled else TUNE_AUTO
        else:
            self.tune_ = int(self.tune)
        return self.tune_

    def _check_same_data(self, x: Array, y: Array) -> None:
        stats = SufficientStatistics.from_features(x, y)
        same = (np.array_equal(stats.counts, self._stats["counts"])
                and np.allclose(stats.sums, self._stats["S"], rtol=1e-12, atol=1e-12))
        if not same:
            raise ValueError("scores and y are not the calibration data this estimator was "
                             f"fitted on (class counts {stats.counts.astype(int).tolist()} vs "
                             f"{np.asarray(self._stats['counts']).astype(int).tolist()}, or "
                             "different feature sums)")

    def _check_common(self) -> None:
        check_option(self.sampler, "sampler", SAMPLERS)
        if self.sampler == "jax" and not self._compiled_sampler():
            raise ValueError("sampler='jax' (the compiled sampler) samples the structured "
                             "priors of BayesianDirichletCalibrator (prior='hierarchical', "
                             "'fixed' or 'temperature') and BayesianGenerativeCalibrator; "
                             f"{self._model_name()} has none: use "
                             "sampler='auto', 'nutpie', 'pymc' or 'numpyro'")
        check_option(self.on_failure, "on_failure", ("raise", "warn"))
        if not isinstance(self.log_likelihood, bool | np.bool_):
            raise ValueError(f"log_likelihood must be True or False; got {self.log_likelihood!r}")
        check_nonnegative_float(self.rhat_max, "rhat_max", strict=True)
        if not self.rhat_max >= 1.0:
            raise ValueError(f"rhat_max must be >= 1; got {self.rhat_max!r}")
        check_nonnegative_float(self.ess_min, "ess_min")
        md = self.max_divergences
        if isinstance(md, bool) or not isinstance(md, int | np.integer) or md < 0:
            raise ValueError(f"max_divergences must be a non-negative integer; got {md!r}")
        _check_open_unit(self.target_accept, "target_accept")
        if self.retry_target_accept is not None:
            _check_open_unit(self.retry_target_accept, "retry_target_accept", "None or ")
        rd = self.retry_draws
        if not (rd is None or (isinstance(rd, str) and rd == "auto")) and (
            isinstance(rd, bool) or not isinstance(rd, int | np.integer) or rd < 1
        ):
            raise ValueError(f"retry_draws must be a positive integer, 'auto' or None; got {rd!r}")
        if not isinstance(self.progressbar, bool | np.bool_):
            raise ValueError(f"progressbar must be True or False; got {self.progressbar!r}")
        check_positive_int(self.draws, "draws")
        check_positive_int(self.chains, "chains")
        tune = self.tune
        if not (isinstance(tune, str) and tune == "auto") and (
            isinstance(tune, bool) or not isinstance(tune, int | np.integer) or tune < 0
        ):
            raise ValueError(f"tune must be a non-negative integer or 'auto'; got {self.tune!r}")
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

    def _draw_features(self, scores: ArrayLike) -> list[tuple[Any, Array]]:
        """The posterior draws in groups, each with the features it maps: ``[(index, x)]``.

        ``index`` selects draws in :meth:`_draws` order (``slice(None)``:
        all of them, at the fit's floor ``eps_``).
        """
        return [(slice(None), self._features(scores))]

    def _iter_draw_maps(self, x: Array, index: Any = slice(None)):
        """``(start, p)``: the calibrated probabilities of each chunk of the draws ``index``,
        ``p`` shaped (draw, sample, class), ``start`` its first draw's place in ``index``."""
        for start, p in _shifted_logits(self._draws("W")[index], self._draws("b")[index], x):
            np.exp(p, out=p)
            p /= p.sum(axis=1)[:, None, :]
            yield start, p.transpose(0, 2, 1)  # a view

    def predict_proba_draws(self, scores: ArrayLike) -> Array:
        """The calibrated probabilities of every posterior draw.

        Returns
        -------
        proba : ndarray of shape (n_draws, n_samples, n_classes)
        """
        check_is_fitted(self, "idata_")
        groups = self._draw_features(scores)
        n, k = groups[0][1].shape
        out = np.empty((self.n_draws_, n, k))
        places = np.arange(self.n_draws_)
        for index, x in groups:
            where = places[index]
            for start, p in self._iter_draw_maps(x, index):
                out[where[start : start + len(p)]] = p
        return out

    def predict_proba(self, scores: ArrayLike, kind: str = "mean") -> Array:
        r"""Calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        kind : {"mean", "mode"}, default="mean"
            ``"mean"``: the posterior-averaged map
            :math:`\frac1S\sum_s \mathrm{softmax}(W_s x + b_s)`, the
            prediction to use; ``"mode"``: the single map at the posterior mode
            of the model's own coordinates (``coef_``, ``intercept_``). The mode
            is not :class:`~bayescal.DirichletCalibrator`'s MAP default: with
            the hierarchical prior it is taken jointly with the scales, which
            pulls it towards temperature scaling at small ``n``, and it ignores
            the posterior's spread, which the mean averages over. ``"map"`` is
            the former name of ``"mode"`` (deprecated: it reads as the MAP
            default, which it is not).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to one.
        """
        check_option(kind, "kind", ("mean", "mode", "map"))
        check_is_fitted(self, "idata_")
        if kind == "map":
            warnings.warn("predict_proba(kind='map') is the posterior mode, not "
                          "DirichletCalibrator's MAP default; it is now spelled kind='mode' "
                          "('map' will be removed)", FutureWarning, stacklevel=2)
            kind = "mode"
        if kind == "mode":
            return super().predict_proba(scores)
        groups = self._draw_features(scores)
        total = np.zeros_like(groups[0][1])
        for index, x in groups:
            for _, chunk in self._iter_draw_maps(x, index):
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
        return hdi_of_draws(self.predict_proba_draws(scores), hdi_prob)

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
        from bayescal.model_schema import PARAM_CODECS

        params = {}
        for key, v in self.get_params().items():
            codec = PARAM_CODECS.get((type(self).__name__, key))
            if codec is not None and codec.accepts(v):
                v = codec.encode(v)
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, np.ndarray):
                v = v.tolist()
            elif not (v is None or isinstance(v, bool | int | float | str | list)):
                v = repr(v)  # e.g. a CV splitter: recorded, not restorable
            params[key] = v
        return {"class": type(self).__name__, "params": params}

    def _stamp(self) -> None:
        """Record the configuration, the fit's fingerprint and the model id in ``idata_``."""
        from bayescal import __version__

        stats = self._stats | {"mode_W": self.coef_, "mode_b": self.intercept_}
        if hasattr(self, "eps_"):
            stats["eps"] = np.array(float(self.eps_))
        if hasattr(self, "tune_"):
            stats["tune"] = np.array(int(self.tune_))
        if hasattr(self, "floors_"):
            stats["floors"], stats["floor_weights"] = self.floors_, self.floor_weights_
        attrs = {
            "bayescal_config": json.dumps(self._config(), sort_keys=True),
            "bayescal_classes": json.dumps(np.asarray(self.classes_).tolist()),
            "bayescal_version": __version__,
            "bayescal_prior": json.dumps(self.prior_.to_dict(), sort_keys=True),
            "bayescal_sampler": self.sampler_,
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
        self.model_id_ = posterior_model_id(self.idata_)
        self.idata_.posterior.attrs["bayescal_model_id"] = self.model_id_

    def _netcdf_bytes(self) -> bytes:
        """The posterior file's content (netCDF-4), built in memory.

        :func:`bayescal.model_files.save_model` writes it beside the JSON
        model file; save a model with :meth:`save`.
        """
        check_is_fitted(self, "idata_")
        return _compat.to_netcdf_bytes(self.idata_)

    @classmethod
    def _read_posterior(cls, path: str | os.PathLike):
        """The fitted estimator of a posterior file written by :meth:`_netcdf_bytes`.

        The file is refused unless it holds finite draws of every variable
        predictions use and its model id (:func:`posterior_model_id`) matches
        its content. Load a model with :func:`bayescal.load`.

        Raises
        ------
        ValueError
            With a message that does not repeat ``path`` (the caller names
            the model file and its posterior).
        """
        idata = _compat.from_netcdf(path)
        attrs = dict(idata.posterior.attrs)
        est = cls(**cls._stored_params(attrs))
        _check_draws(_compat.group_dataset(idata, "posterior"),
                     _MAP_DRAWS + tuple(est._diag_vars))
        stored = attrs.get("bayescal_model_id")
        if posterior_model_id(idata) != stored:
            raise ValueError(f"its model id {stored!r} does not match its content (the "
                             "configuration, the fit's statistics and the draws): the file was "
                             "modified or is corrupt")
        est._set_loaded_state(idata, attrs)
        return est

    @classmethod
    def _stored_params(cls, attrs: dict[str, Any]) -> dict[str, Any]:
        """The constructor parameters recorded by :meth:`_stamp` (refusing another class's)."""
        if "bayescal_config" not in attrs:
            raise ValueError("it was not written by bayescal (no bayescal_config)")
        from bayescal.model_schema import PARAM_CODECS

        config = json.loads(attrs["bayescal_config"])
        if config["class"] != cls.__name__:
            raise ValueError(f"it holds a {config['class']}, not a {cls.__name__}")
        missing = sorted(set(cls().get_params()) - set(config["params"]))
        if missing:  # e.g. a generative posterior written before prior= existed
            raise ValueError(f"its configuration lacks the parameters {missing} of this "
                             f"release's {cls.__name__}: it was written by an older bayescal; "
                             "fit and save it again")
        out = {}
        for key, v in config["params"].items():
            codec = PARAM_CODECS.get((cls.__name__, key))
            if isinstance(v, dict) and codec is not None:
                v = codec.decode(v)
            out[key] = tuple(v) if isinstance(v, list) else v
        return out

    def _set_loaded_state(self, idata: Any, attrs: dict[str, Any]) -> None:
        """The fitted attributes of a checked posterior file."""
        stats = {
            key.removeprefix("bayescal_"): idata.constant_data[key].values
            for key in idata.constant_data.data_vars
            if key.startswith("bayescal_")
        }
        self.idata_ = idata
        self.model_id_ = attrs["bayescal_model_id"]
        self.coef_ = stats.pop("mode_W")
        self.intercept_ = stats.pop("mode_b")
        if "eps" in stats:
            self.eps_ = float(stats.pop("eps"))
        if "tune" in stats:
            self.tune_ = int(stats.pop("tune"))
        if "floors" in stats:
            self.floors_ = np.asarray(stats.pop("floors"), dtype=np.float64)
            self.floor_weights_ = np.asarray(stats.pop("floor_weights"), dtype=np.float64)
        self._stats = stats
        k = self.coef_.shape[0]
        self.n_features_in_ = k
        classes_json = attrs.get("bayescal_classes", "")
        self.classes_ = np.asarray(json.loads(classes_json)) if classes_json else np.arange(k)
        self.sampler_ = attrs.get("bayescal_sampler", resolve_sampler(
            self.sampler, compiled=self._compiled_sampler()))
        self.diagnostics_ = self._diagnose()
        self.prior_ = _prior_from_dict(json.loads(attrs["bayescal_prior"]))
        if "bayescal_log_evidence" in attrs:
            self.log_evidence_ = float(attrs["bayescal_log_evidence"])
        self._restore()

    def _restore(self) -> None:
        """Rebuild derived fitted attributes after :meth:`_read_posterior`."""


#: Priors of :class:`BayesianDirichletCalibrator`: the structured family
#: (:mod:`bayescal.bayes.hierarchical`) and the readings of MAP penalties.
DIRLIN_PRIORS = ("hierarchical", "fixed", "temperature", "structured", "odir", "l2")
_STRUCTURED = ("hierarchical", "fixed", "temperature")
_PENALTY = ("structured", "odir", "l2")


def _tau_of(strength: float) -> float:
    """``tau = 1 / sqrt(strength)`` (``inf`` strength: 0, the group pinned at the centre)."""
    return 0.0 if np.isinf(strength) else float(1.0 / np.sqrt(strength))


class BayesianDirichletCalibrator(_BayesianFamilyBase):
    r"""Bayesian Dirichlet calibration (DirLin): a posterior over maps ``softmax(W x + b)``.

    The default prior (``prior="hierarchical"``) is the Bayesian version of
    the structured default of :class:`~bayescal.DirichletCalibrator` (same
    family, same centre): ``W = s W'`` with the inverse temperature ``s``
    sampled, :math:`\ln s \sim \mathcal N(m_s, \sigma_s^2)`
    (``log_scale_prior``), ``W'`` around the identity and ``b`` around 0 with
    scales that are learned,

    .. math::

        \begin{aligned}
        W'_{jj} - 1 &\sim \mathcal N\Bigl(0, \frac{\tau_d^2}{2k}\Bigr),\quad
        W'_{ij} \sim \mathcal N\Bigl(0, \frac{\tau_o^2}{2k(k-1)}\Bigr),\\
        b_j &\sim \mathcal N\Bigl(0, \frac{\tau_b^2}{2k}\Bigr),\quad
        \tau_o, \tau_d, \tau_b \sim \text{HalfNormal}(h),
        \end{aligned}

    (``h = tau_scale``; :math:`\tau = 1/\sqrt{\lambda}` for the strengths
    :math:`\lambda` of the structured penalty, so ``tau = 1`` is structured
    matrix scaling's default). Nothing depends on ``n``; the posterior is
    proper for any data, a class absent from the labels included. The
    directions that leave every map unchanged are integrated out exactly
    (:mod:`bayescal.bayes.hierarchical`) and NUTS runs in coordinates
    whitened conditionally on the scales
    (:class:`~bayescal.bayes.models.ConditionalWhitening`), or, when the data
    hold every direction of the map far more than the prior does (large
    ``n``), in the map's own coordinates with a fixed whitening
    (:class:`~bayescal.bayes.models.CentredWhitening`, chosen by
    :func:`~bayescal.bayes.laplace.centred_whitening`; one gradient then
    costs the likelihood, not a Cholesky factorisation). Both hold the same
    posterior exactly; ``diagnostics_["coordinates"]`` says which ran.

    Other priors: ``"fixed"`` (the same model with the three ``tau`` fixed by
    ``reg_lambda``, ``reg_diag``, ``reg_mu``; ``inf`` pins a group),
    ``"temperature"`` (Bayesian temperature scaling: only ``s``), and the
    readings of a MAP penalty as a Gaussian prior, whose posterior mode is
    exactly the corresponding :class:`~bayescal.DirichletCalibrator` fit:
    ``"structured"`` (centre ``s I`` with ``s`` the fitted temperature scale,
    strengths ``reg_lambda``, ``reg_diag``, ``reg_mu``), ``"odir"`` (flat
    diagonal, sds :math:`\sigma^2 = k(k-1)/(2n\lambda)` off the diagonal and
    :math:`k/(2n\mu)` for ``b``: improper along the diagonal and tied to ``n``,
    kept for the paper's model) and ``"l2"``.

    After MCMC the posterior is checked (R-hat, bulk and tail ESS,
    divergences; see :meth:`fit`): a posterior that fails raises
    :class:`~bayescal.bayes.ConvergenceError` unless ``on_failure="warn"``.

    Size: the full map has :math:`k^2 - 1` identified coefficients. ``fit``
    refuses with a ``ValueError``, before any work, a model with more than
    ``estimators.MAX_COEFS`` (899, the full map at ``k = 30``), and, before
    sampling, more than ``estimators.MAX_CONDITIONAL_COEFS`` (224, ``k = 15``, the
    largest measured to pass) when the data need the conditional
    coordinates (with PyMC's samplers every gradient there factorises a
    matrix of that size; the compiled sampler's low-rank form does not,
    :func:`bayescal.bayes.compiled.lowrank_theta`); the message says what to use instead
    (the diagonal map ``prior="fixed", reg_lambda=float("inf"),
    reg_diag=1.0, reg_mu=1.0``, ``prior="temperature"`` or
    :class:`~bayescal.DirichletCalibrator`). At ``k = 100`` the full map has
    9,999 coefficients: its whitening alone is a dense matrix of that size,
    found from 19,998 gradients (docs/benchmarks.md, *How large a model*).

    Parameters
    ----------
    prior : str, default="hierarchical"
        One of ``"hierarchical"``, ``"fixed"``, ``"temperature"``,
        ``"structured"``, ``"odir"``, ``"l2"`` (above).
    reg_lambda : float, default=1.0
        Off-diagonal strength (``"fixed"``, ``"structured"``; ``"odir"``,
        ``"l2"``: the paper's ``lambda``). ``inf`` pins the group at the centre
        (``"fixed"``).
    reg_diag : float or None, default=None
        Diagonal strength (``"fixed"``, ``"structured"``); ``None``: ``reg_lambda``.
    reg_mu : float or None, default=None
        Intercept strength (``"fixed"``, ``"structured"``, ``"odir"``);
        ``None``: ``reg_lambda``.
    center : {"identity", "zero"}, default="identity"
        Centre of the ``"l2"`` prior.
    log_scale_prior : (float, float), default=(0.0, 1.0)
        Mean and sd of :math:`\ln s` (``"hierarchical"``, ``"fixed"``,
        ``"temperature"``): centred on the uncalibrated scores (``s = 1``), 95 %
        of the prior mass on ``T`` in ``[0.14, 7.1]``. (An sd of 1.5 put mass
        on maps so sharp that the likelihood of near-separable data had walls
        NUTS diverged on: simulation-based calibration at n = 30 had
        divergences in 4 of 5 fits; docs/benchmarks.md, *Bayesian defaults*.)
    tau_scale : float or (float, float, float), default=0.5
        Scale ``h`` of the half-normal hyperprior (``"hierarchical"``), one
        for every group or ``(h_off, h_diag, h_b)``: at 0.5 the prior median
        ``tau`` is 0.34, a strength of about 9, closer to temperature scaling
        than structured matrix scaling's strength 1; ``h = 1`` was worse on
        held-out log-loss at n = 30 (docs/benchmarks.md).
    draws, chains : int, default=1000, 4
        Draws per chain after warm-up, and chains.
    tune : int or "auto", default="auto"
        Warm-up steps per chain. ``"auto"``: 300 when the posterior is
        sampled in centred coordinates (``diagnostics_["coordinates"]``; a
        fixed whitening by the Hessian at the mode leaves the posterior close
        to a standard normal, so a short warm-up adapts the step; at k = 10,
        n = 5000 the fit takes 0.65 x the time with the same R-hat, ESS and no
        divergences); else 500 with the compiled sampler (``sampler="jax"``,
        whose coordinates are whitened by the Laplace fit too: on 44 real
        calibration sets the same fits passed their checks as with 1000
        steps, at 0.7 x the time), and 1000 with the other samplers. The
        steps used are ``tune_``; the convergence checks apply either way.
    sampler : {"auto", "jax", "pymc", "nutpie", "numpyro", "laplace", "advi"}, default="auto"
        ``"jax"`` (structured priors only): the whole NUTS run (NumPyro's
        kernel, diagonal mass matrix adapted in warm-up, chains on one CPU
        device per core) compiled as one JAX program with the data as its
        arguments, so a new data set of the same ``k``, other draws or chains,
        and the retries compile nothing, and a new process reads the program
        from JAX's disk cache
        (:mod:`bayescal.bayes.compiled`); it shows no progress bar.
        ``"auto"``: ``"jax"`` for the structured priors when NumPyro and JAX
        (``pip install 'bayescal[fast]'``) are installed; otherwise nutpie
        when installed, else PyMC's NUTS. ``sampler_`` is the one used. ``"laplace"`` (a
        Gaussian at the mode) and ``"advi"`` are approximations with no
        convergence check; their measured coverage is in the user guide.
    random_seed : int or None
    input : {"probs", "logits"}, default="probs"
    eps : float, "auto" or "average", default="auto"
        Probability floor of the log features, ``x = max(ln q, ln eps)``.
        ``"auto"``: for the structured priors (``"hierarchical"``,
        ``"fixed"``, ``"temperature"``) the floor that
        :class:`~bayescal.DirichletCalibrator`'s ``eps="auto"`` picks on the
        same data (:func:`bayescal.structured.choose_floor`: float64 machine
        epsilon, or ``1 / (k (n + 1))`` when its Laplace evidence is larger,
        which tames exact zeros); :data:`bayescal.EPS` for the penalty
        readings, so that their mode stays the MAP fit. The floor used is
        ``eps_`` (saved with the posterior).
        ``"average"`` (structured priors; the penalty readings take
        ``"auto"``'s floor): the posterior averaged over those two floors,
        each weighted by its posterior probability from the same Laplace
        evidence (:func:`bayescal.structured.floor_evidence`, equal prior
        odds): each floor with a weight of at least
        :data:`FLOOR_WEIGHT_MIN` is sampled as a fit of its own (the same
        prior, sampler, checks and retries: up to twice the sampling), and
        the posterior stored holds ``draws`` draws per chain, each floor's
        share taken from its own chains, with the variable ``eps`` giving
        each draw's floor; ``eps_`` is the most probable floor (that of the
        mode, ``kind="mode"``), ``floors_`` and ``floor_weights_`` the two
        floors and their weights. Where ``"auto"``'s floor is not the
        truth's, the single-floor posterior excludes the truth; the average
        widens the intervals there (coverage on realistic truths in
        docs/benchmarks.md, *Averaging over the floor*).
    target_accept : float in (0, 1), default=0.95
        NUTS target acceptance rate. Higher than PyMC's 0.8: the learned scales
        make a mild funnel, and at 0.8 short default fits had divergences
        (k = 3, n = 200: 1 per 1000 draws; none at 0.95).
    retry_target_accept : float or None, default=0.999
        When the MCMC posterior fails its checks with divergent transitions,
        it is sampled again at this ``target_accept`` (smaller steps), if
        that is higher; the new posterior is then checked as the first.
        ``None``: never. ``diagnostics_["attempts"]`` lists each try's
        ``target_accept``, draws, divergences and whether it passed. On the
        seventeen real-data fits that still had divergences after a retry at
        0.99, 0.995 made eight clean and 0.999 five of the other nine
        (docs/benchmarks.md, *Bayesian defaults*).
    retry_draws : int, "auto" or None, default="auto"
        When the MCMC posterior fails its checks on R-hat or ESS with no
        divergence problem, it is sampled again with this many draws per
        chain, if that is more (``"auto"``: twice ``draws``): longer chains
        for a posterior that mixes slowly, such as the scales' posterior with
        a class absent from the labels. The new posterior is checked as the
        first. With the compiled sampler (``sampler="jax"``) the retry
        continues the chains of the try before it for the extra draws only
        (the same draws as a fresh run of that length with the same seed;
        at twice 1000 draws after a 500-step warm-up, 1000 steps per chain
        instead of 2500). ``None``: never. Each remedy is used once at most,
        so a fit samples at most three times (smaller steps, then longer
        chains). A chain that stalls has a remedy of its own, unless
        ``retry_draws`` is ``None``: where the compiled sampler's likelihood
        rows are in single precision (2048 rows or more, or the centred
        coordinates) and a chain's step size adapts below
        :data:`STALL_STEP_SIZE` in its warm-up, the run stops there and runs
        again afresh in double precision, as does every later try (marked
        ``"double_precision"`` and ``"stalled_step_size"`` in
        ``diagnostics_["attempts"]``).
    classes : array-like of shape (n_classes,), default=None
        The label of each score column, in column order; ``None`` reads them
        from ``y`` (see :class:`bayescal.DirichletCalibrator`). ``classes_``
        is saved with the posterior.
    progressbar : bool, default=True
        Show the sampler's progress bar while sampling (MCMC and ADVI).
    rhat_max : float, default=1.01
        Largest acceptable rank-normalised R-hat.
    ess_min : float, default=400
        Smallest acceptable bulk and tail effective sample size.
    max_divergences : int, default=0
        Largest acceptable number of divergent transitions.
    on_failure : {"raise", "warn"}, default="raise"
        What a posterior failing those checks does.
    log_likelihood : bool, default=True
        Store the pointwise log-likelihood ``ln p(y_i | q_i)`` of every draw in
        ``idata_.log_likelihood`` (``chains * draws * n`` numbers; for
        :func:`arviz.loo` and :func:`bayescal.bayes.compare`).

    Attributes
    ----------
    idata_ : arviz.InferenceData or xarray.DataTree
        The installed ArviZ's container (InferenceData on ArviZ 0.2x,
        DataTree on 1.x): ``posterior`` with ``W``, ``b``, ``A``, ``c`` per
        draw (dims ``chain, draw, class_out[, class_in]``; with the structured
        priors also ``s`` and ``tau``), the sampler's ``sample_stats`` (MCMC),
        ``log_likelihood`` (variable ``y``, dims ``chain, draw, obs``) and
        ``constant_data`` fingerprinting the fit.
    coef_, intercept_ : ndarray
        ``W``, ``b`` at the posterior mode (of the sampled coordinates).
    diagnostics_ : dict
        :func:`bayescal.bayes.diagnose` of the posterior (MCMC samplers), or
        ``{"approximate": True}``.
    sampler_ : str
        The sampler used (``"auto"`` resolved).
    eps_ : float
        The probability floor of the features (``eps="auto"`` resolved;
        ``"average"``: the most probable floor).
    floors_ : ndarray of shape (n_floors,)
        ``eps="average"`` only: the floors compared (EPS and
        ``1 / (k (n + 1))``; EPS alone when no score lies below the other).
    floor_weights_ : ndarray of shape (n_floors,)
        ``eps="average"`` only: the posterior probability of each of
        ``floors_``; the draws hold those at or above
        :data:`FLOOR_WEIGHT_MIN`, renormalised (``diagnostics_["floor_shares"]``).
    tune_ : int
        Warm-up steps per chain (``tune="auto"`` resolved; MCMC and ADVI).
    prior_ : StructuredPrior or DirLinPrior
        The prior (serialisable: ``prior_.to_dict()``).
    log_evidence_ : float
        Laplace estimate of :math:`\ln p(y)` for the proper penalty readings
        (``"structured"``, ``"l2"``), ``nan`` otherwise (compare the other
        priors with :func:`bayescal.bayes.compare`).
    model_id_ : str
        Digest of the configuration, the data's sufficient statistics and
        every posterior draw (:func:`posterior_model_id`); checked by
        :func:`bayescal.load`.

    Examples
    --------
    >>> from bayescal import BayesianDirichletCalibrator, make_dirgen
    >>> q, y, _, _ = make_dirgen(300, 3, rng=0)
    >>> cal = BayesianDirichletCalibrator(random_seed=0, progressbar=False)  # doctest: +SKIP
    >>> cal.fit(q, y).predict_proba(q[:2]).sum(axis=1)  # doctest: +SKIP
    array([1., 1.])
    """

    def __init__(
        self,
        *,
        prior: str = "hierarchical",
        reg_lambda: float = 1.0,
        reg_diag: float | None = None,
        reg_mu: float | None = None,
        center: str = "identity",
        log_scale_prior: tuple[float, float] = (0.0, 1.0),
        tau_scale: float | tuple[float, float, float] = 0.5,
        draws: int = 1000,
        tune: int | str = "auto",
        chains: int = 4,
        sampler: str = "auto",
        random_seed: int | None = None,
        input: str = "probs",
        eps: float | str = "auto",
        target_accept: float = 0.95,
        retry_target_accept: float | None = 0.999,
        retry_draws: int | str | None = "auto",
        classes: ArrayLike | None = None,
        progressbar: bool = True,
        rhat_max: float = 1.01,
        ess_min: float = 400.0,
        max_divergences: int = 0,
        on_failure: str = "raise",
        log_likelihood: bool = True,
    ) -> None:
        self.prior = prior
        self.reg_lambda = reg_lambda
        self.reg_diag = reg_diag
        self.reg_mu = reg_mu
        self.center = center
        self.log_scale_prior = log_scale_prior
        self.tau_scale = tau_scale
        self.draws = draws
        self.tune = tune
        self.chains = chains
        self.sampler = sampler
        self.random_seed = random_seed
        self.input = input
        self.eps = eps
        self.target_accept = target_accept
        self.retry_target_accept = retry_target_accept
        self.retry_draws = retry_draws
        self.classes = classes
        self.progressbar = progressbar
        self.rhat_max = rhat_max
        self.ess_min = ess_min
        self.max_divergences = max_divergences
        self.on_failure = on_failure
        self.log_likelihood = log_likelihood

    _eps_auto = True
    _eps_words = ("auto", "average")

    def _averages_floors(self) -> bool:
        """``eps="average"`` with a structured prior: a mixture over the two floors."""
        return isinstance(self.eps, str) and self.eps == "average" and self.prior in _STRUCTURED

    def _fit_validated(self, scores: ArrayLike, y: ArrayLike, data: Any) -> None:
        """``eps="average"``: the mixture over the floors; otherwise one posterior.

        ``data`` was validated at floor EPS (``_param_floor`` of ``"average"``),
        the features :func:`bayescal.structured.floor_evidence` compares.
        """
        if self._averages_floors():
            self._fit_floor_average(scores, y, data)
        else:
            super()._fit_validated(scores, y, data)

    def _fit_floor_average(self, scores: ArrayLike, y: ArrayLike, data: Any) -> None:
        """``eps="average"``: the posteriors at the two floors, mixed by their evidence.

        Floor ``EPS`` and the succession floor ``f = 1 / (k (n + 1))``
        (:func:`bayescal.structured.floor_evidence`) get posterior
        probabilities proportional to the MAP default's Laplace evidence at
        each (equal priors). Each floor holding at least
        :data:`FLOOR_WEIGHT_MIN` of the probability is sampled as a fit of
        its own (``eps`` fixed there: the same prior, sampler, checks and
        retries); the posterior stored holds ``draws`` draws per chain, each
        floor's share of them taken evenly spaced from its own chains, and a
        variable ``eps`` naming each draw's floor.
        """
        from sklearn.base import clone

        from bayescal.structured import floor_evidence

        found = floor_evidence(data.x, data.y)
        if found is None:  # no score below the floor: both floors are one model
            floors, weights = np.array([EPS]), np.array([1.0])
        else:
            floors = np.array([EPS, found[2]])
            le = np.array(found[:2])
            weights = np.exp(le - le.max())
            weights /= weights.sum()
        keep = [j for j in np.argsort(-weights, kind="stable")
                if weights[j] >= FLOOR_WEIGHT_MIN]
        # a mixture's log-likelihood is computed once, on its own draws, not on each fit's
        each = {"log_likelihood": bool(self.log_likelihood) and len(keep) == 1}
        fits = [clone(self).set_params(eps=float(floors[j]), **each).fit(scores, y)
                for j in keep]
        self._adopt(fits[0])  # the most probable floor's: eps_, the mode, the statistics
        if len(fits) > 1:
            share = weights[keep] / weights[keep].sum()
            self.idata_ = _floor_mixture([f.idata_ for f in fits], floors[keep], share,
                                         int(self.draws))
            self.diagnostics_ = self._diagnose()
            if self.sampler_ in _MCMC:
                enforce(self.diagnostics_, on_failure=self.on_failure, sampler=self.sampler_,
                        idata=self.idata_)
            if self.log_likelihood:
                self._add_log_likelihood(self._draw_features(scores), data.y)
        self.floors_, self.floor_weights_ = floors, weights
        self._stamp()

    def _adopt(self, other: BayesianDirichletCalibrator) -> None:
        """Take the fitted attributes of ``other`` (a fit of a clone of this estimator)."""
        for name, value in vars(other).items():
            if (name.endswith("_") and not name.startswith("__")) or name == "_stats":
                setattr(self, name, value)

    def _draw_floors(self) -> Array | None:
        """Each draw's probability floor, chains stacked (``None``: every draw at ``eps_``)."""
        post = self.idata_.posterior
        return post["eps"].values.reshape(-1) if "eps" in post.data_vars else None

    def _draw_features(self, scores: ArrayLike) -> list[tuple[Any, Array]]:
        floors = self._draw_floors()
        if floors is None:
            return super()._draw_features(scores)
        x = self._features(scores, eps=float(floors.min()))
        return [(np.flatnonzero(floors == f), np.maximum(x, np.log(f)))
                for f in np.unique(floors)]

    def _diagnose(self) -> dict[str, Any]:
        """:func:`diagnose` of the stored draws; a mixture (``eps="average"``) adds
        ``floor_shares``, ``[[eps, share of the draws], ...]``."""
        out = super()._diagnose()
        floors = self._draw_floors()
        if floors is not None:
            values, counts = np.unique(floors, return_counts=True)
            out["floor_shares"] = [[float(f), float(c / floors.size)]
                                   for f, c in zip(values, counts, strict=True)]
        return out

    def _restore(self) -> None:
        """Refuse a posterior whose draws' floors are not the mixture it records."""
        post = self.idata_.posterior
        if "eps" not in post.data_vars:
            return
        floors = np.asarray(post["eps"].values)
        stored = getattr(self, "floors_", None)
        weights = getattr(self, "floor_weights_", None)
        if stored is None or weights is None or stored.shape != weights.shape:
            raise ValueError("its draws carry probability floors (eps) but it records no "
                             "floors and weights of them")
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)
                and abs(weights.sum() - 1.0) <= 1e-9):
            raise ValueError(f"its floor weights {weights.tolist()} are not probabilities")
        if not np.all(np.isin(floors, stored)):
            raise ValueError("the floors (eps) of its draws are not among its recorded floors "
                             f"{stored.tolist()}")

    def _choose_floor(self, data: Any) -> Any:
        """``eps="auto"``: the MAP default's floor for the structured priors (``eps_``)."""
        from bayescal.structured import choose_floor

        if not isinstance(self.eps, str):
            self.eps_ = float(self.eps)
            return data
        floor = choose_floor(data.x, data.y) if self.prior in _STRUCTURED else None
        self.eps_ = EPS if floor is None else floor
        return data if floor is None else data._replace(x=np.maximum(data.x, np.log(floor)))

    # -- parameters -------------------------------------------------------
    def _strengths(self) -> tuple[float, float, float]:
        """``(reg_lambda, reg_diag, reg_mu)`` with ``None`` resolved to ``reg_lambda``.

        Each is a real ``>= 0``; ``inf`` (a group pinned at the centre) is
        accepted here and refused by the penalty readings in :meth:`_check_params`.
        """
        def check(value: Any, name: str) -> float:
            if not (isinstance(value, Real) and not isinstance(value, bool) and value >= 0):
                raise ValueError(f"{name} must be a non-negative number (inf pins its group "
                                 f"with prior='fixed'); got {value!r}")
            return float(value)

        lam = check(self.reg_lambda, "reg_lambda")
        out = [lam]
        for name in ("reg_diag", "reg_mu"):
            v = getattr(self, name)
            out.append(lam if v is None else check(v, name))
        return out[0], out[1], out[2]

    def _check_params(self) -> None:
        check_option(self.prior, "prior", DIRLIN_PRIORS)
        check_option(self.center, "center", ("identity", "zero"))
        lam, delta, mu = self._strengths()
        if self.prior == "fixed" and min(lam, delta, mu) <= 0:
            raise ValueError("prior='fixed' needs positive strengths (0 is a flat, improper "
                             f"prior; inf pins a group); got reg_lambda={self.reg_lambda!r}, "
                             f"reg_diag={self.reg_diag!r}, reg_mu={self.reg_mu!r}")
        if self.prior in ("odir", "l2") and self.reg_diag is not None:
            raise ValueError(f"reg_diag is not used by prior={self.prior!r}; got "
                             f"reg_diag={self.reg_diag!r}")
        if self.prior == "l2" and self.reg_mu is not None:
            raise ValueError(f"reg_mu is not used by prior='l2'; got reg_mu={self.reg_mu!r}")
        if self.prior in _PENALTY and not all(np.isfinite([lam, delta, mu])):
            raise ValueError(f"prior={self.prior!r} needs finite strengths; got "
                             f"reg_lambda={self.reg_lambda!r}, reg_diag={self.reg_diag!r}, "
                             f"reg_mu={self.reg_mu!r}")
        if self.prior in ("odir", "l2") and lam <= 0:
            raise ValueError(f"prior={self.prior!r} needs reg_lambda > 0; got {self.reg_lambda!r}")
        self._structured_prior()
        self._check_common()

    _simpler = ("a simpler prior (prior='fixed' or prior='temperature'), the MAP fit "
                "DirichletCalibrator()")

    def _compiled_sampler(self) -> bool:
        return self.prior in _STRUCTURED

    def _n_coefs(self, k: int) -> int:
        """Sampled coefficients of ``W`` and ``b`` (the hyperparameters not counted)."""
        if self.prior in _STRUCTURED:
            prior = self._structured_prior()
            return n_params(prior, k) - 1 - sum(prior.sampled)
        return k * k - 1  # the penalty readings' identified coordinates (bayes.gauge)

    def _too_large(self, k: int, coefs: int, limit: int, why: str) -> ValueError:
        """The refusal of a model with ``coefs`` > ``limit``: what it costs, what to use."""
        use = []
        diagonal = n_params(StructuredPrior("fixed", tau=(0.0, 1.0, 1.0)), k) - 1
        if diagonal <= MAX_CONDITIONAL_COEFS and not (self.prior == "fixed"
                                                      and np.isinf(self._strengths()[0])):
            use.append("the diagonal map, prior='fixed' with reg_lambda=float('inf'), "
                       f"reg_diag=1.0, reg_mu=1.0 ({diagonal} coefficients)")
        if self.prior != "temperature":
            use.append("Bayesian temperature scaling, prior='temperature'")
        use.append("the MAP fit DirichletCalibrator(), which is fast at any k")
        return ValueError(
            f"BayesianDirichletCalibrator({self._model_name()}) at k={k} samples {coefs} map "
            f"coefficients, more than the {limit} it takes {why} (docs/benchmarks.md, 'How "
            "large a model'). Use " + "; or ".join(use) + ".")

    def _check_size(self, k: int) -> None:
        coefs = self._n_coefs(k)
        if coefs > MAX_COEFS:
            raise self._too_large(
                k, coefs, MAX_COEFS,
                "(the full map at k = 30, the largest measured): its whitening is a dense "
                f"{coefs} x {coefs} matrix, found from {2 * coefs} gradients and factorised, "
                "and every gradient then costs about its square")

    def _model_name(self) -> str:
        return f"prior={self.prior!r}"

    def _failure_hint(self, y: Array, k: int) -> str:
        """Name the classes without calibration samples, and what samples them.

        With a class absent from the labels the posterior is proper but has a
        sharp edge (the absent class's logit is free below, held by the
        likelihood above) that NUTS may cross with a few divergences, or
        sample with a short tail ESS, under the hierarchical scales
        (docs/benchmarks.md, *Bayesian defaults*).
        """
        absent = np.flatnonzero(np.bincount(y, minlength=k) == 0)
        if absent.size == 0 or self.prior != "hierarchical":
            return ""
        names = np.asarray(getattr(self, "classes_", np.arange(k)))[absent].tolist()
        return (f"Classes {names} have no calibration samples, which gives the posterior a "
                "sharp edge; try prior='fixed' (the scales fixed by reg_lambda, reg_diag, "
                "reg_mu), retry_target_accept closer to 1 such as 0.9995 (divergences) or more "
                "draws (ESS) (docs/benchmarks.md, 'Bayesian defaults')")

    def _structured_prior(self) -> StructuredPrior:
        lsp = self.log_scale_prior
        if not isinstance(lsp, tuple | list) or len(lsp) != 2:
            raise ValueError(f"log_scale_prior must be a pair (mean, sd) of ln s; got {lsp!r}")
        kind = self.prior if self.prior in _STRUCTURED else "fixed"
        tau = (1.0, 1.0, 1.0)
        if self.prior == "fixed":
            tau = tuple(_tau_of(v) for v in self._strengths())  # type: ignore[assignment]
        return StructuredPrior(kind, float(lsp[0]), float(lsp[1]), self.tau_scale, tau)

    def _penalty(self, k: int, n: float | None = None, scale: float = 1.0):
        """The penalty whose Gaussian reading is the prior (penalty priors)."""
        from bayescal.optimize import make_penalty

        lam, delta, mu = self._strengths()
        if self.prior == "structured":
            return make_penalty(k, "structured", lam, mu, reg_diag=delta, n_samples=n,
                                scale=scale)
        reg_mu = mu if self.prior == "odir" else None
        return make_penalty(k, kind=self.prior, reg_lambda=lam, reg_mu=reg_mu,
                            center=self.center)  # fmt: skip

    @property
    def _diag_vars(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("s", "tau", "W", "b") if self.prior in _STRUCTURED else ("W", "b")

    # -- evidence (proper penalty readings) ---------------------------------
    def log_evidence(self, scores: ArrayLike, y: ArrayLike) -> float:
        """Laplace log evidence ``ln p(y)`` of a penalty-reading prior, without sampling.

        The same number as ``log_evidence_`` after :meth:`fit`, at the cost of
        the posterior mode and one Hessian. Needs a proper penalty prior
        (``prior="l2"`` or ``"structured"``). Does not change the estimator.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        y : array-like of shape (n_samples,)

        Returns
        -------
        float
        """
        self._check_params()
        if self.prior not in ("l2", "structured"):
            raise ValueError("the Laplace evidence needs a proper penalty prior: use prior='l2' "
                             f"or 'structured'; got prior={self.prior!r} (compare other priors "
                             "with bayescal.bayes.compare)")
        x = log_features(check_scores(scores, kind=self.input), kind=self.input,
                         eps=self._param_floor())
        y = self._encode_labels(y, n_samples=x.shape[0], n_classes=x.shape[1])[1]
        gauge, penalty, theta, _ = self.laplace_approximation(x, y)
        W, b = gauge.split(gauge.to_raw(theta))
        return dirlin_log_evidence(x, y, penalty, W, b)

    def laplace_approximation(self, x: Array, y: Array):
        """Mode and whitening of a penalty-reading posterior in identified coordinates.

        Returns ``(gauge, penalty, theta_mode, L)`` with ``L L^T`` the inverse
        Hessian of the negative log-posterior at the mode.
        """
        from bayescal.optimize import fit_multinomial, multinomial_objective
        from bayescal.structured import fit_temperature_scale

        n, k = x.shape
        scale = fit_temperature_scale(x, y) if self.prior == "structured" else 1.0
        penalty = self._penalty(k, n, scale)
        gauge = dirlin_gauge(penalty_to_prior(penalty, n))
        init = (scale * np.eye(k), np.zeros(k)) if self.prior == "structured" else None
        res = fit_multinomial(x, y, structure="full", penalty=penalty, tol=1e-10, init=init)
        raw = gauge.project(np.concatenate([res.W.ravel(), res.b]))
        # Hessian of n L (the negative log-posterior) in raw coordinates
        _, _, H = multinomial_objective(raw, x, y, structure="full", penalty=penalty, hessian=True)
        H_theta = n * (gauge.T.T @ H @ gauge.T)
        return gauge, penalty, gauge.from_raw(raw), _inv_chol(H_theta)

    # -- fitting ----------------------------------------------------------
    def _sample(self, model: Any, var_names: list[str], attempt: _Attempt,
                reuse_key: tuple | None = None) -> Any:
        tune = self._resolve_tune(self._reused.get("whitening"))
        return sample_model(model, sampler=self.sampler_, draws=attempt.draws, tune=tune,
                            chains=self.chains, random_seed=self.random_seed,
                            var_names=var_names, target_accept=attempt.target_accept,
                            progressbar=self.progressbar, reuse_key=reuse_key)

    def _fit_posterior(self, x: Array, y: Array, attempt: _Attempt) -> None:
        stats = SufficientStatistics.from_features(x, y)
        self._stats = {"counts": stats.counts, "S": stats.sums}
        if self.prior in _STRUCTURED:
            self._fit_structured(x, y, attempt)
        else:
            self._fit_penalty(x, y, attempt)

    def _fit_structured(self, x: Array, y: Array, attempt: _Attempt) -> None:
        from bayescal.bayes.laplace import (
            centred_whitening,
            conditional_whitening,
            structured_mode,
        )
        from bayescal.bayes.models import (
            structured_log_posterior,
            structured_model,
            structured_model_key,
        )
        from bayescal.structured import fit_temperature_scale

        k = x.shape[1]
        prior = self.prior_ = self._structured_prior()
        self.log_evidence_ = float("nan")
        # the mode and its Hessian from JAX's log posterior where the fast extra (JAX and
        # NumPyro) is installed (the same function as PyTensor's to 1e-12,
        # tests/test_bayes_compiled.py; a cold compile of about a second against 25-40 s
        # for PyTensor's C or Numba code)
        log_posterior = (compiled_log_posterior
                         if self.sampler_ == "jax" or _fast_extra_installed()
                         else structured_log_posterior)
        if "mode" not in self._reused:  # a retry reuses the first attempt's mode and whitening
            theta0 = np.zeros(n_params(prior, k))
            s_ts = fit_temperature_scale(x, y)
            theta0[0] = (np.log(s_ts) - prior.log_scale_mean) / prior.log_scale_sd
            theta0[1 : 1 + sum(prior.sampled)] = [
                v for v, on in zip(prior.log_tau_start, prior.sampled, strict=True) if on]
            theta, L, _ = structured_mode(log_posterior(x, y, prior), theta0)
            self._reused["mode"] = (theta, L)
        theta, L = self._reused["mode"]
        _, self.coef_, self.intercept_ = structured_map(theta, prior, k)
        names = ["s", "tau", "W", "b"]
        if self.sampler_ == "laplace":
            rng = np.random.default_rng(self.random_seed)
            z = rng.standard_normal((self.chains, self.draws, theta.shape[0]))
            s, W, b = maps_of(theta + z @ L.T, prior, k)
            tau = np.stack([_group_scales_draws(t, prior, k) for t in
                            (theta + z @ L.T).reshape(-1, theta.shape[0])]).reshape(
                                self.chains, self.draws, 3)
            self.idata_ = _compat.from_dict(
                {"posterior": {"s": s, "tau": tau, "W": W, "b": b}},
                dims=_DIMS | {"tau": ["group"]}, coords=_coords(k) | {"group": list(GROUPS)})
            return
        if "whitening" not in self._reused:
            cond = conditional_whitening(theta, x, y, prior)
            self._reused["whitening"] = centred_whitening(
                theta, x, y, prior, cond, log_posterior=log_posterior) or cond
        whiten = self._reused["whitening"]
        coefs = self._n_coefs(k)
        if not isinstance(whiten, CentredWhitening) and coefs > MAX_CONDITIONAL_COEFS:
            where = ("in the conditional coordinates that these data need (the map's own "
                     "coordinates only when the data dominate the prior in every direction)")
            if self.sampler_ == "jax" and all(prior.present):  # compiled.lowrank_theta (k > 15)
                why = (f"{where}, the largest measured to pass its checks: k = 15, n = 100 "
                       f"took {LOWRANK_FIT_SECONDS:.0f} s with the compiled sampler; at "
                       "k = 20, n = 100 a default fit took 14 minutes (60 divergences at "
                       "target_accept=0.95, passed on the retry at 0.999)")
            else:
                why = (f"{where}: every gradient factorises a {coefs} x {coefs} matrix with "
                       f"sampler={self.sampler_!r}, so a fit's time grows as the cube of the "
                       f"coefficients: {CONDITIONAL_FIT_MINUTES} minutes measured at "
                       f"{MAX_CONDITIONAL_COEFS} (k = 15, n = 100), about "
                       f"{CONDITIONAL_FIT_MINUTES * (coefs / MAX_CONDITIONAL_COEFS) ** 3:.0f} "
                       "minutes here by that rule")
            raise self._too_large(k, coefs, MAX_CONDITIONAL_COEFS, why)
        if self.sampler_ == "jax":
            groups = self._sample_compiled(sample_compiled, x, y, prior, whiten,
                                           attempt=attempt, precision=True,
                                           tune=self._resolve_tune(whiten, compiled=True))
            del groups["posterior"]["theta"]
            self.idata_ = _compat.from_dict(
                groups, dims=_DIMS | {"tau": ["group"]},
                coords=_coords(k) | {"group": list(GROUPS)})
            return
        model = structured_model(x, y, prior, whiten=whiten)
        self.idata_ = self._sample(model, names, attempt, structured_model_key(prior, k, whiten))

    def _fit_penalty(self, x: Array, y: Array, attempt: _Attempt) -> None:
        gauge, penalty, theta, L = self.laplace_approximation(x, y)
        self.prior_ = penalty_to_prior(penalty, x.shape[0])
        self.coef_, self.intercept_ = gauge.split(gauge.to_raw(theta))
        self.log_evidence_ = float("nan")
        if self.prior in ("l2", "structured"):
            self.log_evidence_ = dirlin_log_evidence(x, y, penalty, self.coef_, self.intercept_)
        if self.sampler_ == "laplace":
            rng = np.random.default_rng(self.random_seed)
            z = rng.standard_normal((self.chains, self.draws, gauge.dim))
            W, b = gauge.split(gauge.to_raw(theta + z @ L.T))
            self.idata_ = _compat.from_dict({"posterior": {"W": W, "b": b}}, dims=_DIMS,
                                            coords=_coords(x.shape[1]))
            return
        model = dirlin_model(x, y, gauge, whiten=(theta, L))
        self.idata_ = self._sample(model, ["W", "b"], attempt)

    # -- prior and posterior predictive ----------------------------------
    def sample_prior_predictive(self, scores: ArrayLike, *, draws: int = 500,
                                random_seed: int | None = None):
        r"""Draws of the map from the prior and labels simulated from them.

        Available for the proper priors that do not depend on the data
        (``"hierarchical"``, ``"fixed"``, ``"temperature"``, ``"l2"``); the
        fitted estimator is not needed (``scores`` gives ``k``).

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Uncalibrated scores to apply the prior maps to.
        draws : int, default=500
        random_seed : int or None

        Returns
        -------
        arviz.InferenceData or xarray.DataTree
            Groups ``prior`` (``W``, ``b``, and ``s``, ``tau`` for the
            structured priors; one chain) and ``prior_predictive`` (``y``,
            dims ``chain, draw, obs``).
        """
        self._check_params()
        check_positive_int(draws, "draws")
        if self.prior in ("odir", "structured"):
            raise ValueError(f"prior={self.prior!r} has no prior predictive: "
                             + ("its diagonal is flat (improper)" if self.prior == "odir"
                                else "its centre is fitted to the labels"))
        x = log_features(check_scores(scores, kind=self.input), kind=self.input,
                         eps=self._param_floor())
        k = x.shape[1]
        rng = np.random.default_rng(random_seed)
        groups: dict[str, Any]
        if self.prior in _STRUCTURED:
            prior = self._structured_prior()
            theta = draw_prior(prior, k, draws, rng)
            s, W, b = maps_of(theta, prior, k)
            tau = np.stack([_group_scales_draws(t, prior, k) for t in theta])
            groups = {"s": s[None], "tau": tau[None], "W": W[None], "b": b[None]}
        else:
            p = penalty_to_prior(self._penalty(k), x.shape[0])
            W = p.center_W + p.sd_W * rng.standard_normal((draws, k, k))
            b = p.center_b + p.sd_b * rng.standard_normal((draws, k))
            groups = {"W": W[None], "b": b[None]}
        y_sim = _simulate_labels(groups["W"][0], groups["b"][0], x, rng)[None]
        return _compat.from_dict(
            {"prior": groups, "prior_predictive": {"y": y_sim}},
            dims=_DIMS | {"tau": ["group"], "y": ["obs"]},
            coords=_coords(k) | {"group": list(GROUPS), "obs": np.arange(x.shape[0])})

    def sample_posterior_predictive(self, scores: ArrayLike, y: ArrayLike | None = None, *,
                                    random_seed: int | None = None):
        """Labels simulated from every posterior draw's map at ``scores``.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
        y : array-like of shape (n_samples,), optional
            Observed labels, stored as ``observed_data`` (for ArviZ's
            posterior predictive plots).
        random_seed : int or None

        Returns
        -------
        arviz.InferenceData or xarray.DataTree
            Group ``posterior_predictive`` (``y``, dims ``chain, draw, obs``)
            and, with ``y``, ``observed_data``.
        """
        return _posterior_predictive(self, scores, y, random_seed)


_DIMS = {"W": ["class_out", "class_in"], "b": ["class_out"]}


#: ``eps="average"``: a probability floor whose posterior probability is below this is
#: not sampled (Occam's window, Madigan and Raftery 1994); the weights are kept in
#: ``floor_weights_``.
FLOOR_WEIGHT_MIN = 0.01


def _floor_mixture(fits: list[Any], floors: Array, share: Array, draws: int) -> Any:
    """One posterior of ``draws`` draws per chain from the posteriors ``fits``.

    ``fits[0]`` (the largest ``share``) first: each posterior gets the
    largest remainder of ``share * draws`` draws per chain, taken evenly
    spaced from its own chain ``c`` into chain ``c``, at places spread evenly
    along the chain (the same in every chain), so that every part of every
    chain holds each posterior in its share and R-hat and ESS read the stored
    draws as one sample of the mixture. ``eps`` (chain, draw) is each draw's
    floor. Only the posterior and sample-statistics variables common to all
    are kept.
    """
    raw = share * draws
    counts = np.floor(raw).astype(int)
    counts[np.argsort(counts - raw, kind="stable")[: draws - counts.sum()]] += 1
    owner = np.zeros(draws, dtype=int)  # which posterior each place of a chain holds
    free = np.arange(draws)
    for j in range(len(fits) - 1, 0, -1):  # the smaller shares spread first
        taken = free[np.linspace(0, free.size - 1, counts[j]).round().astype(int)]
        owner[taken] = j
        free = np.setdiff1d(free, taken)
    groups: dict[str, dict[str, Array]] = {}
    dims: dict[str, list[str]] = {}
    coords: dict[str, Any] = {}
    for name in ("posterior", "sample_stats"):
        sets = [_compat.group_dataset(f, name) for f in fits
                if name in _compat.group_names(f)]
        if len(sets) < len(fits):
            continue
        groups[name] = {}
        for v in (v for v in sets[0].data_vars if all(v in d.data_vars for d in sets)):
            first = sets[0][v].values
            out = np.empty((first.shape[0], draws, *first.shape[2:]), dtype=first.dtype)
            for j, d in enumerate(sets):
                picks = np.linspace(0, d.sizes["draw"] - 1, counts[j]).round().astype(int)
                out[:, owner == j] = d[v].values[:, picks]
            groups[name][v] = out
            dims[v] = list(sets[0][v].dims[2:])
            coords |= {d: sets[0].coords[d].values for d in dims[v] if d in sets[0].coords}
    chains = next(iter(groups["posterior"].values())).shape[0]
    groups["posterior"]["eps"] = np.tile(floors[owner], (chains, 1))
    return _compat.from_dict(groups, dims=dims, coords=coords)


def _coords(k: int) -> dict[str, Any]:
    return {"class_out": np.arange(k), "class_in": np.arange(k)}


def _group_scales_draws(theta: Array, prior: StructuredPrior, k: int) -> Array:
    from bayescal.bayes.hierarchical import group_scales

    return np.array([float(t) for t in group_scales(theta, prior, k)])


def _simulate_labels(W: Array, b: Array, x: Array, rng: np.random.Generator) -> Array:
    """One label per (draw, sample) from ``softmax(W_s x_i + b_s)``, shape (draws, n)."""
    z = np.einsum("ni,sji->snj", x, W) + b[:, None, :]
    p = np.exp(z - logsumexp(z, axis=-1, keepdims=True))
    u = rng.random(p.shape[:2])[..., None]
    return np.minimum((np.cumsum(p, axis=-1) < u).sum(axis=-1), x.shape[1] - 1)


def _posterior_predictive(est: Any, scores: ArrayLike, y: ArrayLike | None,
                          random_seed: int | None) -> Any:
    check_is_fitted(est, "idata_")
    groups = est._draw_features(scores)
    n, k = groups[0][1].shape
    post = est.idata_.posterior
    rng = np.random.default_rng(random_seed)
    y_sim = np.empty((est.n_draws_, n), dtype=np.int64)
    for index, x in groups:
        y_sim[index] = _simulate_labels(est._draws("W")[index], est._draws("b")[index], x, rng)
    y_sim = y_sim.reshape(post.sizes["chain"], post.sizes["draw"], n)
    groups: dict[str, Any] = {"posterior_predictive": {"y": y_sim}}
    if y is not None:
        groups["observed_data"] = {"y": est._encode_labels(y, n_samples=n, n_classes=k)[1]}
    return _compat.from_dict(groups, dims={"y": ["obs"]}, coords={"obs": np.arange(n)})


#: Most classes :class:`BayesianGenerativeCalibrator` samples by MCMC (``k^2``
#: concentrations); beyond, ``fit`` refuses before any work unless ``sampler="laplace"``.
MAX_GENERATIVE_CLASSES = 30

#: ``BayesianGenerativeCalibrator(prior="auto")`` where the held-out check keeps
#: temperature scaling: pseudo-samples per class for each calibration row.
AUTO_TS_PSEUDO_PER_ROW = 1e4


class BayesianGenerativeCalibrator(_BayesianFamilyBase):
    r"""Bayesian DirGen calibration: class-conditional Dirichlet scores.

    Model: :math:`q_i \mid y_i=j \sim \mathrm{Dir}(\alpha_j)`,
    :math:`y_i \sim \mathrm{Categorical}(\pi)`, with
    :math:`\ln\alpha_{ji} \sim \mathrm{Normal}(m, s)` (``alpha_prior = (m, s)``)
    and :math:`\pi \sim \mathrm{Dirichlet}(a\mathbf 1)` (``pi_prior = a``),
    times the conjugate prior of ``prior``: :math:`\nu` pseudo-samples per
    class whose mean log-features are those of a reference
    :math:`\mathrm{Dir}(\beta_j)` (:class:`bayescal.dirichlet.DirichletPrior`),
    which add :math:`\nu` to every class count (``pi`` included) and
    :math:`\nu\,[\psi(\beta_j) - \psi(\beta_{j0})]` to every class's sum of
    log-features. The default (``prior="auto"``) is the prior of
    :class:`~bayescal.GenerativeDirichletCalibrator`'s default: centred on
    the DirGen model of temperature scaling, :math:`\beta_j = \mathbf 1 + e_j / T`,
    with :math:`\nu` chosen by the same cross-validation (empirical Bayes).
    The likelihood enters through the per-class counts and sums of
    :math:`x = \max(\ln q, \ln\epsilon)`, so sampling costs the same for
    ``n = 10^3`` and ``n = 10^6``. The rows of ``alpha`` are independent a
    posteriori and each is sampled whitened by its exact Hessian at the mode;
    ``pi`` has the conjugate posterior ``Dirichlet(a + n_j)`` and is drawn
    exactly. Every draw is also converted to its DirLin map
    ``W = alpha - 1``, ``b = ln pi + lnGamma(sum alpha) - sum lnGamma(alpha)``.

    Parameters
    ----------
    prior : "auto", None, float or DirichletPrior, default="auto"
        Pseudo-samples on top of ``alpha_prior`` and ``pi_prior``.
        ``"auto"``: the centre and strength that
        ``GenerativeDirichletCalibrator(prior="auto", eps=eps, cv=cv)`` chooses
        on the same data (its held-out check, one standard error towards
        temperature scaling). Where that check keeps temperature scaling
        itself (``nu = inf``, a point mass), the posterior gets
        :data:`AUTO_TS_PSEUDO_PER_ROW` pseudo-samples per class per calibration
        row (at least ``max(AUTO_STRENGTHS)``), so that the rows move the map
        by about a ten-thousandth of what they would alone. ``None``: no
        pseudo-samples, ``alpha_prior`` alone (the earlier default). A number
        ``nu > 0`` or a :class:`~bayescal.dirichlet.DirichletPrior`: as
        ``GenerativeDirichletCalibrator(prior=...)`` (a number is centred on the
        identity map). On the held-out grid of ``benchmarks/bench_bayes.py``
        (``--checks realdata_generative``, 38 cases) ``"auto"`` had a mean test
        log-loss of 0.629, 0.509 and 0.497 at n = 30, 100 and 300 (temperature
        scaling 0.613, 0.510, 0.501) where ``None`` had 1.206, 0.873 and 0.678,
        and was worse than the uncalibrated scores where temperature scaling
        was not in 3, 0 and 0 cases (``None``: 18, 21, 20; docs/benchmarks.md,
        *Generative Bayesian calibration at its defaults*).
    cv : int or cross-validation splitter, default=5
        Folds of ``prior="auto"``'s check.
    alpha_prior : (float, float), default=(0.0, 1.5)
        Mean and sd of the Normal prior on every ``ln alpha``.
    pi_prior : float > 0, default=1.0
        Symmetric Dirichlet concentration of the class priors.
    draws, tune, chains, sampler, random_seed, input, target_accept, progressbar
        As in :class:`BayesianDirichletCalibrator` (``tune="auto"`` is 1000
        here: this posterior has no centred coordinates). ``sampler="auto"``
        is the compiled sampler ``"jax"`` when the ``[fast]`` extra is
        installed: one program per ``k`` whatever ``n`` (the likelihood is in
        the class statistics), each row of ``ln alpha`` whitened by its exact
        Hessian at the mode.
    eps : float, default=EPS
        Probability floor of the log-features (float64 machine epsilon,
        2.2e-16); unlike :class:`BayesianDirichletCalibrator` there is no
        ``"auto"`` floor.
    retry_target_accept : float or None, default=0.95
        As in :class:`BayesianDirichletCalibrator` (a step above this
        estimator's ``target_accept`` of 0.8).
    retry_draws : int, "auto" or None, default="auto"
        As in :class:`BayesianDirichletCalibrator`.
    rhat_max, ess_min, max_divergences, on_failure
        Convergence checks, as in :class:`BayesianDirichletCalibrator`.
    log_likelihood : bool, default=True
        Store in ``idata_.log_likelihood`` the pointwise
        :math:`\ln p(y_i \mid q_i)` of every draw's calibration map (variable
        ``y``, comparable with the linear model's) and the joint
        :math:`\ln p(q_i, y_i)` (variable ``q_y``), which is what the
        posterior conditions on: exact leave-one-out of the calibrated
        predictions weights draws by the joint and scores the conditional,
        which :func:`bayescal.bayes.compare` does.
    classes : array-like of shape (n_classes,), default=None
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
    prior_strength_ : float or None
        Pseudo-samples per class of ``prior`` as used (``None``: none).
    prior_center_ : ndarray of shape (k, k) or None
        Their reference concentrations :math:`\beta`.
    cv_results_ : dict or None
        ``prior="auto"``: the check's ``strength``, ``mean_test_log_loss``,
        ``se_vs_best`` and chosen ``index`` (as
        :class:`~bayescal.GenerativeDirichletCalibrator`; not kept by
        :meth:`save`).
    log_evidence_ : float
        Laplace estimate of :math:`\ln p(q, y)`, the evidence of the DirGen
        model for the scores and labels (exact for the labels, Laplace per
        class for the concentrations), under ``alpha_prior`` and ``pi_prior``
        updated by the pseudo-samples: the ratio of the evidence of data and
        pseudo-samples together to that of the pseudo-samples alone. For
        comparing fixed ``alpha_prior`` and ``prior`` choices (``"auto"``'s
        prior is itself chosen on the data).
    diagnostics_, sampler_, tune_, model_id_
        As in :class:`BayesianDirichletCalibrator`.
    """

    _diag_vars = ("alpha",)

    def __init__(
        self,
        *,
        prior: Any = "auto",
        cv: Any = 5,
        alpha_prior: tuple[float, float] = (0.0, 1.5),
        pi_prior: float = 1.0,
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 4,
        sampler: str = "auto",
        random_seed: int | None = None,
        input: str = "probs",
        eps: float = EPS,
        target_accept: float = 0.8,
        retry_target_accept: float | None = 0.95,
        retry_draws: int | str | None = "auto",
        classes: ArrayLike | None = None,
        progressbar: bool = True,
        rhat_max: float = 1.01,
        ess_min: float = 400.0,
        max_divergences: int = 0,
        on_failure: str = "raise",
        log_likelihood: bool = True,
    ) -> None:
        self.prior = prior
        self.cv = cv
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
        self.retry_target_accept = retry_target_accept
        self.retry_draws = retry_draws
        self.classes = classes
        self.progressbar = progressbar
        self.rhat_max = rhat_max
        self.ess_min = ess_min
        self.max_divergences = max_divergences
        self.on_failure = on_failure
        self.log_likelihood = log_likelihood

    def _prior(self) -> DirGenPrior:
        ap = self.alpha_prior
        if not isinstance(ap, tuple | list) or len(ap) != 2:
            raise ValueError(f"alpha_prior must be a pair (mean, sd) of ln alpha; got {ap!r}")
        return DirGenPrior(float(ap[0]), float(ap[1]), float(self.pi_prior))

    _simpler = "the MAP fit GenerativeDirichletCalibrator()"

    def _compiled_sampler(self) -> bool:
        return True

    def _check_size(self, k: int) -> None:
        if k <= MAX_GENERATIVE_CLASSES or self.sampler == "laplace":
            return
        gb = 4 * self.chains * self.draws * k * k * 8 / 1e9  # alpha, W, A and JAX's copy
        raise ValueError(
            f"BayesianGenerativeCalibrator at k={k} samples {k * k} concentrations by MCMC, "
            f"more than the {MAX_GENERATIVE_CLASSES ** 2} of k = {MAX_GENERATIVE_CLASSES}, "
            "the largest measured (15-24 s and 1.4 GB for 4 chains x 1000 draws at n = 2000); "
            f"its draws alone would hold about {gb:.1f} GB, and a default fit at k = 100 had "
            "not finished after 8 minutes (docs/benchmarks.md, 'Generative Bayesian "
            "calibration at its defaults'). Use sampler='laplace' (the exact per-class "
            "Gaussian approximation at the mode, in seconds) or the MAP fit "
            "GenerativeDirichletCalibrator().")

    def _check_params(self) -> None:
        self._prior()
        from bayescal.structured import check_cv_param

        if not self._auto_prior():
            as_prior(self.prior)
        check_cv_param(self.cv)
        self._check_common()

    def _auto_prior(self) -> bool:
        return isinstance(self.prior, str) and self.prior == "auto"

    def _pseudo_prior(self, x: Array, y: Array, stats: SufficientStatistics
                      ) -> tuple[DirichletPrior | None, Any]:
        """The pseudo-samples of ``prior`` for these rows (``stats``: their class
        statistics), and ``prior="auto"``'s check."""
        if not self._auto_prior():
            return as_prior(self.prior), None
        if "pseudo_prior" in self._reused:  # a retry: the same data, the same choice
            return self._reused["pseudo_prior"]
        n = len(y)
        solver = GenerativeDirichletCalibrator(eps=self.eps, cv=self.cv)
        strength, info, terms = choose_auto_strength(x, y, np.ones(n), self.cv, solver._solve)
        if np.isinf(strength):
            strength = max(max(AUTO_STRENGTHS), AUTO_TS_PSEUDO_PER_ROW * n)
        out = (auto_prior_at(strength, stats, terms), info)
        self._reused["pseudo_prior"] = out
        return out

    def _fit_posterior(self, x: Array, y: Array, attempt: _Attempt) -> None:
        prior = self.prior_ = self._prior()
        k = x.shape[1]
        data = SufficientStatistics.from_features(x, y)
        pseudo, self.cv_results_ = self._pseudo_prior(x, y, data)
        self.prior_strength_ = self.prior_center_ = None
        counts, S = data.counts, data.sums
        if pseudo is not None:
            extra = pseudo.pseudo_statistics(k)
            counts, S = counts + extra.counts, S + extra.sums
            self.prior_strength_ = float(pseudo.strength)
            self.prior_center_ = pseudo.concentration(k)
        u, neg_hess = dirgen_mode(counts, S, prior)
        L = np.stack([whitening(h) for h in neg_hess])
        rng = np.random.default_rng(self.random_seed)
        shape = (self.chains, attempt.draws)
        self.log_evidence_ = dirgen_log_evidence(u, neg_hess, counts, S, prior)
        if pseudo is not None:  # the pseudo-samples are the prior: divide their evidence out
            u0, h0 = dirgen_mode(extra.counts, extra.sums, prior)
            self.log_evidence_ -= dirgen_log_evidence(u0, h0, extra.counts, extra.sums, prior)
        if self.sampler_ == "laplace":
            z = rng.standard_normal((*shape, k, k))
            alpha = np.exp(u + np.einsum("jab,cdjb->cdja", L, z))
        elif self.sampler_ == "jax":
            groups = self._sample_compiled(sample_compiled_dirgen, counts, S, prior, (u, L),
                                           attempt=attempt, tune=self._resolve_tune())
            idata = _compat.from_dict(groups, dims={"alpha": ["class_out", "class_in"]},
                                      coords=_coords(k))
            alpha = groups["posterior"]["alpha"]
            shape = alpha.shape[:2]
        else:
            model = dirgen_model(counts, S, prior, whiten=(u, L), include_pi=False)
            idata = sample_model(
                model,
                sampler=self.sampler_,
                draws=attempt.draws,
                tune=self._resolve_tune(),
                chains=self.chains,
                random_seed=self.random_seed,
                var_names=["alpha"],
                target_accept=attempt.target_accept,
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
        if self.sampler_ == "laplace":
            self.idata_ = post
        else:  # keep the sampler's other groups (sample_stats: divergences, ...)
            _compat.set_group(idata, "posterior", _compat.group_dataset(post, "posterior"))
            self.idata_ = idata
        pi_mode = (conc - 1.0) / (conc - 1.0).sum() if np.all(conc > 1.0) else conc / conc.sum()
        W0, b0 = dirgen_to_dirlin(np.exp(u), pi_mode)
        self.coef_, self.intercept_ = W0, b0
        self.alpha_mode_, self.pi_mode_ = np.exp(u), pi_mode
        self._stats = {"counts": data.counts, "S": data.sums}
        if pseudo is not None:  # saved with the posterior (and covered by the model id)
            self._stats |= {"prior_strength": np.array(self.prior_strength_),
                            "prior_center": self.prior_center_}

    def _add_log_likelihood(self, groups: list[tuple[Any, Array]], y: Array) -> None:
        super()._add_log_likelihood(groups, y)
        (_, x), = groups  # every draw at the one floor eps_
        group = _compat.group_dataset(self.idata_, "log_likelihood")
        post = self.idata_.posterior
        joint = dirgen_pointwise_joint(post["alpha"].values, post["pi"].values, x, y)
        group = group.assign(q_y=(("chain", "draw", "obs"), joint))
        _compat.set_group(self.idata_, "log_likelihood", group)

    def sample_posterior_predictive(self, scores: ArrayLike, y: ArrayLike | None = None, *,
                                    random_seed: int | None = None):
        """Labels simulated from every posterior draw's calibration map at ``scores``.

        As :meth:`BayesianDirichletCalibrator.sample_posterior_predictive`
        (labels given the scores, the calibration question).
        """
        return _posterior_predictive(self, scores, y, random_seed)

    def _restore(self) -> None:
        stats = getattr(self, "_stats", {})
        self.prior_strength_ = (float(stats["prior_strength"]) if "prior_strength" in stats
                                else None)
        self.prior_center_ = stats.get("prior_center")
        self.cv_results_ = None
        # W = alpha - 1 and b = ln pi + lnGamma(sum alpha) - sum lnGamma(alpha)
        self.alpha_mode_ = self.coef_ + 1.0
        a = self.alpha_mode_
        log_pi = self.intercept_ - gammaln(a.sum(axis=1)) + gammaln(a).sum(axis=1)
        self.pi_mode_ = np.exp(log_pi - logsumexp(log_pi))
