"""The schema of model files: what a fitted estimator's state and parameters may be.

:mod:`bayescal.model_files` writes and reads model files; this module declares
what they may hold, as data:

* :data:`STATE_SCHEMAS`: per estimator class, its fitted attributes as
  :class:`Field` entries (kind, shape in terms of the number of classes
  ``k``, finiteness, ranges), which attributes are derived from them and how
  (a function of this module, chosen by the class, never by the file), and
  whether ``W``, ``b`` are the stored state or a checked copy;
* the hyperparameters: their names are the estimator's ``get_params()``; the
  JSON types a value may have are read from the constructor's annotations
  (``float``, ``int``, ``str``, ``bool``, ``None``, ``tuple`` and unions of
  them); values of other types need a :class:`ParamCodec` in
  :data:`PARAM_CODECS`.

A new estimator class becomes savable by adding one entry to
:data:`STATE_SCHEMAS`.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, NoneType, UnionType
from typing import Any

import numpy as np

__all__ = [
    "COMMON_FIELDS",
    "PARAM_CODECS",
    "STATE_SCHEMAS",
    "Field",
    "ParamCodec",
    "StateSchema",
]

#: Relative tolerance of the redundant copies (``A``, ``c``; ``W``, ``b`` when
#: derived) against the values recomputed on load.
COPY_RTOL = 1e-12

_MODEL_ID_RE = re.compile(r"[0-9a-f]{16,64}")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


# ---------------------------------------------------------------------------
# the declarative schema
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """One stored value of a model file's fitted state.

    Parameters
    ----------
    kind : {"float", "int", "bool", "str", "record", "list"}
        Element type. ``float`` accepts JSON numbers; ``int`` JSON integers;
        ``record`` a JSON object with exactly the keys of ``fields``; ``list``
        a JSON list of ``item``.
    shape : tuple of int or str, default=()
        Array shape (``()``: a scalar). ``"k"`` is the number of classes; any
        other name is a size bound by its first use within the estimator (or
        within one list item); ``"m+1"`` is one more than ``"m"``.
    finite : bool, default=True
        Refuse NaN and infinities (which a file stores as the strings
        ``"nan"``, ``"inf"``, ``"-inf"`` where allowed).
    minimum, maximum : float, optional
        Bounds on every element (inclusive unless ``exclusive``).
    exclusive : bool, default=False
        The bounds are strict.
    nullable : bool, default=False
        JSON ``null`` stands for ``None``.
    required : bool, default=True
        When False, the key may be absent (the attribute is then not set).
    when : (str, object), optional
        Present if and only if hyperparameter ``when[0]`` equals ``when[1]``.
    fields : mapping of str to Field, optional
        ``kind="record"``: the keys, in order.
    item : Field, optional
        ``kind="list"``: every item.
    length : int or str, optional
        ``kind="list"``: the length (a size, like a shape entry).
    make : callable, optional
        ``kind="record"``: the class rebuilt from the record's values (chosen
        by the schema, never by the file).
    check : callable, optional
        ``check(value, where)`` raises :class:`ValueError` on a decoded value
        that breaks an invariant (e.g. a probability vector).
    """

    kind: str
    shape: tuple[int | str, ...] = ()
    finite: bool = True
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    nullable: bool = False
    required: bool = True
    when: tuple[str, Any] | None = None
    fields: Mapping[str, Field] | None = None
    item: Field | None = None
    length: int | str | None = None
    make: Callable[..., Any] | None = None
    check: Callable[[Any, str], None] | None = None


@dataclass(frozen=True)
class StateSchema:
    """The fitted state of one estimator class in a model file.

    Parameters
    ----------
    fields : mapping of str to Field
        The values under ``"fitted"``, by attribute name (or by the names that
        ``dump`` returns).
    derived : tuple of str
        Attributes rebuilt by ``restore`` (not stored).
    restore : callable, optional
        ``restore(estimator, state, k)``: the derived attributes from the
        decoded ``state``.
    dump : callable, optional
        ``dump(estimator)``: the stored values (default: the attributes named
        in ``fields``).
    linear_map : {"stored", "copy", "none"}
        ``"stored"``: ``coef_`` and ``intercept_`` are stored as the top-level
        ``W``, ``b``; ``"copy"``: ``W``, ``b`` are written as checked copies of
        the derived map; ``"none"``: no ``W``, ``b`` (the map is not a k x k
        matrix worth storing, or not linear).
    posterior : bool
        The state lives in a netCDF posterior beside the JSON (Bayesian
        estimators); ``fields`` then holds what identifies it.
    describe : str
        The map in words, with ``{x}`` standing for the features.
    check : callable, optional
        ``check(state, params, k, where)`` for invariants across fields (and
        against the hyperparameters and the number of classes ``k``).
    fixed_params : tuple of str
        Hyperparameters that ``fit`` stores unchanged as ``<name>_`` when they
        are numbers (e.g. ``reg_lambda=1e-3`` gives ``reg_lambda_ == 1e-3``);
        a file whose number disagrees with its fitted value is refused.
    """

    fields: Mapping[str, Field]
    derived: tuple[str, ...] = ()
    restore: Callable[[Any, dict[str, Any], int], dict[str, Any]] | None = None
    dump: Callable[[Any], dict[str, Any]] | None = None
    linear_map: str = "none"
    posterior: bool = False
    describe: str = ""
    check: Callable[[dict[str, Any], dict[str, Any], int, str], None] | None = None
    fixed_params: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParamCodec:
    """How a hyperparameter value that is not plain JSON is stored.

    ``accepts(value)`` says whether ``encode`` applies; ``decode`` rebuilds the
    value from its JSON form (a JSON object), raising :class:`ValueError`.
    """

    accepts: Callable[[Any], bool]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _f(kind: str, *shape: int | str, **kw: Any) -> Field:
    return Field(kind, tuple(shape), **kw)


def _record(**fields: Field) -> Mapping[str, Field]:
    return MappingProxyType(fields)


def _check_pi(value: Any, where: str) -> None:
    total = float(np.sum(value))
    if abs(total - 1.0) > 1e-8:
        raise ValueError(f"{where} must sum to 1 (a probability vector); sums to {total!r}")


def _check_increasing(record: dict[str, Any], where: str) -> None:
    x, y = record["x"], record["y"]
    if x.size and not (np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0)):
        raise ValueError(f"{where}: x must increase strictly and y must not decrease")


def _check_edges(record: Any, where: str) -> None:
    if np.any(np.diff(record["edges"]) <= 0):
        raise ValueError(f"{where}.edges must increase strictly")


def _check_model_id(value: str, where: str) -> None:
    if not _MODEL_ID_RE.fullmatch(value):
        raise ValueError(f"{where} must be a hexadecimal model id; got {value!r}")


def _check_ensemble(state: dict[str, Any], params: dict[str, Any], k: int, where: str) -> None:
    coefs = state.get("coefs_")
    if coefs is None:
        return
    for name, many in (("coef_", coefs), ("intercept_", state["intercepts_"])):
        mean = many.mean(axis=0)
        if not _close(state[name], mean):
            raise ValueError(
                f"{where}: {'W' if name == 'coef_' else 'b'} must be the mean of the fold maps "
                f"({'coefs_' if name == 'coef_' else 'intercepts_'}) of an ensemble"
            )


def _ovr_maps(state: dict[str, Any]) -> int:
    for name in ("coef_", "x_thresholds_", "bin_edges_"):
        if name in state:
            return len(state[name])
    return 0


def _check_ovr_maps(state: dict[str, Any], params: dict[str, Any], k: int, where: str) -> None:
    """As many binary maps as ``k`` classes need: one per class, one for two classes."""
    from bayescal.calibrators.ovr import OneVsRestCalibratorMixin

    del params
    have = _ovr_maps(state)
    need = len(OneVsRestCalibratorMixin._mapped_columns(k))
    if have != need:
        raise ValueError(f"{where}: fitted holds {have} one-vs-rest maps; {k} classes need "
                         f"{need} (one per class; one for class 1 of two classes)")


def _check_isotonic(state: dict[str, Any], params: dict[str, Any], k: int, where: str) -> None:
    _check_ovr_maps(state, params, k, where)
    xs, ys = state["x_thresholds_"], state["y_thresholds_"]
    if len(xs) != len(ys):
        raise ValueError(f"{where}: x_thresholds_ and y_thresholds_ hold {len(xs)} and "
                         f"{len(ys)} maps")
    for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if x.shape != y.shape:
            raise ValueError(f"{where}: map {j} has {x.size} x and {y.size} y thresholds")
        _check_increasing({"x": x, "y": y}, f"{where}: map {j}")


def _check_binning(state: dict[str, Any], params: dict[str, Any], k: int, where: str) -> None:
    _check_ovr_maps(state, params, k, where)
    edges, values = state["bin_edges_"], state["bin_values_"]
    if len(edges) != len(values):
        raise ValueError(f"{where}: bin_edges_ and bin_values_ hold {len(edges)} and "
                         f"{len(values)} maps")
    for j, (e, v) in enumerate(zip(edges, values, strict=True)):
        if v.size != e.size + 1:
            raise ValueError(f"{where}: map {j} has {e.size} inner edges but {v.size} values "
                             f"(one more than the edges is required)")
        _check_edges({"edges": e}, f"{where}: map {j}")
    _check_bin_count(edges, params, where)


def _check_bin_count(edges: list[Any], params: dict[str, Any], where: str) -> None:
    """``n_bins - 1`` inner edges per map (at most that many with equal-frequency bins)."""
    n_bins, strategy = params.get("n_bins"), params.get("strategy")
    if n_bins is None:
        return
    sizes = [int(e.size) for e in edges]
    width = strategy == "width"
    if any(n != n_bins - 1 if width else n > n_bins - 1 for n in sizes):
        raise ValueError(
            f"{where}: hyperparameter n_bins={n_bins!r} contradicts fitted.bin_edges_, whose "
            f"maps have {sizes} inner edges ({'' if width else 'at most '}n_bins - 1 with "
            f"strategy={strategy!r})"
        )


def _dirichlet_fit_class() -> Any:
    from bayescal.dirichlet import DirichletFit

    return DirichletFit


def _restore_temperature(est: Any, s: dict[str, Any], k: int) -> dict[str, Any]:
    from bayescal.maps import temperature_to_dirlin

    W, b = temperature_to_dirlin(s["temperature_"], k)
    return {"coef_": W, "intercept_": b}


def _restore_vector(est: Any, s: dict[str, Any], k: int) -> dict[str, Any]:
    return {"coef_": np.diag(s["weights_"]), "intercept_": s["bias_"].copy()}


def _restore_generative(est: Any, s: dict[str, Any], k: int) -> dict[str, Any]:
    from bayescal.maps import dirgen_to_dirlin

    W, b = dirgen_to_dirlin(s["alpha_"], s["pi_"])
    return {"coef_": W, "intercept_": b}


_DIRICHLET_FIT = Field(
    "record",
    make=lambda **kw: _dirichlet_fit_class()(**kw),
    fields=_record(
        alpha=_f("float", "k", minimum=0.0, exclusive=True),
        loglik=_f("float", finite=False),
        grad_norm=_f("float", finite=False, minimum=0.0),
        n_iter=_f("int", minimum=0),
        converged=_f("bool"),
        message=_f("str"),
    ),
)

_DIRICHLET_STATE = StateSchema(
    fields=_record(
        n_iter_=_f("int", minimum=0),
        converged_=_f("bool"),
        loss_=_f("float", finite=False),
        # inf: the structured penalty's choice of temperature scaling itself
        reg_lambda_=_f("float", minimum=0.0, finite=False),
        reg_mu_=_f("float", minimum=0.0, nullable=True, finite=False),
        reg_diag_=_f("float", minimum=0.0, nullable=True, finite=False),
        temperature_=_f("float", minimum=0.0, exclusive=True, nullable=True),
        eps_=_f("float", minimum=0.0, maximum=1.0, exclusive=True),
        cv_results_=Field("record", nullable=True, fields=_record(
            reg_lambda=_f("float", "m", minimum=0.0),
            reg_mu=_f("float", "m", finite=False),
            mean_test_log_loss=_f("float", "m", finite=False),
        )),
        selection_=Field("record", nullable=True, when=("reg", "structured"), fields=_record(
            # inf: the off-diagonal not fitted (beyond structured.FULL_AUTO_MAX_K classes)
            # None: chosen without the evidence (structured.HOLDOUT_MIN_K classes or more)
            evidence_reg_lambda=_f("float", minimum=0.0, finite=False, nullable=True),
            evidence_reg_diag=_f("float", minimum=0.0, nullable=True),
            evidence_reg_mu=_f("float", minimum=0.0, nullable=True),
            n_evidence_iter=_f("int", minimum=0),
            log_evidence=_f("float", nullable=True),
            path_reg_lambda=_f("float", "p", minimum=0.0, finite=False, nullable=True),
            path_reg_diag=_f("float", "p", minimum=0.0, finite=False, nullable=True),
            path_reg_mu=_f("float", "p", minimum=0.0, finite=False, nullable=True),
            path_mean_test_log_loss=_f("float", "p", finite=False, nullable=True),
            path_se_vs_best=_f("float", "p", minimum=0.0, nullable=True),
            path_se_factor=_f("float", "p", minimum=0.0, nullable=True),
            path_index=_f("int", minimum=0, nullable=True),
        )),
        coefs_=_f("float", "folds", "k", "k", when=("ensemble", True)),
        intercepts_=_f("float", "folds", "k", when=("ensemble", True)),
    ),
    linear_map="stored",
    describe="calibrated = softmax(W x + b) with {x}",
    check=_check_ensemble,
    fixed_params=("reg_lambda", "reg_mu", "reg_diag"),
)

_LOG_X = ("x = max(ln q, ln eps) for probabilities q (from logits z: "
          "x = max(log_softmax(z), ln eps))")
_BAYES_DESCRIPTION = (
    "calibrated = the posterior average of softmax(W x + b) over the draws in the posterior "
    "file, with {x}; W, b here: the map at the posterior mode"
)

#: The fitted state of every savable estimator class, by class name.
STATE_SCHEMAS: Mapping[str, StateSchema] = MappingProxyType({
    "DirichletCalibrator": _DIRICHLET_STATE,
    "MatrixScaler": _DIRICHLET_STATE,
    "TemperatureScaler": StateSchema(
        fields=_record(
            temperature_=_f("float", minimum=0.0, exclusive=True),
            n_iter_=_f("int", minimum=0),
            converged_=_f("bool"),
        ),
        derived=("coef_", "intercept_"),
        restore=_restore_temperature,
        describe="calibrated = softmax(x / T), T = fitted.temperature_ (W = I / T, b = 0), "
                 "with {x}",
    ),
    "VectorScaler": StateSchema(
        fields=_record(
            weights_=_f("float", "k"),
            bias_=_f("float", "k"),
            n_iter_=_f("int", minimum=0),
            converged_=_f("bool"),
            reg_diag_=_f("float", minimum=0.0, nullable=True, finite=False),
            reg_mu_=_f("float", minimum=0.0, nullable=True, finite=False),
            temperature_=_f("float", minimum=0.0, exclusive=True, nullable=True),
        ),
        derived=("coef_", "intercept_"),
        restore=_restore_vector,
        fixed_params=("reg_diag", "reg_mu"),
        describe="calibrated = softmax(w * x + b), w = fitted.weights_, b = fitted.bias_ "
                 "(W = diag(w)), with {x}",
    ),
    "GenerativeDirichletCalibrator": StateSchema(
        fields=_record(
            alpha_=_f("float", "k", "k", minimum=0.0, exclusive=True),
            pi_=_f("float", "k", minimum=0.0, maximum=1.0, check=_check_pi),
            class_count_=_f("float", "k", minimum=0.0),
            feature_sum_=_f("float", "k", "k", maximum=0.0),
            # prior="auto": sums of F, F', F'' at the 33 TEMPERATURE_NODES; None otherwise
            temperature_stats_=_f("float", "nodes", 3, nullable=True),
            n_iter_=_f("int", minimum=0),
            converged_=_f("bool"),
            # k per-class fits, or none when prior="auto" chose temperature scaling
            fits_=Field("list", item=_DIRICHLET_FIT),
            prior_strength_=_f("float", minimum=0.0, exclusive=True, finite=False,
                               nullable=True),
            prior_center_=_f("float", "k", "k", minimum=0.0, exclusive=True, nullable=True),
            cv_results_=Field("record", nullable=True, fields=_record(
                strength=_f("float", "m", minimum=0.0, exclusive=True, finite=False),
                mean_test_log_loss=_f("float", "m", finite=False),
                se_vs_best=_f("float", "m", minimum=0.0),
                index=_f("int", minimum=0),
            )),
        ),
        derived=("coef_", "intercept_"),
        restore=_restore_generative,
        linear_map="copy",
        describe="calibrated = softmax(W x + b), W = alpha - 1, b_j = ln pi_j + lnGamma(sum_i "
                 "alpha_ji) - sum_i lnGamma(alpha_ji) from fitted.alpha_, fitted.pi_, with {x}",
    ),
    "SigmoidCalibrator": StateSchema(
        fields=_record(coef_=_f("float", "maps", 2), n_iter_=_f("int", minimum=0)),
        check=_check_ovr_maps,
        describe="one-vs-rest Platt scaling, g_j(s) = sigmoid(a s + b) with (a, b) = "
                 "fitted.coef_[j] and s = q_j (the logit z_j with input='logits'); calibrated "
                 "p_j = g_j / sum_l g_l (two classes: one map for class 1, p_0 = 1 - p_1)",
    ),
    "BetaCalibrator": StateSchema(
        fields=_record(coef_=_f("float", "maps", 3), n_iter_=_f("int", minimum=0)),
        check=_check_ovr_maps,
        describe="one-vs-rest beta calibration, g_j(s) = sigmoid(a ln s - b ln(1 - s) + c) with "
                 "(a, b, c) = fitted.coef_[j] and s = q_j clipped to [eps, 1 - eps]; "
                 "calibrated p_j = g_j / sum_l g_l (two classes: one map for class 1)",
    ),
    "IsotonicCalibrator": StateSchema(
        fields=_record(
            x_thresholds_=Field("list", item=_f("float", "m")),
            y_thresholds_=Field("list", item=_f("float", "m", minimum=0.0, maximum=1.0)),
        ),
        check=_check_isotonic,
        describe="one-vs-rest isotonic regression: g_j interpolates (fitted.x_thresholds_[j], "
                 "fitted.y_thresholds_[j]) (constant outside); calibrated p_j = g_j / sum_l g_l "
                 "(two classes: one map for class 1)",
    ),
    "BinningCalibrator": StateSchema(
        fields=_record(
            bin_edges_=Field("list", item=_f("float", "m")),
            bin_values_=Field("list", item=_f("float", "m", minimum=0.0, maximum=1.0)),
        ),
        check=_check_binning,
        describe="one-vs-rest histogram binning: g_j(s) = fitted.bin_values_[j][i] for s in bin "
                 "i of fitted.bin_edges_[j] (inner edges, right-closed); calibrated "
                 "p_j = g_j / sum_l g_l (two classes: one map for class 1)",
    ),
    "BayesianDirichletCalibrator": StateSchema(
        fields=_record(model_id_=_f("str", check=_check_model_id)),
        linear_map="copy", posterior=True, describe=_BAYES_DESCRIPTION,
    ),
    "BayesianGenerativeCalibrator": StateSchema(
        fields=_record(model_id_=_f("str", check=_check_model_id)),
        linear_map="copy", posterior=True, describe=_BAYES_DESCRIPTION,
    ),
})

#: Optional fitted attributes common to every estimator.
COMMON_FIELDS: Mapping[str, Field] = MappingProxyType({
    "feature_names_in_": _f("str", "k", required=False),
})


def _encode_prior(value: Any) -> dict[str, Any]:
    center = value.center
    if not isinstance(center, str):
        center = _encode_value(np.asarray(center, dtype=np.float64))
    return {"strength": _plain_number(value.strength, "prior.strength"), "center": center}


def _decode_prior(value: Any) -> Any:
    from bayescal.dirichlet import DirichletPrior

    if not isinstance(value, dict) or set(value) != {"strength", "center"}:
        raise ValueError("must be null, a number or an object with keys 'strength' and 'center'")
    strength, center = value["strength"], value["center"]
    if not _is_number(strength):
        raise ValueError(f"strength must be a number; got {strength!r}")
    if isinstance(center, list):
        center = _decode_array(_f("float", "c", "c", minimum=0.0, exclusive=True), center,
                               "center", {})
    elif not isinstance(center, str):
        raise ValueError(f"center must be a string or a (k, k) matrix; got {center!r}")
    return DirichletPrior(strength=strength, center=center)


def _is_prior(value: Any) -> bool:
    from bayescal.dirichlet import DirichletPrior

    return isinstance(value, DirichletPrior)


#: Hyperparameters whose values are not plain JSON, by (class name, parameter).
PARAM_CODECS: Mapping[tuple[str, str], ParamCodec] = MappingProxyType({
    ("GenerativeDirichletCalibrator", "prior"): ParamCodec(_is_prior, _encode_prior,
                                                           _decode_prior),
    ("BayesianGenerativeCalibrator", "prior"): ParamCodec(_is_prior, _encode_prior,
                                                          _decode_prior),
})


# ---------------------------------------------------------------------------
# values <-> JSON
# ---------------------------------------------------------------------------
def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _plain_number(v: Any, where: str) -> int | float:
    if isinstance(v, bool | np.bool_):
        raise ValueError(f"{where} must be a number; got {v!r}")
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating) and math.isfinite(float(v)):
        return float(v)
    raise ValueError(f"{where} must be a finite number; got {v!r}")


def _encode_value(value: Any) -> Any:
    """Fitted value -> JSON (arrays as nested lists, non-finite floats as strings)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else repr(v)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            arr = value.astype(np.float64)
            if np.isfinite(arr).all():
                return arr.tolist()
            return np.vectorize(lambda v: v if math.isfinite(v) else repr(v),
                                otypes=[object])(arr).tolist()
        if value.dtype.kind in "biuUO":
            return _encode_value(value.tolist())
        raise ValueError(f"arrays of dtype {value.dtype} cannot be stored")
    if isinstance(value, list | tuple):
        return [_encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode_value(v) for k, v in value.items()}
    raise ValueError(f"values of type {type(value).__name__} cannot be stored")


def _encode_field(f: Field, value: Any) -> Any:
    if value is None:
        return None
    if f.kind == "record":
        assert f.fields is not None
        get = value.__getitem__ if isinstance(value, dict) else lambda n: getattr(value, n)
        return {name: _encode_field(sub, get(name)) for name, sub in f.fields.items()}
    if f.kind == "list":
        assert f.item is not None
        return [_encode_field(f.item, v) for v in value]
    return _encode_value(np.asarray(value) if f.shape else value)


def _bind(dim: int | str, size: int, dims: dict[str, int], where: str) -> None:
    if isinstance(dim, int):
        if size != dim:
            raise ValueError(f"{where} has size {size} where {dim} is required")
        return
    name, plus = (dim.split("+") + ["0"])[:2]
    want = dims.get(name)
    if want is None:
        dims[name] = size - int(plus)
        if dims[name] < 0:
            raise ValueError(f"{where} is too short ({size})")
    elif size != want + int(plus):
        label = "the number of classes k" if name == "k" else name
        raise ValueError(f"{where} has size {size} where {dim} = {want + int(plus)} is required "
                         f"({label} = {want})")


def _element(f: Field, v: Any, where: str) -> Any:
    kind = f.kind
    if kind == "float":
        if type(v) is str and not f.finite and v in _NONFINITE:
            return _NONFINITE[v]
        if not _is_number(v):
            raise ValueError(f"{where} must be a number; got {v!r}")
        x = float(v)
        if not math.isfinite(x):
            raise ValueError(f"{where} must be finite; got {v!r}")
        return x
    if kind == "int":
        if type(v) is not int:
            raise ValueError(f"{where} must be an integer; got {v!r}")
        if not -(2**63) <= v < 2**63:
            raise ValueError(f"{where} is out of the int64 range; got {v!r}")
        return v
    if kind == "bool":
        if type(v) is not bool:
            raise ValueError(f"{where} must be true or false; got {v!r}")
        return v
    if kind == "str":
        if type(v) is not str:
            raise ValueError(f"{where} must be a string; got {v!r}")
        return v
    raise AssertionError(kind)  # pragma: no cover - schema error


def _check_range(f: Field, arr: Any, where: str) -> None:
    if f.minimum is None and f.maximum is None:
        return
    a = np.asarray(arr, dtype=np.float64).ravel()
    a = a[~np.isnan(a)]
    for bound, sign in ((f.minimum, 1.0), (f.maximum, -1.0)):
        if bound is None:
            continue
        d = sign * (a - bound)
        bad = d <= 0 if f.exclusive else d < 0
        if bad.any():
            rel = (">" if sign > 0 else "<") + ("" if f.exclusive else "=")
            raise ValueError(f"{where} must be {rel} {bound:g}; got {float(a[bad][0])!r}")


def _nested(v: Any, ndim: int, where: str, dims: dict[str, int], shape: tuple) -> list[Any]:
    """Flatten a nested list of ``ndim`` levels, binding the sizes of ``shape``."""
    if not isinstance(v, list):
        raise ValueError(f"{where} must be a list ({ndim}-D array); got {type(v).__name__}")
    _bind(shape[0], len(v), dims, where)
    if ndim == 1:
        return v
    out: list[Any] = []
    for i, row in enumerate(v):
        out.extend(_nested(row, ndim - 1, f"{where}[{i}]", dims, shape[1:]))
    return out


def _decode_array(f: Field, v: Any, where: str, dims: dict[str, int]) -> np.ndarray:
    flat = _nested(v, len(f.shape), where, dims, f.shape)
    values = [_element(f, x, f"{where} element") for x in flat]
    shape = tuple(dims[d.split("+")[0]] + int((d.split("+") + ["0"])[1]) if isinstance(d, str)
                  else d for d in f.shape)
    dtype = {"float": np.float64, "int": np.int64, "bool": np.bool_, "str": object}[f.kind]
    arr = np.array(values, dtype=dtype).reshape(shape)
    if f.kind in ("float", "int"):
        _check_range(f, arr, where)
    return arr


def _decode_field(f: Field, v: Any, where: str, dims: dict[str, int]) -> Any:
    if v is None:
        if f.nullable:
            return None
        raise ValueError(f"{where} must not be null")
    if f.kind == "record":
        assert f.fields is not None
        if not isinstance(v, dict):
            raise ValueError(f"{where} must be an object; got {type(v).__name__}")
        _exact_keys(v, f.fields, where)
        out = {name: _decode_field(sub, v[name], f"{where}.{name}", dims)
               for name, sub in f.fields.items()}
        if f.check is not None:
            f.check(out, where)
        return f.make(**out) if f.make is not None else out
    if f.kind == "list":
        assert f.item is not None
        if not isinstance(v, list):
            raise ValueError(f"{where} must be a list; got {type(v).__name__}")
        if f.length is not None:
            _bind(f.length, len(v), dims, where)
        return [_decode_field(f.item, x, f"{where}[{i}]", dict(dims)) for i, x in enumerate(v)]
    if f.shape:
        arr = _decode_array(f, v, where, dims)
        if f.check is not None:
            f.check(arr, where)
        return arr
    value = _element(f, v, where)
    if f.kind in ("float", "int"):
        _check_range(f, value, where)
    if f.check is not None:
        f.check(value, where)
    return value


def _exact_keys(doc: Mapping[str, Any], expected: Mapping[str, Any] | set[str], where: str,
                optional: set[str] = frozenset()) -> None:
    have, want = set(doc), set(expected)
    unknown = sorted(have - want)
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}; expected {sorted(want)}")
    missing = sorted(want - have - set(optional))
    if missing:
        raise ValueError(f"{where} lacks the field(s) {missing}")


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    return bool(np.all(np.abs(a - b) <= COPY_RTOL * scale))


# ---------------------------------------------------------------------------
# hyperparameters
# ---------------------------------------------------------------------------
_JSON_KINDS = {NoneType: "null", bool: "bool", int: "int", float: "float", str: "str",
               tuple: "tuple", list: "tuple"}


def _kinds(annotation: Any) -> set[str]:
    """JSON kinds a constructor annotation allows."""
    if annotation is Any or annotation is None:
        return {"null", "bool", "int", "float", "str"} if annotation is Any else {"null"}
    # numpy's ArrayLike: nested sequences (a list in the file) or a string; numpy >= 2.5
    # defines it as a PEP 695 alias, whose union typing.get_args does not unpack
    from numpy.typing import ArrayLike

    if annotation is ArrayLike:
        return {"tuple", "str"}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(annotation)))
    # numpy's ArrayLike accepts nested sequences (its private _NestedSequence protocol)
    if origin in (tuple, list) or getattr(origin, "__name__", "") == "_NestedSequence":
        return {"tuple"}
    kind = _JSON_KINDS.get(annotation)
    if kind == "float":
        return {"float", "int"}
    return {kind} if kind else set()


def _param_kinds(cls: type) -> dict[str, set[str]]:
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable annotations: accept any JSON scalar
        hints = {}
    return {name: _kinds(hints.get(name, Any)) for name in cls().get_params(deep=False)}


def _flat_params(est: Any) -> dict[str, Any]:
    """The hyperparameters a model file stores: ``get_params`` without ``input``.

    For a logits-only class fed probabilities (``ProbsToLogits``), the inner
    estimator's parameters plus the adapter's ``eps``.
    """
    from bayescal.calibrators.registry import ProbsToLogits

    if isinstance(est, ProbsToLogits):
        return {**est.estimator.get_params(deep=False), "eps": est.eps}
    return {k: v for k, v in est.get_params(deep=False).items() if k != "input"}


def _inner_class(est: Any) -> type:
    from bayescal.calibrators.registry import ProbsToLogits

    return type(est.estimator if isinstance(est, ProbsToLogits) else est)


def _encode_params(est: Any) -> dict[str, Any]:
    cls = _inner_class(est)
    out = {}
    for name, value in _flat_params(est).items():
        codec = PARAM_CODECS.get((cls.__name__, name))
        if isinstance(value, np.ndarray) and value.ndim == 1:
            value = value.tolist()
        try:
            if codec is not None and codec.accepts(value):
                out[name] = codec.encode(value)
            elif value is None or isinstance(value, bool | str):
                out[name] = value
            elif isinstance(value, list | tuple) and all(
                isinstance(v, str) or _is_number(_plain_number(v, name)) for v in value
            ):
                out[name] = [v if isinstance(v, str) else _plain_number(v, name) for v in value]
            else:
                out[name] = _plain_number(value, name)
        except ValueError:
            raise ValueError(
                f"cannot save hyperparameter {name}={value!r} of {cls.__name__}: model files "
                "hold only finite numbers, strings, booleans, null and lists of those"
            ) from None
    return out


def _decode_params(cls: type, wrapper: bool, doc_params: Any, where: str) -> dict[str, Any]:
    """Check the file's hyperparameters against the class and decode them."""
    from bayescal.calibrators.registry import ProbsToLogits

    if not isinstance(doc_params, dict):
        raise ValueError(f"{where} must be an object of hyperparameters; got "
                         f"{type(doc_params).__name__ if doc_params is not None else 'null'}")
    kinds = {k: v for k, v in _param_kinds(cls).items() if k != "input"}
    if wrapper:
        kinds["eps"] = _param_kinds(ProbsToLogits)["eps"]
    _exact_keys(doc_params, kinds, where)
    out = {}
    for name, value in doc_params.items():
        here = f"{where}.{name}"
        codec = PARAM_CODECS.get((cls.__name__, name))
        if isinstance(value, dict):
            if codec is None:
                raise ValueError(f"{here} must not be an object")
            try:
                out[name] = codec.decode(value)
            except ValueError as exc:
                raise ValueError(f"{here}: {exc}") from None
            continue
        allowed = kinds[name]
        if isinstance(value, list):
            if "tuple" not in allowed or not all(_is_number(v) or type(v) is str for v in value):
                raise ValueError(f"{here} must not be a list; got {value!r}")
            out[name] = tuple(value)
            continue
        kind = {NoneType: "null", bool: "bool", int: "int", float: "float", str: "str"}[
            type(value)]
        if kind not in allowed:
            raise ValueError(f"{here} has the wrong type ({kind}: {value!r}); allowed: "
                             f"{', '.join(sorted(allowed)) or 'nothing a file can hold'}")
        out[name] = value
    return out


