"""Moving models out: `trees_to_dataframe` (one row per node, XGBoost's columns) and
`to_xgboost_json` (an XGBoost JSON model that ``xgboost.Booster(model_file=...)`` loads and that
predicts what histboost predicts), behind `Booster.trees_to_dataframe` and
``Booster.save_model(path, format="xgboost")``.

Differences bridged by the export:

- Splits: histboost sends ``x <= threshold`` left, XGBoost ``x < split_condition`` with float32
  values. The condition written is ``nextafter(float32(threshold), +inf)``: a float32 value x
  goes left in XGBoost exactly when ``x <= float32(threshold)``, which for a model trained on
  float32 data (its thresholds are float32 values) is histboost's rule; for float64 data the
  two differ only for values within half a float32 step above a threshold, XGBoost reading
  its input as float32 in any case.
- Oblivious trees become node trees (`histboost.explain.node_tree`).
- The intercept: single-output objectives write histboost's base margin as XGBoost's
  ``base_score`` (in prediction space: the sigmoid of the margin for the logistic objectives);
  multiclass models write ``base_score`` 0 and add each class's base margin to the leaves of
  its first tree (older XGBoost versions, treelite and the SHAP library read one scalar).
- Leaf values and conditions are float32 in XGBoost: predictions agree to float32 rounding.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from .explain.nodes import node_tree

if TYPE_CHECKING:
    from .booster import Booster

_XGB_OBJECTIVES = {
    "reg:squarederror": {"name": "reg:squarederror",
                         "reg_loss_param": {"scale_pos_weight": "1"}},
    "binary:logistic": {"name": "binary:logistic", "reg_loss_param": {"scale_pos_weight": "1"}},
    "binary:logitraw": {"name": "binary:logitraw", "reg_loss_param": {"scale_pos_weight": "1"}},
    "custom": {"name": "reg:squarederror", "reg_loss_param": {"scale_pos_weight": "1"}},
}
_ROOT_PARENT = 2147483647


def _condition(threshold: float) -> float:
    t = np.float32(threshold)
    return float(np.nextafter(t, np.float32(np.inf)))


def _tree_json(tree: Any, tid: int, n_features: int, offset: float) -> dict[str, Any]:
    t = node_tree(tree)
    left = t.left_child.astype(np.int64)
    right = t.right_child.astype(np.int64)
    n = left.shape[0]
    leaf = left == -1
    parents = np.full(n, _ROOT_PARENT, np.int64)
    parents[left[~leaf]] = np.nonzero(~leaf)[0]
    parents[right[~leaf]] = np.nonzero(~leaf)[0]
    values = t.value + offset
    cond = [float(np.float32(values[i])) if leaf[i] else _condition(t.threshold[i])
            for i in range(n)]
    return {
        "base_weights": [float(np.float32(v)) for v in values],
        "categories": [], "categories_nodes": [], "categories_segments": [],
        "categories_sizes": [],
        "default_left": [int(d) if not lf else 0 for d, lf in zip(t.default_left, leaf,
                                                                  strict=True)],
        "id": tid,
        "left_children": left.tolist(),
        "loss_changes": [float(np.float32(g)) for g in t.gain],
        "parents": parents.tolist(),
        "right_children": right.tolist(),
        "split_conditions": cond,
        "split_indices": np.where(leaf, 0, t.split_feature).astype(np.int64).tolist(),
        "split_type": [0] * n,
        "sum_hessian": [float(np.float32(c)) for c in t.cover],
        "tree_param": {"num_deleted": "0", "num_feature": str(n_features),
                       "num_nodes": str(n), "size_leaf_vector": "1"},
    }


def _leaf_only_tree(value: float) -> Any:
    from .tree.tree import Tree
    return Tree.from_nodes({"left_child": [-1], "right_child": [-1], "split_feature": [-1],
                            "split_bin": [-1], "threshold": [0.0], "default_left": [0],
                            "value": [value], "gain": [0.0], "cover": [0.0], "count": [0]})


def to_xgboost_json(booster: Booster) -> dict[str, Any]:
    """The model as the dict of an XGBoost JSON model file."""
    name = booster.objective_name
    k = booster.trees_per_round
    bm = booster.base_margin
    trees = list(booster.trees)
    offsets = np.zeros(max(len(trees), k))
    if name.startswith("multi:"):
        objective = {"name": name, "softmax_multiclass_param": {"num_class": str(k)}}
        base_score = 0.0
        if not trees:  # a model without rounds: one round of leaves holding the intercepts
            trees = [_leaf_only_tree(0.0) for _ in range(k)]
        offsets[:k] = bm
        num_class = k
    elif name in _XGB_OBJECTIVES and k == 1:
        objective = _XGB_OBJECTIVES[name]
        m = float(bm[0])
        base_score = 1.0 / (1.0 + np.exp(-m)) if name == "binary:logistic" else m
        num_class = 0
    else:
        raise ValueError(f"objective {name!r} with {k} outputs has no XGBoost equivalent")
    tree_info = [i % k for i in range(len(trees))]
    default_names = booster.feature_names == [f"f{i}" for i in range(booster.n_features)]
    attributes: dict[str, str] = {}
    if booster.best_iteration is not None:
        attributes["best_iteration"] = str(booster.best_iteration)
    if booster.best_score is not None:
        attributes["best_score"] = repr(float(booster.best_score))
    return {
        "learner": {
            "attributes": attributes,
            "feature_names": [] if default_names else list(booster.feature_names),
            "feature_types": [] if default_names else ["float"] * booster.n_features,
            "gradient_booster": {
                "model": {
                    "gbtree_model_param": {"num_parallel_tree": "1",
                                           "num_trees": str(len(trees))},
                    "iteration_indptr": list(range(0, len(trees) + 1, k)),
                    "tree_info": tree_info,
                    "trees": [_tree_json(t, i, booster.n_features, float(offsets[i]))
                              for i, t in enumerate(trees)],
                },
                "name": "gbtree",
            },
            "learner_model_param": {"base_score": repr(float(np.float32(base_score))),
                                    "boost_from_average": "1", "num_class": str(num_class),
                                    "num_feature": str(booster.n_features),
                                    "num_target": "1"},
            "objective": objective,
        },
        "version": [2, 1, 0],
    }


def xgboost_json_bytes(booster: Booster) -> bytes:
    return json.dumps(to_xgboost_json(booster), separators=(",", ":")).encode()


_COLUMNS = ["Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover",
            "Category"]


def trees_to_dataframe(booster: Booster) -> Any:
    """pandas DataFrame, one row per node, XGBoost's columns: Tree, Node, ID ("tree-node"),
    Feature (name, or "Leaf"), Split (histboost's threshold: ``x <= Split`` goes to Yes),
    Yes / No / Missing (IDs of the children; NaN for leaves), Gain (the split's loss reduction,
    a leaf's value), Cover (hessian sum), Category (NaN: no categorical splits). Oblivious
    trees appear as their node trees (`histboost.explain.node_tree`)."""
    import pandas as pd

    cols: dict[str, list] = {c: [] for c in _COLUMNS}
    for ti, tree in enumerate(booster.trees):
        t = node_tree(tree)
        for i in range(t.left_child.shape[0]):
            leaf = t.left_child[i] == -1
            cols["Tree"].append(ti)
            cols["Node"].append(i)
            cols["ID"].append(f"{ti}-{i}")
            cols["Category"].append(np.nan)
            cols["Cover"].append(float(t.cover[i]))
            if leaf:
                cols["Feature"].append("Leaf")
                cols["Gain"].append(float(t.value[i]))
                for c in ("Split", "Yes", "No", "Missing"):
                    cols[c].append(np.nan)
                continue
            l, r = int(t.left_child[i]), int(t.right_child[i])
            cols["Feature"].append(booster.feature_names[int(t.split_feature[i])])
            cols["Split"].append(float(t.threshold[i]))
            cols["Yes"].append(f"{ti}-{l}")
            cols["No"].append(f"{ti}-{r}")
            cols["Missing"].append(f"{ti}-{l if t.default_left[i] else r}")
            cols["Gain"].append(float(t.gain[i]))
    return pd.DataFrame(cols, columns=_COLUMNS)
