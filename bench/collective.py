"""Benchmark histboost.collective's algorithms against the engine's native collectives.

CPU (launches its own processes on this host):
    python bench/collective.py [--world-size 2] [--max-mb 64] [--transports shm,tcp] [--out DIR]
    taskset -c 0,1 python bench/collective.py --max-mb 4    # two cores
GPUs (NCCL, one process per GPU):
    torchrun --nproc_per_node=2 bench/collective.py --nccl [--out DIR]

On CPU our algorithms run over each of --transports: ``shm`` (the shared-memory transport,
`histboost.collective.shm`) and ``tcp`` (Gloo's point-to-point messages over loopback);
``native`` is Gloo's own collective. For each collective, size (1 KiB .. --max-mb: the input
per rank; allgather gathers size/p from each rank) and algorithm it prints the bus bandwidth in
GB/s (NCCL's convention, so numbers compare across world sizes and with nccl-tests: allreduce
algbw*2(p-1)/p, reduce_scatter and allgather algbw*(p-1)/p, broadcast algbw), the time ratio of
histboost's best algorithm over each transport to native, and the times in microseconds of
native and of the best over the first transport. Times are the slowest rank's mean over enough
iterations to fill --min-time seconds, the best of --reps interleaved rounds.
Our algorithms run through the public API as the tree learner calls them on its hot path
(``check_metadata="trust"``: no exchange before the data; allreduce and broadcast in place),
plus ``auto+check``, the default call (metadata check, result in a new array); native is
torch.distributed called directly. --nccl first checks every algorithm's result against native.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

COLLECTIVES = ("allreduce", "reduce_scatter", "allgather", "broadcast")
BUS_FACTOR = {
    "allreduce": lambda p: 2 * (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "allgather": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
}


def sizes(max_mb: float) -> list[int]:
    out, s = [], 1024
    while s <= max_mb * (1 << 20):
        out.append(s)
        s *= 4
    return out


def fmt_size(b: int) -> str:
    return f"{b >> 20} MB" if b >= 1 << 20 else f"{b >> 10} KB"


# --- worker ------------------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    import histboost.collective as hc

    torch.set_num_threads(1 if not args.nccl else 4)
    # Set up torch.distributed here (any world size, 1 included), for native calls; hc.init
    # then wraps its default group.
    kwargs = {}
    if args.nccl:
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        kwargs["device_id"] = torch.device("cuda", local)
    dist.init_process_group("cpu:gloo,cuda:nccl" if args.nccl else "gloo", **kwargs)
    comm = hc.init(timeout=120, shm=False)
    p, r = comm.world_size, comm.rank
    # the communicators whose algorithms are measured, by transport label
    comms = {"nccl": comm} if args.nccl else {}
    for name in [] if args.nccl else args.transports.split(","):
        if name == "tcp":
            comms[name] = comm
        elif name == "shm":
            shm = hc.from_process_group(None, timeout=120, shm=True)
            if type(shm.transport).__name__ != "ShmTransport":
                raise SystemExit("the shared-memory transport is not available here")
            comms[name] = shm
        else:
            raise SystemExit(f"unknown transport {name!r}; choose from shm, tcp")
    dev = torch.device(f"cuda:{torch.cuda.current_device()}") if args.nccl else "cpu"

    def sync() -> None:
        if args.nccl:
            torch.cuda.synchronize()

    def slowest(t: float) -> float:
        x = torch.tensor([t], dtype=torch.float64)  # CPU: Gloo in both modes
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        return float(x)

    def timeit(fn) -> float:
        """Mean seconds per call on the slowest rank; every rank runs the same number of
        iterations (agreed from a timed trial call), or the collectives would not pair up."""
        fn()
        sync()
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        sync()
        trial = slowest(time.perf_counter() - t0)
        iters = int(min(max(args.min_time / max(trial, 1e-6), 1), args.max_iters))
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        return slowest((time.perf_counter() - t0) / iters)

    A = {k: [a for a in v if a not in ("native", "auto")] for k, v in hc.ALGORITHMS.items()}
    if args.nccl:
        check_nccl(comm, dev, A)
        if r == 0:
            link_bandwidth(args)
        comm.barrier()
        if args.check_only:
            comm.close()
            dist.destroy_process_group()
            return
    results = []
    for nbytes in sizes(args.max_mb):
        for coll in COLLECTIVES:
            x = torch.randn(nbytes // 4, dtype=torch.float32, device=dev)
            fns = {}
            for label, c in comms.items():
                # "shared" needs ranks that share a memory segment (not over Gloo's TCP)
                algs = [a for a in A[coll] if a != "shared" or c.shares_memory]
                moved, native, ours = make_case(c, coll, x, algs)
                fns["native"] = native
                fns.update({f"{a}@{label}" if len(comms) > 1 else a: fn
                            for a, fn in ours.items()})
            row = {"collective": coll, "size": nbytes, "bytes": moved, "world_size": p}
            # Best of --reps interleaved rounds: other load on the machine only adds time.
            for _ in range(args.reps):
                for a, fn in fns.items():
                    row[a] = min(row.get(a, float("inf")), timeit(fn))
            results.append(row)
            if r == 0 and args.verbose:
                print(json.dumps(row), flush=True)
    if r == 0:
        report(results, p, "NCCL" if args.nccl else "Gloo", list(comms), args)
    comm.barrier()
    for c in comms.values():
        c.close()
    comm.close()
    dist.destroy_process_group()


def make_case(comm, coll: str, x, algorithms: list[str]):
    """(bytes moved, native call, {algorithm: our call}) for float32 ``x`` (the input per
    rank)."""
    import torch
    import torch.distributed as dist

    p, n = comm.world_size, x.numel()
    trust = {"check_metadata": "trust"}
    if coll == "allgather":
        inp = x[: max(n // p, 1)]
        out = torch.empty(inp.numel() * p, dtype=x.dtype, device=x.device)
        return (out.numel() * 4, lambda: dist.all_gather_into_tensor(out, inp),
                {a: (lambda a=a: comm.allgather(inp, algorithm=a, **trust))
                 for a in algorithms})
    if coll == "reduce_scatter":
        inp = x[: n - n % p]
        out = torch.empty(inp.numel() // p, dtype=x.dtype, device=x.device)
        return (inp.numel() * 4, lambda: dist.reduce_scatter_tensor(out, inp),
                {a: (lambda a=a: comm.reduce_scatter(inp, algorithm=a, **trust))
                 for a in algorithms})
    if coll == "allreduce":
        ours = {a: (lambda a=a: comm.allreduce(x, algorithm=a, inplace=True, **trust))
                for a in algorithms}
        # the default call: LightGBM's size rule, metadata check on, result in a new array
        ours["auto+check"] = lambda: comm.allreduce(x)
        return n * 4, lambda: dist.all_reduce(x), ours
    return (n * 4, lambda: dist.broadcast(x, src=0),
            {a: (lambda a=a: comm.broadcast(x, algorithm=a, inplace=True, **trust))
             for a in algorithms})


def check_nccl(comm, dev, A) -> None:
    """Every algorithm against native NCCL on random data (sum of integers: exact), plus a
    CuPy round trip when CuPy is there."""
    import torch
    import torch.distributed as dist

    p, r = comm.world_size, comm.rank
    bad = []
    for n in (1, 7, 1000, (1 << 20) + 3):
        g = torch.Generator(device="cpu").manual_seed(r * 7919 + n)
        x = torch.randint(-50, 50, (n,), generator=g).float().to(dev)
        ref = x.clone()
        dist.all_reduce(ref)
        for a in [*A["allreduce"], "native", "auto"]:
            if not torch.equal(comm.allreduce(x, algorithm=a), ref):
                bad.append(f"allreduce/{a}/{n}")
        for a in [*A["reduce_scatter"], "native"]:
            blocks = torch.tensor_split(ref, p)
            if not torch.equal(comm.reduce_scatter(x, algorithm=a), blocks[r]):
                bad.append(f"reduce_scatter/{a}/{n}")
        gathered = [torch.empty_like(x) for _ in range(p)]
        dist.all_gather(gathered, x)
        for a in [*A["allgather"], "native"]:
            if not torch.equal(comm.allgather(x, algorithm=a), torch.cat(gathered)):
                bad.append(f"allgather/{a}/{n}")
        for a in [*A["broadcast"], "native"]:
            if not torch.equal(comm.broadcast(x, root=p - 1, algorithm=a), gathered[p - 1]):
                bad.append(f"broadcast/{a}/{n}")
        for a in [*A["reduce"], "native"]:
            out = comm.reduce(x, root=0, algorithm=a)
            if r == 0 and not torch.equal(out, ref):
                bad.append(f"reduce/{a}/{n}")
    try:
        import cupy
    except ImportError:
        cupy_note = "CuPy not installed"
    else:
        c = cupy.arange(10, dtype=cupy.float32) + r
        out = comm.allreduce(c, algorithm="ring")
        ok = isinstance(out, cupy.ndarray) and bool(
            (out == cupy.arange(10, dtype=cupy.float32) * p + p * (p - 1) / 2).all())
        cupy_note = "CuPy allreduce ok" if ok else "CuPy allreduce WRONG"
        if not ok:
            bad.append("cupy")
    if r == 0:
        print(f"NCCL correctness vs native: {'all ok' if not bad else 'FAILED ' + str(bad)};"
              f" {cupy_note}", flush=True)


def link_bandwidth(args: argparse.Namespace) -> None:
    """Peer-to-peer copy bandwidth GPU 0 -> GPU 1, one way and both ways at once (the link's
    ceiling for NCCL's bus bandwidth), from rank 0 while the others wait."""
    import torch

    if torch.cuda.device_count() < 2:
        return
    n = 1 << 28  # 1 GiB of float32
    a = torch.randn(n, device="cuda:0")
    b = torch.empty(n, device="cuda:1")
    a2 = torch.randn(n, device="cuda:1")
    b2 = torch.empty(n, device="cuda:0")
    s0, s1 = torch.cuda.Stream("cuda:0"), torch.cuda.Stream("cuda:1")

    def one_way() -> None:
        b.copy_(a, non_blocking=True)

    def both_ways() -> None:
        with torch.cuda.stream(s0):
            b.copy_(a, non_blocking=True)
        with torch.cuda.stream(s1):
            b2.copy_(a2, non_blocking=True)

    out = {}
    for name, fn, moved in (("one way", one_way, 4 * n), ("both ways", both_ways, 8 * n)):
        fn()
        for d in (0, 1):
            torch.cuda.synchronize(d)
        t0 = time.perf_counter()
        for _ in range(5):
            fn()
        for d in (0, 1):
            torch.cuda.synchronize(d)
        out[name] = moved * 5 / (time.perf_counter() - t0) / 1e9
    print(f"GPU0<->GPU1 copy bandwidth: one way {out['one way']:.1f} GB/s, both ways "
          f"{out['both ways']:.1f} GB/s total", flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "link_bandwidth.json").write_text(json.dumps(out))
    torch.cuda.synchronize(0)


SHORT = {"recursive_doubling": "rec_doubling", "allgather_reduce": "ag_reduce",
         "reduce_scatter_allgather": "rs_ag", "recursive_halving": "rec_halving",
         "scatter_allgather": "scatter_ag"}


def label(column: str) -> str:
    """A column's short name: "rec_doubling@shm" for "recursive_doubling@shm"."""
    alg, _, transport = column.partition("@")
    return SHORT.get(alg, alg) + (f"@{transport}" if transport else "")


def report(results: list[dict], p: int, engine: str, transports: list[str],
           args: argparse.Namespace) -> None:
    lines = [f"# histboost.collective vs native {engine}, {p} ranks, float32; bus bandwidth "
             "GB/s (NCCL convention); best/native: best histboost time over the transport / "
             "native time; us: microseconds per call"]
    for coll in COLLECTIVES:
        rows = [x for x in results if x["collective"] == coll]
        if not rows:
            continue
        algs = [k for k in rows[0] if k not in ("collective", "size", "bytes", "world_size")]
        ours = {t: [a for a in algs if a != "native"
                    and (len(transports) == 1 or a.endswith(f"@{t}"))] for t in transports}

        width = max(13, *(len(label(a)) for a in algs))
        tag = {t: f"@{t}" if len(transports) > 1 else "" for t in transports}
        head = (f"{'size':>8} " + " ".join(f"{label(a):>{width}}" for a in algs)
                + "".join(f" {'best/native' + tag[t]:>15}" for t in transports)
                + f" {'native us':>10} {'best us' + tag[transports[0]]:>12}")
        lines += ["", f"## {coll}", head]
        for x in rows:
            bw = [x["bytes"] / x[a] / 1e9 * BUS_FACTOR[coll](p) for a in algs]
            best = {t: min(x[a] for a in ours[t]) for t in transports}
            lines.append(f"{fmt_size(x['size']):>8} " + " ".join(f"{b:{width}.3f}" for b in bw)
                         + "".join(f" {best[t] / x['native']:14.2f}x" for t in transports)
                         + f" {x['native'] * 1e6:10.0f} {best[transports[0]] * 1e6:12.0f}")
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        name = f"{engine.lower()}_p{p}"
        (Path(args.out) / f"collective_{name}.txt").write_text(text + "\n")
        (Path(args.out) / f"collective_{name}.json").write_text(json.dumps(results, indent=1))


# --- launcher ------------------------------------------------------------------------------------
def launch(args: argparse.Namespace) -> int:
    """Start --world-size local processes as torchrun would (CPU / Gloo)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(args.world_size):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   LOCAL_RANK=str(r), WORLD_SIZE=str(args.world_size), OMP_NUM_THREADS="1",
                   CUDA_VISIBLE_DEVICES="")
        procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env,
                                      stdout=None if r == 0 else subprocess.DEVNULL))
    codes = [pr.wait() for pr in procs]
    return max(codes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--nccl", action="store_true", help="CUDA tensors over NCCL (torchrun)")
    ap.add_argument("--max-mb", type=float, default=64)
    ap.add_argument("--transports", default="shm,tcp",
                    help="CPU: what our algorithms run over (shm: shared memory, tcp: Gloo)")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per measurement")
    ap.add_argument("--reps", type=int, default=3, help="rounds; the fastest counts")
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--check-only", action="store_true", help="--nccl: correctness only")
    args = ap.parse_args()
    if "RANK" in os.environ:
        worker(args)
        return 0
    if args.nccl:
        ap.error("--nccl runs under torchrun: torchrun --nproc_per_node=N bench/collective.py "
                 "--nccl")
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
