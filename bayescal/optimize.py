r"""Penalised multinomial logistic regression: the one solver of the family.

Every linear member of the Dirichlet family -- temperature scaling, vector
scaling, matrix scaling and Dirichlet calibration -- is the MAP fit of

.. math::

    L(\theta) = \frac{1}{\sum_i w_i} \sum_i w_i\,
        \bigl[-\ln \mathrm{softmax}(W x_i + b)_{y_i}\bigr]
        + \sum_{j,l} P^W_{jl} (W_{jl} - C^W_{jl})^2
        + \sum_j P^b_j (b_j - C^b_j)^2

on features ``x`` (``n x k``, usually :func:`bayescal.maps.log_features`),
with ``W`` and ``b`` functions of the free parameters ``theta`` given by the
*structure* (sample weights ``w_i`` default to 1, so the data term is the mean
log-loss). The penalty (``P`` precisions, ``C`` centres) comes from
:func:`make_penalty`.

Structures and parameter packing (``theta`` is a flat float64 vector):

============  =================  ==========================================
structure     ``theta``          map
============  =================  ==========================================
``"full"``    ``k*k + k``        ``theta[:k*k]`` is ``W`` row-major
                                 (``W[j, i] = theta[j*k + i]``), then ``b``
``"diagonal"`` ``2k``            ``W = diag(theta[:k])``, ``b = theta[k:]``
``"scalar"``  ``1``              ``W = theta[0] * I``, ``b = 0``
============  =================  ==========================================

``"scalar"`` is temperature scaling parametrised by the inverse temperature
``s = 1/T``, in which the loss is convex (it is not convex in ``T``). The
penalty is always evaluated on the implied full ``(W, b)``, so for the
constrained structures it is the restriction of the full penalty (entries held
at zero contribute a constant).

The loss is convex in ``theta``. The solver is Newton's method started at the
identity map (``W = I``, ``b = 0``) with a backtracking (Armijo) line search:

* ``solver="newton"``: the exact Hessian is assembled and factorised
  (Cholesky, with Levenberg damping if it is singular, e.g. an unpenalised full
  ``W``, whose softmax invariances leave ``k + 1`` flat directions). Assembling
  it costs ``O(n m^2)`` time for ``m = len(theta)`` and ``O(chunk * m + m^2)``
  memory: it never forms an ``n x k x k`` array.
* ``solver="newton-cg"``: truncated Newton with exact Hessian-vector products
  (two ``n x k`` by ``k x k`` products each) and a preconditioned
  conjugate-gradient inner solve (block Jacobi, one ``(k+1) x (k+1)`` block
  per class: exact up to ``k = 200``, Kronecker-factored beyond; plus the
  exact inverse on the softmax's ``k + 1`` invariant directions, where only
  the penalty acts), stopped by the Eisenstat-Walker forcing rule or once the
  residual is below half of ``tol``; memory ``O(nk + k^2)`` plus ``O(k^3)`` for
  the block preconditioner. Used for large ``k`` (``k = 1000`` with
  ``n = 10000`` needs about 400 MB beyond the data, but each
  Hessian-vector product then costs seconds).
* ``solver="auto"`` picks ``"newton"`` while ``m <= 600`` for a full ``W``
  (``k <= 24``) and ``m <= 100`` for a diagonal one (``k <= 50``), else
  ``"newton-cg"``.

Convergence is declared when the largest absolute entry of the gradient of
``L`` is at most ``tol`` (default ``1e-8``).

References
----------
.. [1] M. Kull et al. "Beyond temperature scaling: Obtaining well-calibrated
   multiclass probabilities with Dirichlet calibration". NeurIPS 2019.
.. [2] J. Nocedal and S. J. Wright. *Numerical Optimization*, 2nd ed.,
   Springer 2006, chapters 3 and 7 (line search, truncated Newton).
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning

from bayescal._validation import (
    check_features,
    check_labels,
    check_nonnegative_float,
    check_option,
    check_positive_int,
    check_sample_weight,
)

__all__ = [
    "FitResult",
    "QuadraticPenalty",
    "STRUCTURES",
    "dense_hessian",
    "fit_multinomial",
    "log_evidence",
    "make_penalty",
    "multinomial_hessp",
    "multinomial_log_loss",
    "multinomial_objective",
    "pack_params",
    "unpack_params",
]

Array = NDArray[np.float64]

#: The weight structures understood by :func:`fit_multinomial`.
STRUCTURES = ("full", "diagonal", "scalar")

#: ``solver="auto"`` assembles the dense Hessian up to this many parameters
#: (full ``W``; the evidence uses it exactly up to the same size) ...
DENSE_MAX_PARAMS = 600
#: ... and up to this many for a diagonal ``W`` (``k <= 50``), whose
#: Hessian-vector products cost ``O(n k)`` against ``O(n k^2)`` for the dense
#: Hessian (at ``k = 300``, ``n = 5000``: 1.8e9 flops a Hessian).
DIAGONAL_DENSE_MAX_PARAMS = 100

#: Chord steps (reusing the last Hessian factorisation) start once a full
#: Newton step shrank the max-abs gradient by this factor, and continue while
#: each chord step shrinks it by ``CHORD_CONTRACTION``.
CHORD_START = 0.1
CHORD_CONTRACTION = 0.25
#: Dense Newton forms its Hessians in float32 until, with the max-abs gradient
#: at or below this, a full step shrinks it by less than ``CHORD_START``: from
#: there on, float64 (:func:`fit_multinomial`) ...
EXACT_HESSIAN_GMAX = 1e-3
#: ... when the map has at least this many parameters (a full ``W`` from
#: ``k = 7``). Below, the Hessian is cheap beside a gradient pass, and float64
#: keeps two equal problems' fits equal to rounding, not only to ``tol``, where
#: the objective has near-flat directions.
FLOAT32_HESSIAN_MIN_PARAMS = 50

#: Newton-CG uses the exact block-Jacobi preconditioner up to this many classes
#: (built once per fit, or once per ``reuse`` dict), a Kronecker-factored one
#: beyond, which it rebuilds every ``PRECOND_REFRESH`` iterations.
BLOCK_PRECOND_MAX_K = 200
PRECOND_REFRESH = 3

#: Newton-CG's inner solve stops once its residual norm is below this fraction
#: of the fit's ``tol`` (:func:`_cg_direction`).
CG_TOL_FRACTION = 0.5

#: Step-length factor of the backtracking line search.
BACKTRACK = 0.5

#: Rows per chunk when assembling a dense Hessian (bounds the temporary memory).
_CHUNK_ELEMENTS = 2_000_000
#: Largest cached ``n x (k+1)^2`` array of feature products (160 MB).
_XX_MAX_ELEMENTS = 20_000_000
#: Up to this many columns a row-wise maximum is taken column by column
#: (:func:`row_max`): NumPy's ``max(axis=1)`` over a short contiguous axis
#: costs about 0.2 ms per 5000 rows at any small k, the column loop 0.04 ms at k = 10.
_LOOP_MAX_COLUMNS = 32
#: Up to this many columns a row sum is a BLAS matrix-vector product (:func:`row_sum`).
_BLAS_ROW_SUM_MAX = 512
#: Up to this many classes the labels' part of a full ``W``'s gradient is a dense
#: one-hot product, beyond it a sparse one (n = 5000: 0.05 against 0.08 ms at
#: k = 10, 0.30 against 0.12 ms at k = 30, 2.4 against 0.25 ms at k = 100).
_DENSE_ONEHOT_MAX_K = 12


def row_max(z: Array) -> Array:
    """``z.max(axis=1)`` of an ``(n, k)`` array, fast for small ``k`` (same values)."""
    k = z.shape[1]
    if k > _LOOP_MAX_COLUMNS or k == 0:
        return z.max(axis=1)
    m = z[:, 0].copy()
    for j in range(1, k):
        np.maximum(m, z[:, j], out=m)
    return m


def row_sum(z: Array) -> Array:
    """``z.sum(axis=1)`` as a matrix-vector product (BLAS; equal up to rounding).

    NumPy's reduction over a short contiguous axis is several times slower
    than ``z @ 1`` at small ``k`` (0.10 against 0.01 ms at ``k = 10``, ``n =
    5000``); likewise :func:`col_sum`. Beyond :data:`_BLAS_ROW_SUM_MAX` columns
    NumPy's own sum is the faster (6.7 against 9.9 ms at ``k = 1000``, ``n = 25000``).
    """
    if z.shape[1] > _BLAS_ROW_SUM_MAX:
        return z.sum(axis=1)
    return z @ np.ones(z.shape[1], dtype=z.dtype)


def col_sum(z: Array) -> Array:
    """``z.sum(axis=0)`` as a vector-matrix product (BLAS; equal up to rounding)."""
    return np.ones(z.shape[0], dtype=z.dtype) @ z


def row_log_loss(z: Array, y: NDArray[np.intp]) -> Array:
    """Per-row log-loss ``-ln softmax(z_n)[y_n]`` of logits ``z`` (overwritten)."""
    z -= row_max(z)[:, None]
    zy = z[np.arange(len(y)), y]
    return np.log(row_sum(np.exp(z, out=z))) - zy


# ---------------------------------------------------------------------------
# Penalty
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class QuadraticPenalty:
    r"""Separable quadratic penalty on a DirLin map ``(W, b)``.

    .. math::

        R(W, b) = \sum_{j,l} P^W_{jl}(W_{jl} - C^W_{jl})^2 + \sum_j P^b_j (b_j - C^b_j)^2

    Read as a prior (``exp(-n L)`` is a posterior), a term
    ``prec * (theta - center)**2`` with ``prec > 0`` is
    ``theta ~ Normal(center, sd)`` with ``sd**2 = 1 / (2 n prec)``; ``prec = 0``
    is a flat prior (see :meth:`prior_sd`).

    Attributes
    ----------
    prec_W : ndarray of shape (k, k)
        Precision of each weight (>= 0).
    prec_b : ndarray of shape (k,)
        Precision of each intercept (>= 0).
    center_W : ndarray of shape (k, k)
        Centre of each weight.
    center_b : ndarray of shape (k,)
        Centre of each intercept.
    """

    prec_W: Array
    prec_b: Array
    center_W: Array
    center_b: Array

    def __post_init__(self) -> None:
        pw = np.asarray(self.prec_W, dtype=np.float64)
        k = pw.shape[0] if pw.ndim == 2 else -1
        if pw.ndim != 2 or pw.shape != (k, k) or k < 2:
            raise ValueError(f"prec_W must be a (k, k) matrix with k >= 2; got shape {pw.shape}")
        arrays = {
            "prec_W": (pw, (k, k)),
            "prec_b": (np.asarray(self.prec_b, dtype=np.float64), (k,)),
            "center_W": (np.asarray(self.center_W, dtype=np.float64), (k, k)),
            "center_b": (np.asarray(self.center_b, dtype=np.float64), (k,)),
        }
        for name, (arr, shape) in arrays.items():
            if arr.shape != shape:
                raise ValueError(f"{name} must have shape {shape}; got {arr.shape}")
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} contains NaN or inf")
            if name.startswith("prec") and (arr < 0).any():
                raise ValueError(f"{name} must be >= 0; got min {arr.min()!r}")
            object.__setattr__(self, name, arr)

    @property
    def n_classes(self) -> int:
        """Number of classes ``k``."""
        return int(self.prec_b.shape[0])

    def value(self, W: ArrayLike, b: ArrayLike) -> float:
        """Penalty ``R(W, b)``."""
        dW = np.asarray(W, dtype=np.float64) - self.center_W
        db = np.asarray(b, dtype=np.float64) - self.center_b
        return float(np.sum(self.prec_W * dW * dW) + np.sum(self.prec_b * db * db))

    def prior_sd(self, n: int) -> tuple[Array, Array]:
        """Gaussian-prior standard deviations ``1/sqrt(2 n prec)`` (inf where flat).

        Parameters
        ----------
        n : int
            Number of calibration samples (sum of the sample weights).

        Returns
        -------
        sd_W : ndarray of shape (k, k)
        sd_b : ndarray of shape (k,)
        """
        n = check_nonnegative_float(n, "n", strict=True)
        with np.errstate(divide="ignore"):
            return 1.0 / np.sqrt(2.0 * n * self.prec_W), 1.0 / np.sqrt(2.0 * n * self.prec_b)


def make_penalty(
    k: int,
    kind: str = "odir",
    reg_lambda: float = 0.0,
    reg_mu: float | None = None,
    center: str = "zero",
    *,
    reg_diag: float | None = None,
    n_samples: float | None = None,
    scale: float = 1.0,
) -> QuadraticPenalty:
    r"""The penalties of the Dirichlet family (DESIGN section 3).

    * ``kind="structured"`` (the default of the estimators): temperature
      scaling at the centre, with separate strengths for the off-diagonal of
      ``W``, for the diagonal's deviation from the shared scale ``s = 1/T``
      (``scale``) and for ``b``. Written for the map ``W = s W'`` acting on the
      temperature-scaled features ``s x`` (``W' = I`` is temperature scaling):

      .. math::

          R = \frac{1}{n}\Bigl(\lambda\, k(k-1) \sum_{i \ne j} W'^2_{ij}
              + \delta\, k \sum_j (W'_{jj} - 1)^2 + \mu\, k \sum_j b_j^2\Bigr),
          \qquad W' = W / s,

      so as every strength grows the fit tends to temperature scaling
      ``W = s I, b = 0``, and as they vanish to the unpenalised fit. The units
      are those of structured matrix scaling (Berta et al. 2025, with its
      ``rho = tau = 1``): ``lambda = delta = mu = 1`` is its fixed default.
      Read as a prior (``exp(-n L)`` is a posterior) the strengths are
      ``n``-free Gaussian priors: ``W'_ij ~ Normal(0, 1 / (2 lambda k (k-1)))``
      (variances), ``W'_jj ~ Normal(1, 1 / (2 delta k))``,
      ``b_j ~ Normal(0, 1 / (2 mu k))``; the ``1/n`` in the penalty is that
      of the mean log-loss. ``n_samples`` (the sum of the sample weights) is
      required.
    * ``kind="odir"`` (off-diagonal and intercept regularisation, Kull et al.
      2019):

      .. math:: R = \frac{\lambda}{k(k-1)} \sum_{i \ne j} W_{ij}^2 + \frac{\mu}{k}\sum_j b_j^2

      The diagonal of ``W`` is free, so ``center`` is irrelevant (the
      off-diagonal of both centres is zero).
    * ``kind="l2"``:

      .. math:: R = \frac{\lambda}{k(k+1)} \Bigl(\sum_{ij} (W_{ij} - C_{ij})^2 + \sum_j b_j^2\Bigr)

      with ``C = 0`` (``center="zero"``, pulling towards the uniform predictor)
      or ``C = I`` (``center="identity"``, pulling towards the uncalibrated
      scores, so an already calibrated model is left alone). With
      ``center="zero"`` this is the meaning of ``reg_lambda`` in dirichletcal
      0.5.3 with ``reg_norm=True``: ``calib/multinomial.py`` lines 81-86 divide
      ``reg_lambda`` by ``k(k+1)`` (by ``k(k-1)`` and ``mu`` by ``k`` for ODIR)
      and lines 167-172 add ``reg_lambda * sum((weights - reg)**2)`` over ``W``
      and ``b``. Its default ``reg_norm=False`` uses plain ``reg_lambda``
      instead of ``reg_lambda / (k(k+1))``.
    * ``kind="none"``: no penalty.

    Unlike dirichletcal (``ref_row=True``), no reference row is subtracted
    before penalising: the penalty is symmetric in the classes, so relabelling
    the classes permutes the fitted map exactly.

    Parameters
    ----------
    k : int
        Number of classes (>= 2).
    kind : {"structured", "odir", "l2", "none"}, default="odir"
    reg_lambda : float, default=0.0
        ``lambda >= 0`` (for ``"structured"``: the off-diagonal strength).
    reg_mu : float or None, default=None
        ``mu >= 0``, the intercept strength (``"odir"`` and ``"structured"``);
        ``None`` means ``mu = lambda``. Must be ``None`` for ``"l2"`` and
        ``"none"``.
    center : {"zero", "identity"}, default="zero"
        Centre of the weight penalty (L2 only has a diagonal term). The
        structured penalty is always centred on temperature scaling.
    reg_diag : float or None, default=None
        ``delta >= 0``, the strength on the diagonal's deviation from
        ``scale`` (``"structured"`` only); ``None`` means ``delta = lambda``.
    n_samples : float or None, default=None
        Number of calibration samples (sum of the sample weights);
        ``"structured"`` only, where it is required.
    scale : float, default=1.0
        The shared diagonal ``s = 1/T > 0`` at the centre (``"structured"``
        only), usually the fitted inverse temperature.

    Returns
    -------
    QuadraticPenalty

    Examples
    --------
    >>> pen = make_penalty(3, "odir", reg_lambda=6.0, reg_mu=3.0)
    >>> pen.prec_W
    array([[0., 1., 1.],
           [1., 0., 1.],
           [1., 1., 0.]])
    >>> pen.prec_b
    array([1., 1., 1.])
    >>> pen = make_penalty(3, "structured", 1.0, n_samples=6, scale=0.5)
    >>> pen.center_W
    array([[0.5, 0. , 0. ],
           [0. , 0.5, 0. ],
           [0. , 0. , 0.5]])
    >>> pen.prec_W  # 6/6 / 0.5**2 off the diagonal, 3/6 / 0.5**2 on it
    array([[2., 4., 4.],
           [4., 2., 4.],
           [4., 4., 2.]])
    """
    k = check_positive_int(k, "k")
    if k < 2:
        raise ValueError(f"k must be at least 2; got {k}")
    check_option(kind, "kind", ("structured", "odir", "l2", "none"))
    check_option(center, "center", ("zero", "identity"))
    lam = check_nonnegative_float(reg_lambda, "reg_lambda")
    if kind in ("odir", "structured"):
        mu = lam if reg_mu is None else check_nonnegative_float(reg_mu, "reg_mu")
    elif reg_mu is not None:
        raise ValueError(f"reg_mu is only used by kind='odir' and 'structured'; got "
                         f"reg_mu={reg_mu!r} with kind={kind!r}")
    if kind != "structured" and (reg_diag is not None or n_samples is not None
                                 or scale != 1.0):
        raise ValueError(f"reg_diag, n_samples and scale are only used by kind='structured'; "
                         f"got reg_diag={reg_diag!r}, n_samples={n_samples!r}, "
                         f"scale={scale!r} with kind={kind!r}")
    eye = np.eye(k)
    if kind == "structured":
        if n_samples is None:
            raise ValueError("kind='structured' needs n_samples (the sum of the sample weights)")
        n = check_nonnegative_float(n_samples, "n_samples", strict=True)
        s = check_nonnegative_float(scale, "scale", strict=True)
        delta = lam if reg_diag is None else check_nonnegative_float(reg_diag, "reg_diag")
        off = lam * k * (k - 1) / (n * s * s)
        prec_W = (1.0 - eye) * off + eye * (delta * k / (n * s * s))
        return QuadraticPenalty(prec_W, np.full(k, mu * k / n), s * eye, np.zeros(k))
    center_W = eye.copy() if center == "identity" else np.zeros((k, k))
    center_b = np.zeros(k)
    if kind == "odir":
        prec_W = (1.0 - eye) * (lam / (k * (k - 1)))
        prec_b = np.full(k, mu / k)
    elif kind == "l2":
        prec_W = np.full((k, k), lam / (k * (k + 1)))
        prec_b = np.full(k, lam / (k * (k + 1)))
    else:
        prec_W = np.zeros((k, k))
        prec_b = np.zeros(k)
    return QuadraticPenalty(prec_W, prec_b, center_W, center_b)


# ---------------------------------------------------------------------------
# Packing
# ---------------------------------------------------------------------------
def n_params(structure: str, k: int) -> int:
    """Length of ``theta`` for a structure (see the module docstring)."""
    return {"full": k * k + k, "diagonal": 2 * k, "scalar": 1}[structure]


def unpack_params(theta: ArrayLike, structure: str, k: int) -> tuple[Array, Array]:
    """Map the flat parameters ``theta`` to ``(W, b)`` (module docstring packing)."""
    check_option(structure, "structure", STRUCTURES)
    theta = np.asarray(theta, dtype=np.float64)
    m = n_params(structure, k)
    if theta.shape != (m,):
        raise ValueError(f"theta must have shape ({m},) for structure={structure!r} "
                         f"and k={k}; got {theta.shape}")
    if structure == "full":
        return theta[: k * k].reshape(k, k).copy(), theta[k * k:].copy()
    if structure == "diagonal":
        return np.diag(theta[:k]), theta[k:].copy()
    return theta[0] * np.eye(k), np.zeros(k)


def pack_params(W: ArrayLike, b: ArrayLike, structure: str) -> Array:
    """Inverse of :func:`unpack_params`; raises if ``(W, b)`` lacks the structure."""
    check_option(structure, "structure", STRUCTURES)
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    k = W.shape[0]
    if W.shape != (k, k) or b.shape != (k,):
        raise ValueError(f"W must be (k, k) and b (k,); got {W.shape} and {b.shape}")
    if structure == "full":
        return np.concatenate([W.ravel(), b])
    off = W - np.diag(np.diag(W))
    if np.any(off != 0):
        raise ValueError(f"W must be diagonal for structure={structure!r}")
    if structure == "diagonal":
        return np.concatenate([np.diag(W), b])
    d = np.diag(W)
    if np.any(d != d[0]) or np.any(b != 0):
        raise ValueError("structure='scalar' needs W = s*I and b = 0")
    return np.array([d[0]])


# ---------------------------------------------------------------------------
# Objective
# ---------------------------------------------------------------------------
@dataclass
class _State:
    """Quantities at one ``theta`` reused by gradient and Hessian."""

    theta: Array
    loss: float
    grad: Array
    P: Array  # softmax probabilities, (n, k)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)


class _Problem:
    """Loss, gradient, Hessian and Hessian-vector products for one structure."""

    def __init__(
        self,
        x: Array,
        y: NDArray[np.intp],
        sw: Array,
        structure: str,
        penalty: QuadraticPenalty,
    ) -> None:
        self.x = x
        self.y = y
        self.sw = sw  # normalised sample weights, sum to 1
        self.n, self.k = x.shape
        self.structure = structure
        self.pen = penalty
        self.m = n_params(structure, self.k)
        self.rows = np.arange(self.n)
        k = self.k
        # Penalty as a diagonal quadratic in theta: 0.5 * theta' D theta - e' theta + const.
        pw, pb, cw, cb = penalty.prec_W, penalty.prec_b, penalty.center_W, penalty.center_b
        if structure == "full":
            self.pen_diag = 2.0 * np.concatenate([pw.ravel(), pb])
            self.pen_center = np.concatenate([cw.ravel(), cb])
        elif structure == "diagonal":
            self.pen_diag = 2.0 * np.concatenate([np.diag(pw), pb])
            self.pen_center = np.concatenate([np.diag(cw), cb])
        else:
            dw = np.diag(pw)
            tot = dw.sum()
            self.pen_diag = np.array([2.0 * tot])
            # sum_j p_j (s - c_j)^2 = tot (s - c_bar)^2 + const with c_bar the weighted mean.
            self.pen_center = np.array([dw @ np.diag(cw) / tot if tot > 0 else 0.0])
        del k

    # -- map ---------------------------------------------------------------
    def logits(self, theta: Array) -> Array:
        x, k = self.x, self.k
        if self.structure == "full":
            z = x @ theta[: k * k].reshape(k, k).T
            z += theta[k * k:]
            return z
        if self.structure == "diagonal":
            z = np.multiply(x, theta[:k])
            z += theta[k:]
            return z
        return x * theta[0]

    def _penalty(self, theta: Array) -> float:
        """The penalty at ``theta``: ``c0 + 0.5 sum_p D_p (theta_p - e_p)^2`` for full and
        diagonal ``W`` (``c0``: the entries held at 0, computed once), else as :meth:`value`."""
        if self.structure == "scalar":
            W, b = unpack_params(theta, self.structure, self.k)
            return self.pen.value(W, b)
        if not hasattr(self, "_pen_const"):
            self._pen_const = self.pen.value(*unpack_params(self.pen_center, self.structure,
                                                            self.k))
        d = theta - self.pen_center
        return self._pen_const + 0.5 * float(self.pen_diag @ (d * d))

    def state(self, theta: Array) -> _State:
        z = self.logits(theta)
        z -= row_max(z)[:, None]
        zy = z[self.rows, self.y]
        np.exp(z, out=z)
        tot = row_sum(z)
        P = np.divide(z, tot[:, None], out=z)
        loss = float(self.sw @ (np.log(tot) - zy)) + self._penalty(theta)
        pen_grad = self.pen_diag * (theta - self.pen_center)
        if self.structure == "diagonal":
            # J'(P - onehot) without an n x k residual; P o x is kept for hessp
            k = self.k
            Px = P * self.x
            S = self.sw @ P
            Sx = self.sw @ Px
            wy = self.sw * self.x[self.rows, self.y]
            grad = np.concatenate([Sx - np.bincount(self.y, wy, minlength=k),
                                   S - np.bincount(self.y, self.sw, minlength=k)])
            return _State(theta, loss, grad + pen_grad, P, {"Px": Px, "S": S, "Sx": Sx})
        if self.structure == "full":
            # J'(P - onehot) = [P' (w o x), w' P] minus its label part, fixed by the data
            swx, lab = self._label_part()
            grad = np.concatenate([(P.T @ swx).ravel(), self.sw @ P]) - lab
            return _State(theta, loss, grad + pen_grad, P)
        R = P * self.sw[:, None]
        R[self.rows, self.y] -= self.sw
        return _State(theta, loss, self._pullback(R) + pen_grad, P)

    def _label_part(self) -> tuple[Array, Array]:
        """``w o x`` and the labels' part ``J' onehot`` of a full ``W``'s gradient (cached)."""
        if not hasattr(self, "_lab"):
            k = self.k
            swx = self.x * self.sw[:, None]
            # the class sums of w o x: a one-hot product, sparse (O(n k)) beyond a few
            # classes, dense (O(n k^2), no sparse set-up) below
            if k > _DENSE_ONEHOT_MAX_K:
                onehot = scipy.sparse.csr_array((np.ones(self.n), (self.y, self.rows)),
                                                shape=(k, self.n))
            else:
                onehot = np.zeros((k, self.n))
                onehot[self.y, self.rows] = 1.0
            self._lab = (swx, np.concatenate([(onehot @ swx).ravel(),
                                              np.bincount(self.y, self.sw, minlength=k)]))
        return self._lab

    def _pullback(self, R: Array) -> Array:
        """``J' R``: gradient of ``sum_na R_na * logit_na`` with respect to ``theta``."""
        x = self.x
        if self.structure == "full":
            return np.concatenate([(R.T @ x).ravel(), col_sum(R)])
        if self.structure == "diagonal":
            return np.concatenate([np.einsum("na,na->a", R, x), col_sum(R)])
        return np.array([np.einsum("na,na->", R, x)])

    def _augmented(self, products: bool = False) -> tuple[Array, Array | None]:
        """``x~ = [x, 1]`` and, with ``products`` and when it fits in memory, the
        row-wise ``x~ (kron) x~`` (dense Hessians only: ``n (k+1)^2`` numbers).

        Both cached; without ``products`` the second is None.
        """
        if not hasattr(self, "_xt"):
            self._xt = np.concatenate([self.x, np.ones((self.n, 1))], axis=1)
        if not products:
            return self._xt, None
        if not hasattr(self, "_xx"):
            n, D = self._xt.shape
            self._xx = (
                np.einsum("ni,nl->nil", self._xt, self._xt).reshape(n, D * D)
                if n * D * D <= _XX_MAX_ELEMENTS else None
            )
        return self._xt, self._xx

    def _cast(self, name: str, dtype: Any, make: Any) -> Any:
        """``make()`` in ``dtype``, converted once per problem and kept (``None`` stays ``None``).

        The problem's data in the precision of a product (float32 for the
        preconditioner and CG): ``x``, ``x~``, the weights, the row-wise
        products. In ``make()``'s own dtype it is ``make()`` itself, no copy.
        """
        casts = self.__dict__.setdefault("_casts", {})
        key = (name, np.dtype(dtype).name)
        if key not in casts:
            a = make()
            casts[key] = None if a is None else a.astype(dtype, copy=False)
        return casts[key]

    def _augmented_low(self, dtype: Any) -> tuple[Array, Array | None]:
        """:meth:`_augmented` with its products, in ``dtype`` (converted once per problem)."""
        return (self._cast("xt", dtype, lambda: self._augmented()[0]),
                self._cast("xx", dtype, lambda: self._augmented(products=True)[1]))

    # -- second order ------------------------------------------------------
    def hessp(self, st: _State, v: Array, dtype: Any = np.float64) -> Array:
        """Hessian-vector product ``H v`` (``O(n k^2)`` for a full ``W``, ``O(n k)`` else).

        Exact in float64. A diagonal ``W`` (``w``, ``b``; direction ``(v, c)``)
        takes four matrix-vector products with ``P`` and ``P o x`` (kept in the
        state): with ``r = (P o x) v + P c`` and ``u = w o r``,
        ``H_w = v o S_xx + c o S_x - (P o x)' u`` and
        ``H_b = v o S_x + c o S - P' u``, where ``S``, ``S_x``, ``S_xx`` are the
        weighted column sums of ``P``, ``P o x``, ``P o x^2``.

        ``dtype=np.float32`` runs a full ``W``'s two ``n x k x k`` products in
        float32 (half their time; other structures ignore it), as CG uses it:
        CG only has to solve the Newton system to a relative residual of at
        least ``min(0.5, sqrt(|g|))`` (:func:`_cg_direction`), far above
        float32's rounding, and convergence is judged on the float64 gradient,
        so the fit is the same to ``tol``.
        """
        k = self.k
        if self.structure == "diagonal":
            c = st.cache
            if "Sxx" not in c:
                c["Sxx"] = np.einsum("n,na,na->a", self.sw, c["Px"], self.x)
            Px, P = c["Px"], st.P
            vw, vb = v[:k], v[k:]
            u = (Px @ vw + P @ vb) * self.sw
            hw = vw * c["Sxx"] + vb * c["Sx"] - u @ Px
            hb = vw * c["Sx"] + vb * c["S"] - u @ P
            return np.concatenate([hw, hb]) + self.pen_diag * v
        if self.structure == "scalar":
            U = self.logits(v)  # the map is linear in theta: J v = logits(v)
            PU = st.P * U
            T = (PU - st.P * row_sum(PU)[:, None]) * self.sw[:, None]
            return self._pullback(T) + self.pen_diag * v
        # The likelihood's Hessian is zero on the softmax's invariant directions
        # (1 u' added to [W, b]) and maps into their complement: the direction
        # and the product are projected onto it, so that neither a large
        # invariant part of v nor rounding (float32) leaks across. The
        # preconditioner divides by the penalty there, which at weak strengths
        # magnifies any leak (without: L2's grid stalled at 1e-7, k = 40).
        x, P, sw = self._as_dtype(st, dtype)
        R = _off_invariant(_rows(v, k))
        U = x @ R[:, :k].T.astype(dtype, copy=False)  # J v = logits(v)
        U += R[:, k].astype(dtype, copy=False)
        PU = P * U
        T = (PU - P * row_sum(PU)[:, None]) * sw
        L = _off_invariant(np.concatenate([T.T @ x, col_sum(T)[:, None]], axis=1)
                           .astype(np.float64, copy=False))
        return _packed(L) + self.pen_diag * v

    def _as_dtype(self, st: _State, dtype: Any) -> tuple[Array, Array, Array]:
        """``x``, ``P`` and the weights column ``(n, 1)`` in ``dtype``, converted once."""
        if dtype == np.float64:
            return self.x, st.P, self.sw[:, None]
        key = np.dtype(dtype).name
        if st.cache.get("P_dtype") != key:
            st.cache.update(P_dtype=key, P_low=st.P.astype(dtype))
        return (self._cast("x", dtype, lambda: self.x), st.cache["P_low"],
                self._cast("sw", dtype, lambda: self.sw[:, None]))

    def preconditioner(self, st: _State, reuse: dict[str, Any] | None = None) -> Any:
        """Approximate inverse Hessian for CG.

        Full ``W``: block Jacobi plus the softmax's invariant directions.
        Adding one vector ``u`` to every row of ``[W, b]`` leaves the
        probabilities unchanged, so on these directions the Hessian is the
        penalty's alone; at a weak penalty they carry its smallest
        eigenvalues, which block Jacobi mistakes for the classes' curvature.
        Their exact inverse is added to the blocks'
        (:meth:`_add_invariant_directions`). The blocks: one ``(k+1) x (k+1)``
        block per class (its row of ``W`` and its intercept), which drops only
        the coupling between classes. Up to :data:`BLOCK_PRECOND_MAX_K`
        classes the likelihood's blocks ``X~' diag(w p_a (1 - p_a)) X~`` are
        formed (in float32: they only steer CG; ``O(n k^3)``), the penalty
        added and each block's Cholesky factor inverted
        (:func:`_block_inverse_roots`). (Blocks summed over every r-th row
        were tried: a fifth less time at k = 100 on the CIFAR-100 outputs, but
        with a weak penalty a class's few informative rows go missing and CG
        fails: docs/benchmarks.md, *Scale*.) Given a ``reuse`` dict, the
        likelihood's blocks are kept in it and reused by later calls on the
        same data (warm-started fits along a path of strengths, whose
        probabilities barely move); only the ``O(k^4)`` factorisations are
        redone. Beyond :data:`BLOCK_PRECOND_MAX_K` classes each block is
        Kronecker-factored (:meth:`kron_factors`: ``c_a G`` plus the
        penalty's typical precision), built in ``O(n k^2)`` and applied in
        ``O(k^3)``. A diagonal ``W`` uses its exact 2 x 2 blocks
        (:meth:`_diagonal_block_preconditioner`), the scalar one its 1 x 1 Hessian.
        """
        k = self.k
        if self.structure == "full" and k <= BLOCK_PRECOND_MAX_K:
            key = self._fingerprint()
            blocks = None
            if reuse is not None and reuse.get("key") == key:
                blocks = reuse["blocks"]
            if blocks is None:
                blocks = self._likelihood_blocks(st, np.float32)
                if reuse is not None:
                    reuse.update(key=key, blocks=blocks)
            pen = self._block_penalty()
            if reuse is not None and reuse.get("inv_key") == (key, pen.tobytes()):
                F = reuse["roots"]
            else:
                B = blocks.astype(np.float64)
                idx = np.arange(k + 1)
                B[:, idx, idx] += pen
                scale = np.maximum(B[:, idx, idx].max(axis=1), 1e-300)
                B[:, idx, idx] += 1e-12 * scale[:, None]  # flat directions of reg="none"
                F = _block_inverse_roots(B)
                if reuse is not None:
                    reuse.update(inv_key=(key, pen.tobytes()), roots=F)
            Ft = F.transpose(0, 2, 1)

            def block(R: Array) -> Array:
                return (Ft @ (F @ R[:, :, None]))[:, :, 0]

            return self._add_invariant_directions(block)
        if self.structure == "full":
            c, lam, U = self.kron_factors(st)
            pen = self._block_penalty()
            denom = c[:, None] * lam[None, :] + np.median(pen, axis=1)[:, None]
            denom = np.maximum(denom, 1e-12 * max(float(denom.max()), 1e-300))
            return self._add_invariant_directions(lambda R: ((R @ U) / denom) @ U.T)
        if self.structure == "diagonal":
            return self._diagonal_block_preconditioner(st)
        h = max(float(self.hess_dense(st)[0, 0]), 1e-300)  # scalar: the 1 x 1 Hessian itself
        return lambda r: r / h

    def _add_invariant_directions(self, solve: Any) -> Any:
        """A full ``W``'s preconditioner with the softmax's invariant directions added.

        With ``r`` read as the ``k x (k+1)`` matrix ``R = [W, b]``: ``solve(R)``
        plus ``1 (m / lam)'``, where ``m`` are the column means of ``R`` and
        ``lam`` those of the penalty's diagonal. The second term is the exact
        inverse of the Hessian on the invariant directions ``Z`` (``1 u'``,
        on which the likelihood's Hessian is zero, so that ``Z' H Z`` is the
        penalty's ``diag(lam)``): ``Z (Z' H Z)^-1 Z' r``, the coarse correction
        of a two-level additive preconditioner. Where ``lam = 0`` the
        direction is flat and the gradient has no part in it, so nothing is
        added. Symmetric and positive (semi-)definite, as CG needs. Over 16
        fits at k = 100-150 (CIFAR-100 outputs and synthetic scores, four
        strengths each) CG needed 312 Hessian-vector products against 452 with
        block Jacobi alone; along L2's grid to 1e-7 at k = 40, 1460 against
        4334 (``benchmarks/precond_hvps.py``; docs/benchmarks.md, *Scale*).
        """
        k = self.k
        lam = self._block_penalty().mean(axis=0)
        inv_lam = np.divide(1.0, lam, out=np.zeros_like(lam), where=lam > 0)

        def apply(r: Array) -> Array:
            R = _rows(r, k)
            Z = solve(R)
            Z += R.mean(axis=0) * inv_lam
            return _packed(Z)

        return apply

    def _diagonal_block_preconditioner(self, st: _State) -> Any:
        """Diagonal ``W``: the exact 2 x 2 Hessian block of each ``(W_aa, b_a)``, inverted.

        From the state's ``P o x`` with four weighted column sums and no new
        ``n x k`` array: ``h_ww = S_xx - sum w (P x)^2``, ``h_wb = S_x - sum w P^2 x``,
        ``h_bb = S - sum w P^2``.
        """
        k, sw, c = self.k, self.sw, st.cache
        Px, P = c["Px"], st.P
        if "Sxx" not in c:
            c["Sxx"] = np.einsum("n,na,na->a", sw, Px, self.x)
        hww = c["Sxx"] - np.einsum("n,na,na->a", sw, Px, Px) + self.pen_diag[:k]
        hwb = c["Sx"] - np.einsum("n,na,na->a", sw, P, Px)
        hbb = c["S"] - np.einsum("n,na,na->a", sw, P, P) + self.pen_diag[k:]
        det = hww * hbb - hwb * hwb
        scale = np.maximum(hww * hbb, 1e-300)
        det = np.maximum(det, 1e-12 * scale)  # flat directions of reg="none"

        def block(r: Array) -> Array:
            rw, rb = r[:k], r[k:]
            return np.concatenate([(hbb * rw - hwb * rb) / det, (hww * rb - hwb * rw) / det])

        return block

    def _fingerprint(self) -> tuple[Any, ...]:
        """Identifies the data (``x``, ``y``, weights) of a reused preconditioner (cached)."""
        if not hasattr(self, "_fp"):
            self._fp = (self.x.shape, zlib.crc32(np.ascontiguousarray(self.x)),
                        zlib.crc32(np.ascontiguousarray(self.y)), zlib.crc32(self.sw))
        return self._fp

    def _likelihood_blocks(self, st: _State, dtype: Any = np.float64) -> Array:
        """``X~' diag(w p_a (1 - p_a)) X~`` for every class ``a``: ``(k, k+1, k+1)``."""
        xt = self._cast("xt", dtype, lambda: self._augmented()[0])
        root = np.sqrt(st.P * (1.0 - st.P) * self.sw[:, None]).astype(dtype)
        out = np.empty((self.k, self.k + 1, self.k + 1), dtype=dtype)
        for a in range(self.k):
            Xa = xt * root[:, a:a + 1]
            np.matmul(Xa.T, Xa, out=out[a])
        return out

    def _block_penalty(self) -> Array:
        """The penalty's Hessian diagonal as ``(k, k+1)``: row ``a`` is ``W[a]`` then ``b[a]``."""
        return _rows(self.pen_diag, self.k)

    def kron_factors(self, st: _State) -> tuple[Array, Array, Array]:
        """Kronecker factors of the per-class Hessian blocks (full ``W``).

        Block ``a`` of the likelihood's Hessian is
        ``X~' diag(S[:, a]) X~`` with ``S = w p (1 - p)`` (``n x k``). Replacing
        ``S`` by its rank-one fit ``S_na ~ c_a s_n`` (``c_a = sum_n S_na``,
        ``s_n = sum_a S_na / sum S``) gives ``c_a G`` with one Gram matrix
        ``G = X~' diag(s) X~`` for all classes, as in Kronecker-factored
        (K-FAC) Laplace approximations. ``O(n k^2)`` in all.

        Returns
        -------
        c : ndarray of shape (k,)
        lam, U : ndarray of shapes (k+1,) and (k+1, k+1)
            Eigenvalues (clipped at 0) and eigenvectors of ``G``.
        """
        xt, _ = self._augmented()
        S = st.P * (1.0 - st.P) * self.sw[:, None]
        c = S.sum(axis=0)
        tot = float(c.sum())
        s = S.sum(axis=1) / tot if tot > 0 else np.full(self.n, 1.0 / self.n)
        G = (xt * s[:, None]).T @ xt
        lam, U = np.linalg.eigh(G)
        return c, np.maximum(lam, 0.0), U

    def class_blocks(self, st: _State) -> Array:
        """The exact Hessian blocks of each class, penalty included: ``(k, D, D)``.

        Full ``W``: block ``a`` covers row ``a`` of ``W`` and ``b_a`` (``D = k + 1``),
        ``X~' diag(w p_a (1 - p_a)) X~`` plus the penalty, with ``X~ = [x, 1]``
        (``O(n k^3)`` in all). Diagonal ``W``: ``(W_aa, b_a)`` (``D = 2``,
        ``O(n k)``). Dropping the coupling between classes, they give the
        block-diagonal reading of the Hessian used beyond
        :data:`DENSE_MAX_PARAMS` (:func:`log_evidence`).
        """
        k = self.k
        if self.structure == "full":
            B = self._likelihood_blocks(st)
            idx = np.arange(k + 1)
            B[:, idx, idx] += self._block_penalty()
            return B
        if self.structure == "diagonal":
            S = st.P * (1.0 - st.P) * self.sw[:, None]
            Sx = S * self.x
            B = np.empty((k, 2, 2))
            B[:, 0, 0] = np.einsum("na,na->a", Sx, self.x) + self.pen_diag[:k]
            B[:, 0, 1] = B[:, 1, 0] = Sx.sum(axis=0)
            B[:, 1, 1] = S.sum(axis=0) + self.pen_diag[k:]
            return B
        raise ValueError("class blocks need structure 'full' or 'diagonal'")

    def unpack_blocks(self, values: Array) -> Array:
        """Packed-``theta`` order of per-class values shaped ``(k, D)`` (inverse of the blocks)."""
        if self.structure == "full":
            return _packed(values)
        return np.concatenate([values[:, 0], values[:, 1]])

    def hess_dense(self, st: _State, dtype: Any = np.float64) -> Array:
        """The exact Hessian, assembled in row chunks without ``n x k x k`` arrays.

        ``dtype=np.float32`` forms a full ``W``'s ``O(n k^4)`` products in
        float32 (about half their time; the result is float64, its entries
        within a few float32 ulps of the sum's magnitude). Newton steps use it
        (:func:`fit_multinomial`); the evidence does not.
        """
        n, k = self.n, self.k
        x, P, sw = self.x, st.P, self.sw
        if self.structure == "scalar":
            px = np.einsum("na,na->n", P, x)
            h = sw @ (np.einsum("na,na->n", P, x * x) - px * px)
            return np.array([[h]]) + np.diag(self.pen_diag)
        m = self.m
        H = np.zeros((m, m))
        if self.structure == "diagonal":
            Z = np.concatenate([P * x, P], axis=1) * np.sqrt(sw)[:, None]
            H -= Z.T @ Z
            Sp = P * sw[:, None]
            idx = np.arange(k)
            H[idx, idx] += np.einsum("na,na->a", Sp, x * x)
            off = np.einsum("na,na->a", Sp, x)
            H[idx, k + idx] += off
            H[k + idx, idx] += off
            H[k + idx, k + idx] += Sp.sum(axis=0)
            return H + np.diag(self.pen_diag)
        # Full W, ordered internally as W~ = [W | b] row-major (index a*(k+1) + i),
        # with x~ = [x, 1]: H~ = blockdiag_a(X~' diag(w p_a) X~) - sum_n w_n z_n z_n',
        # z_n = p_n (kron) x~_n.
        D = k + 1
        xt, xx = (self._augmented(products=True) if np.dtype(dtype) == np.float64
                  else self._augmented_low(dtype))
        Ht = np.zeros((k * D, k * D))
        chunk = max(1, _CHUNK_ELEMENTS // (k * D))
        Pr = (P * np.sqrt(sw)[:, None]).astype(dtype, copy=False)
        for s in range(0, n, chunk):
            sl = slice(s, s + chunk)
            Z = np.einsum("na,ni->nai", Pr[sl], xt[sl])
            Z = Z.reshape(Z.shape[0], k * D)
            Ht -= Z.T @ Z  # symmetric rank update (BLAS syrk)
        Pw = (P * sw[:, None]).astype(dtype, copy=False)
        if xx is not None:  # all k diagonal blocks X~' diag(w p_a) X~ in one product
            B = (xx.T @ Pw).T.reshape(k, D, D)
        else:
            B = np.stack([(xt * Pw[:, a:a + 1]).T @ xt for a in range(k)])
        for a in range(k):
            Ht[a * D:(a + 1) * D, a * D:(a + 1) * D] += B[a]
        perm = np.concatenate([
            (np.arange(k)[:, None] * D + np.arange(k)[None, :]).ravel(),
            np.arange(k) * D + k,
        ])
        H = Ht[np.ix_(perm, perm)]
        # The products above are symmetric in exact arithmetic, but BLAS may sum
        # the blocks' mirrored entries in different orders (seen with OpenBLAS's
        # kernels on AMD EPYC, in float32 and float64 alike): mirror exactly.
        H += H.T
        H *= 0.5
        H[np.diag_indices(m)] += self.pen_diag
        return H


def multinomial_objective(
    theta: ArrayLike,
    x: ArrayLike,
    y: ArrayLike,
    *,
    structure: str = "full",
    penalty: QuadraticPenalty | None = None,
    sample_weight: ArrayLike | None = None,
    hessian: bool = False,
) -> tuple[float, Array] | tuple[float, Array, Array]:
    """Objective ``L(theta)`` and its exact gradient (and Hessian).

    The same function :func:`fit_multinomial` minimises; exposed for tests,
    benchmarks against generic optimisers, and Laplace approximations.

    Parameters
    ----------
    theta : array-like of shape (m,)
        Packed parameters (see the module docstring).
    x : array-like of shape (n_samples, k)
        Features.
    y : array-like of shape (n_samples,)
        Integer labels in ``0..k-1``.
    structure : {"full", "diagonal", "scalar"}, default="full"
    penalty : QuadraticPenalty or None, default=None
    sample_weight : array-like of shape (n_samples,), optional
    hessian : bool, default=False
        Also return the dense Hessian (``m x m``).

    Returns
    -------
    loss : float
    grad : ndarray of shape (m,)
    hess : ndarray of shape (m, m), only with ``hessian=True``
    """
    prob = _make_problem(x, y, structure, penalty, sample_weight)
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape != (prob.m,):
        raise ValueError(f"theta must have shape ({prob.m},); got {theta.shape}")
    st = prob.state(theta)
    if hessian:
        return st.loss, st.grad, prob.hess_dense(st)
    return st.loss, st.grad


def multinomial_hessp(
    theta: ArrayLike,
    v: ArrayLike,
    x: ArrayLike,
    y: ArrayLike,
    *,
    structure: str = "full",
    penalty: QuadraticPenalty | None = None,
    sample_weight: ArrayLike | None = None,
) -> Array:
    """Exact Hessian-vector product of :func:`multinomial_objective` at ``theta``."""
    prob = _make_problem(x, y, structure, penalty, sample_weight)
    st = prob.state(np.asarray(theta, dtype=np.float64))
    return prob.hessp(st, np.asarray(v, dtype=np.float64))


def log_evidence(
    x: ArrayLike,
    y: ArrayLike,
    penalty: QuadraticPenalty,
    theta: ArrayLike,
    *,
    structure: str = "full",
    sample_weight: ArrayLike | None = None,
) -> float:
    r"""Laplace estimate of the log marginal likelihood of the labels.

    Reading the penalty as a Gaussian prior on ``theta`` (precision
    ``D = 2 n prec``, DESIGN section 3) and expanding ``n L`` to second order
    at its minimum ``theta*`` (the penalised fit),

    .. math::

        \ln p(y) \approx -n L(\theta^*) + \tfrac12 \sum_p \ln D_p
            - \tfrac12 \ln\det\bigl(n \nabla^2 L(\theta^*)\bigr),

    with ``n`` the sum of the sample weights (weights as counts); the
    :math:`2\pi` factors of the prior's normaliser and of the Gaussian
    integral cancel. The directions that leave the map unchanged (a vector
    added to every row of ``W``, a constant to ``b``) are flat in the
    likelihood: there the posterior is the prior, and the approximation is
    exact along them. Maximising it over the penalty strengths is type-II
    maximum likelihood (MacKay 1992).

    The Hessian is assembled exactly while ``len(theta) <=``
    :data:`DENSE_MAX_PARAMS` (:data:`DIAGONAL_DENSE_MAX_PARAMS` for a
    diagonal ``W``). Beyond, ``ln det`` is replaced by the sum over
    classes of the ``ln det`` of the exact diagonal blocks
    (:meth:`_Problem.class_blocks`: one row of ``W`` and its intercept, or
    for a diagonal ``W`` its entry and the intercept), an upper bound
    (Fischer's inequality), so the estimate is then a lower bound that errs
    towards stronger penalties.

    Parameters
    ----------
    x : array-like of shape (n_samples, k)
    y : array-like of shape (n_samples,)
    penalty : QuadraticPenalty
        Every precision of the structure's free parameters must be positive
        (a flat prior has no evidence).
    theta : array-like
        The penalised fit's packed parameters (``FitResult.theta``).
    structure : {"full", "diagonal", "scalar"}, default="full"
    sample_weight : array-like of shape (n_samples,), optional

    Returns
    -------
    float
        ``ln p(y)`` in nats.

    References
    ----------
    .. [1] D. J. C. MacKay. "The evidence framework applied to classification
       networks". Neural Computation 4(5), 1992.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.datasets import make_dirgen
    >>> from bayescal.maps import log_features
    >>> q, y, _, _ = make_dirgen(300, 3, rng=np.random.default_rng(0))
    >>> x = log_features(q)
    >>> ev = {}
    >>> for lam in (0.01, 1.0, 100.0):
    ...     pen = make_penalty(3, "structured", lam, n_samples=300)
    ...     ev[lam] = log_evidence(x, y, pen, fit_multinomial(x, y, penalty=pen).theta)
    >>> max(ev, key=ev.get)
    1.0
    """
    prob = _make_problem(x, y, structure, penalty, sample_weight)
    n_eff = float(check_sample_weight(sample_weight, n_samples=prob.n).sum())
    D = n_eff * prob.pen_diag
    if (D <= 0).any():
        raise ValueError(
            f"the evidence needs a proper prior: {int((D <= 0).sum())} of {len(D)} penalty "
            "precisions are 0 (flat)"
        )
    st = prob.state(np.asarray(theta, dtype=np.float64))
    if dense_hessian(structure, prob.m):
        logdet = _logdet_pd(n_eff * prob.hess_dense(st))
    else:
        logdet = _logdet_pd(n_eff * prob.class_blocks(st))
    return float(-n_eff * st.loss + 0.5 * np.sum(np.log(D)) - 0.5 * logdet)


def dense_hessian(structure: str, m: int) -> bool:
    """Whether ``m`` parameters of ``structure`` get the dense Hessian (module constants)."""
    if structure == "scalar":
        return True
    return m <= (DENSE_MAX_PARAMS if structure == "full" else DIAGONAL_DENSE_MAX_PARAMS)


def _logdet_pd(H: Array) -> float:
    """``ln det`` of a positive-definite matrix, or the sum over a stack ``(..., D, D)``."""
    try:
        c = np.linalg.cholesky(H)
    except np.linalg.LinAlgError as exc:
        raise ValueError("the Hessian at the mode is not positive definite") from exc
    return float(2.0 * np.sum(np.log(np.diagonal(c, axis1=-2, axis2=-1))))


def _rows(theta: Array, k: int) -> Array:
    """A full ``W``'s packed ``theta`` as the ``k x (k+1)`` matrix ``[W, b]`` (row ``a``:
    ``W[a]`` then ``b[a]``); :func:`_packed` is its inverse."""
    return np.concatenate([theta[: k * k].reshape(k, k), theta[k * k:, None]], axis=1)


def _packed(R: Array) -> Array:
    """The ``k x (k+1)`` matrix ``[W, b]`` as a full ``W``'s packed ``theta``."""
    return np.concatenate([R[:, :-1].ravel(), R[:, -1]])


def _off_invariant(R: Array) -> Array:
    """``[W, b]`` (``k x (k+1)``) less its column means: its part off the softmax's
    invariant directions ``1 u'``."""
    return R - R.mean(axis=0)


def _block_inverse_roots(B: Array) -> Array:
    """``F`` with ``F[a]' F[a] = inv(B[a])`` for symmetric positive definite blocks ``B``.

    ``F[a]`` is the inverse of ``B[a]``'s lower Cholesky factor (LAPACK
    ``potrf`` and ``trtri``: about a third of the cost of ``numpy.linalg.inv``
    on ``100 x 101 x 101``). A block whose factorisation fails gets
    ``diag(s)^(-1/2) V'`` from its eigendecomposition, eigenvalues ``s``
    clipped at ``1e-12`` of the largest.
    """
    potrf, trtri = scipy.linalg.get_lapack_funcs(("potrf", "trtri"), (B,))
    F = np.empty_like(B)
    for a in range(len(B)):
        L, info = potrf(B[a], lower=1, clean=1)
        if info == 0:
            F[a], info = trtri(L, lower=1)
        if info != 0:
            s, V = np.linalg.eigh(B[a])
            s = np.maximum(s, 1e-12 * max(float(s.max()), 1e-300))
            F[a] = V.T / np.sqrt(s)[:, None]
    return F


def _make_problem(
    x: ArrayLike,
    y: ArrayLike,
    structure: str,
    penalty: QuadraticPenalty | None,
    sample_weight: ArrayLike | None,
) -> _Problem:
    check_option(structure, "structure", STRUCTURES)
    x = check_features(x)
    n, k = x.shape
    y = check_labels(y, n_samples=n, n_classes=k)
    sw = check_sample_weight(sample_weight, n_samples=n)
    sw = sw / sw.sum()
    if penalty is None:
        penalty = make_penalty(k, "none")
    if not isinstance(penalty, QuadraticPenalty):
        raise ValueError(
            f"penalty must be a QuadraticPenalty or None; got {type(penalty).__name__}"
        )
    if penalty.n_classes != k:
        raise ValueError(f"penalty is for {penalty.n_classes} classes but x has {k} columns")
    return _Problem(x, y, sw, structure, penalty)


# ---------------------------------------------------------------------------
# Solver
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit_multinomial`.

    Attributes
    ----------
    W : ndarray of shape (k, k)
        Fitted weights (row ``j`` gives the logit of class ``j``).
    b : ndarray of shape (k,)
        Fitted intercepts.
    loss : float
        Objective ``L`` (mean log-loss plus penalty) at ``(W, b)``.
    grad_norm : float
        Largest absolute entry of the gradient at ``(W, b)`` (projected onto
        ``bounds`` when given).
    n_iter : int
        Newton iterations performed.
    converged : bool
        Whether ``grad_norm <= tol``.
    message : str
        Why the solver stopped.
    theta : ndarray
        Packed parameters of the structure (module docstring).
    structure : str
    n_hessp : int
        Hessian-vector products used (``"newton-cg"`` only).
    n_hess : int
        Dense Hessians assembled (``"newton"`` only).
    solver : str
        ``"newton"`` or ``"newton-cg"``.
    """

    W: Array
    b: Array
    loss: float
    grad_norm: float
    n_iter: int
    converged: bool
    message: str
    theta: Array = field(repr=False)
    structure: str = "full"
    n_hessp: int = 0
    solver: str = "newton"
    n_hess: int = 0


def _initial_theta(init: Any, structure: str, k: int) -> Array:
    if init is None:
        return {"full": np.concatenate([np.eye(k).ravel(), np.zeros(k)]),
                "diagonal": np.concatenate([np.ones(k), np.zeros(k)]),
                "scalar": np.ones(1)}[structure]
    if isinstance(init, FitResult):
        if init.structure == structure:
            return np.array(init.theta, dtype=np.float64)
        init = (init.W, init.b)
    if isinstance(init, tuple) and len(init) == 2:
        W, b = init
        W = np.asarray(W, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if W.shape != (k, k) or b.shape != (k,):
            raise ValueError(f"init (W, b) must have shapes ({k}, {k}) and ({k},); "
                             f"got {W.shape} and {b.shape}")
        if structure == "diagonal":
            return np.concatenate([np.diag(W), b])
        if structure == "scalar":
            return np.array([float(np.mean(np.diag(W)))])
        return np.concatenate([W.ravel(), b])
    theta = np.asarray(init, dtype=np.float64)
    m = n_params(structure, k)
    if theta.shape != (m,):
        raise ValueError(f"init must be None, a FitResult, a (W, b) tuple or a packed "
                         f"theta of shape ({m},); got shape {theta.shape}")
    if not np.isfinite(theta).all():
        raise ValueError("init contains NaN or inf")
    return theta.copy()


def fit_multinomial(
    x: ArrayLike,
    y: ArrayLike,
    *,
    structure: str = "full",
    penalty: QuadraticPenalty | None = None,
    init: Any = None,
    max_iter: int = 100,
    tol: float = 1e-8,
    sample_weight: ArrayLike | None = None,
    solver: str = "auto",
    bounds: tuple[float, float] | None = None,
    warn: bool = True,
    reuse: dict[str, Any] | None = None,
) -> FitResult:
    r"""Minimise the penalised multinomial log-loss (module docstring) exactly.

    Parameters
    ----------
    x : array-like of shape (n_samples, k)
        Features; for Dirichlet calibration the floored log-probabilities of
        :func:`bayescal.maps.log_features`, for matrix/vector scaling logits.
    y : array-like of shape (n_samples,)
        Integer labels ``0..k-1`` (column ``j`` is class ``j``; classes may be
        absent).
    structure : {"full", "diagonal", "scalar"}, default="full"
        Weight structure (matrix/Dirichlet, vector scaling, temperature).
    penalty : QuadraticPenalty or None, default=None
        From :func:`make_penalty`; ``None`` fits the plain MLE.
    init : None, FitResult, (W, b) tuple or packed theta, default=None
        Starting point; ``None`` is the identity map ``W = I, b = 0``. Pass the
        previous fit to warm-start along a regularisation path.
    max_iter : int, default=100
        Maximum Newton iterations.
    tol : float, default=1e-8
        Stop when the largest absolute gradient entry is ``<= tol``.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights; the data term is their weighted mean log-loss.
    solver : {"auto", "newton", "newton-cg"}, default="auto"
        Dense Newton or truncated Newton-CG (module docstring).
    bounds : (float, float) or None, default=None
        ``structure="scalar"`` only: keep the inverse temperature ``s`` in
        ``[lo, hi]`` (projected Newton; by convexity the result is the
        constrained optimum, and convergence is judged on the projected
        gradient, which is zero at an active bound whose gradient points out).
    warn : bool, default=True
        Emit a :class:`~sklearn.exceptions.ConvergenceWarning` when not converged.
    reuse : dict or None, default=None
        A dict shared by successive fits on the same data (e.g. warm-started
        fits along a path of penalty strengths). Newton-CG keeps its block
        preconditioner's likelihood part in it, built once at the first fit's
        start (it only steers CG); dense Newton keeps the last likelihood
        Hessian, with which the next fit starts by chord steps (kept only
        while each shrinks the gradient fourfold). Either way the fit is the
        same to ``tol``. The dict records a checksum of the data and rebuilds
        on other data. ``None``: nothing is shared.

    Returns
    -------
    FitResult

    Notes
    -----
    When a class never occurs in ``y`` and its logit is not penalised (no
    penalty, or ODIR with ``mu = 0``; the ODIR diagonal is always free), the
    infimum drives that class's probability to zero and is not attained. The
    solver then stops at the finite point where the gradient -- which is about
    that probability -- falls below ``tol``: the class keeps a calibrated
    probability of order ``tol`` or less.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.datasets import make_dirgen
    >>> from bayescal.maps import log_features
    >>> q, y, _, _ = make_dirgen(500, 3, rng=np.random.default_rng(0))
    >>> res = fit_multinomial(log_features(q), y, penalty=make_penalty(3, "odir", 1e-3))
    >>> res.converged, res.grad_norm <= 1e-8
    (True, True)
    """
    check_option(solver, "solver", ("auto", "newton", "newton-cg"))
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_nonnegative_float(tol, "tol", strict=True)
    prob = _make_problem(x, y, structure, penalty, sample_weight)
    theta = _initial_theta(init, structure, prob.k)
    if solver == "auto":
        solver = "newton" if dense_hessian(structure, prob.m) else "newton-cg"
    lo = hi = None
    if bounds is not None:
        if structure != "scalar":
            raise ValueError(f"bounds are only supported for structure='scalar'; got {structure!r}")
        lo, hi = _check_bounds(bounds)
        theta = np.clip(theta, lo, hi)
    st = prob.state(theta)
    message = "maximum number of iterations (max_iter) reached"
    converged = False
    n_iter = 0
    n_hessp = 0
    n_hess = 0
    factor = None  # Cholesky factor of the last dense Hessian, reused by chord steps
    precond, precond_age = None, 0  # Newton-CG preconditioner and its age in iterations
    reuse = {} if reuse is None else reuse
    chord = False
    # Newton steps start with float32 Hessians (hess_dense): the step only
    # steers, and convergence is judged on the float64 gradient. Near the
    # optimum a full step that fails to shrink the gradient tenfold (which an
    # exact Hessian would) switches to float64 Hessians.
    hess_dtype: Any = np.float32 if prob.m >= FLOAT32_HESSIAN_MIN_PARAMS else np.float64
    if solver == "newton" and lo is None and "hess_lik" in reuse \
            and reuse.get("hess_key") == prob._fingerprint():
        # a warm start along a path: the last fit's likelihood Hessian with this
        # penalty drives chord steps, kept only while they contract the gradient
        H = reuse["hess_lik"] + np.diag(prob.pen_diag)
        try:
            factor = scipy.linalg.cho_factor(H, check_finite=False)
            chord = True
        except np.linalg.LinAlgError:
            factor = None
    for n_iter in range(max_iter + 1):  # noqa: B007 -- n_iter is reported
        gmax = _projected_gmax(st, lo, hi)
        if gmax <= tol:
            converged = True
            message = f"converged: max |gradient| {gmax:.3g} <= tol {tol:.3g}"
            break
        if n_iter == max_iter:
            break
        if chord and factor is not None:
            # Near the optimum the Hessian barely moves: a step with the previous
            # factorisation costs one gradient and still contracts the gradient
            # fast. Keep it only if it does (else take a fresh Newton step).
            trial = prob.state(st.theta - scipy.linalg.cho_solve(factor, st.grad))
            if (trial.loss <= st.loss + _slack(st.loss)
                    and _projected_gmax(trial, lo, hi) <= CHORD_CONTRACTION * gmax):
                st = trial
                continue
            chord = False
            if trial.loss < st.loss:
                st = trial
                continue
        if solver == "newton":
            H = prob.hess_dense(st, hess_dtype)
            step, factor = _newton_direction(H, st.grad)
            n_hess += 1
            if lo is None:
                H[np.diag_indices_from(H)] -= prob.pen_diag
                reuse.update(hess_lik=H, hess_key=prob._fingerprint())
        else:
            # The preconditioner only steers CG: rebuild it every few iterations.
            if precond is None or precond_age >= PRECOND_REFRESH:
                precond, precond_age = prob.preconditioner(st, reuse), 0
            step, used = _cg_direction(prob, st, precond, CG_TOL_FRACTION * tol)
            precond_age += 1
            n_hessp += used
        new, t = _line_search(prob, st, step, lo, hi)
        if new is None:
            message = (f"line search failed at max |gradient| {gmax:.3g} > tol {tol:.3g}: "
                       "the objective cannot decrease further in float64 (raise tol)")
            break
        chord = (solver == "newton" and lo is None and t == 1.0
                 and _projected_gmax(new, lo, hi) <= CHORD_START * gmax)
        if solver == "newton" and t == 1.0 and not chord and gmax <= EXACT_HESSIAN_GMAX:
            hess_dtype = np.float64  # a full step that barely helped: exact Hessians from now
        st = new
    gmax = _projected_gmax(st, lo, hi)
    W, b = unpack_params(st.theta, structure, prob.k)
    if not converged and warn:
        warnings.warn(
            f"fit_multinomial ({solver}, structure={structure!r}) did not converge after "
            f"{n_iter} iterations: max |gradient| {gmax:.3g} > tol {tol:.3g} ({message}). "
            "Increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return FitResult(W, b, st.loss, gmax, n_iter, converged, message, st.theta.copy(),
                     structure, n_hessp, solver, n_hess)


def _slack(loss: float) -> float:
    """Rounding allowance on the objective (a few ulps of its magnitude)."""
    return 8.0 * np.finfo(float).eps * max(1.0, abs(loss))


def _newton_direction(H: Array, g: Array) -> tuple[Array, Any]:
    """Solve ``(H + lam I) p = -g`` by Cholesky; ``lam = 0`` unless ``H`` is singular.

    A singular ``H`` (an unpenalised full ``W`` has ``k + 1`` flat directions,
    orthogonal to the gradient) gets the smallest Levenberg shift
    ``lam = 1e-12 * 10^j * max|diag H|`` that factorises.
    """
    scale = max(float(np.max(np.abs(np.diag(H)))), 1e-300)
    lam = 0.0
    for attempt in range(40):
        try:
            c = scipy.linalg.cho_factor(H + lam * np.eye(len(g)), check_finite=False)
            p = -scipy.linalg.cho_solve(c, g, check_finite=False)
            if np.isfinite(p).all():
                return p, c
        except np.linalg.LinAlgError:
            pass
        lam = scale * 1e-12 * 10.0**attempt
    raise FloatingPointError(  # pragma: no cover - H has NaN entries
        "the Hessian could not be factorised even with a large Levenberg shift"
    )


def _cg_direction(prob: _Problem, st: _State, precond: Any,
                  floor: float = 0.0) -> tuple[Array, int]:
    """Truncated preconditioned CG on ``H p = -g``.

    Stops when the residual's norm is at most ``eta |g|``, with the
    Eisenstat-Walker forcing ``eta = min(0.5, sqrt(|g|))``, or its largest
    entry at most ``floor``. The residual is the next gradient to first
    order, so a ``floor`` below the fit's tolerance on ``max |g|``
    (:data:`CG_TOL_FRACTION` of it) spares the products that would only push
    the last step's gradient far below it.
    """
    g = st.grad
    gnorm = float(np.linalg.norm(g))
    eta = min(0.5, np.sqrt(gnorm))
    tol = eta * gnorm
    p = np.zeros_like(g)
    r = -g.copy()
    z = precond(r)
    d = z.copy()
    rz = float(r @ z)
    used = 0
    for _ in range(max(50, min(len(g), 500))):
        Hd = prob.hessp(st, d, np.float32)  # float32 products: see hessp
        used += 1
        dHd = float(d @ Hd)
        if dHd <= 0:  # flat direction (unpenalised invariance): stop here
            if used == 1:
                p = z
            break
        alpha = rz / dHd
        p += alpha * d
        r -= alpha * Hd
        if np.linalg.norm(r) <= tol or np.abs(r).max() <= floor:
            break
        z = precond(r)
        rz_new = float(r @ z)
        d = z + (rz_new / rz) * d
        rz = rz_new
    return p, used


def _check_bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bounds must be a pair (lo, hi) of numbers; got {bounds!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with lo < hi; got {bounds!r}")
    return lo, hi


def _projected_gmax(st: _State, lo: float | None, hi: float | None) -> float:
    """Max-abs gradient, zeroing components that push against an active bound."""
    g = st.grad
    if lo is not None:
        at_lo = (st.theta <= lo) & (g > 0)
        at_hi = (st.theta >= hi) & (g < 0)
        g = np.where(at_lo | at_hi, 0.0, g)
    return float(np.max(np.abs(g)))


def _line_search(
    prob: _Problem, st: _State, step: Array, lo: float | None = None, hi: float | None = None
) -> tuple[_State | None, float]:
    """Backtracking Armijo search, tolerant of float64 rounding near the optimum.

    Returns the accepted state and step length, or ``(None, 0)`` on failure.
    """
    slope = float(st.grad @ step)
    if not slope < 0:
        step = -st.grad
        slope = -float(st.grad @ st.grad)
    slack = _slack(st.loss)
    gmax = _projected_gmax(st, lo, hi)
    t = 1.0
    for _ in range(60):
        trial = st.theta + t * step
        if lo is not None:
            trial = np.clip(trial, lo, hi)
            slope = float(st.grad @ (trial - st.theta)) / t
        new = prob.state(trial)
        if np.isfinite(new.loss):
            if new.loss <= st.loss + 1e-4 * t * slope:
                return new, t
            # At rounding level the loss cannot resolve the decrease: accept a
            # step that does not raise the loss beyond rounding and shrinks the gradient.
            if new.loss <= st.loss + slack and _projected_gmax(new, lo, hi) < gmax:
                return new, t
        t *= BACKTRACK
    return None, 0.0


def multinomial_log_loss(
    x: ArrayLike, y: ArrayLike, W: ArrayLike, b: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """(Weighted) mean log-loss of the map ``softmax(W x + b)`` on features ``x``."""
    x = check_features(x)
    n, k = x.shape
    y = check_labels(y, n_samples=n, n_classes=k)
    sw = check_sample_weight(sample_weight, n_samples=n)
    z = x @ np.asarray(W, dtype=np.float64).T + np.asarray(b, dtype=np.float64)
    return float(sw @ row_log_loss(z, y) / sw.sum())
