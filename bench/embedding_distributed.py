"""Multi-GPU benchmark of `DistributedHashEmbeddingBag` against one GPU.

One training step = forward + backward + SparseAdam update on a global batch of ``--batch``
samples x ``--slots`` slots (the key distribution of ``bench/embedding.py``: 1-3 keys a slot, a
truncated Zipf law over ``--vocab / slots`` ids a slot, disjoint ids per slot). Every rank
receives the whole batch's CSR (as HugeCTR's reader hands it to every GPU) and gets the pooled
bags of its own block of samples. The same global batch size is timed on 1 GPU (the
single-process `HashEmbeddingBag`) and on each ``--workers`` count for both layouts
(``distributed_slot``, ``localized_slot``), so the speed-up is strong scaling.

Before timing, every configuration checks its results against one process: on ``--check-batch``
samples for ``--check-steps`` steps (with updates in between), rank 0 gathers the ranks' outputs
and compares them with a single-process `HashEmbeddingBag` trained on the same batches
(localized slots must be exactly equal; distributed slots equal to float32 rounding of the
partial sums).

    python bench/embedding_distributed.py --workers 2            # one process per GPU (NCCL)
    python bench/embedding_distributed.py --workers 2 --device cpu --batch 2048 --vocab 100000

Each configuration starts its processes as torchrun would (MASTER_ADDR, RANK, WORLD_SIZE,
LOCAL_RANK on loopback) and forms the group with ``histboost.collective.init()``. Not a timed
test: it prints a table with ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from embedding import make_batches  # noqa: E402

from histboost.embedding import (  # noqa: E402
    DistributedHashEmbeddingBag,
    HashEmbeddingBag,
    SparseAdam,
)

SEED = 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _module(args: argparse.Namespace, comm, mode: str | None, device: torch.device):
    kw = dict(capacity=args.capacity, initializer="normal", seed=SEED, device=device)
    if comm is None:
        return HashEmbeddingBag(args.dim, "sum", **kw)
    return DistributedHashEmbeddingBag(args.dim, comm, mode, "sum", **kw)


def _steps(module, batches, grads, lo: int, hi: int, sync, barrier) -> list[float]:
    """Run one step per batch; returns the wall ms of each (all ranks finished)."""
    opt = SparseAdam(module, lr=0.01)
    times = []
    for (ro, keys, _), g in zip(batches, grads, strict=True):
        sync()
        barrier()
        start = time.perf_counter()
        opt.zero_grad()
        out = module(ro, keys, int(g.shape[1]))
        (out * g[lo:hi]).sum().backward()
        opt.step()
        sync()
        barrier()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _grads(n: int, batch: int, slots: int, dim: int, device: torch.device) -> list:
    gen = torch.Generator(device=device).manual_seed(SEED + 1)
    return [torch.randn(batch, slots, dim, generator=gen, device=device) for _ in range(n)]


def check(args: argparse.Namespace, comm, mode: str, device: torch.device) -> dict:
    """Outputs of ``--check-steps`` trained steps against one process on the same batches."""
    batches = make_batches(args.check_steps, args.check_batch, args.slots, args.vocab, args.zipf,
                           device, seed=1)
    grads = _grads(args.check_steps, args.check_batch, args.slots, args.dim, device)
    dmod = _module(args, comm, mode, device)
    lo, hi = dmod.sample_range(args.check_batch)
    ref = _module(args, None, None, device) if comm.rank == 0 else None
    dopt = SparseAdam(dmod, lr=0.01)
    ropt = SparseAdam(ref, lr=0.01) if ref is not None else None
    worst = 0.0
    for (ro, keys, _), g in zip(batches, grads, strict=True):
        dopt.zero_grad()
        out = dmod(ro, keys, args.slots)
        (out * g[lo:hi]).sum().backward()
        dopt.step()
        whole = comm.allgather(out.detach().contiguous())
        if ref is not None:
            ropt.zero_grad()
            want = ref(ro, keys, args.slots)
            (want * g).sum().backward()
            ropt.step()
            worst = max(worst, float((whole - want.detach()).abs().max()))
    return {"max_abs_diff": worst}


def worker(args: argparse.Namespace) -> None:
    import histboost.collective as hc

    comm = hc.init(timeout=600)
    if args.device == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    world = comm.world_size

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    barrier = comm.barrier if world > 1 else (lambda: None)
    result = {}
    if world > 1:
        result["check"] = check(args, comm, args.mode, device)
    n = args.warmup + args.steps
    batches = make_batches(n, args.batch, args.slots, args.vocab, args.zipf, device)
    grads = _grads(n, args.batch, args.slots, args.dim, device)
    module = _module(args, comm if world > 1 else None, args.mode, device)
    lo, hi = module.sample_range(args.batch) if world > 1 else (0, args.batch)
    times = _steps(module, batches, grads, lo, hi, sync, barrier)[args.warmup:]
    if device.type == "cuda":
        result["peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    result["ms"] = statistics.median(times)
    if comm.rank == 0:
        Path(args.result).write_text(json.dumps(result))
    comm.close()


def launch(args: argparse.Namespace, world: int, mode: str) -> dict:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--worker", "--mode", mode, "--result", str(result)]
        for name in ("device", "batch", "slots", "dim", "vocab", "zipf", "capacity", "warmup",
                     "steps", "check_batch", "check_steps"):
            cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        procs = []
        for rank in range(world):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(world))
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"{world} workers ({mode}) failed: exit codes {codes}")
        return json.loads(result.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    choices=["cpu", "cuda"])
    ap.add_argument("--workers", default="2")
    ap.add_argument("--modes", default="distributed_slot,localized_slot")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--slots", type=int, default=26)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=10_000_000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--capacity", type=int, default=1 << 23, help="table rows per rank")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--check-batch", type=int, default=4096)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="distributed_slot", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    print(f"batch {args.batch} x {args.slots} slots, dim {args.dim}, vocab {args.vocab}, "
          f"device {args.device} ({gpus} GPUs)", flush=True)
    one = launch(args, 1, "distributed_slot")
    rows = [("one process (HashEmbeddingBag)", 1, one["ms"], 1.0, one.get("peak_mb"), "-")]
    for mode in args.modes.split(","):
        for world in (int(w) for w in args.workers.split(",")):
            if args.device == "cuda" and world > gpus:
                print(f"  skipped {mode} x{world}: {gpus} GPUs", flush=True)
                continue
            r = launch(args, world, mode)
            rows.append((mode, world, r["ms"], one["ms"] / r["ms"], r.get("peak_mb"),
                         f"{r['check']['max_abs_diff']:.2e}"))
            print(f"  done: {mode} x{world}: {r['ms']:.2f} ms/step", flush=True)
    print("\n| layout | GPUs/processes | ms/step (median) | speed-up vs 1 | peak MB (rank 0) | "
          "max |out - one process| |")
    print("|---|---|---|---|---|---|")
    for mode, world, ms, speed, peak, diff in rows:
        peak_s = f"{peak:.0f}" if peak is not None else "-"
        print(f"| {mode} | {world} | {ms:.2f} | {speed:.2f} | {peak_s} | {diff} |")


if __name__ == "__main__":
    main()
