"""Each sparse optimiser against torch.optim applied to every row as its own parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from histboost.embedding import (
    HashEmbeddingBag,
    SparseAdagrad,
    SparseAdam,
    SparseSGD,
)

from .conftest import Reference, random_batch

DIM = 4
CASES = {
    "sgd": (lambda m: SparseSGD(m, lr=0.3),
            lambda p: torch.optim.SGD(p, lr=0.3)),
    "sgd_wd": (lambda m: SparseSGD(m, lr=0.3, weight_decay=0.1),
               lambda p: torch.optim.SGD(p, lr=0.3, weight_decay=0.1)),
    "momentum": (lambda m: SparseSGD(m, lr=0.2, momentum=0.9),
                 lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.9)),
    "nesterov": (lambda m: SparseSGD(m, lr=0.2, momentum=0.8, nesterov=True),
                 lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.8, nesterov=True)),
    "adagrad": (lambda m: SparseAdagrad(m, lr=0.5, initial_accumulator_value=0.1),
                lambda p: torch.optim.Adagrad(p, lr=0.5, initial_accumulator_value=0.1)),
    "adam": (lambda m: SparseAdam(m, lr=0.05, betas=(0.8, 0.95)),
             lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.95))),
    "adam_wd": (lambda m: SparseAdam(m, lr=0.05, weight_decay=0.2),
                lambda p: torch.optim.Adam(p, lr=0.05, weight_decay=0.2)),
}


def _batches(seed: int, steps: int):
    rng = np.random.default_rng(seed)
    # A small vocabulary over several steps: rows are touched on some steps and not others.
    return [random_batch(rng, batch=3, slots=2, vocab=12, p_empty=0.3) for _ in range(steps)]


@pytest.mark.parametrize("combiner", ["sum", "mean"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_optimizer_matches_per_row_torch_optimizer(case, combiner):
    make_sparse, make_dense = CASES[case]
    batches = _batches(seed=len(case), steps=6)
    all_keys = torch.cat([k for _, k in batches])
    ref = Reference(all_keys, DIM, combiner, init="normal")
    # One torch parameter and optimiser per key: it steps only when its row is touched.
    rows = [torch.nn.Parameter(w.clone()) for w in ref.bag.weight.detach()]
    opts = [make_dense([p]) for p in rows]

    m = HashEmbeddingBag(DIM, combiner, capacity=4, initializer="normal")
    opt = make_sparse(m)
    for step, (offsets, keys) in enumerate(batches):
        G = torch.randn(offsets.numel() - 1, DIM, generator=torch.Generator().manual_seed(step))
        opt.zero_grad()
        out = m(offsets, keys, 2)
        (out.view(-1, DIM) * G).sum().backward()
        opt.step()

        ref.bag.weight.grad = None
        with torch.no_grad():
            ref.bag.weight.copy_(torch.stack([p.detach() for p in rows]))
        (ref(offsets, keys, 2).view(-1, DIM) * G).sum().backward()
        for i in torch.unique(ref.index(keys)).tolist():
            rows[i].grad = ref.bag.weight.grad[i].clone()
            opts[i].step()

    expected = torch.stack([p.detach() for p in rows])
    got = m.embeddings(ref.vocab)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    # The test must be able to fail: something moved away from the initial vectors.
    init = Reference(all_keys, DIM, combiner, init="normal").bag.weight.detach()
    assert (got - init).abs().max() > 1e-3


def test_untouched_rows_and_state_stay_unchanged():
    m = HashEmbeddingBag(3, capacity=8)
    opt = SparseAdam(m, lr=0.1)
    m(torch.tensor([0, 2]), torch.tensor([1, 2]), 1).sum().backward()
    opt.step()
    before = m.weight[: m.num_embeddings].clone()
    state = m.state_tensor("exp_avg", (3,), torch.float32).clone()
    opt.zero_grad()
    m(torch.tensor([0, 1]), torch.tensor([1]), 1).sum().backward()
    opt.step()
    row2 = int(m.table.lookup(torch.tensor([2]))[0])
    assert torch.equal(m.weight[row2], before[row2])
    assert torch.equal(m.state_tensor("exp_avg", (3,), torch.float32)[row2], state[row2])
    assert int(m.state_tensor("step", (), torch.int32)[row2]) == 1


def test_optimizer_finds_tables_in_a_model_and_bf16_trains():
    model = torch.nn.ModuleDict({
        "a": HashEmbeddingBag(2, capacity=8, dtype=torch.bfloat16),
        "b": HashEmbeddingBag(2, capacity=8),
        "lin": torch.nn.Linear(2, 1),
    })
    opt = SparseAdagrad(model, lr=0.5)
    assert len(opt.tables) == 2
    ro, k = torch.tensor([0, 1]), torch.tensor([5])
    for _ in range(3):
        opt.zero_grad()
        (model["a"](ro, k, 1).sum() + model["b"](ro, k, 1).sum()).backward()
        opt.step()
    # Both descend the same loss from the same init; bf16 rounds each update.
    torch.testing.assert_close(model["a"].embeddings(k), model["b"].embeddings(k),
                               rtol=2e-2, atol=2e-2)
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.5


def test_optimizer_argument_errors():
    m = HashEmbeddingBag(2, capacity=8)
    with pytest.raises(ValueError, match="nesterov"):
        SparseSGD(m, nesterov=True)
    with pytest.raises(ValueError, match="lr"):
        SparseAdam(m, lr=-1)
    with pytest.raises(ValueError, match="no HashEmbeddingBag"):
        SparseAdam(torch.nn.Linear(2, 2))
