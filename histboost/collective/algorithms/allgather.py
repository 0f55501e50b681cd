"""Allgather: every rank ends with all ranks' blocks, in rank order.

Each function takes ``buf`` (the whole output, ``sum(counts)`` elements, this rank's block
already at its offset) and fills in the other blocks. Blocks may differ in size (allgatherv).

Costs for ``p`` ranks and ``n`` elements in total (alpha: latency, beta: time per element):
    ring                (p-1) alpha + (p-1)/p n beta       best bandwidth, most steps
    recursive_doubling  log2(p) alpha + (p-1)/p n beta     (+2 steps, +n for the fold if p
                                                            is not a power of two)
    bruck               ceil(log2 p) alpha + (p-1)/p n beta + one local rotation copy
"""

from __future__ import annotations

from itertools import pairwise

from ..arrays import Buffer
from .context import Ctx, chunk_bounds
from .layout import FOLLOWER, LEADER, Fold, is_power_of_two, offsets_of

ALGORITHMS = ("ring", "recursive_doubling", "bruck")

# LightGBM's choice: ring for large totals on few ranks, else recursive doubling on powers of
# two and Bruck otherwise.
RING_MIN_BYTES = 10 << 20
RING_MAX_RANKS = 64


def choose(p: int, total_bytes: int) -> str:
    if total_bytes > RING_MIN_BYTES and p < RING_MAX_RANKS:
        return "ring"
    return "recursive_doubling" if is_power_of_two(p) else "bruck"


def run(algorithm: str, ctx: Ctx, buf: Buffer, counts: list[int]) -> None:
    if ctx.size == 1:
        return
    if algorithm == "ring":
        ring(ctx, buf, counts)
    elif algorithm == "recursive_doubling":
        recursive_doubling(ctx, buf, counts)
    elif algorithm == "bruck":
        bruck(ctx, buf, counts)
    else:
        raise ValueError(f"unknown allgather algorithm {algorithm!r}")


def ring(ctx: Ctx, buf: Buffer, counts: list[int]) -> None:
    """p-1 steps; at step i rank r forwards block r-i to r+1 and receives block r-i-1 from
    r-1, straight into place. Pipelined where the transport allows: each chunk of a block is
    forwarded as soon as it has arrived."""
    p, r = ctx.size, ctx.rank
    off = offsets_of(counts)
    right, left = (r + 1) % p, (r - 1) % p
    k = ctx.chunks(buf, max(counts))
    if k == 1:
        for i in range(p - 1):
            sb, rb = (r - i) % p, (r - i - 1) % p
            ctx.exchange(
                sends=[(right, buf.seg(off[sb], off[sb + 1]))],
                recvs=[(left, buf.seg(off[rb], off[rb + 1]))],
            )
        return

    def pieces(b: int) -> list[tuple[int, int]]:
        return [(off[b] + a, off[b] + c) for a, c in pairwise(chunk_bounds(counts[b], k, 1))]

    sent = ctx.post(sends=[(right, buf.seg(a, c)) for a, c in pieces(r)])
    recvs = [ctx.post(recvs=[(left, buf.seg(a, c))]) for a, c in pieces((r - 1) % p)]
    for i in range(p - 1):
        rb = (r - i - 1) % p
        nxt_pieces = pieces((r - i - 2) % p)
        nxt = []
        for j, (a, c) in enumerate(pieces(rb)):
            ctx.wait(recvs[j])
            if i < p - 2:  # forward what just arrived; receive the next block's piece
                sent += ctx.post(sends=[(right, buf.seg(a, c))])
                nxt.append(ctx.post(recvs=[(left, buf.seg(*nxt_pieces[j]))]))
        recvs = nxt
    ctx.wait(sent)


def recursive_doubling(ctx: Ctx, buf: Buffer, counts: list[int]) -> None:
    """Partners at distance 1, 2, 4, ... swap everything they hold, which doubles it. Any p:
    pair followers hand their block to their leader first and get the whole result last."""
    fold = Fold(ctx.size)
    off = offsets_of(counts)
    role, v, partner = fold.role(ctx.rank)
    if role == FOLLOWER:
        ctx.exchange(sends=[(partner, buf.seg(off[ctx.rank], off[ctx.rank + 1]))])
        ctx.exchange(recvs=[(partner, buf.seg(0, off[-1]))])
        return
    if role == LEADER:
        ctx.exchange(recvs=[(partner, buf.seg(off[partner], off[partner + 1]))])
    d = 1
    while d < fold.k:
        pv = v ^ d
        mine = v & ~(d - 1)  # first virtual rank of the group of d whose blocks I hold
        theirs = pv & ~(d - 1)
        peer = fold.real(pv)
        ctx.exchange(
            sends=[(peer, buf.seg(*fold.span(mine, mine + d, off)))],
            recvs=[(peer, buf.seg(*fold.span(theirs, theirs + d, off)))],
        )
        d <<= 1
    if role == LEADER:
        ctx.exchange(sends=[(partner, buf.seg(0, off[-1]))])


def bruck(ctx: Ctx, buf: Buffer, counts: list[int]) -> None:
    """Bruck et al.: at step s rank r sends the first min(2^s, p - have) blocks it holds to
    r - 2^s and appends those of r + 2^s, in a scratch buffer that starts with its own block
    (so holds blocks r, r+1, ...); one rotation puts them in rank order at the end."""
    p, r = ctx.size, ctx.rank
    off = offsets_of(counts)
    total = off[-1]
    tmp = ctx.scratch(buf, total)
    tmp.copy_(0, buf, off[r], counts[r])
    have, filled, d = 1, counts[r], 1
    while have < p:
        nb = min(d, p - have)
        send_len = sum(counts[(r + j) % p] for j in range(nb))
        recv_len = sum(counts[(r + have + j) % p] for j in range(nb))
        ctx.exchange(
            sends=[((r - d) % p, tmp.seg(0, send_len))],
            recvs=[((r + d) % p, tmp.seg(filled, filled + recv_len))],
        )
        have += nb
        filled += recv_len
        d <<= 1
    # tmp holds blocks r..p-1 then 0..r-1: two copies put them in rank order.
    tail = total - off[r]
    buf.copy_(off[r], tmp, 0, tail)
    buf.copy_(0, tmp, tail, off[r])
