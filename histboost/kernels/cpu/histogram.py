"""Gradient histograms.

A histogram is a (total_bins, 3) array: for every (feature, bin) slot the sums of gradient,
hessian and row count over the node's rows. Feature f owns rows ``offsets[f]:offsets[f+1]`` and
its last slot counts missing values. dtype float64 for float gradients, int64 for quantised
gradients (then sums are exact and independent of summation order).
"""

from __future__ import annotations

import numba as nb


@nb.njit(cache=True, nogil=True)
def _accumulate(bins, gh, rows, start, end, offsets, hist):
    n_features = bins.shape[1]
    for k in range(start, end):
        r = rows[k]
        g = gh[r, 0]
        h = gh[r, 1]
        for f in range(n_features):
            idx = offsets[f] + bins[r, f]
            hist[idx, 0] += g
            hist[idx, 1] += h
            hist[idx, 2] += 1


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histograms(bins, gh, rows, starts, ends, offsets, out):
    """One histogram per node, nodes in parallel.

    bins: (n, F) uint8/uint16; gh: (n, 2) float32 or int32 gradient/hessian pairs; rows: int32
    row indices, node k owning ``rows[starts[k]:ends[k]]``; offsets: int64 (F+1,);
    out: (k, total_bins, 3) float64 or int64, overwritten.
    """
    for k in nb.prange(starts.shape[0]):
        h = out[k]
        h[:] = 0
        _accumulate(bins, gh, rows, starts[k], ends[k], offsets, h)


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histogram_chunked(bins, gh, rows, start, end, offsets, buffers, out):
    """One histogram of a large node, its rows split into ``buffers.shape[0]`` chunks built in
    parallel and then summed in chunk order (a fixed order, so float results repeat run to run
    for a given thread count).

    buffers: (n_chunks, total_bins, 3) scratch of out's dtype; out: (total_bins, 3).
    """
    n_chunks = buffers.shape[0]
    n = end - start
    for c in nb.prange(n_chunks):
        b = buffers[c]
        b[:] = 0
        _accumulate(bins, gh, rows, start + n * c // n_chunks, start + n * (c + 1) // n_chunks,
                    offsets, b)
    for i in nb.prange(out.shape[0]):
        for j in range(3):
            acc = buffers[0, i, j]
            for c in range(1, n_chunks):
                acc += buffers[c, i, j]
            out[i, j] = acc


@nb.njit(parallel=True, cache=True, nogil=True)
def subtract_histograms(parents, children, out):
    """out[k] = parents[k] - children[k] (sibling by subtraction); all (k, total_bins, 3)."""
    for k in nb.prange(parents.shape[0]):
        for i in range(parents.shape[1]):
            for j in range(3):
                out[k, i, j] = parents[k, i, j] - children[k, i, j]
