"""Benchmark of histboost's hash embedding against torch.nn.EmbeddingBag + SparseAdam.

One training step = forward + backward + Adam update of the embedding, on a batch of
``--batch`` samples x ``--slots`` slots with 1-3 keys per slot drawn from a truncated Zipf law
(``--zipf``) over ``--vocab / slots`` ids per slot. histboost sees the ids scrambled into
arbitrary int64 keys and inserts unseen ones during the step (get-or-insert); torch indexes a
fixed ``--vocab``-row table with the ids. Every step uses a fresh batch, so unseen keys keep
arriving after the warm-up.

Reported: ms/step (median over ``--steps``, CUDA events) with a phase breakdown, forward
alone, get-or-insert and lookup throughput (keys/s) of the hash table alone, and the memory
floor of a step (the bytes a step must move at the measured device-to-device copy rate).
GPU correctness is checked by ``tests/embedding/test_gpu.py`` (run it first on the same
machine: ``python -m pytest -q tests/embedding/test_gpu.py``).

    python bench/embedding.py                       # on a GPU machine, the issue's sizes
    python bench/embedding.py --device cpu --batch 4096 --vocab 1000000 --steps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from histboost.embedding import HashEmbeddingBag, HashTable, SparseAdam  # noqa: E402

SCRAMBLE = -7046029254386353131  # odd 64-bit multiplier: ids -> arbitrary int64 keys


class Timer:
    """Elapsed ms between marks: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def intervals(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks[:-1], self.marks[1:], strict=True)]
        return [(b - a) * 1e3 for a, b in zip(self.marks[:-1], self.marks[1:], strict=True)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def make_batches(n: int, batch: int, slots: int, vocab: int, zipf: float,
                 device: torch.device, seed: int = 0):
    """``n`` batches of (row_offsets, keys int64 scrambled, ids int64 < vocab)."""
    g = torch.Generator(device=device).manual_seed(seed)
    per_slot = vocab // slots
    ranks = torch.arange(1, per_slot + 1, dtype=torch.float64, device=device)
    cdf = torch.cumsum(ranks.pow(-zipf), 0)
    cdf /= cdf[-1].clone()
    out = []
    for _ in range(n):
        lengths = torch.randint(1, 4, (batch * slots,), generator=g, device=device)
        ro = torch.zeros(batch * slots + 1, dtype=torch.int64, device=device)
        torch.cumsum(lengths, 0, out=ro[1:])
        nnz = int(ro[-1])
        slot = torch.repeat_interleave(torch.arange(batch * slots, device=device) % slots,
                                       lengths, output_size=nnz)
        u = torch.rand(nnz, generator=g, device=device, dtype=torch.float64)
        rank = torch.searchsorted(cdf, u).clamp(max=per_slot - 1)
        ids = slot * per_slot + rank
        out.append((ro, ids * SCRAMBLE, ids))
    return out


def copy_bandwidth(device: torch.device) -> float:
    """Device-to-device copy rate in bytes/s (bytes read + written)."""
    n = (1 << 28) if device.type == "cuda" else (1 << 25)
    a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    t = Timer(device)
    t.mark()
    for _ in range(10):
        b.copy_(a)
        t.mark()
    ms = statistics.median(t.intervals())
    return 2 * a.numel() * 4 / (ms * 1e-3)


def bench_hash(batches, warmup: int, device: torch.device, capacity: int) -> dict:
    table = HashTable(capacity=capacity, device=device)
    for _, keys, _ in batches[:warmup]:
        table.get_or_insert(keys)
    sync(device)
    ins, look, new = Timer(device), Timer(device), []
    nnz = []
    for _, keys, _ in batches[warmup:]:
        before = table.size
        ins.mark()
        table.get_or_insert(keys)
        ins.mark()
        new.append(table.size - before)
        nnz.append(keys.numel())
    for _, keys, _ in batches[warmup:]:
        look.mark()
        table.lookup(keys)
        look.mark()
    t_ins = ins.intervals()[::2]
    t_look = look.intervals()[::2]
    keys_per_batch = statistics.mean(nnz)
    return {
        "keys_per_batch": keys_per_batch,
        "new_keys_per_batch": statistics.mean(new),
        "table_size": table.size,
        "get_or_insert_ms": statistics.median(t_ins),
        "get_or_insert_keys_per_s": keys_per_batch / (statistics.median(t_ins) * 1e-3),
        "lookup_ms": statistics.median(t_look),
        "lookup_keys_per_s": keys_per_batch / (statistics.median(t_look) * 1e-3),
    }


def bench_histboost(batches, warmup: int, steps: int, args, device, backend="auto") -> dict:
    m = HashEmbeddingBag(args.dim, "sum", capacity=args.capacity, device=device,
                         check_inputs=False, backend=backend)
    opt = SparseAdam(m, lr=1e-3)
    grad = torch.randn(args.batch, args.slots, args.dim, device=device)
    t = Timer(device)
    uniq = []
    for i, (ro, keys, _) in enumerate(batches[: warmup + steps]):
        if i == warmup:
            sync(device)
            t = Timer(device)
        t.mark()
        opt.zero_grad()
        out = m(ro, keys, args.slots)
        t.mark()
        out.backward(grad)
        t.mark()
        opt.step()
        t.mark()
        if i >= warmup:
            uniq.append(m.sparse_grad.rows.numel())
    iv = t.intervals()
    fwd, bwd, upd = iv[0::4], iv[1::4], iv[2::4]
    step = [a + b + c for a, b, c in zip(fwd, bwd, upd, strict=True)]
    # Forward alone (inference-style, no insertion) on the measured batches.
    m.eval()
    tf = Timer(device)
    with torch.no_grad():
        for ro, keys, _ in batches[warmup: warmup + steps]:
            tf.mark()
            m(ro, keys, args.slots)
            tf.mark()
    return {
        "step_ms": statistics.median(step),
        "forward_ms": statistics.median(fwd),
        "backward_ms": statistics.median(bwd),
        "adam_ms": statistics.median(upd),
        "eval_forward_ms": statistics.median(tf.intervals()[::2]),
        "unique_rows_per_step": statistics.mean(uniq),
        "table_size": m.num_embeddings,
    }


def profile_histboost(batches, args, device, steps: int = 5) -> None:
    """Kernel and operator table (torch.profiler) of ``steps`` histboost training steps."""
    from torch.profiler import ProfilerActivity, profile

    m = HashEmbeddingBag(args.dim, "sum", capacity=args.capacity, device=device,
                         check_inputs=False)
    opt = SparseAdam(m, lr=1e-3)
    grad = torch.randn(args.batch, args.slots, args.dim, device=device)

    def step(ro, keys):
        opt.zero_grad()
        m(ro, keys, args.slots).backward(grad)
        opt.step()

    for ro, keys, _ in batches[: args.warmup]:
        step(ro, keys)
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                            else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        for ro, keys, _ in batches[args.warmup: args.warmup + steps]:
            step(ro, keys)
        sync(device)
    wall = (time.perf_counter() - t0) / steps * 1e3
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=60))
    print(f"profiled wall time per step (profiler overhead included): {wall:.2f} ms", flush=True)


def bench_torch(batches, warmup: int, steps: int, args, device) -> dict:
    eb = torch.nn.EmbeddingBag(args.vocab, args.dim, mode="sum", sparse=True,
                               include_last_offset=True, device=device)
    opt = torch.optim.SparseAdam(eb.parameters(), lr=1e-3)
    grad = torch.randn(args.batch, args.slots, args.dim, device=device)
    t = Timer(device)
    for i, (ro, _, ids) in enumerate(batches[: warmup + steps]):
        if i == warmup:
            sync(device)
            t = Timer(device)
        t.mark()
        opt.zero_grad()
        out = eb(ids, ro).view(args.batch, args.slots, args.dim)
        out.backward(grad)
        opt.step()
        t.mark()
    tf = Timer(device)
    with torch.no_grad():
        for ro, _, ids in batches[warmup: warmup + steps]:
            tf.mark()
            eb(ids, ro)
            tf.mark()
    return {"step_ms": statistics.median(t.intervals()[::2]),
            "eval_forward_ms": statistics.median(tf.intervals()[::2])}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--slots", type=int, default=26)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--vocab", type=int, default=10_000_000)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--capacity", type=int, default=1 << 23)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--torch-steps", type=int, default=5)
    p.add_argument("--profile", action="store_true",
                   help="also print torch.profiler's kernel table of a few histboost steps")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args()
    device = torch.device(args.device)
    print(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; "
          f"batch {args.batch} x {args.slots} slots x 1-3 keys, dim {args.dim}, "
          f"Zipf {args.zipf} over {args.vocab} ids", flush=True)
    n = args.warmup + args.steps
    batches = make_batches(n, args.batch, args.slots, args.vocab, args.zipf, device)
    res = {"args": vars(args), "copy_bytes_per_s": copy_bandwidth(device)}
    res["hash"] = bench_hash(batches, args.warmup, device, args.capacity)
    print("hash", res["hash"], flush=True)
    res["histboost"] = bench_histboost(batches, args.warmup, args.steps, args, device)
    print("histboost", res["histboost"], flush=True)
    if args.profile:
        profile_histboost(batches, args, device)
    if device.type == "cuda":
        res["histboost_torch_ops"] = bench_histboost(batches, args.warmup, args.torch_steps,
                                                     args, device, backend="torch")
        print("histboost torch ops", res["histboost_torch_ops"], flush=True)
    res["torch"] = bench_torch(batches, args.warmup, args.torch_steps, args, device)
    print("torch", res["torch"], flush=True)

    h = res["histboost"]
    nnz = res["hash"]["keys_per_batch"]
    out_bytes = args.batch * args.slots * args.dim * 4
    # Output written, its gradient read, keys read once, and per distinct row: the forward
    # reads it once and Adam reads and writes weight, exp_avg and exp_avg_sq.
    floor_bytes = 2 * out_bytes + nnz * 8 + h["unique_rows_per_step"] * args.dim * 4 * 7
    res["floor_ms"] = floor_bytes / res["copy_bytes_per_s"] * 1e3
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=1))

    rows = [
        ("histboost HashEmbeddingBag + SparseAdam", h["step_ms"], h["eval_forward_ms"]),
        ("torch nn.EmbeddingBag + optim.SparseAdam", res["torch"]["step_ms"],
         res["torch"]["eval_forward_ms"]),
    ]
    if "histboost_torch_ops" in res:
        ht = res["histboost_torch_ops"]
        rows.insert(1, ("histboost, backend='torch' (no Numba kernels)", ht["step_ms"],
                        ht["eval_forward_ms"]))
    print(f"\nkeys/step {nnz / 1e6:.2f}M, distinct rows/step {h['unique_rows_per_step']/1e6:.2f}M,"
          f" new keys/step {res['hash']['new_keys_per_batch']/1e3:.0f}k, table "
          f"{h['table_size'] / 1e6:.2f}M rows; copy rate {res['copy_bytes_per_s']/1e12:.2f} TB/s")
    print(f"{'':44s} {'ms/step':>9s} {'keys/s':>9s} {'fwd ms':>8s}")
    for name, ms, fwd in rows:
        print(f"{name:44s} {ms:9.2f} {nnz / (ms * 1e-3) / 1e6:8.0f}M {fwd:8.2f}")
    print(f"{'memory floor of a step':44s} {res['floor_ms']:9.2f}")
    print(f"histboost phases: forward (incl. get-or-insert) {h['forward_ms']:.2f} ms, backward "
          f"{h['backward_ms']:.2f} ms, Adam {h['adam_ms']:.2f} ms")
    hs = res["hash"]
    print(f"hash table alone: get-or-insert {hs['get_or_insert_keys_per_s'] / 1e9:.2f}e9 keys/s "
          f"({hs['get_or_insert_ms']:.2f} ms), lookup {hs['lookup_keys_per_s'] / 1e9:.2f}e9 keys/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
