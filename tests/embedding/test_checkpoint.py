"""Single-process checkpoints: round trip with optimiser state, bf16, export, errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from histboost.embedding import (
    HashEmbeddingBag,
    SparseAdagrad,
    export_inference,
    load_checkpoint,
    load_inference,
    save_checkpoint,
)

from .conftest import random_batch


def _steps(m, opt, batches):
    for ro, keys in batches:
        opt.zero_grad()
        (m(ro, keys, 3) ** 2).sum().backward()
        opt.step()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_resume_from_checkpoint_equals_uninterrupted_training(tmp_path, dtype):
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, 5, 3) for _ in range(4)]
    a = HashEmbeddingBag(4, "mean", capacity=4, dtype=dtype, initializer="normal", seed=3)
    opt_a = SparseAdagrad(a, lr=0.2, initial_accumulator_value=0.5)
    _steps(a, opt_a, batches[:2])
    save_checkpoint(a, tmp_path / "ck", opt_a)
    _steps(a, opt_a, batches[2:])

    b = HashEmbeddingBag(4, "mean", capacity=4, dtype=dtype)  # other seed and initialiser
    opt_b = SparseAdagrad(b, lr=1.0)
    meta = load_checkpoint(b, tmp_path / "ck", opt_b)
    assert meta["world_size"] == 1 and meta["dtype"] == str(dtype).removeprefix("torch.")
    assert b.seed == 3 and opt_b.param_groups[0]["lr"] == 0.2
    _steps(b, opt_b, batches[2:])  # new keys appear here: same seed -> same initial vectors
    keys = a.keys()
    assert b.num_embeddings == a.num_embeddings
    assert torch.equal(b.embeddings(keys), a.embeddings(keys))


def test_export_for_inference(tmp_path):
    rng = np.random.default_rng(1)
    ro, keys = random_batch(rng, 6, 3)
    m = HashEmbeddingBag(5, capacity=8)
    SparseAdagrad(m, lr=0.1)  # state exists but is not exported
    out = m(ro, keys, 3).detach()
    export_inference(m, tmp_path / "serve")
    assert not any(p.name.startswith("state.") for p in (tmp_path / "serve").rglob("*.npy"))
    served = load_inference(tmp_path / "serve")
    assert not served.training
    torch.testing.assert_close(served(ro, keys, 3), out)
    unknown = served(torch.tensor([0, 1, 1, 1]), torch.tensor([424242]), 3)
    assert torch.all(unknown == 0) and served.num_embeddings == m.num_embeddings


def test_checkpoint_errors(tmp_path):
    m = HashEmbeddingBag(3, capacity=8)
    m(torch.tensor([0, 1]), torch.tensor([5]), 1)
    with pytest.raises(FileNotFoundError, match="did not finish"):
        load_checkpoint(m, tmp_path / "missing")
    save_checkpoint(m, tmp_path / "ck")
    with pytest.raises(ValueError, match="embedding_dim"):
        load_checkpoint(HashEmbeddingBag(4), tmp_path / "ck")
    with pytest.raises(ValueError, match="combiner"):
        load_checkpoint(HashEmbeddingBag(3, "mean"), tmp_path / "ck")
    # A key saved by two shards (slots of two ranks shared it) cannot be merged.
    meta = json.loads((tmp_path / "ck" / "meta.json").read_text())
    meta["world_size"] = 2
    (tmp_path / "ck" / "meta.json").write_text(json.dumps(meta))
    shutil.copytree(tmp_path / "ck" / "shard-00000", tmp_path / "ck" / "shard-00001")
    with pytest.raises(ValueError, match="same key in several shards"):
        load_checkpoint(HashEmbeddingBag(3), tmp_path / "ck")


def test_interrupted_save_over_a_checkpoint_is_incomplete(tmp_path, monkeypatch):
    """Saving over a checkpoint and failing half-way must not leave the old meta.json, which
    would pass the mixed shards off as a complete checkpoint (issue 18, sibling of 12)."""
    m = HashEmbeddingBag(3, capacity=8)
    m(torch.tensor([0, 1]), torch.tensor([5]), 1)
    save_checkpoint(m, tmp_path / "ck")
    m(torch.tensor([0, 1]), torch.tensor([6]), 1)

    calls = []

    def fail_second(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise OSError("disk full")
        return np_save(*args, **kwargs)

    np_save = np.save
    monkeypatch.setattr(np, "save", fail_second)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(m, tmp_path / "ck")
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError, match="did not finish"):
        load_checkpoint(HashEmbeddingBag(3, capacity=8), tmp_path / "ck")
    save_checkpoint(m, tmp_path / "ck")  # a complete save over it loads again
    b = HashEmbeddingBag(3, capacity=8)
    load_checkpoint(b, tmp_path / "ck")
    assert sorted(b.keys().tolist()) == [5, 6]
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["meta.json", "shard-00000"]
