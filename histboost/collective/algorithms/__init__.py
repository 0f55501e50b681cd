"""Collective algorithms written over point-to-point messages, as LightGBM's network layer
does them. Each module holds one collective; each algorithm is written once and reused by the
composite ones (ring allreduce = ring reduce-scatter + ring allgather, and so on).

Every function runs on one rank with a `Ctx` (transport, deadline, scratch) and flat
`Buffer` objects; none of them knows about torch.distributed, so they run over any transport:
torch's Gloo/NCCL point-to-point (`..transport`) or in-process threads (`..testing`).
"""

from . import allgather, allreduce, broadcast, reduce, reduce_scatter
from .context import Ctx, Scratch, Transport

__all__ = [
    "Ctx", "Scratch", "Transport", "allgather", "allreduce", "broadcast", "reduce",
    "reduce_scatter",
]
