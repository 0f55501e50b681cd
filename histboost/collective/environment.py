"""Making a communicator: from the ``torchrun`` environment or from a process group."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from typing import Any

from .base import Communicator
from .errors import CollectiveError
from .single import SingleCommunicator


def _initialized_dist() -> Any:
    """torch.distributed if this process already set up a default group, else None (without
    importing torch when nobody has)."""
    if sys.modules.get("torch") is None:
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def shm_enabled(shm: bool | None) -> bool:
    """``shm``, or when None the environment variable ``HISTBOOST_COLLECTIVE_SHM`` (default on;
    "0", "false", "no" or "off" switch the shared-memory transport off)."""
    if shm is not None:
        return bool(shm)
    value = os.environ.get("HISTBOOST_COLLECTIVE_SHM", "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def init(backend: str | None = None, timeout: float = 60.0, *,
         check_metadata: bool = True, shm: bool | None = None) -> Communicator:
    """The communicator of this process.

    - torch.distributed already initialised: wraps its default group.
    - ``WORLD_SIZE`` unset or 1: a `SingleCommunicator` (no torch needed).
    - else: initialises torch.distributed from ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
      ``WORLD_SIZE`` (and ``LOCAL_RANK`` for the GPU), as ``torchrun`` sets them; `close`
      destroys that group again.

    backend: None (Gloo for CPU tensors, plus NCCL for CUDA tensors when CUDA is available and
    this host runs no more processes, ``LOCAL_WORLD_SIZE``, than it has GPUs),
    "gloo", "nccl" (CUDA tensors via NCCL; CPU tensors and metadata still via Gloo), or any
    torch backend string. timeout: default seconds per call (also the engine's own timeout).
    check_metadata: default for every call's shape/dtype agreement check. shm: CPU arrays of
    ranks that all run on this host travel through shared memory (`histboost.collective.shm`)
    instead of Gloo's TCP connections; None: on unless ``HISTBOOST_COLLECTIVE_SHM=0``.
    """
    dist = _initialized_dist()
    if dist is not None:
        return from_process_group(None, timeout=timeout, check_metadata=check_metadata,
                                  shm=shm)
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return SingleCommunicator(timeout, check_metadata)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        raise CollectiveError(
            f"WORLD_SIZE={world} needs torch for the communication engine: "
            "pip install 'histboost[distributed]'") from e
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT", "RANK") if v not in os.environ]
    if missing:
        raise CollectiveError(f"WORLD_SIZE={world} but {', '.join(missing)} not set "
                              "(launch with torchrun, or set them as torchrun does)")
    rank = int(os.environ["RANK"])
    if backend is None:
        # NCCL needs a GPU of its own per process: with more processes on this host than
        # GPUs (e.g. two sharing one GPU to test), CUDA tensors go through Gloo instead
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        cuda = (torch.cuda.is_available() and dist.is_nccl_available()
                and local_world <= torch.cuda.device_count())
        backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
    elif backend == "nccl":
        backend = "cpu:gloo,cuda:nccl"
    kwargs: dict[str, Any] = {}
    if "nccl" in backend:
        local = int(os.environ.get("LOCAL_RANK", rank % max(torch.cuda.device_count(), 1)))
        torch.cuda.set_device(local)
        kwargs["device_id"] = torch.device("cuda", local)
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=timedelta(seconds=float(timeout)), **kwargs)
    return from_process_group(None, timeout=timeout, check_metadata=check_metadata,
                              shm=shm, _owns=True)


def from_process_group(pg: Any = None, *, timeout: float = 60.0,
                       check_metadata: bool = True, shm: bool | None = None,
                       _owns: bool = False) -> Communicator:
    """A communicator over an existing torch.distributed process group (None: the default
    group). All ranks of the group must call it (setting up shared memory or NCCL runs
    collectives). CPU tensors need a Gloo group; with an NCCL-only group they travel through
    the GPU, and CUDA tensors in a Gloo-only group through host memory.

    shm (None: on unless ``HISTBOOST_COLLECTIVE_SHM=0``): when every rank of a Gloo group runs
    on this host and can map one shared-memory region, histboost's algorithms move CPU
    arrays through it (`histboost.collective.shm`), else through Gloo; the engine's own
    collectives (``algorithm="native"``) and CUDA tensors are unaffected."""
    import torch
    import torch.distributed as dist

    from .distributed import DistributedCommunicator
    from .native import NativeEngine
    from .transport import TorchTransport

    group = pg if pg is not None else dist.group.WORLD
    name = str(dist.get_backend(group)).lower()
    devices = []
    if "gloo" in name or "mpi" in name:
        devices.append("cpu")
    if "nccl" in name:
        devices.append("cuda")
    if not devices:
        raise CollectiveError(f"unsupported torch.distributed backend {name!r}")
    torch_transport = TorchTransport(group)
    transport: Any = torch_transport
    if "cpu" in devices and torch_transport.size > 1 and shm_enabled(shm):
        from .shm import attach
        from .transport import ByDeviceTransport

        local = attach(group)
        if local is not None:
            transport = local if "cuda" not in devices else ByDeviceTransport(
                local, torch_transport)
    if "cuda" in devices:
        # NCCL wants its first operation to include every rank; later point-to-point batches
        # may then involve only some.
        t = torch.zeros(1, device=f"cuda:{torch.cuda.current_device()}")
        dist.all_reduce(t, group=group)
    meta_device = "cpu" if "cpu" in devices else f"cuda:{torch.cuda.current_device()}"

    def destroy() -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    return DistributedCommunicator(
        transport, native=NativeEngine(group, torch_transport._global), devices=tuple(devices),
        meta_device=meta_device, timeout=timeout, check_metadata=check_metadata,
        on_close=destroy if _owns else None)
