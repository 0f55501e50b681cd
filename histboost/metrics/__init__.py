"""Evaluation metrics on predictions (after the objective's transform) or margins.

Each metric takes (y, pred, weight) with pred as the objective outputs it for the metric:
probabilities for logloss/auc/error, class probabilities (n, K) for mlogloss/merror.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_EPS = 1e-15


def rmse(y, p, w=None) -> float:
    return float(np.sqrt(np.average((p - y) ** 2, weights=w)))


def mae(y, p, w=None) -> float:
    return float(np.average(np.abs(p - y), weights=w))


def logloss(y, p, w=None) -> float:
    p = np.clip(p, _EPS, 1 - _EPS)
    return float(np.average(-(y * np.log(p) + (1 - y) * np.log(1 - p)), weights=w))


def error(y, p, w=None) -> float:
    return float(np.average((p > 0.5) != (y > 0.5), weights=w))


def auc(y, p, w=None) -> float:
    """Weighted ROC AUC with ties counted half (trapezoid over tie groups)."""
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


def mlogloss(y, p, w=None) -> float:
    p = np.clip(p[np.arange(y.shape[0]), y.astype(np.int64)], _EPS, 1.0)
    return float(np.average(-np.log(p), weights=w))


def merror(y, p, w=None) -> float:
    return float(np.average(np.argmax(p, axis=1) != y.astype(np.int64), weights=w))


METRICS: dict[str, Callable[..., float]] = {
    "rmse": rmse, "mae": mae, "logloss": logloss, "error": error, "auc": auc,
    "mlogloss": mlogloss, "merror": merror,
}
# metrics where larger is better (early stopping direction)
MAXIMIZE = {"auc"}
# metrics computed on multiclass probability matrices
MULTICLASS = {"mlogloss", "merror"}


def get_metric(name: str) -> Callable[..., float]:
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown eval_metric {name!r}; choose from {sorted(METRICS)}") from None
