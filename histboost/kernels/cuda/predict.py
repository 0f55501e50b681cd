"""Tree traversal on the GPU, one thread per row: margins of a forest over the binned matrix
(the training rows outside a tree's row sample). The forest layout is
`histboost.tree.predictor.PackedForest`'s and the rules are those of
`histboost.kernels.cpu.predict` (bin <= split_bin goes left, the missing slot to the default
side; oblivious trees by their bit path)."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel


@cuda.jit
def _add_margin_binned(bins, missing_bins, tree_class, left, right, feature, split_bin,
                       default_left, value, node_ptr, level_ptr, obl_feature, obl_bin,
                       obl_default_left, leaf_ptr, obl_leaf_value, margin):
    i = cuda.grid(1)
    if i >= bins.shape[0]:
        return
    for t in range(tree_class.shape[0]):
        lo = level_ptr[t]
        hi = level_ptr[t + 1]
        if hi > lo:
            idx = 0
            for lv in range(lo, hi):
                f = obl_feature[lv]
                b = np.int64(bins[i, f])
                if b == missing_bins[f]:
                    go_right = obl_default_left[lv] == 0
                else:
                    go_right = b > obl_bin[lv]
                idx = 2 * idx + (1 if go_right else 0)
            v = obl_leaf_value[leaf_ptr[t] + idx]
        else:
            base = node_ptr[t]
            node = 0
            while left[base + node] != -1:
                f = feature[base + node]
                b = np.int64(bins[i, f])
                if b == missing_bins[f]:
                    node = left[base + node] if default_left[base + node] else right[
                        base + node]
                elif b <= split_bin[base + node]:
                    node = left[base + node]
                else:
                    node = right[base + node]
            v = value[base + node]
        margin[i, tree_class[t]] += v


_I32, _I64, _F64, _U8 = ("int32", 1), ("int64", 1), ("float64", 1), ("uint8", 1)
_TAIL = (_I32, _I32, _I32, _I32, _I32, _I32, _U8, _F64, _I64, _I64, _I32, _I32, _U8, _I64,
         _F64, ("float64", 2))
ADD_MARGIN_BINNED = {
    np.dtype(np.uint8): CudaKernel(_add_margin_binned, (("uint8", 2), *_TAIL)),
    np.dtype(np.int32): CudaKernel(_add_margin_binned, (("int32", 2), *_TAIL)),
}
KERNELS = tuple(ADD_MARGIN_BINNED.values())
