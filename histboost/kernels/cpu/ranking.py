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
def _delta_map(first, second, y_first, y_second, n_rel, acc):
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
def _pair(pos_a, pos_b, a, rank, s, y, gain, inv_idcg, discount, n_rel, acc, metric,
          score_norm, equal_scores, sigma, out):
    """Add the gradient pairs of the documents at rank positions pos_a, pos_b (local to the
    query starting at row a) to out; returns -2 lambda (0 for equal labels)."""
    ia = rank[pos_a]
    ib = rank[pos_b]
    if y[ia] == y[ib]:
        return 0.0
    if y[ia] > y[ib]:
        hi, lo, p_hi, p_lo = ia, ib, pos_a, pos_b
    else:
        hi, lo, p_hi, p_lo = ib, ia, pos_b, pos_a
    diff = s[hi] - s[lo]
    if metric == NDCG:
        delta = abs((gain[a + hi] - gain[a + lo]) * (discount[p_hi] - discount[p_lo])) \
            * inv_idcg
    elif metric == MAP:
        if p_hi < p_lo:
            delta = _delta_map(p_hi, p_lo, y[hi], y[lo], n_rel, acc)
        else:
            delta = _delta_map(p_lo, p_hi, y[lo], y[hi], n_rel, acc)
    else:
        delta = 1.0
    if score_norm and not equal_scores:
        delta /= abs(diff) + 0.01
    p = _sigmoid(sigma * diff)
    lam = sigma * (p - 1.0) * delta
    hess = 2.0 * sigma * sigma * max(p * (1.0 - p), HESS_FLOOR) * delta
    out[a + hi, 0] += lam
    out[a + hi, 1] += hess
    out[a + lo, 0] -= lam
    out[a + lo, 1] += hess
    return -2.0 * lam


@nb.njit(cache=True, nogil=True)
def lambdarank_groups(lo, hi, margin, label, gain, group_ptr, group_weight, inv_idcg,
                      discount, metric, top_k, n_pair, score_norm, grad_norm, sigma, key,
                      out):
    """Gradient pairs of queries [lo, hi) into out float64 (n, 2) (their rows only).

    margin, label, gain: float64 (n,) (gain: the NDCG gain of each row's label);
    group_ptr int64 (G + 1,) query boundaries; group_weight float64 (G,) (normalised query
    weights); inv_idcg float64 (G,) 1 / ideal DCG (0 without relevant rows); discount
    float64 (largest query,) 1 / log2(position + 2); metric PAIRWISE / NDCG / MAP; top_k:
    "topk" pairs (else "mean"); n_pair: the truncation / pairs per document; score_norm,
    grad_norm: XGBoost's lambdarank_score_normalization / lambdarank_normalization; sigma:
    sigmoid scale; key uint64: the round's key."""
    for g in range(lo, hi):
        a = group_ptr[g]
        b = group_ptr[g + 1]
        cnt = b - a
        for r in range(a, b):
            out[r, 0] = 0.0
            out[r, 1] = 0.0
        if cnt < 2:
            continue
        s = margin[a:b]
        y = label[a:b]
        rank = np.argsort(-s, kind="mergesort")
        equal_scores = s[rank[0]] == s[rank[cnt - 1]]
        n_rel = np.zeros(cnt if metric == MAP else 1)
        acc = np.zeros(cnt if metric == MAP else 1)
        if metric == MAP:
            c = 0.0
            ap = 0.0
            for k in range(cnt):
                rel = y[rank[k]]
                c += rel
                ap += rel / (k + 1.0)
                n_rel[k] = c
                acc[k] = ap
        ig = inv_idcg[g]
        total = 0.0
        if top_k:
            for i in range(min(cnt, n_pair)):
                for j in range(i + 1, cnt):
                    total += _pair(i, j, a, rank, s, y, gain, ig, discount, n_rel, acc,
                                   metric, score_norm, equal_scores, sigma, out)
        else:
            # positions in order of decreasing label: runs of equal labels are buckets, and
            # each document is paired with documents drawn from outside its bucket
            ranked_y = np.empty(cnt)
            for k in range(cnt):
                ranked_y[k] = -y[rank[k]]
            by_label = np.argsort(ranked_y, kind="mergesort")
            gkey = splitmix64(key ^ splitmix64(np.uint64(g)))
            counter = np.uint64(0)
            i = 0
            while i < cnt:
                j = i + 1
                while j < cnt and ranked_y[by_label[j]] == ranked_y[by_label[i]]:
                    j += 1
                others = i + (cnt - j)
                if others > 0:
                    for _ in range(n_pair):
                        for t in range(i, j):
                            r = min(int(uniform01(gkey, counter) * others), others - 1)
                            counter += np.uint64(1)
                            if r >= i:
                                r += j - i  # past the bucket
                            total += _pair(by_label[t], by_label[r], a, rank, s, y, gain,
                                           ig, discount, n_rel, acc, metric, score_norm,
                                           equal_scores, sigma, out)
                i = j
        scale = group_weight[g]
        if grad_norm:
            if not top_k:
                scale /= n_pair
            elif total > 0.0:
                scale *= math.log2(1.0 + total) / total
        if scale != 1.0:
            for r in range(a, b):
                out[r, 0] *= scale
                out[r, 1] *= scale


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
    """float64 (n, 2) LambdaMART gradient pairs (see `lambdarank_groups` for the
    arguments), the queries split over `threads` threads."""
    out = np.empty((label.shape[0], 2))
    run_ranges(lambdarank_groups, group_ptr.shape[0] - 1, margin, label, gain, group_ptr,
               group_weight, inv_idcg, discount, int(metric), bool(top_k), int(n_pair),
               bool(score_norm), bool(grad_norm), float(sigma), np.uint64(key), out,
               threads=threads)
    return out
