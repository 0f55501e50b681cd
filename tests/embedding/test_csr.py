"""CSR builders and validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from histboost.embedding import (
    CSRValidationError,
    concat_slots,
    csr_from_dense,
    csr_from_leaf_indices,
    csr_from_lists,
    csr_from_pandas,
    validate_csr,
)
from histboost.embedding.csr import column_salt


def _bags(batch):
    ro, k = np.asarray(batch.row_offsets), np.asarray(batch.keys)
    return [k[ro[i]:ro[i + 1]].tolist() for i in range(len(ro) - 1)]


def test_from_lists():
    b = csr_from_lists([[1, None, [2, 2, 3]], [[], 4, (5,)]])
    assert b.num_slots == 3 and b.batch_size == 2 and b.nnz == 6
    assert _bags(b) == [[1], [], [2, 2, 3], [], [4], [5]]
    with pytest.raises(CSRValidationError, match="expected num_slots=3"):
        csr_from_lists([[1, 2, 3], [1, 2]])


def test_from_pandas_salts_columns_and_handles_missing_strings_and_lists():
    df = pd.DataFrame({
        "user": pd.array([7, None, 7], dtype="Int64"),
        "item": pd.array([7, 8, 9], dtype="int64"),
        "tag": ["a", None, "b"],
        "hist": [[1, 2], [], np.array([3])],
    })
    b = csr_from_pandas(df)
    bags = _bags(b)
    assert b.num_slots == 4
    assert bags[0] == [7 ^ column_salt(0)] and bags[4] == [] and bags[8] == bags[0]
    assert bags[1] == [7 ^ column_salt(1)] and bags[1] != bags[0]
    assert bags[6] == [] and bags[2] != bags[10] and len(bags[2]) == 1
    assert bags[3] == [1 ^ column_salt(3), 2 ^ column_salt(3)] and bags[7] == []
    # Many columns: masks stay distinct, keys stay non-negative.
    wide = pd.DataFrame({f"c{i}": [0] for i in range(300)})
    keys = np.asarray(csr_from_pandas(wide).keys)
    assert len(set(keys.tolist())) == 300 and keys.min() >= 0
    same = csr_from_pandas(df, salt_columns=False)
    assert _bags(same)[0] == _bags(same)[1] == [7]


def test_from_dense_and_concat_slots():
    a = csr_from_dense(np.array([[1, 2], [3, 4]]))
    b = csr_from_lists([[[9, 9]], [None]])
    c = concat_slots(a, b, a)
    assert c.num_slots == 5
    assert _bags(c) == [[1], [2], [9, 9], [1], [2], [3], [4], [], [3], [4]]
    with pytest.raises(CSRValidationError, match="different batch sizes"):
        concat_slots(a, csr_from_lists([[1]]))


def test_slice_and_to_torch():
    b = csr_from_lists([[1, [2, 3]], [None, 4], [5, 6]])
    s = b.slice_samples(1, 3)
    assert _bags(s) == [[], [4], [5], [6]]
    t = s.to_torch()
    assert isinstance(t.keys, torch.Tensor) and t.keys.dtype == torch.int64
    assert _bags(t.numpy()) == _bags(s)


def test_leaf_indices_from_a_trained_booster():
    import histboost

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(float)
    bst = histboost.train({"objective": "binary:logistic", "max_depth": 3, "verbose": -1},
                          histboost.Dataset(X, y), num_boost_round=4, verbose_eval=False)
    leaves = bst.predict(X, pred_leaf=True)
    b = csr_from_leaf_indices(leaves, num_leaves=64)
    assert b.num_slots == leaves.shape[1] and b.nnz == leaves.size
    keys = np.asarray(b.keys).reshape(leaves.shape)
    # Equal keys exactly for equal (tree, leaf) pairs; trees never share keys.
    for t in range(leaves.shape[1]):
        assert len(np.unique(keys[:, t])) == len(np.unique(leaves[:, t]))
    assert len(np.unique(keys)) == sum(len(np.unique(leaves[:, t])) for t in range(4))
    with pytest.raises(CSRValidationError, match="num_leaves"):
        csr_from_leaf_indices(leaves, num_leaves=1)
    neg = csr_from_leaf_indices(np.array([[0, -1]]), num_leaves=2)
    assert _bags(neg) == [[1 << 60], []]


@pytest.mark.parametrize("as_torch", [False, True])
def test_validation_errors(as_torch):
    conv = torch.tensor if as_torch else np.array

    def check(ro, k, s, match):
        with pytest.raises(CSRValidationError, match=match):
            validate_csr(conv(ro), conv(k), s)

    check([1, 2], [5, 6], 1, "must be 0")
    check([0, 2, 1], [5, 6], 1, r"row_offsets\[2\] < row_offsets\[1\]")
    check([0, 1], [5, 6], 1, "must equal len")
    check([0, 1, 2], [5, 6], 3, "multiple of num_slots")
    check([0, 1], [-(2**63)], 1, "reserved")
    validate_csr(conv([0, 0, 2]), conv([1, 2]), 2)


# -- issue 18: keys that are not int64 ------------------------------------------------------------

@pytest.mark.parametrize("samples,exc,match", [
    ([[True]], TypeError, "sample 0 slot 0: keys must be integers, got booleans"),
    ([[[1, False]]], TypeError, "booleans"),
    ([[np.bool_(True)]], TypeError, "booleans"),
    ([[1.5]], TypeError, "sample 0 slot 0: expected an int key.*got 1.5"),
    ([[[1, 2.0]]], TypeError, "keys must be integers, got 2.0"),
    ([[2, "ab"]], TypeError, "sample 0 slot 1: expected an int key.*'ab'"),
    ([[2**63]], ValueError, "9223372036854775808, outside int64"),
    ([[-(2**63) - 1]], ValueError, "outside int64"),
    ([[[np.uint64(2**64 - 1)]]], ValueError, "18446744073709551615, outside int64"),
])
def test_from_lists_rejects_keys_that_are_not_int64(samples, exc, match):
    with pytest.raises(exc, match=match):
        csr_from_lists(samples)


def test_from_lists_extreme_int64_keys_are_kept():
    b = csr_from_lists([[2**63 - 1, [-(2**63) + 1, np.uint64(2**63 - 1)]]])
    assert _bags(b) == [[2**63 - 1], [-(2**63) + 1, 2**63 - 1]]


@pytest.mark.parametrize("ids,exc,match", [
    (np.array([[True, False]]), TypeError, "ids must be integers, got booleans"),
    (np.array([[1.5, 2.0]]), TypeError, "dtype float64"),
    (np.array([[2**64 - 1, 1]], np.uint64), ValueError, "18446744073709551615, outside int64"),
    (np.array([[2**63, 1]], np.uint64), ValueError, "9223372036854775808"),
    (torch.tensor([[True]]), TypeError, "torch.bool"),
    ([[2**63, 1]], ValueError, "outside int64"),
])
def test_from_dense_rejects_keys_that_are_not_int64(ids, exc, match):
    with pytest.raises(exc, match=match):
        csr_from_dense(ids)


def test_unsigned_ids_below_two_to_the_63_are_kept():
    ids = np.array([[2**63 - 1, 7]], np.uint64)
    assert _bags(csr_from_dense(ids)) == [[2**63 - 1], [7]]
    # the documented way to use full 64-bit unsigned ids: reinterpret the bits
    big = np.array([[2**64 - 1, 2**63 + 5]], np.uint64)
    assert _bags(csr_from_dense(big.view(np.int64))) == [[-1], [-(2**63) + 5]]


@pytest.mark.parametrize("keys", [np.array([2**64 - 1], np.uint64),
                                  torch.tensor([2**64 - 1], dtype=torch.uint64),
                                  np.array([2**63], np.uint64)])
def test_validate_rejects_unsigned_keys_beyond_int64(keys):
    ro = np.array([0, 1]) if isinstance(keys, np.ndarray) else torch.tensor([0, 1])
    with pytest.raises(CSRValidationError, match="outside int64"):
        validate_csr(ro, keys, 1)
    below = keys // 2 if isinstance(keys, np.ndarray) else torch.tensor([5], dtype=torch.uint64)
    validate_csr(ro, below, 1)  # unsigned keys below 2**63 are valid


def test_from_pandas_rejects_ids_beyond_int64():
    for col in (pd.Series(np.array([2**64 - 1, 5], np.uint64)),
                pd.Series(pd.array([2**63, None], dtype="UInt64")),
                pd.Series([2**64 - 1, "x"], dtype=object)):
        with pytest.raises(ValueError, match="outside int64"):
            csr_from_pandas(pd.DataFrame({"a": col}), salt_columns=False)
    ok = csr_from_pandas(pd.DataFrame({"a": np.array([2**63 - 1, 5], np.uint64)}),
                         salt_columns=False)
    assert _bags(ok) == [[2**63 - 1], [5]]


def test_to_torch_refuses_what_it_would_wrap():
    from histboost.embedding import CSRBatch

    with pytest.raises(ValueError, match="outside int64"):
        CSRBatch(np.array([0, 1]), np.array([2**64 - 1], np.uint64), 1).to_torch()
    with pytest.raises(TypeError, match="booleans"):
        CSRBatch(np.array([0, 1]), np.array([True]), 1).to_torch()
