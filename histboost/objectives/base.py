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
    # the intercept depends on the labels only through their weighted mean (distributed
    # training computes it from the all-ranks mean)
    intercept_from_mean = False
    # not None: after a tree is grown, each leaf is refreshed to this weighted quantile of
    # its rows' residuals y - margin (times the learning rate), as XGBoost does
    leaf_alpha: float | None = None
    # what a Dataset must carry for this objective (named when it has no labels)
    label_hint = ""

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        self.name = name
        self.num_class = num_class
        self.params = params

    @property
    def n_outputs(self) -> int:
        return 1

    def labels(self, data: Any) -> np.ndarray | None:
        """What the loss and its metrics score for `Dataset` data: float64 (n,) labels
        (interval objectives: (n, 2) bounds); None when the Dataset has none."""
        return data.label

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


class HostObjective(Objective):
    """A built-in objective whose gradient pairs are computed on the host in float64 from the
    margins, labels and weights bound by `bind` (``loss is None``)."""

    def bind(self, y: np.ndarray, w: np.ndarray | None, group: np.ndarray | None = None
             ) -> None:
        """Take the training labels, weights and query sizes (ranking) of `gradient_pairs`."""
        self._y = np.asarray(y, np.float64)
        self._w = None if w is None else np.asarray(w, np.float64)
        self._group = group

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unweighted float64 (gradient, hessian) (n,) at margins m (n,) for labels y (n,)."""
        raise NotImplementedError

    def weighted_grad_hess(self, m: np.ndarray, y: np.ndarray,
                           w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Weighted (gradient, hessian) (n,) at margins m (n,) (one-output objectives)."""
        g, h = self.grad_hess(m, y)
        if w is not None:
            g, h = g * w, h * w
        return g, h

    def gradient_pairs(self, margin: np.ndarray, iteration: int = 0) -> np.ndarray:
        """float32 (K, n, 2) pairs at float64 margins (n, K) for the bound labels in boosting
        round `iteration` (objectives that draw random numbers key them by it)."""
        g, h = self.weighted_grad_hess(margin[:, 0], self._y, self._w)
        out = np.empty((1, g.shape[0], 2), np.float32)
        out[0, :, 0] = g
        out[0, :, 1] = h
        return out

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        """XGBoost's default intercept: one unregularised Newton step from margin 0 (-G/H),
        in margin space."""
        g, h = self.weighted_grad_hess(np.zeros(y.shape[0]), y, w)
        hs = float(np.sum(h))
        return np.array([-float(np.sum(g)) / hs if hs > 0 else 0.0])


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

    def gradient_pairs(self, margin: np.ndarray, iteration: int = 0) -> np.ndarray:
        """float32 (K, n, 2) (gradient, hessian) pairs of the user's function at float64
        margins (n, K), checked (finite, hessians >= 0); `iteration` is not used."""
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
