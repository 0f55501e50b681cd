"""SHAP values of a `Booster`: ``predict(pred_contribs=True)``, ``approx_contribs=True`` and
``pred_interactions=True`` dispatch here.

Exact path-dependent TreeSHAP (Lundberg, Erion & Lee 2018, Algorithm 2): the expectation of a
tree given a subset S of features follows the row at splits on features in S and otherwise
weighs both children by the training cover (sum of hessians) that went into them. Output
layout and dtype are XGBoost's: float32 (n, F+1) for one output, (n, K, F+1) for K classes,
the last column the bias (base margin plus every tree's expected value), each row summing to
the margin; interactions (n, F+1, F+1) / (n, K, F+1, F+1). The kernels are in
`histboost.kernels.cpu.shap`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..kernels.cpu import shap as kshap
from .nodes import node_tree

if TYPE_CHECKING:
    from ..booster import Booster


# largest number of leaf-table entries (float64) kept per model: 2**25 is 256 MiB; beyond it
# SHAP values take the path algorithm (the same values, O(depth) times slower per leaf)
TABLE_BUDGET = 1 << 25


class ExplainForest:
    """A model's trees as node trees (oblivious ones expanded) in flat arrays, with the
    per-node cover fractions and expected values TreeSHAP needs."""

    def __init__(self, trees: list) -> None:
        nodes = [node_tree(t) for t in trees]
        sizes = [t.left_child.shape[0] for t in nodes]
        self.n_trees = len(nodes)
        self.node_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.tree_class = np.array([t.class_index for t in nodes], dtype=np.int32)

        def cat(name: str, dtype: type) -> np.ndarray:
            if not nodes:
                return np.zeros(0, dtype)
            return np.concatenate([t.arrays[name] for t in nodes]).astype(dtype)

        self.left = cat("left_child", np.int32)
        self.right = cat("right_child", np.int32)
        self.feature = cat("split_feature", np.int32)
        self.threshold = cat("threshold", np.float64)
        self.default_left = cat("default_left", np.uint8)
        self.value = cat("value", np.float64)
        self.zl = np.zeros(self.left.shape[0])
        self.zr = np.zeros(self.left.shape[0])
        self.mean = np.zeros(self.left.shape[0])
        feats: list[np.ndarray] = []
        self.max_depth = 0
        for t, tree in enumerate(nodes):
            base = int(self.node_ptr[t])
            zl, zr, mean, depth = _fractions(tree)
            sl = slice(base, base + zl.shape[0])
            self.zl[sl], self.zr[sl], self.mean[sl] = zl, zr, mean
            self.max_depth = max(self.max_depth, depth)
            inner = tree.left_child != -1
            feats.append(np.unique(tree.split_feature[inner]).astype(np.int32))
        self.feat_ptr = np.concatenate([[0], np.cumsum([f.size for f in feats])]).astype(
            np.int64)
        self.tree_feats = (np.concatenate(feats) if feats else np.zeros(0)).astype(np.int32)
        self._tables: tuple | None = None

    def tables(self) -> tuple | None:
        """The leaf tables of `histboost.kernels.cpu.shap.shap_values_tables` (built on first
        use), or None when they would take more than `TABLE_BUDGET` entries."""
        if self._tables is None:
            self._tables = self._build_tables()
        return self._tables or None

    def _build_tables(self) -> tuple:
        leaf_node, leaf_tree, n_split, n_elem, has_zero = kshap.leaf_layout(
            self.node_ptr, self.left, self.right, self.feature, self.zl, self.zr,
            self.max_depth)
        tree_slow = np.zeros(self.n_trees, np.uint8)
        np.maximum.at(tree_slow, leaf_tree, has_zero)
        np.maximum.at(tree_slow, leaf_tree, (n_elem > 20).astype(np.uint8))
        size = np.where(tree_slow[leaf_tree] == 1, 0, np.where(n_elem > 0, 1 << np.minimum(
            n_elem, 20), 0))
        if size.sum() > TABLE_BUDGET:
            return ()
        ptr = lambda a: np.concatenate([[0], np.cumsum(a)]).astype(np.int64)  # noqa: E731
        split_ptr, elem_ptr, table_ptr = ptr(n_split), ptr(n_elem), ptr(size)
        tree_leaf_ptr = ptr(np.bincount(leaf_tree, minlength=self.n_trees))
        split_node = np.zeros(split_ptr[-1], np.int64)
        split_left = np.zeros(split_ptr[-1], np.uint8)
        split_elem = np.zeros(split_ptr[-1], np.int64)
        elem_feature = np.zeros(elem_ptr[-1], np.int32)
        elem_ratio = np.zeros(elem_ptr[-1])
        table = np.zeros(table_ptr[-1])
        kshap.fill_leaf_tables(self.node_ptr, self.left, self.right, self.feature, self.zl,
                               self.zr, leaf_node, leaf_tree, split_ptr, elem_ptr, table_ptr,
                               split_node, split_left, split_elem, elem_feature, elem_ratio,
                               table)
        return (tree_slow, tree_leaf_ptr, leaf_node, split_ptr, elem_ptr, table_ptr,
                split_node, split_left, split_elem, elem_feature, elem_ratio, table)


def _fractions(tree) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per node: share of the node's cover in its left / right child (their covers over the
    sum of both; an empty node halves), the expected output below it, and the tree's depth."""
    left, right, cover = tree.left_child, tree.right_child, tree.cover
    n = left.shape[0]
    zl, zr = np.zeros(n), np.zeros(n)
    mean = np.array(tree.value, dtype=np.float64)
    depth = np.zeros(n, np.int64)
    for i in range(n):  # children are created after their parent
        if left[i] != -1:
            depth[left[i]] = depth[right[i]] = depth[i] + 1
    for i in range(n - 1, -1, -1):
        if left[i] == -1:
            continue
        cl, cr = float(cover[left[i]]), float(cover[right[i]])
        if cl + cr > 0:
            zl[i], zr[i] = cl / (cl + cr), cr / (cl + cr)
        else:
            zl[i] = zr[i] = 0.5
        mean[i] = zl[i] * mean[left[i]] + zr[i] * mean[right[i]]
    return zl, zr, mean, int(depth.max())


def _forest(booster: Booster) -> ExplainForest:
    cached = booster.__dict__.get("_explain_forest")
    trees = booster.trees
    if cached is None or len(cached[0]) != len(trees) or not all(
            a is b for a, b in zip(cached[0], trees, strict=True)):
        cached = (list(trees), ExplainForest(trees))
        booster.__dict__["_explain_forest"] = cached
    return cached[1]


def _bias(booster: Booster, n: int, base_margin: np.ndarray | None) -> np.ndarray:
    k = booster.trees_per_round
    if base_margin is None:
        return np.tile(booster.base_margin, (n, 1))
    bm = np.asarray(base_margin, np.float64)
    if bm.shape not in ((n,), (n, 1), (n, k)):
        raise ValueError(f"base_margin has shape {bm.shape}; this model has {k} outputs")
    return np.ascontiguousarray(np.broadcast_to(bm.reshape(n, -1), (n, k)), dtype=np.float64)


def predict_contributions(booster: Booster, X: np.ndarray, base_margin: np.ndarray | None,
                          tree_range: tuple[int, int], approx: bool = False) -> np.ndarray:
    """float32 SHAP values (Saabas attributions with `approx`) of raw X (n, F) over trees
    [a, b): (n, F+1), or (n, K, F+1) for a model with K > 1 outputs."""
    n, m, k = X.shape[0], X.shape[1] + 1, booster.trees_per_round
    fo = _forest(booster)
    out = np.zeros((n, k, m), np.float32)
    bias = _bias(booster, n, base_margin)
    a, b = tree_range
    if approx:
        kshap.saabas_values(X, a, b, fo.tree_class, fo.node_ptr, fo.left, fo.right, fo.feature,
                            fo.threshold, fo.default_left, fo.value, fo.mean, bias, out)
    elif (tables := fo.tables()) is not None:
        kshap.shap_values_tables(X, a, b, fo.tree_class, fo.node_ptr, fo.left, fo.right,
                                 fo.feature, fo.threshold, fo.default_left, fo.value, fo.zl,
                                 fo.zr, fo.mean, fo.max_depth, *tables, bias, out)
    else:
        kshap.shap_values(X, a, b, fo.tree_class, fo.node_ptr, fo.left, fo.right, fo.feature,
                          fo.threshold, fo.default_left, fo.value, fo.zl, fo.zr, fo.mean,
                          fo.max_depth, bias, out)
    return out[:, 0] if k == 1 else out


def predict_interactions(booster: Booster, X: np.ndarray, base_margin: np.ndarray | None,
                         tree_range: tuple[int, int]) -> np.ndarray:
    """float32 SHAP interaction values of raw X (n, F) over trees [a, b): (n, F+1, F+1), or
    (n, K, F+1, F+1) for K > 1 outputs. Row i of a matrix sums to feature i's SHAP value; the
    bias sits at [F, F]."""
    n, m, k = X.shape[0], X.shape[1] + 1, booster.trees_per_round
    fo = _forest(booster)
    out = np.zeros((n, k, m, m), np.float32)
    bias = _bias(booster, n, base_margin)
    a, b = tree_range
    kshap.shap_interactions(X, a, b, fo.tree_class, fo.node_ptr, fo.left, fo.right, fo.feature,
                            fo.threshold, fo.default_left, fo.value, fo.zl, fo.zr, fo.mean,
                            fo.max_depth, fo.feat_ptr, fo.tree_feats, bias, out)
    return out[:, 0] if k == 1 else out
