"""Reduce to ``root``: the root ends with the elementwise reduction over all ranks.

    binomial               mirror of the binomial broadcast: at step d = 1, 2, ... relative
                           rank rel with bit d set sends its partial to rel - d and stops;
                           the others fold in f(mine, rel + d's). ceil(log2 p) steps of n.
    reduce_scatter_gather  reduce-scatter (recursive halving) + binomial gather of the blocks
                           (Rabenseifner): about 2n per rank: for large buffers.
    auto                   binomial below LARGE_BYTES, else reduce_scatter_gather.

``buf`` is the working copy of this rank's input; on the root it ends holding the result.
"""

from __future__ import annotations

from ..arrays import Buffer
from ..ops import BoundReducer
from . import reduce_scatter
from .broadcast import gather
from .context import Ctx, exchange_and_combine, send_pieces
from .layout import split_counts

ALGORITHMS = ("binomial", "reduce_scatter_gather")

LARGE_BYTES = 512 << 10


def choose(p: int, n_records: int, nbytes: int) -> str:
    return "binomial" if p <= 2 or nbytes < LARGE_BYTES or n_records < p else (
        "reduce_scatter_gather")


def run(algorithm: str, ctx: Ctx, buf: Buffer, root: int, red: BoundReducer) -> None:
    if ctx.size == 1 or buf.n == 0:
        return
    if algorithm == "binomial":
        binomial(ctx, buf, root, red)
    elif algorithm == "reduce_scatter_gather":
        reduce_scatter_gather(ctx, buf, root, red)
    else:
        raise ValueError(f"unknown reduce algorithm {algorithm!r}")


def binomial(ctx: Ctx, buf: Buffer, root: int, red: BoundReducer) -> None:
    p, n = ctx.size, buf.n
    rel = (ctx.rank - root) % p
    tmp = ctx.scratch(buf, n)
    d = 1
    while d < p:
        if rel & d:
            send_pieces(ctx, (rel - d + root) % p, buf, 0, n, red.rec_size)
            return
        if rel + d < p:
            exchange_and_combine(ctx, red, (rel + d + root) % p, buf, 0, 0, buf, 0, n, tmp,
                                 mine_first=True)
        d <<= 1


def reduce_scatter_gather(ctx: Ctx, buf: Buffer, root: int, red: BoundReducer) -> None:
    counts = split_counts(buf.n // red.rec_size, ctx.size, red.rec_size)
    nbytes = buf.n * buf.scale * buf.wire.element_size()
    reduce_scatter.run(reduce_scatter.choose(ctx.size, nbytes), ctx, buf, counts, red)
    gather(ctx, buf, counts, root)
