"""The three mix64 implementations agree; shards and initialisers behave."""

from __future__ import annotations

import numba
import numpy as np
import torch

from histboost.embedding._hashing import (
    mix64_numba,
    mix64_numpy,
    mix64_torch,
    shard_of_numpy,
    shard_of_torch,
)
from histboost.embedding.initializers import (
    ConstantInitializer,
    NormalInitializer,
    UniformInitializer,
    get_initializer,
    initial_vectors,
    initializer_config,
)

_mix_jit = numba.njit(mix64_numba)


def test_mix64_implementations_agree_with_reference():
    rng = np.random.default_rng(1)
    keys = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64),
                           np.array([0, 1, -1, 2**63 - 1, -(2**63)], np.int64)])

    def ref(k: int) -> int:  # MurmurHash3 fmix64 on Python ints
        x = k & (2**64 - 1)
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & (2**64 - 1)
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & (2**64 - 1)
        return x ^ (x >> 33)

    expected = np.array([ref(int(k)) for k in keys], dtype=np.uint64)
    assert np.array_equal(mix64_numpy(keys), expected)
    assert np.array_equal(mix64_torch(torch.from_numpy(keys)).numpy().view(np.uint64), expected)
    assert np.array_equal(np.array([_mix_jit(k) for k in keys], np.uint64), expected)


def test_shards_agree_and_are_balanced():
    keys = np.arange(-30_000, 30_000, dtype=np.int64) * 7919
    for world in (1, 2, 3, 5):
        a = shard_of_numpy(keys, world)
        assert np.array_equal(a, shard_of_torch(torch.from_numpy(keys), world).numpy())
        counts = np.bincount(a, minlength=world)
        assert counts.min() > 0.9 * len(keys) / world


def test_initializers_are_pure_functions_of_seed_and_key():
    keys = torch.arange(2000, dtype=torch.int64) * 104729 - 10**9
    for init in (UniformInitializer(-0.1, 0.3), NormalInitializer(1.0, 0.5)):
        a = initial_vectors(init, keys, 16, 7, torch.float32)
        perm = torch.randperm(keys.numel())
        b = initial_vectors(init, keys[perm], 16, 7, torch.float32)
        assert torch.equal(a[perm], b)
        assert not torch.equal(a, initial_vectors(init, keys, 16, 8, torch.float32))
        # Columns are not copies of each other.
        assert (a[:, 0] - a[:, 1]).abs().mean() > 0.01
    u = initial_vectors(UniformInitializer(-0.1, 0.3), keys, 16, 0, torch.float64)
    assert u.min() > -0.1 and u.max() < 0.3 and abs(u.mean().item() - 0.1) < 0.005
    n = initial_vectors(NormalInitializer(1.0, 0.5), keys, 16, 0, torch.float64)
    assert abs(n.mean().item() - 1.0) < 0.01 and abs(n.std().item() - 0.5) < 0.01
    z = initial_vectors(get_initializer("zeros"), keys, 4, 0, torch.float32)
    assert torch.all(z == 0)


def test_initializer_configs_round_trip():
    for init in (UniformInitializer(-1, 2), NormalInitializer(0, 3), ConstantInitializer(0.5)):
        assert get_initializer(initializer_config(init)) == init
    assert initializer_config(lambda k, d, s: None)["name"] == "custom"
