"""Evaluation metrics on predictions (after the objective's transform) or margins.

Each metric is ``metric(y, pred, weight) -> float`` with y float64 (n,) labels, weight float64
(n,) or None, and pred as the objective outputs it for the metric: float64 (n,) probabilities
for logloss / auc / error, (n, K) class probabilities for mlogloss / merror, values or margins
for rmse / mae.

Some metrics are undefined on some data (AUC when the labels hold one class, any metric when
every weight is zero). `check_metrics_defined` says so, naming the metric and the evaluation
set, before training starts, instead of the metric returning NaN every round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

_EPS = 1e-15

Metric = Callable[[np.ndarray, np.ndarray, np.ndarray | None], float]


def rmse(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """Root of the (weighted) mean squared error of predictions p (n,)."""
    return float(np.sqrt(np.average((p - y) ** 2, weights=w)))


def mae(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """(Weighted) mean absolute error of predictions p (n,)."""
    return float(np.average(np.abs(p - y), weights=w))


def logloss(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """(Weighted) mean negative log-likelihood of probabilities p (n,) for labels in [0, 1];
    p is clipped to [1e-15, 1 - 1e-15]."""
    p = np.clip(p, _EPS, 1 - _EPS)
    return float(np.average(-(y * np.log(p) + (1 - y) * np.log(1 - p)), weights=w))


def error(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """(Weighted) fraction of rows where ``p > 0.5`` disagrees with ``y > 0.5``."""
    return float(np.average((p > 0.5) != (y > 0.5), weights=w))


def auc(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """Weighted ROC AUC of scores p (n,), positives ``y > 0.5``, ties counted half (trapezoid
    over tie groups). NaN when the labels hold one class: see `check_metrics_defined`."""
    w = np.ones_like(y, dtype=np.float64) if w is None else np.asarray(w, np.float64)
    order = np.argsort(-p, kind="mergesort")
    ps, ys, ws = p[order], y[order], w[order]
    pos = ws * (ys > 0.5)
    neg = ws * (ys <= 0.5)
    # tie groups: last index of each run of equal scores
    ends = np.r_[np.flatnonzero(np.diff(ps) != 0), ps.size - 1]
    tp = np.cumsum(pos)[ends]
    fp = np.cumsum(neg)[ends]
    tp = np.r_[0.0, tp]
    fp = np.r_[0.0, fp]
    if tp[-1] <= 0 or fp[-1] <= 0:
        return float("nan")
    area = np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1]) / 2.0)
    return float(area / (tp[-1] * fp[-1]))


def mlogloss(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """(Weighted) mean negative log-probability p (n, K) of the true classes y (integers in
    [0, K)); probabilities are clipped below at 1e-15."""
    p = np.clip(p[np.arange(y.shape[0]), y.astype(np.int64)], _EPS, 1.0)
    return float(np.average(-np.log(p), weights=w))


def merror(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """(Weighted) fraction of rows whose most probable class in p (n, K) is not y."""
    return float(np.average(np.argmax(p, axis=1) != y.astype(np.int64), weights=w))


METRICS: dict[str, Metric] = {
    "rmse": rmse, "mae": mae, "logloss": logloss, "error": error, "auc": auc,
    "mlogloss": mlogloss, "merror": merror,
}
# metrics where larger is better (early stopping direction)
MAXIMIZE = {"auc"}
# metrics computed on multiclass probability matrices
MULTICLASS = {"mlogloss", "merror"}


def get_metric(name: str) -> Metric:
    """The metric function called `name`; ValueError naming the choices for an unknown one."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown eval_metric {name!r}; choose from {sorted(METRICS)}") from None


def _undefined_because(name: str, y: np.ndarray, w: np.ndarray | None,
                       n_outputs: int) -> str | None:
    """Why metric `name` cannot be computed on labels y (n,) with weights w, or None."""
    if w is not None and not np.any(w > 0):
        return "every weight of the set is zero"
    if name in MULTICLASS:
        if n_outputs < 2:
            return "it needs a multi-class objective (multi:softprob / multi:softmax)"
        bad = (y < 0) | (y >= n_outputs) | (y != np.floor(y))
        if np.any(bad):
            return (f"it needs integer labels in [0, {n_outputs - 1}], found "
                    f"{float(y[bad][0])!r}")
    elif n_outputs > 1:
        return (f"it scores one output per row and this model has {n_outputs}; use "
                f"{' or '.join(sorted(MULTICLASS))}")
    if name == "logloss" and np.any((y < 0) | (y > 1)):
        return f"it needs labels in [0, 1], found {float(y[(y < 0) | (y > 1)][0])!r}"
    if name == "auc":
        counted = np.ones(y.shape, bool) if w is None else w > 0
        positive = y > 0.5
        if np.all(positive[counted]) or not np.any(positive[counted]):
            which = "positive (> 0.5)" if np.any(positive[counted]) else "negative (<= 0.5)"
            return (f"every label is {which}: AUC needs both classes (choose another "
                    "eval_metric, such as logloss, or an evaluation set with both classes)")
    return None


def check_metrics_defined(metrics: Sequence[str], y: np.ndarray, w: np.ndarray | None,
                          n_outputs: int, data_name: str) -> None:
    """Raise ValueError naming the metric and the evaluation set if any of `metrics` is
    undefined on labels y float64 (n,) with weights w float64 (n,) or None, for a model of
    `n_outputs` margins per row (instead of a NaN every round, or a crash mid-training)."""
    for name in metrics:
        reason = _undefined_because(name, y, w, n_outputs)
        if reason is not None:
            raise ValueError(f"eval_metric {name!r} is undefined on evaluation set "
                             f"{data_name!r}: {reason}")


__all__ = ["MAXIMIZE", "METRICS", "MULTICLASS", "Metric", "auc", "check_metrics_defined",
           "error", "get_metric", "logloss", "mae", "merror", "mlogloss", "rmse"]
