"""Regression objectives."""

from __future__ import annotations

import numpy as np

from .base import Objective


class SquaredError(Objective):
    """reg:squarederror: 1/2 (margin - y)^2; gradient margin - y, hessian 1."""

    default_metric = "rmse"
    loss = "squared_error"

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        return np.array([np.average(y, weights=w)])
