"""Point-to-point transport over torch.distributed: ``isend``/``irecv`` with deadlines.

CPU tensors go through Gloo, CUDA tensors through NCCL (one step's messages posted as one
``batch_isend_irecv`` group, which NCCL needs for two ranks that send to each other). Every
wait is bounded by the call's deadline (``Work.wait(timeout)``), and a failure is reported as
`CollectiveTimeout`/`CollectiveError` naming the operation, this rank, the peer and the step.

Both engines deliver messages between two ranks in the order they were posted, which the
algorithms rely on (tags stay 0: NCCL ignores them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from .errors import CollectiveError, CollectiveTimeout

# Gloo reads timedelta(0) as "no timeout"; an expired deadline still gets a short wait so that
# work that has in fact finished is collected.
_MIN_WAIT_S = 1e-3


def _is_timeout(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return "timed out" in msg or "timeout" in msg


def fail(ctx: Any, action: str, peer: int | None, exc: BaseException | None) -> CollectiveError:
    """The error for a message to/from ``peer`` (None: unknown) that did not complete."""
    who = f"rank {peer}" if peer is not None else "a peer"
    timed_out = exc is None or _is_timeout(exc) or time.monotonic() >= ctx.deadline
    if timed_out:
        msg = (f"{ctx.op} timed out on rank {ctx.rank} after {ctx.timeout:.3g}s waiting to "
               f"{action} {who} (step {ctx.step}): {who} may have died, not called this "
               "collective, or be blocked waiting on another rank")
        cls: type[CollectiveError] = CollectiveTimeout
    else:
        msg = (f"{ctx.op} failed on rank {ctx.rank} while trying to {action} {who} "
               f"(step {ctx.step}): {who} probably died or closed its connection")
    if exc is not None:
        msg += f" [engine: {str(exc).strip().splitlines()[0][:300]}]"
    return cls(msg, op=ctx.op, rank=ctx.rank, peer=peer) if timed_out else CollectiveError(
        msg, op=ctx.op, rank=ctx.rank, peer=peer)


def wait_work(ctx: Any, work: Any, action: str, peer: int | None) -> None:
    """Block until ``work`` completes or the call's deadline passes."""
    remaining = max(ctx.deadline - time.monotonic(), _MIN_WAIT_S)
    try:
        ok = work.wait(timedelta(seconds=remaining))
    except Exception as e:
        raise fail(ctx, action, peer, e) from e
    if ok is False:
        raise fail(ctx, action, peer, None)


class TorchTransport:
    """Messages within a torch.distributed process group. Ranks are group ranks."""

    def __init__(self, group: Any) -> None:
        import torch.distributed as dist

        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        # torch < 2.6 addresses peers by global rank only.
        self._global = [dist.get_global_rank(group, r) for r in range(self.size)]

    def low_latency(self, device: str) -> bool:
        # a small Gloo message costs a TCP round trip, as does Gloo's own allreduce; the
        # algorithms' several steps lose. NCCL's collectives beat its point-to-point too.
        return False

    def close(self) -> None:
        pass  # the process group belongs to the communicator's owner

    def can_pipeline(self, tensor: Any) -> bool:
        # NCCL runs a send and a receive to the same peer on one stream: posted apart, two
        # ranks sending to each other deadlock. They must go in one group (see `post`).
        return not tensor.is_cuda

    def post(self, ctx: Any, sends: Sequence[tuple[int, Any]],
             recvs: Sequence[tuple[int, Any]]) -> list[tuple[Any, str, int | None]]:
        import torch.distributed as dist

        g = self._global
        posted: list[tuple[Any, str, int | None]] = []
        first = (recvs or sends)[0][1]
        if first.is_cuda:
            ops = [dist.P2POp(dist.irecv, t, g[p], self.group) for p, t in recvs]
            ops += [dist.P2POp(dist.isend, t, g[p], self.group) for p, t in sends]
            peers = sorted({p for p, _ in (*recvs, *sends)})
            only = peers[0] if len(peers) == 1 else None
            try:
                works = dist.batch_isend_irecv(ops)
            except Exception as e:
                raise fail(ctx, f"exchange messages with ranks {peers}", only, e) from e
            if len(works) == len(ops):
                labels = [("receive from", p) for p, _ in recvs] + [
                    ("send to", p) for p, _ in sends]
                return [(w, a, p) for w, (a, p) in zip(works, labels, strict=True)]
            # NCCL coalesces the group into one work
            return [(w, f"exchange messages with ranks {peers} via", only) for w in works]
        # Receives first, so that a peer's eager send finds its buffer posted.
        for p, t in recvs:
            try:
                posted.append((dist.irecv(t, g[p], group=self.group), "receive from", p))
            except Exception as e:
                raise fail(ctx, "receive from", p, e) from e
        for p, t in sends:
            try:
                posted.append((dist.isend(t, g[p], group=self.group), "send to", p))
            except Exception as e:
                raise fail(ctx, "send to", p, e) from e
        return posted

    def wait(self, ctx: Any, handles: list[tuple[Any, str, int | None]]) -> None:
        for work, action, peer in handles:
            wait_work(ctx, work, action, peer)


class ByDeviceTransport:
    """CPU tensors through ``cpu`` (shared memory), the others (CUDA) through ``other``.

    One post holds the messages of one buffer, hence of one device."""

    def __init__(self, cpu: Any, other: Any) -> None:
        self.cpu = cpu
        self.other = other
        self.rank = cpu.rank
        self.size = cpu.size

    @property
    def segment(self) -> Any:
        """The CPU transport's shared segment (None over Gloo)."""
        return getattr(self.cpu, "segment", None)

    def _for(self, device: str) -> Any:
        return self.cpu if device == "cpu" else self.other

    def can_pipeline(self, tensor: Any) -> bool:
        return self._for(tensor.device.type).can_pipeline(tensor)

    def low_latency(self, device: str) -> bool:
        return self._for(device).low_latency(device)

    def post(self, ctx: Any, sends: Sequence[tuple[int, Any]],
             recvs: Sequence[tuple[int, Any]]) -> list[tuple[Any, Any]]:
        transport = self._for((recvs or sends)[0][1].device.type)
        return [(transport, h) for h in transport.post(ctx, sends, recvs)]

    def wait(self, ctx: Any, handles: list[tuple[Any, Any]]) -> None:
        for transport in {id(t): t for t, _ in handles}.values():
            transport.wait(ctx, [h for t, h in handles if t is transport])

    def close(self) -> None:
        self.cpu.close()
        self.other.close()
