"""LambdaMART gradient pairs, one query group at a time (XGBoost's formulation).

A query's documents are ranked by their margins (stable: ties keep the input order). Every
pair (high, low) of documents with different labels, high the more relevant, adds to the
high document the gradient ``lambda = sigma (sigmoid(sigma (s_high - s_low)) - 1) |dZ|`` and
subtracts it from the low one; both get the hessian
``2 sigma^2 max(p (1 - p), 1e-16) |dZ|`` (p that sigmoid). ``|dZ|`` is the change of the
query's metric when the two documents swap places: 1 (``rank:pairwise``), the NDCG change
(``rank:ndcg``) or the average-precision change (``rank:map``), divided by
``|s_high - s_low| + 0.01`` with score normalisation (unless every score of the query is
equal).

Pairs: "topk" takes every pair whose higher-ranked document is in the top `n_pair` positions;
"mean" pairs every document with `n_pair` documents of other labels drawn uniformly, the draw
for counter c of query g being ``uniform01(splitmix64(key ^ splitmix64(g)), c)``
(`histboost.kernels.cpu.quantize`): it depends on the seed, the round and the query only. Each
query writes its own rows and nothing else, so the pairs do not depend on the thread count.

Normalisation (XGBoost's ``lambdarank_normalization``, first used by LightGBM): "topk" scales
a query's pairs by ``log2(1 + S) / S``, S the sum of ``-2 lambda`` over its pairs; "mean" by
``1 / n_pair``. Finally a query's pairs are multiplied by its weight.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._threads import run_ranges
from .quantize import splitmix64, uniform01

PAIRWISE, NDCG, MAP = 0, 1, 2  # the metric whose change weights a pair
HESS_FLOOR = 1e-16


@nb.njit(cache=True, inline="always")
def _sigmoid(x):
    e = math.exp(-abs(x))
    return 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)


@nb.njit(cache=True, inline="always")
def _average_precision_change(first, second, y_first, y_second, n_rel, acc):
    """|change of average precision| when positions first < second swap; n_rel[k]: relevant
    documents in positions 0..k, acc[k]: sum over relevant positions i <= k of 1 / (i + 1).
    Binary labels."""
    total = n_rel[n_rel.shape[0] - 1]
    r1 = first + 1.0
    r2 = second + 1.0
    n1 = n_rel[first]
    n2 = n_rel[second]
    between = acc[second - 1] - acc[first]  # relevant positions strictly between
    if y_first < y_second:  # the relevant document moves up to `first`
        change = (n1 + 1.0) / r1 + between - n2 / r2
    else:  # the relevant document moves down to `second`
        change = n2 / r2 - n1 / r1 - between
    return abs(change) / total


@nb.njit(cache=True, inline="always")
def _delta(i, j, hi, lo, y, gain, discount, inv_idcg, n_rel, acc, metric):
    """|dZ| of swapping rank positions i and j (hi: the one with the larger label) of a
    query: y, gain in rank order; discount by position; inv_idcg of the query; n_rel, acc:
    the average-precision counts (MAP)."""
    if metric == NDCG:
        return abs((gain[hi] - gain[lo]) * (discount[hi] - discount[lo])) * inv_idcg
    if metric == MAP:
        if i < j:
            return _average_precision_change(i, j, y[i], y[j], n_rel, acc)
        return _average_precision_change(j, i, y[j], y[i], n_rel, acc)
    return 1.0


@nb.njit(cache=True, inline="always")
def _pair(i, j, s, y, gain, inv_idcg, discount, n_rel, acc, metric, score_norm, sigma, out):
    """Add the gradient pairs of the documents at rank positions i and j of a query (s, y,
    gain: scores, labels, gains in rank order) to out (n_docs, 2), in rank order; returns
    -2 lambda (0 for equal labels)."""
    if y[i] == y[j]:
        return 0.0
    if y[i] > y[j]:
        hi, lo = i, j
    else:
        hi, lo = j, i
    diff = s[hi] - s[lo]
    delta = _delta(i, j, hi, lo, y, gain, discount, inv_idcg, n_rel, acc, metric)
    if score_norm:
        delta /= abs(diff) + 0.01
    p = _sigmoid(sigma * diff)
    lam = sigma * (p - 1.0) * delta
    hess = 2.0 * sigma * sigma * max(p * (1.0 - p), HESS_FLOOR) * delta
    out[hi, 0] += lam
    out[hi, 1] += hess
    out[lo, 0] -= lam
    out[lo, 1] += hess
    return -2.0 * lam


# Inlined into one kernel per metric (`GROUP_KERNELS`), the metric a constant there, so that
# the pair loop holds that metric's code only: a metric branch inside the loop made it twice
# as slow.
@nb.njit(cache=True, inline="always")
def _query_pairs(g, margin, label, gain, group_ptr, group_weight, inv_idcg, discount,
                 metric, top_k, n_pair, score_norm, grad_norm, sigma, key, out):
    """The gradient pairs of query g into its rows of out (see `lambdarank_pairs`)."""
    a = group_ptr[g]
    b = group_ptr[g + 1]
    cnt = b - a
    for r in range(a, b):
        out[r, 0] = 0.0
        out[r, 1] = 0.0
    if cnt < 2:
        return
    # the query in rank order (by decreasing score, ties in row order)
    rank = np.argsort(-margin[a:b], kind="mergesort")
    s = np.empty(cnt)
    y = np.empty(cnt)
    gn = np.empty(cnt)
    for k in range(cnt):
        s[k] = margin[a + rank[k]]
        y[k] = label[a + rank[k]]
        gn[k] = gain[a + rank[k]]
    norm = score_norm and s[0] != s[cnt - 1]
    n_rel = np.zeros(cnt if metric == MAP else 1)
    acc = np.zeros(cnt if metric == MAP else 1)
    if metric == MAP:
        c = 0.0
        ap = 0.0
        for k in range(cnt):
            c += y[k]
            ap += y[k] / (k + 1.0)
            n_rel[k] = c
            acc[k] = ap
    ig = inv_idcg[g]
    pairs = np.zeros((cnt, 2))
    total = 0.0
    if top_k:
        for i in range(min(cnt, n_pair)):
            for j in range(i + 1, cnt):
                total += _pair(i, j, s, y, gn, ig, discount, n_rel, acc, metric, norm,
                               sigma, pairs)
    else:
        # positions in order of decreasing label: runs of equal labels are buckets, and each
        # document is paired with documents drawn from outside its bucket
        by_label = np.argsort(-y, kind="mergesort")
        gkey = splitmix64(key ^ splitmix64(np.uint64(g)))
        counter = np.uint64(0)
        i = 0
        while i < cnt:
            j = i + 1
            while j < cnt and y[by_label[j]] == y[by_label[i]]:
                j += 1
            others = i + (cnt - j)
            if others > 0:
                for _ in range(n_pair):
                    for t in range(i, j):
                        r = min(int(uniform01(gkey, counter) * others), others - 1)
                        counter += np.uint64(1)
                        if r >= i:
                            r += j - i  # past the bucket
                        total += _pair(by_label[t], by_label[r], s, y, gn, ig, discount,
                                       n_rel, acc, metric, norm, sigma, pairs)
            i = j
    scale = group_weight[g]
    if grad_norm:
        if not top_k:
            scale /= n_pair
        elif total > 0.0:
            scale *= math.log2(1.0 + total) / total
    for k in range(cnt):
        out[a + rank[k], 0] = pairs[k, 0] * scale
        out[a + rank[k], 1] = pairs[k, 1] * scale


def _groups_kernel(metric: int):
    """The kernel of one metric over queries [lo, hi), inlining `_query_pairs` with the metric
    a constant (a closure variable); a kernel is compiled (or loaded from the cache, whose key
    holds the closure's constant) when its metric is first used. Arguments: see
    `lambdarank_pairs`."""

    @nb.njit(cache=True, nogil=True)
    def groups(lo, hi, margin, label, gain, group_ptr, group_weight, inv_idcg, discount, top_k,
               n_pair, score_norm, grad_norm, sigma, key, out):
        for g in range(lo, hi):
            _query_pairs(g, margin, label, gain, group_ptr, group_weight, inv_idcg, discount,
                         metric, top_k, n_pair, score_norm, grad_norm, sigma, key, out)

    return groups


GROUP_KERNELS = {m: _groups_kernel(m) for m in (PAIRWISE, NDCG, MAP)}


@nb.njit(cache=True, nogil=True)
def inverse_ideal_dcg(gain, group_ptr, top):
    """float64 (G,): 1 / the DCG of each query's rows in order of decreasing gain over its
    first `top` positions (0 where that DCG is 0)."""
    n_groups = group_ptr.shape[0] - 1
    out = np.zeros(n_groups)
    for g in range(n_groups):
        a = group_ptr[g]
        b = group_ptr[g + 1]
        best = np.sort(gain[a:b])[::-1]
        dcg = 0.0
        for k in range(min(b - a, top)):
            dcg += best[k] / math.log2(k + 2.0)
        out[g] = 1.0 / dcg if dcg > 0.0 else 0.0
    return out


def lambdarank_pairs(margin: np.ndarray, label: np.ndarray, gain: np.ndarray,
                     group_ptr: np.ndarray, group_weight: np.ndarray, inv_idcg: np.ndarray,
                     discount: np.ndarray, metric: int, top_k: bool, n_pair: int,
                     score_norm: bool, grad_norm: bool, sigma: float, key: int,
                     threads: int) -> np.ndarray:
    """float64 (n, 2) LambdaMART gradient pairs, the queries split over `threads` threads.

    margin, label, gain: float64 (n,) (gain: the NDCG gain of each row's label);
    group_ptr int64 (G + 1,) query boundaries; group_weight float64 (G,) (normalised query
    weights); inv_idcg float64 (G,) 1 / ideal DCG (0 without relevant rows); discount
    float64 (largest query,) 1 / log2(position + 2); metric PAIRWISE / NDCG / MAP; top_k:
    "topk" pairs (else "mean"); n_pair: the truncation / pairs per document; score_norm,
    grad_norm: XGBoost's lambdarank_score_normalization / lambdarank_normalization; sigma:
    the sigmoid's scale; key: the round's 64-bit key of the "mean" draws."""
    out = np.empty((label.shape[0], 2))
    run_ranges(GROUP_KERNELS[metric], group_ptr.shape[0] - 1, margin, label, gain, group_ptr,
               group_weight, inv_idcg, discount, bool(top_k), int(n_pair), bool(score_norm),
               bool(grad_norm), float(sigma), np.uint64(key), out, threads=threads)
    return out
