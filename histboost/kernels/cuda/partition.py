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
No library scan and no per-row flag array: the host's only work is the node table. A tree's
last level, whose children are leaves no kernel reads the rows of (the margin update walks
the tree), needs only the children's counts: `node_lefts` sums them from `count_left`'s
(`ahead.LevelPlan.launch`), and the rows stay where they are.

The row order inside a node is kept (stable) though no result depends on it: histograms are
integer sums (any order gives the same bits), split records and counts come from them, and
margins are added by walking the tree. It keeps a node's rows increasing, so that its
histogram's gathers of bins and pairs run forwards through memory.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...tree.split import MIN_SPLIT_GAIN
from ..cpu.split import (
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_G,
    REC_LEFT_H,
)
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
    mul,
)
from .histogram import MIN_CHUNK_ROWS
from .split import _leaf_weight

# chunks per node of a partition call at most: the blocks of a node sum this many counts
# (under the simulator 2, so that the tests' nodes take larger chunks too)
MAX_NODE_CHUNKS = 2 if simulated() else 1024


def partition_chunk_rows(n_rows: int) -> int:
    """Rows per chunk of a node of n_rows rows: CHUNK_ROWS, or more (a whole multiple of
    THREADS) for a node that would have more than MAX_NODE_CHUNKS chunks."""
    per = -(-n_rows // MAX_NODE_CHUNKS)
    return max(CHUNK_ROWS, -(-per // THREADS) * THREADS)


def hist_chunk_rows(rows: int, blocks: int, cap: int) -> int:
    """Rows per block of a histogram call over `rows` rows in all: about `blocks` blocks (at
    least MIN_CHUNK_ROWS rows each: a block zeroes and flushes its whole shared histogram),
    at most `cap` (what 32-bit shared sums allow, `histogram.chunk_cap`)."""
    per = -(-rows // blocks)
    chunk = max(MIN_CHUNK_ROWS, -(-per // MIN_CHUNK_ROWS) * MIN_CHUNK_ROWS)
    return max(1, min(chunk, cap))


# the same functions on the device (a level planned there, `_plan_level`)
_partition_chunk_rows = cuda.jit(device=True, inline=True)(partition_chunk_rows)
_hist_chunk_rows = cuda.jit(device=True, inline=True)(hist_chunk_rows)


@cuda.jit(device=True, inline=True)
def _u(i):
    """A non-negative index as uint64: Numba indexes with a signed integer through a
    compare and add for negative indices (wrap-around) on every access, with an unsigned
    one directly (fewer instructions in the row loops; the same element)."""
    return np.uint64(i)


@cuda.jit(device=True, inline=True)
def _goes_left(columns, f, row, split_bin, missing, default_left):
    """Whether `row` goes left; f, row: unsigned (`_u`)."""
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
    side = _u(side)
    f = _u(f)
    n = 0
    p = _u(start + t)
    stop = _u(end)
    while p < stop:
        if _goes_left(columns, f, _u(rows2[side, p]), split_bin, missing, dleft):
            n += 1
        p += _u(THREADS)
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
    out = _u(1 - side)
    side = _u(side)
    f = _u(f)
    for tile in range(start, end, THREADS):
        p = tile + t
        left = 0
        r = 0
        if p < end:
            r = rows2[side, _u(p)]
            if _goes_left(columns, f, _u(r), split_bin, missing, dleft):
                left = 1
        acc[t] = left
        cuda.syncthreads()
        upto = block_scan(acc, t, THREADS)  # lefts of the tile up to and including p
        tile_lefts = acc[THREADS - 1]
        if p < end:
            if left:
                rows2[out, _u(node_start + lefts + upto - 1)] = r
            else:
                rows2[out, _u(node_start + n_left + (p - node_start - lefts - upto))] = r
        lefts += tile_lefts
        cuda.syncthreads()  # acc is the next tile's
    if c == first and t == 0:
        child_counts[j, 0] = n_left
        child_counts[j, 1] = node_end - node_start - n_left


@cuda.jit
def _node_lefts(table, chunk_left, child_counts):
    """child_counts[j] = (left rows, right rows) of node j of `table` (one thread a node),
    the sum of `count_left`'s counts over its chunks: `scatter_rows`' counts without moving
    a row (a tree's last level, whose children no kernel reads the rows of). Nodes without
    rows own no chunk: their entries are left as they are (`plan_children` reads none)."""
    j = cuda.grid(1)
    if j >= table.shape[0]:
        return
    start = table[j, T_START]
    end = table[j, T_END]
    if end <= start:
        return
    first = table[j, T_FIRST]
    n_chunks = (end - start + table[j, T_CHUNK] - 1) // table[j, T_CHUNK]
    lefts = np.int64(0)
    for i in range(first, first + n_chunks):
        lefts += chunk_left[_u(i)]
    child_counts[j, 0] = lefts
    child_counts[j, 1] = end - start - lefts


@cuda.jit
def _plan_children(table, child_counts, first_slot, build_first, chunk, parent_slots, build,
                   search, totals, result, ranges):
    """After a partition (one thread per parent j of `table`), plan the children's
    histograms as `histboost.kernels.backend.child_histograms` does: the child with fewer rows
    (ties: the left one) is built, into pool slot first_slot + j, the other takes the
    parent's slot and is subtracted in place by the split search. Writes build[j] (node table
    of the built child: its rows in chunks of chunk[0] rows, blocks build_first[j] .. (parent
    j owns ceil(half its rows / chunk) blocks)), search[2j], search[2j + 1] ((slot, pending
    sibling's slot or -1) of the left and right child), the row counts into
    totals[2j:2j + 2, 2] (float64) and result[j, 0:2], the children's slots into
    result[j, 2:4], and the children's rows (start, end, row buffer) into ranges[2j:2j + 2].
    A padding parent (parent_slots[j] < 0, a level
    planned on the device, `_plan_level`) gets children without rows (search slot -1: the
    split search skips them) and a build entry without rows at block build_first[j]."""
    j = cuda.grid(1)
    if j >= table.shape[0]:
        return
    start = table[j, T_START]
    end = table[j, T_END]
    side = 1 - table[j, T_SIDE]
    n_left = child_counts[j, 0] if end > start else np.int64(0)
    n_right = end - start - n_left
    own = parent_slots[j]
    if own < 0:
        n_left = np.int64(0)
        n_right = np.int64(0)
    result[j, 0] = n_left
    result[j, 1] = n_right
    totals[2 * j, 2] = n_left
    totals[2 * j + 1, 2] = n_right
    ranges[2 * j, 0] = start
    ranges[2 * j, 1] = start + n_left
    ranges[2 * j, 2] = side
    ranges[2 * j + 1, 0] = start + n_left
    ranges[2 * j + 1, 1] = start + n_left + n_right
    ranges[2 * j + 1, 2] = side
    fresh = first_slot + j
    left_small = n_left <= n_right
    build[j, T_START] = start if left_small else start + n_left
    build[j, T_END] = start + n_left if left_small else start + n_left + n_right
    build[j, T_SIDE] = side
    build[j, T_FIRST] = build_first[j]
    build[j, T_CHUNK] = chunk[0]
    build[j, T_SLOT] = fresh
    if own < 0:
        for i in range(2):
            search[2 * j + i, 0] = -1
            search[2 * j + i, 1] = -1
            result[j, 2 + i] = -1
        return
    search[2 * j, 0] = fresh if left_small else own
    search[2 * j, 1] = -1 if left_small else fresh
    search[2 * j + 1, 0] = own if left_small else fresh
    search[2 * j + 1, 1] = fresh if left_small else -1
    result[j, 2] = search[2 * j, 0]
    result[j, 3] = search[2 * j + 1, 0]


# a level planned on the device: the rows of a step's output block (`_plan_level`,
# `CUDABackend.plan_levels`) after the records and counts, its last row: (frontier size,
# partition chunks, histogram blocks, histogram chunk rows)
INFO_FRONT, INFO_CHUNKS, INFO_BLOCKS, INFO_HIST_CHUNK = 0, 1, 2, 3


@cuda.jit
def _plan_level(front, ranges, search, totals, table, parent_slots, build_first, child_totals,
                chunk_out, nxt, hist_blocks, hist_cap):
    """One block: `plan_level`."""
    plan_level(front, ranges, search, totals, table, parent_slots, build_first, child_totals,
               chunk_out, nxt, hist_blocks, hist_cap)


@cuda.jit(device=True, inline=True)
def plan_level(front, ranges, search, totals, table, parent_slots, build_first, child_totals,
               chunk_out, nxt, hist_blocks, hist_cap):
    """Run by one whole block (a planned level's kernel, `_plan_level`, and a best-first step's
    after its plan, `best_first._step`): the next level of a depth-wise tree from the frontier's
    records, as the grower chooses it (a node splits when its best gain > MIN_SPLIT_GAIN on some
    feature), without the host. The frontier: front float64 (R, REC_WIDTH), records of its
    front[-1, INFO_FRONT] nodes; ranges int64 (k, 3) their rows (start, end, buffer); search
    int64 (k, 2) their histogram slots (column 0); totals float64 (k, 3) their (G, H, C). Writes,
    for the p-th splitting node (frontier order): table[p] (its partition entry, chunks as
    `partition_chunk_rows` cuts them), parent_slots[p], build_first[p] (its first histogram block:
    ceil(half its rows / chunk) blocks each, chunk rows as `hist_chunk_rows(sum of halves,
    hist_blocks, hist_cap)`, into chunk_out[0]) and the children's (G, H) into child_totals[2p],
    [2p + 1] (left from the record, right = the parent's minus left: the grower's float64
    operations). Rows of `table` past the splitting nodes are padding: no rows, first chunk and
    block at the totals, parent slot -1. nxt[-1] gets the level's INFO_* (frontier size of the next
    level: twice the splitting nodes)."""
    t = cuda.threadIdx.x
    flags = cuda.shared.array(THREADS, np.int64)
    counts = cuda.shared.array(THREADS, np.int64)
    info = front.shape[0] - 1
    n_front = np.int64(front[info, INFO_FRONT])
    n_split = np.int64(0)
    n_chunks = np.int64(0)
    halves = np.int64(0)
    for tile in range(0, n_front, THREADS):
        j = tile + t
        split = 0
        nch = np.int64(0)
        start = np.int64(0)
        end = np.int64(0)
        rows = np.int64(1)
        if j < n_front and front[j, REC_GAIN] > MIN_SPLIT_GAIN and front[j, REC_FEATURE] >= 0:
            split = 1
            start = ranges[j, 0]
            end = ranges[j, 1]
            rows = _partition_chunk_rows(end - start)
            nch = (end - start + rows - 1) // rows
        flags[t] = split
        counts[t] = nch
        cuda.syncthreads()
        before = block_scan(flags, t, THREADS) - split
        chunks_before = block_scan(counts, t, THREADS) - nch
        if split:
            p = n_split + before
            table[p, T_START] = start
            table[p, T_END] = end
            table[p, T_SIDE] = ranges[j, 2]
            table[p, T_FIRST] = n_chunks + chunks_before
            table[p, T_CHUNK] = rows
            table[p, T_FEATURE] = np.int64(front[j, REC_FEATURE])
            table[p, T_BIN] = np.int64(front[j, REC_BIN])
            table[p, T_DEFAULT_LEFT] = np.int64(front[j, REC_DEFAULT_LEFT])
            parent_slots[p] = search[j, 0]
            lg = front[j, REC_LEFT_G]
            lh = front[j, REC_LEFT_H]
            child_totals[2 * p, 0] = lg
            child_totals[2 * p, 1] = lh
            child_totals[2 * p + 1, 0] = totals[j, 0] - lg
            child_totals[2 * p + 1, 1] = totals[j, 1] - lh
            halves += (end - start) // 2
        n_split += flags[THREADS - 1]
        n_chunks += counts[THREADS - 1]
        cuda.syncthreads()
    counts[t] = halves
    cuda.syncthreads()
    chunk = _hist_chunk_rows(_block_sum(counts, t), hist_blocks, hist_cap)
    n_blocks = np.int64(0)
    for tile in range(0, n_split, THREADS):
        p = tile + t
        nb = np.int64(0)
        if p < n_split:
            nb = ((table[p, T_END] - table[p, T_START]) // 2 + chunk - 1) // chunk
        counts[t] = nb
        cuda.syncthreads()
        upto = block_scan(counts, t, THREADS)
        if p < n_split:
            build_first[p] = n_blocks + upto - nb
        n_blocks += counts[THREADS - 1]
        cuda.syncthreads()
    for p in range(n_split + t, table.shape[0], THREADS):
        table[p, T_START] = 0
        table[p, T_END] = 0
        table[p, T_SIDE] = 0
        table[p, T_FIRST] = n_chunks
        table[p, T_CHUNK] = 1
        table[p, T_FEATURE] = 0
        table[p, T_BIN] = 0
        table[p, T_DEFAULT_LEFT] = 0
        parent_slots[p] = -1
        build_first[p] = n_blocks
    if t == 0:
        chunk_out[0] = chunk
        last = nxt.shape[0] - 1
        nxt[last, INFO_FRONT] = 2 * n_split
        nxt[last, INFO_CHUNKS] = n_chunks
        nxt[last, INFO_BLOCKS] = n_blocks
        nxt[last, INFO_HIST_CHUNK] = chunk


@cuda.jit
def _root_front(pool, first, last, g_scale, h_scale, n_rows, front, totals, search, ranges):
    """One block: the root as the frontier of a depth-wise tree planned on the device
    (`_plan_level`): its (G, H) summed from pool slot 0 over slots first..last - 1 (the first
    feature's: every row once; exact integers, as `histogram_totals`) times the scales, and
    n_rows rows, into totals[0] and front[count_row] (count_row = (R - 1) // 2: the host reads
    them there); search[0] = (slot 0, no pending sibling); ranges[0] = all rows of buffer 0;
    a frontier of one node (front[-1, INFO_FRONT])."""
    t = cuda.threadIdx.x
    g = cuda.shared.array(THREADS, np.int64)
    h = cuda.shared.array(THREADS, np.int64)
    sg = np.int64(0)
    sh = np.int64(0)
    for s in range(first + t, last, THREADS):
        sg += pool[0, s, 0]
        sh += pool[0, s, 1]
    g[t] = sg
    h[t] = sh
    cuda.syncthreads()
    gs = _block_sum(g, t)
    hs = _block_sum(h, t)
    if t == 0:
        G = np.float64(gs) * g_scale
        H = np.float64(hs) * h_scale
        row = (front.shape[0] - 1) // 2
        front[row, 0] = G
        front[row, 1] = H
        front[row, 2] = n_rows
        totals[0, 0] = G
        totals[0, 1] = H
        totals[0, 2] = n_rows
        search[0, 0] = 0
        search[0, 1] = -1
        ranges[0, 0] = 0
        ranges[0, 1] = n_rows
        ranges[0, 2] = 0
        front[front.shape[0] - 1, INFO_FRONT] = 1


@cuda.jit
def _plan_leaves(fronts, totals, reg, learning_rate, child, level_values):
    """One block: the leaves of a whole tree planned on the device (`_plan_level`) and
    their values, for its margin update. Frontier b (depth b: fronts[b][-1, INFO_FRONT]
    nodes with sums totals[b, j]) holds the nodes that do not split (`_plan_level`'s rule)
    and, at the deepest level, all of them. Writes child[b, j]: the place of node j's left
    child in frontier b + 1 (2q for the q-th splitting node of its frontier, its right child
    next to it), -1 for a leaf; and level_values[b, j]: a leaf's value leaf_weight(G, H, reg)
    * learning_rate (the grower's float64 operations, the product rounded on its own), 0
    for nodes that split."""
    t = cuda.threadIdx.x
    flags = cuda.shared.array(THREADS, np.int64)
    depths = fronts.shape[0]
    info = fronts.shape[1] - 1
    for b in range(depths):
        last = b == depths - 1
        n_front = np.int64(fronts[b, info, INFO_FRONT])
        splitting = np.int64(0)  # splitting nodes of this frontier before the tile
        for tile in range(0, n_front, THREADS):
            j = tile + t
            split_here = 0
            if j < n_front and not last and fronts[b, j, REC_GAIN] > MIN_SPLIT_GAIN \
                    and fronts[b, j, REC_FEATURE] >= 0:
                split_here = 1
            flags[t] = split_here
            cuda.syncthreads()
            before = block_scan(flags, t, THREADS) - split_here
            if j < n_front:
                if split_here:
                    child[b, j] = 2 * (splitting + before)
                    level_values[b, j] = 0.0
                else:
                    child[b, j] = -1
                    level_values[b, j] = mul(_leaf_weight(totals[b, j, 0], totals[b, j, 1],
                                                          reg), learning_rate)
            splitting += flags[THREADS - 1]
            cuda.syncthreads()


@cuda.jit
def _leaf_values_into(columns, missing_bins, fronts, child, level_values, margin, output,
                      out):
    """out[row, 0] = margin[row, output] + the value of the row's leaf, for every row of a
    tree planned on the device (`_plan_leaves`), one thread a row: the row walks the
    frontiers' split records (the partition's rule, `_goes_left`) from the root to its
    leaf. The margins stay as they are until the host has checked the values
    (`CUDABackend.update_margin`). Rows are read in order (a warp's bins of one feature
    are one sector), where adding by leaf through the row-index buffer gathered every
    row's margin: 0.87 ms a depth-8 tree of 10M rows on an H100."""
    i = cuda.grid(1)
    if i >= columns.shape[1]:
        return
    row = _u(i)
    b = 0
    j = 0
    while child[b, j] >= 0:
        f = np.int64(fronts[b, j, REC_FEATURE])
        left = _goes_left(columns, _u(f), row, np.int64(fronts[b, j, REC_BIN]),
                          missing_bins[f], np.int64(fronts[b, j, REC_DEFAULT_LEFT]))
        j = child[b, j] + (0 if left else 1)
        b += 1
    out[row, 0] = margin[row, _u(output)] + level_values[b, j]


_TAIL = (("int32", 2), ("int64", 2), ("int32", 1), ("int64", 1))
COUNT_LEFT = {np.dtype(np.uint8): CudaKernel(_count_left, (("uint8", 2), *_TAIL)),
              np.dtype(np.int32): CudaKernel(_count_left, (("int32", 2), *_TAIL))}
SCATTER_ROWS = {np.dtype(np.uint8): CudaKernel(_scatter_rows, (("uint8", 2), *_TAIL,
                                                               ("int64", 2))),
                np.dtype(np.int32): CudaKernel(_scatter_rows, (("int32", 2), *_TAIL,
                                                               ("int64", 2)))}
NODE_LEFTS = CudaKernel(_node_lefts, (("int64", 2), ("int64", 1), ("int64", 2)))
PLAN_CHILDREN = CudaKernel(_plan_children, (("int64", 2), ("int64", 2), "int64",
                                            ("int64", 1), ("int64", 1), ("int64", 1),
                                            ("int64", 2), ("int64", 2), ("float64", 2),
                                            ("float64", 2), ("int64", 2)))
PLAN_LEVEL = CudaKernel(_plan_level, (("float64", 2), ("int64", 2), ("int64", 2),
                                      ("float64", 2), ("int64", 2), ("int64", 1), ("int64", 1),
                                      ("float64", 2), ("int64", 1), ("float64", 2), "int64",
                                      "int64"))
ROOT_FRONT = CudaKernel(_root_front, (("int64", 3), "int64", "int64", "float64", "float64",
                                      "int64", ("float64", 2), ("float64", 2), ("int64", 2),
                                      ("int64", 2)))
PLAN_LEAVES = CudaKernel(_plan_leaves, (("float64", 3), ("float64", 3), ("float64", 1),
                                        "float64", ("int64", 2), ("float64", 2)))
LEAF_VALUES_INTO = {
    np.dtype(dtype): CudaKernel(_leaf_values_into, ((dtype, 2), ("int32", 1), ("float64", 3),
                                                    ("int64", 2), ("float64", 2),
                                                    ("float64", 2), "int64", ("float64", 2)))
    for dtype in ("uint8", "int32")}
KERNELS = (*COUNT_LEFT.values(), *SCATTER_ROWS.values(), NODE_LEFTS, PLAN_CHILDREN,
           PLAN_LEVEL, ROOT_FRONT, PLAN_LEAVES, *LEAF_VALUES_INTO.values())
