"""Tree traversal over a packed forest (see `histboost.tree.predictor.PackedForest`).

Normal trees: node arrays concatenated, tree t owning nodes ``node_ptr[t]:node_ptr[t+1]``,
children indices local to the tree, ``left == -1`` marks a leaf. Oblivious trees: one
(feature, threshold, default_left) per level, tree t owning levels ``level_ptr[t]:level_ptr[t+1]``
and leaves ``leaf_ptr[t]:leaf_ptr[t+1]``; the leaf index is the bit path (level 0 = most
significant bit, 1 = right). Raw rule: ``x <= threshold`` goes left, NaN goes to the default
side. Binned rule: ``bin <= split_bin`` goes left, the missing slot goes to the default side.

A forest without oblivious trees passes None for the oblivious arrays (``obl_*``): the
kernels are then compiled without the oblivious traversal (about a quarter of their compile
time, which a first run pays for each of the two kernels it uses).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._intrinsics import prefetch

_BLOCK = 128  # rows per task: a block's rows stay in cache while all trees pass over them
# add_leaf_values: slices of the row positions (several per thread, for balance) and the rows
# ahead whose margin is prefetched
_LEAF_SLICES = 64
_PREFETCH_DISTANCE = 16


@nb.njit(cache=True, inline="always")
def _leaf_raw(x, t, left, right, feature, threshold, default_left, node_ptr, level_ptr,
              obl_feature, obl_threshold, obl_default_left):
    if obl_feature is not None:  # a forest with oblivious trees (see the module)
        lo = level_ptr[t]
        hi = level_ptr[t + 1]
        if hi > lo:
            idx = 0
            for lv in range(lo, hi):
                v = x[obl_feature[lv]]
                if np.isnan(v):
                    go_right = obl_default_left[lv] == 0
                else:
                    go_right = v > obl_threshold[lv]
                idx = 2 * idx + (1 if go_right else 0)
            return idx
    base = node_ptr[t]
    node = 0
    while left[base + node] != -1:
        v = x[feature[base + node]]
        if np.isnan(v):
            node = left[base + node] if default_left[base + node] else right[base + node]
        elif v <= threshold[base + node]:
            node = left[base + node]
        else:
            node = right[base + node]
    return node


@nb.njit(cache=True, inline="always")
def _leaf_binned(brow, t, left, right, feature, split_bin, default_left, node_ptr, level_ptr,
                 obl_feature, obl_bin, obl_default_left, missing_bins):
    if obl_feature is not None:
        lo = level_ptr[t]
        hi = level_ptr[t + 1]
        if hi > lo:
            idx = 0
            for lv in range(lo, hi):
                f = obl_feature[lv]
                b = brow[f]
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
        b = brow[f]
        if b == missing_bins[f]:
            node = left[base + node] if default_left[base + node] else right[base + node]
        elif b <= split_bin[base + node]:
            node = left[base + node]
        else:
            node = right[base + node]
    return node


@nb.njit(cache=True, inline="always")
def _leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr, obl_leaf_value):
    if obl_leaf_value is not None:
        if level_ptr[t + 1] > level_ptr[t]:
            return obl_leaf_value[leaf_ptr[t] + leaf]
    return value[node_ptr[t] + leaf]


@nb.njit(cache=True, nogil=True)
def predict_margin_raw(lo, hi, X, tree_begin, tree_end, tree_class, left, right, feature,
                       threshold, default_left, value, node_ptr, level_ptr, obl_feature,
                       obl_threshold, obl_default_left, leaf_ptr, obl_leaf_value, out):
    """out[i, tree_class[t]] += leaf value of row i in tree t, for t in [tree_begin, tree_end)
    and rows i in [lo, hi) (`run_ranges`). X: (n, F) float32/float64; out: float64 (n, K)."""
    for r0 in range(lo, hi, _BLOCK):
        r1 = min(hi, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = _leaf_raw(X[i], t, left, right, feature, threshold, default_left,
                                 node_ptr, level_ptr, obl_feature, obl_threshold,
                                 obl_default_left)
                out[i, c] += _leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)


@nb.njit(cache=True, nogil=True)
def predict_leaf_raw(lo, hi, X, tree_begin, tree_end, left, right, feature, threshold,
                     default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
                     obl_default_left, out):
    """out[i, t - tree_begin] = leaf index of row i in tree t (node id for normal trees, bit
    path for oblivious trees), rows i in [lo, hi). out: int32 (n, tree_end - tree_begin)."""
    for r0 in range(lo, hi, _BLOCK):
        r1 = min(hi, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            for i in range(r0, r1):
                out[i, t - tree_begin] = _leaf_raw(X[i], t, left, right, feature, threshold,
                                                   default_left, node_ptr, level_ptr,
                                                   obl_feature, obl_threshold,
                                                   obl_default_left)


@nb.njit(cache=True, nogil=True)
def predict_margin_binned(lo, hi, bins, missing_bins, tree_begin, tree_end, tree_class, left,
                          right, feature, split_bin, default_left, value, node_ptr, level_ptr,
                          obl_feature, obl_bin, obl_default_left, leaf_ptr, obl_leaf_value,
                          out):
    """As `predict_margin_raw` on binned data (bins: (n, F) uint8/uint16, missing_bins: int32
    (F,) each feature's missing slot); gives the same result as the raw rule because a bin's
    upper bound is the split threshold."""
    for r0 in range(lo, hi, _BLOCK):
        r1 = min(hi, r0 + _BLOCK)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = _leaf_binned(bins[i], t, left, right, feature, split_bin, default_left,
                                    node_ptr, level_ptr, obl_feature, obl_bin,
                                    obl_default_left, missing_bins)
                out[i, c] += _leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)


@nb.njit(inline="always")
def _add_leaf_range(lo, hi, rows, leaf_starts, leaf_ends, leaf_values, col):
    for j in range(leaf_starts.shape[0]):
        a = np.uintp(max(leaf_starts[j], lo))
        b = np.uintp(min(leaf_ends[j], hi))
        v = leaf_values[j]
        for k in range(a, b):
            if k + np.uintp(_PREFETCH_DISTANCE) < b:
                prefetch(col, np.uintp(rows[k + np.uintp(_PREFETCH_DISTANCE)]))
            col[np.uintp(rows[k])] += v


@nb.njit(cache=True, nogil=True)
def add_leaf_values(lo, hi, rows, leaf_starts, leaf_ends, leaf_values, out, column):
    """out[rows[k], column] += leaf_values[j] for k in [leaf_starts[j], leaf_ends[j]), for the
    positions k in [lo, hi) of rows: the training rows' margin update straight from the final
    partition, no traversal. The margins ahead are prefetched: a leaf's rows are spread over
    the whole margin array."""
    _add_leaf_range(lo, hi, rows, leaf_starts, leaf_ends, leaf_values, out[:, column])


@nb.njit(parallel=True, cache=True, nogil=True)
def add_leaf_values_parallel(rows, leaf_starts, leaf_ends, leaf_values, out, column):
    """`add_leaf_values` of all positions of rows, in parallel: the threads take equal slices
    of the positions, not whole leaves (leaf sizes are far from even). Every row is updated
    once, so the result does not depend on the slicing."""
    n = rows.shape[0]
    col = out[:, column]
    for c in nb.prange(_LEAF_SLICES):
        _add_leaf_range(n * c // _LEAF_SLICES, n * (c + 1) // _LEAF_SLICES, rows, leaf_starts,
                        leaf_ends, leaf_values, col)
