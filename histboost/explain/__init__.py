"""Model explanation: SHAP values and interactions (`histboost.explain.shap`), node tables
(`node_tree`: every tree, oblivious ones included, as a tree of nodes)."""

from .nodes import node_tree
from .shap import predict_contributions, predict_interactions

__all__ = ["node_tree", "predict_contributions", "predict_interactions"]
