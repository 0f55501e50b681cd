"""Tree growers: depth-wise (level at a time), loss-guided (best-first) and oblivious (one
shared split per level). One algorithm, written once against `histboost.kernels.backend`.

The grower names nodes by id and keeps their host-side records (totals, depth, split); the
backend keeps their rows and histograms. Of each pair of children, the one with fewer rows
(row counts are reduced across workers, so every worker picks the same child) gets its
histogram built from its rows and the other one by subtraction from the parent.

A `ColumnSource` (categorical features, `histboost.categorical`) may change columns of the
backend's matrix while a tree grows: after each split it may add columns (feature combinations)
through `Backend.replace_columns`, and it says which features a node may split on.

Best-first (loss-guided) growth splits leaves ahead of their turn, several in one backend step
(`Backend.split_and_search`), and replays the exact best-first order on the host: a split
record depends only on the node's rows and path, never on when the node is split, so the tree
is the one that splitting one leaf a step grows (`_grow_lossguide`).

Where the choices of a tree's first levels follow one rule (every node of positive gain splits:
depth-wise trees without a leaf budget or constraints, the first levels of best-first growth),
the grower tells the backend so (`Backend.plan_levels`); a device backend then runs those levels
without waiting for the host and answers the grower's calls for them from what it ran. The
best-first steps after those levels follow `_grow_lossguide`'s rule, which the hint names too
(leaf budget, depth limit, batch): a device backend may run them ahead as well.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Protocol

import numpy as np

from ..data.binning import BinMapper
from ..kernels.backend import Backend
from ..params import TrainParams
from ..timer import PhaseTimer
from .constraints import TreeConstraints
from .quantize import Quantisation
from .split import (
    MIN_SPLIT_GAIN,
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_G,
    REC_LEFT_H,
    REC_WIDTH,
    leaf_values,
    leaf_weight,
    regularisation_vector,
)
from .tree import Tree

# Best-first growth: at most this many leaves split in one backend step (one parallel region
# of partitions, histograms and searches instead of one per leaf). The leaves beyond the best
# one are split ahead of their turn and undone when the tree is complete without them: more
# per step means fewer steps but more undone work (`_grow_lossguide`).
BEST_FIRST_BATCH = 32


class _Nodes:
    """Growing tree: per node, the fields of `Tree`, its depth and its totals.

    The fields are Python lists: nodes are added a step at a time and read or written one at
    a time, which lists do several times faster than numpy arrays. The totals (G, H, row
    count) are rows of a float64 array: searches read them for many nodes in one indexing.
    """

    FIELDS = ("left_child", "right_child", "split_feature", "split_bin", "threshold",
              "default_left", "value", "gain", "cover", "count", "depth")

    def __init__(self, root_totals: np.ndarray, root_value: float) -> None:
        """A tree of one node, the root: totals float64 (3,) G, H, row count."""
        self.left_child: list[int] = [-1]
        self.right_child: list[int] = [-1]
        self.split_feature: list[int] = [-1]
        self.split_bin: list[int] = [0]
        self.threshold: list[float] = [0.0]
        self.default_left: list[int] = [0]
        self.value: list[float] = [root_value]
        self.gain: list[float] = [0.0]
        self.cover: list[float] = [float(root_totals[1])]
        self.count: list[int] = [int(round(root_totals[2]))]
        self.depth: list[int] = [0]
        # rows beyond len(depth) are spare room: the array doubles when full
        self._totals = np.zeros((64, 3))
        self._totals[0] = root_totals

    @property
    def totals(self) -> np.ndarray:
        """float64 (n_nodes, 3): G, H, row count of every node (a view)."""
        return self._totals[:len(self.depth)]

    def add_children(self, depths: list[int], sums: np.ndarray, values: list[float]) -> int:
        """Add a left and a right child for each of k parents, numbered consecutively (left
        then right, parent by parent): depths (k,) of the children, sums float64 (2k, 2) their
        G and H, values (2k,) their leaf values. Their row counts are 0 until `set_counts`.
        Returns the first child's id."""
        first = len(self.depth)
        n = sums.shape[0]
        if first + n > self._totals.shape[0]:
            grown = np.zeros((max(2 * self._totals.shape[0], first + n), 3))
            grown[:first] = self._totals[:first]
            self._totals = grown
        self._totals[first:first + n, :2] = sums
        self._totals[first:first + n, 2] = 0.0
        self.left_child += [-1] * n
        self.right_child += [-1] * n
        self.split_feature += [-1] * n
        self.split_bin += [0] * n
        self.threshold += [0.0] * n
        self.default_left += [0] * n
        self.value += values
        self.gain += [0.0] * n
        self.cover += sums[:, 1].tolist()
        self.count += [0] * n
        self.depth += [d for d in depths for _ in range(2)]
        return first

    def set_counts(self, first: int, counts: np.ndarray) -> None:
        """Row counts int64 (k, 2) of the children numbered from `first` (left then right,
        parent by parent, as `add_children` numbers them)."""
        flat = counts.reshape(-1)
        self._totals[first:first + flat.size, 2] = flat
        self.count[first:first + flat.size] = flat.tolist()

    def take(self, order: list[int]) -> _Nodes:
        """The nodes `order` (ids into this tree) as a new tree, node order[q] at q; child
        links are copied as they are (the caller renumbers them)."""
        out = _Nodes.__new__(_Nodes)
        pick = itemgetter(*order)  # a tuple of the items (a bare item for one id)
        for name in self.FIELDS:
            items = pick(getattr(self, name))
            setattr(out, name, list(items) if len(order) > 1 else [items])
        out._totals = self._totals[order]
        return out


class ColumnSource(Protocol):
    """Columns that appear while a tree grows (see the module docstring)."""

    def tree_features(self) -> np.ndarray | None:
        """bool (n_features,): the features a new tree may split on (None: all)."""

    def after_splits(self, features: list[int]) -> np.ndarray | None:
        """Called after splits on `features` once their children hold histograms: the new
        bool (n_features,) mask of features nodes may split on, or None when unchanged.
        Columns it adds have their histograms built for every node holding one."""


@dataclass
class GrownTree:
    """A grown tree and, per leaf in node order, the backend's nodes holding its rows (one
    node, or several where the backend split the rows further: a split undone by pruning or
    made ahead of best-first order and not kept) and its value (float64 (n_leaves,))."""

    tree: Tree
    leaves: list[list[int]]
    leaf_values: np.ndarray

    def margin_leaves(self) -> tuple[list[int], np.ndarray]:
        """(backend nodes, float64 values): every node holding a leaf's rows with the leaf's
        value, the arguments of `Backend.update_margin`."""
        nodes = [i for held in self.leaves for i in held]
        values = np.repeat(np.asarray(self.leaf_values, np.float64),
                           [len(held) for held in self.leaves])
        return nodes, values


class TreeGrower:
    """Grows one tree per call with the policy of `params.grow_policy`.

    backend: the kernel backend holding the binned training matrix.
    mapper: the training data's cuts: raw thresholds for the tree, and the slot layout
    (`BinMapper.bin_offsets`) of the oblivious gain table.
    """

    def __init__(self, backend: Backend, params: TrainParams, mapper: BinMapper,
                 timer: PhaseTimer | None = None,
                 constraints: TreeConstraints | None = None,
                 columns: ColumnSource | None = None) -> None:
        self.backend = backend
        self.columns = columns
        self._active: np.ndarray | None = None  # features nodes may split on (None: all)
        self.params = params
        # read at every split: a column source may rewrite a column's cut values when it
        # replaces the column's bins
        self.cut_values = mapper.cut_values
        self.cut_ptr = mapper.cut_ptr
        self.n_features = mapper.n_features
        self._offsets = mapper.bin_offsets
        self.reg = regularisation_vector(params)
        # leaf values in Python floats: the split kernels' `leaf_weight` run by the
        # interpreter (the same IEEE operations), with no kernel to compile for it
        self._reg_floats = [float(v) for v in self.reg]
        self._leaf_weight = leaf_weight.py_func
        self.timer = timer or PhaseTimer()
        # leaves split in one step of best-first growth (1: one leaf a step, no split ahead);
        # a backend whose per-node work dwarfs a step's fixed cost names a smaller batch
        self.best_first_batch = int(getattr(backend, "best_first_batch", BEST_FIRST_BATCH))
        self.constraints = constraints  # monotone / interaction constraints (constraints.py)
        # (base mask, its rows): `_node_masks` without column sampling
        self._base_rows: tuple[np.ndarray, np.ndarray] | None = None
        self.feature_weights = None  # weighted column sampling (params.feature_weights)
        if params.feature_weights:
            if len(params.feature_weights) != self.n_features:
                raise ValueError(f"feature_weights has {len(params.feature_weights)} entries "
                                 f"for {self.n_features} features")
            self.feature_weights = np.asarray(params.feature_weights, np.float64)

    def set_learning_rate(self, learning_rate: float) -> None:
        """Scale the values of the trees grown from now on by `learning_rate` (a scheduler
        changing it between rounds)."""
        self.params = replace(self.params, learning_rate=learning_rate)
        if self.constraints is not None:
            self.constraints.lr = learning_rate

    # -- helpers --
    def _sample_features(self, base: np.ndarray, fraction: float,
                         rng: np.random.Generator) -> np.ndarray:
        if fraction >= 1.0:
            return base
        idx = np.flatnonzero(base)
        keep = max(1, int(fraction * idx.size))
        mask = np.zeros(self.n_features, bool)
        if self.feature_weights is not None:
            # weighted sampling without replacement (Efraimidis-Spirakis keys u^(1/w), as
            # XGBoost's): a zero weight is drawn only when the others do not fill `keep`
            with np.errstate(divide="ignore"):
                keys = rng.random(idx.size) ** (1.0 / self.feature_weights[idx])
            mask[idx[np.argsort(-keys, kind="stable")[:keep]]] = True
            return mask
        mask[rng.choice(idx, size=keep, replace=False)] = True
        return mask

    def _leaf_value(self, totals: np.ndarray) -> float:
        return (self._leaf_weight(float(totals[0]), float(totals[1]), self._reg_floats)
                * self.params.learning_rate)

    def _threshold(self, feature: int, bin_: int) -> float:
        return float(self.cut_values[self.cut_ptr[feature] + bin_])

    # -- entry point --
    def grow(self, output: int, rows: np.ndarray | None, quantisation: Quantisation | None,
             rng: np.random.Generator) -> GrownTree:
        """Grow a tree of output `output` on rows (int32 sorted; None: all rows) from the
        backend's gradient pairs, quantised if `quantisation` is given."""
        be = self.backend
        with self.timer("partition"):
            count = be.begin_tree(output, rows, quantisation)
        tree_mask = self._sample_features(np.ones(self.n_features, bool),
                                          self.params.colsample_bytree, rng)
        with self.timer("histogram"):
            be.build_histograms([0])
            plan = self._planned_levels()
            if plan is not None:
                p = self.params
                # best-first growth: the steps after the levels follow `_grow_lossguide`'s
                # rule, which a device backend may run ahead too
                best_first = ((p.max_leaves, p.max_depth, self.best_first_batch)
                              if p.grow_policy == "lossguide" else None)
                # the whole tree (the levels, or the levels and the best-first steps), its
                # leaves unpruned: the margin update may start ahead
                whole = (not plan[1] or best_first is not None) and p.gamma <= 0
                be.plan_levels(plan[0], tree_mask, self.reg, plan[1],
                               p.learning_rate if whole else None, best_first=best_first)
            gh = be.histogram_totals([0])[0]
        totals = np.array([gh[0], gh[1], float(count)])
        if self.columns is not None:
            self._active = self.columns.tree_features()
        nodes = _Nodes(totals, self._leaf_value(totals))
        if self.constraints is not None:
            self.constraints.start()
        policy = self.params.grow_policy
        if policy == "oblivious":
            return self._grow_oblivious(nodes, tree_mask, output, rng)
        if policy == "lossguide":
            nodes, held = self._grow_lossguide(nodes, tree_mask, rng)
        else:
            self._grow_depthwise(nodes, tree_mask, rng)
            held = [[i] for i in range(len(nodes.depth))]
        if self.params.gamma > 0:
            self._prune(nodes, held)
        return self._finish(nodes, output, held)

    def _planned_levels(self) -> tuple[int, bool] | None:
        """(levels, whether the last level's children are searched) of the tree's first
        levels whose choices follow one rule a backend can apply ahead
        (`Backend.plan_levels`: every node whose best gain exceeds MIN_SPLIT_GAIN splits, all
        searched with the tree's mask, no constraint); None when there are none. Depth-wise
        growth without a leaf budget: the whole tree. Best-first growth: while a level has
        no more nodes than a step splits (`best_first_batch`), every leaf of positive gain is
        split in the same step (the leaves known are the level's), the first
        `best_first_batch.bit_length()` levels, fewer where the leaf budget or max_depth
        would stop the last of them (its children must all be searched: fewer than
        max_leaves leaves after it, its depth below max_depth - 1)."""
        p = self.params
        if (self.constraints is not None or self.columns is not None
                or p.colsample_bylevel < 1.0 or p.colsample_bynode < 1.0):
            return None
        if p.grow_policy == "depthwise":
            if p.max_depth > 0 and (p.max_leaves <= 0 or p.max_leaves >= 2 ** p.max_depth):
                return p.max_depth, False
        elif p.grow_policy == "lossguide" and self.best_first_batch > 1:
            levels = int(self.best_first_batch).bit_length()
            if p.max_leaves > 0:  # 2**levels leaves after the last level, fewer than this
                levels = min(levels, (p.max_leaves - 1).bit_length() - 1)
            if p.max_depth > 0:
                levels = min(levels, p.max_depth - 1)
            if levels > 0:
                return levels, True
        return None

    # -- shared steps --
    def _search(self, node_ids: list[int], masks: np.ndarray, nodes: _Nodes) -> np.ndarray:
        if self._active is not None:
            masks = masks & self._active
        with self.timer("split"):
            totals = nodes.totals[node_ids]
            if self.constraints is None:
                return self.backend.find_best_splits(node_ids, totals, masks, self.reg)
            return self.backend.find_best_splits(
                node_ids, totals, self.constraints.masks(node_ids, masks), self.reg,
                monotone=self.constraints.search_args(node_ids))

    def _split_nodes(self, nodes: _Nodes, parents: list[int], recs: np.ndarray
                     ) -> tuple[list[int], list[int], np.ndarray]:
        """Record the splits of `parents` (records recs, float64 (k, REC_WIDTH)) and add their
        children, left and right per parent, numbered consecutively, with their gradient sums;
        their row counts come from the partition (`_set_counts`). Returns (lefts, rights, the
        children's (G, H) float64 (2k, 2) in the order lefts[0], rights[0], lefts[1], ...)."""
        k = len(parents)
        # the children's sums for all parents at once: left from the record, right = parent's
        # minus left (the same float64 subtraction as one parent at a time)
        sums = np.empty((k, 2, 2))
        sums[:, 0] = recs[:, REC_LEFT_G:REC_LEFT_H + 1]
        sums[:, 1] = nodes.totals[parents, :2] - sums[:, 0]
        sums = sums.reshape(2 * k, 2)
        features = recs[:, REC_FEATURE].astype(np.int64)
        bins = recs[:, REC_BIN].astype(np.int64)
        thresholds = self.cut_values[self.cut_ptr[features] + bins].tolist()
        depths = [nodes.depth[p] + 1 for p in parents]
        if self.constraints is None:
            # `_leaf_value` of every child in one compiled call: a Python call per child was
            # a good part of this function's cost (the same float64 operations)
            values = leaf_values(sums, self.reg, float(self.params.learning_rate)).tolist()
            first = nodes.add_children(depths, sums, values)
        else:
            first = nodes.add_children(depths, sums, [0.0] * (2 * k))
            for j, (p, f) in enumerate(zip(parents, features.tolist(), strict=True)):
                li = first + 2 * j
                nodes.value[li], nodes.value[li + 1] = self.constraints.split(
                    p, f, li, li + 1, sums[2 * j], sums[2 * j + 1])
        # Python scalars from here: numpy scalar reads cost several times more per item
        for j, (p, f, b, t, d, g) in enumerate(zip(
                parents, features.tolist(), bins.tolist(), thresholds,
                recs[:, REC_DEFAULT_LEFT].astype(np.int64).tolist(),
                recs[:, REC_GAIN].tolist(), strict=True)):
            nodes.split_feature[p] = f
            nodes.split_bin[p] = b
            nodes.threshold[p] = t
            nodes.default_left[p] = d
            nodes.gain[p] = g
            nodes.left_child[p] = first + 2 * j
            nodes.right_child[p] = first + 2 * j + 1
        lefts = list(range(first, first + 2 * k, 2))
        rights = [i + 1 for i in lefts]
        return lefts, rights, sums

    @staticmethod
    def _set_counts(nodes: _Nodes, lefts: list[int], counts: np.ndarray) -> None:
        """The children's row counts, int64 (k, 2), into their totals (children numbered
        consecutively from lefts[0], as `_split_nodes` adds them)."""
        if lefts:
            nodes.set_counts(lefts[0], counts)

    def _apply(self, nodes: _Nodes, parents: list[int], recs: np.ndarray,
               histograms: bool) -> list[int]:
        """Split `parents` by their records; return the children (left, right per parent).
        With `histograms`, the children's histograms are made (children that may split)."""
        be = self.backend
        lefts, rights, sums = self._split_nodes(nodes, parents, recs)
        if histograms:
            # one step: a distributed backend reduces the children's counts with their
            # histograms
            counts = be.split_and_build(parents, lefts, rights, recs, sums, timer=self.timer)
        else:
            with self.timer("partition"):
                counts = be.apply_splits(parents, lefts, rights, recs)
        self._set_counts(nodes, lefts, counts)
        if histograms:
            if self.columns is not None:
                with self.timer("histogram"):
                    # an oblivious level: one split shared by its nodes
                    active = self.columns.after_splits(sorted({
                        int(r[REC_FEATURE]) for r in recs}))
                if active is not None:
                    self._active = active
        return [i for pair in zip(lefts, rights, strict=True) for i in pair]

    def _apply_and_search(self, nodes: _Nodes, parents: list[int], recs: np.ndarray,
                          masks: np.ndarray) -> tuple[list[int], np.ndarray]:
        """Split `parents` by their records and search their children (left, right per
        parent; column-sampling masks (2k, F)); returns the children and their records. One
        backend step (`Backend.split_and_search`), unless a column source changes columns
        between the children's histograms and their search."""
        if self.columns is not None:
            children = self._apply(nodes, parents, recs, histograms=True)
            return children, self._search(children, masks, nodes)
        lefts, rights, sums = self._split_nodes(nodes, parents, recs)
        children = [i for pair in zip(lefts, rights, strict=True) for i in pair]
        monotone = None
        if self.constraints is not None:
            masks = self.constraints.masks(children, masks)
            monotone = self.constraints.search_args(children)
        counts, child_recs = self.backend.split_and_search(
            parents, lefts, rights, recs, sums, masks, self.reg, monotone, timer=self.timer)
        self._set_counts(nodes, lefts, counts)
        return children, child_recs

    def _node_masks(self, base: np.ndarray, k: int, rng: np.random.Generator,
                    per_node_level: bool) -> np.ndarray:
        """Column-sampling masks bool (k, F) of k nodes: by level (one level mask for all of
        them, or one per node when `per_node_level`: best-first growth has no levels), then
        by node."""
        p = self.params
        if p.colsample_bylevel >= 1.0 and p.colsample_bynode >= 1.0:
            # no sampling draws from `rng`: every node gets the base mask, in rows kept for
            # the tree's later steps (nothing writes into masks; a copy a step of k x F
            # bools cost best-first growth on wide data more than the rest of the step's
            # mask work)
            held = self._base_rows
            if held is None or held[0] is not base or held[1].shape[0] < k:
                held = self._base_rows = (base, np.repeat(base[None], k, axis=0))
            return held[1][:k]
        if per_node_level:
            return np.stack([self._sample_features(
                self._sample_features(base, p.colsample_bylevel, rng),
                p.colsample_bynode, rng) for _ in range(k)])
        level_mask = self._sample_features(base, p.colsample_bylevel, rng)
        return np.stack([self._sample_features(level_mask, p.colsample_bynode, rng)
                         for _ in range(k)])

    # -- depth-wise --
    def _grow_depthwise(self, nodes: _Nodes, tree_mask: np.ndarray,
                        rng: np.random.Generator) -> None:
        p = self.params
        if p.max_depth <= 0:
            return
        frontier = [0]
        n_leaves = 1
        # each level's masks are drawn before its search, which for the levels below the root
        # comes with the level above's partition (one backend step)
        recs = self._search(frontier, self._node_masks(tree_mask, 1, rng, False), nodes)
        for depth in range(p.max_depth):
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
            if last_level:
                self._apply(nodes, parents, recs[ok], histograms=False)
                break
            masks = self._node_masks(tree_mask, 2 * len(parents), rng, False)
            frontier, recs = self._apply_and_search(nodes, parents, recs[ok], masks)

    # -- loss-guided --
    def _grow_lossguide(self, nodes: _Nodes, tree_mask: np.ndarray, rng: np.random.Generator
                        ) -> tuple[_Nodes, list[list[int]]]:
        """Best-first growth: the leaf of the highest gain is split next (ties: the lower node
        id), until max_leaves leaves or no leaf has a positive gain.

        The splits are made ahead of their turn, several leaves in one backend step, and
        committed in exact best-first order on the host. A split record depends only on the
        node's rows and path (constraints included), not on when the node is split, so
        splitting ahead changes no record. The queue of the committed tree's leaves pops
        nodes in exact order while the popped node is already split ("committed"); when it
        is not, the queue is played forward with what is known (children of leaves not yet
        split taken as never splitting), and the leaves not yet split that it pops are split
        in one step, up to `best_first_batch` of them whose children are searched. Children
        found later only add nodes to that order, so a leaf is committed no earlier than
        played forward: one whose played-forward commit fills the tree is committed last or
        never, and its children need no search. Splits never committed are undone at the
        end: such a node is a leaf of the tree, holding the rows of the backend's leaves
        below it. Node ids follow the commit order, as they do when one leaf is split a
        step. One leaf a step where the children's column masks come from the random stream
        in split order (colsample_bylevel / colsample_bynode) or a column source changes
        columns after each split (docs/growth.md).

        Returns the tree's nodes in best-first order and, per node, the backend nodes holding
        its rows (meaningful for leaves)."""
        p = self.params
        max_leaves = p.max_leaves if p.max_leaves > 0 else np.iinfo(np.int64).max
        one_a_step = (self.columns is not None or p.colsample_bylevel < 1.0
                      or p.colsample_bynode < 1.0)
        batch = 1 if one_a_step else max(1, self.best_first_batch)
        # unsplit searched leaves with a positive gain: their records as lists of REC_WIDTH
        # floats (a step stacks up to `best_first_batch` of them, cheaper from lists)
        records: dict[int, list[float]] = {}
        gains: dict[int, float] = {}  # every searched node with a positive gain
        committed: list[int] = []
        # the best-first queue: (-gain, id in commit numbering, backend id) of the leaves of
        # the committed tree; the commit numbering orders ties as one split a step does
        queue: list[tuple[float, int, int]] = []

        def found(ids: list[int], recs: np.ndarray) -> None:
            # a step's few records read as Python floats (one `tolist`): NumPy masks cost
            # more than the test on so few rows
            for i, rec in zip(ids, recs.tolist(), strict=True):
                if rec[REC_GAIN] > MIN_SPLIT_GAIN and rec[REC_FEATURE] >= 0:
                    records[i] = rec
                    gains[i] = rec[REC_GAIN]

        # bound once: the play-forward loop below runs several times per split; the node
        # lists grow in place, so these stay the tree's
        left_child, depth = nodes.left_child, nodes.depth
        heappush, heappop = heapq.heappush, heapq.heappop

        def push(heap: list, i: int, n_commits: int) -> None:
            """The children of the n_commits-th commit, node i, into `heap`."""
            # unrolled over the two children: played forward, this runs for every leaf
            # popped, several times per split
            number = 2 * n_commits - 1
            left = left_child[i]
            right = left + 1  # children are numbered consecutively (`_Nodes.add_children`)
            if left in gains:
                heappush(heap, (-gains[left], number, left))
            if right in gains:
                heappush(heap, (-gains[right], number + 1, right))

        found([0], self._search([0], self._node_masks(tree_mask, 1, rng, True), nodes))
        if 0 in gains:
            queue.append((-gains[0], 0, 0))
        n_leaves = 1
        while queue and n_leaves < max_leaves:
            if left_child[queue[0][2]] == -1:
                # play the queue forward: the leaves to split, and whether their children
                # may split after them
                parents: list[int] = []
                search: list[bool] = []
                ahead = list(queue)
                leaves, commits, searched = n_leaves, len(committed), 0
                # leaves whose children are not searched (max_depth, or the last split) cost
                # a partition only: they do not count against the batch
                while ahead and leaves < max_leaves and (
                        searched < batch if batch > 1 else not parents):
                    j = heappop(ahead)[2]
                    leaves += 1
                    commits += 1
                    if left_child[j] == -1:
                        parents.append(j)
                        search.append(leaves < max_leaves and (
                            p.max_depth == 0 or depth[j] + 1 < p.max_depth))
                        searched += search[-1]
                    else:
                        push(ahead, j, commits)
                self._split_ahead(nodes, parents, search, records, found, tree_mask, rng)
            i = heappop(queue)[2]
            committed.append(i)
            n_leaves += 1
            push(queue, i, len(committed))
        return self._commit_order(nodes, committed)

    def _split_ahead(self, nodes: _Nodes, parents: list[int], search: list[bool],
                     records: dict[int, list[float]], found, tree_mask: np.ndarray,
                     rng: np.random.Generator) -> None:
        """Split `parents` by records[parent] (taken out) in one backend step; search the
        children of those with `search`, passing them to found(children, records)."""
        recs = np.array([records.pop(j) for j in parents], np.float64)
        if all(search):  # the usual step: every child searched
            found(*self._apply_and_search(nodes, parents, recs, self._node_masks(
                tree_mask, 2 * len(parents), rng, True)))
            return
        if any(search):
            idx = [j for j, s in enumerate(search) if s]
            found(*self._apply_and_search(
                nodes, [parents[j] for j in idx], recs[idx],
                self._node_masks(tree_mask, 2 * len(idx), rng, True)))
        if not all(search):
            idx = [j for j, s in enumerate(search) if not s]
            self._apply(nodes, [parents[j] for j in idx], recs[idx], histograms=False)

    @staticmethod
    def _commit_order(nodes: _Nodes, committed: list[int]) -> tuple[_Nodes, list[list[int]]]:
        """The tree of the `committed` splits of `nodes` numbered in commit order (the root,
        then the children of each committed split, left before right); other splits are
        undone. Returns it and, per node, the leaves of `nodes` below it (the backend nodes
        holding its rows)."""
        order = [0]
        for i in committed:
            order += (nodes.left_child[i], nodes.right_child[i])
        out = nodes.take(order)
        new_id = {i: q for q, i in enumerate(order)}
        kept = set(committed)
        held: list[list[int]] = []
        for q, i in enumerate(order):
            held.append([i])
            if i in kept:
                out.left_child[q] = new_id[nodes.left_child[i]]
                out.right_child[q] = new_id[nodes.right_child[i]]
                continue
            if nodes.left_child[i] == -1:
                continue
            # split ahead and not kept: a leaf over the backend's leaves below it
            out.left_child[q] = out.right_child[q] = out.split_feature[q] = -1
            out.gain[q] = 0.0
            below, held[q] = [i], []
            while below:
                j = below.pop()
                if nodes.left_child[j] == -1:
                    held[q].append(j)
                else:
                    below += (nodes.right_child[j], nodes.left_child[j])
        return out, held

    # -- oblivious --
    def _grow_oblivious(self, nodes: _Nodes, tree_mask: np.ndarray, class_index: int,
                        rng: np.random.Generator) -> GrownTree:
        p = self.params
        be = self.backend
        frontier = [0]
        levels: dict[str, list] = {k: [] for k in ("level_feature", "level_bin",
                                                   "level_threshold", "level_default_left",
                                                   "level_gain")}
        for depth in range(p.max_depth):
            mask = self._sample_features(tree_mask, p.colsample_bylevel, rng)
            if self._active is not None:
                mask = mask & self._active
            if self.constraints is not None:  # one path for all nodes of a level
                mask = self.constraints.masks(frontier[:1], mask[None])[0]
            with self.timer("split"):
                totals = nodes.totals[frontier]
                if self.constraints is None:
                    table = be.oblivious_gains(frontier, totals, mask, self.reg)
                else:
                    table = be.oblivious_gains(frontier, totals, mask, self.reg,
                                               monotone=self.constraints.search_args(frontier))
            best = int(np.argmax(table))  # first maximum: lowest feature, bin, missing-right
            gain = float(table.flat[best])
            if not np.isfinite(gain) or gain <= max(MIN_SPLIT_GAIN, p.gamma):
                break
            slot, d = divmod(best, 2)
            f = int(np.searchsorted(self._offsets, slot, side="right") - 1)
            b = slot - int(self._offsets[f])
            recs = np.zeros((len(frontier), REC_WIDTH))
            recs[:, REC_GAIN] = gain
            recs[:, REC_FEATURE] = f
            recs[:, REC_BIN] = b
            recs[:, REC_DEFAULT_LEFT] = d
            with self.timer("split"):
                recs[:, REC_LEFT_G:REC_LEFT_H + 1] = be.evaluate_split(frontier, f, b, bool(d))
            for k, v in (("level_feature", f), ("level_bin", b),
                         ("level_threshold", self._threshold(f, b)),
                         ("level_default_left", d), ("level_gain", gain)):
                levels[k].append(v)
            last = depth + 1 >= p.max_depth
            frontier = self._apply(nodes, frontier, recs, histograms=not last)
        if not levels["level_feature"]:
            # no split: a one-leaf normal tree (the predictors tell oblivious trees by their
            # levels; one without any crashed them)
            return self._finish(nodes, class_index, [[0]])
        leaf_totals = nodes.totals[frontier]
        values = np.array([nodes.value[i] for i in frontier])
        levels["leaf_value"] = values
        levels["leaf_cover"] = leaf_totals[:, 1]
        levels["leaf_count"] = np.rint(leaf_totals[:, 2]).astype(np.int64)
        tree = Tree.oblivious(levels, class_index)
        return GrownTree(tree, [[i] for i in frontier], values)

    # -- pruning and output --
    def _prune(self, nodes: _Nodes, held: list[list[int]]) -> None:
        """Bottom-up: a split whose children are leaves and whose gain is below gamma is undone
        (XGBoost's pruning rule); the node then holds its children's backend nodes (`held`,
        per node)."""
        for i in range(len(nodes.depth) - 1, -1, -1):
            l, r = nodes.left_child[i], nodes.right_child[i]
            if l == -1:
                continue
            if (nodes.left_child[l] == -1 and nodes.left_child[r] == -1
                    and nodes.gain[i] < self.params.gamma):
                nodes.left_child[i] = nodes.right_child[i] = -1
                nodes.split_feature[i] = -1
                nodes.gain[i] = 0.0
                held[i] = held[l] + held[r]

    def _finish(self, nodes: _Nodes, class_index: int, held: list[list[int]]) -> GrownTree:
        """The `Tree` of `nodes`; held: per node, the backend nodes holding its rows."""
        # renumber reachable nodes in creation order (pruning can orphan nodes); a child is
        # created after its parent, so one pass in id order reaches them all
        n = len(nodes.depth)
        reachable = [False] * n
        reachable[0] = True
        right_child = nodes.right_child
        for i, lc in enumerate(nodes.left_child):
            if lc != -1 and reachable[i]:
                reachable[lc] = reachable[right_child[i]] = True
        old = np.flatnonzero(reachable)
        # new ids of old ones, one spare entry at the end: index -1 (no child) reads -1
        new_id = np.full(n + 1, -1, np.int64)
        new_id[old] = np.arange(old.size)
        arrays = {name: np.asarray(getattr(nodes, name))[old]
                  for name in ("split_feature", "split_bin", "threshold", "default_left",
                               "value", "gain", "cover", "count")}
        arrays["left_child"] = new_id[np.asarray(nodes.left_child)[old]]
        arrays["right_child"] = new_id[np.asarray(right_child)[old]]
        is_leaf = arrays["left_child"] == -1
        # leaves (pruned splits included) carry no split fields
        arrays["split_bin"][is_leaf] = 0
        arrays["threshold"][is_leaf] = 0.0
        arrays["default_left"][is_leaf] = 0
        tree = Tree.from_nodes(arrays, class_index)
        return GrownTree(tree, [held[i] for i in old[is_leaf].tolist()],
                         arrays["value"][is_leaf].astype(np.float64))
