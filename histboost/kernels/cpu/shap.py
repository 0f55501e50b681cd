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

from .predict import raw_goes_left

_BLOCK = 64  # rows per task: the block's rows pass over every tree while it is in cache
_TBLOCK = 256  # rows per task of the leaf-table kernel: one tree's tables serve them all
_RECIP = np.concatenate((np.zeros(1), 1.0 / np.arange(1, 257)))  # 1/k: no division in loops


@nb.njit(cache=True, inline="always")
def _extend(pf, pz, po, pw, off, ud, zero, one, feat):
    pf[off + ud] = feat
    pz[off + ud] = zero
    po[off + ud] = one
    pw[off + ud] = 1.0 if ud == 0 else 0.0
    inv = _RECIP[ud + 1]
    zi = zero * inv
    oi = one * inv
    for i in range(ud - 1, -1, -1):
        p = pw[off + i]
        pw[off + i + 1] += oi * p * (i + 1)
        pw[off + i] = zi * p * (ud - i)


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
def _unwound_sum_hot(pz, pw, off, ud, idx):
    """Sum of the path weights with element `idx` (one fraction 1) unwound."""
    zero = pz[off + idx]
    nxt = pw[off + ud]
    total = 0.0
    for i in range(ud - 1, -1, -1):
        tmp = nxt * _RECIP[i + 1]
        total += tmp
        nxt = pw[off + i] - tmp * zero * (ud - i)
    return total * (ud + 1)


@nb.njit(cache=True, inline="always")
def _unwound_sum_cold_times_zero(pw, off, ud):
    """Sum of the path weights with an element of one fraction 0 unwound, times its zero
    fraction: the same for every such element."""
    total = 0.0
    for i in range(ud - 1, -1, -1):
        total += pw[off + i] * _RECIP[ud - i]
    return total * (ud + 1)


@nb.njit(cache=True)
def _tree_shap(X, r, base, left, right, feature, threshold, default_left, value, zl, zr, phi,
               pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, condition,
               cond_feature):
    """phi[f] += SHAP value of feature f for row r of X in the tree whose nodes start at `base`
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
            # one fractions are 0 or 1; every element of one fraction 0 gets the same share
            v = value[g] * cf
            cold_share = 0.0
            have_cold = False
            for i in range(1, ud + 1):
                if po[off + i] != 0.0:
                    w = _unwound_sum_hot(pz, pw, off, ud, i)
                    phi[pf[off + i]] += w * (1.0 - pz[off + i]) * v
                else:
                    if not have_cold:
                        cold_share = _unwound_sum_cold_times_zero(pw, off, ud) * v
                        have_cold = True
                    phi[pf[off + i]] -= cold_share
            continue
        f = feature[g]
        if raw_goes_left(X[r, f], threshold[g], default_left[g] != 0):
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


@nb.njit(inline="always")
def _store_block(acc, bias, r0, r1, out):
    """out[r0:r1] = a block's attributions acc (r1 - r0, K, F+1), with bias[i, c] added to
    each row's bias column (the last)."""
    m = out.shape[2]
    for i in range(r0, r1):
        for c in range(out.shape[1]):
            acc[i - r0, c, m - 1] += bias[i, c]
            for j in range(m):
                out[i, c, j] = acc[i - r0, c, j]


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
                _tree_shap(X, i, base, left, right, feature, threshold, default_left, value,
                           zl, zr, phi, pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f,
                           s_cf, 0, -1)
        _store_block(acc, bias, r0, r1, out)


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
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            base = node_ptr[t]
            phi[c, m - 1] += mean[base]
            _tree_shap(X, i, base, left, right, feature, threshold, default_left, value, zl, zr,
                       phi[c], pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, 0, -1)
            for a in range(feat_ptr[t], feat_ptr[t + 1]):
                fi = tree_feats[a]
                _tree_shap(X, i, base, left, right, feature, threshold, default_left, value, zl,
                           zr, on, pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf, 1,
                           fi)
                _tree_shap(X, i, base, left, right, feature, threshold, default_left, value, zl,
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
                    if raw_goes_left(X[i, f], threshold[g], default_left[g] != 0):
                        node = left[g]
                    else:
                        node = right[g]
                    nxt = mean[base + node]
                    phi[f] += nxt - cur
                    cur = nxt
        _store_block(acc, bias, r0, r1, out)


# -- TreeSHAP by leaf tables ----------------------------------------------------------------
# For one leaf, let P be the distinct features split on along its path (d of them), z_j the
# product of the cover fractions of the path's splits on feature j, and H the features whose
# every split on the path the row follows. The leaf's game is v(S) = value * [S ∩ P ⊆ H] *
# prod_{j in P \ S} z_j, whose Shapley values are, with
# A(H) = sum_{S ⊆ H} |S|! (d-|S|-1)! / d! * prod_{j in P \ S} z_j:
#   j in P \ H:  -value * A(H)
#   j in H:      value * (1 - z_j) / z_j * A(H \ {j})
# A depends on the row only through H: it is tabled once per leaf (2**d entries), and a row
# costs O(depth) per leaf instead of O(depth**2) (the idea of Fast TreeSHAP v2, Yang 2021).
# Leaves with a zero fraction (an empty child) fall back to the path algorithm for their tree.


@nb.njit(cache=True)
def _parents(node_ptr, left, right):
    parent = np.full(left.shape[0], -1, np.int64)
    for t in range(node_ptr.shape[0] - 1):
        base = node_ptr[t]
        for i in range(node_ptr[t + 1] - base):
            if left[base + i] != -1:
                parent[base + left[base + i]] = i
                parent[base + right[base + i]] = i
    return parent


@nb.njit(cache=True)
def _path_elements(t, leaf, node_ptr, left, feature, zl, zr, parent, feats, zs, nodes, sides,
                   elems):
    """Walk from `leaf` (local id) of tree t to the root; fill the path's splits (nodes
    local, sides 1 = left, elems its distinct-feature index) and the distinct features with
    their products of cover fractions. Returns (n_splits, n_distinct)."""
    base = node_ptr[t]
    child = leaf
    node = parent[base + leaf]
    ns = 0
    d = 0
    while node != -1:
        g = base + node
        is_left = left[g] == child
        frac = zl[g] if is_left else zr[g]
        f = feature[g]
        e = -1
        for k in range(d):
            if feats[k] == f:
                e = k
        if e == -1:
            feats[d] = f
            zs[d] = frac
            e = d
            d += 1
        else:
            zs[e] *= frac
        nodes[ns] = node
        sides[ns] = 1 if is_left else 0
        elems[ns] = e
        ns += 1
        child = node
        node = parent[g]
    return ns, d


@nb.njit(cache=True)
def leaf_layout(node_ptr, left, right, feature, zl, zr, max_depth):
    """Per leaf (all trees, in node order): its global node, its tree, its numbers of path
    splits and distinct features, and 1 if a distinct feature has z == 0."""
    parent = _parents(node_ptr, left, right)
    n_leaves = 0
    for i in range(left.shape[0]):
        if left[i] == -1:
            n_leaves += 1
    leaf_node = np.empty(n_leaves, np.int64)
    leaf_tree = np.empty(n_leaves, np.int32)
    n_split = np.empty(n_leaves, np.int64)
    n_elem = np.empty(n_leaves, np.int64)
    has_zero = np.zeros(n_leaves, np.uint8)
    feats = np.empty(max_depth + 1, np.int32)
    zs = np.empty(max_depth + 1)
    nodes = np.empty(max_depth + 1, np.int64)
    sides = np.empty(max_depth + 1, np.uint8)
    elems = np.empty(max_depth + 1, np.int64)
    k = 0
    for t in range(node_ptr.shape[0] - 1):
        for leaf in range(node_ptr[t + 1] - node_ptr[t]):
            if left[node_ptr[t] + leaf] != -1:
                continue
            ns, d = _path_elements(t, leaf, node_ptr, left, feature, zl, zr, parent, feats, zs,
                                   nodes, sides, elems)
            leaf_node[k] = node_ptr[t] + leaf
            leaf_tree[k] = t
            n_split[k] = ns
            n_elem[k] = d
            for j in range(d):
                if zs[j] <= 1e-12:
                    has_zero[k] = 1
            k += 1
    return leaf_node, leaf_tree, n_split, n_elem, has_zero


@nb.njit(cache=True)
def fill_leaf_tables(node_ptr, left, right, feature, zl, zr, leaf_node, leaf_tree, split_ptr,
                     elem_ptr, table_ptr, split_node, split_left, split_elem, elem_feature,
                     elem_ratio, table):
    """Fill the leaves' path splits, distinct features, (1 - z) / z ratios and A tables at
    the given offsets (see `leaf_layout`)."""
    parent = _parents(node_ptr, left, right)
    for k in range(leaf_node.shape[0]):
        t = leaf_tree[k]
        leaf = leaf_node[k] - node_ptr[t]
        s0 = split_ptr[k]
        e0 = elem_ptr[k]
        ns = split_ptr[k + 1] - s0
        d = elem_ptr[k + 1] - e0
        feats = elem_feature[e0:e0 + d]
        zs = np.empty(d)
        _path_elements(t, leaf, node_ptr, left, feature, zl, zr, parent, feats, zs,
                       split_node[s0:s0 + ns], split_left[s0:s0 + ns], split_elem[s0:s0 + ns])
        for j in range(d):
            elem_ratio[e0 + j] = (1.0 - zs[j]) / zs[j] if zs[j] > 0 else 0.0
        if table_ptr[k + 1] > table_ptr[k]:
            _leaf_table(zs, table[table_ptr[k]:table_ptr[k + 1]])


@nb.njit(cache=True)
def _leaf_table(zs, table):
    """table[H] = A(H) for every subset H (bit mask) of the leaf's d features."""
    d = zs.shape[0]
    fact = np.ones(d + 1)
    for k in range(1, d + 1):
        fact[k] = fact[k - 1] * k
    full = (1 << d) - 1
    for s in range(full + 1):
        size = 0
        prod = 1.0
        for j in range(d):
            if (s >> j) & 1:
                size += 1
            else:
                prod *= zs[j]
        table[s] = fact[size] * fact[d - size - 1] / fact[d] * prod if size < d else 0.0
    for j in range(d):
        bit = 1 << j
        for s in range(full + 1):
            if s & bit:
                table[s] += table[s ^ bit]


@nb.njit(parallel=True, cache=True, nogil=True)
def shap_values_tables(X, tree_begin, tree_end, tree_class, node_ptr, left, right, feature,
                       threshold, default_left, value, zl, zr, mean, max_depth, tree_slow,
                       tree_leaf_ptr, leaf_node, split_ptr, elem_ptr, table_ptr, split_node,
                       split_left, split_elem, elem_feature, elem_ratio, table, bias, out):
    """As `shap_values`, by the leaf tables for trees with ``tree_slow[t] == 0`` (leaves
    ``tree_leaf_ptr[t]:tree_leaf_ptr[t+1]``), by the path algorithm for the others."""
    n = X.shape[0]
    k = out.shape[1]
    m = out.shape[2]
    n_blocks = (n + _TBLOCK - 1) // _TBLOCK
    max_nodes = 1
    for t in range(tree_begin, tree_end):
        max_nodes = max(max_nodes, node_ptr[t + 1] - node_ptr[t])
    for blk in nb.prange(n_blocks):
        r0 = blk * _TBLOCK
        r1 = min(n, r0 + _TBLOCK)
        acc = np.zeros((r1 - r0, k, m))
        pf, pz, po, pw, s_node, s_ud, s_off, s_z, s_o, s_f, s_cf = _scratch(max_depth)
        went_left = np.empty(max_nodes, np.uint8)
        for t in range(tree_begin, tree_end):
            c = tree_class[t]
            base = node_ptr[t]
            nn = node_ptr[t + 1] - base
            for i in range(r0, r1):
                phi = acc[i - r0, c]
                phi[m - 1] += mean[base]
                if tree_slow[t]:
                    _tree_shap(X, i, base, left, right, feature, threshold, default_left,
                               value, zl, zr, phi, pf, pz, po, pw, s_node, s_ud, s_off, s_z,
                               s_o, s_f, s_cf, 0, -1)
                    continue
                for j in range(nn):
                    g = base + j
                    if left[g] != -1:
                        went_left[j] = 1 if raw_goes_left(X[i, feature[g]], threshold[g],
                                                         default_left[g] != 0) else 0
                for lf in range(tree_leaf_ptr[t], tree_leaf_ptr[t + 1]):
                    e0 = elem_ptr[lf]
                    d = elem_ptr[lf + 1] - e0
                    if d == 0:
                        continue
                    hot = (1 << d) - 1
                    for s in range(split_ptr[lf], split_ptr[lf + 1]):
                        if went_left[split_node[s]] != split_left[s]:
                            hot &= ~(1 << split_elem[s])
                    v = value[leaf_node[lf]]
                    tb = table_ptr[lf]
                    cold = -v * table[tb + hot]
                    for e in range(d):
                        if (hot >> e) & 1:
                            phi[elem_feature[e0 + e]] += (v * elem_ratio[e0 + e]
                                                          * table[tb + (hot ^ (1 << e))])
                        else:
                            phi[elem_feature[e0 + e]] += cold
        _store_block(acc, bias, r0, r1, out)
