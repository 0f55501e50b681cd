"""Numba-CUDA kernels for pooling, row-sparse gradients and the sparse optimiser updates.

All kernels use one warp per bag / chunk / row: the 32 lanes walk the embedding columns
(``d = lane, lane + 32, ...``, two columns per pass where it saves passes over the keys), so
every row access is a coalesced 128-byte line and any ``dim`` works. Blocks are
``(32, WARPS)`` threads.

* :func:`launch_pool` sums the rows of each bag (HugeCTR's forward "sum/mean" kernel).
* :func:`launch_segment_grad` sums gradients of equal rows after the keys were sorted by row.
  Zipf-distributed keys make a few rows very long segments (a hot key can occur 10^5 times in
  one batch), so segments are not given one warp each, which would leave one warp doing all
  the work: the sorted keys are cut into fixed chunks of ``CHUNK`` keys (the warp's lanes fetch
  the chunk's segment ids and bags into shared memory together), a warp reduces its
  chunk in registers and writes each segment's partial sum with a plain store when the segment
  lies wholly inside the chunk, or with an atomic add when it crosses a chunk boundary (the
  output is zeroed first). Float atomics make the summation order of long segments vary
  between runs on the GPU; the CPU path is deterministic.
* :func:`launch_sgd`, :func:`launch_momentum`, :func:`launch_adagrad`, :func:`launch_adam`
  update the distinct rows of a :class:`~._ops.RowSparseGrad` in place, with the same formulas
  as ``torch.optim`` applied per row (see :mod:`.optim`).

The ``launch_*`` functions take Numba device arrays (or NumPy arrays under
``NUMBA_ENABLE_CUDASIM=1``, which the CPU test suite uses); the torch-level wrappers at the
bottom launch the same kernels on CUDA tensors in torch's current stream through
:class:`histboost.kernels.launch.CudaKernel`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from numba import cuda

from ..kernels.launch import CudaKernel
from ._cuda_kernels import mix64_device
from ._hashing import _to_signed

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK24 = np.uint64((1 << 24) - 1)

WARPS = 8
CHUNK = 32

_f32 = np.float32


@cuda.jit(device=True, inline=True)
def _store_or_add(values, row, d, acc, whole):
    """Write a segment's partial sum: a plain store if the chunk holds the whole segment."""
    if d < values.shape[1]:
        if whole:
            values[row, d] = acc
        else:
            cuda.atomic.add(values, (row, d), acc)


@cuda.jit
def _pool_kernel(weight, rows, offsets, mean, out, key_bag, row_slot, old_size, num_slots,
                 slot_ids):
    lane = cuda.threadIdx.x
    bag = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if bag >= out.shape[0]:
        return
    start = offsets[bag]
    end = offsets[bag + 1]
    if key_bag.shape[0] > 0:
        # Record the bag of every key (the backward's input) and the slot of rows that this
        # batch inserted (rows >= old_size), in the same pass over the offsets.
        for j in range(start + lane, end, 32):
            key_bag[j] = bag
            r = rows[j]
            if r >= old_size:
                row_slot[r] = slot_ids[bag % num_slots]
    scale = _f32(1.0)
    if mean and end > start:
        scale = _f32(1.0) / _f32(end - start)
    dim = out.shape[1]
    # Two columns per lane and pass: one pass over the keys for dim <= 64.
    for d1 in range(lane, dim, 64):
        d2 = d1 + 32
        acc1 = _f32(0.0)
        acc2 = _f32(0.0)
        for j in range(start, end):
            r = rows[j]
            if r >= 0:
                acc1 += weight[r, d1]
                if d2 < dim:
                    acc2 += weight[r, d2]
        out[bag, d1] = acc1 * scale
        if d2 < dim:
            out[bag, d2] = acc2 * scale


@cuda.jit
def _segment_grad_kernel(seg, perm, key_bag, offsets, mean, grad_out, values):
    lane = cuda.threadIdx.x
    w = cuda.threadIdx.y
    chunk = cuda.blockIdx.x * cuda.blockDim.y + w
    nnz = seg.shape[0]
    j0 = chunk * CHUNK
    # Each lane fetches one key of the chunk (segment, bag, bag length) into shared memory,
    # so the dependent loads seg -> perm -> key_bag run in parallel, not once per key.
    seg_sh = cuda.shared.array((WARPS, CHUNK), np.int64)
    bag_sh = cuda.shared.array((WARPS, CHUNK), np.int64)
    len_sh = cuda.shared.array((WARPS, CHUNK), np.float32)
    j = j0 + lane
    if j < nnz:
        b = key_bag[perm[j]]
        seg_sh[w, lane] = seg[j]
        bag_sh[w, lane] = b
        len_sh[w, lane] = _f32(offsets[b + 1] - offsets[b]) if mean else _f32(1.0)
    cuda.syncthreads()
    if j0 < nnz:
        j1 = min(j0 + CHUNK, nnz)
        n = j1 - j0
        first = seg_sh[w, 0]
        # The chunk's first segment is whole only if it starts here; its last only if it
        # ends here.
        starts_here = j0 == 0 or seg[j0 - 1] != first
        ends_here = j1 == nnz or seg[j1] != seg_sh[w, n - 1]
        dim = grad_out.shape[1]
        for d1 in range(lane, dim, 64):
            d2 = d1 + 32
            cur = first
            acc1 = _f32(0.0)
            acc2 = _f32(0.0)
            for t in range(n):
                u = seg_sh[w, t]
                if u != cur:
                    whole = cur != first or starts_here
                    _store_or_add(values, cur, d1, acc1, whole)
                    _store_or_add(values, cur, d2, acc2, whole)
                    cur = u
                    acc1 = _f32(0.0)
                    acc2 = _f32(0.0)
                b = bag_sh[w, t]
                acc1 += grad_out[b, d1] / len_sh[w, t]
                if d2 < dim:
                    acc2 += grad_out[b, d2] / len_sh[w, t]
            whole = (cur != first or starts_here) and ends_here
            _store_or_add(values, cur, d1, acc1, whole)
            _store_or_add(values, cur, d2, acc2, whole)


@cuda.jit
def _sgd_kernel(weight, rows, grad, lr, weight_decay):
    lane = cuda.threadIdx.x
    u = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if u >= rows.shape[0]:
        return
    r = rows[u]
    for d in range(lane, grad.shape[1], 32):
        w = weight[r, d]
        g = grad[u, d] + _f32(weight_decay) * w
        weight[r, d] = w - _f32(lr) * g


@cuda.jit
def _momentum_kernel(weight, buf, rows, grad, lr, momentum, weight_decay, nesterov):
    lane = cuda.threadIdx.x
    u = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if u >= rows.shape[0]:
        return
    r = rows[u]
    mom = _f32(momentum)
    for d in range(lane, grad.shape[1], 32):
        w = weight[r, d]
        g = grad[u, d] + _f32(weight_decay) * w
        b = mom * buf[r, d] + g
        buf[r, d] = b
        upd = g + mom * b if nesterov else b
        weight[r, d] = w - _f32(lr) * upd


@cuda.jit
def _adagrad_kernel(weight, acc_sum, rows, grad, lr, eps, weight_decay):
    lane = cuda.threadIdx.x
    u = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if u >= rows.shape[0]:
        return
    r = rows[u]
    for d in range(lane, grad.shape[1], 32):
        w = weight[r, d]
        g = grad[u, d] + _f32(weight_decay) * w
        s = acc_sum[r, d] + g * g
        acc_sum[r, d] = s
        weight[r, d] = w - _f32(lr) * g / (math.sqrt(s) + _f32(eps))


@cuda.jit(device=True, inline=True)
def _adam_math(w, g, m, v, step_size, bc2_sqrt, b1c, b2, b2c, eps, weight_decay):
    """New (weight, exp_avg, exp_avg_sq) of one element, as torch.optim.Adam computes them."""
    g = g + weight_decay * w
    m = m + b1c * (g - m)
    v = b2 * v + b2c * g * g
    return w - step_size * (m / (math.sqrt(v) / bc2_sqrt + eps)), m, v


@cuda.jit
def _adam_kernel(weight, exp_avg, exp_avg_sq, step, rows, grad, lr, beta1, beta2, eps,
                 weight_decay):
    lane = cuda.threadIdx.x
    u = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    active = u < rows.shape[0]
    r = 0
    t = 0
    if active:
        r = rows[u]
        t = step[r] + 1
    cuda.syncthreads()  # every lane has read the row's old count before lane 0 stores t
    if active:
        if lane == 0:
            step[r] = t
        tf = np.float64(t)
        # Bias corrections in float64 from the row's own step count, as torch computes them.
        step_size = _f32(lr / (1.0 - math.pow(beta1, tf)))
        bc2_sqrt = _f32(math.sqrt(1.0 - math.pow(beta2, tf)))
        b1c = _f32(1.0 - beta1)
        b2 = _f32(beta2)
        b2c = _f32(1.0 - beta2)
        e = _f32(eps)
        wd = _f32(weight_decay)
        dim = grad.shape[1]
        # Two columns per lane and pass, both loaded before either is stored, so each lane
        # keeps two rows' worth of loads in flight.
        for d1 in range(lane, dim, 64):
            d2 = d1 + 32
            two = d2 < dim
            w1 = weight[r, d1]
            g1 = grad[u, d1]
            m1 = exp_avg[r, d1]
            v1 = exp_avg_sq[r, d1]
            w2 = g2 = m2 = v2 = _f32(0.0)
            if two:
                w2 = weight[r, d2]
                g2 = grad[u, d2]
                m2 = exp_avg[r, d2]
                v2 = exp_avg_sq[r, d2]
            w1, m1, v1 = _adam_math(w1, g1, m1, v1, step_size, bc2_sqrt, b1c, b2, b2c, e, wd)
            weight[r, d1] = w1
            exp_avg[r, d1] = m1
            exp_avg_sq[r, d1] = v1
            if two:
                w2, m2, v2 = _adam_math(w2, g2, m2, v2, step_size, bc2_sqrt, b1c, b2, b2c, e,
                                        wd)
                weight[r, d2] = w2
                exp_avg[r, d2] = m2
                exp_avg_sq[r, d2] = v2


@cuda.jit(device=True, inline=True)
def _hash_uniform(base, column):
    """Uniform in (0, 1) from the key's base word and a column word index (float64)."""
    bits = mix64_device(base + np.uint64(column) * _GOLDEN)
    return (np.float64((bits >> np.uint64(40)) & _MASK24) + 0.5) * (1.0 / 16777216.0)


@cuda.jit
def _init_kernel(keys, seed_word, kind, a, b, out):
    lane = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if i >= keys.shape[0]:
        return
    base = mix64_device(keys[i] ^ seed_word)
    for d in range(lane, out.shape[1], 32):
        u1 = _hash_uniform(base, 2 * d + 1)
        if kind == 0:
            v = a + b * u1
        else:
            u2 = _hash_uniform(base, 2 * d + 2)
            v = a + b * (math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
        out[i, d] = v


def _grid(n: int) -> tuple[int, tuple[int, int]]:
    return max(1, (n + WARPS - 1) // WARPS), (32, WARPS)


def _empty(dtype) -> np.ndarray:
    return np.empty(0, dtype)


def launch_pool(weight, rows, offsets, mean: bool, out, key_bag=None, row_slot=None,
                old_size: int = 0, num_slots: int = 1, slot_ids=None, strm: Any = 0) -> None:
    """``out[b] = sum/mean of weight[rows[j]]`` over the keys ``j`` of bag ``b``.

    weight: float32 ``[n_rows, dim]``; rows: int64 ``[nnz]`` (``-1``: zero vector);
    offsets: int64 ``[n_bags + 1]``; out: float32 ``[n_bags, dim]`` (fully written).
    With ``key_bag`` (int64 ``[nnz]``) also records the bag of every key and, in
    ``row_slot`` (int32), ``slot_ids[bag % num_slots]`` for every row ``>= old_size``.
    """
    n = out.shape[0]
    if n:
        if key_bag is None:
            key_bag, row_slot, slot_ids = _empty(np.int64), _empty(np.int32), \
                _empty(np.int32)
        blocks, threads = _grid(n)
        _pool_kernel[blocks, threads, strm](weight, rows, offsets, mean, out, key_bag,
                                            row_slot, old_size, num_slots, slot_ids)


def launch_segment_grad(seg, perm, key_bag, offsets, mean: bool, grad_out, values,
                        strm: Any = 0) -> None:
    """``values[seg[j]] += grad_out[key_bag[perm[j]]] (/ bag length if mean)`` for all ``j``.

    seg: int64 ``[nnz]`` non-decreasing segment ids (the unique-row index of each sorted key);
    perm: int64 ``[nnz]`` original position of each sorted key; key_bag: int64 ``[nnz]``;
    grad_out: float32 ``[n_bags, dim]``; values: float32 ``[U, dim]``, zeroed by the caller.
    """
    nnz = seg.shape[0]
    if nnz:
        blocks, threads = _grid((nnz + CHUNK - 1) // CHUNK)
        _segment_grad_kernel[blocks, threads, strm](
            seg, perm, key_bag, offsets, mean, grad_out, values
        )


def launch_sgd(weight, rows, grad, lr: float, weight_decay: float, strm: Any = 0) -> None:
    """Plain SGD on the distinct ``rows`` (int64 ``[U]``) with gradients ``grad`` ``[U, dim]``."""
    if rows.shape[0]:
        blocks, threads = _grid(rows.shape[0])
        _sgd_kernel[blocks, threads, strm](weight, rows, grad, lr, weight_decay)


def launch_momentum(weight, buf, rows, grad, lr: float, momentum: float, weight_decay: float,
                    nesterov: bool, strm: Any = 0) -> None:
    """Momentum / Nesterov SGD; ``buf`` float32 ``[n_rows, dim]`` is the momentum buffer."""
    if rows.shape[0]:
        blocks, threads = _grid(rows.shape[0])
        _momentum_kernel[blocks, threads, strm](
            weight, buf, rows, grad, lr, momentum, weight_decay, nesterov
        )


def launch_adagrad(weight, acc_sum, rows, grad, lr: float, eps: float, weight_decay: float,
                   strm: Any = 0) -> None:
    """Adagrad; ``acc_sum`` float32 ``[n_rows, dim]`` is the running sum of squares."""
    if rows.shape[0]:
        blocks, threads = _grid(rows.shape[0])
        _adagrad_kernel[blocks, threads, strm](weight, acc_sum, rows, grad, lr, eps,
                                               weight_decay)


def launch_adam(weight, exp_avg, exp_avg_sq, step, rows, grad, lr: float, beta1: float,
                beta2: float, eps: float, weight_decay: float, strm: Any = 0) -> None:
    """Adam with per-row step counts ``step`` (int32 ``[n_rows]``), incremented here."""
    if rows.shape[0]:
        blocks, threads = _grid(rows.shape[0])
        _adam_kernel[blocks, threads, strm](
            weight, exp_avg, exp_avg_sq, step, rows, grad, lr, beta1, beta2, eps, weight_decay
        )


def launch_init(keys, seed_word: int, kind: int, a: float, b: float, out,
                strm: Any = 0) -> None:
    """Initial vectors of :mod:`.initializers` (kind 0: ``a + b*U(0,1)``, kind 1:
    ``a + b*N(0,1)`` by Box-Muller) for int64 ``keys [n]`` into float32 ``out [n, dim]``."""
    n = keys.shape[0]
    if n:
        blocks, threads = _grid(n)
        _init_kernel[blocks, threads, strm](keys, np.int64(_to_signed(seed_word)), kind, a, b,
                                            out)


# ---------------------------------------------------------------------- torch wrappers
# The same kernels on CUDA tensors, launched by histboost.kernels.launch (fixed signatures,
# torch's current stream, a fraction of a regular Numba launch's host time).
_F2, _I1, _I4 = ("float32", 2), ("int64", 1), ("int32", 1)
_POOL = CudaKernel(_pool_kernel, (_F2, _I1, _I1, "boolean", _F2, _I1, _I4, "int64", "int64",
                                  _I4))
_SEGMENT_GRAD = CudaKernel(_segment_grad_kernel, (_I1, _I1, _I1, _I1, "boolean", _F2, _F2))
_SGD = CudaKernel(_sgd_kernel, (_F2, _I1, _F2, "float64", "float64"))
_MOMENTUM = CudaKernel(_momentum_kernel, (_F2, _F2, _I1, _F2, "float64", "float64", "float64",
                                          "boolean"))
_ADAGRAD = CudaKernel(_adagrad_kernel, (_F2, _F2, _I1, _F2, "float64", "float64", "float64"))
_ADAM = CudaKernel(_adam_kernel, (_F2, _F2, _F2, _I4, _I1, _F2, "float64", "float64",
                                  "float64", "float64", "float64"))
_INIT = CudaKernel(_init_kernel, (_I1, "int64", "int64", "float64", "float64", _F2))
KERNELS = (_POOL, _SEGMENT_GRAD, _SGD, _MOMENTUM, _ADAGRAD, _ADAM, _INIT)


def pool(weight: torch.Tensor, rows: torch.Tensor, offsets: torch.Tensor, mean: bool,
         out: torch.Tensor, key_bag: torch.Tensor | None = None,
         row_slot: torch.Tensor | None = None, old_size: int = 0, num_slots: int = 1,
         slot_ids: torch.Tensor | None = None) -> None:
    """:func:`launch_pool` on CUDA tensors (``slot_ids`` int32 ``[num_slots]``)."""
    n = out.shape[0]
    if n == 0:
        return
    if key_bag is None:
        key_bag = rows.new_empty(0)
        row_slot = slot_ids = rows.new_empty(0, dtype=torch.int32)
    blocks, threads = _grid(n)
    _POOL.launch(blocks, threads, weight.device, weight, rows, offsets, mean, out, key_bag,
                 row_slot, old_size, num_slots, slot_ids)


def segment_grad(seg: torch.Tensor, perm: torch.Tensor, key_bag: torch.Tensor,
                 offsets: torch.Tensor, mean: bool, grad_out: torch.Tensor,
                 values: torch.Tensor) -> None:
    """:func:`launch_segment_grad` on CUDA tensors."""
    nnz = seg.shape[0]
    if nnz:
        blocks, threads = _grid((nnz + CHUNK - 1) // CHUNK)
        _SEGMENT_GRAD.launch(blocks, threads, values.device, seg, perm, key_bag, offsets, mean,
                             grad_out, values)


def init_vectors(keys: torch.Tensor, seed_word: int, kind: int, a: float, b: float,
                 out: torch.Tensor) -> None:
    """:func:`launch_init` on CUDA tensors."""
    n = keys.shape[0]
    if n:
        blocks, threads = _grid(n)
        _INIT.launch(blocks, threads, out.device, keys, _to_signed(seed_word), kind, a, b, out)


def optimizer_update(kind: str, weight: torch.Tensor, state: dict[str, torch.Tensor],
                     rows: torch.Tensor, grad: torch.Tensor, hp: dict[str, Any]) -> None:
    """Fused update of ``kind`` ("sgd", "momentum", "adagrad", "adam") on CUDA tensors; Adam
    increments ``state["step"]`` of the rows itself."""
    n = rows.shape[0]
    if n == 0:
        return
    blocks, threads = _grid(n)
    dev = weight.device
    wd = hp["weight_decay"]
    if kind == "sgd":
        _SGD.launch(blocks, threads, dev, weight, rows, grad, hp["lr"], wd)
    elif kind == "momentum":
        _MOMENTUM.launch(blocks, threads, dev, weight, state["momentum_buffer"], rows, grad,
                         hp["lr"], hp["momentum"], wd, hp["nesterov"])
    elif kind == "adagrad":
        _ADAGRAD.launch(blocks, threads, dev, weight, state["sum"], rows, grad, hp["lr"],
                        hp["eps"], wd)
    elif kind == "adam":
        b1, b2 = hp["betas"]
        _ADAM.launch(blocks, threads, dev, weight, state["exp_avg"], state["exp_avg_sq"],
                     state["step"], rows, grad, hp["lr"], b1, b2, hp["eps"], wd)
    else:
        raise ValueError(f"unknown optimizer kind {kind!r}")
