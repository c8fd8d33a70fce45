r"""The structured model's posterior sampled by one compiled program (JAX and NumPyro).

``sampler="jax"`` (the default of :class:`~bayescal.bayes.BayesianDirichletCalibrator`
and :class:`~bayescal.bayes.BayesianGenerativeCalibrator` when NumPyro is
installed; the latter's density, :func:`_dirgen_model`, is in its class
statistics and so does not depend on ``n``) runs NUTS, warm-up and draws, as one
compiled XLA program: NumPyro's NUTS kernel (:func:`numpyro.infer.hmc.hmc`,
diagonal mass matrix adapted in warm-up) iterated by :func:`jax.lax.fori_loop`
for up to :data:`CHUNK` steps a call (the default run, 500 warm-up steps and 1000
draws, and its retry with 2000 draws are one call per chain), on the log density
written here in JAX from the very functions the PyMC model uses
(:mod:`bayescal.bayes.hierarchical`, :func:`bayescal.bayes.models.conditional_theta`,
:func:`bayescal.bayes.models._loglik`; in the centred coordinates and from
:data:`SINGLE_PRECISION_MIN_ROWS` rows in every coordinate system, the
likelihood's rows in single precision, :func:`_loglik_f32`). Nothing calls back
into Python between two gradients.

The coordinates are already whitened by the Laplace fit at the mode
(:mod:`bayescal.bayes.laplace`). Where the data do not dominate the prior,
the conditional whitening of :class:`~bayescal.bayes.models.ConditionalWhitening`
(whose PyMC form factorises an ``m x m`` matrix per gradient, ``m = k^2 - 1``)
is written in the centred coefficients, where the prior precision given the
hyperparameters is a scalar plus a fixed correction of rank ``2k - 1``
(:func:`lowrank_theta`): two ``(2k - 1)``-square Choleskys per gradient
instead, the same posterior (from :data:`LOWRANK_MIN_K` classes).
Only a diagonal mass matrix is adapted: a dense one, estimated from warm-up
windows of 25-100 draws in about 100 dimensions (k = 10), is close to singular
after NumPyro's regularisation, and then every trajectory ran to the depth
limit (1023 leapfrog steps per draw against 15 with the diagonal one, k = 10,
n = 5000).

One program per structure
-------------------------
The data (features, class counts and sums, the whitening) are *arguments*
of the program, so what it is compiled for is the structure only: the prior,
``k``, the coordinates (centred or conditional), the warm-up's length
(``tune``: NumPyro builds its adaptation windows from it), NUTS' tree depth
and the number of rows rounded up to a bucket (:func:`row_bucket`; padded rows
have weight 0 and change nothing). The numbers of draws and chains are not
part of it (a chain runs its steps in calls of up to :data:`CHUNK` steps of
one program, the first of which also starts it, and the chains of a device
one after the other), so another ``draws`` or
``chains``, the divergence retry (a higher ``target_accept``), a chain
longer than :data:`CHUNK` steps and the mixing retry's longer chains (which
continue the first try's chains, :class:`Chains`, rather than run them
again) compile nothing. A second data
set of the same structure in the process compiles nothing; in a new process
the compilation is read from JAX's persistent cache (:func:`cache_dir`), so a
machine compiles each structure once.

The mode and the Laplace whitening use the same JAX density
(:func:`log_posterior`), so a default fit imports neither PyMC nor PyTensor.

JAX runs in 64-bit precision here: :func:`import_jax` turns on
``jax_enable_x64`` for the process (as PyMC's JAX samplers do).

Devices and seeds
-----------------
When bayescal is the first to import JAX it asks for one CPU device per core
(``--xla_force_host_platform_device_count``), and the chains are shared out
among them; when JAX was imported before, there is one device and the chains
run one after the other. A seed gives the same draws for the same number of
devices; the two layouts compile different programs, whose rounding differs,
so their draws differ (within Monte Carlo error: at k = 3, n = 200 the
posterior mean of ``s`` was 0.5626 with one device and 0.5647 with two).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal.bayes._backend import require
from bayescal.bayes.hierarchical import (
    StructuredPrior,
    centred_log_prior,
    centred_map,
    group_scales,
    log_prior,
    n_params,
    structured_map,
)
from bayescal.dirichlet import SufficientStatistics

__all__ = ["Chains", "cache_dir", "import_jax", "log_posterior", "lowrank_data", "lowrank_theta",
           "row_bucket", "sample", "sample_dirgen"]

Array = NDArray[np.float64]

#: Fewest classes sampled in the low-rank conditional coordinates
#: (:func:`lowrank_theta`); below, the ``m x m`` Cholesky of
#: :func:`~bayescal.bayes.models.conditional_theta` is as cheap (m = 8 at k = 3) and
#: its geometry took fewer leapfrog steps: default fits at k = 3 (n = 100, 300) took
#: 1.2 s and 1.8 s against 1.5 s and 2.2 s, at k = 4-6 the low-rank form was
#: 5-20 % faster and at k = 10 5.3 times (docs/benchmarks.md, *Compiled sampler*).
LOWRANK_MIN_K = 4

#: Fewest padded rows (:func:`row_bucket`) from which the conditional coordinates
#: (and the low-rank ones) also compute the likelihood's rows in single precision
#: (:func:`_loglik_f32`; the centred coordinates always do). Below it the rows are
#: not what a gradient costs (k = 10: 0.42 against 0.39 ms a gradient at 1024
#: rows, 0.64 against 0.36 ms at 2048), and the funnel's neck, where a chain's
#: draws are sensitive to any change of rounding, is where the prior dominates.
SINGLE_PRECISION_MIN_ROWS = 2048

#: Sample stats kept per draw, by ArviZ's names.
STATS = ("diverging", "n_steps", "tree_depth", "step_size", "acceptance_rate", "energy", "lp")


def cache_dir() -> Path:
    """Where JAX keeps compiled programs between processes.

    ``$BAYESCAL_JAX_CACHE`` when set, else ``bayescal/jax`` under
    ``$XDG_CACHE_HOME`` (default ``~/.cache``).
    """
    env = os.environ.get("BAYESCAL_JAX_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bayescal" / "jax"


@functools.cache
def import_jax() -> Any:
    """Import JAX with 64-bit floats and the persistent compilation cache on.

    The cache directory (:func:`cache_dir`) is set only when the process has
    not chosen one itself (``jax_compilation_cache_dir``).
    """
    if "jax" not in sys.modules and "xla_force_host_platform_device_count" not in os.environ.get(
            "XLA_FLAGS", ""):
        # one CPU device per core, so that chains run in parallel
        flag = f"--xla_force_host_platform_device_count={_cores()}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    jax = require("jax", extra="fast")
    require("numpyro", extra="fast")
    jax.config.update("jax_enable_x64", True)
    if not jax.config.jax_compilation_cache_dir:
        path = cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:  # pragma: no cover - an unwritable home: compile every time
            return jax
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return jax


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _devices(chains: int) -> int:
    """How many devices share the chains: the most that divide ``chains`` evenly."""
    jax = import_jax()
    d = min(jax.local_device_count(), chains)
    while chains % d:
        d -= 1
    return d


def row_bucket(n: int) -> int:
    """Rows the compiled program holds for ``n`` rows: the next of 64, 96, 128, 192, ..., 768,
    then 1024, 1280, 1536, 1792, 2048, 2560, ...

    (powers of two and 1.5 times them, and quarter steps from 1024 rows, where the
    likelihood's padded rows start to dominate a gradient's cost), so at most a third
    of the rows are padding (a fifth from 1024 rows: 5000 rows run as 5120, not 6144)
    and a few programs serve every ``n``.
    """
    size = 64
    while True:
        steps = (4, 5, 6, 7) if size >= 1024 else (4, 6)
        for m in (size * q // 4 for q in steps):
            if m >= n:
                return m
        size *= 2


class _JaxLinalg:
    """JAX's ``cholesky`` and ``solve_triangular`` as :func:`conditional_theta` calls them."""

    @staticmethod
    def cholesky(P: Any) -> Any:
        import jax.numpy as jnp

        return jnp.linalg.cholesky(P)

    @staticmethod
    def solve_triangular(L: Any, b: Any, lower: bool) -> Any:
        from jax.scipy.linalg import solve_triangular

        return solve_triangular(L, b, lower=lower)


def _data(x: Array, y: Array, n_pad: int) -> dict[str, Array]:
    """The likelihood's arguments: ``x`` padded to ``n_pad`` rows of weight 0, counts, sums."""
    n, k = x.shape
    stats = SufficientStatistics.from_features(x, y)
    xp = np.zeros((n_pad, k))
    xp[:n] = x
    weights = np.zeros(n_pad)
    weights[:n] = 1.0
    return {"x": xp, "weights": weights, "counts": np.asarray(stats.counts, dtype=np.float64),
            "sums": np.asarray(stats.sums, dtype=np.float64)}


def _loglik_f32(W: Any, b: Any, x_t32: Any, counts: Any, sums: Any, weights: Any) -> Any:
    r"""The DirLin log likelihood with its rows' ``logsumexp`` in single precision.

    As :func:`bayescal.bayes.models._loglik` (the linear term
    :math:`\sum W \odot S + b^\top c` from the class sums, in double precision),
    but the logits :math:`z = W x_i + b` and their ``logsumexp`` are computed
    in float32 on the features stored classes x rows (``x_t32``, shape
    ``(k, n)``: the reductions over the classes then run along the long axis),
    and each row's result is cast to float64 before the weighted sum over the
    rows. Measured side by side (docs/benchmarks.md, *Single precision in the
    centred coordinates*): default fits 2.2 times faster at ``k = 10``,
    ``n = 5000`` and 3 times at ``k = 3``, ``n = 3000`` on XLA's CPU back end,
    with the same ESS; the density is within a few float32 ulps of the rows'
    summed size of the exact one (at most 2e-3 nats at points spread about
    the mode, ``k = 10``, ``n = 5000``), far below a leapfrog step's change
    where the data hold every direction of the map. The compiled sampler
    uses it in the centred coordinates and, from :data:`SINGLE_PRECISION_MIN_ROWS`
    padded rows, in the conditional ones too (real CIFAR-10 outputs,
    ``k = 10``, ``n = 5000``: 1.6-2.3 times faster, docs/benchmarks.md,
    *Single precision at many rows*); with fewer rows the conditional
    coordinates (a hierarchical funnel) keep the exact float64 rows of
    :func:`~bayescal.bayes.models._loglik`: there a chain's draws are
    sensitive to any change of rounding (at ``k = 10``, ``n = 100`` one seed's
    chain stalled at a step size of 1e-15 with this layout, in float32 and in
    float64 alike, and not with the row-major one). Above the threshold a chain
    can still stall in single precision (pendigits' logistic scores, ``k = 10``,
    ``n = 2748``, at ``target_accept=0.8``: a step size of 2.6e-14, where the
    same chain in double precision adapted to 0.23); the estimators then sample
    again in double precision (``sample``'s ``single_precision=False``;
    :data:`bayescal.bayes.estimators.STALL_STEP_SIZE`).
    """
    import jax
    import jax.numpy as jnp

    z = jnp.dot(W.astype(jnp.float32), x_t32) + b.astype(jnp.float32)[:, None]
    top = jax.lax.stop_gradient(jnp.max(z, axis=0))
    lse = jnp.log(jnp.sum(jnp.exp(z - top), axis=0)).astype(jnp.float64)
    rows = jnp.dot(weights, lse) + jnp.dot(weights, top.astype(jnp.float64))
    return jnp.sum(W * sums) + jnp.dot(b, counts) - rows


def _single_precision_rows(data: dict[str, Array]) -> dict[str, Array]:
    """``data`` (:func:`_data`) for :func:`_loglik_f32`: ``x`` as ``x_t32``, classes x rows."""
    out = {key: value for key, value in data.items() if key != "x"}
    out["x_t32"] = np.ascontiguousarray(data["x"].T, dtype=np.float32)
    return out


def _map_and_density(kind: str, prior: StructuredPrior, k: int):
    """``f(v, data) -> (log density, theta, s, W, b)`` in the coordinates ``kind``.

    ``"theta"`` / ``"centred_theta"``: ``v`` is ``theta`` (non-centred /
    centred, :mod:`bayescal.bayes.hierarchical`); ``"centred"``: ``v = z``
    with ``theta = loc + chol z`` (:class:`~bayescal.bayes.models.CentredWhitening`);
    ``"centred_f32"``: the same, with the likelihood's rows in single precision
    (:func:`_loglik_f32`; the sampler's form of ``"centred"``; the suffix
    ``"_f32"`` does the same to any of these coordinates);
    ``"conditional"``: ``v = (eta - hyper_loc, xi)``
    (:class:`~bayescal.bayes.models.ConditionalWhitening`); ``"lowrank"``:
    the same conditional whitening written in the centred coordinates
    (:func:`lowrank_theta`; from :data:`LOWRANK_MIN_K` classes when every group is
    free).
    """
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    from bayescal.bayes.models import _loglik, conditional_theta

    n_hyper = 1 + sum(prior.sampled)
    single = kind.endswith("_f32")
    kind = kind.removesuffix("_f32")

    def f(v: Any, data: dict[str, Any]):
        jac = 0.0
        if kind == "theta":
            theta, to_map, density = v, structured_map, log_prior
        elif kind == "centred_theta":
            theta, to_map, density = v, centred_map, centred_log_prior
        elif kind == "centred":
            theta = data["loc"] + jnp.dot(data["chol"], v)
            to_map, density = centred_map, centred_log_prior
        elif kind == "lowrank":
            theta, jac = lowrank_theta(data["hyper_loc"] + v[:n_hyper], v[n_hyper:], data,
                                       prior, k)
            to_map, density = centred_map, centred_log_prior
        else:
            eta = data["hyper_loc"] + v[:n_hyper]
            xi = v[n_hyper:] if v.shape[0] > n_hyper else None
            theta, jac = conditional_theta(eta, xi, data, prior, k, jnp, _JaxLinalg)
            to_map, density = structured_map, log_prior
        s, W, b = to_map(theta, prior, k, jnp)
        if single:
            loglik = _loglik_f32(W, b, data["x_t32"], data["counts"], data["sums"],
                                 data["weights"])
        else:
            loglik = _loglik(W, b, data["x"], data["counts"], data["sums"], xp=jnp,
                             logsumexp=logsumexp, weights=data["weights"])
        return density(theta, prior, k, jnp) + jac + loglik, theta, s, W, b

    return f


def lowrank_data(whiten: Any, prior: StructuredPrior, k: int) -> dict[str, Array]:
    r"""What :func:`lowrank_theta` needs of a :class:`~bayescal.bayes.models.ConditionalWhitening`.

    The log likelihood's second-order expansion at the mode, in the centred
    coefficients ``c`` (:func:`bayescal.bayes.hierarchical.centred_map`; the
    raw parameters are :math:`r = K c` up to the shifts that leave the map
    unchanged, so :math:`F_c = K^\top F K`, :math:`g_c = K^\top g`,
    :math:`c^* = K^\top r^*`), rotated to the eigenvectors ``V`` of
    :math:`F_c` (eigenvalues ``lam_F``, clipped at 0): ``h_hat`` is
    :math:`V^\top (F_c c^* + g_c)`, and ``Y_hat``, ``u0_hat`` are
    :func:`~bayescal.bayes.hierarchical.centred_prior_factors` in that basis.
    Computed once per fit (one ``m x m`` eigendecomposition).
    """
    from bayescal.bayes.hierarchical import _basis, centred_prior_factors

    B = _basis(k)
    m = k * (k - 1) + k - 1
    K = np.zeros((k * k + k, m))
    for i in range(k):  # W[j, i] is raw entry j k + i; its column's coefficients i (k-1) + p
        K[np.arange(k) * k + i, i * (k - 1):(i + 1) * (k - 1)] = B
    K[k * k:, k * (k - 1):] = B
    F = K.T @ np.asarray(whiten.fisher, dtype=np.float64) @ K
    lam, V = np.linalg.eigh(0.5 * (F + F.T))
    lin = F @ (K.T @ np.asarray(whiten.r_star)) + K.T @ np.asarray(whiten.grad)
    u0, Y = centred_prior_factors(k)
    return {"hyper_loc": np.asarray(whiten.hyper_loc, dtype=np.float64),
            "V": V, "lam_F": np.maximum(lam, 0.0), "Y_hat": V.T @ Y, "u0_hat": V.T @ u0,
            "h_hat": V.T @ lin}


def lowrank_theta(eta: Any, xi: Any, data: dict[str, Any], prior: StructuredPrior,
                  k: int) -> tuple[Any, Any]:
    r"""Centred ``theta`` and log Jacobian of the conditional coordinates ``(eta, xi)``, in JAX.

    The change of variables of :class:`~bayescal.bayes.models.ConditionalWhitening`
    (the Laplace conditional posterior of the coefficients given
    :math:`\eta` whitened to :math:`\xi`), without a factorisation of an
    ``m x m`` matrix per gradient. In the centred coefficients the prior
    precision given :math:`\eta` is a scalar :math:`\alpha(\eta)` plus a
    correction :math:`Y D(\eta) Y^\top` of rank ``r = 2k - 1`` with ``Y``
    fixed (:func:`~bayescal.bayes.hierarchical.centred_prior_precision`).
    In the eigenbasis of the likelihood's :math:`F_c` (:func:`lowrank_data`),
    :math:`P = S^2 + \hat Y D \hat Y^\top` with
    :math:`S^2 = \mathrm{diag}(\lambda_F + \alpha)`. With
    :math:`S^{-1}\hat Y = Q R` (the thin QR, computed as :math:`R = C^\top`
    from the Cholesky :math:`C C^\top` of the ``r x r`` Gram matrix
    :math:`\hat Y^\top S^{-2} \hat Y`, with :math:`Q = S^{-1}\hat Y C^{-\top}`
    only ever applied, never formed: 0.22 against 0.33 ms a gradient with a
    QR at ``k = 10``, ``n = 300``) and
    :math:`I_r + R D R^\top = L L^\top`, the matrix
    :math:`T = I - QQ^\top + Q L Q^\top` has :math:`T T^\top =
    I + S^{-1}\hat Y D \hat Y^\top S^{-1}`, so :math:`A = S^{-1} T^{-\top}`
    has :math:`A A^\top = P^{-1}` and

    .. math:: \hat c = A (A^\top h(\eta) + \xi),\qquad
              \ln\lvert\det A\rvert = -\tfrac12 \sum \ln(\lambda_F + \alpha)
              - \sum \ln L_{ii},

    :math:`h(\eta) = \hat h + s(\alpha + g (1 - 1/k))\hat u_0` (the prior
    mean's pull), ``c = V c_hat``: :math:`O(m r^2)` per gradient. Exact for
    every :math:`\eta` (a bijection with this Jacobian); the Laplace
    quantities only choose the coordinates. Every group must be free
    (centred coordinates).

    Returns
    -------
    theta : array of shape (n_params,)
        Centred (:func:`bayescal.bayes.hierarchical.centred_map`).
    log_jacobian : scalar
    """
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    from bayescal.bayes.hierarchical import centred_prior_precision

    m = k * (k - 1) + k - 1
    s, alpha, lam_b, g = centred_prior_precision(jnp.concatenate([eta, jnp.zeros(m)]), prior,
                                                 k, jnp)
    d = jnp.concatenate([jnp.full(k - 1, lam_b - alpha), jnp.full(k, g)])
    lam = data["lam_F"] + alpha
    sinv = 1.0 / jnp.sqrt(lam)
    U = sinv[:, None] * data["Y_hat"]  # = Q R, the thin QR, with R = C' from U'U = C C'
    C = jnp.linalg.cholesky(U.T @ U)
    L = jnp.linalg.cholesky(jnp.eye(2 * k - 1) + (C.T * d[None, :]) @ C)

    def q_t(z: Any) -> Any:  # Q'z = C^-1 U'z
        return solve_triangular(C, U.T @ z, lower=True)

    def q_dot(w: Any) -> Any:  # Q w = U C^-T w
        return U @ solve_triangular(C.T, w, lower=False)

    def a_dot(z: Any) -> Any:  # A z = S^-1 (z - Q Q'z + Q L^-T Q'z)
        qz = q_t(z)
        return sinv * (z + q_dot(solve_triangular(L.T, qz, lower=False) - qz))

    def at_dot(z: Any) -> Any:  # A' z = (I - QQ' + Q L^-1 Q') S^-1 z
        z = sinv * z
        qz = q_t(z)
        return z + q_dot(solve_triangular(L, qz, lower=True) - qz)

    h = data["h_hat"] + s * (alpha + g * (1.0 - 1.0 / k)) * data["u0_hat"]
    c = data["V"] @ a_dot(at_dot(h) + xi)
    log_jac = -0.5 * jnp.sum(jnp.log(lam)) - jnp.sum(jnp.log(jnp.diagonal(L)))
    return jnp.concatenate([eta, c]), log_jac


@functools.lru_cache(maxsize=16)
def _value_and_grad(prior: StructuredPrior, k: int, kind: str):
    jax = import_jax()
    f = _map_and_density(kind, prior, k)
    return jax.jit(jax.value_and_grad(lambda v, data: f(v, data)[0]))


def log_posterior(x: ArrayLike, y: ArrayLike, prior: StructuredPrior, *,
                  centred: bool = False):
    """The structured model's log posterior and gradient in ``theta``, compiled by JAX.

    The same function as :func:`bayescal.bayes.models.structured_log_posterior`
    (PyTensor), for the mode and the whitening of a ``sampler="jax"`` fit.

    Returns
    -------
    f : callable
        ``f(theta) -> (logp, grad)`` on NumPy arrays of shape (n_params,).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.asarray(y)
    fn = _value_and_grad(prior, x.shape[1], "centred_theta" if centred else "theta")
    data = _data(x, y, row_bucket(x.shape[0]))

    def f(t: Array) -> tuple[float, Array]:
        v, g = fn(np.asarray(t, dtype=np.float64), data)
        return float(v), np.asarray(g, dtype=np.float64)

    return f


def _structured_model(prior: StructuredPrior, k: int, kind: str):
    """``(log density, derived draws)`` of the structured model in the coordinates ``kind``."""
    import jax.numpy as jnp

    f = _map_and_density(kind, prior, k)

    def derive(v, data):
        _, theta, s, W, b = f(v, data)
        tau = jnp.stack([jnp.asarray(t, dtype=jnp.float64)
                         for t in group_scales(theta, prior, k, jnp)])
        return {"theta": theta, "s": s, "tau": tau, "W": W,
                "b": jnp.broadcast_to(b, (k,))}

    return (lambda v, data: f(v, data)[0]), derive


def _dirgen_model(k: int):
    r"""``(log density, derived draws)`` of the DirGen concentrations, whitened per class.

    ``v`` holds ``z`` (k, k) flattened, ``ln alpha_j = loc_j + chol_j z_j``;
    the density is :func:`bayescal.bayes.models.dirgen_model`'s with
    ``include_pi=False`` (a Normal prior on every ``ln alpha``, the likelihood
    :func:`~bayescal.bayes.models._dirgen_loglik_q` through the class counts and
    log-feature sums, the same function), its arguments ``counts``,
    ``sums``, ``loc``, ``chol``, ``mu`` and ``sigma``.
    """
    import jax.numpy as jnp
    from jax.scipy.special import gammaln

    from bayescal.bayes.models import _dirgen_loglik_q

    def log_alpha(v, data):
        z = v.reshape(k, k)
        return data["loc"] + jnp.einsum("jab,jb->ja", data["chol"], z)

    def density(v, data):
        u = log_alpha(v, data)
        prior = -0.5 * jnp.sum(((u - data["mu"]) / data["sigma"]) ** 2)
        return prior + _dirgen_loglik_q(jnp.exp(u), data["counts"], data["sums"], xp=jnp,
                                        gammaln=gammaln)

    def derive(v, data):
        return {"alpha": jnp.exp(log_alpha(v, data))}

    return density, derive


#: Steps one call of the compiled program runs at most (:func:`_program`): the default
#: run (500 warm-up steps and 1000 draws) and its mixing retry (2000 draws) in one call
#: per chain; a longer chain continues from where the previous call stopped.
CHUNK = 2500
#: Regroup the chains by adapted step size after their warm-up (:func:`_pair_turns`),
#: where several devices run several chains each; the draws are the same.
PAIR_TURNS = True


@functools.lru_cache(maxsize=8)
def _program(model: tuple[Any, ...], tune: int, max_tree_depth: int, devices: int):
    """The jitted ``steps(fresh, key, v, state, count, data)`` and its ``placeholder``.

    ``model`` names the density: ``("structured", prior, k, kind)``
    (:func:`_structured_model`) or ``("dirgen", k)`` (:func:`_dirgen_model`).
    ``steps`` runs ``count`` (at most :data:`CHUNK`) steps of NumPyro's NUTS
    (a warm-up of ``tune`` steps, diagonal mass matrix), warm-up or draws
    alike: with ``fresh`` from a new chain at ``v`` with ``key``, otherwise
    from ``state``, the state a previous call reached (in a fresh call,
    ``placeholder(key, v, data)``: zeros of its shapes). It returns the state
    reached, the derived draws and the sample stats of its steps, in
    :data:`CHUNK` rows of which the first ``count`` are filled. A chain's
    first call and every later one (a chain longer than :data:`CHUNK` steps,
    the mixing retry's continuation) run this one program, so a continuation
    compiles nothing. The numbers of draws and chains are not part of it, so a
    run of any length reuses it; ``data["target_accept"]`` is an argument too
    (the step-size adaptation's target enters only its arithmetic), so a retry
    at a higher target reuses it as well. It runs one chain per device: one
    device, :func:`jax.jit`; several, :func:`jax.pmap` over them (``key``,
    ``v`` and the state with a leading device axis).
    """
    jax = import_jax()
    import jax.numpy as jnp
    from numpyro.infer.hmc import hmc

    density, derive = (_structured_model(*model[1:]) if model[0] == "structured"
                       else _dirgen_model(*model[1:]))

    def potential(data):
        return lambda v: -density(v, data)

    def kernels(key, v, data):
        init_kernel, sample_kernel = hmc(potential_fn_gen=potential, algo="NUTS")
        state = init_kernel(v, tune, dense_mass=False, target_accept_prob=data["target_accept"],
                            max_tree_depth=max_tree_depth, model_args=(data,), rng_key=key)
        return state, sample_kernel

    def stats(state):
        return (state.z, state.diverging, state.num_steps, state.adapt_state.step_size,
                state.accept_prob, state.energy, -state.potential_energy)

    def rows_of(shapes):
        """Zeroed buffers of CHUNK rows for a tree of shapes (:func:`jax.eval_shape`)."""
        return jax.tree_util.tree_map(lambda a: jnp.zeros((CHUNK, *a.shape), dtype=a.dtype),
                                      shapes)

    def put(rows, i, tree):
        return jax.tree_util.tree_map(lambda r, a: r.at[i].set(a), rows, tree)

    def steps(fresh, key, v, given, count, data):
        # a chain's first call (``fresh``) starts it at ``v`` with ``key``; a later one
        # continues ``given`` (in the first call, a placeholder of its shapes). Both run
        # the kernel's init, which sets its settings (warm-up length, tree depth,
        # target): one gradient, whose state only a first call keeps.
        start, sample_kernel = kernels(key, v, data)
        state = jax.lax.cond(fresh, lambda: start, lambda: given)

        def step(i, carry):
            state, rows = carry
            state = sample_kernel(state, model_args=(data,))
            return state, put(rows, i, stats(state))

        state, (z, *rest) = jax.lax.fori_loop(0, count, step,
                                              (state, rows_of(jax.eval_shape(stats, state))))
        # the derived draws of the filled rows only
        derived = jax.lax.fori_loop(0, count, lambda i, d: put(d, i, derive(z[i], data)),
                                    rows_of(jax.eval_shape(derive, z[0], data)))
        return state, derived, rest

    shapes: list[Any] = []  # one chain's state, traced once (about 0.2 s at k = 10)

    def placeholder(key, v, data):
        """Zeros in the shapes of the chains' states (the ``state`` of a first call).

        ``key`` and ``v`` as ``steps`` takes them (a leading device axis with
        several devices); the state's random key is ``key`` itself.
        """
        lead = (devices,) if devices > 1 else ()
        if not shapes:
            one = (key[0], v[0]) if lead else (key, v)
            shapes.append(jax.eval_shape(lambda key, v: kernels(key, v, data)[0], *one))
        return jax.tree_util.tree_map(
            lambda a: key if _is_key(a) else np.zeros((*lead, *a.shape), a.dtype), shapes[0])

    if devices == 1:
        return jax.jit(steps), placeholder
    # one chain on each device, in parallel
    return jax.pmap(steps, in_axes=(None, 0, 0, 0, None, None)), placeholder


@dataclass
class Chains:
    """Where the chains of a compiled run stopped, to run them longer (``resume``).

    Returned by :func:`sample` and :func:`sample_dirgen` under the key
    ``"chains"``; passed back as their ``resume``, the same chains continue
    from their last states (warm-up done, step size and mass matrix adapted)
    for the extra draws only, and the draws of the longer run are those of a
    fresh run of that length with the same seed (the first ``draws`` are the
    same steps of the same program; the rest continue each chain's state,
    random key included). The estimators' mixing retry (``retry_draws``)
    uses it instead of starting over: at twice the draws it runs 1000 steps
    per chain where a fresh run would run 2500.
    """

    model: tuple[Any, ...]
    tune: int
    max_tree_depth: int
    target_accept: float
    chains: int
    #: per turn (one chain per device at a time): the last state and the rows so far
    states: list[Any]
    pieces: list[list[Any]]
    done: int
    #: the chain in each slot ``d * per_device + j`` (device ``d``, turn ``j``): after
    #: the warm-up the chains are paired by adapted step size (:func:`_pair_turns`)
    order: tuple[int, ...] | None = None


class StalledChain(RuntimeError):
    """A chain's step size, adapted in its warm-up, fell below the run's ``stop_stalled``.

    Raised by :func:`sample` at the end of the warm-up, before any draw;
    ``step_size`` is the smallest chain's.
    """

    def __init__(self, step_size: float, threshold: float) -> None:
        super().__init__(f"a chain's step size adapted to {step_size:.3g} in its warm-up "
                         f"(below {threshold:g}): it has stalled")
        self.step_size = step_size


def _run(model: tuple[Any, ...], data: dict[str, Any], dim: int, names: tuple[str, ...], *,
         draws: int, tune: int, chains: int, random_seed: int | None, target_accept: float,
         max_tree_depth: int, resume: Chains | None = None,
         stop_stalled: float | None = None) -> dict[str, Any]:
    """Run :func:`_program` from jittered starts near ``v = 0``; the draws of ``names``.

    The chains are shared out among the devices (:func:`_devices`), one chain
    per device at a time; each chain runs its ``tune + draws`` steps in calls
    of at most :data:`CHUNK` steps, and its first ``tune`` steps (the warm-up)
    are dropped. ``resume`` (a :class:`Chains` of the same model, warm-up,
    target and chains, fewer steps) continues its chains instead; the result
    holds a :class:`Chains` under ``"chains"``. ``stop_stalled`` (a fresh run
    with a warm-up): every chain's warm-up runs first, in calls of its own,
    and :class:`StalledChain` is raised if an adapted step size is below it
    (the draws are those of a run without it: a call continues its state
    exactly). The warm-up also runs first where several devices run several
    chains each, and the chains are then regrouped by adapted step size
    (:func:`_pair_turns`; :data:`PAIR_TURNS`), which changes no draw.
    """
    jax = import_jax()
    data["target_accept"] = np.float64(target_accept)
    devices = _devices(chains)
    steps, placeholder = _program(model, int(tune), int(max_tree_depth), devices)
    per_device = chains // devices
    total = int(tune) + int(draws)
    if resume is None:
        rng = np.random.default_rng(random_seed)
        # each chain starts near the mode (v = 0), jittered as PyMC's "jitter+adapt_diag"
        v0 = rng.uniform(-1.0, 1.0, size=(chains, dim)) * 0.5
        keys = jax.random.split(jax.random.key(int(rng.integers(2**31 - 1))), chains)
        states: list[Any] = [None] * per_device
        pieces: list[list[Any]] = [[] for _ in range(per_device)]
        done0 = 0
    else:
        if (resume.model, resume.tune, resume.max_tree_depth, resume.target_accept,
                resume.chains) != (model, int(tune), int(max_tree_depth), float(target_accept),
                                   chains) or resume.done > total:
            raise ValueError("resume continues the chains of the same model, warm-up, "
                             "target_accept and chains, to as many steps or more")
        states, pieces, done0 = list(resume.states), [list(p) for p in resume.pieces], resume.done
    order = np.arange(chains) if resume is None or resume.order is None else np.array(
        resume.order)

    def advance(j: int, done: int, until: int) -> None:
        # chain c = d * per_device + j runs on device d, in its j-th turn
        while done < until:
            count = min(CHUNK, until - done)
            if done == 0:
                idx = np.arange(devices) * per_device + j
                key, v = (keys[idx], v0[idx]) if devices > 1 else (keys[j], v0[j])
                given = placeholder(key, v, data)
            else:
                given = _on_host(states[j])
                key, v = given.rng_key, given.z
            states[j], derived, rest = steps(np.bool_(done == 0), key, v, given,
                                             np.int32(count), data)
            pieces[j].append(jax.tree_util.tree_map(
                lambda a, c=count: _rows(np.asarray(a), c, devices), (derived, rest)))
            done += count

    start = done0
    pair = PAIR_TURNS and devices > 1 and per_device > 1
    if ((stop_stalled is not None or pair) and resume is None and 0 < int(tune) < total):
        for j in range(per_device):
            advance(j, 0, int(tune))
        if stop_stalled is not None:
            smallest = min(float(np.min(np.asarray(states[j].adapt_state.step_size)))
                           for j in range(per_device))
            if not smallest >= stop_stalled:
                raise StalledChain(smallest, stop_stalled)
        start = int(tune)
        if pair:
            states, pieces, order = _pair_turns(states, pieces, order, devices, per_device)
    parts: list[Any] = []
    for j in range(per_device):
        advance(j, start, total)
        parts.append(jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=1)[:, tune:],
                                            *pieces[j]))
    # (turn, device, step, ...) -> (slot, step, ...), slot = device * per_device + turn,
    # then the chains in their own order (slot s holds chain order[s])
    back = np.argsort(order)
    derived, rest = jax.tree_util.tree_map(
        lambda *a: np.stack(a, axis=1).reshape(chains, *a[0].shape[1:])[back], *parts)
    post = {name: np.asarray(derived[name], dtype=np.float64) for name in names}
    diverging, n_steps, step_size, accept, energy, lp = rest
    sample_stats = {
        "diverging": diverging.astype(bool),
        "n_steps": n_steps.astype(np.int64),
        "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1,
        "step_size": np.asarray(step_size, dtype=np.float64),
        "acceptance_rate": np.asarray(accept, dtype=np.float64),
        "energy": np.asarray(energy, dtype=np.float64),
        "lp": np.asarray(lp, dtype=np.float64),
    }
    return {"posterior": post, "sample_stats": sample_stats,
            "chains": Chains(model=model, tune=int(tune), max_tree_depth=int(max_tree_depth),
                             target_accept=float(target_accept), chains=chains, states=states,
                             pieces=pieces, done=total, order=tuple(int(c) for c in order))}


def _pair_turns(states: list[Any], pieces: list[list[Any]], order: Array, devices: int,
                per_device: int) -> tuple[list[Any], list[list[Any]], Array]:
    """The chains regrouped after their warm-up so that each turn's have alike step sizes.

    A call of the program runs one chain on each device and returns when the
    slowest has run its steps; a chain's steps per draw follow its adapted
    step size (trees of 15 leapfrog steps at one step size, 31 at a smaller
    one), so a turn that pairs unlike chains leaves a device idle while the
    other runs alone, which XLA's CPU runtime does more slowly than two at
    once (docs/benchmarks.md, *A compiled loop with a core to spare*). The
    chains sorted by step size fill the turns in that order. Each chain's
    state, random key and rows so far move with it, so its draws are those
    it would have drawn in its own slot: only the schedule changes.
    ``order[s]`` is the chain in slot ``s = d * per_device + j``.
    """
    jax = import_jax()
    host = [_on_host(state) for state in states]
    step = np.stack([np.asarray(h.adapt_state.step_size) for h in host], axis=1).ravel()
    ranked = np.argsort(-step, kind="stable")  # slots, largest step size first
    # new slot d * per_device + j takes the (j * devices + d)-th of the ranked slots
    src = np.array([ranked[j * devices + d] for d in range(devices)
                    for j in range(per_device)])

    def regroup(trees: list[Any]) -> list[Any]:
        leaves = [jax.tree_util.tree_flatten(t)[0] for t in trees]
        treedef = jax.tree_util.tree_structure(trees[0])
        out: list[list[Any]] = [[] for _ in trees]
        for by_turn in zip(*leaves, strict=True):
            key = _is_key(by_turn[0])
            arrays = [np.asarray(jax.random.key_data(a)) if key else np.asarray(a)
                      for a in by_turn]
            slots = np.stack(arrays, axis=1).reshape(devices * per_device,
                                                     *arrays[0].shape[1:])[src]
            slots = slots.reshape(devices, per_device, *slots.shape[1:])
            for j in range(per_device):
                a = slots[:, j]
                out[j].append(jax.random.wrap_key_data(a, impl=jax.random.key_impl(by_turn[0]))
                              if key else a)
        return [jax.tree_util.tree_unflatten(treedef, leaves_j) for leaves_j in out]

    new_pieces = [list(chunk) for chunk in zip(*(regroup(list(chunks))
                                                 for chunks in zip(*pieces, strict=True)),
                                               strict=True)]
    return regroup(host), new_pieces, order[src]


def _on_host(state: Any) -> Any:
    """A chain's state as host arrays, as a first call passes its arguments.

    The state a call returns lives on the devices, laid out as the call's
    output; passed back as it is, it would be an argument of another layout
    than a first call's (host arrays), for which :func:`jax.pmap` looks up a
    second executable (from the persistent cache, 0.3 s at k = 3; a full
    compile without it). Random keys keep their type.
    """
    jax = import_jax()

    def host(a: Any) -> Any:
        if _is_key(a):
            return jax.random.wrap_key_data(np.asarray(jax.random.key_data(a)),
                                            impl=jax.random.key_impl(a))
        return np.asarray(a)

    return jax.tree_util.tree_map(host, state)


def _is_key(a: Any) -> bool:
    """Whether ``a`` (an array or a shape) holds typed random keys (a chain's ``rng_key``)."""
    jax = import_jax()
    return bool(jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key))


def _rows(a: Array, count: int, devices: int) -> Array:
    """The first ``count`` rows of one call's output, as ``(device, step, ...)``."""
    return a[:, :count] if devices > 1 else a[None, :count]


def sample(x: ArrayLike, y: ArrayLike, prior: StructuredPrior, whiten: Any, *, draws: int,
           tune: int, chains: int, random_seed: int | None, target_accept: float,
           max_tree_depth: int = 10, resume: Chains | None = None,
           single_precision: bool | None = None,
           stop_stalled: float | None = None) -> dict[str, Any]:
    """Sample the structured model with the compiled NUTS (module docstring).

    Parameters
    ----------
    x : array-like of shape (n, k)
        Features.
    y : array-like of shape (n,)
    prior : StructuredPrior
    whiten : ConditionalWhitening or CentredWhitening
        The coordinates (:func:`bayescal.bayes.laplace.centred_whitening`).
    draws, tune, chains : int
        Kept draws and warm-up steps per chain; chains (one after the other on
        each device, the devices in parallel).
    random_seed : int or None
        Seeds the chains' starting points and NUTS (``None``: fresh entropy).
    target_accept : float
        Step-size adaptation target.
    max_tree_depth : int, default=10
        NUTS' largest tree depth (at most ``2**max_tree_depth`` leapfrog steps).
    resume : Chains, optional
        The ``"chains"`` of an earlier call on the same data with the same
        settings and fewer draws: its chains continue for the extra draws
        (:class:`Chains`); ``random_seed`` is then not used.
    single_precision : bool or None, default=None
        The likelihood's rows in single precision (:func:`_loglik_f32`);
        ``None``: in the centred coordinates, and from
        :data:`SINGLE_PRECISION_MIN_ROWS` padded rows in every coordinate
        system; ``False``: the exact double-precision rows (what the
        estimators' retry after a stalled chain runs).
    stop_stalled : float or None, default=None
        With single-precision rows, a fresh run raises :class:`StalledChain`
        at the end of the warm-up if a chain's adapted step size is below
        this (:func:`_run`); ignored in double precision.

    Returns
    -------
    groups : dict
        ``{"posterior": {"s", "tau", "W", "b", "theta"}, "sample_stats": {...},
        "chains": Chains}``, arrays with leading axes ``(chain, draw)`` (sample
        stats :data:`STATS`).
    """
    from bayescal.bayes.models import CentredWhitening

    import_jax()  # 64-bit JAX before any array of the run
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.asarray(y)
    k = x.shape[1]
    rows = row_bucket(x.shape[0])
    data = _data(x, y, rows)
    dim = n_params(prior, k)
    centred = isinstance(whiten, CentredWhitening)
    if centred:
        kind = "centred"
        data |= {"loc": np.asarray(whiten.loc, dtype=np.float64),
                 "chol": np.asarray(whiten.chol, dtype=np.float64)}
    elif all(prior.present) and k >= LOWRANK_MIN_K:
        kind = "lowrank"
        data |= lowrank_data(whiten, prior, k)
    else:
        kind = "conditional"
        data |= {"hyper_loc": np.asarray(whiten.hyper_loc, dtype=np.float64),
                 "fisher": np.asarray(whiten.fisher, dtype=np.float64),
                 "grad": np.asarray(whiten.grad, dtype=np.float64),
                 "r_star": np.asarray(whiten.r_star, dtype=np.float64)}
    if single_precision is None:
        single_precision = centred or rows >= SINGLE_PRECISION_MIN_ROWS
    if single_precision:
        kind += "_f32"
        data = _single_precision_rows(data)
    return _run(("structured", prior, k, kind), data, dim, ("s", "tau", "W", "b", "theta"),
                draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                target_accept=target_accept, max_tree_depth=max_tree_depth, resume=resume,
                stop_stalled=stop_stalled if single_precision else None)


def sample_dirgen(counts: ArrayLike, S: ArrayLike, prior: Any, whiten: tuple[Array, Array], *,
                  draws: int, tune: int, chains: int, random_seed: int | None,
                  target_accept: float, max_tree_depth: int = 10,
                  resume: Chains | None = None) -> dict[str, Any]:
    """Sample the DirGen concentrations with the compiled NUTS (:func:`_dirgen_model`).

    One program per ``k`` (and warm-up length): the statistics, the whitening and
    the prior's constants are its arguments, so a new data set compiles
    nothing, and ``n`` does not enter at all.

    Parameters
    ----------
    counts : array-like of shape (k,)
    S : array-like of shape (k, k)
        Class counts and sums of log-features (pseudo-samples included).
    prior : DirGenPrior
        ``log_alpha_mu`` and ``log_alpha_sigma`` of the Normal prior.
    whiten : (loc, chol)
        The mode of ``ln alpha`` (k, k) and per-class Cholesky factors (k, k, k)
        of its inverse negative Hessian there.
    draws, tune, chains, random_seed, target_accept, max_tree_depth, resume
        As :func:`sample`.

    Returns
    -------
    groups : dict
        ``{"posterior": {"alpha"}, "sample_stats": {...}, "chains": Chains}``,
        leading axes ``(chain, draw)``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    k = counts.shape[0]
    loc, chol = (np.asarray(a, dtype=np.float64) for a in whiten)
    data = {"counts": counts, "sums": np.asarray(S, dtype=np.float64), "loc": loc,
            "chol": chol, "mu": np.float64(prior.log_alpha_mu),
            "sigma": np.float64(prior.log_alpha_sigma)}
    return _run(("dirgen", k), data, k * k, ("alpha",), draws=draws, tune=tune,
                chains=chains, random_seed=random_seed, target_accept=target_accept,
                max_tree_depth=max_tree_depth, resume=resume)
