"""What the worker processes of the multi-process tests run (see _coll_harness.py).

``python _coll_scenarios.py SCENARIO OUTDIR``: runs SCENARIOS[SCENARIO]() on this rank and writes
its JSON-able result to OUTDIR/rank{RANK}.json. Every rank can rebuild every rank's input
(seeded by rank), so each checks its own outputs against a NumPy reference locally; output
hashes go back to the test, which compares them across ranks (bit-identical results).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

DTYPES = (np.float64, np.float32, np.int32, np.int64)


def data(rank: int, shape, dtype=np.float64, seed: int = 0) -> np.ndarray:
    """Small integers, so that sums are exact in any order and every algorithm must match the
    reference exactly."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    rng = np.random.default_rng([seed, rank, *shape])
    return rng.integers(-50, 50, size=shape).astype(dtype)


def noisy(rank: int, n: int, dtype=np.float64, seed: int = 7) -> np.ndarray:
    """Non-integer floats: sums depend on order, which exposes non-deterministic algorithms."""
    return np.random.default_rng([seed, rank, n]).standard_normal(n).astype(dtype) * 1e3


def best_record(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mirror of histboost.tree.split.better_split on [gain, feature, bin] rows: higher gain,
    ties to lower feature then lower bin."""
    ka = (-a[0], a[1], a[2])
    kb = (-b[0], b[1], b[2])
    return a if ka <= kb else b


def records(rank: int, n: int) -> np.ndarray:
    rng = np.random.default_rng([11, rank, n])
    rec = np.empty((n, 3))
    rec[:, 0] = rng.integers(0, 3, n)  # few distinct gains: ties are common
    rec[:, 1] = rng.integers(0, 4, n)
    rec[:, 2] = rng.integers(0, 5, n)
    return rec


class Checker:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.failures: list[str] = []
        self.hashes: dict[str, str] = {}
        self.n = 0

    def __call__(self, key: str, got, expected, *, same_on_all: bool = True) -> None:
        self.n += 1
        try:
            g = _to_numpy(got)
            if expected is None:
                ok = got is None
            else:
                e = np.asarray(expected)
                ok = (g is not None and g.dtype == e.dtype and g.shape == e.shape
                      and np.array_equal(g, e, equal_nan=e.dtype.kind in "fc"))
            if not ok:
                self.failures.append(f"{key}: got {_short(g)} expected {_short(expected)}")
            if same_on_all and g is not None:
                self.hashes[key] = hashlib.sha1(np.ascontiguousarray(g).tobytes()).hexdigest()
        except Exception as e:  # a check must never abort the battery
            self.failures.append(f"{key}: check raised {e!r}")

    def run(self, key: str, fn, *args, **kwargs):
        """Call a collective; record an exception as a failure (ranks stay in step only if
        all raise alike, which the test then reports)."""
        try:
            return fn(*args, **kwargs)
        except Exception:
            self.failures.append(f"{key}: raised {traceback.format_exc(limit=3)}")
            raise


def _to_numpy(x):
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _short(x) -> str:
    if x is None:
        return "None"
    a = np.asarray(x)
    return f"{a.dtype}{a.shape} {np.array2string(a.ravel()[:8], threshold=8)}"


def battery(comm) -> dict:
    """Every collective, algorithm and reducer against NumPy, on ``comm``'s world size."""
    import torch

    import histboost.collective as hc

    t0 = time.time()
    p, r = comm.world_size, comm.rank
    check = Checker(r)
    # "shared" where the group shares a memory segment (the shared-memory transport), else it
    # raises before any message (checked below)
    A = {k: [a for a in v if a != "shared" or comm.shares_memory]
         for k, v in hc.ALGORITHMS.items()}
    if not comm.shares_memory:
        try:
            comm.allreduce(np.ones(3), algorithm="shared")
            check.failures.append("shared: no error without a shared segment")
        except ValueError as e:
            check("shared/raises", "shared-memory transport" in str(e), True,
                  same_on_all=False)
    sizes = (0, 1, p + 3, 1000 + p)
    # (op, dtype) pairs: every op on float64, every dtype with sum and max
    combos = [("sum", np.float64), ("max", np.float64), ("min", np.float64)] + [
        (op, dt) for dt in DTYPES[1:] for op in ("sum", "max")]
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}

    def ref(op, n, dt, seed=0):
        xs = [data(q, n, dt, seed) for q in range(p)]
        out = xs[0].copy()
        for x in xs[1:]:
            ufunc[op](out, x, out=out)
        return out

    # --- allreduce / reduce_scatter / reduce: built-in ops --------------------------------
    # sizes 0 and 1 with a few (op, dtype) pairs, the longer ones with all
    small = (("sum", np.float64), ("max", np.float64), ("sum", np.int32))
    cases = [(n, op, dt) for n in sizes for op, dt in combos if n > 1 or (op, dt) in small]
    for n, op, dt in cases:
        x = data(r, n, dt)
        want = ref(op, n, dt)
        # The metadata check doubles small-call latency; its own tests are elsewhere.
        kw = {"op": op, "check_metadata": n == p + 3}
        for alg in A["allreduce"]:
            key = f"allreduce/{alg}/{op}/{np.dtype(dt).name}/{n}"
            check(key, check.run(key, comm.allreduce, x, algorithm=alg, **kw), want)
        for alg in A["reduce_scatter"]:
            key = f"reduce_scatter/{alg}/{op}/{np.dtype(dt).name}/{n}"
            got = check.run(key, comm.reduce_scatter, x, algorithm=alg, **kw)
            check(key, got, np.array_split(want, p)[r], same_on_all=False)
        for alg in A["reduce"]:
            root = (n + len(alg)) % p
            key = f"reduce/{alg}/{op}/{np.dtype(dt).name}/{n}/root{root}"
            got = check.run(key, comm.reduce, x, root=root, algorithm=alg, **kw)
            check(key, got, want if r == root else None, same_on_all=False)
    # --- allreduce with a tail (a tree level's histograms and row counts in one call): the
    # tail rides in the last shared-memory step (several steps with the tests' small stage)
    def with_tail(x, tail, **kw):
        comm.allreduce(x, inplace=True, tail=tail, **kw)
        return np.concatenate([x, tail])

    for n in (0, 5, 1000 + p):
        for op, dt in (("sum", np.int64), ("max", np.float64)):
            want = np.concatenate([ref(op, n, dt), ref(op, 3, dt, seed=5)])
            for alg in A["allreduce"]:
                key = f"allreduce_tail/{alg}/{op}/{np.dtype(dt).name}/{n}"
                got = check.run(key, with_tail, data(r, n, dt), data(r, 3, dt, seed=5),
                                op=op, algorithm=alg, check_metadata=n == 5)
                check(key, got, want)
    # --- reduce_blocks: each rank's block of columns, common columns and a tail, in place;
    # 40 nodes go in several shared-memory steps with the tests' small stage
    for shape, op, dt in (((40, 4 * p + 3, 2), "sum", np.int64),
                          ((3, 2 * p + 1), "max", np.float64), ((0, p + 2, 2), "sum", np.int64)):
        n = shape[1]
        bounds = [(q * n) // p + (q * 7 % 3 if 0 < q < p else 0) for q in range(p + 1)]
        bounds = np.maximum.accumulate(np.minimum(bounds, n)).tolist()
        lo, hi = bounds[r], bounds[r + 1]
        common = (1, min(4, n))
        whole = ref(op, int(np.prod(shape)), dt, seed=2).reshape(shape)
        want_tail = ref(op, 5, dt, seed=4)
        for alg in A["reduce_blocks"] if shape[0] == 40 else ("auto",):
            key = f"reduce_blocks/{alg}/{op}/{shape}"
            x = data(r, int(np.prod(shape)), dt, seed=2).reshape(shape)
            t = data(r, 5, dt, seed=4)
            got = check.run(key, comm.reduce_blocks, x, bounds, op, alg, common=common, tail=t)
            check(key + "/is-input", got is x, True)
            check(key, x[:, lo:hi], whole[:, lo:hi], same_on_all=False)
            check(key + "/common", np.concatenate([x[:, common[0]:common[1]].ravel(), t]),
                  np.concatenate([whole[:, common[0]:common[1]].ravel(), want_tail]))
    # order-sensitive floats: the common columns and the tail are the same bits everywhere
    xn = noisy(r, 6 * (p + 4)).reshape(6, p + 4)
    tn = noisy(r, 3, seed=9)
    whole = sum(noisy(q, 6 * (p + 4)).reshape(6, p + 4) for q in range(p))
    bounds = [(q * (p + 4)) // p for q in range(p + 1)]
    comm.reduce_blocks(xn, bounds, common=(0, 3), tail=tn)
    check("reduce_blocks/noisy/common", np.concatenate([xn[:, :3].ravel(), tn]),
          np.concatenate([xn[:, :3].ravel(), tn]))  # the hash is compared across ranks
    check("reduce_blocks/noisy/close", np.allclose(xn[:, bounds[r]:bounds[r + 1]],
                                                   whole[:, bounds[r]:bounds[r + 1]]), True,
          same_on_all=False)
    # --- allgather (equal and uneven lengths), broadcast -----------------------------------
    for dt in DTYPES:
        name = np.dtype(dt).name
        for n in sizes if dt in (np.float64, np.int32) else sizes[2:]:
            for alg in A["allgather"]:
                key = f"allgather/{alg}/{name}/{n}"
                got = check.run(key, comm.allgather, data(r, n, dt), algorithm=alg)
                check(key, got, np.concatenate([data(q, n, dt) for q in range(p)]))
            if dt not in (np.float64, np.int32) or n == 0:
                continue
            for alg in A["broadcast"]:
                for root in sorted({0, p - 1, p // 2}):
                    key = f"broadcast/{alg}/{name}/{n}/root{root}"
                    got = check.run(key, comm.broadcast, data(r, n, dt), root=root,
                                    algorithm=alg)
                    check(key, got, data(root, n, dt))
    for alg in A["allgather"]:
        # rank q contributes q % 3 rows of shape (2,): some empty, all uneven
        key = f"allgather/{alg}/uneven"
        got = check.run(key, comm.allgather, data(r, (r % 3, 2)), algorithm=alg)
        check(key, got, np.concatenate([data(q, (q % 3, 2)) for q in range(p)]))
    # multi-dimensional blocks: rows of axis 0 are the unit
    x2 = data(r, (p + 2, 3))
    want2 = sum(data(q, (p + 2, 3)) for q in range(p))
    for alg in A["reduce_scatter"]:
        key = f"reduce_scatter/{alg}/2d"
        got = check.run(key, comm.reduce_scatter, x2, algorithm=alg)
        check(key, got, np.array_split(want2, p)[r], same_on_all=False)
    for alg in A["allreduce"]:
        key = f"allreduce/{alg}/2d"
        check(key, check.run(key, comm.allreduce, x2, algorithm=alg), want2)
    check("allgather/0d", comm.allgather(np.float64(r)), np.arange(p, dtype=np.float64))
    # --- user functions ---------------------------------------------------------------------
    non_native = [a for a in A["allreduce"] if a != "native"]
    for n in (0, 1, p - 1, 2 * p + 1):
        want = records(0, n)
        for q in range(1, p):
            other = records(q, n)
            for i in range(n):
                want[i] = best_record(want[i], other[i])
        for alg in non_native:
            key = f"allreduce/{alg}/records/{n}"
            check(key, check.run(key, comm.allreduce, records(r, n), op=best_record,
                                 algorithm=alg), want)
        for alg in [a for a in A["reduce_scatter"] if a != "native"]:
            key = f"reduce_scatter/{alg}/records/{n}"
            got = check.run(key, comm.reduce_scatter, records(r, n), op=best_record,
                            algorithm=alg)
            check(key, got, np.array_split(want, p)[r], same_on_all=False)
        for alg in [a for a in A["reduce"] if a != "native"]:
            key = f"reduce/{alg}/records/{n}"
            got = check.run(key, comm.reduce, records(r, n), root=p - 1, op=best_record,
                            algorithm=alg)
            check(key, got, want if r == p - 1 else None, same_on_all=False)
    one = records(r, 1)[0]  # a single (3,) record: the whole 1-d array is the record
    want_one = records(0, 1)[0]
    for q in range(1, p):
        want_one = best_record(want_one, records(q, 1)[0])
    for alg in non_native:
        key = f"allreduce/{alg}/one-record"
        check(key, check.run(key, comm.allreduce, one, op=best_record, algorithm=alg), want_one)
    key = "reduce_scatter/one-record"
    got = check.run(key, comm.reduce_scatter, one, op=best_record)
    check(key, got, np.array_split(want_one, p)[r], same_on_all=False)
    n = 3 * p + 2
    for alg in non_native:
        key = f"allreduce/{alg}/callable-max/{n}"
        check(key, check.run(key, comm.allreduce, data(r, n), op=lambda a, b: np.maximum(a, b),
                             algorithm=alg), ref("max", n, np.float64))
        key = f"allreduce/{alg}/elementwise-add/{n}"
        check(key, check.run(key, comm.allreduce, data(r, n), op=hc.elementwise(np.add),
                             algorithm=alg), ref("sum", n, np.float64))
    # structured records travel as bytes
    st = np.dtype([("gain", "f8"), ("feature", "i4")])
    n = p + 2

    def struct_in(q):
        s = np.zeros(n, st)
        s["gain"] = data(q, n)
        s["feature"] = q
        return s

    def pick(a, b):
        return a if (a["gain"], -a["feature"]) >= (b["gain"], -b["feature"]) else b

    want_s = struct_in(0)
    for q in range(1, p):
        o = struct_in(q)
        for i in range(n):
            want_s[i] = pick(want_s[i], o[i])
    for alg in non_native:
        key = f"allreduce/{alg}/structured"
        check(key, check.run(key, comm.allreduce, struct_in(r), op=pick, algorithm=alg), want_s)
    key = "allgather/structured"
    check(key, comm.allgather(struct_in(r)), np.concatenate([struct_in(q) for q in range(p)]))
    # histboost's own best-split reducer
    try:
        from histboost.tree.split import REC_FEATURE, REC_GAIN, REC_WIDTH, better_split
    except Exception:  # the tree package is optional for this battery
        better_split = None
    if better_split is not None:
        def split_recs(q):
            rec = np.zeros((4, REC_WIDTH))
            rec[:, REC_GAIN] = np.arange(4) % 2 + (q % 2)
            rec[:, REC_FEATURE] = (q * 7) % 5
            return rec
        want_b = split_recs(0)
        for q in range(1, p):
            for i in range(4):
                want_b[i] = better_split(want_b[i], split_recs(q)[i])
        check("allreduce/better_split", comm.allreduce(split_recs(r), op=better_split), want_b)
        check("allreduce/better_split/one", comm.allreduce(split_recs(r)[1], op=better_split),
              want_b[1])
    # --- torch tensors, in-place, metadata check off ---------------------------------------
    x = torch.from_numpy(data(r, 37))
    want = ref("sum", 37, np.float64)
    for alg in ("native", "ring", "auto"):
        got = comm.allreduce(x, algorithm=alg)
        check(f"torch/allreduce/{alg}", got, want)
        check(f"torch/allreduce/{alg}/type", isinstance(got, torch.Tensor), True)
    check("torch/allgather", comm.allgather(torch.from_numpy(data(r, 5))),
          np.concatenate([data(q, 5) for q in range(p)]))
    check("torch/reduce_scatter", comm.reduce_scatter(x), np.array_split(want, p)[r],
          same_on_all=False)
    check("torch/broadcast", comm.broadcast(torch.from_numpy(data(r, 9)), root=p - 1),
          data(p - 1, 9))
    check("torch/bfloat16", comm.allreduce(torch.ones(5, dtype=torch.bfloat16)).float(),
          np.full(5, p, np.float32))
    y = data(r, 50)
    out = comm.allreduce(y, algorithm="ring", inplace=True)
    check("inplace/allreduce", out, ref("sum", 50, np.float64))
    check("inplace/allreduce/is-input", out is y, True)
    b = data(r, 20)
    comm.broadcast(b, root=0, inplace=True)
    check("inplace/broadcast", b, data(0, 20))
    for alg in A["allreduce"]:
        key = f"unchecked/allreduce/{alg}"
        check(key, comm.allreduce(data(r, 11), algorithm=alg, check_metadata=False),
              ref("sum", 11, np.float64))
    check("unchecked/allgather", comm.allgather(data(r, 4), check_metadata=False),
          np.concatenate([data(q, 4) for q in range(p)]))
    for alg in A["allreduce"]:  # "trust": no exchange before the data
        check(f"trusted/allreduce/{alg}",
              comm.allreduce(data(r, 11), algorithm=alg, check_metadata="trust"),
              ref("sum", 11, np.float64))
    check("trusted/allgather", comm.allgather(data(r, 4), check_metadata="trust"),
          np.concatenate([data(q, 4) for q in range(p)]))
    # --- a larger buffer (1 MiB of float32, uneven blocks) ---------------------------------
    big = (1 << 18) + 3
    xb = data(r, big, np.float32, seed=3)
    want = ref("sum", big, np.float32, seed=3)
    for alg in A["allreduce"]:
        check(f"large/allreduce/{alg}", comm.allreduce(xb, algorithm=alg), want)
    for alg in A["reduce_scatter"]:
        check(f"large/reduce_scatter/{alg}", comm.reduce_scatter(xb, algorithm=alg),
              np.array_split(want, p)[r], same_on_all=False)
    for alg in A["allgather"]:
        got = comm.allgather(xb[: big // p], algorithm=alg)
        check(f"large/allgather/{alg}", got,
              np.concatenate([data(q, big, np.float32, 3)[: big // p] for q in range(p)]))
    for alg in A["broadcast"]:
        check(f"large/broadcast/{alg}", comm.broadcast(xb, root=p // 2, algorithm=alg),
              data(p // 2, big, np.float32, 3))
    for alg in A["reduce"]:
        got = comm.reduce(xb, root=0, algorithm=alg)
        check(f"large/reduce/{alg}", got, want if r == 0 else None, same_on_all=False)
    # --- alltoall: rows (r, d, i) from every rank r to every rank d, uneven and empty -------
    for rows in (0, 2, 700):
        def counts_of(q, rows=rows):
            return [(q + 2 * d) % 3 * rows // 2 for d in range(p)]

        def block(q, d, counts_of=counts_of):
            n = counts_of(q)[d]
            return np.column_stack([np.full(n, q), np.full(n, d), np.arange(n)]).astype(
                np.int64)

        x = np.concatenate([block(r, d) for d in range(p)]).reshape(-1, 3)
        for alg in A["alltoall"]:
            got, received = comm.alltoall(x, counts_of(r), algorithm=alg)
            want = np.concatenate([block(q, r) for q in range(p)]).reshape(-1, 3)
            check(f"alltoall/{alg}/{rows}", got, want, same_on_all=False)
            check(f"alltoall/{alg}/{rows}/counts", received,
                  np.array([counts_of(q)[r] for q in range(p)]), same_on_all=False)
    # --- determinism: order-sensitive floats, same bits on every rank and every rerun -------
    for n in (5, 4099):
        xn = noisy(r, n)
        for alg in A["allreduce"]:
            first = comm.allreduce(xn, algorithm=alg)
            again = comm.allreduce(xn, algorithm=alg)
            check(f"determinism/{alg}/{n}", again, first)  # hash compared across ranks too
            close = np.allclose(first, sum(noisy(q, n) for q in range(p)), rtol=1e-12,
                                atol=1e-9)
            check(f"determinism/{alg}/{n}/close", close, True, same_on_all=False)
    comm.barrier()
    return {"failures": check.failures[:40], "n_failures": len(check.failures),
            "n_checks": check.n, "hashes": check.hashes, "seconds": time.time() - t0}


# Disjoint subgroups that run side by side: every world size 1..9 within one 9-rank launch.
ROUNDS = [[9], [8, 1], [7, 2], [6, 3], [5, 4]]
# groups of these sizes move CPU arrays through shared memory, the others through Gloo's TCP
# (each transport sees powers of two and other sizes; the world group comes from init())
SHM_SIZES = (9, 7, 5, 3, 2)


def transport_name(comm) -> str:
    """"shm" or "gloo": what carries the CPU messages of ``comm``'s algorithms."""
    name = type(comm.transport).__name__
    return {"ShmTransport": "shm", "TorchTransport": "gloo"}.get(name, name)


def battery_all() -> dict:
    """One launch of 9 ranks: the battery on the whole group (made by init() from the
    torchrun-style environment: shared memory) and on subgroups of every size 1..8
    (from_process_group, so group ranks differ from global ranks; shared memory or Gloo by
    SHM_SIZES). Records each group's transport, and whether its shared-memory file is gone."""
    import torch.distributed as dist

    import histboost.collective as hc

    world = hc.init(timeout=120)
    assert world.world_size == 9, "battery_all runs on 9 ranks"
    r = world.rank
    out: dict[str, dict] = {}
    transports = {"9": transport_name(world)}
    prefers_native = {"9": world.prefers_native(np.zeros(3))}
    shm_files = [getattr(world.transport, "path", None)]
    plan = []  # every rank creates every group, in the same order
    for sizes in ROUNDS[1:]:
        start = 0
        for k in sizes:
            ranks = list(range(start, start + k))
            plan.append((k, ranks, dist.new_group(ranks, backend="gloo")))
            start += k
    out["9"] = battery(world)
    for k, ranks, pg in plan:
        if r in ranks:
            comm = hc.from_process_group(pg, timeout=120, shm=k in SHM_SIZES)
            assert comm.world_size == k and comm.rank == ranks.index(r)
            transports[str(k)] = transport_name(comm)
            prefers_native[str(k)] = comm.prefers_native(np.zeros(3))
            shm_files.append(getattr(comm.transport, "path", None))
            res = battery(comm)
            res["group_rank"] = comm.rank
            out[str(k)] = res
            comm.close()
        if ranks[-1] == 8:  # the round's last group: wait for the whole round
            world.barrier(timeout=600)
    world.close()
    out["transports"] = transports
    out["prefers_native"] = prefers_native
    out["shm_left"] = [f for f in shm_files if f is not None and os.path.exists(f)]
    out["shm_created_left"] = own_shm_files()
    return out


def own_shm_files() -> list[str]:
    """The shared-memory files this process created that still exist."""
    from histboost.collective.shm import FILE_PREFIX, SHM_DIR

    return glob.glob(os.path.join(SHM_DIR, f"{FILE_PREFIX}{os.getpid()}-*"))


# --- fault scenarios ------------------------------------------------------------------------
def _timed(fn):
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e),
                "elapsed": time.monotonic() - t0,
                "is_collective_error": _is_cerr(e), "peer": getattr(e, "peer", None)}
    return {"error": None, "elapsed": time.monotonic() - t0}


def _is_cerr(e) -> bool:
    import histboost.collective as hc

    return isinstance(e, hc.CollectiveError)


def faults() -> dict:
    """All fault cases in one launch of 3 ranks, each on its own process group so that one
    case's broken connections do not touch the next; the world group only synchronises.

    mismatch      disagreeing shapes, dtypes and calls: every rank raises a clear error
                  quickly, and the communicator remains usable (shared memory);
    never_*       the last rank stays alive but never calls: the others time out on time
                  (our algorithms over Gloo and over shared memory, then the native engine);
    exit_*        the last rank exits as if it crashed: the others fail fast, over Gloo and
                  over shared memory (last cases);
    setup_after_exit  rank 0 sets up shared memory with the dead rank: an error, and no file
                  left in /dev/shm.
    Each rank also reports the shared-memory files of its groups that still exist.
    """
    from datetime import timedelta

    import torch.distributed as dist

    import histboost.collective as hc

    timeout = float(os.environ.get("HB_TEST_TIMEOUT", "2"))
    world = hc.init(timeout=60)
    p, r = world.world_size, world.rank
    last = r == p - 1
    groups = {name: dist.new_group(list(range(p)), backend="gloo")
              for name in ("mismatch", "never_algorithms", "never_algorithms_shm",
                           "never_native", "exit_early", "exit_early_shm",
                           "exit_early_shared")}
    # a short engine timeout: a Gloo call with the dead rank ends in seconds
    setup_group = dist.new_group([0, p - 1], backend="gloo", timeout=timedelta(seconds=5))
    out: dict = {"transports": {}}
    files = [getattr(world.transport, "path", None)]

    def make(name: str, shm: bool, timeout: float):
        comm = hc.from_process_group(groups[name], timeout=timeout, shm=shm)
        out["transports"][name] = transport_name(comm)
        files.append(getattr(comm.transport, "path", None))
        return comm

    comm = make("mismatch", True, 20)
    m = out["mismatch"] = {}
    m["shape"] = _timed(lambda: comm.allreduce(np.ones(5 if r == 1 else 4)))
    m["dtype"] = _timed(lambda: comm.allreduce(np.ones(4, np.float32 if r == 0 else
                                                       np.float64)))
    m["rs_shape"] = _timed(lambda: comm.reduce_scatter(np.ones((4, 2 + (r == 2)))))
    m["op"] = _timed(lambda: comm.allreduce(np.ones(4), op="max" if r == 0 else "sum"))
    m["root"] = _timed(lambda: comm.broadcast(np.ones(4), root=r % 2))
    m["out_of_step"] = _timed(lambda: comm.barrier() if r == 0 else comm.allreduce(np.ones(4)))
    # no exchange before the data: the shared-memory step compares sizes itself
    m["trusted_size"] = _timed(lambda: comm.allreduce(np.ones(5 if r == 1 else 4),
                                                      check_metadata="trust"))
    m["trusted_call"] = _timed(lambda: comm.allgather(np.ones(4), check_metadata="trust")
                               if r == 0 else comm.allreduce(np.ones(4), check_metadata="trust"))
    good = comm.allreduce(np.full(3, float(r)))
    m["still_usable"] = bool(np.array_equal(good, np.full(3, p * (p - 1) / 2)))

    for name, alg, shm in (("never_algorithms", "auto", False),
                           ("never_algorithms_shm", "auto", True),
                           ("never_native", "native", False)):
        comm = make(name, shm, 30)
        if not last:
            res = _timed(functools.partial(comm.allreduce, np.ones(10), algorithm=alg,
                                           timeout=timeout, check_metadata=alg != "native"))
            res["timeout"] = timeout
            out[name] = res
        world.barrier(timeout=timeout + 30)  # the silent rank waits here meanwhile

    comms = {name: make(name, name != "exit_early", 20)
             for name in ("exit_early", "exit_early_shm", "exit_early_shared")}
    world.barrier()
    if last:
        sys.stdout.flush()
        os._exit(3)
    time.sleep(0.5)  # let the dead rank's sockets close
    for name, comm in comms.items():
        # over shared memory without the metadata exchange: in the ring rank 1 then waits on
        # rank 0 (which fails waiting on the dead rank 2), not on rank 2 itself
        check = "trust" if name != "exit_early" else True
        alg = "shared" if name == "exit_early_shared" else "ring"
        res = _timed(lambda comm=comm, check=check, alg=alg: comm.allreduce(
            np.ones(1000), algorithm=alg, timeout=10, check_metadata=check))
        res["after"] = _timed(lambda comm=comm: comm.allreduce(np.ones(3)))
        out[name] = res
    if r == 0:
        res = _timed(lambda: hc.from_process_group(setup_group, shm=True))
        res["files"] = own_shm_files()
        out["setup_after_exit"] = res
    out["shm_left"] = [f for f in files if f is not None and os.path.exists(f)]
    out["shm_created_left"] = own_shm_files()
    return out


def unchecked() -> dict:
    """``check_metadata=False`` with data of different sizes on the ranks: every rank must
    raise `MetadataMismatchError` (the size check that stays), not die in Gloo (SIGABRT on a
    message larger than its receive buffer) or return garbage; the communicator stays usable.
    """
    import histboost.collective as hc

    comm = hc.init(timeout=20)
    r = comm.rank
    off = {"check_metadata": False}
    out: dict = {}
    for alg in ("ring", "recursive_doubling", "native", "auto"):
        out[f"allreduce_{alg}"] = _timed(
            lambda alg=alg: comm.allreduce(np.ones(5 if r == 1 else 4), algorithm=alg, **off))
    # the same bytes split into other rows: reduce_scatter's blocks would differ
    out["reduce_scatter_rows"] = _timed(
        lambda: comm.reduce_scatter(np.ones((4, 2) if r == 0 else (2, 4)), **off))
    out["allgather"] = _timed(lambda: comm.allgather(np.ones(3 if r == 2 else 2), **off))
    out["broadcast"] = _timed(lambda: comm.broadcast(np.ones(6 if r == 0 else 7), **off))
    out["reduce_dtype"] = _timed(
        lambda: comm.reduce(np.ones(4, np.float32 if r == 2 else np.float64), **off))
    out["mixed_settings"] = _timed(
        lambda: comm.allreduce(np.ones(4), check_metadata=r != 0))
    # still usable, and an unchecked call of equal sizes is exact (large: chunked messages)
    n = 5000
    got = comm.allreduce(np.arange(n, dtype=np.float64) * (r + 1), **off)
    p = comm.world_size
    out["still_usable"] = bool(np.array_equal(got, np.arange(n) * (p * (p + 1) / 2)))
    return out


SCENARIOS = {
    "battery_all": battery_all,
    "faults": faults,
    "unchecked": unchecked,
}


def main() -> None:
    scenario, outdir = sys.argv[1], Path(sys.argv[2])
    rank = int(os.environ.get("RANK", "0"))
    try:
        import torch

        torch.set_num_threads(1)
        result = SCENARIOS[scenario]()
        code = 0
    except Exception:
        result = {"crash": traceback.format_exc()}
        code = 1
    tmp = outdir / f"rank{rank}.json.tmp"
    tmp.write_text(json.dumps(result, default=str))
    tmp.rename(outdir / f"rank{rank}.json")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: engine threads of a failed group may block it.
    os._exit(code)


if __name__ == "__main__":
    main()
