"""One rank of the distributed tests (run as a script by test_distributed.py).

Every rank trains a DistributedHashEmbeddingBag and, on the same global batches, the
single-process HashEmbeddingBag (the reference), and checks after each step that its outputs
and, at the end, its shard of the table and of the Adam state equal the reference's. Each
scenario then saves a checkpoint; with ``--reshard-from DIR`` every scenario also loads the
checkpoint another world size saved, checks it against the reference and trains on from it.

Usage: python _dist_worker.py RANK WORLD PORT WORKDIR [--reshard-from DIR]
"""

from __future__ import annotations

import argparse
import sys
import traceback
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from histboost.embedding import (
    DistributedHashEmbeddingBag,
    HashEmbeddingBag,
    SparseAdam,
    load_checkpoint,
    save_checkpoint,
)
from histboost.embedding._hashing import shard_of_torch

BATCH, SLOTS, DIM, STEPS = 7, 5, 3, 3  # 7 samples: uneven blocks over 2 and 3 ranks
SCENARIOS = [(m, c) for m in ("distributed_slot", "localized_slot") for c in ("sum", "mean")]
TOL = {"rtol": 1e-5, "atol": 1e-6}


class TorchComm:
    """Minimal stand-in for histboost.collective over torch.distributed (Gloo)."""

    def __init__(self) -> None:
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def reduce_scatter(self, x: torch.Tensor, op: str = "sum") -> torch.Tensor:
        assert op == "sum"
        y = x.clone()
        dist.all_reduce(y)
        return torch.tensor_split(y, self.world_size)[self.rank].clone()

    def allgather(self, x: torch.Tensor) -> torch.Tensor:
        out = [torch.empty_like(x) for _ in range(self.world_size)]
        dist.all_gather(out, x.contiguous())
        return torch.cat(out)

    def barrier(self) -> None:
        dist.barrier()


def make_comm():
    try:
        from histboost.collective import from_process_group
    except ImportError:
        return TorchComm()
    return from_process_group(None, timeout=60.0)


def batches(mode: str, steps: int, seed: int = 0):
    """Global CSR batches; localized-slot batches keep each slot's keys apart (salted)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        lengths = rng.integers(0, 4, size=BATCH * SLOTS)
        ro = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        ids = rng.integers(0, 15, size=int(ro[-1])).astype(np.int64)
        if mode == "localized_slot":
            slot = np.repeat(np.arange(BATCH * SLOTS) % SLOTS, lengths)
            ids = ids + 1000 * slot
        out.append((torch.from_numpy(ro), torch.from_numpy(ids * 7_919 - 40_000)))
    return out


def grads(steps: int):
    g = torch.Generator().manual_seed(11)
    return [torch.randn(BATCH, SLOTS, DIM, generator=g) for _ in range(steps)]


def make_module(dist_comm=None, mode="distributed_slot", combiner="sum"):
    kw = dict(capacity=4, initializer="normal", seed=5)
    if dist_comm is None:
        return HashEmbeddingBag(DIM, combiner, **kw)
    return DistributedHashEmbeddingBag(DIM, dist_comm, mode, combiner, **kw)


def train(module, data, gs, lo=0, hi=BATCH, opt=None, reference_out=None):
    """Run the steps; with ``reference_out`` (list of full outputs) check each output."""
    opt = opt or SparseAdam(module, lr=0.05)
    outs = []
    for i, ((ro, keys), g) in enumerate(zip(data, gs, strict=True)):
        opt.zero_grad()
        out = module(ro, keys, SLOTS)
        if reference_out is not None:
            torch.testing.assert_close(out, reference_out[i][lo:hi], **TOL)
        (out * g[lo:hi]).sum().backward()
        opt.step()
        outs.append(out.detach())
    return outs, opt


def check_shard(dmod: DistributedHashEmbeddingBag, ref: HashEmbeddingBag, comm) -> None:
    """This rank's keys, vectors and Adam state equal the reference's; shards partition it."""
    local = dmod.local
    keys = local.keys()
    if dmod.mode == "distributed_slot":
        assert bool((shard_of_torch(keys, dmod.world_size) == dmod.rank).all())
    else:
        slots = local.row_slot[: local.num_embeddings]
        assert bool((slots % dmod.world_size == dmod.rank).all())
    torch.testing.assert_close(local.embeddings(keys), ref.embeddings(keys), **TOL)
    ref_rows, rows = ref.table.lookup(keys), local.table.lookup(keys)
    assert bool((ref_rows >= 0).all())
    for name in ("exp_avg", "exp_avg_sq", "step"):
        a = local._state[name][0][rows]
        b = ref._state[name][0][ref_rows]
        torch.testing.assert_close(a, b, **TOL)
    total = torch.tensor([float(local.num_embeddings)])
    total = comm.allgather(total).sum()
    assert int(total) == ref.num_embeddings, (int(total), ref.num_embeddings)


def run(rank: int, world: int, workdir: str, reshard_from: str | None) -> None:
    comm = make_comm()
    assert comm.rank == rank and comm.world_size == world
    for mode, combiner in SCENARIOS:
        data, gs = batches(mode, STEPS + 1), grads(STEPS + 1)
        ref = make_module(combiner=combiner)
        ref_outs, ref_opt = train(ref, data[:STEPS], gs[:STEPS])
        dmod = make_module(comm, mode, combiner)
        lo, hi = dmod.sample_range(BATCH)
        _, opt = train(dmod, data[:STEPS], gs[:STEPS], lo, hi, reference_out=ref_outs)
        check_shard(dmod, ref, comm)
        save_checkpoint(dmod, f"{workdir}/ckpt-{mode}-{combiner}", opt)
        if reshard_from is None:
            continue
        # Load what another world size saved after the same steps: re-sharded onto this
        # layout it must equal the reference, and train on like it (Adam state included).
        fresh = make_module(comm, mode, combiner)
        fresh_opt = SparseAdam(fresh, lr=1.0)  # hyperparameters come from the checkpoint
        load_checkpoint(fresh, f"{reshard_from}/ckpt-{mode}-{combiner}", fresh_opt)
        assert fresh_opt.param_groups[0]["lr"] == 0.05
        check_shard(fresh, ref, comm)
        last_ref, _ = train(ref, data[STEPS:], gs[STEPS:], opt=ref_opt)
        train(fresh, data[STEPS:], gs[STEPS:], lo, hi, opt=fresh_opt, reference_out=last_ref)
        check_shard(fresh, ref, comm)
    comm.barrier()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("rank", type=int)
    p.add_argument("world", type=int)
    p.add_argument("port", type=int)
    p.add_argument("workdir")
    p.add_argument("--reshard-from")
    a = p.parse_args()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=a.rank,
                            world_size=a.world, timeout=timedelta(seconds=60))
    try:
        run(a.rank, a.world, a.workdir, a.reshard_from)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        return 1
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
