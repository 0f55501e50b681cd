"""Split search on the GPU, with the same float64 operations in the same order as
`histboost.kernels.cpu.split` (products rounded on their own, see `_common.mul`), so the same
integer histograms give the same gains, bit for bit, on both engines.

`BEST_SPLIT`: one block per (node, feature); its threads take one bin each, a block-wide
prefix sum (integers: exact in any order, and equal to the CPU's running float sums, whose
partial sums of power-of-two multiples are exact too) gives every candidate's left sums at
once, and a block reduction picks the best (highest gain; ties to the missing-right pass, then
the lowest bin: the CPU's scan order, whatever the tile width). The last block of a node to
finish (a counter per node) reduces the node's per-feature bests with all its threads (the
highest gain, the lowest feature wins ties, as on the CPU), so one small array of records is
all the host reads. Given lists of features per node (sparse data: the features a node
stores), a node's blocks take the listed features grid-stride instead, each block keeping its
first best, and the last block reduces the blocks' bests. `NARROW_BEST_SPLIT` is the same
kernel with a warp a block, for features of few bins.

Monotone constraints are a flag of the same kernels (`constrained`), which then compute what
the CPU's constrained searches compute: weights clipped to the node's bounds [lower, upper],
gains at the clipped weights (the parent's too), candidates whose children's weights go against
the feature's constraint rejected (`histboost.kernels.cpu.split`'s helpers, compiled for the
device). Without the flag they compute the CPU's unconstrained searches (closed-form gain).

Histograms are the backend's pool, int64 (slots, total_bins, C); the kernels take each node's
slot and, for a sibling still to be made by subtraction, the slot of its built sibling: they
subtract it in place first (each (node, feature) its own slots), so a subtraction costs no
launch of its own. A slot's float value is the integer times the channel's power-of-two scale
(exact).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..cpu import split as cpu_split
from ..cpu.split import (
    P_ALPHA,
    P_LAMBDA,
    P_MCW,
    P_MDS,
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_C,
    REC_LEFT_G,
    REC_LEFT_H,
)
from ..launch import CudaKernel, simulated
from ._common import block_scan, mul

# no products that could fuse: the CPU functions themselves, compiled for the device
_leaf_weight = cuda.jit(device=True, inline=True)(cpu_split.leaf_weight.py_func)
_child_ok = cuda.jit(device=True, inline=True)(cpu_split._child_ok.py_func)
_clip = cuda.jit(device=True, inline=True)(cpu_split.clip.py_func)
_breaks_direction = cuda.jit(device=True, inline=True)(cpu_split.breaks_direction.py_func)


@cuda.jit(device=True, inline=True)
def _gain_given_weight(G, H, w, reg):
    """`cpu_split.gain_given_weight` with every product rounded on its own."""
    if H < reg[P_MCW] or H <= 0.0:
        return 0.0
    return -(mul(mul(2.0, G), w) + mul(mul(H + reg[P_LAMBDA], w), w)
             + mul(mul(2.0, reg[P_ALPHA]), abs(w)))


@cuda.jit(device=True, inline=True)
def _node_gain(G, H, reg):
    return _gain_given_weight(G, H, _leaf_weight(G, H, reg), reg)


@cuda.jit(device=True, inline=True)
def _clipped_gain(G, H, reg, lo, hi):
    """The loss reduction of the weight at sums (G, H) clipped to [lo, hi]."""
    return _gain_given_weight(G, H, _clip(_leaf_weight(G, H, reg), lo, hi), reg)


@cuda.jit(device=True, inline=True)
def _pair_gain(gl, hl, gr, hr, reg, plain):
    if plain:
        lam = reg[P_LAMBDA]
        return mul(gl, gl) / (hl + lam) + mul(gr, gr) / (hr + lam)
    return _node_gain(gl, hl, reg) + _node_gain(gr, hr, reg)


@cuda.jit(device=True, inline=True)
def _value(hists, k, slot, channel, scale):
    return mul(np.float64(hists[k, slot, channel]), scale)


@cuda.jit(device=True, inline=True)
def _settle(pool, nodes, k, f, offsets, first, step):
    """A pending subtraction of node k (nodes[k, 1] >= 0: the built sibling's slot) on
    feature f's slots: pool[slot] -= pool[sibling], values first, first + step, ..."""
    sibling = nodes[k, 1]
    if sibling >= 0:
        slot = nodes[k, 0]
        o = offsets[f]
        channels = pool.shape[2]
        for i in range(first, (offsets[f + 1] - o) * channels, step):
            s = o + i // channels
            ch = i % channels
            pool[slot, s, ch] -= pool[sibling, s, ch]


# threads of a split-search block, one bin each (a feature's bins are scanned in tiles of this
# many); under the simulator, which runs every thread as a Python thread, 8: fewer threads
# to wait for at each barrier, and the tests' features of up to 12 slots take two tiles
SPLIT_THREADS = 8 if simulated() else 256
# a warp a block, for features of few bins (sparse data's: 6 slots a feature on average at
# 100k columns, where a block of 256 threads would mostly idle at its barriers); under the
# simulator 4: three tiles of the tests' widest features, a tiling other than the CPU's and
# the 8-thread kernel's (the record is the same for any tile width)
NARROW_SPLIT_THREADS = 4 if simulated() else 32


def _make_best_split(threads: int):
    """The split search kernel (`BEST_SPLIT`) with blocks of `threads` threads (a power of
    two, compiled in)."""

    @cuda.jit(device=True, inline=True)
    def _block_argmax(gains, keys, where, t):
        """gains[0], where[0] = the block's highest gain and its entry's position, ties to the
        lowest key (keys may be `where` itself); every thread has written its entries, behind a
        barrier, before the call. gains float64 (threads,), keys and where (threads,)."""
        width = threads // 2
        while width > 0:
            if t < width:
                c = gains[t + width]
                if c > gains[t] or (c == gains[t] and keys[t + width] < keys[t]):
                    gains[t] = c
                    keys[t] = keys[t + width]
                    where[t] = where[t + width]
            cuda.syncthreads()
            width //= 2

    @cuda.jit(device=True, inline=True)
    def _feature_best(hists, g_scale, h_scale, k, slot, f, totals, offsets, feature_masks, reg,
                      constrained, monotone, lower, upper, rec):
        """rec = the best split of node k (histogram in pool slot `slot`) on feature f, by the
        block's threads (see `_best_split_per_feature`)."""
        t = cuda.threadIdx.x
        sg = cuda.shared.array(threads, np.int64)
        sh = cuda.shared.array(threads, np.int64)
        sc = cuda.shared.array(threads, np.int64)
        gains = cuda.shared.array(threads, np.float64)
        where = cuda.shared.array(threads, np.int32)
        best = cuda.shared.array(8, np.float64)  # gain, bin, missing-left, gl, hl, cl, found
        if t == 0:
            for i in range(rec.shape[0]):
                rec[i] = 0.0
            rec[REC_FEATURE] = -1.0
            best[0] = 0.0
            best[6] = 0.0
        if feature_masks[k, f] == 0:
            return
        G = totals[k, 0]
        H = totals[k, 1]
        C = totals[k, 2]
        lo = lower[k]
        hi = upper[k]
        cons = monotone[f]
        parent = _clipped_gain(G, H, reg, lo, hi) if constrained else _node_gain(G, H, reg)
        cph = C / H if H > 0.0 else 0.0
        plain = reg[P_ALPHA] == 0.0 and reg[P_MDS] == 0.0
        counted = hists.shape[2] == 3
        o = offsets[f]
        n_value_bins = offsets[f + 1] - o - 1
        miss = o + n_value_bins
        mg_i = hists[slot, miss, 0]
        mh_i = hists[slot, miss, 1]
        mc_i = hists[slot, miss, 2] if counted else np.int64(0)
        mg = mul(np.float64(mg_i), g_scale)
        mh = mul(np.float64(mh_i), h_scale)
        mc = np.float64(mc_i) if counted else mul(mh, cph)
        has_missing = mc > 0.0 or mh > 0.0 or mg != 0.0
        for miss_left in range(2 if has_missing else 1):
            cg = mg_i if miss_left else np.int64(0)
            ch = mh_i if miss_left else np.int64(0)
            cc = mc_i if miss_left else np.int64(0)
            last = n_value_bins - 1 if (miss_left or not has_missing) else n_value_bins
            for tile in range(0, last, threads):
                b = tile + t
                inside = b < last
                sg[t] = hists[slot, o + b, 0] if inside else np.int64(0)
                sh[t] = hists[slot, o + b, 1] if inside else np.int64(0)
                sc[t] = hists[slot, o + b, 2] if (inside and counted) else np.int64(0)
                cuda.syncthreads()
                block_scan(sg, t, threads)
                block_scan(sh, t, threads)
                if counted:
                    block_scan(sc, t, threads)
                gain = -np.inf
                if inside:
                    gl = mul(np.float64(cg + sg[t]), g_scale)
                    hl = mul(np.float64(ch + sh[t]), h_scale)
                    cl = np.float64(cc + sc[t]) if counted else mul(hl, cph)
                    gr = G - gl
                    hr = H - hl
                    cr = C - cl
                    if _child_ok(hl, cl, reg) and _child_ok(hr, cr, reg):
                        if not constrained:
                            gain = _pair_gain(gl, hl, gr, hr, reg, plain) - parent
                        else:
                            wl = _clip(_leaf_weight(gl, hl, reg), lo, hi)
                            wr = _clip(_leaf_weight(gr, hr, reg), lo, hi)
                            if not _breaks_direction(cons, wl, wr):
                                gain = (_gain_given_weight(gl, hl, wl, reg)
                                        + _gain_given_weight(gr, hr, wr, reg) - parent)
                gains[t] = gain
                where[t] = t
                cuda.syncthreads()
                _block_argmax(gains, where, where, t)  # ties to the lowest bin
                if t == 0 and gains[0] > best[0]:  # strictly better than earlier tiles / pass
                    w = where[0]
                    best[0] = gains[0]
                    best[1] = tile + w
                    best[2] = miss_left
                    best[3] = mul(np.float64(cg + sg[w]), g_scale)
                    best[4] = mul(np.float64(ch + sh[w]), h_scale)
                    best[5] = (np.float64(cc + sc[w]) if counted else mul(best[4], cph))
                    best[6] = 1.0
                cg += sg[threads - 1]
                ch += sh[threads - 1]
                cc += sc[threads - 1]
                cuda.syncthreads()
        if t == 0 and best[6] > 0.0:
            hl = best[4]
            rec[REC_GAIN] = best[0]
            rec[REC_FEATURE] = f
            rec[REC_BIN] = best[1]
            # with no missing values here, unseen ones go to the heavier side
            rec[REC_DEFAULT_LEFT] = 1.0 if (best[2] > 0.0 or (not has_missing and hl >= H - hl)) \
                else 0.0
            rec[REC_LEFT_G] = best[3]
            rec[REC_LEFT_H] = hl
            rec[REC_LEFT_C] = best[5]

    @cuda.jit
    def _best_split_per_feature(hists, g_scale, h_scale, nodes, totals, offsets, feature_masks,
                                reg, constrained, monotone, lower, upper, listed, n_listed, out,
                                best_out, done):
        """best_out[k] = the best split record of node k (zeros, feature -1: none): the
        highest gain, ties to the lowest feature. hists: the pool; nodes int64 (k, 2): each
        node's slot and its pending sibling's (-1: none). Searched features: listed int32
        (k, >= m) ascending with n_listed int32 (k,) (node k searches listed[k, :n_listed[k]],
        its P blocks taking list positions i = b, b + P, ... (block b), whose pending
        subtractions the caller has made), or both empty (shapes (0, 0), (0,)): every
        feature, position i = feature i, a block each (P = n_features). out float64 (k,
        >= positions, REC_WIDTH): the record of position i (block b's first best moved to
        position b); best_out[k] is picked from out[k, :min(P, positions)] by the node's last
        block to finish (done int32 (k,) zeros: its finished blocks, left zero). With
        `constrained`: monotone int32 (F,) constraint per feature, lower / upper float64 (k,)
        the nodes' weight bounds (see the module docstring). grid: k * P blocks of `threads`
        threads. A node of slot -1 is padding (a level planned on the device for at most k
        nodes): its blocks return at once."""
        n_features = offsets.shape[0] - 1
        per_node = cuda.gridDim.x // nodes.shape[0]
        k = cuda.blockIdx.x // per_node
        first = cuda.blockIdx.x % per_node
        t = cuda.threadIdx.x
        if nodes[k, 0] < 0:
            return
        every = n_listed.shape[0] == 0
        n = n_features if every else n_listed[k]
        pick = -1  # thread 0: the block's first best position so far
        top = 0.0
        for i in range(first, n, per_node):
            f = i if every else listed[k, i]
            _settle(hists, nodes, k, f, offsets, t, threads)
            cuda.syncthreads()
            _feature_best(hists, g_scale, h_scale, k, nodes[k, 0], f, totals, offsets,
                          feature_masks, reg, constrained, monotone, lower, upper, out[k, i])
            if t == 0 and (pick < 0 or out[k, i, REC_GAIN] > top):
                pick = i
                top = out[k, i, REC_GAIN]
        last = cuda.shared.array(1, np.int32)
        if t == 0:
            if pick > first:
                for j in range(out.shape[2]):
                    out[k, first, j] = out[k, pick, j]
            # the fences order this block's records (thread 0 wrote them) before the
            # counter, and the counter before the last block reads the others' records
            cuda.threadfence()
            last[0] = cuda.atomic.add(done, k, 1) == per_node - 1
        cuda.syncthreads()
        if last[0] == 0:
            return
        cuda.threadfence()
        gains = cuda.shared.array(threads, np.float64)
        features = cuda.shared.array(threads, np.float64)
        where = cuda.shared.array(threads, np.int32)
        # the blocks' bests: the highest gain, ties to the lowest feature (the CPU's scan;
        # equal gains are real splits, gain > 0, or all "none" records, which are alike)
        m = min(per_node, n)
        pick = -1
        for i in range(t, m, threads):
            if pick < 0 or out[k, i, REC_GAIN] > out[k, pick, REC_GAIN] or (
                    out[k, i, REC_GAIN] == out[k, pick, REC_GAIN]
                    and out[k, i, REC_FEATURE] < out[k, pick, REC_FEATURE]):
                pick = i
        gains[t] = out[k, pick, REC_GAIN] if pick >= 0 else -np.inf
        features[t] = out[k, pick, REC_FEATURE] if pick >= 0 else np.inf
        where[t] = pick
        cuda.syncthreads()
        _block_argmax(gains, features, where, t)
        w = where[0]
        for i in range(t, best_out.shape[1], threads):
            if w >= 0:
                best_out[k, i] = out[k, w, i]
            else:  # no feature searched: no split
                best_out[k, i] = -1.0 if i == REC_FEATURE else 0.0
        if t == 0:
            done[k] = 0

    return _best_split_per_feature


@cuda.jit
def _oblivious_node_gains(hists, g_scale, h_scale, nodes, totals, offsets, feature_mask, reg,
                          constrained, monotone, lower, upper, out, unordered):
    """out[k, slot, d] = gain of candidate (slot, missing-left d) in node k, -inf where it is
    not a valid split of the node (out is filled with -inf by the caller). With
    `constrained` (arguments as in `_best_split_per_feature`): gains at the clipped weights,
    and unordered[slot, d] = 1 (zeros from the caller) where the candidate's clipped weights
    in node k go against the feature's constraint, valid split there or not. hists, nodes: as
    in `_best_split_per_feature`. One thread per (node, feature)."""
    t = cuda.grid(1)
    n_features = offsets.shape[0] - 1
    if t >= nodes.shape[0] * n_features:
        return
    k = t // n_features
    f = t % n_features
    _settle(hists, nodes, k, f, offsets, 0, 1)
    slot = nodes[k, 0]
    if feature_mask[f] == 0:
        return
    G = totals[k, 0]
    H = totals[k, 1]
    C = totals[k, 2]
    counted = hists.shape[2] == 3
    cph = C / H if H > 0.0 else 0.0
    lo = lower[k]
    hi = upper[k]
    cons = monotone[f]
    o = offsets[f]
    nvb = offsets[f + 1] - o - 1
    for d in range(2):
        gl = _value(hists, slot, o + nvb, 0, g_scale) if d == 1 else 0.0
        hl = _value(hists, slot, o + nvb, 1, h_scale) if d == 1 else 0.0
        cl = 0.0
        if counted and d == 1:
            cl = np.float64(hists[slot, o + nvb, 2])
        for b in range(nvb):
            gl += _value(hists, slot, o + b, 0, g_scale)
            hl += _value(hists, slot, o + b, 1, h_scale)
            if counted:
                cl += np.float64(hists[slot, o + b, 2])
            wl = 0.0
            wr = 0.0
            if constrained:
                wl = _clip(_leaf_weight(gl, hl, reg), lo, hi)
                wr = _clip(_leaf_weight(G - gl, H - hl, reg), lo, hi)
                if _breaks_direction(cons, wl, wr):
                    unordered[o + b, d] = 1  # the same value from any thread
            c_left = cl if counted else mul(hl, cph)
            if not (_child_ok(hl, c_left, reg) and _child_ok(H - hl, C - c_left, reg)):
                continue
            if constrained:
                out[k, o + b, d] = (_gain_given_weight(gl, hl, wl, reg)
                                    + _gain_given_weight(G - gl, H - hl, wr, reg)
                                    - _clipped_gain(G, H, reg, lo, hi))
            else:
                out[k, o + b, d] = (_node_gain(gl, hl, reg)
                                    + _node_gain(G - gl, H - hl, reg) - _node_gain(G, H, reg))


@cuda.jit
def _sum_over_nodes(node_gains, unordered, out):
    """out[slot, d] = sum over nodes, in node order, of the valid gains; -inf if none, or if
    unordered[slot, d] (a monotone constraint broken in some node)."""
    t = cuda.grid(1)
    n_slots = node_gains.shape[1]
    if t >= n_slots * 2:
        return
    slot = t // 2
    d = t % 2
    total = 0.0
    any_valid = False
    for k in range(node_gains.shape[0]):
        v = node_gains[k, slot, d]
        if v != -np.inf:
            total += v
            any_valid = True
    out[slot, d] = total if (any_valid and unordered[slot, d] == 0) else -np.inf


_H = ("int64", 3)
# constrained, monotone, lower, upper
_BOUNDS = ("boolean", ("int32", 1), ("float64", 1), ("float64", 1))
_SEARCH = (_H, "float64", "float64", ("int64", 2), ("float64", 2), ("int64", 1), ("uint8", 2),
           ("float64", 1), *_BOUNDS, ("int32", 2), ("int32", 1), ("float64", 3),
           ("float64", 2), ("int32", 1))
BEST_SPLIT = CudaKernel(_make_best_split(SPLIT_THREADS), _SEARCH)
NARROW_BEST_SPLIT = CudaKernel(_make_best_split(NARROW_SPLIT_THREADS), _SEARCH)
OBLIVIOUS_NODE_GAINS = CudaKernel(_oblivious_node_gains,
                                  (_H, "float64", "float64", ("int64", 2), ("float64", 2),
                                   ("int64", 1),
                                   ("uint8", 1), ("float64", 1), *_BOUNDS, ("float64", 3),
                                   ("uint8", 2)))
SUM_OVER_NODES = CudaKernel(_sum_over_nodes, (("float64", 3), ("uint8", 2), ("float64", 2)))
KERNELS = (BEST_SPLIT, NARROW_BEST_SPLIT, OBLIVIOUS_NODE_GAINS, SUM_OVER_NODES)
