"""``DistributedHashEmbeddingBag``: a hash embedding sharded over a collective communicator.

Every rank passes the whole batch's CSR (as HugeCTR's data reader hands it to every GPU) and
receives the pooled bags of its own samples: rank ``r`` gets block ``r`` of the batch as
``numpy.array_split`` cuts it. Two layouts, after HugeCTR's two sparse embeddings:

* ``"distributed_slot"`` (``DistributedSlotSparseEmbeddingHash``): key ``k`` lives on rank
  ``hash(k) % world`` (:func:`~._hashing.shard_of_torch`). Every rank pools its own keys for
  every bag of the whole batch, giving partial sums ``[B, S, D]``; a reduce-scatter adds the
  partials and hands each rank its samples. For ``mean`` the sums are divided afterwards by
  the bag lengths, which every rank knows from the global ``row_offsets`` (HugeCTR allreduces
  per-GPU row offsets because its reader gives each GPU only its own keys; here the whole
  CSR is on every rank, so the counts need no communication). Backward: the reduce-scatter's
  adjoint, an allgather of the output gradients, then each rank's row-sparse gradient.
* ``"localized_slot"`` (``LocalizedSlotSparseEmbeddingHash``): slot ``s`` lives on rank
  ``s % world`` with all of its keys; every rank pools its slots for the whole batch and the
  exchange that gives each rank all slots of its samples is a reduce-scatter of ``[B, S, D]``
  whose other slots are zero (an all-to-all in effect; exact, since ``x + 0 = x``). Slots on
  different ranks must use disjoint keys (salt keys per slot, as :func:`~.csr.csr_from_pandas`
  does): a key shared by slots of two ranks gets an independent row on each.

Results equal the single-process :class:`~.module.HashEmbeddingBag` on the whole batch (exactly
for localized slots, to float32 rounding of the partial sums for distributed slots), with
gradients summed over all ranks' samples: the same update as one process whose loss is the
sum of the ranks' losses.

The communicator is a ``histboost.collective`` communicator or anything with its interface:
``rank``, ``world_size``, ``reduce_scatter(x, op="sum")`` and ``allgather(x)`` on torch tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ._hashing import shard_of_torch
from .csr import CSRBatch
from .module import COMBINERS, HashEmbeddingBag

MODES = ("distributed_slot", "localized_slot")


def _as_tensor(x: Any, like: torch.Tensor) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.as_tensor(np.asarray(x), device=like.device)


def split_sizes(n: int, world_size: int) -> list[int]:
    """Block sizes of ``numpy.array_split(range(n), world_size)``."""
    q, r = divmod(n, world_size)
    return [q + 1 if i < r else q for i in range(world_size)]


def allgather_blocks(comm: Any, x: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of a reduce-scatter's cut: this rank's block ``x`` of an ``n``-row tensor in,
    the whole ``[n, ...]`` tensor out. Blocks are padded to equal size before the allgather so
    any allgather implementation (equal or uneven blocks) gives the same result."""
    sizes = split_sizes(n, comm.world_size)
    m = max(sizes)
    padded = x.new_zeros((m, *x.shape[1:]))
    padded[: x.shape[0]] = x
    gathered = _as_tensor(comm.allgather(padded), x).view(comm.world_size, m, *x.shape[1:])
    return torch.cat([gathered[r, : sizes[r]] for r in range(comm.world_size)])


class _ReduceScatter(torch.autograd.Function):
    """Sum over ranks, keep this rank's block of axis 0; backward: allgather of gradients."""

    @staticmethod
    def forward(ctx, x, anchor, comm):  # noqa: ARG004 - anchor only makes the output need grad
        ctx.comm = comm
        ctx.n = x.shape[0]
        return _as_tensor(comm.reduce_scatter(x.contiguous(), op="sum"), x)

    @staticmethod
    def backward(ctx, grad):
        return allgather_blocks(ctx.comm, grad.contiguous(), ctx.n), None, None


def select_slots(row_offsets: torch.Tensor, keys: torch.Tensor, num_slots: int,
                 slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The sub-batch made of columns ``slots`` (int64 ``[S']``) of a CSR batch.

    Returns ``(row_offsets [B*S' + 1], keys [nnz'])`` with slot ``i`` of the result being slot
    ``slots[i]`` of the input.
    """
    b = (row_offsets.numel() - 1) // num_slots
    starts = row_offsets[:-1].view(b, num_slots)[:, slots].reshape(-1)
    lengths = (row_offsets[1:] - row_offsets[:-1]).view(b, num_slots)[:, slots].reshape(-1)
    new_ro = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=keys.device)
    torch.cumsum(lengths, 0, out=new_ro[1:])
    nnz = int(new_ro[-1])
    shift = torch.repeat_interleave(starts - new_ro[:-1], lengths, output_size=nnz)
    idx = shift + torch.arange(nnz, device=keys.device)
    return new_ro, keys[idx]


class DistributedHashEmbeddingBag(nn.Module):
    """:class:`~.module.HashEmbeddingBag` sharded over ``comm`` (see the module docstring).

    Args:
        embedding_dim, combiner, capacity, initializer, dtype, device, and the keyword
            arguments: as :class:`~.module.HashEmbeddingBag` (``capacity`` is per rank). Use
            the same ``seed`` on every rank (the default does).
        comm: communicator with ``rank``, ``world_size``, ``reduce_scatter``, ``allgather``.
        mode: ``"distributed_slot"`` or ``"localized_slot"``.

    Attributes:
        local: this rank's shard, a :class:`~.module.HashEmbeddingBag`; pass the distributed
            module (or the whole model) to a sparse optimiser and it finds it.
    """

    def __init__(
        self,
        embedding_dim: int,
        comm: Any,
        mode: str = "distributed_slot",
        combiner: str = "sum",
        capacity: int = 1 << 20,
        initializer: Any = None,
        dtype: torch.dtype = torch.float32,
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if combiner not in COMBINERS:
            raise ValueError(f"combiner must be one of {COMBINERS}, got {combiner!r}")
        self.comm = comm
        self.mode = mode
        self.combiner = combiner
        self.rank = int(comm.rank)
        self.world_size = int(comm.world_size)
        # Distributed slots pool partial sums; the mean is taken after the reduce-scatter.
        local_combiner = combiner if mode == "localized_slot" else "sum"
        self.local = HashEmbeddingBag(embedding_dim, local_combiner, capacity, initializer,
                                      dtype, device, **kwargs)

    @property
    def embedding_dim(self) -> int:
        return self.local.embedding_dim

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, rank={self.rank}, world_size={self.world_size}"

    def sample_range(self, batch_size: int) -> tuple[int, int]:
        """``[start, stop)`` of this rank's samples in a global batch of ``batch_size``."""
        sizes = split_sizes(batch_size, self.world_size)
        start = sum(sizes[: self.rank])
        return start, start + sizes[self.rank]

    def owns_slot(self, slot: int) -> bool:
        """Whether this rank holds slot ``slot`` in localized-slot mode."""
        return slot % self.world_size == self.rank

    def forward(
        self,
        row_offsets: torch.Tensor | CSRBatch,
        keys: torch.Tensor | None = None,
        num_slots: int | None = None,
    ) -> torch.Tensor:
        """Pool the global batch; returns float32 ``[B_r, S, D]`` for this rank's samples."""
        ro, k, s = self.local.prepare_inputs(row_offsets, keys, num_slots)
        b = (ro.numel() - 1) // s
        d = self.embedding_dim
        if self.mode == "distributed_slot":
            mine = shard_of_torch(k, self.world_size) == self.rank
            # Offsets of this rank's keys: the running count of owned keys at each bag start.
            owned_before = torch.zeros(k.numel() + 1, dtype=torch.int64, device=k.device)
            torch.cumsum(mine, 0, out=owned_before[1:])
            partial = self.local.bags(owned_before[ro], k[mine], s, mean=False)
        else:
            slots = torch.arange(self.rank, s, self.world_size, device=k.device)
            sub_ro, sub_k = select_slots(ro, k, s, slots)
            pooled = self.local.bags(sub_ro, sub_k, slots.numel(), self.combiner == "mean",
                                     slot_ids=slots)
            partial = pooled.new_zeros((b, s, d))
            partial[:, slots] = pooled.view(b, slots.numel(), d)
        anchor = torch.empty(0, device=k.device, requires_grad=torch.is_grad_enabled())
        own = _ReduceScatter.apply(partial.reshape(b, s * d), anchor, self.comm).view(-1, s, d)
        if self.mode == "distributed_slot" and self.combiner == "mean":
            lo, hi = self.sample_range(b)
            lengths = (ro[1:] - ro[:-1]).view(b, s)[lo:hi].clamp(min=1)
            own = own / lengths.unsqueeze(2).to(own.dtype)
        return own
