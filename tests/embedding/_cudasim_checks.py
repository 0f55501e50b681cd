"""The Numba-CUDA kernels under NUMBA_ENABLE_CUDASIM=1, against the torch (CPU) path.

Run by test_cuda_kernels.py in a subprocess (the simulator is chosen when numba.cuda is first
imported); tiny inputs, since the simulator runs every GPU thread as a Python thread.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import torch

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
# uint64 hash products wrap by design; NumPy scalars in the simulator warn about it.
warnings.filterwarnings("ignore", category=RuntimeWarning)

from histboost.embedding import (  # noqa: E402
    HashEmbeddingBag,
    SparseAdagrad,
    SparseAdam,
    SparseSGD,
    _cuda_kernels,
    _cuda_ops,
    _ops,
)
from histboost.embedding._hashing import EMPTY_KEY, mix64_numpy  # noqa: E402
from histboost.embedding.initializers import (  # noqa: E402
    NormalInitializer,
    UniformInitializer,
    initial_vectors,
    seed_word,
)


def check_hash_kernels() -> None:
    rng = np.random.default_rng(0)
    n_slots = 64
    # Half the keys collide on one probe start; repeats within the batch.
    cands = np.arange(5000, dtype=np.int64)
    same = cands[(mix64_numpy(cands) & np.uint64(n_slots - 1)) == 3][:8]
    keys = np.concatenate([same, rng.integers(-50, 50, 12), same[:3]]).astype(np.int64)
    slot_keys = np.full(n_slots, EMPTY_KEY, np.int64)
    slot_rows = np.full(n_slots, -1, np.int64)
    row_keys = np.full(n_slots, EMPTY_KEY, np.int64)
    state = np.array([2, 0], np.int64)  # two rows already taken by earlier keys
    rows = np.empty(keys.size, np.int64)
    _cuda_kernels.get_or_insert(slot_keys, slot_rows, row_keys, state, keys, rows,
                                np.empty(keys.size, np.int64))
    uniq = np.unique(keys)
    assert state[1] == 0 and state[0] == 2 + uniq.size
    # Equal keys share a row, distinct keys get distinct new rows, row_keys inverts.
    assert sorted(set(rows.tolist())) == list(range(2, 2 + uniq.size))
    assert np.array_equal(row_keys[rows], keys)
    probe = np.concatenate([keys, [10**12, -(10**12)]]).astype(np.int64)
    got = np.empty(probe.size, np.int64)
    _cuda_kernels.lookup(slot_keys, slot_rows, probe, got)
    assert np.array_equal(got[:-2], rows) and np.all(got[-2:] == -1)
    # Rehash into a bigger table keeps every key -> row.
    big_keys = np.full(4 * n_slots, EMPTY_KEY, np.int64)
    big_rows = np.full(4 * n_slots, -1, np.int64)
    row_keys[:2] = [777, 778]
    _cuda_kernels.rehash(big_keys, big_rows, row_keys, int(state[0]))
    _cuda_kernels.lookup(big_keys, big_rows, keys, got[: keys.size])
    assert np.array_equal(got[: keys.size], rows)
    bad = np.array([EMPTY_KEY], np.int64)
    _cuda_kernels.get_or_insert(slot_keys, slot_rows, row_keys, state, bad,
                                np.empty(1, np.int64), np.empty(1, np.int64))
    assert state[1] == _cuda_kernels.STATUS_RESERVED_KEY


def _random_bags(rng, n_bags, n_rows):
    lengths = rng.integers(0, 5, n_bags)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rows = rng.integers(-1, n_rows, int(offsets[-1])).astype(np.int64)  # -1: unknown key
    rows[rng.random(rows.size) < 0.6] = 4  # a hot row: one segment spanning several chunks
    return torch.from_numpy(offsets), torch.from_numpy(rows)


def check_pool_and_segment_grad() -> None:
    rng = np.random.default_rng(1)
    dim = 37  # not a multiple of 32: lanes loop over a ragged last column block
    weight = torch.randn(9, dim)
    # ~120 keys over 9 rows: segments shorter than a chunk, and one spanning 3+ chunks.
    offsets, rows = _random_bags(rng, 60, 9)
    assert int((rows == 4).sum()) > 2 * _cuda_ops.CHUNK
    for mean in (False, True):
        expected = _ops.pool(weight, rows, offsets, mean, backend="torch")
        out = np.full((60, dim), np.nan, np.float32)
        _cuda_ops.launch_pool(weight.numpy(), rows.numpy(), offsets.numpy(), mean, out)
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-6)
        # With a record: the bag of every key, and the slot of rows >= old_size (here 5).
        key_bag = np.full(rows.numel(), -7, np.int64)
        row_slot = np.full(10, -1, np.int32)
        slot_ids = np.array([10, 11, 12], np.int32)
        _cuda_ops.launch_pool(weight.numpy(), rows.numpy(), offsets.numpy(), mean, out,
                              key_bag, row_slot, 5, 3, slot_ids)
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-6)
        assert np.array_equal(key_bag, _ops.bag_of_keys(offsets, rows.numel()).numpy())
        for r in range(10):
            bags = key_bag[rows.numpy() == r]
            if r < 5 or bags.size == 0:
                assert row_slot[r] == -1
            else:
                assert row_slot[r] in slot_ids[bags % 3]

        grad_out = torch.randn(60, dim)
        key_bag = _ops.bag_of_keys(offsets, rows.numel())
        ref = _ops.row_grad(rows, key_bag, offsets, grad_out, mean, use_cuda=False)
        sorted_rows, perm = torch.sort(rows.to(torch.int32))
        uniq, seg = torch.unique_consecutive(sorted_rows, return_inverse=True)
        values = np.zeros((uniq.numel(), dim), np.float32)
        _cuda_ops.launch_segment_grad(seg.numpy(), perm.numpy(), key_bag.numpy(),
                                      offsets.numpy(), mean, grad_out.numpy(), values)
        keep = uniq.numpy() >= 0
        assert np.array_equal(uniq.numpy()[keep], ref.rows.numpy())
        # The hot row sums ~70 terms of size ~1 in an order the atomics pick: float32
        # rounding of such a sum is ~1e-5 absolute.
        np.testing.assert_allclose(values[keep], ref.values.numpy(), rtol=1e-5, atol=5e-5)


def check_optimizer_kernels() -> None:
    rng = np.random.default_rng(2)
    cases = [
        ("sgd", lambda m: SparseSGD(m, lr=0.3, weight_decay=0.1)),
        ("momentum", lambda m: SparseSGD(m, lr=0.2, momentum=0.9)),
        ("momentum", lambda m: SparseSGD(m, lr=0.2, momentum=0.8, nesterov=True)),
        ("adagrad", lambda m: SparseAdagrad(m, lr=0.5, initial_accumulator_value=0.1)),
        ("adam", lambda m: SparseAdam(m, lr=0.05, betas=(0.8, 0.95), weight_decay=0.01)),
    ]
    for kind, make in cases:
        m = HashEmbeddingBag(3, capacity=16)
        opt = make(m)
        for _ in range(3):  # the torch path, a few steps to build up state
            offsets = torch.tensor([0, 2, 5, 6])
            keys = torch.from_numpy(rng.integers(0, 8, 6).astype(np.int64))
            opt.zero_grad()
            (m(offsets, keys, 1) * torch.randn(3, 1, 3)).sum().backward()
            before_w = m.weight.clone()
            before_state = {k: t.clone() for k, (t, _) in m._state.items()}
            opt.step()
        # Replay the last update with the kernel from the saved "before" copies.
        grad = m.sparse_grad
        w = before_w.numpy().copy()
        state = {k: t.numpy().copy() for k, t in before_state.items()}
        hp = opt.param_groups[0]
        r, g = grad.rows.numpy(), grad.values.numpy()
        if kind == "sgd":
            _cuda_ops.launch_sgd(w, r, g, hp["lr"], hp["weight_decay"])
        elif kind == "momentum":
            _cuda_ops.launch_momentum(w, state["momentum_buffer"], r, g, hp["lr"],
                                      hp["momentum"], hp["weight_decay"], hp["nesterov"])
        elif kind == "adagrad":
            _cuda_ops.launch_adagrad(w, state["sum"], r, g, hp["lr"], hp["eps"],
                                     hp["weight_decay"])
        else:
            _cuda_ops.launch_adam(w, state["exp_avg"], state["exp_avg_sq"], state["step"], r, g,
                                  hp["lr"], *hp["betas"], hp["eps"], hp["weight_decay"])
        n = m.num_embeddings
        np.testing.assert_allclose(w[:n], m.weight[:n].numpy(), rtol=1e-5, atol=1e-6)
        assert not np.allclose(w[r], before_w.numpy()[r])
        for k, (t, _) in m._state.items():
            np.testing.assert_allclose(state[k][:n], t[:n].numpy(), rtol=1e-5, atol=1e-6)


def check_init_kernel() -> None:
    keys = torch.tensor([0, 1, -1, 2**62, -(2**62), 123456789], dtype=torch.int64)
    for init in (UniformInitializer(-0.3, 0.7), NormalInitializer(0.5, 2.0)):
        expected = initial_vectors(init, keys, 33, 17, torch.float32)  # torch path (CPU)
        out = np.full((keys.numel(), 33), np.nan, np.float32)
        kind, a, b = init.kernel_params()
        _cuda_ops.launch_init(keys.numpy(), seed_word(17), kind, a, b, out)
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-7)


CHECKS = [check_hash_kernels, check_pool_and_segment_grad, check_optimizer_kernels,
          check_init_kernel]

if __name__ == "__main__":
    for check in CHECKS:
        check()
        print(f"{check.__name__}: ok", flush=True)
    print(f"{len(CHECKS)} passed, 0 failed")
    sys.exit(0)
