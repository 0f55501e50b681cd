"""Loss functions: gradients and hessians, label checks, base score and output transform."""

from __future__ import annotations

from .base import CustomObjective, Objective
from .classification import Logistic, LogitRaw, Softmax
from .regression import SquaredError

_REGISTRY: dict[str, type[Objective]] = {
    "reg:squarederror": SquaredError,
    "binary:logistic": Logistic,
    "binary:logitraw": LogitRaw,
    "multi:softprob": Softmax,
    "multi:softmax": Softmax,
}


def get_objective(name: str, num_class: int = 1) -> Objective:
    """The objective registered under `name` (XGBoost spelling)."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; choose from {sorted(_REGISTRY)}") from None
    return cls(name=name, num_class=num_class)


__all__ = ["CustomObjective", "Objective", "get_objective"]
