"""HashEmbeddingBag forward/backward against torch.nn.EmbeddingBag."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from histboost.embedding import CSRValidationError, HashEmbeddingBag, csr_from_lists

from .conftest import Reference, random_batch

DIM = 5


def _loss_grad(out: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out.shape, generator=g)


def _check_against_reference(combiner, offsets, keys, slots, init=None):
    m = HashEmbeddingBag(DIM, combiner, capacity=4, initializer=init)
    out = m(offsets, keys, slots)
    ref = Reference(keys, DIM, combiner, init)
    expected = ref(offsets, keys, slots)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-7)

    G = _loss_grad(out, 1)
    (out * G).sum().backward()
    (expected * G).sum().backward()
    grad = m.sparse_grad
    # Distinct rows, each once, and exactly the rows the batch touched.
    assert torch.equal(grad.rows, torch.unique(grad.rows))
    got_keys = m.keys()[grad.rows]
    touched = torch.unique(keys)
    assert torch.equal(torch.sort(got_keys).values, touched)
    ref_grad = ref.bag.weight.grad[ref.index(got_keys)]
    torch.testing.assert_close(grad.values, ref_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("combiner", ["sum", "mean"])
@pytest.mark.parametrize("seed", range(4))
def test_random_batches_match_embedding_bag(combiner, seed):
    rng = np.random.default_rng(seed)
    offsets, keys = random_batch(rng, batch=int(rng.integers(1, 12)), slots=3)
    _check_against_reference(combiner, offsets, keys, 3, init="normal")


@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_empty_slots_and_repeated_keys(combiner):
    b = csr_from_lists([
        [[7, 7, 7], None, [1]],
        [[], [7, 1, 7], 3],
        [None, None, None],
    ])
    _check_against_reference(combiner, torch.from_numpy(b.row_offsets),
                             torch.from_numpy(b.keys), 3)


def test_output_layout_and_empty_bags_are_zero():
    b = csr_from_lists([[[1, 2], None], [None, [3]]])
    m = HashEmbeddingBag(3, capacity=8)
    out = m(b)
    assert out.shape == (2, 2, 3) and out.dtype == torch.float32
    assert torch.all(out[0, 1] == 0) and torch.all(out[1, 0] == 0)
    torch.testing.assert_close(out[0, 0], m.embeddings(torch.tensor([1, 2])).sum(0))


def test_batch_without_keys():
    m = HashEmbeddingBag(3, capacity=8)
    out = m(torch.zeros(5, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 2)
    assert out.shape == (2, 2, 3) and torch.all(out == 0)
    out.sum().backward()
    assert m.sparse_grad.rows.numel() == 0


def test_eval_mode_never_inserts_and_unknown_keys_are_zero():
    m = HashEmbeddingBag(4, "mean", capacity=8)
    m(torch.tensor([0, 2]), torch.tensor([10, 11]), 1)
    m.eval()
    before = m.num_embeddings
    out = m(torch.tensor([0, 2, 3]), torch.tensor([10, 99, 98]), 1)
    assert m.num_embeddings == before
    # The unknown key counts in the mean as a zero vector.
    torch.testing.assert_close(out[0, 0], m.embeddings(torch.tensor([10]))[0] / 2)
    assert torch.all(out[1, 0] == 0)
    out.sum().backward()  # gradients still flow to the known rows
    assert m.keys()[m.sparse_grad.rows].tolist() == [10]
    m.train()
    m(torch.tensor([0, 1]), torch.tensor([99]), 1)
    assert m.num_embeddings == before + 1


def test_initial_vectors_do_not_depend_on_insertion_order_or_growth():
    keys = torch.arange(-500, 500, 7, dtype=torch.int64) * 1_000_003
    a = HashEmbeddingBag(6, capacity=2, seed=3)
    b = HashEmbeddingBag(6, capacity=1024, seed=3)
    for chunk in torch.split(keys, 9):
        a(torch.tensor([0, chunk.numel()]), chunk, 1)
    b(torch.tensor([0, keys.numel()]), keys.flip(0), 1)
    assert a.num_embeddings == b.num_embeddings == keys.numel()
    assert a.row_capacity >= keys.numel()
    assert torch.equal(a.embeddings(keys), b.embeddings(keys))
    c = HashEmbeddingBag(6, capacity=2, seed=4)
    c(torch.tensor([0, keys.numel()]), keys, 1)
    assert not torch.equal(a.embeddings(keys), c.embeddings(keys))


def test_bfloat16_storage_close_to_float32():
    rng = np.random.default_rng(0)
    offsets, keys = random_batch(rng, 8, 4)
    f32 = HashEmbeddingBag(8, capacity=16)
    bf16 = HashEmbeddingBag(8, capacity=16, dtype=torch.bfloat16)
    a, b = f32(offsets, keys, 4), bf16(offsets, keys, 4)
    assert b.dtype == torch.float32 and bf16.weight.dtype == torch.bfloat16
    torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-3)


def test_gradients_accumulate_over_two_backwards():
    rng = np.random.default_rng(5)
    o1, k1 = random_batch(rng, 4, 2)
    o2, k2 = random_batch(rng, 4, 2)
    m = HashEmbeddingBag(3, capacity=8)
    (m(o1, k1, 2) ** 2).sum().backward()
    (m(o2, k2, 2) ** 2).sum().backward()
    acc = m.sparse_grad
    dense = torch.zeros(m.num_embeddings, 3)
    for o, k in ((o1, k1), (o2, k2)):
        m.zero_grad()
        (m(o, k, 2) ** 2).sum().backward()
        dense[m.sparse_grad.rows] += m.sparse_grad.values
    torch.testing.assert_close(acc.values, dense[acc.rows])
    assert torch.all(dense.abs().sum(1)[acc.rows] > 0)


def test_state_dict_round_trip():
    rng = np.random.default_rng(2)
    offsets, keys = random_batch(rng, 6, 3)
    model = torch.nn.Sequential(HashEmbeddingBag(4, capacity=8, initializer="normal"))
    out = model[0](offsets, keys, 3)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    other = torch.nn.Sequential(HashEmbeddingBag(4, capacity=8, seed=99))
    other.load_state_dict(torch.load(buf, weights_only=True))
    other.eval()
    torch.testing.assert_close(other[0](offsets, keys, 3), out.detach())
    assert other[0].num_embeddings == model[0].num_embeddings


def test_input_errors():
    m = HashEmbeddingBag(2, capacity=8)
    with pytest.raises(CSRValidationError, match="non-decreasing"):
        m(torch.tensor([0, 2, 1, 3]), torch.tensor([1, 2, 3]), 1)
    with pytest.raises(CSRValidationError, match="multiple of num_slots"):
        m(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3]), 2)
    with pytest.raises(CSRValidationError, match="reserved"):
        m(torch.tensor([0, 1]), torch.tensor([-(2**63)]), 1)
    with pytest.raises(TypeError, match="integer"):
        m(torch.tensor([0, 1]), torch.tensor([1.5]), 1)
    with pytest.raises(ValueError, match="combiner"):
        HashEmbeddingBag(2, combiner="max")
    with pytest.raises(ValueError, match="CUDA"):
        HashEmbeddingBag(2, backend="cuda")(torch.tensor([0, 1]), torch.tensor([1]), 1)


# -- issue 18: keys that are not int64 ------------------------------------------------------------

@pytest.mark.parametrize("keys,exc,match", [
    (np.array([True, False]), TypeError, "keys must be integers, got booleans"),
    (torch.tensor([True, False]), TypeError, "torch.bool"),
    (np.array([2**64 - 1, 1], np.uint64), ValueError, "18446744073709551615, outside int64"),
    (np.array([2**63, 1], np.uint64), ValueError, "9223372036854775808, outside int64"),
    (torch.tensor([2**64 - 1, 1], dtype=torch.uint64), ValueError, "outside int64"),
    ([2**63, 1], ValueError, "outside int64"),
    ([1.5, 1], TypeError, "keys must be integers, got 1.5"),
])
def test_keys_that_are_not_int64_are_refused(keys, exc, match):
    m = HashEmbeddingBag(2, capacity=8)
    with pytest.raises(exc, match=match):
        m(np.array([0, 1, 2]), keys, 1)
    with pytest.raises(exc, match=match):
        m.embeddings(keys)
    assert m.num_embeddings == 0  # nothing was inserted


def test_unsigned_keys_within_int64_are_the_same_keys():
    m = HashEmbeddingBag(2, capacity=8)
    a = m(np.array([0, 1, 2]), np.array([2**63 - 1, 5], np.uint64), 1)
    b = m(np.array([0, 1, 2]), torch.tensor([2**63 - 1, 5]), 1)
    assert torch.equal(a, b) and m.num_embeddings == 2
    assert sorted(m.keys().tolist()) == [5, 2**63 - 1]
