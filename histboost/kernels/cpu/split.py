"""Split search over histograms (second-order gain with L1/L2, max_delta_step, gamma).

Gain of a node with gradient sum G and hessian sum H at weight w is
``-(2*G*w + (H + lambda)*w**2 + 2*alpha*|w|)`` with the optimal weight
``w = -soft_threshold(G, alpha) / (H + lambda)`` clipped to ``max_delta_step``; without clipping
this is ``soft_threshold(G, alpha)**2 / (H + lambda)`` (XGBoost's convention: no factor 1/2,
and gamma is compared with this loss change).

A split record is a float64 row: see `REC_*` below. Missing values sit in each feature's last
slot and go to the side given by default_left; both sides are tried.

Histograms are float64 (k, total_bins, C): C = 3 carries per-slot row counts, used for
`min_data_in_leaf`; with C = 2 a child's count is estimated from its hessian share of the node,
``count * H_child / H`` (only ever compared with min_data_in_leaf = 0). ``REC_LEFT_C`` holds
the count until the partition gives the exact one.
"""

from __future__ import annotations

import numba as nb
import numpy as np

# columns of a split record
REC_GAIN, REC_FEATURE, REC_BIN, REC_DEFAULT_LEFT = 0, 1, 2, 3
REC_LEFT_G, REC_LEFT_H, REC_LEFT_C = 4, 5, 6
REC_WIDTH = 7
# regularisation vector layout: lambda, alpha, max_delta_step, min_child_weight, min_data
P_LAMBDA, P_ALPHA, P_MDS, P_MCW, P_MIN_DATA = 0, 1, 2, 3, 4


@nb.njit(cache=True, inline="always")
def leaf_weight(G, H, reg):
    """Optimal (unscaled) leaf weight; 0 when H is below min_child_weight."""
    if H < reg[P_MCW] or H <= 0.0:
        return 0.0
    alpha = reg[P_ALPHA]
    if G > alpha:
        t = G - alpha
    elif G < -alpha:
        t = G + alpha
    else:
        t = 0.0
    w = -t / (H + reg[P_LAMBDA])
    mds = reg[P_MDS]
    if mds > 0.0:
        if w > mds:
            w = mds
        elif w < -mds:
            w = -mds
    return w


@nb.njit(cache=True)
def leaf_values(sums, reg, learning_rate):
    """leaf_weight(G, H, reg) * learning_rate of each row of sums float64 (n, 2) (G, H), the
    product rounded on its own: float64 (n,). The growers' values of a step's children in one
    call (a Python call of `leaf_weight.py_func` per child cost a few microseconds each)."""
    out = np.empty(sums.shape[0])
    for i in range(sums.shape[0]):
        out[i] = leaf_weight(sums[i, 0], sums[i, 1], reg) * learning_rate
    return out


@nb.njit(cache=True, inline="always")
def gain_given_weight(G, H, w, reg):
    """The loss reduction of weight w at sums (G, H); 0 when H is below min_child_weight."""
    if H < reg[P_MCW] or H <= 0.0:
        return 0.0
    return -(2.0 * G * w + (H + reg[P_LAMBDA]) * w * w + 2.0 * reg[P_ALPHA] * abs(w))


@nb.njit(cache=True, inline="always")
def node_gain(G, H, reg):
    """The loss reduction of the optimal weight at sums (G, H)."""
    return gain_given_weight(G, H, leaf_weight(G, H, reg), reg)


# monotone constraints (XGBoost's TreeEvaluator): each node has bounds [lower, upper] on its
# (unscaled) weight; every weight is clipped to its node's bounds, gains are computed at the
# clipped weights (the parent's too), and a split on a feature with constraint c != 0 needs
# w_left <= w_right (c > 0) or w_left >= w_right (c < 0). The CUDA split kernels compile these
# helpers for the device.


@nb.njit(cache=True, inline="always")
def clip(w, lo, hi):
    """w clipped to [lo, hi]."""
    if w < lo:
        return lo
    if w > hi:
        return hi
    return w


@nb.njit(cache=True, inline="always")
def breaks_direction(c, wl, wr):
    """True when the children's weights wl, wr go against constraint c (+1 needs wl <= wr,
    -1 needs wl >= wr, 0 takes any order)."""
    return (c > 0 and wl > wr) or (c < 0 and wl < wr)


@nb.njit(cache=True, inline="always")
def _child_ok(H, C, reg):
    return H >= reg[P_MCW] and H > 0.0 and C >= reg[P_MIN_DATA]


@nb.njit(cache=True, inline="always")
def _count_per_hess(C, H):
    """Rows per unit of hessian in a node (turns child hessians into count estimates)."""
    return C / H if H > 0.0 else 0.0


# called only from kernels: compiled without the wrappers that would make it callable from
# Python or as a C function pointer (0.07 s of a first run)
@nb.njit(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _best_split_feature(hist, offsets, f, G, H, C, reg, general, rec):
    """The best split of one node on feature f into rec (REC_FEATURE -1: no positive gain):
    the first of the largest gains in scan order (missing right, then missing left; bins
    ascending).

    general: None without L1, max_delta_step and monotone constraints, when the children's
    gains take the closed form G^2 / (H + lambda); else (constraint, lower, upper) float64:
    every weight (the node's too) is clipped to [lower, upper] and the gains are taken at
    the clipped weights, and a split whose children's weights go against the constraint
    (see `breaks_direction`) is skipped (`UNBOUNDED`: no constraint). A compile-time choice
    (Numba drops the branch on an argument's None type), so the common case compiles
    without the general path's code (0.5 s of its compile) and runs without its branches."""
    if general is None:
        # node_gain without L1 and max_delta_step: the same operations on the same values
        w = 0.0 if H < reg[P_MCW] or H <= 0.0 else -G / (H + reg[P_LAMBDA])
        parent = gain_given_weight(G, H, w, reg)
    else:
        c, lo, hi = general
        parent = gain_given_weight(G, H, clip(leaf_weight(G, H, reg), lo, hi), reg)
    cph = _count_per_hess(C, H)
    counted = hist.shape[1] == 3
    best = 0.0
    rec[REC_GAIN] = 0.0
    rec[REC_FEATURE] = -1.0
    o = offsets[f]
    n_value_bins = offsets[f + 1] - o - 1
    miss = o + n_value_bins
    mg = hist[miss, 0]
    mh = hist[miss, 1]
    mc = hist[miss, 2] if counted else mh * cph
    has_missing = mc > 0.0 or mh > 0.0 or mg != 0.0
    # pass 0: missing values go right, left = value bins 0..b (b may take all value bins
    # when there are missing values); pass 1: missing values go left as well
    for miss_left in range(2 if has_missing else 1):
        gl = mg if miss_left else 0.0
        hl = mh if miss_left else 0.0
        cl = mc if miss_left else 0.0
        last = n_value_bins - 1 if (miss_left or not has_missing) else n_value_bins
        for b in range(last):
            gl += hist[o + b, 0]
            hl += hist[o + b, 1]
            cl = cl + hist[o + b, 2] if counted else hl * cph
            gr = G - gl
            hr = H - hl
            cr = C - cl
            if not (_child_ok(hl, cl, reg) and _child_ok(hr, cr, reg)):
                continue
            if general is None:
                lam = reg[P_LAMBDA]
                pair = gl * gl / (hl + lam) + gr * gr / (hr + lam)
            else:
                wl = clip(leaf_weight(gl, hl, reg), lo, hi)
                wr = clip(leaf_weight(gr, hr, reg), lo, hi)
                if breaks_direction(c, wl, wr):
                    continue
                pair = gain_given_weight(gl, hl, wl, reg) + gain_given_weight(gr, hr, wr, reg)
            gain = pair - parent
            if gain > best:
                best = gain
                rec[REC_GAIN] = gain
                rec[REC_FEATURE] = f
                rec[REC_BIN] = b
                # with no missing values here, unseen ones go to the heavier side
                rec[REC_DEFAULT_LEFT] = 1.0 if (
                    miss_left or (not has_missing and hl >= hr)) else 0.0
                rec[REC_LEFT_G] = gl
                rec[REC_LEFT_H] = hl
                rec[REC_LEFT_C] = cl


def _search_items(hists, totals, offsets, feature_masks, reg, general, recs, out):
    """The body of `find_best_splits` and `find_best_splits_serial`: (node, feature) items in
    parallel (a prange is a range in the serial one), then each node's features in order.
    See `find_best_splits` for the arguments."""
    k = hists.shape[0]
    n_features = offsets.shape[0] - 1
    for j in nb.prange(k * n_features):
        node = j // n_features
        f = j - node * n_features
        if not feature_masks[node, f]:
            recs[j, REC_GAIN] = 0.0
            recs[j, REC_FEATURE] = -1.0
            continue
        # one call per branch: a `bounds` variable assigned None in one branch and a tuple
        # in the other fails the parallel kernel's array analysis (Numba 0.68)
        if general is None:
            _best_split_feature(hists[node], offsets, f, totals[node, 0], totals[node, 1],
                                totals[node, 2], reg, None, recs[j])
        else:
            constraint, lower, upper = general
            _best_split_feature(hists[node], offsets, f, totals[node, 0], totals[node, 1],
                                totals[node, 2], reg,
                                (np.int64(constraint[f]), lower[node], upper[node]), recs[j])
    # ties keep the lowest feature: a later one must gain strictly more
    for node in range(k):
        rec = out[node]
        rec[REC_GAIN] = 0.0
        rec[REC_FEATURE] = -1.0
        for f in range(n_features):
            r = recs[node * n_features + f]
            if r[REC_FEATURE] >= 0.0 and r[REC_GAIN] > rec[REC_GAIN]:
                for c in range(REC_WIDTH):
                    rec[c] = r[c]


# The parallel kernel inlines the body (its prange becomes the parallel loop); the serial
# kernel is the body itself compiled without `parallel`, where a kernel inlining it spent
# 0.1 s of a first run copying its IR. Only the serial kernel is cached under the body's name.
_search_items_inlined = nb.njit(inline="always")(_search_items)


@nb.njit(parallel=True, cache=True, nogil=True)
def find_best_splits(hists, totals, offsets, feature_masks, reg, general, recs, out):
    """Best split of each node, (node, feature) pairs in parallel.

    hists: float64 (k, total_bins, 2 or 3); totals: float64 (k, 3) node sums (G, H, count);
    offsets: int64 (F+1,); feature_masks: bool (k, F) features each node may use;
    reg: float64 (5,) see P_*; general: None for the closed-form gain (see
    `_best_split_feature`), else (constraint int8 (F,), lower float64 (k,), upper float64
    (k,)) each feature's monotone constraint (+1 increasing, -1 decreasing, 0 none) and each
    node's weight bounds (unscaled, before the learning rate); recs: float64
    (k * F, REC_WIDTH) scratch (each (node, feature) pair's best); out: float64
    (k, REC_WIDTH) split records, feature -1 when no split has a positive gain. Ties keep
    the lowest feature, then the lowest bin, then missing-right: a fixed order, so every
    worker (and thread count) picks the same split. Called through `search`.
    """
    _search_items_inlined(hists, totals, offsets, feature_masks, reg, general, recs, out)


# `find_best_splits` on the calling thread, without a parallel launch (a node's search, tens
# of microseconds, is less than waking a team of threads): the same arguments and records.
find_best_splits_serial = nb.njit(cache=True, nogil=True)(_search_items)


# `_best_split_feature`'s general argument for the general gain without monotone constraints
UNBOUNDED = (0, -np.inf, np.inf)


def gain_path(reg: np.ndarray) -> tuple[float, float, float] | None:
    """`_best_split_feature`'s general argument for regularisation reg without monotone
    constraints: None without L1 and max_delta_step (the closed-form gain), else
    `UNBOUNDED` (the general one)."""
    return None if reg[P_ALPHA] == 0.0 and reg[P_MDS] == 0.0 else UNBOUNDED


def _as_bounds(monotone: tuple) -> tuple:
    """The kernels' monotone argument from the backends' ``(constraint (F,), lower (k,),
    upper (k,))``: int8, float64, float64 contiguous arrays."""
    cons, lower, upper = monotone
    return (np.ascontiguousarray(cons, np.int8), np.ascontiguousarray(lower, np.float64),
            np.ascontiguousarray(upper, np.float64))


def search(hists: np.ndarray, totals: np.ndarray, offsets: np.ndarray,
           feature_masks: np.ndarray, reg: np.ndarray, parallel: bool,
           monotone: tuple | None = None) -> np.ndarray:
    """Split records float64 (k, REC_WIDTH) of `find_best_splits` (parallel) or
    `find_best_splits_serial`; monotone: None or the backends' ``(constraint int8 (F,),
    lower (k,), upper (k,))``. The scratch is allocated here, where it costs no compile
    time (np.empty in a kernel compiles its shape checks and error messages)."""
    k = hists.shape[0]
    n_features = offsets.shape[0] - 1
    out = np.zeros((k, REC_WIDTH), np.float64)
    recs = np.empty((k * n_features, REC_WIDTH), np.float64)
    if monotone is None and gain_path(reg) is None:
        general = None
    else:
        general = _as_bounds((np.zeros(n_features, np.int8), np.full(k, -np.inf),
                              np.full(k, np.inf)) if monotone is None else monotone)
    kernel = find_best_splits if parallel else find_best_splits_serial
    kernel(hists, np.ascontiguousarray(totals, np.float64), offsets,
           np.ascontiguousarray(feature_masks, np.bool_), reg, general, recs, out)
    return out


@nb.njit(parallel=True, cache=True, nogil=True)
def oblivious_gain_table(hists, totals, offsets, feature_mask, reg, monotone, out):
    """Summed gain over all nodes of a level for every shared split candidate.

    out: float64 (total_bins, 2); out[offsets[f] + b, d] is the gain of "bin <= b goes left"
    on feature f with missing values going right (d=0) or left (d=1), summed over the nodes
    (a node whose children would break min_child_weight / min_data_in_leaf adds 0);
    -inf where the candidate is not a split anywhere. monotone: None, or (constraint int8
    (F,), lower float64 (k,), upper float64 (k,)) as in `find_best_splits`: gains at the
    weights clipped to each node's bounds, and a candidate on a constrained feature must
    order the clipped children's weights in every node of the level, whether or not it is
    a valid split there (the shared split divides them all), else -inf. None compiles
    without the bounds' code (Numba drops the branches on an argument's None type).
    """
    n_nodes = hists.shape[0]
    n_features = offsets.shape[0] - 1
    out[:] = -np.inf
    for f in nb.prange(n_features):
        if not feature_mask[f]:
            continue
        if monotone is not None:
            constraint, lower, upper = monotone
            c = constraint[f]
        o = offsets[f]
        nvb = offsets[f + 1] - o - 1
        n_ch = hists.shape[2]
        run = np.zeros((n_nodes, n_ch))
        for d in range(2):
            for k in range(n_nodes):
                for j in range(n_ch):
                    run[k, j] = hists[k, o + nvb, j] if d == 1 else 0.0
            for b in range(nvb):
                total = 0.0
                any_valid = False
                ordered = True
                for k in range(n_nodes):
                    for j in range(n_ch):
                        run[k, j] += hists[k, o + b, j]
                    gl = run[k, 0]
                    hl = run[k, 1]
                    G = totals[k, 0]
                    H = totals[k, 1]
                    C = totals[k, 2]
                    if monotone is not None:
                        lo = lower[k]
                        hi = upper[k]
                        wl = clip(leaf_weight(gl, hl, reg), lo, hi)
                        wr = clip(leaf_weight(G - gl, H - hl, reg), lo, hi)
                        if breaks_direction(c, wl, wr):
                            ordered = False
                    cl = run[k, 2] if n_ch == 3 else hl * _count_per_hess(C, H)
                    if not (_child_ok(hl, cl, reg) and _child_ok(H - hl, C - cl, reg)):
                        continue
                    any_valid = True
                    if monotone is None:
                        total += (node_gain(gl, hl, reg) + node_gain(G - gl, H - hl, reg)
                                  - node_gain(G, H, reg))
                    else:
                        total += (gain_given_weight(gl, hl, wl, reg)
                                  + gain_given_weight(G - gl, H - hl, wr, reg)
                                  - gain_given_weight(G, H, clip(leaf_weight(G, H, reg), lo,
                                                                 hi), reg))
                if any_valid and ordered:
                    out[o + b, d] = total


def oblivious_gains(hists: np.ndarray, totals: np.ndarray, offsets: np.ndarray,
                    feature_mask: np.ndarray, reg: np.ndarray, monotone: tuple | None,
                    out: np.ndarray) -> np.ndarray:
    """`oblivious_gain_table` into out (total_bins, 2); monotone: None or the backends'
    ``(constraint int8 (F,), lower (k,), upper (k,))``."""
    oblivious_gain_table(hists, np.ascontiguousarray(totals, np.float64), offsets,
                         np.ascontiguousarray(feature_mask, np.bool_), reg,
                         None if monotone is None else _as_bounds(monotone), out)
    return out
