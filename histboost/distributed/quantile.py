"""Exact quantiles of values split across ranks, per group: the leaf refresh of absolute and
quantile error (each leaf's alpha-quantile of its rows' residuals) and their intercept (the
quantile of all labels), equal to `histboost.objectives.regression.weighted_quantile` on all
rows in one process.

Method: a radix selection over an order-preserving 64-bit code of the values. Each quantile
is one or two order statistics (unweighted: the ranks around alpha (n + 1), interpolated as
one process does; weighted: the smallest value whose cumulative weight reaches alpha times
the total). They are found one byte of the code at a time, from the top: every rank counts
(and weighs) its values of each group that share the prefix found so far by their next byte,
256 buckets a target; the buckets are summed across ranks and every rank picks the same
bucket, the first where the cumulative count (weight) reaches the target. After 8 rounds the
prefix is the code of the value itself.

Cost per call: one reduction of the groups' counts and weights, then 8 of
``groups x targets x 256`` counts (int64; weighted: float64 weight and count pairs), e.g. 1 MiB
per round for 255 leaves unweighted (2 targets); each rank passes over its own values 8 times.
No value leaves its rank.

Weighted quantiles compare cumulative weights summed bucket by bucket, in another order than
one process's cumulative sum over sorted values: the value is the same whenever those sums are
exact in float64 (integer weights, or fractions of a power of two), else it may be the
neighbouring value where a cumulative weight lies within rounding of alpha times the total.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..collective.base import Communicator

_SIGN = np.uint64(1 << 63)
_BYTE = np.uint64(255)
_BUCKETS = 256


def encode(values: np.ndarray) -> np.ndarray:
    """uint64 codes of float64 values whose unsigned order is the values' order (-0.0 taken
    as 0.0; no NaN)."""
    bits = (np.asarray(values, np.float64) + 0.0).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def decode(codes: np.ndarray) -> np.ndarray:
    """float64 values of `encode`'s codes."""
    codes = np.asarray(codes, np.uint64)
    return np.where(codes & _SIGN, codes & ~_SIGN, ~codes).view(np.float64)


def _select(comm: Communicator, groups: np.ndarray, codes: np.ndarray,
            weights: np.ndarray | None, targets: np.ndarray) -> np.ndarray:
    """uint64 (G, T): for each group g and target t, the code of the smallest value x of the
    group (over all ranks) whose count (weights None) or weight of the group's values <= x
    reaches targets[g, t]; the group's largest value where none does (rounding). Groups with
    no value get an arbitrary code. groups int64 (n,) in [0, G); codes uint64 (n,)."""
    n_groups, n_targets = targets.shape
    prefix = np.zeros((n_groups, n_targets), np.uint64)
    below = np.zeros((n_groups, n_targets), np.float64 if weights is not None else np.int64)
    row_prefix = np.zeros(codes.shape[0], np.uint64)  # this row's code above the shift
    for shift in range(56, -8, -8):
        s = np.uint64(shift)
        digit = ((codes >> s) & _BYTE).astype(np.int64)
        if shift < 56:
            row_prefix = codes >> np.uint64(shift + 8)
        width = n_groups * _BUCKETS
        local = np.zeros((n_targets, 2 if weights is not None else 1, width),
                         np.float64 if weights is not None else np.int64)
        for t in range(n_targets):
            mine = row_prefix == (prefix[groups, t] >> np.uint64(shift + 8)
                                  if shift < 56 else 0)
            slot = groups[mine] * _BUCKETS + digit[mine]
            local[t, -1] = np.bincount(slot, minlength=width)
            if weights is not None:
                local[t, 0] = np.bincount(slot, weights=weights[mine], minlength=width)
        comm.allreduce(local, op="sum", inplace=True)
        # (G, T, 256): count and measure (the weight, or the count) of each bucket
        count = local[:, -1].reshape(n_targets, n_groups, _BUCKETS).transpose(1, 0, 2)
        measure = local[:, 0].reshape(n_targets, n_groups, _BUCKETS).transpose(1, 0, 2)
        cumulative = below[..., None] + np.cumsum(measure, axis=-1)
        reach = (count > 0) & (cumulative >= targets[..., None])
        last = _BUCKETS - 1 - np.argmax(count[..., ::-1] > 0, axis=-1)
        bucket = np.where(reach.any(axis=-1), np.argmax(reach, axis=-1), last)
        taken = np.take_along_axis(cumulative - measure, bucket[..., None], axis=-1)[..., 0]
        below = taken.astype(below.dtype)
        prefix |= bucket.astype(np.uint64) << s
    return prefix


def global_quantiles(comm: Communicator, groups: np.ndarray, values: np.ndarray,
                     weights: np.ndarray | None, n_groups: int, alpha: float) -> np.ndarray:
    """float64 (n_groups,): per group, `weighted_quantile` (alpha) of its values over all
    ranks (NaN for a group without values on any rank). groups int64 (n,) in [0, n_groups);
    values float64 (n,), no NaN; weights float64 (n,) or None, alike on every rank
    (ValueError on every rank otherwise). Collective."""
    groups = np.asarray(groups, np.int64)
    values = np.asarray(values, np.float64)
    totals = np.zeros((n_groups + 1, 2), np.float64)
    np.add.at(totals[:-1, 0], groups, 1.0)
    if weights is not None:
        weights = np.asarray(weights, np.float64)
        np.add.at(totals[:-1, 1], groups, weights)
    totals[-1] = (weights is not None, weights is None)  # every rank the same: one of them
    comm.allreduce(totals, op="sum", inplace=True)
    if totals[-1, 0] and totals[-1, 1]:
        raise ValueError("Dataset weights given on some ranks only: give them on every rank "
                         "or on none")
    n, total_weight = totals[:-1, 0], totals[:-1, 1]
    codes = encode(values)
    if weights is not None:
        chosen = _select(comm, groups, codes, weights, (alpha * total_weight)[:, None])
        out = decode(chosen[:, 0])
    else:
        # one process: the sorted values s; s[0] up to alpha 1/(n+1), s[n-1] from n/(n+1),
        # else s[k] + d (s[k+1] - s[k]) at x = alpha (n + 1), k = floor(x) - 1, d = x - 1 - k
        x = alpha * (n + 1)
        k = np.floor(x) - 1
        low = alpha <= 1.0 / (n + 1)
        high = ~low & (alpha >= n / (n + 1.0))
        first = np.where(low, 0, np.where(high, n - 1, k))
        second = np.where(low | high, first, k + 1)
        ranks = np.stack([first, second], axis=1)
        chosen = decode(_select(comm, groups, codes, None,
                                np.maximum(ranks, 0).astype(np.int64) + 1))
        d = (x - 1) - k
        out = np.where(low | high, chosen[:, 0],
                       chosen[:, 0] + d * (chosen[:, 1] - chosen[:, 0]))
    return np.where(n > 0, out, np.nan)
