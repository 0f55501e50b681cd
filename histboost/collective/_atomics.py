"""Atomic int64 operations on memory shared between processes (`histboost.collective.shm`),
and the futex calls that let a process sleep until another one changes such a word.

Python has no memory fences: on a weakly ordered CPU (ARM) a plain store of a counter may
become visible to another core before the data written just before it, and on any CPU a store
may pass a later load (which the sleep/wake handshake below must exclude). These functions
compile, through Numba, to the CPU's ordered instructions. They take the address of an 8-byte
aligned int64 (``array.ctypes.data + offset``).

Sleep/wake handshake (a "bell" word and a "sleeping" word per process): the waiter reads the
bell, sets sleeping, checks once more for what it waits for, then `futex_wait`s for the bell to
change; a writer publishes its data with `publish`, which also increments the reader's bell and
returns its sleeping word, and calls `futex_wake` only when that is set. Either the waiter's
last check sees the data, or the futex finds the bell changed, or the writer sees the waiter
asleep and wakes it. Where the other side rarely waits (a sender for a free slot), it first
`announce`s that it does, and the publisher rings only then (`publish_if_announced`).
"""

from __future__ import annotations

import ctypes
import platform

import numba as nb
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_I64 = ir.IntType(64)


@intrinsic
def _load_acquire(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.load_atomic(builder.inttoptr(args[0], _I64.as_pointer()), "acquire", 8)

    return types.int64(types.uintp), codegen


def _store_intrinsic(order: str):
    @intrinsic
    def store(typingctx, addr, value):
        def codegen(context, builder, signature, args):
            builder.store_atomic(args[1], builder.inttoptr(args[0], _I64.as_pointer()), order,
                                 8)
            return context.get_dummy_value()

        return types.void(types.uintp, types.int64), codegen

    return store


_store_release = _store_intrinsic("release")
_store_seq_cst = _store_intrinsic("seq_cst")


@intrinsic
def _load_seq_cst(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.load_atomic(builder.inttoptr(args[0], _I64.as_pointer()), "seq_cst", 8)

    return types.int64(types.uintp), codegen


@intrinsic
def _increment_then_load(typingctx, add_addr, load_addr):
    """``*add_addr += 1`` then ``*load_addr``, both sequentially consistent."""
    def codegen(context, builder, signature, args):
        builder.atomic_rmw("add", builder.inttoptr(args[0], _I64.as_pointer()),
                           ir.Constant(_I64, 1), "seq_cst")
        return builder.load_atomic(builder.inttoptr(args[1], _I64.as_pointer()), "seq_cst", 8)

    return types.int64(types.uintp, types.uintp), codegen


@nb.njit(types.int64(types.uintp), cache=True, nogil=True)
def load_acquire(addr: int) -> int:
    """The int64 at ``addr``; later reads of this thread see what the writer wrote before
    it stored that value."""
    return _load_acquire(addr)


@nb.njit(types.void(types.uintp, types.int64), cache=True, nogil=True)
def store_release(addr: int, value: int) -> None:
    """Store ``value`` at ``addr`` after every earlier write of this thread is visible."""
    _store_release(addr, value)


@nb.njit(types.void(types.uintp, types.int64), cache=True, nogil=True)
def store_seq_cst(addr: int, value: int) -> None:
    """Store ``value`` at ``addr`` before any later read of this thread."""
    _store_seq_cst(addr, value)


@nb.njit(types.int64(types.uintp, types.int64, types.uintp, types.uintp), cache=True,
         nogil=True)
def publish(addr: int, value: int, bell_addr: int, sleeping_addr: int) -> int:
    """Store counter ``value`` at ``addr`` (release), ring the reader's bell and return its
    sleeping word (nonzero: call `futex_wake` on the bell)."""
    _store_release(addr, value)
    return _increment_then_load(bell_addr, sleeping_addr)


@nb.njit(types.int64(types.uintp, types.uintp), cache=True, nogil=True)
def announce(flag_addr: int, addr: int) -> int:
    """Set the flag at ``flag_addr`` to 1, then read the int64 at ``addr`` (in that order, as
    seen by every thread)."""
    _store_seq_cst(flag_addr, 1)
    return _load_seq_cst(addr)


@nb.njit(types.int64(types.uintp, types.int64, types.uintp, types.uintp, types.uintp),
         cache=True, nogil=True)
def publish_if_announced(addr: int, value: int, flag_addr: int, bell_addr: int,
                         sleeping_addr: int) -> int:
    """Store counter ``value`` at ``addr``; if the other side has `announce`d that it waits
    for it (flag at ``flag_addr``), ring its bell and return its sleeping word, else 0."""
    _store_seq_cst(addr, value)
    if _load_seq_cst(flag_addr) == 0:
        return 0
    return _increment_then_load(bell_addr, sleeping_addr)


# --- futex(2) -----------------------------------------------------------------------------------
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(
    platform.machine().lower())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1  # not FUTEX_PRIVATE: the word is shared between processes
HAVE_FUTEX = _SYS_FUTEX is not None and platform.system() == "Linux"


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_syscall = None
if HAVE_FUTEX:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long


def futex_wait(addr: int, expected: int, seconds: float) -> None:
    """Sleep until the 32-bit word at ``addr`` (the low half of a little-endian int64) is
    woken, unless it differs from ``expected``'s low half already; at most ``seconds``."""
    ts = _Timespec(int(seconds), int(seconds % 1.0 * 1e9))
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(addr), ctypes.c_int(_FUTEX_WAIT),
             ctypes.c_int(expected & 0xFFFFFFFF), ctypes.byref(ts), None, ctypes.c_int(0))


def futex_wake(addr: int) -> None:
    """Wake the processes sleeping in `futex_wait` on ``addr``."""
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(addr), ctypes.c_int(_FUTEX_WAKE),
             ctypes.c_int(0x7FFFFFFF), None, None, ctypes.c_int(0))
