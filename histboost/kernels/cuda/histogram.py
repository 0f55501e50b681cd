"""Integer gradient histograms on the GPU.

Gradient pairs arrive as int32 (n, 2) (quantised, or fixed point for float trees, see
`CUDABackend`), so every sum is exact and independent of the order the atomics land in: the
same histograms on every run. Histograms are int64 (k, total_bins, C), C = 2 (G, H) or 3 with
the row count.

Histograms live in one pool, int64 (slots, total_bins, C), a node's in the slot the backend
gives it. Work is cut into chunks of at most `CHUNK_ROWS` rows of one node; all chunks of all
nodes of a call go in one launch, grid (chunks, feature groups), each block finding its node
in the call's node table (`_common.chunk_node`). A feature group is a run of consecutive
features whose slots fit the block's shared-memory histogram (`SHARED_VALUES` int32 values):
the block sums its chunk there with 32-bit shared atomics (native; 64-bit ones measured 50x
over the memory floor on an H100), then adds the non-zero slots to the global int64 histogram
with one global atomic each. A chunk's sums fit in int32 when every |value| is below
2**31 / CHUNK_ROWS (`MAX_SHARED_VALUE`: the backend's fixed point stays below it, quantised
pairs of up to 21 bits too). Wider values, and a group of one feature too wide for shared
memory, sum straight into global memory (the fallback).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel
from ._common import CHUNK_ROWS, T_SIDE, T_SLOT, THREADS, chunk_node, chunk_rows

SHARED_VALUES = 12288  # 48 KiB of int32: 6144 slots of (G, H), 4096 of (G, H, count)
MAX_SHARED_VALUE = 2**31 // CHUNK_ROWS - 1


@cuda.jit(device=True, inline=True)
def _add(shared, pool, direct, dst, slot, base, channels, g, h):
    """One (row, feature) pair into the block's shared histogram, or straight into the global
    one (the fallback)."""
    if direct:
        cuda.atomic.add(pool, (dst, slot, 0), np.int64(g))
        cuda.atomic.add(pool, (dst, slot, 1), np.int64(h))
        if channels == 3:
            cuda.atomic.add(pool, (dst, slot, 2), np.int64(1))
    else:
        # (G, H[, count]) of a slot side by side: measured 1.2 ms for the 10M-row root on an
        # H100, against 2.0 ms with one region per channel
        s = (slot - base) * channels
        cuda.atomic.add(shared, s, g)
        cuda.atomic.add(shared, s + 1, h)
        if channels == 3:
            cuda.atomic.add(shared, s + 2, np.int32(1))


@cuda.jit(device=True, inline=True)
def _zero(shared, direct, n_values, tid):
    if not direct:
        for s in range(tid, n_values, THREADS):
            shared[s] = 0
        cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def _flush(shared, pool, direct, dst, base, channels, n_values, tid):
    """Add the block's non-zero shared sums to the global histogram."""
    if not direct:
        cuda.syncthreads()
        for s in range(tid, n_values, THREADS):
            v = shared[s]
            if v != 0:
                cuda.atomic.add(pool, (dst, base + s // channels, s % channels), np.int64(v))


@cuda.jit(device=True, inline=True)
def _block_group(group_first, group_last, offsets, channels, wide):
    """The block's feature group: (first feature, end feature, its first slot, shared values
    it needs, whether it sums straight into global memory; block-uniform)."""
    f_lo = group_first[cuda.blockIdx.y]
    f_hi = group_last[cuda.blockIdx.y]
    base = offsets[f_lo]
    n_values = (offsets[f_hi] - base) * channels
    return f_lo, f_hi, base, n_values, wide or n_values > SHARED_VALUES


@cuda.jit
def _build(bins, gh, rows2, table, group_first, group_last, offsets, channels, wide, pool):
    """grid (chunks, groups): pool[slot] += sums over the rows of each chunk of the nodes of
    `table` (int64 (k, TABLE_WIDTH)), features group_first[g]..group_last[g] - 1; `wide`:
    values may exceed MAX_SHARED_VALUE (sum in global memory). bins: (n, F) int32 (wide
    bins); rows2: int32 (2, n), the two row-index buffers."""
    c = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    shared = cuda.shared.array(SHARED_VALUES, np.int32)
    f_lo, f_hi, base, n_values, direct = _block_group(group_first, group_last, offsets,
                                                      channels, wide)
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    if start >= end:  # a chunk beyond the node's rows (a step's budget of blocks)
        return
    side = table[j, T_SIDE]
    dst = table[j, T_SLOT]
    _zero(shared, direct, n_values, tid)
    for p in range(start + tid, end, THREADS):
        r = rows2[side, p]
        g = gh[r, 0]
        h = gh[r, 1]
        for f in range(f_lo, f_hi):
            _add(shared, pool, direct, dst, offsets[f] + np.int64(bins[r, f]), base, channels,
                 g, h)
    _flush(shared, pool, direct, dst, base, channels, n_values, tid)


@cuda.jit
def _build_words(words, gh, rows2, table, group_first, group_last, offsets, channels, wide,
                 pool):
    """`_build` over one-byte bins read four at a time: words (n, ceil(F / 4)) int32 views
    of the (n, 4 * ceil(F / 4)) uint8 matrix; a quarter of the load instructions."""
    c = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    shared = cuda.shared.array(SHARED_VALUES, np.int32)
    f_lo, f_hi, base, n_values, direct = _block_group(group_first, group_last, offsets,
                                                      channels, wide)
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    if start >= end:  # a chunk beyond the node's rows (a step's budget of blocks)
        return
    side = table[j, T_SIDE]
    dst = table[j, T_SLOT]
    _zero(shared, direct, n_values, tid)
    for p in range(start + tid, end, THREADS):
        r = rows2[side, p]
        g = gh[r, 0]
        h = gh[r, 1]
        for w in range(f_lo // 4, (f_hi + 3) // 4):
            word = words[r, w]
            for j4 in range(4):
                f = 4 * w + j4
                if f_lo <= f < f_hi:
                    b = (word >> (8 * j4)) & 0xFF
                    _add(shared, pool, direct, dst, offsets[f] + np.int64(b), base, channels,
                         g, h)
    _flush(shared, pool, direct, dst, base, channels, n_values, tid)


@cuda.jit
def _subtract(pool, pairs):
    """pool[pairs[m, 0]] -= pool[pairs[m, 1]] for every pair m (a sibling from its parent's
    slot, in place); one thread per value."""
    i = cuda.grid(1)
    per_slot = pool.shape[1] * pool.shape[2]
    if i >= pairs.shape[0] * per_slot:
        return
    m = i // per_slot
    v = i % per_slot
    s = v // pool.shape[2]
    ch = v % pool.shape[2]
    pool[pairs[m, 0], s, ch] -= pool[pairs[m, 1], s, ch]


def feature_groups(offsets: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs of consecutive features whose slots fit the shared histogram: int64 (first,
    last + 1) arrays; a feature too wide for it forms a group of its own."""
    first, last = [], []
    cap = SHARED_VALUES // channels
    f, n_features = 0, len(offsets) - 1
    while f < n_features:
        g = f + 1
        while g < n_features and offsets[g + 1] - offsets[f] <= cap:
            g += 1
        first.append(f)
        last.append(g)
        f = g
    return np.array(first, np.int64), np.array(last, np.int64)


_SPEC_TAIL = (("int32", 2), ("int32", 2), ("int64", 2), ("int64", 1), ("int64", 1),
              ("int64", 1), "int64", "boolean", ("int64", 3))
# by the dtype of the backend's bins: one-byte bins are read as int32 words
BUILD = {np.dtype(np.uint8): CudaKernel(_build_words, (("int32", 2), *_SPEC_TAIL)),
         np.dtype(np.int32): CudaKernel(_build, (("int32", 2), *_SPEC_TAIL))}
SUBTRACT = CudaKernel(_subtract, (("int64", 3), ("int64", 2)))
KERNELS = (*BUILD.values(), SUBTRACT)
