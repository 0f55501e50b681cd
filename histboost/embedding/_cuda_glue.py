"""Hand torch CUDA tensors to Numba-CUDA kernels: array views, torch's stream, the device."""

from __future__ import annotations

from typing import Any

import torch


def cai(t: torch.Tensor) -> Any:
    """Zero-copy Numba device-array view of a CUDA tensor (``__cuda_array_interface__``)."""
    from numba import cuda

    # sync=False: launches go to torch's current stream, which already orders them.
    return cuda.as_cuda_array(t.detach(), sync=False)


def stream(device: torch.device) -> Any:
    """Torch's current stream on ``device`` as a Numba stream, so launches stay ordered."""
    from numba import cuda

    return cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)


class numba_device:
    """Make Numba's current context the GPU of ``device`` for the enclosed launches."""

    def __init__(self, device: torch.device) -> None:
        self.index = device.index if device.index is not None else torch.cuda.current_device()

    def __enter__(self) -> None:
        from numba import cuda

        self._ctx = cuda.gpus[self.index]
        self._ctx.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)
