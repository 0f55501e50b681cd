"""Allreduce: every rank ends with the elementwise reduction over all ranks.

Each function takes ``buf``, this rank's input (the working copy), and leaves the result in
it. ``red.rec_size`` elements form one record, which block cuts never split.

    recursive_doubling        partners at distance 1, 2, 4, ... swap whole buffers and both
                              compute f(lower rank's, higher rank's); log2(p) steps of n each:
                              for small buffers.
    ring                      ring reduce-scatter + ring allgather (Rabit, Baidu): 2(p-1)
                              steps of n/p each: bandwidth-optimal.
    allgather_reduce          allgather every rank's whole buffer, then reduce locally in rank
                              order f(...f(f(x0, x1), x2)..., x_{p-1}): fewest steps (LightGBM's
                              small-buffer path).
    reduce_scatter_allgather  recursive-halving reduce-scatter + allgather (Rabenseifner;
                              LightGBM's large-buffer path).
    auto                      LightGBM's size rule: allgather_reduce when the buffer has fewer
                              records than ranks or is under SMALL_BYTES, else
                              reduce_scatter_allgather.

All ranks end bit-identical: every block is reduced once and copied, or reduced by every rank
with the same operands in the same order.
"""

from __future__ import annotations

from ..arrays import Buffer
from ..ops import BoundReducer
from . import allgather, reduce_scatter
from .context import Ctx, combine, exchange_and_combine, send_pieces
from .layout import FOLLOWER, LEADER, Fold, offsets_of, split_counts

ALGORITHMS = ("ring", "recursive_doubling", "allgather_reduce", "reduce_scatter_allgather")

SMALL_BYTES = 4096


def choose(p: int, n_records: int, nbytes: int) -> str:
    if n_records < p or nbytes < SMALL_BYTES:
        return "allgather_reduce"
    return "reduce_scatter_allgather"


def run(algorithm: str, ctx: Ctx, buf: Buffer, red: BoundReducer) -> None:
    if ctx.size == 1 or buf.n == 0:
        return
    if algorithm == "recursive_doubling":
        recursive_doubling(ctx, buf, red)
    elif algorithm == "ring":
        ring(ctx, buf, red)
    elif algorithm == "allgather_reduce":
        allgather_reduce(ctx, buf, red)
    elif algorithm == "reduce_scatter_allgather":
        reduce_scatter_allgather(ctx, buf, red)
    else:
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}")


def _blocks(ctx: Ctx, buf: Buffer, red: BoundReducer) -> list[int]:
    """One record-aligned block per rank."""
    return split_counts(buf.n // red.rec_size, ctx.size, red.rec_size)


def recursive_doubling(ctx: Ctx, buf: Buffer, red: BoundReducer) -> None:
    fold = Fold(ctx.size)
    n = buf.n
    role, v, partner = fold.role(ctx.rank)
    if role == FOLLOWER:
        send_pieces(ctx, partner, buf, 0, n, red.rec_size)
        ctx.exchange(recvs=[(partner, buf.seg(0, n))])
        return
    tmp = ctx.scratch(buf, n)
    if role == LEADER:
        exchange_and_combine(ctx, red, partner, buf, 0, 0, buf, 0, n, tmp, mine_first=True)
    # Each step sends the whole buffer while folding the partner's into it, so results go
    # to the other buffer (ping-pong) rather than over data still being sent.
    cur, other = buf, tmp
    d = 1
    while d < fold.k:
        pv = v ^ d
        exchange_and_combine(ctx, red, fold.real(pv), cur, 0, n, cur, 0, n, other,
                             mine_first=v < pv, into_tmp=True)
        cur, other = other, cur
        d <<= 1
    if cur is not buf:
        buf.copy_(0, cur, 0, n)
    if role == LEADER:
        ctx.exchange(sends=[(partner, buf.seg(0, n))])


def ring(ctx: Ctx, buf: Buffer, red: BoundReducer) -> None:
    counts = _blocks(ctx, buf, red)
    reduce_scatter.ring(ctx, buf, counts, red)
    allgather.ring(ctx, buf, counts)


def reduce_scatter_allgather(ctx: Ctx, buf: Buffer, red: BoundReducer) -> None:
    counts = _blocks(ctx, buf, red)
    nbytes = buf.n * buf.wire.element_size() * buf.scale
    reduce_scatter.run(reduce_scatter.choose(ctx.size, nbytes), ctx, buf, counts, red)
    allgather.run(allgather.choose(ctx.size, nbytes), ctx, buf, counts)


def allgather_reduce(ctx: Ctx, buf: Buffer, red: BoundReducer) -> None:
    p, n = ctx.size, buf.n
    counts = [n] * p
    off = offsets_of(counts)
    big = ctx.scratch(buf, n * p)
    big.copy_(off[ctx.rank], buf, 0, n)
    allgather.run(allgather.choose(p, n * p * buf.wire.element_size() * buf.scale), ctx, big,
                  counts)
    # Every rank folds the copies in rank order, so all get the same bits.
    buf.copy_(0, big, 0, n)
    for i in range(1, p):
        combine(red, buf, 0, big, off[i], n, dst_first=True)
