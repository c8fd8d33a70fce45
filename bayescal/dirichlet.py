r"""The Dirichlet distribution: log-density, sufficient statistics and maximum likelihood.

Pure functions on float64 arrays, no estimator state. The generative
calibrator (:class:`bayescal.GenerativeDirichletCalibrator`) fits one
Dirichlet per class with them.

Sufficient statistics
---------------------
For samples :math:`q_1, \dots, q_n` of :math:`\mathrm{Dir}(\alpha)` the mean
log-likelihood is

.. math::

    \ell(\alpha) = \ln\Gamma(\alpha_0) - \sum_i \ln\Gamma(\alpha_i)
    + \sum_i (\alpha_i - 1)\, s_i,\qquad
    \alpha_0 = \sum_i \alpha_i,\quad s = \frac1n \sum_{t} x_t,

with :math:`x = \max(\ln q, \ln\epsilon)` the floored log-features of
:func:`bayescal.maps.log_features`. So ``n`` and ``s`` are all the fit needs:
the data are read once (in chunks, or block by block on a Dask cluster) and
the solve costs :math:`O(k)` per Newton step, whatever ``n`` is.

Maximum likelihood
------------------
The gradient and Hessian are

.. math::

    g = \psi(\alpha_0)\mathbf 1 - \psi(\alpha) + s,\qquad
    H = \psi'(\alpha_0)\,\mathbf 1\mathbf 1^\top - \mathrm{diag}(\psi'(\alpha)),

a diagonal plus a rank-one matrix, negative definite, so :math:`\ell` is
concave and the Newton direction :math:`d = -H^{-1} g` follows from the
Sherman-Morrison formula in :math:`O(k)` (Minka, 2000):

.. math::

    d_i = \frac{g_i + \beta}{\psi'(\alpha_i)},\qquad
    \beta = \frac{\psi'(\alpha_0) \sum_j g_j / \psi'(\alpha_j)}
                 {1 - \psi'(\alpha_0) \sum_j 1/\psi'(\alpha_j)}.

The step is halved until :math:`\alpha` stays positive and :math:`\ell` does not
decrease (Armijo); if that fails, Minka's fixed point
:math:`\alpha_i \leftarrow \psi^{-1}(\psi(\alpha_0) + s_i)` (which always
increases :math:`\ell` and keeps :math:`\alpha > 0`) is used for that step.

The start is Minka's closed-form approximation from Stirling's formula: mean
:math:`m = \mathrm{softmax}(s)` and precision
:math:`\alpha_0 = (k-1) / (2\gamma)` with the Jensen gap
:math:`\gamma = -\ln\sum_i e^{s_i}`, followed by one fixed-point step (which
corrects the small concentrations that Stirling's formula gets wrong).

A finite maximiser exists iff :math:`n \ge 2` and :math:`\gamma > 0` (the
samples are not all equal); a coordinate whose mean log-feature sits at the
floor :math:`\ln\epsilon` has its maximiser at :math:`\alpha_i = 0`. Such
statistics raise a :class:`ValueError` unless a prior is used.

Prior (MAP)
-----------
The Dirichlet is an exponential family in :math:`\alpha` with sufficient
statistic :math:`\ln q` and log-partition
:math:`A(\alpha) = \sum_i\ln\Gamma(\alpha_i) - \ln\Gamma(\alpha_0)`. Its
conjugate prior with ``nu`` pseudo-samples and mean statistic :math:`\eta`,

.. math:: p(\alpha) \propto \exp\{\nu\,[\alpha^\top \eta - A(\alpha)]\},

gives the posterior :math:`\exp\{(n+\nu)[\alpha^\top \tilde s - A(\alpha)]\}`
with :math:`\tilde s = (n s + \nu\eta)/(n + \nu)`: the MAP is exactly the
maximum-likelihood fit of the pooled statistics :math:`(n+\nu, \tilde s)`.
:class:`DirichletPrior` takes :math:`\eta = E_{\mathrm{Dir}(\beta)}[\ln q] =
\psi(\beta) - \psi(\beta_0)`, the statistic that ``nu`` samples of a
reference :math:`\mathrm{Dir}(\beta)` have on average; with ``n = 0`` the MAP
is :math:`\beta` itself. The pooled statistics always have a positive Jensen
gap and no coordinate at the floor, so every class gets a finite fit.

References
----------
.. [1] T. P. Minka. "Estimating a Dirichlet distribution". Technical report,
   MIT, 2000 (revised 2012).
.. [2] M. Kull et al. "Beyond temperature scaling: Obtaining well-calibrated
   multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.special import digamma, gammaln

from bayescal._validation import (
    EPS,
    check_concentration,
    check_dirichlet_statistics,
    check_eps,
    check_labels,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_sample_weight,
    check_scores,
)
from bayescal.maps import log_features

__all__ = [
    "DirichletFit",
    "DirichletPrior",
    "SufficientStatistics",
    "dirichlet_loglik",
    "dirichlet_loglik_grad",
    "dirichlet_logpdf",
    "fit_dirgen",
    "fit_dirichlet",
    "inverse_digamma",
    "sufficient_statistics",
]

Array = NDArray[np.float64]

#: Rows of scores turned into features at a time (about 2 MB of float64 at
#: k = 100): keeps memory bounded and the working set in cache.
CHUNK_ELEMENTS = 1 << 18


# ---------------------------------------------------------------------------
# density
# ---------------------------------------------------------------------------
def dirichlet_logpdf(
    q: ArrayLike, alpha: ArrayLike, *, kind: str = "probs", eps: float = EPS
) -> Array:
    r"""Dirichlet log-density of each row of ``q``, on the floored log-features.

    .. math::

        \ln f(q;\alpha) = \ln\Gamma(\alpha_0) - \sum_i \ln\Gamma(\alpha_i)
        + \sum_i (\alpha_i - 1)\, x_i,\qquad x = \max(\ln q, \ln\epsilon)

    (density with respect to the Lebesgue measure on the first ``k - 1``
    coordinates, as :func:`scipy.stats.dirichlet.logpdf`; it agrees with it
    wherever every ``q_i > eps``).

    Parameters
    ----------
    q : array-like of shape (n_samples, k)
        Points of the simplex (or logits with ``kind="logits"``).
    alpha : array-like of shape (k,) or (m, k)
        One concentration vector, or ``m`` of them (e.g. one per class).
    kind : {"probs", "logits"}, default="probs"
    eps : float, default=EPS
        Floor of :func:`bayescal.maps.log_features`.

    Returns
    -------
    logpdf : ndarray of shape (n_samples,) or (n_samples, m)

    Examples
    --------
    >>> import numpy as np
    >>> float(dirichlet_logpdf([[0.2, 0.3, 0.5]], [1.0, 1.0, 1.0])[0])  # ln Gamma(3)
    0.6931471805599453
    """
    x = log_features(q, kind=kind, eps=eps)
    a = check_concentration(alpha, n_classes=x.shape[1])
    log_norm = gammaln(a.sum(axis=-1)) - gammaln(a).sum(axis=-1)
    return x @ (a - 1.0).T + log_norm


def dirichlet_loglik(alpha: ArrayLike, mean_log: ArrayLike) -> float:
    r"""Mean log-likelihood :math:`\ell(\alpha)` from the statistic ``s = mean_log``."""
    a = np.asarray(alpha, dtype=np.float64)
    s = np.asarray(mean_log, dtype=np.float64)
    return float(gammaln(a.sum()) - gammaln(a).sum() + (a - 1.0) @ s)


def dirichlet_loglik_grad(alpha: ArrayLike, mean_log: ArrayLike) -> Array:
    r"""Gradient :math:`\psi(\alpha_0) - \psi(\alpha) + s` of :func:`dirichlet_loglik`."""
    a = np.asarray(alpha, dtype=np.float64)
    return digamma(a.sum()) - digamma(a) + np.asarray(mean_log, dtype=np.float64)


def _trigamma(x: ArrayLike) -> Array:
    r"""Trigamma :math:`\psi'(x)` for ``x > 0``, vectorised (about 50x faster than
    ``scipy.special.polygamma(1, x)``, which goes through the Hurwitz zeta).

    Recurrence :math:`\psi'(x) = \psi'(x+1) + 1/x^2` up to ``x >= 10``, then the
    asymptotic series :math:`1/x + 1/(2x^2) + \sum_k B_{2k} / x^{2k+1}` through
    :math:`B_{12}` (truncation error below :math:`1.2/x^{15}`, relative 1e-14).
    """
    x = np.array(x, dtype=np.float64, copy=True)
    acc = np.zeros_like(x)
    for _ in range(10):
        low = x < 10.0
        if not low.any():
            break
        acc += low / (x * x)  # masks as 0/1 factors: no fancy indexing
        x += low
    r = 1.0 / x
    r2 = r * r
    b = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730)  # B_2 .. B_12
    series = b[5]
    for coef in b[4::-1]:
        series = coef + r2 * series
    return acc + r + 0.5 * r2 + r * r2 * series


def inverse_digamma(y: ArrayLike, *, n_newton: int = 5) -> Array:
    r"""Solve :math:`\psi(x) = y` for ``x > 0`` (elementwise).

    Minka's start :math:`x = e^y + 1/2` for :math:`y \ge -2.22`, else
    :math:`x = -1/(y - \psi(1))`, then Newton steps; five give full float64
    accuracy.

    Examples
    --------
    >>> from scipy.special import digamma
    >>> float(inverse_digamma(digamma(0.3)).round(12))
    0.3
    """
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):  # both branches are evaluated
        x = np.where(y >= -2.22, np.exp(y) + 0.5, -1.0 / (y - digamma(1.0)))
    for _ in range(n_newton):
        x = x - (digamma(x) - y) / _trigamma(x)
    return x


# ---------------------------------------------------------------------------
# sufficient statistics
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SufficientStatistics:
    """Per-class sample counts and sums of log-features (they add over chunks).

    Attributes
    ----------
    counts : ndarray of shape (k,)
        ``n_j``, the number of samples of class ``j``.
    sums : ndarray of shape (k, k)
        Row ``j`` is the sum of the floored log-features of class ``j``.
    """

    counts: Array
    sums: Array

    @property
    def n_classes(self) -> int:
        return int(self.counts.shape[0])

    @property
    def mean_log(self) -> Array:
        """Row ``j``: the mean log-features ``s_j`` of class ``j`` (NaN if ``n_j = 0``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.counts[:, None]

    def __add__(self, other: SufficientStatistics) -> SufficientStatistics:
        if not isinstance(other, SufficientStatistics):
            return NotImplemented
        if other.counts.shape != self.counts.shape:
            raise ValueError(
                f"cannot add statistics of {other.n_classes} classes to {self.n_classes}"
            )
        return SufficientStatistics(self.counts + other.counts, self.sums + other.sums)

    @classmethod
    def zeros(cls, n_classes: int) -> SufficientStatistics:
        return cls(np.zeros(n_classes), np.zeros((n_classes, n_classes)))

    @classmethod
    def from_features(
        cls, x: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> SufficientStatistics:
        """Statistics of precomputed features ``x`` (n, k) with valid labels ``y`` (n,).

        One sparse product ``onehot(y).T @ x``: :math:`O(nk)` work. With
        (validated) ``sample_weight`` every sample counts with its weight:
        ``counts[j] = sum_{y_i = j} w_i`` and ``sums[j] = sum_{y_i = j} w_i x_i``
        (frequency weights: an integer weight equals repeating the sample).
        """
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.intp)
        n, k = x.shape
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        onehot_t = sp.csr_matrix((w, (y, np.arange(n))), shape=(k, n))
        return cls(np.bincount(y, weights=w, minlength=k).astype(np.float64), onehot_t @ x)


def _is_dask_array(obj: Any) -> bool:
    """True for a ``dask.array.Array`` (checked without importing dask)."""
    return type(obj).__module__.startswith("dask.array") and hasattr(obj, "chunks")


def _dask_sufficient_statistics(
    scores: Any, y: Any, *, kind: str, eps: float
) -> SufficientStatistics:
    """Statistics of a Dask array: per-block statistics summed in one reduction.

    Each row block is validated and turned into ``(counts, sums)`` where it
    lives; only the ``k x (k + 1)`` results travel, and one ``compute`` runs the
    whole graph (no block of scores is gathered on the client).
    """
    return _dask_reduce(scores, y, kind=kind, eps=eps)[0]


def _dask_reduce(
    scores: Any,
    y: Any,
    *,
    kind: str,
    eps: float,
    feature_terms: Any = None,
    terms_shape: tuple[int, int] = (0, 0),
) -> tuple[SufficientStatistics, Array | None]:
    """:func:`_dask_sufficient_statistics`, and optionally a second sum over the blocks.

    ``feature_terms`` maps a block's validated features ``x`` (rows, k) to an
    array of shape ``terms_shape``; its sum over the blocks is returned with
    the statistics, from the same single ``dask.compute`` (``None`` without it).
    """
    import dask.array as da  # optional dependency, imported only for Dask input

    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(
            f"scores must be 2-D of shape (n_samples, n_classes) with at least 2 classes; "
            f"got shape {scores.shape}"
        )
    n, k = scores.shape
    scores = scores.rechunk({1: -1})
    labels = da.asarray(y) if not _is_dask_array(y) else y
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"y must be 1-D with one label per score row ({n}); got shape {labels.shape}"
        )
    labels = labels.rechunk((scores.chunks[0],))

    def block_stats(s: NDArray, yb: NDArray, block_info: Any = None) -> NDArray:
        lo, hi = block_info[0]["array-location"][0] if block_info else (0, s.shape[0])
        try:
            x = log_features(s, kind=kind, eps=eps)
            yy = check_labels(yb[:, 0], n_samples=s.shape[0], n_classes=k)
        except ValueError as exc:
            raise ValueError(f"in rows {lo}..{hi - 1} of the dask array: {exc}") from exc
        part = SufficientStatistics.from_features(x, yy)
        return np.concatenate([part.sums, part.counts[:, None]], axis=1)[None]

    per_block = da.map_blocks(
        block_stats,
        scores,
        labels[:, None],
        chunks=((1,) * scores.numblocks[0], (k,), (k + 1,)),
        new_axis=2,
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    if feature_terms is None:
        total, terms = per_block.sum(axis=0).compute(), None
    else:
        import dask

        def block_terms(s: NDArray, block_info: Any = None) -> NDArray:
            lo, hi = block_info[0]["array-location"][0] if block_info else (0, s.shape[0])
            try:
                x = log_features(s, kind=kind, eps=eps)
            except ValueError as exc:
                raise ValueError(f"in rows {lo}..{hi - 1} of the dask array: {exc}") from exc
            return np.asarray(feature_terms(x), dtype=np.float64)[None]

        per_block_terms = da.map_blocks(
            block_terms,
            scores,
            chunks=((1,) * scores.numblocks[0], (terms_shape[0],), (terms_shape[1],)),
            new_axis=2,
            dtype=np.float64,
            meta=np.empty((0, 0, 0), dtype=np.float64),
        )
        total, terms = dask.compute(per_block.sum(axis=0), per_block_terms.sum(axis=0))
    return SufficientStatistics(total[:, k].copy(), total[:, :k].copy()), terms


def sufficient_statistics(
    scores: ArrayLike,
    y: ArrayLike,
    *,
    kind: str = "probs",
    eps: float = EPS,
    chunk_rows: int | None = None,
    sample_weight: ArrayLike | None = None,
) -> SufficientStatistics:
    r"""Class counts and sums of floored log-features, in one pass over ``scores``.

    The features :math:`x = \max(\ln q, \ln\epsilon)` (or ``log_softmax(z)``
    floored the same way) are built ``chunk_rows`` rows at a time, so the
    memory used on top of ``scores`` is one chunk. A ``dask.array.Array`` is
    reduced block by block where it lives (one ``compute`` of the
    ``k x (k + 1)`` result; dask is imported only then).

    Parameters
    ----------
    scores : array-like or dask array of shape (n_samples, k)
        Probabilities or logits (as ``kind`` says); column ``j`` is class ``j``.
    y : array-like or dask array of shape (n_samples,)
        Integer labels ``0 .. k-1``.
    kind : {"probs", "logits"}, default="probs"
    eps : float, default=EPS
    chunk_rows : int, optional
        Rows per chunk; default about ``2**18 / k`` (numpy input only: a dask
        array keeps its own row blocks).
    sample_weight : array-like of shape (n_samples,), optional
        Frequency weights of the samples (numpy input only; see
        :meth:`SufficientStatistics.from_features`).

    Returns
    -------
    SufficientStatistics
    """
    check_option(kind, "kind", ("probs", "logits"))
    eps = check_eps(eps)
    if _is_dask_array(scores):
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported with dask arrays of scores")
        return _dask_sufficient_statistics(scores, y, kind=kind, eps=eps)
    if hasattr(scores, "tocsr") or hasattr(scores, "todense"):
        check_scores(scores, kind=kind)  # raises: sparse input is not supported
    s = np.asarray(scores)
    if s.dtype == object or s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 2:
        check_scores(scores, kind=kind)  # raises, worded by the shared check
    n, k = s.shape
    labels = check_labels(y, n_samples=n, n_classes=k)
    weights = None if sample_weight is None else check_sample_weight(sample_weight, n_samples=n)
    step = (
        max(1, CHUNK_ELEMENTS // max(k, 1))
        if chunk_rows is None
        else check_positive_int(chunk_rows, "chunk_rows")
    )
    stats = SufficientStatistics.zeros(k)
    for start in range(0, n, step):
        try:
            x = log_features(s[start : start + step], kind=kind, eps=eps)
        except ValueError:
            # Re-check the whole array so the message gives the global row.
            check_scores(s, kind=kind)
            raise
        w = None if weights is None else weights[start : start + step]
        stats = stats + SufficientStatistics.from_features(x, labels[start : start + step], w)
    return stats


# ---------------------------------------------------------------------------
# maximum likelihood
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class DirichletFit:
    """Result of :func:`fit_dirichlet`.

    Attributes
    ----------
    alpha : ndarray of shape (k,)
        The maximiser (MAP with a prior).
    loglik : float
        Mean log-likelihood :math:`\\ell(\\alpha)` of the (pooled) statistics.
    grad_norm : float
        Largest absolute gradient entry at ``alpha``.
    n_iter : int
        Newton iterations taken.
    converged : bool
        Whether ``grad_norm <= tol``.
    message : str
        How the iteration ended.
    """

    alpha: Array
    loglik: float
    grad_norm: float
    n_iter: int
    converged: bool
    message: str


def _rows_loglik(alpha: Array, s: Array) -> tuple[Array, Array]:
    """Row-wise :func:`dirichlet_loglik` and the magnitude of its terms (rounding scale)."""
    lg0 = gammaln(alpha.sum(axis=1))
    lg = gammaln(alpha)
    lin = (alpha - 1.0) * s
    f = lg0 - lg.sum(axis=1) + lin.sum(axis=1)
    scale = np.abs(lg0) + np.abs(lg).sum(axis=1) + np.abs(lin).sum(axis=1) + 1.0
    return f, scale


def _initial_alpha(s: Array) -> Array:
    """Minka's Stirling start (precision (k-1)/(2 gap)) refined by one fixed-point step."""
    k = s.shape[1]
    gap = -np.logaddexp.reduce(s, axis=1)
    a0 = (k - 1) / (2.0 * gap)
    return inverse_digamma(digamma(a0)[:, None] + s)


def _newton_direction(alpha: Array, g: Array) -> Array:
    """Rows of ``-H^{-1} g``, ``H = psi'(a0) 11^T - diag(psi'(alpha))`` (Sherman-Morrison)."""
    inv = 1.0 / _trigamma(alpha)
    z = _trigamma(alpha.sum(axis=1))
    beta = z * np.einsum("ij,ij->i", g, inv) / (1.0 - z * inv.sum(axis=1))
    return (g + beta[:, None]) * inv


def _newton(
    s: Array, alpha: Array, *, max_iter: int, tol: float
) -> tuple[Array, Array, Array, NDArray[np.intp], list[str]]:
    r"""Newton ascent of every row's :math:`\ell` at once (rows are independent problems).

    Returns ``alpha``, ``loglik``, ``grad_norm``, ``n_iter`` (per row) and messages.
    Each iteration is a handful of vectorised operations on the ``(m, k)`` arrays.
    """
    m = s.shape[0]
    f, scale = _rows_loglik(alpha, s)
    g = digamma(alpha.sum(axis=1))[:, None] - digamma(alpha) + s
    n_iter = np.zeros(m, dtype=np.intp)
    messages = [""] * m
    active = np.ones(m, dtype=bool)
    polished = np.zeros(m, dtype=bool)
    while True:
        gnorm = np.max(np.abs(g), axis=1)
        small = active & (gnorm <= tol)
        # One more Newton step once the gradient is below tol: at large
        # concentrations the likelihood is so flat that a gradient of 1e-10
        # still leaves alpha off by ~1e-5 relative, and one quadratically
        # convergent step removes that for the price of one iteration.
        done = small & (polished | (n_iter >= max_iter))
        polished |= small
        for i in np.flatnonzero(done):
            messages[i] = "gradient below tol"
        capped = active & ~done & (n_iter >= max_iter)
        for i in np.flatnonzero(capped):
            messages[i] = f"reached max_iter={max_iter}"
        active &= ~(done | capped)
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        n_iter[rows] += 1
        a, sr, fr, gr = alpha[rows], s[rows], f[rows], g[rows]
        d = _newton_direction(a, gr)
        slope = np.einsum("ij,ij->i", gr, d)  # > 0: H is negative definite
        # ... in exact arithmetic; at huge concentrations the Sherman-Morrison
        # denominator cancels, so a row whose direction is not an ascent (or
        # not finite) goes straight to the fixed-point step below.
        usable = np.isfinite(slope) & (slope > 0)
        # Armijo with a rounding allowance: l is a difference of terms as large
        # as lnGamma(alpha_0), so near the optimum its computed increase is
        # below their float resolution; such steps are still taken.
        slack = 16.0 * np.finfo(np.float64).eps * scale[rows]
        t = np.ones(rows.size)
        new_a, new_f = a.copy(), fr.copy()
        pending = usable.copy()
        for _ in range(40):
            if not pending.any():
                break
            cand = a + t[:, None] * d
            positive = pending & np.all(cand > 0, axis=1)
            cand = np.where(positive[:, None], cand, a)
            f_cand, _ = _rows_loglik(cand, sr)
            ok = positive & (f_cand >= fr + 1e-4 * t * slope - slack)
            new_a[ok], new_f[ok] = cand[ok], f_cand[ok]
            pending &= ~ok
            t = np.where(pending, 0.5 * t, t)
        pending |= ~usable
        if pending.any():
            # Minka's fixed point: always an ascent, always positive.
            fp = inverse_digamma(digamma(a[pending].sum(axis=1))[:, None] + sr[pending])
            f_fp, _ = _rows_loglik(fp, sr[pending])
            better = f_fp > fr[pending]
            idx = np.flatnonzero(pending)
            new_a[idx[better]], new_f[idx[better]] = fp[better], f_fp[better]
            for i in rows[idx[~better]]:
                messages[i] = "no further increase possible at float64 resolution"
            active[rows[idx[~better]]] = False
        alpha[rows], f[rows] = new_a, new_f
        _, scale[rows] = _rows_loglik(new_a, sr)
        g[rows] = digamma(new_a.sum(axis=1))[:, None] - digamma(new_a) + sr
    gnorm = np.max(np.abs(g), axis=1)
    for i in np.flatnonzero(gnorm <= tol):  # e.g. a rejected polishing step
        messages[i] = "gradient below tol"
    return alpha, f, gnorm, n_iter, messages


def _fit_rows(
    s: Array, *, max_iter: int, tol: float, init: Array | None = None
) -> list[DirichletFit]:
    alpha = _initial_alpha(s) if init is None else init.copy()
    alpha, f, gnorm, n_iter, messages = _newton(s, alpha, max_iter=max_iter, tol=tol)
    return [
        DirichletFit(
            alpha=alpha[i],
            loglik=float(f[i]),
            grad_norm=float(gnorm[i]),
            n_iter=int(n_iter[i]),
            converged=bool(gnorm[i] <= tol),
            message=messages[i],
        )
        for i in range(s.shape[0])
    ]


def fit_dirichlet(
    count: float,
    mean_log: ArrayLike,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
    log_floor: float | None = None,
    name: str = "the data",
    init: ArrayLike | None = None,
    min_count: float = 2.0,
) -> DirichletFit:
    r"""Maximum-likelihood Dirichlet concentration from ``(n, mean log q)``.

    Maximises :math:`\ell(\alpha)` (module docstring) by Newton's method on the
    diagonal-plus-rank-one Hessian, :math:`O(k)` per iteration, with step
    halving that keeps :math:`\alpha > 0` and a fixed-point fallback.
    (:func:`fit_dirgen` runs the same iteration on all classes at once.)

    Parameters
    ----------
    count : float
        Number of samples ``n`` (>= 2).
    mean_log : array-like of shape (k,)
        Mean floored log-features ``s`` of the samples.
    max_iter : int, default=100
        Maximum Newton iterations.
    tol : float, default=1e-10
        Stop when :math:`\max_i |g_i| \le` ``tol``.
    log_floor : float, optional
        ``ln eps`` of the features; coordinates whose mean sits there raise.
    name : str
        Used in error messages (e.g. ``"class 2"``).
    init : array-like of shape (k,), optional
        Starting point (default: Minka's closed-form start).
    min_count : float, default=2.0
        Smallest accepted ``count`` (pooled statistics of a prior may hold
        fractional pseudo-samples: pass a smaller positive value).

    Returns
    -------
    DirichletFit

    Raises
    ------
    ValueError
        If no finite maximiser exists: fewer than two samples, all samples
        equal (constant features), or a coordinate at the floor (see
        :func:`bayescal._validation.check_dirichlet_statistics`).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import digamma
    >>> alpha = np.array([0.5, 2.0, 3.0])
    >>> s = digamma(alpha) - digamma(alpha.sum())  # E[ln q] under Dir(alpha)
    >>> fit = fit_dirichlet(1000, s)
    >>> fit.converged, np.allclose(fit.alpha, alpha)
    (True, True)
    """
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_nonnegative_float(tol, "tol", strict=True)
    count, s = check_dirichlet_statistics(
        count, mean_log, log_floor=log_floor, name=name, min_count=min_count
    )
    start = None
    if init is not None:
        start = check_concentration(init, n_classes=s.shape[0], name="init")[None, :]
    return _fit_rows(s[None, :], max_iter=max_iter, tol=tol, init=start)[0]


@dataclass(frozen=True, eq=False)
class DirichletPrior:
    r"""Conjugate prior on each class's concentration: ``strength`` pseudo-samples.

    Every class receives ``strength`` pseudo-samples whose mean log-features
    equal those expected under a reference :math:`\mathrm{Dir}(\beta_j)`,
    :math:`\eta_j = \psi(\beta_j) - \psi(\beta_{j,0})`; the MAP of
    :math:`\alpha_j` is then the maximum-likelihood fit of the pooled
    statistics (module docstring), and the class priors are the MAP under a
    :math:`\mathrm{Dirichlet}(\nu + 1)` prior,
    :math:`\pi_j = (n_j + \nu) / (n + k\nu)`.

    Parameters
    ----------
    strength : float, default=1.0
        ``nu > 0``, the number of pseudo-samples per class.
    center : {"identity", "uniform"} or array-like of shape (k, k), default="identity"
        The reference concentrations :math:`\beta` (row ``j`` for class ``j``).
        ``"identity"``: :math:`\beta_j = \mathbf 1 + e_j`, the DirGen model whose
        calibration map (with equal class priors) is the identity, so the
        prior pulls toward leaving the classifier unchanged. ``"uniform"``:
        :math:`\beta_j = \mathbf 1`, which pulls every class toward the same
        flat density (the map toward the class frequencies).
    """

    strength: float = 1.0
    center: Any = "identity"

    def concentration(self, n_classes: int) -> Array:
        """The reference concentrations :math:`\\beta`, shape (k, k)."""
        if isinstance(self.center, str):
            check_option(self.center, "center", ("identity", "uniform"))
            beta = np.ones((n_classes, n_classes))
            if self.center == "identity":
                beta += np.eye(n_classes)
            return beta
        beta = check_concentration(self.center, n_classes=n_classes, name="prior center")
        if beta.shape != (n_classes, n_classes):
            raise ValueError(
                f"prior center must have shape ({n_classes}, {n_classes}); got {beta.shape}"
            )
        return beta

    def pseudo_statistics(self, n_classes: int) -> SufficientStatistics:
        """The pseudo-samples as :class:`SufficientStatistics` (to add to the data's)."""
        nu = check_nonnegative_float(self.strength, "prior strength", strict=True)
        beta = self.concentration(n_classes)
        eta = digamma(beta) - digamma(beta.sum(axis=1, keepdims=True))
        return SufficientStatistics(np.full(n_classes, nu), nu * eta)


def as_prior(prior: Any) -> DirichletPrior | None:
    """Read the ``prior`` parameter: None, a positive number (strength) or a DirichletPrior."""
    if prior is None or isinstance(prior, DirichletPrior):
        return prior
    if isinstance(prior, int | float | np.integer | np.floating) and not isinstance(prior, bool):
        return DirichletPrior(strength=check_nonnegative_float(float(prior), "prior", strict=True))
    raise ValueError(
        f"prior must be None, a positive number (pseudo-samples per class) or a "
        f"DirichletPrior; got {prior!r}"
    )


def fit_dirgen(
    stats: SufficientStatistics,
    *,
    prior: DirichletPrior | float | None = None,
    eps: float = EPS,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> tuple[Array, Array, list[DirichletFit]]:
    r"""Fit a DirGen model (one Dirichlet per class, class priors) from statistics.

    Without a prior: :math:`\pi_j = n_j / n` and :math:`\alpha_j` the MLE of
    class ``j``. Every class needs at least two distinct samples and no column
    at the floor (else :class:`ValueError` naming the class); in particular a
    class with no sample at all has no estimate (its :math:`\pi_j = 0` would
    make the class impossible). With a prior, the MAP of
    :class:`DirichletPrior` (always finite).

    Parameters
    ----------
    stats : SufficientStatistics
    prior : DirichletPrior, float or None
    eps : float, default=EPS
        Floor used for the features (to detect columns at the floor).
    max_iter, tol
        As in :func:`fit_dirichlet`.

    Returns
    -------
    alpha : ndarray of shape (k, k)
        Row ``j``: the concentration of class ``j``.
    pi : ndarray of shape (k,)
    fits : list of DirichletFit
        One per class.
    """
    prior = as_prior(prior)
    eps = check_eps(eps)
    k = stats.n_classes
    log_floor = None
    if prior is not None:
        stats = stats + prior.pseudo_statistics(k)
    else:
        log_floor = float(np.log(eps))
        empty = np.flatnonzero(stats.counts == 0)
        if empty.size:
            raise ValueError(
                f"class {int(empty[0])} has no samples (classes without samples: "
                f"{empty.tolist()}); with k={k} score columns every class needs data, or "
                "pass prior= (e.g. prior=1.0) to regularise the fit"
            )
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_nonnegative_float(tol, "tol", strict=True)
    min_count = 2.0 if prior is None else float(np.finfo(np.float64).tiny)
    pooled_mean = stats.mean_log
    mean_log = np.stack(
        [
            check_dirichlet_statistics(
                stats.counts[j],
                pooled_mean[j],
                log_floor=log_floor,
                name=f"class {j}",
                min_count=min_count,
            )[1]
            for j in range(k)
        ]
    )
    fits = _fit_rows(mean_log, max_iter=max_iter, tol=tol)
    alpha = np.stack([fit.alpha for fit in fits])
    pi = stats.counts / stats.counts.sum()
    return alpha, pi, fits
