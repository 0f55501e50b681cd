"""Collectives through one memory segment that every rank of a host maps
(`histboost.collective.shm.SharedSegment`), instead of point-to-point messages.

A step: each rank copies (a piece of) its input into its own stage slot, all meet at a
barrier, then each reads the other ranks' slots in place. Per rank and per byte of input,
allreduce is two copies and one reduction pass over 1/p of the data (copy in; reduce its own
block, reading every rank's slot, in rank order; barrier; copy the other blocks out), where the
ring over point-to-point rings copies every byte into and out of a ring slot at each of its
2(p - 1) steps; up to `FOLD_ALL_BYTES`, and at any size in groups of up to `FOLD_ALL_RANKS`
ranks, every rank reduces the whole step instead, and the second barrier goes. reduce_scatter,
allgather and broadcast need one barrier per step.
Messages larger than a slot go in several steps. `reduce_blocks` reduces a block of columns
per rank in place, without copying a rank's own block: the stage carries the other blocks.

Results are deterministic and the same bits on every rank: each block is reduced once, by
its owner, as ``f(...f(f(x0, x1), x2)..., x_{p-1})`` in rank order (the order of
``allgather_reduce``), and the others copy it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import Buffer
from ..ops import BoundReducer
from .context import Ctx
from .layout import offsets_of, split_counts

ALGORITHM = "shared"
# allreduce steps of at most this many bytes per rank skip the second barrier: every rank
# folds all of them (the same operands in the same order as the block owners would), which
# reads p times the data but waits once, and a wait (a wake-up) costs more than that read
FOLD_ALL_BYTES = 256 << 10
# ... and so do steps of any size in groups of at most this many ranks: per element, folding
# all reads and writes 5 (2 ranks) or 6 (3 ranks) elements where the blocks move 5 and 5.3
# (copy in, the own block's fold, its copy to the slot, the other blocks' copy out), and the
# second meeting of the ranks, whose cost is the slower rank's lag, goes
FOLD_ALL_RANKS = 3
# descriptor codes of the collectives, compared by every step's barrier
OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BROADCAST, OP_REDUCE_BLOCKS = 1, 2, 3, 4, 5


def capacity(seg: Any, buf: Buffer) -> int:
    """Elements of ``buf``'s dtype that one stage slot holds."""
    return seg.stage_bytes // (buf.wire.element_size() * buf.scale)


def fits(seg: Any, buf: Buffer, rec: int, pieces: int = 1) -> bool:
    """Whether a slot holds ``pieces`` pieces of at least one record of ``rec`` elements."""
    return capacity(seg, buf) // pieces >= rec


def _slot(seg: Any, half: int, rank: int, like: Buffer) -> Buffer:
    return like.on(seg.tensor(half, rank, like.wire.dtype))


def _fold(red: BoundReducer, out: Buffer, out_at: int, sources: list[Buffer], at: int,
          n: int) -> None:
    """out[out_at:out_at+n] = f(...f(f(s0, s1), s2)..., s_{p-1}) over sources[i][at:at+n]."""
    if n == 0:
        return
    user = red.user_arrays
    d = out.view(out_at, out_at + n, user)
    views = [s.view(at, at + n, user) for s in sources]
    if red.into(views[0], views[1], d):
        rest = views[2:]
    else:
        out.copy_(out_at, sources[0], at, n)
        rest = views[1:]
    for v in rest:
        red(d, v, into_a=True)


def allreduce(ctx: Ctx, seg: Any, buf: Buffer, red: BoundReducer, desc: tuple[int, ...],
              tail: Buffer | None = None) -> None:
    """``buf`` (this rank's input, on the CPU) becomes the reduction over all ranks. desc:
    (call number, bytes), compared at every step. tail: a few elements of ``buf``'s dtype
    (a built-in op) reduced in place too, carried after ``buf``'s elements of the last step
    and folded by every rank."""
    p, r, rec = ctx.size, ctx.rank, red.rec_size
    extra = 0 if tail is None else tail.n
    cap = (capacity(seg, buf) - extra) // rec * rec
    starts = range(0, buf.n, cap)
    for start in starts:
        m = min(cap, buf.n - start)
        half = seg.next_half(ctx)
        slots = [_slot(seg, half, q, buf) for q in range(p)]
        slots[r].copy_(0, buf, start, m)
        last = start == starts[-1]
        if last and extra:
            slots[r].copy_(m, tail, 0, extra)
        seg.sync(ctx, half, (OP_ALLREDUCE, *desc))
        if last and extra:
            _fold(red, tail, 0, slots, m, extra)
        if p <= FOLD_ALL_RANKS or m * buf.scale * buf.wire.element_size() <= FOLD_ALL_BYTES:
            _fold(red, buf, start, slots, 0, m)
            continue
        off = offsets_of(split_counts(m // rec, p, rec))
        lo, hi = off[r], off[r + 1]
        _fold(red, buf, start + lo, slots, lo, hi - lo)
        slots[r].copy_(lo, buf, start + lo, hi - lo)
        seg.barrier(ctx)
        for q in range(p):
            if q != r:
                buf.copy_(start + off[q], slots[q], off[q], off[q + 1] - off[q])


def reduce_scatter(ctx: Ctx, seg: Any, src: Buffer, counts: list[int], red: BoundReducer,
                   result: Buffer, desc: tuple[int, ...]) -> None:
    """``result`` (``counts[rank]`` elements) becomes block ``rank`` of the reduction of
    ``src`` over all ranks (blocks of ``counts`` elements, whole records)."""
    p, r, rec = ctx.size, ctx.rank, red.rec_size
    off = offsets_of(counts)
    width = capacity(seg, src) // p // rec * rec  # of each block, per step
    for start in range(0, max(counts), width):
        half = seg.next_half(ctx)
        slots = [_slot(seg, half, q, src) for q in range(p)]
        for q in range(p):
            slots[r].copy_(q * width, src, off[q] + start,
                           max(min(width, counts[q] - start), 0))
        seg.sync(ctx, half, (OP_REDUCE_SCATTER, *desc))
        _fold(red, result, start, slots, r * width, max(min(width, counts[r] - start), 0))


def allgather(ctx: Ctx, seg: Any, out: Buffer, counts: list[int], desc: tuple[int, ...]
              ) -> None:
    """``out`` holds this rank's piece at its offset; it receives every other rank's."""
    p, r = ctx.size, ctx.rank
    off = offsets_of(counts)
    width = capacity(seg, out)
    for start in range(0, max(counts), width):
        half = seg.next_half(ctx)
        slots = [_slot(seg, half, q, out) for q in range(p)]
        slots[r].copy_(0, out, off[r] + start, max(min(width, counts[r] - start), 0))
        seg.sync(ctx, half, (OP_ALLGATHER, *desc))
        for q in range(p):
            if q != r:
                out.copy_(off[q] + start, slots[q], 0, max(min(width, counts[q] - start), 0))


def broadcast(ctx: Ctx, seg: Any, buf: Buffer, root: int, desc: tuple[int, ...]) -> None:
    """``buf`` becomes the root's."""
    r = ctx.rank
    width = capacity(seg, buf)
    for start in range(0, buf.n, width):
        m = min(width, buf.n - start)
        half = seg.next_half(ctx)
        slot = _slot(seg, half, root, buf)
        if r == root:
            slot.copy_(0, buf, start, m)
        seg.sync(ctx, half, (OP_BROADCAST, *desc))
        if r != root:
            buf.copy_(start, slot, 0, m)


def _block_layout(n: int, bounds: list[int], common: tuple[int, int], c: int
                  ) -> tuple[list[list[int]], list[int], int]:
    """Per node of a `reduce_blocks` step, where things are in rank q's stage slot: the other
    ranks' blocks in rank order (``at[q][b]``, elements from the node's start, for b != q),
    then the common columns (``common_at[q]``); and the most elements a node takes in any
    rank's slot."""
    p = len(bounds) - 1
    widths = [(bounds[b + 1] - bounds[b]) * c for b in range(p)]
    at, common_at = [], []
    for q in range(p):
        row, pos = [], 0
        for b in range(p):
            row.append(pos)
            if b != q:
                pos += widths[b]
        at.append(row)
        common_at.append(pos)
    per_node = max(common_at) + (common[1] - common[0]) * c
    return at, common_at, per_node


def fits_blocks(seg: Any, x: np.ndarray, bounds: list[int], common: tuple[int, int],
                tail_n: int) -> bool:
    """Whether a stage slot holds one node (x[0]) of `reduce_blocks` plus the tail."""
    k, n = x.shape[:2]
    c = x[0, 0].size if k and n else 1
    per_node = _block_layout(n, bounds, common, c)[2]
    return (per_node + tail_n) * x.itemsize <= seg.stage_bytes


def _fold_rank_order(uf: np.ufunc, parts: list[np.ndarray], out: np.ndarray) -> None:
    """out = uf(...uf(uf(parts[0], parts[1]), parts[2])..., parts[-1]); out may be one of
    the parts (then only ``parts[i] is out`` for that one), as `reduce_blocks` folds a
    rank's own block in place. The association is the rank order, whichever rank folds:
    the built-in ops are commutative, so uf(a, b) and uf(b, a) are the same bits."""
    own = next((i for i, v in enumerate(parts) if v is out), None)
    if own is None or own == 0:
        if own is None:
            uf(parts[0], parts[1], out=out)
            rest = parts[2:]
        else:
            rest = parts[1:]
        for v in rest:
            uf(out, v, out=out)
        return
    if own == 1:
        uf(parts[0], out, out=out)
    else:
        acc = uf(parts[0], parts[1])
        for v in parts[2:own]:
            uf(acc, v, out=acc)
        uf(acc, out, out=out)
    for v in parts[own + 1:]:
        uf(out, v, out=out)


def reduce_blocks(ctx: Ctx, seg: Any, x: np.ndarray, bounds: list[int],
                  common: tuple[int, int], uf: np.ufunc, tail: np.ndarray | None,
                  desc: tuple[int, ...]) -> None:
    """x (k, n, c) numpy, C-contiguous: columns ``bounds[r]:bounds[r+1]`` of axis 1 become,
    in place, their reduction (ufunc ``uf``) over all ranks, and so do the columns
    ``common`` and ``tail`` (flat, reduced in place) on every rank. Each rank copies the other
    ranks' blocks of its x and the common columns into its stage slot, the ranks meet, and
    each folds its own block, in rank order, from its x and the others' slots: (p-1)/p of
    x's bytes are copied, not all of them twice. Nodes (axis 0) go in several steps when a
    slot cannot hold them all; the tail travels in the last. Common columns and the tail are
    folded by every rank in rank order from the slots: the same bits everywhere."""
    p, r = ctx.size, ctx.rank
    k, n, c = x.shape
    at, common_at, per_node = _block_layout(n, bounds, common, c)
    extra = 0 if tail is None else tail.size
    cap = seg.stage_bytes // x.itemsize - extra
    step = max(1, cap // per_node) if per_node else max(k, 1)
    c0, c1 = common
    lo, hi = bounds[r], bounds[r + 1]
    starts = range(0, max(k, 1), step)
    for k0 in starts:
        k1 = min(k, k0 + step)
        m = k1 - k0
        half = seg.next_half(ctx)
        slots = [seg.array(half, q, x.dtype) for q in range(p)]
        mine = slots[r]
        for b in range(p):
            w = bounds[b + 1] - bounds[b]
            if b != r and w and m:
                mine[m * at[r][b]:m * (at[r][b] + w * c)].reshape(m, w, c)[...] = \
                    x[k0:k1, bounds[b]:bounds[b + 1]]
        cw = c1 - c0
        end = m * (common_at[r] + cw * c)
        if cw and m:
            mine[m * common_at[r]:end].reshape(m, cw, c)[...] = x[k0:k1, c0:c1]
        last = k0 == starts[-1]
        if last and extra:
            mine[end:end + extra] = tail.reshape(-1)
        seg.sync(ctx, half, (OP_REDUCE_BLOCKS, *desc))
        if hi > lo and m:
            own = x[k0:k1, lo:hi]
            w = hi - lo
            _fold_rank_order(uf, [own if q == r else slots[q][m * at[q][r]:m * (at[q][r] + w * c)]
                                  .reshape(m, w, c) for q in range(p)], own)
        if cw and m:
            _fold_rank_order(uf, [slots[q][m * common_at[q]:m * (common_at[q] + cw * c)]
                                  .reshape(m, cw, c) for q in range(p)], x[k0:k1, c0:c1])
        if last and extra:
            ends = [m * (common_at[q] + cw * c) for q in range(p)]
            _fold_rank_order(uf, [slots[q][e:e + extra] for q, e in enumerate(ends)],
                             tail.reshape(-1))
