"""Device helpers shared by the CUDA kernels: launch geometry, multiplication without FMA
contraction, and the counter-based rounding hash of `histboost.kernels.cpu.quantize`."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..cpu import quantize as cpu_quantize
from ..launch import simulated

# threads per block; under the simulator, which runs every thread as a Python thread, a warp
# (every kernel strides by THREADS, so any count computes the same)
THREADS = 32 if simulated() else 256
# rows of one node handled by one block of the histogram, partition and margin kernels; under
# the simulator a warp's worth, so that the tests' small nodes take several chunks (the
# kernels' block-to-node search and cross-chunk sums run in CI too)
CHUNK_ROWS = 32 if simulated() else 2048


def grid(n: int, threads: int = THREADS) -> int:
    """Blocks of `threads` covering n items (at least 1)."""
    return max(1, (int(n) + threads - 1) // threads)


if simulated():
    @cuda.jit(device=True)
    def mul(a, b):
        return a * b
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline=True)
    def mul(a, b):
        """a * b rounded on its own: NVVM contracts a * b + c into one fused multiply-add by
        default, which rounds once where the CPU rounds twice; split gains must be the same
        bits on both engines."""
        return libdevice.dmul_rn(a, b)


splitmix64 = cuda.jit(device=True, inline=True)(cpu_quantize.splitmix64.py_func)


@cuda.jit(device=True, inline=True)
def uniform01(key, counter):
    """As `histboost.kernels.cpu.quantize.uniform01`."""
    z = splitmix64(key ^ splitmix64(np.uint64(counter)))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


# Node tables: a call over k nodes uploads one int64 (k, TABLE_WIDTH) array, a row per node,
# and launches one block per chunk of rows of all its nodes; a block finds its node by a binary
# search over the nodes' first chunks (no per-chunk arrays are built or uploaded). Columns:
T_START = 0  # the node's rows: positions [start, end) of the row-index buffer `side`
T_END = 1
T_SIDE = 2  # which of the two row-index buffers (rows2[side]) holds the node's rows
T_FIRST = 3  # the node's first chunk (block); its chunks are first .. first + ceil(n / chunk) - 1
T_CHUNK = 4  # rows per chunk of this node
T_SLOT = 5  # histogram calls: the node's slot in the histogram pool
T_FEATURE = 5  # partition calls: the split (feature, bin, missing goes left)
T_BIN = 6
T_DEFAULT_LEFT = 7
TABLE_WIDTH = 8
# node tables of at least this many nodes are made with NumPy (`node_table`)
VECTOR_NODES = 48


@cuda.jit(device=True, inline=True)
def chunk_node(table, c):
    """The node (row of `table`) whose chunks include block c: the last node whose first
    chunk is <= c (nodes without rows own no chunk)."""
    lo = 0
    hi = table.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if table[mid, T_FIRST] <= c:
            lo = mid
        else:
            hi = mid - 1
    return lo


@cuda.jit(device=True, inline=True)
def chunk_rows(table, j, c):
    """Positions [start, end) of chunk c of node j."""
    s = table[j, T_START] + (c - table[j, T_FIRST]) * table[j, T_CHUNK]
    return s, min(s + table[j, T_CHUNK], table[j, T_END])


def node_table(bounds: list[tuple[int, int]], sides: list[int], chunk,
               extra: list | None = None) -> tuple[np.ndarray, int]:
    """int64 (k, TABLE_WIDTH) table of the nodes with rows [start, end) = bounds[j] in row
    buffers sides[j], cut into chunks of `chunk` rows (an int, or a function of a node's row
    count); extra[j]: the node's call-specific columns (up to three ints from T_SLOT on;
    zeros without). Returns the table and the chunk count (the launch's blocks). Python
    integers for a few nodes, where NumPy's per-call overhead would dominate; NumPy from
    `VECTOR_NODES` nodes on with a fixed chunk (a tree's leaves, for the margin update: 256
    leaves took 190 us in Python on the development machine)."""
    k = len(bounds)
    if k >= VECTOR_NODES and isinstance(chunk, int):
        table = np.zeros((k, TABLE_WIDTH), np.int64)
        table[:, T_START:T_END + 1] = np.array(bounds, np.int64).reshape(k, 2)
        table[:, T_SIDE] = sides
        table[:, T_CHUNK] = chunk
        chunks = -(-np.maximum(table[:, T_END] - table[:, T_START], 0) // chunk)
        np.cumsum(chunks[:-1], out=table[1:, T_FIRST])
        if extra is not None:
            cols = np.array(extra, np.int64).reshape(k, -1)
            table[:, T_SLOT:T_SLOT + cols.shape[1]] = cols
        return table, int(chunks.sum())
    flat: list[int] = []
    first = 0
    for j, ((start, end), side) in enumerate(zip(bounds, sides, strict=True)):
        rows = chunk if isinstance(chunk, int) else chunk(end - start)
        cols = extra[j] if extra is not None else ()
        flat += (start, end, side, first, rows, *cols, *(0,) * (TABLE_WIDTH - 5 - len(cols)))
        first += -(-max(end - start, 0) // rows)
    return np.array(flat, np.int64).reshape(len(bounds), TABLE_WIDTH), first


@cuda.jit(device=True, inline=True)
def block_scan(values, t, n):
    """Inclusive prefix sum of values[0:n] (shared memory, Hillis-Steele; n the block's
    threads, a power of two) in place; returns thread t's entry. Every thread of the block
    calls it."""
    i = np.uint64(t)  # unsigned indices: no wrap-around check per access
    width = np.uint64(n)
    offset = np.uint64(1)
    while offset < width:
        v = values[i]
        if i >= offset:
            v += values[i - offset]
        cuda.syncthreads()
        values[i] = v
        cuda.syncthreads()
        offset *= np.uint64(2)
    return values[i]
