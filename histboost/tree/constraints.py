"""Monotone and interaction constraints (XGBoost's semantics), per tree and by node id.

Monotone (XGBoost's ``TreeEvaluator``): every node has bounds [lower, upper] on its unscaled
weight (the root: unbounded). A split's children start from the parent's bounds; on a feature
with constraint +1 the left child's upper bound and the right child's lower bound become the
midpoint of the two children's (clipped) weights, the other way round for -1. Every node's
value is its weight clipped to its bounds, so leaves reached by increasing a constrained
feature never go the wrong way: the first node where two such rows part splits on that feature
and puts them on either side of its midpoint. The split search (`find_best_splits(...,
monotone=)`) clips weights to the node's bounds, computes gains at the clipped weights and
rejects splits whose children's weights break the direction.

Interaction (XGBoost's ``FeatureInteractionConstraintHost``): the root may split on any
feature; a node below may split on the features its path used and on every feature of each
set that contains all of them.

Oblivious trees: a level's shared split must order the clipped children's weights of every
node of the level (`oblivious_gains(..., monotone=)`); all nodes of a level share one path, so
one interaction mask serves the level.

The grower holds one `TreeConstraints` (None without constraints) and calls `start` per tree,
`masks` and `search_args` before a split search and `split` for each split applied.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import numpy as np

from .split import leaf_weight


def _literal(name: str, value: Any) -> Any:
    if isinstance(value, str):
        try:
            return ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"parameter {name!r} must be a list (e.g. '(1,0,-1)' or "
                             f"'[[0,1],[2]]'), got {value!r}") from None
    return value


def parse_monotone(value: Any) -> tuple | dict:
    """monotone_constraints as given: a tuple/list of -1/0/1 (also the string "(1,0,-1)"), or
    a dict feature name -> -1/0/1. Returns a tuple of ints or a dict name -> int."""
    value = _literal("monotone_constraints", value)
    if isinstance(value, dict):
        items = {str(k): v for k, v in value.items()}
    elif isinstance(value, Sequence | np.ndarray) and not isinstance(value, str | bytes):
        items = dict(enumerate(value))
    elif isinstance(value, int) and not isinstance(value, bool):  # "(1)" parses as 1
        items = {0: value}
    else:
        raise ValueError("monotone_constraints must be a tuple/list of -1, 0, 1 or a dict "
                         f"feature name -> -1/0/1, got {value!r}")
    out = {}
    for k, v in items.items():
        if isinstance(v, bool) or v not in (-1, 0, 1):
            raise ValueError(f"monotone_constraints values must be -1, 0 or 1, got {v!r} "
                             f"for feature {k!r}")
        out[k] = int(v)
    if isinstance(value, dict):
        return out
    return tuple(out[i] for i in range(len(out)))


def parse_interaction(value: Any) -> tuple[tuple, ...]:
    """interaction_constraints: a list of lists of feature indices or names (also as a
    string, "[[0, 1], [2, 3]]"). Returns a tuple of tuples."""
    value = _literal("interaction_constraints", value)
    bad = ValueError("interaction_constraints must be a list of lists of feature indices or "
                     f"names, e.g. [[0, 1], [2, 3]], got {value!r}")
    if not isinstance(value, Sequence | np.ndarray) or isinstance(value, str | bytes):
        raise bad
    sets = []
    for s in value:
        if not isinstance(s, Sequence | np.ndarray) or isinstance(s, str | bytes):
            raise bad
        items = []
        for f in s:
            if isinstance(f, bool) or not isinstance(f, int | np.integer | str):
                raise bad
            items.append(f if isinstance(f, str) else int(f))
        sets.append(tuple(items))
    return tuple(sets)


def _feature_index(name: str, f: Any, feature_names: Sequence[str] | None,
                   n_features: int) -> int:
    if isinstance(f, str):
        if feature_names is None or f not in feature_names:
            raise ValueError(f"{name}: unknown feature name {f!r} (the Dataset's names: "
                             f"{list(feature_names or [])[:10]}...)")
        return list(feature_names).index(f)
    if not 0 <= f < n_features:
        raise ValueError(f"{name}: feature index {f} out of range for {n_features} features")
    return int(f)


def monotone_array(value: tuple | dict, n_features: int,
                   feature_names: Sequence[str] | None) -> np.ndarray | None:
    """int8 (n_features,) constraint per feature, or None when none is set."""
    cons = np.zeros(n_features, np.int8)
    if isinstance(value, dict):
        for k, v in value.items():
            cons[_feature_index("monotone_constraints", k, feature_names, n_features)] = v
    else:
        if len(value) > n_features:
            raise ValueError(f"monotone_constraints has {len(value)} entries for "
                             f"{n_features} features")
        cons[:len(value)] = value  # XGBoost pads a shorter tuple with 0
    return cons if cons.any() else None


class TreeConstraints:
    """Constraint state of the tree being grown.

    monotone: int8 (F,) or None; interaction: lists of feature indices or None; reg: the
    grower's regularisation vector; learning_rate: the node values' scale.
    """

    def __init__(self, n_features: int, monotone: np.ndarray | None,
                 interaction: list[list[int]] | None, reg: np.ndarray,
                 learning_rate: float) -> None:
        self.n_features = n_features
        self.monotone = monotone
        self.sets = None
        if interaction is not None:
            self.sets = [frozenset(s) for s in interaction]
        self.reg = reg
        self.lr = learning_rate
        self.start()

    @classmethod
    def from_params(cls, params: Any, n_features: int, feature_names: Sequence[str] | None,
                    reg: np.ndarray) -> TreeConstraints | None:
        mono = monotone_array(params.monotone_constraints, n_features, feature_names)
        inter = None
        if params.interaction_constraints:
            inter = [[_feature_index("interaction_constraints", f, feature_names, n_features)
                      for f in s] for s in params.interaction_constraints]
        if mono is None and inter is None:
            return None
        return cls(n_features, mono, inter, reg, params.learning_rate)

    def start(self) -> None:
        """A new tree: only the root, unbounded, with an empty path."""
        self.lower = {0: -np.inf}
        self.upper = {0: np.inf}
        self.path: dict[int, frozenset] = {0: frozenset()}

    def allowed(self, node: int) -> np.ndarray:
        """bool (F,): the features `node` may split on under the interaction constraints."""
        mask = np.ones(self.n_features, bool)
        path = self.path[node]
        if self.sets is None or not path:
            return mask
        mask[:] = False
        mask[list(path)] = True
        for s in self.sets:
            if path <= s:
                mask[list(s)] = True
        return mask

    def masks(self, nodes: list[int], masks: np.ndarray) -> np.ndarray:
        """The column-sampling masks (k, F) of `nodes` less the features they may not use."""
        if self.sets is None:
            return masks
        return masks & np.stack([self.allowed(i) for i in nodes])

    def search_args(self, nodes: list[int]) -> tuple | None:
        """The `find_best_splits` monotone argument of `nodes` (None: no monotone ones)."""
        if self.monotone is None:
            return None
        return (self.monotone, np.array([self.lower[i] for i in nodes], np.float64),
                np.array([self.upper[i] for i in nodes], np.float64))

    def _clipped(self, node: int, totals: np.ndarray) -> float:
        w = float(leaf_weight(totals[0], totals[1], self.reg))
        return min(max(w, self.lower[node]), self.upper[node])

    def split(self, parent: int, feature: int, left: int, right: int, lt: np.ndarray,
              rt: np.ndarray) -> tuple[float, float]:
        """Record the split of `parent` on `feature` into left, right (sums lt, rt); return the
        children's values (weights clipped to their bounds, times the learning rate)."""
        path = self.path[parent] | {feature}
        self.path[left] = self.path[right] = path
        lo, hi = self.lower[parent], self.upper[parent]
        self.lower[left] = self.lower[right] = lo
        self.upper[left] = self.upper[right] = hi
        if self.monotone is None:
            return (float(leaf_weight(lt[0], lt[1], self.reg)) * self.lr,
                    float(leaf_weight(rt[0], rt[1], self.reg)) * self.lr)
        wl = self._clipped(parent, lt)
        wr = self._clipped(parent, rt)
        c = int(self.monotone[feature])
        mid = 0.5 * (wl + wr)
        if c > 0:
            self.upper[left] = self.lower[right] = mid
        elif c < 0:
            self.lower[left] = self.upper[right] = mid
        return self._clipped(left, lt) * self.lr, self._clipped(right, rt) * self.lr
