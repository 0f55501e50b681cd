"""In-process communicators for tests: ``world_size`` threads exchanging messages through
queues, running exactly the algorithms the multi-process communicator runs. Lets code that
uses collectives (e.g. data-parallel training) be tested without spawning processes.

    from histboost.collective.testing import run_threads
    results = run_threads(4, lambda comm: comm.allreduce(np.full(3, comm.rank)))
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .distributed import DistributedCommunicator
from .transport import fail


class _Hub:
    def __init__(self, size: int) -> None:
        self.size = size
        self.boxes = {(s, d): queue.Queue() for s in range(size) for d in range(size)}


class ThreadTransport:
    """One rank's end of a `_Hub`: sends copy into the peer's FIFO at once, receives take
    from it (in posting order) when waited on, until the deadline."""

    def __init__(self, hub: _Hub, rank: int) -> None:
        self.hub = hub
        self.rank = rank
        self.size = hub.size

    def can_pipeline(self, tensor: Any) -> bool:
        return True

    def low_latency(self, device: str) -> bool:
        return True

    def close(self) -> None:
        pass

    def post(self, ctx: Any, sends: Sequence[tuple[int, Any]],
             recvs: Sequence[tuple[int, Any]]) -> list[tuple[int, Any]]:
        for peer, t in sends:
            self.hub.boxes[(self.rank, peer)].put(t.clone())
        return list(recvs)

    def wait(self, ctx: Any, handles: list[tuple[int, Any]]) -> None:
        for peer, t in handles:
            remaining = ctx.deadline - time.monotonic()
            try:
                msg = self.hub.boxes[(peer, self.rank)].get(timeout=max(remaining, 1e-3))
            except queue.Empty:
                raise fail(ctx, "receive from", peer, None) from None
            if msg.numel() != t.numel():
                raise fail(ctx, "receive from", peer,
                           ValueError(f"got {msg.numel()} elements, expected {t.numel()}"))
            t.copy_(msg)


def thread_communicators(world_size: int, *, timeout: float = 30.0,
                         check_metadata: bool = True) -> list[DistributedCommunicator]:
    """``world_size`` communicators wired together, one per thread to run."""
    hub = _Hub(world_size)
    return [DistributedCommunicator(ThreadTransport(hub, r), timeout=timeout,
                                    check_metadata=check_metadata)
            for r in range(world_size)]


def run_threads(world_size: int, fn: Callable[[DistributedCommunicator], Any], *,
                timeout: float = 30.0, check_metadata: bool = True) -> list[Any]:
    """Run ``fn(comm)`` on ``world_size`` threads; returns their results in rank order, or
    raises the first rank's exception once all threads have ended."""
    comms = thread_communicators(world_size, timeout=timeout, check_metadata=check_metadata)
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def body(r: int) -> None:
        try:
            results[r] = fn(comms[r])
        except BaseException as e:  # reported to the caller below
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,), daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    # Every wait inside is bounded by ``timeout``; the margin covers local work.
    end = time.monotonic() + timeout + 30.0
    for t in threads:
        t.join(max(end - time.monotonic(), 0.0))
    stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    if stuck:
        raise TimeoutError(f"ranks {stuck} did not finish within {timeout + 30.0:.0f}s")
    for e in errors:
        if e is not None:
            raise e
    return results
