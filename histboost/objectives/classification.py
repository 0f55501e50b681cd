"""Classification objectives: logistic and softmax."""

from __future__ import annotations

import numpy as np

from .base import Objective


def sigmoid(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x, dtype=np.float64)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


class Logistic(Objective):
    """binary:logistic: log loss on sigmoid(margin); labels in [0, 1]."""

    default_metric = "logloss"
    loss = "logistic"
    intercept_from_mean = True

    def check_label(self, y: np.ndarray) -> None:
        # two reductions: the masks of (y < 0) | (y > 1) cost more than the passes
        if y.size and (y.min() < 0 or y.max() > 1):
            bad = y[(y < 0) | (y > 1)][0]
            raise ValueError(f"labels must be in [0, 1] for {self.name}, found {bad!r}")

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        p = float(np.clip(np.average(y, weights=w), 1e-6, 1 - 1e-6))
        return np.array([np.log(p / (1 - p))])

    def score_to_margin(self, base_score: float) -> np.ndarray:
        return np.array([np.log(base_score / (1 - base_score))])

    def transform(self, margin: np.ndarray) -> np.ndarray:
        return sigmoid(margin[:, 0])


class LogitRaw(Logistic):
    """binary:logitraw: as binary:logistic, predictions are margins."""

    default_metric = "auc"

    def transform(self, margin: np.ndarray) -> np.ndarray:
        return margin[:, 0]


def softmax(margin: np.ndarray) -> np.ndarray:
    z = margin - margin.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class Softmax(Objective):
    """multi:softprob / multi:softmax: cross-entropy over `num_class` margins; labels are
    integers 0..num_class-1. Hessian 2 p (1 - p) as XGBoost uses."""

    default_metric = "mlogloss"
    loss = "softmax"
    intercept_from_mean = True

    @property
    def n_outputs(self) -> int:
        return self.num_class

    def check_label(self, y: np.ndarray) -> None:
        if np.any((y < 0) | (y >= self.num_class) | (y != np.floor(y))):
            bad = y[(y < 0) | (y >= self.num_class) | (y != np.floor(y))][0]
            raise ValueError(f"labels must be integers in [0, {self.num_class - 1}] for "
                             f"{self.name}, found {bad!r}")

    def score_to_margin(self, base_score: float) -> np.ndarray:
        return np.full(self.num_class, float(base_score))

    def transform(self, margin: np.ndarray) -> np.ndarray:
        if self.name == "multi:softmax":
            return np.argmax(margin, axis=1).astype(np.float64)
        return softmax(margin)
