"""Broadcast from ``root``, and the binomial scatter/gather trees it shares with `reduce`.

Trees are over relative ranks ``rel = (rank - root) mod p``. Going down (broadcast, scatter),
at step ``d = 2^(ceil(log2 p) - 1), ..., 2, 1`` every rank with ``rel % 2d == 0`` passes data
to ``rel + d``; going up (gather, reduce) the same edges are used in reverse order, ``d = 1, 2,
4, ...``. The subtree under ``rel = j > 0`` is then the contiguous run of relative ranks
``[j, j + lowbit(j))``, which is what makes the scatter and gather send contiguous blocks.

    binomial           ceil(log2 p) steps of the whole buffer: for small buffers.
    scatter_allgather  binomial scatter of p blocks, then allgather (van de Geijn): about 2n
                       per rank whatever p: for large buffers.
    auto               binomial below LARGE_BYTES or on 2 ranks, else scatter_allgather.
"""

from __future__ import annotations

from ..arrays import Buffer
from . import allgather
from .context import Ctx
from .layout import offsets_of, rel_ranges, split_counts

ALGORITHMS = ("binomial", "scatter_allgather")

LARGE_BYTES = 512 << 10


def choose(p: int, nbytes: int) -> str:
    return "binomial" if p <= 2 or nbytes < LARGE_BYTES else "scatter_allgather"


def run(algorithm: str, ctx: Ctx, buf: Buffer, root: int) -> None:
    if ctx.size == 1 or buf.n == 0:
        return
    if algorithm == "binomial":
        binomial(ctx, buf, root)
    elif algorithm == "scatter_allgather":
        scatter_allgather(ctx, buf, root)
    else:
        raise ValueError(f"unknown broadcast algorithm {algorithm!r}")


def _top(p: int) -> int:
    """The first (largest) step of the downward tree: 2^(ceil(log2 p) - 1)."""
    return 1 << max((p - 1).bit_length() - 1, 0)


def binomial(ctx: Ctx, buf: Buffer, root: int) -> None:
    p = ctx.size
    rel = (ctx.rank - root) % p
    d = _top(p)
    while d >= 1:
        if rel % (2 * d) == 0 and rel + d < p:
            ctx.exchange(sends=[((rel + d + root) % p, buf.seg(0, buf.n))])
        elif rel % (2 * d) == d:
            ctx.exchange(recvs=[((rel - d + root) % p, buf.seg(0, buf.n))])
        d >>= 1


def _subtree_segments(buf: Buffer, off: list[int], rel_lo: int, rel_hi: int, root: int,
                      p: int) -> list:
    return [buf.seg(off[a], off[b]) for a, b in rel_ranges(rel_lo, rel_hi, root, p)]


def scatter(ctx: Ctx, buf: Buffer, counts: list[int], root: int) -> None:
    """Binomial scatter: afterwards rank r holds block r (root holds all)."""
    p = ctx.size
    off = offsets_of(counts)
    rel = (ctx.rank - root) % p
    d = _top(p)
    while d >= 1:
        if rel % (2 * d) == 0 and rel + d < p:
            peer = (rel + d + root) % p
            segs = _subtree_segments(buf, off, rel + d, min(rel + 2 * d, p), root, p)
            ctx.exchange(sends=[(peer, s) for s in segs])
        elif rel % (2 * d) == d:
            peer = (rel - d + root) % p
            segs = _subtree_segments(buf, off, rel, min(rel + d, p), root, p)
            ctx.exchange(recvs=[(peer, s) for s in segs])
        d >>= 1


def gather(ctx: Ctx, buf: Buffer, counts: list[int], root: int) -> None:
    """Binomial gather, the mirror of `scatter`: block r of rank r ends at the root."""
    p = ctx.size
    off = offsets_of(counts)
    rel = (ctx.rank - root) % p
    d = 1
    while d < p:
        if rel & d:
            peer = (rel - d + root) % p
            segs = _subtree_segments(buf, off, rel, min(rel + d, p), root, p)
            ctx.exchange(sends=[(peer, s) for s in segs])
            return
        if rel + d < p:
            peer = (rel + d + root) % p
            segs = _subtree_segments(buf, off, rel + d, min(rel + 2 * d, p), root, p)
            ctx.exchange(recvs=[(peer, s) for s in segs])
        d <<= 1


def scatter_allgather(ctx: Ctx, buf: Buffer, root: int) -> None:
    counts = split_counts(buf.n, ctx.size)
    scatter(ctx, buf, counts, root)
    nbytes = buf.n * buf.scale * buf.wire.element_size()
    allgather.run(allgather.choose(ctx.size, nbytes), ctx, buf, counts)
