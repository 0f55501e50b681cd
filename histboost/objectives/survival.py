"""survival:aft, the accelerated failure time model (XGBoost's ``survival:aft``).

The model is log T = margin + sigma Z, with Z normal, logistic or extreme-value (minimum
Gumbel) distributed and sigma = ``aft_loss_distribution_scale``. A label is an interval
[lower, upper] of T: lower == upper for an observed time, upper = +inf for a right-censored
row, lower = 0 for a left-censored one, anything else interval-censored. The loss of a row is
the negative log-likelihood of its interval: -log(pdf(z) / (sigma T)) for an observed time
(z = (log T - margin) / sigma), -log(CDF(z_upper) - CDF(z_lower)) otherwise.

Gradients and hessians follow XGBoost's formulas and safeguards, so that models equal
XGBoost's: where a likelihood underflows (a denominator below 1e-12 and the ratio not finite)
the value is the limit for an infinitely wrong margin, gradients are clipped to [-15, 15] and
hessians to [1e-16, 15]. Predictions are exp(margin), times; the intercept is XGBoost's
log(0.5) (it does not fit one for this objective).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import HostObjective

GRAD_RANGE = (-15.0, 15.0)
HESS_RANGE = (1e-16, 15.0)
_TINY = 1e-12  # smallest likelihood (or denominator) used as such

# censoring kinds, the rows of the limit tables
UNCENSORED, RIGHT, LEFT, INTERVAL = 0, 1, 2, 3


class _Law:
    """A standard noise law on float64 arrays z: pdf, CDF and the pdf's first and second
    derivatives, with exp(z) overflowing to inf read as the limit (XGBoost's convention)."""

    name = ""

    def pdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def cdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def dpdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def d2pdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def limits(self, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        """float64 (4, 2) gradients and hessians of a row whose likelihood underflowed, by
        censoring kind (rows: UNCENSORED, RIGHT, LEFT, INTERVAL) and by whether the label lies
        above the margin (column 1) or not (column 0)."""
        raise NotImplementedError


class _Normal(_Law):
    name = "normal"

    def pdf(self, z: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)

    def cdf(self, z: np.ndarray) -> np.ndarray:
        from scipy.special import erf  # noqa: PLC0415 (scipy.special: 0.2 s to import)

        return 0.5 * (1.0 + erf(z / np.sqrt(2.0)))

    def dpdf(self, z: np.ndarray) -> np.ndarray:
        return -z * self.pdf(z)

    def d2pdf(self, z: np.ndarray) -> np.ndarray:
        return (z * z - 1.0) * self.pdf(z)

    def limits(self, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = GRAD_RANGE
        h, tiny = 1.0 / (sigma * sigma), HESS_RANGE[0]
        grad = np.array([[hi, lo], [0.0, lo], [hi, 0.0], [hi, lo]])
        hess = np.array([[h, h], [tiny, h], [h, tiny], [h, h]])
        return grad, hess


class _Logistic(_Law):
    name = "logistic"

    def pdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e * e), 0.0, e / ((1.0 + e) * (1.0 + e)))

    def cdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e), 1.0, e / (1.0 + e))

    def dpdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e), 0.0, self.pdf(z) * (1.0 - e) / (1.0 + e))

    def d2pdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e * e), 0.0,
                        self.pdf(z) * (e * e - 4.0 * e + 1.0) / ((1.0 + e) * (1.0 + e)))

    def limits(self, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        s = 1.0 / sigma
        grad = np.array([[s, -s], [0.0, -s], [s, 0.0], [s, -s]])
        return grad, np.full((4, 2), HESS_RANGE[0])


class _Extreme(_Law):
    name = "extreme"

    def pdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e), 0.0, e * np.exp(-e))

    def cdf(self, z: np.ndarray) -> np.ndarray:
        return 1.0 - np.exp(-np.exp(z))

    def dpdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e), 0.0, (1.0 - e) * self.pdf(z))

    def d2pdf(self, z: np.ndarray) -> np.ndarray:
        e = np.exp(z)
        return np.where(np.isinf(e * e), 0.0, (e * e - 3.0 * e + 1.0) * self.pdf(z))

    def limits(self, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        lo, top = GRAD_RANGE[0], HESS_RANGE[1]
        s, tiny = 1.0 / sigma, HESS_RANGE[0]
        grad = np.array([[s, lo], [0.0, lo], [s, 0.0], [s, lo]])
        hess = np.array([[tiny, top], [tiny, top], [tiny, tiny], [tiny, top]])
        return grad, hess


LAWS: dict[str, _Law] = {law.name: law for law in (_Normal(), _Logistic(), _Extreme())}


def _law(distribution: str) -> _Law:
    try:
        return LAWS[distribution]
    except KeyError:
        raise ValueError(f"aft_loss_distribution must be one of {sorted(LAWS)}, got "
                         f"{distribution!r}") from None


class _Rows:
    """The standardised bounds of interval labels at margins m: z of the lower and upper
    bound (0 where that side is open), the censoring kind and the side of the margin."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray, m: np.ndarray,
                 sigma: float) -> None:
        self.exact = lower == upper
        self.open_above = np.isinf(upper)
        self.open_below = lower <= 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            z_lower = (np.log(lower) - m) / sigma
            z_upper = (np.log(upper) - m) / sigma
        self.z_lower = np.where(self.open_below, 0.0, z_lower)
        self.z_upper = np.where(self.open_above | self.exact, 0.0, z_upper)
        kind = np.where(self.open_below, LEFT, np.where(self.open_above, RIGHT, INTERVAL))
        self.kind = np.where(self.exact, UNCENSORED, kind)
        self.above = (self.z_lower > 0) | (self.z_upper > 0)

    def side(self, law: _Law, which: str, fn: str, closed_value: float) -> np.ndarray:
        """`law.fn` at the z of side `which` ("lower" / "upper"), `closed_value` where that
        side is open."""
        z = self.z_lower if which == "lower" else self.z_upper
        is_open = self.open_below if which == "lower" else self.open_above
        return np.where(is_open, closed_value, getattr(law, fn)(z))


def aft_loss(lower: np.ndarray, upper: np.ndarray, m: np.ndarray, distribution: str,
             sigma: float) -> np.ndarray:
    """float64 (n,) negative log-likelihood of intervals [lower, upper] (n,) at margins m (n,)
    (likelihoods floored at 1e-12, as XGBoost's aft-nloglik)."""
    law = _law(distribution)
    r = _Rows(lower, upper, m, sigma)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        density = law.pdf(r.z_lower) / (sigma * lower)
        mass = r.side(law, "upper", "cdf", 1.0) - r.side(law, "lower", "cdf", 0.0)
        return -np.log(np.maximum(np.where(r.exact, density, mass), _TINY))


def aft_grad_hess(lower: np.ndarray, upper: np.ndarray, m: np.ndarray, distribution: str,
                  sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 (n,) gradient and hessian of `aft_loss` in the margins m (n,), with XGBoost's
    limits where the likelihood underflows and its clipping."""
    law = _law(distribution)
    r = _Rows(lower, upper, m, sigma)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # an observed time: the density at z
        f, df, d2f = law.pdf(r.z_lower), law.dpdf(r.z_lower), law.d2pdf(r.z_lower)
        exact_num_g, exact_den_g = df, sigma * f
        exact_num_h, exact_den_h = df * df - f * d2f, sigma * sigma * f * f
        # a censored row: the probability of its interval
        mass = r.side(law, "upper", "cdf", 1.0) - r.side(law, "lower", "cdf", 0.0)
        dens = r.side(law, "upper", "pdf", 0.0) - r.side(law, "lower", "pdf", 0.0)
        slope = r.side(law, "upper", "dpdf", 0.0) - r.side(law, "lower", "dpdf", 0.0)
        den_g = np.where(r.exact, exact_den_g, sigma * mass)
        den_h = np.where(r.exact, exact_den_h, (sigma * mass) ** 2)
        g = np.where(r.exact, exact_num_g, dens) / den_g
        h = np.where(r.exact, exact_num_h, dens * dens - mass * slope) / den_h
    limit_g, limit_h = law.limits(sigma)
    side = r.above.astype(np.int64)
    g = np.where((den_g < _TINY) & ~np.isfinite(g), limit_g[r.kind, side], g)
    h = np.where((den_h < _TINY) & ~np.isfinite(h), limit_h[r.kind, side], h)
    return np.clip(g, *GRAD_RANGE), np.clip(h, *HESS_RANGE)


class AFT(HostObjective):
    """survival:aft on interval labels (n, 2) = (lower, upper) (`Dataset`'s
    ``label_lower_bound`` / ``label_upper_bound``); predictions are times exp(margin)."""

    default_metric = "aft-nloglik"
    label_hint = "interval labels: Dataset(label_lower_bound=..., label_upper_bound=...)"

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)
        self.distribution = str(getattr(params, "aft_loss_distribution", "normal"))
        self.sigma = float(getattr(params, "aft_loss_distribution_scale", 1.0))
        _law(self.distribution)

    def labels(self, data: Any) -> np.ndarray | None:
        if data.label_lower_bound is None or data.label_upper_bound is None:
            return None
        return np.stack([data.label_lower_bound, data.label_upper_bound], axis=1)

    def check_label(self, y: np.ndarray) -> None:
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(f"{self.name} needs {self.label_hint}")

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        return np.array([np.log(0.5)])

    def score_to_margin(self, base_score: float) -> np.ndarray:
        return np.array([np.log(base_score)])

    def transform(self, margin: np.ndarray) -> np.ndarray:
        return np.exp(margin[:, 0])

    def weighted_grad_hess(self, m: np.ndarray, y: np.ndarray,
                           w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        g, h = aft_grad_hess(y[:, 0], y[:, 1], m, self.distribution, self.sigma)
        if w is not None:
            g, h = g * w, h * w
        return g, h
