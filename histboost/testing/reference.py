"""Float64 NumPy re-implementations of one boosting round, written for clarity, not speed, and
sharing no code with the kernels: histograms summed row by row, every split candidate scored
from its own row sums, trees grown recursively.

A split candidate is (feature f, bin b, missing-left d): rows with a value bin <= b go left,
rows in the missing slot go left iff d. Gains use XGBoost's convention (no factor 1/2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Reg:
    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    min_child_weight: float = 1.0
    min_data_in_leaf: int = 0
    max_delta_step: float = 0.0


def weight(G: float, H: float, reg: Reg) -> float:
    """Optimal leaf weight -sign(G) max(|G| - alpha, 0) / (H + lambda), clipped."""
    if H < reg.min_child_weight or H <= 0:
        return 0.0
    t = np.sign(G) * max(abs(G) - reg.reg_alpha, 0.0)
    w = -t / (H + reg.reg_lambda)
    if reg.max_delta_step > 0:
        w = float(np.clip(w, -reg.max_delta_step, reg.max_delta_step))
    return float(w)


def reduction_at(G: float, H: float, w: float, reg: Reg) -> float:
    """-2 * (loss at weight w); 0 when H is below min_child_weight."""
    if H < reg.min_child_weight or H <= 0:
        return 0.0
    return -(2 * G * w + (H + reg.reg_lambda) * w * w + 2 * reg.reg_alpha * abs(w))


def objective_reduction(G: float, H: float, reg: Reg) -> float:
    """-2 * (loss at the optimal weight): G^2/(H+lambda) without L1 and clipping."""
    return reduction_at(G, H, weight(G, H, reg), reg)


def histogram(bins: np.ndarray, g: np.ndarray, h: np.ndarray, rows: np.ndarray,
              n_slots: np.ndarray) -> list[np.ndarray]:
    """Per feature a float64 (n_slots[f], 3) array of (sum g, sum h, count) over `rows`."""
    out = []
    for f in range(bins.shape[1]):
        hist = np.zeros((int(n_slots[f]), 3))
        for r in rows:
            b = int(bins[r, f])
            hist[b] += (g[r], h[r], 1.0)
        out.append(hist)
    return out


def _partitions(bins: np.ndarray, rows: np.ndarray, n_slots: np.ndarray):
    """Yield (f, b, d, left_rows, right_rows) for every candidate of the node `rows`."""
    for f in range(bins.shape[1]):
        col = bins[rows, f].astype(np.int64)
        missing = col == int(n_slots[f]) - 1
        for b in range(int(n_slots[f]) - 1):
            for d in (0, 1):
                left = np.where(missing, d == 1, col <= b)
                yield f, b, d, rows[left], rows[~left]


def _valid(lr: np.ndarray, rr: np.ndarray, hl: float, hr: float, reg: Reg) -> bool:
    return (lr.size > 0 and rr.size > 0 and min(lr.size, rr.size) >= reg.min_data_in_leaf
            and all(x >= reg.min_child_weight and x > 0 for x in (hl, hr)))


def split_candidates(bins: np.ndarray, g: np.ndarray, h: np.ndarray, rows: np.ndarray,
                     n_slots: np.ndarray, reg: Reg):
    """Yield (gain, f, b, d, left_rows) for every valid candidate of the node `rows`."""
    G, H = g[rows].sum(), h[rows].sum()
    parent = objective_reduction(G, H, reg)
    for f, b, d, lr, rr in _partitions(bins, rows, n_slots):
        gl, hl, gr, hr = g[lr].sum(), h[lr].sum(), g[rr].sum(), h[rr].sum()
        if not _valid(lr, rr, hl, hr, reg):
            continue
        gain = objective_reduction(gl, hl, reg) + objective_reduction(gr, hr, reg) - parent
        yield gain, f, b, d, lr


def monotone_candidates(bins: np.ndarray, g: np.ndarray, h: np.ndarray, rows: np.ndarray,
                        n_slots: np.ndarray, reg: Reg, constraint: np.ndarray, lower: float,
                        upper: float):
    """Yield (gain, f, b, d, ordered) for every candidate of the node `rows` under monotone
    constraints (XGBoost's): weights are clipped to the node's bounds [lower, upper], the gain
    is taken at the clipped weights (the parent's too; -inf when the candidate is not a valid
    split), and `ordered` says whether the children's clipped weights go the way of the
    feature's constraint (+1: left <= right, -1: left >= right, 0: either)."""
    def clipped(G: float, H: float) -> float:
        return min(max(weight(G, H, reg), lower), upper)

    G, H = g[rows].sum(), h[rows].sum()
    parent = reduction_at(G, H, clipped(G, H), reg)
    for f, b, d, lr, rr in _partitions(bins, rows, n_slots):
        gl, hl, gr, hr = g[lr].sum(), h[lr].sum(), g[rr].sum(), h[rr].sum()
        wl, wr = clipped(gl, hl), clipped(gr, hr)
        c = int(constraint[f])
        ordered = c == 0 or (wl <= wr if c > 0 else wl >= wr)
        gain = (reduction_at(gl, hl, wl, reg) + reduction_at(gr, hr, wr, reg) - parent
                if _valid(lr, rr, hl, hr, reg) else -np.inf)
        yield gain, f, b, d, ordered


def best_split(bins, g, h, rows, n_slots, reg: Reg) -> tuple[float, int, int, int]:
    """Brute-force best (gain, feature, bin, missing-left) of a node; (0, -1, -1, -1) if none
    has a positive gain."""
    best = (0.0, -1, -1, -1)
    for gain, f, b, d, _ in split_candidates(bins, g, h, rows, n_slots, reg):
        if gain > best[0]:
            best = (gain, f, b, d)
    return best


def split_gain(bins, g, h, rows, n_slots, reg: Reg, f: int, b: int, d: int) -> float:
    """Gain of one given candidate (-inf if it is not a valid split)."""
    for gain, ff, bb, dd, _ in split_candidates(bins, g, h, rows, n_slots, reg):
        if (ff, bb, dd) == (f, b, d):
            return gain
    return -np.inf


def grow_depthwise(bins, g, h, n_slots, reg: Reg, max_depth: int, learning_rate: float,
                   min_gain: float = 1e-6) -> np.ndarray:
    """Grow a depth-wise tree by brute force; return float64 (n,) leaf value of every row."""
    out = np.zeros(bins.shape[0])

    def rec(rows: np.ndarray, depth: int) -> None:
        if depth < max_depth:
            gain, f, b, d = best_split(bins, g, h, rows, n_slots, reg)
            if gain > min_gain:
                col = bins[rows, f].astype(np.int64)
                missing = col == int(n_slots[f]) - 1
                left = np.where(missing, d == 1, col <= b)
                rec(rows[left], depth + 1)
                rec(rows[~left], depth + 1)
                return
        out[rows] = learning_rate * weight(g[rows].sum(), h[rows].sum(), reg)

    rec(np.arange(bins.shape[0]), 0)
    return out
