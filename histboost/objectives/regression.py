"""Regression objectives."""

from __future__ import annotations

import numpy as np

from ..kernels.cpu.gradients import squared_error_pairs
from .base import Objective, run_pair_kernel


class SquaredError(Objective):
    """reg:squarederror: 1/2 (margin - y)^2; gradient margin - y, hessian 1."""

    default_metric = "rmse"

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        return np.array([np.average(y, weights=w)])

    def gradients(self, margin, y, w):
        grad = margin[:, 0] - y
        hess = np.ones_like(grad)
        if w is not None:
            grad = grad * w
            hess = hess * w
        return grad[:, None], hess[:, None]

    def gradient_pairs(self, margin, y, w):
        return run_pair_kernel(squared_error_pairs, margin, y, w, 1)
