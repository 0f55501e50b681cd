"""Distributed training benchmark: time per round and bytes reduced per tree on 1, 2, 4...
processes, for both tree learners, on `higgs_like` (shared/bench/synth.py).

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
``taskset -c 0,1 python bench/distributed.py`` measures two cores).
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


def worker(args: argparse.Namespace) -> None:
    """One rank: its block of the rows, one warm-up round, then the timed rounds."""
    from _common import auc, synth

    import histboost as hb
    import histboost.collective as hc

    comm = hc.init(timeout=600)
    rank, world = comm.rank, comm.world_size
    if args.device == "cuda":
        import torch

        gpus = max(torch.cuda.device_count(), 1)
        device = f"cuda:{rank % gpus}"
    else:
        device = "cpu"
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
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    booster = hb.train(params, d, args.rounds, comm=comm)
    seconds = time.perf_counter() - start
    timings = dict(booster.timings, cpu=_cpu_seconds() - cpu_start,
                   calls=booster.collective_calls or 0)
    Path(f"{args.result}.{rank}").write_text(json.dumps(timings))
    if rank == 0:
        model = booster.save_raw()
        sha = hashlib.sha256(json.dumps(json.loads(model)["trees"]).encode()).hexdigest()
        result = {"seconds": seconds, "auc": auc(yt, booster.predict(Xt)),
                  "traffic": booster.traffic, "timings": booster.timings, "model_sha": sha}
        Path(args.result).write_text(json.dumps(result))
    comm.close()


def launch(args: argparse.Namespace, world: int, learner: str, threads: int) -> dict:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--worker", "--rows", str(args.rows), "--test-rows",
               str(args.test_rows), "--rounds", str(args.rounds), "--depth", str(args.depth),
               "--learner", learner, "--threads", str(threads), "--device", args.device,
               "--result", str(result)] + ([] if args.quantized else ["--float"])
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
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--learner", default="data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    cores = len(os.sched_getaffinity(0))  # the cores this run may use (taskset)
    print(f"higgs_like {args.rows} x 28 (+{args.test_rows} test), {args.rounds} rounds, "
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
    print("\n| learner | processes | threads each | ms/round | CPU ms/round (all processes) | "
          "speed-up vs 1 | MiB sent/tree (rank 0) | test AUC | model = 1 process |")
    print("|---|---|---|---|---|---|---|---|---|")
    for learner, world, threads, ms, cpu, speed, mib, a, same in rows:
        print(f"| {learner} | {world} | {threads} | {ms:.1f} | {cpu:.1f} | {speed:.2f} | "
              f"{mib:.2f} | {a:.5f} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
