"""Low-overhead launches of Numba-CUDA kernels on torch CUDA tensors.

A regular Numba launch (``kernel[grid, block, stream](*args)``) types every argument, wraps
each tensor in a Numba device array through ``__cuda_array_interface__`` and builds a stream
object: about 0.1-0.5 ms of host time per launch, measured on an H100 host, against a few
microseconds for a torch operator. A training step of a few milliseconds with several launches
becomes host-bound. :class:`CudaKernel` compiles a kernel once per device for one fixed
signature and launches it through ``cuda.core`` with the arguments flattened as Numba's own
launcher flattens them (array: meminfo, parent, size, itemsize, data pointer, shape, strides
in bytes), from the tensors' pointers and shapes alone. Each tensor is checked against the
signature (dtype, rank, C-contiguity, device) so a wrong argument raises instead of reading
garbage. A tensor's checked, flattened parameters are kept (by object, while it lives, its
data pointer and shape unchanged): a backend passing the same buffers launch after launch
pays the checks once. Launch configurations and streams are kept too.

Signatures are given as tuples of argument specs: ``("float32", 2)`` is a C-contiguous 2-D
float32 array, a bare ``"int64"`` / ``"float64"`` / ``"float32"`` / ``"boolean"`` a scalar.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, CI has no GPU) `CudaKernel.launch`
runs the same kernel through the simulator on the CPU tensors' NumPy views, after the same
argument checks, so code written against torch tensors runs unchanged there.
"""

from __future__ import annotations

import ctypes
import os
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
            out.append(bool(val) if ctype is None else ctype(val))
    return out


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
        self._kernels: dict[int, Any] = {}  # device index -> cuda.core Kernel
        self._cufuncs: dict[int, Any] = {}  # device index -> Numba's function (attributes)
        self._streams: dict[int, Any] = {}  # stream handle -> cuda.core Stream
        self._configs: dict[tuple, Any] = {}  # (grid, block, shared) -> cuda.core LaunchConfig
        self._shared_limit: dict[int, int] = {}  # device index -> dynamic shared bytes allowed

    def _kernel(self, index: int) -> Any:
        kernel = self._kernels.get(index)
        if kernel is None:
            from numba import cuda

            with cuda.gpus[index]:
                compiled = self.dispatcher.compile(numba_signature(self.spec))
                kernel = compiled._codelibrary.get_cufunc().kernel
            self._kernels[index] = kernel
            self._cufuncs[index] = compiled._codelibrary.get_cufunc()
        return kernel

    def _allow_shared(self, index: int, nbytes: int) -> None:
        """Let the kernel take nbytes of dynamic shared memory on device `index`: above the
        static 48 KiB a kernel must opt in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
        up to the device's opt-in limit per block (227 KiB on an H100)."""
        if nbytes <= self._shared_limit.get(index, 48 << 10):
            return
        from numba.cuda.cudadrv.driver import binding, driver

        self._kernel(index)
        cufunc = self._cufuncs[index]
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)
        self._shared_limit[index] = int(nbytes)

    def _stream(self, handle: int) -> Any:
        stream = self._streams.get(handle)
        if stream is None:
            from cuda.core import Stream

            stream = Stream.from_handle(handle)
            self._streams[handle] = stream
        return stream

    def launch(self, grid: int | tuple, block: int | tuple, device: torch.device,
               *args: Any, shared_bytes: int = 0) -> None:
        """Launch on ``device`` (a ``torch.device`` with an index) in torch's current stream
        (under the simulator: on the CPU tensors, ``device`` being the CPU), with
        ``shared_bytes`` of dynamic shared memory per block (``cuda.shared.array(0, ...)``)."""
        if simulated():
            _lock_simulated_shared_arrays()
            flatten_args(self.name, self.spec, args, device)  # the same checks
            arrays = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
            self.dispatcher[grid, block, 0, shared_bytes](*arrays)
            return
        from cuda.core import LaunchConfig, launch

        params = flatten_args(self.name, self.spec, args, device)
        index = device.index
        handle = torch.cuda.current_stream(index).cuda_stream
        config = self._configs.get((grid, block, shared_bytes))
        if config is None:
            self._allow_shared(index, shared_bytes)
            config = LaunchConfig(grid=grid, block=block, shmem_size=shared_bytes)
            if len(self._configs) < 4096:
                self._configs[(grid, block, shared_bytes)] = config
        if torch.cuda.current_device() == index:  # its primary context is current
            launch(self._stream(handle), config, self._kernel(index), *params)
            return
        with torch.cuda.device(index):  # makes the device's primary context current
            launch(self._stream(handle), config, self._kernel(index), *params)
