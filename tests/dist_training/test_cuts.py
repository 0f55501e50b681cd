"""Global cuts: `global_bin_mapper` on 1-4 thread ranks holding uneven blocks of the rows
gives, on every rank, exactly the cuts `compute_bin_mapper` computes on all rows in one
process (sampled or not, weighted, with NaN, constant, all-NaN and few-valued features)."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective import SingleCommunicator
from histboost.collective.testing import run_threads
from histboost.data.binning import compute_bin_mapper
from histboost.distributed.cuts import global_bin_mapper

N = 3000


def _data(dtype=np.float64):
    rng = np.random.default_rng(21)
    X = np.empty((N, 7))
    X[:, 0] = rng.normal(size=N)
    X[:, 1] = np.round(rng.standard_t(3, size=N), 1)  # heavy ties
    X[:, 2] = 7.5  # constant
    X[:, 3] = np.nan  # all missing
    X[:, 4] = rng.integers(0, 4, N)  # few distinct values
    X[:, 5] = rng.exponential(size=N) * 1e3
    X[:, 6] = rng.normal(size=N)
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.exponential(size=N)
    w[rng.random(N) < 0.15] = 0.0
    w[:40] = 0.0
    X[:40, 0] = 1e9  # outliers of weight 0 must not move the cuts
    return X.astype(dtype), w


def _edges(world: int, n: int = N) -> np.ndarray:
    """Uneven contiguous blocks in rank order, one of a single row when there are 3+ ranks."""
    sizes = np.arange(1, world + 1, dtype=float) ** 2
    edges = np.round(np.cumsum(np.r_[0, sizes]) / sizes.sum() * n).astype(int)
    if world >= 3:
        edges[1] = 1
    return edges


def _assert_same(got, want):
    for rank, m in enumerate(got):
        assert np.array_equal(m.cut_ptr, want.cut_ptr), f"rank {rank}"
        assert np.array_equal(m.cut_values, want.cut_values), f"rank {rank}"
        assert m.max_bin == want.max_bin


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sample_rows", [700, 10_000])  # sampled, all rows
def test_global_cuts_equal_one_process(world, weighted, sample_rows):
    X, w = _data()
    weight = w if weighted else None
    max_bin = 16
    want = compute_bin_mapper(X, weight, max_bin, sample_rows=sample_rows, seed=3)
    assert want.n_value_bins[0] == max_bin - 1  # the quantile rule is exercised
    assert want.n_value_bins[2] == want.n_value_bins[3] == 1 and want.n_value_bins[4] == 4
    e = _edges(world)

    def body(comm):
        b = slice(e[comm.rank], e[comm.rank + 1])
        return global_bin_mapper(comm, X[b], None if weight is None else weight[b], max_bin,
                                 sample_rows=sample_rows, seed=3, n_threads=1)

    _assert_same(run_threads(world, body), want)


def test_more_ranks_than_features_and_mixed_inputs():
    """4 ranks, 2 features (two ranks own none); float32 on some ranks and weights on some
    only: the cuts of the float64 concatenation with weight 1 where none was given."""
    X, w = _data()
    X = X[:, [0, 5]]
    e = _edges(4)
    w_one = w.copy()
    w_one[e[1]:e[2]] = 1.0  # rank 1 passes no weights
    X_mixed = X.copy()  # ranks 1 and 3 pass float32
    for r in (1, 3):
        X_mixed[e[r]:e[r + 1]] = X[e[r]:e[r + 1]].astype(np.float32)
    want = compute_bin_mapper(X_mixed, w_one, 32, sample_rows=900)

    def body(comm):
        b = slice(e[comm.rank], e[comm.rank + 1])
        Xr = X[b].astype(np.float32) if comm.rank % 2 else X[b]
        return global_bin_mapper(comm, Xr, None if comm.rank == 1 else w[b], 32,
                                 sample_rows=900)

    _assert_same(run_threads(4, body), want)


def test_single_communicator_is_compute_bin_mapper():
    X, w = _data(np.float32)
    want = compute_bin_mapper(X, w, 64, sample_rows=1000, seed=9)
    _assert_same([global_bin_mapper(SingleCommunicator(), X, w, 64, sample_rows=1000,
                                    seed=9)], want)


@pytest.mark.parametrize("field,match", [("max_bin", "max_bin"), ("seed", "seeds"),
                                         ("features", "feature counts")])
def test_settings_that_differ_raise_on_every_rank(field, match):
    X, _ = _data()

    def body(comm):
        kw = {"max_bin": 16, "seed": 0}
        Xr = X[comm.rank::2]
        if comm.rank == 1:
            if field == "features":
                Xr = Xr[:, :5]
            else:
                kw[field] += 1
        try:
            global_bin_mapper(comm, Xr, None, kw["max_bin"], seed=kw["seed"])
        except ValueError as err:
            return str(err)
        return None

    errors = run_threads(2, body)
    assert all(e is not None and match in e for e in errors), errors


def test_dataset_construct_keeps_global_cuts_per_comm():
    """construct(comm=...) computes the global cuts once per communicator; the rows are
    binned with them."""
    X, w = _data()
    e = _edges(2)
    want = compute_bin_mapper(X, w, 256)

    def body(comm):
        b = slice(e[comm.rank], e[comm.rank + 1])
        d = hb.Dataset(X[b], weight=w[b])
        d.construct(comm=comm)
        first = d.bin_mapper
        d.construct(comm=comm)  # kept: no second exchange
        d.construct()  # without comm too
        assert d.bin_mapper is first
        np.testing.assert_array_equal(d.bins, want.transform(X[b]))
        return first

    _assert_same(run_threads(2, body), want)


@pytest.mark.parametrize("weighted", [False, True])
def test_row_ids_give_the_cuts_of_one_process_in_global_order(weighted):
    """Rows dealt to ranks in any order, with their global indices: the cuts of one process
    on all rows (sampled by the hash of the global index, ordered by it)."""
    rng = np.random.default_rng(8)
    n = 3000
    X = np.round(rng.normal(size=(n, 4)) * 50) / 7
    X[rng.random(X.shape) < 0.05] = np.nan
    w = rng.uniform(0.1, 3.0, n) if weighted else None
    want = compute_bin_mapper(X, w, 32, sample_rows=700)
    shares = np.array_split(rng.permutation(n), 3)

    def body(comm):
        rows = shares[comm.rank]
        return global_bin_mapper(comm, X[rows], None if w is None else w[rows], 32,
                                 sample_rows=700, row_ids=rows)

    for got in run_threads(3, body):
        np.testing.assert_array_equal(got.cut_ptr, want.cut_ptr)
        np.testing.assert_array_equal(got.cut_values, want.cut_values)


def test_ranks_on_different_gpus_describe_the_same_job():
    """One process per GPU passes device="cuda:<rank>": the job check compares the kind of
    device only (a CPU rank beside a GPU rank still differs)."""
    from histboost.distributed.training import job_description
    from histboost.params import parse_params

    def job(device):
        return job_description(parse_params({"device": device}), 3, 1, 5, [], None, False, None)

    assert job("cuda:0") == job("cuda:1") == job("cuda")
    assert job("cpu") != job("cuda:1")
