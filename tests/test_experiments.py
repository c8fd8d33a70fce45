"""Experiment machinery: ranking, cache, protocol, tables, runner, CLI, Dask."""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from _extras import import_extra
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from bayescal.calibrators.ovr import BinningCalibrator
from bayescal.datasets import make_dirgen
from bayescal.experiments import add_reproduce_parser, reproduce
from bayescal.experiments.cache import SettingCache, protocol_fingerprint
from bayescal.experiments.calibrators import Method, method_table, paper_to_bayescal_units
from bayescal.experiments.classifiers import CLASSIFIERS, class_scores, make_classifier
from bayescal.experiments.protocol import (
    cross_fit,
    holdout_folds,
    inner_classifier_folds,
    outer_splits,
)
from bayescal.experiments.ranking import block_ranks, friedman_pvalue, nemenyi_cd
from bayescal.experiments.tables import (
    dnn_table_markdown,
    rank_summary,
    rank_table_markdown,
    variant_table_markdown,
)
from bayescal.metrics import log_loss

# -- ranking ------------------------------------------------------------------


def test_block_ranks_ties_and_direction():
    v = np.array([[0.1, 0.2, 0.2, 0.05], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(block_ranks(v), [[2, 3.5, 3.5, 1], [2.5, 2.5, 2.5, 2.5]])
    np.testing.assert_array_equal(block_ranks(v, higher_is_better=True)[0], [3, 1.5, 1.5, 4])
    with pytest.raises(ValueError, match="NaN"):
        block_ranks([[1.0, np.nan]])


def test_friedman_matches_scipy(rng):
    v = rng.normal(size=(30, 5)) + np.arange(5) * 0.3
    assert friedman_pvalue(v) == pytest.approx(stats.friedmanchisquare(*v.T).pvalue)
    assert friedman_pvalue(v, higher_is_better=True) == pytest.approx(friedman_pvalue(v))
    assert np.isnan(friedman_pvalue(v[:, :2]))


def test_nemenyi_cd_matches_demsar_table():
    # Demsar (2006), Table 5: q_0.05 = 2.343 (k=3), 2.949 (k=7), 3.164 (k=10)
    for k, q in [(3, 2.343), (7, 2.949), (10, 3.164)]:
        expected = q * np.sqrt(k * (k + 1) / (6 * 50))
        assert nemenyi_cd(k, 50) == pytest.approx(expected, abs=2e-3)
    with pytest.raises(ValueError, match="need >= 2 methods"):
        nemenyi_cd(1, 10)


# -- cache --------------------------------------------------------------------


def test_cache_round_trip_merge_and_missing(tmp_path):
    cache = SettingCache(tmp_path / "c")
    key = ("iris", "tree", 0, 1)
    assert cache.load(key) == {} and cache.all_rows() == []
    cache.save(key, [{"method": "a", "fingerprint": "f1", "x": float("nan"), "y": 1.5}])
    cache.save(key, [{"method": "b", "fingerprint": "f2", "x": float("inf")}])
    rows = cache.load(key)
    assert set(rows) == {"a", "b"} and np.isnan(rows["a"]["x"]) and rows["b"]["x"] == np.inf
    assert cache.missing(key, {"a": "f1", "b": "OLD", "c": "f3"}) == ["b", "c"]
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["iris__tree__0__1.json"]
    cache.save(key, [], {"y_test": np.arange(3), "proba:a": np.eye(3)})
    cache.save(key, [], {"proba:b": np.ones((3, 3)) / 3})
    arrays = cache.load_arrays(key)
    assert sorted(arrays) == ["proba:a", "proba:b", "y_test"]
    np.testing.assert_array_equal(arrays["proba:a"], np.eye(3))
    assert set(cache.load(key)) == {"a", "b"}


def test_protocol_fingerprint_is_order_free():
    assert protocol_fingerprint({"a": 1, "b": 2}) == protocol_fingerprint({"b": 2, "a": 1})
    assert protocol_fingerprint({"a": 1}) != protocol_fingerprint({"a": 2})


# -- protocol -----------------------------------------------------------------


def test_outer_splits_partition_every_repeat():
    y = np.repeat([0, 1, 2], 20)
    splits = outer_splits(y, n_repeats=2, n_folds=4, seed=3)
    assert [(r, f) for r, f, _, _ in splits] == [(r, f) for r in range(2) for f in range(4)]
    for r in range(2):
        tests = np.concatenate([te for rr, _, _, te in splits if rr == r])
        np.testing.assert_array_equal(np.sort(tests), np.arange(60))
    for _, _, tr, te in splits:
        assert not set(tr) & set(te)
        assert np.bincount(y[te]).tolist() == [5, 5, 5]  # stratified


def test_inner_folds_validate_on_the_other_calibration_sets(rng):
    X = rng.normal(size=(90, 3))
    y = np.repeat([0, 1, 2], 30)
    folds, seconds = inner_classifier_folds(
        lambda: make_classifier("nbayes", 0), X[:60], y[:60], X[60:], n_classes=4, seed=0,
        selection="held_out",
    )  # fmt: skip
    assert len(folds) == 3 and seconds > 0
    for i, f in enumerate(folds):
        assert f.fit_scores.shape == (20, 4) and f.test_scores.shape == (30, 4)
        assert (f.fit_scores[:, 3] == 0).all()  # class 3 never seen: probability 0
        others = [g for j, g in enumerate(folds) if j != i]
        np.testing.assert_array_equal(f.val_scores, np.vstack([g.fit_scores for g in others]))


def test_inner_folds_score_candidates_on_the_classifier_training_rows(rng):
    """selection="train_rows" (the authors' code): fold i is tuned on the rows its
    own classifier was trained on, as that classifier scores them."""
    from sklearn.model_selection import StratifiedKFold

    X = rng.normal(size=(90, 3)) + np.repeat(np.eye(3), 30, axis=0)
    y = np.repeat([0, 1, 2], 30)
    folds, _ = inner_classifier_folds(
        lambda: make_classifier("nbayes", 0), X[:60], y[:60], X[60:], n_classes=3, seed=5
    )
    splits = StratifiedKFold(3, shuffle=True, random_state=5).split(X[:60], y[:60])
    for f, (tr, cal) in zip(folds, splits, strict=True):
        model = make_classifier("nbayes", 0).fit(X[tr], y[tr])
        np.testing.assert_allclose(f.val_scores, class_scores(model, X[tr], 3))
        np.testing.assert_array_equal(f.val_y, y[tr])
        np.testing.assert_allclose(f.fit_scores, class_scores(model, X[cal], 3))
    with pytest.raises(ValueError, match="selection must be"):
        inner_classifier_folds(lambda: make_classifier("nbayes", 0), X[:60], y[:60], X[60:],
                               n_classes=3, selection="test")  # fmt: skip


def test_cross_fit_picks_lowest_held_out_loss_and_averages(rng):
    q, y, _, _ = make_dirgen(900, 3, rng=rng)
    folds = holdout_folds(q[:600], y[:600], q[600:], n_folds=3, seed=0)
    method = Method("b", "B", "bayescal.calibrators.ovr:BinningCalibrator", {},
                    ({"n_bins": 2}, {"n_bins": 8}, {"n_bins": 40}))  # fmt: skip
    res = cross_fit(method, folds)
    losses = {}
    for nb in (2, 8, 40):
        maps = [BinningCalibrator(n_bins=nb).fit(f.fit_scores, f.fit_y) for f in folds]
        tot = sum(log_loss(f.val_y, m.predict_proba(f.val_scores)) * len(f.val_y)
                  for m, f in zip(maps, folds, strict=True))  # fmt: skip
        losses[nb] = tot / 600
        if nb == res.params["n_bins"]:
            expected = np.mean([m.predict_proba(q[600:]) for m in maps], axis=0)
    assert res.params["n_bins"] == min(losses, key=losses.get)
    assert res.val_log_loss == pytest.approx(min(losses.values()))
    np.testing.assert_allclose(res.proba, expected)
    assert res.n_fits == 9


def test_cross_fit_records_failed_candidates(rng):
    q, y, _, _ = make_dirgen(300, 3, rng=rng)
    folds = holdout_folds(q, y, q, n_folds=3, seed=0)
    bad = Method("b", "B", "bayescal.calibrators.ovr:BinningCalibrator", {},
                 ({"n_bins": 0}, {"n_bins": 5}))  # fmt: skip
    res = cross_fit(bad, folds)
    assert res.params == {"n_bins": 5} and len(res.errors) == 1
    assert "n_bins must be a positive integer" in res.errors[0]
    worse = Method("b", "B", "bayescal.calibrators.ovr:BinningCalibrator", {"n_bins": -1})
    res = cross_fit(worse, folds)
    assert res.proba is None and len(res.errors) == 1


def test_paper_penalty_units_are_converted_per_number_of_classes():
    table = method_table()
    l2, odir = table["dir_l2"], table["dir_odir"]
    est = l2.build({"reg_lambda": 1e-3}, 15)
    assert est.reg_lambda == pytest.approx(1e-3 * 15 * 16) and est.warm_start
    est = odir.build({"reg_lambda": 10.0, "reg_mu": 0.1}, 4)
    assert (est.reg_lambda, est.reg_mu) == (pytest.approx(120.0), pytest.approx(0.4))
    with pytest.raises(ValueError, match="pass n_classes"):
        l2.build({"reg_lambda": 1.0})
    with pytest.raises(ValueError, match="need reg 'l2' or 'odir'"):
        paper_to_bayescal_units("none", 3, 1.0, None)
    # bayescal units leave the values alone; the units enter the fingerprint
    plain = method_table(penalty_units="bayescal")["dir_l2"]
    assert plain.build({"reg_lambda": 1e-3}, 15).reg_lambda == 1e-3
    assert plain.fingerprint() != l2.fingerprint()
    with pytest.raises(ValueError, match="penalty_units must be"):
        method_table(penalty_units="sum")


def test_paper_units_give_the_same_penalty_as_the_unnormalised_sum(rng):
    """lam * sum(W**2 + b**2) (the paper code's L2) equals bayescal's penalty at k(k+1) lam."""
    from bayescal.optimize import make_penalty

    k, lam = 5, 3e-2
    W, b = rng.normal(size=(k, k)), rng.normal(size=k)
    pen = make_penalty(k, "l2", paper_to_bayescal_units("l2", k, lam, None)["reg_lambda"])
    assert pen.value(W, b) == pytest.approx(lam * (np.sum(W**2) + np.sum(b**2)))
    off = ~np.eye(k, dtype=bool)
    conv = paper_to_bayescal_units("odir", k, lam, 2 * lam)
    pen = make_penalty(k, "odir", conv["reg_lambda"], conv["reg_mu"])
    assert pen.value(W, b) == pytest.approx(lam * np.sum(W[off] ** 2) + 2 * lam * np.sum(b**2))


def test_compressed_warm_started_grid_equals_plain_fits(rng):
    """Fitting distinct (score, label) rows with counts, warm-started along the
    grid, gives the plain per-candidate fits of the same objective."""
    q, y, _, _ = make_dirgen(900, 3, rng=rng)
    q = np.round(q, 1)  # coarse scores, as trees and forests give: many repeated rows
    q = np.clip(q, 0.01, None)
    q /= q.sum(axis=1, keepdims=True)
    folds = holdout_folds(q[:600], y[:600], q[600:], n_folds=3, seed=0)
    grid = ({"reg_lambda": 1.0, "reg_mu": 1.0}, {"reg_lambda": 1e-2, "reg_mu": 1e-3})
    fast = Method("d", "D", "bayescal.calibrators:DirichletCalibrator",
                  {"reg": "odir", "tol": 1e-10}, grid, warm_start=True, compress=True)  # fmt: skip
    plain = Method("d", "D", "bayescal.calibrators:DirichletCalibrator",
                   {"reg": "odir", "tol": 1e-10}, grid)  # fmt: skip
    a, b = cross_fit(fast, folds), cross_fit(plain, folds)
    assert a.params == b.params and a.n_fits == b.n_fits == 6
    assert a.val_log_loss == pytest.approx(b.val_log_loss, abs=1e-10)
    np.testing.assert_allclose(a.proba, b.proba, atol=1e-8)
    from bayescal.experiments.protocol import _distinct_rows

    s, yy, w = _distinct_rows(folds[0].fit_scores, folds[0].fit_y)
    assert w is not None and len(s) < 0.9 * len(folds[0].fit_y) and w.sum() == len(folds[0].fit_y)


def test_bayesian_method_is_tuned_by_its_evidence(rng):
    from bayescal.bayes import BayesianDirichletCalibrator

    q, y, _, _ = make_dirgen(450, 3, rng=rng)
    folds = holdout_folds(q[:300], y[:300], q[300:], n_folds=3, seed=0)
    grid = (1e1, 1e-2, 1e-6)
    method = method_table(l2_grid=grid)["dir_bayes"]
    assert method.select_by == "evidence"
    res = cross_fit(method, folds)
    # the choice maximises the log evidence summed over the three calibration sets
    total = {}
    for lam in grid:
        lam_b = lam * 3 * 4  # paper units -> bayescal units, k = 3
        total[lam] = sum(
            BayesianDirichletCalibrator(sampler="laplace", prior="l2", center="zero",
                                        reg_lambda=lam_b, draws=5, chains=1)
            .fit(f.fit_scores, f.fit_y).log_evidence_ for f in folds
        )  # fmt: skip
    assert res.params == {"reg_lambda": max(total, key=total.get)}
    assert res.val_log_loss == pytest.approx(-max(total.values()) / 600)  # 3 x 200 rows
    assert res.proba.shape == (150, 3) and np.allclose(res.proba.sum(axis=1), 1)
    assert res.n_fits == 3  # only the winner is fitted and sampled


def test_qda_fits_classes_with_fewer_rows_than_features(rng):
    X = rng.normal(size=(60, 8))
    y = np.r_[np.zeros(52, int), np.ones(8, int)]  # class 1: 8 rows, 8 features
    p = class_scores(make_classifier("qda", 0).fit(X, y), X, 2)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_method_table_reports_unavailable_estimators():
    m = Method("x", "X", "bayescal.calibrators:NoSuchCalibrator")
    assert "NoSuchCalibrator" in m.availability()
    table = method_table()
    assert table["beta"].availability() is None
    assert table["dir_l2"].fingerprint() != table["dir_odir"].fingerprint()
    assert len(table["dir_odir"].candidates()) == 36 and len(table["dir_l2"].candidates()) == 11


def test_all_eleven_classifiers_give_full_probability_columns(rng):
    X = rng.normal(size=(60, 3))
    y = np.repeat([0, 1, 2], 20)
    assert len(CLASSIFIERS) == 11
    for name in CLASSIFIERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # MLP on 60 rows
            warnings.filterwarnings("ignore", message="The `probability` parameter")
            model = make_classifier(name, 0).fit(X, y)
        p = class_scores(model, X, 3)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6, err_msg=name)
    with pytest.raises(ValueError, match="unknown classifier 'svm'"):
        make_classifier("svm", 0)


# -- tables -------------------------------------------------------------------


def _fake_results():
    rows = []
    for clf in ("tree", "knn"):
        for ds, vals in (("a", (0.1, 0.2, 0.3)), ("b", (0.2, 0.1, 0.3)), ("c", (0.1, 0.3, 0.2))):
            for fold in range(2):
                for m, v in zip(("m1", "m2", "m3"), vals, strict=True):
                    rows.append({"dataset": ds, "classifier": clf, "repeat": 0, "fold": fold,
                                 "method": m, "log_loss": v, "p_cw_ece": v})  # fmt: skip
    return pd.DataFrame(rows)


def test_rank_summary_and_markdown():
    df = _fake_results()
    s = rank_summary(df, "log_loss", ["m1", "m2", "m3"])
    np.testing.assert_allclose(s.ranks.loc["average"], [4 / 3, 2.0, 8 / 3])
    assert s.n_blocks == {"knn": 3, "tree": 3, "average": 6}
    md = rank_table_markdown(s, {"m1": "M one"})
    assert "| Classifier | M one | m2 | m3 | blocks |" in md and "**1.33**" in md
    assert "Friedman p-value" in md and "Nemenyi" in md
    hib = rank_summary(df, "p_cw_ece", ["m1", "m2", "m3"])  # higher p is better
    np.testing.assert_allclose(hib.ranks.loc["average"], [8 / 3, 2.0, 4 / 3])
    hole = (df.method == "m2") & (df.dataset == "a") & (df.classifier == "knn")
    df.loc[hole, "log_loss"] = np.nan
    s = rank_summary(df, "log_loss", ["m1", "m2", "m3"])
    assert s.dropped == [("knn", "a")] and s.n_blocks["average"] == 5


def test_variant_table_puts_each_variant_in_the_first_column():
    df = _fake_results()
    md = variant_table_markdown(df, ["log_loss"], ["m1", "m3", "absent"], ["m2"],
                                {"m1": "M one"}, paper_first={"log_loss": 2.25})  # fmt: skip
    lines = md.splitlines()
    assert lines[0] == "| Measure | first column | paper's Dir-L2 | m2 | blocks |"
    # m1 beats m2 on 4 of 6 blocks; m3 loses to m2 on 4 of 6 (values 0.1/0.2/0.3)
    assert lines[2] == "| log_loss | M one **1.33** | 2.25 | 1.67 | 6 |"
    assert lines[3] == "| log_loss | m3 **1.67** | 2.25 | 1.33 | 6 |"
    assert len(lines) == 4  # the absent variant has no row


def test_dnn_table_markdown():
    df = pd.DataFrame({"dataset": ["n1", "n1", "n2", "n2"], "method": ["u", "t"] * 2,
                       "cw_ece": [0.2, 0.1, 0.05, 0.3]})  # fmt: skip
    md = dnn_table_markdown(df, "cw_ece", ["u", "t"], {"u": "Uncal."})
    assert "| n1 | 0.200 (2) | **0.100 (1)** |" in md
    assert "| **average rank** | 1.50 | 1.50 |" in md


# -- runner, CLI, Dask --------------------------------------------------------

SMALL = {"datasets": ["iris"], "classifiers": ["nbayes"], "methods": ["uncal", "beta"],
         "n_repeats": 1, "n_folds": 2}  # fmt: skip


def test_reproduce_small_run_resumes_without_recomputing(shared_data, tmp_path):
    out = tmp_path / "out"
    df = reproduce("uci", data_dir=shared_data / "uci", out=out, progress=False, **SMALL)
    assert len(df) == 4 and set(df.method) == {"uncal", "beta"}
    manifest = json.loads((out / "uci_manifest.json").read_text())
    assert manifest["settings_computed_this_run"] == 2
    assert manifest["methods_ran"] == ["uncal", "beta"]
    (cache_dir,) = (out / "cache").iterdir()
    files = sorted(cache_dir.glob("*.json"))
    assert len(files) == 2 and len(list(cache_dir.glob("*.npz"))) == 2
    assert not list(cache_dir.glob(".*"))  # no temporary files left behind
    # a run killed after one setting: delete the other setting's files, rerun
    files[1].unlink()
    files[1].with_suffix(".npz").unlink()
    stamp = files[0].stat().st_mtime_ns
    df2 = reproduce("uci", data_dir=shared_data / "uci", out=out, progress=False, **SMALL)
    manifest = json.loads((out / "uci_manifest.json").read_text())
    assert manifest["settings_computed_this_run"] == 1
    assert files[0].stat().st_mtime_ns == stamp  # untouched
    cols = ["dataset", "classifier", "fold", "method", "log_loss", "brier", "accuracy",
            "conf_ece", "cw_ece", "mce", "params", "n_test"]  # fmt: skip
    pd.testing.assert_frame_equal(
        df[cols].sort_values(["fold", "method"]).reset_index(drop=True),
        df2[cols].sort_values(["fold", "method"]).reset_index(drop=True),
    )
    assert (out / "uci_results.csv").is_file() and (out / "uci_tables.md").is_file()
    # report-only: tables from the cache of a run with more settings, nothing fitted
    part = reproduce("uci", data_dir=shared_data / "uci", out=out, progress=False,
                     report_only=True, **{**SMALL, "n_folds": 2, "classifiers": ["nbayes", "lda"]})
    manifest = json.loads((out / "uci_manifest.json").read_text())
    assert manifest["settings_computed_this_run"] == 0 and len(part) == 4


def test_unavailable_methods_are_recorded_not_dropped(shared_data, tmp_path, monkeypatch):
    from bayescal.experiments import runner

    table = dict(method_table())
    table["ghost"] = Method("ghost", "Ghost", "bayescal.calibrators:NoSuchCalibrator")
    monkeypatch.setattr(runner, "method_table", lambda **kw: table)
    reproduce("uci", data_dir=shared_data / "uci", out=tmp_path, progress=False,
              **{**SMALL, "methods": ["uncal", "ghost"]})  # fmt: skip
    manifest = json.loads((tmp_path / "uci_manifest.json").read_text())
    assert manifest["methods_ran"] == ["uncal"]
    assert "NoSuchCalibrator" in manifest["methods_unavailable"]["ghost"]


def test_reproduce_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="suite must be one of"):
        reproduce("cifar", data_dir=None, out=tmp_path)
    with pytest.raises(ValueError, match="unknown classifiers"):
        reproduce("uci", data_dir=None, out=tmp_path, classifiers=["svm"], datasets=[])
    with pytest.raises(ValueError, match="unknown methods"):
        reproduce("uci", data_dir=None, out=tmp_path, methods=["platt"], datasets=[])
    with pytest.raises(ValueError, match="needs data_dir"):
        reproduce("dnn", data_dir=None, out=tmp_path)


def test_dnn_suite_on_synthetic_network_outputs(tmp_path, rng):
    data = tmp_path / "dnn"
    data.mkdir()
    q, y, _, _ = make_dirgen(600, 3, rng=rng)
    perm = rng.permutation(600)
    np.savez(data / "toy_net.npz", probs=q.astype(np.float32), y=y,
             idx_val=perm[:300], idx_test=perm[300:])  # fmt: skip
    df = reproduce("dnn", data_dir=data, out=tmp_path / "out", progress=False,
                   methods=["uncal", "isotonic"])  # fmt: skip
    assert list(df.dataset) == ["toy_net", "toy_net"] and (df.n_test == 300).all()
    assert df.loc[df.method == "uncal", "log_loss"].item() == pytest.approx(
        log_loss(y[perm[300:]], q[perm[300:]].astype(np.float32).astype(float)), rel=1e-6
    )
    md = (tmp_path / "out" / "dnn_tables.md").read_text()
    assert "layout of Table 3" in md and "| toy_net |" in md


def test_cli_parser(shared_data, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="bayescal")
    add_reproduce_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["reproduce", "--suite", "uci", "--data-dir", str(shared_data / "uci"), "--out",
         str(tmp_path), "--datasets", "iris", "--classifiers", "nbayes", "--methods",
         "uncal,beta", "--repeats", "1", "--folds", "2", "--no-progress"]
    )  # fmt: skip
    assert args.methods == ["uncal", "beta"] and args.folds == 2
    grids = parser.parse_args(["reproduce", "--suite", "dnn", "--out", "x",
                               "--odir-grid", "1e3,10", "--l2-grid", "0.5"])  # fmt: skip
    assert grids.odir_grid == [1000.0, 10.0] and grids.l2_grid == [0.5]
    assert args.func(args) == 0
    assert "4 result rows" in capsys.readouterr().out


def test_dask_backend_gives_the_same_results(shared_data, tmp_path):
    import joblib  # a dependency of scikit-learn: never skipped
    distributed = import_extra("distributed", "dask")
    serial = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path / "a",
                       progress=False, **SMALL)  # fmt: skip
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc), joblib.parallel_backend("dask"):  # fmt: skip
        viadask = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path / "b",
                            progress=False, jobs=-1, **SMALL)  # fmt: skip
    cols = ["dataset", "fold", "method", "log_loss", "brier", "cw_ece"]
    key = ["fold", "method"]
    pd.testing.assert_frame_equal(
        serial[cols].sort_values(key).reset_index(drop=True),
        viadask[cols].sort_values(key).reset_index(drop=True),
    )


@pytest.mark.slow
@pytest.mark.once  # the runner's plumbing (14 s); every method has its own tests on both stacks
def test_quick_suite_runs_every_available_method(shared_data, tmp_path):
    df = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path, quick=True,
                   progress=False)  # fmt: skip
    manifest = json.loads((tmp_path / "uci_manifest.json").read_text())
    assert manifest["settings_total"] == 3 * 3 * 3
    assert set(df.method) == set(manifest["methods_ran"])
    assert len(df) == 27 * len(manifest["methods_ran"])
    assert {"dir_l2", "dir_odir", "temp", "beta", "dir_gen_map"} <= set(df.method)
    # the only failures allowed: the generative MLE on exact-zero scores (recorded)
    failed = df["error"].fillna("").astype(bool)
    assert df.loc[~failed, "p_cw_ece"].between(0, 1).all()
    errors = df[failed]
    assert set(errors.method) <= {"dir_gen"}
    assert errors["error"].str.contains("pass prior=").all()
    # the paper's calibrators improve on the uncalibrated log-loss of naive Bayes
    nb = df[df.classifier == "nbayes"].groupby("method")["log_loss"].mean()
    for m in ("dir_l2", "dir_odir", "temp", "beta", "isotonic"):
        assert nb[m] < nb["uncal"], m


def test_p_cw_ece_is_backfilled_from_stored_probabilities(shared_data, tmp_path, monkeypatch):
    from bayescal import metrics

    monkeypatch.delattr(metrics, "p_ece", raising=False)
    df = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path, progress=False, **SMALL)
    assert df["p_cw_ece"].isna().all()
    manifest = json.loads((tmp_path / "uci_manifest.json").read_text())
    assert "p_ece is not available" in manifest["metric_notes"]["p_cw_ece"]
    seen = []

    def fake_p_ece(y, proba, *, metric, n_bins, n_resamples, rng):
        seen.append((metric, n_bins, proba.shape))
        return 0.25

    monkeypatch.setattr(metrics, "p_ece", fake_p_ece, raising=False)
    df = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path, progress=False, **SMALL)
    manifest = json.loads((tmp_path / "uci_manifest.json").read_text())
    assert manifest["settings_computed_this_run"] == 0  # nothing refitted
    assert (df["p_cw_ece"] == 0.25).all() and len(seen) == 4
    assert seen[0][:2] == ("classwise", 15)
    df = reproduce("uci", data_dir=shared_data / "uci", out=tmp_path, progress=False, **SMALL)
    assert len(seen) == 4  # stored in the cache, not recomputed
