"""Tree growers: depth-wise (level at a time), loss-guided (best-first) and oblivious (one
shared split per level). One algorithm, written once against `histboost.kernels.backend`.

Every grower keeps the rows of each node as a contiguous range of the backend's row-index array,
builds the histogram of the smaller child and gets the larger one by subtraction from the parent.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..kernels.backend import Backend
from ..params import TrainParams
from ..timer import PhaseTimer
from .split import (
    MIN_SPLIT_GAIN,
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_G,
    REC_LEFT_H,
    REC_WIDTH,
    leaf_weight,
    regularisation_vector,
)
from .tree import Tree


@dataclass
class _Nodes:
    """Growing tree: node fields (see `Tree`) plus the partition range of every node."""

    left_child: list = field(default_factory=list)
    right_child: list = field(default_factory=list)
    split_feature: list = field(default_factory=list)
    split_bin: list = field(default_factory=list)
    threshold: list = field(default_factory=list)
    default_left: list = field(default_factory=list)
    value: list = field(default_factory=list)
    gain: list = field(default_factory=list)
    cover: list = field(default_factory=list)
    count: list = field(default_factory=list)
    start: list = field(default_factory=list)
    end: list = field(default_factory=list)
    depth: list = field(default_factory=list)
    totals: list = field(default_factory=list)  # float64 (3,) G, H, count

    def add(self, start: int, end: int, depth: int, totals: np.ndarray, value: float) -> int:
        self.left_child.append(-1)
        self.right_child.append(-1)
        self.split_feature.append(-1)
        self.split_bin.append(0)
        self.threshold.append(0.0)
        self.default_left.append(0)
        self.value.append(value)
        self.gain.append(0.0)
        self.cover.append(float(totals[1]))
        self.count.append(int(round(totals[2])))
        self.start.append(start)
        self.end.append(end)
        self.depth.append(depth)
        self.totals.append(totals)
        return len(self.start) - 1


@dataclass
class GrownTree:
    """A grown tree and, for each leaf, its range of the backend's row array."""

    tree: Tree
    leaf_starts: np.ndarray
    leaf_ends: np.ndarray
    leaf_values: np.ndarray


class TreeGrower:
    """Grows one tree per call with the policy of `params.grow_policy`.

    backend: the kernel backend holding the binned training matrix.
    cut_values, cut_ptr: the bin mapper's cuts, to store raw thresholds in the tree.
    """

    def __init__(self, backend: Backend, params: TrainParams, cut_values: np.ndarray,
                 cut_ptr: np.ndarray, n_features: int, timer: PhaseTimer | None = None) -> None:
        self.backend = backend
        self.params = params
        self.cut_values = cut_values
        self.cut_ptr = cut_ptr
        self.n_features = n_features
        self.reg = regularisation_vector(params)
        self.timer = timer or PhaseTimer()
        offsets = np.asarray(backend.offsets)  # type: ignore[attr-defined]
        self._feature0_slots = slice(int(offsets[0]), int(offsets[1]))
        self._offsets = offsets

    # -- helpers --
    def _sample_features(self, base: np.ndarray, fraction: float,
                         rng: np.random.Generator) -> np.ndarray:
        if fraction >= 1.0:
            return base
        idx = np.flatnonzero(base)
        keep = max(1, int(fraction * idx.size))
        mask = np.zeros(self.n_features, bool)
        mask[rng.choice(idx, size=keep, replace=False)] = True
        return mask

    def _totals(self, fhists: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Node sums (k, 3) of (G, H, rows): G and H from the first feature's slots (every row
        falls in one of them), the row counts from the partition."""
        gh = fhists[:, self._feature0_slots, :2].sum(axis=1)
        return np.column_stack([gh, np.asarray(counts, np.float64)])

    def _leaf_value(self, totals: np.ndarray) -> float:
        return float(leaf_weight(totals[0], totals[1], self.reg)) * self.params.learning_rate

    def _threshold(self, feature: int, bin_: int) -> float:
        return float(self.cut_values[self.cut_ptr[feature] + bin_])

    # -- entry point --
    def grow(self, gh: np.ndarray, rows: np.ndarray, g_scale: float, h_scale: float,
             class_index: int, rng: np.random.Generator) -> GrownTree:
        """Grow a tree on rows (int32 sorted) with gradient pairs gh (n, 2); quantised pairs
        are scaled back by g_scale / h_scale (powers of two; 1.0 for float gradients)."""
        be = self.backend
        self._scales = (g_scale, h_scale)
        with self.timer("partition"):
            be.begin_tree(gh, rows)
        tree_mask = self._sample_features(np.ones(self.n_features, bool),
                                          self.params.colsample_bytree, rng)
        with self.timer("histogram"):
            root_hist = be.build_histograms(np.array([0]), np.array([rows.shape[0]]))
        totals = self._totals(be.to_float(root_hist, g_scale, h_scale), [rows.shape[0]])[0]
        nodes = _Nodes()
        nodes.add(0, rows.shape[0], 0, totals, self._leaf_value(totals))
        policy = self.params.grow_policy
        if policy == "oblivious":
            return self._grow_oblivious(nodes, root_hist, tree_mask, class_index, rng)
        if policy == "lossguide":
            self._grow_lossguide(nodes, root_hist, tree_mask, rng)
        else:
            self._grow_depthwise(nodes, root_hist, tree_mask, rng)
        if self.params.gamma > 0:
            self._prune(nodes)
        return self._finish(nodes, class_index)

    # -- shared steps --
    def _search(self, hists: np.ndarray, node_ids: list[int], masks: np.ndarray,
                nodes: _Nodes) -> np.ndarray:
        with self.timer("split"):
            fh = self.backend.to_float(hists, *self._scales)
            totals = np.stack([nodes.totals[i] for i in node_ids])
            return self.backend.find_best_splits(fh, totals, masks, self.reg)

    def _apply(self, nodes: _Nodes, parents: list[int], recs: np.ndarray,
               parent_hists: np.ndarray | None) -> tuple[list[int], np.ndarray | None]:
        """Split `parents` by their records; return the children (left, right per parent) and
        their histograms (None when `parent_hists` is None: children that will not split)."""
        be = self.backend
        starts = np.array([nodes.start[i] for i in parents], np.int64)
        ends = np.array([nodes.end[i] for i in parents], np.int64)
        feats = recs[:, REC_FEATURE].astype(np.int32)
        bins = recs[:, REC_BIN].astype(np.int32)
        dleft = recs[:, REC_DEFAULT_LEFT].astype(np.uint8)
        with self.timer("partition"):
            n_left = be.partition(starts, ends, feats, bins, dleft)
        children: list[int] = []
        # Python scalars from here: numpy scalar arithmetic costs several times more per op
        for p, rec, s, e, nl in zip(parents, recs.tolist(), starts.tolist(), ends.tolist(),
                                    n_left.tolist(), strict=True):
            f, b = int(rec[REC_FEATURE]), int(rec[REC_BIN])
            nodes.split_feature[p] = f
            nodes.split_bin[p] = b
            nodes.threshold[p] = self._threshold(f, b)
            nodes.default_left[p] = int(rec[REC_DEFAULT_LEFT])
            nodes.gain[p] = rec[REC_GAIN]
            pt = nodes.totals[p]
            lt = np.array([rec[REC_LEFT_G], rec[REC_LEFT_H], float(nl)])
            rt = pt - lt
            d = nodes.depth[p] + 1
            li = nodes.add(s, s + nl, d, lt, self._leaf_value(lt))
            ri = nodes.add(s + nl, e, d, rt, self._leaf_value(rt))
            nodes.left_child[p] = li
            nodes.right_child[p] = ri
            children += [li, ri]
        if parent_hists is None:
            return children, None
        # build the smaller child of each pair, subtract for the larger
        mid = starts + n_left
        left_small = n_left <= ends - mid
        with self.timer("histogram"):
            small_h = be.build_histograms(np.where(left_small, starts, mid),
                                          np.where(left_small, mid, ends))
            large_h = be.subtract_histograms(parent_hists, small_h)
        if len(parents) == 1:
            pair = (small_h, large_h) if left_small[0] else (large_h, small_h)
            return children, np.concatenate(pair)
        hists = np.empty((2 * len(parents),) + small_h.shape[1:], small_h.dtype)
        pair_idx = 2 * np.arange(len(parents))
        hists[pair_idx + ~left_small] = small_h  # left child at 2j, right at 2j + 1
        hists[pair_idx + left_small] = large_h
        return children, hists

    # -- depth-wise --
    def _grow_depthwise(self, nodes: _Nodes, root_hist: np.ndarray, tree_mask: np.ndarray,
                        rng: np.random.Generator) -> None:
        p = self.params
        frontier, hists = [0], root_hist
        n_leaves = 1
        for depth in range(p.max_depth):
            level_mask = self._sample_features(tree_mask, p.colsample_bylevel, rng)
            masks = np.stack([self._sample_features(level_mask, p.colsample_bynode, rng)
                              for _ in frontier])
            recs = self._search(hists, frontier, masks, nodes)
            ok = np.flatnonzero((recs[:, REC_GAIN] > MIN_SPLIT_GAIN) & (recs[:, REC_FEATURE] >= 0))
            if p.max_leaves > 0:
                room = p.max_leaves - n_leaves
                # best gains first, then node order: a deterministic choice
                ok = ok[np.argsort(-recs[ok, REC_GAIN], kind="stable")][:max(room, 0)]
                ok.sort()
            if ok.size == 0:
                break
            n_leaves += ok.size
            last_level = depth + 1 >= p.max_depth or (p.max_leaves > 0
                                                      and n_leaves >= p.max_leaves)
            parents = [frontier[j] for j in ok]
            frontier, hists = self._apply(nodes, parents, recs[ok],
                                          None if last_level else hists[ok])
            if last_level:
                break

    # -- loss-guided --
    def _grow_lossguide(self, nodes: _Nodes, root_hist: np.ndarray, tree_mask: np.ndarray,
                        rng: np.random.Generator) -> None:
        p = self.params
        max_leaves = p.max_leaves if p.max_leaves > 0 else np.iinfo(np.int64).max
        heap: list[tuple[float, int]] = []
        pending: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def push(ids: list[int], hists: np.ndarray) -> None:
            # ids: the root, or two siblings (one depth)
            if p.max_depth > 0 and nodes.depth[ids[0]] >= p.max_depth:
                return
            masks = np.stack([self._sample_features(
                self._sample_features(tree_mask, p.colsample_bylevel, rng),
                p.colsample_bynode, rng) for _ in ids])
            recs = self._search(hists, ids, masks, nodes)
            for j, i in enumerate(ids):
                if recs[j, REC_GAIN] > MIN_SPLIT_GAIN and recs[j, REC_FEATURE] >= 0:
                    pending[i] = (recs[j], hists[j])
                    heapq.heappush(heap, (-float(recs[j, REC_GAIN]), i))

        push([0], root_hist)
        n_leaves = 1
        while heap and n_leaves < max_leaves:
            _, i = heapq.heappop(heap)
            rec, hist = pending.pop(i)
            n_leaves += 1
            # children need histograms only if they may split later
            may_split = n_leaves < max_leaves and (p.max_depth == 0
                                                   or nodes.depth[i] + 1 < p.max_depth)
            children, hists = self._apply(nodes, [i], rec[None, :],
                                          hist[None] if may_split else None)
            if hists is not None:
                push(children, hists)

    # -- oblivious --
    def _grow_oblivious(self, nodes: _Nodes, root_hist: np.ndarray, tree_mask: np.ndarray,
                        class_index: int, rng: np.random.Generator) -> GrownTree:
        p = self.params
        be = self.backend
        frontier, hists = [0], root_hist
        levels: dict[str, list] = {k: [] for k in ("level_feature", "level_bin",
                                                   "level_threshold", "level_default_left",
                                                   "level_gain")}
        for depth in range(p.max_depth):
            mask = self._sample_features(tree_mask, p.colsample_bylevel, rng)
            with self.timer("split"):
                fh = be.to_float(hists, *self._scales)
                totals = np.stack([nodes.totals[i] for i in frontier])
                table = be.oblivious_gains(fh, totals, mask, self.reg)
            best = int(np.argmax(table))  # first maximum: lowest feature, bin, missing-right
            gain = float(table.flat[best])
            if not np.isfinite(gain) or gain <= max(MIN_SPLIT_GAIN, p.gamma):
                break
            slot, d = divmod(best, 2)
            f = int(np.searchsorted(self._offsets, slot, side="right") - 1)
            b = slot - int(self._offsets[f])
            miss = int(self._offsets[f + 1]) - 1
            recs = np.zeros((len(frontier), REC_WIDTH))
            recs[:, REC_FEATURE] = f
            recs[:, REC_BIN] = b
            recs[:, REC_DEFAULT_LEFT] = d
            left = fh[:, self._offsets[f]:self._offsets[f] + b + 1, :2].sum(axis=1)
            if d:
                left = left + fh[:, miss, :2]
            recs[:, REC_LEFT_G:REC_LEFT_H + 1] = left
            for k, v in (("level_feature", f), ("level_bin", b),
                         ("level_threshold", self._threshold(f, b)),
                         ("level_default_left", d), ("level_gain", gain)):
                levels[k].append(v)
            last = depth + 1 >= p.max_depth
            frontier, hists = self._apply(nodes, frontier, recs, None if last else hists)
        leaf_totals = np.stack([nodes.totals[i] for i in frontier])
        values = np.array([nodes.value[i] for i in frontier])
        levels["leaf_value"] = values
        levels["leaf_cover"] = leaf_totals[:, 1]
        levels["leaf_count"] = np.rint(leaf_totals[:, 2]).astype(np.int64)
        tree = Tree.oblivious(levels, class_index)
        return GrownTree(tree, np.array([nodes.start[i] for i in frontier], np.int64),
                         np.array([nodes.end[i] for i in frontier], np.int64), values)

    # -- pruning and output --
    def _prune(self, nodes: _Nodes) -> None:
        """Bottom-up: a split whose children are leaves and whose gain is below gamma is undone
        (XGBoost's pruning rule)."""
        for i in range(len(nodes.start) - 1, -1, -1):
            l, r = nodes.left_child[i], nodes.right_child[i]
            if l == -1:
                continue
            if (nodes.left_child[l] == -1 and nodes.left_child[r] == -1
                    and nodes.gain[i] < self.params.gamma):
                nodes.left_child[i] = nodes.right_child[i] = -1
                nodes.split_feature[i] = -1
                nodes.gain[i] = 0.0

    def _finish(self, nodes: _Nodes, class_index: int) -> GrownTree:
        # renumber reachable nodes in creation order (pruning can orphan nodes)
        reachable = np.zeros(len(nodes.start), bool)
        reachable[0] = True
        for i in range(len(nodes.start)):
            if reachable[i] and nodes.left_child[i] != -1:
                reachable[nodes.left_child[i]] = reachable[nodes.right_child[i]] = True
        old = np.flatnonzero(reachable)
        new_id = -np.ones(len(nodes.start), np.int64)
        new_id[old] = np.arange(old.size)
        arrays: dict[str, list] = {}
        for name in ("split_feature", "split_bin", "threshold", "default_left", "value", "gain",
                     "cover", "count"):
            col = getattr(nodes, name)
            arrays[name] = [col[i] for i in old]
        arrays["left_child"] = [int(new_id[nodes.left_child[i]]) if nodes.left_child[i] != -1
                                else -1 for i in old]
        arrays["right_child"] = [int(new_id[nodes.right_child[i]])
                                 if nodes.right_child[i] != -1 else -1 for i in old]
        for j, lc in enumerate(arrays["left_child"]):
            if lc == -1:  # leaves (pruned splits included) carry no split fields
                arrays["split_bin"][j] = 0
                arrays["threshold"][j] = 0.0
                arrays["default_left"][j] = 0
        tree = Tree.from_nodes(arrays, class_index)
        leaves = [i for i in old if nodes.left_child[i] == -1]
        return GrownTree(tree, np.array([nodes.start[i] for i in leaves], np.int64),
                         np.array([nodes.end[i] for i in leaves], np.int64),
                         np.array([nodes.value[i] for i in leaves], np.float64))
