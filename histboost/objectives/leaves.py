"""Leaf refresh after a tree is grown (XGBoost's ``UpdateTreeLeaf``): objectives whose Newton
step is not their minimiser (absolute and quantile error) set each leaf to the weighted
quantile of the residuals ``y - margin`` of its training rows, times the learning rate."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tree.grower import GrownTree
from ..tree.predictor import PackedForest
from ..tree.tree import Tree
from .regression import weighted_quantile


def leaf_ordinals(tree: Tree, X: np.ndarray) -> np.ndarray:
    """int64 (n,): for each row of raw X, the position of its leaf in the grower's leaf order
    (`GrownTree.leaves`: leaves in node order; oblivious trees: leaf index)."""
    arrays = dict(tree.arrays)
    if tree.is_oblivious:
        arrays["leaf_value"] = np.arange(arrays["leaf_value"].shape[0], dtype=np.float64)
    else:
        value = np.zeros(arrays["value"].shape[0], np.float64)
        leaf = arrays["left_child"] == -1
        value[leaf] = np.arange(int(leaf.sum()))
        arrays["value"] = value
    out = np.zeros((X.shape[0], tree.class_index + 1), np.float64)
    PackedForest([Tree(tree.kind, tree.class_index, arrays)]).add_margin(X, out)
    return np.rint(out[:, tree.class_index]).astype(np.int64)


def leaf_quantiles(leaf: np.ndarray, residual: np.ndarray, w: np.ndarray | None,
                   n_leaves: int, alpha: float) -> np.ndarray:
    """float64 (n_leaves,): the weighted alpha-quantile of the residuals of each leaf's rows
    (leaf: int64 (n,) ordinals), NaN for a leaf without rows."""
    out = np.full(n_leaves, np.nan)
    order = np.argsort(leaf, kind="stable")
    bounds = np.searchsorted(leaf[order], np.arange(n_leaves + 1))
    for j in range(n_leaves):
        idx = order[bounds[j]:bounds[j + 1]]
        if idx.size:
            out[j] = weighted_quantile(residual[idx], alpha, None if w is None else w[idx])
    return out


def refresh_leaves(grown: GrownTree, alpha: float, X: np.ndarray, margin: np.ndarray,
                   y: np.ndarray, w: np.ndarray | None, rows: np.ndarray | None,
                   learning_rate: float, quantiles: Callable[..., np.ndarray] = leaf_quantiles
                   ) -> GrownTree:
    """`grown` with each leaf's value set to learning_rate times the weighted alpha-quantile
    of y - margin over its rows (`rows`: the round's sample; None: all rows). Leaves without
    rows keep their value. margin float64 (n,): the output's margins before this tree.
    quantiles: `leaf_quantiles` or one with its arguments and result (distributed training:
    the quantiles over the rows of all ranks)."""
    tree = grown.tree
    try:
        X = np.asarray(X)
    except Exception:  # e.g. a device array
        raise ValueError("leaf refresh (reg:absoluteerror / reg:quantileerror) needs the "
                         "training matrix on the host") from None
    leaf = leaf_ordinals(tree, X)
    residual = y - margin
    if rows is not None:
        leaf, residual = leaf[rows], residual[rows]
        w = None if w is None else w[rows]
    values = np.array(grown.leaf_values, np.float64)
    q = quantiles(leaf, residual, w, values.shape[0], alpha)
    have = ~np.isnan(q)
    values[have] = q[have] * learning_rate
    arrays = dict(tree.arrays)
    if tree.is_oblivious:
        arrays["leaf_value"] = values
    else:
        value = np.array(arrays["value"], np.float64)
        value[arrays["left_child"] == -1] = values
        arrays["value"] = value
    return GrownTree(Tree(tree.kind, tree.class_index, arrays), grown.leaves, values)
