"""Evaluation metrics on predictions (after the objective's transform) or margins.

Each metric is ``metric(y, pred, weight) -> float`` with y float64 (n,) labels, weight float64
(n,) or None, and pred as the objective outputs it for the metric: float64 (n,) probabilities
for logloss / auc / error, (n, K) class probabilities for mlogloss / merror, values or margins
for rmse / mae.

Most metrics are a weighted mean of a per-row loss, finished by a transform (rmse: the square
root): `METRIC_SUMS` gives their ``(sum of w * loss, sum of w)``, which workers holding
different rows add up (`histboost.distributed`) to the metric of all rows. Ranking metrics
(auc) need all rows at once and are computed on the rows gathered from every worker.

Some metrics are undefined on some data (AUC when the labels hold one class, any metric when
every weight is zero). `check_metrics_defined` says so, naming the metric and the evaluation
set, before training starts, instead of the metric returning NaN every round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

_EPS = 1e-15

Metric = Callable[[np.ndarray, np.ndarray, np.ndarray | None], float]
# per-row losses float64 (n,) of labels y (n,) and predictions p
RowLoss = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _squared_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (p - y) ** 2


def _absolute_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs(p - y)


def _log_loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1 - _EPS)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def _binary_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return ((p > 0.5) != (y > 0.5)).astype(np.float64)


def _multi_log_loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(p[np.arange(y.shape[0]), y.astype(np.int64)], _EPS, 1.0))


def _multi_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (np.argmax(p, axis=1) != y.astype(np.int64)).astype(np.float64)


# name: (per-row loss, transform of the weighted mean)
_MEAN_METRICS: dict[str, tuple[RowLoss, Callable[[float], float]]] = {
    "rmse": (_squared_error, np.sqrt),
    "mae": (_absolute_error, float),
    "logloss": (_log_loss, float),
    "error": (_binary_error, float),
    "mlogloss": (_multi_log_loss, float),
    "merror": (_multi_error, float),
}


def metric_sums(name: str, y: np.ndarray, p: np.ndarray,
                w: np.ndarray | None = None) -> np.ndarray:
    """float64 (2,): (sum of w * loss, sum of w) of mean metric `name` over these rows; the
    sums of disjoint row sets add up to the sums of their union."""
    loss = _MEAN_METRICS[name][0](y, p)
    if w is None:
        return np.array([float(np.sum(loss)), float(loss.shape[0])])
    return np.array([float(np.dot(w, loss)), float(np.sum(w))])


def finish_metric(name: str, sums: np.ndarray) -> float:
    """Mean metric `name` from its (sum of w * loss, sum of w)."""
    return float(_MEAN_METRICS[name][1](sums[0] / sums[1]))


def _mean_metric(name: str, doc: str) -> Metric:
    def metric(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
        return finish_metric(name, metric_sums(name, y, p, w))

    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = doc
    return metric


rmse = _mean_metric("rmse", "Root of the (weighted) mean squared error of predictions p (n,).")
mae = _mean_metric("mae", "(Weighted) mean absolute error of predictions p (n,).")
logloss = _mean_metric(
    "logloss", "(Weighted) mean negative log-likelihood of probabilities p (n,) for labels in "
    "[0, 1]; p is clipped to [1e-15, 1 - 1e-15].")
error = _mean_metric(
    "error", "(Weighted) fraction of rows where ``p > 0.5`` disagrees with ``y > 0.5``.")
mlogloss = _mean_metric(
    "mlogloss", "(Weighted) mean negative log-probability p (n, K) of the true classes y "
    "(integers in [0, K)); probabilities are clipped below at 1e-15.")
merror = _mean_metric(
    "merror", "(Weighted) fraction of rows whose most probable class in p (n, K) is not y.")


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


METRICS: dict[str, Metric] = {
    "rmse": rmse, "mae": mae, "logloss": logloss, "error": error, "auc": auc,
    "mlogloss": mlogloss, "merror": merror,
}
# metrics that are a weighted mean of a per-row loss (`metric_sums`); the others need all rows
MEAN_METRICS = frozenset(_MEAN_METRICS)
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


def set_facts(y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """float64 (3,): the facts about an evaluation set that decide whether a metric is
    defined: (weight of the counted rows, of their positives (> 0.5), of their negatives).
    Facts of disjoint row sets add up (workers sum theirs)."""
    counted = np.ones(y.shape, np.float64) if w is None else np.asarray(w, np.float64)
    positive = y > 0.5
    return np.array([counted.sum(), counted[positive].sum(), counted[~positive].sum()])


def _undefined_because(name: str, y: np.ndarray, facts: np.ndarray,
                       n_outputs: int) -> str | None:
    """Why metric `name` cannot be computed on labels y (n,) of a set with `set_facts`
    `facts` (of this set, or of all workers' parts of it), or None."""
    if not facts[0] > 0:
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
    if name == "auc" and not (facts[1] > 0 and facts[2] > 0):
        which = "positive (> 0.5)" if facts[1] > 0 else "negative (<= 0.5)"
        return (f"every label is {which}: AUC needs both classes (choose another "
                "eval_metric, such as logloss, or an evaluation set with both classes)")
    return None


def check_metrics_defined(metrics: Sequence[str], y: np.ndarray, w: np.ndarray | None,
                          n_outputs: int, data_name: str,
                          facts: np.ndarray | None = None) -> None:
    """Raise ValueError naming the metric and the evaluation set if any of `metrics` is
    undefined on labels y float64 (n,) with weights w float64 (n,) or None, for a model of
    `n_outputs` margins per row (instead of a NaN every round, or a crash mid-training).
    facts: the set's `set_facts` summed over every worker's rows (default: these rows')."""
    if facts is None:
        facts = set_facts(y, w)
    for name in metrics:
        reason = _undefined_because(name, y, facts, n_outputs)
        if reason is not None:
            raise ValueError(f"eval_metric {name!r} is undefined on evaluation set "
                             f"{data_name!r}: {reason}")


__all__ = ["MAXIMIZE", "MEAN_METRICS", "METRICS", "MULTICLASS", "Metric", "auc",
           "check_metrics_defined", "error", "finish_metric", "get_metric", "logloss", "mae",
           "merror", "metric_sums", "mlogloss", "rmse", "set_facts"]
