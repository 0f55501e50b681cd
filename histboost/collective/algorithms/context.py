"""What an algorithm runs with: this rank's point-to-point transport, the call's deadline
and label for errors, and reusable scratch memory."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..arrays import Buffer
from ..ops import BoundReducer


class Transport(Protocol):
    """Point-to-point messages between the ranks of one group.

    ``exchange`` posts every receive and send of one algorithm step at once (so a pair may
    send to each other without deadlock), then waits for all of them until ``ctx.deadline``.
    Messages between two ranks arrive in the order they were sent. Empty tensors are never
    passed. Raises `CollectiveTimeout`/`CollectiveError` naming ``ctx.op``, the rank and the
    peer.
    """

    rank: int
    size: int

    def exchange(
        self, ctx: Ctx, sends: Sequence[tuple[int, Any]], recvs: Sequence[tuple[int, Any]]
    ) -> None: ...


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

    def exchange(
        self, sends: Sequence[tuple[int, Any]] = (), recvs: Sequence[tuple[int, Any]] = ()
    ) -> None:
        """Send and receive concurrently; empty messages are skipped on both sides alike
        (both know the sizes)."""
        self.step += 1
        sends = [(p, t) for p, t in sends if t.numel()]
        recvs = [(p, t) for p, t in recvs if t.numel()]
        if sends or recvs:
            self.transport.exchange(self, sends, recvs)

    def scratch(self, like: Buffer, n: int) -> Buffer:
        """Uninitialised scratch of ``n`` elements like ``like``, distinct from every other
        scratch buffer handed out in this call."""
        self._slot += 1
        return self._scratch.get(like, n, self._slot)


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
