"""The multi-rank communicator: histboost's algorithms over a point-to-point transport, plus
the engine's native collectives when there is an engine."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .algorithms import allgather as _ag
from .algorithms import allreduce as _ar
from .algorithms import broadcast as _bc
from .algorithms import reduce as _rd
from .algorithms import reduce_scatter as _rs
from .algorithms import shared as _sh
from .algorithms.context import Ctx, Scratch, Transport
from .algorithms.layout import offsets_of, split_counts
from .arrays import Buffer, as_input, device_type, is_structured
from .base import META_LEN, Call, Communicator, Operand
from .native import NativeEngine
from .ops import _NUMPY_UFUNCS, Reducer


class DistributedCommunicator(Communicator):
    """Collectives among the ranks of ``transport``.

    transport: point-to-point messages (`TorchTransport`, `ShmTransport` for CPU tensors of
    ranks on one host, or threads in tests); closed by `close`. native: the
    engine's collectives for ``algorithm="native"`` (None: not available). devices: device
    types the transport can move ("cpu", "cuda"); buffers elsewhere are staged through the
    first one. meta_device: where the metadata vectors travel. on_close: called once by
    `close` (e.g. destroy the process group this communicator created).
    """

    def __init__(self, transport: Transport, *, native: NativeEngine | None = None,
                 devices: tuple[str, ...] = ("cpu",), meta_device: str = "cpu",
                 timeout: float = 60.0, check_metadata: bool = True,
                 on_close: Any = None) -> None:
        super().__init__(transport.rank, transport.size, timeout, check_metadata)
        self.transport = transport
        self.native = native
        self.devices = devices
        self.meta_device = meta_device
        self._scratch = Scratch()
        self._on_close = on_close
        # the shared-memory transport's segment, for algorithm "shared" on CPU arrays
        self._segment = getattr(transport, "segment", None)

    # --- plumbing -----------------------------------------------------------------------
    def _has_native(self) -> bool:
        return self.native is not None

    def _has_shared(self) -> bool:
        return self._segment is not None

    def _shared(self, algorithm: str, buf: Buffer, rec: int, pieces: int = 1) -> bool:
        """Whether this call runs through the shared segment: asked for, or "auto" on a CPU
        buffer; and a slot holds ``pieces`` pieces of one record (else the point-to-point
        algorithms run it)."""
        return (algorithm in ("auto", _sh.ALGORITHM) and self._segment is not None
                and buf.device.type == "cpu" and _sh.fits(self._segment, buf, rec, pieces))

    def prefers_native(self, x: Any) -> bool:
        if self.native is None:
            return False
        x, kind = as_input(x)
        device = device_type(x, kind)
        if device not in self.devices:
            device = self.devices[0]  # staged there
        return not self.transport.low_latency(device)

    def _ctx(self, call: Call, algorithm: str) -> Ctx:
        return Ctx(self.transport, f"{call.name}({algorithm}, call #{call.seq})", call.timeout,
                   self._scratch, deadline=call.deadline)

    def _stage(self, buf: Buffer) -> Buffer:
        """``buf`` on a device the transport serves (a copy only when it is elsewhere)."""
        if buf.device.type in self.devices:
            return buf
        dev = self.devices[0]
        if dev == "cuda":
            import torch

            dev = f"cuda:{torch.cuda.current_device()}"
        return buf.on(buf.wire.to(dev))

    @staticmethod
    def _unstage(staged: Buffer, buf: Buffer) -> None:
        if staged is not buf:
            buf.wire.copy_(staged.wire)

    def _working_copy(self, ctx: Ctx, src: Buffer) -> Buffer:
        """A scratch copy of the input for algorithms that clobber their buffer."""
        work = ctx.scratch(src, src.n)
        work.copy_(0, src, 0, src.n)
        return work

    @staticmethod
    def _nbytes(buf: Buffer) -> int:
        return buf.n * buf.scale * buf.wire.element_size()

    def _exchange_metadata(self, call: Call, vec: np.ndarray) -> np.ndarray:
        import torch

        p = self.world_size
        out = torch.zeros(p * META_LEN, dtype=torch.int64, device=self.meta_device)
        out[self.rank * META_LEN:(self.rank + 1) * META_LEN] = torch.from_numpy(vec)
        buf = Buffer(out, p * META_LEN, 1, "torch", None)
        if self._shared("auto", buf, META_LEN):
            # the size only: disagreements are the metadata check's to report
            _sh.allgather(self._ctx(call, "metadata"), self._segment, buf, [META_LEN] * p,
                          (0, out.numel() * 8))
        else:
            _ag.run("bruck", self._ctx(call, "metadata"), buf, [META_LEN] * p)
        return out.cpu().numpy().reshape(p, META_LEN)

    # --- collectives --------------------------------------------------------------------
    def _allreduce(self, call: Call, arg: Operand, red: Reducer, inplace: bool,
                   tail: Operand | None = None) -> Any:
        src = Buffer.wrap(arg.x, arg.kind)
        if inplace:
            buf = src
        else:
            buf = src.empty(src.n)
            buf.copy_(0, src, 0, src.n)
        extra = None if tail is None else Buffer.wrap(tail.x, tail.kind)
        if self.world_size > 1 and (buf.n or extra is not None):
            bred = red.bind(arg.shape, is_structured(arg.x, arg.kind))
            alg = call.algorithm
            if buf.n and self._shared(alg, buf, bred.rec_size + (0 if extra is None
                                                                  else extra.n)):
                # the tail rides in the last step
                _sh.allreduce(self._ctx(call, _sh.ALGORITHM), self._segment, buf, bred,
                              (call.seq, self._nbytes(buf) + (0 if extra is None
                                                              else self._nbytes(extra))),
                              tail=extra)
                return arg.x if inplace else buf.to_user(arg.shape)
            for part, pred in ((buf, bred), (extra, red.bind((-1,), False))):
                if part is not None and part.n:
                    self._allreduce_points(call, part, red, pred)
        return arg.x if inplace else buf.to_user(arg.shape)

    def _allreduce_points(self, call: Call, buf: Buffer, red: Reducer, bred: Any) -> None:
        """``buf`` reduced in place by a point-to-point algorithm (or the engine's)."""
        alg = call.algorithm
        if alg in ("auto", _sh.ALGORITHM):
            alg = _ar.choose(self.world_size, buf.n // bred.rec_size, self._nbytes(buf))
        ctx = self._ctx(call, alg)
        work = self._stage(buf)
        if alg == "native":
            self.native.allreduce(ctx, work, red.name)
        else:
            _ar.run(alg, ctx, work, bred)
        self._unstage(work, buf)

    def _reduce_scatter(self, call: Call, arg: Operand, red: Reducer) -> Any:
        p, r = self.world_size, self.rank
        row = math.prod(arg.shape[1:])
        rows = split_counts(arg.shape[0], p)
        counts = [c * row for c in rows]
        off = offsets_of(counts)
        out_shape = (rows[r], *arg.shape[1:])
        src = Buffer.wrap(arg.x, arg.kind)
        result = src.empty(counts[r])
        bred = red.bind(arg.shape, is_structured(arg.x, arg.kind))
        alg = call.algorithm
        if src.n == 0 or p == 1:
            result.copy_(0, src, off[r], counts[r])
            return result.to_user(out_shape)
        if row % bred.rec_size:
            # A record (a whole 1-d array for a plain callable) would straddle blocks: reduce
            # it whole, then cut. allgather_reduce moves no partial records.
            alg = "allgather_reduce"
            ctx = self._ctx(call, alg)
            work = self._stage(self._working_copy(ctx, src))
            _ar.run(alg, ctx, work, bred)
            result.seg(0, counts[r]).copy_(work.seg(off[r], off[r + 1]))
            return result.to_user(out_shape)
        if self._shared(alg, src, bred.rec_size, p):
            _sh.reduce_scatter(self._ctx(call, _sh.ALGORITHM), self._segment, src, counts,
                               bred, result, (call.seq, self._nbytes(src), arg.shape[0]))
            return result.to_user(out_shape)
        if alg in ("auto", _sh.ALGORITHM):
            alg = _rs.choose(p, self._nbytes(src))
        ctx = self._ctx(call, alg)
        work = self._stage(self._working_copy(ctx, src))
        if alg == "native":
            block = self.native.reduce_scatter(ctx, work, counts, red.name)
        else:
            _rs.run(alg, ctx, work, counts, bred)
            block = work.seg(off[r], off[r + 1])
        result.seg(0, counts[r]).copy_(block)
        return result.to_user(out_shape)

    def _reduce_blocks(self, call: Call, arg: Operand, bounds: list[int],
                       common: tuple[int, int], red: Reducer, tail: Operand | None) -> None:
        x = arg.x
        if arg.kind == "torch" and arg.device == "cpu":
            x = x.numpy()  # the same memory
        if (call.algorithm in ("auto", _sh.ALGORITHM) and self._segment is not None
                and isinstance(x, np.ndarray) and x.dtype.fields is None
                and x.dtype.isnative):
            x3 = x.reshape(arg.shape[0], arg.shape[1], math.prod(arg.shape[2:]))
            t = None if tail is None else (tail.x.numpy() if tail.kind == "torch"
                                           else tail.x)
            if _sh.fits_blocks(self._segment, x3, bounds, common, 0 if t is None else t.size):
                _sh.reduce_blocks(self._ctx(call, _sh.ALGORITHM), self._segment, x3, bounds,
                                  common, _NUMPY_UFUNCS[red.name], t,
                                  (call.seq, x.nbytes + (0 if t is None else t.nbytes)))
                return
        super()._reduce_blocks(call, arg, bounds, common, red, tail)

    def _allgather(self, call: Call, arg: Operand, lengths: list[int]) -> Any:
        p, r = self.world_size, self.rank
        row = math.prod(arg.shape[1:])
        counts = [n * row for n in lengths]
        off = offsets_of(counts)
        src = Buffer.wrap(arg.x, arg.kind)
        if src.n != counts[r]:
            raise ValueError(f"allgather: rank {r} has {src.n} elements, expected {counts[r]}")
        out = src.empty(off[-1])
        out.copy_(off[r], src, 0, counts[r])
        if off[-1] and p > 1:
            alg = call.algorithm
            if self._shared(alg, out, 1):
                _sh.allgather(self._ctx(call, _sh.ALGORITHM), self._segment, out, counts,
                              (call.seq, self._nbytes(out)))
                return out.to_user((sum(lengths), *arg.shape[1:]))
            if alg in ("auto", _sh.ALGORITHM):
                alg = _ag.choose(p, self._nbytes(out))
            ctx = self._ctx(call, alg)
            work = self._stage(out)
            if alg == "native":
                self.native.allgather(ctx, work, counts)
            else:
                _ag.run(alg, ctx, work, counts)
            self._unstage(work, out)
        return out.to_user((sum(lengths), *arg.shape[1:]))

    def _broadcast(self, call: Call, arg: Operand, root: int, inplace: bool) -> Any:
        src = Buffer.wrap(arg.x, arg.kind)
        if inplace:
            buf = src
        else:
            buf = src.empty(src.n)
            if self.rank == root:
                buf.copy_(0, src, 0, src.n)
        if buf.n and self.world_size > 1:
            alg = call.algorithm
            if self._shared(alg, buf, 1):
                _sh.broadcast(self._ctx(call, _sh.ALGORITHM), self._segment, buf, root,
                              (call.seq, self._nbytes(buf), root))
                return arg.x if inplace else buf.to_user(arg.shape)
            if alg in ("auto", _sh.ALGORITHM):
                alg = _bc.choose(self.world_size, self._nbytes(buf))
            ctx = self._ctx(call, alg)
            work = self._stage(buf)
            if alg == "native":
                self.native.broadcast(ctx, work, root)
            else:
                _bc.run(alg, ctx, work, root)
            self._unstage(work, buf)
        return arg.x if inplace else buf.to_user(arg.shape)

    def _reduce(self, call: Call, arg: Operand, red: Reducer, root: int) -> Any:
        src = Buffer.wrap(arg.x, arg.kind)
        bred = red.bind(arg.shape, is_structured(arg.x, arg.kind))
        result = src.empty(src.n) if self.rank == root else None
        if src.n == 0 or self.world_size == 1:
            if result is not None:
                result.copy_(0, src, 0, src.n)
        else:
            alg = call.algorithm
            if alg == "auto":
                alg = _rd.choose(self.world_size, src.n // bred.rec_size, self._nbytes(src))
            ctx = self._ctx(call, alg)
            work = self._stage(self._working_copy(ctx, src))
            if alg == "native":
                self.native.reduce(ctx, work, root, red.name)
            else:
                _rd.run(alg, ctx, work, root, bred)
            if result is not None:
                result.wire.copy_(work.wire)
        return None if result is None else result.to_user(arg.shape)

    def _alltoall(self, call: Call, arg: Operand, counts: list[int]
                  ) -> tuple[Any, np.ndarray]:
        import torch

        p, r = self.world_size, self.rank
        ctx = self._ctx(call, "pairwise")
        # every rank's send counts (p x p, row = sender): this rank receives column r
        table = torch.zeros(p * p, dtype=torch.int64, device=self.meta_device)
        table[r * p:(r + 1) * p] = torch.tensor(counts, dtype=torch.int64)
        if p > 1:
            _ag.run("bruck", ctx, Buffer(table, p * p, 1, "torch", None), [p] * p)
        received = table.cpu().numpy().reshape(p, p)[:, r].copy()
        row = math.prod(arg.shape[1:])
        send_off = offsets_of([c * row for c in counts])
        recv_off = offsets_of([int(c) * row for c in received])
        src = Buffer.wrap(arg.x, arg.kind)
        out = src.empty(recv_off[-1])
        out.copy_(recv_off[r], src, send_off[r], counts[r] * row)
        if p > 1:
            work_src, work_out = self._stage(src), self._stage(out)
            for i in range(1, p):
                to, frm = (r + i) % p, (r - i) % p
                ctx.exchange(sends=[(to, work_src.seg(send_off[to], send_off[to + 1]))],
                             recvs=[(frm, work_out.seg(recv_off[frm], recv_off[frm + 1]))])
            self._unstage(work_out, out)
        return out.to_user((int(received.sum()), *arg.shape[1:])), received

    def _abandon(self) -> None:
        # over shared memory, peers waiting on this rank see it closed and fail at once
        self.transport.close()

    def close(self) -> None:
        if not self._closed:
            self._scratch.clear()
            self.transport.close()
            if self._on_close is not None:
                self._on_close()
        super().close()
