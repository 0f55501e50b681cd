"""Tree traversal on the GPU, one thread per row: margins of a forest over raw features
(`Booster.predict` on the device) or over the binned matrix (the training rows outside a
tree's row sample). Both read their matrix column-major, (F, n): the threads of a warp are
consecutive rows, so where they test the same feature (every row at the root) their loads
coalesce. The forest layout is `histboost.tree.predictor.PackedForest`'s and the
rules are those of `histboost.kernels.cpu.predict`: x <= threshold (bin <= split_bin) goes
left, NaN (the missing slot) to the default side; oblivious trees by their bit path."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..cpu import predict as cpu_predict
from ..cpu.predict import binned_goes_left, raw_goes_left
from ..launch import CudaKernel

# The tree walk and the leaf lookup are the CPU predictor's (`leaf_index`, `leaf_value`: one
# algorithm for every row layout), compiled for the device; a layout's rule reads its rows
# (here column-major (F, n) matrices; the sparse training rows' rule in `cuda.sparse`).
leaf_index = cuda.jit(device=True, inline=True)(cpu_predict.leaf_index.py_func)
leaf_value = cuda.jit(device=True, inline=True)(cpu_predict.leaf_value.py_func)


@cuda.jit(device=True, inline=True)
def columns_binned_rule(a, b, c, d, e, i, f, cut, default_left):
    """Binned columns a: (F, n) uint8/int32; b: int32 (F,) each feature's missing slot."""
    return binned_goes_left(np.int64(a[f, i]), b[f], cut, default_left)


@cuda.jit(device=True, inline=True)
def columns_raw_rule(a, b, c, d, e, i, f, cut, default_left):
    """Raw columns a: (F, n) float32/float64."""
    return raw_goes_left(a[f, i], cut, default_left)


@cuda.jit
def _add_margin_binned(columns, missing_bins, tree_class, left, right, feature, split_bin,
                       default_left, value, node_ptr, level_ptr, obl_feature, obl_bin,
                       obl_default_left, leaf_ptr, obl_leaf_value, margin):
    i = cuda.grid(1)
    if i >= columns.shape[1]:
        return
    for t in range(tree_class.shape[0]):
        leaf = leaf_index(columns_binned_rule, columns, missing_bins, None, None, None, i, t,
                          left, right, feature, split_bin, default_left, node_ptr, level_ptr,
                          obl_feature, obl_bin, obl_default_left)
        margin[i, tree_class[t]] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                               obl_leaf_value)


@cuda.jit
def _add_margin_raw(XT, tree_begin, tree_end, tree_class, left, right, feature, threshold,
                    default_left, value, node_ptr, level_ptr, obl_feature, obl_threshold,
                    obl_default_left, leaf_ptr, obl_leaf_value, margin):
    i = cuda.grid(1)
    if i >= XT.shape[1]:
        return
    for t in range(tree_begin, tree_end):
        leaf = leaf_index(columns_raw_rule, XT, None, None, None, None, i, t, left, right,
                          feature, threshold, default_left, node_ptr, level_ptr, obl_feature,
                          obl_threshold, obl_default_left)
        margin[i, tree_class[t]] += leaf_value(t, leaf, value, node_ptr, level_ptr, leaf_ptr,
                                               obl_leaf_value)


_I32, _I64, _F64, _U8 = ("int32", 1), ("int64", 1), ("float64", 1), ("uint8", 1)
_TAIL = (_I32, _I32, _I32, _I32, _I32, _I32, _U8, _F64, _I64, _I64, _I32, _I32, _U8, _I64,
         _F64, ("float64", 2))
ADD_MARGIN_BINNED = {
    np.dtype(np.uint8): CudaKernel(_add_margin_binned, (("uint8", 2), *_TAIL)),
    np.dtype(np.int32): CudaKernel(_add_margin_binned, (("int32", 2), *_TAIL)),
}
_RAW_TAIL = ("int64", "int64", _I32, _I32, _I32, _I32, _F64, _U8, _F64, _I64, _I64, _I32, _F64,
             _U8, _I64, _F64, ("float64", 2))
ADD_MARGIN_RAW = {
    np.dtype(np.float32): CudaKernel(_add_margin_raw, (("float32", 2), *_RAW_TAIL)),
    np.dtype(np.float64): CudaKernel(_add_margin_raw, (("float64", 2), *_RAW_TAIL)),
}
KERNELS = (*ADD_MARGIN_BINNED.values(), *ADD_MARGIN_RAW.values())


def forest_arrays(forest, device) -> tuple:
    """The raw-rule arrays of a `PackedForest` on `device` (torch tensors, in the kernel's
    argument order after the tree range)."""
    import torch

    names = ("tree_class", "left", "right", "feature", "threshold", "default_left", "value",
             "node_ptr", "level_ptr", "obl_feature", "obl_threshold", "obl_default_left",
             "leaf_ptr", "obl_leaf_value")
    return tuple(torch.from_numpy(np.ascontiguousarray(getattr(forest, n))).to(device)
                 for n in names)


def add_margin_raw(forest_on_device: tuple, X, margin, begin: int, end: int) -> None:
    """margin (n, K) float64 += trees [begin, end) of the forest on X (n, F) float32/float64,
    torch tensors on one CUDA device (CPU tensors under the simulator)."""
    if X.shape[0] == 0 or end <= begin:
        return
    add_margin_columns(forest_on_device, X.t().contiguous(), margin, begin, end)


def add_margin_columns(forest_on_device: tuple, XT, margin, begin: int, end: int) -> None:
    """As `add_margin_raw` on the column-major matrix XT (F, n), C-contiguous (the extended
    matrix of a categorical model is built so, `histboost.categorical.predict_cuda`)."""
    from ._common import THREADS, grid

    if XT.shape[1] == 0 or end <= begin:
        return
    kernel = ADD_MARGIN_RAW[np.dtype(str(XT.dtype).replace("torch.", ""))]
    kernel.launch(grid(XT.shape[1]), THREADS, XT.device, XT, begin, end, *forest_on_device,
                  margin)
