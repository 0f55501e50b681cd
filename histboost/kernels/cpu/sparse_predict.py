"""Tree traversal over sparse rows, without densifying (forest layout: `kernels.cpu.predict`).

Raw: a CSR matrix (indptr, indices ascending within a row, data) whose unstored entries are
`fill` (0.0, or NaN = missing); a split's feature is found by binary search in the row's
indices. Binned: the row-major slots of `histboost.data.sparse.SparseBins` (a row's slots
ascend with the feature), an absent feature being in its default bin.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .predict import _leaf_value

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
def _leaf_sparse_raw(indptr, indices, data, fill, i, t, left, right, feature, threshold,
                     default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
                     obl_default_left):
    lo = level_ptr[t]
    hi = level_ptr[t + 1]
    if hi > lo:
        idx = 0
        for lv in range(lo, hi):
            v = _value_at(indptr, indices, data, i, obl_feature[lv], fill)
            if np.isnan(v):
                go_right = obl_default_left[lv] == 0
            else:
                go_right = v > obl_threshold[lv]
            idx = 2 * idx + (1 if go_right else 0)
        return idx
    base = node_ptr[t]
    node = 0
    while left[base + node] != -1:
        v = _value_at(indptr, indices, data, i, feature[base + node], fill)
        if np.isnan(v):
            node = left[base + node] if default_left[base + node] else right[base + node]
        elif v <= threshold[base + node]:
            node = left[base + node]
        else:
            node = right[base + node]
    return node


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
                leaf = _leaf_sparse_raw(indptr, indices, data, fill, i, t, left, right, feature,
                                        threshold, default_left, node_ptr, level_ptr,
                                        obl_feature, obl_threshold, obl_default_left)
                out[i, c] += _leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
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
                out[i, t - tree_begin] = _leaf_sparse_raw(
                    indptr, indices, data, fill, i, t, left, right, feature, threshold,
                    default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
                    obl_default_left)


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


@nb.njit(cache=True, nogil=True, inline="always")
def _leaf_sparse_binned(indptr, slots, offsets, default_bins, missing_bins, i, t, left, right,
                        feature, split_bin, default_left, node_ptr, level_ptr, obl_feature,
                        obl_bin, obl_default_left):
    lo = level_ptr[t]
    hi = level_ptr[t + 1]
    if hi > lo:
        idx = 0
        for lv in range(lo, hi):
            f = obl_feature[lv]
            b = _bin_at(indptr, slots, offsets, default_bins, i, f)
            if b == missing_bins[f]:
                go_right = obl_default_left[lv] == 0
            else:
                go_right = b > obl_bin[lv]
            idx = 2 * idx + (1 if go_right else 0)
        return idx
    base = node_ptr[t]
    node = 0
    while left[base + node] != -1:
        f = feature[base + node]
        b = _bin_at(indptr, slots, offsets, default_bins, i, f)
        if b == missing_bins[f]:
            node = left[base + node] if default_left[base + node] else right[base + node]
        elif b <= split_bin[base + node]:
            node = left[base + node]
        else:
            node = right[base + node]
    return node


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
                leaf = _leaf_sparse_binned(indptr, slots, offsets, default_bins, missing_bins,
                                           i, t, left, right, feature, split_bin, default_left,
                                           node_ptr, level_ptr, obl_feature, obl_bin,
                                           obl_default_left)
                out[i, c] += _leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)
