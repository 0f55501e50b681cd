"""Pooling and row-sparse gradients of embedding bags, with a torch path and a CUDA path.

Both functions take the bag layout of :mod:`.csr` in terms of table *rows*: ``rows[int64, nnz]``
(``-1`` for a key that is not in the table, which contributes a zero vector), ``offsets[int64,
n_bags + 1]`` and, for the backward, ``key_bag[int64, nnz]`` (the bag of each key).

The torch path (any device, any storage dtype) is the reference; on a CUDA device with float32
storage the Numba-CUDA kernels of :mod:`._cuda_ops` run instead unless ``backend="torch"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

BACKENDS = ("auto", "torch", "cuda")


@dataclass
class RowSparseGrad:
    """Gradient of an embedding table restricted to the rows a batch touched.

    Attributes:
        rows: int64 ``[U]``, distinct table rows in increasing order.
        values: float32 ``[U, dim]``, the summed gradient of each row.
    """

    rows: torch.Tensor
    values: torch.Tensor

    def merged(self, other: RowSparseGrad) -> RowSparseGrad:
        """Sum of two row-sparse gradients (rows of both, duplicates added)."""
        rows = torch.cat([self.rows, other.rows])
        values = torch.cat([self.values, other.values])
        uniq, inv = torch.unique(rows, sorted=True, return_inverse=True)
        out = values.new_zeros((uniq.numel(), values.shape[1]))
        out.index_add_(0, inv, values)
        return RowSparseGrad(uniq, out)


@dataclass
class KeyRecord:
    """What a training forward records about the keys besides pooling them.

    Attributes:
        key_bag: int64 ``[nnz]``, filled with the bag of every key (the backward's input).
        row_slot: int32 ``[row_capacity + 1]`` or None; when given, rows ``>= old_size`` (the
            keys this batch inserted) get ``slot_ids[bag % num_slots]``.
        old_size: table size before the batch's inserts.
        num_slots: slots per sample ``S``.
        slot_ids: int32 ``[S]``, the global slot id of each local slot column.
    """

    key_bag: torch.Tensor
    row_slot: torch.Tensor | None
    old_size: int
    num_slots: int
    slot_ids: torch.Tensor


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def use_cuda_kernels(weight: torch.Tensor, backend: str) -> bool:
    """Whether the Numba-CUDA kernels handle ``weight`` (CUDA float32 storage)."""
    if backend == "torch" or weight.device.type != "cuda":
        if backend == "cuda":
            raise ValueError("backend='cuda' needs the table on a CUDA device")
        return False
    if weight.dtype != torch.float32:
        if backend == "cuda":
            raise ValueError("backend='cuda' supports float32 storage only; use 'auto'")
        return False
    return True


def bag_of_keys(offsets: torch.Tensor, nnz: int) -> torch.Tensor:
    """Bag index of every key: int64 ``[nnz]`` from ``offsets`` int64 ``[n_bags + 1]``."""
    n_bags = offsets.numel() - 1
    lengths = offsets[1:] - offsets[:-1]
    bags = torch.arange(n_bags, device=offsets.device, dtype=torch.int64)
    # output_size avoids a device->host sync to size the result.
    return torch.repeat_interleave(bags, lengths, output_size=nnz)


def pool(
    weight: torch.Tensor,
    rows: torch.Tensor,
    offsets: torch.Tensor,
    mean: bool,
    backend: str = "auto",
    record: KeyRecord | None = None,
) -> torch.Tensor:
    """Sum (or mean) of the rows of each bag: float32 ``[n_bags, dim]``.

    Empty bags give zeros; ``mean`` divides by the number of keys in the bag, unknown keys
    (row ``-1``, zero vectors) included. With ``record``, also fills it (see
    :class:`KeyRecord`); the CUDA kernel does so in the same pass.
    """
    n_bags = offsets.numel() - 1
    dim = weight.shape[1]
    if use_cuda_kernels(weight, backend):
        from . import _cuda_ops

        out = torch.empty((n_bags, dim), dtype=torch.float32, device=weight.device)
        if record is None:
            _cuda_ops.pool(weight, rows, offsets, mean, out)
        else:
            row_slot = record.row_slot
            if row_slot is None:  # nothing inserted: no row is >= old_size
                row_slot = record.slot_ids
            _cuda_ops.pool(weight, rows, offsets, mean, out, record.key_bag, row_slot,
                           record.old_size, record.num_slots, record.slot_ids)
        return out
    if record is not None:
        record.key_bag.copy_(bag_of_keys(offsets, rows.numel()))
        if record.row_slot is not None:
            slot = record.slot_ids[record.key_bag % record.num_slots]
            # Old rows write into the spare last element.
            idx = torch.where(rows >= record.old_size, rows, record.row_slot.numel() - 1)
            record.row_slot[idx] = slot
    if rows.numel() == 0:
        return torch.zeros((n_bags, dim), dtype=torch.float32, device=weight.device)
    known = rows >= 0
    psw = None
    if not bool(known.all()):
        psw = known.to(weight.dtype)
        rows = rows.clamp(min=0)
    out = F.embedding_bag(
        rows, weight, offsets, mode="sum", per_sample_weights=psw, include_last_offset=True
    ).float()
    if mean:
        counts = (offsets[1:] - offsets[:-1]).clamp(min=1).to(torch.float32)
        out = out / counts.unsqueeze(1)
    return out


def row_grad(
    rows: torch.Tensor,
    key_bag: torch.Tensor,
    offsets: torch.Tensor,
    grad_out: torch.Tensor,
    mean: bool,
    use_cuda: bool = False,
    all_known: bool = False,
) -> RowSparseGrad:
    """Row-sparse gradient of :func:`pool` given ``grad_out`` float ``[n_bags, dim]``.

    Duplicate rows are accumulated by sorting the keys by row (HugeCTR's sort/unique step):
    each distinct row appears once in the result. Keys with row ``-1`` get no gradient;
    ``all_known`` says there are none (rows of get-or-insert), which saves a device sync.
    """
    grad_out = grad_out.to(torch.float32).contiguous()
    dim = grad_out.shape[1]
    dev = grad_out.device
    if rows.numel() == 0:
        return RowSparseGrad(
            torch.empty(0, dtype=torch.int64, device=dev),
            torch.empty((0, dim), dtype=torch.float32, device=dev),
        )
    # int32 rows sort in half the radix passes; tables stay far below 2**31 rows.
    sort_rows = rows.to(torch.int32) if use_cuda else rows
    sorted_rows, perm = torch.sort(sort_rows, stable=not use_cuda)
    uniq, seg = torch.unique_consecutive(sorted_rows, return_inverse=True)
    values = torch.zeros((uniq.numel(), dim), dtype=torch.float32, device=dev)
    if use_cuda:
        from . import _cuda_ops

        _cuda_ops.segment_grad(seg, perm, key_bag, offsets, mean, grad_out, values)
    else:
        bag = key_bag[perm]
        src = grad_out[bag]
        if mean:
            counts = (offsets[1:] - offsets[:-1]).clamp(min=1).to(torch.float32)
            src = src / counts[bag].unsqueeze(1)
        values.index_add_(0, seg, src)
    uniq = uniq.to(torch.int64)
    if not all_known and bool(uniq[0] < 0):  # unknown keys sort first: drop their segment
        uniq, values = uniq[1:], values[1:]
    return RowSparseGrad(uniq, values)
