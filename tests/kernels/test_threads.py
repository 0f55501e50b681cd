"""`run_ranges`: the row ranges of the once-a-round kernels cover every row once, in one
contiguous range per thread (the caller runs one), whatever the thread count; errors reach the
caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from histboost.kernels.cpu._threads import run_ranges


@pytest.mark.parametrize("threads", [1, 2, 3, 16])
@pytest.mark.parametrize("n", [0, 1, 5, 1000])
def test_ranges_cover_rows_once(threads, n):
    seen = np.zeros(n, np.int64)
    ranges = []
    names = set()

    def kernel(lo, hi, out):
        out[lo:hi] += 1
        ranges.append((lo, hi))
        names.add(threading.current_thread().name)

    run_ranges(kernel, n, seen, threads=threads, min_rows=2)
    assert np.all(seen == 1)
    assert len(ranges) == max(1, min(threads, n // 2))
    assert len(names) <= len(ranges) and (len(ranges) == 1) == (names == {"MainThread"})


def test_kernel_errors_reach_the_caller():
    def kernel(lo, hi):
        if lo > 0:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_ranges(kernel, 100, threads=4)
