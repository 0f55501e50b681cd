"""pyarrow and polars input to Dataset and predict: the same model and predictions as the
numpy input, nulls as missing values, column names kept, no pandas involved."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import histboost
from histboost.data.dataset import to_float_matrix
from histboost.testing.data import make_classification

pa = pytest.importorskip("pyarrow")


def _data():
    X, y = make_classification(500, 4, n_classes=2, seed=3, missing=0.1)
    return X, y


def _train(data, y):
    return histboost.train({"objective": "binary:logistic", "max_depth": 4, "nthread": 1},
                           histboost.Dataset(data, label=y), 8, verbose_eval=False)


def _same_model(a, b):
    assert a.get_dump(dump_format="json") == b.get_dump(dump_format="json")


def _arrow_table(X, names):
    cols = [pa.array(X[:, j], mask=np.isnan(X[:, j])) for j in range(X.shape[1])]
    return pa.table(dict(zip(names, cols, strict=True)))


NAMES = ["a", "b", "c", "d"]


@pytest.mark.parametrize("form", ["table", "chunked", "batch", "reader", "c_stream"])
def test_pyarrow_inputs_same_model_and_predictions(form):
    X, y = _data()
    ref = _train(X, y)
    t = _arrow_table(X, NAMES)  # nulls, not NaN, mark the missing values
    assert t.column("a").null_count > 0
    if form == "chunked":
        t = pa.Table.from_batches(t.to_batches(max_chunksize=97))
        assert t.column("a").num_chunks > 1
    data = {"table": t, "chunked": t, "batch": t.combine_chunks().to_batches()[0],
            "reader": pa.RecordBatchReader.from_batches(t.schema, t.to_batches()),
            "c_stream": _CStream(t)}[form]
    b = _train(data, y)
    assert b.feature_names == NAMES
    ref.feature_names = NAMES
    _same_model(ref, b)
    np.testing.assert_array_equal(b.predict(t), ref.predict(X))
    np.testing.assert_array_equal(b.predict(t, pred_contribs=True),
                                  ref.predict(X, pred_contribs=True))


class _CStream:
    """Only the Arrow PyCapsule stream interface, as other libraries export it."""

    def __init__(self, table):
        self._t = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self._t.__arrow_c_stream__(requested_schema)


def test_types_float32_and_errors():
    t = pa.table({"x": pa.array([1.5, None, 2.5], pa.float32()),
                  "y": pa.array([1.0, 2.0, 3.0], pa.float32())})
    X, names = to_float_matrix(t)
    assert X.dtype == np.float32 and names == ["x", "y"] and np.isnan(X[1, 0])
    t = pa.table({"i": pa.array([1, None, 3], pa.int64()), "b": [True, False, None],
                  "f": pa.array([0.5, 1.5, 2.5], pa.float32())})
    X, _ = to_float_matrix(t)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_array_equal(X, [[1, 1, 0.5], [np.nan, 0, 1.5], [3, np.nan, 2.5]])
    with pytest.raises(TypeError, match="not numeric"):
        to_float_matrix(pa.table({"s": ["a", "b"]}))


def test_polars_frames():
    pl = pytest.importorskip("polars")
    X, y = _data()
    ref = _train(X, y)
    ref.feature_names = NAMES
    df = pl.DataFrame({n: X[:, j] for j, n in enumerate(NAMES)}).with_columns(
        pl.col("a").fill_nan(None))  # polars nulls and NaN both mean missing
    assert df["a"].null_count() > 0
    b = _train(df, y)
    assert b.feature_names == NAMES
    _same_model(ref, b)
    np.testing.assert_array_equal(b.predict(df), ref.predict(X))
    np.testing.assert_array_equal(b.predict(df.lazy()), ref.predict(X))
    with pytest.raises(TypeError, match="not numeric"):
        to_float_matrix(pl.DataFrame({"s": ["a", "b"]}))


def test_polars_without_pyarrow(monkeypatch):
    pl = pytest.importorskip("polars")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    df = pl.DataFrame({"i": [1, None, 3], "f": [0.5, float("nan"), 2.5]})
    X, names = to_float_matrix(df)
    assert names == ["i", "f"]
    np.testing.assert_array_equal(X, [[1, 0.5], [np.nan, np.nan], [3, 2.5]])


def test_without_pandas():
    # pyarrow imports pandas on its own when it can: block it (pyarrow works without it)
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'pandas':\n"
            "            raise ImportError('pandas blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import numpy as np, pyarrow as pa, histboost\n"
            "t = pa.table({'a': np.arange(50.0), 'b': np.arange(50.0) % 7})\n"
            "b = histboost.train({'nthread': 1}, histboost.Dataset(t, label=np.arange(50.0)),"
            " 2, verbose_eval=False)\n"
            "assert b.feature_names == ['a', 'b']\n"
            "np.testing.assert_array_equal(b.predict(t), b.predict(t.to_batches()[0]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
