"""Where one gradient of the compiled sampler's likelihood goes, on XLA's CPU back end.

Run (the result is quoted in docs/benchmarks.md, section "Compiled sampler")::

    python benchmarks/xla_likelihood.py --n 5120 --k 10

Times, per call inside one jitted ``lax.fori_loop`` of ``--calls`` calls on one
CPU device (as a chain runs), the multinomial log-likelihood's value and
gradient in float64 and float32 (features stored rows x classes, as the
sampler does, or classes x rows), and its pieces: the ``n x k x k`` product,
``exp`` over the ``n x k`` logits, and ``logsumexp`` over the classes in the
row-major (``n x k``) and class-major (``k x n``) layouts. Random features;
the timings do not depend on the values.
"""

from __future__ import annotations

import argparse
import functools
import os
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5120, help="rows (a row bucket of the sampler)")
    ap.add_argument("--k", type=int, default=10, help="classes")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    n, k, calls = args.n, args.k, args.calls
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, k))
    Y = np.eye(k)[rng.integers(0, k, n)]
    W = rng.normal(size=(k, k)) * 0.3

    def per_call(fn, dtype, major="rows"):
        """Seconds per call of ``fn(X, W)`` (a scalar) in a loop that XLA cannot hoist."""
        Xd = jnp.asarray(X.T if major == "classes" else X, dtype=dtype)
        Wd = jnp.asarray(W, dtype=dtype)

        def body(i, c):
            return c + fn(Xd, Wd * (1 + c * 1e-12).astype(dtype)).astype(jnp.float64)

        loop = jax.jit(lambda: jax.lax.fori_loop(0, calls, body, jnp.float64(0.0)))
        jax.block_until_ready(loop())  # compile
        t = time.perf_counter()
        jax.block_until_ready(loop())
        return (time.perf_counter() - t) / calls

    def loglik(X, W, dtype):
        Z = X @ W.T
        return jnp.sum(jnp.sum(Z * jnp.asarray(Y, dtype), axis=1) - jax.nn.logsumexp(Z, axis=1))

    def loglik_classes(XT, W, dtype):  # the same on the transposed (k x n) features
        Z = W @ XT
        return jnp.sum(jnp.sum(Z * jnp.asarray(Y.T, dtype), axis=0) - jax.nn.logsumexp(Z, axis=0))

    rows = []
    for dtype in (jnp.float64, jnp.float32):
        name = jnp.dtype(dtype).name
        grad = jax.value_and_grad(lambda W, X, d=dtype: loglik(X, W, d))
        grad_t = jax.value_and_grad(lambda W, XT, d=dtype: loglik_classes(XT, W, d))

        def both(X, W, g=grad):
            value, gradient = g(W, X)
            return value + jnp.sum(gradient)

        rows += [
            (f"value and gradient, rows x classes, {name}", per_call(both, dtype)),
            (f"value and gradient, classes x rows, {name}",
             per_call(functools.partial(both, g=grad_t), dtype, "classes")),
            (f"X @ W' ({n} x {k} x {k}), {name}", per_call(lambda X, W: jnp.sum(X @ W.T), dtype)),
            (f"exp of {n} x {k}, {name}", per_call(lambda X, W: jnp.sum(jnp.exp(X * W[0, 0])),
                                                   dtype)),
            (f"logsumexp over classes, rows x classes, {name}",
             per_call(lambda X, W: jnp.sum(jax.nn.logsumexp(X @ W.T, axis=1)), dtype)),
            (f"logsumexp over classes, classes x rows, {name}",
             per_call(lambda X, W: jnp.sum(jax.nn.logsumexp(W @ X, axis=0)), dtype, "classes")),
        ]
    print(f"n = {n}, k = {k}, {calls} calls in one jitted loop, one CPU device "
          f"(JAX {jax.__version__})")
    for label, sec in rows:
        print(f"  {label:52s} {sec * 1e6:8.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
