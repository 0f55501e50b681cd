"""Objective interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Objective:
    """A twice-differentiable loss on margins.

    Margins are float64 (n, K) with K = `n_outputs`. A built-in loss names its fused gradient
    kernel in `loss`; every backend implements those kernels (`compute_gradients`), so the
    gradients are computed where the margins live. A custom objective (``loss is None``)
    computes them on the host with `gradient_pairs`.
    """

    default_metric = "rmse"
    loss: str | None = None

    def __init__(self, name: str, num_class: int = 1) -> None:
        self.name = name
        self.num_class = num_class

    @property
    def n_outputs(self) -> int:
        return 1

    def check_label(self, y: np.ndarray) -> None:
        """Raise ValueError if the labels cannot be used with this objective."""

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        """float64 (K,): the constant margin that best fits the labels (the intercept)."""
        return np.zeros(self.n_outputs)

    def score_to_margin(self, base_score: float) -> np.ndarray:
        """A user's `base_score` (in prediction space) as margins (K,)."""
        return np.full(self.n_outputs, float(base_score))

    def transform(self, margin: np.ndarray) -> np.ndarray:
        """Margins (n, K) to predictions ((n,) when K == 1)."""
        return margin[:, 0] if margin.shape[1] == 1 else margin


class CustomObjective(Objective):
    """Wraps a user callable ``obj(preds, dtrain) -> (grad, hess)`` working on raw margins
    ((n,) for one output, (n, K) otherwise), as XGBoost's `obj=` argument."""

    def __init__(self, func: Callable[[np.ndarray, Any], tuple[Any, Any]], num_class: int,
                 dtrain: Any) -> None:
        super().__init__("custom", num_class)
        self.func = func
        self.dtrain = dtrain

    @property
    def n_outputs(self) -> int:
        return self.num_class if self.num_class > 1 else 1

    def gradient_pairs(self, margin: np.ndarray) -> np.ndarray:
        """float32 (K, n, 2) (gradient, hessian) pairs of the user's function at float64
        margins (n, K), checked (finite, hessians >= 0)."""
        preds = margin[:, 0].copy() if margin.shape[1] == 1 else margin.copy()
        grad, hess = self.func(preds, self.dtrain)
        grad = np.asarray(grad, dtype=np.float64).reshape(margin.shape)
        hess = np.asarray(hess, dtype=np.float64).reshape(margin.shape)
        if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))):
            raise ValueError("custom objective returned NaN or infinite gradients/hessians")
        big = float(np.finfo(np.float32).max)
        if np.any(np.abs(grad) > big) or np.any(hess > big):
            raise ValueError("custom objective returned gradients or hessians beyond float32's "
                             "range (|value| > 3.4e38); rescale the loss")
        if np.any(hess < 0):
            raise ValueError("custom objective returned negative hessians")
        return np.ascontiguousarray(np.stack([grad.T, hess.T], axis=2), dtype=np.float32)
