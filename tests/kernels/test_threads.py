"""`run_ranges`: the row ranges of the once-a-round kernels cover every row once, in one
contiguous range per thread (the caller runs one), whatever the thread count; errors reach the
caller. `fetch_add`: a shared counter of a parallel loop hands every item out once."""

from __future__ import annotations

import threading

import numba as nb
import numpy as np
import pytest

from histboost.kernels.cpu._intrinsics import fetch_add
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


@nb.njit(parallel=True)
def _take_in_turn(workers, counter, hits, taker):
    # each of `workers` loop iterations takes items from the counter until none are left
    for w in nb.prange(workers):
        while True:
            c = fetch_add(counter, 0, 1)
            if c >= hits.shape[0]:
                break
            hits[c] += 1
            taker[c] = w


@pytest.mark.parametrize("workers", [1, 2, 3, 16])
def test_fetch_add_hands_every_item_out_once(workers):
    """`fetch_add` as the parallel search uses it: every item is taken exactly once whatever
    the workers (the counter ends at the items plus one failed take a worker)."""
    n = 20_000
    counter = np.zeros(1, np.int64)
    hits = np.zeros(n, np.int64)
    taker = np.full(n, -1, np.int64)
    _take_in_turn(workers, counter, hits, taker)
    assert np.all(hits == 1) and counter[0] == n + workers
    assert taker.min() >= 0 and taker.max() < workers
