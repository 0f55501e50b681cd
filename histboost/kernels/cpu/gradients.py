"""Gradient/hessian pairs of the built-in losses, written straight into the float32 (n, 2)
layout the histogram kernels read (one pass, no float64 temporaries)."""

from __future__ import annotations

import math

import numba as nb

HESS_FLOOR = 1e-16  # keeps hessians positive where probabilities saturate


@nb.njit(cache=True, inline="always")
def _sigmoid(x):
    """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below (no overflow either way),
    both from e = exp(-|x|) and then selected: the signs of successive margins are
    unpredictable, so a branch would mispredict, and the loop now vectorises (2x faster)."""
    e = math.exp(-abs(x))
    d = 1.0 + e
    pos = 1.0 / d
    neg = e / d
    return pos if x >= 0.0 else neg


# Each loss: the formulas of one row (inlined), a serial kernel over a row range (small
# inputs: cheap to compile, no parallel launch) and a parallel one over all rows, both from
# that body. margin: float64 (n, K); y: float64 (n,); w: float64 (n,) or None (unweighted:
# Numba compiles that case without the loads); out: float32 (K, n, 2).


@nb.njit(inline="always")
def _squared_error_row(i, margin, y, w, out):
    """out[0, i] = ((m - y) w, w)."""
    wi = 1.0 if w is None else w[i]
    out[0, i, 0] = (margin[i, 0] - y[i]) * wi
    out[0, i, 1] = wi


@nb.njit(inline="always")
def _logistic_row(i, margin, y, w, out):
    """out[0, i] = ((p - y) w, max(p (1 - p), floor) w) with p = sigmoid(margin)."""
    wi = 1.0 if w is None else w[i]
    p = _sigmoid(margin[i, 0])
    out[0, i, 0] = (p - y[i]) * wi
    # max(h, HESS_FLOOR) as Numba's `max` computes it, without compiling its overload (a
    # function of its own: 0.05 s of a first run)
    h = p * (1.0 - p)
    out[0, i, 1] = (HESS_FLOOR if HESS_FLOOR > h else h) * wi


@nb.njit(inline="always")
def _softmax_row(i, margin, y, w, out):
    """out[k, i] = ((p_k - [y == k]) w, max(2 p_k (1 - p_k), floor) w), p = softmax(margin)
    (XGBoost's hessian)."""
    K = margin.shape[1]
    mx = margin[i, 0]
    for k in range(1, K):
        mx = max(mx, margin[i, k])
    s = 0.0
    for k in range(K):
        s += math.exp(margin[i, k] - mx)
    label = int(y[i])
    wi = 1.0 if w is None else w[i]
    for k in range(K):
        p = math.exp(margin[i, k] - mx) / s
        out[k, i, 0] = (p - (1.0 if k == label else 0.0)) * wi
        out[k, i, 1] = max(2.0 * p * (1.0 - p), HESS_FLOOR) * wi


@nb.njit(cache=True, nogil=True)
def squared_error_pairs(lo, hi, margin, y, w, out):
    for i in range(lo, hi):
        _squared_error_row(i, margin, y, w, out)


@nb.njit(parallel=True, cache=True, nogil=True)
def squared_error_pairs_parallel(margin, y, w, out):
    for i in nb.prange(y.shape[0]):
        _squared_error_row(i, margin, y, w, out)


@nb.njit(cache=True, nogil=True)
def logistic_pairs(lo, hi, margin, y, w, out):
    for i in range(lo, hi):
        _logistic_row(i, margin, y, w, out)


@nb.njit(parallel=True, cache=True, nogil=True)
def logistic_pairs_parallel(margin, y, w, out):
    for i in nb.prange(y.shape[0]):
        _logistic_row(i, margin, y, w, out)


@nb.njit(cache=True, nogil=True)
def softmax_pairs(lo, hi, margin, y, w, out):
    for i in range(lo, hi):
        _softmax_row(i, margin, y, w, out)


@nb.njit(parallel=True, cache=True, nogil=True)
def softmax_pairs_parallel(margin, y, w, out):
    for i in nb.prange(y.shape[0]):
        _softmax_row(i, margin, y, w, out)


# The fused kernels of each built-in loss (`Objective.loss`): (serial over rows [lo, hi),
# parallel over all rows), with the arguments (margin, y, w, out) above.
PAIR_KERNELS = {
    "squared_error": (squared_error_pairs, squared_error_pairs_parallel),
    "logistic": (logistic_pairs, logistic_pairs_parallel),
    "softmax": (softmax_pairs, softmax_pairs_parallel),
}
