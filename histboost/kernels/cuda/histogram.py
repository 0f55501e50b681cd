"""Integer gradient histograms on the GPU.

Gradient pairs arrive as int32 (n, 2) (quantised, or fixed point for float trees, see
`CUDABackend`), so every sum is exact and independent of the order the atomics land in: the
same histograms on every run. Histograms are int64 (k, total_bins, C), C = 2 (G, H) or 3 with
the row count.

Histograms live in one pool, int64 (slots, total_bins, C), a node's in the slot the backend
gives it. Work is cut into chunks of rows of one node; all chunks of all nodes of a call go in
one launch, grid (chunks, feature groups), each block finding its node in the call's node table
(`_common.chunk_node`). A feature group is a run of consecutive features whose slots fit the
block's shared-memory histogram (dynamic shared memory, up to the device's opt-in limit per
block: on an H100 every feature of 28 x 256 bins in one group, read once); the block sums its
chunk there with 32-bit shared atomics (native; 64-bit ones measured 50x over the memory floor
on an H100), then adds the non-zero slots to the global int64 histogram with one global atomic
each. A chunk's sums fit in int32 when chunk rows x max |value| < 2**31, which the backend
keeps when it sizes the chunks (`chunk_cap`): quantised pairs (at most 2**(bits-1) - 1) allow
chunks of millions of rows, so a call takes about as many blocks as the device runs at once
and the flushes to global memory are few; fixed-point pairs of float trees stay below
`MAX_SHARED_VALUE` (chunks of `FLOAT_CHUNK_ROWS`). Wider values, and a group of one feature too wide
for shared memory, sum straight into global memory (the fallback).

Rows are read as 32-bit words of packed bins (four one-byte bins, or one int32 bin): the
block's threads are laid over (row, word) pairs, consecutive threads taking consecutive words
of a row and then of the next rows, so a warp's loads of the packed matrix are contiguous and
its atomics land in several features at once (fewer collisions on one bin than a thread per
row, where 32 rows update one feature together). A root over all rows reads them in order,
without the row-index buffer (table side `IDENTITY_SIDE`). The shared histogram holds one plane
per channel (all G, then all H), so a warp's G adds spread over all 32 banks; a row's pair is
read as one int64 (the backend passes the int32 (n, 2) pairs viewed so), and a thread takes two
rows a step, loading both before its atomics. Measured sweeps: `docs/gpu.md`, "Histograms".
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel, simulated
from ._common import CHUNK_ROWS, T_SIDE, T_SLOT, chunk_node, chunk_rows

# int32 values of a block's shared histogram: under the simulator (and by default) 48 KiB,
# the static limit; on a GPU the backend raises it to the device's opt-in limit
# (`CUDABackend`, `shared_values`)
SHARED_VALUES = 12288
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
# at most HIST_THREADS threads a block, at least 3 blocks a multiprocessor (which caps the
# registers a thread takes: 40 at 512 threads, against 64 unbounded, which left one block of
# 512 threads a multiprocessor; a one-group shared histogram of 28 x 256 bins x (G, H) takes
# 56 KiB a block, so 3 blocks fit an H100's 228 KiB)
HIST_THREADS = 32 if simulated() else 512
BLOCKS_PER_SM = 3
LAUNCH_BOUNDS = None if simulated() else (HIST_THREADS, BLOCKS_PER_SM)
# rows per block at least (a multiple of it): under the simulator a warp's worth, so that the
# tests' small nodes take several chunks
MIN_CHUNK_ROWS = CHUNK_ROWS if simulated() else 512


def chunk_cap(max_value: float) -> int:
    """The most rows one block may sum in 32-bit shared memory when no |value| exceeds
    max_value."""
    return int((2**31 - 1) // max(1.0, float(max_value)))


def _make_build(per_word: int, channels: int, launch_bounds):
    """The histogram kernel for words holding `per_word` bins (4: one-byte bins, 1: int32
    bins) and histograms of `channels` channels (2: G, H; 3: and the row count); both
    compile-time constants, so the loop over a word's bins unrolls and slot arithmetic is
    shifts. Indices are unsigned (Numba checks a signed index for wrap-around at every
    access)."""
    bits = 32 // per_word
    mask = (1 << bits) - 1 if per_word > 1 else 0xFFFFFFFF
    u32 = np.uint32
    u64 = np.uint64

    @cuda.jit(device=True, inline=True)
    def word_slots(offsets, base, f_lo, f_hi, w, slots):
        """slots[k]: the group-local slot of bin 0 of feature per_word * w + k, or -1 for a
        feature outside the group."""
        for k in range(per_word):
            f = w * per_word + k
            slots[k] = np.int32(offsets[f] - base) if f_lo <= f < f_hi else np.int32(-1)

    @cuda.jit(device=True, inline=True)
    def pair(gh, r):
        """Row r's (g, h): one 8-byte load of its two int32 (g in the low word)."""
        v = gh[r]
        return np.int32((v << 32) >> 32), np.int32(v >> 32)

    @cuda.jit(device=True, inline=True)
    def add_word(shared, word, slots, g, h, plane):
        """A row's bins of one word into the shared histogram: one
        plane of `plane` int32 per channel, so that a warp's G adds spread over all 32
        banks (with G and H side by side, G took only the even banks: 0.41 against 0.33 ms
        for the 10M-row root on an H100)."""
        uw = u32(word)
        for k in range(per_word):
            o = slots[k]
            if o >= 0:
                b = u32(o) + ((uw >> u32(bits * k)) & u32(mask))
                cuda.atomic.add(shared, b, g)
                cuda.atomic.add(shared, b + plane, h)
                if channels == 3:
                    cuda.atomic.add(shared, b + plane + plane, np.int32(1))

    # (the simulator's jit takes no launch bounds)
    options = {} if launch_bounds is None else {"launch_bounds": launch_bounds}

    @cuda.jit(**options)
    def _build(words, gh, rows2, table, group_first, group_last, offsets, shared_values, wide,
               pool):
        """grid (chunks, groups): pool[slot] += sums over the rows of each chunk of the nodes
        of `table` (int64 (k, TABLE_WIDTH)), features group_first[g]..group_last[g] - 1.

        words: int32 (n, W), per_word bins of consecutive features each (feature
        per_word * w + j in bits [bits * j, bits * (j + 1)) of word w); gh: int64 (n,), the
        int32 (n, 2) pairs read as one word a row; rows2: int32 (2, n), the two row-index
        buffers; shared_values: int32 values of the launch's dynamic shared memory (a group
        needing more, or `wide` values (chunk sums may exceed int32), sums straight into
        global memory)."""
        c = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        threads = cuda.blockDim.x
        shared = cuda.shared.array(0, np.int32)
        slots = cuda.local.array(per_word, np.int32)
        f_lo = group_first[cuda.blockIdx.y]
        f_hi = group_last[cuda.blockIdx.y]
        base = offsets[f_lo]
        n_slots = offsets[f_hi] - base
        direct = wide or n_slots * channels > shared_values
        j = chunk_node(table, c)
        start, end = chunk_rows(table, j, c)
        if start >= end:  # a chunk beyond the node's rows (a step's budget of blocks)
            return
        identity = table[j, T_SIDE] == IDENTITY_SIDE
        side = u64(table[j, T_SIDE])
        dst = table[j, T_SLOT]
        stop = u64(end)
        # threads over (row, word) pairs: a pass takes `per_pass` rows, each thread one word
        # of one of them (or, for a group wider than the block, every threads-th word of
        # each row)
        w_lo = f_lo // per_word
        w_hi = (f_hi + per_word - 1) // per_word
        n_words = w_hi - w_lo
        one_word = n_words <= threads
        per_pass = threads // n_words if one_word else 1
        first_row = tid // n_words if one_word else 0
        w_first = w_lo + (tid % n_words if one_word else tid)
        w_step = n_words if one_word else threads
        stride = u64(per_pass)
        if direct:
            if first_row < per_pass:
                p = u64(start + first_row)
                while p < stop:
                    r = p if identity else u64(rows2[side, p])
                    g, h = pair(gh, r)
                    for w in range(w_first, w_hi, w_step):
                        word = u32(words[r, u64(w)])
                        for k in range(per_word):
                            f = w * per_word + k
                            if f_lo <= f < f_hi:
                                slot = offsets[f] + ((word >> u32(bits * k)) & u32(mask))
                                cuda.atomic.add(pool, (dst, slot, 0), np.int64(g))
                                cuda.atomic.add(pool, (dst, slot, 1), np.int64(h))
                                if channels == 3:
                                    cuda.atomic.add(pool, (dst, slot, 2), np.int64(1))
                    p += stride
            return
        plane = u32(n_slots)
        for s in range(tid, n_slots * channels, threads):
            shared[s] = 0
        cuda.syncthreads()
        if first_row < per_pass:
            p = u64(start + first_row)
            if one_word:
                # the thread's word is the same in every row: its features' slots once; two
                # rows a step, both loaded before their atomics (0.35 against 0.39 ms for
                # the root read through the row-index buffer)
                word_slots(offsets, base, f_lo, f_hi, w_first, slots)
                w = u64(w_first)
                # rows read through the row-index buffer: the next step's indices are
                # loaded before this step's atomics, so a gathered row waits for one load
                # (its bins and pair), not two (its index, then them)
                next0 = u64(0)
                next1 = u64(0)
                if not identity:
                    next0 = u64(rows2[side, p]) if p < stop else u64(0)
                    next1 = u64(rows2[side, p + stride]) if p + stride < stop else u64(0)
                while p + stride < stop:
                    r0 = p if identity else next0
                    r1 = p + stride if identity else next1
                    word0 = words[r0, w]
                    word1 = words[r1, w]
                    g0, h0 = pair(gh, r0)
                    g1, h1 = pair(gh, r1)
                    p += stride + stride
                    if not identity:
                        if p < stop:
                            next0 = u64(rows2[side, p])
                        if p + stride < stop:
                            next1 = u64(rows2[side, p + stride])
                    add_word(shared, word0, slots, g0, h0, plane)
                    add_word(shared, word1, slots, g1, h1, plane)
                if p < stop:
                    r = p if identity else next0
                    g, h = pair(gh, r)
                    add_word(shared, words[r, w], slots, g, h, plane)
            else:
                while p < stop:
                    r = p if identity else u64(rows2[side, p])
                    g, h = pair(gh, r)
                    for w in range(w_first, w_hi, threads):
                        word_slots(offsets, base, f_lo, f_hi, w, slots)
                        add_word(shared, words[r, u64(w)], slots, g, h, plane)
                    p += stride
        cuda.syncthreads()
        for ch in range(channels):
            for s in range(tid, n_slots, threads):
                total = shared[u32(ch) * plane + u32(s)]
                if total != 0:
                    cuda.atomic.add(pool, (dst, base + s, ch), np.int64(total))

    return _build


@cuda.jit
def _subtract(pool, pairs):
    """pool[pairs[m, 0]] -= pool[pairs[m, 1]] for every pair m (a sibling from its parent's
    slot, in place) whose pairs[m, 1] >= 0 (-1: nothing pending); one thread per value."""
    i = cuda.grid(1)
    per_slot = pool.shape[1] * pool.shape[2]
    if i >= pairs.shape[0] * per_slot:
        return
    m = i // per_slot
    if pairs[m, 1] < 0:
        return
    v = i % per_slot
    s = v // pool.shape[2]
    ch = v % pool.shape[2]
    pool[pairs[m, 0], s, ch] -= pool[pairs[m, 1], s, ch]


def feature_groups(offsets: np.ndarray, channels: int, shared_values: int = SHARED_VALUES
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Runs of consecutive features whose slots fit a shared histogram of `shared_values`
    int32 values: int64 (first, last + 1) arrays; a feature too wide for it forms a group of
    its own."""
    first, last = [], []
    f, n_features = 0, len(offsets) - 1
    while f < n_features:
        g = f + 1
        while g < n_features and (offsets[g + 1] - offsets[f]) * channels <= shared_values:
            g += 1
        first.append(f)
        last.append(g)
        f = g
    return np.array(first, np.int64), np.array(last, np.int64)


def shared_bytes(offsets: np.ndarray, first: np.ndarray, last: np.ndarray, channels: int,
                 shared_values: int) -> int:
    """Dynamic shared memory of a launch over these groups: the largest group that sums in
    shared memory (bytes; 0 when none does)."""
    need = [(int(offsets[b]) - int(offsets[a])) * channels
            for a, b in zip(first, last, strict=True)]
    return 4 * max([v for v in need if v <= shared_values], default=0)


_BUILD_SPEC = (("int32", 2), ("int64", 1), ("int32", 2), ("int64", 2), ("int64", 1),
               ("int64", 1), ("int64", 1), "int64", "boolean", ("int64", 3))
# by (dtype of the backend's bins, channels): one-byte bins are read as int32 words of four
BUILD = {(np.dtype(dtype), channels): CudaKernel(_make_build(per_word, channels, LAUNCH_BOUNDS),
                                                 _BUILD_SPEC)
         for dtype, per_word in ((np.uint8, 4), (np.int32, 1)) for channels in (2, 3)}
SUBTRACT = CudaKernel(_subtract, (("int64", 3), ("int64", 2)))
KERNELS = (*BUILD.values(), SUBTRACT)

