"""Reduce-scatter: rank r ends with block r of the elementwise reduction over all ranks.

Each function takes ``buf``, this rank's whole input (clobbered: it is the working copy), and
leaves the reduced block r at ``offsets[r]`` of ``buf``. Blocks may differ in size and never
cut a record (the caller makes ``counts`` multiples of the record size).

Every block is reduced on exactly one rank, so all ranks agree bit for bit; within a block the
operand order is fixed by the algorithm (documented per function), so reruns repeat results.

Costs (``n`` elements in all, ``p`` ranks):
    recursive_halving  log2(p) alpha + (p-1)/p n (beta + gamma)   (+1 step, +n for the fold if
                                                                   p is not a power of two)
    ring               (p-1) alpha + (p-1)/p n (beta + gamma)
"""

from __future__ import annotations

from itertools import pairwise

from ..arrays import Buffer
from ..ops import BoundReducer
from .context import Ctx, chunk_bounds, combine, exchange_and_combine, send_pieces
from .layout import FOLLOWER, LEADER, Fold, is_power_of_two, offsets_of

ALGORITHMS = ("recursive_halving", "ring")

# LightGBM's choice: recursive halving unless p is not a power of two and the buffer is large
# (the fold then moves the whole buffer once more).
RING_MIN_BYTES = 10 << 20


def choose(p: int, total_bytes: int) -> str:
    if is_power_of_two(p) or total_bytes < RING_MIN_BYTES:
        return "recursive_halving"
    return "ring"


def run(algorithm: str, ctx: Ctx, buf: Buffer, counts: list[int], red: BoundReducer) -> None:
    if ctx.size == 1:
        return
    if algorithm == "recursive_halving":
        recursive_halving(ctx, buf, counts, red)
    elif algorithm == "ring":
        ring(ctx, buf, counts, red)
    else:
        raise ValueError(f"unknown reduce_scatter algorithm {algorithm!r}")


def recursive_halving(ctx: Ctx, buf: Buffer, counts: list[int], red: BoundReducer) -> None:
    """Partners at distance k/2, k/4, ..., 1 (virtual ranks) each keep the half of their
    current range that holds their own blocks, send the other half and reduce what comes
    back: f(lower virtual rank's part, higher's). Non-powers of two: pair followers hand their
    whole input to their leader (f(leader, follower)) and get their block back at the end."""
    fold = Fold(ctx.size)
    off = offsets_of(counts)
    r = ctx.rank
    role, v, partner = fold.role(r)
    if role == FOLLOWER:
        send_pieces(ctx, partner, buf, 0, off[-1], red.rec_size)
        ctx.exchange(recvs=[(partner, buf.seg(off[r], off[r + 1]))])
        return
    tmp = ctx.scratch(buf, off[-1])
    if role == LEADER:
        exchange_and_combine(ctx, red, partner, buf, 0, 0, buf, 0, off[-1], tmp,
                             mine_first=True)
    lo, hi = 0, fold.k
    d = fold.k // 2
    while d >= 1:
        mid = lo + d
        if v < mid:
            keep, give, pv = (lo, mid), (mid, hi), v + d
        else:
            keep, give, pv = (mid, hi), (lo, mid), v - d
        ks, ke = fold.span(*keep, off)
        gs, ge = fold.span(*give, off)
        exchange_and_combine(ctx, red, fold.real(pv), buf, gs, ge - gs, buf, ks, ke - ks, tmp,
                             mine_first=v < pv)
        lo, hi = keep
        d //= 2
    if role == LEADER:
        ctx.exchange(sends=[(partner, buf.seg(off[partner], off[partner + 1]))])


def ring(ctx: Ctx, buf: Buffer, counts: list[int], red: BoundReducer) -> None:
    """p-1 steps; at step i rank r passes its partial of block r-1-i to r+1 and folds the
    partial of block r-2-i from r-1 into its own: f(incoming, mine). Block b is thus reduced
    in ring order b+1, b+2, ..., b.

    Pipelined where the transport allows: blocks go in chunks, and each chunk is forwarded to
    the next rank as soon as it is folded, so reducing overlaps the transfers (receives
    alternate between two scratch halves, since chunk bounds differ between blocks)."""
    p, r = ctx.size, ctx.rank
    off = offsets_of(counts)
    right, left = (r + 1) % p, (r - 1) % p
    big = max(counts)
    k = ctx.chunks(buf, big)
    if k == 1:
        tmp = ctx.scratch(buf, big)
        for i in range(p - 1):
            sb, rb = (r - 1 - i) % p, (r - 2 - i) % p
            ctx.exchange(
                sends=[(right, buf.seg(off[sb], off[sb + 1]))],
                recvs=[(left, tmp.seg(0, counts[rb]))],
            )
            combine(red, buf, off[rb], tmp, 0, counts[rb], dst_first=False)
        return
    tmps = [ctx.scratch(buf, big), ctx.scratch(buf, big)]
    rec = red.rec_size

    def pieces(b: int) -> list[tuple[int, int]]:
        return list(pairwise(chunk_bounds(counts[b], k, rec)))

    def post_recvs(step: int, j: int | None = None) -> list:
        b = (r - 2 - step) % p
        sel = pieces(b) if j is None else [pieces(b)[j]]
        return [ctx.post(recvs=[(left, tmps[step % 2].seg(a, c))]) for a, c in sel]

    sb = (r - 1) % p
    sent = ctx.post(sends=[(right, buf.seg(off[sb] + a, off[sb] + c)) for a, c in pieces(sb)])
    recvs = post_recvs(0)
    for i in range(p - 1):
        rb = (r - 2 - i) % p
        nxt = []
        for j, (a, c) in enumerate(pieces(rb)):
            ctx.wait(recvs[j])
            combine(red, buf, off[rb] + a, tmps[i % 2], a, c - a, dst_first=False)
            if i < p - 2:  # block rb is what this rank sends at the next step
                sent += ctx.post(sends=[(right, buf.seg(off[rb] + a, off[rb] + c))])
                nxt += post_recvs(i + 1, j)
        recvs = nxt
    ctx.wait(sent)
