"""File readers against independent parsers: scikit-learn's svmlight loader, pandas.read_csv
and Python's float()."""

from __future__ import annotations

import gzip
import itertools
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from histboost import Dataset
from histboost.data import detect_format, load_data, read_csv, read_libsvm
from histboost.data import io as hio

FILES = Path(__file__).parent / "files"  # see files/LICENSE.md
RANK = str(FILES / "rank.sample.svm")
ADULT = str(FILES / "adult.sample.csv")
HIGGS = str(resources.files("histboost.datasets") / "data" / "binary.train.gz")


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_bytes(text.encode())
    return str(path)


def _assert_csr_equal(a, b) -> None:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    assert a.shape == b.shape
    a.sort_indices()
    b.sort_indices()
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)  # NaN == NaN here; explicit zeros kept


# -- libsvm ---------------------------------------------------------------------------------------
def test_libsvm_real_file_matches_sklearn():
    ours = read_libsvm(RANK)
    X, y = load_svmlight_file(RANK)
    _assert_csr_equal(ours.X, X)
    np.testing.assert_array_equal(ours.y, y)
    assert ours.group is None and ours.X.dtype == np.float64


LIBSVM_TEXT = """# a comment line
1 qid:3 1:0.5 3:-2.25e-3 7:1e300   # trailing comment
0 qid:3 2:0 4:0.30000000000000004 5:12345678901234567890
\r
-1 qid:7 1:nan 2:inf 3:-Infinity 6:1.7976931348623157e308\r
2.5 qid:7
+1 qid:9 1:.5 2:5. 3:+1E+2 7:4.9e-324
"""


@pytest.mark.parametrize("name", ["edge.svm", "edge.svm.gz"])
def test_libsvm_edge_cases_match_sklearn(tmp_path, name):
    path = _write(tmp_path, name, LIBSVM_TEXT)
    ours = read_libsvm(path)
    X, y, qid = load_svmlight_file(path, query_id=True)
    _assert_csr_equal(ours.X, X)
    np.testing.assert_array_equal(ours.y, y)
    runs = [len(list(g)) for _, g in itertools.groupby(qid)]
    np.testing.assert_array_equal(ours.group, runs)
    assert ours.X.shape == (5, 7)  # 1-based indices detected: 7 columns, not 8


def test_libsvm_unsorted_indices_are_sorted_and_duplicates_rejected(tmp_path):
    ours = read_libsvm(_write(tmp_path, "u.svm", "1 3:3 1:1\n0 2:2 1:1 4:4\n"))
    want = read_libsvm(_write(tmp_path, "s.svm", "1 1:1 3:3\n0 1:1 2:2 4:4\n"))
    _assert_csr_equal(ours.X, want.X)
    assert ours.X.has_sorted_indices
    with pytest.raises(ValueError, match=r"d\.svm:2: feature index 3 appears twice"):
        read_libsvm(_write(tmp_path, "d.svm", "1 1:1\n0 3:2 2:1 3:4\n"))


def test_libsvm_zero_based_detection_and_n_features(tmp_path):
    path = _write(tmp_path, "z.txt", "1 0:1 2:3\n0 1:2\n")
    ours = read_libsvm(path)
    X, _ = load_svmlight_file(path)
    _assert_csr_equal(ours.X, X)
    assert ours.X.shape == (2, 3)
    assert read_libsvm(path, n_features=10).X.shape == (2, 10)
    with pytest.raises(ValueError, match="n_features is 2"):
        read_libsvm(path, n_features=2)
    with pytest.raises(ValueError, match="index 0 found in a 1-based file"):
        read_libsvm(path, zero_based=False)
    one = _write(tmp_path, "o.txt", "1 1:1 3:3\n")
    assert read_libsvm(one).X.shape == (1, 3)
    assert read_libsvm(one, zero_based=True).X.shape == (1, 4)


def test_libsvm_chunk_boundaries(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(300):
        feats = sorted(rng.choice(20, size=rng.integers(0, 6), replace=False))
        lines.append(f"{i % 3} " + " ".join(f"{f + 1}:{rng.normal():.6g}" for f in feats))
    path = _write(tmp_path, "many.svm", "\n".join(lines) + "\n")
    whole = read_libsvm(path, n_features=20)
    monkeypatch.setattr(hio, "_CHUNK_BYTES", 50)  # many chunks, each cut inside a line
    chunked = read_libsvm(path, n_features=20)
    _assert_csr_equal(whole.X, chunked.X)
    np.testing.assert_array_equal(whole.y, chunked.y)
    X, y = load_svmlight_file(path, n_features=20)
    _assert_csr_equal(chunked.X, X)
    # line numbers in errors count across chunks
    lines[250] += " 3:oops"
    bad = _write(tmp_path, "bad.svm", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"bad\.svm:251: a feature value is not a number"):
        read_libsvm(bad)


@pytest.mark.parametrize("line, message", [
    ("abc 1:2", "the label is not a number"),
    ("1 1:2 3", "expected index:value pairs"),
    ("1 1:2:3", "expected index:value pairs"),
    ("1 1:", "expected index:value pairs"),
    ("1 :5", "expected index:value pairs"),
    ("1:2 3:4", "the label is not a number"),
    ("1 -1:2", "a feature index must be a non-negative integer"),
    ("1 1.5:2", "a feature index must be a non-negative integer"),
    ("1 2:1e", "a feature value is not a number"),
    ("1 2:nope", "a feature value is not a number"),
    ("1 qid:x 2:1", "qid must be"),
    ("1 qid:1 qid:2 2:1", "qid must be"),
])
def test_libsvm_malformed_line_is_named(tmp_path, line, message):
    path = _write(tmp_path, "bad.svm", f"1 1:1\n\n{line}\n0 2:2\n")
    with pytest.raises(ValueError, match=rf"bad\.svm:3: {message}"):
        read_libsvm(path)


def test_libsvm_qid_errors(tmp_path):
    mixed = _write(tmp_path, "m.svm", "1 qid:1 1:1\n0 1:2\n")
    with pytest.raises(ValueError, match=r"m\.svm:2: every line needs a qid"):
        read_libsvm(mixed)
    split = _write(tmp_path, "s.svm", "1 qid:1 1:1\n0 qid:2 1:2\n0 qid:1 1:2\n")
    with pytest.raises(ValueError, match=r"s\.svm:3: rows of qid 1 are not contiguous"):
        read_libsvm(split)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_libsvm(tmp_path / "nope.svm")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_data(tmp_path / "nope.csv")
    empty = _write(tmp_path, "e.svm", "# only a comment\n\n")
    with pytest.raises(ValueError, match="no data rows"):
        read_libsvm(empty)
    with pytest.raises(ValueError, match="no data rows"):
        read_csv(_write(tmp_path, "e.csv", "\n\n"))
    with pytest.raises(ValueError, match="no data rows"):
        read_csv(_write(tmp_path, "h.csv", "a,b\n"))


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40),
       st.sampled_from(["{!r}", "{:.3f}", "{:g}", "{:.17g}", "{:.6e}", "{:.12E}"]))
def test_libsvm_values_equal_python_float(tmp_path_factory, values, fmt):
    """The scanner's own number parser must round exactly as float() does."""
    texts = [fmt.format(v) for v in values]
    body = "".join(f"{t} 1:{t}\n" for t in texts)
    path = tmp_path_factory.mktemp("f") / "v.svm"
    path.write_text(body)
    d = read_libsvm(path, zero_based=False)
    want = np.array([float(t) for t in texts])
    np.testing.assert_array_equal(d.y, want)
    np.testing.assert_array_equal(d.X.toarray()[:, 0], want)


# -- delimited text -------------------------------------------------------------------------------
def test_tsv_real_file_matches_pandas():
    ours = read_csv(HIGGS)
    df = pd.read_csv(HIGGS, sep="\t", header=None)
    np.testing.assert_array_equal(ours.y, df[0].to_numpy(float))
    np.testing.assert_array_equal(ours.X, df.drop(columns=0).to_numpy(float))
    assert ours.feature_names is None and ours.X.flags.c_contiguous


CSV_TEXT = """"w","x 1",label,x2,x3
1.5,1,0,NA,7
2,,1,3e-2,?
0.5,-4,1, null ,N/A
3,2.5,0,nan,None
"""


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz", "t.txt"])
def test_csv_header_na_and_columns_match_pandas(tmp_path, name):
    path = _write(tmp_path, name, CSV_TEXT)
    ours = read_csv(path, label_column="label", weight_column=0)
    df = pd.read_csv(path, na_values=["NA", "?", "null", " null ", "N/A", "None"])
    np.testing.assert_array_equal(ours.y, df["label"].to_numpy(float))
    np.testing.assert_array_equal(ours.weight, df["w"].to_numpy(float))
    np.testing.assert_array_equal(ours.X, df[["x 1", "x2", "x3"]].to_numpy(float))
    assert ours.feature_names == ["x 1", "x2", "x3"]
    # column indices count from the end too
    same = read_csv(path, label_column=2, weight_column=-5)
    np.testing.assert_array_equal(same.X, ours.X)


def test_csv_without_header_and_whitespace_delimiter(tmp_path):
    rng = np.random.default_rng(1)
    M = rng.normal(size=(50, 4)) * 10.0 ** rng.integers(-20, 20, size=(50, 4))
    lines = ["   ".join(repr(float(v)) for v in row) for row in M]
    lines[3] = lines[3].split(maxsplit=1)[0] + " NA " + " ".join(lines[3].split()[2:])
    path = _write(tmp_path, "ws.dat", "\n".join(lines) + "\n")
    ours = read_csv(path, label_column=None)
    df = pd.read_csv(path, sep=r"\s+", header=None)
    np.testing.assert_array_equal(ours.X, df.to_numpy(float))
    assert ours.y is None and ours.feature_names is None
    assert np.isnan(ours.X[3, 1])


def test_csv_errors_name_the_line(tmp_path):
    ragged = _write(tmp_path, "r.csv", "a,b,c\n1,2,3\n\n4,5\n")
    with pytest.raises(ValueError, match=r"r\.csv:4: expected 3 fields, found 2"):
        read_csv(ragged)
    word = _write(tmp_path, "w.csv", "1,2\n3,4\n5,abc\n")
    with pytest.raises(ValueError, match=r"w\.csv:3: column 1 value 'abc' is not a number"):
        read_csv(word)
    with pytest.raises(ValueError, match="has no header line"):
        read_csv(word, label_column="y")
    with pytest.raises(ValueError, match="out of range"):
        read_csv(word, label_column=5)
    with pytest.raises(ValueError, match="same column"):
        read_csv(word, label_column=0, weight_column=-2)
    with pytest.raises(ValueError, match="no feature columns"):
        read_csv(_write(tmp_path, "one.csv", "1\n2\n"))


def test_real_csv_with_categorical_columns_is_rejected_with_line():
    """The Adult census file has text columns: the reader must say which line and value."""
    with pytest.raises(ValueError, match=r"adult\.sample\.csv:2: column 1 value 'Private' is "
                                         r"not a number"):
        read_csv(ADULT, label_column="income_gt_50k")


# -- dispatch -------------------------------------------------------------------------------------
def test_detect_format_and_load_data(tmp_path):
    assert detect_format(RANK) == "libsvm"
    assert detect_format(HIGGS) == "tsv"
    assert detect_format(_write(tmp_path, "a.txt", "1,2\n")) == "csv"
    assert detect_format(_write(tmp_path, "a.svm", "1 2 3\n")) == "libsvm"
    ranked = load_data(RANK)
    assert sp.issparse(ranked.X) and ranked.X.shape == load_svmlight_file(RANK)[0].shape
    binary = load_data(HIGGS, label_column=0)
    assert binary.X.shape == (7000, 28)
    with pytest.raises(ValueError, match="weight column is only supported"):
        load_data(RANK, weight_column=1)
    with pytest.raises(ValueError, match="format must be"):
        load_data(RANK, format="parquet")
    semi = _write(tmp_path, "semi.txt", "1;2\n3;4\n")
    np.testing.assert_array_equal(load_data(semi, format="csv", delimiter=";").X, [[2], [4]])


def test_file_data_to_dataset():
    d = read_csv(HIGGS).to_dataset(max_bin=64)
    assert isinstance(d, Dataset) and d.shape == (7000, 28) and d.max_bin == 64
    ranked = load_data(RANK).to_dataset()
    assert ranked.num_row() == 100
    assert ranked.is_sparse and ranked.data.toarray()[0, 1] == 0  # absent entries: zeros
    ranked = load_data(RANK).to_dataset(unstored="nan")
    assert math.isnan(ranked.data.toarray()[0, 1])  # or missing values


def test_label_column_does_not_apply_to_libsvm():
    with pytest.raises(ValueError, match="does not apply to a libsvm file"):
        load_data(RANK, label_column=2)
    assert load_data(RANK, label_column=None).y.shape == (100,)


# -- issue 18: byte-order marks and blank lines ----------------------------------------------------

BOM = "\ufeff"


@pytest.mark.parametrize("name", ["b.csv", "b.csv.gz", "b.tsv", "b.txt"])
def test_byte_order_mark_is_ignored(tmp_path, name):
    sep = {"b.csv": ",", "b.csv.gz": ",", "b.tsv": "\t", "b.txt": " "}[name]
    rows = [[1, 2.5, 3], [0, 4, 5e-3], [1, -6, 7]]
    body = "".join(sep.join(repr(float(v)) for v in r) + "\n" for r in rows)
    for header in ("", sep.join(["label", "a", "b"]) + "\n"):
        path = _write(tmp_path, name, BOM + header + body)
        # pandas reads the mark as part of no field (its default encoding is utf-8-sig-aware)
        df = pd.read_csv(path, sep=sep if sep != " " else r"\s+",
                         header=0 if header else None, encoding="utf-8-sig")
        got = read_csv(path) if not header else read_csv(path, label_column="label")
        np.testing.assert_array_equal(np.column_stack([got.y, got.X]), df.to_numpy(float))
        assert got.feature_names == (["a", "b"] if header else None)


def test_byte_order_mark_on_libsvm(tmp_path):
    text = "1 1:2.5 3:4\n0 2:1\n"
    plain, marked = _write(tmp_path, "p.svm", text), _write(tmp_path, "m.svm", BOM + text)
    a, b = read_libsvm(plain), read_libsvm(marked)
    np.testing.assert_array_equal(a.y, b.y)
    _assert_csr_equal(a.X, b.X)
    assert detect_format(_write(tmp_path, "m.data", BOM + text)) == "libsvm"


@pytest.mark.parametrize("blank", ["   ", " \t ", "\t", "  \r", "\f", ""])
def test_blank_lines_are_skipped_as_pandas_does(tmp_path, blank):
    text = f"label,a,b\n1,2,3\n{blank}\n0,4,5\n# note\n{blank}\n1,,7\n"
    path = _write(tmp_path, "s.csv", text)
    got = read_csv(path, label_column="label")
    np.testing.assert_array_equal(got.y, [1, 0, 1])
    np.testing.assert_array_equal(got.X, [[2, 3], [4, 5], [np.nan, 7]])
    if blank.strip(" \t"):
        return  # pandas reads a line holding \r or \f as a row; skip only the comparison
    df = pd.read_csv(path, comment="#", skip_blank_lines=True)
    df = df[~df.isna().all(axis=1)]  # pandas keeps a line of spaces as a row of NaN
    np.testing.assert_array_equal(got.X, df[["a", "b"]].to_numpy(float))


def test_blank_lines_keep_file_line_numbers_in_errors(tmp_path):
    path = _write(tmp_path, "e.csv", "1,2,3\n   \n \t\n0,x,5\n")
    with pytest.raises(ValueError, match=r"e\.csv:4: column 1 value 'x' is not a number"):
        read_csv(path)
    path = _write(tmp_path, "f.csv", "1,2,3\n   \n0,5\n")
    with pytest.raises(ValueError, match=r"f\.csv:3: expected 3 fields, found 2"):
        read_csv(path)


def test_a_line_of_delimiters_is_a_row_of_missing_values(tmp_path):
    # not blank: in a TSV, a line of tabs holds empty fields
    got = read_csv(_write(tmp_path, "t.tsv", "1\t2\t3\n\t\t\n"), label_column=None)
    np.testing.assert_array_equal(got.X, [[1, 2, 3], [np.nan] * 3])
