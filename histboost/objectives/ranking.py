"""Learning to rank: ``rank:pairwise`` (RankNet), ``rank:ndcg`` (LambdaMART) and ``rank:map``.

XGBoost's LambdaRank formulation (docs/ranking.md): pairs of documents of one query, each pair
weighted by the change of the query's metric when the two swap places, pairs built by
truncation ("topk") or sampling ("mean"), per-query normalisation. The gradient pairs are
computed on the host by `histboost.kernels.cpu.ranking` (queries in parallel, pair draws keyed
by seed, round and query) and handed to the backend (`Backend.set_gradients`), so ranking
trains on every backend and grow policy.

Query groups come from the training `Dataset` (``group=`` sizes or ``qid=`` ids). Weights are
per query (XGBoost): a Dataset's row weights must be equal within each query; queries are
weighted by ``w_q * n_queries / sum(w)``.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from ..kernels.cpu import ranking as kernels
from ..metrics import ndcg_gain
from .base import HostObjective

DEFAULT_TRUNCATION = 32  # "topk" pairs: the top positions (XGBoost's default)
MAX_EXP_LABEL = 31  # 2**label - 1 stays an exact 32-bit integer gain (XGBoost's limit)


def pair_key(seed: int, round_: int) -> int:
    """A 64-bit key per (seed, round) for the "mean" pair draws, a stream apart from the
    rounding and row-sampling keys (`histboost.tree.quantize`)."""
    return (np.random.SeedSequence([seed & 0xFFFFFFFF, round_], spawn_key=(2,))
            .generate_state(1, np.uint64)[0].item())


def group_pointer(group: np.ndarray, n: int) -> np.ndarray:
    """int64 (G + 1,) query boundaries of query sizes `group` covering n rows."""
    ptr = np.concatenate([[0], np.cumsum(np.asarray(group, np.int64))])
    if ptr[-1] != n:
        raise ValueError(f"query group sizes sum to {int(ptr[-1])}, but the data has {n} rows")
    return ptr


def query_weights(w: np.ndarray | None, ptr: np.ndarray) -> np.ndarray:
    """float64 (G,) normalised query weights ``w_q * G / sum(w_q)`` from row weights w (n,)
    that are equal within each query (None: ones)."""
    n_groups = ptr.shape[0] - 1
    if w is None:
        return np.ones(n_groups)
    first = w[ptr[:-1]]
    per_row = np.repeat(first, np.diff(ptr))
    if not np.array_equal(per_row, w):
        row = int(np.flatnonzero(per_row != w)[0])
        g = int(np.searchsorted(ptr, row, side="right") - 1)
        raise ValueError(f"ranking weights are per query: the rows of query {g} (rows "
                         f"{int(ptr[g])}..{int(ptr[g + 1]) - 1}) have different weights; give "
                         "one weight per query (Dataset(weight=...) of length n_queries, or "
                         "equal row weights within each query)")
    total = float(first.sum())
    if not total > 0:
        raise ValueError("all query weights are zero")
    return first * (n_groups / total)


class LambdaRank(HostObjective):
    """A LambdaRank objective; `metric` (a `kernels.ranking` code) weights the pairs.

    Predictions are the margins (scores to sort each query's documents by)."""

    metric = kernels.PAIRWISE
    metric_name = "ndcg"  # of the default eval metric
    needs_groups = True

    def __init__(self, name: str, num_class: int = 1, params: Any = None) -> None:
        super().__init__(name, num_class, params)

        def get(key: str, default: Any) -> Any:
            return getattr(params, key, default)

        self.top_k = get("lambdarank_pair_method", "topk") == "topk"
        self.n_pair = int(get("lambdarank_num_pair_per_sample", DEFAULT_TRUNCATION))
        self.grad_norm = bool(get("lambdarank_normalization", True))
        self.score_norm = bool(get("lambdarank_score_normalization", True))
        self.exp_gain = bool(get("ndcg_exp_gain", True))
        self.label_gain = tuple(get("label_gain", ()))
        self.sigma = float(get("sigmoid", 1.0))
        self.seed = int(get("seed", 0))
        self.n_threads = max(1, min(int(get("n_threads", 1)), nb.config.NUMBA_NUM_THREADS))

    @property
    def default_metric(self) -> str:  # type: ignore[override]
        """XGBoost's: ``ndcg@32`` / ``map@32`` with "topk" pairs (the truncation), else
        ``ndcg`` / ``map``."""
        return f"{self.metric_name}@{self.n_pair}" if self.top_k else self.metric_name

    def check_label(self, y: np.ndarray) -> None:
        if self.metric == kernels.NDCG:
            if self.label_gain:
                ndcg_gain(y, self.label_gain)  # raises for labels outside the table
            elif not self.exp_gain:
                if np.any(y < 0):
                    raise ValueError(f"labels (the NDCG gains with ndcg_exp_gain=False) must "
                                     f"be >= 0 for {self.name}, found {float(y[y < 0][0])!r}")
            else:
                bad = (y < 0) | (y > MAX_EXP_LABEL) | (y != np.floor(y))
                if np.any(bad):
                    raise ValueError(
                        f"labels must be integer relevance degrees in [0, {MAX_EXP_LABEL}] "
                        f"for {self.name} (gain 2**label - 1), found {float(y[bad][0])!r}; "
                        "set ndcg_exp_gain=False for the gain label itself, or label_gain")

    def bind(self, y: np.ndarray, w: np.ndarray | None, group: np.ndarray | None = None
             ) -> None:
        if group is None:
            raise ValueError(f"objective {self.name!r} needs query groups: pass "
                             "Dataset(..., group=sizes) or Dataset(..., qid=query ids)")
        super().bind(y, w, group)
        self._ptr = group_pointer(group, y.shape[0])
        self._query_weight = query_weights(self._w, self._ptr)
        self._gain = (ndcg_gain(self._y, self.label_gain, self.exp_gain)
                      if self.metric == kernels.NDCG else np.zeros(y.shape[0]))
        top = self.n_pair if self.top_k else y.shape[0]
        self._inv_idcg = kernels.inverse_ideal_dcg(self._gain, self._ptr, top)
        largest = int(np.diff(self._ptr).max())
        self._discount = 1.0 / np.log2(np.arange(largest) + 2.0)

    def base_margin(self, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        """0: a constant shifts every score of a query alike, so ranking has no intercept."""
        return np.zeros(1)

    def gradient_pairs(self, margin: np.ndarray, iteration: int = 0) -> np.ndarray:
        pairs = kernels.lambdarank_pairs(
            np.ascontiguousarray(margin[:, 0]), self._y, self._gain, self._ptr,
            self._query_weight, self._inv_idcg, self._discount, self.metric, self.top_k,
            self.n_pair, self.score_norm, self.grad_norm, self.sigma,
            pair_key(self.seed, iteration), self.n_threads)
        return pairs.astype(np.float32)[None]


class PairwiseRank(LambdaRank):
    """rank:pairwise: RankNet, every pair of different labels weighs 1."""


class NDCGRank(LambdaRank):
    """rank:ndcg: LambdaMART, pairs weighted by the NDCG change of swapping them; labels are
    relevance degrees (integers in [0, 31] with the default gain 2**label - 1)."""

    metric = kernels.NDCG


class MAPRank(LambdaRank):
    """rank:map: pairs weighted by the change of average precision; binary labels."""

    metric = kernels.MAP
    metric_name = "map"

    def check_label(self, y: np.ndarray) -> None:
        bad = (y != 0) & (y != 1)
        if np.any(bad):
            raise ValueError(f"labels must be 0 or 1 (relevant) for {self.name}, found "
                             f"{float(y[bad][0])!r}")
