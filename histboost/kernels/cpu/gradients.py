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


@nb.njit(cache=True, nogil=True)
def squared_error_pairs(lo, hi, margin, y, w, out):
    """out[0, i] = ((m - y) w, w) for rows i in [lo, hi) (`run_ranges`). margin: float64
    (n, 1); y: float64 (n,); w: float64 (n,) or None (unweighted: Numba compiles that case
    without the loads); out: float32 (1, n, 2)."""
    for i in range(lo, hi):
        wi = 1.0 if w is None else w[i]
        out[0, i, 0] = (margin[i, 0] - y[i]) * wi
        out[0, i, 1] = wi


@nb.njit(cache=True, nogil=True)
def logistic_pairs(lo, hi, margin, y, w, out):
    """out[0, i] = ((p - y) w, max(p (1 - p), floor) w) with p = sigmoid(margin)."""
    for i in range(lo, hi):
        wi = 1.0 if w is None else w[i]
        p = _sigmoid(margin[i, 0])
        out[0, i, 0] = (p - y[i]) * wi
        out[0, i, 1] = max(p * (1.0 - p), HESS_FLOOR) * wi


@nb.njit(cache=True, nogil=True)
def softmax_pairs(lo, hi, margin, y, w, out):
    """out[k, i] = ((p_k - [y == k]) w, max(2 p_k (1 - p_k), floor) w), p = softmax(margin)
    (XGBoost's hessian). margin: float64 (n, K); out: float32 (K, n, 2)."""
    K = margin.shape[1]
    for i in range(lo, hi):
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


# The fused kernel of each built-in loss (`Objective.loss`), all with the signature
# (lo, hi, margin float64 (n, K), y float64 (n,), w float64 (n,) or None,
# out float32 (K, n, 2)), run over rows by `_threads.run_ranges`.
PAIR_KERNELS = {
    "squared_error": squared_error_pairs,
    "logistic": logistic_pairs,
    "softmax": softmax_pairs,
}
