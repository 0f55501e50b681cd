"""Data-parallel training: each worker holds some rows; the backend seam reduces across
workers what every worker must agree on (see `histboost.distributed.backend`)."""

from .backend import DistributedBackend

__all__ = ["DistributedBackend"]
