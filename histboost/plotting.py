"""Plots of a model (matplotlib, the ``plot`` extra): `plot_importance`, `plot_tree` (and
`to_graphviz` with the ``graphviz`` package), `plot_metric` and `plot_shap_summary` (a SHAP
beeswarm). Each takes an optional ``ax`` and returns the matplotlib `Axes` it drew on; a Booster
argument may also be a fitted scikit-learn estimator of `histboost.sklearn`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .explain.nodes import node_tree


def _booster(model: Any) -> Any:
    return model.get_booster() if hasattr(model, "get_booster") else model


def _axes(ax: Any, figsize: tuple[float, float] | None = None) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_importance(model: Any, ax: Any = None, importance_type: str = "weight",
                    max_num_features: int | None = None, height: float = 0.2,
                    title: str | None = "Feature importance", xlabel: str | None = None,
                    ylabel: str | None = "Features", show_values: bool = True,
                    grid: bool = True, **bar_kwargs: Any) -> Any:
    """Horizontal bars of `Booster.get_score(importance_type)` (as XGBoost's, default
    ``weight``), the largest on top; `max_num_features` keeps the largest ones."""
    score = _booster(model).get_score(importance_type=importance_type)
    if not score:
        raise ValueError("the model has no splits: no importance to plot")
    items = sorted(score.items(), key=lambda kv: kv[1])
    if max_num_features is not None:
        items = items[-max_num_features:]
    labels, values = zip(*items, strict=True)
    ax = _axes(ax)
    ylocs = np.arange(len(values))
    ax.barh(ylocs, values, align="center", height=height, **bar_kwargs)
    if show_values:
        for y, v in zip(ylocs, values, strict=True):
            ax.text(v + max(values) * 0.01, y, f"{v:.4g}", va="center")
    ax.set_yticks(ylocs)
    ax.set_yticklabels(labels)
    ax.set_xlim(0, max(values) * 1.1)
    ax.set_ylim(-1, len(values))
    if title:
        ax.set_title(title)
    ax.set_xlabel(xlabel if xlabel is not None else importance_type)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(grid)
    return ax


def _node_labels(booster: Any, tree_idx: int, precision: int) -> tuple[Any, list[str]]:
    t = node_tree(booster.trees[tree_idx])
    names = booster.feature_names
    labels = []
    for i in range(t.left_child.shape[0]):
        if t.left_child[i] == -1:
            labels.append(f"leaf={t.value[i]:.{precision}g}")
        else:
            labels.append(f"{names[int(t.split_feature[i])]}<={t.threshold[i]:.{precision}g}")
    return t, labels


def _edge_label(t: Any, node: int, left: bool) -> str:
    missing = bool(t.default_left[node]) == left
    return ("yes" if left else "no") + (", missing" if missing else "")


def plot_tree(model: Any, tree_idx: int = 0, ax: Any = None, precision: int = 4,
              fontsize: float = 8, **kwargs: Any) -> Any:
    """Draw tree `tree_idx` with matplotlib alone: split boxes ("feature<=threshold"), leaf
    boxes ("leaf=value"), edges labelled yes / no with the default (missing) side marked.
    Oblivious trees are drawn as their node trees."""
    booster = _booster(model)
    t, labels = _node_labels(booster, tree_idx, precision)
    left, right = t.left_child, t.right_child
    n = left.shape[0]
    x = np.zeros(n)
    depth = np.zeros(n, np.int64)
    order = 0

    def place(node: int, d: int) -> None:  # leaves left to right, parents centred
        nonlocal order
        depth[node] = d
        if left[node] == -1:
            x[node] = order
            order += 1
            return
        place(int(left[node]), d + 1)
        place(int(right[node]), d + 1)
        x[node] = (x[left[node]] + x[right[node]]) / 2

    place(0, 0)
    ax = _axes(ax, figsize=kwargs.pop("figsize", (max(6, order * 1.2), max(4, depth.max() * 1.4))))
    for i in range(n):
        if left[i] == -1:
            continue
        for child, is_left in ((int(left[i]), True), (int(right[i]), False)):
            ax.annotate("", xy=(x[child], -depth[child]), xytext=(x[i], -depth[i]),
                        arrowprops={"arrowstyle": "->", "color": "0.4",
                                    "shrinkA": 12, "shrinkB": 12})
            ax.text((x[i] + x[child]) / 2, -(depth[i] + depth[child]) / 2,
                    _edge_label(t, i, is_left), fontsize=fontsize * 0.85, ha="center",
                    va="center", color="0.3", gid="edge")
    for i in range(n):
        leaf = left[i] == -1
        ax.text(x[i], -depth[i], labels[i], ha="center", va="center", fontsize=fontsize,
                gid="leaf" if leaf else "split",
                bbox={"boxstyle": "round" if leaf else "square", "fc": "#e8f4e8" if leaf
                      else "#e8eef8", "ec": "0.3"})
    ax.set_xlim(-0.8, max(order - 1, 0) + 0.8)
    ax.set_ylim(-depth.max() - 0.6, 0.6)
    ax.set_axis_off()
    return ax


def to_graphviz(model: Any, tree_idx: int = 0, precision: int = 4, rankdir: str = "TB",
                **graph_attr: Any) -> Any:
    """Tree `tree_idx` as a `graphviz.Digraph` (needs the ``graphviz`` Python package; to
    render it, the Graphviz binaries)."""
    import graphviz

    booster = _booster(model)
    t, labels = _node_labels(booster, tree_idx, precision)
    g = graphviz.Digraph(graph_attr={"rankdir": rankdir, **graph_attr})
    for i, label in enumerate(labels):
        leaf = t.left_child[i] == -1
        g.node(str(i), label, shape="box" if leaf else "ellipse")
        if not leaf:
            for child, is_left in ((int(t.left_child[i]), True), (int(t.right_child[i]), False)):
                g.edge(str(i), str(child), _edge_label(t, i, is_left),
                       color="#0000FF" if is_left else "#FF0000")
    return g


def plot_metric(evals_result: Any, metric: str | None = None, ax: Any = None,
                title: str | None = "Metric during training", xlabel: str = "Iterations",
                ylabel: str | None = None, grid: bool = True) -> Any:
    """One line per evaluation set of ``evals_result`` (``{"set": {"metric": [values]}}``,
    as `histboost.train` fills it, or an estimator's ``evals_result()``); `metric` picks one
    when there are several (default: the first)."""
    if hasattr(evals_result, "evals_result"):
        evals_result = evals_result.evals_result()
    if not evals_result:
        raise ValueError("evals_result is empty")
    ax = _axes(ax)
    for name, metrics in evals_result.items():
        if not metrics:
            continue
        m = metric if metric is not None else next(iter(metrics))
        if m not in metrics:
            raise ValueError(f"metric {m!r} is not in {sorted(metrics)} of {name!r}")
        ax.plot(np.arange(len(metrics[m])), metrics[m], label=name)
        ylabel = ylabel or m
    ax.legend(loc="best")
    if title:
        ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or "")
    ax.grid(grid)
    return ax


def plot_shap_summary(shap_values: np.ndarray, features: Any, feature_names: Any = None,
                      max_display: int = 20, ax: Any = None, cmap: str = "coolwarm",
                      seed: int = 0) -> Any:
    """Beeswarm summary of SHAP values: one row per feature (the largest mean |SHAP| on top),
    a point per sample at its SHAP value, coloured by the feature's value (low blue, high
    red, missing grey). `shap_values`: (n, F) or (n, F+1) from ``predict(pred_contribs=True)``
    (the bias column is dropped); for a multiclass model pass one class, ``values[:, k]``."""
    sv = np.asarray(shap_values, dtype=np.float64)
    if sv.ndim != 2:
        raise ValueError("shap_values must be (n, F) or (n, F+1): pass one class of a "
                         "multiclass model's values")
    if hasattr(features, "columns") and feature_names is None:
        feature_names = [str(c) for c in features.columns]
    X = np.asarray(features.to_numpy() if hasattr(features, "to_numpy") else features,
                   dtype=np.float64)
    if sv.shape[1] == X.shape[1] + 1:
        sv = sv[:, :-1]
    if sv.shape != X.shape:
        raise ValueError(f"shap_values {sv.shape} and features {X.shape} differ")
    names = list(feature_names) if feature_names is not None else [
        f"f{i}" for i in range(X.shape[1])]
    order = np.argsort(np.abs(sv).mean(0))[::-1][:max_display][::-1]  # largest on top
    ax = _axes(ax, figsize=(8, 0.4 * len(order) + 1.5))
    rng = np.random.default_rng(seed)
    import matplotlib as mpl
    cm = mpl.colormaps[cmap]
    for row, f in enumerate(order):
        v, xs = sv[:, f], X[:, f]
        y = row + _swarm_offsets(v, rng)
        finite = ~np.isnan(xs)
        lo, hi = (np.nanpercentile(xs, 5), np.nanpercentile(xs, 95)) if finite.any() else (0, 1)
        c = np.clip((xs - lo) / (hi - lo), 0, 1) if hi > lo else np.full(xs.shape, 0.5)
        colors = cm(np.nan_to_num(c, nan=0.5))
        colors[~finite] = (0.6, 0.6, 0.6, 1.0)
        ax.scatter(v, y, c=colors, s=10, alpha=0.8, linewidths=0, rasterized=len(v) > 500)
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(np.arange(len(order)))
    ax.set_yticklabels([names[f] for f in order])
    ax.set_ylim(-0.7, len(order) - 0.3)
    ax.set_xlabel("SHAP value (impact on the margin)")
    sm = mpl.cm.ScalarMappable(cmap=cm)
    cbar = ax.figure.colorbar(sm, ax=ax, ticks=[0, 1], aspect=40)
    cbar.set_ticklabels(["low", "high"])
    cbar.set_label("feature value")
    return ax


def _swarm_offsets(v: np.ndarray, rng: np.random.Generator, width: float = 0.4) -> np.ndarray:
    """Vertical offsets that spread points where SHAP values are dense (a beeswarm by
    histogram: within a bin, points alternate above and below the row)."""
    n = v.shape[0]
    if n == 0:
        return np.zeros(0)
    bins = np.linspace(v.min(), v.max() + 1e-12, 100)
    idx = np.digitize(v, bins)
    counts = np.bincount(idx)
    out = np.zeros(n)
    seen = np.zeros_like(counts)
    for i in rng.permutation(n):
        b = idx[i]
        k = seen[b]
        seen[b] += 1
        out[i] = (np.ceil(k / 2) * (1 if k % 2 else -1)) / max(counts.max(), 1)
    return out * width * 2
