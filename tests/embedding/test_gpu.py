"""GPU (Numba-CUDA kernels) against the CPU implementation; skipped without CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from histboost.embedding import (
    HashEmbeddingBag,
    HashTable,
    NormalInitializer,
    SparseAdagrad,
    SparseAdam,
    SparseSGD,
    UniformInitializer,
)
from histboost.embedding.initializers import initial_vectors

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA = torch.device("cuda")


def _zipf_batch(rng, batch, slots, vocab=2000):
    lengths = rng.integers(0, 4, batch * slots)
    ro = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.minimum(rng.zipf(1.2, int(ro[-1])), vocab).astype(np.int64)
    return torch.from_numpy(ro), torch.from_numpy(ids * -7046029254386353131)


OPTS = {
    "sgd": lambda m: SparseSGD(m, lr=0.1, weight_decay=0.01),
    "momentum": lambda m: SparseSGD(m, lr=0.1, momentum=0.9),
    "nesterov": lambda m: SparseSGD(m, lr=0.1, momentum=0.9, nesterov=True),
    "adagrad": lambda m: SparseAdagrad(m, lr=0.1),
    "adam": lambda m: SparseAdam(m, lr=0.01),
}


@pytest.mark.parametrize("combiner", ["sum", "mean"])
@pytest.mark.parametrize("opt_name", sorted(OPTS))
def test_cuda_training_matches_cpu(combiner, opt_name):
    rng = np.random.default_rng(len(opt_name))
    mods = {d: HashEmbeddingBag(37, combiner, capacity=64, device=d, initializer="normal")
            for d in ("cpu", "cuda")}
    opts = {d: OPTS[opt_name](m) for d, m in mods.items()}
    for step in range(3):
        ro, keys = _zipf_batch(rng, 512, 8)  # hot keys: segments of thousands of keys
        g = torch.randn(512, 8, 37, generator=torch.Generator().manual_seed(step))
        outs = {}
        for d, m in mods.items():
            opts[d].zero_grad()
            out = m(ro.to(d), keys.to(d), 8)
            out.backward(g.to(d))
            opts[d].step()
            outs[d] = out.detach().cpu()
        # Long segments of a hot key are summed in another order on the GPU (float atomics),
        # so the error scales with the largest entries: 2**-18 of the largest output.
        atol = max(1e-5, outs["cpu"].abs().max().item() * 2.0**-18)
        torch.testing.assert_close(outs["cuda"], outs["cpu"], rtol=1e-5, atol=atol)
    keys = mods["cpu"].keys()
    assert mods["cuda"].num_embeddings == keys.numel()
    # A hot key's gradient sums thousands of terms of size ~1 in another order: float32
    # rounding of ~1e-4 of such a sum, times the learning rate, over three steps.
    torch.testing.assert_close(mods["cuda"].embeddings(keys.cuda()).cpu(),
                               mods["cpu"].embeddings(keys), rtol=1e-4, atol=1e-4)


def test_cuda_kernels_match_torch_ops_on_gpu():
    rng = np.random.default_rng(3)
    ro, keys = _zipf_batch(rng, 4096, 26, vocab=100_000)
    a = HashEmbeddingBag(64, capacity=1 << 12, device=CUDA)
    b = HashEmbeddingBag(64, capacity=1 << 12, device=CUDA, backend="torch")
    oa, ob = SparseAdam(a, lr=0.01), SparseAdam(b, lr=0.01)
    g = torch.randn(4096, 26, 64, device=CUDA)
    for m, o in ((a, oa), (b, ob)):
        m(ro.cuda(), keys.cuda(), 26).backward(g)
        o.step()
    ka = a.keys()
    torch.testing.assert_close(a.embeddings(ka), b.embeddings(ka), rtol=1e-5, atol=1e-6)


def test_cuda_hash_table_growth_against_cpu():
    rng = np.random.default_rng(4)
    keys = torch.from_numpy(rng.integers(-(2**62), 2**62, 300_000))
    keys = torch.cat([keys, keys[:100_000]])[torch.from_numpy(rng.permutation(400_000))]
    gpu, cpu = HashTable(capacity=16, device=CUDA), HashTable(capacity=16)
    rows = torch.cat([gpu.get_or_insert(c.cuda()) for c in torch.chunk(keys, 5)])
    for c in torch.chunk(keys, 5):
        cpu.get_or_insert(c)
    assert gpu.size == cpu.size == torch.unique(keys).numel()
    assert torch.equal(gpu.keys()[rows].cpu(), keys)  # row_keys inverts the map
    assert torch.equal(gpu.lookup(keys.cuda()), rows)
    unknown = torch.tensor([1, 2, 3], dtype=torch.int64, device=CUDA) * (2**62 + 1)
    assert torch.all(gpu.lookup(unknown) == -1)
    assert torch.equal(torch.sort(gpu.keys().cpu()).values, torch.sort(cpu.keys()).values)


def test_cuda_initializer_kernel_matches_torch_version():
    keys = torch.from_numpy(np.random.default_rng(5).integers(-(2**62), 2**62, 10_000))
    for init in (UniformInitializer(-0.1, 0.2), NormalInitializer(0.0, 0.5)):
        cpu = initial_vectors(init, keys, 19, 3, torch.float32)
        gpu = initial_vectors(init, keys.cuda(), 19, 3, torch.float32).cpu()
        torch.testing.assert_close(gpu, cpu, rtol=1e-6, atol=1e-7)


def test_cuda_eval_mode_and_bf16():
    m = HashEmbeddingBag(8, "mean", capacity=8, device=CUDA, dtype=torch.bfloat16)
    ro = torch.tensor([0, 2, 3], device=CUDA)
    m(ro, torch.tensor([5, 6, 7], device=CUDA), 1)
    m.eval()
    out = m(ro, torch.tensor([5, 99, 98], device=CUDA), 1)
    assert m.num_embeddings == 3 and torch.all(out[1] == 0)
    torch.testing.assert_close(out[0, 0], m.embeddings(torch.tensor([5], device=CUDA))[0] / 2)
