"""Distributed training benchmark: time per round and bytes reduced per tree on 1, 2, 4...
processes, for both tree learners, on `higgs_like` (shared/bench/synth.py; `--data sparse`:
`sparse_like` CSR rows).

    python bench/distributed.py                                  # CPU: 1, 2, 4 processes
    python bench/distributed.py --rows 2000000 --workers 1,2 --threads 8
    python bench/distributed.py --device cuda --workers 1,2      # one process per GPU (NCCL;
                                                                 # Gloo when GPUs are fewer)

Each configuration launches its processes as torchrun would (MASTER_ADDR, RANK, WORLD_SIZE on
loopback); every process generates the same data, keeps its block of rows and trains with
``comm=histboost.collective.init()``. Rank 0 reports the time of the boosting loop (after one
warm-up round that compiles the kernels), the test AUC, the bytes this rank passed to the
collectives per tree, and whether the model equals the one-process model (quantised mode, JSON
equal). CPU processes split the cores the run may use (``--threads`` each, default cores / workers;
``taskset -c 0,1 python bench/distributed.py`` measures two cores). ``--trace`` prints, per
kind of collective, where the ranks' time goes (`trace_table`: compute, the slower rank's lead,
wake-up, copies); ``--profile`` writes each rank's cProfile in CPU time.
Not a timed test: it prints a table with the ratio to one process measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds() -> float:
    """CPU time of this process, all its threads (user + system)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


class Trace:
    """Per collective of the tree learner on this rank: perf_counter (CLOCK_MONOTONIC, one
    clock for all processes of a host) at entry, at the shared-memory barriers' entry and
    exit (first entry, last exit) and at return, and this thread's CPU seconds at entry and
    return. Installed by wrapping `DistributedBackend._collective` and `SharedSegment.barrier`
    (the bench's own instrument, not the library's)."""

    def __init__(self) -> None:
        from histboost.collective.shm import SharedSegment
        from histboost.distributed.backend import DistributedBackend, _nbytes

        self.rows: list[list[float]] = []
        self.on = False
        self._open: list[float] | None = None
        trace = self
        collective, barrier = DistributedBackend._collective, SharedSegment.barrier

        def traced_collective(backend, call, *a, **kw):
            if not trace.on:
                return collective(backend, call, *a, **kw)
            row = [time.perf_counter(), 0.0, 0.0, 0.0, time.thread_time(), 0.0,
                   call.__name__, _nbytes(a[0])]
            trace._open = row
            try:
                return collective(backend, call, *a, **kw)
            finally:
                row[3], row[5] = time.perf_counter(), time.thread_time()
                trace._open = None
                trace.rows.append(row)

        def traced_barrier(segment, ctx):
            row = trace._open
            if row is not None and not row[1]:
                row[1] = time.perf_counter()
            barrier(segment, ctx)
            if row is not None:
                row[2] = time.perf_counter()

        DistributedBackend._collective = traced_collective
        SharedSegment.barrier = traced_barrier


def worker(args: argparse.Namespace) -> None:
    """One rank: its block of the rows, one warm-up round, then the timed rounds."""
    from _common import auc, synth

    import histboost as hb
    import histboost.collective as hc

    trace = Trace() if args.trace else None
    comm = hc.init(timeout=600)
    rank, world = comm.rank, comm.world_size
    if args.device == "cuda":
        import torch

        gpus = max(torch.cuda.device_count(), 1)
        device = f"cuda:{rank % gpus}"
    else:
        device = "cpu"
    if args.data == "sparse":
        X, y = synth().sparse_like(args.rows + args.test_rows, seed=0, n_features=args.cols)
    else:
        X, y = synth().higgs_like(args.rows + args.test_rows, seed=0)
    Xt, yt = X[args.rows:], y[args.rows:]
    X, y = X[:args.rows], y[:args.rows]
    block = np.array_split(np.arange(args.rows), world)[rank]
    # no reference: train() computes the cuts of all ranks' rows (one process's cuts)
    d = hb.Dataset(X[block[0]:block[-1] + 1], label=y[block[0]:block[-1] + 1])
    params = {"objective": "binary:logistic", "max_depth": args.depth, "max_bin": 256,
              "learning_rate": 0.1, "quantized_grad": args.quantized, "nthread": args.threads,
              "tree_learner": args.learner, "device": device, "seed": 0}
    hb.train(params, d, 1, comm=comm)  # compile, warm the caches
    comm.barrier()
    if trace is not None:
        trace.on = True
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile(time.process_time)  # CPU time: this host may be busy
        profile.enable()
    start, cpu_start, thread_start = time.perf_counter(), _cpu_seconds(), time.thread_time()
    booster = hb.train(params, d, args.rounds, comm=comm)
    seconds = time.perf_counter() - start
    if profile is not None:
        profile.disable()
        profile.dump_stats(f"{args.profile}.{world}.{rank}")
    timings = dict(booster.timings, cpu=_cpu_seconds() - cpu_start,
                   calls=booster.collective_calls or 0)
    if trace is not None:
        timings["trace"] = [[start, 0, 0, start, 0, thread_start, "start", 0], *trace.rows]
    Path(f"{args.result}.{rank}").write_text(json.dumps(timings))
    if rank == 0:
        model = booster.save_raw()
        sha = hashlib.sha256(json.dumps(json.loads(model)["trees"]).encode()).hexdigest()
        result = {"seconds": seconds, "auc": auc(yt, booster.predict(Xt)),
                  "traffic": booster.traffic, "timings": booster.timings, "model_sha": sha}
        Path(args.result).write_text(json.dumps(result))
    comm.close()


def trace_table(rank_timings: list[dict], rounds: int) -> str:
    """Where the tree learner's collectives spend their time, from every rank's `Trace`, per
    kind of call, in ms per round (means over ranks): compute before (wall and this thread's
    CPU since the rank's previous collective returned, and the CPU the slowest rank spent
    more: the lag on dedicated cores), entry (to the first barrier: copies
    into the shared stage, Python), lag (first barrier entry to the last rank's: waiting for
    the slower rank, the load imbalance), wake (the last rank's arrival to this rank's
    release: transport latency), after (release to return: folds, copies out) and the CPU
    of the calls."""
    traces = [t["trace"] for t in rank_timings]
    world = len(traces)
    kinds: dict[str, np.ndarray] = {}
    for i in range(1, min(len(t) for t in traces)):
        rows = [t[i] for t in traces]
        last_in = max(r[1] or r[0] for r in rows)
        cpu = [r[4] - t[i - 1][5] for r, t in zip(rows, traces, strict=True)]
        for q, r in enumerate(rows):
            prev = traces[q][i - 1]
            b_in, b_out = r[1] or r[0], r[2] or r[3]
            v = np.array([1, r[7], r[0] - prev[3], cpu[q], max(cpu) - cpu[q], b_in - r[0],
                          last_in - b_in, max(b_out - last_in, 0.0), r[3] - b_out,
                          r[5] - r[4]]) / world / rounds
            kinds[r[6]] = kinds.get(r[6], 0) + v
    lines = ["| call | calls/round | MiB/round | compute before | its CPU | CPU lag | entry | "
             "lag | wake | after | call CPU |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, v in [*sorted(kinds.items()), ("all", sum(kinds.values()))]:
        lines.append(f"| {key} | {v[0]:.1f} | {v[1] / 2**20:.2f} | "
                     + " | ".join(f"{x * 1e3:.2f}" for x in v[2:]) + " |")
    return "\n".join(lines)


def launch(args: argparse.Namespace, world: int, learner: str, threads: int) -> dict:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--worker", "--data", args.data, "--cols",
               str(args.cols), "--rows", str(args.rows), "--test-rows",
               str(args.test_rows), "--rounds", str(args.rounds), "--depth", str(args.depth),
               "--learner", learner, "--threads", str(threads), "--device", args.device,
               "--result", str(result)] + ([] if args.quantized else ["--float"]) \
            + (["--trace"] if args.trace else []) \
            + (["--profile", args.profile] if args.profile else [])
        procs = []
        for rank in range(world):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS=str(threads),
                       # Numba's pool defaults to all the cores the run may use: an idle
                       # worker of a single-thread process then competes with the ranks
                       NUMBA_NUM_THREADS=str(threads))
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"{world} workers ({learner}) failed: exit codes {codes}")
        out = json.loads(result.read_text())
        out["rank_timings"] = [json.loads(Path(f"{result}.{r}").read_text())
                               for r in range(world)]
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="higgs", choices=["higgs", "sparse"],
                    help="higgs_like (28 dense columns) or sparse_like (CSR, --cols columns)")
    ap.add_argument("--cols", type=int, default=10_000, help="columns of sparse_like")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--learners", default="data,reduce_scatter")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads per process (default: cores / workers, at least 1)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--float", dest="quantized", action="store_false",
                    help="float gradients (default: quantised, where models must match)")
    ap.add_argument("--trace", action="store_true",
                    help="print where each kind of collective spends its time (trace_table)")
    ap.add_argument("--profile", help="cProfile (CPU time) of each rank's timed run, written "
                    "to PROFILE.<processes>.<rank>")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--learner", default="data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    cores = len(os.sched_getaffinity(0))  # the cores this run may use (taskset)
    shape = f"sparse_like {args.rows} x {args.cols}" if args.data == "sparse" \
        else f"higgs_like {args.rows} x 28"
    print(f"{shape} (+{args.test_rows} test), {args.rounds} rounds, "
          f"depth {args.depth}, {'quantised' if args.quantized else 'float'} gradients, "
          f"device {args.device}, {cores} cores", flush=True)
    rows = []
    base: dict[str, dict] = {}
    for learner in args.learners.split(","):
        for world in (int(w) for w in args.workers.split(",")):
            threads = args.threads or max(1, cores // world)
            r = launch(args, world, learner, threads)
            base.setdefault(learner, r)
            per_tree = {k: v / args.rounds for k, v in (r["traffic"] or {}).items()}
            cpu = sum(t["cpu"] for t in r["rank_timings"]) / args.rounds * 1e3
            rows.append((learner, world, threads, r["seconds"] / args.rounds * 1e3, cpu,
                         base[learner]["seconds"] / r["seconds"],
                         sum(per_tree.values()) / 2**20, r["auc"],
                         r["model_sha"] == base[learner]["model_sha"]))
            phases = ", ".join(f"{k} {v / args.rounds * 1e3:.1f}"
                               for k, v in sorted(r["timings"].items(), key=lambda kv: -kv[1]))
            waits = ", ".join(f"{t.get('collectives', 0) / args.rounds * 1e3:.1f}"
                              for t in r["rank_timings"])
            calls = r["rank_timings"][0].get("calls", 0) / args.rounds
            print(f"  done: {learner} x{world}; ms/round by phase (rank 0; collectives are "
                  f"within the others): {phases}; in collectives by rank: {waits}; "
                  f"collective calls/round: {calls:.1f}; CPU of all processes {cpu:.1f}",
                  flush=True)
            if args.trace and world > 1:
                print(trace_table(r["rank_timings"], args.rounds), flush=True)
    print("\n| learner | processes | threads each | ms/round | CPU ms/round (all processes) | "
          "speed-up vs 1 | MiB sent/tree (rank 0) | test AUC | model = 1 process |")
    print("|---|---|---|---|---|---|---|---|---|")
    for learner, world, threads, ms, cpu, speed, mib, a, same in rows:
        print(f"| {learner} | {world} | {threads} | {ms:.1f} | {cpu:.1f} | {speed:.2f} | "
              f"{mib:.2f} | {a:.5f} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
