"""`Tree`: one regression tree as a structure of arrays, the single format of a fitted tree and
of its JSON form. The growers (`histboost.tree.grower`) build it from their node records;
prediction packs a model's trees into the flat arrays of
`histboost.tree.predictor.PackedForest`, which the CPU and CUDA prediction kernels read.

Normal trees (``kind == "tree"``), one entry per node, node 0 the root, nodes in creation order:

=================  =========  ================================================================
field              dtype      meaning
=================  =========  ================================================================
left_child         int32      index of the left child, -1 for a leaf
right_child        int32      index of the right child, -1 for a leaf
split_feature      int32      feature tested at the node, -1 for a leaf
split_bin          int32      rows with bin <= split_bin go left (training-time bins)
threshold          float64    raw rule: rows with x <= threshold go left (the bin's upper bound)
default_left       uint8      1 if missing values (NaN) go left
value              float64    leaf output with the learning rate applied (internal nodes: the
                              output they would have as a leaf)
gain               float64    loss change of the split (0 for leaves)
cover              float64    sum of hessians of the node's training rows
count              int64      number of training rows in the node
=================  =========  ================================================================

Oblivious trees (``kind == "oblivious"``), one shared split per level, ``D`` levels:
``level_feature`` int32 (D,), ``level_bin`` int32 (D,), ``level_threshold`` float64 (D,),
``level_default_left`` uint8 (D,), ``level_gain`` float64 (D,), and per leaf ``leaf_value``,
``leaf_cover`` float64 (2**D,), ``leaf_count`` int64 (2**D,). A row's leaf index is its bit path:
bit ``D-1-d`` is 1 when the row goes right at level d.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

NODE_FIELDS = {
    "left_child": np.int32, "right_child": np.int32, "split_feature": np.int32,
    "split_bin": np.int32, "threshold": np.float64, "default_left": np.uint8,
    "value": np.float64, "gain": np.float64, "cover": np.float64, "count": np.int64,
}
OBLIVIOUS_FIELDS = {
    "level_feature": np.int32, "level_bin": np.int32, "level_threshold": np.float64,
    "level_default_left": np.uint8, "level_gain": np.float64,
    "leaf_value": np.float64, "leaf_cover": np.float64, "leaf_count": np.int64,
}


@dataclass
class Tree:
    """One tree; see the module docstring for the fields."""

    kind: str = "tree"
    class_index: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_nodes(cls, nodes: dict[str, list], class_index: int = 0) -> Tree:
        arrays = {k: np.asarray(nodes[k], dtype=dt) for k, dt in NODE_FIELDS.items()}
        return cls("tree", class_index, arrays)

    @classmethod
    def oblivious(cls, levels: dict[str, list], class_index: int = 0) -> Tree:
        arrays = {k: np.asarray(levels[k], dtype=dt) for k, dt in OBLIVIOUS_FIELDS.items()}
        depth = arrays["level_feature"].shape[0]
        if arrays["leaf_value"].shape[0] != 1 << depth:
            raise ValueError("an oblivious tree of depth D needs 2**D leaves")
        return cls("oblivious", class_index, arrays)

    # -- properties ---------------------------------------------------------------------------
    @property
    def is_oblivious(self) -> bool:
        return self.kind == "oblivious"

    @property
    def n_leaves(self) -> int:
        if self.is_oblivious:
            return int(self.leaf_value.shape[0])
        return int(np.sum(self.left_child == -1))

    @property
    def depth(self) -> int:
        if self.is_oblivious:
            return int(self.level_feature.shape[0])
        depth = np.zeros(self.left_child.shape[0], dtype=np.int64)
        for i in range(self.left_child.shape[0]):  # children are created after their parent
            if self.left_child[i] != -1:
                depth[self.left_child[i]] = depth[self.right_child[i]] = depth[i] + 1
        return int(depth.max())

    def split_features_and_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """(features, gains) of every split of the tree (one entry per split node or level)."""
        if self.is_oblivious:
            return self.level_feature, self.level_gain
        inner = self.left_child != -1
        return self.split_feature[inner], self.gain[inner]

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "class_index": self.class_index}
        for k, v in self.arrays.items():
            out[k] = v.tolist()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tree:
        kind = d.get("kind")
        spec = {"tree": NODE_FIELDS, "oblivious": OBLIVIOUS_FIELDS}.get(kind)  # type: ignore
        if spec is None:
            raise ValueError(f"unknown tree kind {kind!r}")
        missing = [k for k in spec if k not in d]
        if missing:
            raise ValueError(f"tree is missing fields {missing}")
        arrays = {k: np.asarray(d[k], dtype=dt) for k, dt in spec.items()}
        tree = cls(kind, int(d.get("class_index", 0)), arrays)
        tree.validate()
        return tree

    def validate(self, n_features: int | None = None) -> None:
        """Check internal consistency (array lengths, child indices, features in range)."""
        if self.is_oblivious:
            d = self.level_feature.shape[0]
            for k in ("level_bin", "level_threshold", "level_default_left", "level_gain"):
                if self.arrays[k].shape[0] != d:
                    raise ValueError(f"oblivious tree field {k} has the wrong length")
            if any(self.arrays[k].shape[0] != 1 << d
                   for k in ("leaf_value", "leaf_cover", "leaf_count")):
                raise ValueError("oblivious tree needs 2**depth leaves")
            feats = self.level_feature
        else:
            n = self.left_child.shape[0]
            if n == 0 or any(a.shape[0] != n for a in self.arrays.values()):
                raise ValueError("tree node arrays are empty or of different lengths")
            inner = self.left_child != -1
            for c in (self.left_child[inner], self.right_child[inner]):
                if np.any(c <= np.nonzero(inner)[0]) or np.any(c >= n):
                    raise ValueError("tree child index out of range")
            feats = self.split_feature[inner]
        if n_features is not None and feats.size and (feats.min() < 0 or
                                                       feats.max() >= n_features):
            raise ValueError(f"tree splits on a feature outside 0..{n_features - 1}")

    # -- text dump ----------------------------------------------------------------------------
    def dump(self, feature_names: list[str] | None = None, with_stats: bool = False) -> str:
        def fname(f: int) -> str:
            return feature_names[f] if feature_names else f"f{f}"

        lines: list[str] = []
        if self.is_oblivious:
            for d in range(self.level_feature.shape[0]):
                miss = "left" if self.level_default_left[d] else "right"
                stat = f" gain={self.level_gain[d]:.6g}" if with_stats else ""
                lines.append(f"level {d}: [{fname(int(self.level_feature[d]))}<="
                             f"{float(self.level_threshold[d])!r}] missing={miss}{stat}")
            for i, v in enumerate(self.leaf_value):
                stat = f",cover={self.leaf_cover[i]:.6g}" if with_stats else ""
                lines.append(f"  leaf {i}: leaf={float(v)!r}{stat}")
            return "\n".join(lines) + "\n"

        def rec(node: int, depth: int) -> None:
            pad = "\t" * depth
            if self.left_child[node] == -1:
                stat = f",cover={self.cover[node]:.6g}" if with_stats else ""
                lines.append(f"{pad}{node}:leaf={float(self.value[node])!r}{stat}")
                return
            l, r = int(self.left_child[node]), int(self.right_child[node])
            miss = l if self.default_left[node] else r
            stat = (f",gain={self.gain[node]:.6g},cover={self.cover[node]:.6g}"
                    if with_stats else "")
            lines.append(f"{pad}{node}:[{fname(int(self.split_feature[node]))}<="
                         f"{float(self.threshold[node])!r}] yes={l},no={r},missing={miss}{stat}")
            rec(l, depth + 1)
            rec(r, depth + 1)

        rec(0, 0)
        return "\n".join(lines) + "\n"
