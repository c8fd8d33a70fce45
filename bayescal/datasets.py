"""Synthetic data with a known calibration map, and loaders for real data.

:func:`make_dirgen` draws classifier scores from a known DirGen model, so the
true calibration map is available in closed form for tests, notebooks and
benchmarks. :func:`load_uci` reads the 21 tabular datasets of the Dirichlet
calibration paper (and three extras), downloading and checksum-verifying them
on first use.
"""

from __future__ import annotations

import hashlib
import os
import string
import time
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayescal._validation import check_alpha, check_labels, check_pi, check_positive_int

__all__ = [
    "PAPER_UCI_DATASETS",
    "UCI_CHECKSUMS",
    "NetworkOutputs",
    "UCIDataset",
    "default_dirgen_params",
    "load_network_outputs",
    "load_uci",
    "make_dirgen",
    "make_dnn_scores",
    "make_from_calibrator",
]


def default_dirgen_params(
    k: int, *, rng: np.random.Generator | int | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Random DirGen parameters of an over-confident classifier.

    Class ``j`` puts concentration about 0.6 on its own corner and about 0.15
    elsewhere (log-normal jitter, sd 0.3); the small total concentration keeps
    the scores near the corners (confident) while a sizeable fraction of them
    sit at the wrong corner, so the classifier is over-confident (k=3: mean
    confidence about 0.81 at accuracy 0.62). Priors are ``Dirichlet(5, ..., 5)``.

    Returns
    -------
    alpha : ndarray of shape (k, k)
    pi : ndarray of shape (k,)
    """
    k = check_positive_int(k, "k")
    if k < 2:
        raise ValueError(f"k must be at least 2; got {k}")
    rng = np.random.default_rng(rng)
    off = 0.15 * np.exp(rng.normal(0.0, 0.3, size=(k, k)))
    diag = 0.6 * np.exp(rng.normal(0.0, 0.3, size=k))
    alpha = off.copy()
    alpha[np.diag_indices(k)] = diag
    pi = rng.dirichlet(np.full(k, 5.0))
    return alpha, pi


def make_dirgen(
    n: int,
    k: int,
    *,
    rng: np.random.Generator | int | None = None,
    alpha: ArrayLike | None = None,
    pi: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    r"""Draw scores and labels from a DirGen model.

    .. math:: y \sim \mathrm{Categorical}(\pi),\qquad q \mid y=j \sim \mathrm{Dir}(\alpha_j)

    The Bayes-optimal calibration map of these scores is
    :func:`bayescal.maps.dirgen_map` at ``(alpha, pi)``.

    Parameters
    ----------
    n : int
        Number of samples.
    k : int
        Number of classes.
    rng : Generator, int or None
        Seed or generator (never global state).
    alpha : array-like of shape (k, k), optional
        Row ``j`` is the concentration of class ``j``; default
        :func:`default_dirgen_params` (over-confident).
    pi : array-like of shape (k,), optional
        Class priors; default from :func:`default_dirgen_params`.

    Returns
    -------
    q : ndarray of shape (n, k)
        Scores on the simplex (exact zeros can occur for small concentrations,
        as with real classifiers).
    y : ndarray of shape (n,)
        Labels in ``0 .. k-1``.
    alpha : ndarray of shape (k, k)
    pi : ndarray of shape (k,)

    Examples
    --------
    >>> q, y, alpha, pi = make_dirgen(1000, 3, rng=0)
    >>> q.shape, y.shape, alpha.shape, pi.shape
    ((1000, 3), (1000,), (3, 3), (3,))
    """
    n = check_positive_int(n, "n")
    rng = np.random.default_rng(rng)
    a0, p0 = default_dirgen_params(k, rng=rng)
    alpha = a0 if alpha is None else check_alpha(alpha, n_classes=k)
    pi = p0 if pi is None else check_pi(pi, n_classes=k)
    y = rng.choice(k, size=n, p=pi)
    # Gamma draws normalised per row: the standard Dirichlet construction,
    # vectorised over rows with different concentrations.
    g = rng.standard_gamma(alpha[y])
    s = g.sum(axis=1, keepdims=True)
    # A row whose gammas all underflow (tiny concentrations) is redrawn.
    while np.any(s == 0):
        bad = np.flatnonzero(s[:, 0] == 0)
        g[bad] = rng.standard_gamma(alpha[y[bad]])
        s = g.sum(axis=1, keepdims=True)
    return g / s, y.astype(np.intp), alpha, pi


def make_dnn_scores(
    n: int,
    k: int,
    *,
    rng: np.random.Generator | int | None = None,
    margin: float = 2.5,
    spread: float = 3.0,
    noise: float = 0.5,
    temperature: float = 1.2,
    chunk_rows: int = 2048,
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    r"""Softmax outputs of a simulated over-confident deep network, with labels.

    Each sample has a predicted class ``c`` (uniform) and true logits

    .. math:: z_j = \sigma\,\varepsilon_j + [j = c]\,(\ln k + m + s\,\delta),
       \qquad \varepsilon_j, \delta \sim \mathcal N(0, 1),

    its label is drawn from ``softmax(z)`` (so ``softmax(z)`` is the calibrated
    probability), and the network reports ``q = softmax(T z)``: a classifier
    whose only miscalibration is a temperature ``T > 1``, with a spread of
    easy and hard samples (``s``) as in image classifiers. At the defaults
    the scores look like an ImageNet network's at ``k = 1000``: accuracy about
    0.75, mean confidence about 0.85, fitted temperature about ``T`` (1.2;
    measured in docs/benchmarks.md, section "Scale"). There are no real
    ``k = 1000`` outputs on the benchmark machines: this is what
    ``benchmarks/bench_scale.py`` times the calibrators on.

    Parameters
    ----------
    n, k : int
        Samples and classes (``k >= 2``).
    rng : Generator, int or None
        Seed or generator (never global state).
    margin, spread : float, default=2.5, 3.0
        ``m`` and ``s`` above: the predicted class's mean and sd of its logit
        beyond ``ln k``.
    noise : float, default=0.5
        ``sigma``: sd of every logit.
    temperature : float, default=1.2
        ``T``: the network's over-confidence (``1``: calibrated).
    chunk_rows : int, default=2048
        Rows generated at a time (temporary memory ``O(chunk_rows * k)``); the
        draws do not depend on it.

    Returns
    -------
    q : ndarray of shape (n, k)
        The network's probabilities.
    y : ndarray of shape (n,)
        Labels in ``0 .. k-1``.

    Examples
    --------
    >>> q, y = make_dnn_scores(2000, 100, rng=0)
    >>> q.shape, y.shape, bool(abs(q.sum(axis=1) - 1).max() < 1e-12)
    ((2000, 100), (2000,), True)
    """
    n = check_positive_int(n, "n")
    k = check_positive_int(k, "k")
    if k < 2:
        raise ValueError(f"k must be at least 2; got {k}")
    chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
    for name, value in (("spread", spread), ("noise", noise)):
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    if not np.isfinite(margin):
        raise ValueError(f"margin must be finite; got {margin!r}")
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0; got {temperature!r}")
    rng = np.random.default_rng(rng)
    q = np.empty((n, k))
    y = np.empty(n, dtype=np.intp)
    # per-row draws first, then the noise chunk by chunk: the same stream for any chunk_rows
    top = rng.integers(k, size=n)
    lift = np.log(k) + margin + spread * rng.standard_normal(n)
    u = rng.random(n)
    for start in range(0, n, chunk_rows):
        m = min(chunk_rows, n - start)
        sl = slice(start, start + m)
        z = noise * rng.standard_normal((m, k))
        z[np.arange(m), top[sl]] += lift[sl]
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        y[sl] = np.minimum((np.cumsum(p, axis=1) < u[sl, None]).sum(axis=1), k - 1)
        e = np.exp(temperature * z)
        q[sl] = e / e.sum(axis=1, keepdims=True)
    return q, y


def make_from_calibrator(
    calibrator: object,
    scores: ArrayLike,
    n: int,
    *,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64]]:
    r"""Data whose true calibration map is a fitted calibrator: realistic truths.

    Draws ``n`` rows of ``scores`` with replacement (their empirical
    distribution) and, for each, a label from the calibrator's probabilities

    .. math:: q_i \sim \hat F_{\text{scores}}, \qquad
       y_i \mid q_i \sim \operatorname{Categorical}\bigl(f(q_i)\bigr),

    so ``f`` (``calibrator.predict_proba``) is the true calibration map of the
    data. With ``f`` the MAP default fitted to a real calibration set and
    ``scores`` that set's (or its test split's) scores, the truths and the
    score distributions are those of real classifiers, not of one parametric
    family: the benchmark of interval coverage on realistic truths
    (``benchmarks/bench_bayes.py --checks coverage_real``, docs/benchmarks.md)
    draws its data sets this way.

    Parameters
    ----------
    calibrator : fitted estimator with ``predict_proba``
        The true map ``f`` (e.g. a fitted :class:`~bayescal.DirichletCalibrator`).
    scores : array-like of shape (m, k)
        The pool of scores, in the form ``calibrator.predict_proba`` takes.
    n : int
        Rows to draw.
    rng : Generator, int or None
        Seed or generator (never global state).

    Returns
    -------
    q : ndarray of shape (n, k)
        The drawn scores.
    y : ndarray of shape (n,)
        Labels in ``0 .. k-1`` drawn from ``p``.
    p : ndarray of shape (n, k)
        The true calibrated probabilities ``f(q)``.

    Examples
    --------
    >>> from bayescal import DirichletCalibrator
    >>> pool, labels, _, _ = make_dirgen(500, 3, rng=0)
    >>> truth = DirichletCalibrator().fit(pool, labels)
    >>> q, y, p = make_from_calibrator(truth, pool, 100, rng=1)
    >>> q.shape, y.shape, bool(abs(p.sum(axis=1) - 1).max() < 1e-12)
    ((100, 3), (100,), True)
    """
    n = check_positive_int(n, "n")
    if not callable(getattr(calibrator, "predict_proba", None)):
        raise ValueError("calibrator must be a fitted estimator with predict_proba; got "
                         f"{type(calibrator).__name__}")
    pool = np.asarray(scores, dtype=np.float64)
    if pool.ndim != 2 or pool.shape[0] == 0:
        raise ValueError(f"scores must be a non-empty 2-D array; got shape {pool.shape}")
    rng = np.random.default_rng(rng)
    q = pool[rng.integers(pool.shape[0], size=n)]
    p = np.asarray(calibrator.predict_proba(q), dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"calibrator.predict_proba gave shape {p.shape} for scores of shape "
                         f"{q.shape}; the truth must map k scores to k probabilities")
    u = rng.random((n, 1))
    y = np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), p.shape[1] - 1).astype(np.intp)
    return q, y, p


# ---------------------------------------------------------------------------
# Real data: the UCI datasets of the Dirichlet calibration paper
# ---------------------------------------------------------------------------

#: The 21 datasets of Kull et al. (2019), section 4.1, in the paper's order.
PAPER_UCI_DATASETS: tuple[str, ...] = (
    "abalone", "balance-scale", "car", "cleveland", "dermatology", "glass",
    "iris", "landsat-satellite", "libras-movement", "mfeat-karhunen",
    "mfeat-morphological", "mfeat-zernike", "optdigits", "page-blocks",
    "pendigits", "segment", "shuttle", "vehicle", "vowel", "waveform-5000",
    "yeast",
)  # fmt: skip

#: SHA-256 of every published ``<name>.npz`` (arrays ``X`` float64 raw
#: features, ``y`` int64 codes ``0..K-1``, ``class_names``). Computed from the
#: project's reference copies; a download whose digest differs is rejected.
UCI_CHECKSUMS: dict[str, str] = {
    "abalone": "cdcb25b81513606ccbe3544241d8ff7e7179d05805a8730f6a2b9365c55a4503",
    "autos": "817d370fb870fcbce8ddeab1fd5753640c8d6efc7841cbaa0446841d7266eb3a",
    "balance-scale": "184c1171178d98e1114b87339cbb3c7cf7308740ce73266590f171b7ecb04e41",
    "car": "50c23cc4a37e65420ed83572bd6cface76ef7d80c7e8d3d41fee4a87554f6ad7",
    "cleveland": "65cc7058c09a88a1a0bf9ace31355d0e6867017ccd34d1b82cac8ccec744e3af",
    "dermatology": "a7f66dad212b937a4b6886e0d5d1910fe5eef076dfde4b7e13f325e1088e77b6",
    "ecoli": "e5192e28526a139d9d784a7f27515cfb2b11006c0cc1496ae3f1cb5c3ef3b670",
    "glass": "59400d8ce3b6e2ce169f09fad1dbf2f1d2818409a6f921af379ef4f84bc72296",
    "iris": "fd2a652bce8f6efb3d4f1d804352f41d7d6255f8a9d1833ee333501e6194c328",
    "landsat-satellite": "4d88512ac0356e54a310343e6dbf0eaaf4b529a0ba16731ba8e7c408cabc6460",
    "libras-movement": "db857204316da95735ead4f26f7c9ebb3c08b3c590fe7f23b61e9c0bf4dd9966",
    "mfeat-karhunen": "4b3fb333af1570f2d953541c4d5a842e0941e01cbcce9a23c12a95d9f57e8f3a",
    "mfeat-morphological": "e0664397613f2c8544d37446da480c1510a32a1e36261d18993cb4cedb85dea0",
    "mfeat-zernike": "295b108981d7fafe42d07ac5811ddfc56473a2e17851cc8492bf0f19b3aef49c",
    "optdigits": "3cdb3740743d669fbef109568d3be6b25b75663b9a503814d57f8e55f93868df",
    "page-blocks": "0daafb2349ae8547007e47a90c9803b5fc0648c81fd36e8af970314921e1b6ec",
    "pendigits": "947326d29a5365309d942a1a88cde56eb306eaca67bb6f0558d34d1543cd669f",
    "segment": "7f1f66a5422c987c142d1856d0c5f5c66181fa5fb71af36b46e5386d52e70fc3",
    "shuttle": "c796c29bba235ea906cbc4990b229a0a5638c8dbf7cd9f5cce49d84cde9a9ee8",
    "vehicle": "f5376ccdc1d14ea8a6199f0d8c2c92af2840d91a75d666d743be3579d2cd6778",
    "vowel": "92b21ef68c7310799c96d37529b2aa30fc66a90e87891ae84d3f91b2f5f59b9d",
    "waveform-5000": "8daa6fe8ef12cbea55ba0819d52d7ae2db63000c3aa543d25b389f967fde1a16",
    "yeast": "17785eccb78d939ea0f2d3a2c38916035aeaeae7f82e6153a73d6a6fe88c0162",
    "zoo": "9bff77eb4f09f95541c32fd356742c1ceecfc310e258a4d72d67cc7351378380",
}

#: Where :func:`load_uci` downloads ``<name>.npz`` from (``{name}`` is filled
#: in): the project's data release, whose files must match :data:`UCI_SHA256`.
#: NOTE: that release is not published yet; until it is, point the
#: ``BAYESCAL_DATA_URL`` environment variable (same ``{name}`` placeholder) at a
#: mirror of the files, or pass ``data_home`` holding them.
UCI_URL = "https://github.com/bayescal/bayescal-data/releases/download/uci-v1/{name}.npz"


@dataclass(frozen=True)
class UCIDataset:
    """One tabular dataset: raw features, integer labels and class names.

    Attributes
    ----------
    name : str
    X : ndarray of shape (n_samples, n_features)
        Raw (not standardised) features, rows in the original order (often
        sorted by class: shuffle before cross-validation).
    y : ndarray of shape (n_samples,)
        Labels ``0 .. n_classes-1``.
    class_names : ndarray of shape (n_classes,)
    """

    name: str
    X: NDArray[np.float64]
    y: NDArray[np.intp]
    class_names: NDArray[np.str_]

    @property
    def n_classes(self) -> int:
        """Number of classes (length of ``class_names``)."""
        return int(len(self.class_names))


def _data_cache_dir() -> Path:
    """``$BAYESCAL_DATA`` or ``~/.cache/bayescal``."""
    env = os.environ.get("BAYESCAL_DATA")
    return Path(env) if env else Path.home() / ".cache" / "bayescal"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, dest: Path) -> None:
    """Fetch ``url`` into ``dest`` (the one network access of bayescal)."""
    with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
        while chunk := response.read(1 << 20):
            out.write(chunk)


def _data_url(name: str) -> str:
    """``$BAYESCAL_DATA_URL`` (or :data:`UCI_URL`) with ``{name}`` filled in."""
    template = os.environ.get("BAYESCAL_DATA_URL", UCI_URL)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"BAYESCAL_DATA_URL={template!r} is not a valid template ({exc}); "
                         "it must contain the placeholder {name} and no other braces") from None
    if fields != ["name"]:
        raise ValueError(f"BAYESCAL_DATA_URL={template!r} must contain the placeholder {{name}} "
                         f"exactly once and no other {{...}} fields; found {fields}")
    return template.format(name=name)


def _fetch_uci(name: str, cache: Path) -> Path:
    """Download ``<name>.npz`` into ``cache``, verify its SHA-256, move into place."""
    from bayescal._files import atomic_write

    url = _data_url(name)
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{name}.npz"

    def fetch(tmp: Path) -> None:
        try:
            _download(url, tmp)
        except OSError as exc:  # URLError, HTTPError, timeouts
            raise OSError(f"cannot download {name!r} from {url}: {exc}") from exc
        digest = _sha256(tmp)
        if digest != UCI_CHECKSUMS[name]:
            raise OSError(
                f"checksum mismatch for {name!r} downloaded from {url}: got sha256 {digest}, "
                f"expected {UCI_CHECKSUMS[name]}; the file was discarded"
            )

    return atomic_write(target, fetch, overwrite=True)


def _read_npz(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Arrays ``names`` of an .npz file; ValueError naming the file if any is missing."""
    from bayescal.score_files import load_npz

    arrays, files = load_npz(path, names)
    missing = sorted(set(names) - set(arrays))
    if missing:
        raise ValueError(f"{path} lacks the arrays {missing} (it has {sorted(files)})")
    return arrays


def load_uci(name: str, data_home: str | os.PathLike[str] | None = None) -> UCIDataset:
    """Load one of the paper's UCI datasets.

    Looks for ``<data_home>/<name>.npz`` first. When ``data_home`` is None or
    lacks the file, the cache directory (``$BAYESCAL_DATA``, default
    ``~/.cache/bayescal``) is used, and a missing file is downloaded from
    :data:`UCI_URL` (override: ``$BAYESCAL_DATA_URL``), checked against
    :data:`UCI_CHECKSUMS` and written atomically. A cached file is re-verified
    on every load; a local ``data_home`` file is trusted as is (it may be a
    user's own preparation of the data).

    Parameters
    ----------
    name : str
        One of :data:`PAPER_UCI_DATASETS` or ``"autos"``, ``"ecoli"``, ``"zoo"``.
    data_home : path-like, optional
        Directory holding ``<name>.npz`` files.

    Returns
    -------
    UCIDataset

    Raises
    ------
    ValueError
        Unknown name, or a file without the arrays ``X``, ``y``,
        ``class_names`` of consistent shapes.
    OSError
        Download failure or checksum mismatch.

    Examples
    --------
    ``ds = load_uci("iris")`` downloads ``iris.npz`` once (about 2 kB), then
    ``ds.X.shape == (150, 4)`` and ``ds.n_classes == 3``. The names:

    >>> len(PAPER_UCI_DATASETS), PAPER_UCI_DATASETS[:3]
    (21, ('abalone', 'balance-scale', 'car'))
    """
    if not isinstance(name, str) or name not in UCI_CHECKSUMS:
        raise ValueError(f"unknown UCI dataset {name!r}; choose one of {sorted(UCI_CHECKSUMS)}")
    path = None
    if data_home is not None:
        candidate = Path(data_home) / f"{name}.npz"
        if candidate.is_file():
            path = candidate
    if path is None:
        cache = _data_cache_dir()
        path = cache / f"{name}.npz"
        if path.is_file():
            digest = _sha256(path)
            if digest != UCI_CHECKSUMS[name]:
                # damaged (e.g. truncated) or replaced: set aside and fetch again
                aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
                os.replace(path, aside)
                warnings.warn(
                    f"cached file {path} has sha256 {digest}, expected {UCI_CHECKSUMS[name]}; "
                    f"moved aside as {aside.name} and downloading a fresh copy",
                    UserWarning, stacklevel=2,
                )
                path = _fetch_uci(name, cache)
        else:
            path = _fetch_uci(name, cache)
    arrays = _read_npz(path, ("X", "y", "class_names"))
    try:
        X = np.asarray(arrays["X"], dtype=np.float64)
        class_names = np.asarray(arrays["class_names"]).astype(str)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: X must be numeric and class_names text ({exc})") from None
    y = np.asarray(arrays["y"])
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(
            f"{path}: X must be 2-D and y 1-D of matching length; got {X.shape}, {y.shape}"
        )
    try:
        y = check_labels(y, n_samples=X.shape[0], n_classes=len(class_names))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return UCIDataset(name=name, X=X, y=y, class_names=class_names)


# ---------------------------------------------------------------------------
# Deep-network outputs (the paper's section 4.2)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NetworkOutputs:
    """A network's test-set outputs split into calibration and test rows.

    Attributes
    ----------
    name : str
        The file stem.
    probs : ndarray of shape (n, k)
        Softmax outputs (float32 or float64 as stored).
    y : ndarray of shape (n,)
        Labels ``0 .. k-1``.
    idx_val, idx_test : ndarray of int
        Calibration and test rows (disjoint).
    """

    name: str
    probs: NDArray[np.floating]
    y: NDArray[np.intp]
    idx_val: NDArray[np.intp]
    idx_test: NDArray[np.intp]


def load_network_outputs(path: str | os.PathLike[str]) -> NetworkOutputs:
    """Read a network-output ``.npz`` (arrays ``probs``, ``y``, ``idx_val``, ``idx_test``).

    Raises
    ------
    ValueError
        Naming the file: a missing array, a damaged file, shapes that do not
        match, labels outside the columns, or indices out of range, repeated
        or shared by the two splits.
    """
    from bayescal._validation import check_scores

    path = Path(path)
    a = _read_npz(path, ("probs", "y", "idx_val", "idx_test"))
    try:
        probs = a["probs"]
        check_scores(probs, name="probs")
        y = check_labels(a["y"], n_samples=probs.shape[0], n_classes=probs.shape[1])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    idx = {}
    for key in ("idx_val", "idx_test"):
        v = np.asarray(a[key])
        if v.ndim != 1 or v.size == 0 or not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"{path}: {key} must be a non-empty 1-D integer array; got dtype "
                             f"{v.dtype}, shape {v.shape}")
        if v.min() < 0 or v.max() >= probs.shape[0] or np.unique(v).size != v.size:
            raise ValueError(f"{path}: {key} must hold distinct row numbers in 0..{len(y) - 1}")
        idx[key] = v.astype(np.intp)
    if np.intersect1d(idx["idx_val"], idx["idx_test"]).size:
        raise ValueError(f"{path}: idx_val and idx_test share rows")
    return NetworkOutputs(path.stem, probs, y, idx["idx_val"], idx["idx_test"])
