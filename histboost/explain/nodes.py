"""`node_tree`: any `Tree` as a normal tree of nodes.

An oblivious tree of depth D becomes the complete binary tree of 2**(D+1) - 1 nodes in
breadth-first order (node i has children 2i+1 and 2i+2), level d's split at every node of depth
d; its leaves keep the bit-path order of the oblivious leaves. Internal covers, counts and
values are the sums (covers, counts) and cover-weighted means (values) of the leaves below; the
split gain of a level is shared by its nodes in proportion to their covers (the oblivious
grower scores a level by the sum of its nodes' gains and keeps no per-node gain).
"""

from __future__ import annotations

import numpy as np

from ..tree.tree import Tree


def node_tree(tree: Tree) -> Tree:
    """`tree` itself for a normal tree, the expanded tree for an oblivious one."""
    if not tree.is_oblivious:
        return tree
    depth = int(tree.level_feature.shape[0])
    n = (1 << (depth + 1)) - 1
    n_inner = (1 << depth) - 1
    idx = np.arange(n)
    level = np.floor(np.log2(idx + 1)).astype(np.int64)
    inner = idx < n_inner
    left = np.where(inner, 2 * idx + 1, -1).astype(np.int32)
    right = np.where(inner, 2 * idx + 2, -1).astype(np.int32)
    lv = np.minimum(level, max(depth - 1, 0))
    has_levels = depth > 0
    feat = np.where(inner, tree.level_feature[lv] if has_levels else 0, -1).astype(np.int32)
    sbin = np.where(inner, tree.level_bin[lv] if has_levels else 0, -1).astype(np.int32)
    thr = np.where(inner, tree.level_threshold[lv] if has_levels else 0.0, 0.0)
    dl = np.where(inner, tree.level_default_left[lv] if has_levels else 0, 0).astype(np.uint8)
    cover = np.zeros(n)
    count = np.zeros(n, np.int64)
    value = np.zeros(n)
    cover[n_inner:] = tree.leaf_cover
    count[n_inner:] = tree.leaf_count
    value[n_inner:] = tree.leaf_value
    for i in range(n_inner - 1, -1, -1):
        cl, cr = cover[2 * i + 1], cover[2 * i + 2]
        cover[i] = cl + cr
        count[i] = count[2 * i + 1] + count[2 * i + 2]
        value[i] = ((cl * value[2 * i + 1] + cr * value[2 * i + 2]) / (cl + cr) if cl + cr > 0
                    else 0.5 * (value[2 * i + 1] + value[2 * i + 2]))
    gain = np.zeros(n)
    for d in range(depth):
        nodes = np.arange((1 << d) - 1, (1 << (d + 1)) - 1)
        total = cover[nodes].sum()
        share = cover[nodes] / total if total > 0 else np.full(nodes.size, 1.0 / nodes.size)
        gain[nodes] = tree.level_gain[d] * share
    return Tree.from_nodes({"left_child": left, "right_child": right, "split_feature": feat,
                            "split_bin": sbin, "threshold": thr, "default_left": dl,
                            "value": value, "gain": gain, "cover": cover, "count": count},
                           class_index=tree.class_index)
