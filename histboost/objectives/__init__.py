"""Loss functions: gradients and hessians, label checks, base score and output transform."""

from __future__ import annotations

from typing import Any

from .base import CustomObjective, HostObjective, Objective
from .classification import Logistic, LogitRaw, Softmax
from .ranking import MAPRank, NDCGRank, PairwiseRank
from .regression import (
    AbsoluteError,
    Cox,
    Gamma,
    Poisson,
    PseudoHuberError,
    QuantileError,
    SquaredError,
    SquaredLogError,
    Tweedie,
)
from .survival import AFT

_REGISTRY: dict[str, type[Objective]] = {
    "reg:squarederror": SquaredError,
    "binary:logistic": Logistic,
    "binary:logitraw": LogitRaw,
    "multi:softprob": Softmax,
    "multi:softmax": Softmax,
    "reg:absoluteerror": AbsoluteError,
    "reg:pseudohubererror": PseudoHuberError,
    "reg:quantileerror": QuantileError,
    "count:poisson": Poisson,
    "reg:gamma": Gamma,
    "reg:tweedie": Tweedie,
    "reg:squaredlogerror": SquaredLogError,
    "survival:cox": Cox,
    "rank:pairwise": PairwiseRank,
    "rank:ndcg": NDCGRank,
    "rank:map": MAPRank,
    "survival:aft": AFT,
}


def get_objective(name: str, num_class: int = 1, params: Any = None) -> Objective:
    """The objective registered under `name` (XGBoost spelling); `params` (`TrainParams`)
    carries its parameters (huber_slope, quantile_alpha, tweedie_variance_power, ...)."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; choose from {sorted(_REGISTRY)}") from None
    return cls(name=name, num_class=num_class, params=params)


__all__ = ["CustomObjective", "HostObjective", "Objective", "get_objective"]
