"""Device helpers shared by the CUDA kernels: launch geometry, multiplication without FMA
contraction, and the counter-based rounding hash of `histboost.kernels.cpu.quantize`."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..cpu import quantize as cpu_quantize
from ..launch import simulated

# threads per block; under the simulator, which runs every thread as a Python thread, a warp
# (every kernel strides by THREADS, so any count computes the same)
THREADS = 32 if simulated() else 256
# rows of one node handled by one block of the histogram, partition and margin kernels
CHUNK_ROWS = 2048


def grid(n: int, threads: int = THREADS) -> int:
    """Blocks of `threads` covering n items (at least 1)."""
    return max(1, (int(n) + threads - 1) // threads)


if simulated():
    @cuda.jit(device=True)
    def mul(a, b):
        return a * b
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline=True)
    def mul(a, b):
        """a * b rounded on its own: NVVM contracts a * b + c into one fused multiply-add by
        default, which rounds once where the CPU rounds twice; split gains must be the same
        bits on both engines."""
        return libdevice.dmul_rn(a, b)


splitmix64 = cuda.jit(device=True, inline=True)(cpu_quantize.splitmix64.py_func)


@cuda.jit(device=True, inline=True)
def uniform01(key, counter):
    """As `histboost.kernels.cpu.quantize.uniform01`."""
    z = splitmix64(key ^ splitmix64(np.uint64(counter)))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)
