"""The engine's own collectives (Gloo on CPU tensors, NCCL on CUDA tensors) behind the same
buffers, deadlines and errors as the histboost algorithms.

The engine picks its own algorithm and reduction order (deterministic for a fixed world size,
size and topology in Gloo and NCCL's ring/tree, but not ours to promise). Uneven blocks are
padded to the largest block, since the engine's tensor collectives need equal blocks. A timed-
out native call cannot name the peer: the engine does not say which rank it waits on.
"""

from __future__ import annotations

from typing import Any

from .arrays import Buffer
from .transport import wait_work


class NativeEngine:
    """Collectives of one torch.distributed process group."""

    def __init__(self, group: Any, global_ranks: list[int]) -> None:
        self.group = group
        self.g = global_ranks
        self._gloo_lacks_reduce_scatter = False

    @staticmethod
    def _op(name: str) -> Any:
        import torch.distributed as dist

        return {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                "min": dist.ReduceOp.MIN}[name]

    def allreduce(self, ctx: Any, buf: Buffer, op: str) -> None:
        import torch.distributed as dist

        work = dist.all_reduce(buf.wire, op=self._op(op), group=self.group, async_op=True)
        wait_work(ctx, work, "complete the native allreduce with", None)

    def reduce_scatter(self, ctx: Any, buf: Buffer, counts: list[int], op: str) -> Any:
        """Returns this rank's reduced block as a wire tensor."""
        import torch
        import torch.distributed as dist

        p, r = ctx.size, ctx.rank
        m = max(counts)
        if not self._gloo_lacks_reduce_scatter:
            if all(c == m for c in counts):
                inp = buf.seg(0, buf.n)
            else:  # pad each block to m elements
                inp = ctx.scratch(buf, p * m)
                pos = 0
                for i, c in enumerate(counts):
                    inp.copy_(i * m, buf, pos, c)
                    pos += c
                inp = inp.seg(0, p * m)
            out = torch.empty(m * buf.scale, dtype=buf.wire.dtype, device=buf.wire.device)
            rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            try:
                work = rs(out, inp, op=self._op(op), group=self.group, async_op=True)
            except RuntimeError as e:  # older Gloo builds have no reduce_scatter
                if "support" not in str(e).lower() or buf.wire.is_cuda:
                    raise
                self._gloo_lacks_reduce_scatter = True
            else:
                wait_work(ctx, work, "complete the native reduce_scatter with", None)
                return out[: counts[r] * buf.scale]
        self.allreduce(ctx, buf, op)
        start = sum(counts[:r])
        return buf.seg(start, start + counts[r])

    def allgather(self, ctx: Any, out: Buffer, counts: list[int]) -> None:
        """``out`` holds this rank's block in place; fills in the others."""
        import torch.distributed as dist

        p, r = ctx.size, ctx.rank
        m = max(counts)
        start = sum(counts[:r])
        mine = out.seg(start, start + counts[r]).clone()
        ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        if all(c == m for c in counts):
            work = ag(out.seg(0, out.n), mine, group=self.group, async_op=True)
            wait_work(ctx, work, "complete the native allgather with", None)
            return
        padded = ctx.scratch(out, p * m)
        inp = padded.empty(m)
        inp.seg(0, counts[r]).copy_(mine)
        work = ag(padded.seg(0, p * m), inp.wire, group=self.group, async_op=True)
        wait_work(ctx, work, "complete the native allgather with", None)
        pos = 0
        for i, c in enumerate(counts):
            out.copy_(pos, padded, i * m, c)
            pos += c

    def broadcast(self, ctx: Any, buf: Buffer, root: int) -> None:
        import torch.distributed as dist

        work = dist.broadcast(buf.wire, src=self.g[root], group=self.group, async_op=True)
        wait_work(ctx, work, "complete the native broadcast with", None)

    def reduce(self, ctx: Any, buf: Buffer, root: int, op: str) -> None:
        import torch.distributed as dist

        work = dist.reduce(buf.wire, dst=self.g[root], op=self._op(op), group=self.group,
                           async_op=True)
        wait_work(ctx, work, "complete the native reduce with", None)
