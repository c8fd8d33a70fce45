r"""The structured model's posterior sampled by one compiled program (JAX and NumPyro).

``sampler="jax"`` (the default of :class:`~bayescal.bayes.BayesianDirichletCalibrator`
when NumPyro is installed) runs the whole of NUTS, warm-up and draws of every
chain, as one XLA program: NumPyro's NUTS kernel
(:func:`numpyro.infer.hmc.hmc`, diagonal mass matrix adapted in warm-up) iterated
by :func:`jax.lax.scan`, the chains vectorised with :func:`jax.vmap`, on the
log density written here in JAX from the very functions the PyMC model uses
(:mod:`bayescal.bayes.hierarchical`, :func:`bayescal.bayes.models.conditional_theta`,
:func:`bayescal.bayes.models._loglik`). Nothing calls back into Python between
two gradients.

The coordinates are already whitened by the Laplace fit at the mode
(:mod:`bayescal.bayes.laplace`), so only a diagonal mass matrix is adapted: a
dense one, estimated from warm-up windows of 25-100 draws in about 100
dimensions (k = 10), is close to singular after NumPyro's regularisation, and
then every trajectory ran to the depth limit (1023 leapfrog steps per draw
against 15 with the diagonal one, k = 10, n = 5000).

One program per structure
-------------------------
The data (features, class counts and sums, the whitening) are *arguments*
of the program, so what it is compiled for is the structure only: the prior,
``k``, the coordinates (centred or conditional), the run's length
(``tune``, ``draws``, ``chains``), ``target_accept`` and the number of rows
rounded up to a bucket (:func:`row_bucket`; padded rows have weight 0 and
change nothing). A second data set of the same structure in the process
compiles nothing; in a new process the compilation is read from JAX's
persistent cache (:func:`cache_dir`), so a machine compiles each structure
once.

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

__all__ = ["cache_dir", "import_jax", "log_posterior", "row_bucket", "sample"]

Array = NDArray[np.float64]

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
    """Rows the compiled program holds for ``n`` rows: the next of 64, 96, 128, 192, 256, ...

    (powers of two and 1.5 times them), so at most a third of the rows are
    padding and a few programs serve every ``n``.
    """
    size = 64
    while True:
        for m in (size, size * 3 // 2):
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


def _map_and_density(kind: str, prior: StructuredPrior, k: int):
    """``f(v, data) -> (log density, theta, s, W, b)`` in the coordinates ``kind``.

    ``"theta"`` / ``"centred_theta"``: ``v`` is ``theta`` (non-centred /
    centred, :mod:`bayescal.bayes.hierarchical`); ``"centred"``: ``v = z``
    with ``theta = loc + chol z`` (:class:`~bayescal.bayes.models.CentredWhitening`);
    ``"conditional"``: ``v = (eta - hyper_loc, xi)``
    (:class:`~bayescal.bayes.models.ConditionalWhitening`).
    """
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    from bayescal.bayes.models import _loglik, conditional_theta

    n_hyper = 1 + sum(prior.sampled)

    def f(v: Any, data: dict[str, Any]):
        jac = 0.0
        if kind == "theta":
            theta, to_map, density = v, structured_map, log_prior
        elif kind == "centred_theta":
            theta, to_map, density = v, centred_map, centred_log_prior
        elif kind == "centred":
            theta = data["loc"] + jnp.dot(data["chol"], v)
            to_map, density = centred_map, centred_log_prior
        else:
            eta = data["hyper_loc"] + v[:n_hyper]
            xi = v[n_hyper:] if v.shape[0] > n_hyper else None
            theta, jac = conditional_theta(eta, xi, data, prior, k, jnp, _JaxLinalg)
            to_map, density = structured_map, log_prior
        s, W, b = to_map(theta, prior, k, jnp)
        total = density(theta, prior, k, jnp) + jac + _loglik(
            W, b, data["x"], data["counts"], data["sums"], xp=jnp, logsumexp=logsumexp,
            weights=data["weights"])
        return total, theta, s, W, b

    return f


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


@functools.lru_cache(maxsize=8)
def _program(prior: StructuredPrior, k: int, kind: str, tune: int, draws: int, chains: int,
             target_accept: float, max_tree_depth: int):
    """The jitted ``(key, v0, data) -> (draws of v, theta, s, tau, W, b; sample stats)``."""
    jax = import_jax()
    import jax.numpy as jnp
    from numpyro.infer.hmc import hmc

    f = _map_and_density(kind, prior, k)

    def potential(data):
        return lambda v: -f(v, data)[0]

    def derive(v, data):
        _, theta, s, W, b = f(v, data)
        tau = jnp.stack([jnp.asarray(t, dtype=jnp.float64)
                         for t in group_scales(theta, prior, k, jnp)])
        return {"theta": theta, "s": s, "tau": tau, "W": W,
                "b": jnp.broadcast_to(b, (k,))}

    def run(keys, v0, data):
        init_kernel, sample_kernel = hmc(potential_fn_gen=potential, algo="NUTS")

        def chain(key, v):
            state = init_kernel(v, tune, dense_mass=False, target_accept_prob=target_accept,
                                max_tree_depth=max_tree_depth, model_args=(data,),
                                rng_key=key)

            def step(state, _):
                state = sample_kernel(state, model_args=(data,))
                stats = (state.z, state.diverging, state.num_steps,
                         state.adapt_state.step_size, state.accept_prob, state.energy,
                         -state.potential_energy)
                return state, stats

            _, trace = jax.lax.scan(step, state, None, length=tune + draws)
            return jax.tree_util.tree_map(lambda a: a[tune:], trace)

        # chains one after the other: a vectorised NUTS step costs the longest tree of
        # the chains, and vectorising the tree's while loop is slow to trace
        z, *stats = jax.lax.map(lambda a: chain(*a), (keys, v0))
        derived = jax.lax.map(lambda zc: jax.lax.map(lambda v: derive(v, data), zc), z)
        return z, derived, stats

    devices = _devices(chains)
    if devices == 1:
        return jax.jit(run), 1
    # the chains in `devices` groups, one group per device, in parallel
    return jax.pmap(run, in_axes=(0, 0, None)), devices


def sample(x: ArrayLike, y: ArrayLike, prior: StructuredPrior, whiten: Any, *, draws: int,
           tune: int, chains: int, random_seed: int | None, target_accept: float,
           max_tree_depth: int = 10) -> dict[str, dict[str, Array]]:
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
        Kept draws and warm-up steps per chain; chains (vectorised).
    random_seed : int or None
        Seeds the chains' starting points and NUTS (``None``: fresh entropy).
    target_accept : float
        Step-size adaptation target.
    max_tree_depth : int, default=10
        NUTS' largest tree depth (at most ``2**max_tree_depth`` leapfrog steps).

    Returns
    -------
    groups : dict
        ``{"posterior": {"s", "tau", "W", "b", "theta"}, "sample_stats": {...}}``,
        arrays with leading axes ``(chain, draw)`` (sample stats :data:`STATS`).
    """
    from bayescal.bayes.models import CentredWhitening

    jax = import_jax()
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.asarray(y)
    k = x.shape[1]
    data = _data(x, y, row_bucket(x.shape[0]))
    dim = n_params(prior, k)
    if isinstance(whiten, CentredWhitening):
        kind = "centred"
        data |= {"loc": np.asarray(whiten.loc, dtype=np.float64),
                 "chol": np.asarray(whiten.chol, dtype=np.float64)}
    else:
        kind = "conditional"
        data |= {"hyper_loc": np.asarray(whiten.hyper_loc, dtype=np.float64),
                 "fisher": np.asarray(whiten.fisher, dtype=np.float64),
                 "grad": np.asarray(whiten.grad, dtype=np.float64),
                 "r_star": np.asarray(whiten.r_star, dtype=np.float64)}
    rng = np.random.default_rng(random_seed)
    # each chain starts near the mode (v = 0), jittered as PyMC's "jitter+adapt_diag"
    v0 = rng.uniform(-1.0, 1.0, size=(chains, dim)) * 0.5
    keys = jax.random.split(jax.random.key(int(rng.integers(2**31 - 1))), chains)
    program, devices = _program(prior, k, kind, int(tune), int(draws), int(chains),
                                float(target_accept), int(max_tree_depth))
    if devices > 1:
        keys = keys.reshape(devices, chains // devices)
        v0 = v0.reshape(devices, chains // devices, dim)
    z, derived, stats = program(keys, v0, data)

    def merged(a: Any) -> Any:
        """(devices, chains per device, draw, ...) -> (chain, draw, ...)."""
        a = np.asarray(a)
        return a.reshape(chains, *a.shape[2:]) if devices > 1 else a

    post = {name: merged(derived[name]).astype(np.float64)
            for name in ("s", "tau", "W", "b", "theta")}
    diverging, n_steps, step_size, accept, energy, lp = (merged(a) for a in stats)
    sample_stats = {
        "diverging": diverging.astype(bool),
        "n_steps": n_steps.astype(np.int64),
        "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1,
        "step_size": np.asarray(step_size, dtype=np.float64),
        "acceptance_rate": np.asarray(accept, dtype=np.float64),
        "energy": np.asarray(energy, dtype=np.float64),
        "lp": np.asarray(lp, dtype=np.float64),
    }
    del z
    return {"posterior": post, "sample_stats": sample_stats}
