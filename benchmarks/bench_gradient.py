"""Cost of one gradient of the default Bayesian model, compiled by JAX, against k.

What bounds the size of a Bayesian fit (``BayesianDirichletCalibrator``'s
``MAX_COEFS`` and ``MAX_CONDITIONAL_COEFS``): a default fit is on the order of
10^5 gradients of its log density (4 chains x 2000 iterations x the leapfrog
steps of each), so a gradient of 1 ms is a fit of a couple of minutes.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_gradient.py \\
        --cases 10x100,15x100,20x100,30x100,10x5000,20x5000,30x5000

For each ``k x n`` the gradient is timed in the sampled coordinate systems of
:mod:`bayescal.bayes.compiled`: ``conditional`` (a Cholesky factorisation of
a ``(k^2 - 1)``-square matrix per gradient), ``lowrank`` (the same
whitening through a ``(k^2 - 1) x (2k - 1)`` factor and two Choleskys of
``2k - 1``, :func:`~bayescal.bayes.compiled.lowrank_theta`) and ``centred``
(a fixed whitening: one matrix-vector product of that size, no
factorisation); ``--kinds`` adds ``lowrank_f32`` and the like, the same
coordinates with the likelihood's rows in single precision. The
whitening matrices are random stand-ins of the right shape (the cost does not
depend on their values); the rows are padded to the program's bucket as in a
fit. Reported: the median of 5 runs of 200 gradients each, in ms, and the
compilation time of the first call.

``--loop`` times the gradients as the sampler runs them instead: ``--reps``
of them inside one compiled ``jax.lax.fori_loop`` (each step moves the point
a little along its gradient), the data already on the device, so that no
call returns to Python between gradients; it reports the wall and the CPU
milliseconds of a gradient (CPU above wall: XLA spread the loop over more
than one thread). ``--loop --devices 2`` runs the same loop on two of the
sampler's CPU devices at once, from two threads, as the sampler's chains run
(per gradient: the wall time of both loops over ``reps``). Run it under
``taskset -c 0`` to see a gradient's cost on one core::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_gradient.py --loop \\
        --cases 10x100,10x5000 --kinds lowrank_f32,centred_f32
    OPENBLAS_NUM_THREADS=1 taskset -c 0 python benchmarks/bench_gradient.py --loop \\
        --cases 10x100,10x5000 --kinds lowrank_f32,centred_f32
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="10x100,15x100,20x100,30x100,10x5000,20x5000,30x5000")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--loop", action="store_true",
                    help="time --reps gradients inside one compiled loop (wall and CPU ms)")
    ap.add_argument("--devices", type=int, default=1,
                    help="with --loop: run the loop on this many CPU devices at once")
    ap.add_argument("--kinds", default="conditional,lowrank,centred",
                    help="coordinate systems, comma-separated; a suffix _f32 computes the "
                         "likelihood's rows in single precision (compiled._loglik_f32)")
    args = ap.parse_args()

    from bayescal.bayes import BayesianDirichletCalibrator
    from bayescal.bayes.compiled import (
        _data,
        _single_precision_rows,
        _value_and_grad,
        import_jax,
        lowrank_data,
        row_bucket,
    )
    from bayescal.bayes.hierarchical import n_params
    from bayescal.bayes.models import ConditionalWhitening

    jax = import_jax()
    prior = BayesianDirichletCalibrator()._structured_prior()
    n_hyper = 1 + sum(prior.sampled)
    rng = np.random.default_rng(0)
    if args.loop:
        print(f"{args.devices} device(s) at once; {len(os.sched_getaffinity(0))} core(s)")
        print("| k | n | coefficients | coordinates | compile s | ms per gradient (wall) "
              "| CPU ms per gradient |")
        print("|---|---|---|---|---|---|---|")
    else:
        print("| k | n | coefficients | coordinates | compile s | ms per gradient |")
        print("|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        k, n = (int(v) for v in case.split("x"))
        x = np.log(rng.dirichlet(np.ones(k), n))
        y = rng.integers(0, k, n)
        dim = n_params(prior, k)
        coefs = dim - n_hyper
        data = _data(x, y, row_bucket(n))
        for kind in args.kinds.split(","):
            d = dict(data)
            raw = k * (k + 1)  # the Fisher matrix is in the raw (W, b) coordinates
            a = rng.standard_normal((raw, raw))
            whiten = ConditionalWhitening(hyper_loc=np.zeros(n_hyper), fisher=a @ a.T / raw,
                                          grad=np.zeros(raw), r_star=np.zeros(raw))
            base = kind.removesuffix("_f32")
            if base != kind:
                d = _single_precision_rows(d)
            if base == "conditional":
                d.update(fisher=whiten.fisher, grad=whiten.grad, r_star=whiten.r_star,
                         hyper_loc=whiten.hyper_loc)
            elif base == "lowrank":
                d.update(lowrank_data(whiten, prior, k))
            else:
                d.update(loc=np.zeros(dim), chol=np.eye(dim) * 0.1)
            v = np.full(dim, 0.01)
            if args.loop:
                print(_in_a_loop(jax, prior, k, kind, d, v, args.reps, coefs, args.devices),
                      flush=True)
                continue
            fn = _value_and_grad(prior, k, kind)
            t = time.perf_counter()
            jax.block_until_ready(fn(v, d))
            compile_s = time.perf_counter() - t
            runs = []
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(args.reps):
                    out = fn(v, d)
                jax.block_until_ready(out)
                runs.append(1e3 * (time.perf_counter() - t) / args.reps)
            print(f"| {k} | {n} | {coefs} | {kind} | {compile_s:.2f} | "
                  f"{statistics.median(runs):.3f} |", flush=True)


def _in_a_loop(jax, prior, k: int, kind: str, data: dict, v: np.ndarray, reps: int,
               coefs: int, devices: int = 1) -> str:
    """One table row of ``--loop``: ``reps`` gradients in one compiled ``fori_loop``.

    With ``devices > 1`` the loop runs on that many CPU devices at once (one
    thread each); the times are those of all of them together, per ``reps``.
    """
    import threading

    import jax.numpy as jnp

    from bayescal.bayes.compiled import _map_and_density

    f = _map_and_density(kind, prior, k)
    grad = jax.value_and_grad(lambda u, dd: f(u, dd)[0])

    @jax.jit
    def loop(u, dd):
        def body(_, carry):
            u, acc = carry
            value, g = grad(u, dd)
            return u - 1e-6 * g, acc + value
        return jax.lax.fori_loop(0, reps, body, (u, jnp.zeros(())))

    on = jax.devices()[:devices]
    if len(on) < devices:
        raise SystemExit(f"--devices {devices}: JAX has {len(on)} CPU devices")
    args = [(jax.device_put(jnp.asarray(v), dev),
             {key: jax.device_put(jnp.asarray(value), dev) for key, value in data.items()})
            for dev in on]

    def run_all() -> None:
        threads = [threading.Thread(target=lambda a=a: jax.block_until_ready(loop(*a)))
                   for a in args]
        for th in threads:
            th.start()
        for th in threads:
            th.join()

    t = time.perf_counter()
    run_all()
    compile_s = time.perf_counter() - t
    walls, cpus = [], []
    for _ in range(5):
        t, c = time.perf_counter(), time.process_time()
        run_all()
        walls.append(1e3 * (time.perf_counter() - t) / reps)
        cpus.append(1e3 * (time.process_time() - c) / reps)
    n = int(np.sum(data["weights"]))  # the rows, not their padding
    return (f"| {k} | {n} | {coefs} | {kind} | {compile_s:.2f} | "
            f"{statistics.median(walls):.3f} | {statistics.median(cpus):.3f} |")


if __name__ == "__main__":
    main()
