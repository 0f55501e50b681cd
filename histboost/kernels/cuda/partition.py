"""Row partition and the training-margin update on the GPU.

A node's rows are a contiguous range of one of two row-index buffers, rows2 int32 (2, n); a
split moves each parent's rows, stably (each side keeps the row order), into the same range
of the other buffer, left child first, so no copy back is needed (a node's buffer alternates
with its depth). All parents of a call go in two launches over the chunks of their rows:
`count_left` counts each chunk's rows going left, then `scatter_rows` gives each chunk its
place from the counts of the chunks before it in its node (a block-wide sum: a node has at
most `MAX_NODE_CHUNKS` chunks, `partition_chunk_rows`), walks the chunk in tiles of one
position per thread, each row's place from a block-wide prefix sum over the tile (contiguous
reads and writes; a run of consecutive positions per thread made every warp's accesses
strided: 150-450 us a level at 10M rows on an H100), and writes the children's row counts.
No library scan and no per-row flag array: the host's only work is the node table.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel, simulated
from ._common import (
    CHUNK_ROWS,
    T_BIN,
    T_CHUNK,
    T_DEFAULT_LEFT,
    T_END,
    T_FEATURE,
    T_FIRST,
    T_SIDE,
    T_SLOT,
    T_START,
    THREADS,
    block_scan,
    chunk_node,
    chunk_rows,
)

# chunks per node of a partition call at most: the blocks of a node sum this many counts
# (under the simulator 2, so that the tests' nodes take larger chunks too)
MAX_NODE_CHUNKS = 2 if simulated() else 1024


def partition_chunk_rows(n_rows: int) -> int:
    """Rows per chunk of a node of n_rows rows: CHUNK_ROWS, or more (a whole multiple of
    THREADS) for a node that would have more than MAX_NODE_CHUNKS chunks."""
    per = -(-n_rows // MAX_NODE_CHUNKS)
    return max(CHUNK_ROWS, -(-per // THREADS) * THREADS)


@cuda.jit(device=True, inline=True)
def _goes_left(columns, f, row, split_bin, missing, default_left):
    b = np.int64(columns[f, row])
    if b == missing:
        return default_left != 0
    return b <= split_bin


@cuda.jit(device=True, inline=True)
def _block_sum(values, t):
    """Sum of values[0:THREADS] (shared memory), returned to every thread."""
    width = THREADS // 2
    while width > 0:
        if t < width:
            values[t] += values[t + width]
        cuda.syncthreads()
        width //= 2
    total = values[0]
    cuda.syncthreads()
    return total


@cuda.jit
def _count_left(columns, rows2, table, missing_bins, chunk_left):
    """chunk_left[c] = rows of chunk c going left under its node's split. columns: (F, n)
    bins, column-major: a node's rows read one byte each from one contiguous column."""
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    counts = cuda.shared.array(THREADS, np.int64)
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    side = table[j, T_SIDE]
    f = table[j, T_FEATURE]
    split_bin = table[j, T_BIN]
    missing = missing_bins[f]
    dleft = table[j, T_DEFAULT_LEFT]
    n = 0
    for p in range(start + t, end, THREADS):
        if _goes_left(columns, f, rows2[side, p], split_bin, missing, dleft):
            n += 1
    counts[t] = n
    cuda.syncthreads()
    total = _block_sum(counts, t)
    if t == 0:
        chunk_left[c] = total


@cuda.jit
def _scatter_rows(columns, rows2, table, missing_bins, chunk_left, child_counts):
    """Stable partition of each chunk into the other buffer: a left row goes to start +
    (lefts before it in the node), a right one to start + n_left + (rights before it).
    child_counts[j] = (left rows, right rows) of node j. The block walks its chunk in tiles
    of THREADS consecutive positions, a thread each (reads and writes of a tile's rows are
    contiguous), a block-wide prefix sum placing each tile's rows."""
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    acc = cuda.shared.array(THREADS, np.int64)
    acc2 = cuda.shared.array(THREADS, np.int64)
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    node_start = table[j, T_START]
    node_end = table[j, T_END]
    first = table[j, T_FIRST]
    n_chunks = (node_end - node_start + table[j, T_CHUNK] - 1) // table[j, T_CHUNK]
    # lefts of the node's chunks before this one, and of all of them
    before = 0
    total = 0
    for i in range(first + t, first + n_chunks, THREADS):
        v = chunk_left[i]
        total += v
        if i < c:
            before += v
    acc[t] = before
    acc2[t] = total
    cuda.syncthreads()
    lefts = _block_sum(acc, t)  # lefts at positions before the tile, in the node
    n_left = _block_sum(acc2, t)
    side = table[j, T_SIDE]
    f = table[j, T_FEATURE]
    split_bin = table[j, T_BIN]
    missing = missing_bins[f]
    dleft = table[j, T_DEFAULT_LEFT]
    out = 1 - side
    for tile in range(start, end, THREADS):
        p = tile + t
        left = 0
        r = 0
        if p < end:
            r = rows2[side, p]
            if _goes_left(columns, f, r, split_bin, missing, dleft):
                left = 1
        acc[t] = left
        cuda.syncthreads()
        upto = block_scan(acc, t, THREADS)  # lefts of the tile up to and including p
        tile_lefts = acc[THREADS - 1]
        if p < end:
            if left:
                rows2[out, node_start + lefts + upto - 1] = r
            else:
                rows2[out, node_start + n_left + (p - node_start - lefts - upto)] = r
        lefts += tile_lefts
        cuda.syncthreads()  # acc is the next tile's
    if c == first and t == 0:
        child_counts[j, 0] = n_left
        child_counts[j, 1] = node_end - node_start - n_left


@cuda.jit
def _plan_children(table, child_counts, first_slot, build_first, chunk, parent_slots, build,
                   search, totals, result):
    """After a partition (one thread per parent j of `table`), plan the children's
    histograms as `histboost.kernels.backend.child_histograms` does: the child with fewer rows
    (ties: the left one) is built, into pool slot first_slot + j, the other takes the
    parent's slot and is subtracted in place by the split search. Writes build[j] (node table
    of the built child: its rows in chunks of `chunk` rows, blocks build_first[j] .. (the
    host gave parent j ceil(half its rows / chunk) blocks)), search[2j], search[2j + 1]
    ((slot, pending sibling's slot or -1) of the left and right child), the row counts into
    totals[2j:2j + 2, 2] (float64) and result[j, 0:2]."""
    j = cuda.grid(1)
    if j >= table.shape[0]:
        return
    start = table[j, T_START]
    end = table[j, T_END]
    n_left = child_counts[j, 0] if end > start else np.int64(0)
    n_right = end - start - n_left
    result[j, 0] = n_left
    result[j, 1] = n_right
    totals[2 * j, 2] = n_left
    totals[2 * j + 1, 2] = n_right
    fresh = first_slot + j
    own = parent_slots[j]
    left_small = n_left <= n_right
    build[j, T_START] = start if left_small else start + n_left
    build[j, T_END] = start + n_left if left_small else end
    build[j, T_SIDE] = 1 - table[j, T_SIDE]
    build[j, T_FIRST] = build_first[j]
    build[j, T_CHUNK] = chunk
    build[j, T_SLOT] = fresh
    search[2 * j, 0] = fresh if left_small else own
    search[2 * j, 1] = -1 if left_small else fresh
    search[2 * j + 1, 0] = own if left_small else fresh
    search[2 * j + 1, 1] = fresh if left_small else -1


@cuda.jit
def _add_leaf_values(rows2, table, values, output, margin):
    """margin[row, output] += values[leaf] for the rows of each leaf of `table` (every row is
    in one leaf: no atomics)."""
    c = cuda.blockIdx.x
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    side = table[j, T_SIDE]
    v = values[j]
    for p in range(start + cuda.threadIdx.x, end, THREADS):
        margin[rows2[side, p], output] += v


_TAIL = (("int32", 2), ("int64", 2), ("int32", 1), ("int64", 1))
COUNT_LEFT = {np.dtype(np.uint8): CudaKernel(_count_left, (("uint8", 2), *_TAIL)),
              np.dtype(np.int32): CudaKernel(_count_left, (("int32", 2), *_TAIL))}
SCATTER_ROWS = {np.dtype(np.uint8): CudaKernel(_scatter_rows, (("uint8", 2), *_TAIL,
                                                               ("int64", 2))),
                np.dtype(np.int32): CudaKernel(_scatter_rows, (("int32", 2), *_TAIL,
                                                               ("int64", 2)))}
PLAN_CHILDREN = CudaKernel(_plan_children, (("int64", 2), ("int64", 2), "int64",
                                            ("int64", 1), "int64", ("int64", 1), ("int64", 2),
                                            ("int64", 2), ("float64", 2), ("float64", 2)))
ADD_LEAF_VALUES = CudaKernel(_add_leaf_values, (("int32", 2), ("int64", 2), ("float64", 1),
                                                "int64", ("float64", 2)))
KERNELS = (*COUNT_LEFT.values(), *SCATTER_ROWS.values(), PLAN_CHILDREN, ADD_LEAF_VALUES)
