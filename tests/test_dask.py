"""`histboost.dask` on a LocalCluster of 3 worker processes: the model of one process trained
on the rows in partition order (JSON equal in quantised mode) wherever the partitions lie, on
2 or 3 workers; evaluation sets and early stopping; prediction per partition; the estimators;
a failing worker raises a clear error on the client quickly.

The workers are forked from a forkserver that has imported torch and histboost once (spawned
workers would each import them: ~5 s of CPU per worker)."""

from __future__ import annotations

import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
pytest.importorskip("torch.distributed")

import histboost as hb  # noqa: E402
import histboost.dask as hbd  # noqa: E402
from histboost.sklearn import HistBoostClassifier, HistBoostRegressor  # noqa: E402

pytestmark = pytest.mark.timeout(90)  # the first test also starts the cluster


@pytest.fixture(scope="module")
def client():
    import dask
    from distributed.utils import get_mp_context

    # no work stealing: the placement tests put partitions on chosen workers, and on a loaded
    # machine the scheduler would otherwise move the (tiny) packing tasks elsewhere
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver",
                          "distributed.scheduler.work-stealing": False}):
        ctx = get_mp_context()
        ctx.set_forkserver_preload(["distributed", "numpy", "pandas", "torch.distributed",
                                    "histboost.training", "histboost.dask"])
        cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _workers(client) -> list[str]:
    return sorted(client.scheduler_info()["workers"])


def _data(n=900, f=5, objective="binary:logistic", seed=3):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, f)) * 4) / 2
    X[rng.random(X.shape) < 0.1] = np.nan
    s = np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=n)
    if objective == "multi:softmax":
        return X, np.digitize(s, [-1.0, 1.0]).astype(np.float64)
    if objective == "reg:squarederror":
        return X, np.round(s * 2)
    return X, (s > 0.3).astype(np.float64)


def _placed(client, X, y, sizes, owners):
    """Dask arrays of X, y whose row blocks (`sizes`) are put on workers `owners` (indices
    into the sorted worker addresses)."""
    addrs = _workers(client)
    xs, ys, at = [], [], 0
    for n, o in zip(sizes, owners, strict=True):
        fx, fy = client.scatter([X[at:at + n], y[at:at + n]], workers=[addrs[o]], hash=False)
        xs.append(da.from_delayed(fx, shape=(n, X.shape[1]), dtype=X.dtype))
        ys.append(da.from_delayed(fy, shape=(n,), dtype=y.dtype))
        at += n
    assert at == len(X)
    return da.concatenate(xs), da.concatenate(ys)


def _one_process(params, X, y, rounds, **kw):
    ref = hb.Dataset(X)  # the one-process cuts (global cuts are the same)
    ref.construct()
    return hb.train(params, hb.Dataset(X, label=y, reference=ref), rounds, verbose_eval=False,
                    **kw)


@pytest.mark.parametrize("world", [2, 3])
def test_model_equals_one_process(client, world):
    X, y = _data()
    sizes = [150, 200, 100, 250, 200]  # uneven
    owners = [2, 1, 0, 2, 1] if world == 3 else [1, 0, 1, 0, 1]  # world 2: worker 2 has none
    dX, dy = _placed(client, X, y, sizes, owners)
    d = hbd.DaskDataset(client, dX, dy)
    addrs = _workers(client)
    who = client.who_has(d.parts)
    # the parts stay where the partitions are
    assert [sorted(who[f.key]) for f in d.parts] == [[addrs[o]] for o in owners]
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "subsample": 0.8, "learning_rate": 0.5, "nthread": 1}
    out = hbd.train(client, params, d, 4)
    want = _one_process(params, X, y, 4)
    assert out["booster"].to_dict() == want.to_dict()
    assert out["history"] == {}
    pred = hbd.predict(client, out, dX)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), want.predict(X))


def test_dataframe_evals_early_stopping(client):
    import dask

    X, y = _data(1200, objective="multi:softmax", seed=5)
    Xv, yv = _data(400, objective="multi:softmax", seed=6)
    cols = [f"c{i}" for i in range(X.shape[1])]
    frame, series = pd.DataFrame(X, columns=cols), pd.Series(y, name="y")
    spans = [(0, 300), (300, 300), (300, 700), (700, 1000), (1000, 1200)]  # one empty
    df, lab = (dd.from_delayed([dask.delayed(v.iloc[a:b]) for a, b in spans], meta=v.iloc[:0])
               for v in (frame, series))
    # 2 partitions for 3 workers: one is split so that every rank evaluates some rows
    dfv = dd.from_pandas(pd.DataFrame(Xv, columns=cols), npartitions=2, sort=False)
    labv = dd.from_pandas(pd.Series(yv, name="y"), npartitions=2, sort=False)
    dtrain = hbd.DaskDataset(client, df, lab)
    assert dtrain.rows.tolist() == [300, 0, 400, 300, 200]
    dval = hbd.DaskDataset(client, dfv, labv)
    params = {"objective": "multi:softmax", "num_class": 3, "quantized_grad": True,
              "max_depth": 4, "learning_rate": 1.0, "eval_metric": ["merror", "mlogloss"],
              "nthread": 1}
    out = hbd.train(client, params, dtrain, 40, evals=[(dtrain, "train"), (dval, "val")],
                    early_stopping_rounds=3, verbose_eval=False)
    ref = hb.Dataset(pd.DataFrame(X, columns=cols))
    ref.construct()
    log: dict = {}
    want = hb.train(params, hb.Dataset(pd.DataFrame(X, columns=cols), label=y, reference=ref),
                    40, evals=[(hb.Dataset(Xv, label=yv, reference=ref), "val")],
                    early_stopping_rounds=3, evals_result=log, verbose_eval=False)
    booster = out["booster"]
    assert want.best_iteration is not None and want.num_boosted_rounds() < 40
    assert booster.to_dict() == want.to_dict()  # best_iteration included
    assert booster.feature_names == cols
    hist = out["history"]
    assert set(hist) == {"train", "val"}
    for m in ("merror", "mlogloss"):
        np.testing.assert_allclose(hist["val"][m], log["val"][m], rtol=1e-12)
    pred = hbd.predict(client, booster, dfv)
    assert isinstance(pred, dd.Series)
    got = pred.compute()
    assert list(got.index) == list(range(len(Xv)))
    np.testing.assert_array_equal(got.to_numpy(), want.predict(Xv))


def test_estimators(client):
    X, y = _data(800, seed=8)
    labels = np.where(y > 0, 7, 2)  # classes_ from the cluster, in sorted order
    dX = da.from_array(X, chunks=(300, 5))
    clf = hbd.DaskHistBoostClassifier(n_estimators=5, max_depth=3, quantized_grad=True,
                                      n_jobs=1, client=client)
    assert "client" not in clf.get_params()
    clf.fit(dX, da.from_array(labels, chunks=300))
    ref = HistBoostClassifier(n_estimators=5, max_depth=3, quantized_grad=True,
                              n_jobs=1).fit(X, labels)
    np.testing.assert_array_equal(clf.classes_, [2, 7])
    np.testing.assert_array_equal(clf.predict_proba(dX).compute(), ref.predict_proba(X))
    np.testing.assert_array_equal(clf.predict(dX).compute(), ref.predict(X))
    # DataFrame in, string labels in a Series: a Series of labels out, with the data's index
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(5)])
    names = pd.Series(np.where(y > 0, "yes", "no"))
    clf = hbd.DaskHistBoostClassifier(n_estimators=3, quantized_grad=True, n_jobs=1)
    clf.client = client
    clf.fit(dd.from_pandas(frame, npartitions=3), dd.from_pandas(names, npartitions=3))
    assert clf.classes_.tolist() == ["no", "yes"]
    assert clf.feature_names_in_.tolist() == list(frame.columns)
    got = clf.predict(dd.from_pandas(frame, npartitions=2)).compute()
    ref = HistBoostClassifier(n_estimators=3, quantized_grad=True, n_jobs=1).fit(frame, names)
    assert got.tolist() == ref.predict(frame).tolist()

    Xr, yr = _data(800, objective="reg:squarederror", seed=9)
    Xe, ye = _data(200, objective="reg:squarederror", seed=10)
    reg = hbd.DaskHistBoostRegressor(n_estimators=50, learning_rate=1.0, max_depth=5,
                                     quantized_grad=True,
                                     early_stopping_rounds=2, n_jobs=1, client=client)
    reg.fit(da.from_array(Xr, chunks=(300, 5)), da.from_array(yr, chunks=300),
            eval_set=[(da.from_array(Xe, chunks=(100, 5)), da.from_array(ye, chunks=100))])
    ref = HistBoostRegressor(n_estimators=50, learning_rate=1.0, max_depth=5, quantized_grad=True,
                             early_stopping_rounds=2, n_jobs=1).fit(Xr, yr, eval_set=[(Xe, ye)])
    assert reg.best_iteration_ == ref.best_iteration_ < 49
    np.testing.assert_allclose(reg.evals_result()["validation_0"]["rmse"],
                               ref.evals_result()["validation_0"]["rmse"], rtol=1e-9)
    np.testing.assert_allclose(reg.predict(da.from_array(Xe, chunks=(70, 5))).compute(),
                               ref.predict(Xe), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("bad", [3.0, np.nan])
def test_a_failing_worker_raises_on_the_client(client, bad):
    X, y = _data()
    y = y.copy()
    y[500] = bad  # in the partition on worker 1: rank 1 rejects its rows
    dX, dy = _placed(client, X, y, [450, 450], [0, 1])
    d = hbd.DaskDataset(client, dX, dy)
    t = time.monotonic()
    with pytest.raises(ValueError, match="label") as info:
        hbd.train(client, {"objective": "binary:logistic", "quantized_grad": True}, d, 3,
                  timeout=20)
    assert time.monotonic() - t < 15
    assert any("rank 1 of 2" in n for n in getattr(info.value, "__notes__", []))
    # the workers are free again: the next job runs
    ok = hbd.DaskDataset(client, *_placed(client, X, np.nan_to_num(y) % 2, [450, 450],
                                          [0, 1]))
    assert hbd.train(client, {"quantized_grad": True}, ok, 1)["booster"].num_boosted_rounds() == 1


def test_misaligned_partitions_raise(client):
    X, y = _data(100)
    with pytest.raises(ValueError, match="partitions"):
        hbd.DaskDataset(client, da.from_array(X, chunks=(50, 5)),
                        dd.from_pandas(pd.Series(y), npartitions=3))


def test_sparse_partitions_give_the_one_process_model(client):
    """Dask array of scipy CSR blocks on 2 workers, unstored entries missing: the sparse
    one-process model; predictions per block (unstored entries read as zeros, as
    `Booster.predict` reads a scipy matrix)."""
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(4)
    dense = np.where(rng.random((600, 30)) < 0.15, np.round(rng.normal(size=(600, 30)), 1), 0.0)
    y = (dense[:, 0] - dense[:, 1] + rng.normal(size=600) * 0.3 > 0).astype(np.float64)
    X = sp.csr_matrix(dense)
    addrs = _workers(client)
    xs, ys = [], []
    for (a, b), o in zip(((0, 250), (250, 600)), (0, 1), strict=True):
        fx, fy = client.scatter([X[a:b], y[a:b]], workers=[addrs[o]], hash=False)
        xs.append(da.from_delayed(fx, shape=(b - a, 30), dtype=X.dtype, meta=X[:0]))
        ys.append(da.from_delayed(fy, shape=(b - a,), dtype=y.dtype))
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "max_bin": 16, "nthread": 1}
    dX = da.concatenate(xs)
    dtrain = hbd.DaskDataset(client, dX, label=da.concatenate(ys), unstored="nan")
    out = hbd.train(client, params, dtrain, 4)
    want = hb.train(params, hb.Dataset(X, label=y, unstored="nan"), 4)
    assert out["booster"].to_dict() == want.to_dict()
    assert len(want.to_dict()["trees"][0]["split_feature"]) > 3
    np.testing.assert_array_equal(hbd.predict(client, out, dX).compute(), want.predict(X))


def _categorical_frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 12, n)
    b = rng.integers(0, 7, n)
    frame = pd.DataFrame({"x0": np.round(rng.normal(size=n), 1), "a": a,
                          "b": pd.Series([f"s{v}" for v in b], dtype=object),
                          "k": pd.Categorical(rng.choice(["p", "q", "r"], n))})
    frame.loc[rng.random(n) < 0.05, "b"] = None  # missing: a category of its own
    s = (a % 3 == b % 3) + 0.4 * frame["x0"].to_numpy() + 0.3 * (frame["k"] == "q")
    return frame, (s + rng.normal(scale=0.3, size=n) > 0.6).astype(np.float64)


def test_categorical_columns_give_the_one_process_model(client):
    """A Dask DataFrame with string (object), pandas category and named integer-id columns on
    2 workers: the one-process categorical model (ordered statistics, combinations), its
    predictions per partition from raw values, and the estimator's `categorical_features`."""
    frame, y = _categorical_frame(600, 11)
    addrs = _workers(client)
    spans, owners = [(0, 250), (250, 420), (420, 600)], [1, 0, 1]
    parts = [client.scatter([frame.iloc[a:b], pd.Series(y[a:b], name="y")],
                            workers=[addrs[o]], hash=False) for (a, b), o in zip(spans, owners,
                                                                                  strict=True)]
    df = dd.from_delayed([p[0] for p in parts], meta=frame.iloc[:0])
    lab = dd.from_delayed([p[1] for p in parts], meta=pd.Series([], dtype=float, name="y"))
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "max_ctr_complexity": 2, "n_permutations": 2, "seed": 4, "nthread": 1}
    dtrain = hbd.DaskDataset(client, df, lab, categorical_features=["a"])
    assert dtrain.categorical_features == [1]
    out = hbd.train(client, params, dtrain, 3)
    want = hb.train(params, hb.Dataset(frame, label=y, categorical_features=["a"]), 3,
                    verbose_eval=False)
    got, want_d = out["booster"].to_dict(), want.to_dict()
    assert got["trees"] == want_d["trees"]
    for k in want_d["learner"]:
        assert got["learner"][k] == want_d["learner"][k], k
    assert got == want_d
    assert {d["kind"] for d in got["learner"]["categorical"]["derived"]} >= {"ctr", "freq"}
    test, _ = _categorical_frame(90, 12)
    test.loc[:4, "b"] = "unseen"
    pred = hbd.predict(client, out, dd.from_pandas(test, npartitions=2, sort=False))
    np.testing.assert_array_equal(pred.compute().to_numpy(), want.predict(test))

    clf = hbd.DaskHistBoostClassifier(n_estimators=3, max_depth=3, quantized_grad=True,
                                      n_jobs=1, categorical_features=["a"], client=client)
    clf.fit(df, lab)
    ref = HistBoostClassifier(n_estimators=3, max_depth=3, quantized_grad=True, n_jobs=1,
                              categorical_features=["a"]).fit(frame, y)
    np.testing.assert_array_equal(
        clf.predict_proba(dd.from_pandas(test, npartitions=2, sort=False)).compute(),
        ref.predict_proba(test))
