"""The first levels of a tree grown on the device ahead of the grower
(`CUDABackend.plan_levels`).

Level by level, the grower reads the level's split records, decides which nodes split and
sends the next step; each step's read is a synchronisation, and the device idles while the
host decides, so a round took the sum of the host's time and the device's. Where the grower's
choice at each level is a fixed rule, every node whose best gain exceeds `MIN_SPLIT_GAIN`
splitting (depth-wise growth without a leaf budget, constraints, column sampling below the
tree or a column source; and the first levels of best-first growth, while a level has no more
such nodes than a step splits), the device can apply that rule itself: after the root's
histogram, every level is launched at once, each planned by a one-block kernel from the
records of the level above (`partition.PLAN_LEVEL`: the partition table, the children's sums
and their histogram blocks), then partitioned, built and searched as a host-planned step is.
The host does not know a level's node count when it launches, so each launch takes enough
blocks for the most nodes a level can have (2**level); blocks past the level's nodes or rows
return at once, and the split search skips padding nodes (slot -1).

Each level's records, row counts and counters go to pinned host memory behind an event. The
grower then replays its own algorithm on them: its calls (`histogram_totals` of the root,
`find_best_splits`, `split_and_search`, `apply_splits`) are answered from the level's block
once its event has passed, while the device works on the levels below, and each answer checks
that the grower chose the nodes the device split, in any order (an error otherwise: the rule
above would have been broken). A level costs the host one wait on work already done instead of
a round trip. After the last planned level the backend holds the children's histograms
(`_TreeState.slot`) and goes on with host-planned steps (best-first growth).

Output blocks, one per depth b (the frontier at depth b), float64 (2M + 1, REC_WIDTH) with
M = 2**levels: rows 0..: the frontier's records (block 0: the root's); rows M..: the row
counts (left, right) and histogram slots (left, right) of level b - 1's splitting nodes
(block 0: the root's (G, H, rows)); last row: level b - 1's counters (`partition.INFO_*`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...tree.split import MIN_SPLIT_GAIN, REC_FEATURE, REC_GAIN, REC_WIDTH

if TYPE_CHECKING:
    from .backend import CUDABackend
    from .best_first import BestFirstBuffers

# most levels planned on the device: buffers and launches are sized for 2**levels nodes
MAX_LEVELS = 10


class LevelBuffers:
    """The device buffers of trees planned ahead for some levels over one row count, their
    per-level views (kept: the launcher caches a view's checked parameters) and the pinned
    host copies of the output blocks, with one event per block."""

    def __init__(self, be: CUDABackend, depth: int, n_rows: int) -> None:
        """depth: the levels planned (the frontier's depth after the last one)."""
        torch = be._torch
        dev = be.device
        common = be._k["common"]
        self.depth = depth
        self.n_rows = n_rows
        m = 1 << depth
        half = max(1, m // 2)
        self.block_rows = 2 * m + 1
        shape = (depth + 1, self.block_rows, REC_WIDTH)
        self.out = torch.zeros(shape, dtype=torch.float64, device=dev)
        on_gpu = dev.type == "cuda"
        self.host = torch.zeros(shape, dtype=torch.float64, pin_memory=on_gpu)
        self.host_np = self.host.numpy()
        self.events = [torch.cuda.Event() if on_gpu else None for _ in range(depth + 1)]
        ranges = torch.zeros((depth + 1, m, 3), dtype=torch.int64, device=dev)
        search = torch.zeros((depth + 1, m, 2), dtype=torch.int64, device=dev)
        totals = torch.zeros((depth + 1, m, 3), dtype=torch.float64, device=dev)
        table = torch.zeros((half, common.TABLE_WIDTH), dtype=torch.int64, device=dev)
        build = torch.zeros((half, common.TABLE_WIDTH), dtype=torch.int64, device=dev)
        slots = torch.zeros(half, dtype=torch.int64, device=dev)
        first = torch.zeros(half, dtype=torch.int64, device=dev)
        counts = torch.zeros((half, 2), dtype=torch.int64, device=dev)
        self.chunk = torch.zeros(1, dtype=torch.int64, device=dev)
        # partition chunks of a level: at most one per CHUNK_ROWS rows, plus one per node
        self.part_grid = -(-n_rows // common.CHUNK_ROWS) + half
        self.chunk_left = torch.zeros(self.part_grid, dtype=torch.int64, device=dev)
        self.host_copies = [(self.host[b], self.out[b]) for b in range(depth + 1)]
        self.levels = []
        for b in range(depth):
            p = 1 << b  # parents at most
            self.levels.append({
                "parents": p,
                "front": self.out[b], "next": self.out[b + 1],
                "counts_out": self.out[b + 1][m:m + p],
                "ranges": ranges[b][:p], "search": search[b][:p], "totals": totals[b][:p],
                "child_ranges": ranges[b + 1][:2 * p], "child_search": search[b + 1][:2 * p],
                "child_totals": totals[b + 1][:2 * p],
                "table": table[:p], "build": build[:p], "slots": slots[:p],
                "first": first[:p], "counts": counts[:p]})
        self.root = {"front": self.out[0], "totals": totals[0], "search": search[0],
                     "ranges": ranges[0], "search1": search[0][:1], "totals1": totals[0][:1]}
        # the margin update of a whole tree planned here (`LevelPlan.launch_leaves`): every
        # frontier node's left child (-1: a leaf) and value, the values also for the host's
        # check
        self.totals = totals
        self.child = torch.zeros((depth + 1, m), dtype=torch.int64, device=dev)
        self.level_values = torch.zeros((depth + 1, m), dtype=torch.float64, device=dev)
        self.level_values_host = torch.zeros((depth + 1, m), dtype=torch.float64,
                                             pin_memory=on_gpu)
        self.level_values_np = self.level_values_host.numpy()
        self.leaf_event = torch.cuda.Event() if on_gpu else None
        self.nbytes = sum(t.numel() * t.element_size() for t in (
            self.out, ranges, search, totals, table, build, slots, first, counts,
            self.chunk_left, self.child, self.level_values))


class PinnedBlocks:
    """A plan's output blocks read on the host: `copy` queues block b's copy from the
    device buffer to its pinned host copy behind the block's event, `block` waits for that
    event once and returns the host block. bufs: `LevelBuffers` or
    `best_first.BestFirstBuffers` (host_copies: (host, device) tensor pairs; events: one CUDA
    event a block, None under the simulator; host_np: the host blocks as NumPy; host, out:
    all host and device blocks). count: the blocks the plan writes (None: all).
    at_once: the blocks are read once the whole plan is done (a tree launched ahead of its
    round, `CUDABackend._launch_next_tree`, is replayed after the host has waited for it):
    one copy of every block behind the last block's event, not a copy and an event a
    block."""

    def __init__(self, be: CUDABackend, bufs: LevelBuffers | BestFirstBuffers,
                 at_once: bool = False, count: int | None = None) -> None:
        self.be = be
        self.bufs = bufs
        self._waited = [False] * len(bufs.host_copies)
        n = len(bufs.host_copies) if count is None else count
        self._last = n - 1 if at_once else -1

    def copy(self, b: int) -> None:
        if self._last >= 0:  # at once: every block behind the last one's event
            if b < self._last:
                return
            host, dev = self.bufs.host[:b + 1], self.bufs.out[:b + 1]
        else:
            host, dev = self.bufs.host_copies[b]
        event = self.bufs.events[b]
        if event is None:  # the simulator: CPU tensors
            host.copy_(dev)
            return
        host.copy_(dev, non_blocking=True)
        event.record(self.be._torch.cuda.current_stream(self.be.device))

    def block(self, b: int) -> np.ndarray:
        """Output block b (host, float64), once the device has written it."""
        if not self._waited[b]:
            event = self.bufs.events[max(b, self._last)]
            if event is not None:
                event.synchronize()
            self._waited[b] = True
        return self.bufs.host_np[b]


class LevelPlan:
    """The first levels of one tree planned ahead: launches them (`launch`), then answers the
    grower's calls level by level (`root_totals`, `root_records`, `step`)."""

    def __init__(self, be: CUDABackend, bufs: LevelBuffers, n_rows: int,
                 search_last: bool, at_once: bool = False) -> None:
        """at_once: the host reads the levels only once they are all done
        (`PinnedBlocks`)."""
        self.be = be
        self.bufs = bufs
        self.n_rows = n_rows
        self.search_last = search_last  # the last level's children are searched too
        self.level = 0  # the next step's parents are at this depth
        self.frontier = [0]  # the grower's ids of the frontier at depth `level`
        self.frontiers = [self.frontier]  # ... at every depth stepped, in the device's order
        self.root_read = False
        self._blocks = PinnedBlocks(be, bufs, at_once)
        self.mask: np.ndarray | None = None
        self.reg: np.ndarray | None = None
        # margins added ahead (`launch_leaves`): the leaves of the levels stepped so far,
        # per level their grower's ids int64 (k,) and (depth, frontier position) int64 (k, 2)
        self.leaves_ahead = False
        self.leaf_ids: list[np.ndarray] = []
        self.leaf_at: list[np.ndarray] = []

    def launch(self, feature_mask: np.ndarray, reg: np.ndarray,
               learning_rate: float | None = None, output: int = 0) -> None:
        """Every planned level on the device's stream (the root's histogram is built); with
        a learning rate, the planned levels are the whole tree and its margin update follows
        them (`launch_leaves`)."""
        be, bufs = self.be, self.bufs
        common, part = be._k["common"], be._k["partition"]
        split = be._k["split"]
        torch = be._torch
        depth = bufs.depth
        # children searched in one level at most; the slots of their built halves
        n_search = (1 << depth) if self.search_last else max(1, (1 << depth) // 2)
        self.mask = np.asarray(feature_mask, bool).copy()
        self.reg = np.asarray(reg, np.float64).copy()
        first_fresh = be._alloc_slots(n_search - 1)  # level b builds into 2**b .. 2**(b+1)-1
        assert first_fresh == 1, "the root's histogram must be the tree's only one"
        _, cons, lower, upper = be._bounds(n_search, None)
        masks, reg_d, cons, lower, upper = be._upload(
            np.repeat(self.mask[None].astype(np.uint8), n_search, axis=0), self.reg, cons,
            lower, upper)
        records = be._buffer("_records", n_search, (be.n_features, REC_WIDTH), torch.float64)
        done = be._buffer("_done", n_search, (), torch.int32, zeros=True)
        gs, hs = be._state.scales
        dev, threads = be.device, common.THREADS
        o0, o1 = int(be.offsets_host[0]), int(be.offsets_host[1])
        r = bufs.root
        part.ROOT_FRONT.launch(1, threads, dev, be._pool, o0, o1, gs, hs, self.n_rows,
                               r["front"], r["totals"], r["search"], r["ranges"])
        n_features = be.n_features

        def search(k, nodes, totals, out):
            split.BEST_SPLIT.launch(k * n_features, split.SPLIT_THREADS, dev, be._pool, gs, hs,
                                    nodes, totals, be.offsets, masks, reg_d, False, cons,
                                    lower, upper, *be.every_feature, records, out, done)

        search(1, r["search1"], r["totals1"], r["front"])
        self._blocks.copy(0)
        half_rows = -(-self.n_rows // 2)
        base_blocks = max(be._hist_blocks, -(-half_rows // be._state.chunk_cap))
        self.build_grids = []
        for b, lv in enumerate(bufs.levels):
            p = lv["parents"]
            part.PLAN_LEVEL.launch(1, threads, dev, lv["front"], lv["ranges"], lv["search"],
                                   lv["totals"], lv["table"], lv["slots"], lv["first"],
                                   lv["child_totals"], bufs.chunk, lv["next"],
                                   be._hist_blocks, be._state.chunk_cap)
            args = (be._columns, be._rows2, lv["table"], be.missing_bins, bufs.chunk_left)
            part.COUNT_LEFT[be._bin_dtype].launch(bufs.part_grid, threads, dev, *args)
            leaves = b + 1 == depth and not self.search_last
            if leaves:  # children no kernel reads the rows of: their counts alone
                part.NODE_LEFTS.launch(common.grid(p), threads, dev, lv["table"],
                                       bufs.chunk_left, lv["counts"])
            else:
                part.SCATTER_ROWS[be._bin_dtype].launch(bufs.part_grid, threads, dev, *args,
                                                        lv["counts"])
            part.PLAN_CHILDREN.launch(
                common.grid(p), threads, dev, lv["table"], lv["counts"], p, lv["first"],
                bufs.chunk, lv["slots"], lv["build"], lv["child_search"], lv["child_totals"],
                lv["counts_out"], lv["child_ranges"])
            # blocks of the smaller children: sum of ceil(half / chunk) <= halves / chunk +
            # p, and chunk >= halves / _hist_blocks unless capped (`hist_chunk_rows`)
            self.build_grids.append(base_blocks + p + 1)
            if not leaves:
                be._launch_build(lv["build"], self.build_grids[-1])
                search(2 * p, lv["child_search"], lv["child_totals"], lv["next"])
            self._blocks.copy(b + 1)
        if learning_rate is not None:
            self.launch_leaves(reg_d, float(learning_rate), output)

    def launch_leaves(self, reg_d, learning_rate: float, output: int) -> None:
        """The margin update of a whole tree planned on the device, launched behind its
        levels so that the device runs it while the host finishes the tree: the leaves of
        every depth (`partition.PLAN_LEAVES`: nodes that do not split, all of the last
        level) with their values, then margin + value into the backend's spare margin
        column, every row walking the levels' splits to its leaf (`partition.LEAF_VALUES_INTO`).
        The values go to the host behind an event recorded before that launch, so that the
        host's check does not wait for the margins; `CUDABackend.update_margin` keeps the
        spare margins only when the grower's leaves and values are these, bit for bit
        (pruning or refreshed leaves are added as before)."""
        be, bufs = self.be, self.bufs
        common, part = be._k["common"], be._k["partition"]
        dev, threads = be.device, common.THREADS
        spare = be._spare_margin()
        part.PLAN_LEAVES.launch(1, threads, dev, bufs.out, bufs.totals, reg_d, learning_rate,
                                bufs.child, bufs.level_values)
        self.leaves_ahead = True
        if bufs.leaf_event is None:  # the simulator: CPU tensors
            bufs.level_values_host.copy_(bufs.level_values)
        else:
            bufs.level_values_host.copy_(bufs.level_values, non_blocking=True)
            bufs.leaf_event.record(be._torch.cuda.current_stream(dev))
        part.LEAF_VALUES_INTO[be._bin_dtype].launch(
            common.grid(self.n_rows), threads, dev, be._columns, be.missing_bins, bufs.out,
            bufs.child, bufs.level_values, be._state.margin, output, spare)
        be._gradients_of_spare()

    def leaves_match(self, leaves: list[int], values: np.ndarray) -> bool:
        """Whether the margins added ahead (`launch_leaves`) are those of the grower's
        `leaves` (its node ids) with `values` (float64, bit for bit): the same leaves (the
        nodes that did not split at the levels stepped, and the frontier below them) with
        the same values."""
        if not self.leaves_ahead:
            return False
        if self.bufs.leaf_event is not None:
            self.bufs.leaf_event.synchronize()
        if not self.leaf_ids and leaves == self.frontier:  # a full tree, leaves in order
            ahead = self.bufs.level_values_np[self.level, :len(leaves)]
        else:
            k = len(self.frontier)
            ids = np.concatenate([*self.leaf_ids, np.asarray(self.frontier, np.int64)])
            at = np.concatenate([*self.leaf_at, np.stack(
                [np.full(k, self.level, np.int64), np.arange(k, dtype=np.int64)], axis=1)])
            want = np.asarray(leaves, np.int64)
            order = np.argsort(ids)
            known = ids[order]  # distinct: a node is a leaf at one depth
            if want.size != ids.size or not np.array_equal(np.sort(want), known):
                return False
            at = at[order[np.searchsorted(known, want)]]
            ahead = self.bufs.level_values_np[at[:, 0], at[:, 1]]
        return np.array_equal(ahead.view(np.int64),
                              np.ascontiguousarray(values, np.float64).view(np.int64))

    def root_totals(self) -> np.ndarray:
        """float64 (1, 2): the root's (G, H), as `histogram_totals([0])` gives them."""
        m = 1 << self.bufs.depth
        return self._blocks.block(0)[m:m + 1, :2].copy()

    def root_records(self, totals: np.ndarray, feature_masks: np.ndarray,
                     reg: np.ndarray) -> np.ndarray:
        """The root's record, as `find_best_splits([0], ...)` gives it (the arguments
        checked against the plan's)."""
        m = 1 << self.bufs.depth
        block = self._blocks.block(0)
        self._check(np.array_equal(np.asarray(totals, np.float64).reshape(-1),
                                   block[m, :3]), "the root's totals")
        self._check_search(feature_masks, reg)
        self.root_read = True
        return block[:1].copy()

    def step(self, parents: list[int], lefts: list[int], rights: list[int],
             feature_masks: np.ndarray | None, reg: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray | None, bool]:
        """The level's children's row counts int64 (k, 2) and, when searched (masks given),
        their records float64 (2k, REC_WIDTH), as `split_and_search` / `apply_splits` give
        them for the grower's parents (checked to be the ones the device split, in any
        order), and whether this was the last planned level. After a last level whose
        children were searched, the backend holds their histograms (`_TreeState.slot`)."""
        from .partition import INFO_BLOCKS, INFO_CHUNKS, INFO_FRONT

        b = self.level
        depth = self.bufs.depth
        self._check(b < depth, "a level below the planned ones")
        if feature_masks is not None:
            self._check(b + 1 < depth or self.search_last,
                        "a search at the plan's last level, planned without one")
            self._check_search(feature_masks, reg)
        front = self._blocks.block(b)
        recs = front[:len(self.frontier)]
        ok = np.flatnonzero((recs[:, REC_GAIN] > MIN_SPLIT_GAIN) & (recs[:, REC_FEATURE] >= 0))
        # the device's p-th splitting node is the grower's parents[where[p]]
        at = {node: q for q, node in enumerate(parents)}
        where = [at.get(self.frontier[j], -1) for j in ok.tolist()]
        k = len(parents)
        self._check(len(where) == k and sorted(where) == list(range(k)),
                    f"the splitting nodes of level {b}")
        nxt = self._blocks.block(b + 1)
        info = nxt[-1]
        self._check(int(info[INFO_FRONT]) == 2 * k, f"the node count of level {b + 1}")
        self._check(int(info[INFO_CHUNKS]) <= self.bufs.part_grid
                    and int(info[INFO_BLOCKS]) <= self.build_grids[b],
                    f"the launch sizes of level {b}")
        m = 1 << depth
        order = np.empty(k, np.int64)  # grower's q -> device's p
        order[where] = np.arange(k)
        counts = nxt[m + order, :2].astype(np.int64)
        child_recs = None
        if feature_masks is not None:
            child_recs = nxt[np.stack([2 * order, 2 * order + 1], axis=1).reshape(-1)]
        if self.leaves_ahead and len(ok) < len(self.frontier):
            leaf = np.ones(len(self.frontier), bool)  # the frontier's nodes not split
            leaf[ok] = False
            js = np.flatnonzero(leaf)
            self.leaf_ids.append(np.asarray(self.frontier, np.int64)[js])
            self.leaf_at.append(np.stack([np.full(js.size, b, np.int64), js], axis=1))
        self.frontier = [c for q in where for c in (lefts[q], rights[q])]
        self.frontiers.append(self.frontier)
        self.level = b + 1
        last = self.level == depth
        if last and feature_masks is not None:
            slots = nxt[m + order, 2:4].astype(np.int64).tolist()
            self.be._state.slot.clear()  # the planned levels' other histograms are not needed
            for q, (sl, sr) in enumerate(slots):
                self.be._state.slot[lefts[q]] = sl
                self.be._state.slot[rights[q]] = sr
        return counts, child_recs, last

    def _check_search(self, feature_masks: np.ndarray, reg: np.ndarray) -> None:
        self._check(bool(np.all(np.asarray(feature_masks, bool) == self.mask[None]))
                    and np.array_equal(np.asarray(reg, np.float64), self.reg),
                    "the search's feature masks and regularisation")

    def _check(self, ok: bool, what: str) -> None:
        if not ok:
            self.mismatch(what)

    @staticmethod
    def mismatch(what: str) -> None:
        """A grower's call that the plan cannot answer: a bug (the grower asks for a plan
        only where its choices follow the plan's rule)."""
        raise RuntimeError(f"levels planned on the device do not match the grower's calls "
                           f"({what}); this is a bug in histboost")
