"""What an algorithm runs with: this rank's point-to-point transport, the call's deadline
and label for errors, and reusable scratch memory."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Protocol

from ..arrays import Buffer
from ..ops import BoundReducer


class Transport(Protocol):
    """Point-to-point messages between the ranks of one group.

    ``post`` starts receives and sends (all of one call at once, so a pair may send to each
    other without deadlock) and returns handles; ``wait`` blocks on handles until
    ``ctx.deadline``. Messages between two ranks are matched in the order they were posted on
    each side. Empty tensors are never passed. Failures raise
    `CollectiveTimeout`/`CollectiveError` naming ``ctx.op``, the rank and the peer.
    ``can_pipeline(t)`` says whether sends and receives of tensors like ``t`` may also be
    posted one by one, interleaved with computation (Gloo, shared memory and threads: yes;
    NCCL, whose send and receive to one peer must be grouped: no). ``low_latency(device)``
    says whether a small message of tensors on that device type costs little against the
    engine's own collective (shared memory, threads: yes; Gloo over TCP, NCCL: no), for
    callers choosing between histboost's algorithms and ``"native"``. ``close`` releases
    what the transport holds.
    """

    rank: int
    size: int

    def post(self, ctx: Ctx, sends: Sequence[tuple[int, Any]],
             recvs: Sequence[tuple[int, Any]]) -> list[Any]: ...

    def wait(self, ctx: Ctx, handles: list[Any]) -> None: ...

    def can_pipeline(self, tensor: Any) -> bool: ...

    def low_latency(self, device: str) -> bool: ...

    def close(self) -> None: ...


# Pipelining: large messages go in chunks of at least this many bytes, at most this many per
# message, so that reducing one chunk overlaps the transfer of the next. The environment
# variable lets tests exercise the pipelined paths on small buffers.
PIPELINE_MIN_CHUNK_BYTES = int(os.environ.get("HISTBOOST_COLLECTIVE_CHUNK_BYTES", 4 << 20))
PIPELINE_MAX_CHUNKS = 8


class Scratch:
    """Reusable scratch tensors, one pool slot per request within a call (so two live scratch
    buffers never alias). Reuse avoids page-faulting fresh memory on every call; buffers above
    ``limit`` bytes are not kept."""

    def __init__(self, limit: int = 256 << 20) -> None:
        self.limit = limit
        self._pool: dict[tuple[Any, Any, int], Any] = {}

    def get(self, like: Buffer, n: int, slot: int) -> Buffer:
        import torch

        numel = n * like.scale
        key = (like.wire.dtype, like.wire.device, slot)
        t = self._pool.get(key)
        if t is None or t.numel() < numel:
            t = torch.empty(numel, dtype=like.wire.dtype, device=like.wire.device)
            if numel * t.element_size() <= self.limit:
                self._pool[key] = t
        return like.on(t[:numel])

    def clear(self) -> None:
        self._pool.clear()


class Ctx:
    """One collective call on one rank."""

    def __init__(
        self, transport: Transport, op: str, timeout: float, scratch: Scratch | None = None,
        deadline: float | None = None,
    ) -> None:
        self.transport = transport
        self.rank = transport.rank
        self.size = transport.size
        self.op = op
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if deadline is None else deadline
        self.step = 0
        self._scratch = scratch if scratch is not None else Scratch(limit=0)
        self._slot = 0

    def post(self, sends: Sequence[tuple[int, Any]] = (),
             recvs: Sequence[tuple[int, Any]] = ()) -> list[Any]:
        """Start sends and receives; empty messages are skipped on both sides alike (both
        know the sizes). Returns handles for `wait`."""
        self.step += 1
        sends = [(p, t) for p, t in sends if t.numel()]
        recvs = [(p, t) for p, t in recvs if t.numel()]
        if not (sends or recvs):
            return []
        return self.transport.post(self, sends, recvs)

    def wait(self, handles: list[Any]) -> None:
        if handles:
            self.transport.wait(self, handles)

    def exchange(self, sends: Sequence[tuple[int, Any]] = (),
                 recvs: Sequence[tuple[int, Any]] = ()) -> None:
        """Send and receive concurrently, and wait for all of it."""
        self.wait(self.post(sends, recvs))

    def chunks(self, buf: Buffer, n: int) -> int:
        """How many pieces to cut a message of ``n`` elements of ``buf`` into for
        pipelining (1: send it whole)."""
        nbytes = n * buf.scale * buf.wire.element_size()
        if nbytes < 2 * PIPELINE_MIN_CHUNK_BYTES or not self.transport.can_pipeline(buf.wire):
            return 1
        return min(PIPELINE_MAX_CHUNKS, nbytes // PIPELINE_MIN_CHUNK_BYTES)

    def scratch(self, like: Buffer, n: int) -> Buffer:
        """Uninitialised scratch of ``n`` elements like ``like``, distinct from every other
        scratch buffer handed out in this call."""
        self._slot += 1
        return self._scratch.get(like, n, self._slot)


def exchange_and_combine(
    ctx: Ctx, red: BoundReducer, peer: int, src: Buffer, send_at: int, send_n: int,
    dst: Buffer, dst_at: int, n: int, tmp: Buffer, mine_first: bool, into_tmp: bool = False,
) -> None:
    """Send src[send_at:send_at+send_n] to ``peer`` while receiving ``n`` elements from it
    into ``tmp``, and fold them with dst[dst_at:dst_at+n]: f(mine, theirs) if
    ``mine_first`` else f(theirs, mine), stored into ``dst`` (or into ``tmp[:n]`` with
    ``into_tmp``, for when ``dst`` is also being sent). Large messages go in chunks of whole
    records, on both sides alike (each knows the other's size), and each chunk is folded as
    soon as it has arrived, while the next ones are still in flight."""
    rec = red.rec_size
    k_in = ctx.chunks(dst, n) if n else 1
    k_out = ctx.chunks(src, send_n) if send_n else 1
    recv_pieces = list(pairwise(chunk_bounds(n, k_in, rec)))
    recvs = [ctx.post(recvs=[(peer, tmp.seg(a, b))]) for a, b in recv_pieces]
    sent = ctx.post(sends=[(peer, src.seg(send_at + a, send_at + b))
                           for a, b in pairwise(chunk_bounds(send_n, k_out, rec))])
    for (a, b), h in zip(recv_pieces, recvs, strict=True):
        ctx.wait(h)
        if into_tmp:
            combine(red, tmp, a, dst, dst_at + a, b - a, dst_first=not mine_first)
        else:
            combine(red, dst, dst_at + a, tmp, a, b - a, dst_first=mine_first)
    ctx.wait(sent)


def send_pieces(ctx: Ctx, peer: int, src: Buffer, at: int, n: int, rec: int) -> None:
    """Send src[at:at+n] in the pieces `exchange_and_combine` receives it in."""
    k = ctx.chunks(src, n) if n else 1
    ctx.exchange(sends=[(peer, src.seg(at + a, at + b))
                        for a, b in pairwise(chunk_bounds(n, k, rec))])


def chunk_bounds(n: int, k: int, rec: int) -> list[int]:
    """Offsets cutting ``n`` elements into ``k`` runs of whole records of ``rec`` elements."""
    q, extra = divmod(n // rec, k)
    out = [0]
    for i in range(k):
        out.append(out[-1] + (q + (i < extra)) * rec)
    return out


def combine(
    red: BoundReducer, dst: Buffer, dst_at: int, src: Buffer, src_at: int, n: int,
    dst_first: bool,
) -> None:
    """dst[dst_at:dst_at+n] = f(dst, src) if ``dst_first`` else f(src, dst): the reduction
    order is the caller's to fix, which keeps results deterministic."""
    if n == 0:
        return
    user = red.user_arrays
    d = dst.view(dst_at, dst_at + n, user)
    s = src.view(src_at, src_at + n, user)
    if dst_first:
        red(d, s, into_a=True)
    else:
        red(s, d, into_a=False)
