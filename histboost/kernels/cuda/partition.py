"""Row partition and the training-margin update on the GPU.

A split moves each parent's rows, kept as a contiguous range of the row-index array, into its
left and right children, stably (each side keeps the row order), for all parents of a level in
one launch of each step: `split_flags` marks the rows going left, the caller takes an
inclusive prefix sum of the marks over the whole array (one library scan), `scatter_rows`
writes every row to its place in a scratch array, and `copy_rows` copies the ranges back.
Work is cut into chunks of rows of one node, as for the histograms.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel
from ._common import THREADS


@cuda.jit
def _split_flags(columns, rows, chunk_node, chunk_start, chunk_end, node_feature, node_bin,
                 node_default_left, missing_bins, lo, flags):
    """flags[p - lo] = 1 if the row at position p goes left (bin <= node_bin, or the missing
    slot and default left), else 0, for the positions of every chunk (flags covers the
    positions of the call's nodes, from lo on). columns: (F, n) bins, column-major: a node's
    rows read one byte each from one contiguous column, coalesced while rows are dense."""
    c = cuda.blockIdx.x
    j = chunk_node[c]
    f = node_feature[j]
    split_bin = node_bin[j]
    missing = missing_bins[f]
    dleft = node_default_left[j]
    for p in range(chunk_start[c] + cuda.threadIdx.x, chunk_end[c], THREADS):
        b = np.int64(columns[f, rows[p]])
        if b == missing:
            flags[p - lo] = dleft
        else:
            flags[p - lo] = 1 if b <= split_bin else 0


@cuda.jit
def _scatter_rows(rows, flags, cum, chunk_node, chunk_start, chunk_end, node_start,
                  node_left_base, node_n_left, lo, scratch):
    """Stable partition: a left row goes to start + (lefts before it in the node), a right
    row to start + n_left + (rights before it). flags, cum (its inclusive prefix sum) cover
    positions from lo; node_left_base[j]: cum just before the node's range."""
    c = cuda.blockIdx.x
    j = chunk_node[c]
    s = node_start[j]
    base = node_left_base[j]
    n_left = node_n_left[j]
    for p in range(chunk_start[c] + cuda.threadIdx.x, chunk_end[c], THREADS):
        lefts_before = cum[p - lo] - flags[p - lo] - base
        if flags[p - lo]:
            scratch[s + lefts_before] = rows[p]
        else:
            scratch[s + n_left + (p - s - lefts_before)] = rows[p]


@cuda.jit
def _copy_rows(scratch, chunk_start, chunk_end, rows):
    c = cuda.blockIdx.x
    for p in range(chunk_start[c] + cuda.threadIdx.x, chunk_end[c], THREADS):
        rows[p] = scratch[p]


@cuda.jit
def _add_leaf_values(rows, chunk_node, chunk_start, chunk_end, values, output, margin):
    """margin[rows[p], output] += values[leaf] for the positions p of each leaf's chunks
    (every row is in one leaf: no atomics)."""
    c = cuda.blockIdx.x
    v = values[chunk_node[c]]
    for p in range(chunk_start[c] + cuda.threadIdx.x, chunk_end[c], THREADS):
        margin[rows[p], output] += v


_I1 = ("int64", 1)
_TAIL = (("int32", 1), _I1, _I1, _I1, ("int32", 1), _I1, ("uint8", 1), ("int32", 1),
         "int64", ("int32", 1))
SPLIT_FLAGS = {np.dtype(np.uint8): CudaKernel(_split_flags, (("uint8", 2), *_TAIL)),
               np.dtype(np.int32): CudaKernel(_split_flags, (("int32", 2), *_TAIL))}
SCATTER_ROWS = CudaKernel(_scatter_rows, (("int32", 1), ("int32", 1), _I1, _I1, _I1, _I1, _I1,
                                          _I1, _I1, "int64", ("int32", 1)))
COPY_ROWS = CudaKernel(_copy_rows, (("int32", 1), _I1, _I1, ("int32", 1)))
ADD_LEAF_VALUES = CudaKernel(_add_leaf_values, (("int32", 1), _I1, _I1, _I1, ("float64", 1),
                                                "int64", ("float64", 2)))
KERNELS = (*SPLIT_FLAGS.values(), SCATTER_ROWS, COPY_ROWS, ADD_LEAF_VALUES)
