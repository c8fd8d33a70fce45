r"""The structured default: strengths chosen by evidence, checked by cross-validation.

The default fit of :class:`~bayescal.DirichletCalibrator`,
:class:`~bayescal.MatrixScaler` and :class:`~bayescal.VectorScaler` is the
MAP of ``softmax(W x + b)`` under the structured penalty of
:func:`bayescal.optimize.make_penalty` (``kind="structured"``): a Gaussian
prior centred on temperature scaling (``W = s I``, ``b = 0``, with ``s = 1/T``
the fitted inverse temperature) with one strength per *group* of parameters,

* ``reg_lambda``: the off-diagonal of ``W`` (full structure only),
* ``reg_diag``: the diagonal's deviation from ``s``,
* ``reg_mu``: the intercepts ``b``,

in units where ``1`` is the fixed default of structured matrix scaling
(Berta et al. 2025). Strong strengths give temperature scaling, weak ones the
unpenalised fit.

Choosing the strengths (``"auto"``) takes two steps, both cheap:

1. **Type-II maximum likelihood.** MacKay's evidence updates: with ``theta*``
   the penalised fit, ``H`` the Hessian of ``n L`` there and ``D`` the prior
   precisions, group ``g`` gets

   .. math:: \lambda_g \leftarrow \lambda_g\,
      \frac{\gamma_g}{\sum_{p \in g} D_p (\theta^*_p - c_p)^2},
      \qquad \gamma_g = \sum_{p \in g} \bigl(1 - D_p [H^{-1}]_{pp}\bigr),

   (``gamma_g`` is the number of parameters of the group that the data
   determine), refitting warm-started until the strengths move by less than
   1 %. Each step costs one warm-started Newton fit and one Hessian; it uses
   all the data and needs no folds. It is the fixed point of
   :func:`bayescal.optimize.log_evidence` over the strengths.
2. **A one-standard-error check towards temperature scaling.** The evidence
   is an asymptotic argument: on small or near-separable calibration sets it
   can prefer a map that predicts worse than temperature scaling, and its
   Gaussian reading can pin a group (often the off-diagonal) that held-out
   data would use. So the strengths found are multiplied by each of
   ``(inf, 100, 10, 1)`` (``inf`` is temperature scaling itself), and every
   strength is also set alike to each of ``(10, 1, 0.1)``; each candidate is
   scored by ``cv``-fold cross-validation (each fold refits its own
   temperature, fits warm-started along each path). The first candidate in
   that order whose held-out log-loss is within one standard error of the
   best (the standard error of the paired per-sample differences; two for
   the tied strengths, which leave the evidence's shape) is kept, so the fit
   moves away from temperature scaling only when the held-out data support
   it.

**Many classes.** From :data:`HOLDOUT_MIN_K` (31) classes an all-"auto"
structured map (full, and diagonal: vector scaling, and the default full map
beyond :data:`FULL_AUTO_MAX_K` classes) skips both steps above: each of their
some fifty fits costs a pass over ``n k`` or ``n k^2`` numbers per Newton
iteration (7-8 CPU s in all at ``k = 100``, ``n = 5000`` for the full map;
about 50 s at ``k = 1000``, ``n = 25000`` for the diagonal one). Instead, on
the first split of ``cv`` only (80/20 for the default 5 folds), temperature
scaling and every strength
set alike to each of :data:`HOLDOUT_STRENGTHS` ``(10, 1, 0.1, 0.01)`` are
fitted from strong to weak (warm-started), stopping at the first candidate
whose held-out log-loss rises; the one-standard-error rule picks among them,
and the final map is fitted on all the rows at that strength. With
``alternatives`` (another probability floor), each is fitted on the same
split at the chosen strength and the features with the lowest held-out loss
are kept. On the CIFAR-100 outputs of ``../shared/data/dnn`` (``n = 5000``)
this takes 0.7-0.9 CPU s against 7.6-8.4 s for the two steps, and its test
log-loss is lower (docs/benchmarks.md, *Scale*). No evidence is computed
(``log_evidence`` is None).

References
----------
.. [1] D. J. C. MacKay. "Bayesian interpolation". Neural Computation 4(3),
   1992; "The evidence framework applied to classification networks", Neural
   Computation 4(5), 1992.
.. [2] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach. "Structured matrix
   scaling for multi-class calibration". AISTATS 2026. arXiv:2511.03685.
.. [3] T. Hastie, R. Tibshirani and J. Friedman. *The Elements of Statistical
   Learning*, 2nd ed., section 7.10 (the one-standard-error rule).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from sklearn.model_selection import KFold, StratifiedKFold, check_cv

from bayescal._validation import check_nonnegative_float
from bayescal.optimize import (
    FitResult,
    QuadraticPenalty,
    _make_problem,
    dense_hessian,
    fit_multinomial,
    make_penalty,
    row_log_loss,
)

__all__ = [
    "PATH_MULTIPLIERS",
    "TIED_STRENGTHS",
    "STRENGTH_BOUNDS",
    "StructuredFit",
    "check_cv_param",
    "check_strength",
    "choose_floor",
    "floor_evidence",
    "cv_splits",
    "fit_structured",
    "fit_temperature_scale",
    "one_standard_error",
    "path_candidates",
    "structured_penalty",
    "succession_floor",
    "temperature_result",
]

Array = NDArray[np.float64]

#: Multipliers of the evidence strengths checked by cross-validation, strong to
#: weak (``inf`` is temperature scaling).
PATH_MULTIPLIERS: tuple[float, ...] = (np.inf, 100.0, 10.0, 1.0)
#: Common strengths (every group alike) also checked, strong to weak; 1 is the
#: fixed default of structured matrix scaling.
TIED_STRENGTHS: tuple[float, ...] = (10.0, 1.0, 0.1)
#: Their margin in standard errors (the evidence path's is 1).
TIED_SE_FACTOR = 2.0
#: Range of the strengths searched by the evidence updates (``1e4`` is
#: temperature scaling to within a prior sd of about ``0.01 / sqrt(k)``).
STRENGTH_BOUNDS: tuple[float, float] = (1e-4, 1e4)
#: Bounds on the inverse temperature of the centre (``ln T`` in [-4, 4], as
#: :class:`~bayescal.TemperatureScaler`).
SCALE_BOUNDS: tuple[float, float] = (float(np.exp(-4.0)), float(np.exp(4.0)))
#: Evidence iterations stop when no strength moves by more than this fraction...
EVIDENCE_RTOL = 0.05
#: ... or when an update raises the log evidence by less than this (nats).
EVIDENCE_ATOL = 0.05
EVIDENCE_MAX_ITER = 100
#: The cross-validated check's fold fits stop at ``max(tol, PATH_TOL)``: they only
#: score held-out losses. Against ``1e-6``, on the CIFAR outputs of
#: ``../shared/data/dnn`` the mean held-out losses moved by at most 6e-5
#: relative (well inside their standard errors) and no choice changed
#: (docs/benchmarks.md, *Scale*); the k = 100 fit took a quarter less time.
PATH_TOL = 1e-4
#: Beyond this many classes an "auto" off-diagonal is not fitted: the default
#: full map is the diagonal one (vector scaling centred on temperature scaling,
#: with its own evidence strengths and held-out check) and the off-diagonal is
#: pinned at zero (``reg_lambda_ = inf``). Choosing the ``k (k - 1)``
#: off-diagonal strengths costs ``O(n k^2)`` per pass over tens of fits
#: (about 11 CPU s at ``k = 100``, ``n = 5000``; DESIGN section 8); a fixed
#: ``reg_lambda`` still fits it at any ``k``.
FULL_AUTO_MAX_K = 100
#: From this many classes on an all-"auto" structured map (full or diagonal)
#: is chosen without the evidence, by one held-out split along the tied
#: strengths :data:`HOLDOUT_STRENGTHS` (module docstring, *Many classes*).
HOLDOUT_MIN_K = 31
#: The tied strengths (every group alike) of that check, strong to weak, after
#: temperature scaling; the path stops once the held-out loss rises.
HOLDOUT_STRENGTHS: tuple[float, ...] = (10.0, 1.0, 0.1, 0.01)

_GROUPS = ("reg_lambda", "reg_diag", "reg_mu")


@dataclass(frozen=True)
class StructuredFit:
    """Outcome of :func:`fit_structured`.

    Attributes
    ----------
    fit : FitResult
        The final fit on all the data.
    scale : float
        Inverse temperature ``s`` of the centre ``W = s I``.
    strengths : dict
        ``{"reg_lambda", "reg_diag", "reg_mu"}`` used by the final fit
        (``inf``: pinned to temperature scaling).
    evidence_strengths : dict or None
        The type-II maximum-likelihood strengths (``None`` if none was "auto").
    n_evidence_iter : int
        Evidence updates performed.
    path : dict or None
        The cross-validation check: the candidates' strengths
        (``reg_lambda``, ``reg_diag``, ``reg_mu`` arrays, ``inf`` for
        temperature scaling), ``mean_test_log_loss``, ``se_vs_best`` and
        ``se_factor`` arrays and the chosen ``index``; ``None`` if not run.
    features : int
        Which feature matrix was used (0: ``x``; ``i``: ``alternatives[i-1]``).
    log_evidence : float or None
        Laplace log evidence at the evidence strengths (``None`` if no
        strength was "auto").
    evidences : tuple of float
        The Laplace log evidence of each feature matrix compared (``x``, then
        ``alternatives``), NaN for an alternative equal to ``x``; empty when
        the evidence chose no features.
    """

    fit: FitResult
    scale: float
    strengths: dict[str, float]
    evidence_strengths: dict[str, float] | None = None
    n_evidence_iter: int = 0
    path: dict[str, Any] | None = field(default=None, repr=False)
    features: int = 0
    log_evidence: float | None = None
    evidences: tuple[float, ...] = ()


def check_strength(value: Any, name: str, *, allow_none: bool) -> float | str | None:
    """A penalty strength parameter: a float >= 0, ``"auto"`` (or ``None`` if allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{name} must be a non-negative float or 'auto'; got {value!r}")
        return value
    if isinstance(value, Real) and not isinstance(value, bool):
        return check_nonnegative_float(value, name)
    raise ValueError(f"{name} must be a non-negative float or 'auto'; got {value!r}")


def fit_temperature_scale(
    x: Array, y: NDArray[np.intp], sample_weight: Array | None = None, *,
    max_iter: int = 100, tol: float = 1e-8,
) -> float:
    """The inverse temperature ``s = 1/T`` of the unpenalised temperature fit.

    ``ln T`` is kept in ``[-4, 4]`` (:data:`SCALE_BOUNDS`), the default of
    :class:`~bayescal.TemperatureScaler`, which this reproduces exactly.
    """
    res = fit_multinomial(x, y, structure="scalar", bounds=SCALE_BOUNDS,
                          sample_weight=sample_weight, max_iter=max_iter, tol=tol, warn=False)
    return float(res.theta[0])


def structured_penalty(k: int, strengths: dict[str, float], n: float,
                       scale: float) -> QuadraticPenalty:
    """:func:`~bayescal.optimize.make_penalty` of ``kind="structured"`` from a dict."""
    return make_penalty(k, "structured", strengths["reg_lambda"], strengths["reg_mu"],
                        reg_diag=strengths["reg_diag"], n_samples=n, scale=scale)


def _group_masks(structure: str, k: int) -> dict[str, NDArray[np.bool_]]:
    """Which packed parameters (``optimize`` packing) belong to each group."""
    eye = np.eye(k, dtype=bool)
    if structure == "full":
        z = np.zeros(k, dtype=bool)
        return {"reg_lambda": np.concatenate([(~eye).ravel(), z]),
                "reg_diag": np.concatenate([eye.ravel(), z]),
                "reg_mu": np.concatenate([np.zeros(k * k, dtype=bool), ~z])}
    if structure == "diagonal":
        return {"reg_diag": np.repeat([True, False], k), "reg_mu": np.repeat([False, True], k)}
    raise ValueError(f"structure must be 'full' or 'diagonal'; got {structure!r}")


def _posterior_variances(prob: Any, theta: Array, n: float) -> tuple[Array, float]:
    """``diag(H^-1)`` and ``ln det H`` of ``n L`` at ``theta``.

    Exact while the Hessian is dense-sized (:func:`~bayescal.optimize.dense_hessian`);
    beyond, from the per-class diagonal blocks (as
    :func:`~bayescal.optimize.log_evidence`).
    """
    st = prob.state(theta)
    if dense_hessian(prob.structure, prob.m):
        c = scipy.linalg.cho_factor(n * prob.hess_dense(st), check_finite=False)
        var = np.diag(scipy.linalg.cho_solve(c, np.eye(prob.m), check_finite=False)).copy()
        return var, float(2.0 * np.sum(np.log(np.diag(c[0]))))
    L = np.linalg.cholesky(n * prob.class_blocks(st))
    logdet = float(2.0 * np.sum(np.log(np.diagonal(L, axis1=1, axis2=2))))
    Linv = np.linalg.inv(L)  # diag((L L')^-1) = column sums of squares of L^-1
    return prob.unpack_blocks(np.einsum("aij,aij->aj", Linv, Linv)), logdet


def _evidence_strengths(
    x: Array, y: NDArray[np.intp], sw: Array, structure: str, scale: float,
    owner: dict[str, str], start: dict[str, float], free: list[str],
    init: Any, max_iter: int, tol: float, reuse: dict[str, Any] | None = None,
) -> tuple[dict[str, float], FitResult, int, float]:
    """MacKay's fixed point over the ``free`` owner groups (module docstring, step 1).

    ``owner[g]`` is the group whose strength ``g`` uses (itself, or the one it
    is tied to); ``start`` holds every owner's starting (or fixed) strength.
    ``reuse`` is shared by every fit (:func:`~bayescal.optimize.fit_multinomial`).
    """
    k = x.shape[1]
    n = float(sw.sum())
    masks = _group_masks(structure, k)
    joint = {o: np.any([masks[g] for g in masks if owner[g] == o], axis=0) for o in free}
    lo, hi = STRENGTH_BOUNDS
    cur = dict(start)

    def fit_at(values: dict[str, float], init: Any) -> tuple[FitResult, QuadraticPenalty]:
        st = {g: values[owner[g]] if g in masks else 0.0 for g in _GROUPS}
        pen = structured_penalty(k, st, n, scale)
        return fit_multinomial(x, y, structure=structure, penalty=pen, init=init,
                               sample_weight=sw, max_iter=max_iter, tol=tol, warn=False,
                               reuse=reuse), pen

    n_iter = newton = 0
    best: tuple[float, dict[str, float], FitResult, dict[str, float]] | None = None
    accel = dict.fromkeys(joint, 1.0)
    last = dict.fromkeys(joint, 0.0)
    for n_iter in range(1, EVIDENCE_MAX_ITER + 1):  # noqa: B007 -- reported
        fit, pen = fit_at(cur, init)
        newton += fit.n_iter
        prob = _make_problem(x, y, structure, pen, sw)
        D = n * prob.pen_diag
        var, logdet = _posterior_variances(prob, fit.theta, n)
        evidence = -n * fit.loss + 0.5 * float(np.sum(np.log(D))) - 0.5 * logdet
        if best is not None and evidence < best[0]:
            if max(accel.values()) > 1.0:  # an accelerated step overshot: plain step instead
                cur, init = dict(best[3]), best[2]
                accel = dict.fromkeys(joint, 1.0)
                last = dict.fromkeys(joint, 0.0)
                continue
            break  # MacKay's plain step lowered the evidence: keep the best point
        rise = np.inf if best is None else evidence - best[0]
        dev2 = (fit.theta - prob.pen_center) ** 2
        plain = dict(cur)
        for o, m in joint.items():
            gamma = max(float(np.sum(1.0 - D[m] * var[m])), 0.0)
            fitted = float(np.sum(D[m] * dev2[m]))
            plain[o] = float(np.clip(cur[o] * gamma / fitted, lo, hi)) if fitted > 0 else hi
        best = (evidence, dict(cur), fit, plain)
        init = fit
        if rise <= EVIDENCE_ATOL:
            break  # on a ridge of the evidence the strengths no longer matter
        moved = 0.0
        for o in joint:
            step = float(np.log(plain[o] / cur[o]))
            moved = max(moved, abs(step))
            # a group heading steadily one way (often to a bound) doubles its step
            accel[o] = min(2.0 * accel[o], 16.0) if step * last[o] > 0 else 1.0
            last[o] = step
            cur[o] = float(np.clip(cur[o] * np.exp(accel[o] * step), lo, hi))
        if moved <= np.log1p(EVIDENCE_RTOL):
            break
    assert best is not None
    cur, fit = best[1], best[2]
    # n_iter of the result: every Newton iteration spent on the full data
    fit = dataclasses.replace(fit, n_iter=newton)
    # best[0] is log_evidence(x, y, penalty, fit.theta) at these strengths
    return {g: cur[owner[g]] if g in masks else 0.0 for g in _GROUPS}, fit, n_iter, best[0]


def check_cv_param(cv: Any, *, allow_none: bool = False) -> Any:
    """Validate a ``cv`` parameter: an int >= 2 or a splitter (or None if allowed)."""
    if cv is None and allow_none:
        return cv
    if cv is None or isinstance(cv, bool | str) or (isinstance(cv, Integral) and cv < 2):
        none = "None, " if allow_none else ""
        raise ValueError(f"cv must be {none}an integer >= 2 or a CV splitter; got {cv!r}")
    return cv


def cv_splits(cv: Any, y: NDArray[np.intp]) -> list[tuple[Any, Any]]:
    """Folds for the internal cross-validation of a calibrator.

    An int ``cv`` means :class:`~sklearn.model_selection.StratifiedKFold`
    (unshuffled, as scikit-learn's default; classes with fewer than ``cv``
    samples are spread over as many folds as they have samples), or
    :class:`KFold` when every class has fewer than ``cv`` samples; anything else goes through
    :func:`sklearn.model_selection.check_cv`.

    Raises
    ------
    ValueError
        If there are fewer samples than folds.
    """
    n = len(y)
    if isinstance(cv, Integral) and not isinstance(cv, bool):
        if cv > n:
            raise ValueError(f"cv={cv} folds need at least {cv} samples; got n_samples={n}")
        if np.bincount(y).max() < cv:  # too few in every class to stratify
            return list(KFold(cv).split(np.zeros((n, 1)), y))
        splitter = StratifiedKFold(cv)
    else:
        splitter = check_cv(cv, y, classifier=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class",
                                category=UserWarning)
        return list(splitter.split(np.zeros((n, 1)), y))


def path_candidates(strengths: dict[str, float], structure: str
                    ) -> tuple[list[dict[str, float]], list[float]]:
    """The candidates of the cross-validated check, in order of preference.

    Temperature scaling (every strength ``inf``), the evidence strengths times
    each of :data:`PATH_MULTIPLIERS` (one-standard-error margin), then every
    strength set to each of :data:`TIED_STRENGTHS` (margin
    :data:`TIED_SE_FACTOR` standard errors: a map away from the evidence's
    shape must clearly earn its place).

    Returns
    -------
    candidates : list of dict
        Strengths of each candidate (``inf`` pins a group at the centre).
    factors : list of float
        The standard-error margin of each candidate.
    """
    groups = ("reg_lambda", "reg_diag", "reg_mu") if structure == "full" else ("reg_diag",
                                                                               "reg_mu")
    out, factors = [], []
    for m in PATH_MULTIPLIERS:
        out.append({g: (v * m if g in groups else 0.0) for g, v in strengths.items()})
        factors.append(1.0)
    for c in TIED_STRENGTHS:
        out.append(_tied(c, groups))
        factors.append(TIED_SE_FACTOR)
    return out, factors


def _path_check(
    x: Array, y: NDArray[np.intp], sw: Array, structure: str, strengths: dict[str, float],
    splits: list[tuple[Any, Any]], max_iter: int, tol: float,
) -> dict[str, Any]:
    """Held-out losses of :func:`path_candidates` (module docstring, step 2)."""
    k = x.shape[1]
    cands, factors = path_candidates(strengths, structure)
    loss = np.full((len(cands), len(y)), np.nan)
    for tr, te in splits:
        s = fit_temperature_scale(x[tr], y[tr], sw[tr])
        start: Any = (s * np.eye(k), np.zeros(k))
        init = start
        reuse: dict[str, Any] = {}  # one preconditioner for the fold's path
        for i, st in enumerate(cands):
            if i == len(PATH_MULTIPLIERS):
                init = start  # the tied strengths: a second path from temperature scaling
            if all(np.isinf(v) for g, v in st.items() if v != 0.0):
                W, b = start
            else:
                pen = structured_penalty(k, st, float(sw[tr].sum()), s)
                res = fit_multinomial(x[tr], y[tr], structure=structure, penalty=pen, init=init,
                                      sample_weight=sw[tr], max_iter=max_iter, tol=tol,
                                      warn=False, reuse=reuse)
                init = res
                W, b = res.W, res.b
            loss[i, te] = _heldout_loss(x[te], y[te], W, b, structure)
    used = ~np.isnan(loss[0])
    index, info = one_standard_error(loss[:, used], sw[used], factors=factors)
    return {**{g: np.array([c[g] for c in cands]) for g in _GROUPS}, **info,
            "se_factor": np.array(factors)}


def _heldout_loss(x: Array, y: NDArray[np.intp], W: Array, b: Array, structure: str) -> Array:
    """Per-row log-loss of ``softmax(W x + b)`` (``W`` diagonal: its diagonal times ``x``)."""
    return row_log_loss(x * np.diag(W) + b if structure == "diagonal" else x @ W.T + b, y)


def _holdout_path(
    x: Array, y: NDArray[np.intp], sw: Array, structure: str, split: tuple[Any, Any],
    max_iter: int, tol: float,
) -> tuple[dict[str, Any], list[Any]]:
    """Held-out losses along temperature scaling and :data:`HOLDOUT_STRENGTHS` on one split.

    The fits on the split's training rows are warm-started from strong to
    weak; the path stops after the first candidate whose mean held-out loss
    is above the previous one's. Returns the check's record (as
    :func:`_path_check`'s, over the candidates fitted) and the fits (``None``
    for temperature scaling).
    """
    tr, te = split
    k = x.shape[1]
    masks = _group_masks(structure, k)
    s = fit_temperature_scale(x[tr], y[tr], sw[tr])
    init: Any = (s * np.eye(k), np.zeros(k))
    losses = [_heldout_loss(x[te], y[te], *init, structure)]
    fits: list[Any] = [None]
    strengths = [np.inf]
    reuse: dict[str, Any] = {}
    w = sw[te]
    for c in HOLDOUT_STRENGTHS:
        pen = structured_penalty(k, _tied(c, masks), float(sw[tr].sum()), s)
        init = fit_multinomial(x[tr], y[tr], structure=structure, penalty=pen, init=init,
                               sample_weight=sw[tr], max_iter=max_iter, tol=tol, warn=False,
                               reuse=reuse)
        losses.append(_heldout_loss(x[te], y[te], init.W, init.b, structure))
        fits.append(init)
        strengths.append(c)
        if losses[-1] @ w > losses[-2] @ w:
            break
    index, info = one_standard_error(np.array(losses), w)
    return {**{g: np.array([_tied(c, masks)[g] for c in strengths]) for g in _GROUPS}, **info,
            "se_factor": np.ones(len(strengths))}, fits


def _tied(c: float, groups: Any) -> dict[str, float]:
    """Every group in ``groups`` at strength ``c``, the others at 0 (the structure lacks them)."""
    return {g: (c if g in groups else 0.0) for g in _GROUPS}


def _fit_holdout(
    x: Array, y: NDArray[np.intp], sw: Array, structure: str, cv: Any, max_iter: int,
    tol: float, init: Any, alternatives: tuple[Array, ...],
) -> StructuredFit:
    """The all-"auto" structured map at many classes (module docstring, *Many classes*).

    The strength is chosen on ``x`` (:func:`_holdout_path`); each alternative
    feature matrix is then fitted on the same split at that strength, and the
    features with the lowest mean held-out loss are kept (ties keep the first).
    """
    k = x.shape[1]
    tr, te = split = cv_splits(cv, y)[0]
    fold_tol = max(tol, PATH_TOL)
    path, fits = _holdout_path(x, y, sw, structure, split, max_iter, fold_tol)
    i = path["index"]
    strengths = {g: float(path[g][i]) for g in _GROUPS}
    w = sw[te]
    best = (float(path["mean_test_log_loss"][i]), 0, x, fits[i])
    for index, xa in enumerate(alternatives, start=1):
        if np.array_equal(xa, x):
            continue  # the same features (no score below the floor): the same loss
        s = fit_temperature_scale(xa[tr], y[tr], sw[tr])
        if fits[i] is None:
            W, b, res = s * np.eye(k), np.zeros(k), None
        else:
            res = fit_multinomial(xa[tr], y[tr], structure=structure,
                                  penalty=structured_penalty(k, strengths, float(sw[tr].sum()),
                                                             s),
                                  init=fits[i], sample_weight=sw[tr], max_iter=max_iter,
                                  tol=fold_tol, warn=False)
            W, b = res.W, res.b
        mean = float(_heldout_loss(xa[te], y[te], W, b, structure) @ w / w.sum())
        if mean < best[0]:
            best = (mean, index, xa, res)
    _, index, x, start = best
    s = fit_temperature_scale(x, y, sw)
    if start is None:
        fit = temperature_result(x, y, sw, structure, s)
    else:
        fit = fit_multinomial(x, y, structure=structure,
                              penalty=structured_penalty(k, strengths, float(sw.sum()), s),
                              init=start if init is None else init, sample_weight=sw,
                              max_iter=max_iter, tol=tol, warn=False)
    return StructuredFit(fit, s, strengths, None, 0, path, index, None)


def one_standard_error(loss: Array, sample_weight: Array | None = None, *,
                       factors: Any = None) -> tuple[int, dict[str, Any]]:
    """The one-standard-error rule on per-sample held-out losses.

    Parameters
    ----------
    loss : ndarray of shape (n_candidates, n_samples)
        Held-out loss of every sample under each candidate, candidates ordered
        from the strongest (simplest) to the weakest.
    sample_weight : ndarray of shape (n_samples,), optional
        Weights as counts.
    factors : sequence of float, optional
        Margin of each candidate in standard errors (default 1 for all).

    Returns
    -------
    index : int
        The first (strongest) candidate whose mean loss exceeds the best mean
        by at most ``factors[i]`` standard errors of the paired per-sample
        differences to the best.
    info : dict
        ``mean_test_log_loss``, ``se_vs_best`` (arrays over the candidates)
        and ``index``.
    """
    w = np.ones(loss.shape[1]) if sample_weight is None else sample_weight
    wsum = float(w.sum())
    mean = loss @ w / wsum
    best = int(np.argmin(mean))
    d = loss - loss[best]
    dbar = d @ w / wsum
    se = np.sqrt(np.maximum(((d - dbar[:, None]) ** 2) @ w / wsum, 0.0) / max(wsum - 1.0, 1.0))
    f = np.ones(len(mean)) if factors is None else np.asarray(factors, dtype=float)
    index = next(i for i in range(len(mean)) if mean[i] - mean[best] <= f[i] * se[i])
    return index, {"mean_test_log_loss": mean, "se_vs_best": se, "index": index}


def fit_structured(
    x: Array,
    y: NDArray[np.intp],
    *,
    structure: str = "full",
    reg_lambda: float | str = "auto",
    reg_diag: float | str | None = None,
    reg_mu: float | str | None = None,
    sample_weight: Array | None = None,
    cv: Any = 5,
    max_iter: int = 100,
    tol: float = 1e-8,
    init: Any = None,
    alternatives: tuple[Array, ...] = (),
) -> StructuredFit:
    """Fit the structured map, choosing the "auto" strengths (module docstring).

    Parameters
    ----------
    x : ndarray of shape (n_samples, k)
        Features (validated by the caller).
    y : ndarray of shape (n_samples,)
        Integer labels ``0 .. k-1``.
    structure : {"full", "diagonal"}, default="full"
        Full ``W`` (Dirichlet calibration, matrix scaling) or diagonal (vector
        scaling, which has no off-diagonal: ``reg_lambda`` is unused). A full
        ``W`` with ``reg_lambda="auto"`` beyond :data:`FULL_AUTO_MAX_K` classes
        is fitted as the diagonal one, its off-diagonal pinned at zero
        (``strengths["reg_lambda"] = inf``).
    reg_lambda, reg_diag, reg_mu : float, "auto" or None
        Strength of each group (non-negative floats, validated by the
        caller). ``None`` ties a group to the lead group's strength, so that
        they are one strength (chosen together when "auto"): the lead is
        ``reg_lambda`` for the full structure, ``reg_diag`` for the diagonal
        one (where ``reg_diag=None`` means "auto").
    sample_weight : ndarray of shape (n_samples,), optional
        Weights as counts (the evidence uses their sum as ``n``).
    cv : int, splitter or None, default=5
        Folds of the one-standard-error check, which runs only when every
        strength is "auto" (the strong end of its path is then temperature
        scaling); ``None`` skips it.
    max_iter, tol
        Newton settings of every fit.
    init : FitResult, (W, b) or None
        Start of the first fit (default: temperature scaling).
    alternatives : tuple of ndarray, optional
        Other feature matrices for the same rows (e.g. the log-probabilities
        under another floor): when some strength is "auto", each gets its own
        temperature and evidence strengths, and the features with the largest
        log evidence are kept (``StructuredFit.features``: 0 for ``x``, ``i``
        for ``alternatives[i - 1]``; ties keep the first). An alternative equal
        to ``x`` (a floor below every score) is not fitted again: its evidence
        would tie with ``x``'s.

    Returns
    -------
    StructuredFit
    """
    k = x.shape[1]
    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    n = float(sw.sum())
    masks = _group_masks(structure, k)
    lead = "reg_lambda" if structure == "full" else "reg_diag"
    given = {"reg_lambda": reg_lambda, "reg_diag": reg_diag, "reg_mu": reg_mu}
    if structure == "diagonal" and reg_diag is None:
        given["reg_diag"] = "auto"
    if structure == "full" and k > FULL_AUTO_MAX_K and reg_lambda == "auto":
        diag = fit_structured(
            x, y, structure="diagonal", reg_diag="auto" if reg_diag is None else reg_diag,
            reg_mu=reg_mu, sample_weight=sample_weight, cv=cv, max_iter=max_iter, tol=tol,
            init=None if init is None else _as_full(init, k), alternatives=alternatives)
        return _diagonal_as_full(diag, x.shape[1])
    owner = {g: (lead if given[g] is None else g) for g in masks}
    owners = sorted(set(owner.values()), key=_GROUPS.index)
    free = [o for o in owners if given[o] == "auto"]
    if k >= HOLDOUT_MIN_K and cv is not None and free == owners:
        return _fit_holdout(x, y, sw, structure, cv, max_iter, tol, init, alternatives)
    start = {o: 1.0 if given[o] == "auto" else float(given[o]) for o in owners}
    if not free:
        s = fit_temperature_scale(x, y, sw)
        strengths = {g: start[owner[g]] if g in masks else 0.0 for g in _GROUPS}
        first = init if init is not None else (s * np.eye(k), np.zeros(k))
        fit = fit_multinomial(x, y, structure=structure,
                              penalty=structured_penalty(k, strengths, n, s), init=first,
                              sample_weight=sw, max_iter=max_iter, tol=tol, warn=False)
        return StructuredFit(fit, s, strengths)
    best = None
    evidences = [float("nan")] * (1 + len(alternatives))
    for index, xa in enumerate((x, *alternatives)):
        if index and np.array_equal(xa, x):
            continue  # the same features (e.g. no score below the floor): the same evidence
        s = fit_temperature_scale(xa, y, sw)
        first = init if init is not None else (s * np.eye(k), np.zeros(k))
        reuse: dict[str, Any] = {}
        ev, fit, n_ev, evidence = _evidence_strengths(xa, y, sw, structure, s, owner, start,
                                                      free, first, max_iter, tol, reuse)
        evidences[index] = float(evidence)
        if best is None or evidence > best[0]:
            best = (evidence, index, xa, s, ev, fit, n_ev, reuse)
    evidence, index, x, s, ev, fit, n_ev, reuse = best
    if cv is None or len(free) < len(owners):
        return StructuredFit(fit, s, ev, ev, n_ev, None, index, evidence, tuple(evidences))
    path = _path_check(x, y, sw, structure, ev, cv_splits(cv, y), max_iter, max(tol, PATH_TOL))
    strengths = {g: float(path[g][path["index"]]) for g in _GROUPS}
    if all(np.isinf(v) for g, v in strengths.items() if g in masks):
        fit = dataclasses.replace(temperature_result(x, y, sw, structure, s), n_iter=fit.n_iter)
    elif strengths != ev:
        spent = fit.n_iter
        fit = fit_multinomial(x, y, structure=structure,
                              penalty=structured_penalty(k, strengths, n, s), init=fit,
                              sample_weight=sw, max_iter=max_iter, tol=tol, warn=False,
                              reuse=reuse)
        fit = dataclasses.replace(fit, n_iter=spent + fit.n_iter)
    return StructuredFit(fit, s, strengths, ev, n_ev, path, index, evidence, tuple(evidences))


def _as_full(init: Any, k: int) -> tuple[Array, Array]:
    """A start of any form as ``(W, b)``."""
    if isinstance(init, FitResult):
        return init.W, init.b
    if isinstance(init, tuple):
        return init
    theta = np.asarray(init, dtype=float)
    return theta[: k * k].reshape(k, k), theta[k * k:]


def _diagonal_as_full(sf: StructuredFit, k: int) -> StructuredFit:
    """A diagonal structured fit read as the full map with its off-diagonal pinned at 0."""
    fit = sf.fit
    theta = np.concatenate([fit.W.ravel(), fit.b])
    full = dataclasses.replace(fit, theta=theta, structure="full")
    pinned = {**sf.strengths, "reg_lambda": np.inf}
    ev = None if sf.evidence_strengths is None else {**sf.evidence_strengths,
                                                      "reg_lambda": np.inf}
    path = None
    if sf.path is not None:
        path = {**sf.path, "reg_lambda": np.full(len(sf.path["reg_diag"]), np.inf)}
    return dataclasses.replace(sf, fit=full, strengths=pinned, evidence_strengths=ev, path=path)


def succession_floor(k: int, n: float) -> float:
    """``1 / (k (n + 1))``: the smallest probability ``n`` samples resolve (rule of succession).

    The alternative probability floor of ``eps="auto"``: it tames exact zeros
    (e.g. from trees), whose log-features would otherwise sit at ``ln EPS``.
    """
    return 1.0 / (k * (float(n) + 1.0))


def choose_floor(x: Array, y: NDArray[np.intp], sample_weight: Array | None = None,
                 structure: str = "full") -> float | None:
    """The floor of ``eps="auto"`` for features ``x`` floored at EPS: the succession floor or None.

    The structured fit with evidence strengths (:func:`fit_structured`, no
    cross-validation) on ``x`` and on ``max(x, ln succession_floor)``; the
    floor is returned when its Laplace evidence is the larger, ``None``
    (keep ``x``) otherwise or when the floor is not above EPS. The same
    choice as :class:`~bayescal.DirichletCalibrator`'s ``eps="auto"``.
    """
    found = floor_evidence(x, y, sample_weight, structure)
    return None if found is None or not found[1] > found[0] else found[2]


def floor_evidence(x: Array, y: NDArray[np.intp], sample_weight: Array | None = None,
                   structure: str = "full") -> tuple[float, float, float] | None:
    """The Laplace log evidence of ``x`` and of ``x`` floored at the succession floor.

    The structured fit with evidence strengths (:func:`fit_structured`, no
    cross-validation) on ``x`` (features floored at EPS) and on
    ``max(x, ln f)``, ``f = 1 / (k (n + 1))`` (:func:`succession_floor`).

    Returns
    -------
    (log_evidence_x, log_evidence_floored, f) or None
        ``None`` when the two are the same features (no score below ``f``,
        or ``f`` not above EPS): there is no choice to make.
    """
    from bayescal._validation import EPS

    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    floor = succession_floor(x.shape[1], sw.sum())
    floored = np.maximum(x, np.log(floor))
    if floor <= EPS or np.array_equal(floored, x):
        return None
    sf = fit_structured(x, y, structure=structure, reg_lambda="auto", reg_diag="auto",
                        reg_mu="auto", sample_weight=sw, cv=None, alternatives=(floored,))
    return sf.evidences[0], sf.evidences[1], floor


def temperature_result(x: Array, y: NDArray[np.intp], sw: Array, structure: str,
                        s: float) -> FitResult:
    """Temperature scaling ``W = s I, b = 0`` as a :class:`FitResult` of ``structure``."""
    k = x.shape[1]
    W, b = s * np.eye(k), np.zeros(k)
    theta = np.concatenate([W.ravel() if structure == "full" else np.diag(W), b])
    loss = _make_problem(x, y, structure, None, sw).state(theta).loss
    return FitResult(W, b, loss, 0.0, 0, True,
                     "temperature scaling: the strong end of the structured path", theta,
                     structure)
