"""`DaskDataset`, `train` and `predict` on a ``dask.distributed`` cluster.

How `train` runs (docs/dask.md has the user's view):

1. `DaskDataset` computes one *part* per partition on the cluster: the partition's features,
   label and weight as NumPy arrays, on the worker that holds the features (`_pack`); the
   client learns only each part's row count.
2. `train` asks the scheduler which worker holds each part (`Client.who_has`). The workers
   holding training rows form the group; rank = position in the sorted worker addresses.
   Each rank's rows are its parts in partition order, with ``row_ids`` = their positions in the
   whole data set (the partitions' global offsets), so the model does not depend on where the
   parts lie. Evaluation parts stay where they are when that worker is in the group, else go to
   the least loaded rank; a rank without any gets one (split off a part where needed).
3. One task per rank, pinned to its worker (``workers=[addr]``, ``allow_other_workers=False``,
   ``pure=False``), forms a torch.distributed Gloo process group (a TCPStore on rank 0's worker
   at a port chosen there, published through a `distributed.Variable`), wraps it in
   `histboost.collective.from_process_group` and calls `histboost.train(..., comm=comm)`. The
   group is destroyed in ``finally``. Rank 0 returns the model as JSON bytes.
4. A rank that fails makes every other rank fail within `timeout` (`train` raises on every rank
   when one rank's data or parameters are rejected; collectives time out otherwise); the client
   raises the failing rank's own error, noting its worker.

Cuts: `histboost.train(..., comm=...)` computes them from all ranks' rows, sampled by the hash
of each row's global index (`row_ids`), the cuts one process computes on the whole data.

Categorical columns (`DaskDataset(categorical_features=)`, or pandas category / object /
string columns of a DataFrame): the parts keep the partitions' raw pandas frames, and each
rank builds its `Dataset` from them with the categorical columns; the distributed categorical
path (`histboost.distributed.categorical`) gives the one-process model.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import numpy as np

from ..booster import Booster
from ..collective.errors import CollectiveError, CollectiveTimeout
from ..data.dataset import Dataset, _is_scipy_sparse, to_float_matrix
from ..params import parse_params

_STOPPED = "distributed training stopped"  # how `raise_together` relays another rank's error


class RendezvousError(RuntimeError):
    """The process group of the training tasks did not form."""


def _client(client: Any) -> Any:
    if client is not None:
        return client
    from distributed import default_client

    return default_client()


def _is_dask_array(x: Any) -> bool:
    return type(x).__module__.startswith("dask.array") and hasattr(x, "chunks")


def _is_dask_frame(x: Any) -> bool:
    return hasattr(x, "npartitions") and hasattr(x, "map_partitions") and not _is_dask_array(x)


def _npartitions(x: Any) -> int:
    return x.numblocks[0] if _is_dask_array(x) else x.npartitions


def _partitions(x: Any) -> list[Any]:
    """One Delayed per row block, in partition order."""
    parts = x.to_delayed()
    if isinstance(parts, np.ndarray):
        parts = parts.ravel().tolist()  # arrays: one column block, so row-major = row order
    return list(parts)


def _as_column(v: Any, X: Any, what: str) -> Any:
    """`v` (label or weight) as a collection with X's row partitions."""
    if v is None:
        return None
    if _is_dask_array(v):
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1:
            raise ValueError(f"{what} must be 1-D (or one column), got shape {v.shape}")
        rows = X.chunks[0] if _is_dask_array(X) else None
        if rows is not None and not any(np.isnan(rows)) and not any(np.isnan(v.chunks[0])):
            if sum(rows) != v.shape[0]:
                raise ValueError(f"{what} has {v.shape[0]} rows, data {sum(rows)}")
            v = v.rechunk((rows,))
    elif _is_dask_frame(v):
        if v.ndim == 2:
            if len(v.columns) != 1:
                raise ValueError(f"{what} must be one column, got {len(v.columns)}")
            v = v[v.columns[0]]
    else:
        raise TypeError(f"{what} must be a Dask array, Series or one-column DataFrame like the "
                        f"data, got {type(v).__name__}")
    if _npartitions(v) != _npartitions(X):
        raise ValueError(f"{what} has {_npartitions(v)} partitions, the data "
                         f"{_npartitions(X)}: their partitions must be aligned")
    return v


def _pack(i: int, x: Any, y: Any, w: Any, raw: bool = False) -> tuple[Any, Any, Any]:
    """A partition's (features, label, weight) as NumPy arrays (lengths checked); with
    `raw`, the features stay the partition's pandas DataFrame (categorical columns, raw
    values), its index reset; a scipy sparse partition's features as a scipy CSR matrix."""
    if raw:
        X = x.reset_index(drop=True)
    elif _is_scipy_sparse(x):
        X = x.tocsr()
    else:
        X, _ = to_float_matrix(x)
    out = [X]
    for what, v in (("label", y), ("weight", w)):
        if v is not None:
            v = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, np.float64)
            if v.shape != (X.shape[0],):
                raise ValueError(f"partition {i}: {what} has shape {v.shape}, the data "
                                 f"{X.shape[0]} rows")
        out.append(v)
    return out[0], out[1], out[2]


def _rows(part: tuple) -> int:
    return int(part[0].shape[0])


def _slice(part: tuple, a: int, b: int) -> tuple:
    return tuple(None if v is None else v.iloc[a:b].reset_index(drop=True)
                 if hasattr(v, "iloc") else v[a:b] for v in part)


class DaskDataset:
    """Training or evaluation data held by a Dask cluster, the counterpart of `Dataset`
    (``xgboost.dask.DaskDMatrix``).

    Parameters
    ----------
    client : a ``distributed.Client`` (None: the default client).
    data : Dask array (n, F) or Dask DataFrame of numeric columns; NaN marks missing values. A
        Dask array of scipy sparse blocks stays sparse (docs/sparse.md).
    label, weight : Dask array, Series or one-column DataFrame with the same row partitions
        (the same number of partitions, each with the rows of the data's partition).
    feature_names : names of the F features (default: the DataFrame's columns or f0..).
    max_bin : histogram slots per feature, as in `Dataset`.
    categorical_features : column indices or names of categorical columns, as in `Dataset`
        (alias ``cat_features``); a DataFrame's category, object and string columns are
        categorical without being named. Values: strings or integer ids, NaN / None a
        category of its own (docs/categorical.md).
    unstored : the value of entries sparse blocks do not store, as in `Dataset`: "zero" or
        "nan" (the training set's rule applies to its evaluation sets too).

    The partitions are computed on the cluster at once (as NumPy parts, on the workers that
    hold them); only their row counts come to the client. Empty partitions are allowed.
    """

    def __init__(self, client: Any, data: Any, label: Any = None, weight: Any = None, *,
                 feature_names: Sequence[str] | None = None, max_bin: int = 256,
                 categorical_features: Any = None, cat_features: Any = None,
                 unstored: str = "zero") -> None:
        import dask
        from distributed import wait

        from ..data.categorical import _auto_categorical, _resolve
        from ..data.sparse import check_unstored

        self.unstored = check_unstored(unstored)

        if cat_features is not None:
            if categorical_features is not None:
                raise ValueError("give categorical_features or its alias cat_features, not "
                                 "both")
            categorical_features = cat_features

        self.client = _client(client)
        if _is_dask_array(data):
            if data.ndim != 2:
                raise ValueError(f"data must be 2-D (n_rows, n_features), got {data.ndim}-D")
            data = data.rechunk({1: -1})
            n_features, names = int(data.shape[1]), None
        elif _is_dask_frame(data) and data.ndim == 2:
            names = [str(c) for c in data.columns]
            n_features = len(names)
        else:
            raise TypeError(f"data must be a Dask array or DataFrame, got "
                            f"{type(data).__name__} (for in-memory data use histboost.Dataset)")
        if feature_names is not None:
            names = [str(c) for c in feature_names]
            if len(names) != n_features:
                raise ValueError(f"feature_names has {len(names)} names for {n_features} "
                                 "features")
        self.data = data
        self.feature_names = names or [f"f{i}" for i in range(n_features)]
        self.max_bin = int(max_bin)
        self.n_features = n_features
        # categorical columns as input positions (named ones; a frame's category / object /
        # string columns are found again by each rank's Dataset)
        self.categorical_features: list[int] | None = None
        if categorical_features is not None and len(np.atleast_1d(
                np.asarray(categorical_features, dtype=object))):
            self.categorical_features = _resolve(categorical_features, self.feature_names,
                                                  "data")
        raw = _is_dask_frame(data) and (self.categorical_features is not None or any(
            _auto_categorical(t) for t in data.dtypes))
        self.raw = raw
        y, w = _as_column(label, data, "label"), _as_column(weight, data, "weight")
        self.has_label, self.has_weight = y is not None, w is not None
        columns = [_partitions(data)] + [
            _partitions(v) if v is not None else [None] * _npartitions(data) for v in (y, w)]
        packs = [dask.delayed(_pack, pure=False)(i, *p, raw)
                 for i, p in enumerate(zip(*columns, strict=True))]
        self.parts = self.client.compute(packs)
        wait(self.parts)
        self.rows = np.asarray(self.client.gather(self.client.map(_rows, self.parts)),
                               np.int64)

    def num_row(self) -> int:
        return int(self.rows.sum())

    def num_col(self) -> int:
        return self.n_features

    def __repr__(self) -> str:
        return (f"DaskDataset(n_rows={self.num_row()}, n_features={self.n_features}, "
                f"n_partitions={len(self.parts)})")


# -- placement -------------------------------------------------------------------------------

def _holders(client: Any, parts: list[Any]) -> list[list[str]]:
    from distributed import wait

    wait(parts)
    who = client.who_has(parts)
    return [sorted(who.get(f.key, ())) for f in parts]


def _place(holders: list[list[str]], rows: np.ndarray) -> dict[int, str]:
    """Partition index -> worker for the non-empty parts: a holder (the one with the fewest
    rows so far when the part is on several)."""
    load: dict[str, int] = {}
    out = {}
    for i, (h, n) in enumerate(zip(holders, rows, strict=True)):
        if n == 0:
            continue
        if not h:
            raise RuntimeError(f"partition {i} is held by no worker (was it lost?)")
        addr = min(h, key=lambda a: (load.get(a, 0), a))
        load[addr] = load.get(addr, 0) + int(n)
        out[i] = addr
    return out


def _place_eval(client: Any, d: DaskDataset, addrs: list[str], name: str) -> list[list[Any]]:
    """The parts of evaluation set `d` per rank, each rank at least one (split off a part of
    another rank when needed)."""
    if d.num_row() < len(addrs):
        raise ValueError(f"eval set {name!r} has {d.num_row()} rows; it needs at least one per "
                         f"training worker ({len(addrs)})")
    holders = _holders(client, d.parts)
    rank = {a: r for r, a in enumerate(addrs)}
    load = [0] * len(addrs)
    # per rank: [(order, future, rows, holder)]
    mine: list[list[tuple[tuple[int, int], Any, int, str]]] = [[] for _ in addrs]
    for i, (f, n, h) in enumerate(zip(d.parts, d.rows, holders, strict=True)):
        if n == 0:
            continue
        if not h:
            raise RuntimeError(f"eval set {name!r}: partition {i} is held by no worker")
        inside = [a for a in h if a in rank]
        r = (min((rank[a] for a in inside), key=lambda r: (load[r], r)) if inside
             else min(range(len(addrs)), key=lambda r: (load[r], r)))
        load[r] += int(n)
        mine[r].append(((i, 0), f, int(n), h[0]))
    while True:
        empty = [r for r in range(len(addrs)) if not mine[r]]
        if not empty:
            break
        r = empty[0]
        donors = [q for q in range(len(addrs)) if len(mine[q]) > 1]
        if donors:
            q = max(donors, key=lambda q: (len(mine[q]), -q))
            j = min(range(len(mine[q])), key=lambda j: mine[q][j][2])
            mine[r].append(mine[q].pop(j))
            continue
        q = max(range(len(addrs)), key=lambda q: (mine[q][0][2] if mine[q] else 0, -q))
        (order, f, n, h) = mine[q][0]
        half = n // 2
        a = client.submit(_slice, f, 0, n - half, workers=[h], pure=False)
        b = client.submit(_slice, f, n - half, n, workers=[h], pure=False)
        mine[q][0] = ((order[0], 2 * order[1]), a, n - half, h)
        mine[r].append(((order[0], 2 * order[1] + 1), b, half, h))
    return [[f for _, f, _, _ in sorted(m, key=lambda t: t[0])] for m in mine]


# -- the task on each worker -----------------------------------------------------------------

_TRAINING = threading.Lock()  # one training task per worker process (one default group)


def _rendezvous(rank: int, world: int, host: str, name: str, timeout: float) -> Any:
    import torch.distributed as dist
    from distributed import Variable

    td = timedelta(seconds=timeout)
    var = Variable(name)
    if rank == 0:
        store = dist.TCPStore(host, 0, world, is_master=True, timeout=td,
                              wait_for_workers=False)
        var.set(store.port)
        return store
    try:
        port = var.get(timeout=timeout)
    except Exception as e:  # TimeoutError
        raise RendezvousError(f"rank {rank}: rank 0 (on {host}) did not open the rendezvous "
                              f"within {timeout:g}s: it may have failed or not started "
                              f"({type(e).__name__})") from e
    return dist.TCPStore(host, int(port), world, is_master=False, timeout=td)


def _train_task(job: dict[str, Any], rank: int, world: int, host: str, rdzv: str,
                parts: list[tuple], spans: list[tuple[int, int]],
                eval_parts: list[tuple[list[tuple] | None, str]]) -> dict[str, Any] | None:
    import torch.distributed as dist

    from ..collective import from_process_group

    if not _TRAINING.acquire(blocking=False):
        raise RuntimeError(f"rank {rank}: another histboost.dask training task runs in this "
                           "worker process; run one job at a time")
    try:
        if dist.is_initialized():
            raise RuntimeError(f"rank {rank}: torch.distributed is already initialised in "
                               "this worker process")
        timeout = float(job["timeout"])
        store = _rendezvous(rank, world, host, rdzv, timeout)
        try:
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                    timeout=timedelta(seconds=timeout))
        except Exception as e:
            raise RendezvousError(f"rank {rank}: the Gloo process group of {world} workers did "
                                  f"not form within {timeout:g}s: {e}") from e
        del store
        timed_out = None
        try:
            comm = from_process_group(None, timeout=timeout)
            try:
                return _train_rank(comm, job, parts, spans, eval_parts)
            except CollectiveTimeout as e:
                timed_out = e
            finally:
                comm.close()
        finally:
            dist.destroy_process_group()
        # dask pickles errors with tblib, which cannot rebuild the RuntimeError + TimeoutError
        # (OSError) mix, nor a chain holding one: a CollectiveError, message unchanged
        raise CollectiveError(str(timed_out), op=timed_out.op, rank=timed_out.rank,
                              peer=timed_out.peer)
    finally:
        _TRAINING.release()


def _local_dataset(parts: list[tuple], job: dict[str, Any], reference: Dataset | None = None,
                   row_ids: np.ndarray | None = None) -> Dataset:
    def cat(k: int) -> Any:
        if parts[0][k] is None:
            return None
        if len(parts) == 1:
            return parts[0][k]
        if _is_scipy_sparse(parts[0][k]):  # sparse partitions stay sparse
            import scipy.sparse as sp

            return sp.vstack([p[k] for p in parts], format="csr")
        if hasattr(parts[0][k], "iloc"):  # raw frames (categorical columns)
            import pandas as pd

            return pd.concat([p[k] for p in parts], ignore_index=True)
        return np.concatenate([p[k] for p in parts])

    return Dataset(cat(0), label=cat(1), weight=cat(2), feature_names=job["feature_names"],
                   max_bin=job["max_bin"], reference=reference, row_ids=row_ids,
                   categorical_features=job["categorical_features"],
                   unstored=job["unstored"])


def _train_rank(comm: Any, job: dict[str, Any], parts: list[tuple],
                spans: list[tuple[int, int]],
                eval_parts: list[tuple[list[tuple] | None, str]]) -> dict[str, Any] | None:
    from distributed import get_worker

    from ..distributed.training import raise_together
    from ..training import train as hb_train

    params = dict(job["params"])
    if not any(k in params for k in ("nthread", "n_jobs", "num_threads")):
        params["nthread"] = int(get_worker().state.nthreads)
    error = None
    try:
        row_ids = np.concatenate([np.arange(a, a + n, dtype=np.int64) for a, n in spans])
        # no reference: train() computes the cuts of all ranks' rows
        dtrain = _local_dataset(parts, job, row_ids=row_ids)
        evals = [(dtrain if ep is None else _local_dataset(ep, job, reference=dtrain), name)
                 for ep, name in eval_parts]
        xgb_model = None if job["xgb_model"] is None else _load(job["xgb_model"])
    except Exception as e:  # the data of this rank is rejected: stop every rank now
        error = e
    raise_together(comm, error)
    history: dict[str, dict[str, list[float]]] = {}
    booster = hb_train(params, dtrain, job["num_boost_round"], evals=evals, obj=job["obj"],
                       early_stopping_rounds=job["early_stopping_rounds"],
                       evals_result=history, verbose_eval=job["verbose_eval"],
                       callbacks=job["callbacks"], xgb_model=xgb_model, comm=comm)
    if comm.rank != 0:
        return None
    return {"booster": booster.save_raw(), "history": history}


def _load(raw: bytes) -> Booster:
    b = Booster()
    b.load_model(raw)
    return b


# -- the client ------------------------------------------------------------------------------

def _priority(e: BaseException) -> int:
    """Which rank's error explains the failure: its own error first, then a relay of another
    rank's, then a rendezvous failure, then a communication timeout."""
    if isinstance(e, CollectiveError):
        return 3
    if isinstance(e, RendezvousError):
        return 2
    if isinstance(e, RuntimeError) and str(e).startswith(_STOPPED):
        return 1
    return 0


def _collect(client: Any, futures: list[Any], addrs: list[str], timeout: float) -> Any:
    """Rank 0's result, or the error that explains the failure once the other ranks have
    stopped (they stop within `timeout` of a failure; a task still running after that is
    cancelled)."""
    import time

    from distributed import as_completed

    for f in as_completed(futures):
        if f.status != "finished":  # the first failure: stop waiting for the others' results
            break
    if all(f.status == "finished" for f in futures):
        return futures[0].result()
    deadline = time.monotonic() + timeout + 5
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    stuck = [f for f in futures if not f.done()]
    if stuck:
        client.cancel(stuck)
    errors: list[tuple[int, int, BaseException]] = []
    for r, f in enumerate(futures):
        if f.status == "error":
            e = f.exception()
            errors.append((_priority(e), r, e))
        elif f.status == "cancelled" and f not in stuck:
            errors.append((0, r, RuntimeError(
                f"histboost.dask.train: the task of rank {r} on worker {addrs[r]} was lost: "
                "the worker died or left the cluster")))
    if not errors:
        raise RuntimeError(f"histboost.dask.train: the tasks on {len(stuck)} workers did not "
                           "finish (cancelled)")
    _, rank, error = min(errors, key=lambda t: t[:2])
    error.add_note(f"histboost.dask.train: raised by the task on worker {addrs[rank]} (rank "
                   f"{rank} of {len(addrs)})")
    raise error


def train(client: Any, params: dict[str, Any], dtrain: DaskDataset, num_boost_round: int = 10,
          evals: Sequence[tuple[DaskDataset, str]] = (), obj: Callable | None = None,
          early_stopping_rounds: int | None = None, verbose_eval: bool | int = True,
          xgb_model: Booster | str | None = None, callbacks: Sequence[Any] | None = None, *,
          timeout: float = 60.0) -> dict[str, Any]:
    """Train on the rows of a `DaskDataset`, each partition on the worker that holds it.

    Returns ``{"booster": Booster, "history": {eval name: {metric: [value per round]}}}`` as
    ``xgboost.dask.train`` does. `params`, `num_boost_round`, `evals`, `obj`,
    `early_stopping_rounds`, `xgb_model` and `callbacks` are those of `histboost.train`
    (callbacks run on every worker; `verbose_eval` prints in rank 0's worker). ``nthread``
    defaults to each worker's thread count. timeout: seconds any collective step or the
    forming of the process group may wait for another worker before every worker stops with
    an error.

    The cuts are computed from all workers' rows, as one process would on the whole
    collection; the model equals the one-process model on the rows in partition order (in
    quantised mode, bit for bit: see docs/distributed.md), wherever the partitions lie.
    """
    from distributed import Variable

    client = _client(client)
    if not isinstance(dtrain, DaskDataset):
        raise TypeError(f"dtrain must be a histboost.dask.DaskDataset, got "
                        f"{type(dtrain).__name__}")
    if not dtrain.has_label:
        raise ValueError("dtrain has no label")
    if dtrain.num_row() == 0:
        raise ValueError("dtrain has no rows")
    evals = list(evals or ())
    for d, name in evals:
        if not isinstance(d, DaskDataset):
            raise TypeError(f"evals entries must be (DaskDataset, name) pairs, got "
                            f"{type(d).__name__} for {name!r}")
        if not d.has_label:
            raise ValueError(f"eval set {name!r} has no label")
        if d.n_features != dtrain.n_features:
            raise ValueError(f"eval set {name!r} has {d.n_features} features, dtrain "
                             f"{dtrain.n_features}")
    if early_stopping_rounds is not None and not evals:
        raise ValueError("early_stopping_rounds needs at least one set in evals")
    params = dict(params or {})
    parse_params(params)  # bad parameters raise here, before any task starts
    placement = _place(_holders(client, dtrain.parts), dtrain.rows)
    addrs = sorted(set(placement.values()))
    world = len(addrs)
    rank_of = {a: r for r, a in enumerate(addrs)}
    offsets = np.concatenate([[0], np.cumsum(dtrain.rows)])
    parts: list[list[Any]] = [[] for _ in addrs]
    spans: list[list[tuple[int, int]]] = [[] for _ in addrs]
    for i in sorted(placement):
        r = rank_of[placement[i]]
        parts[r].append(dtrain.parts[i])
        spans[r].append((int(offsets[i]), int(dtrain.rows[i])))
    eval_parts: list[list[tuple[list[Any] | None, str]]] = [[] for _ in addrs]
    for d, name in evals:
        per_rank = [None] * world if d is dtrain else _place_eval(client, d, addrs, name)
        for r in range(world):
            eval_parts[r].append((per_rank[r], name))
    if xgb_model is not None and not isinstance(xgb_model, Booster):
        xgb_model = Booster(model_file=xgb_model)
    job = {"params": params, "num_boost_round": int(num_boost_round), "obj": obj,
           "early_stopping_rounds": early_stopping_rounds, "verbose_eval": verbose_eval,
           "callbacks": list(callbacks) if callbacks else None,
           "xgb_model": None if xgb_model is None else xgb_model.save_raw(),
           "feature_names": dtrain.feature_names, "max_bin": dtrain.max_bin,
           "categorical_features": dtrain.categorical_features,
           "unstored": dtrain.unstored, "timeout": float(timeout)}
    token = uuid.uuid4().hex
    rdzv = f"histboost-rendezvous-{token}"
    host = _host(addrs[0])
    futures = [client.submit(_train_task, job, r, world, host, rdzv, parts[r], spans[r],
                             eval_parts[r], workers=[a], allow_other_workers=False,
                             pure=False, key=f"histboost-train-{token}-rank{r}")
               for r, a in enumerate(addrs)]
    try:
        out = _collect(client, futures, addrs, float(timeout))
    finally:
        try:
            Variable(rdzv, client=client).delete()
        except Exception:  # noqa: S110 - best effort clean-up of the scheduler's state
            pass
    return {"booster": _load(out["booster"]), "history": out["history"]}


def _host(addr: str) -> str:
    """The host of a worker address such as tcp://10.0.0.5:4321 or tcp://[::1]:4321."""
    hostport = addr.split("://", 1)[-1]
    host = hostport.rsplit(":", 1)[0]
    return host.strip("[]")


# -- prediction ------------------------------------------------------------------------------

_BOOSTERS: OrderedDict[bytes, Booster] = OrderedDict()
_BOOSTERS_LOCK = threading.Lock()


def _cached_booster(raw: bytes) -> Booster:
    """The model of `raw` (JSON bytes), loaded once per worker process (a few kept)."""
    key = hashlib.sha256(raw).digest()
    with _BOOSTERS_LOCK:
        b = _BOOSTERS.get(key)
        if b is None:
            b = _load(raw)
            b._packed()  # build the packed forest once, not concurrently in each thread
            _BOOSTERS[key] = b
            while len(_BOOSTERS) > 4:
                _BOOSTERS.popitem(last=False)
        else:
            _BOOSTERS.move_to_end(key)
        return b


def _values(booster: Booster, X: Any, output_margin: bool = False,
            iteration_range: tuple[int, int] | None = None) -> np.ndarray:
    return booster.predict(X, output_margin=output_margin, iteration_range=iteration_range)


def _predict_block(X: Any, raw: bytes, fn: Callable) -> np.ndarray:
    return fn(_cached_booster(raw), X)


def _predict_frame(df: Any, raw: bytes, fn: Callable, width: int | None) -> Any:
    import pandas as pd

    out = fn(_cached_booster(raw), df)
    if width is None:
        return pd.Series(out, index=df.index)
    return pd.DataFrame(out, index=df.index, columns=list(range(width)))


def _predict_parts(client: Any, booster: Booster, data: Any, fn: Callable, width: int | None,
                   dtype: Any) -> Any:
    """`fn(booster, partition)` on every partition on the workers: a Dask array (n,) or
    (n, width) for array input, a Series or DataFrame with the data's index for DataFrame
    input."""
    if isinstance(data, DaskDataset):
        data = data.data
    import dask

    # one key in the graph holding the model (the same key for the same model): it travels
    # once to each worker that predicts, and lives as long as the collection's graph
    raw = dask.delayed(booster.save_raw(), pure=True)
    dtype = np.dtype(dtype)
    if _is_dask_array(data):
        if data.ndim != 2:
            raise ValueError(f"data must be 2-D, got {data.ndim}-D")
        data = data.rechunk({1: -1})
        if width is None:
            return data.map_blocks(_predict_block, raw, fn, drop_axis=1, dtype=dtype,
                                   meta=np.empty(0, dtype))
        return data.map_blocks(_predict_block, raw, fn, chunks=(data.chunks[0], (width,)),
                               dtype=dtype, meta=np.empty((0, 0), dtype))
    if _is_dask_frame(data):
        import pandas as pd

        meta = (pd.Series([], dtype=dtype) if width is None else
                pd.DataFrame({c: pd.Series([], dtype=dtype) for c in range(width)}))
        return data.map_partitions(_predict_frame, raw, fn, width, meta=meta)
    raise TypeError(f"data must be a Dask array, DataFrame or DaskDataset, got "
                    f"{type(data).__name__}")


def predict(client: Any, model: Booster | dict[str, Any], data: Any,
            output_margin: bool = False,
            iteration_range: tuple[int, int] | None = None) -> Any:
    """Predict with `model` (a Booster, or the dict `train` returns) on every partition of
    `data` (Dask array, DataFrame or `DaskDataset`) on the workers that hold it, lazily: a Dask
    array for array input, a Dask Series (DataFrame for several outputs) with the data's
    index for DataFrame input. Values as `Booster.predict`."""
    client = _client(client)
    booster = model["booster"] if isinstance(model, dict) else model
    if not isinstance(booster, Booster):
        raise TypeError(f"model must be a Booster or train()'s result, got "
                        f"{type(booster).__name__}")
    fn = partial(_values, output_margin=output_margin, iteration_range=iteration_range)
    probe = fn(booster, _probe_row(booster))
    return _predict_parts(client, booster, data, fn, None if probe.ndim == 1 else
                          probe.shape[1], np.float64)


def _probe_row(booster: Booster) -> Any:
    """One row of input the model predicts (to learn the output's width): zeros, or for a
    model with categorical features a frame of its input columns, the categorical ones
    missing."""
    cat = booster.categorical
    if cat is None:
        return np.zeros((1, booster.n_features))
    import pandas as pd

    return pd.DataFrame({name: [None] if i in cat.positions else [0.0]
                         for i, name in enumerate(cat.input_names)})
