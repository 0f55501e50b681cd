"""Shared helpers: random CSR batches and an independent torch.nn.EmbeddingBag reference."""

from __future__ import annotations

import numpy as np
import torch

from histboost.embedding.initializers import get_initializer, initial_vectors


def random_batch(rng: np.random.Generator, batch: int, slots: int, max_keys: int = 3,
                 vocab: int = 50, p_empty: float = 0.2):
    """(row_offsets, keys) with 0..max_keys keys per bag drawn from a small vocabulary of
    large, signed ids, so repeats within and across bags are frequent."""
    lengths = rng.integers(1, max_keys + 1, size=batch * slots)
    lengths[rng.random(batch * slots) < p_empty] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, vocab, size=int(offsets[-1]))
    keys = (ids * 0x9E3779B1 - 2**40).astype(np.int64)
    return torch.from_numpy(offsets), torch.from_numpy(keys)


class Reference:
    """torch.nn.EmbeddingBag over the sorted distinct keys, weights = the initial vectors."""

    def __init__(self, keys: torch.Tensor, dim: int, mode: str, init=None, seed: int = 0):
        self.vocab = torch.unique(keys)
        w = initial_vectors(get_initializer(init), self.vocab, dim, seed, torch.float32)
        self.bag = torch.nn.EmbeddingBag(len(self.vocab), dim, mode=mode,
                                         include_last_offset=True)
        with torch.no_grad():
            self.bag.weight.copy_(w)

    def index(self, keys: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.vocab, keys)

    def __call__(self, offsets: torch.Tensor, keys: torch.Tensor, slots: int) -> torch.Tensor:
        out = self.bag(self.index(keys), offsets)
        return out.view(-1, slots, self.bag.embedding_dim)
