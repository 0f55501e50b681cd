"""LLVM intrinsics Numba does not expose."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to load ``arr[idx]``'s cache line (read, keep in all cache levels).

    The histogram kernel visits a node's rows in sorted but gapped order; prefetching a row a
    few iterations ahead hides the memory latency the hardware prefetcher cannot predict.
    """
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                       wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # rw=0 (read), locality=3 (keep), cache type=1 (data)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def add_pair(typingctx, hist, idx, a, b):
    """``hist[idx, 0] += a; hist[idx, 1] += b`` as one two-lane vector load, add and store.

    hist: C-ordered (m, C) float64 or int64 with C >= 2; a, b: numbers, converted to hist's
    dtype as ``+=`` would. Each lane is the scalar add, so the sums are bit-identical; the
    histogram loop then issues one read-modify-write per (row, feature) instead of two.
    """
    if not (isinstance(hist, types.Array) and hist.ndim == 2 and hist.layout == "C"
            and hist.dtype in (types.float64, types.int64)):
        return None
    dtype = hist.dtype
    sig = types.void(hist, idx, a, b)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [i, zero],
                                       wraparound=False)
        lane = context.get_value_type(dtype)
        vty = ir.VectorType(lane, 2)
        vptr = builder.bitcast(ptr, vty.as_pointer())
        pair = ir.Constant(vty, ir.Undefined)
        for j in range(2):
            v = context.cast(builder, args[2 + j], signature.args[2 + j], dtype)
            pair = builder.insert_element(pair, v, ir.Constant(ir.IntType(32), j))
        old = builder.load(vptr, align=8)
        new = builder.fadd(old, pair) if dtype == types.float64 else builder.add(old, pair)
        builder.store(new, vptr, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def fetch_add(typingctx, arr, idx, value):
    """``old = arr[idx]; arr[idx] += value; return old`` as one atomic operation (int64 arr).

    Threads of one parallel loop take work items in turn from a shared counter with it
    (dynamic scheduling: Numba's parallel loops hand each thread a fixed share of their
    iterations). Monotonic ordering: the counter only hands out indices; the items' data is
    ordered by the loop's own barrier.
    """
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.int64(arr, idx, value)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [i], wraparound=False)
        v = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", ptr, v, "monotonic")

    return sig, codegen
