"""Tree explanation kernels: exact path-dependent TreeSHAP (Lundberg et al. 2018, Algorithm 2),
SHAP interaction values and Saabas attributions, parallel over blocks of rows.

They read node trees packed as in `histboost.explain.shap.ExplainForest` (oblivious trees
expanded into node trees): tree t owns nodes ``node_ptr[t]:node_ptr[t+1]``, children indices
local to the tree, ``left == -1`` marks a leaf, rows with ``x <= threshold`` go left and NaN
goes to the default side. Per node: ``zl``/``zr`` the fractions of the node's cover that went
left/right (the path-dependent "zero fractions"), ``mean`` the cover-weighted mean of the
node's leaves (the expectation of the tree's output below the node).

TreeSHAP is written without recursion: an explicit stack of pending children (the cold child
is pushed first so the hot child is visited first, as in the recursive original) and one
buffer of unique paths, a child's path stored right after its parent's.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_BLOCK = 64  # rows per task: the block's rows pass over every tree while it is in cache


@nb.njit(cache=True, inline="always")
def _extend(pf, pz, po, pw, off, ud, zero, one, feat):
    pf[off + ud] = feat
    pz[off + ud] = zero
    po[off + ud] = one
    pw[off + ud] = 1.0 if ud == 0 else 0.0
    for i in range(ud - 1, -1, -1):
        pw[off + i + 1] += one * pw[off + i] * (i + 1) / (ud + 1)
        pw[off + i] = zero * pw[off + i] * (ud - i) / (ud + 1)


@nb.njit(cache=True, inline="always")
def _unwind(pf, pz, po, pw, off, ud, idx):
    one = po[off + idx]
    zero = pz[off + idx]
    nxt = pw[off + ud]
    for i in range(ud - 1, -1, -1):
        if one != 0.0:
            tmp = pw[off + i]
            pw[off + i] = nxt * (ud + 1) / ((i + 1) * one)
            nxt = tmp - pw[off + i] * zero * (ud - i) / (ud + 1)
        else:
            pw[off + i] = pw[off + i] * (ud + 1) / (zero * (ud - i))
    for i in range(idx, ud):
        pf[off + i] = pf[off + i + 1]
        pz[off + i] = pz[off + i + 1]
        po[off + i] = po[off + i + 1]


@nb.njit(cache=True, inline="always")
def _unwound_sum(pz, po, pw, off, ud, idx):
    one = po[off + idx]
    zero = pz[off + idx]
    nxt = pw[off + ud]
    total = 0.0
    for i in range(ud - 1, -1, -1):
        if one != 0.0:
            tmp = nxt * (ud + 1) / ((i + 1) * one)
            total += tmp
            nxt = pw[off + i] - tmp * zero * (ud - i) / (ud + 1)
        else:
            total += pw[off + i] / zero * (ud + 1) / (ud - i)
    return total


@nb.njit(cache=True, inline="always")
def _hot_is_left(v, thr, dl):
    if np.isnan(v):
        return dl != 0
    return v <= thr


@nb.njit(cache=True)
def _tree_shap(x, base, left, right, feature, threshold, default_left, value, zl, zr, phi,
               pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, condition,
               cond_feature):
    """phi[f] += SHAP value of feature f for row x in the tree whose nodes start at `base`
    (the bias is not added here). condition 0: plain SHAP values; +1 / -1: with
    `cond_feature` always present / always absent (for interaction values)."""
    s_node[0] = 0
    s_ud[0] = 0
    s_off[0] = 0
    s_z[0] = 1.0
    s_o[0] = 1.0
    s_f[0] = -1
    s_cf[0] = 1.0
    sp = 1
    while sp > 0:
        sp -= 1
        node = s_node[sp]
        ud = s_ud[sp]
        poff = s_off[sp]
        cf = s_cf[sp]
        pfeat = s_f[sp]
        off = poff + ud + 1
        for k in range(ud + 1):
            pf[off + k] = pf[poff + k]
            pz[off + k] = pz[poff + k]
            po[off + k] = po[poff + k]
            pw[off + k] = pw[poff + k]
        if condition == 0 or cond_feature != pfeat:
            _extend(pf, pz, po, pw, off, ud, s_z[sp], s_o[sp], pfeat)
        g = base + node
        if left[g] == -1:
            v = value[g] * cf
            for i in range(1, ud + 1):
                w = _unwound_sum(pz, po, pw, off, ud, i)
                phi[pf[off + i]] += w * (po[off + i] - pz[off + i]) * v
            continue
        f = feature[g]
        if _hot_is_left(x[f], threshold[g], default_left[g]):
            hot = left[g]
            cold = right[g]
            hz = zl[g]
            cz = zr[g]
        else:
            hot = right[g]
            cold = left[g]
            hz = zr[g]
            cz = zl[g]
        iz = 1.0
        io = 1.0
        pidx = 0
        while pidx <= ud:
            if pf[off + pidx] == f:
                break
            pidx += 1
        if pidx != ud + 1:
            iz = pz[off + pidx]
            io = po[off + pidx]
            _unwind(pf, pz, po, pw, off, ud, pidx)
            ud -= 1
        hcf = cf
        ccf = cf
        if condition > 0 and f == cond_feature:
            ccf = 0.0
            ud -= 1
        elif condition < 0 and f == cond_feature:
            hcf *= hz
            ccf *= cz
            ud -= 1
        # a child that no subset of features can reach (no cover, not on x's path) adds nothing
        cz_in = cz * iz
        if ccf != 0.0 and cz_in != 0.0:
            s_node[sp] = cold
            s_ud[sp] = ud + 1
            s_off[sp] = off
            s_z[sp] = cz_in
            s_o[sp] = 0.0
            s_f[sp] = f
            s_cf[sp] = ccf
            sp += 1
        if hcf != 0.0 and (hz * iz != 0.0 or io != 0.0):
            s_node[sp] = hot
            s_ud[sp] = ud + 1
            s_off[sp] = off
            s_z[sp] = hz * iz
            s_o[sp] = io
            s_f[sp] = f
            s_cf[sp] = hcf
            sp += 1


@nb.njit(cache=True)
def _scratch(max_depth):
    size = (max_depth + 3) * (max_depth + 4) // 2 + 2
    ssize = 2 * max_depth + 4
    return (np.empty(size, np.int32), np.empty(size), np.empty(size), np.empty(size),
            np.empty(ssize, np.int64), np.empty(ssize, np.int64), np.empty(ssize, np.int64),
            np.empty(ssize), np.empty(ssize), np.empty(ssize, np.int32), np.empty(ssize))


@nb.njit(parallel=True, cache=True, nogil=True)
def shap_values(X, tree_begin, tree_end, tree_class, node_ptr, left, right, feature, threshold,
                default_left, value, zl, zr, mean, max_depth, bias, out):
    """out[i, c, :F] = SHAP values of row i for output c over trees [tree_begin, tree_end);
    out[i, c, F] = bias[i, c] + the trees' expected values. out: float32 (n, K, F+1)."""
    n = X.shape[0]
    k = out.shape[1]
    m = out.shape[2]
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for blk in nb.prange(n_blocks):
        r0 = blk * _BLOCK
        r1 = min(n, r0 + _BLOCK)
        acc = np.zeros((r1 - r0, k, m))
        pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf = _scratch(max_depth)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            base = node_ptr[t]
            for i in range(r0, r1):
                phi = acc[i - r0, c]
                phi[m - 1] += mean[base]
                _tree_shap(X[i], base, left, right, feature, threshold, default_left, value,
                           zl, zr, phi, pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f,
                           s_cf, 0, -1)
        for i in range(r0, r1):
            for c in range(k):
                acc[i - r0, c, m - 1] += bias[i, c]
                for j in range(m):
                    out[i, c, j] = acc[i - r0, c, j]


@nb.njit(parallel=True, cache=True, nogil=True)
def shap_interactions(X, tree_begin, tree_end, tree_class, node_ptr, left, right, feature,
                      threshold, default_left, value, zl, zr, mean, max_depth, feat_ptr,
                      tree_feats, bias, out):
    """SHAP interaction values as XGBoost defines them: for i != j, out[r, c, i, j] = half the
    change of feature j's SHAP value between i always present and i always absent; the
    diagonal is the SHAP value of i minus its row's off-diagonal sum, so a row of the matrix
    sums to the SHAP value; out[r, c, F, F] = the bias. ``tree_feats[feat_ptr[t]:feat_ptr[t+1]]``
    are the distinct features that tree t splits on. out: float32 (n, K, F+1, F+1)."""
    n = X.shape[0]
    k = out.shape[1]
    m = out.shape[2]
    for i in nb.prange(n):
        acc = np.zeros((k, m, m))
        phi = np.zeros((k, m))
        on = np.zeros(m)
        off = np.zeros(m)
        pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf = _scratch(max_depth)
        x = X[i]
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            base = node_ptr[t]
            phi[c, m - 1] += mean[base]
            _tree_shap(x, base, left, right, feature, threshold, default_left, value, zl, zr,
                       phi[c], pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, 0, -1)
            for a in range(feat_ptr[t], feat_ptr[t + 1]):
                fi = tree_feats[a]
                _tree_shap(x, base, left, right, feature, threshold, default_left, value, zl,
                           zr, on, pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, 1,
                           fi)
                _tree_shap(x, base, left, right, feature, threshold, default_left, value, zl,
                           zr, off, pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf,
                           -1, fi)
                for b in range(feat_ptr[t], feat_ptr[t + 1]):
                    fj = tree_feats[b]
                    if fj != fi:
                        acc[c, fi, fj] += (on[fj] - off[fj]) / 2.0
                    on[fj] = 0.0
                    off[fj] = 0.0
        for c in range(k):
            phi[c, m - 1] += bias[i, c]
            for a in range(m):
                s = 0.0
                for b in range(m):
                    if b != a:
                        s += acc[c, a, b]
                acc[c, a, a] = phi[c, a] - s
                for b in range(m):
                    out[i, c, a, b] = acc[c, a, b]


@nb.njit(parallel=True, cache=True, nogil=True)
def saabas_values(X, tree_begin, tree_end, tree_class, node_ptr, left, right, feature,
                  threshold, default_left, value, mean, bias, out):
    """Saabas attributions (XGBoost's approx_contribs): along the row's path, each split's
    feature gets the change of the expected value from the node to the child taken; the
    bias column gets bias[i, c] + the trees' expected values. out: float32 (n, K, F+1)."""
    n = X.shape[0]
    k = out.shape[1]
    m = out.shape[2]
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for blk in nb.prange(n_blocks):
        r0 = blk * _BLOCK
        r1 = min(n, r0 + _BLOCK)
        acc = np.zeros((r1 - r0, k, m))
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            base = node_ptr[t]
            for i in range(r0, r1):
                phi = acc[i - r0, c]
                node = 0
                cur = mean[base]
                phi[m - 1] += cur
                while left[base + node] != -1:
                    g = base + node
                    f = feature[g]
                    if _hot_is_left(X[i, f], threshold[g], default_left[g]):
                        node = left[g]
                    else:
                        node = right[g]
                    nxt = mean[base + node]
                    phi[f] += nxt - cur
                    cur = nxt
        for i in range(r0, r1):
            for c in range(k):
                acc[i - r0, c, m - 1] += bias[i, c]
                for j in range(m):
                    out[i, c, j] = acc[i - r0, c, j]
