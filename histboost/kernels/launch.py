"""Low-overhead launches of Numba-CUDA kernels on torch CUDA tensors.

A regular Numba launch (``kernel[grid, block, stream](*args)``) types every argument, wraps
each tensor in a Numba device array through ``__cuda_array_interface__`` and builds a stream
object: about 0.1-0.5 ms of host time per launch, measured on an H100 host, against a few
microseconds for a torch operator. A training step of a few milliseconds with several launches
becomes host-bound. :class:`CudaKernel` compiles a kernel once per device for one fixed
signature and launches it through the driver's ``cuLaunchKernel`` (``cuda.bindings``) with
the arguments flattened as Numba's own launcher flattens them (array: meminfo, parent, size,
itemsize, data pointer, shape, strides in bytes), from the tensors' pointers and shapes
alone. Each tensor is checked against the signature (dtype, rank, C-contiguity, device) so a
wrong argument raises instead of reading garbage.

Most launches pass the same persistent buffers tree after tree, so the checked parameters are
kept: per kernel, those of each tuple of tensor arguments are packed once into the buffer the
driver reads (`_Packed`: one slot a parameter, and the array of their addresses), kept while
those tensors live (a weak reference's callback drops the buffer when one of them dies, so an
object's id in the key is always that object) and reused after a cheap check (the same
objects with the same data pointers and shapes: a tensor resized or re-set in place is checked
and packed again); only the scalar arguments are written per launch. The launch dimensions and
the kernel's handle are kept per configuration and device, and torch's current stream is read
as a raw handle. A launch over kept tensors costs the host a few microseconds instead of the
tens that checking, flattening and `cuda.core.launch`'s own packing took
(`bench/gpu_launch.py`, `docs/gpu.md`).

Signatures are given as tuples of argument specs: ``("float32", 2)`` is a C-contiguous 2-D
float32 array, a bare ``"int64"`` / ``"float64"`` / ``"float32"`` / ``"boolean"`` a scalar.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, CI has no GPU) `CudaKernel.launch`
runs the same kernel through the simulator on the CPU tensors' NumPy views, after the same
argument checks, so code written against torch tensors runs unchanged there.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import operator
import os
import struct
import sys
import threading
import weakref
from typing import Any

import torch


def simulated() -> bool:
    """True under Numba's CUDA simulator (kernels run on the CPU, on CPU tensors)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


_SHARED_LOCK = threading.Lock()


def _lock_simulated_shared_arrays() -> None:
    """Numba's CUDA simulator creates a block's shared array when the first of its threads
    (Python threads) reaches the declaration, without a lock: two threads arriving together
    can each get an array of their own, and a block-wide sum or scan goes wrong (seen once in
    a few dozen trainings). Creation is serialised here, the arrays keyed as the simulator
    keys them (the declaring line)."""
    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    shared = kernelapi.FakeCUDAShared
    if getattr(shared, "locked_by_histboost", False):
        return
    plain = shared.array

    def array(self, shape, dtype, alignment=None):
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        if shape == 0 or alignment is not None:  # dynamic shared memory: no allocation
            # (the simulator takes the element size from a dtype, not a NumPy type)
            return plain(self, shape, np.dtype(dtype), alignment)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with _SHARED_LOCK:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    shared.array = array
    shared.locked_by_histboost = True

ArgSpec = tuple[str, int] | str

_TORCH_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
}
_SCALARS = {
    "int64": ctypes.c_int64,
    "int32": ctypes.c_int32,
    "float64": ctypes.c_double,
    "float32": ctypes.c_float,
    "boolean": None,  # passed as a Python bool, as Numba does
}


def numba_signature(spec: tuple[ArgSpec, ...]) -> str:
    """Numba signature string of ``spec``, e.g. ``"void(float32[:, ::1], int64)"``."""
    parts = []
    for arg in spec:
        if isinstance(arg, tuple):
            dtype, ndim = arg
            parts.append(f"{dtype}[{', '.join([':'] * (ndim - 1) + ['::1'])}]")
        else:
            parts.append(arg)
    return f"void({', '.join(parts)})"


# id(tensor), spec of the argument -> (weak reference, data pointer, shape, device, flattened
# parameters); bounded (cleared when full)
_FLAT: dict[tuple[int, tuple[str, int]], tuple] = {}
_FLAT_ENTRIES = 4096


def _flat_tensor(name: str, i: int, arg: tuple[str, int], val: Any, device: torch.device
                 ) -> list:
    """The flattened parameters of tensor argument i, checked against its spec `arg`; kept
    for the next launch that passes the same tensor object."""
    key = (id(val), arg)
    hit = _FLAT.get(key)
    if hit is not None and hit[0]() is val:
        if hit[1] == val.data_ptr() and hit[2] == val.shape and hit[3] == device:
            return hit[4]
    dtype, ndim = arg
    if (
        not isinstance(val, torch.Tensor)
        or val.dtype != _TORCH_DTYPES[dtype]
        or val.ndim != ndim
        or not val.is_contiguous()
        or val.device != device
    ):
        got = (f"{val.dtype} {val.ndim}-D on {val.device}, contiguous="
               f"{val.is_contiguous()}") if isinstance(val, torch.Tensor) else type(val)
        raise TypeError(
            f"{name}: argument {i} must be a contiguous {ndim}-D {dtype} tensor on "
            f"{device}, got {got}"
        )
    itemsize = val.element_size()
    flat = [0, 0, val.numel(), itemsize, val.data_ptr(), *val.shape,
            *(s * itemsize for s in val.stride())]
    if len(_FLAT) >= _FLAT_ENTRIES:
        _FLAT.clear()
    _FLAT[key] = (weakref.ref(val), val.data_ptr(), val.shape, device, flat)
    return flat


def flatten_args(name: str, spec: tuple[ArgSpec, ...], args: tuple, device: torch.device
                 ) -> list:
    """Kernel parameters of ``args`` in Numba's flattened layout, after checking each one.

    Raises TypeError naming the kernel and argument when a tensor does not match the spec.
    """
    if len(args) != len(spec):
        raise TypeError(f"{name}: expected {len(spec)} arguments, got {len(args)}")
    out: list = []
    for i, (arg, val) in enumerate(zip(spec, args, strict=True)):
        if isinstance(arg, tuple):
            out += _flat_tensor(name, i, arg, val, device)
        else:
            ctype = _SCALARS[arg]
            try:
                out.append(bool(val) if ctype is None else ctype(val))
            except TypeError as e:
                raise TypeError(f"{name}: argument {i} ({arg}): {e}") from None
    return out


class _Layout:
    """Where a spec's arguments lie among its flattened parameters (`flatten_args`): `n`
    parameters; each scalar's (argument position, parameter index, ctypes type); `packer`:
    the struct of 2n int64 (the parameters' addresses, then their 8-byte slots)."""

    def __init__(self, spec: tuple[ArgSpec, ...]) -> None:
        self.scalars: list[tuple[int, int, Any]] = []
        k = 0
        for i, arg in enumerate(spec):
            if isinstance(arg, tuple):
                k += 5 + 2 * arg[1]
            else:
                self.scalars.append((i, k, _SCALARS[arg] or ctypes.c_bool))
                k += 1
        self.n = k
        self.packer = struct.Struct(f"<{2 * k}q")


def _forget(entries: dict, key: tuple, _ref: weakref.ref) -> None:
    """A weak reference's callback: one of the tensors of `entries[key]` died."""
    entries.pop(key, None)


_data_ptr = torch.Tensor.data_ptr
_shape = operator.attrgetter("shape")


class _Packed:
    """A kernel's parameters for one tuple of tensor arguments, packed once as the driver
    reads them, in one buffer: the n parameters' addresses (``void**`` at `address`), then
    one 8-byte slot a parameter in `flatten_args`'s order (a scalar of fewer bytes at the
    start of its slot). The scalars' slots (`scalars`: argument position, ctypes view of the
    slot) are written per launch. `ptrs`, `shapes`: the tensors' data pointers and shapes
    when packed; `refs`: their weak references (whose callbacks drop this entry)."""

    __slots__ = ("ptrs", "shapes", "scalars", "refs", "address", "_buffer")

    def __init__(self, layout: _Layout, flat: list, tensors: tuple, refs: list) -> None:
        n = layout.n
        self._buffer = ctypes.create_string_buffer(16 * n)
        self.address = base = ctypes.addressof(self._buffer)
        ints = flat.copy()
        for _, k, _ in layout.scalars:
            ints[k] = 0
        ctypes.memmove(base, layout.packer.pack(*range(base + 8 * n, base + 16 * n, 8), *ints),
                       16 * n)
        self.scalars = []
        for i, k, ctype in layout.scalars:
            slot = ctype.from_buffer(self._buffer, 8 * (n + k))
            slot.value = flat[k] if ctype is ctypes.c_bool else flat[k].value
            self.scalars.append((i, slot))
        self.ptrs = tuple(map(_data_ptr, tensors))
        self.shapes = tuple(map(_shape, tensors))
        self.refs = refs


# packed parameter buffers kept per kernel (cleared when full)
_PACKED_ENTRIES = 1024


class CudaKernel:
    """A Numba-CUDA kernel compiled for one signature, launched on torch's current stream.

    Args:
        dispatcher: the ``@cuda.jit`` kernel.
        spec: the argument specs (module docstring).
    """

    def __init__(self, dispatcher: Any, spec: tuple[ArgSpec, ...]) -> None:
        self.dispatcher = dispatcher
        self.spec = spec
        self.name = getattr(dispatcher, "__name__", repr(dispatcher))
        # Numba chose the simulator or the device when it was imported, before this kernel
        self._simulated = simulated()
        self._is_tensor = tuple(isinstance(arg, tuple) for arg in spec)
        self._layout = _Layout(spec)
        # (device, ids of the tensor arguments) -> their packed parameters
        self._packed: dict[tuple, _Packed] = {}
        # the packed buffers' scalar slots are written, then read by the driver, under it
        self._lock = threading.Lock()
        self._handles: dict[int, int] = {}  # device index -> the kernel's driver handle
        self._cufuncs: dict[int, Any] = {}  # device index -> Numba's function (attributes)
        # (grid, block, shared bytes, device index) -> cuLaunchKernel's dimension arguments
        self._dims: dict[tuple, tuple[int, ...]] = {}
        self._shared_limit: dict[int, int] = {}  # device index -> dynamic shared bytes allowed
        self._cu_launch: Any = None  # the driver's cuLaunchKernel (cuda.bindings)

    def _cufunc(self, index: int) -> Any:
        cufunc = self._cufuncs.get(index)
        if cufunc is None:
            from cuda.bindings.driver import cuLaunchKernel
            from numba import cuda

            self._cu_launch = cuLaunchKernel
            with cuda.gpus[index]:
                compiled = self.dispatcher.compile(numba_signature(self.spec))
                cufunc = compiled._codelibrary.get_cufunc()
            self._cufuncs[index] = cufunc
            self._handles[index] = int(cufunc.handle)
        return cufunc

    def _allow_shared(self, index: int, nbytes: int) -> None:
        """Let the kernel take nbytes of dynamic shared memory on device `index`: above the
        static 48 KiB a kernel must opt in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
        up to the device's opt-in limit per block (227 KiB on an H100)."""
        if nbytes <= self._shared_limit.get(index, 48 << 10):
            return
        from numba.cuda.cudadrv.driver import binding, driver

        cufunc = self._cufunc(index)
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)
        self._shared_limit[index] = int(nbytes)

    def _launch_dims(self, grid: int | tuple, block: int | tuple, shared_bytes: int,
                     index: int) -> tuple[int, ...]:
        """cuLaunchKernel's (grid x, y, z, block x, y, z, shared bytes) for a configuration,
        kept; the kernel is loaded on device `index` and allowed the shared memory."""
        dims = []
        for what, d in (("grid", grid), ("block", block)):
            d = tuple(map(operator.index, d if isinstance(d, tuple) else (d,)))
            if not 1 <= len(d) <= 3 or min(d) < 1:
                raise ValueError(f"{self.name}: {what} must be 1 to 3 positive ints, got {d}")
            dims += [*d, *(1,) * (3 - len(d))]
        shared_bytes = operator.index(shared_bytes)
        if shared_bytes < 0:
            raise ValueError(f"{self.name}: shared_bytes must be >= 0, got {shared_bytes}")
        self._cufunc(index)
        self._allow_shared(index, shared_bytes)
        out = (*dims, shared_bytes)
        if len(self._dims) >= 4096:
            self._dims.clear()
        self._dims[grid, block, shared_bytes, index] = out
        return out

    def packed(self, args: tuple, device: torch.device) -> _Packed:
        """The packed parameters of ``args`` with their scalars written: kept for the same
        tensor objects (alive, their data pointers and shapes unchanged), else checked
        (`flatten_args`: TypeError naming the kernel and argument) and packed afresh. Hold
        ``self._lock`` until the driver has read them."""
        if len(args) != len(self.spec):
            raise TypeError(f"{self.name}: expected {len(self.spec)} arguments, got {len(args)}")
        tensors = tuple(itertools.compress(args, self._is_tensor))
        key = (device, *map(id, tensors))
        packed = self._packed.get(key)
        if (packed is None or packed.ptrs != tuple(map(_data_ptr, tensors))
                or packed.shapes != tuple(map(_shape, tensors))):
            flat = flatten_args(self.name, self.spec, args, device)
            forget = functools.partial(_forget, self._packed, key)
            packed = _Packed(self._layout, flat, tensors,
                             [weakref.ref(t, forget) for t in tensors])
            if len(self._packed) >= _PACKED_ENTRIES:
                self._packed.clear()
            self._packed[key] = packed
            return packed
        for i, slot in packed.scalars:
            try:
                slot.value = args[i]
            except TypeError as e:
                raise TypeError(f"{self.name}: argument {i} ({self.spec[i]}): {e}") from None
        return packed

    def launch(self, grid: int | tuple, block: int | tuple, device: torch.device,
               *args: Any, shared_bytes: int = 0) -> None:
        """Launch on ``device`` (a ``torch.device`` with an index) in torch's current stream
        (under the simulator: on the CPU tensors, ``device`` being the CPU), with
        ``shared_bytes`` of dynamic shared memory per block (``cuda.shared.array(0, ...)``)."""
        if self._simulated:
            _lock_simulated_shared_arrays()
            with self._lock:
                self.packed(args, device)  # the same checks
            arrays = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
            self.dispatcher[grid, block, 0, shared_bytes](*arrays)
            return
        index = device.index
        dims = self._dims.get((grid, block, shared_bytes, index))
        if dims is None:
            dims = self._launch_dims(grid, block, shared_bytes, index)
        if _current_device() != index:
            with torch.cuda.device(index):  # makes the device's primary context current
                self._launch(dims, index, args, device)
            return
        self._launch(dims, index, args, device)

    def _launch(self, dims: tuple[int, ...], index: int, args: tuple,
                device: torch.device) -> None:
        stream = _current_stream(index)
        with self._lock:
            address = self.packed(args, device).address
            err, = self._cu_launch(self._handles[index], *dims, stream, address, 0)
        if err:
            raise RuntimeError(f"{self.name}: cuLaunchKernel failed: {err!r}")


def _stream_handle(index: int) -> int:
    """Handle of torch's current stream on CUDA device `index`."""
    return torch.cuda.current_stream(index).cuda_stream


# CUDA builds of torch read the current stream's handle and the current device without making
# Python objects (a Stream a call otherwise)
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _stream_handle)
_current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
