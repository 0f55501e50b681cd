"""What the target statistics of a categorical feature are: the target channels summed per
category (from the label and the objective) and the statistics made from the sums with each
prior (`ctr_priors`).

- binary objectives: one channel, the label (0/1); statistic ``(positives + a) / (count + a
  + b)`` per prior (a, b);
- multiclass: one channel per class (label == k), one statistic per class and prior;
- regression with ``ctr_target_borders = B > 0``: the label binarised at B quantile borders of
  the training labels (label > border), one statistic per border and prior;
- regression with ``ctr_target_borders = 0``: the mean, ``(sum + w * mean) / (count + w)``
  with the global label mean as prior, one statistic per distinct prior weight w = a + b.

A category not seen in training has count 0 and zero sums: its statistics are the priors'
alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# CatBoost's defaults for its Borders statistics, 0, 0.5 and 1 with denominator prior 1
DEFAULT_PRIORS = ((0.0, 1.0), (0.5, 0.5), (1.0, 0.0))


def check_priors(priors: Any) -> tuple[tuple[float, float], ...]:
    """`ctr_priors` as a tuple of (a, b) float pairs; ValueError naming the parameter for
    anything else, negative values or a + b == 0."""
    try:
        pairs = tuple((float(a), float(b)) for a, b in priors)
    except (TypeError, ValueError):
        raise ValueError(f"ctr_priors must be a list of (a, b) pairs of numbers, got "
                         f"{priors!r}") from None
    if not pairs:
        raise ValueError("ctr_priors must hold at least one (a, b) pair")
    for a, b in pairs:
        if not (np.isfinite(a) and np.isfinite(b)) or a < 0 or b < 0:
            raise ValueError(f"ctr_priors must be finite and non-negative, got ({a}, {b})")
        if a + b <= 0:
            raise ValueError(f"ctr_priors pair ({a}, {b}): a + b must be > 0 (the statistic "
                             "of an unseen category would be 0 / 0)")
    return pairs


@dataclass
class CtrSettings:
    """target: "binary", "multiclass", "borders" or "mean"; priors (P, 2) float64;
    borders float64 (B,) (target "borders"); n_classes (target "multiclass"); label_mean
    (target "mean")."""

    target: str
    priors: np.ndarray
    borders: np.ndarray
    n_classes: int
    label_mean: float

    @classmethod
    def from_labels(cls, objective: str, num_class: int, y: np.ndarray,
                    priors: Any, target_borders: int) -> CtrSettings:
        pri = np.array(check_priors(priors), np.float64).reshape(-1, 2)
        borders = np.zeros(0)
        if objective.startswith("binary:"):
            target = "binary"
        elif objective.startswith("multi:"):
            target = "multiclass"
        elif target_borders > 0:
            target = "borders"
            qs = np.quantile(y, np.arange(1, target_borders + 1) / (target_borders + 1))
            borders = np.unique(qs)
        else:
            target = "mean"
        return cls(target, pri, borders.astype(np.float64), int(num_class),
                   float(np.mean(y)) if y.size else 0.0)

    # -- channels ------------------------------------------------------------------------
    @property
    def n_channels(self) -> int:
        return {"binary": 1, "multiclass": self.n_classes, "borders": self.borders.size,
                "mean": 1}[self.target]

    def targets(self, y: np.ndarray) -> np.ndarray:
        """float64 (n, n_channels) per-row target channels of labels y (n,)."""
        y = np.asarray(y, np.float64)
        if self.target == "binary" or self.target == "mean":
            return y[:, None].copy()
        if self.target == "multiclass":
            return (y[:, None] == np.arange(self.n_classes)[None, :]).astype(np.float64)
        return (y[:, None] > self.borders[None, :]).astype(np.float64)

    # -- statistics ----------------------------------------------------------------------
    def _mean_weights(self) -> np.ndarray:
        return np.unique(self.priors.sum(axis=1))

    @property
    def n_stats(self) -> int:
        """Statistics per categorical feature (or combination)."""
        if self.target == "mean":
            return int(self._mean_weights().size)
        return int(self.priors.shape[0] * self.n_channels)

    def stat_names(self) -> list[str]:
        if self.target == "mean":
            return [f"mean_w{w:g}" for w in self._mean_weights()]
        chan = {"binary": ["p"], "multiclass": [f"c{k}" for k in range(self.n_classes)],
                "borders": [f"b{j}" for j in range(self.borders.size)]}[self.target]
        return [f"{c}_a{a:g}_b{b:g}" for a, b in self.priors for c in chan]

    def terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(channel int64 (n_stats,), add float64, denominator float64): statistic s is
        ``(sums[:, channel[s]] + add[s]) / (count + denominator[s])``, prior-major (all
        channels of the first prior, then the next)."""
        if self.target == "mean":
            w = self._mean_weights()
            return np.zeros(w.size, np.int64), w * self.label_mean, w.astype(np.float64)
        m = self.n_channels
        chan = np.tile(np.arange(m, dtype=np.int64), self.priors.shape[0])
        add = np.repeat(self.priors[:, 0], m)
        den = np.repeat(self.priors[:, 0] + self.priors[:, 1], m)
        return chan, add, den

    def statistics(self, count: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """float64 (n, n_stats) statistics of counts (n,) and channel sums (n, n_channels)
        (see `terms`)."""
        count = np.asarray(count, np.float64)
        chan, add, den = self.terms()
        out = np.empty((count.shape[0], chan.size), np.float64)
        for s in range(chan.size):
            out[:, s] = (sums[:, chan[s]] + add[s]) / (count + den[s])
        return out

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "priors": self.priors.tolist(),
                "borders": self.borders.tolist(), "n_classes": self.n_classes,
                "label_mean": self.label_mean}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CtrSettings:
        target = d["target"]
        if target not in ("binary", "multiclass", "borders", "mean"):
            raise ValueError(f"unknown target statistic kind {target!r}")
        label_mean = float(d["label_mean"])
        if not np.isfinite(label_mean):
            raise ValueError("label_mean must be finite")
        borders = np.asarray(d["borders"], np.float64).reshape(-1)
        return cls(target, np.array(check_priors(d["priors"]), np.float64).reshape(-1, 2),
                   borders, int(d["n_classes"]), label_mean)
