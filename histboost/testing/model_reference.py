"""NumPy references for whole models, sharing no code with the engine's predictor or growers.

- `tree_leaves` / `forest_margin`: traverse trees given as the JSON dicts of
  ``Booster.get_dump(dump_format="json")`` row by row (node ids for normal trees, bit paths for
  oblivious trees, level 0 the most significant bit).
- `parse_text_dump`: rebuild a normal tree from its XGBoost-style text dump.
- `grow_oblivious`, `grow_lossguide`, `grow_depthwise_pruned`: brute-force growers built on the
  candidate enumeration of `histboost.testing.reference`, returning every row's leaf value.
"""

from __future__ import annotations

import re

import numpy as np

from .reference import Reg, best_split, split_candidates, weight

# -- traversal of dumped trees ---------------------------------------------------------------


def tree_leaves(tree: dict, X: np.ndarray) -> np.ndarray:
    """int64 (n,): leaf id of every row of raw X in one dumped tree (a JSON dict)."""
    n = X.shape[0]
    out = np.zeros(n, np.int64)
    if tree["kind"] == "oblivious":
        for i in range(n):
            idx = 0
            for f, t, dl in zip(tree["level_feature"], tree["level_threshold"],
                                tree["level_default_left"], strict=True):
                v = X[i, f]
                right = (not dl) if np.isnan(v) else bool(v > t)
                idx = 2 * idx + int(right)
            out[i] = idx
        return out
    left, right = tree["left_child"], tree["right_child"]
    for i in range(n):
        node = 0
        while left[node] != -1:
            v = X[i, tree["split_feature"][node]]
            if np.isnan(v):
                go_left = bool(tree["default_left"][node])
            else:
                go_left = bool(v <= tree["threshold"][node])
            node = left[node] if go_left else right[node]
        out[i] = node
    return out


def tree_values(tree: dict, X: np.ndarray) -> np.ndarray:
    """float64 (n,): the dumped tree's output for every row of raw X."""
    leaves = tree_leaves(tree, X)
    values = np.asarray(tree["leaf_value"] if tree["kind"] == "oblivious" else tree["value"],
                        np.float64)
    return values[leaves]


def forest_margin(trees: list[dict], base_margin: np.ndarray, X: np.ndarray) -> np.ndarray:
    """float64 (n, K): base margin plus every tree's output in its class column, summed in tree
    order (the order the engine uses, so results are bit-identical)."""
    base_margin = np.asarray(base_margin, np.float64)
    out = np.tile(base_margin, (X.shape[0], 1))
    for t in trees:
        out[:, t["class_index"]] += tree_values(t, X)
    return out


_SPLIT_RE = re.compile(r"^(\t*)(\d+):\[(.+)<=(.+)\] yes=(\d+),no=(\d+),missing=(\d+)")
_LEAF_RE = re.compile(r"^(\t*)(\d+):leaf=([^,]+)")


def parse_text_dump(text: str, feature_names: list[str]) -> dict:
    """A normal tree's text dump back to the node arrays of its JSON form (node ids as in the
    dump). Raises AssertionError if a line does not parse."""
    nodes: dict[int, dict] = {}
    for line in text.rstrip("\n").split("\n"):
        m = _SPLIT_RE.match(line)
        if m:
            tabs, nid, fname, thr, yes, no, miss = m.groups()
            nodes[int(nid)] = {"depth": len(tabs), "feature": feature_names.index(fname),
                               "threshold": float(thr), "yes": int(yes), "no": int(no),
                               "missing": int(miss)}
            continue
        m = _LEAF_RE.match(line)
        assert m, f"unparsable dump line {line!r}"
        tabs, nid, val = m.groups()
        nodes[int(nid)] = {"depth": len(tabs), "leaf": float(val)}
    n = max(nodes) + 1
    out = {"kind": "tree", "left_child": [-1] * n, "right_child": [-1] * n,
           "split_feature": [-1] * n, "threshold": [0.0] * n, "default_left": [0] * n,
           "value": [0.0] * n}
    for i, nd in nodes.items():
        if "leaf" in nd:
            out["value"][i] = nd["leaf"]
        else:
            out["left_child"][i] = nd["yes"]
            out["right_child"][i] = nd["no"]
            out["split_feature"][i] = nd["feature"]
            out["threshold"][i] = nd["threshold"]
            out["default_left"][i] = int(nd["missing"] == nd["yes"])
    return out


# -- brute-force growers -----------------------------------------------------------------------


def _goes_left(bins, rows, n_slots, f, b, d):
    col = bins[rows, f].astype(np.int64)
    missing = col == int(n_slots[f]) - 1
    return np.where(missing, d == 1, col <= b)


def grow_depthwise_pruned(bins, g, h, n_slots, reg: Reg, max_depth: int, learning_rate: float,
                          gamma: float, min_gain: float = 1e-6) -> np.ndarray:
    """Depth-wise brute-force tree, then XGBoost's pruning: bottom-up, a split whose children
    are both leaves and whose gain is below `gamma` is undone. Leaf value of every row."""
    out = np.zeros(bins.shape[0])

    def rec(rows: np.ndarray, depth: int) -> bool:
        """Assign leaf values under `rows`; True if the node ends up a leaf."""
        if depth < max_depth:
            gain, f, b, d = best_split(bins, g, h, rows, n_slots, reg)
            if gain > min_gain:
                left = _goes_left(bins, rows, n_slots, f, b, d)
                leaf_l = rec(rows[left], depth + 1)
                leaf_r = rec(rows[~left], depth + 1)
                if not (leaf_l and leaf_r and gain < gamma):
                    return False
        out[rows] = learning_rate * weight(g[rows].sum(), h[rows].sum(), reg)
        return True

    rec(np.arange(bins.shape[0]), 0)
    return out


def grow_lossguide(bins, g, h, n_slots, reg: Reg, max_leaves: int, learning_rate: float,
                   min_gain: float = 1e-6) -> np.ndarray:
    """Best-first brute-force tree: repeatedly split the leaf with the largest gain (ties: the
    leaf created first) until `max_leaves` leaves. Leaf value of every row."""
    leaves: list[tuple[int, np.ndarray]] = [(0, np.arange(bins.shape[0]))]
    next_id = 1
    while len(leaves) < max_leaves:
        best = None
        for j, (nid, rows) in enumerate(leaves):
            gain, f, b, d = best_split(bins, g, h, rows, n_slots, reg)
            if gain > min_gain and (best is None or gain > best[0]
                                    or (gain == best[0] and nid < best[1])):
                best = (gain, nid, j, f, b, d)
        if best is None:
            break
        _, _, j, f, b, d = best
        rows = leaves[j][1]
        left = _goes_left(bins, rows, n_slots, f, b, d)
        leaves[j:j + 1] = [(next_id, rows[left]), (next_id + 1, rows[~left])]
        next_id += 2
    out = np.zeros(bins.shape[0])
    for _, rows in leaves:
        out[rows] = learning_rate * weight(g[rows].sum(), h[rows].sum(), reg)
    return out


def grow_oblivious(bins, g, h, n_slots, reg: Reg, max_depth: int, learning_rate: float,
                   gamma: float = 0.0, min_gain: float = 1e-6):
    """Oblivious brute-force tree: at every level the candidate (f, b, d) maximising the sum of
    its gains over the level's nodes (a node where it is not a valid split adds nothing; the
    candidate must be valid in at least one node), kept if that sum exceeds max(min_gain, gamma).

    Returns (levels [(f, b, d, summed gain)], leaf value of every row, bit path of every row).
    """
    n = bins.shape[0]
    path = np.zeros(n, np.int64)
    levels = []
    for _ in range(max_depth):
        nodes = [np.flatnonzero(path == k) for k in range(1 << len(levels))]
        table: dict[tuple[int, int, int], float] = {}
        for rows in nodes:
            if rows.size == 0:
                continue
            for gain, f, b, d, _ in split_candidates(bins, g, h, rows, n_slots, reg):
                table[(f, b, d)] = table.get((f, b, d), 0.0) + gain
        if not table:
            break
        key = max(table, key=lambda k: (table[k], -k[0], -k[1], -k[2]))
        total = table[key]
        if total <= max(min_gain, gamma):
            break
        f, b, d = key
        left = _goes_left(bins, np.arange(n), n_slots, f, b, d)
        path = 2 * path + (~left).astype(np.int64)
        levels.append((f, b, d, total))
    values = np.zeros(n)
    for k in range(1 << len(levels)):
        rows = np.flatnonzero(path == k)
        values[rows] = learning_rate * weight(g[rows].sum(), h[rows].sum(), reg)
    return levels, values, path
