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

from ..arrays import Buffer
from ..ops import BoundReducer
from .context import Ctx, combine
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
        ctx.exchange(sends=[(partner, buf.seg(0, off[-1]))])
        ctx.exchange(recvs=[(partner, buf.seg(off[r], off[r + 1]))])
        return
    tmp = ctx.scratch(buf, off[-1])
    if role == LEADER:
        ctx.exchange(recvs=[(partner, tmp.seg(0, off[-1]))])
        combine(red, buf, 0, tmp, 0, off[-1], dst_first=True)
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
        peer = fold.real(pv)
        ctx.exchange(sends=[(peer, buf.seg(gs, ge))], recvs=[(peer, tmp.seg(0, ke - ks))])
        combine(red, buf, ks, tmp, 0, ke - ks, dst_first=v < pv)
        lo, hi = keep
        d //= 2
    if role == LEADER:
        ctx.exchange(sends=[(partner, buf.seg(off[partner], off[partner + 1]))])


def ring(ctx: Ctx, buf: Buffer, counts: list[int], red: BoundReducer) -> None:
    """p-1 steps; at step i rank r passes its partial of block r-1-i to r+1 and folds the
    partial of block r-2-i from r-1 into its own: f(incoming, mine). Block b is thus reduced
    in ring order b+1, b+2, ..., b."""
    p, r = ctx.size, ctx.rank
    off = offsets_of(counts)
    right, left = (r + 1) % p, (r - 1) % p
    tmp = ctx.scratch(buf, max(counts))
    for i in range(p - 1):
        sb, rb = (r - 1 - i) % p, (r - 2 - i) % p
        ctx.exchange(
            sends=[(right, buf.seg(off[sb], off[sb + 1]))],
            recvs=[(left, tmp.seg(0, counts[rb]))],
        )
        combine(red, buf, off[rb], tmp, 0, counts[rb], dst_first=False)
