"""Best-first steps planned on the device, after the first levels of a best-first tree
(`ahead.LevelPlan`, `CUDABackend.plan_levels` with `best_first`).

The planned levels cover a best-first tree while a level has no more leaves than a step
splits (six levels with steps of 32 leaves); a 255-leaf tree then takes about ten more steps,
each a host round trip (the grower's choice, one upload, the step's kernels, one read) while
the device idles between them. Yet the grower's choice of a step's leaves is a fixed
algorithm of the records it has read (`TreeGrower._grow_lossguide`: commit the best-first
queue while its head is split, then play the queue forward to pick the next leaves), so the
device can run it too: a one-block kernel per step (`_step`: first `_plan_step`, its
sequential part on one thread, the queues as binary heaps in shared memory) keeps the
grower's state (nodes, gains, the queue, commit and leaf counts), adds the children of the
step before, commits, plays forward, and writes the step's parents as a frontier in the
layout of a planned level; the same block then plans that level (`partition.plan_level`), and
the level kernels (the partition, `PLAN_CHILDREN`, the histograms, the split search) run the
step unchanged. Every step is launched after the levels, without
the host; each step's records, row counts, histogram slots and parents go to pinned memory
behind an event.

The grower's calls (`split_and_search` of the searched parents, `apply_splits` of those whose
children are not searched) are answered from a step's block once its event has passed, and
each is checked: the grower's parents must be the device's, in the same order (the device
numbers nodes its own way; the plan maps its ids to the grower's as steps are answered). A
mismatch raises: the device ran the grower's algorithm, so a difference is a bug. When the
device cannot plan a step (more parents than a step's launches take, more nodes than its
tables hold) or has planned all its steps, it marks the step stopped, every later step does
nothing, and the host plans the rest of the tree from the histograms the device left.

A step's parents: the searched ones first, then the others, each group in the order the
queue played forward pops them, as `TreeGrower._split_ahead` splits them; the children of
parent q are the device's nodes base + 2q and base + 2q + 1. The children of parents whose
children are not searched (the split that fills the tree, or max_depth) are searched anyway
(the level kernels do not tell them apart); their records are never read.

Output block of a step, float64 (4P + 1, REC_WIDTH), P parents at most: rows 0..2P: the
children's records; 2P..3P: row counts (left, right) and histogram slots (left, right) per
parent (`PLAN_CHILDREN`); 3P..4P: (device id, searched, first child's device id) per parent;
last row: `partition.INFO_*` of the step, then INFO_STATUS, INFO_PARENTS, INFO_SEARCHED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import cuda

from ...tree.split import (
    MIN_SPLIT_GAIN,
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_WIDTH,
)
from ..launch import CudaKernel
from ._common import TABLE_WIDTH, THREADS, grid, mul
from .ahead import PinnedBlocks
from .partition import INFO_BLOCKS, INFO_CHUNKS, INFO_FRONT, _goes_left, _u, plan_level
from .split import _leaf_weight

if TYPE_CHECKING:
    from .ahead import LevelPlan
    from .backend import CUDABackend

# nodes of a tree the device keeps (its shared-memory tables); a tree growing more nodes
# than this goes on with host-planned steps
NODE_CAP = 1024
# entries of a best-first queue: leaves of a tree of NODE_CAP nodes at most
HEAP_CAP = NODE_CAP // 2 + 8
# parents of one step at most (the launches are sized for a step's parents, `BestFirstPlan`)
MAX_PARENTS = 256
# steps launched per tree at most
MAX_STEPS = 24

# the kernels' state, int64 (META_WIDTH,)
M_QUEUE, M_COMMITS, M_LEAVES, M_NODES, M_STATUS, M_PENDING, M_PENDING_BASE = range(7)
META_WIDTH = 8
# a step's status: planned; the tree is complete; not planned (the host plans from here)
RUNNING, DONE, STOPPED = 0, 1, 2
# the last row of a step's output block, after partition.INFO_* (columns 0-3)
INFO_STATUS, INFO_PARENTS, INFO_SEARCHED = 4, 5, 6


@cuda.jit(device=True, inline=True)
def _before(ga, na, gb, nb):
    """Whether the queue entry (gain ga, number na) pops before (gb, nb): the higher gain,
    ties the lower number (the grower's heap of (-gain, number, id); numbers are distinct)."""
    return ga > gb or (ga == gb and na < nb)


@cuda.jit(device=True, inline=True)
def _push(hg, hn, hi, size, g, n, i):
    """Push (gain g, number n, node i) on the binary heap hg, hn, hi of `size` entries;
    returns the new size."""
    c = size
    while c > 0:
        p = (c - 1) // 2
        if not _before(g, n, hg[p], hn[p]):
            break
        hg[c] = hg[p]
        hn[c] = hn[p]
        hi[c] = hi[p]
        c = p
    hg[c] = g
    hn[c] = n
    hi[c] = i
    return size + 1


@cuda.jit(device=True, inline=True)
def _pop(hg, hn, hi, size):
    """Remove the heap's first entry (the caller reads hi[0] before); returns the new size."""
    size -= 1
    if size <= 0:
        return size
    g = hg[size]
    n = hn[size]
    i = hi[size]
    c = 0
    while True:
        m = 2 * c + 1
        if m >= size:
            break
        if m + 1 < size and _before(hg[m + 1], hn[m + 1], hg[m], hn[m]):
            m += 1
        if not _before(hg[m], hn[m], g, n):
            break
        hg[c] = hg[m]
        hn[c] = hn[m]
        hi[c] = hi[m]
        c = m
    hg[c] = g
    hn[c] = n
    hi[c] = i
    return size


@cuda.jit(device=True, inline=True)
def _push_children(hg, hn, hi, size, left, gain, node, commits):
    """The grower's `push`: the children of the commits-th commit, `node`, onto the heap when
    their gain is positive (numbers 2 * commits - 1 and 2 * commits); returns the new size."""
    number = 2 * commits - 1
    lc = left[node]
    if gain[lc] > MIN_SPLIT_GAIN:
        size = _push(hg, hn, hi, size, gain[lc], number, lc)
    if gain[lc + 1] > MIN_SPLIT_GAIN:
        size = _push(hg, hn, hi, size, gain[lc + 1], number + 1, lc + 1)
    return size


@cuda.jit
def _first_state(blocks, ranges, search, totals, levels, meta, gain, left, depth, rec, rows,
                 slot, tot, queue_g, queue_ni, committed):
    """One block: the grower's state after the planned levels, from their output blocks
    (`ahead.LevelBuffers.out`, float64 (levels + 1, R, REC_WIDTH)) and frontiers' sums
    (totals float64 (levels + 1, m, 3)): node (b, j), the j-th of the frontier at depth b, is
    the device's node 2**b - 1 + j; a node splits when its gain is positive (the levels'
    rule), its children are the next frontier's 2p, 2p + 1 for the p-th splitting node. Per
    node: gain (its record's where positive and searched, else -1), left child (-1: a
    leaf), depth, record and sums, none committed; for the deepest frontier also its rows
    and slot (ranges int64 (m, 3), search int64 (m, 2) of that frontier). The queue holds
    the root (the grower commits the levels from there), one leaf, no commit, no step
    pending."""
    t = cuda.threadIdx.x
    for i in range(t, gain.shape[0], THREADS):
        gain[i] = -1.0
        left[i] = -1
        committed[i] = 0
    cuda.syncthreads()
    if t != 0:
        return
    info = blocks.shape[1] - 1
    for b in range(levels + 1):
        base = (1 << b) - 1
        p = 0
        for j in range(np.int64(blocks[b, info, INFO_FRONT])):
            i = base + j
            depth[i] = b
            for w in range(REC_WIDTH):
                rec[i, w] = blocks[b, j, w]
            for w in range(3):
                tot[i, w] = totals[b, j, w]
            if blocks[b, j, REC_GAIN] > MIN_SPLIT_GAIN and blocks[b, j, REC_FEATURE] >= 0:
                gain[i] = blocks[b, j, REC_GAIN]
                if b < levels:
                    left[i] = (1 << (b + 1)) - 1 + 2 * p
                    p += 1
    base = (1 << levels) - 1
    for j in range(np.int64(blocks[levels, info, INFO_FRONT])):
        i = base + j
        for w in range(3):
            rows[i, w] = ranges[j, w]
        slot[i] = search[j, 0]
    size = 0
    if gain[0] > MIN_SPLIT_GAIN:
        queue_g[0] = gain[0]
        queue_ni[0, 0] = 0
        queue_ni[0, 1] = 0
        size = 1
    meta[M_QUEUE] = size
    meta[M_COMMITS] = 0
    meta[M_LEAVES] = 1
    meta[M_NODES] = (1 << (levels + 1)) - 1
    meta[M_STATUS] = RUNNING
    meta[M_PENDING] = 0
    meta[M_PENDING_BASE] = 0


@cuda.jit
def _step(prev_out, prev_rows, prev_search, prev_totals, meta, pending, gain, left, depth, rec,
          rows, slot, tot, queue_g, queue_ni, committed, max_leaves, max_depth, batch, front,
          front_rows, front_search, front_totals, out, table, parent_slots, build_first,
          child_totals, chunk_out, hist_blocks, hist_cap):
    """One block: a best-first step's plan (`_plan_step`), then its parents' partition table,
    histogram plan and children's sums as a planned level's (`partition.plan_level` of the
    step's frontier into table, parent_slots, build_first, child_totals, chunk_out and the
    INFO_* of out's last row): one launch where there were two, back to back, a step."""
    _plan_step(prev_out, prev_rows, prev_search, prev_totals, meta, pending, gain, left, depth,
               rec, rows, slot, tot, queue_g, queue_ni, committed, max_leaves, max_depth, batch,
               front, front_rows, front_search, front_totals, out)
    cuda.syncthreads()  # the frontier written by every thread, its size by thread 0
    plan_level(front, front_rows, front_search, front_totals, table, parent_slots, build_first,
               child_totals, chunk_out, out, hist_blocks, hist_cap)


@cuda.jit(device=True, inline=True)
def _plan_step(prev_out, prev_rows, prev_search, prev_totals, meta, pending, gain, left, depth,
               rec, rows, slot, tot, queue_g, queue_ni, committed, max_leaves, max_depth, batch,
               front, front_rows, front_search, front_totals, out):
    """Run by one whole block (`_step`): one best-first step of the grower
    (`TreeGrower._grow_lossguide`) on the device. First the children of the step before (pending
    int64 (P, 2): its parents and whether their children were searched; their records
    prev_out[0:2k], rows prev_rows, slots prev_search[:, 0], sums prev_totals) become nodes. Then,
    on one thread: commit the queue while its head is split (each commit adds a leaf and pushes the
    node's children of positive gain); stop (DONE) when the queue is empty or max_leaves leaves are
    reached; else play the queue forward as the grower does: pop (split nodes push their children,
    numbered by the commits played) until `batch` leaves whose children are searched are popped (one
    leaf when batch is 1) or the tree would be full, collecting the leaves not yet split as parents,
    searched when the tree is not full after them and max_depth allows (0: no limit); each node
    committed is marked (committed int64 (NODE_CAP,): 1). More than P parents or NODE_CAP nodes:
    STOPPED (the host goes on). The parents, searched ones first, are written as a frontier for
    `partition.plan_level` (front float64 (P + 1, REC_WIDTH): their records, the count in the last
    row; their rows, slots and sums) and into out[3P:4P] (device id, searched, first child's id);
    the status and counts into out[-1]."""
    t = cuda.threadIdx.x
    hg = cuda.shared.array(HEAP_CAP, np.float64)
    hn = cuda.shared.array(HEAP_CAP, np.int32)
    hi = cuda.shared.array(HEAP_CAP, np.int32)
    ag = cuda.shared.array(HEAP_CAP, np.float64)
    an = cuda.shared.array(HEAP_CAP, np.int32)
    ai = cuda.shared.array(HEAP_CAP, np.int32)
    sgain = cuda.shared.array(NODE_CAP, np.float64)
    sleft = cuda.shared.array(NODE_CAP, np.int32)
    chosen = cuda.shared.array(MAX_PARENTS, np.int32)
    chosen_search = cuda.shared.array(MAX_PARENTS, np.int32)
    shared = cuda.shared.array(4, np.int64)
    cap = pending.shape[0]
    n_prev = meta[M_PENDING]
    base = meta[M_PENDING_BASE]
    for q in range(t, 2 * n_prev, THREADS):
        i = base + q
        parent = pending[q // 2, 0]
        depth[i] = depth[parent] + 1
        left[i] = -1
        g = -1.0
        if pending[q // 2, 1] != 0 and prev_out[q, REC_GAIN] > MIN_SPLIT_GAIN \
                and prev_out[q, REC_FEATURE] >= 0:
            g = prev_out[q, REC_GAIN]
        gain[i] = g
        for w in range(REC_WIDTH):
            rec[i, w] = prev_out[q, w]
        for w in range(3):
            rows[i, w] = prev_rows[q, w]
            tot[i, w] = prev_totals[q, w]
        slot[i] = prev_search[q, 0]
    cuda.syncthreads()
    n_nodes = meta[M_NODES]
    for i in range(t, n_nodes, THREADS):
        sgain[i] = gain[i]
        sleft[i] = left[i]
    size = meta[M_QUEUE]
    for e in range(t, size, THREADS):
        hg[e] = queue_g[e]
        hn[e] = queue_ni[e, 0]
        hi[e] = queue_ni[e, 1]
    cuda.syncthreads()
    if t == 0:
        status = meta[M_STATUS]
        k = 0
        n_searched = 0
        first_child = n_nodes
        if status == RUNNING:
            commits = meta[M_COMMITS]
            leaves = meta[M_LEAVES]
            while size > 0 and leaves < max_leaves:
                head = hi[0]
                if sleft[head] == -1:
                    break
                size = _pop(hg, hn, hi, size)
                committed[head] = 1
                commits += 1
                leaves += 1
                size = _push_children(hg, hn, hi, size, sleft, sgain, head, commits)
            meta[M_COMMITS] = commits
            meta[M_LEAVES] = leaves
            if size == 0 or leaves >= max_leaves:
                status = DONE
            else:
                for e in range(size):
                    ag[e] = hg[e]
                    an[e] = hn[e]
                    ai[e] = hi[e]
                asize = size
                n_par = 0
                searched = 0
                while asize > 0 and leaves < max_leaves and n_par <= cap and (
                        searched < batch if batch > 1 else n_par == 0):
                    j = ai[0]
                    asize = _pop(ag, an, ai, asize)
                    leaves += 1
                    commits += 1
                    if sleft[j] == -1:
                        s = 1 if leaves < max_leaves and (
                            max_depth == 0 or depth[j] + 1 < max_depth) else 0
                        if n_par < cap:
                            chosen[n_par] = j
                            chosen_search[n_par] = s
                        n_par += 1
                        searched += s
                    else:
                        asize = _push_children(ag, an, ai, asize, sleft, sgain, j, commits)
                if n_par > cap or n_nodes + 2 * n_par > NODE_CAP:
                    status = STOPPED
                else:
                    q = 0
                    for want in range(1, -1, -1):  # searched parents first
                        for e in range(n_par):
                            if chosen_search[e] == want:
                                j = chosen[e]
                                pending[q, 0] = j
                                pending[q, 1] = want
                                left[j] = n_nodes + 2 * q
                                q += 1
                    k = n_par
                    n_searched = searched
                    meta[M_NODES] = n_nodes + 2 * n_par
        meta[M_STATUS] = status
        meta[M_PENDING] = k
        meta[M_PENDING_BASE] = first_child
        meta[M_QUEUE] = size
        shared[0] = k
        shared[1] = size
        last = out.shape[0] - 1
        out[last, INFO_STATUS] = status
        out[last, INFO_PARENTS] = k
        out[last, INFO_SEARCHED] = n_searched
        front[front.shape[0] - 1, INFO_FRONT] = k
    cuda.syncthreads()
    k = shared[0]
    size = shared[1]
    for e in range(t, size, THREADS):
        queue_g[e] = hg[e]
        queue_ni[e, 0] = hn[e]
        queue_ni[e, 1] = hi[e]
    for q in range(t, k, THREADS):
        j = pending[q, 0]
        for w in range(REC_WIDTH):
            front[q, w] = rec[j, w]
        for w in range(3):
            front_rows[q, w] = rows[j, w]
            front_totals[q, w] = tot[j, w]
        front_search[q, 0] = slot[j]
        front_search[q, 1] = -1
        out[3 * cap + q, 0] = j
        out[3 * cap + q, 1] = pending[q, 1]
        out[3 * cap + q, 2] = n_nodes + 2 * q


@cuda.jit
def _tree_leaves(meta, left, tot, committed, reg, learning_rate, values):
    """One block, after a tree's last planned step: its leaves and their values once the
    device's grower has finished it (status DONE; otherwise only the status is written). A
    committed split is one of the tree; a node split ahead and not committed is a leaf over
    the nodes below it (`TreeGrower._commit_order`). Writes values float64 (NODE_CAP + 1,
    2): per node i, the value of the tree's leaf holding its rows, leaf_weight(G, H, reg)
    * learning_rate of that leaf's sums (the grower's float64 operations, the product
    rounded on its own), and 1 where the node is one of the tree's and not split (a node of
    the grower's leaf lists), else 0; last row: (status, those nodes' count). Nodes are
    numbered after their parents, so one pass in id order from the root carries a value
    down."""
    t = cuda.threadIdx.x
    sval = cuda.shared.array(NODE_CAP, np.float64)
    # 1: a node of the tree (the levels' tables have places for nodes that do not exist)
    sreach = cuda.shared.array(NODE_CAP, np.int32)
    last = values.shape[0] - 1
    status = meta[M_STATUS]
    if status != DONE:
        if t == 0:
            values[last, 0] = status
            values[last, 1] = 0
        return
    n_nodes = meta[M_NODES]
    for i in range(t, n_nodes, THREADS):
        sval[i] = mul(_leaf_weight(tot[i, 0], tot[i, 1], reg), learning_rate)
        sreach[i] = 1 if i == 0 else 0
    cuda.syncthreads()
    if t == 0:
        held = 0
        for i in range(n_nodes):
            if sreach[i] == 0:
                continue
            lc = left[i]
            if lc < 0:
                held += 1
                continue
            sreach[lc] = 1
            sreach[lc + 1] = 1
            if committed[i] == 0:  # split ahead, not kept: its rows are its own leaf's
                sval[lc] = sval[i]
                sval[lc + 1] = sval[i]
        values[last, 0] = status
        values[last, 1] = held
    cuda.syncthreads()
    for i in range(t, n_nodes, THREADS):
        values[i, 0] = sval[i]
        values[i, 1] = 1.0 if left[i] < 0 and sreach[i] != 0 else 0.0


@cuda.jit
def _tree_margins_into(columns, missing_bins, meta, rec, left, committed, values, margin,
                       output, out):
    """out[row, 0] = margin[row, output] + the value of the row's leaf of a tree the
    device's grower finished (`_tree_leaves`), one thread a row: the row walks the
    committed splits (the partition's rule, `partition._goes_left`) from the root to the
    first node not committed, whose value is its leaf's; nothing when the tree is not
    finished. The margins stay as they are until the host has checked the values
    (`CUDABackend.update_margin`)."""
    i = cuda.grid(1)
    if i >= columns.shape[1] or meta[M_STATUS] != DONE:
        return
    row = _u(i)
    node = 0
    while committed[node] != 0:
        f = np.int64(rec[node, REC_FEATURE])
        go_left = _goes_left(columns, _u(f), row, np.int64(rec[node, REC_BIN]),
                             missing_bins[f], np.int64(rec[node, REC_DEFAULT_LEFT]))
        node = left[node] + (0 if go_left else 1)
    out[row, 0] = margin[row, _u(output)] + values[node, 0]


_STATE = (("int64", 1), ("float64", 1), ("int64", 1), ("int64", 1), ("float64", 2),
          ("int64", 2), ("int64", 1), ("float64", 2), ("float64", 1), ("int64", 2), ("int64", 1))
FIRST_STATE = CudaKernel(_first_state, (("float64", 3), ("int64", 2), ("int64", 2),
                                        ("float64", 3), "int64", *_STATE))
STEP = CudaKernel(_step, (("float64", 2), ("int64", 2), ("int64", 2), ("float64", 2), _STATE[0],
                          ("int64", 2), *_STATE[1:], "int64", "int64", "int64", ("float64", 2),
                          ("int64", 2), ("int64", 2), ("float64", 2), ("float64", 2),
                          ("int64", 2), ("int64", 1), ("int64", 1), ("float64", 2),
                          ("int64", 1), "int64", "int64"))
TREE_LEAVES = CudaKernel(_tree_leaves, (("int64", 1), ("int64", 1), ("float64", 2), ("int64", 1),
                                        ("float64", 1), "float64", ("float64", 2)))
TREE_MARGINS_INTO = {
    np.dtype(dtype): CudaKernel(_tree_margins_into, (
        (dtype, 2), ("int32", 1), ("int64", 1), ("float64", 2), ("int64", 1), ("int64", 1),
        ("float64", 2), ("float64", 2), "int64", ("float64", 2)))
    for dtype in ("uint8", "int32")}
KERNELS = (FIRST_STATE, STEP, TREE_LEAVES, *TREE_MARGINS_INTO.values())


def step_shape(batch: int, max_depth: int) -> int:
    """Parents of one step at most, P: a step pops up to `batch` leaves whose children are
    searched, and those whose children are not (the split filling the tree, one; leaves
    at max_depth, any number: twice the batch here, a step with more goes to the host)."""
    return batch + 1 if max_depth <= 0 else 2 * batch


class BestFirstBuffers:
    """The device buffers of best-first steps planned on the device: `steps` steps of at most
    `parents` parents over `n_rows` rows, the state of the device's grower, and the pinned
    host copies of the steps' output blocks with one event each; the tree's leaf values
    (`_tree_leaves`) and their pinned host copy behind an event."""

    def __init__(self, be: CUDABackend, steps: int, parents: int, n_rows: int) -> None:
        torch = be._torch
        dev = be.device
        common = be._k["common"]
        self.steps, self.parents, self.n_rows = steps, parents, n_rows
        p, s = parents, steps
        f64, i64 = torch.float64, torch.int64

        def zeros(*shape, dtype=i64):
            return torch.zeros(shape, dtype=dtype, device=dev)
        self.meta = zeros(META_WIDTH)
        self.pending = zeros(p, 2)
        self.state = (zeros(NODE_CAP, dtype=f64), zeros(NODE_CAP), zeros(NODE_CAP),
                      zeros(NODE_CAP, REC_WIDTH, dtype=f64), zeros(NODE_CAP, 3), zeros(NODE_CAP),
                      zeros(NODE_CAP, 3, dtype=f64), zeros(HEAP_CAP, dtype=f64),
                      zeros(HEAP_CAP, 2), zeros(NODE_CAP))
        self.out = zeros(s, 4 * p + 1, REC_WIDTH, dtype=f64)
        on_gpu = dev.type == "cuda"
        self.host = torch.zeros((s, 4 * p + 1, REC_WIDTH), dtype=f64, pin_memory=on_gpu)
        self.host_np = self.host.numpy()
        self.events = [torch.cuda.Event() if on_gpu else None for _ in range(s)]
        self.values = zeros(NODE_CAP + 1, 2, dtype=f64)
        self.values_host = torch.zeros((NODE_CAP + 1, 2), dtype=f64, pin_memory=on_gpu)
        self.values_np = self.values_host.numpy()
        self.leaf_event = torch.cuda.Event() if on_gpu else None
        front = zeros(s, p + 1, REC_WIDTH, dtype=f64)
        front_rows, front_search = zeros(s, p, 3), zeros(s, p, 2)
        front_totals = zeros(s, p, 3, dtype=f64)
        child_rows, child_search = zeros(s, 2 * p, 3), zeros(s, 2 * p, 2)
        child_totals = zeros(s, 2 * p, 3, dtype=f64)
        self.table, self.build = zeros(p, TABLE_WIDTH), zeros(p, TABLE_WIDTH)
        self.slots, self.first, self.counts = zeros(p), zeros(p), zeros(p, 2)
        self.chunk = zeros(1)
        self.part_grid = -(-n_rows // common.CHUNK_ROWS) + p
        self.chunk_left = zeros(self.part_grid)
        self.records = zeros(2 * p, be.n_features, REC_WIDTH, dtype=f64)
        self.done = zeros(2 * p, dtype=torch.int32)
        self.host_copies = [(self.host[b], self.out[b]) for b in range(s)]
        self.step_views = [{
            "front": front[b], "front_rows": front_rows[b], "front_search": front_search[b],
            "front_totals": front_totals[b], "out": self.out[b],
            "counts_out": self.out[b][2 * p:3 * p], "child_rows": child_rows[b],
            "child_search": child_search[b], "child_totals": child_totals[b]}
            for b in range(s)]
        self.nbytes = sum(t.numel() * t.element_size() for t in (
            self.meta, self.pending, *self.state, self.out, front, front_rows, front_search,
            front_totals, child_rows, child_search, child_totals, self.table, self.build,
            self.slots, self.first, self.counts, self.chunk, self.chunk_left, self.records,
            self.done, self.values))


class BestFirstPlan:
    """Best-first steps of one tree planned on the device after its planned levels: launched
    behind them (`launch`), then answering the grower's steps (`step`) once the levels are
    stepped (`begin`); with a learning rate, the tree's margin update behind them
    (`launch_leaves`), kept when the grower's tree is the device's (`leaves_match`)."""

    root_read = True  # the levels' plan answered the root's calls

    def __init__(self, be: CUDABackend, bufs: BestFirstBuffers, levels: LevelPlan,
                 max_leaves: int, max_depth: int, batch: int, at_once: bool = False) -> None:
        """levels: the tree's planned levels (launched); at_once: the host reads the steps
        only once they are all done (`PinnedBlocks`; a tree launched ahead of its round)."""
        self.be = be
        self.bufs = bufs
        self.levels = levels
        self.max_leaves, self.max_depth, self.batch = max_leaves, max_depth, batch
        self.shape = (max_leaves, max_depth, batch)
        self.steps = 0  # steps launched
        self.index = 0  # the step answered next (after the tree: the steps it took)
        self.searched_done = False  # its searched parents are answered, the others not
        self.ids: dict[int, int] = {}  # device node id -> grower's id
        self.first_slot = 0
        self.build_grid = 0
        self.mask: np.ndarray | None = None
        self.reg: np.ndarray | None = None
        self.at_once = at_once
        self._blocks: PinnedBlocks | None = None
        self.leaves_ahead = False  # the margin update was launched (`launch_leaves`)

    def launch(self, feature_mask: np.ndarray, reg: np.ndarray, steps: int,
               learning_rate: float | None = None, output: int = 0) -> None:
        """The device's grower state from the planned levels, then `steps` steps (at most
        the buffers'): each the step's plan and its level's plan (`_step`), then a planned
        level's kernels over its parents; with a learning rate, the tree's margin update of
        `output` behind them (`launch_leaves`)."""
        be, bufs = self.be, self.bufs
        levels = self.levels.bufs
        common, part, split = be._k["common"], be._k["partition"], be._k["split"]
        dev, threads = be.device, common.THREADS
        p = bufs.parents
        self.mask = np.asarray(feature_mask, bool).copy()
        self.reg = np.asarray(reg, np.float64).copy()
        self.steps = min(int(steps), bufs.steps)
        self._blocks = PinnedBlocks(be, bufs, self.at_once, self.steps)
        self.first_slot = be._alloc_slots(self.steps * p)
        _, cons, lower, upper = be._bounds(2 * p, None)
        masks, reg_d, cons, lower, upper = be._upload(
            np.repeat(self.mask[None].astype(np.uint8), 2 * p, axis=0), self.reg, cons, lower,
            upper)
        gs, hs = be._state.scales
        last = levels.levels[-1]
        FIRST_STATE.launch(1, threads, dev, levels.out, last["child_ranges"],
                           last["child_search"], levels.totals, levels.depth, bufs.meta,
                           *bufs.state)
        half_rows = -(-levels.n_rows // 2)
        self.build_grid = max(be._hist_blocks, -(-half_rows // be._state.chunk_cap)) + p + 1
        prev = bufs.step_views[0]
        for b, v in enumerate(bufs.step_views[:self.steps]):
            STEP.launch(1, threads, dev, prev["out"], prev["child_rows"], prev["child_search"],
                        prev["child_totals"], bufs.meta, bufs.pending, *bufs.state,
                        self.max_leaves, self.max_depth, self.batch, v["front"],
                        v["front_rows"], v["front_search"], v["front_totals"], v["out"],
                        bufs.table, bufs.slots, bufs.first, v["child_totals"], bufs.chunk,
                        be._hist_blocks, be._state.chunk_cap)
            args = (be._columns, be._rows2, bufs.table, be.missing_bins, bufs.chunk_left)
            part.COUNT_LEFT[be._bin_dtype].launch(bufs.part_grid, threads, dev, *args)
            part.SCATTER_ROWS[be._bin_dtype].launch(bufs.part_grid, threads, dev, *args,
                                                    bufs.counts)
            part.PLAN_CHILDREN.launch(
                grid(p), threads, dev, bufs.table, bufs.counts, self.first_slot + b * p,
                bufs.first, bufs.chunk, bufs.slots, bufs.build, v["child_search"],
                v["child_totals"], v["counts_out"], v["child_rows"])
            be._launch_build(bufs.build, self.build_grid)
            split.BEST_SPLIT.launch(2 * p * be.n_features, split.SPLIT_THREADS, dev, be._pool,
                                    gs, hs, v["child_search"], v["child_totals"], be.offsets,
                                    masks, reg_d, False, cons, lower, upper,
                                    *be.every_feature, bufs.records, v["out"], bufs.done)
            self._blocks.copy(b)
            prev = v
        if learning_rate is not None:
            self.launch_leaves(reg_d, float(learning_rate), output)

    def launch_leaves(self, reg_d, learning_rate: float, output: int) -> None:
        """The margin update of the tree behind its last step, so that the device runs it while
        the host replays the tree: its leaves and values once the device's grower has
        finished it (`_tree_leaves`; the values to the host behind an event), then margin +
        value into the backend's spare margin column, every row walking the committed splits
        (`_tree_margins_into`), and the next round's gradients from those margins
        (`CUDABackend._gradients_of_spare`). `CUDABackend.update_margin` keeps the spare
        margins only when the grower's leaves and values are these, bit for bit
        (`leaves_match`); a tree the device did not finish (stopped, or more steps than
        launched) adds nothing there and is added as before."""
        be, bufs = self.be, self.bufs
        common = be._k["common"]
        dev, threads = be.device, common.THREADS
        meta = bufs.meta
        _, left, _, rec, _, _, tot, _, _, committed = bufs.state
        spare = be._spare_margin()
        TREE_LEAVES.launch(1, threads, dev, meta, left, tot, committed, reg_d, learning_rate,
                           bufs.values)
        self.leaves_ahead = True
        if bufs.leaf_event is None:  # the simulator: CPU tensors
            bufs.values_host.copy_(bufs.values)
        else:
            bufs.values_host.copy_(bufs.values, non_blocking=True)
            bufs.leaf_event.record(be._torch.cuda.current_stream(dev))
        TREE_MARGINS_INTO[be._bin_dtype].launch(
            common.grid(self.levels.n_rows), threads, dev, be._columns, be.missing_bins, meta,
            rec, left, committed, bufs.values, be._state.margin, output, spare)
        be._gradients_of_spare()

    def finished(self) -> bool:
        """Whether the device's grower finished the tree (its margin update launched ahead
        holds it); waits for the leaves' values."""
        if not self.leaves_ahead:
            return False
        if self.bufs.leaf_event is not None:
            self.bufs.leaf_event.synchronize()
        return int(self.bufs.values_np[-1, 0]) == DONE

    def leaves_match(self, leaves: list[int], values: np.ndarray) -> bool:
        """Whether the margins added ahead (`launch_leaves`) are those of the grower's
        `leaves` (its node ids) with `values` (float64, bit for bit): a finished tree whose
        unsplit nodes are these, each holding its leaf's value."""
        if not self.finished():
            return False
        ids = self._device_ids()
        # grower's id -> device id as an array lookup (ids are distinct both ways)
        device = np.fromiter(ids.keys(), np.int64, len(ids))
        grower = np.fromiter(ids.values(), np.int64, len(ids))
        want = np.asarray(leaves, np.int64)
        if want.size and (want.min() < 0 or want.max() > grower.max()):
            return False
        by_grower = np.full(int(grower.max()) + 1, -1, np.int64)
        by_grower[grower] = device
        at = by_grower[want]
        table = self.bufs.values_np
        if at.size != int(table[-1, 1]) or np.any(at < 0) or np.unique(at).size != at.size \
                or not np.all(table[at, 1] == 1.0):
            return False
        return np.array_equal(table[at, 0].view(np.int64),
                              np.ascontiguousarray(values, np.float64).view(np.int64))

    def _device_ids(self) -> dict[int, int]:
        """Device node id -> grower's id of every node the grower's calls named so far: the
        planned levels' frontiers (node j of the frontier at depth b is the device's
        2**b - 1 + j) and the steps' children."""
        ids = {(1 << b) - 1 + j: i for b, frontier in enumerate(self.levels.frontiers)
               for j, i in enumerate(frontier)}
        ids.update(self.ids)
        return ids

    def begin(self) -> None:
        """The planned levels are stepped: the steps' parents are named from here on."""
        self.ids = self._device_ids()

    def step(self, parents: list[int], lefts: list[int], rights: list[int],
             feature_masks: np.ndarray | None, reg: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray | None, bool] | None:
        """The children's row counts int64 (k, 2) and, for a search (masks given: the
        grower's `split_and_search` of a step's searched parents; None: `apply_splits` of the
        others), their records float64 (2k, REC_WIDTH), as the grower's calls give them, and
        False (more steps may follow); None when the device did not plan this step (the
        host plans it and the rest of the tree). The backend then holds the searched
        children's histograms (`_TreeState.slot`)."""
        bufs = self.bufs
        if self.index >= self.steps:
            return None
        block = self._blocks.block(self.index)
        p = bufs.parents
        info = block[-1]
        status = int(info[INFO_STATUS])
        if status == STOPPED:
            return None
        k, n_searched = int(info[INFO_PARENTS]), int(info[INFO_SEARCHED])
        self._check(status == RUNNING, "a step after the tree is complete")
        search = feature_masks is not None
        if search:
            self._check(not self.searched_done and n_searched > 0, "a search of the step")
            self._check(bool(np.all(np.asarray(feature_masks, bool) == self.mask[None]))
                        and np.array_equal(np.asarray(reg, np.float64), self.reg),
                        "the search's feature masks and regularisation")
            lo, hi = 0, n_searched
        else:
            self._check(self.searched_done or n_searched == 0, "a partition of the step")
            lo, hi = n_searched, k
        self._check(int(info[INFO_FRONT]) == 2 * k and int(info[INFO_CHUNKS]) <= bufs.part_grid
                    and int(info[INFO_BLOCKS]) <= self.build_grid,
                    f"the launch sizes of step {self.index}")
        # the step's rows as Python ints in one conversion each (a NumPy scalar a parent
        # costs more than the rest of the loop)
        device_ids, _, firsts = block[3 * p + lo:3 * p + hi, :3].astype(np.int64).T.tolist()
        ids = self.ids
        self._check([ids.get(d, -1) for d in device_ids] == list(parents),
                    f"the parents of step {self.index}")
        counts = block[2 * p + lo:2 * p + hi, :2].astype(np.int64)
        for q, first in enumerate(firsts):
            ids[first] = lefts[q]
            ids[first + 1] = rights[q]
        if search:
            held = self.be._state.slot
            lefts_slots, rights_slots = block[2 * p + lo:2 * p + hi, 2:4].astype(
                np.int64).T.tolist()
            for q, parent in enumerate(parents):
                held.pop(parent, None)
                held[lefts[q]] = lefts_slots[q]
                held[rights[q]] = rights_slots[q]
        recs = None
        if search:
            recs = block[:2 * n_searched].copy()
        if search and n_searched < k:
            self.searched_done = True
        else:
            self.searched_done = False
            self.index += 1
        return counts, recs, False

    def _check(self, ok: bool, what: str) -> None:
        if not ok:
            self.mismatch(what)

    @staticmethod
    def mismatch(what: str) -> None:
        """A grower's call that the plan cannot answer: a bug (the device runs the grower's
        choice)."""
        raise RuntimeError(f"best-first steps planned on the device do not match the grower's "
                           f"calls ({what}); this is a bug in histboost")
