"""Regression objectives (XGBoost's formulas and intercepts).

Squared error has a fused gradient kernel on every backend (`loss`); the others compute their
gradient pairs on the host from float64 margins (`HostObjective.grad_hess`) and hand them to
the backend (`Backend.set_gradients`).

Intercepts as XGBoost 3 estimates them: log-link objectives (Poisson, Gamma, Tweedie) the log
of the weighted mean label; absolute and quantile error the weighted median / quantile of the
labels; the others one unregularised Newton step from margin 0 (XGBoost's ``FitStump``).
Absolute and quantile error refresh every leaf to the weighted quantile of the residuals of its
rows after the tree is grown (`leaf_alpha`), as XGBoost does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import HostObjective, Objective


class SquaredError(Objective):
    """reg:squarederror: 1/2 (margin - y)^2; gradient margin - y, hessian 1."""

    default_metric = "rmse"
    loss = "squared_error"
    intercept_from_mean = True

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        return np.array([np.average(y, weights=w)])


def weighted_quantile(v: np.ndarray, alpha: float, w: np.ndarray | None = None) -> float:
    """XGBoost's (weighted) quantile: unweighted, linear interpolation at alpha (n + 1)
    (``common::Quantile``); weighted, the first value whose weight CDF reaches alpha times the
    total (``common::WeightedQuantile``). NaN for no values."""
    n = v.shape[0]
    if n == 0:
        return float("nan")
    if w is None:
        s = np.sort(v)
        if alpha <= 1.0 / (n + 1):
            return float(s[0])
        if alpha >= n / (n + 1.0):
            return float(s[-1])
        x = alpha * (n + 1)
        k = int(np.floor(x)) - 1
        d = (x - 1) - k
        return float(s[k] + d * (s[k + 1] - s[k]))
    order = np.argsort(v, kind="stable")
    cdf = np.cumsum(w[order])
    idx = min(int(np.searchsorted(cdf, alpha * cdf[-1], side="left")), n - 1)
    return float(v[order][idx])


class AbsoluteError(HostObjective):
    """reg:absoluteerror: |margin - y|; gradient sign(margin - y), hessian 1; leaves refreshed
    to the weighted median of their residuals."""

    default_metric = "mae"
    leaf_alpha = 0.5

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.sign(m - y), np.ones_like(m)

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        return np.array([weighted_quantile(y, self.leaf_alpha, w)])


class QuantileError(AbsoluteError):
    """reg:quantileerror (pinball loss at `quantile_alpha`): gradient 1 - alpha above the
    label, -alpha below, hessian 1; leaves refreshed to the alpha-quantile of their residuals.
    One quantile per model."""

    default_metric = "quantile"

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)
        self.leaf_alpha = float(getattr(params, "quantile_alpha", 0.5))

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = self.leaf_alpha
        return np.where(m - y >= 0, 1.0 - a, -a), np.ones_like(m)


class PseudoHuberError(HostObjective):
    """reg:pseudohubererror: slope^2 (sqrt(1 + (z / slope)^2) - 1), z = margin - y."""

    default_metric = "mphe"

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)
        self.slope = float(getattr(params, "huber_slope", 1.0))

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = m - y
        scale = 1.0 + (z / self.slope) ** 2
        root = np.sqrt(scale)
        return z / root, 1.0 / (scale * root)


class _LogLink(HostObjective):
    """Objectives predicting exp(margin); intercept log of the weighted mean label."""

    intercept_from_mean = True

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        mean = float(np.average(y, weights=w))
        return np.array([np.log(max(mean, 1e-16))])

    def score_to_margin(self, base_score: float) -> np.ndarray:
        return np.array([np.log(base_score)])

    def transform(self, margin: np.ndarray) -> np.ndarray:
        return np.exp(margin[:, 0])


class Poisson(_LogLink):
    """count:poisson: exp(m) - y m; hessian exp(m + max_delta_step) (XGBoost's safeguard;
    max_delta_step defaults to 0.7 with this objective, as in XGBoost)."""

    default_metric = "poisson-nloglik"

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)
        self.mds = float(getattr(params, "max_delta_step", 0.7))

    def check_label(self, y: np.ndarray) -> None:
        _need(y, y >= 0, self.name, "non-negative")

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.exp(m) - y, np.exp(m + self.mds)


class Gamma(_LogLink):
    """reg:gamma: y exp(-m) + m (gamma deviance up to constants), labels > 0."""

    default_metric = "gamma-nloglik"

    def check_label(self, y: np.ndarray) -> None:
        _need(y, y > 0, self.name, "positive")

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = y * np.exp(-m)
        return 1.0 - r, r


class Tweedie(_LogLink):
    """reg:tweedie with `tweedie_variance_power` rho in [1, 2): -y exp((1-rho) m) / (1-rho)
    + exp((2-rho) m) / (2-rho)."""

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)
        self.rho = float(getattr(params, "tweedie_variance_power", 1.5))

    @property
    def default_metric(self) -> str:  # type: ignore[override]
        return f"tweedie-nloglik@{self.rho:g}"

    def check_label(self, y: np.ndarray) -> None:
        _need(y, y >= 0, self.name, "non-negative")

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rho = self.rho
        a = np.exp((1.0 - rho) * m)
        b = np.exp((2.0 - rho) * m)
        return -y * a + b, -y * (1.0 - rho) * a + (2.0 - rho) * b


class SquaredLogError(HostObjective):
    """reg:squaredlogerror: 1/2 (log1p(m) - log1p(y))^2, labels > -1 (XGBoost clamps m at
    -1 + 1e-6 and the hessian at 1e-6)."""

    default_metric = "rmsle"

    def check_label(self, y: np.ndarray) -> None:
        _need(y, y > -1, self.name, "greater than -1")

    def grad_hess(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = np.maximum(m, -1.0 + 1e-6)
        res = np.log1p(m) - np.log1p(y)
        return res / (m + 1.0), np.maximum((1.0 - res) / (m + 1.0) ** 2, 1e-6)


class Cox(HostObjective):
    """survival:cox: negative partial log-likelihood of Cox proportional hazards (Breslow ties)
    on margins; labels are times, negative for right-censored rows. Predictions are hazard
    ratios exp(margin)."""

    default_metric = "cox-nloglik"

    def score_to_margin(self, base_score: float) -> np.ndarray:
        return np.array([np.log(base_score)])

    def transform(self, margin: np.ndarray) -> np.ndarray:
        return np.exp(margin[:, 0])

    def check_label(self, y: np.ndarray) -> None:
        _need(y, y != 0, self.name, "non-zero times (negative: censored)")

    def weighted_grad_hess(self, m: np.ndarray, y: np.ndarray,
                           w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        return cox_grad_hess(m, y, w)


def cox_grad_hess(m: np.ndarray, y: np.ndarray,
                  w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """XGBoost's Cox gradient (rows in order of |y|, risk sets shrink after each time)."""
    order = np.argsort(np.abs(y), kind="stable")
    e = np.exp(m[order])
    t = np.abs(y[order])
    event = (y[order] > 0).astype(np.float64)
    n = m.shape[0]
    # risk-set sum at row i: sum of exp over rows with |y| >= the time of i's tie group
    first = np.searchsorted(t, t, side="left")  # start of each row's tie group
    tail = np.concatenate([np.cumsum(e[::-1])[::-1], [0.0]])
    risk = tail[first]
    r = np.cumsum(event / risk)
    s = np.cumsum(event / (risk * risk))
    g = np.empty(n)
    h = np.empty(n)
    g[order] = e * r - event
    h[order] = e * r - e * e * s
    if w is not None:
        g *= w
        h *= w
    return g, h


def _need(y: np.ndarray, ok: np.ndarray, name: str, what: str) -> None:
    if not np.all(ok):
        raise ValueError(f"labels must be {what} for {name}, found {float(y[~ok][0])!r}")
