"""Shared-memory transport: point-to-point messages between the ranks of one host through a
memory region they all map, as MPI's and NCCL's shared-memory transports do.

Setup (`attach`, collective over the group's Gloo engine): group rank 0 creates a file in
/dev/shm and reserves its memory, broadcasts its name, the layout and a random token; every
rank on the same host maps it and checks the token; all agree (allreduce of a flag) and the
file is unlinked at once. From then on nothing is left in /dev/shm whatever happens to the
processes: the memory lives as long as one of them maps it. If any rank cannot map the region
(another host, no /dev/shm, /dev/shm full, not Linux on x86-64 or ARM64), every rank gets
None and keeps Gloo.

Layout. A header (each rank's bell and sleeping word, below), then one channel per ordered
pair of ranks (sender, receiver): a ring of ``slots`` slots of ``slot_bytes`` bytes, a counter
of slots written (by the sender) and one of slots read (by the receiver), on separate cache
lines. The sender copies a piece of its message into the next free slot, writes the slot's
header (message size, piece offset) and then publishes the written counter; the receiver polls
that counter, checks the header against the receive it posted, copies the piece out and
publishes the read counter, which frees the slot. Counters are int64 loads/stores with
acquire/release order (`_atomics`), so data is visible before the counter that announces it on
any CPU. Messages larger than a slot go in pieces.

Progress. There is no background thread: `post` and `wait` move whatever they can of every
pending send and receive of this rank (not only the ones waited on), so two ranks that send
each other more than a ring holds, each then waiting, drain each other's rings. Messages between
two ranks are matched in the order they were posted, as the algorithms require.

Waiting. A rank with nothing to move polls for ``SPIN_S`` (``SPIN_OVERSUBSCRIBED_S`` when the
host runs more ranks than this process may use cores), yielding the core between polls to
any other task queued on it, then sleeps in the kernel (futex) until a peer that writes to
it, or frees a slot it waits for, rings its bell: ranks sharing cores with each other give
the core up at once, and the woken rank runs at once, as a rank blocked in a socket read
would. Ranks on cores of their own poll up to a millisecond: most waits of a tree learner
(the slower rank's lead in a level, a few hundred microseconds) then end without a sleep,
whose wake-up costs tens of microseconds and on a virtual machine leaves the core idle and
cold (2 ranks on 2 cores of the device host, 300k x 28 rows, depth 8, two calls: 50.8-61.7,
median 56.0 ms a round polling 1 ms against 53.5-77.8, median 61.1, polling 30 us;
docs/distributed.md "Benchmark"). (On a 2-core machine
busy with other jobs, spinning 100 us or more without yielding made small calls slower.)

Failures. Every wait honours the call's deadline (`CollectiveTimeout` naming the peer), and
every ``LIVENESS_S`` checks the peers it waits on: each rank holds an exclusive lock on one
byte of the region's file, which the kernel releases when the process exits or closes its
communicator (as it does after a failed call), so a dead or failed peer is reported at once
(`CollectiveError`), not at the timeout.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._atomics import (
    HAVE_FUTEX,
    announce,
    futex_wait,
    futex_wake,
    load_acquire,
    publish,
    publish_if_announced,
    store_release,
    store_seq_cst,
)
from .errors import MetadataMismatchError
from .transport import fail

SHM_DIR = "/dev/shm"
FILE_PREFIX = "histboost-coll-"
_MAGIC = 0x48424D454D31  # "HBMEM1"
_BELLS_AT = 512
# then per rank _RANK_BYTES: its bell (int64) at 0, its sleeping word at 64, the count of
# shared-segment barriers it has reached at 128, and the descriptors of its shared-segment
# steps (one per half of the stage, 4 int64 each) at 192 and 256
_RANK_BYTES = 320
_ARRIVED_AT, _DESC_AT, DESC_WORDS = 128, 192, 4
# channel control: written counter at byte 0 and read counter at byte 128 (each on its own
# cache lines), at 256 the sender's flag "waiting for a free slot"
_CTRL_BYTES = 384
_READ_AT, _WANT_AT = 128, 256
SLOTS = 8
# bytes of ring per ordered pair of ranks: the total budget shared out, within these bounds
_RING_BUDGET = 32 << 20
_MIN_RING, _MAX_RING = 64 << 10, 1 << 20
# bytes of shared-segment stage (`SharedSegment`) for the whole group, and the bounds per slot
_STAGE_BUDGET = 16 << 20
_MIN_STAGE, _MAX_STAGE = 256 << 10, 4 << 20

# Spin this long without progress before sleeping when this host runs no more ranks (the
# group's, or LOCAL_WORLD_SIZE) than this process may use cores, else SPIN_OVERSUBSCRIBED_S:
# a rank sharing its core with the one it waits for had better give the core up at once.
SPIN_S = 1e-3
SPIN_OVERSUBSCRIBED_S = 5e-6
LIVENESS_S = 10e-3

# words of the setup broadcast: ok, token, host, slot_bytes, slots, stage_bytes, then the file
# name
_I_OK, _I_TOKEN, _I_HOST, _I_SLOT_BYTES, _I_SLOTS, _I_STAGE_BYTES = range(6)
_I_NAME = 6
_NAME_WORDS = 8
_INFO_WORDS = _I_NAME + _NAME_WORDS


def ring_bytes(size: int) -> int:
    """Bytes of ring per channel for a group of ``size`` ranks:
    ``HISTBOOST_COLLECTIVE_SHM_RING_BYTES`` if set (tests use tiny rings), else 32 MiB shared
    by the ``size * (size - 1)`` channels, a power of two within [64 KiB, 1 MiB]."""
    env = os.environ.get("HISTBOOST_COLLECTIVE_SHM_RING_BYTES")
    if env:
        return max(int(env), SLOTS * 64)
    share = _RING_BUDGET // max(size * (size - 1), 1)
    return min(_MAX_RING, max(_MIN_RING, 1 << (share.bit_length() - 1)))


def spin_seconds(dedicated: bool) -> float:
    """How long a waiting rank polls before it sleeps: ``HISTBOOST_COLLECTIVE_SHM_SPIN_US``
    (microseconds) if set, else `SPIN_S` when this host runs no more ranks than this process
    may use cores (``dedicated``), `SPIN_OVERSUBSCRIBED_S` otherwise."""
    env = os.environ.get("HISTBOOST_COLLECTIVE_SHM_SPIN_US")
    if env:
        return max(float(env), 0.0) * 1e-6
    return SPIN_S if dedicated else SPIN_OVERSUBSCRIBED_S


def stage_bytes(size: int) -> int:
    """Bytes of each rank's stage slot (two per rank: one per half) for the shared-segment
    collectives: ``HISTBOOST_COLLECTIVE_SHM_STAGE_BYTES`` if set (tests use tiny slots), else
    16 MiB shared by the ``2 * size`` slots, a multiple of 4 KiB within [256 KiB, 4 MiB]."""
    env = os.environ.get("HISTBOOST_COLLECTIVE_SHM_STAGE_BYTES")
    if env:
        return _round_up(max(int(env), 64), 64)
    share = _STAGE_BUDGET // (2 * size)
    return min(_MAX_STAGE, max(_MIN_STAGE, share // 4096 * 4096))


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class Layout:
    """Where things are in the region of a group of ``size`` ranks."""

    def __init__(self, size: int, slots: int, slot_bytes: int, stage_bytes: int) -> None:
        self.size = size
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.hdr_at = _CTRL_BYTES
        self.data_at = _CTRL_BYTES + _round_up(slots * 16, 64)
        self.channel_bytes = _round_up(self.data_at + slots * slot_bytes, 4096)
        self.header_bytes = _round_up(_BELLS_AT + _RANK_BYTES * size, 4096)
        self.stage_bytes = stage_bytes
        self.stage_at = self.header_bytes + size * (size - 1) * self.channel_bytes
        self.total = self.stage_at + 2 * size * stage_bytes

    @classmethod
    def for_group(cls, size: int) -> Layout:
        return cls(size, SLOTS, _round_up(ring_bytes(size) // SLOTS, 64), stage_bytes(size))

    def channel_at(self, src: int, dst: int) -> int:
        """Byte offset of the channel from rank ``src`` to rank ``dst`` (src != dst)."""
        index = src * (self.size - 1) + (dst - (dst > src))
        return self.header_bytes + index * self.channel_bytes

    def bell_at(self, rank: int) -> int:
        """Byte offset of rank ``rank``'s bell; its sleeping word follows 64 bytes later."""
        return _BELLS_AT + _RANK_BYTES * rank

    def stage_slot_at(self, half: int, rank: int) -> int:
        """Byte offset of rank ``rank``'s stage slot in half ``half`` (0 or 1) of the
        shared-segment stage (`SharedSegment`)."""
        return self.stage_at + (half * self.size + rank) * self.stage_bytes


class _Region:
    """The mapped file. ``path`` is its name in /dev/shm while ranks attach (unlinked after)."""

    def __init__(self, path: str, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self.fd = fd
        self.mm = mm
        self.mem = np.frombuffer(mm, np.uint8)
        self.header = self.mem[:_BELLS_AT].view(np.int64)

    @classmethod
    def create(cls, layout: Layout, token: int) -> _Region:
        if not (HAVE_FUTEX and os.path.isdir(SHM_DIR)):
            raise OSError(f"the shared-memory transport needs Linux's {SHM_DIR} and futex on "
                          "x86-64 or ARM64")
        path = os.path.join(SHM_DIR, f"{FILE_PREFIX}{os.getpid()}-{secrets.token_hex(8)}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # reserve the memory now: a full /dev/shm is an error here, not a SIGBUS when a
            # page is first touched
            os.posix_fallocate(fd, 0, layout.total)
            mm = mmap.mmap(fd, layout.total)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        region = cls(path, fd, mm)
        region.header[:2] = (_MAGIC, token)
        return region

    @classmethod
    def open(cls, path: str, layout: Layout, token: int) -> _Region:
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != layout.total:
                raise OSError(f"{path} has {os.fstat(fd).st_size} bytes, expected "
                              f"{layout.total}")
            mm = mmap.mmap(fd, layout.total)
        except BaseException:
            os.close(fd)
            raise
        region = cls(path, fd, mm)
        if int(region.header[0]) != _MAGIC or int(region.header[1]) != token:
            region.close()
            raise OSError(f"{path} is not the region group rank 0 created")
        return region

    def lock(self, rank: int) -> None:
        """Hold byte ``rank`` of the file for as long as this process has the region open."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, rank)

    def holds(self, rank: int) -> bool:
        """Whether rank ``rank``'s process still holds its byte (is alive, not closed)."""
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, rank)
        except OSError:
            return True
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, rank)
        return False

    def close(self) -> None:
        """Unmap and close (which releases this rank's lock). Idempotent."""
        if self.fd < 0:
            return
        self.header = self.mem = None
        try:
            self.mm.close()
        except BufferError:  # a view is still referenced: the mapping goes with it
            pass
        os.close(self.fd)
        self.fd = -1


class _Channel:
    """One ring, as numpy views and counter addresses."""

    __slots__ = ("written_addr", "read_addr", "want_addr", "hdr", "slot")

    def __init__(self, region: _Region, layout: Layout, src: int, dst: int) -> None:
        at = layout.channel_at(src, dst)
        base = region.mem.ctypes.data + at
        self.written_addr = base
        self.read_addr = base + _READ_AT
        self.want_addr = base + _WANT_AT
        k, s = layout.slots, layout.slot_bytes
        self.hdr = region.mem[at + layout.hdr_at:at + layout.hdr_at + 16 * k].view(
            np.int64).reshape(k, 2)
        data = region.mem[at + layout.data_at:at + layout.data_at + k * s].reshape(k, s)
        self.slot = list(data)


class _Msg:
    """One posted send or receive: ``done`` of its ``nbytes`` bytes moved."""

    __slots__ = ("peer", "data", "nbytes", "done", "action")

    def __init__(self, peer: int, data: np.ndarray, action: str) -> None:
        self.peer = peer
        self.data = data
        self.nbytes = data.size
        self.done = 0
        self.action = action


class _Mismatch(Exception):
    def __init__(self, peer: int, message: str) -> None:
        super().__init__(message)
        self.peer = peer


class ShmTransport:
    """Messages among the ranks of one host through a shared region (see the module
    docstring). CPU torch tensors only; made by `attach`. Ranks are group ranks."""

    def __init__(self, region: _Region, layout: Layout, rank: int) -> None:
        import torch

        self.rank = rank
        self.size = layout.size
        self.layout = layout
        self.path = region.path  # unlinked: for diagnostics and the leak tests
        self._region = region
        self._uint8 = torch.uint8
        self._k, self._s = layout.slots, layout.slot_bytes
        peers = [q for q in range(self.size) if q != rank]
        self._out = {q: _Channel(region, layout, rank, q) for q in peers}
        self._in = {q: _Channel(region, layout, q, rank) for q in peers}
        self._written = dict.fromkeys(peers, 0)  # slots published per outgoing ring
        self._read = dict.fromkeys(peers, 0)  # slots consumed per incoming ring
        self._sendq: dict[int, deque[_Msg]] = {q: deque() for q in peers}
        self._recvq: dict[int, deque[_Msg]] = {q: deque() for q in peers}
        self._active: set[int] = set()  # peers with queued messages
        self._wanting: set[int] = set()  # peers whose full ring this rank waits on
        base = region.mem.ctypes.data
        self._bell = [base + layout.bell_at(q) for q in range(self.size)]
        self._sleeping = [a + 64 for a in self._bell]
        # ranks of this host: the group's, or all of torchrun's when that is more
        here = max(self.size, int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0))
        self._spin_s = spin_seconds(here <= len(os.sched_getaffinity(0)))
        self.segment = SharedSegment(self, region, layout)

    def can_pipeline(self, tensor: Any) -> bool:
        return True

    def low_latency(self, device: str) -> bool:
        return True

    def post(self, ctx: Any, sends: Sequence[tuple[int, Any]],
             recvs: Sequence[tuple[int, Any]]) -> list[_Msg]:
        if self._region is None:
            raise fail(ctx, "reach", None, RuntimeError("the transport is closed"))
        msgs = []
        for peer, t in recvs:
            m = _Msg(peer, self._bytes(t), "receive from")
            self._recvq[peer].append(m)
            self._active.add(peer)
            msgs.append(m)
        for peer, t in sends:
            m = _Msg(peer, self._bytes(t), "send to")
            self._sendq[peer].append(m)
            self._active.add(peer)
            msgs.append(m)
        self._progress(ctx)  # start moving before the first wait
        return msgs

    def wait(self, ctx: Any, handles: list[_Msg]) -> None:
        pending = [m for m in handles if m.done < m.nbytes]
        idle_since = 0.0
        next_check = 0.0
        while pending:
            moved = self._progress(ctx)
            pending = [m for m in pending if m.done < m.nbytes]
            if moved or not pending:
                idle_since = 0.0
                continue
            now = time.monotonic()
            if not idle_since:
                idle_since, next_check = now, now + LIVENESS_S
                continue
            if now >= ctx.deadline:
                raise fail(ctx, pending[0].action, pending[0].peer, None)
            if now >= next_check:
                self._check_peers(ctx, pending)
                next_check = now + LIVENESS_S
            if now - idle_since >= self._spin_s:
                self._sleep(ctx, min(next_check, ctx.deadline) - now)
            else:
                os.sched_yield()  # to a task queued on this core, if any

    def _sleep(self, ctx: Any, seconds: float) -> None:
        """Sleep until a peer rings this rank's bell (it wrote to us or freed a slot), for at
        most ``seconds`` (see `_atomics` for the handshake)."""
        bell = self._bell[self.rank]
        rung = load_acquire(bell)
        store_seq_cst(self._sleeping[self.rank], 1)
        try:
            if not self._progress(ctx):
                futex_wait(bell, rung, max(seconds, 50e-6))
        finally:
            store_release(self._sleeping[self.rank], 0)

    def close(self) -> None:
        if self._region is not None:
            self._out.clear()
            self._in.clear()
            self.segment._tensors.clear()
            self.segment._slots = self.segment._desc = self.segment._desc_all = None
            self._region.close()
            self._region = None

    # --- internals ---------------------------------------------------------------------
    def _bytes(self, t: Any) -> np.ndarray:
        """The tensor's memory as a flat uint8 numpy array (shared, not copied)."""
        return t.detach().reshape(-1).view(self._uint8).numpy()

    def _progress(self, ctx: Any) -> bool:
        """Move what can be moved of every queued message; whether anything moved."""
        moved = False
        try:
            for peer in tuple(self._active):
                sq, rq = self._sendq[peer], self._recvq[peer]
                if sq and self._push(peer, sq):
                    moved = True
                if rq and self._pull(peer, rq):
                    moved = True
                if not (sq or rq):
                    self._active.discard(peer)
        except _Mismatch as e:
            raise fail(ctx, "receive from", e.peer, ValueError(str(e))) from None
        return moved

    def _push(self, peer: int, q: deque[_Msg]) -> bool:
        ch = self._out[peer]
        k, s = self._k, self._s
        w = self._written[peer]
        free = k - (w - load_acquire(ch.read_addr))
        if free <= 0:
            if peer in self._wanting:
                return False
            # the ring is full: ask the reader to ring this rank's bell as it frees a slot
            self._wanting.add(peer)
            free = k - (w - announce(ch.want_addr, ch.read_addr))
            if free <= 0:
                return False
        if peer in self._wanting:
            self._wanting.discard(peer)
            store_release(ch.want_addr, 0)
        while free and q:
            m = q[0]
            n = min(s, m.nbytes - m.done)
            i = w % k
            ch.slot[i][:n] = m.data[m.done:m.done + n]
            ch.hdr[i] = (m.nbytes, m.done)
            w += 1
            free -= 1
            if publish(ch.written_addr, w, self._bell[peer], self._sleeping[peer]):
                futex_wake(self._bell[peer])
            m.done += n
            if m.done == m.nbytes:
                q.popleft()
        self._written[peer] = w
        return True

    def _pull(self, peer: int, q: deque[_Msg]) -> bool:
        ch = self._in[peer]
        k, s = self._k, self._s
        r = self._read[peer]
        avail = load_acquire(ch.written_addr) - r
        if avail <= 0:
            return False
        while avail and q:
            m = q[0]
            i = r % k
            total, offset = int(ch.hdr[i, 0]), int(ch.hdr[i, 1])
            if total != m.nbytes or offset != m.done:
                raise _Mismatch(peer, f"rank {peer} sent a message of {total} bytes where "
                                f"this rank expected {m.nbytes} (at byte {m.done}): the ranks' "
                                "calls disagree")
            n = min(s, m.nbytes - m.done)
            m.data[m.done:m.done + n] = ch.slot[i][:n]
            r += 1
            avail -= 1
            if publish_if_announced(ch.read_addr, r, ch.want_addr, self._bell[peer],
                                    self._sleeping[peer]):
                futex_wake(self._bell[peer])  # its send waits for this slot
            m.done += n
            if m.done == m.nbytes:
                q.popleft()
        self._read[peer] = r
        return True

    def _check_peers(self, ctx: Any, pending: list[_Msg]) -> None:
        """Raise if a peer that ``pending`` waits on has exited or closed (after collecting
        whatever it wrote before it went)."""
        for peer in {m.peer for m in pending}:
            if self._region.holds(peer):
                continue
            self._progress(ctx)
            stuck = [m for m in pending if m.peer == peer and m.done < m.nbytes]
            if stuck:
                raise fail(ctx, stuck[0].action, peer, ConnectionError(
                    f"rank {peer}'s process exited or closed its communicator (shared-memory "
                    "transport)"))


class SharedSegment:
    """Collectives without point-to-point messages for the ranks of one `ShmTransport`: each
    rank copies its data into its own slot of a stage that every rank maps, all meet at a
    barrier, and each then reads the others' slots directly
    (`histboost.collective.algorithms.shared`). The stage has two halves used in turn by
    successive steps: a rank writes a half again only two steps later, after a barrier that
    every rank reaches once done reading it the step before.

    A step's barrier also compares a descriptor of the call (operation, call number, sizes)
    that each rank wrote for that half, so ranks that disagree on the data size raise
    `MetadataMismatchError` on every rank even with ``check_metadata="trust"``. Waiting
    follows the transport: spin, then sleep on this rank's bell, which arriving ranks ring;
    the call's deadline and the peers' liveness locks bound it."""

    def __init__(self, transport: ShmTransport, region: _Region, layout: Layout) -> None:
        self.transport = transport
        self.rank = transport.rank
        self.size = layout.size
        self.stage_bytes = layout.stage_bytes
        base = region.mem.ctypes.data
        self._arrived = [base + layout.bell_at(q) + _ARRIVED_AT for q in range(self.size)]
        self._desc = [[region.mem[layout.bell_at(q) + _DESC_AT + 64 * h:][:8 * DESC_WORDS]
                       .view(np.int64) for h in (0, 1)] for q in range(self.size)]
        # every rank's descriptor of each half as one (size, DESC_WORDS) view: one compare
        self._desc_all = [np.lib.stride_tricks.as_strided(
            region.mem[layout.bell_at(0) + _DESC_AT + 64 * h:].view(np.int64),
            shape=(self.size, DESC_WORDS), strides=(_RANK_BYTES, 8), writeable=False)
            for h in (0, 1)]
        self._slots = [[region.mem[layout.stage_slot_at(h, q):][:layout.stage_bytes]
                        for q in range(self.size)] for h in (0, 1)]
        self._tensors: dict[tuple[int, int, Any], Any] = {}  # slot views by dtype
        self._peers = [q for q in range(self.size) if q != self.rank]
        self._epoch = 0  # barriers this rank has reached
        self._steps = 0  # steps taken: the next one uses half _steps % 2

    def next_half(self, ctx: Any) -> int:
        """The half of the stage the next step uses (every rank takes the same steps)."""
        if self.transport._region is None:
            raise fail(ctx, "reach", None, RuntimeError("the transport is closed"))
        self._steps += 1
        return self._steps % 2

    def tensor(self, half: int, rank: int, dtype: Any) -> Any:
        """Rank ``rank``'s stage slot of half ``half`` as a flat CPU torch tensor of
        ``dtype`` (shared memory, not a copy)."""
        key = (half, rank, dtype)
        t = self._tensors.get(key)
        if t is None:
            import torch

            t = torch.from_numpy(self._slots[half][rank]).view(dtype)
            self._tensors[key] = t
        return t

    def array(self, half: int, rank: int, dtype: np.dtype) -> np.ndarray:
        """Rank ``rank``'s stage slot of half ``half`` as a flat numpy array of ``dtype``
        (shared memory, not a copy)."""
        key = (half, rank, np.dtype(dtype))
        a = self._tensors.get(key)
        if a is None:
            a = self._slots[half][rank].view(dtype)
            self._tensors[key] = a
        return a

    def sync(self, ctx: Any, half: int, desc: Sequence[int]) -> None:
        """Publish this rank's descriptor of the step in ``half`` (at most `DESC_WORDS`
        ints), wait until every rank has written its slot (`barrier`), then compare the
        descriptors: `MetadataMismatchError` on every rank if they differ."""
        mine = self._desc[self.rank][half]
        mine[:] = 0
        mine[:len(desc)] = desc
        self.barrier(ctx)
        every = self._desc_all[half]
        if (every == mine).all():
            return
        rows = [tuple(int(v) for v in every[q]) for q in range(self.size)]
        groups: dict[tuple[int, ...], list[int]] = {}
        for q, row in enumerate(rows):
            groups.setdefault(row, []).append(q)
        desc_text = "; ".join(
            f"{key[2]} bytes (call #{key[1]}, operation {key[0]}) on rank"
            f"{'s' if len(qs) > 1 else ''} {', '.join(map(str, qs))}"
            for key, qs in groups.items())
        raise MetadataMismatchError(
            f"{ctx.op} on rank {self.rank}: ranks disagree on the data size or the call "
            f"(shared-memory step; check_metadata='trust' exchanged nothing before): "
            f"{desc_text}", op=ctx.op, rank=self.rank)

    def barrier(self, ctx: Any) -> None:
        """Return once every rank of the group has reached this barrier: its writes before
        it are then visible to all, and theirs to this rank."""
        t = self.transport
        if t._region is None:
            raise fail(ctx, "reach", None, RuntimeError("the transport is closed"))
        ctx.step += 1
        self._epoch = e = self._epoch + 1
        mine = self._arrived[self.rank]
        for q in self._peers:
            if publish(mine, e, t._bell[q], t._sleeping[q]):
                futex_wake(t._bell[q])
        arrived = self._arrived
        pending = [q for q in self._peers if load_acquire(arrived[q]) < e]
        if not pending:
            return
        start = time.monotonic()
        next_check = start + LIVENESS_S
        while True:
            pending = [q for q in pending if load_acquire(arrived[q]) < e]
            if not pending:
                return
            now = time.monotonic()
            if now >= ctx.deadline:
                raise fail(ctx, "meet", pending[0], None)
            if now >= next_check:
                for q in pending:
                    if not t._region.holds(q) and load_acquire(arrived[q]) < e:
                        raise fail(ctx, "meet", q, ConnectionError(
                            f"rank {q}'s process exited or closed its communicator "
                            "(shared-memory transport)"))
                next_check = now + LIVENESS_S
            if now - start >= t._spin_s:
                bell = t._bell[self.rank]
                rung = load_acquire(bell)
                store_seq_cst(t._sleeping[self.rank], 1)
                try:
                    if all(load_acquire(arrived[q]) < e for q in pending):
                        futex_wait(bell, rung, max(min(next_check, ctx.deadline) - now,
                                                   50e-6))
                finally:
                    store_release(t._sleeping[self.rank], 0)
            else:
                os.sched_yield()  # to a task queued on this core, if any


def host_id() -> int:
    """A 63-bit id of this machine (host name and boot): equal for processes that may share
    /dev/shm."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    digest = hashlib.blake2b(f"{socket.gethostname()}/{boot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def attach(group: Any) -> ShmTransport | None:
    """A `ShmTransport` over torch.distributed Gloo group ``group`` if all its ranks can map
    one region, else None on every rank. Collective: every rank of the group calls it (one
    broadcast and one allreduce through Gloo, bounded by the group's timeout)."""
    import torch
    import torch.distributed as dist

    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    info = torch.zeros(_INFO_WORDS, dtype=torch.int64)
    region: _Region | None = None
    path: str | None = None
    here = host_id()
    try:
        if rank == 0:
            layout = Layout.for_group(size)
            token = secrets.randbits(62)
            try:
                region = _Region.create(layout, token)
            except OSError:
                pass  # info says no: every rank keeps Gloo
            else:
                path = region.path
                name = np.frombuffer(os.path.basename(path).encode().ljust(8 * _NAME_WORDS,
                                                                           b"\0"), np.int64)
                info[:_I_NAME] = torch.tensor([1, token, here, layout.slot_bytes, layout.slots,
                                               layout.stage_bytes])
                info[_I_NAME:] = torch.from_numpy(name.copy())
        dist.broadcast(info, src=dist.get_global_rank(group, 0), group=group)
        ok = int(info[_I_OK]) == 1 and int(info[_I_HOST]) == here
        layout = Layout(size, int(info[_I_SLOTS]), int(info[_I_SLOT_BYTES]),
                        int(info[_I_STAGE_BYTES]))
        if ok and rank != 0:
            name = info[_I_NAME:].numpy().tobytes().rstrip(b"\0").decode()
            path = os.path.join(SHM_DIR, name)
            try:
                region = _Region.open(path, layout, int(info[_I_TOKEN]))
            except (OSError, ValueError):
                ok = False
        if ok:
            try:
                region.lock(rank)
            except OSError:
                ok = False
        flag = torch.tensor([int(ok)], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    except BaseException:
        if region is not None:
            region.close()
        raise
    finally:
        # every rank has mapped it (or given up): nothing needs the name any more
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    if not int(flag[0]):
        if region is not None:
            region.close()
        return None
    return ShmTransport(region, layout, rank)
