"""The communicator interface, argument handling and the metadata check.

`Communicator` implements the public methods once: it validates arguments, numbers the call,
sets its deadline, runs the metadata check and maps failures; subclasses supply the data
movement (`SingleCommunicator` for one process, `DistributedCommunicator` over
torch.distributed or threads).

Metadata check. Before moving data, ranks allgather a small int64 vector describing the call
(operation, algorithm, reducer, root, dtype, device, shape, call number) and every rank
compares all of them, so a disagreement raises the same `MetadataMismatchError` on every rank
instead of a hang or silently wrong data. It costs one latency-bound allgather of
``META_LEN * 8`` bytes per rank. ``check_metadata=False`` (per call or at init) skips the
comparison of operation, algorithm, reducer, root, dtype and device, which ranks must then get
right themselves (allgather then needs equal shapes), but still exchanges each rank's data size
in a vector of the same length: a message larger than its receive buffer makes Gloo abort the
whole process (SIGABRT), so a size mismatch raises `MetadataMismatchError` on every rank
instead. Being the same exchange, it costs the same latency; a rank with the check on and one
with it off also get that error. ``check_metadata="trust"`` (per call) exchanges nothing: for a
caller whose every rank derives the call's shape from values it already agreed on (the tree
learner's histogram and count reductions, after a checked call at the start of each tree),
where one round trip per call is the price of a whole collective on small buffers. A size
mismatch is then a Gloo abort or a timeout, not an exception naming it.

After any other failure (timeout, dead peer, an exception inside a reducer) ranks are out of
step, so the communicator refuses further calls; make a new one.
"""

from __future__ import annotations

import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .algorithms import allgather as _ag
from .algorithms import allreduce as _ar
from .algorithms import broadcast as _bc
from .algorithms import reduce as _rd
from .algorithms import reduce_scatter as _rs
from .algorithms import shared as _sh
from .arrays import DEVICE_CODES, DTYPE_NAMES, as_input, device_type, dtype_code, dtype_name
from .errors import CollectiveError, MetadataMismatchError
from .ops import Reducer, as_reducer

Op = str | Callable[[Any, Any], Any] | Reducer

# dtypes both Gloo and NCCL reduce natively
NATIVE_REDUCIBLE_DTYPES = frozenset(
    {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"})

# "shared": through one memory segment that all ranks map (`algorithms.shared`), where the
# communicator has one (`Communicator.shares_memory`)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("native", *_ar.ALGORITHMS, _sh.ALGORITHM, "auto"),
    "reduce_scatter": ("native", *_rs.ALGORITHMS, _sh.ALGORITHM, "auto"),
    "allgather": ("native", *_ag.ALGORITHMS, _sh.ALGORITHM, "auto"),
    "broadcast": ("native", *_bc.ALGORITHMS, _sh.ALGORITHM, "auto"),
    "reduce": ("native", *_rd.ALGORITHMS, "auto"),
    "barrier": ("auto",),
    "alltoall": ("pairwise", "auto"),
    "reduce_blocks": ("native", *_rs.ALGORITHMS, _sh.ALGORITHM, "auto"),
}

# --- metadata vector layout (int64) -----------------------------------------------------------
_MAGIC = 0x48424331  # "HBC1"
M_MAGIC, M_SEQ, M_OP, M_ALG, M_RED, M_ROOT, M_DTYPE, M_DEVICE, M_NDIM = range(9)
M_SHAPE = 9
MAX_DIMS = 8
M_SHAPE_TAIL = M_SHAPE + MAX_DIMS  # hash of dims beyond MAX_DIMS
META_LEN = M_SHAPE_TAIL + 1

# check_metadata=False still exchanges sizes: the same vector with its own magic, the byte
# count of the data and, for reduce_scatter, its row count (which decides the blocks)
_SIZE_MAGIC = 0x48424353  # "HBCS"
M_NBYTES, M_ROWS = M_SHAPE, M_SHAPE + 1

_OP_CODES = {name: i + 1 for i, name in enumerate(ALGORITHMS)}
_ALG_CODES = {
    name: i
    for i, name in enumerate(dict.fromkeys(a for algs in ALGORITHMS.values() for a in algs))
}
_CODE_NAMES = {
    M_OP: {v: k for k, v in _OP_CODES.items()},
    M_ALG: {v: k for k, v in _ALG_CODES.items()},
    M_RED: {1: "sum", 2: "max", 3: "min", 4: "callable", 5: "elementwise"},
    M_DEVICE: {v: k for k, v in DEVICE_CODES.items()},
    M_DTYPE: DTYPE_NAMES,
}


@dataclass
class Call:
    """One collective call on this rank."""

    name: str  # "allreduce"
    algorithm: str  # as requested ("auto" stays "auto")
    seq: int
    timeout: float
    deadline: float

    @property
    def label(self) -> str:
        return f"{self.name}(call #{self.seq}, algorithm={self.algorithm})"


@dataclass
class Operand:
    """A call's input array and what the metadata check needs of it."""

    x: Any
    kind: str
    shape: tuple[int, ...]
    dtype: str
    device: str

    @classmethod
    def of(cls, x: Any) -> Operand:
        x, kind = as_input(x)
        return cls(x, kind, tuple(int(s) for s in x.shape), dtype_name(x, kind),
                   device_type(x, kind))

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _check_algorithm(name: str, algorithm: str) -> str:
    if algorithm not in ALGORITHMS[name]:
        raise ValueError(
            f"unknown {name} algorithm {algorithm!r}; choose from {ALGORITHMS[name]}"
        )
    return algorithm


def _check_timeout(timeout: float) -> float:
    t = float(timeout)
    if not (t > 0 and math.isfinite(t)):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return t


def _check_writable(op: Operand) -> None:
    x, kind = op.x, op.kind
    if kind == "numpy":
        ok = x.flags.c_contiguous and x.flags.writeable
    elif kind == "cupy":
        ok = x.flags.c_contiguous
    else:
        ok = x.is_contiguous()
    if not ok:
        raise ValueError("inplace=True needs a writable C-contiguous array")


class Communicator(ABC):
    """Collectives among ``world_size`` ranks; this process is ``rank``.

    Every method takes ``timeout`` (seconds for the whole call; default: the communicator's)
    and ``check_metadata`` (default: the communicator's). Inputs are numpy arrays, torch
    tensors or CuPy arrays (numbers and lists become numpy arrays); outputs have the input's
    kind, dtype and device. All ranks must make the same calls in the same order.
    """

    def __init__(self, rank: int, world_size: int, timeout: float = 60.0,
                 check_metadata: bool = True) -> None:
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.timeout = _check_timeout(timeout)
        self.check_metadata = bool(check_metadata)
        self._seq = 0
        self._failure: BaseException | None = None
        self._closed = False

    # --- public API ---------------------------------------------------------------------
    def allreduce(self, x: Any, op: Op = "sum", algorithm: str = "auto", *,
                  timeout: float | None = None, check_metadata: bool | str | None = None,
                  inplace: bool = False, tail: Any = None) -> Any:
        """Elementwise reduction of ``x`` over all ranks, returned on every rank.

        x: any shape and dtype, equal on all ranks. op: "sum", "max", "min", a callable
        ``f(a, b)`` (see `histboost.collective.ops` for records) or `elementwise(f)`.
        algorithm: "native", "ring", "recursive_doubling", "allgather_reduce",
        "reduce_scatter_allgather" or "auto". inplace: reduce into ``x`` (contiguous) and
        return it, saving a copy. tail: a second, small array of ``x``'s kind, dtype and
        device (writable, contiguous; needs ``inplace`` and a built-in op), reduced in place
        in the same call: through shared memory it travels in ``x``'s last step, so both
        cost one meeting of the ranks (e.g. histograms and row counts of a tree level);
        elsewhere it is reduced after ``x`` by the same algorithm. Returns an array like
        ``x``."""
        red = as_reducer(op)
        arg = Operand.of(x)
        self._check_native(algorithm, red, "allreduce", arg)
        if inplace:
            _check_writable(arg)
        extra = None
        if tail is not None:
            extra = Operand.of(tail)
            if not (inplace and red.builtin):
                raise ValueError("allreduce: tail needs inplace=True and op 'sum', 'max' or "
                                 "'min'")
            if (extra.kind, extra.dtype, extra.device) != (arg.kind, arg.dtype, arg.device):
                raise ValueError(f"allreduce: tail must be like x ({arg.kind} {arg.dtype} on "
                                 f"{arg.device}), got {extra.kind} {extra.dtype} on "
                                 f"{extra.device}")
            _check_writable(extra)
        with self._call("allreduce", algorithm, timeout) as call:
            self._agree(call, arg, red, 0, check_metadata)
            if extra is None:
                return self._allreduce(call, arg, red, inplace)
            if extra.size:
                self._agree(call, extra, red, 0, check_metadata)
            return self._allreduce(call, arg, red, inplace, extra if extra.size else None)

    def reduce_scatter(self, x: Any, op: Op = "sum", algorithm: str = "auto", *,
                       timeout: float | None = None,
                       check_metadata: bool | str | None = None) -> Any:
        """This rank's block of the reduction of ``x`` over all ranks: rows
        ``np.array_split(range(len(x)), world_size)[rank]`` of axis 0 (blocks may be empty).

        x: at least 1-d, same shape on all ranks. algorithm: "native", "recursive_halving",
        "ring" or "auto". Returns an array of shape ``(block_rows, *x.shape[1:])``."""
        red = as_reducer(op)
        arg = Operand.of(x)
        self._check_native(algorithm, red, "reduce_scatter", arg)
        if not arg.shape:
            raise ValueError("reduce_scatter needs an array with at least one dimension")
        with self._call("reduce_scatter", algorithm, timeout) as call:
            self._agree(call, arg, red, 0, check_metadata)
            return self._reduce_scatter(call, arg, red)

    def reduce_blocks(self, x: Any, bounds: Sequence[int], op: Op = "sum",
                      algorithm: str = "auto", *,
                      common: tuple[int, int] | None = None, tail: Any = None,
                      timeout: float | None = None,
                      check_metadata: bool | str | None = None) -> Any:
        """In place: this rank's block of columns, ``x[:, bounds[rank]:bounds[rank + 1]]``,
        becomes that block reduced over all ranks (a reduce-scatter along axis 1 that leaves
        each block where it is: e.g. histograms (nodes, slots, channels), each rank owning
        the slots of its features), and so do, on every rank, the columns
        ``x[:, common[0]:common[1]]`` and ``tail``. The other columns of ``x`` are left
        unspecified (this rank's input or partial sums). Returns ``x``.

        x: a writable C-contiguous array of at least 2 dimensions, the same shape on all
        ranks; bounds: ``world_size + 1`` non-decreasing column indices from 0 to
        ``x.shape[1]``; op: "sum", "max" or "min"; tail: a small array of ``x``'s kind, dtype
        and device (writable, contiguous) reduced in place in the same call. Over shared
        memory (`shares_memory`, CPU arrays) each rank copies the other ranks' blocks into
        its stage slot and folds its own block in place, in rank order: one meeting of the
        ranks and (p-1)/p of ``x``'s bytes copied, where an allreduce copies all of them
        and folds all of them; the common columns and the tail are the same bits on every
        rank. Elsewhere (or with another ``algorithm``: one of `reduce_scatter`'s) the
        blocks travel packed, one per rank (padded to the widest), each followed by the
        common columns and the tail, in one reduce-scatter."""
        red = as_reducer(op)
        if not red.builtin:
            raise ValueError("reduce_blocks: op must be 'sum', 'max' or 'min'")
        arg = Operand.of(x)
        self._check_native(algorithm, red, "reduce_blocks", arg)
        if len(arg.shape) < 2:
            raise ValueError(f"reduce_blocks needs an array of at least 2 dimensions, got "
                             f"shape {arg.shape}")
        _check_writable(arg)
        n = arg.shape[1]
        cuts = [int(b) for b in bounds]
        if (len(cuts) != self.world_size + 1 or cuts[0] != 0 or cuts[-1] != n
                or any(a > b for a, b in itertools.pairwise(cuts))):
            raise ValueError(f"reduce_blocks: bounds must be {self.world_size + 1} "
                             f"non-decreasing column indices from 0 to {n}, got {cuts}")
        lo, hi = (0, 0) if common is None else (int(common[0]), int(common[1]))
        if not 0 <= lo <= hi <= n:
            raise ValueError(f"reduce_blocks: common must be columns within [0, {n}], got "
                             f"{common}")
        extra = None
        if tail is not None:
            extra = Operand.of(tail)
            if (extra.kind, extra.dtype, extra.device) != (arg.kind, arg.dtype, arg.device):
                raise ValueError(f"reduce_blocks: tail must be like x ({arg.kind} {arg.dtype} "
                                 f"on {arg.device}), got {extra.kind} {extra.dtype} on "
                                 f"{extra.device}")
            _check_writable(extra)
        with self._call("reduce_blocks", algorithm, timeout) as call:
            self._agree(call, arg, red, 0, check_metadata)
            if extra is not None and extra.size:
                self._agree(call, extra, red, 0, check_metadata)
            if self.world_size > 1:
                self._reduce_blocks(call, arg, cuts, (lo, hi), red,
                                    extra if extra is not None and extra.size else None)
            return arg.x

    def allgather(self, x: Any, algorithm: str = "auto", *, timeout: float | None = None,
                  check_metadata: bool | str | None = None) -> Any:
        """All ranks' ``x`` concatenated along axis 0 in rank order (a 0-d ``x`` counts as
        shape (1,)). ``len(x)`` may differ between ranks when the metadata check is on;
        ``x.shape[1:]`` and dtype must agree. algorithm: "native", "bruck",
        "recursive_doubling", "ring" or "auto"."""
        _check_algorithm("allgather", algorithm)
        if algorithm == "native" and not self._has_native():
            raise ValueError("allgather: this communicator has no native engine")
        arg = Operand.of(x)
        self._check_shared(algorithm, "allgather", arg)
        if not arg.shape:
            arg.x = arg.x.reshape(1)
            arg.shape = (1,)
        with self._call("allgather", algorithm, timeout) as call:
            rows = self._agree(call, arg, None, 0, check_metadata)
            lengths = ([int(n) for n in rows[:, M_SHAPE]] if rows is not None
                       else [arg.shape[0]] * self.world_size)
            return self._allgather(call, arg, lengths)

    def broadcast(self, x: Any, root: int = 0, algorithm: str = "auto", *,
                  timeout: float | None = None, check_metadata: bool | str | None = None,
                  inplace: bool = False) -> Any:
        """The root's ``x`` on every rank. Every rank passes an array of the same shape and
        dtype (its content is ignored off the root). algorithm: "native", "binomial",
        "scatter_allgather" or "auto". inplace: receive into ``x`` and return it."""
        _check_algorithm("broadcast", algorithm)
        if algorithm == "native" and not self._has_native():
            raise ValueError("broadcast: this communicator has no native engine")
        root = self._check_root(root)
        arg = Operand.of(x)
        self._check_shared(algorithm, "broadcast", arg)
        if inplace:
            _check_writable(arg)
        with self._call("broadcast", algorithm, timeout) as call:
            self._agree(call, arg, None, root, check_metadata)
            return self._broadcast(call, arg, root, inplace)

    def reduce(self, x: Any, root: int = 0, op: Op = "sum", algorithm: str = "auto", *,
               timeout: float | None = None, check_metadata: bool | str | None = None) -> Any:
        """The reduction of ``x`` over all ranks, returned on ``root``; None elsewhere.
        algorithm: "native", "binomial", "reduce_scatter_gather" or "auto"."""
        red = as_reducer(op)
        root = self._check_root(root)
        arg = Operand.of(x)
        self._check_native(algorithm, red, "reduce", arg)
        with self._call("reduce", algorithm, timeout) as call:
            self._agree(call, arg, red, root, check_metadata)
            return self._reduce(call, arg, red, root)

    def alltoall(self, x: Any, counts: Any, algorithm: str = "auto", *,
                 timeout: float | None = None, check_metadata: bool | str | None = None
                 ) -> tuple[Any, np.ndarray]:
        """Personalised exchange (alltoallv): rank r sends rows ``counts[d]`` of ``x`` to rank
        d, ``x`` holding the rows for rank 0 first, then those for rank 1, and so on.

        x: at least 1-d; ``len(x)`` may differ between ranks, ``x.shape[1:]`` and dtype must
        agree. counts: ints (world_size,), non-negative, summing to ``len(x)``. algorithm:
        "pairwise" (world_size - 1 steps; at step i rank r sends to r + i and receives from
        r - i) or "auto". Returns (the rows received, those of rank 0 first, then rank 1's,
        and so on, an array like ``x``; int64 (world_size,) rows received from each rank).
        Every rank learns its receive counts from one allgather of the send counts
        (world_size**2 int64 in all) before the data moves."""
        _check_algorithm("alltoall", algorithm)
        arg = Operand.of(x)
        if not arg.shape:
            raise ValueError("alltoall needs an array with at least one dimension")
        sizes = np.asarray(counts, np.int64).reshape(-1)
        if sizes.shape[0] != self.world_size or np.any(sizes < 0) \
                or int(sizes.sum()) != arg.shape[0]:
            raise ValueError(f"alltoall: counts must be {self.world_size} non-negative row "
                             f"counts summing to len(x) = {arg.shape[0]}, got "
                             f"{sizes.tolist()}")
        if check_metadata is False or (check_metadata is None and not self.check_metadata):
            check_metadata = "trust"  # sizes may differ: the counts exchange tells each rank
        with self._call("alltoall", algorithm, timeout) as call:
            self._agree(call, arg, None, 0, check_metadata)
            return self._alltoall(call, arg, [int(c) for c in sizes])

    def barrier(self, *, timeout: float | None = None) -> None:
        """Return once every rank has entered the barrier (a dissemination exchange of the
        call metadata, so it also catches ranks that are out of step)."""
        with self._call("barrier", "auto", timeout) as call:
            arg = Operand.of(np.zeros(0, np.int64))
            self._agree(call, arg, None, 0, True)

    def close(self) -> None:
        """Release the engine resources this communicator owns. Idempotent."""
        self._closed = True

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size}, "
                f"timeout={self.timeout})")

    # --- to implement -------------------------------------------------------------------
    @abstractmethod
    def _exchange_metadata(self, call: Call, vec: np.ndarray) -> np.ndarray:
        """Allgather of int64 (META_LEN,) vectors: (world_size, META_LEN) in rank order."""

    @abstractmethod
    def _allreduce(self, call: Call, arg: Operand, red: Reducer, inplace: bool,
                   tail: Operand | None = None) -> Any:
        """``arg`` reduced (into ``arg.x`` when ``inplace``); ``tail``, when given, reduced
        in place in the same call (`allreduce`)."""

    @abstractmethod
    def _reduce_scatter(self, call: Call, arg: Operand, red: Reducer) -> Any: ...

    @abstractmethod
    def _allgather(self, call: Call, arg: Operand, lengths: list[int]) -> Any: ...

    def _reduce_blocks(self, call: Call, arg: Operand, bounds: list[int],
                       common: tuple[int, int], red: Reducer, tail: Operand | None) -> None:
        """`reduce_blocks` by one reduce-scatter: row q of a (world_size, m) buffer holds
        block q of ``arg`` (padded to the widest), then the common columns, then the tail."""
        x = arg.x
        p, r = self.world_size, self.rank
        k = arg.shape[0]
        c = math.prod(arg.shape[2:])
        widths = [b - a for a, b in itertools.pairwise(bounds)]
        widest = max(widths) * k * c
        lo, hi = common
        n_common = (hi - lo) * k * c
        n_tail = 0 if tail is None else tail.size
        m = widest + n_common + n_tail
        torch_like = arg.kind != "numpy"
        send = x.new_zeros((p, m)) if torch_like else np.zeros((p, m), x.dtype)
        for q in range(p):
            if widths[q]:
                send[q, :widths[q] * k * c] = x[:, bounds[q]:bounds[q + 1]].reshape(-1)
        if n_common:
            send[:, widest:widest + n_common] = x[:, lo:hi].reshape(1, -1)
        if n_tail:
            send[:, widest + n_common:] = tail.x.reshape(1, -1)
        got = self._reduce_scatter(call, Operand.of(send), red).reshape(-1)
        shape = arg.shape[1:]
        if widths[r]:
            x[:, bounds[r]:bounds[r + 1]] = got[:widths[r] * k * c].reshape(
                k, widths[r], *shape[1:])
        if n_common:
            x[:, lo:hi] = got[widest:widest + n_common].reshape(k, hi - lo, *shape[1:])
        if n_tail:
            tail.x[...] = got[widest + n_common:].reshape(tail.shape)

    @abstractmethod
    def _broadcast(self, call: Call, arg: Operand, root: int, inplace: bool) -> Any: ...

    @abstractmethod
    def _reduce(self, call: Call, arg: Operand, red: Reducer, root: int) -> Any: ...

    @abstractmethod
    def _alltoall(self, call: Call, arg: Operand, counts: list[int]
                  ) -> tuple[Any, np.ndarray]: ...

    def _has_native(self) -> bool:
        return True

    def _has_shared(self) -> bool:
        return True

    @property
    def shares_memory(self) -> bool:
        """Whether ``algorithm="shared"`` is available for CPU arrays: every rank maps one
        memory segment (the shared-memory transport; world size 1 trivially). Then "auto"
        takes it for CPU arrays."""
        return self._has_shared()

    def prefers_native(self, x: Any) -> bool:
        """Whether ``algorithm="native"`` (the engine's collective) is the faster choice for
        small, latency-bound calls on arrays like ``x``: true where one point-to-point message
        costs about as much as the engine's whole collective (Gloo over TCP, NCCL), false over
        shared memory and without a native engine. The same answer on every rank. Native
        reductions follow the engine's order: use them where the order cannot change the
        result (integers, max, min, data movement)."""
        return False

    @property
    def has_native(self) -> bool:
        """Whether ``algorithm="native"`` (the engine's own collectives: Gloo, NCCL) is
        available."""
        return self._has_native()

    def _abandon(self) -> None:  # noqa: B027 (an optional hook: most have nothing to do)
        """Called once after a failure: release what peers may be waiting on, so that they
        fail now rather than at their timeout."""

    # --- shared machinery ---------------------------------------------------------------
    def _check_native(self, algorithm: str, red: Reducer, name: str, arg: Operand) -> None:
        """Reject, before any message, what the native engine cannot do (every rank raises
        alike, so the communicator stays usable)."""
        _check_algorithm(name, algorithm)
        self._check_shared(algorithm, name, arg)
        if algorithm != "native":
            return
        if not self._has_native():
            raise ValueError(f"{name}: this communicator has no native engine")
        if not red.builtin:
            raise ValueError(
                f"{name}: the engine's native collectives only reduce with 'sum', 'max' or "
                "'min'; use another algorithm (or 'auto') for a callable"
            )
        if arg.dtype not in NATIVE_REDUCIBLE_DTYPES:
            raise ValueError(
                f"{name}: native reductions support {sorted(NATIVE_REDUCIBLE_DTYPES)}, not "
                f"{arg.dtype}; use another algorithm (or 'auto')"
            )

    def _check_shared(self, algorithm: str, name: str, arg: Operand) -> None:
        if algorithm == _sh.ALGORITHM and not (self._has_shared() and arg.device == "cpu"):
            raise ValueError(
                f"{name}: algorithm 'shared' needs CPU arrays and ranks that share a memory "
                "segment (the shared-memory transport; see Communicator.shares_memory)")

    def _check_root(self, root: int) -> int:
        root = int(root)
        if not 0 <= root < self.world_size:
            raise ValueError(f"root {root} out of range for world size {self.world_size}")
        return root

    @contextmanager
    def _call(self, name: str, algorithm: str, timeout: float | None) -> Iterator[Call]:
        if self._closed:
            raise CollectiveError(f"{name} on rank {self.rank}: communicator is closed",
                                  op=name, rank=self.rank)
        if self._failure is not None:
            raise CollectiveError(
                f"{name} on rank {self.rank}: communicator is unusable after an earlier "
                f"failure ({self._failure}); create a new one", op=name, rank=self.rank,
            ) from self._failure
        t = self.timeout if timeout is None else _check_timeout(timeout)
        self._seq += 1
        call = Call(name, algorithm, self._seq, t, time.monotonic() + t)
        try:
            yield call
        except MetadataMismatchError:
            raise
        except BaseException as e:
            # Any failure once messages flow leaves ranks out of step.
            self._failure = e
            self._abandon()
            raise

    def _agree(self, call: Call, arg: Operand, red: Reducer | None, root: int,
               check: bool | str | None) -> np.ndarray | None:
        """Run the metadata check (unless switched off: then the size check); returns every
        rank's vector, or None after the size check."""
        if isinstance(check, str):
            if check != "trust":
                raise ValueError(f"check_metadata must be True, False or 'trust', got "
                                 f"{check!r}")
            return None
        if not (self.check_metadata if check is None else check):
            if self.world_size > 1:
                self._agree_sizes(call, arg)
            return None
        vec = np.zeros(META_LEN, np.int64)
        vec[M_MAGIC] = _MAGIC
        vec[M_SEQ] = call.seq
        vec[M_OP] = _OP_CODES[call.name]
        vec[M_ALG] = _ALG_CODES[call.algorithm]
        vec[M_RED] = red.code if red is not None else 0
        vec[M_ROOT] = root
        vec[M_DTYPE] = dtype_code(arg.dtype)
        vec[M_DEVICE] = DEVICE_CODES.get(arg.device, 9)
        vec[M_NDIM] = len(arg.shape)
        vec[M_SHAPE:M_SHAPE + min(MAX_DIMS, len(arg.shape))] = arg.shape[:MAX_DIMS]
        vec[M_SHAPE_TAIL] = hash(arg.shape[MAX_DIMS:]) & 0x7FFFFFFF
        rows = self._exchange_metadata(call, vec)
        _verify(call, self.rank, rows, arg,
                lead_dim_may_differ=call.name in ("allgather", "alltoall"))
        return rows

    def _agree_sizes(self, call: Call, arg: Operand) -> None:
        """The check that stays with ``check_metadata=False``: every rank moves as many bytes
        (and, for reduce_scatter, rows); else `MetadataMismatchError` on every rank."""
        vec = np.zeros(META_LEN, np.int64)
        vec[M_MAGIC] = _SIZE_MAGIC
        vec[M_SEQ] = call.seq
        vec[M_OP] = _OP_CODES[call.name]
        vec[M_NBYTES] = int(arg.x.nbytes)
        vec[M_ROWS] = arg.shape[0] if call.name == "reduce_scatter" else 0
        rows = self._exchange_metadata(call, vec)
        _verify_sizes(call, self.rank, rows)


def _verify(call: Call, rank: int, rows: np.ndarray, arg: Operand,
            lead_dim_may_differ: bool) -> None:
    """Raise `MetadataMismatchError` naming what differs and on which ranks."""
    if not np.all(rows[:, M_MAGIC] == _MAGIC):
        bad = np.flatnonzero(rows[:, M_MAGIC] != _MAGIC).tolist()
        raise MetadataMismatchError(
            f"{call.label} on rank {rank}: ranks {bad} sent no histboost metadata (a rank "
            "switched the metadata check off, or another library used this group)",
            op=call.name, rank=rank)
    fields = [("operation", [M_OP]), ("call number", [M_SEQ]), ("algorithm", [M_ALG]),
              ("reducer", [M_RED]), ("root", [M_ROOT]), ("dtype", [M_DTYPE]),
              ("device", [M_DEVICE])]
    first_dim = M_SHAPE + 1 if lead_dim_may_differ else M_SHAPE
    fields.append(("shape", [M_NDIM, *range(first_dim, META_LEN)]))
    for what, cols in fields:
        sub = rows[:, cols]
        if np.all(sub == sub[0]):
            continue
        groups: dict[tuple[int, ...], list[int]] = {}
        for r, row in enumerate(sub):
            groups.setdefault(tuple(int(v) for v in row), []).append(r)
        desc = "; ".join(f"{_describe(what, key, rows[rs[0]])} on rank"
                         f"{'s' if len(rs) > 1 else ''} {_ranks(rs)}"
                         for key, rs in groups.items())
        hint = " (ranks are out of step: some skipped or added a call)" if what in (
            "operation", "call number") else ""
        raise MetadataMismatchError(
            f"{call.label} on rank {rank}: ranks disagree on {what}{hint}: {desc}",
            op=call.name, rank=rank)


def _verify_sizes(call: Call, rank: int, rows: np.ndarray) -> None:
    """Raise `MetadataMismatchError` unless every rank sent a size vector for the same call
    with the same byte (and row) count."""
    if not np.all(rows[:, M_MAGIC] == _SIZE_MAGIC):
        bad = np.flatnonzero(rows[:, M_MAGIC] != _SIZE_MAGIC).tolist()
        raise MetadataMismatchError(
            f"{call.label} on rank {rank}: ranks {bad} did not send a size check (check_metadata "
            "differs between ranks, or another library used this group)", op=call.name,
            rank=rank)
    for what, cols in (("operation", [M_OP]), ("call number", [M_SEQ]),
                       ("data size", [M_NBYTES, M_ROWS])):
        sub = rows[:, cols]
        if np.all(sub == sub[0]):
            continue
        groups: dict[tuple[int, ...], list[int]] = {}
        for r, row in enumerate(sub):
            groups.setdefault(tuple(int(v) for v in row), []).append(r)
        desc = "; ".join(f"{_describe_size(what, key)} on rank{'s' if len(rs) > 1 else ''} "
                         f"{_ranks(rs)}" for key, rs in groups.items())
        hint = (" (ranks are out of step: some skipped or added a call)"
                if what != "data size" else "")
        raise MetadataMismatchError(
            f"{call.label} on rank {rank}: ranks disagree on {what}{hint} (check_metadata=False "
            f"compares sizes only): {desc}", op=call.name, rank=rank)


def _describe_size(what: str, key: tuple[int, ...]) -> str:
    if what == "data size":
        return f"{key[0]} bytes" + (f" in {key[1]} rows" if key[1] else "")
    if what == "operation":
        return _CODE_NAMES[M_OP].get(key[0], f"#{key[0]}")
    return str(key[0])


def _describe(what: str, key: tuple[int, ...], row: np.ndarray) -> str:
    if what == "shape":
        ndim = int(row[M_NDIM])
        dims = [int(d) for d in row[M_SHAPE:M_SHAPE + min(ndim, MAX_DIMS)]]
        return str(tuple(dims)) + ("+..." if ndim > MAX_DIMS else "")
    col = {"operation": M_OP, "algorithm": M_ALG, "reducer": M_RED, "device": M_DEVICE,
           "dtype": M_DTYPE}.get(what)
    if col is None:
        return str(key[0])
    return _CODE_NAMES[col].get(key[0], f"#{key[0]}")


def _ranks(rs: list[int]) -> str:
    return ", ".join(map(str, rs[:16])) + (f", ... ({len(rs)} ranks)" if len(rs) > 16 else "")
