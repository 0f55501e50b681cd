"""Atomic int64 loads and stores with acquire/release ordering, for counters in memory shared
between processes (`histboost.collective.shm`).

Python has no memory fences: on a weakly ordered CPU (ARM) a plain store of a counter may
become visible to another core before the data written just before it. These compile, through
Numba, to the CPU's ordered instructions (plain moves on x86, ``ldar``/``stlr`` on ARM). The
functions take the address of an 8-byte aligned int64 (``array.ctypes.data + offset``).
"""

from __future__ import annotations

import numba as nb
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def _load_acquire(typingctx, addr):
    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(types.uintp), codegen


@intrinsic
def _store_release(typingctx, addr, value):
    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store_atomic(args[1], ptr, "release", 8)
        return context.get_dummy_value()

    return types.void(types.uintp, types.int64), codegen


@nb.njit(types.int64(types.uintp), cache=True, nogil=True)
def load_acquire(addr: int) -> int:
    """The int64 at ``addr``; later reads of this thread see what the writer wrote before
    its `store_release` of that value."""
    return _load_acquire(addr)


@nb.njit(types.void(types.uintp, types.int64), cache=True, nogil=True)
def store_release(addr: int, value: int) -> None:
    """Store ``value`` at ``addr`` after every earlier write of this thread is visible."""
    _store_release(addr, value)
