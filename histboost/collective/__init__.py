"""Collective communication: allreduce, reduce-scatter, allgather, broadcast, reduce, barrier.

    import histboost.collective as hc
    comm = hc.init()                       # reads torchrun's environment; 1 process: no torch
    hist = comm.allreduce(hist)            # numpy, torch or CuPy arrays
    best = comm.allreduce(records, op=better_split)

Two kinds of implementation behind one `Communicator` interface: the engine's ``"native"``
collectives (torch.distributed: Gloo on CPU, NCCL on CUDA) and histboost's own algorithms over
point-to-point messages (`histboost.collective.algorithms`, after LightGBM's network layer):
the engine's, or for CPU arrays of ranks on one host a shared-memory region
(`histboost.collective.shm`). Every call has a timeout and, by default, a cheap check that all
ranks passed the same shape and dtype; results are bit-identical across ranks and reproducible.
"""

from .base import ALGORITHMS, Communicator
from .environment import from_process_group, init
from .errors import CollectiveError, CollectiveTimeout, MetadataMismatchError
from .ops import Reducer, elementwise
from .single import SingleCommunicator

__all__ = [
    "ALGORITHMS", "CollectiveError", "CollectiveTimeout", "Communicator",
    "MetadataMismatchError", "Reducer", "SingleCommunicator", "elementwise",
    "from_process_group", "init",
]
