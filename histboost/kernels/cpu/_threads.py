"""Row-range kernels run on several threads from Python.

Prediction, binning and the subtraction of many histograms are serial Numba functions over a
range, ``kernel(lo, hi, *args)``, with the GIL released (``nogil``); `run_ranges` splits the
range into one contiguous part per thread and runs them on a shared thread pool. One compiled
body serves the serial and the parallel case, and a serial kernel compiles several times
faster than a ``prange`` one (a parallel kernel costs ~0.5 s plus ~0.1 s per array argument
to compile, the prediction kernels ~2 s each): a first run with an empty compile cache is
seconds shorter. A pool launch costs tens of microseconds. Kernels that run right after the
split kernels' parallel loops in every tree (gradients, quantisation, margin updates) use
Numba's parallel loops instead: those loops' threads spin for a few milliseconds after each
loop, and pool threads would wait for a core.

Every row is computed by the same code whatever range it falls in, so results do not depend
on the thread count.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba as nb

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool with at least `workers` threads (a new one after a fork: the parent's
    threads do not exist in the child). A smaller pool it replaces is dropped, not shut
    down: a caller may still be submitting to it; its threads end once it is collected."""
    global _pool, _pool_size, _pool_pid
    with _lock:
        if _pool is None or _pool_size < workers or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="histboost")
            _pool_size, _pool_pid = workers, os.getpid()
        return _pool


def run_ranges(kernel: Callable[..., Any], n: int, *args: Any, threads: int | None = None,
               min_rows: int = 1) -> None:
    """kernel(lo, hi, *args) over rows [0, n) in contiguous ranges of at least `min_rows`
    rows, one per thread (threads: Numba's thread count of the calling thread by default;
    the caller runs the first range itself)."""
    t = nb.get_num_threads() if threads is None else threads
    t = max(1, min(int(t), n // max(1, min_rows)))
    if t == 1:
        kernel(0, n, *args)
        return
    bounds = [n * c // t for c in range(t + 1)]
    pool = _executor(t - 1)
    futures = [pool.submit(kernel, bounds[c], bounds[c + 1], *args) for c in range(1, t)]
    try:
        kernel(bounds[0], bounds[1], *args)
    finally:
        for f in futures:
            f.result()
