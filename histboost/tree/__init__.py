"""Trees: the structure-of-arrays `Tree`, split evaluation, growers and the predictor."""

from .tree import Tree

__all__ = ["Tree"]
