"""Feature importance with XGBoost's meanings (`Booster.get_score`, the estimators'
``feature_importances_``).

Per feature, over every split of the model (an oblivious tree's level counts as one split,
covering all of the tree's rows):

- ``weight``: the number of splits on the feature;
- ``total_gain`` / ``total_cover``: the sums of their loss reductions / covers (hessian sums of
  the split nodes' training rows);
- ``gain`` / ``cover``: those sums divided by ``weight`` (averages per split).

``split`` is accepted as another name of ``weight``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..tree.tree import Tree

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


def importance(trees: Sequence[Tree], n_features: int, importance_type: str) -> np.ndarray:
    """float64 (n_features,) importance of `importance_type`; 0 for unused features."""
    kind = "weight" if importance_type == "split" else importance_type
    if kind not in IMPORTANCE_TYPES:
        raise ValueError(f"importance_type must be one of {IMPORTANCE_TYPES}, got "
                         f"{importance_type!r}")
    weight = np.zeros(n_features)
    gain = np.zeros(n_features)
    cover = np.zeros(n_features)
    for t in trees:
        if t.is_oblivious:
            feats, gains = t.level_feature, t.level_gain
            covers = np.full(feats.shape[0], float(np.sum(t.leaf_cover)))
        else:
            inner = t.left_child != -1
            feats, gains, covers = t.split_feature[inner], t.gain[inner], t.cover[inner]
        np.add.at(weight, feats, 1.0)
        np.add.at(gain, feats, gains)
        np.add.at(cover, feats, covers)
    if kind == "weight":
        return weight
    total = gain if kind.endswith("gain") else cover
    if kind.startswith("total_"):
        return total
    return np.divide(total, weight, out=np.zeros(n_features), where=weight > 0)


def used_features(trees: Sequence[Tree], n_features: int) -> np.ndarray:
    """bool (n_features,): the features with at least one split."""
    return importance(trees, n_features, "weight") > 0
