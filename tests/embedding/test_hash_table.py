"""HashTable against a Python dict: random inserts and lookups, growth, collisions, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from histboost.embedding import CapacityError, HashTable, ReservedKeyError
from histboost.embedding._hashing import mix64_numpy

INT64 = st.integers(-(2**63) + 1, 2**63 - 1)


def _apply(table: HashTable, ref: dict[int, int], batch: list[int]) -> None:
    rows = table.get_or_insert(torch.tensor(batch, dtype=torch.int64)).tolist()
    for k, r in zip(batch, rows, strict=True):
        if k not in ref:
            ref[k] = len(ref)  # CPU rows are handed out in order of first appearance
        assert r == ref[k]
    assert table.size == len(ref)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(st.one_of(INT64, st.integers(-20, 20)), max_size=40), max_size=8),
    probes=st.lists(st.one_of(INT64, st.integers(-20, 20)), max_size=30),
    capacity=st.integers(1, 16),
    load_factor=st.sampled_from([0.3, 0.5, 0.9]),
)
def test_matches_dict(batches, probes, capacity, load_factor):
    table = HashTable(capacity=capacity, load_factor=load_factor)
    ref: dict[int, int] = {}
    for batch in batches:
        _apply(table, ref, batch)
    assert table.size <= table.capacity < table.n_slots
    got = table.lookup(torch.tensor(probes, dtype=torch.int64)).tolist()
    assert got == [ref.get(k, -1) for k in probes]
    assert table.keys().tolist() == list(ref)


def test_colliding_keys_and_growth():
    # Keys that all hash to the same slot of a 64-slot table: long probe chains, and they
    # must spread out correctly when the table grows past them.
    cands = np.arange(200_000, dtype=np.int64)
    same = cands[(mix64_numpy(cands) & np.uint64(63)) == 5][:30]
    assert len(same) == 30
    table = HashTable(capacity=32, load_factor=0.5)
    assert table.n_slots == 64
    ref: dict[int, int] = {}
    _apply(table, ref, same[:20].tolist())
    _apply(table, ref, same.tolist() + [1, 2, 3] * 5)
    assert table.n_slots > 64
    got = table.lookup(torch.from_numpy(same)).tolist()
    assert got == [ref[int(k)] for k in same]


def test_many_keys_growth_keeps_every_key():
    rng = np.random.default_rng(0)
    keys = rng.integers(-(2**62), 2**62, size=50_000)
    table = HashTable(capacity=8)
    rows = torch.cat([table.get_or_insert(torch.from_numpy(c)) for c in np.array_split(keys, 7)])
    uniq, first = np.unique(keys, return_index=True)
    assert table.size == len(uniq)
    assert torch.equal(table.lookup(torch.from_numpy(keys)), rows)
    # Rows are dense 0..size-1 and row_keys inverts the map.
    assert sorted(rows[first].tolist()) == list(range(len(uniq)))
    assert torch.equal(table.keys()[rows], torch.from_numpy(keys))


def test_capacity_error_names_the_setting_and_inserts_nothing():
    table = HashTable(capacity=4, max_capacity=5)
    table.get_or_insert(torch.tensor([1, 2, 3, 1]))
    with pytest.raises(CapacityError, match="max_capacity"):
        table.get_or_insert(torch.tensor([4, 5, 6]))
    assert table.size == 3 and table.lookup(torch.tensor([4])).item() == -1
    table.get_or_insert(torch.tensor([4, 5, 1, 2]))  # exactly fits
    assert table.size == 5


def test_reserved_key_and_argument_errors():
    table = HashTable(capacity=4)
    with pytest.raises(ReservedKeyError):
        table.get_or_insert(torch.tensor([-(2**63)]))
    assert table.lookup(torch.tensor([-(2**63)])).item() == -1
    with pytest.raises(TypeError):
        table.get_or_insert(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="load_factor"):
        HashTable(load_factor=0.95)
    with pytest.raises(ValueError, match="distinct"):
        table.load_keys(torch.tensor([1, 1]))


def test_load_keys_is_positional():
    table = HashTable(capacity=2)
    keys = torch.tensor([40, -7, 3, 2**40])
    table.load_keys(keys)
    assert table.lookup(keys).tolist() == [0, 1, 2, 3]
    assert table.get_or_insert(torch.tensor([5, -7])).tolist() == [4, 1]


def test_keys_that_are_not_int64_are_refused():
    table = HashTable(capacity=4)
    with pytest.raises(TypeError, match="torch.bool"):
        table.get_or_insert(torch.tensor([True]))
    with pytest.raises(ValueError, match="outside int64"):
        table.get_or_insert(torch.tensor([2**64 - 1], dtype=torch.uint64))
    with pytest.raises(ValueError, match="outside int64"):
        table.lookup(torch.tensor([2**63], dtype=torch.uint64))
    assert table.size == 0
    rows = table.get_or_insert(torch.tensor([2**63 - 1, 3], dtype=torch.uint64))
    assert rows.tolist() == [0, 1] and table.keys().tolist() == [2**63 - 1, 3]
