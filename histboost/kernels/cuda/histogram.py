"""Integer gradient histograms on the GPU.

Gradient pairs arrive as int32 (n, 2) (quantised, or fixed point for float trees, see
`CUDABackend`), so every sum is exact and independent of the order the atomics land in: the
same histograms on every run. Histograms are int64 (k, total_bins, C), C = 2 (G, H) or 3 with
the row count.

Histograms live in one pool, int64 (slots, total_bins, C), a node's in the slot the backend
gives it. Work is cut into chunks of rows of one node; all chunks of all nodes of a call go in
one launch, grid (chunks, feature groups x bin tiles), each block finding its node in the
call's node table (`_common.chunk_node`). The block sums its chunk in shared memory with
32-bit shared atomics (native; 64-bit ones are a compare-and-swap loop on sm_90), then adds
the non-zero sums to the global int64 histogram with one global atomic each. A chunk's sums
fit in int32 when chunk rows x max |value| < 2**31, which the backend keeps when it sizes the
chunks (`chunk_cap`): quantised pairs (at most 2**(bits-1) - 1) allow chunks of millions of
rows, so a call takes about as many blocks as the device runs at once and the flushes to
global memory are few; fixed-point pairs of float trees stay below `MAX_SHARED_VALUE` (chunks
of `FLOAT_CHUNK_ROWS`). Wider values sum straight into global memory (`wide`).

Bank-conflict-free shared histograms: a feature group is up to 32 consecutive features, one
per lane of a warp (with n < 32 features a warp takes 32 // n rows at a time, n lanes each).
The block's shared histogram is, per channel, a table of `tile` bins x 32 columns, column j
holding the sums of lane j: value (channel c, bin b, lane j) at (c * tile + b) * 32 + j, which
lies in shared-memory bank j. A warp's atomic of one channel touches 32 different banks (and
never one address twice), so the shared-memory unit takes it in one pass, whatever the bins.
Slots spread over the banks by their bins (the previous kernel: (G, H) of a slot side by
side, a warp over several rows and features) put the warp's 32 atomics into 16 banks at
random, a few passes each (the most loaded bank's count). A flush sums a bin's columns (the
32 // n lanes of one feature). A warp reads a row's one-byte bins as one contiguous 32-byte
sector and its pair as one 8-byte load (the int32 pairs viewed as int64), the loads of
`UNROLL` rows before their atomics, so that several rows are in flight per warp. Bins beyond
a tile (features of more than `BIN_TILE` slots, int32 bins) are summed by the blocks of the
next tiles, each reading the rows again. A root over all rows (the tree's rows in order) is
read without the row-index buffer (table side `IDENTITY_SIDE`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel, simulated
from ._common import CHUNK_ROWS, T_SIDE, T_SLOT, chunk_node, chunk_rows

# lanes of a warp: a feature group's features at most, and the columns of a shared histogram
LANES = 32
# bins per tile of the shared histogram at most: 256 one-byte bins x 32 lanes x (G, H) take
# 64 KiB a block, so 3 blocks fit an H100's 228 KiB a multiprocessor
BIN_TILE = 256
# shared memory a block may take under the simulator (which allocates what a launch asks for):
# a Volta GPU's opt-in limit, the least that holds 256 one-byte bins x 32 lanes x 3 channels;
# on a GPU the device's opt-in limit (227 KiB on an H100)
SIM_SHARED_BYTES = 96 << 10
# fixed-point pairs of float trees stay below MAX_SHARED_VALUE, so that chunks of
# FLOAT_CHUNK_ROWS rows sum in 32-bit shared memory: 2**17 - 1 on a GPU (a pair's rounding
# error at most 2**-17 of the tree's largest; LightGBM's quantised training works with 2**-7)
# with blocks of 16384 rows (10M rows: 611 blocks; chunks of 2048 rows took eight times the
# flushes to global memory)
FLOAT_CHUNK_ROWS = CHUNK_ROWS if simulated() else 16384
MAX_SHARED_VALUE = 2**31 // FLOAT_CHUNK_ROWS - 1
# the node-table side of a node whose rows are 0..n-1 in order (the root of a tree over all
# rows): the kernel reads row p at position p, not through the row-index buffers
IDENTITY_SIDE = 2
# threads per histogram block (one warp under the simulator), and the kernel's launch bounds:
# at most HIST_THREADS threads a block, at least 2 blocks a multiprocessor (64 registers a
# thread, no spills; at 3 blocks, 40 registers and spills in the row loop: 0.63 against
# 0.51 ms for the root on an H100)
HIST_THREADS = 32 if simulated() else 512
BLOCKS_PER_SM = 2
LAUNCH_BOUNDS = None if simulated() else (HIST_THREADS, BLOCKS_PER_SM)
# rows whose loads a warp issues before their atomics
UNROLL = 4
# rows per block at least (a multiple of it): under the simulator a warp's worth, so that
# the tests' small nodes take several chunks
MIN_CHUNK_ROWS = CHUNK_ROWS if simulated() else 512


def chunk_cap(max_value: float) -> int:
    """The most rows one block may sum in 32-bit shared memory when no |value| exceeds
    max_value."""
    return int((2**31 - 1) // max(1.0, float(max_value)))


@cuda.jit(device=True, inline=True)
def _low(v):
    """The int32 in the low half of an int64 (G of a pair read as one int64)."""
    return np.int32(((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000)


@cuda.jit(device=True, inline=True)
def _high(v):
    """The int32 in the high half of an int64 (H of a pair read as one int64)."""
    return np.int32(v >> 32)


@cuda.jit(device=True, inline=True)
def _u32(i):
    """A non-negative index as uint32: Numba wraps signed indices around (a compare and an
    add per access, in 64 bits), which the compiler drops for a zero-extended 32-bit one."""
    return np.uint32(i)


def _make_build(channels: int, tiled: bool, unroll: int, launch_bounds):
    """The histogram kernel for histograms of `channels` channels (2: G, H; 3: and the row
    count), for bins in several tiles (`tiled`: int32 bins) or in one (one-byte bins), issuing
    the loads of `unroll` rows before their atomics; compile-time constants, so the loops
    over them unroll (the rows' bins and pairs stay in registers) and a row's atomics take
    no branch without tiles. The row loops run over uint64 positions (indices Numba does not
    wrap around, whose addresses the compiler steps by a constant)."""
    # (the simulator's jit takes no launch bounds)
    options = {} if launch_bounds is None else {"launch_bounds": launch_bounds}
    lanes = np.uint64(LANES)

    @cuda.jit(device=True, inline=True)
    def add_row(shared, b, lo_bin, tile, column, plane, v):
        """A row's bin b and pair v into column `column` of the shared histogram (uint64
        values; bins [lo_bin, lo_bin + tile) when tiled)."""
        if tiled:
            if b < lo_bin or b >= lo_bin + tile:
                return
            b -= lo_bin
        i = b * lanes + column
        cuda.atomic.add(shared, i, _low(v))
        cuda.atomic.add(shared, i + plane, _high(v))
        if channels == 3:
            cuda.atomic.add(shared, i + plane + plane, np.int32(1))

    @cuda.jit(**options)
    def _build(bins, gh, rows2, table, group_first, group_last, offsets, tile, tiles, wide,
               pool):
        """grid (chunks, groups x tiles): pool[slot] += sums over the rows of each chunk of
        the nodes of `table` (int64 (k, TABLE_WIDTH)), features group_first[g] ..
        group_last[g] - 1 (at most LANES), bins [t * tile, (t + 1) * tile) of blockIdx.y =
        g * tiles + t (one tile of all bins unless `tiled`).

        bins: uint8 or int32 (n, >= F), row-major; gh: int64 (n,), pair (G, H) of a row as
        the low and high int32; rows2: int32 (2, n), the two row-index buffers; the launch's
        dynamic shared memory: channels x tile x LANES int32 (none when `wide`: chunk sums
        may exceed int32, so rows sum straight into global memory)."""
        c = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        threads = cuda.blockDim.x
        lane = tid % LANES
        warp = tid // LANES
        n_warps = threads // LANES
        group = cuda.blockIdx.y // tiles
        lo_bin = (cuda.blockIdx.y - group * tiles) * tile
        f_lo = group_first[group]
        n_feat = group_last[group] - f_lo
        per_pass = LANES // n_feat  # rows a warp takes at a time
        sub = lane // n_feat
        f = np.uint64(f_lo + lane - sub * n_feat)  # the lane's feature
        active = sub < per_pass
        j = chunk_node(table, c)
        start, end = chunk_rows(table, j, c)
        if start >= end:  # a chunk beyond the node's rows (a step's budget of blocks)
            return
        side = table[j, T_SIDE]
        identity = side == IDENTITY_SIDE
        rows = rows2[side % 2]
        dst = table[j, T_SLOT]
        # the lane's rows: first, first + stride, ... (a warp's lanes over per_pass rows)
        stride = np.uint64(n_warps * per_pass)
        first = start + warp * per_pass + sub
        stop = np.uint64(end if active and first < end else first)
        first = np.uint64(first)
        if wide:  # every bin by the first tile's blocks
            if lo_bin == 0:
                base = offsets[f]
                for q in range(first, stop, stride):
                    r = q if identity else np.uint64(rows[q])
                    v = gh[r]
                    slot = _u32(base + bins[r, f])
                    cuda.atomic.add(pool, (dst, slot, 0), np.int64(_low(v)))
                    cuda.atomic.add(pool, (dst, slot, 1), np.int64(_high(v)))
                    if channels == 3:
                        cuda.atomic.add(pool, (dst, slot, 2), np.int64(1))
            return
        shared = cuda.shared.array(0, np.int32)
        # (32-bit values: the compiler knows a shared index's sign bit clear)
        plane = np.uint64(_u32(tile * LANES))  # one channel's table
        lo = np.uint64(_u32(lo_bin))
        width = np.uint64(_u32(tile))
        column = np.uint64(_u32(lane))
        for s in range(tid, channels * tile * LANES, threads):
            shared[_u32(s)] = 0
        cuda.syncthreads()
        row_bins = cuda.local.array(unroll, np.uint64)
        row_pairs = cuda.local.array(unroll, np.int64)
        step = stride * np.uint64(unroll)
        # whole passes of `unroll` rows, then the rest one at a time
        whole = first + (stop - first) // step * step if stop > first else first
        for p in range(first, whole, step):
            for u in range(unroll):
                q = p + np.uint64(u) * stride
                r = q if identity else np.uint64(rows[q])
                row_bins[u] = np.uint64(bins[r, f])
                row_pairs[u] = gh[r]
            for u in range(unroll):
                add_row(shared, row_bins[u], lo, width, column, plane, row_pairs[u])
        for q in range(whole, stop, stride):
            r = q if identity else np.uint64(rows[q])
            add_row(shared, np.uint64(bins[r, f]), lo, width, column, plane, gh[r])
        cuda.syncthreads()
        # bins over threads with the features fastest, so a warp reads consecutive columns
        for s in range(tid, tile * n_feat, threads):
            b = s // n_feat
            kf = s - b * n_feat
            ff = f_lo + kf
            bin_ = lo_bin + b
            if bin_ < offsets[ff + 1] - offsets[ff]:
                slot = offsets[ff] + bin_
                for ch in range(channels):
                    i = (ch * tile + b) * LANES + kf
                    total = np.int64(0)
                    for k in range(per_pass):
                        total += shared[_u32(i + k * n_feat)]
                    if total != 0:
                        cuda.atomic.add(pool, (dst, slot, ch), total)

    return _build


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


def feature_groups(n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs of at most LANES consecutive features: int64 (first, last + 1) arrays."""
    first = np.arange(0, n_features, LANES, dtype=np.int64)
    return first, np.minimum(first + LANES, n_features)


def bin_tile(offsets: np.ndarray, channels: int, shared_limit: int, tiled: bool
             ) -> tuple[int, int]:
    """Bins per tile of the shared histogram and the tiles (the widest feature's slots in
    tiles): one tile of all bins for one-byte bins (ValueError when `shared_limit` bytes of
    shared memory cannot hold it), else at most BIN_TILE bins and `shared_limit` bytes."""
    widest = int(np.diff(offsets).max(initial=1))
    if not tiled:
        if shared_bytes(widest, channels) > shared_limit:
            raise ValueError(f"a shared histogram of {widest} bins x {channels} channels "
                             f"needs {shared_bytes(widest, channels)} bytes, more than the "
                             f"{shared_limit} a block may take")
        return widest, 1
    tile = max(1, min(widest, BIN_TILE, shared_limit // shared_bytes(1, channels)))
    return tile, -(-widest // tile)


def row_width(n_features: int, itemsize: int) -> int:
    """Columns of the device's row-major bins: rows of n_features bins of `itemsize` bytes
    padded to a power of two of bytes up to 32, or to whole 32-byte sectors beyond, so that
    a row read alone (through the row-index buffer) takes the fewest sectors."""
    row = max(1, n_features * itemsize)
    padded = 1 << (row - 1).bit_length() if row <= 32 else -(-row // 32) * 32
    return padded // itemsize


def shared_bytes(tile: int, channels: int) -> int:
    """Dynamic shared memory of a block: channels x tile x LANES int32."""
    return 4 * channels * tile * LANES


def _spec(bin_dtype: str) -> tuple:
    return ((bin_dtype, 2), ("int64", 1), ("int32", 2), ("int64", 2), ("int64", 1),
            ("int64", 1), ("int64", 1), "int64", "int64", "boolean", ("int64", 3))


def make_build(bin_dtype, channels: int, unroll: int = UNROLL,
               launch_bounds: tuple[int, int] | None = LAUNCH_BOUNDS) -> CudaKernel:
    """The histogram kernel for bins of `bin_dtype`: uint8 (one tile of bins) or int32
    (several). (`bench/gpu.py` builds others to compare.)"""
    dtype = np.dtype(bin_dtype)
    kernel = _make_build(channels, dtype != np.uint8, unroll,
                         None if simulated() else launch_bounds)
    return CudaKernel(kernel, _spec(dtype.name))


# by (dtype of the backend's bins, channels)
BUILD = {(np.dtype(dtype), channels): make_build(dtype, channels)
         for dtype in (np.uint8, np.int32) for channels in (2, 3)}
SUBTRACT = CudaKernel(_subtract, (("int64", 3), ("int64", 2)))
KERNELS = (*BUILD.values(), SUBTRACT)
