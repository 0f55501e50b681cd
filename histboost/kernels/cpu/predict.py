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


@nb.njit(inline="always")
def raw_goes_left(v, cut, default_left):
    """The raw rule: v <= cut goes left, NaN to the default side."""
    if np.isnan(v):
        return default_left
    return v <= cut


@nb.njit(inline="always")
def binned_goes_left(b, missing_bin, cut, default_left):
    """The binned rule: bin <= cut goes left, the missing slot to the default side."""
    if b == missing_bin:
        return default_left
    return b <= cut


# A row layout's rule for `leaf_index` (here dense raw and binned rows; the sparse layouts in
# `kernels.cpu.sparse_predict`): goes_left(a, b, c, d, e, i, f, cut, default_left), whether row
# i of the rows held in a..e (arrays or a scalar; None where the layout needs fewer) takes the
# left child of a split on feature f at cut. They travel as arguments, not in a tuple: taking
# an array out of a tuple counts a reference, an atomic add, at every split of every row.

@nb.njit(inline="always")
def dense_raw_rule(a, b, c, d, e, i, f, cut, default_left):
    """Raw rows a: float32/float64 (n, F)."""
    return raw_goes_left(a[i, f], cut, default_left)


@nb.njit(inline="always")
def dense_binned_rule(a, b, c, d, e, i, f, cut, default_left):
    """Binned rows a: (n, F) uint8/uint16; b: int32 (F,) each feature's missing slot."""
    return binned_goes_left(a[i, f], b[f], cut, default_left)


@nb.njit(inline="always")
def leaf_index(goes_left, a, b, c, d, e, i, t, left, right, feature, cut, default_left,
               node_ptr, level_ptr, obl_feature, obl_cut, obl_default_left):
    """The leaf of row i in tree t, the tree walk of every row layout (goes_left: the layout's
    rule, see above, over its arrays a..e; cut: the trees' thresholds or split bins, as the
    rows are raw or binned): its node id in a normal tree, its bit path in an oblivious one.
    obl_feature None: the forest has no oblivious trees (see the module)."""
    if obl_feature is not None:
        lo = level_ptr[t]
        hi = level_ptr[t + 1]
        if hi > lo:
            idx = 0
            for lv in range(lo, hi):
                left_here = goes_left(a, b, c, d, e, i, obl_feature[lv], obl_cut[lv],
                                      obl_default_left[lv] != 0)
                idx = 2 * idx + (0 if left_here else 1)
            return idx
    base = node_ptr[t]
    node = 0
    while left[base + node] != -1:
        g = base + node
        if goes_left(a, b, c, d, e, i, feature[g], cut[g], default_left[g] != 0):
            node = left[g]
        else:
            node = right[g]
    return node


@nb.njit(cache=True, inline="always")
def leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr, obl_leaf_value):
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
        r1 = r0 + _BLOCK if r0 + _BLOCK < hi else hi  # no `min`: it compiles an overload
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = leaf_index(dense_raw_rule, X, None, None, None, None, i, t, left,
                                  right, feature, threshold, default_left, node_ptr,
                                  level_ptr, obl_feature, obl_threshold, obl_default_left)
                out[i, c] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                         obl_leaf_value)


@nb.njit(cache=True, nogil=True)
def predict_leaf_raw(lo, hi, X, tree_begin, tree_end, left, right, feature, threshold,
                     default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
                     obl_default_left, out):
    """out[i, t - tree_begin] = leaf index of row i in tree t (node id for normal trees, bit
    path for oblivious trees), rows i in [lo, hi). out: int32 (n, tree_end - tree_begin)."""
    for r0 in range(lo, hi, _BLOCK):
        r1 = r0 + _BLOCK if r0 + _BLOCK < hi else hi  # no `min`: it compiles an overload
        for t in range(tree_begin, tree_end):
            for i in range(r0, r1):
                out[i, t - tree_begin] = leaf_index(
                    dense_raw_rule, X, None, None, None, None, i, t, left, right, feature,
                    threshold, default_left, node_ptr, level_ptr, obl_feature, obl_threshold,
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
        r1 = r0 + _BLOCK if r0 + _BLOCK < hi else hi  # no `min`: it compiles an overload
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            for i in range(r0, r1):
                leaf = leaf_index(dense_binned_rule, bins, missing_bins, None, None, None, i,
                                  t, left, right, feature, split_bin, default_left, node_ptr,
                                  level_ptr, obl_feature, obl_bin, obl_default_left)
                out[i, c] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
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
