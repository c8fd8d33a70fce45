r"""The structured Bayesian DirLin model: temperature scaling at the centre, learned scales.

The same family, with the same centre, as the structured MAP default of
:class:`~bayescal.DirichletCalibrator` (:mod:`bayescal.structured`): the map is
``softmax(W x + b)`` with ``W = s W'``, ``s = 1/T`` the inverse temperature and

.. math::

    W'_{jj} = 1 + d_{jj},\quad W'_{ij} = d_{ij}\ (i \ne j),\qquad
    d_{jj} \sim \mathcal N(0, \sigma_d^2),\ d_{ij} \sim \mathcal N(0, \sigma_o^2),\
    b_j \sim \mathcal N(0, \sigma_b^2),

with the per-``k`` normalisation of the structured penalty (strength 1 is
structured matrix scaling's default), written through scales
:math:`\tau = 1/\sqrt{\text{strength}}`:

.. math::

    \sigma_o = \frac{\tau_o}{\sqrt{2k(k-1)}},\qquad
    \sigma_d = \frac{\tau_d}{\sqrt{2k}},\qquad \sigma_b = \frac{\tau_b}{\sqrt{2k}} .

None of these depends on ``n``. The default (:class:`StructuredPrior`,
``kind="hierarchical"``) samples everything:

.. math::

    \ln s \sim \mathcal N(m_s, \sigma_s^2),\qquad
    \tau_o, \tau_d, \tau_b \sim \text{HalfNormal}(h),

or, with ``log_tau=(m, sd)``, :math:`\ln\tau_g \sim \mathcal N(m, sd^2)`;
``kind="fixed"`` fixes the three ``tau`` (``inf`` strength pins a group at
the centre: ``tau = 0``), and ``kind="temperature"`` pins all three, which is
Bayesian temperature scaling.

Identified coordinates
----------------------
``softmax(W x + b)`` does not change when a constant is added to a column of
``W`` or to ``b``. Write each group (column ``i`` of ``d``: one diagonal entry
with sd :math:`\sigma_d` and ``k - 1`` off-diagonal ones with
:math:`\sigma_o`; or ``b``) non-centred, :math:`d = \sigma \odot z` with
:math:`z \sim \mathcal N(0, I_k)`. A shift of ``d`` by :math:`t\mathbf 1` is a
move of ``z`` along :math:`v \propto (1/\sigma_p)_p`, along which the
likelihood is flat. Splitting :math:`z = Q w + a\hat v` with ``Q`` an
orthonormal basis of :math:`\hat v^\perp` is a rotation (Jacobian 1, for every
value of the scales), the prior factorises into
:math:`\mathcal N(w; 0, I_{k-1})\,\mathcal N(a; 0, 1)` and ``a`` integrates out
exactly. So the model sampled here,

.. math:: p(s)\,p(\tau)\,\mathcal N(w; 0, I)\,
          \prod_i \mathrm{softmax}(W x_i + b)_{y_i},\qquad
          d_{\cdot i} = \sigma \odot Q(\sigma) w_{\cdot i},

is the raw model's posterior over maps, exactly, with scales that are random
(which is why ``Q`` must follow :math:`\sigma`; with fixed scales this is the
zero-sum plane of :mod:`bayescal.bayes.gauge`). ``Q(\sigma)`` is a fixed
orthonormal basis ``B`` of :math:`\mathbf 1^\perp` reflected by the
Householder reflection that swaps :math:`\mathbf 1/\sqrt k` and
:math:`-\hat v`; it is smooth in the scales because :math:`\hat v` has positive
entries. For ``b`` (equal scales) this is ``b = \sigma_b B w``, PyMC's
``ZeroSumNormal``. The posterior is proper for any data, a class absent from
the labels included: every coordinate has a proper prior and the likelihood
is at most 1.

Centred coordinates
-------------------
Where the data dominate every direction of the map, its own coefficients
sample better than ``w`` (whose scale follows the sampled ``tau``):
:func:`centred_map` and :func:`centred_log_prior` write the same model in
``(u_s, ln tau, c_W, c_b)`` with ``W = B c_W`` column by column and
``b = B c_b``; :func:`to_centred` maps one system to the other.

Parameter vector
----------------
``theta`` (unconstrained, length :func:`n_params`): ``u_s`` with
:math:`\ln s = m_s + \sigma_s u_s`; the ``ln tau`` of each sampled group, in
the order off-diagonal, diagonal, intercept; then ``w`` of ``W`` (``k`` columns
of ``k - 1``, column-major, when the off-diagonal is not pinned; ``k``
diagonal deviations :math:`d_{jj}/\sigma_d` when only the diagonal is free);
then ``w`` of ``b`` (``k - 1``). The log density in these coordinates
(:func:`log_prior`) includes the Jacobian of :math:`\tau = e^{\ell}`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Real
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import null_space

from bayescal._validation import check_nonnegative_float, check_option

__all__ = [
    "GROUPS",
    "LinearPart",
    "StructuredPrior",
    "centred_log_prior",
    "centred_map",
    "centred_prior_factors",
    "centred_prior_precision",
    "draw_prior",
    "group_scales",
    "linear_part",
    "log_prior",
    "n_params",
    "structured_map",
    "theta_names",
    "to_centred",
]

Array = NDArray[np.float64]

#: The three groups, in the order of ``theta`` and of :attr:`StructuredPrior.tau`.
GROUPS: tuple[str, ...] = ("off", "diag", "b")
KINDS: tuple[str, ...] = ("hierarchical", "fixed", "temperature")


@dataclass(frozen=True)
class StructuredPrior:
    r"""Prior of the structured Bayesian DirLin model (module docstring).

    Attributes
    ----------
    kind : {"hierarchical", "fixed", "temperature"}
        ``"hierarchical"``: every ``tau`` sampled from ``HalfNormal(tau_scale)``;
        ``"fixed"``: ``tau`` given; ``"temperature"``: every ``tau = 0``
        (only ``s`` is sampled).
    log_scale_mean, log_scale_sd : float
        :math:`\ln s \sim \mathcal N(m_s, \sigma_s^2)`.
    tau_scale : float or (float, float, float)
        Scale ``h`` of the half-normal hyperprior (``"hierarchical"``): one
        for all three groups, or ``(h_off, h_diag, h_b)``.
    tau : (float, float, float)
        ``(tau_off, tau_diag, tau_b)`` for ``"fixed"``; ``0`` pins a group at
        the centre. Ignored by the other kinds.
    log_tau : (float, float) or None
        ``(m, sd)``: a log-normal hyperprior instead of the half-normal one,
        :math:`\ln\tau_g \sim \mathcal N(m, sd^2)` for every group
        (``"hierarchical"``; ``tau_scale`` is then unused). Its density is on
        :math:`\ln\tau`, the sampled coordinate, so no Jacobian enters.
    """

    kind: str = "hierarchical"
    log_scale_mean: float = 0.0
    log_scale_sd: float = 1.0
    tau_scale: float | tuple[float, float, float] = 0.5
    tau: tuple[float, float, float] = (1.0, 1.0, 1.0)
    log_tau: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        check_option(self.kind, "kind", KINDS)
        if not np.isfinite(self.log_scale_mean):
            raise ValueError(f"log_scale_mean must be finite; got {self.log_scale_mean!r}")
        check_nonnegative_float(self.log_scale_sd, "log_scale_sd", strict=True)
        h = self.tau_scale
        if isinstance(h, tuple | list | np.ndarray):
            if len(h) != 3:
                raise ValueError(f"tau_scale must be a float or (h_off, h_diag, h_b); got {h!r}")
            for name, v in zip(GROUPS, h, strict=True):
                if not np.isfinite(check_nonnegative_float(v, f"tau_scale of {name}",
                                                           strict=True)):
                    raise ValueError(f"tau_scale of {name} must be finite; got {v!r}")
            h = tuple(float(v) for v in h)
        else:
            h = check_nonnegative_float(h, "tau_scale", strict=True)
            if not np.isfinite(h):
                raise ValueError(f"tau_scale must be finite; got {h!r}")
        object.__setattr__(self, "tau_scale", h)
        if len(self.tau) != 3:
            raise ValueError(f"tau must be (tau_off, tau_diag, tau_b); got {self.tau!r}")
        for name, t in zip(GROUPS, self.tau, strict=True):
            if not np.isfinite(check_nonnegative_float(t, f"tau_{name}")):
                raise ValueError(f"tau_{name} must be finite; got {t!r}")
        object.__setattr__(self, "tau", tuple(float(t) for t in self.tau))
        if self.log_tau is not None:
            lt = self.log_tau
            if not isinstance(lt, tuple | list | np.ndarray) or len(lt) != 2:
                raise ValueError(f"log_tau must be a pair (mean, sd) of ln tau; got {lt!r}")
            m = lt[0]
            if isinstance(m, bool) or not isinstance(m, Real) or not np.isfinite(m):
                raise ValueError(f"log_tau's mean must be a finite number; got {m!r}")
            sd = check_nonnegative_float(lt[1], "log_tau's sd", strict=True)
            object.__setattr__(self, "log_tau", (float(m), sd))

    @property
    def log_tau_start(self) -> tuple[float, float, float]:
        """Starting ``ln tau`` of each group for the mode search.

        ``ln(h/2)`` for ``HalfNormal(h)``, the median ``m`` for the log-normal hyperprior.
        """
        if self.log_tau is not None:
            return (self.log_tau[0],) * 3
        return tuple(float(np.log(0.5 * h)) for h in self.tau_scales)  # type: ignore[return-value]

    @property
    def tau_scales(self) -> tuple[float, float, float]:
        """``(h_off, h_diag, h_b)``: the hyperprior scale of each group."""
        h = self.tau_scale
        return h if isinstance(h, tuple) else (h, h, h)  # type: ignore[return-value]

    def log_scale(self, u_s: Any) -> Any:
        r""":math:`\ln s = m_s + \sigma_s u_s` of the standardised coordinate ``u_s``.

        Plain arithmetic: ``u_s`` may be a float, a NumPy array or a PyTensor
        variable.
        """
        return self.log_scale_mean + self.log_scale_sd * u_s

    @property
    def sampled(self) -> tuple[bool, bool, bool]:
        """Whether each group's ``tau`` is sampled."""
        return (self.kind == "hierarchical",) * 3

    @property
    def present(self) -> tuple[bool, bool, bool]:
        """Whether each group deviates from the centre at all (``tau > 0`` or sampled)."""
        if self.kind == "hierarchical":
            return (True, True, True)
        if self.kind == "temperature":
            return (False, False, False)
        return tuple(t > 0 for t in self.tau)  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tau"] = list(self.tau)
        if isinstance(self.tau_scale, tuple):
            d["tau_scale"] = list(self.tau_scale)
        if self.log_tau is None:
            d.pop("log_tau")  # files written before the option read the same
        else:
            d["log_tau"] = list(self.log_tau)
        return {"structured": d}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StructuredPrior:
        d = dict(d["structured"])
        d["tau"] = tuple(d["tau"])
        if isinstance(d.get("tau_scale"), list):
            d["tau_scale"] = tuple(d["tau_scale"])
        if isinstance(d.get("log_tau"), list):
            d["log_tau"] = tuple(d["log_tau"])
        return cls(**d)


def _norms(k: int) -> Array:
    """``sqrt(2k(k-1)), sqrt(2k), sqrt(2k)``: sd = tau / norm."""
    return np.sqrt(np.array([2.0 * k * (k - 1), 2.0 * k, 2.0 * k]))


def _w_size(prior: StructuredPrior, k: int) -> int:
    off, diag, _ = prior.present
    return k * (k - 1) if off else (k if diag else 0)


def n_params(prior: StructuredPrior, k: int) -> int:
    """Length of ``theta`` for ``k`` classes."""
    return 1 + sum(prior.sampled) + _w_size(prior, k) + (k - 1) * prior.present[2]


def theta_names(prior: StructuredPrior, k: int) -> list[str]:
    """A name for every entry of ``theta`` (module docstring)."""
    names = ["u_s"] + [f"log_tau_{g}" for g, on in zip(GROUPS, prior.sampled, strict=True) if on]
    names += [f"w_W[{i}]" for i in range(_w_size(prior, k))]
    names += [f"w_b[{i}]" for i in range((k - 1) * prior.present[2])]
    return names


def _basis(k: int) -> Array:
    """A fixed orthonormal basis of the complement of ``1`` in R^k, shape (k, k-1)."""
    return null_space(np.ones((1, k)))


def _split(theta: Any, prior: StructuredPrior, k: int) -> tuple[Any, list[Any], Any, Any]:
    """``(u_s, [log tau of each sampled group], w_W, w_b)`` slices of one ``theta``."""
    i = 1
    logtau = []
    for on in prior.sampled:
        if on:
            logtau.append(theta[i])
            i += 1
    m = _w_size(prior, k)
    w_W = theta[i : i + m]
    i += m
    w_b = theta[i : i + (k - 1)] if prior.present[2] else None
    return theta[0], logtau, w_W, w_b


def _sampled_log_taus(theta: Any, prior: StructuredPrior, k: int) -> list[Any]:
    """``ln tau`` of each group as ``theta`` holds it; ``None`` where ``tau`` is not sampled."""
    _, logtau, _, _ = _split(theta, prior, k)
    it = iter(logtau)
    return [next(it) if on else None for on in prior.sampled]


def group_scales(theta: Any, prior: StructuredPrior, k: int, xp: ModuleType = np) -> list[Any]:
    """``[tau_off, tau_diag, tau_b]`` of one ``theta`` (sampled: ``exp(log tau)``)."""
    return [xp.exp(lt) if lt is not None else prior.tau[g] if prior.kind == "fixed" else 0.0
            for g, lt in enumerate(_sampled_log_taus(theta, prior, k))]


@dataclass(frozen=True)
class LinearPart:
    r"""The map's raw parameters as a linear function of ``w`` for fixed ``s`` and scales.

    ``r = concat(W.ravel(), b) = r0 + J w`` (row-major ``W``) with
    ``r0 = concat(s I, 0)`` and ``w = concat(w_W, w_b)``. ``J`` is block
    sparse and kept as its blocks: ``Jb[i, j, p]`` (column ``i`` of ``W``, row
    ``j``, coefficient ``p`` of that column; ``m = k - 1`` coefficients per
    column, or 1 when only the diagonal is free) and ``Jbb[j, p]`` for ``b``.
    For column ``i`` the block is :math:`s\,\mathrm{diag}(\sigma_{\cdot i})\,H_i B`,
    with ``B`` a fixed orthonormal basis of :math:`\mathbf 1^\perp` and
    :math:`H_i` the Householder reflection along
    :math:`h_i = \hat v_i + \mathbf 1/\sqrt k` (module docstring); for ``b``
    it is :math:`\sigma_b B`.

    Every method is written with array operations only, so that ``xp`` may be
    NumPy or ``pytensor.tensor`` (the PyMC model uses these very functions).
    """

    s: Any
    Jb: Any
    Jbb: Any
    k: int
    xp: ModuleType = np

    @property
    def n_w(self) -> int:
        """Number of coefficients of ``W`` (``k m``)."""
        return 0 if self.Jb is None else self.k * _static_dim(self.Jb, 2)

    @property
    def n_b(self) -> int:
        return 0 if self.Jbb is None else self.k - 1

    def apply(self, w: Any) -> tuple[Any, Any]:
        """``(W, b)`` at coefficients ``w`` (shape (n_w + n_b,))."""
        xp, k = self.xp, self.k
        W = self.s * np.eye(k)
        if self.Jb is not None:
            m = _static_dim(self.Jb, 2)
            wW = w[: self.n_w].reshape((k, m))
            W = W + (self.Jb * wW[:, None, :]).sum(axis=2).T     # W[j, i]
        b = xp.dot(self.Jbb, w[self.n_w :]) if self.Jbb is not None else xp.zeros(k)
        return W, b

    def rmatvec(self, v: Any) -> Any:
        """``J^T v`` for ``v`` of shape (k^2 + k,)."""
        xp, k = self.xp, self.k
        parts = []
        if self.Jb is not None:
            vW = v[: k * k].reshape((k, k)).T                         # [i, j]
            parts.append((self.Jb * vW[:, :, None]).sum(axis=1).reshape((self.n_w,)))
        if self.Jbb is not None:
            parts.append(xp.dot(self.Jbb.T, v[k * k :]))
        return xp.concatenate(parts) if len(parts) > 1 else parts[0]

    def gram(self, F: Array) -> Any:
        """``J^T F J`` for a symmetric ``F`` of shape (k^2 + k, k^2 + k), using the blocks."""
        xp, k = self.xp, self.k
        K = k * k
        # JAX contracts with einsum (batched matrix products); PyTensor's graph keeps
        # the broadcast products it was first compiled with
        einsum = getattr(xp, "__name__", "").startswith("jax")
        if self.Jb is not None:
            F4 = F[:K, :K].reshape((k, k, k, k))          # [j, i, j', i']
            # T[i, p, j', i'] = sum_j Jb[i, j, p] F4[j, i, j', i']
            # G[i, p, i', p'] = sum_j' T[i, p, j', i'] Jb[i', j', p']
            if einsum:
                G = xp.einsum("ipab,bac->ipbc", xp.einsum("ijp,jiab->ipab", self.Jb, F4),
                              self.Jb)
            else:
                T = (self.Jb.transpose(0, 2, 1)[:, :, :, None, None]
                     * F4.transpose(1, 0, 2, 3)[:, None, :, :, :]).sum(axis=2)
                G = (T[:, :, :, :, None]
                     * self.Jb.transpose(1, 0, 2)[None, None, :, :, :]).sum(axis=2)
            WW = G.reshape((self.n_w, self.n_w))
            if self.Jbb is not None:
                F3 = F[:K, K:].reshape((k, k, k))                 # [j, i, j']
                if einsum:
                    Tb = xp.einsum("ijp,jia->ipa", self.Jb, F3)
                else:
                    Tb = (self.Jb.transpose(0, 2, 1)[:, :, :, None]
                          * F3.transpose(1, 0, 2)[:, None, :, :]).sum(axis=2)   # [i, p, j']
                Wb = xp.dot(Tb.reshape((self.n_w, k)), self.Jbb)
                bb = xp.dot(self.Jbb.T, xp.dot(F[K:, K:], self.Jbb))
                return xp.concatenate([xp.concatenate([WW, Wb], axis=1),
                                       xp.concatenate([Wb.T, bb], axis=1)], axis=0)
            return WW
        if self.Jbb is not None:
            return xp.dot(self.Jbb.T, xp.dot(F[K:, K:], self.Jbb))
        return None

    def dense(self) -> Array:
        """``J`` as a dense (k^2 + k, n_w + n_b) NumPy array (for tests)."""
        k = self.k
        J = np.zeros((k * k + k, self.n_w + self.n_b))
        if self.Jb is not None:
            m = self.Jb.shape[2]
            for i in range(k):
                J[np.arange(k) * k + i, i * m : (i + 1) * m] = self.Jb[i]
        if self.Jbb is not None:
            J[k * k :, self.n_w :] = self.Jbb
        return J


def _static_dim(a: Any, axis: int) -> int:
    """A dimension known when the graph is built (NumPy shape or PyTensor static shape)."""
    d = a.type.shape[axis] if hasattr(a, "type") else a.shape[axis]
    if d is None:  # pragma: no cover - every block here has a static shape
        raise ValueError("block shapes must be static")
    return int(d)


def linear_part(s: Any, tau: list[Any], prior: StructuredPrior, k: int,
                xp: ModuleType = np) -> LinearPart:
    """The :class:`LinearPart` at inverse temperature ``s`` and scales ``tau``."""
    tau_o, tau_d, tau_b = tau
    norm = _norms(k)
    sd_o, sd_d, sd_b = tau_o / norm[0], tau_d / norm[1], tau_b / norm[2]
    eye = np.eye(k)
    off, diag, has_b = prior.present
    B = _basis(k)
    Jb = None
    if off:
        # v-hat of column i is proportional to (1/sd_d at row i, 1/sd_o elsewhere),
        # i.e. to (sd_o at row i, sd_d elsewhere), which stays finite at sd_d = 0.
        vnorm = xp.sqrt(sd_o**2 + (k - 1) * sd_d**2)
        V = (sd_d + (sd_o - sd_d) * eye) / vnorm            # [j, i]
        # B w is orthogonal to 1, so h_i . (B w) = v-hat_i . (B w), and
        # |h_i|^2 = 2 + 2 v-hat_i . 1 / sqrt(k).
        hh = 2.0 + 2.0 * V.sum(axis=0) / np.sqrt(k)          # [i]
        VB = xp.dot(V.T, B) / hh[:, None]                    # [i, p]
        Hm = (V + 1.0 / np.sqrt(k)).T                        # [i, j]
        refl = B[None, :, :] - 2.0 * Hm[:, :, None] * VB[:, None, :]   # [i, j, p]
        sig = (sd_o + (sd_d - sd_o) * eye).T                 # [i, j]
        Jb = s * sig[:, :, None] * refl                      # [i, j, p]
    elif diag:
        Jb = (s * sd_d) * eye[:, :, None]                    # [i, j, 0]: W_ii only
    Jbb = sd_b * B if has_b else None
    return LinearPart(s, Jb, Jbb, k, xp)


def structured_map(theta: Any, prior: StructuredPrior, k: int,
                   xp: ModuleType = np) -> tuple[Any, Any, Any]:
    r"""``(s, W, b)`` of one parameter vector (module docstring).

    Parameters
    ----------
    theta : array of shape (n_params,)
    prior : StructuredPrior
    k : int
    xp : module, default=numpy
        NumPy or ``pytensor.tensor``.

    Returns
    -------
    s : scalar
    W : array of shape (k, k)
    b : array of shape (k,)
    """
    u_s, _, w_W, w_b = _split(theta, prior, k)
    s = xp.exp(prior.log_scale(u_s))
    lin = linear_part(s, group_scales(theta, prior, k, xp), prior, k, xp)
    w = [v for v in (w_W if _w_size(prior, k) else None, w_b) if v is not None]
    if not w:
        return s, s * np.eye(k), xp.zeros(k)
    W, b = lin.apply(xp.concatenate(w) if len(w) > 1 else w[0])
    return s, W, b


def _log_hyper(u_s: Any, logtau: list[Any], prior: StructuredPrior, xp: ModuleType) -> Any:
    """The ``s`` and ``ln tau`` terms shared by both coordinate systems.

    Half-normal hyperprior: ``l - e^{2l}/(2h^2)`` per group (the Jacobian of
    ``tau = e^l`` included); log-normal: ``-(l - m)^2/(2 sd^2)``.
    """
    out = -0.5 * u_s**2
    if prior.log_tau is not None:
        m, sd = prior.log_tau
        for lt in logtau:
            out = out - 0.5 * ((lt - m) / sd) ** 2
        return out
    scales = [h for h, on in zip(prior.tau_scales, prior.sampled, strict=True) if on]
    for lt, h in zip(logtau, scales, strict=True):
        out = out + lt - 0.5 * xp.exp(2.0 * lt) / h**2
    return out


def log_prior(theta: Any, prior: StructuredPrior, k: int, xp: ModuleType = np) -> Any:
    r"""Log prior density of ``theta`` up to a constant (Jacobian of ``tau = e^l`` included).

    :math:`-\tfrac12 u_s^2 + \sum_g \bigl(\ell_g - e^{2\ell_g}/(2h^2)\bigr)
    - \tfrac12 \lVert w \rVert^2`.
    """
    u_s, logtau, w_W, w_b = _split(theta, prior, k)
    out = _log_hyper(u_s, logtau, prior, xp)
    if _w_size(prior, k):
        out = out - 0.5 * (w_W**2).sum()
    if w_b is not None:
        out = out - 0.5 * (w_b**2).sum()
    return out


# ---------------------------------------------------------------------------
# Centred coordinates (the map itself), for posteriors the data dominate
# ---------------------------------------------------------------------------
def _check_centred(prior: StructuredPrior) -> None:
    if not all(prior.present):
        raise ValueError("centred coordinates need every group free (no tau of 0); got "
                         f"tau={prior.tau!r} for kind={prior.kind!r}")


def _log_group_sds(theta: Any, prior: StructuredPrior, k: int) -> list[Any]:
    """``ln sigma`` of the off-diagonal, diagonal and intercept groups."""
    lt = [v if v is not None else np.log(prior.tau[g])
          for g, v in enumerate(_sampled_log_taus(theta, prior, k))]
    return [v - np.log(nv) for v, nv in zip(lt, _norms(k), strict=True)]


def centred_map(theta: Any, prior: StructuredPrior, k: int,
                xp: ModuleType = np) -> tuple[Any, Any, Any]:
    r"""``(s, W, b)`` of a parameter vector in centred coordinates.

    ``theta`` has the layout of the non-centred one (module docstring), with
    the coefficients of the map itself in place of ``w``:
    :math:`W_{\cdot i} = B c_i` (``c_i``, ``k - 1`` numbers, for each column
    ``i``) and :math:`b = B c_b`, ``B`` the fixed orthonormal basis of
    :math:`\mathbf 1^\perp`. The columns of ``W`` and ``b`` sum to zero, one
    representative of each class of equivalent maps.
    """
    _check_centred(prior)
    u_s, _, cW, cb = _split(theta, prior, k)
    B = _basis(k)
    s = xp.exp(prior.log_scale(u_s))
    return s, xp.dot(B, cW.reshape((k, k - 1)).T), xp.dot(B, cb)


def centred_log_prior(theta: Any, prior: StructuredPrior, k: int, xp: ModuleType = np) -> Any:
    r"""Log prior density of centred ``theta`` (:func:`centred_map`), up to a constant.

    The prior of the model above, written for the map: with
    :math:`d = W_{\cdot i}/s - e_i` (column ``i`` of :math:`W' - I`, up to the
    added constant that leaves the map unchanged) and
    :math:`\lambda_j = 1/\sigma_j^2` (:math:`\sigma_d` on row ``i``,
    :math:`\sigma_o` elsewhere), marginalising the constant gives

    .. math::

        \ln p(c_i \mid s, \tau) = -\tfrac12\Bigl(\sum_j \lambda_j d_j^2
        - \frac{(\sum_j \lambda_j d_j)^2}{\sum_j \lambda_j}\Bigr)
        - \tfrac12 \Bigl(\sum_j \ln \sigma_j^2 + \ln \frac{\sum_j \lambda_j}{k}\Bigr)
        - (k - 1) \ln s,

    (the last term is the Jacobian of :math:`W = s W'`), and
    :math:`\ln p(c_b \mid \tau) = -\lVert c_b \rVert^2/(2\sigma_b^2)
    - (k - 1)\ln\sigma_b`. It equals :func:`log_prior` at the matching
    non-centred point (:func:`to_centred`) minus the log Jacobian of that
    change of variables, exactly (tested), so both coordinate systems hold
    one posterior.
    """
    _check_centred(prior)
    u_s, logtau, cW, cb = _split(theta, prior, k)
    out = _log_hyper(u_s, logtau, prior, xp)
    lso, lsd, lsb = _log_group_sds(theta, prior, k)
    B = _basis(k)
    eye = np.eye(k)
    log_s = prior.log_scale(u_s)
    D = xp.dot(B, cW.reshape((k, k - 1)).T) / xp.exp(log_s) - eye          # [j, i]
    lam_o, lam_d = xp.exp(-2.0 * lso), xp.exp(-2.0 * lsd)
    lam = lam_o + (lam_d - lam_o) * eye                        # [j, i]
    tot = lam.sum(axis=0)
    # sum_j lam_j (d_j - dbar)^2 with dbar the lam-weighted mean. Not as
    # sum_j lam_j d_j^2 - (sum_j lam_j d_j)^2 / tot (the same quantity): that difference
    # of two large sums cancelled catastrophically where one scale is far below the
    # other (lam_d / lam_o = 1e11: near -4000 instead of >= 0, a spurious mode that
    # stalled a chain; tested)
    dbar = (lam * D).sum(axis=0) / tot
    quad = (lam * (D - dbar) ** 2).sum(axis=0)
    logdet = 2.0 * ((k - 1) * lso + lsd) + xp.log(tot / k)
    out = out - 0.5 * quad.sum() - 0.5 * logdet.sum()
    out = out - k * (k - 1) * log_s
    return out - 0.5 * (cb**2).sum() * xp.exp(-2.0 * lsb) - (k - 1) * lsb


def centred_prior_precision(theta: Any, prior: StructuredPrior, k: int,
                            xp: ModuleType = np) -> tuple[Any, Any, Any, Any]:
    r"""The Gaussian prior of the centred coefficients given ``s`` and ``tau``, in closed form.

    :func:`centred_log_prior` is quadratic in ``c = (c_1, ..., c_k, c_b)``
    for fixed hyperparameters (those of ``theta``; its coefficients are not
    read). With :math:`\beta_i = B^\top e_i` and :math:`\lambda = 1/\sigma^2`
    per group, column ``i`` has mean :math:`s\beta_i` and precision
    :math:`s^{-2}(\lambda_o I + \kappa\,\beta_i\beta_i^\top)`,
    :math:`\kappa = k\lambda_o(\lambda_d - \lambda_o)/(\lambda_d + (k-1)\lambda_o)`,
    and ``c_b`` has mean 0 and precision :math:`\lambda_b I`. So the whole
    precision is :math:`\alpha I + (\lambda_b - \alpha) E_b + g\,U U^\top`
    with :math:`\alpha = \lambda_o/s^2`, :math:`g = \kappa/s^2`, ``E_b`` the
    projection on ``c_b`` and ``U`` the ``k`` columns :math:`\beta_i` (each in
    its column's block): a scalar plus a correction of rank ``2k - 1``.

    Returns
    -------
    s, alpha, lam_b, g : scalars
    """
    _check_centred(prior)
    lso, lsd, lsb = _log_group_sds(theta, prior, k)
    s = xp.exp(prior.log_scale(theta[0]))
    lam_o, lam_d, lam_b = xp.exp(-2.0 * lso), xp.exp(-2.0 * lsd), xp.exp(-2.0 * lsb)
    kappa = k * lam_o * (lam_d - lam_o) / (lam_d + (k - 1) * lam_o)
    return s, lam_o / s**2, lam_b, kappa / s**2


def centred_prior_factors(k: int) -> tuple[Array, Array]:
    """``u0`` (prior mean / ``s``) and ``Y = [E_b columns, U]`` of :func:`centred_prior_precision`.

    Shapes ``(m,)`` and ``(m, 2k - 1)`` for the ``m = k(k-1) + k - 1`` centred
    coefficients; the ``k - 1`` columns of ``E_b`` first, then ``U``.
    """
    B = _basis(k)
    m = k * (k - 1) + k - 1
    u0 = np.zeros(m)
    Y = np.zeros((m, 2 * k - 1))
    for i in range(k):
        u0[i * (k - 1):(i + 1) * (k - 1)] = B[i]
        Y[i * (k - 1):(i + 1) * (k - 1), k - 1 + i] = B[i]
    Y[k * (k - 1):, : k - 1] = np.eye(k - 1)
    return u0, Y


def to_centred(theta: ArrayLike, prior: StructuredPrior, k: int) -> Array:
    """The centred coordinates (:func:`centred_map`) of a non-centred ``theta``: same map."""
    _check_centred(prior)
    theta = np.asarray(theta, dtype=np.float64)
    _, W, b = structured_map(theta, prior, k)
    B = _basis(k)
    n_hyper = 1 + sum(prior.sampled)
    return np.concatenate([theta[:n_hyper], (B.T @ W).T.ravel(), B.T @ b])


def draw_prior(prior: StructuredPrior, k: int, size: int,
               rng: np.random.Generator | int | None = None) -> Array:
    """``size`` independent draws of ``theta`` from the prior, shape (size, n_params)."""
    rng = np.random.default_rng(rng)
    theta = rng.standard_normal((size, n_params(prior, k)))
    n_tau = sum(prior.sampled)
    if n_tau and prior.log_tau is not None:
        m, sd = prior.log_tau
        theta[:, 1 : 1 + n_tau] = m + sd * rng.standard_normal((size, n_tau))
    elif n_tau:
        h = np.array([h for h, on in zip(prior.tau_scales, prior.sampled, strict=True) if on])
        tau = h * np.abs(rng.standard_normal((size, n_tau)))
        theta[:, 1 : 1 + n_tau] = np.log(tau)
    return theta


def maps_of(theta: ArrayLike, prior: StructuredPrior, k: int) -> tuple[Array, Array, Array]:
    """:func:`structured_map` of every row of ``theta`` (..., n_params) -> s, W, b."""
    theta = np.asarray(theta, dtype=np.float64)
    flat = theta.reshape(-1, theta.shape[-1])
    out = [structured_map(t, prior, k) for t in flat]
    lead = theta.shape[:-1]
    s = np.array([o[0] for o in out], dtype=np.float64).reshape(lead)
    W = np.stack([o[1] for o in out]).reshape(*lead, k, k)
    b = np.stack([np.broadcast_to(o[2], (k,)) for o in out]).reshape(*lead, k)
    return s, W, b
