"""Checkpoints of hash embeddings: per-rank shards, re-sharded on load to any world size.

Layout of a checkpoint directory::

    meta.json                 format, embedding_dim, dtype, combiner, seed, initializer,
                              mode, world_size, state fills, optimiser hyperparameters
    shard-00000/keys.npy      int64 [n]        (one directory per saving rank)
               slots.npy      int32 [n]        slot in which each key was first seen
               weight.npy     [n, dim]         float32, or bfloat16 stored as its int16 bits
               state.NAME.npy per-row optimiser state (left out by export_inference)

Plain ``.npy`` files (no pickle) read with ``mmap_mode="r"``: a loading rank reads every
shard's keys, picks the keys it owns under the *new* layout and reads only those rows. A key's
owner is ``hash(key) % world`` for ``distributed_slot``, ``slot % world`` for ``localized_slot``
and rank 0 for a single module, so any saved layout loads into any other. ``meta.json`` is
removed first and written last (atomically, after a barrier), so a directory without it is an
incomplete save, also when a save over an older checkpoint was interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._files import atomic_write
from ._hashing import shard_of_numpy
from .distributed import DistributedHashEmbeddingBag
from .initializers import get_initializer, initializer_config
from .module import HashEmbeddingBag
from .optim import SparseOptimizer

FORMAT = "histboost.embedding.checkpoint/1"


def _parts(module: HashEmbeddingBag | DistributedHashEmbeddingBag):
    """(local module, comm or None, rank, world_size, mode)."""
    if isinstance(module, DistributedHashEmbeddingBag):
        return module.local, module.comm, module.rank, module.world_size, module.mode
    if isinstance(module, HashEmbeddingBag):
        return module, None, 0, 1, "single"
    raise TypeError(f"expected a HashEmbeddingBag or DistributedHashEmbeddingBag, got "
                    f"{type(module).__name__}")


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def save_checkpoint(module: HashEmbeddingBag | DistributedHashEmbeddingBag, path: str | Path,
                    optimizer: SparseOptimizer | None = None, *,
                    include_state: bool = True) -> None:
    """Save the table (keys, rows, slots and, with ``include_state``, optimiser state).

    Collective for a distributed module: every rank calls it with the same ``path`` (a
    directory on a file system all ranks share). ``optimizer`` adds its hyperparameters.
    """
    local, comm, rank, world, mode = _parts(module)
    path = Path(path)
    shard = path / f"shard-{rank:05d}"
    shard.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        # saving over a checkpoint: until the new meta.json, the directory is incomplete (an
        # interrupted save must not pass for the old one, whose shards it half replaced)
        (path / "meta.json").unlink(missing_ok=True)
    if comm is not None:
        comm.barrier()
    rows = local.export_rows()
    for name, t in rows.items():
        if name.startswith("state.") and not include_state:
            continue
        np.save(shard / f"{name}.npy", _to_numpy(t))
    if comm is not None:
        comm.barrier()
    if rank == 0:
        meta = {
            "format": FORMAT,
            "embedding_dim": local.embedding_dim,
            "dtype": str(local.dtype).removeprefix("torch."),
            "combiner": module.combiner,
            "seed": local.seed,
            "initializer": initializer_config(local.initializer),
            "mode": mode,
            "world_size": world,
            "states": {k: fill for k, (_, fill) in local._state.items()} if include_state
            else {},
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
        }
        atomic_write(path / "meta.json", json.dumps(meta, indent=1))
    if comm is not None:
        comm.barrier()


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of a checkpoint; raises if the save did not complete."""
    f = Path(path) / "meta.json"
    if not f.exists():
        raise FileNotFoundError(f"{f} not found: not a checkpoint, or its save did not finish")
    meta = json.loads(f.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{f}: unknown checkpoint format {meta.get('format')!r}")
    return meta


def _owned(keys: np.ndarray, slots: np.ndarray, mode: str, rank: int, world: int) -> np.ndarray:
    if mode == "single" or world == 1:
        return np.ones(keys.shape[0], dtype=bool)
    by_hash = shard_of_numpy(keys, world) == rank
    if mode == "distributed_slot":
        return by_hash
    # localized: by slot; rows with no recorded slot fall back to the hash rule.
    return np.where(slots >= 0, slots % world == rank, by_hash)


def _read_owned(path: Path, meta: dict[str, Any], mode: str, rank: int, world: int,
                with_state: bool) -> dict[str, torch.Tensor]:
    names = ["weight"] + ([f"state.{s}" for s in meta["states"]] if with_state else [])
    cols: dict[str, list[np.ndarray]] = {n: [] for n in ["keys", "slots", *names]}
    for r in range(meta["world_size"]):
        d = path / f"shard-{r:05d}"
        keys = np.load(d / "keys.npy", mmap_mode="r")
        slots = np.load(d / "slots.npy", mmap_mode="r")
        idx = np.flatnonzero(_owned(np.asarray(keys), np.asarray(slots), mode, rank, world))
        cols["keys"].append(np.asarray(keys[idx]))
        cols["slots"].append(np.asarray(slots[idx]))
        for n in names:
            cols[n].append(np.asarray(np.load(d / f"{n}.npy", mmap_mode="r")[idx]))
    out = {n: torch.from_numpy(np.concatenate(v)) for n, v in cols.items()}
    if meta["dtype"] == "bfloat16":
        out["weight"] = out["weight"].view(torch.bfloat16)
    keys = out["keys"]
    if torch.unique(keys).numel() != keys.numel():
        raise ValueError(
            "the checkpoint holds the same key in several shards (a localized_slot table whose "
            "slots on different ranks shared keys); it cannot be merged into this layout"
        )
    return out


def load_checkpoint(module: HashEmbeddingBag | DistributedHashEmbeddingBag, path: str | Path,
                    optimizer: SparseOptimizer | None = None) -> dict[str, Any]:
    """Load a checkpoint saved at any world size / layout into ``module`` (re-sharding).

    Replaces the table, rows and optimiser state of this rank's shard; restores the seed and a
    built-in initialiser from the checkpoint, so keys inserted later get the same vectors as
    they would have before the save. Returns the checkpoint's metadata.
    """
    local, _, rank, world, mode = _parts(module)
    path = Path(path)
    meta = read_meta(path)
    if meta["embedding_dim"] != local.embedding_dim:
        raise ValueError(f"checkpoint has embedding_dim={meta['embedding_dim']}, module has "
                         f"{local.embedding_dim}")
    if meta["combiner"] != module.combiner:
        raise ValueError(f"checkpoint has combiner={meta['combiner']!r}, module has "
                         f"{module.combiner!r}")
    rows = _read_owned(path, meta, mode, rank, world, with_state=True)
    local.seed = int(meta["seed"])
    if meta["initializer"].get("name") != "custom":
        local.initializer = get_initializer(meta["initializer"])
    local.import_rows(rows, meta["states"])
    if optimizer is not None and meta.get("optimizer") is not None:
        optimizer.load_state_dict(meta["optimizer"])
    return meta


def export_inference(module: HashEmbeddingBag | DistributedHashEmbeddingBag,
                     path: str | Path) -> None:
    """Save keys and vectors only (no optimiser state) for serving; collective when
    distributed. Load with :func:`load_inference` (one process) or :func:`load_checkpoint`."""
    save_checkpoint(module, path, include_state=False)


def load_inference(path: str | Path, device: Any = None,
                   backend: str = "auto") -> HashEmbeddingBag:
    """A single-process :class:`~.module.HashEmbeddingBag` in eval mode (lookups never insert;
    unknown keys give zeros) holding every key of a checkpoint or export."""
    path = Path(path)
    meta = read_meta(path)
    rows = _read_owned(path, meta, "single", 0, 1, with_state=False)
    init = meta["initializer"]
    module = HashEmbeddingBag(
        meta["embedding_dim"], meta["combiner"], capacity=max(1, rows["keys"].numel()),
        initializer=None if init.get("name") == "custom" else init,
        dtype=getattr(torch, meta["dtype"]), device=device, seed=meta["seed"], backend=backend,
    )
    module.import_rows(rows)
    return module.eval()
