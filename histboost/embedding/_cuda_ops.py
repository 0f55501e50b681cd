"""Numba-CUDA kernels for pooling, row-sparse gradients and the sparse optimiser updates.

All kernels use one warp per bag / chunk / row: the 32 lanes walk the embedding columns
(``d = lane, lane + 32, ...``), so every row access is a coalesced 128-byte line and any
``dim`` works. Blocks are ``(32, WARPS)`` threads.

* :func:`launch_pool` sums the rows of each bag (HugeCTR's forward "sum/mean" kernel).
* :func:`launch_segment_grad` sums gradients of equal rows after the keys were sorted by row.
  Zipf-distributed keys make a few rows very long segments (a hot key can occur 10^5 times in
  one batch), so segments are not given one warp each, which would leave one warp doing all
  the work: the sorted keys are cut into fixed chunks of ``CHUNK`` keys, a warp reduces its
  chunk in registers and writes each segment's partial sum with a plain store when the segment
  lies wholly inside the chunk, or with an atomic add when it crosses a chunk boundary (the
  output is zeroed first). Float atomics make the summation order of long segments vary
  between runs on the GPU; the CPU path is deterministic.
* :func:`launch_sgd`, :func:`launch_momentum`, :func:`launch_adagrad`, :func:`launch_adam`
  update the distinct rows of a :class:`~._ops.RowSparseGrad` in place, with the same formulas
  as ``torch.optim`` applied per row (see :mod:`.optim`).

The launchers take Numba device arrays (or NumPy arrays under ``NUMBA_ENABLE_CUDASIM=1``,
which the CPU test suite uses); the torch-level wrappers at the bottom convert CUDA tensors
and launch on torch's current stream.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from numba import cuda

from ._cuda_glue import cai, numba_device, stream
from ._cuda_kernels import mix64_device
from ._hashing import _to_signed

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK24 = np.uint64((1 << 24) - 1)

WARPS = 8
CHUNK = 32

_f32 = np.float32


@cuda.jit
def _pool_kernel(weight, rows, offsets, mean, out):
    lane = cuda.threadIdx.x
    bag = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if bag >= out.shape[0]:
        return
    start = offsets[bag]
    end = offsets[bag + 1]
    scale = _f32(1.0)
    if mean and end > start:
        scale = _f32(1.0) / _f32(end - start)
    for d in range(lane, out.shape[1], 32):
        acc = _f32(0.0)
        for j in range(start, end):
            r = rows[j]
            if r >= 0:
                acc += weight[r, d]
        out[bag, d] = acc * scale


@cuda.jit
def _segment_grad_kernel(seg, perm, key_bag, offsets, mean, grad_out, values):
    lane = cuda.threadIdx.x
    chunk = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    nnz = seg.shape[0]
    j0 = chunk * CHUNK
    if j0 >= nnz:
        return
    j1 = min(j0 + CHUNK, nnz)
    first = seg[j0]
    # The chunk's first segment is whole only if it starts here; its last only if it ends here.
    starts_here = j0 == 0 or seg[j0 - 1] != first
    ends_here = j1 == nnz or seg[j1] != seg[j1 - 1]
    for d in range(lane, grad_out.shape[1], 32):
        cur = first
        acc = _f32(0.0)
        for j in range(j0, j1):
            u = seg[j]
            if u != cur:
                if cur != first or starts_here:
                    values[cur, d] = acc
                else:
                    cuda.atomic.add(values, (cur, d), acc)
                cur = u
                acc = _f32(0.0)
            b = key_bag[perm[j]]
            g = grad_out[b, d]
            if mean:
                g = g / _f32(offsets[b + 1] - offsets[b])
            acc += g
        if (cur != first or starts_here) and ends_here:
            values[cur, d] = acc
        else:
            cuda.atomic.add(values, (cur, d), acc)


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


@cuda.jit
def _adam_kernel(weight, exp_avg, exp_avg_sq, step, rows, grad, lr, beta1, beta2, eps,
                 weight_decay):
    lane = cuda.threadIdx.x
    u = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if u >= rows.shape[0]:
        return
    r = rows[u]
    t = np.float64(step[r])  # already incremented for this update
    # Bias corrections in float64 from the row's own step count, as torch computes them.
    step_size = _f32(lr / (1.0 - math.pow(beta1, t)))
    bc2_sqrt = _f32(math.sqrt(1.0 - math.pow(beta2, t)))
    b1c = _f32(1.0 - beta1)
    b2 = _f32(beta2)
    b2c = _f32(1.0 - beta2)
    for d in range(lane, grad.shape[1], 32):
        w = weight[r, d]
        g = grad[u, d] + _f32(weight_decay) * w
        m = exp_avg[r, d]
        m = m + b1c * (g - m)
        v = b2 * exp_avg_sq[r, d] + b2c * g * g
        exp_avg[r, d] = m
        exp_avg_sq[r, d] = v
        denom = math.sqrt(v) / bc2_sqrt + _f32(eps)
        weight[r, d] = w - step_size * (m / denom)


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


def launch_pool(weight, rows, offsets, mean: bool, out, strm: Any = 0) -> None:
    """``out[b] = sum/mean of weight[rows[j]]`` over the keys ``j`` of bag ``b``.

    weight: float32 ``[n_rows, dim]``; rows: int64 ``[nnz]`` (``-1``: zero vector);
    offsets: int64 ``[n_bags + 1]``; out: float32 ``[n_bags, dim]`` (fully written).
    """
    n = out.shape[0]
    if n:
        blocks, threads = _grid(n)
        _pool_kernel[blocks, threads, strm](weight, rows, offsets, mean, out)


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
    """Adam with per-row step counts ``step`` (int32 ``[n_rows]``, already incremented)."""
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
def pool(weight: torch.Tensor, rows: torch.Tensor, offsets: torch.Tensor, mean: bool,
         out: torch.Tensor) -> None:
    """:func:`launch_pool` on CUDA tensors (torch's current stream)."""
    with numba_device(weight.device):
        launch_pool(cai(weight), cai(rows), cai(offsets), mean, cai(out), stream(weight.device))


def segment_grad(seg: torch.Tensor, perm: torch.Tensor, key_bag: torch.Tensor,
                 offsets: torch.Tensor, mean: bool, grad_out: torch.Tensor,
                 values: torch.Tensor) -> None:
    """:func:`launch_segment_grad` on CUDA tensors."""
    with numba_device(values.device):
        launch_segment_grad(
            cai(seg), cai(perm), cai(key_bag), cai(offsets), mean, cai(grad_out), cai(values),
            stream(values.device),
        )


def init_vectors(keys: torch.Tensor, seed_word: int, kind: int, a: float, b: float,
                 out: torch.Tensor) -> None:
    """:func:`launch_init` on CUDA tensors."""
    with numba_device(out.device):
        launch_init(cai(keys), seed_word, kind, a, b, cai(out), stream(out.device))


def optimizer_update(kind: str, weight: torch.Tensor, state: dict[str, torch.Tensor],
                     rows: torch.Tensor, grad: torch.Tensor, hp: dict[str, Any]) -> None:
    """Fused update of ``kind`` ("sgd", "momentum", "adagrad", "adam") on CUDA tensors."""
    dev = weight.device
    with numba_device(dev):
        s = stream(dev)
        w, r, g = cai(weight), cai(rows), cai(grad)
        wd = hp["weight_decay"]
        if kind == "sgd":
            launch_sgd(w, r, g, hp["lr"], wd, s)
        elif kind == "momentum":
            launch_momentum(w, cai(state["momentum_buffer"]), r, g, hp["lr"], hp["momentum"],
                            wd, hp["nesterov"], s)
        elif kind == "adagrad":
            launch_adagrad(w, cai(state["sum"]), r, g, hp["lr"], hp["eps"], wd, s)
        elif kind == "adam":
            b1, b2 = hp["betas"]
            launch_adam(w, cai(state["exp_avg"]), cai(state["exp_avg_sq"]), cai(state["step"]),
                        r, g, hp["lr"], b1, b2, hp["eps"], wd, s)
        else:
            raise ValueError(f"unknown optimizer kind {kind!r}")
