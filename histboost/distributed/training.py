"""What `histboost.train(..., comm=...)` needs beyond the backend wrapper: agreement of the
ranks on the job, errors raised on every rank at once, the global index of each local row, the
intercept and metrics from sums over all ranks.

Every function here is collective: all ranks call it at the same point of `train`.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..collective.errors import CollectiveError
from ..kernels.backend import make_backend
from ..metrics import MEAN_METRICS, finish_metric, metric_sums, set_facts
from ..params import RANKING_OBJECTIVES
from .backend import TREE_LEARNERS, DistributedBackend
from .quantile import global_quantiles

if TYPE_CHECKING:
    from ..collective.base import Communicator
    from ..data.binning import BinMapper
    from ..data.dataset import Dataset
    from ..objectives.base import Objective
    from ..params import TrainParams

# settings each rank may choose for itself: they do not change the model
_LOCAL_SETTINGS = {"nthread", "verbosity"}


def check_supported(p: TrainParams) -> None:
    """Raise ValueError naming a setting distributed training cannot run."""
    from ..objectives import get_objective

    objective = get_objective(p.objective, p.num_class, p)
    if p.objective in RANKING_OBJECTIVES and p.lambdarank_pair_method != "topk":
        raise ValueError(f"lambdarank_pair_method={p.lambdarank_pair_method!r} is not "
                         "supported by distributed training yet (its pairs are drawn by the "
                         "query's index on its rank, not in the whole data set); use 'topk' "
                         "or train in one process")
    if p.scale_pos_weight != 1.0:
        raise ValueError("scale_pos_weight is not supported by distributed training yet; "
                         "weight the positive rows through Dataset(weight=...)")
    # ranking has no intercept (0: a constant shifts every score of a query alike), aft a
    # constant one
    if (not objective.intercept_from_mean and p.base_score is None
            and objective.leaf_alpha is None  # a quantile of the labels (`global_intercept`)
            and p.objective not in RANKING_OBJECTIVES and p.objective != "survival:aft"):
        raise ValueError(f"distributed training of objective {p.objective!r} needs base_score "
                         "(its intercept is not a function of the mean label)")
    if p.objective == "survival:cox":
        raise ValueError(f"objective {p.objective!r} is not supported by distributed training "
                         "yet (it needs all rows of a risk set together)")


def ranks_on_host(comm: Communicator) -> int:
    """The ranks running on this host: ``LOCAL_WORLD_SIZE`` as torchrun sets it, else the
    whole group when its ranks share memory (`Communicator.shares_memory`: one host), else
    1."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    if local > 0:
        return local
    return comm.world_size if comm.shares_memory else 1


def prepare_rank(comm: Communicator, nthread: int) -> int:
    """Per-process settings of a rank; returns its threads: ``nthread`` when > 0, else its
    share of the cores this process may use (their count divided by `ranks_on_host`, at least
    1), so that the ranks of one host do not oversubscribe its cores. Numba's thread pool is
    sized to it where it has not started yet and ``NUMBA_NUM_THREADS`` is unset
    (`size_numba_pool`), and glibc's allocator keeps freed blocks (`keep_freed_memory`)."""
    threads = nthread if nthread > 0 else max(1, len(os.sched_getaffinity(0))
                                              // ranks_on_host(comm))
    size_numba_pool(threads)
    keep_freed_memory()
    return threads


# glibc's mallopt parameters, and the values its dynamic rule may reach by itself
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 64 << 20


def keep_freed_memory() -> bool:
    """Set glibc's mmap threshold to 32 MiB and its trim threshold to 64 MiB, the values its
    dynamic rule reaches once a 32 MiB block has been freed, unless ``MALLOC_MMAP_THRESHOLD_``
    or ``MALLOC_TRIM_THRESHOLD_`` is set (the user's choice wins). Why: the arrays a tree
    allocates per level (histograms, their float copies: megabytes) were served by fresh
    mmaps, or from heap memory just returned to the kernel, in the processes of a distributed
    job, so every level paid page faults and zeroing (2 ranks x 1 thread, 300k x 28 rows on
    the development machine: 53-67 ms of CPU a round per rank, 45-50 with these settings; one
    process on all rows, 58, reaches them by itself). Returns whether they were set (False
    off glibc)."""
    if not sys.platform.startswith("linux") or any(
            v in os.environ for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


def size_numba_pool(threads: int) -> bool:
    """Start Numba's pool with ``threads`` workers instead of one per core, as
    ``NUMBA_NUM_THREADS=threads`` would have: a process using fewer threads than the host's
    cores otherwise keeps idle workers that compete with the other ranks' threads for the
    cores. Only before the pool has started and when the environment does not set
    ``NUMBA_NUM_THREADS`` (the user's choice wins); the pool then stays that size for the
    process's life. Returns whether the pool was sized."""
    import numba
    from numba.np.ufunc import parallel

    if ("NUMBA_NUM_THREADS" in os.environ or getattr(parallel, "_is_initialized", True)
            or not hasattr(parallel, "NUM_THREADS")
            or threads >= numba.config.NUMBA_NUM_THREADS):
        return False
    numba.config.NUMBA_NUM_THREADS = threads
    parallel.NUM_THREADS = threads  # read when the pool starts
    return True


def raise_together(comm: Communicator, error: BaseException | None) -> None:
    """Collective: if any rank passes an error, raise on every rank, naming the ranks and the
    first failing rank's message (the others would otherwise wait in their next collective
    until its timeout). The failing rank re-raises its own exception, the others raise
    `CollectiveError`."""
    message = b"" if error is None else f"{type(error).__name__}: {error}".encode()
    info = np.asarray(comm.allgather(np.array([error is not None, len(message)], np.int64)))
    info = info.reshape(-1, 2)
    failed = [int(r) for r in np.flatnonzero(info[:, 0])]
    if not failed:
        return
    texts = np.asarray(comm.allgather(np.frombuffer(message, np.uint8).copy()))
    first = failed[0]
    start = int(info[:first, 1].sum())
    text = bytes(texts[start:start + int(info[first, 1])]).decode(errors="replace")
    if error is not None:
        raise error
    raise CollectiveError(f"distributed training stopped: rank{'s' if len(failed) > 1 else ''} "
                       f"{', '.join(map(str, failed))} failed; rank {first}: {text}")


def job_description(p: TrainParams, n_features: int, n_outputs: int, num_boost_round: int,
                    eval_names: Sequence[str], early_stopping_rounds: int | None,
                    custom_objective: bool, bin_layout: tuple[int, ...] | None) -> dict:
    """What every rank must agree on (the parameters that shape the model and the loop)."""
    params = {k: v for k, v in p.to_dict().items() if k not in _LOCAL_SETTINGS}
    if isinstance(params.get("device"), str):
        # the kind of device must agree; which GPU a rank uses is its own ("cuda:1" on rank 1
        # with one process per GPU)
        params["device"] = params["device"].split(":")[0]
    return {"params": params, "n_features": n_features, "n_outputs": n_outputs,
            "num_boost_round": num_boost_round, "evals": list(eval_names),
            "early_stopping_rounds": early_stopping_rounds,
            "custom_objective": custom_objective, "bins": bin_layout}


def check_same_job(comm: Communicator, job: dict) -> None:
    """Collective: raise ValueError on every rank unless all ranks describe the same job,
    naming the first rank and setting that differ from rank 0's."""
    text = json.dumps(job, sort_keys=True, default=str).encode()
    digest = np.array([zlib.crc32(text), len(text)], np.int64)
    digests = np.asarray(comm.allgather(digest)).reshape(-1, 2)
    if np.all(digests == digests[0]):
        return
    lengths = [int(n) for n in digests[:, 1]]
    blob = bytes(np.asarray(comm.allgather(np.frombuffer(text, np.uint8).copy())))
    jobs, at = [], 0
    for n in lengths:
        jobs.append(json.loads(blob[at:at + n]))
        at += n
    for rank, other in enumerate(jobs[1:], start=1):
        diff = _first_difference(jobs[0], other)
        if diff is not None:
            key, a, b = diff
            if key.startswith("bins"):
                raise ValueError(
                    f"distributed training needs the same cuts on every rank: rank {rank}'s "
                    "bins differ from rank 0's (build each rank's Dataset with reference= a "
                    "Dataset binned identically everywhere)")
            raise ValueError(f"distributed training: rank {rank} differs from rank 0 in "
                             f"{key}: {b!r} (rank 0: {a!r}); every rank must pass the same "
                             "parameters, features and rounds")


def _first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            d = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
            if d is not None:
                return d
        return None
    return None if a == b else (path or "value", a, b)


def bin_layout(mapper: BinMapper) -> tuple[int, ...]:
    """A short fingerprint of the cuts (value bins per feature and a checksum of the
    thresholds): ranks must bin with the same cuts."""
    crc = zlib.crc32(np.ascontiguousarray(mapper.cut_values, np.float64).tobytes())
    return (*(int(v) for v in mapper.n_value_bins), crc)


def global_row_ids(comm: Communicator, n_rows: int, given: np.ndarray | None) -> np.ndarray:
    """int64 (n_rows,): the index of each local row in the whole data set, the counter of its
    stochastic rounding and row sampling (the draws of one process on all rows). `given`:
    the Dataset's ``row_ids`` (the same choice on every rank: all given or none); default:
    this rank's rows as a block of the rows of all ranks in rank order. Raises ValueError on
    every rank when the ids of all ranks are not 0..N-1 each once."""
    sizes = np.asarray(comm.allgather(np.array([n_rows, given is not None], np.int64)),
                       np.int64).reshape(-1, 2)
    if np.any(sizes[:, 1] != sizes[0, 1]):
        raise ValueError("Dataset row_ids given on some ranks only: give them on every rank "
                         "or on none")
    total = int(sizes[:, 0].sum())
    if given is None:
        first = int(sizes[:comm.rank, 0].sum())
        return np.arange(first, first + n_rows, dtype=np.int64)
    # the ids of all ranks are 0..N-1 each once iff all lie in range and the sum of a 64-bit
    # hash over them equals its sum over 0..N-1 (a false pass has probability ~2**-64); each
    # rank hashes its ids and its share of 0..N-1, so the check costs O(local rows)
    ids = np.asarray(given, np.int64)
    lo, hi = total * comm.rank // comm.world_size, total * (comm.rank + 1) // comm.world_size
    with np.errstate(over="ignore"):
        balance = (_mix64(ids.astype(np.uint64)).sum(dtype=np.uint64)
                   - _mix64(np.arange(lo, hi, dtype=np.uint64)).sum(dtype=np.uint64))
    check = np.array([balance, np.uint64(np.any((ids < 0) | (ids >= total)))], np.uint64)
    comm.allreduce(check, op="sum", inplace=True)
    if check[0] != 0 or check[1] != 0:
        raise ValueError(f"Dataset row_ids of all ranks must be 0..{total - 1}, each once")
    return ids


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 of uint64 x (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def global_intercept(comm: Communicator, objective: Objective, y: np.ndarray,
                     w: np.ndarray | None) -> np.ndarray:
    """float64 (K,): the objective's intercept from the weighted mean label of all ranks
    (sum(w * y), sum(w) allreduced). Built-in objectives fit the intercept from that mean
    alone (squared error: the mean; logistic: its logit; softmax and custom: zeros), except
    those that refresh leaves to a quantile (absolute and quantile error): theirs is that
    quantile of the labels of all ranks (`histboost.distributed.quantile`)."""
    if objective.leaf_alpha is not None:
        q = global_quantiles(comm, np.zeros(len(y), np.int64), y, w, 1, objective.leaf_alpha)
        return np.array([float(q[0])])
    if y.ndim == 2:  # interval labels (survival:aft, whose intercept is a constant)
        y = y[:, 0]
    ww = np.ones_like(y) if w is None else w
    sums = np.array([float(np.dot(ww, y)), float(ww.sum())], np.float64)
    comm.allreduce(sums, op="sum", inplace=True)
    if sums[1] <= 0:
        raise ValueError("all weights are zero on every rank")
    return objective.base_margin(np.array([sums[0] / sums[1]]), None)


def leaf_quantiles(comm: Communicator) -> Callable[..., np.ndarray]:
    """The quantiles of a leaf refresh (`histboost.objectives.leaves.refresh_leaves`) over
    the rows of all ranks: each rank passes its rows' leaves and residuals."""

    def quantiles(leaf: np.ndarray, residual: np.ndarray, w: np.ndarray | None,
                  n_leaves: int, alpha: float) -> np.ndarray:
        return global_quantiles(comm, leaf, residual, w, n_leaves, alpha)

    return quantiles


def check_ranking_weights(objective: Objective, w: np.ndarray | None) -> None:
    """Raise ValueError for weighted ranking under a communicator: a ranking objective
    normalises its query weights by their sum over the queries it holds, which on each rank
    would be that rank's queries."""
    if getattr(objective, "needs_groups", False) and w is not None:
        raise ValueError(f"weighted ranking ({objective.name!r} with Dataset weights) is not "
                         "supported by distributed training yet (query weights are normalised "
                         "over the queries of one process); train it in one process")


def global_ranking_metric(comm: Communicator, fn: Any, y: np.ndarray, pred: np.ndarray,
                          group: np.ndarray | None) -> float:
    """Ranking metric `fn` (NDCG, MAP: a mean over queries) over the queries of all ranks:
    labels, scores and query sizes gathered from every rank in rank order, the value one
    process computes on all rows when each rank holds whole queries."""
    ys = np.asarray(comm.allgather(np.ascontiguousarray(y, np.float64)))
    ps = np.asarray(comm.allgather(np.ascontiguousarray(pred, np.float64)))
    sizes = np.asarray(group if group is not None else [len(y)], np.int64)
    groups = np.asarray(comm.allgather(sizes))
    return fn(ys, ps, None, group=groups)


_GATHERED_FIELDS = ("label", "weight", "base_margin", "label_lower_bound", "label_upper_bound")


def gather_dataset(comm: Communicator, d: Dataset) -> Dataset:
    """Collective: the rows of evaluation set `d` of all ranks in rank order as one Dataset
    on every rank (features, labels, weights, base margins, label bounds, query sizes), so
    that a custom metric sees the set one process would: dense, or sparse (its stored values
    gathered: row lengths, column indices and values) when every rank's set is sparse. It
    costs one allgather of the whole set per run (the predictions then travel every round).
    ValueError on every rank for a categorical set, sets sparse on some ranks only, or a
    field given on some ranks only."""
    from ..data.dataset import Dataset
    from ..data.sparse import SparseMatrix

    error = None
    if d.categorical is not None or not isinstance(d.data, np.ndarray | SparseMatrix):
        error = ValueError("custom_metric under comm gathers the evaluation sets' rows: each "
                           "must be a numeric matrix, dense or sparse (not categorical)")
    raise_together(comm, error)
    sparse = np.asarray(comm.allgather(np.array([d.is_sparse], np.int64)))
    if sparse.min() != sparse.max():
        raise ValueError("custom_metric under comm: an evaluation set is sparse on ranks "
                         f"{np.flatnonzero(sparse).tolist()} only; give every rank the same kind")
    fields = [getattr(d, f) for f in _GATHERED_FIELDS] + [d.group]
    present = np.array([f is not None for f in fields], np.int64)
    flags = np.asarray(comm.allgather(present)).reshape(comm.world_size, -1)
    if not np.all(flags == flags[0]):
        names = [n for n, col in zip((*_GATHERED_FIELDS, "group"), flags.T, strict=True)
                 if not np.all(col == col[0])]
        raise ValueError(f"custom_metric under comm: evaluation set fields {names} are given on "
                         "some ranks only")

    def gathered(a: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
        return np.asarray(comm.allgather(np.ascontiguousarray(a, dtype)))

    kwargs = {f: gathered(v) for f, v in zip(_GATHERED_FIELDS, fields, strict=False)
              if v is not None}
    if d.group is not None:
        kwargs["group"] = gathered(d.group, np.int64)
    if not d.is_sparse:
        return Dataset(gathered(d.data), feature_names=d.feature_names, **kwargs)
    m = d.data
    lengths = gathered(np.diff(m.indptr), np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rows = SparseMatrix(indptr, gathered(m.indices, np.int32), gathered(m.data),
                        (lengths.size, m.shape[1]), m.unstored)
    return Dataset(rows, feature_names=d.feature_names, unstored=m.unstored, **kwargs)


def global_set_facts(comm: Communicator, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """`histboost.metrics.set_facts` of an evaluation set split across the ranks."""
    return comm.allreduce(set_facts(y, w), op="sum")


def global_metric(comm: Communicator, name: str, fn: Any, y: np.ndarray, pred: np.ndarray,
                  w: np.ndarray | None) -> float:
    """Metric `name` over the rows of all ranks: mean metrics from their (sum, weight) summed
    across ranks (two floats per metric and round); the others (AUC) on the rows gathered
    from every rank in rank order, the value one process computes on all rows."""
    if name in MEAN_METRICS:
        return finish_metric(name, comm.allreduce(metric_sums(name, y, pred, w), op="sum"))
    ys = np.asarray(comm.allgather(np.ascontiguousarray(y, np.float64)))
    ps = np.asarray(comm.allgather(np.ascontiguousarray(pred, np.float64)))
    ws = (None if w is None
          else np.asarray(comm.allgather(np.ascontiguousarray(w, np.float64))))
    return fn(ys, ps, ws)


def make_distributed_backend(comm: Communicator, device: str, bins: np.ndarray | None,
                             bin_offsets: np.ndarray, *, tree_learner: str, **kwargs: Any
                             ) -> DistributedBackend:
    """A `DistributedBackend` over the backend of `device` for this rank's rows (one
    histogram layout on every rank; quantised rounding at the global row indices given in
    kwargs["row_ids"], int64 (n_rows,), required). kwargs: the rest of `make_backend`'s
    arguments."""
    if tree_learner not in TREE_LEARNERS:
        raise ValueError(f"tree_learner must be one of {TREE_LEARNERS}, got {tree_learner!r}")
    # the packed histogram layout, decided alike on every rank from the rows of all ranks
    rows = np.array([len(kwargs["row_ids"])], np.int64)
    comm.allreduce(rows, op="sum", inplace=True)
    local = make_backend(device, bins, bin_offsets, pack_rows=int(rows[0]), **kwargs)
    return DistributedBackend(local, comm, tree_learner=tree_learner, total_rows=int(rows[0]))
