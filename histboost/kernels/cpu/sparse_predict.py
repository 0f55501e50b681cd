"""Tree traversal over sparse rows, without densifying (forest layout: `kernels.cpu.predict`).

Raw: a CSR matrix (indptr, indices ascending within a row, data) whose unstored entries are
`fill` (0.0, or NaN = missing); a split's feature is found by binary search in the row's
indices. Binned: the row-major slots of `histboost.data.sparse.SparseBins` (a row's slots
ascend with the feature), an absent feature being in its default bin.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .predict import binned_goes_left, leaf_index, leaf_value, raw_goes_left

_BLOCK = 128


@nb.njit(cache=True, nogil=True, inline="always")
def _value_at(indptr, indices, data, i, f, fill):
    """Value of feature f in CSR row i (fill when not stored)."""
    lo = indptr[i]
    hi = indptr[i + 1]
    a = lo
    b = hi
    while a < b:
        mid = (a + b) >> 1
        if indices[mid] < f:
            a = mid + 1
        else:
            b = mid
    if a < hi and indices[a] == f:
        return np.float64(data[a])
    return fill


@nb.njit(cache=True, nogil=True, inline="always")
def _bin_at(indptr, slots, offsets, default_bins, i, f):
    """Bin of feature f in binned row i: its slot in [offsets[f], offsets[f+1]) if stored,
    else the default bin."""
    lo = offsets[f]
    a = indptr[i]
    hi = indptr[i + 1]
    b = hi
    while a < b:
        mid = (a + b) >> 1
        if np.int64(slots[mid]) < lo:
            a = mid + 1
        else:
            b = mid
    if a < hi and np.int64(slots[a]) < offsets[f + 1]:
        return np.int64(slots[a]) - lo
    return np.int64(default_bins[f])


@nb.njit(inline="always")
def sparse_raw_rule(indptr, indices, data, fill, e, i, f, cut, default_left):
    """`predict.leaf_index`'s rule of CSR rows (unstored entries: fill; e unused)."""
    return raw_goes_left(_value_at(indptr, indices, data, i, f, fill), cut, default_left)


@nb.njit(inline="always")
def sparse_binned_rule(indptr, slots, offsets, default_bins, missing_bins, i, f, cut,
                       default_left):
    """`predict.leaf_index`'s rule of the sparse binned layout (see `_bin_at`)."""
    return binned_goes_left(_bin_at(indptr, slots, offsets, default_bins, i, f),
                            missing_bins[f], cut, default_left)


@nb.njit(parallel=True, cache=True, nogil=True)
def predict_margin_raw(indptr, indices, data, fill, tree_begin, tree_end, tree_class, left,
                       right, feature, threshold, default_left, value, node_ptr, level_ptr,
                       obl_feature, obl_threshold, obl_default_left, leaf_ptr, obl_leaf_value,
                       out):
    """out[i, tree_class[t]] += leaf value of CSR row i in tree t, t in [tree_begin,
    tree_end); the result of `kernels.cpu.predict.predict_margin_raw` on the dense
    equivalent."""
    n = indptr.shape[0] - 1
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        r0 = blk * _BLOCK
        r1 = min(n, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = leaf_index(sparse_raw_rule, indptr, indices, data, fill, None, i, t,
                                  left, right, feature, threshold, default_left, node_ptr,
                                  level_ptr, obl_feature, obl_threshold, obl_default_left)
                out[i, c] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)


@nb.njit(parallel=True, cache=True, nogil=True)
def predict_leaf_raw(indptr, indices, data, fill, tree_begin, tree_end, left, right, feature,
                     threshold, default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
                     obl_default_left, out):
    """out[i, t - tree_begin] = leaf index of CSR row i in tree t."""
    n = indptr.shape[0] - 1
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        r0 = blk * _BLOCK
        r1 = min(n, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            for i in range(r0, r1):
                out[i, t - tree_begin] = leaf_index(
                    sparse_raw_rule, indptr, indices, data, fill, None, i, t, left, right,
                    feature, threshold, default_left, node_ptr, level_ptr, obl_feature,
                    obl_threshold, obl_default_left)


@nb.njit(parallel=True, cache=True, nogil=True)
def predict_margin_binned(indptr, slots, offsets, default_bins, missing_bins, tree_begin,
                          tree_end, tree_class, left, right, feature, split_bin, default_left,
                          value, node_ptr, level_ptr, obl_feature, obl_bin, obl_default_left,
                          leaf_ptr, obl_leaf_value, out):
    """As `kernels.cpu.predict.predict_margin_binned` on the sparse binned layout."""
    n = indptr.shape[0] - 1
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        r0 = blk * _BLOCK
        r1 = min(n, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = leaf_index(sparse_binned_rule, indptr, slots, offsets, default_bins,
                                  missing_bins, i, t, left, right, feature, split_bin,
                                  default_left, node_ptr, level_ptr, obl_feature, obl_bin,
                                  obl_default_left)
                out[i, c] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)
